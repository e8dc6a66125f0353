"""lpviz.diagnostics: R-hat and ESS (hand-computable cases, ArviZ on known inputs, AR(1) chains),
label alignment across chains, InferenceData export, and ``lpviz fit --chains --save-idata``."""

import json
import math
import warnings

import numpy as np
import pytest

from lpviz import diagnostics
from lpviz.cli import main
from lpviz.engine import Posterior
from lpviz.models.topics import TopicModel


def _arviz():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        import arviz

    return arviz


# ---------------------------------------------------------------------------
# R-hat and ESS
# ---------------------------------------------------------------------------


def test_rhat_matches_the_hand_computed_gelman_rubin_formula():
    # two chains of four draws: means 2.5 and 4.5, within-chain variances 5/3
    draws = np.array([[1.0, 2.0, 3.0, 4.0], [3.0, 4.0, 5.0, 6.0]])
    n = 4
    between = n * ((2.5 - 3.5) ** 2 + (4.5 - 3.5) ** 2) / (2 - 1)  # 8
    within = 5 / 3
    expected = math.sqrt(((n - 1) / n * within + between / n) / within)  # sqrt(1.95)
    assert diagnostics.rhat(draws, method="identity") == pytest.approx(expected, rel=1e-12)
    assert expected == pytest.approx(math.sqrt(1.95))
    # split: four half-chains [1,2], [3,4], [3,4], [5,6]: B = 2/3 * 8, W = 1/2
    split_expected = math.sqrt((0.5 * 0.5 + (16 / 3) / 2) / 0.5)
    assert diagnostics.rhat(draws, method="split") == pytest.approx(split_expected, rel=1e-12)


def test_chains_that_agree_have_rhat_near_one_and_disagreeing_chains_do_not():
    rng = np.random.default_rng(1)
    agree = rng.normal(size=(4, 500))
    assert diagnostics.rhat(agree) < 1.01
    shifted = agree + np.array([0.0, 0.0, 0.0, 1.0])[:, None]  # one chain stuck elsewhere
    assert diagnostics.rhat(shifted) > 1.1


def test_rhat_and_ess_equal_arviz_on_the_same_draws():
    az = _arviz()
    draws = np.random.default_rng(2).normal(size=(3, 200, 2, 2)).cumsum(axis=1)
    dataset = az.convert_to_dataset({"x": draws})
    for method in ("rank", "split", "folded", "identity"):
        np.testing.assert_allclose(
            diagnostics.rhat(draws, method), az.rhat(dataset, method=method)["x"].values, rtol=1e-12
        )
    for method in ("bulk", "tail", "mean"):
        np.testing.assert_allclose(
            diagnostics.ess(draws, method), az.ess(dataset, method=method)["x"].values, rtol=1e-12
        )


def _ar1(rho, n_chains, n_draws, seed):
    rng = np.random.default_rng(seed)
    noise = rng.normal(size=(n_chains, n_draws)) * math.sqrt(1 - rho**2)
    draws = np.empty((n_chains, n_draws))
    draws[:, 0] = rng.normal(size=n_chains)
    for t in range(1, n_draws):
        draws[:, t] = rho * draws[:, t - 1] + noise[:, t]
    return draws


def test_ess_of_independent_draws_is_about_their_number():
    draws = np.random.default_rng(3).normal(size=(4, 1000))
    assert 3400 < diagnostics.ess(draws, "bulk") < 4600
    assert 3400 < diagnostics.ess(draws, "mean") < 4600


def test_ess_of_ar1_chains_matches_theory_and_tells_close_correlations_apart():
    n = 4 * 5000
    theory = {rho: n * (1 - rho) / (1 + rho) for rho in (0.9, 0.8)}  # 1053 and 2222
    estimate = diagnostics.ess(_ar1(0.9, 4, 5000, seed=4), "mean")
    assert abs(estimate - theory[0.9]) < 0.2 * theory[0.9]
    # power: the same estimate is far outside the band of a slightly different correlation
    assert abs(estimate - theory[0.8]) > 0.2 * theory[0.8]
    other = diagnostics.ess(_ar1(0.8, 4, 5000, seed=5), "mean")
    assert abs(other - theory[0.8]) < 0.2 * theory[0.8]


def test_a_quantity_that_never_varies_has_no_rhat_or_ess():
    draws = np.zeros((2, 10, 3))
    draws[:, :, 1] = np.random.default_rng(6).normal(size=(2, 10))
    values = diagnostics.rhat(draws)
    assert np.isnan(values[0]) and np.isnan(values[2]) and np.isfinite(values[1])
    assert np.isnan(diagnostics.ess(np.ones((2, 10))))


def test_bad_draws_are_refused_with_the_fix():
    with pytest.raises(ValueError, match="draws\\[None, :\\]"):
        diagnostics.rhat(np.ones(10))
    with pytest.raises(ValueError, match="at least 4"):
        diagnostics.rhat(np.ones((2, 3)))
    with pytest.raises(ValueError, match="NaN"):
        diagnostics.ess(np.array([[1.0, np.nan, 2.0, 3.0]]))


# ---------------------------------------------------------------------------
# Label-invariant summaries: alignment within and across chains
# ---------------------------------------------------------------------------


def _fake_posterior(phi_samples, theta, log_marginal, burn_in=2):
    """A Posterior fed with given samples, as a chain would (no sampling)."""
    model = TopicModel(phi_samples[0].shape[0])
    posterior = Posterior(model, "private", (theta.shape[0], phi_samples[0].shape[1]), burn_in=burn_in, thin=1)
    for _iteration, value in enumerate(log_marginal, start=1):
        posterior._log_joint.append(value - 10.0)
        posterior._log_marginal.append(value)
        posterior._seconds.append(0.01)
    for s, phi in enumerate(phi_samples):
        posterior.add_sample({"theta": theta, "phi": phi}, burn_in + s + 1, float(-s))
    return posterior


def _topics(rng, n_samples, permutation_of_sample):
    true_phi = np.array([[8.0, 1, 1, 1, 1, 1], [1, 1, 8, 1, 1, 1], [1, 1, 1, 1, 8, 1]])
    samples = []
    for s in range(n_samples):
        phi = true_phi * rng.gamma(200.0, 1 / 200.0, size=true_phi.shape)
        samples.append(phi[permutation_of_sample(s)])
    return samples


def test_topics_are_aligned_within_and_across_chains_before_rhat():
    rng = np.random.default_rng(7)
    theta = rng.gamma(1.0, 1.0, size=(5, 3))
    trace = rng.normal(size=40)
    # chain A keeps its labels; chain B uses other labels and switches them halfway
    chain_a = _fake_posterior(_topics(rng, 200, lambda s: [0, 1, 2]), theta, trace)
    chain_b = _fake_posterior(
        _topics(rng, 200, lambda s: [2, 0, 1] if s < 100 else [1, 2, 0]), theta, rng.normal(size=40)
    )
    summaries = [diagnostics.chain_summary(p) for p in (chain_a, chain_b)]
    quantities = diagnostics.combine(summaries)
    assert quantities["topic_word"].shape == (2, 200, 3, 6)
    assert quantities["log_marginal"].shape == (2, 38)  # iterations after burn-in
    aligned = diagnostics.rhat(quantities["topic_word"])
    assert np.nanmax(aligned) < 1.05
    raw = np.stack(
        [np.array([f["phi"] / f["phi"].sum(axis=1, keepdims=True) for f in p.samples]) for p in (chain_a, chain_b)]
    )
    assert np.nanmax(diagnostics.rhat(raw)) > 1.5  # without alignment the labels look like non-convergence
    rows = diagnostics.summarize_diagnostics(diagnostics.diagnose(quantities))
    names = [row["quantity"] for row in rows]
    assert names == ["log_marginal", "topic_word"]
    assert rows[1]["elements"] == 18 and rows[1]["rhat_max"] < 1.05


def test_rates_at_cells_follow_the_factors_and_ignore_labels():
    rng = np.random.default_rng(8)
    theta = rng.gamma(1.0, 1.0, size=(5, 3))
    phi = _topics(rng, 1, lambda s: [0, 1, 2])[0]
    chain = _fake_posterior([phi, phi[[1, 2, 0]]], theta, rng.normal(size=10))
    # the second sample permutes phi's rows but not theta's columns: its rates differ
    cells = (np.array([0, 4]), np.array([1, 5]))
    rates = diagnostics.chain_summary(chain, cells=cells)["rates"]
    np.testing.assert_allclose(rates[0], (theta @ phi)[cells])
    np.testing.assert_allclose(rates[1], (theta @ phi[[1, 2, 0]])[cells])


def test_probe_cells_are_observed_distinct_and_reproducible():
    observed = np.ones((30, 40), dtype=bool)
    observed[:10] = False
    rows, cols = diagnostics.probe_cells(observed, 25, random_state=3)
    assert len(rows) == 25 and rows.min() >= 10
    assert len(set(zip(rows.tolist(), cols.tolist(), strict=True))) == 25
    again = diagnostics.probe_cells(observed, 25, random_state=3)
    assert np.array_equal(rows, again[0]) and np.array_equal(cols, again[1])
    assert len(diagnostics.probe_cells(np.eye(3, dtype=bool), 20)[0]) == 3
    np.testing.assert_array_equal(diagnostics.probe_columns([5, 1, 9, 3], 2), [0, 2])


# ---------------------------------------------------------------------------
# Real chains, InferenceData, the CLI
# ---------------------------------------------------------------------------


def test_inference_data_round_trips_through_netcdf(tmp_path):
    from lpviz.datasets import make_topics
    from lpviz.engine import fit

    data = make_topics(alpha0=0.5, random_state=0)
    release = data.release()
    chains = [
        fit(release, method="private", n_components=3, n_iter=40, burn_in=10, thin=2, random_state=s) for s in range(2)
    ]
    cells = diagnostics.probe_cells(release.observed_cells, 5, random_state=0)
    idata = diagnostics.to_inference_data(chains, cells=cells)
    path = tmp_path / "chains.nc"
    idata.to_netcdf(str(path))
    back = _arviz().from_netcdf(str(path))
    assert back.posterior["rate"].shape == (2, 15, 5)
    assert back.posterior["topic_word"].shape == (2, 15, 3, 15)
    assert back.sample_stats["log_marginal"].shape == (2, 30)
    np.testing.assert_allclose(back.sample_stats["log_marginal"].values[1], chains[1].log_marginal[10:])
    assert back.attrs["method"] == "private" and back.posterior.attrs["trace"] == "log_marginal"
    expected = diagnostics.rhat(
        diagnostics.combine([diagnostics.chain_summary(c, cells=cells) for c in chains])["rate"]
    )
    np.testing.assert_allclose(diagnostics.rhat(back.posterior["rate"].values), expected)


def _fit_json(capsys, argv):
    assert main(argv + ["--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_fit_chains_adds_diagnostics_and_writes_inference_data(tmp_path, capsys):
    base = [
        "fit",
        "--data",
        "synthetic-topics",
        "--method",
        "naive",
        "--iterations",
        "40",
        "--thin",
        "2",
        "--seed",
        "5",
        "--noise-seed",  # the same synthetic data for both runs
        "5",
    ]
    single = _fit_json(capsys, base)
    several = _fit_json(capsys, base + ["--chains", "3", "--save-idata", str(tmp_path / "fit.nc")])
    # the first of several chains is the chain a single run gets (timings aside)
    timing = {"seconds", "iterations_per_second"}

    def untimed(scores):
        return {key: value for key, value in scores.items() if key not in timing}

    assert untimed(several["chains"]["naive"][0]) == untimed(single["methods"]["naive"])
    assert len(several["chains"]["naive"]) == 3
    # the method's scores are the ensemble's: the rates pooled over the three chains
    assert several["methods"]["naive"]["n_chains"] == 3
    assert several["methods"]["naive"]["chain_mae"] == [chain["mae"] for chain in several["chains"]["naive"]]
    assert several["chains"]["naive"][1]["mae"] != several["chains"]["naive"][0]["mae"]
    quantities = {row["quantity"]: row for row in several["diagnostics"]["naive"]}
    assert set(quantities) == {"log_joint", "rate", "topic_word"}
    assert quantities["rate"]["chains"] == 3 and quantities["rate"]["rhat_max"] > 0.9
    idata = _arviz().from_netcdf(str(tmp_path / "fit.nc"))
    assert idata.posterior.sizes["chain"] == 3
    assert several["idata"] == [str(tmp_path / "fit.nc")]
    # an existing file is not replaced without --force
    assert main(base + ["--save-idata", str(tmp_path / "fit.nc")]) == 2
    assert "already exists" in capsys.readouterr().err
    assert main(base + ["--chains", "0"]) == 2
    assert "--chains must be >= 1" in capsys.readouterr().err
