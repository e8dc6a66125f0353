"""Chains that never meet (issue 54): stacking weights, the stacked posterior, modes in words."""

from dataclasses import replace

import numpy as np
import pytest

import lpviz
from lpviz.datasets import make_blocks, make_tensor, make_topics
from lpviz.ensemble import EnsemblePosterior
from lpviz.privacy import noised_logpmf
from lpviz.stacking import PARETO_K_MAX, STACKING_SHRINK, chain_stacking, scored_cells, stack_pointwise


def heldout_mask(shape, fraction=0.2, seed=0):
    return np.random.default_rng(seed).random(shape) < fraction


@pytest.fixture(scope="module")
def topics():
    return make_topics(alpha0=0.5, random_state=0)  # 90 x 15, K = 3


@pytest.fixture(scope="module")
def heldout_release(topics):
    return topics.release(heldout=heldout_mask(topics.Y_obs.shape))


@pytest.fixture(scope="module")
def ensemble(heldout_release):
    return lpviz.fit(heldout_release, n_components=3, n_iter=200, thin=5, random_state=3, chains=3)


def test_weights_are_a_simplex_fitted_on_the_heldout_noised_cells(ensemble, heldout_release):
    weights = ensemble.stacking_weights(heldout_release)
    assert weights.shape == (3,) and np.all(weights >= 0) and weights.sum() == pytest.approx(1.0)
    assert weights.cells == "heldout"
    stacking = weights.stacking
    assert stacking.n_cells == int(heldout_release.heldout_cells.sum())
    # the weights are the maximiser of the mixture's summed log density, shrunk 1% toward equal:
    # no other point of the simplex does better than the maximiser
    objective = lambda w: np.sum(np.log(np.exp(stacking.pointwise).T @ w))  # noqa: E731
    optimum = (np.asarray(weights) - STACKING_SHRINK / 3) / (1 - STACKING_SHRINK)
    assert np.all(np.asarray(weights) >= STACKING_SHRINK / 3 - 1e-15)
    best = objective(optimum)
    rng = np.random.default_rng(1)
    for w in rng.dirichlet(np.ones(3), size=200):
        assert objective(w) <= best + 1e-6
    for corner in np.eye(3):
        assert objective(corner) <= best + 1e-6


def test_a_chain_density_is_the_mean_of_the_noised_law_over_its_draws(ensemble, heldout_release):
    stacking = ensemble.stacking(heldout_release, max_draws=1000)
    chain = ensemble.chains[1]
    cells = heldout_release.heldout_cells
    y, alpha = heldout_release.Y_obs[cells], np.broadcast_to(heldout_release.alpha_per_row[:, None], cells.shape)[cells]
    densities = np.mean(
        [np.exp(noised_logpmf(y, chain.model_instance.rates(f)[cells], alpha)) for f in chain.samples], 0
    )
    np.testing.assert_allclose(stacking.pointwise[1], np.log(densities), rtol=1e-10)
    assert stacking.n_draws == chain.n_saved


def test_stacked_rates_are_the_weighted_mixture(ensemble, heldout_release):
    stacked = ensemble.stacked(heldout_release)
    expected = sum(w * chain.mu_hat for w, chain in zip(stacked.weights, ensemble.chains, strict=True))
    np.testing.assert_allclose(stacked.mu_hat, expected, rtol=1e-12)
    assert stacked.shape == ensemble.shape and stacked.sample_weights.sum() == pytest.approx(1.0)
    scores = lpviz.score(stacked, heldout_release)
    assert scores["health"]["mass_ratio"] == pytest.approx(
        lpviz.score(ensemble, heldout_release)["health"]["mass_ratio"], rel=0.1
    )


def test_a_chain_fitted_to_other_data_gets_no_weight(topics, heldout_release):
    # the same documents in another order: the same topics, every row's mixture another document's
    order = np.random.default_rng(7).permutation(heldout_release.shape[0])
    other = replace(heldout_release, Y_obs=heldout_release.Y_obs[order])
    good = lpviz.fit(heldout_release, n_components=3, n_iter=200, thin=5, random_state=3, chains=2)
    stray = lpviz.fit(other, n_components=3, n_iter=200, thin=5, random_state=4)
    mixed = EnsemblePosterior([*good.chains, stray])
    weights = mixed.stacking_weights(heldout_release)
    assert weights[2] < 0.01, weights
    stacking = weights.stacking
    assert len(stacking.modes) >= 2 and [2] in stacking.modes  # the stray chain is a mode of its own
    assert "3 chains in" in stacking.text and "stacking weights" in stacking.text


def test_stacking_never_reads_the_truth(ensemble, heldout_release, topics):
    # the same release with other true counts behind it: the weights are a function of the release alone
    first = np.asarray(ensemble.stacking_weights(heldout_release))
    ensemble._stacking = None
    twin = replace(heldout_release)
    assert np.array_equal(np.asarray(ensemble.stacking_weights(twin)), first)


def test_without_heldout_cells_psis_loo_is_used_and_pareto_k_reported(topics):
    release = topics.release()
    fit = lpviz.fit(release, n_components=3, n_iter=200, thin=5, random_state=5, chains=2)
    stacking = fit.stacking(release)
    assert stacking.cells == "loo" and stacking.pareto_k is not None
    assert stacking.pareto_k.shape == stacking.pointwise.shape
    share = float(np.mean(stacking.pareto_k > PARETO_K_MAX))
    assert stacking.pareto_k_high == pytest.approx(share)
    assert (share > 0) == any("Pareto k" in note for note in stacking.notes)
    assert "PSIS-LOO" in stacking.text
    # PSIS-LOO's density of a cell is below the in-sample one (it leaves the cell out)
    in_sample = np.stack([np.log(np.mean(np.exp(_log_lik(chain, release)), 0)) for chain in fit.chains])
    assert np.mean(stacking.pointwise <= in_sample + 1e-9) > 0.95


def _log_lik(chain, release):
    cells = scored_cells(release, chain.model_instance)
    from lpviz.stacking import rates_at_cells

    return np.stack(
        [
            noised_logpmf(cells.y_noised, rates_at_cells(chain.model_instance, f, cells), cells.alpha)
            for f in chain.samples[-100:]
        ]
    )


def test_stacked_elpd_is_cross_fitted_and_beats_no_chain_by_construction(ensemble, heldout_release):
    stacking = ensemble.stacking(heldout_release)
    elpd = stacking.elpd()
    assert set(elpd) == {"cells", "n_cells", "chains", "pooled", "stacked"}
    # cross-fitted: not the in-sample optimum, which no held-out score can exceed
    optimum = (stacking.weights - STACKING_SHRINK / 3) / (1 - STACKING_SHRINK)
    in_sample = np.sum(np.log(np.exp(stacking.pointwise).T @ optimum))
    assert elpd["stacked"]["elpd"] <= in_sample + 1e-9
    for part in (elpd["pooled"], elpd["stacked"], *elpd["chains"]):
        assert part["n"] == stacking.n_cells and part["se"] > 0


def test_stack_pointwise_puts_all_weight_on_a_dominant_candidate():
    rng = np.random.default_rng(0)
    good = rng.normal(-1.0, 0.1, 500)
    weights, table = stack_pointwise(np.stack([good - 3.0, good, good - 5.0]), names=["a", "b", "c"])
    assert weights[1] > 0.99 and list(table.index) == ["a", "b", "c"]
    # two candidates right on different halves of the cells: both weighed
    half = np.arange(500) < 250
    weights, _ = stack_pointwise(np.stack([np.where(half, -1.0, -6.0), np.where(half, -6.0, -1.0)]))
    assert weights == pytest.approx([0.5, 0.5], abs=0.02)


@pytest.mark.parametrize("kind", ["blocks", "tensor"])
def test_block_and_tensor_models_stack(kind):
    if kind == "blocks":
        data, model, k = make_blocks(n_actors=16, n_communities=3, random_state=2), "blocks", 3
    else:
        data, model, k = make_tensor(n_actors=10, n_times=6, n_components=2, random_state=2), "tensor", 2
    release = data.release(heldout=heldout_mask(data.Y_obs.shape, seed=3))
    fit = lpviz.fit(release, model=model, n_components=k, n_iter=120, thin=4, random_state=1, chains=2)
    stacking = chain_stacking(fit.chains, release)
    assert stacking.cells == "heldout" and np.isfinite(stacking.pointwise).all()
    assert stacking.n_cells == int(release.heldout_cells.sum() - 0)
    stacked = fit.stacked(release)
    assert stacked.mu_hat.shape == release.shape


def test_loaded_chains_without_draws_are_scored_by_their_point_estimate(ensemble, heldout_release, tmp_path):
    path = ensemble.save(tmp_path / "fit.npz", heldout_release)
    loaded = EnsemblePosterior.load(path)
    stacking = loaded.stacking(heldout_release)
    assert stacking.n_draws == 0 and stacking.cells == "heldout"
    for row, chain in zip(stacking.pointwise, loaded.chains, strict=True):
        cells = heldout_release.heldout_cells
        alpha = np.broadcast_to(heldout_release.alpha_per_row[:, None], cells.shape)[cells]
        np.testing.assert_allclose(row, noised_logpmf(heldout_release.Y_obs[cells], chain.mu_hat[cells], alpha))


def test_stacking_before_any_sample_is_refused_in_words(heldout_release):
    run = lpviz.run(heldout_release, n_components=3, n_iter=50, burn_in=40, thin=2, random_state=0, chains=2)
    for _ in zip(range(5), run, strict=False):
        pass
    run.stop()
    with pytest.raises(ValueError, match="past their burn-in"):
        run.posterior.stacking_weights(heldout_release)


def test_an_ensemble_over_a_dask_cluster_stacks_to_the_same_bits(client, heldout_release):
    # `client`: the conftest's LocalCluster; the chains come back as plain posteriors
    here = lpviz.fit(heldout_release, n_components=3, n_iter=120, thin=5, random_state=11, chains=2)
    there = lpviz.fit(heldout_release, n_components=3, n_iter=120, thin=5, random_state=11, chains=2, scheduler=client)
    a, b = here.stacking(heldout_release), there.stacking(heldout_release)
    assert np.array_equal(a.weights, b.weights) and np.array_equal(a.pointwise, b.pointwise)
    assert np.array_equal(here.stacked(heldout_release).mu_hat, there.stacked(heldout_release).mu_hat)


def test_score_reports_the_stacking_beside_the_pool(ensemble, heldout_release, topics):
    scores = lpviz.score(ensemble, heldout_release, topics.truth())
    stacking = ensemble.stacking(heldout_release)
    assert scores["stacking_weights"] == pytest.approx(list(stacking.weights))
    assert scores["elpd"]["cells"] == "heldout" and len(scores["elpd"]["chains"]) == 3
    assert scores["modes"]["text"] == stacking.text and scores["modes"]["text"].startswith("3 chains in ")
    stacked = ensemble.stacked(heldout_release)
    cells = heldout_release.observed_cells
    truth = topics.truth().Y
    assert scores["stacked_mae"] == pytest.approx(np.abs(stacked.mu_hat - truth)[cells].mean(), rel=1e-12)
    held = heldout_release.heldout_cells
    assert scores["stacked_heldout_mae"] == pytest.approx(np.abs(stacked.mu_hat - truth)[held].mean(), rel=1e-12)
    # without a truth: the weights and elpds (the analyst's numbers), no MAE
    blind = lpviz.score(ensemble, heldout_release)
    assert blind["stacking_weights"] == scores["stacking_weights"] and blind["stacked_mae"] is None
    # live views' scores skip it
    assert lpviz.score(ensemble, heldout_release, diagnostics="trace")["stacking_weights"] is None


def test_the_stacking_benchmark_runs_tiny_and_prints_its_figures():
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    result = subprocess.run(
        [sys.executable, "benchmarks/bench_stacking.py", "--tiny"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    for words in (
        "== fig5",
        "== fig4",
        "held-out elpd (se)",
        "lpviz.compare over 1 copies",
        "rankings stated",
        "seconds: fits",
    ):
        assert words in result.stdout


def test_modes_need_agreeing_predictions_and_likelihood_levels():
    from lpviz.stacking import _modes

    rng = np.random.default_rng(0)
    rates = rng.gamma(2.0, 1.0, 200)
    level = rng.normal(0.0, 1.0, 300)
    same = [rates, rates + 0.01, rates]
    spreads = [0.05, 0.05, 0.05]
    assert _modes(same, spreads, [level, level + 0.5, level - 0.5]) == [[0, 1, 2]]
    # the same predictions, one chain's likelihood 10 within-chain sds below: a mode of its own
    assert _modes(same, spreads, [level, level - 10.0, level]) == [[0, 2], [1]]
    # the same likelihood level, other predictions: another mode too
    assert _modes([rates, rates + 1.0, rates], spreads, [level, level, level]) == [[0, 2], [1]]
