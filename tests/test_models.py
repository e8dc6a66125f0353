"""The models (lpviz.models) against brute force: the registry, the exact
multinomial allocation, allocations to components, the factors' gamma
conditionals over observed cells only, log likelihoods and rates.

The private method's per-cell steps (true counts and noise rates) are in
test_methods.py.
"""

import numpy as np
import pytest
import scipy.sparse as sp
from _checks import P_ACCEPT, chi_square_pvalue
from numba import njit
from scipy import stats

from lpviz import models
from lpviz._parallel import chunk_bounds, new_stop_flag
from lpviz._random import seed_state, seed_stream
from lpviz.engine import _lists
from lpviz.models import Work, _kernels, blocks, topics
from lpviz.models._kernels import multinomial

# ---------------------------------------------------------------------------
# Helpers: the work plan a chain hands its model, built by hand
# ---------------------------------------------------------------------------


def make_work(shape, missing=None, seed=0, parallel=False):
    """The :class:`Work` a chain builds: ``missing`` (True = left out of the likelihood)."""
    n_rows, n_cols = shape
    n_cells = n_rows * n_cols
    return Work(
        bounds=chunk_bounds(n_rows, n_cells, parallel),
        column_bounds=chunk_bounds(n_cols, n_cells, parallel),
        parallel=parallel,
        stop=new_stop_flag(),
        chain_seed=seed,
        missing_by_row=_lists(missing, n_rows),
        missing_by_column=_lists(None if missing is None else missing.T, n_cols),
    )


def csr(Y):
    matrix = sp.csr_matrix(np.asarray(Y))
    matrix.eliminate_zeros()
    return matrix.indptr.astype(np.int64), matrix.indices.astype(np.int64), matrix.data.astype(np.int64)


def one_cell(shape, row, col, count):
    Y = np.zeros(shape, dtype=np.int64)
    Y[row, col] = count
    return csr(Y)


def missing_lists(missing, by="row"):
    """(indptr, indices) of the True cells of ``missing``, by row or by column."""
    return _lists(missing if by == "row" else missing.T, missing.shape[0 if by == "row" else 1])


# ---------------------------------------------------------------------------
# The registry
# ---------------------------------------------------------------------------


def test_registry_names_classes_and_defaults():
    assert list(models.MODELS) == ["topics", "blocks", "tensor"]
    assert models.get("topics") is topics.TopicModel and models.get("blocks") is blocks.BlockModel
    assert models.default_for("documents") == "topics" and models.default_for("network") == "blocks"
    model = models.create("blocks", 4, a0=0.3, b0=2.0)
    assert isinstance(model, blocks.BlockModel) and (model.n_components, model.a0, model.b0) == (4, 0.3, 2.0)
    assert models.create(model, 9) is model  # an instance is used as given
    assert repr(model) == "BlockModel(n_components=4, a0=0.3, b0=2.0)"
    for name, model_class in models.MODELS.items():
        assert model_class.name == name and model_class.label and model_class.factor_names
    with pytest.raises(ValueError, match="model must be one of 'topics', 'blocks', 'tensor'; got 'lda'"):
        models.get("lda")
    with pytest.raises(ValueError, match="no model fits data of kind 'images'"):
        models.default_for("images")
    with pytest.raises(TypeError, match="register\\(\\) takes a Model subclass with a name"):
        models.register(dict)
    with pytest.raises(TypeError, match="register\\(\\) takes a Model subclass with a name"):
        models.register(models.Model)  # no name


@pytest.mark.parametrize(
    "arguments, error, match",
    [
        (dict(n_components=0), ValueError, "n_components must be >= 1"),
        (dict(n_components=1.5), TypeError, "n_components must be an integer"),
        (dict(n_components=True), TypeError, "n_components must be an integer"),
        (dict(n_components=2, a0=-1.0), ValueError, "a0 must be a finite number > 0"),
        (dict(n_components=2, b0=np.inf), ValueError, "b0 must be a finite number > 0"),
    ],
)
def test_models_check_their_parameters(arguments, error, match):
    with pytest.raises(error, match=match):
        topics.TopicModel(**arguments)


def test_model_factors_round_trip_and_public_orientation():
    rng = np.random.default_rng(0)
    model = topics.TopicModel(3)
    state = model.init_state((5, 7), 2.0, rng)
    factors = model.factors(state)
    assert factors["theta"].shape == (5, 3) and factors["phi"].shape == (3, 7)
    new = {"theta": rng.gamma(1.0, 1.0, (5, 3)), "phi": rng.gamma(1.0, 1.0, (3, 7))}
    model.set_factors(state, new)
    np.testing.assert_array_equal(model.factors(state)["phi"], new["phi"])
    np.testing.assert_allclose(model.rate_rows(state, np.arange(1, 4)), (new["theta"] @ new["phi"])[1:4])
    assert model.topics(new) is new["phi"] and model.memberships(new) is new["theta"]
    block_model = blocks.BlockModel(2)
    state = block_model.init_state((6, 6), 3.0, rng)
    mu = block_model.rates(block_model.factors(state))
    np.testing.assert_allclose(block_model.rate_rows(state, np.arange(2, 5)), mu[2:5])
    assert block_model.topics(block_model.factors(state)) is None
    with pytest.raises(ValueError, match="model='blocks' needs a square"):
        block_model.check_shape((6, 5))


# ---------------------------------------------------------------------------
# The multinomial allocation of one cell: exact for any count, O(K)
# ---------------------------------------------------------------------------


@njit
def _multinomial_draws(y, weights, n_draws, seed):
    """``n_draws`` draws of ``multinomial(y, weights)`` from one seeded stream."""
    n = weights.shape[0]
    out = np.empty((n_draws, n), dtype=np.int64)
    scratch = np.empty(n)
    drawn = np.zeros(n, dtype=np.int64)
    state = np.empty(4, dtype=np.uint64)
    seed_stream(seed, 0, 0)  # large binomials use Numba's generator
    seed_state(state, seed, 0, 0)
    for i in range(n_draws):
        total = 0.0
        for k in range(n):
            scratch[k] = weights[k]  # the kernel overwrites its weights
            total += weights[k]
        multinomial(y, scratch, total, state, drawn)
        out[i] = drawn
    return out


def multinomial_table(draws, y):
    """Counts of each outcome, indexed by all but the last component."""
    table = np.zeros((y + 1,) * (draws.shape[1] - 1))
    np.add.at(table, tuple(draws[:, :-1].T), 1)
    return table


def multinomial_pmf_table(y, p):
    """The exact Multinomial(y, p) pmf on the grid of :func:`multinomial_table` (0 off the simplex)."""
    p = np.asarray(p, dtype=float) / np.sum(p)
    grids = np.meshgrid(*[np.arange(y + 1)] * (len(p) - 1), indexing="ij")
    last = y - sum(grids)
    x = np.stack(list(grids) + [np.maximum(last, 0)], axis=-1)
    return np.where(last >= 0, stats.multinomial.pmf(x, y, p), 0.0)


WEIGHTS = np.array([0.7, 2.0, 1.1, 0.4])


@pytest.mark.parametrize(
    "y, weights",
    [
        (1, WEIGHTS),  # a single token
        (3, WEIGHTS),  # a few tokens: one walk each
        (4, WEIGHTS[:3]),
        (11, WEIGHTS[:3]),  # up to 64: binary search in cumulative weights
        (64, WEIGHTS[:3]),
        (65, np.array([8.0, 1.0, 0.6])),  # conditional binomials, the later ones small (Bernoulli sums)
        (300, WEIGHTS[:3]),  # conditional binomials from Numba's generator
    ],
)
def test_multinomial_has_the_exact_joint_law(y, weights):
    draws = _multinomial_draws(y, weights, 20_000, y)
    assert np.all(draws.sum(axis=1) == y) and draws.min() >= 0
    table = multinomial_table(draws, y)
    assert chi_square_pvalue(table, multinomial_pmf_table(y, weights)) > P_ACCEPT
    # power: the same test rejects the law with the second weight 10% larger
    wrong = weights.copy()
    wrong[1] *= 1.1
    assert chi_square_pvalue(table, multinomial_pmf_table(y, wrong)) < P_ACCEPT


def test_multinomial_of_underflowed_weights_is_uniform():
    # all weights 0 (rates that underflowed): every component is as likely
    for y in (3, 40, 200):
        draws = _multinomial_draws(y, np.zeros(3), 5_000, 1)
        assert np.all(draws.sum(axis=1) == y)
        table = multinomial_table(draws, y)
        assert chi_square_pvalue(table, multinomial_pmf_table(y, np.ones(3))) > P_ACCEPT
    assert np.all(_multinomial_draws(0, WEIGHTS, 10, 2) == 0)


@pytest.mark.parametrize("y", [10**6, 10**12])
def test_multinomial_of_huge_counts_is_exact(y):
    """A cell of 10^12 tokens costs K binomial draws, and they are exact: each
    draw's Pearson statistic sum_k (n_k - y p_k)^2 / (y p_k) is chi-square with
    K - 1 degrees of freedom (to O(y^-1/2)), and a 2-in-a-million error in the
    probabilities shifts it visibly at 10^12."""
    p = WEIGHTS / WEIGHTS.sum()
    draws = _multinomial_draws(y, WEIGHTS, 5_000, 3)
    assert np.all(draws.sum(axis=1) == y)

    def pearson_pvalue(probabilities):
        expected = y * probabilities
        statistic = ((draws - expected) ** 2 / expected).sum(axis=1)
        return stats.kstest(statistic, stats.chi2(len(p) - 1).cdf).pvalue

    assert pearson_pvalue(p) > P_ACCEPT
    # power: the first probability 2e-6 (relative) too large, at 10^12; 2e-3 at 10^6
    relative = 2.0 * np.sqrt(1e12 / y) * 1e-6
    wrong = p.copy()
    wrong[0] *= 1 + relative
    wrong[1] -= p[0] * relative
    assert pearson_pvalue(wrong) < P_ACCEPT


# ---------------------------------------------------------------------------
# Allocation of a cell's counts to components
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("tokens,repeats", [(40_000, 1), (40, 1_000), (3, 14_000), (1, 40_000)])
def test_topic_allocation_is_multinomial(tokens, repeats):
    """Each regime of the multinomial (a walk, binary search, binomials) inside the sweep."""
    rng = np.random.default_rng(0)
    model = topics.TopicModel(5)
    theta = rng.gamma(1.0, 1.0, (3, 5))
    phiT = rng.gamma(1.0, 1.0, (4, 5))
    state = (theta, phiT)
    cell = one_cell((3, 4), 1, 2, tokens)
    work = make_work((3, 4), seed=2)
    n_dk = np.zeros((3, 5), dtype=np.int64)
    for iteration in range(repeats):
        stats_ = model.new_stats(state, work)
        model.allocate(state, cell, stats_, work, iteration)
        counts, n_kv_parts = stats_  # word counts topics x words
        n_vk = n_kv_parts.sum(axis=0).T
        assert np.array_equal(counts[1], n_vk[2]) and n_vk[[0, 1, 3]].sum() == 0
        n_dk += counts
    assert n_dk.sum() == tokens * repeats and n_dk[[0, 2]].sum() == 0
    p = theta[1] * phiT[2]
    assert chi_square_pvalue(n_dk[1], p) > P_ACCEPT
    assert chi_square_pvalue(n_dk[1], p * np.array([1, 1, 1.1, 1, 1])) < P_ACCEPT


def test_block_allocation_is_multinomial_over_community_pairs():
    rng = np.random.default_rng(1)
    model = blocks.BlockModel(3)
    theta = rng.gamma(1.0, 1.0, (4, 3))
    pi = rng.gamma(1.0, 1.0, (3, 3))
    work = make_work((4, 4), seed=2)
    stats_ = model.new_stats((theta, pi), work)
    model.allocate((theta, pi), one_cell((4, 4), 2, 0, 30_000), stats_, work, 1)
    n_send, n_recv_parts, n_cd_parts = stats_
    n_recv, n_cd = n_recv_parts.sum(axis=0), n_cd_parts.sum(axis=0)
    assert np.array_equal(n_send[2], n_cd.sum(axis=1)) and np.array_equal(n_recv[0], n_cd.sum(axis=0))
    assert n_send.sum() == n_recv.sum() == 30_000
    p = theta[2][:, None] * pi * theta[0][None, :]
    assert chi_square_pvalue(n_cd, p) > P_ACCEPT
    wrong = p.copy().ravel()
    wrong[np.argsort(wrong)[-2]] *= 1.1  # the second most likely pair
    assert chi_square_pvalue(n_cd, wrong) < P_ACCEPT


def test_block_allocation_skips_the_diagonal():
    rng = np.random.default_rng(2)
    model = blocks.BlockModel(2)
    state = (rng.gamma(1.0, 1.0, (3, 2)), rng.gamma(1.0, 1.0, (2, 2)))
    work = make_work((3, 3))
    stats_ = model.new_stats(state, work)
    model.allocate(state, one_cell((3, 3), 1, 1, 500), stats_, work, 0)
    assert all(part.sum() == 0 for part in stats_)


@pytest.mark.parametrize("model_class", [topics.TopicModel, blocks.BlockModel])
def test_allocation_does_not_depend_on_the_chunks(model_class):
    rng = np.random.default_rng(3)
    model = model_class(3)
    state = model.init_state((50, 50), 2.0, rng)
    counts = csr(rng.poisson(2.0, (50, 50)))
    results = []
    for parallel in (False, True):
        work = make_work((50, 50), seed=4, parallel=parallel)
        assert (len(work.bounds) > 1) == parallel
        stats_ = model.new_stats(state, work)
        model.allocate(state, counts, stats_, work, 5)
        results.append([part if part.ndim == 2 else part.sum(axis=0) for part in stats_])
    for single, split in zip(*results, strict=True):
        np.testing.assert_array_equal(single, split)


# ---------------------------------------------------------------------------
# Factor updates: rate sums over observed cells only
# ---------------------------------------------------------------------------


def _topic_update_draws(factor, other, counts, missing, unit, n_draws, prior):
    draws = []
    n_rows = factor.shape[0]
    bounds = chunk_bounds(n_rows, 1, False)[0]
    for it in range(n_draws):
        current = np.ones_like(factor)
        topics._update_chunk(
            0,
            *bounds,
            (current, other, counts, _kernels.column_sums(other), *missing),
            prior,
            (4, it, unit, new_stop_flag()),
        )
        draws.append(current)
    return np.array(draws)


def test_topic_theta_update_uses_observed_cells_only():
    rng = np.random.default_rng(2)
    D, V, K = 3, 5, 2
    phiT = rng.gamma(1.0, 1.0, (V, K))
    mask = np.ones((D, V), dtype=bool)
    mask[0, [1, 3]] = False
    n_dk = np.array([[2, 0], [1, 1], [0, 5]], dtype=np.int64)
    draws = _topic_update_draws(
        np.ones((D, K)), phiT, n_dk, missing_lists(~mask), topics.UNIT_THETA, 4_000, (0.5, 1.5)
    )[:, 0]
    for k in range(K):
        rate = 1.5 + phiT[mask[0], k].sum()
        assert stats.kstest(draws[:, k], stats.gamma(0.5 + n_dk[0, k], scale=1 / rate).cdf).pvalue > P_ACCEPT
        rate_ignoring_mask = 1.5 + phiT[:, k].sum()
        assert (
            stats.kstest(draws[:, k], stats.gamma(0.5 + n_dk[0, k], scale=1 / rate_ignoring_mask).cdf).pvalue < P_ACCEPT
        )


def test_topic_phi_update_uses_observed_cells_only():
    rng = np.random.default_rng(3)
    D, V, K = 4, 3, 2
    theta = rng.gamma(1.0, 1.0, (D, K))
    mask = np.ones((D, V), dtype=bool)
    mask[[0, 2], 1] = False
    n_vk = np.array([[1, 0], [3, 1], [0, 0]], dtype=np.int64)
    draws = _topic_update_draws(
        np.ones((V, K)), theta, n_vk, missing_lists(~mask, by="col"), topics.UNIT_PHI, 4_000, (0.5, 1.0)
    )[:, 1]
    for k in range(K):
        rate = 1.0 + theta[mask[:, 1], k].sum()
        assert stats.kstest(draws[:, k], stats.gamma(0.5 + n_vk[1, k], scale=1 / rate).cdf).pvalue > P_ACCEPT
        # power: the same test rejects a rate that sums over the held-out documents too
        rate_ignoring_mask = 1.0 + theta[:, k].sum()
        assert (
            stats.kstest(draws[:, k], stats.gamma(0.5 + n_vk[1, k], scale=1 / rate_ignoring_mask).cdf).pvalue < P_ACCEPT
        )


def test_topic_update_draws_theta_then_phi_given_the_new_theta():
    # the model's update: theta from its conditional, then phi given that theta (one Gibbs scan)
    rng = np.random.default_rng(4)
    model = topics.TopicModel(2, a0=0.5, b0=1.0)
    theta0, phiT0 = rng.gamma(1.0, 1.0, (3, 2)), rng.gamma(1.0, 1.0, (4, 2))
    n_dk = np.array([[2, 0], [1, 1], [0, 5]], dtype=np.int64)
    n_vk = np.array([[1, 0], [1, 1], [0, 4], [1, 1]], dtype=np.int64)
    work = make_work((3, 4), seed=9)
    new_theta, old_theta = [], []
    for it in range(3_000):
        state = (theta0.copy(), phiT0.copy())
        model.update(state, (n_dk, n_vk.T[None]), work, it)  # the stats hold word counts topics x words
        theta, phiT = state
        # phi's conditional given theta, as a probability integral transform: uniform if right
        shape = 0.5 + n_vk[2, 1]
        new_theta.append(stats.gamma.cdf(phiT[2, 1], shape, scale=1 / (1.0 + theta[:, 1].sum())))
        old_theta.append(stats.gamma.cdf(phiT[2, 1], shape, scale=1 / (1.0 + theta0[:, 1].sum())))
    assert stats.kstest(new_theta, "uniform").pvalue > P_ACCEPT
    # power: phi drawn given the theta the update started from would look uniform here instead
    assert stats.kstest(old_theta, "uniform").pvalue < P_ACCEPT


def _block_rates_brute_force(theta, pi, observed, i):
    """b0-free rate of theta_i: sum over observed (i,j) of (pi theta_j) + over (j,i) of (pi^T theta_j)."""
    rate = np.zeros(theta.shape[1])
    for j in range(theta.shape[0]):
        if j != i and observed[i, j]:
            rate += pi @ theta[j]
        if j != i and observed[j, i]:
            rate += pi.T @ theta[j]
    return rate


def test_block_theta_update_conditional_of_first_row():
    rng = np.random.default_rng(4)
    V, C = 5, 2
    theta0 = rng.gamma(1.0, 1.0, (V, C))
    pi = rng.gamma(1.0, 1.0, (C, C))
    mask = rng.random((V, V)) > 0.3
    missing = ~mask
    np.fill_diagonal(missing, False)  # the diagonal is the model's own: skipped by construction
    lists = (*missing_lists(missing), *missing_lists(missing, by="col"))
    n_send = rng.integers(0, 4, (V, C))
    n_recv = rng.integers(0, 4, (V, C))
    draws = []
    for it in range(4_000):
        theta = theta0.copy()
        blocks._update_theta(theta, pi, (n_send, n_recv), lists, (0.7, 1.0), (1, it))
        draws.append(theta[0])
    draws = np.array(draws)
    rate = 1.0 + _block_rates_brute_force(theta0, pi, mask, 0)
    for c in range(C):
        shape = 0.7 + n_send[0, c] + n_recv[0, c]
        assert stats.kstest(draws[:, c], stats.gamma(shape, scale=1 / rate[c]).cdf).pvalue > P_ACCEPT
        assert stats.kstest(draws[:, c], stats.gamma(shape, scale=1.1 / rate[c]).cdf).pvalue < P_ACCEPT


def test_block_pi_update_uses_observed_pairs_only():
    rng = np.random.default_rng(6)
    V, C = 5, 2
    theta = rng.gamma(1.0, 1.0, (V, C))
    mask = rng.random((V, V)) > 0.3
    missing = ~mask
    np.fill_diagonal(missing, False)
    n_cd = np.array([[3, 0], [1, 6]], dtype=np.int64)
    draws = []
    for it in range(4_000):
        pi = np.ones((C, C))
        blocks._update_pi(pi, theta, n_cd, missing_lists(missing), (0.4, 2.0), (3, it))
        draws.append(pi.ravel())
    draws = np.array(draws)
    observed = mask & ~np.eye(V, dtype=bool)
    weights = np.einsum("ic,jd,ij->cd", theta, theta, observed).ravel()
    everything = np.einsum("ic,jd,ij->cd", theta, theta, ~np.eye(V, dtype=bool)).ravel()
    for cell in range(C * C):
        shape = 0.4 + n_cd.ravel()[cell]
        assert stats.kstest(draws[:, cell], stats.gamma(shape, scale=1 / (2.0 + weights[cell])).cdf).pvalue > P_ACCEPT
        # power: a rate summed over the held-out pairs too
        assert (
            stats.kstest(draws[:, cell], stats.gamma(shape, scale=1 / (2.0 + everything[cell])).cdf).pvalue < P_ACCEPT
        )


def test_block_pair_weights_match_brute_force():
    rng = np.random.default_rng(5)
    V, C = 6, 3
    theta = rng.gamma(1.0, 1.0, (V, C))
    mask = rng.random((V, V)) > 0.4
    missing = ~mask
    np.fill_diagonal(missing, False)
    weights = blocks.pair_weights(theta, *missing_lists(missing))
    expected = sum(np.outer(theta[i], theta[j]) for i in range(V) for j in range(V) if i != j and mask[i, j])
    np.testing.assert_allclose(weights, expected, rtol=1e-12)


# ---------------------------------------------------------------------------
# Log likelihoods, priors, rates, CSR
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("parallel", [False, True])
def test_topic_count_loglik_matches_scipy_over_observed_cells(parallel):
    rng = np.random.default_rng(6)
    theta, phiT = rng.gamma(1.0, 1.0, (40, 2)), rng.gamma(1.0, 1.0, (5, 2))
    Y = rng.poisson(2.0, (40, 5))
    mask = rng.random((40, 5)) > 0.3
    model = topics.TopicModel(2)
    value = model.count_loglik((theta, phiT), csr(np.where(mask, Y, 0)), make_work(Y.shape, ~mask, parallel=parallel))
    expected = stats.poisson.logpmf(Y, theta @ phiT.T)[mask].sum()
    assert value == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("parallel", [False, True])
def test_block_count_loglik_matches_scipy_over_observed_off_diagonal_cells(parallel):
    rng = np.random.default_rng(7)
    theta, pi = rng.gamma(1.0, 1.0, (30, 2)), rng.gamma(1.0, 1.0, (2, 2))
    Y = rng.poisson(2.0, (30, 30))
    mask = rng.random((30, 30)) > 0.3
    observed = mask & ~np.eye(30, dtype=bool)
    missing = ~mask
    np.fill_diagonal(missing, False)
    model = blocks.BlockModel(2)
    # counts on the diagonal (a self loop) are skipped by the model itself
    counts = csr(np.where(mask, Y, 0) + 5 * np.eye(30, dtype=np.int64))
    value = model.count_loglik((theta, pi), counts, make_work(Y.shape, missing, parallel=parallel))
    expected = stats.poisson.logpmf(Y, theta @ pi @ theta.T)[observed].sum()
    assert value == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("model_class", [topics.TopicModel, blocks.BlockModel])
def test_count_loglik_does_not_depend_on_the_chunks(model_class):
    # row terms are summed in row order, so the chunks change nothing, bit for bit
    rng = np.random.default_rng(10)
    model = model_class(3)
    state = model.init_state((60, 60), 1.0, rng)
    missing = rng.random((60, 60)) < 0.2
    counts = csr(np.where(missing, 0, rng.poisson(1.0, (60, 60))))
    single = model.count_loglik(state, counts, make_work((60, 60), missing, parallel=False))
    split = model.count_loglik(state, counts, make_work((60, 60), missing, parallel=True))
    assert single == split


def test_gamma_log_prior_matches_scipy():
    x = np.random.default_rng(8).gamma(0.1, 1.0, (7, 3)) + 1e-12
    assert _kernels.gamma_log_prior(x, 0.1, 2.0) == pytest.approx(
        stats.gamma.logpdf(x, 0.1, scale=0.5).sum(), rel=1e-12
    )
    model = topics.TopicModel(3, a0=0.1, b0=2.0)
    state = (x, x[:5])
    assert model.log_prior(state) == pytest.approx(
        stats.gamma.logpdf(x, 0.1, scale=0.5).sum() + stats.gamma.logpdf(x[:5], 0.1, scale=0.5).sum(), rel=1e-12
    )


def test_rates_of_both_models():
    rng = np.random.default_rng(9)
    theta, phi = rng.gamma(1.0, 1.0, (3, 2)), rng.gamma(1.0, 1.0, (2, 4))
    np.testing.assert_allclose(models.rates("topics", {"theta": theta, "phi": phi}), theta @ phi)
    theta, pi = rng.gamma(1.0, 1.0, (4, 2)), rng.gamma(1.0, 1.0, (2, 2))
    mu = models.rates("blocks", {"theta": theta, "pi": pi})
    expected = np.einsum("ic,cd,jd->ij", theta, pi, theta)
    np.fill_diagonal(expected, 0.0)
    np.testing.assert_allclose(mu, expected)
    np.testing.assert_array_equal(blocks.BlockModel(2).structural_zeros((4, 4)), np.eye(4, dtype=bool))
    assert topics.TopicModel(2).structural_zeros((4, 4)) is None
    with pytest.raises(ValueError, match="model must be"):
        models.rates("lda", {"theta": theta})


def test_row_csr_pattern_matches_scipy():
    cells = np.random.default_rng(10).random((7, 9)) < 0.4
    indptr, indices = _kernels.row_csr_pattern(cells)
    matrix = sp.csr_matrix(cells)
    matrix.sort_indices()
    np.testing.assert_array_equal(indptr, matrix.indptr)
    np.testing.assert_array_equal(indices, matrix.indices)
    assert indptr.dtype == indices.dtype == np.int64


# ---------------------------------------------------------------------------
# The exact gamma and binomial samplers on the xoshiro stream
# ---------------------------------------------------------------------------


@njit
def _binomial_draws(n, p, size, seed):
    state = np.empty(4, dtype=np.uint64)
    seed_state(state, seed, 0, 0)
    out = np.empty(size, dtype=np.int64)
    for i in range(size):
        out[i] = _kernels.binomial(n, p, state)
    return out


@njit
def _gamma_draws(shape, size, seed):
    state = np.empty(4, dtype=np.uint64)
    seed_state(state, seed, 0, 0)
    out = np.empty(size)
    for i in range(size):
        out[i] = _kernels.standard_gamma(shape, state)
    return out


@pytest.mark.parametrize(
    "n,p",
    [
        (12, 0.3),  # Bernoulli trials
        (100, 0.05),  # inversion from 0
        (200, 0.97),  # inversion on 1 - p
        (30, 0.34),  # BTRS, n p just above 10
        (1000, 0.5),  # BTRS at p = 1/2
        (5000, 0.8),  # BTRS on 1 - p
        (10**9, 0.3),  # BTRS far beyond what lgamma differences resolve
    ],
)
def test_binomial_has_the_exact_law(n, p):
    draws = _binomial_draws(n, p, 40_000, 7)
    assert draws.min() >= 0 and draws.max() <= n
    # about 40 bins of equal probability (single values where the law is narrow), the tails included
    edges = np.unique(stats.binom(n, p).ppf(np.linspace(0.0, 1.0, 41)[1:-1]))
    observed = np.bincount(np.searchsorted(edges, draws), minlength=edges.size + 1)

    def pvalue(q):
        cdf = stats.binom(n, q).cdf(edges)
        return chi_square_pvalue(observed, np.diff(np.concatenate([[0.0], cdf, [1.0]])))

    assert pvalue(p) > P_ACCEPT
    # power: the same test rejects a probability off by a fifth of the draw's standard deviation
    assert pvalue(p + 0.2 * np.sqrt(p * (1 - p) / n)) < P_ACCEPT


@pytest.mark.parametrize("shape", [0.05, 0.5, 1.0, 3.7, 1e4, 1e12])
def test_standard_gamma_has_the_exact_law(shape):
    draws = _gamma_draws(shape, 40_000, 11)
    assert draws.min() >= 0.0 and np.all(np.isfinite(draws))
    assert stats.kstest(draws, stats.gamma(shape).cdf).pvalue > P_ACCEPT
    # power: a shape off by a tenth (of its standard deviation, for large shapes)
    wrong = shape * 1.1 if shape < 100 else shape + 0.1 * np.sqrt(shape)
    assert stats.kstest(draws, stats.gamma(wrong).cdf).pvalue < P_ACCEPT


@pytest.mark.parametrize("model_class", [topics.TopicModel, blocks.BlockModel])
def test_update_and_score_is_the_hooks_one_by_one(model_class):
    # one compiled call for small data, the hooks one by one otherwise: the same factors and log joint
    rng = np.random.default_rng(5)
    model = model_class(3)
    shape = (24, 24)
    missing = rng.random(shape) < 0.2
    np.fill_diagonal(missing, False)
    counts = csr(np.where(missing, 0, rng.poisson(1.5, shape)))
    results = []
    for fused in (True, False):
        state = model.init_state(shape, 1.5, np.random.default_rng(1))
        work = make_work(shape, missing, seed=4)
        stats_ = model.new_stats(state, work)
        model.allocate(state, counts, stats_, work, 3)
        if fused:
            value = model.update_and_score(state, stats_, counts, work, 3)
        else:
            value = models.Model.update_and_score(model, state, stats_, counts, work, 3)
        results.append((value, state))
    (fused_value, fused_state), (value, state) = results
    assert fused_value == value
    for fused_factor, factor in zip(fused_state, state, strict=True):
        np.testing.assert_array_equal(fused_factor, factor)
    assert value == model.count_loglik(state, counts, make_work(shape, missing, seed=4)) + model.log_prior(state)
