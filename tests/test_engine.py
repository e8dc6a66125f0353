"""Chain and fit: the public API, reproducibility, masks, input checks, log joint."""

import threading

import numba
import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats

import lpviz
from lpviz import inference, models
from lpviz.inference import Chain, ChainState, FitResult, fit
from lpviz.privacy import geometric_logpmf, privatize

MODELS = ["topics", "blocks"]
METHODS = ["private", "naive", "nonprivate"]


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
    return Y, privatize(Y, alpha=0.5, random_state=seed + 1), mu


def data_for(model, method, **kwargs):
    Y, Y_obs, _ = synthetic(model, **kwargs)
    return Y if method == "nonprivate" else Y_obs


def run(Y, model, method, n_iter=5, **kwargs):
    chain = Chain(Y, model=model, method=method, n_components=3, alpha=0.5, **kwargs)
    chain.step(n_iter)
    return chain


def assert_same_chain(a, b):
    assert a.log_joint == b.log_joint
    for name, value in a.factors.items():
        np.testing.assert_array_equal(value, b.factors[name])
    if a.method == "private":
        np.testing.assert_array_equal(a.y_latent, b.y_latent)
        np.testing.assert_array_equal(a._lambda_plus, b._lambda_plus)


# ---------------------------------------------------------------------------
# API
# ---------------------------------------------------------------------------

def test_top_level_names():
    assert lpviz.Chain is Chain and lpviz.fit is fit


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
    if method == "private":
        assert chain.y_latent.shape == Y.shape and chain.y_latent.min() >= 0
        assert chain.bessel_draws.shape == Y.shape and chain.bessel_draws.min() >= 0
        np.testing.assert_array_equal(chain.alpha, np.full(Y.shape[0], 0.5))
    else:
        assert chain.y_latent is None and chain.bessel_draws is None and chain.alpha is None


def test_chain_state_mu_is_computed_from_the_factors_when_read():
    factors = {"theta": np.ones((2, 1)), "phi": np.full((1, 3), 2.0)}
    state = ChainState(iteration=1, log_joint=0.0, seconds=0.1, factors=factors, model="topics")
    np.testing.assert_array_equal(state.mu, np.full((2, 3), 2.0))
    given = ChainState(1, np.zeros((2, 3)), 0.0, 0.1, factors)
    np.testing.assert_array_equal(given.mu, np.zeros((2, 3)))


# ---------------------------------------------------------------------------
# Reproducibility
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("method", METHODS)
def test_same_seed_same_chain(model, method):
    Y = data_for(model, method)
    assert_same_chain(run(Y, model, method, random_state=3), run(Y, model, method, random_state=3))
    other = run(Y, model, method, random_state=4)
    assert not np.array_equal(other.factors["theta"], run(Y, model, method, random_state=3).factors["theta"])


@pytest.mark.parametrize("model,method", [("topics", "private"), ("blocks", "private"), ("topics", "naive")])
def test_thread_count_and_kernel_choice_do_not_change_the_chain(model, method):
    # 210 x 210 cells: above PARALLEL_MIN_CELLS, so the parallel kernels run.
    Y = data_for(model, method, n_rows=210, n_cols=200, k=4, seed=5)
    previous = numba.get_num_threads()
    try:
        chains = []
        for threads in (1, 2):
            numba.set_num_threads(threads)
            chain = Chain(Y, model=model, method=method, n_components=4, alpha=0.5, random_state=8)
            assert chain._parallel
            chain.step(3)
            chains.append(chain)
    finally:
        numba.set_num_threads(previous)
    serial = Chain(Y, model=model, method=method, n_components=4, alpha=0.5, random_state=8)
    serial._kernels = models.kernels(parallel=False)
    serial._parallel = False
    serial.step(3)
    assert_same_chain(chains[0], chains[1])
    assert_same_chain(chains[0], serial)


def test_chains_in_worker_threads_match_sequential_runs():
    runs = [(model, method) for model in MODELS for method in METHODS]
    data = {run_: data_for(*run_) for run_ in runs}
    sequential = {run_: run(data[run_], *run_, n_iter=30, random_state=1) for run_ in runs}
    threaded = {}

    def work(run_):
        threaded[run_] = run(data[run_], *run_, n_iter=30, random_state=1)

    threads = [threading.Thread(target=work, args=(run_,)) for run_ in runs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for run_ in runs:
        assert_same_chain(sequential[run_], threaded[run_])


# ---------------------------------------------------------------------------
# Masks, diagonal, sparse input
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("method", METHODS)
def test_held_out_cells_do_not_influence_the_chain(model, method):
    Y = data_for(model, method)
    rng = np.random.default_rng(2)
    mask = rng.random(Y.shape) > 0.25
    changed = Y.copy()
    changed[~mask] = rng.integers(0, 50, (~mask).sum())
    a = run(Y, model, method, n_iter=10, mask=mask, random_state=6)
    b = run(changed, model, method, n_iter=10, mask=mask, random_state=6)
    assert_same_chain(a, b)
    # ... while the same change without the mask does change it
    c = run(changed, model, method, n_iter=10, random_state=6)
    assert not np.array_equal(a.factors["theta"], c.factors["theta"])
    if method == "private":
        assert np.all(a.y_latent[~mask] == 0)


@pytest.mark.parametrize("method", METHODS)
def test_block_model_ignores_self_loops(method):
    Y = data_for("blocks", method)
    looped = Y.copy()
    np.fill_diagonal(looped, 40)
    assert_same_chain(run(Y, "blocks", method, random_state=2), run(looped, "blocks", method, random_state=2))
    assert np.all(np.diag(run(Y, "blocks", method, random_state=2).mu) == 0)


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("method", METHODS)
def test_sparse_input_gives_the_dense_chain(model, method):
    Y = data_for(model, method)
    assert_same_chain(run(Y, model, method, random_state=9), run(sp.csr_matrix(Y), model, method, random_state=9))


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
    chain = run(Y, model, method, n_iter=7, mask=mask, random_state=5)
    counts = {"private": chain.y_latent, "naive": np.maximum(Y, 0), "nonprivate": Y}[method]
    assert chain.log_joint == pytest.approx(_brute_force_log_joint(chain, Y, mask, counts), rel=1e-9)


# ---------------------------------------------------------------------------
# fit
# ---------------------------------------------------------------------------

def test_fit_saves_thinned_samples_after_burn_in():
    Y = data_for("topics", "private")
    calls = []
    result = fit(Y, model="topics", method="private", n_components=3, n_iter=60, thin=10,
                 alpha=0.5, random_state=0, callback=calls.append)
    assert isinstance(result, FitResult)
    assert result.saved_iterations == [20, 30, 40, 50, 60]  # burn_in defaults to 60 // 6 = 10
    assert len(result.samples) == 5 and result.log_joint.shape == (60,)
    assert [s.iteration for s in calls] == list(range(1, 61))
    np.testing.assert_allclose(result.log_joint, [s.log_joint for s in calls])
    np.testing.assert_allclose(result.mu_hat, np.mean([models.rates("topics", s) for s in result.samples], axis=0))
    saved_log_joint = result.log_joint[np.array(result.saved_iterations) - 1]
    assert result.best_log_joint == saved_log_joint.max()
    best = int(np.argmax(saved_log_joint))
    np.testing.assert_array_equal(result.best["phi"], result.samples[best]["phi"])
    assert (result.model, result.method, result.n_components) == ("topics", "private", 3)
    assert result.seconds > 0
    # fit runs the same chain as Chain with the same seed
    chain = Chain(Y, model="topics", method="private", n_components=3, alpha=0.5, random_state=0)
    chain.step(60)
    np.testing.assert_array_equal(chain.factors["theta"], result.samples[-1]["theta"])


def test_private_fit_beats_naive_under_strong_noise():
    """The paper's point: the naive fit treats truncated noise as signal."""
    rng = np.random.default_rng(3)
    mu = models.rates("topics", {"theta": rng.gamma(0.3, 2.0, (60, 3)), "phi": rng.gamma(0.3, 2.0, (3, 15))})
    alpha = np.exp(-0.5)
    Y_obs = privatize(rng.poisson(mu), alpha=alpha, random_state=4)
    errors = {}
    for method in ("private", "naive"):
        result = fit(Y_obs, model="topics", method=method, n_components=3, n_iter=600, thin=10,
                     alpha=alpha, random_state=2)
        errors[method] = np.abs(result.mu_hat - mu).mean()
    assert errors["private"] < 0.75 * errors["naive"], errors


@pytest.mark.parametrize("kwargs,error,match", [
    (dict(n_iter=0), ValueError, "n_iter must be >= 1"),
    (dict(n_iter=10, burn_in=5, thin=10), ValueError, "no sample would be saved"),
    (dict(thin=0), ValueError, "thin must be >= 1"),
    (dict(burn_in=-1), ValueError, "burn_in must be >= 0"),
    (dict(callback=3), TypeError, "callback must be callable"),
])
def test_fit_rejects_bad_schedules(kwargs, error, match):
    with pytest.raises(error, match=match):
        fit(np.ones((3, 3), dtype=int), model="topics", method="nonprivate", n_components=2, **kwargs)


# ---------------------------------------------------------------------------
# Input checks
# ---------------------------------------------------------------------------

GOOD = np.array([[1, 0, 2], [0, 3, 1], [2, 1, 0]])


@pytest.mark.parametrize("Y,kwargs,error,match", [
    (GOOD, dict(model="lda"), ValueError, "model must be one of"),
    (GOOD, dict(method="fancy"), ValueError, "method must be one of"),
    (GOOD, dict(n_components=0), ValueError, "n_components must be >= 1"),
    (GOOD, dict(n_components=2.5), TypeError, "n_components must be an integer"),
    (GOOD, dict(a0=0), ValueError, "a0 must be a positive"),
    (GOOD, dict(b0=float("nan")), ValueError, "b0 must be a positive"),
    (GOOD.astype(float) + 0.5, {}, ValueError, "non-integer"),
    (np.where(GOOD > 1, np.nan, GOOD), dict(mask=GOOD <= 1), ValueError, "NaN.*held-out cells.*False in mask"),
    (GOOD.astype(bool), {}, TypeError, "integer counts"),
    (np.array(["a", "b"]), {}, TypeError, "integer counts"),
    (np.arange(4), {}, ValueError, "2-D"),
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
])
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
    run(Y, "blocks", "private", mask=mask)
    run(Y, "topics", "naive", mask=mask)
    np.testing.assert_array_equal(Y, before)
    assert mask.all()

