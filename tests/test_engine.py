"""The driver (lpviz.engine): Chain, run, fit, Posterior.

The public API (arrays as in lpviz 0.1, or a Release with its Truth beside
it), reproducibility (seed, thread count, chunking, worker threads),
held-out cells and structural zeros, input checks, the log joint against
brute force, stopping a chain from another thread, and the posterior's
summaries and file.
"""

import json
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats

import lpviz
from lpviz import _parallel, engine, models
from lpviz.engine import ChainState, ChainStopped, FitResult, Posterior, Run
from lpviz.privacy import geometric_logpmf, privatize
from lpviz.release import Release, Truth

MODELS = ["topics", "blocks"]
# "private" runs the default (collapsed) sampler; "private-bessel" the paper's
METHODS = ["private", "private-bessel", "naive", "nonprivate"]


def _spec(kwargs):
    if kwargs.get("method") == "private-bessel":
        return dict(kwargs, method="private", sampler="bessel")
    return kwargs


def Chain(*args, **kwargs):
    return engine.Chain(*args, **_spec(kwargs))


def fit(*args, **kwargs):
    return engine.fit(*args, **_spec(kwargs))


def run(*args, **kwargs):
    return engine.run(*args, **_spec(kwargs))


def synthetic(model, n_rows=12, n_cols=9, k=3, seed=0):
    rng = np.random.default_rng(seed)
    if model == "blocks":
        n_cols = n_rows
    if model == "topics":
        factors = {"theta": rng.gamma(0.5, 2.0, (n_rows, k)), "phi": rng.gamma(0.5, 2.0, (k, n_cols))}
    else:
        factors = {"theta": rng.gamma(0.5, 2.0, (n_rows, k)), "pi": rng.gamma(0.5, 2.0, (k, k))}
    mu = models.rates(model, factors)
    Y = rng.poisson(mu)
    kind = "documents" if model == "topics" else "network"
    return Y, privatize(Y, alpha=0.5, kind=kind, random_state=seed + 1).Y_obs, mu


def data_for(model, method, **kwargs):
    Y, Y_obs, _ = synthetic(model, **kwargs)
    return Y if method == "nonprivate" else Y_obs


def release_for(model, heldout=None, seed=0):
    """(release, truth) of the small synthetic data."""
    Y, Y_obs, mu = synthetic(model, seed=seed)
    kind = "documents" if model == "topics" else "network"
    return Release(Y_obs=Y_obs, alpha=0.5, kind=kind, heldout=heldout, simulated=True), Truth(Y, mu=mu)


def run_chain(Y, model, method, n_iter=5, **kwargs):
    chain = Chain(Y, model=model, method=method, n_components=3, alpha=0.5, **kwargs)
    chain.step(n_iter)
    return chain


def assert_same_chain(a, b):
    assert a.iteration == b.iteration
    assert a.log_joint == b.log_joint
    for name, value in a.factors.items():
        np.testing.assert_array_equal(value, b.factors[name])
    if a.method == "private":
        np.testing.assert_array_equal(a.y_latent, b.y_latent)
        assert (a.bessel_draws is None) == (b.bessel_draws is None)
        if a.bessel_draws is not None:
            np.testing.assert_array_equal(a.bessel_draws, b.bessel_draws)
        for name in ("lambda_plus", "lambda_minus"):
            if name in a._latent:
                np.testing.assert_array_equal(a._latent[name], b._latent[name])


# ---------------------------------------------------------------------------
# API
# ---------------------------------------------------------------------------


def test_top_level_names():
    assert lpviz.Chain is engine.Chain and lpviz.fit is engine.fit and lpviz.run is engine.run
    assert lpviz.Posterior is Posterior
    assert FitResult is Posterior  # lpviz 0.1's name of what fit returns
    from lpviz import inference  # lpviz 0.1's module still gives the same objects

    assert inference.Chain is engine.Chain and inference.fit is engine.fit and inference.ChainState is ChainState


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("method", METHODS)
def test_step_and_iterate_report_the_state(model, method):
    Y = data_for(model, method)
    chain = Chain(Y, model=model, method=method, n_components=3, alpha=0.5, random_state=0)
    assert chain.iteration == 0 and np.isnan(chain.log_joint)
    states = list(chain.iterate(4))
    assert [s.iteration for s in states] == [1, 2, 3, 4] and chain.iteration == 4
    last = states[-1]
    assert isinstance(last, ChainState) and np.isfinite(last.log_joint) and last.seconds > 0
    assert last.log_joint == chain.log_joint
    assert np.isnan(last.log_marginal) == np.isnan(chain.log_marginal)
    np.testing.assert_allclose(last.mu, chain.mu)
    np.testing.assert_allclose(last.mu, models.rates(model, last.factors))
    assert last.mu.shape == Y.shape
    names = {"theta", "phi"} if model == "topics" else {"theta", "pi"}
    assert set(last.factors) == names
    assert last.factors["theta"].shape == (Y.shape[0], 3)
    # factors are copies: editing them leaves the chain alone
    last.factors["theta"][:] = -1
    assert np.all(chain.factors["theta"] > 0)
    state = chain.step(3)
    assert state.iteration == 7
    if method.startswith("private"):
        assert chain.y_latent.shape == Y.shape and chain.y_latent.min() >= 0
        if method == "private-bessel":
            assert chain.bessel_draws.shape == Y.shape and chain.bessel_draws.min() >= 0
        else:  # the collapsed sampler has no Bessel variable
            assert chain.bessel_draws is None
        np.testing.assert_array_equal(chain.alpha, np.full(Y.shape[0], 0.5))
        assert np.isfinite(chain.log_marginal)
    else:
        assert chain.y_latent is None and chain.bessel_draws is None and chain.alpha is None
    assert repr(chain) == (
        f"Chain(model={model!r}, method={chain.method!r}, n_components=3, shape={Y.shape}, iteration=7)"
    )


def test_chain_state_mu_is_computed_from_the_factors_when_read():
    factors = {"theta": np.ones((2, 1)), "phi": np.full((1, 3), 2.0)}
    state = ChainState(iteration=1, log_joint=0.0, seconds=0.1, factors=factors, model="topics")
    np.testing.assert_array_equal(state.mu, np.full((2, 3), 2.0))
    # lpviz 0.1's positional order: iteration, mu, log_joint, seconds, factors
    given = ChainState(1, np.zeros((2, 3)), 0.0, 0.1, factors)
    np.testing.assert_array_equal(given.mu, np.zeros((2, 3)))
    assert given.seconds == 0.1 and np.isnan(given.log_marginal)


# ---------------------------------------------------------------------------
# The Release face
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("method", METHODS)
def test_a_release_runs_the_same_chain_as_its_arrays(model, method):
    heldout = np.random.default_rng(4).random((12, 12 if model == "blocks" else 9)) < 0.2
    release, truth = release_for(model, heldout=heldout)
    chain = Chain(release, method=method, n_components=3, truth=truth, random_state=7)
    assert chain.model == model  # the release's kind picks the model
    chain.step(4)
    counts = truth.Y if method == "nonprivate" else release.Y_obs
    from_arrays = run_chain(counts, model, method, n_iter=4, mask=~heldout, random_state=7)
    assert_same_chain(chain, from_arrays)
    # what the chain held out, for scoring: held-out cells that exist; the cells that do not
    np.testing.assert_array_equal(chain.heldout, release.heldout_cells)
    if model == "blocks":
        np.testing.assert_array_equal(chain.structural_zeros, np.eye(12, dtype=bool))
    else:
        assert chain.structural_zeros is None


@pytest.mark.parametrize("method", ["private", "naive"])
def test_the_truth_never_reaches_a_method_that_does_not_fit_it(method):
    release, truth = release_for("topics")
    other_truth = Truth(np.full(release.shape, 7))
    a = Chain(release, method=method, n_components=3, truth=truth, random_state=2)
    b = Chain(release, method=method, n_components=3, truth=other_truth, random_state=2)
    c = Chain(release, method=method, n_components=3, random_state=2)
    for chain in (a, b, c):
        chain.step(3)
    assert_same_chain(a, b)
    assert_same_chain(a, c)


def test_release_structural_zeros_are_left_out_like_held_out_cells():
    release, _ = release_for("topics")
    zeros = np.zeros(release.shape, dtype=bool)
    zeros[[0, 3, 5], [1, 1, 8]] = True
    with_zeros = Release(Y_obs=release.Y_obs, alpha=0.5, structural_zeros=zeros)
    chain = Chain(with_zeros, method="private", n_components=3, random_state=1)
    chain.step(3)
    assert_same_chain(chain, run_chain(release.Y_obs, "topics", "private", n_iter=3, mask=~zeros, random_state=1))
    assert chain.heldout is None  # they do not exist: never scored as held out
    np.testing.assert_array_equal(chain.structural_zeros, zeros)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(alpha=0.5), ValueError, "a Release carries its own alpha and held-out cells: drop alpha="),
        (dict(mask=np.ones((12, 9), dtype=bool)), ValueError, "drop alpha= and mask="),
        (dict(method="nonprivate"), ValueError, "method='nonprivate' fits the true counts: pass truth=Truth"),
        (
            dict(method="nonprivate", truth=Truth(np.ones((3, 3), dtype=int))),
            ValueError,
            r"true counts have shape \(3, 3\) but the release \(12, 9\)",
        ),
        (dict(model="blocks"), ValueError, "model='blocks' needs a square"),
        (dict(sampler="gibbs"), ValueError, "sampler must be one of 'collapsed', 'bessel'; got 'gibbs'"),
        (
            dict(method="naive", sampler="bessel"),
            ValueError,
            "sampler='bessel' applies to methods with that option \\(private\\), not to method='naive'",
        ),
    ],
)
def test_release_misuse_is_refused_with_a_helpful_message(kwargs, error, match):
    release, _ = release_for("topics")
    arguments = dict(method="private", n_components=2)
    arguments.update(kwargs)
    with pytest.raises(error, match=match):
        Chain(release, **arguments)


def test_array_face_needs_a_model_and_takes_no_truth():
    Y = data_for("topics", "naive")
    with pytest.raises(ValueError, match="model= is required with a count matrix"):
        Chain(Y, method="naive", n_components=2)
    with pytest.raises(ValueError, match="truth= goes with a Release"):
        Chain(Y, model="topics", method="naive", n_components=2, truth=Truth(np.abs(Y)))


# ---------------------------------------------------------------------------
# Reproducibility
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("method", METHODS)
def test_same_seed_same_chain(model, method):
    Y = data_for(model, method)
    assert_same_chain(run_chain(Y, model, method, random_state=3), run_chain(Y, model, method, random_state=3))
    other = run_chain(Y, model, method, random_state=4)
    assert not np.array_equal(other.factors["theta"], run_chain(Y, model, method, random_state=3).factors["theta"])


@pytest.mark.parametrize(
    "model,method", [("topics", "private"), ("blocks", "private"), ("topics", "naive"), ("blocks", "nonprivate")]
)
def test_thread_count_and_chunking_do_not_change_the_chain(model, method, monkeypatch):
    # 210 x 200 cells: above PARALLEL_MIN_CELLS, so sweeps are split into chunks on the pool.
    Y = data_for(model, method, n_rows=210, n_cols=200, k=4, seed=5)
    chains = []
    for threads in (1, 3):
        monkeypatch.setenv("LPVIZ_NUM_THREADS", str(threads))
        monkeypatch.setattr(_parallel, "_pool", None)  # a pool with that many workers
        chain = Chain(Y, model=model, method=method, n_components=4, alpha=0.5, random_state=8)
        assert len(chain._work.bounds) == 4 * threads  # the default chunks: four per thread
        chain.step(3)
        _parallel._pool.shutdown()
        chains.append(chain)
    serial = Chain(Y, model=model, method=method, n_components=4, alpha=0.5, random_state=8, parallel=False)
    assert serial._work.bounds == [(0, 27)]  # one chunk of all 27 stream blocks, run inline
    serial.step(3)
    assert_same_chain(chains[0], chains[1])
    assert_same_chain(chains[0], serial)


_BLAS_THREADS_AFTER_A_CHAIN = """
import numpy as np
from threadpoolctl import threadpool_info
import lpviz
def blas():
    return sorted({pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"})
before = blas()
lpviz.Chain(np.ones((4, 3), dtype=int), model="topics", method="nonprivate", n_components=2, random_state=0).step()
print(before, blas(), sep=";")
"""


@pytest.mark.parametrize("setting", [None, "2", "0"])
def test_a_chain_runs_blas_on_one_thread_unless_told_otherwise(setting):
    # fresh processes: the limit is set once per process, at the first chain
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LPVIZ_BLAS", "OPENBLAS", "OMP_"))}
    if setting is not None:
        env["LPVIZ_BLAS_THREADS"] = setting
    done = subprocess.run(
        [sys.executable, "-c", _BLAS_THREADS_AFTER_A_CHAIN], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    before, after = (json.loads(part) for part in done.stdout.strip().splitlines()[-1].split(";"))
    assert len(before) == 1 and before[0] >= 1  # OpenBLAS's own default: one thread per core
    expected = {None: [1], "2": [min(2, before[0])], "0": before}[setting]
    assert after == expected


def test_a_bad_blas_thread_count_is_refused_with_the_variable_named(monkeypatch):
    monkeypatch.setattr(_parallel, "_blas_limited", False)
    monkeypatch.setenv("LPVIZ_BLAS_THREADS", "two")
    with pytest.raises(ValueError, match=r"LPVIZ_BLAS_THREADS must be a whole number >= 0, got 'two'"):
        _parallel.limit_blas_threads()
    monkeypatch.setattr(_parallel, "_blas_limited", False)
    monkeypatch.setenv("LPVIZ_BLAS_THREADS", "-1")
    with pytest.raises(ValueError, match=r"LPVIZ_BLAS_THREADS must be >= 0, got -1"):
        _parallel.limit_blas_threads()
    monkeypatch.setattr(_parallel, "_blas_limited", True)


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("method", METHODS)
def test_parallel_small_data_gives_the_serial_chain(model, method):
    # below PARALLEL_MIN_CELLS the default is one chunk; parallel=True splits anyway
    Y = data_for(model, method, n_rows=40)
    split = Chain(Y, model=model, method=method, n_components=3, alpha=0.5, random_state=6, parallel=True)
    default = Chain(Y, model=model, method=method, n_components=3, alpha=0.5, random_state=6)
    assert len(split._work.bounds) > 1 and len(default._work.bounds) == 1
    split.step(4)
    default.step(4)
    assert_same_chain(split, default)
    result = fit(
        Y, model=model, method=method, n_components=3, n_iter=4, thin=1, alpha=0.5, random_state=6, parallel=True
    )
    np.testing.assert_array_equal(result.samples[-1]["theta"], default.factors["theta"])


def test_chains_in_worker_threads_match_sequential_runs():
    runs = [(model, method) for model in MODELS for method in METHODS]
    data = {run_: data_for(*run_) for run_ in runs}
    sequential = {run_: run_chain(data[run_], *run_, n_iter=30, random_state=1) for run_ in runs}
    threaded = {}

    def work(run_):
        threaded[run_] = run_chain(data[run_], *run_, n_iter=30, random_state=1)

    threads = [threading.Thread(target=work, args=(run_,)) for run_ in runs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for run_ in runs:
        assert_same_chain(sequential[run_], threaded[run_])


# ---------------------------------------------------------------------------
# Held-out cells, structural zeros, sparse input
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("method", METHODS)
def test_held_out_cells_do_not_influence_the_chain(model, method):
    Y = data_for(model, method)
    rng = np.random.default_rng(2)
    mask = rng.random(Y.shape) > 0.25
    changed = Y.copy()
    changed[~mask] = rng.integers(0, 50, (~mask).sum())
    a = run_chain(Y, model, method, n_iter=10, mask=mask, random_state=6)
    b = run_chain(changed, model, method, n_iter=10, mask=mask, random_state=6)
    assert_same_chain(a, b)
    # ... while the same change without the mask does change it
    c = run_chain(changed, model, method, n_iter=10, random_state=6)
    assert not np.array_equal(a.factors["theta"], c.factors["theta"])
    if method.startswith("private"):
        assert np.all(a.y_latent[~mask] == 0)


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("method", METHODS)
def test_held_out_cells_of_a_release_do_not_influence_the_chain(model, method):
    heldout = np.random.default_rng(3).random((12, 12 if model == "blocks" else 9)) < 0.25
    release, truth = release_for(model, heldout=heldout)
    changed_obs = np.where(heldout, 40, release.Y_obs)
    changed = Release(Y_obs=changed_obs, alpha=release.alpha, kind=release.kind, heldout=heldout)
    changed_truth = Truth(np.where(heldout, 40, truth.Y))
    a = Chain(release, method=method, n_components=3, truth=truth, random_state=5)
    b = Chain(changed, method=method, n_components=3, truth=changed_truth, random_state=5)
    a.step(8)
    b.step(8)
    assert_same_chain(a, b)
    c = Chain(changed.with_heldout(None), method=method, n_components=3, truth=changed_truth, random_state=5)
    c.step(8)
    assert not np.array_equal(a.factors["theta"], c.factors["theta"])


@pytest.mark.parametrize("method", METHODS)
def test_block_model_ignores_self_loops(method):
    Y = data_for("blocks", method)
    looped = Y.copy()
    np.fill_diagonal(looped, 40)
    a = run_chain(Y, "blocks", method, random_state=2)
    assert_same_chain(a, run_chain(looped, "blocks", method, random_state=2))
    assert np.all(np.diag(a.mu) == 0)
    if method.startswith("private"):
        assert np.all(np.diag(a.y_latent) == 0)


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("method", METHODS)
def test_sparse_input_gives_the_dense_chain(model, method):
    Y = data_for(model, method)
    assert_same_chain(
        run_chain(Y, model, method, random_state=9), run_chain(sp.csr_matrix(Y), model, method, random_state=9)
    )


# ---------------------------------------------------------------------------
# The log joint
# ---------------------------------------------------------------------------


def _brute_force_log_joint(chain, Y_obs, mask, counts):
    factors = chain.factors
    observed = mask.copy()
    if chain.model == "blocks":
        np.fill_diagonal(observed, False)
    value = stats.poisson.logpmf(counts, chain.mu)[observed].sum()
    value += sum(stats.gamma.logpdf(f, chain.a0, scale=1 / chain.b0).sum() for f in factors.values())
    if chain.method == "private":
        tau = Y_obs - chain.y_latent
        value += geometric_logpmf(tau, chain.alpha[:, None] * np.ones(tau.shape))[observed].sum()
    return value


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("method", METHODS)
def test_log_joint_matches_brute_force(model, method):
    Y = data_for(model, method)
    mask = np.random.default_rng(3).random(Y.shape) > 0.2
    chain = run_chain(Y, model, method, n_iter=7, mask=mask, random_state=5)
    counts = {"private": chain.y_latent, "private-bessel": chain.y_latent, "naive": np.maximum(Y, 0), "nonprivate": Y}[
        method
    ]
    assert chain.log_joint == pytest.approx(_brute_force_log_joint(chain, Y, mask, counts), rel=1e-9)


def test_per_row_alpha_enters_the_log_joint_row_by_row():
    Y = data_for("topics", "private")
    alpha = np.linspace(0.1, 0.8, Y.shape[0])
    chain = Chain(Y, model="topics", method="private", n_components=3, alpha=alpha, random_state=1)
    chain.step(5)
    np.testing.assert_array_equal(chain.alpha, alpha)
    mask = np.ones(Y.shape, dtype=bool)
    assert chain.log_joint == pytest.approx(_brute_force_log_joint(chain, Y, mask, chain.y_latent), rel=1e-9)


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("rows", ["sparse", "dense", "bessel"])
def test_log_marginal_is_the_sum_of_the_cells_marginals_at_the_starting_factors(model, rows, monkeypatch):
    # per-row alpha, held-out cells and (blocks) the diagonal; every row sparse, or none
    from lpviz import collapsed
    from lpviz.methods import private

    monkeypatch.setattr(private, "SPARSE_MAX_SKIP_SHARE", 1.0 if rows == "sparse" else -1.0)
    monkeypatch.setattr(private, "SPARSE_MIN_COLUMNS", 0)  # the sparse step even on narrow rows
    Y = data_for(model, "private", n_rows=30, n_cols=30 if model == "blocks" else 25, seed=4)
    mask = np.random.default_rng(5).random(Y.shape) > 0.15
    alpha = np.linspace(0.2, 0.7, Y.shape[0])
    chain = Chain(
        Y,
        model=model,
        method="private",
        n_components=3,
        alpha=alpha,
        mask=mask,
        random_state=2,
        sampler="bessel" if rows == "bessel" else "collapsed",
    )
    if rows != "bessel":
        assert chain._latent["use_row"].all() == (rows == "sparse") and chain._latent["use_row"].any() == (
            rows == "sparse"
        )
    observed = mask.copy()
    if model == "blocks":
        np.fill_diagonal(observed, False)
    for _ in range(3):
        mu = chain.mu
        chain.step()
        cells = collapsed.log_marginal(Y, mu, alpha[:, None] * np.ones(Y.shape))
        assert chain.log_marginal == pytest.approx(cells[observed].sum(), rel=1e-11)


# ---------------------------------------------------------------------------
# Stopping
# ---------------------------------------------------------------------------


def test_stop_from_another_thread_ends_the_running_step():
    # a biggish problem: each iteration takes a while, and step() is asked for a million of them
    Y = data_for("topics", "private", n_rows=600, n_cols=500, k=10, seed=3)
    chain = Chain(Y, model="topics", method="private", n_components=10, alpha=0.5, random_state=0)
    outcome = []

    def work():
        try:
            chain.step(10**6)
            outcome.append("finished")
        except ChainStopped as error:
            outcome.append(error)

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    deadline = time.monotonic() + 120
    while chain.iteration < 2 and time.monotonic() < deadline:
        time.sleep(0.005)
    assert chain.iteration >= 2, "the chain did not start"
    chain.stop()
    worker.join(timeout=60)  # a bound so a broken stop fails instead of hanging the suite
    assert not worker.is_alive(), "stop() did not end the running step"
    assert len(outcome) == 1 and isinstance(outcome[0], ChainStopped)
    stopped_at = chain.iteration
    with pytest.raises(ChainStopped, match="start a new chain"):
        chain.step()
    with pytest.raises(ChainStopped):
        next(chain.iterate(3))
    assert chain.iteration == stopped_at


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("method", METHODS)
def test_a_stop_during_the_sweep_leaves_the_kernels_at_once(model, method):
    # the stop request arrives from another thread once the iteration is under way
    Y = data_for(model, method, n_rows=240, n_cols=200, seed=1)
    chain = Chain(Y, model=model, method=method, n_components=3, alpha=0.5, random_state=0, parallel=True)
    chain.step()
    factors = chain.factors
    latent = {name: array.copy() for name, array in (chain._latent or {}).items() if isinstance(array, np.ndarray)}
    sweep = chain.method_instance.sweep

    def sweep_stopped_by_another_thread(*args):
        stopper = threading.Thread(target=chain.stop)
        stopper.start()
        stopper.join()
        return sweep(*args)

    chain.method_instance.sweep = sweep_stopped_by_another_thread
    with pytest.raises(ChainStopped, match="stopped during the sweep"):
        chain.step()
    assert chain.iteration == 1
    # no kernel visited a row (every visited cell would have new noise rates), no factor was drawn
    for name, array in latent.items():
        if name != "posterior_scale":
            np.testing.assert_array_equal(chain._latent[name], array)
    for name, value in factors.items():
        np.testing.assert_array_equal(chain.factors[name], value)
    with pytest.raises(ChainStopped):
        chain.step()


def test_run_stop_stops_its_chain():
    release, _ = release_for("topics")
    chain_run = run(release, n_components=3, n_iter=50, thin=1, burn_in=0, random_state=0)
    next(chain_run)
    chain_run.stop()
    with pytest.raises(ChainStopped):
        next(chain_run)
    assert chain_run.posterior.iterations == 1


# ---------------------------------------------------------------------------
# Huge counts: the allocation is O(K) per cell whatever the count
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("method", METHODS)
def test_counts_of_a_trillion_run(model, method):
    # 10^12 tokens per cell: a token-by-token allocation would never finish.
    # (Its speed is measured in benchmarks; its law is tested in test_models.)
    Y = np.full((5, 5), 10**12, dtype=np.int64)
    observed = np.ones((5, 5), dtype=bool)
    if model == "blocks":
        np.fill_diagonal(Y, 0)
        np.fill_diagonal(observed, False)
    chain = Chain(Y, model=model, method=method, n_components=3, alpha=0.5, random_state=0)
    state = chain.step(10)
    assert np.isfinite(state.log_joint)
    if method.startswith("private"):
        # noise at alpha = 0.5 is a few units: once the rates have settled near the counts (the
        # collapsed sampler's first sweeps follow rates far off, exactly as its conditional says),
        # the latent true counts are the counts, give or take
        assert np.all(np.abs(chain.y_latent[observed] - 10**12) < 1000)
    # the factor update conserves the allocated total: the rates add up to the counts
    assert state.mu[observed].sum() == pytest.approx(Y.sum(), rel=1e-4)


# ---------------------------------------------------------------------------
# run, fit and the Posterior
# ---------------------------------------------------------------------------


def test_fit_saves_thinned_samples_after_burn_in():
    Y = data_for("topics", "private")
    calls = []
    result = fit(
        Y,
        model="topics",
        method="private",
        n_components=3,
        n_iter=60,
        thin=10,
        alpha=0.5,
        random_state=0,
        callback=calls.append,
    )
    assert isinstance(result, FitResult)
    assert result.saved_iterations == [20, 30, 40, 50, 60]  # burn_in defaults to 60 // 6 = 10
    assert len(result.samples) == 5 and result.log_joint.shape == (60,) and result.iterations == 60
    assert [s.iteration for s in calls] == list(range(1, 61))
    np.testing.assert_allclose(result.log_joint, [s.log_joint for s in calls])
    np.testing.assert_allclose(result.mu_hat, np.mean([models.rates("topics", s) for s in result.samples], axis=0))
    saved_log_joint = result.log_joint[np.array(result.saved_iterations) - 1]
    assert result.best_log_joint == saved_log_joint.max()
    best = int(np.argmax(saved_log_joint))
    np.testing.assert_array_equal(result.best["phi"], result.samples[best]["phi"])
    assert result.best_iteration == result.saved_iterations[best]
    assert (result.model, result.method, result.n_components) == ("topics", "private", 3)
    assert result.seconds == pytest.approx(sum(s.seconds for s in calls)) and result.seconds > 0
    np.testing.assert_allclose(result.iteration_seconds, [s.seconds for s in calls])
    # fit runs the same chain as Chain with the same seed
    chain = Chain(Y, model="topics", method="private", n_components=3, alpha=0.5, random_state=0)
    chain.step(60)
    np.testing.assert_array_equal(chain.factors["theta"], result.samples[-1]["theta"])


def test_run_yields_each_state_and_feeds_the_posterior_fit_returns():
    release, truth = release_for("blocks")
    chain_run = run(release, n_components=3, n_iter=12, thin=4, random_state=3)
    assert isinstance(chain_run, Run) and chain_run.posterior.mu_hat is None  # nothing saved yet
    states = list(chain_run)
    assert [s.iteration for s in states] == list(range(1, 13))
    assert list(chain_run) == []  # done after n_iter
    posterior = chain_run.posterior
    assert posterior.saved_iterations == [6, 10] and posterior.burn_in == 2
    fitted = fit(release, n_components=3, n_iter=12, thin=4, random_state=3)
    np.testing.assert_array_equal(posterior.mu_hat, fitted.mu_hat)
    np.testing.assert_array_equal(posterior.log_joint, [s.log_joint for s in states])
    assert np.all(np.diag(posterior.mu_hat) == 0)  # the model's structural zeros
    assert repr(posterior) == "Posterior(model='blocks', method='private', shape=(12, 12), iterations=12, saved=2)"


@pytest.mark.parametrize("model", MODELS)
def test_posterior_mean_by_row_blocks_equals_the_running_sum(model, monkeypatch):
    # matrices above DENSE_MEAN_MAX_CELLS keep only the samples and compute rates by rows
    release, _ = release_for(model)
    dense = fit(release, n_components=3, n_iter=20, thin=3, random_state=4)
    monkeypatch.setattr(engine, "DENSE_MEAN_MAX_CELLS", 0)
    by_rows = fit(release, n_components=3, n_iter=20, thin=3, random_state=4)
    assert by_rows._rate_sum is None and dense._rate_sum is not None
    np.testing.assert_allclose(by_rows.mu_hat, dense.mu_hat, rtol=1e-12)
    np.testing.assert_allclose(by_rows.rate_rows(3, 7), dense.mu_hat[3:7], rtol=1e-12)


@pytest.mark.parametrize("model", MODELS)
def test_a_rows_rates_are_the_same_bits_in_any_block_of_rows(model, monkeypatch):
    """Rates from the saved samples by blocks of rows (the score's blocks, a cluster's partitions) are the
    bits of the same rows in one block: BLAS's products follow the block's shape (this machine's
    OpenBLAS gave rows 13-40 of a 45-actor network other last bits in one block than in three, and
    the block chain over 3 workers was no longer one process's)."""
    release, _ = release_for(model)
    monkeypatch.setattr(engine, "DENSE_MEAN_MAX_CELLS", 0)
    posterior = fit(release, n_components=3, n_iter=20, thin=3, random_state=4)
    n_rows = release.shape[0]
    whole = posterior.rate_rows(0, n_rows)
    for cuts in ([0, 1, n_rows], [0, 2, 5, n_rows - 1, n_rows], list(range(n_rows + 1))):
        pieces = [posterior.rate_rows(start, stop) for start, stop in zip(cuts[:-1], cuts[1:], strict=True)]
        assert np.array_equal(np.concatenate(pieces), whole), cuts


def test_posterior_save_writes_the_fit_schema(tmp_path):
    heldout = np.zeros((12, 12), dtype=bool)
    heldout[2, :] = heldout[:, 2] = True
    Y, Y_obs, _ = synthetic("blocks")
    labels = [f"actor {i}" for i in range(12)]
    release = Release(Y_obs=Y_obs, alpha=0.5, kind="network", heldout=heldout, row_labels=labels, col_labels=labels)
    posterior = fit(release, n_components=3, n_iter=15, thin=5, random_state=0)
    path = posterior.save(tmp_path / "private.npz", release)
    with np.load(path, allow_pickle=False) as saved:
        assert str(saved["format"]) == engine.FIT_FORMAT
        assert (str(saved["model"]), str(saved["method"]), int(saved["n_components"])) == ("blocks", "private", 3)
        assert str(saved["method_label"]) == "private (models the noise)"
        np.testing.assert_array_equal(saved["mu_hat"], posterior.mu_hat)
        np.testing.assert_array_equal(saved["heldout"], heldout & ~np.eye(12, dtype=bool))
        np.testing.assert_array_equal(saved["structural_zeros"], np.eye(12, dtype=bool))
        assert saved["row_labels"].tolist() == labels and saved["col_labels"].tolist() == labels
        for trace in ("log_joint", "log_marginal", "iteration_seconds"):
            np.testing.assert_array_equal(saved[trace], getattr(posterior, trace))
        assert saved["saved_iterations"].tolist() == [7, 12]
        assert int(saved["best_iteration"]) == posterior.best_iteration
        assert float(saved["best_log_joint"]) == posterior.best_log_joint
        np.testing.assert_array_equal(saved["best_theta"], posterior.best["theta"])
        np.testing.assert_array_equal(saved["best_pi"], posterior.best["pi"])
    with pytest.raises(FileExistsError, match="overwrite=True"):
        posterior.save(path, release)
    empty = run(release, n_components=3, n_iter=15, thin=5, random_state=0).posterior
    with pytest.raises(ValueError, match="no saved sample yet"):
        empty.save(tmp_path / "empty.npz")


def test_private_fit_beats_naive_under_strong_noise():
    """The paper's point: the naive fit treats truncated noise as signal."""
    rng = np.random.default_rng(3)
    mu = models.rates("topics", {"theta": rng.gamma(0.3, 2.0, (60, 3)), "phi": rng.gamma(0.3, 2.0, (3, 15))})
    alpha = np.exp(-0.5)
    Y_obs = privatize(rng.poisson(mu), alpha=alpha, random_state=4).Y_obs
    errors = {}
    for method in ("private", "naive"):
        result = fit(
            Y_obs, model="topics", method=method, n_components=3, n_iter=600, thin=10, alpha=alpha, random_state=2
        )
        errors[method] = np.abs(result.mu_hat - mu).mean()
    assert errors["private"] < 0.75 * errors["naive"], errors


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        (dict(n_iter=0), ValueError, "n_iter must be >= 1"),
        (dict(n_iter=10, burn_in=5, thin=10), ValueError, "no sample would be saved"),
        (dict(thin=0), ValueError, "thin must be >= 1"),
        (dict(burn_in=-1), ValueError, "burn_in must be >= 0"),
        (dict(n_iter=2.5), TypeError, "n_iter must be an integer"),
        (dict(callback=3), TypeError, "callback must be callable"),
    ],
)
def test_fit_rejects_bad_schedules(kwargs, error, match):
    with pytest.raises(error, match=match):
        fit(np.ones((3, 3), dtype=int), model="topics", method="nonprivate", n_components=2, **kwargs)


# ---------------------------------------------------------------------------
# Input checks
# ---------------------------------------------------------------------------

GOOD = np.array([[1, 0, 2], [0, 3, 1], [2, 1, 0]])


@pytest.mark.parametrize(
    "Y,kwargs,error,match",
    [
        (GOOD, dict(model="lda"), ValueError, "model must be one of 'topics', 'blocks'"),
        (GOOD, dict(method="fancy"), ValueError, "method must be one of 'private', 'naive', 'nonprivate'"),
        (GOOD, dict(n_components=0), ValueError, "n_components must be >= 1"),
        (GOOD, dict(n_components=2.5), TypeError, "n_components must be an integer"),
        (GOOD, dict(a0=0), ValueError, "a0 must be a finite number > 0"),
        (GOOD, dict(b0=float("nan")), ValueError, "b0 must be a finite number > 0"),
        (GOOD.astype(float) + 0.5, {}, ValueError, "non-integer"),
        (np.where(GOOD > 1, np.nan, GOOD), dict(mask=GOOD <= 1), ValueError, "NaN.*held-out cells.*False in mask"),
        (GOOD.astype(bool), {}, TypeError, "integer counts"),
        (np.array(["a", "b"]), {}, TypeError, "integer counts"),
        (np.arange(4), {}, ValueError, "at least two modes"),
        (np.zeros((0, 3), dtype=int), {}, ValueError, "empty"),
        (-GOOD, dict(method="nonprivate"), ValueError, "negative entries.*method='private'"),
        (GOOD[:, :2], dict(model="blocks"), ValueError, "square"),
        (GOOD, dict(method="private", alpha=None), ValueError, "needs the noise level: pass alpha"),
        (GOOD, dict(method="private", alpha=1.0), ValueError, "strictly between 0 and 1"),
        (GOOD, dict(method="private", alpha="0.5x"), TypeError, "alpha must be a number in \\(0, 1\\)"),
        (GOOD, dict(method="private", alpha=[0.5, 0.5]), ValueError, "one value per row \\(3\\)"),
        (GOOD, dict(mask=np.ones((3, 3))), TypeError, "mask must be a boolean array"),
        (GOOD, dict(mask=np.ones((2, 3), dtype=bool)), ValueError, "mask has shape"),
        (GOOD, dict(mask=np.zeros((3, 3), dtype=bool)), ValueError, "no observed cell"),
        (GOOD, dict(model="blocks", mask=np.eye(3, dtype=bool)), ValueError, "no observed cell"),
    ],
)
def test_bad_input_is_rejected_with_a_helpful_message(Y, kwargs, error, match):
    arguments = dict(model="topics", method="naive", n_components=2, alpha=0.5)
    arguments.update(kwargs)
    with pytest.raises(error, match=match):
        Chain(Y, **arguments)


def test_float_integer_counts_and_negative_noised_counts_are_accepted():
    chain = Chain(GOOD.astype(float) - 1, model="topics", method="private", n_components=2, alpha=0.4)
    assert np.isfinite(chain.step().log_joint)
    chain = Chain(GOOD - 1, model="topics", method="naive", n_components=2)
    assert np.isfinite(chain.step().log_joint)


def test_step_and_iterate_check_their_counts():
    chain = Chain(GOOD, model="topics", method="naive", n_components=2)
    with pytest.raises(ValueError, match="n must be >= 1"):
        chain.step(0)
    with pytest.raises(ValueError, match="n_iter must be >= 0"):
        chain.iterate(-1)
    with pytest.raises(TypeError, match="n_iter must be an integer"):
        chain.iterate(2.5)
    assert list(chain.iterate(0)) == [] and chain.iteration == 0


def test_input_arrays_are_not_modified():
    Y = GOOD - 1
    before = Y.copy()
    mask = np.ones(Y.shape, dtype=bool)
    alpha = np.full(3, 0.5)
    run_chain(Y, "blocks", "private", mask=mask)
    run_chain(Y, "topics", "naive", mask=mask)
    Chain(Y, model="topics", method="private", n_components=2, alpha=alpha, mask=mask).step(3)
    sparse = sp.csr_matrix(Y)
    run_chain(sparse, "topics", "private")
    np.testing.assert_array_equal(Y, before)
    np.testing.assert_array_equal(sparse.toarray(), before)
    assert mask.all() and np.all(alpha == 0.5)


def test_a_run_whose_samples_would_not_fit_is_refused_before_it_starts(monkeypatch):
    from lpviz.budget import MemoryBudgetError

    Y = data_for("topics", "nonprivate")
    monkeypatch.setenv("LPVIZ_MEMORY_LIMIT", "64MiB")
    with pytest.raises(MemoryBudgetError, match=r"200,000 iterations saving 200,000 samples .* thin = [\d,]+ or"):
        run(Y, model="topics", method="nonprivate", n_components=3, n_iter=200_000, burn_in=0, thin=1)
    run(Y, model="topics", method="nonprivate", n_components=3, n_iter=200_000, burn_in=0, thin=100)  # fits


def test_posterior_bytes_is_what_a_posterior_holds():
    import tracemalloc

    Y = data_for("topics", "nonprivate", n_rows=40, n_cols=30)
    chain_run = run(
        Y, model="topics", method="nonprivate", n_components=3, n_iter=3000, burn_in=0, thin=1, random_state=0
    )
    next(chain_run)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in chain_run:
            pass
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    estimate = engine.posterior_bytes(chain_run.chain.model_instance, Y.shape, 2999, 0, 1)
    assert 0.7 * held <= estimate <= 1.5 * held, (estimate, held)


# ---------------------------------------------------------------------------
# Construction: no dense temporary larger than the counts
# ---------------------------------------------------------------------------


def _construction_peak(make_chain):
    """Bytes numpy allocated at the peak while ``make_chain()`` ran, beyond what it started with."""
    import tracemalloc

    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        chain = make_chain()
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    return chain, peak


def test_a_variational_posterior_makes_no_rows_x_columns_array():
    """A CAVI fit's posterior keeps one mean (rates by row blocks when asked), not a running sum of
    rates: made for 2,000 x 2,000 it allocates no rows x columns array (it made the chain's 32 MB of
    zeros and dropped them: the largest allocation of a block CAVI fit's driver over a cluster, 72 MB
    of its 92 MB peak at 3,000 actors); a chain's posterior still keeps its running sum."""
    from lpviz import methods

    shape, model, method = (2000, 2000), models.create("blocks", 10), methods.create("private")
    posterior, peak = _construction_peak(lambda: engine.VariationalPosterior(model, method, shape))
    assert posterior._rate_sum is None
    assert peak < 8 * shape[1]  # not a row of rates
    chain_posterior, chain_peak = _construction_peak(lambda: Posterior(model, method, shape, burn_in=0, thin=1))
    assert chain_posterior._rate_sum.shape == shape and chain_peak >= 8 * shape[0] * shape[1]


@pytest.mark.parametrize("method", ["private", "naive"])
@pytest.mark.parametrize("dtype", [np.int16, np.uint16, np.float64])
def test_a_chain_is_built_without_a_dense_copy_of_the_counts(method, dtype, monkeypatch):
    # 1,000 x 1,000 noised counts at eps/N = 1: an int64 copy of them alone would take 8 bytes a cell;
    # blocks of rows checked or converted at once are made small beside the matrix here
    from lpviz.methods import base

    monkeypatch.setattr(engine, "CHECK_BLOCK_CELLS", 1 << 15)
    monkeypatch.setattr(base, "CSR_BLOCK_CELLS", 1 << 15)
    rng = np.random.default_rng(0)
    Y = rng.poisson(0.5, (1000, 1000)) + rng.geometric(0.63, (1000, 1000)) - rng.geometric(0.63, (1000, 1000))
    if np.dtype(dtype).kind == "u":
        Y = np.maximum(Y, 0)
    Y = Y.astype(dtype)
    Y_copy = Y.copy()
    engine.Chain(Y[:8, :8].copy(), model="topics", method=method, n_components=2, alpha=0.4)  # kernels loaded
    chain, peak = _construction_peak(
        lambda: engine.Chain(Y, model="topics", method=method, n_components=5, alpha=0.4, random_state=0)
    )
    np.testing.assert_array_equal(Y, Y_copy)  # the user's array is left as it was
    # what the chain keeps: the private method its counts in their smallest type (1 byte here) and the
    # columns of the positive cells of sparse rows (4 bytes each); the naive method the CSR of its
    # positive counts (16 bytes each); with float input the converted counts once more
    positive = float(np.mean(Y > 0))
    kept = 1 + 4 * positive if method == "private" else 16 * positive
    assert peak / Y.size < kept + 1.5 + (1 if dtype is np.float64 else 0), f"{peak / Y.size:.2f} bytes a cell"
    chain.step()
    assert np.isfinite(chain.log_joint)
