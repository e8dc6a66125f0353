"""A new method or model is one class and one register() call: defined and
registered here, in this test module alone, each runs through lpviz.fit and
the CLI (whose choices read the registries) without touching another file.

The toy method fits an all-zero matrix (it allocates nothing), so its chain
never sees the data. The toy model gives every cell its own rate with a
gamma prior, so its conditional is known exactly and the chain is checked
against it.
"""

import json

import numpy as np
import pytest
from scipy import stats
from scipy.special import gammaln

import lpviz
from lpviz import methods, models
from lpviz.cli import build_parser, main
from lpviz.methods.fixed import FixedCountsMethod
from lpviz.models import Model
from lpviz.release import Release, Truth

P_ACCEPT = 1e-3


# ---------------------------------------------------------------------------
# A toy method: no counts at all
# ---------------------------------------------------------------------------


class ZeroCounts(FixedCountsMethod):
    """Allocates nothing: the factors are drawn given an all-zero matrix."""

    name = "zeros"
    label = "zeros (ignores the data)"
    color = "#9467bd"
    description = "Fits an all-zero matrix: what the model does with no events at all."

    def counts(self, counts):
        return np.zeros(counts.shape, dtype=np.int64)


# ---------------------------------------------------------------------------
# A toy model: one gamma-distributed rate per cell, in NumPy
# ---------------------------------------------------------------------------


def _cells(lists, shape):
    """Boolean matrix of the cells in (indptr, indices) row lists."""
    indptr, indices = lists[0], lists[1]
    mask = np.zeros(shape, dtype=bool)
    mask[np.repeat(np.arange(shape[0]), np.diff(indptr)), indices] = True
    return mask


class CellRates(Model):
    """``y_dv ~ Pois(rate_dv)``, ``rate_dv ~ Gamma(a0, b0)``: the saturated model."""

    name = "cell-rates"
    label = "one rate per cell (saturated)"
    component_name = "cell"
    factor_names = ("rate",)
    kinds = ("documents", "network")

    def state_bytes(self, shape):
        return 16 * shape[0] * shape[1]

    def init_state(self, shape, mean_count, rng):
        return (rng.gamma(1.0, max(mean_count, 1e-2), shape),)

    def factors(self, state):
        return {"rate": state[0].copy()}

    def set_factors(self, state, factors):
        state[0][...] = factors["rate"]

    def rates(self, factors):
        return np.array(factors["rate"], dtype=float)

    def low_rank(self, factors):
        rate = np.asarray(factors["rate"], dtype=float)
        return rate, np.eye(rate.shape[1])

    def poisson_allocate(self, state, rows, stats, work, iteration):
        return self.poisson_allocate_by_rates(state, rows, stats, work, iteration)

    def rate_rows(self, state, rows):
        return state[0][rows].copy()

    def new_stats(self, state, work):
        return (np.zeros(state[0].shape, dtype=np.int64),)

    def allocate(self, state, counts, stats, work, iteration):
        indptr, indices, values = counts
        rows = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
        np.add.at(stats[0], (rows, indices), values)

    def update(self, state, stats, work, iteration):
        rate = state[0]
        observed = ~_cells(work.missing_by_row, rate.shape)
        rng = np.random.default_rng([work.chain_seed, iteration])
        rate[...] = rng.gamma(self.a0 + stats[0], 1.0 / (self.b0 + observed))

    def log_prior(self, state):
        return float(stats.gamma.logpdf(state[0], self.a0, scale=1.0 / self.b0).sum())

    def count_loglik(self, state, counts, work):
        rate = state[0]
        indptr, indices, values = counts
        rows = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
        observed = ~_cells(work.missing_by_row, rate.shape)
        return float((values * np.log(rate[rows, indices]) - gammaln(values + 1.0)).sum() - rate[observed].sum())


# ---------------------------------------------------------------------------
# Registering them here, and only for the tests that use them
# ---------------------------------------------------------------------------


def _registered(registry, register, cls):
    before = dict(registry)
    register(cls)
    assert list(registry)[-1] == cls.name
    yield cls
    registry.clear()
    registry.update(before)


@pytest.fixture
def toy_method():
    yield from _registered(methods.METHODS, methods.register, ZeroCounts)
    assert "zeros" not in methods.METHODS


@pytest.fixture
def toy_model():
    yield from _registered(models.MODELS, models.register, CellRates)
    assert "cell-rates" not in models.MODELS


def _choices(parser, command, option):
    """The choices of ``option`` of subcommand ``command``, as the CLI offers them."""
    subcommands = next(action for action in parser._actions if action.dest == "command")
    return next(action for action in subcommands.choices[command]._actions if option in action.option_strings).choices


def test_the_toys_are_not_registered_unless_a_test_asks():
    assert "zeros" not in methods.METHODS and "cell-rates" not in models.MODELS
    assert "zeros" not in _choices(build_parser(), "fit", "--method")


# ---------------------------------------------------------------------------
# The toy method
# ---------------------------------------------------------------------------


def test_a_registered_method_runs_through_fit(toy_method):
    rng = np.random.default_rng(0)
    Y_obs = rng.poisson(3.0, (8, 6)) - rng.poisson(1.0, (8, 6))
    release = Release(Y_obs=Y_obs, alpha=0.5)
    posterior = lpviz.fit(release, method="zeros", n_components=2, n_iter=20, thin=5, random_state=1)
    assert (posterior.method, posterior.method_label) == ("zeros", "zeros (ignores the data)")
    assert posterior.n_saved == 3 and np.all(np.isfinite(posterior.mu_hat))
    # the data never reach it: another release of the same shape gives the same chain
    other = Release(Y_obs=Y_obs[::-1] * 5, alpha=0.9)
    again = lpviz.fit(other, method="zeros", n_components=2, n_iter=20, thin=5, random_state=1)
    np.testing.assert_array_equal(again.mu_hat, posterior.mu_hat)
    # its log joint is the Poisson likelihood of zeros (minus the rates) plus the gamma priors
    chain = lpviz.Chain(release, method="zeros", n_components=2, random_state=2)
    chain.step(4)
    priors = sum(stats.gamma.logpdf(f, chain.a0, scale=1 / chain.b0).sum() for f in chain.factors.values())
    assert chain.log_joint == pytest.approx(-chain.mu.sum() + priors, rel=1e-10)
    # with no events, the rates shrink far below the data's
    assert posterior.mu_hat.mean() < 0.1 * np.maximum(Y_obs, 0).mean()


def test_a_registered_method_is_a_cli_choice_and_runs_there(toy_method, tmp_path, capsys):
    assert "zeros" in _choices(build_parser(), "fit", "--method")
    out = tmp_path / "run"
    assert (
        main(
            [
                "fit",
                "--data",
                "synthetic-topics",
                "--method",
                "all",
                "--iterations",
                "12",
                "--thin",
                "2",
                "--seed",
                "0",
                "--output",
                str(out),
                "--json",
            ]
        )
        == 0
    )
    summary = json.loads(capsys.readouterr().out)
    assert list(summary["methods"]) == ["private", "naive", "nonprivate", "zeros"]
    assert summary["labels"]["zeros"] == "zeros (ignores the data)"
    assert summary["methods"]["zeros"]["mae"] > summary["methods"]["nonprivate"]["mae"]
    with np.load(out / "zeros.npz") as saved:
        assert str(saved["method"]) == "zeros" and saved["mu_hat"].shape == (90, 15)


# ---------------------------------------------------------------------------
# The toy model
# ---------------------------------------------------------------------------


def test_a_registered_model_runs_through_fit_with_its_exact_conditional(toy_model):
    Y = np.array([[0, 3, 7], [1, 0, 12]])
    heldout = np.zeros(Y.shape, dtype=bool)
    heldout[1, 2] = True
    release = Release(Y_obs=Y, alpha=0.3, heldout=heldout)
    posterior = lpviz.fit(
        release,
        model="cell-rates",
        method="nonprivate",
        truth=Truth(Y),
        n_components=1,
        a0=0.5,
        b0=2.0,
        n_iter=3000,
        burn_in=0,
        thin=1,
        random_state=3,
    )
    assert (posterior.model, posterior.shape, posterior.n_saved) == ("cell-rates", (2, 3), 3000)
    draws = np.array([sample["rate"] for sample in posterior.samples])
    # each draw is exact: rate_dv | y ~ Gamma(a0 + y, b0 + 1) observed, the prior Gamma(a0, b0) held out
    for (d, v), shape, rate, wrong_rate in [((0, 2), 7.5, 3.0, 2.0), ((0, 0), 0.5, 3.0, 2.0), ((1, 2), 0.5, 2.0, 3.0)]:
        assert stats.kstest(draws[:, d, v], stats.gamma(shape, scale=1 / rate).cdf).pvalue > P_ACCEPT
        # power: the conditional of a cell whose held-out status is swapped
        assert stats.kstest(draws[:, d, v], stats.gamma(shape, scale=1 / wrong_rate).cdf).pvalue < P_ACCEPT
    np.testing.assert_allclose(posterior.mu_hat, draws.mean(axis=0))
    scores = lpviz.score(posterior, release, Truth(Y))
    assert scores["heldout_mae"] == pytest.approx(abs(posterior.mu_hat[1, 2] - 12))
    assert scores["npmi"] is None  # no topics in this model


def test_a_registered_model_runs_under_the_private_method_and_the_cli(toy_model, tmp_path, capsys):
    rng = np.random.default_rng(4)
    Y_obs = rng.poisson(4.0, (6, 5)) - rng.poisson(1.0, (6, 5))
    posterior = lpviz.fit(
        Release(Y_obs=Y_obs, alpha=0.4), model="cell-rates", n_components=1, n_iter=30, thin=5, random_state=5
    )
    assert posterior.method == "private" and np.all(posterior.mu_hat > 0)
    assert "cell-rates" in _choices(build_parser(), "fit", "--model")
    assert (
        main(
            [
                "fit",
                "--data",
                "synthetic-topics",
                "--model",
                "cell-rates",
                "--components",
                "1",
                "--method",
                "naive",
                "--iterations",
                "12",
                "--thin",
                "2",
                "--seed",
                "0",
                "--json",
            ]
        )
        == 0
    )
    summary = json.loads(capsys.readouterr().out)
    assert summary["model"] == "cell-rates" and summary["methods"]["naive"]["mae"] > 0


def test_a_method_and_a_model_registered_together(toy_method, toy_model):
    release = Release(Y_obs=np.full((3, 3), 5), alpha=0.5)
    posterior = lpviz.fit(
        release,
        model="cell-rates",
        method="zeros",
        n_components=1,
        a0=1.0,
        b0=1.0,
        n_iter=2000,
        burn_in=0,
        thin=1,
        random_state=6,
    )
    # no counts: every cell's rate is Gamma(a0, b0 + 1)
    draws = np.array([sample["rate"][1, 1] for sample in posterior.samples])
    assert stats.kstest(draws, stats.gamma(1.0, scale=1 / 2.0).cdf).pvalue > P_ACCEPT
    assert stats.kstest(draws, stats.gamma(6.0, scale=1 / 2.0).cdf).pvalue < P_ACCEPT  # the counts' conditional


def test_the_three_registries_check_entries_and_refuse_unknown_names_alike():
    """Models, methods and reproductions share one registry helper: the same checks, each its own words."""
    from lpviz import reproduce

    cases = [
        (models, "lda", "model must be one of 'topics', 'blocks', 'tensor'; got 'lda'", "a Model subclass"),
        (methods, "fancy", "method must be one of 'private', 'naive', 'nonprivate'; got 'fancy'", "a Method subclass"),
        (reproduce, "fig9", r"unknown experiment 'fig9'; choose one of fig1, .* or 'all'", "an Experiment instance"),
    ]
    for registry, unknown, refusal, takes in cases:
        with pytest.raises(ValueError, match=refusal):
            registry.get(unknown)
        with pytest.raises(ValueError, match=refusal.replace(repr(unknown), "\\[\\]")):
            registry.get([])  # not even hashable: still the same refusal
        for entry in (object(), type("Nameless", (), {"name": ""})):
            with pytest.raises(TypeError, match=f"register\\(\\) takes {takes} with a name"):
                registry.register(entry)
    assert models.get("topics") is models.MODELS["topics"] and methods.get("naive") is methods.METHODS["naive"]
    assert reproduce.get("table1") is reproduce.EXPERIMENTS["table1"]
