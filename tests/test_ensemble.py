"""Chains, plural (issue 39): lpviz.fit(..., chains=C), EnsemblePosterior, score of an ensemble,
CAVI restarts, and `lpviz fit --chains` as a thin caller of the library."""

import copy
import json
import threading
import warnings
from dataclasses import replace

import numpy as np
import pytest

import lpviz
from lpviz.cli import main
from lpviz.datasets import load_data, make_topics
from lpviz.engine import Posterior
from lpviz.ensemble import DEFAULT_CHAINS, EnsemblePosterior, spawn_seeds
from lpviz.metrics import rankable


@pytest.fixture(scope="module")
def data():
    return make_topics(alpha0=0.5, random_state=0)  # 90 x 15, K = 3


@pytest.fixture(scope="module")
def ensemble(data):
    return lpviz.fit(data.release(), n_components=3, n_iter=300, thin=5, random_state=11, chains=4)


def _same_chain(a, b):
    return (
        np.array_equal(a.mu_hat, b.mu_hat)
        and np.array_equal(a.log_joint, b.log_joint)
        and np.array_equal(a.log_marginal, b.log_marginal, equal_nan=True)
        and a.saved_iterations == b.saved_iterations
    )


def test_chain_zero_is_the_single_chain_of_the_seed(data, ensemble):
    single = lpviz.fit(data.release(), n_components=3, n_iter=300, thin=5, random_state=11)
    assert isinstance(single, Posterior) and isinstance(ensemble, EnsemblePosterior)
    assert ensemble.n_chains == 4 and _same_chain(ensemble.chains[0], single)
    # the other chains are chains of their own (spawned seeds), not copies
    assert not any(np.array_equal(ensemble.chains[i].log_joint, single.log_joint) for i in (1, 2, 3))
    # pooled rates: every saved sample of every chain weighs alike
    expected = np.mean([chain.mu_hat for chain in ensemble.chains], axis=0)
    np.testing.assert_allclose(ensemble.mu_hat, expected, rtol=1e-12)
    assert ensemble.log_marginal.shape == (4, 300) and ensemble.n_saved == 4 * single.n_saved


def test_spawned_seeds_follow_numpy_spawn():
    rngs = spawn_seeds(5, 3)
    children = np.random.SeedSequence(5).spawn(2)
    assert [r.integers(1 << 30) for r in rngs[1:]] == [np.random.default_rng(c).integers(1 << 30) for c in children]
    assert rngs[0].integers(1 << 30) == np.random.default_rng(5).integers(1 << 30)


def test_results_do_not_depend_on_the_number_of_threads(data, monkeypatch):
    runs = []
    for threads in ("1", "3"):  # parallel=True: the sweeps split into 4 chunks per thread
        monkeypatch.setenv("LPVIZ_NUM_THREADS", threads)
        runs.append(
            lpviz.fit(data.release(), n_components=3, n_iter=60, thin=5, random_state=2, chains=3, parallel=True)
        )
    assert all(_same_chain(a, b) for a, b in zip(runs[0].chains, runs[1].chains, strict=True))
    np.testing.assert_array_equal(runs[0].mu_hat, runs[1].mu_hat)


def test_bad_chain_counts_are_refused_with_the_fix(data):
    release = data.release()
    with pytest.raises(ValueError, match="chains must be a whole number >= 1.*chains=4"):
        lpviz.fit(release, n_components=3, n_iter=30, chains=0)
    with pytest.raises(ValueError, match="restarts=R"):
        lpviz.fit(release, n_components=3, n_iter=30, inference="vi", chains=2)
    with pytest.raises(ValueError, match="chains=C"):
        lpviz.fit(release, n_components=3, n_iter=30, restarts=2)


def test_ctrl_c_stops_every_chain(data):
    seen = []

    def interrupt(state):
        seen.append(state.chain)
        if len(seen) == 20:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        lpviz.fit(data.release(), n_components=3, n_iter=100_000, thin=5, random_state=0, chains=3, callback=interrupt)
    assert not [t for t in threading.enumerate() if t.name.startswith("lpviz-chain-")]
    assert len(seen) == 20
    # the same through run(): every chain stopped where it was, far from its 100,000 iterations
    ensemble_run = lpviz.run(data.release(), n_components=3, n_iter=100_000, thin=5, random_state=0, chains=3)
    states = iter(ensemble_run)
    for count, (index, state) in enumerate(states):
        assert state.chain == index
        if count == 30:
            break
    states.close()
    assert all(chain.iteration < 1000 for chain in ensemble_run.chains)
    with pytest.raises(lpviz.engine.ChainStopped):  # stopped chains cannot go on
        ensemble_run.chains[0].step()


# ---------------------------------------------------------------------------
# score judges the ensemble
# ---------------------------------------------------------------------------


def _in_another_mode(ensemble, index, drop=400.0):
    """The ensemble with chain ``index`` moved to a poorer mode: its likelihood traces ``drop`` lower
    and its rates on another topic layout (theta's columns rolled), as a stuck chain's are."""
    chains = list(ensemble.chains)
    odd = copy.deepcopy(chains[index])
    odd._log_marginal = [value - drop for value in odd._log_marginal]
    odd._log_joint = [value - drop for value in odd._log_joint]
    odd.samples = [dict(s, theta=np.roll(s["theta"], 1, axis=0)) for s in odd.samples]
    odd._rate_sum = sum(odd.model_instance.rates(s) for s in odd.samples)
    odd._mu_hat = None
    odd.best = odd.samples[-1]
    chains[index] = odd
    return EnsemblePosterior(chains)


def test_a_chain_in_another_mode_is_flagged_and_named(data, ensemble):
    release, truth = data.release(), data.truth()
    good = lpviz.score(ensemble, release, truth)
    assert "chains disagree" not in good["health"]["flags"] and good["odd_chains"] == []
    assert not good["health"]["chains_disagree"]
    moved = _in_another_mode(ensemble, 2)
    bad = lpviz.score(moved, release, truth)
    assert bad["health"]["chains_disagree"] and "chains disagree" in bad["health"]["flags"]
    assert bad["odd_chains"] == [2]
    reason = next(r for r in bad["health"]["reasons"] if r.startswith("the chains disagree"))
    assert "chain 2 sits in another mode" in reason and "chain 0" not in reason.split("below")[0]
    # its numbers: its mean log likelihood, how far below the best chain's, in within-chain sds
    means = [np.mean(chain.log_marginal[chain.burn_in :]) for chain in moved.chains]
    gap = max(means) - means[2]
    assert f"its mean log marginal {means[2]:.6g} is {gap:.4g} below" in reason and "within-chain sd" in reason
    assert not bad["health"]["healthy"] and not rankable(bad)[0]
    assert any("chains disagree" in text for text in rankable(bad)[1])
    # per-chain MAE against the truth, and the cross-chain diagnostics of the three quantities
    assert len(bad["chain_mae"]) == 4 and bad["chain_mae"][2] > max(np.delete(bad["chain_mae"], 2))
    assert {row["quantity"] for row in good["convergence"]} == {"log_marginal", "rate", "topic_word"}
    assert bad["rhat"] > good["rhat"]


def test_trace_diagnostics_give_the_same_verdict_without_the_element_rows(data, ensemble):
    """score(diagnostics="trace") (the dashboard's live snapshots): every number the health rests on,
    equal to the full score's, for agreeing chains and for a chain in another mode; only the per-element
    rows of the probe cells and topics are left out."""
    release, truth = data.release(), data.truth()
    for fit in (ensemble, _in_another_mode(ensemble, 1)):
        full, trace = lpviz.score(fit, release, truth), lpviz.score(fit, release, truth, diagnostics="trace")
        for key in ("rhat", "ess", "ess_tail", "odd_chains", "health", "mae", "rate_mae", "chain_mae", "npmi"):
            assert trace[key] == full[key], key
        assert [row["quantity"] for row in trace["convergence"]] == ["log_marginal"]
        assert trace["convergence"][0] == full["convergence"][0]
    assert lpviz.score(_in_another_mode(ensemble, 1), release, truth, diagnostics="trace")["odd_chains"] == [1]
    with pytest.raises(ValueError, match='diagnostics must be True, False or "trace"'):
        lpviz.score(ensemble, release, truth, diagnostics="all")


def test_ensemble_rhat_is_arviz_on_the_chains(ensemble, data):
    from arviz_stats.base import array_stats

    result = lpviz.score(ensemble, data.release(), data.truth())
    traces = np.stack([c.log_marginal[c.burn_in :] for c in ensemble.chains])
    assert result["rhat"] == pytest.approx(float(array_stats.rhat(traces, chain_axis=0, draw_axis=1, method="rank")))
    assert result["n_chains"] == 4 and len(result["chains"]) == 4
    assert result["chains"][0]["mae"] == lpviz.score(ensemble.chains[0], data.release(), data.truth())["mae"]


# ---------------------------------------------------------------------------
# files and ArviZ
# ---------------------------------------------------------------------------


def test_inference_data_round_trip(ensemble, data, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        import arviz

    release = data.release()
    idata = ensemble.to_inference_data(release)
    path = tmp_path / "fit.nc"
    idata.to_netcdf(str(path))
    back = arviz.from_netcdf(str(path))
    posterior, stats = back.posterior, back.sample_stats
    assert posterior["rate"].dims == ("chain", "draw", "cell") and posterior.sizes["chain"] == 4
    assert posterior["topic_word"].dims == ("chain", "draw", "topic", "word")
    np.testing.assert_array_equal(stats["log_marginal"].values[3], ensemble.chains[3].log_marginal[50:])
    np.testing.assert_array_equal(stats["log_joint"].values[1], ensemble.chains[1].log_joint[50:])
    # the probe cells' rates are the chains' samples at those cells
    row, col = (int(x) for x in str(posterior["cell"].values[0]).split(","))
    sample = ensemble.chains[2].samples[4]
    rate = float(sample["theta"][row] @ sample["phi"][:, col])
    assert posterior["rate"].values[2, 4, 0] == pytest.approx(rate)


def test_save_and_load_keep_the_chain_dimension(ensemble, data, tmp_path):
    path = ensemble.save(tmp_path / "private.npz", data.release())
    back = EnsemblePosterior.load(path)
    assert back.n_chains == 4 and all(_same_chain(a, b) for a, b in zip(back.chains, ensemble.chains, strict=True))
    np.testing.assert_allclose(back.mu_hat, ensemble.mu_hat, rtol=1e-12)
    assert back.best_log_joint == ensemble.best_log_joint
    with pytest.raises(FileExistsError, match="overwrite=True"):
        ensemble.save(path)
    with pytest.raises(ValueError, match="not a fit"):  # a single-chain reader does not misread it
        Posterior.load(path)
    # a single chain's file loads as before, and as an ensemble of one chain
    single = ensemble.chains[0].save(tmp_path / "one.npz")
    assert _same_chain(Posterior.load(single), ensemble.chains[0])
    assert EnsemblePosterior.load(single).n_chains == 1


# ---------------------------------------------------------------------------
# CAVI restarts
# ---------------------------------------------------------------------------


def test_vi_restarts_keep_the_best_elbo_and_report_the_spread(data):
    release, truth = data.release(), data.truth()
    kept = lpviz.fit(release, n_components=3, n_iter=150, inference="vi", random_state=4, restarts=3)
    first = lpviz.fit(release, n_components=3, n_iter=150, inference="vi", random_state=4)
    np.testing.assert_array_equal(kept.restarts[0].mu_hat, first.mu_hat)  # restart 0: the single fit
    elbos = [r.elbo[-1] for r in kept.restarts]
    assert kept is kept.restarts[int(np.argmax(elbos))] and kept.restart_elbos == elbos
    assert kept.restart_spread["elbo_range"] == pytest.approx(max(elbos) - min(elbos))
    result = lpviz.score(kept, release, truth)["restarts"]
    maes = [lpviz.score(r, release, truth)["mae"] for r in kept.restarts]
    np.testing.assert_allclose(result["mae"], maes, rtol=1e-12)
    assert result["mae_range"] == pytest.approx(max(maes) - min(maes)) and result["restarts"] == 3


# ---------------------------------------------------------------------------
# `lpviz fit --chains`: the library's numbers, printed
# ---------------------------------------------------------------------------

ARGS = [
    "fit",
    "--data",
    "synthetic-topics",
    "--iterations",
    "60",
    "--thin",
    "5",
    "--seed",
    "3",
    "--noise-seed",
    "3",
    "--no-progress",
]


def _library_fit(chains):
    seed = 3
    chain_seed = np.random.SeedSequence(seed).spawn(3)[1]  # the CLI's: noise, chains, held-out cells
    loaded = load_data("synthetic-topics", random_state=seed)  # what `--data synthetic-topics --noise-seed 3` reads
    release, truth = replace(loaded.release(), row_labels=None, col_labels=None), loaded.truth()
    posterior = lpviz.fit(
        release, n_components=3, n_iter=60, thin=5, random_state=np.random.default_rng(chain_seed), chains=chains
    )
    return posterior, lpviz.score(posterior, release, truth)


def _untimed(scores):
    return {k: v for k, v in scores.items() if k not in ("seconds", "iterations_per_second")}


def test_cli_prints_the_library_fit(capsys):
    assert DEFAULT_CHAINS == 1
    assert main(ARGS + ["--json"]) == 0
    one = json.loads(capsys.readouterr().out)
    assert "chains" not in one and "diagnostics" not in one  # one chain: the summary of before
    _, expected = _library_fit(1)
    assert _untimed(one["methods"]["private"]) == json.loads(json.dumps(_untimed(expected)))

    assert main(ARGS + ["--json", "--chains", "2"]) == 0
    two = json.loads(capsys.readouterr().out)
    _, expected = _library_fit(2)
    expected = json.loads(json.dumps(expected))
    assert [_untimed(c) for c in two["chains"]["private"]] == [_untimed(c) for c in expected["chains"]]
    assert two["diagnostics"]["private"] == expected["convergence"]
    assert _untimed(two["chains"]["private"][0]) == _untimed(one["methods"]["private"])
    assert two["methods"]["private"]["mae"] == expected["mae"]


def test_cli_text_keeps_its_tables(capsys):
    assert main(ARGS + ["--chains", "2"]) == 0
    text = capsys.readouterr().out
    assert "private #1" in text and "private #2" in text and "private pooled" in text
    assert "convergence (R-hat above 1.01: the chains disagree, run longer):" in text
    assert "max R-hat  min bulk ESS  min tail ESS" in text


def test_chains_that_do_not_fit_in_memory_together_are_refused(data, monkeypatch):
    from lpviz.budget import MemoryBudgetError
    from lpviz.engine import posterior_bytes

    release = data.release()
    one = lpviz.run(release, n_components=3, n_iter=100, thin=5)
    need = one.chain.memory_estimate() + posterior_bytes(one.chain.model_instance, release.shape, 100, 16, 5)
    monkeypatch.setenv("LPVIZ_MEMORY_LIMIT", str(int(need * 2.5)))
    lpviz.run(release, n_components=3, n_iter=100, thin=5, chains=2)  # two fit
    with pytest.raises(MemoryBudgetError, match="3 chains.*chains="):
        lpviz.run(release, n_components=3, n_iter=100, thin=5, chains=3)


def test_cli_refuses_chains_of_a_variational_fit(capsys):
    assert main(ARGS + ["--inference", "vi", "--chains", "2"]) == 2
    assert "--chains runs MCMC chains" in capsys.readouterr().err
