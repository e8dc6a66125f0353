"""Comparing methods without the truth (issue 54): lpviz.compare on the held-out noised cells."""

from dataclasses import replace

import numpy as np
import pytest

import lpviz
from lpviz.comparison import BASELINE, RANK_SES
from lpviz.datasets import make_blocks
from lpviz.privacy import noised_logpmf
from lpviz.stacking import chain_stacking


class Rates:
    """An estimate made elsewhere: rates alone."""

    def __init__(self, mu_hat):
        self.mu_hat = np.asarray(mu_hat, dtype=float)
        self.shape = self.mu_hat.shape


@pytest.fixture(scope="module")
def data():
    return make_blocks(n_actors=30, n_communities=3, epsilon=3.0, random_state=0)


@pytest.fixture(scope="module")
def release(data):
    return data.release(heldout=np.random.default_rng(0).random(data.Y_obs.shape) < 0.25)


@pytest.fixture(scope="module")
def fits(data, release):
    return {
        method: lpviz.fit(
            release,
            model="blocks",
            method=method,
            n_components=3,
            n_iter=300,
            random_state=1,
            chains=2,
            truth=data.truth(),
        )
        for method in ("private", "naive", "nonprivate")
    }


def _heldout_density(mu, release):
    cells = release.heldout_cells
    alpha = np.broadcast_to(release.alpha_per_row[:, None], cells.shape)[cells]
    return noised_logpmf(release.Y_obs[cells], mu[cells], alpha)


def test_the_table_ranks_every_method_and_the_best_constant_on_the_heldout_noised_cells(fits, release):
    table = lpviz.compare(fits, release)
    assert set(table.index) == {"private", "naive", "nonprivate", BASELINE}
    assert list(table["rank"]) == list(range(4)) and table["elpd"].is_monotonic_decreasing
    assert table["weight"].sum() == pytest.approx(1.0) and (table["weight"] >= 0).all()
    best = table.index[0]
    assert table.loc[best, "elpd_diff"] == 0 and table.loc[best, "dse"] == 0
    # every method's score is its stacked mixture's cross-fitted density on the same cells
    for name, fit in fits.items():
        assert table.loc[name, "elpd"] == pytest.approx(fit.stacking(release).stacked.sum(), rel=1e-12)
    # the trivial reference: one rate, the observed noised cells' mean
    observed = release.observed_cells
    rate = release.Y_obs[observed].sum() / observed.sum()
    expected = _heldout_density(np.full(release.shape, rate), release).sum()
    assert table.loc[BASELINE, "elpd"] == pytest.approx(expected, rel=1e-12)
    assert "standard errors" in table.attrs["rule"] and table.attrs["cells"] == [int(release.heldout_cells.sum())]


def test_a_statement_needs_a_difference_of_several_standard_errors(data, release):
    truth_rates = Rates(data.truth().mu)
    wrong = Rates(np.full(release.shape, 3.0 * data.truth().mu.mean()))
    table = lpviz.compare({"oracle": truth_rates, "wrong": wrong}, release)
    assert table.index[0] == "oracle"
    diff, dse = table.loc["wrong", "elpd_diff"], table.loc["wrong", "dse"]
    stated = any(
        s.startswith("oracle predicts the held-out noised cells better than wrong") for s in table.attrs["statements"]
    )
    assert stated == (diff > RANK_SES * dse) and stated
    # two equal estimates: nothing stated between them
    same = lpviz.compare({"a": truth_rates, "b": Rates(data.truth().mu)}, release)
    assert not [s for s in same.attrs["statements"] if " than b:" in s or " than a:" in s]


def test_a_ranking_must_hold_on_every_noised_copy(data, release):
    truth = data.truth().mu
    good, poor = Rates(truth), Rates(np.full(release.shape, 3.0 * truth.mean()))
    # on the second copy the estimates swap places: no statement survives both
    table = lpviz.compare({"x": [good, poor], "y": [poor, good]}, [release, replace(release)])
    assert table.loc["x", "copies"] == 2
    assert not [s for s in table.attrs["statements"] if "than y" in s or "than x" in s]
    both = lpviz.compare({"x": [good, good], "y": [poor, poor]}, [release, replace(release)])
    assert any(
        "x predicts the held-out noised cells better than y on each of 2 noised copies" in s
        for s in both.attrs["statements"]
    )


def test_with_a_truth_mae_statements_need_every_chain_to_beat_every_chain(fits, release, data):
    table = lpviz.compare(fits, release, data.truth())
    for name, fit in fits.items():
        chains = [lpviz.score(c, release, data.truth(), topics=False, diagnostics=False)["mae"] for c in fit.chains]
        assert table.loc[name, "chain_mae_min"] == pytest.approx(min(chains))
        assert table.loc[name, "chain_mae_max"] == pytest.approx(max(chains))
        assert table.loc[name, "mae"] == pytest.approx(lpviz.score(fit, release, data.truth())["stacked_mae"])
    assert np.isfinite(table["best_constant_mae"]).all()
    for statement in [s for s in table.attrs["statements"] if s.startswith("on MAE")]:
        a, b = (
            statement.split("every chain of ")[1].split(" (")[0],
            statement.split("every chain of ")[2].split(" (")[0],
        )
        assert table.loc[a, "chain_mae_max"] < table.loc[b, "chain_mae_min"]
    # the elpd columns never read the truth
    blind = lpviz.compare(fits, release)
    assert np.array_equal(blind["elpd"].to_numpy(), table["elpd"].to_numpy())


def test_a_single_chain_is_scored_by_its_draws(fits, release):
    chain = fits["private"].chains[0]
    table = lpviz.compare({"chain": chain, "other": fits["naive"].chains[0]}, release)
    assert table.loc["chain", "elpd"] == pytest.approx(chain_stacking([chain], release).pointwise[0].sum())
    assert table.loc["chain", "how"] == "its draws"


def test_a_fit_that_saw_the_scored_cells_is_flagged(data, release):
    seen = lpviz.fit(release.with_heldout(None), model="blocks", n_components=3, n_iter=100, random_state=0)
    table = lpviz.compare({"saw them": seen, "oracle": Rates(data.truth().mu)}, release)
    assert table.loc["saw them", "warning"] and "not out of sample" in table.loc["saw them", "flags"]


def test_bad_input_is_refused_in_words(fits, release, data):
    with pytest.raises(ValueError, match="holds none out"):
        lpviz.compare(fits, release.with_heldout(None))
    with pytest.raises(ValueError, match="one fit per noised copy"):
        lpviz.compare({"a": [fits["private"]]}, [release, release])
    with pytest.raises(TypeError, match="dict"):
        lpviz.compare([fits["private"]], release)
    with pytest.raises(ValueError, match="names the trivial reference"):
        lpviz.compare({BASELINE: fits["private"]}, release)
