"""The model kernels against brute force: exact conditionals, allocations, rate sums."""


import numpy as np
import pytest
import scipy.sparse as sp
from numba import njit
from scipy import stats

from lpviz import models
from lpviz._random import new_state, seed_state, seed_stream
from lpviz.privacy import geometric_logpmf

P_ACCEPT = 1e-3  # a correct sampler fails a test at this rate (fixed seeds: never, in practice)


def chi_square_pvalue(observed_counts, probabilities, min_expected=5.0):
    """Chi-square goodness of fit; cells with small expectation pooled into one."""
    observed_counts = np.asarray(observed_counts, dtype=float).ravel()
    probabilities = np.asarray(probabilities, dtype=float).ravel()
    probabilities = probabilities / probabilities.sum()
    expected = observed_counts.sum() * probabilities
    small = expected < min_expected
    obs = np.append(observed_counts[~small], observed_counts[small].sum())
    exp = np.append(expected[~small], expected[small].sum())
    if exp[-1] == 0:
        assert obs[-1] == 0, "draws fell where the exact pmf is 0"
        obs, exp = obs[:-1], exp[:-1]
    return stats.chisquare(obs, exp).pvalue


# ---------------------------------------------------------------------------
# Steps 1-3: (y, g+, g-) | ytil, mu, lambda+, lambda-
# ---------------------------------------------------------------------------

def exact_true_count_joint(ytil, mu, lam_plus, lam_minus, size=80):
    """p(y, g+ | ytil) ∝ Pois(y; mu) Pois(g+; lambda+) Pois(y + g+ - ytil; lambda-)."""
    y, g_plus = np.meshgrid(np.arange(size), np.arange(size), indexing="ij")
    g_minus = y + g_plus - ytil
    log_p = np.where(g_minus >= 0,
                     stats.poisson.logpmf(y, mu) + stats.poisson.logpmf(g_plus, lam_plus)
                     + stats.poisson.logpmf(np.maximum(g_minus, 0), lam_minus), -np.inf)
    p = np.exp(log_p - log_p.max())
    return p / p.sum()


def draw_true_counts(ytil, mu, lam_plus, lam_minus, n, seed):
    seed_stream(seed, 0, 0)  # Numba's generator: large binomials and gammas
    state = new_state(seed, 0, 0)  # the per-cell draws; advanced in place
    return np.array([models.sample_true_count(ytil, mu, lam_plus, lam_minus, state) for _ in range(n)])


CELLS = [  # ytil, mu, lambda+, lambda-
    (-3, 1.5, 0.4, 0.7),
    (0, 0.3, 0.5, 0.5),
    (4, 2.0, 0.3, 1.2),
    (2, 9.0, 2.0, 0.6),
]


@pytest.mark.parametrize("cell", CELLS)
def test_true_count_conditional_matches_enumeration(cell):
    ytil, mu, lam_plus, lam_minus = cell
    draws = draw_true_counts(ytil, mu, lam_plus, lam_minus, 20_000, seed=7)
    y, g_plus, g_minus, m = draws.T
    assert np.all(y + g_plus - g_minus == ytil)
    assert np.all(m == np.minimum(y + g_plus, g_minus))
    size = 80
    table = np.zeros((size, size))
    np.add.at(table, (y, g_plus), 1)
    exact = exact_true_count_joint(ytil, mu, lam_plus, lam_minus, size)
    assert chi_square_pvalue(table, exact) > P_ACCEPT
    # power: the same test rejects a 20% wrong rate mu
    wrong = exact_true_count_joint(ytil, 1.2 * mu, lam_plus, lam_minus, size)
    assert chi_square_pvalue(table, wrong) < P_ACCEPT


def test_true_count_is_zero_when_the_rate_is_zero():
    draws = draw_true_counts(5, 0.0, 0.5, 0.5, 500, seed=3)
    assert np.all(draws[:, 0] == 0)
    assert np.all(draws[:, 1] - draws[:, 2] == 5)


# ---------------------------------------------------------------------------
# Step 4 and the whole per-cell chain: stationary at p(y | ytil, mu)
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("g", [0, 3, 40])
def test_noise_rate_draw_is_gamma_with_scale_alpha(g):
    alpha = 0.3
    seed_stream(5, g, 0)  # shapes above _SMALL_GAMMA_SHAPE use np.random.gamma
    state = new_state(5, g, 0)
    draws = np.array([models.draw_noise_rates(g, 2 * g, alpha, state) for _ in range(5_000)])
    for column, shape in ((0, 1 + g), (1, 1 + 2 * g)):
        assert stats.kstest(draws[:, column], stats.gamma(shape, scale=alpha).cdf).pvalue > P_ACCEPT
        assert stats.kstest(draws[:, column], stats.gamma(shape, scale=1.1 * alpha).cdf).pvalue < P_ACCEPT



@pytest.mark.parametrize("g_plus, g_minus", [(0, 0), (1, 0), (0, 1), (2, 1)])
def test_noise_rate_pair_is_two_independent_gammas(g_plus, g_minus):
    # Small g draw both rates from one log (a Gamma total split by a Beta):
    # each must be Gamma(1 + g*) and the two independent, so their sum is
    # Gamma(2 + g+ + g-) and their ranks uncorrelated.
    alpha = 0.3
    state = new_state(7, g_plus, g_minus)
    draws = np.array([models.draw_noise_rates(g_plus, g_minus, alpha, state) for _ in range(5_000)])
    for column, shape in ((0, 1 + g_plus), (1, 1 + g_minus)):
        assert stats.kstest(draws[:, column], stats.gamma(shape, scale=alpha).cdf).pvalue > P_ACCEPT
    total = stats.gamma(2 + g_plus + g_minus, scale=alpha).cdf
    assert stats.kstest(draws.sum(axis=1), total).pvalue > P_ACCEPT
    assert stats.spearmanr(draws[:, 0], draws[:, 1]).pvalue > P_ACCEPT
    # Power: a dependent pair with these marginals (lambda- a copy of lambda+
    # when the shapes match, or any fixed function) fails the sum test.
    assert stats.kstest(2 * draws[:, 0], total).pvalue < P_ACCEPT

@njit(cache=True)
def _cell_chains(ytil, mu, alpha, posterior_scale, y_start, g_plus, g_minus, n_steps, seed):
    """Independent per-cell Gibbs chains (steps 1-4); the y of the last step."""
    out = np.empty(y_start.shape[0], dtype=np.int64)
    state = np.empty(4, dtype=np.uint64)
    for c in range(y_start.shape[0]):
        seed_stream(seed, 0, c)
        seed_state(state, seed, 0, c)
        lam_p = models._gamma_integer_shape(1 + g_plus[c], alpha, state)
        lam_m = models._gamma_integer_shape(1 + g_minus[c], alpha, state)
        y = y_start[c]
        for _ in range(n_steps):
            y, gp, gm, m = models.sample_true_count(ytil, mu, lam_p, lam_m, state)
            lam_p, lam_m = models.draw_noise_rates(gp, gm, posterior_scale, state)
        out[c] = y
    return out


def _stationary_starts(ytil, mu, alpha, n, rng):
    """Exact draws of (y, g+, g-) given ytil by rejection from the generative model."""
    ys, gps, gms = [], [], []
    while sum(map(len, ys)) < n:
        lam = rng.exponential(alpha / (1 - alpha), (2, 4 * n))
        y = rng.poisson(mu, 4 * n)
        g_plus, g_minus = rng.poisson(lam)
        keep = y + g_plus - g_minus == ytil
        ys.append(y[keep]), gps.append(g_plus[keep]), gms.append(g_minus[keep])
    return (np.concatenate(ys)[:n], np.concatenate(gps)[:n], np.concatenate(gms)[:n])


@pytest.mark.parametrize("ytil,mu", [(3, 1.0), (-2, 2.5)])
def test_cell_chain_keeps_the_exact_posterior_of_y(ytil, mu):
    """Started at exact draws of p(y, g, lambda | ytil), 15 sweeps of steps 1-4
    must leave y distributed as p(y | ytil) ∝ Pois(y; mu) Geom2(ytil - y; alpha).
    The paper's lambda rate alpha/(1-alpha) + 1 drifts away and is rejected."""
    alpha, n = 0.3, 20_000
    rng = np.random.default_rng(1)
    y0, g_plus, g_minus = _stationary_starts(ytil, mu, alpha, n, rng)
    support = np.arange(60)
    exact = np.exp(stats.poisson.logpmf(support, mu) + geometric_logpmf(ytil - support, alpha))
    y = _cell_chains(ytil, mu, alpha, alpha, y0, g_plus, g_minus, 15, 9)
    assert chi_square_pvalue(np.bincount(y, minlength=60)[:60], exact) > P_ACCEPT
    wrong_scale = 1.0 / (alpha / (1 - alpha) + 1)
    y_wrong = _cell_chains(ytil, mu, alpha, wrong_scale, y0, g_plus, g_minus, 15, 9)
    assert chi_square_pvalue(np.bincount(y_wrong, minlength=60)[:60], exact) < P_ACCEPT


# ---------------------------------------------------------------------------
# Step 5: allocation to components
# ---------------------------------------------------------------------------

def _one_cell_csr(n_rows, n_cols, row, col, count):
    Y = np.zeros((n_rows, n_cols), dtype=np.int64)
    Y[row, col] = count
    csr = sp.csr_matrix(Y)
    return csr.indptr.astype(np.int64), csr.indices.astype(np.int64), csr.data.astype(np.int64)


@pytest.mark.parametrize("tokens,repeats", [(20_000, 1), (3, 7_000)])
def test_topic_allocation_is_multinomial(tokens, repeats):
    """Many tokens go through cumulative sums, a few through the per-token walk."""
    rng = np.random.default_rng(0)
    theta = rng.gamma(1.0, 1.0, (3, 5))
    phiT = rng.gamma(1.0, 1.0, (4, 5))
    cell = _one_cell_csr(3, 4, 1, 2, tokens)
    n_dk = np.zeros((3, 5), dtype=np.int64)
    for iteration in range(repeats):
        counts, n_vk = models.topics_sweep_fixed(*cell, theta, phiT, 3, iteration, 2)
        assert np.array_equal(counts[1], n_vk[2]) and n_vk[[0, 1, 3]].sum() == 0
        n_dk += counts
    assert n_dk.sum() == tokens * repeats and n_dk[[0, 2]].sum() == 0
    p = theta[1] * phiT[2]
    assert chi_square_pvalue(n_dk[1], p) > P_ACCEPT
    assert chi_square_pvalue(n_dk[1], p * np.array([1, 1, 1.1, 1, 1])) < P_ACCEPT


def test_block_allocation_is_multinomial_over_community_pairs():
    rng = np.random.default_rng(1)
    theta = rng.gamma(1.0, 1.0, (4, 3))
    pi = rng.gamma(1.0, 1.0, (3, 3))
    n_send, n_recv, n_cd = models.blocks_sweep_fixed(*_one_cell_csr(4, 4, 2, 0, 30_000), theta, pi, 3, 1, 2)
    assert np.array_equal(n_send[2], n_cd.sum(axis=1)) and np.array_equal(n_recv[0], n_cd.sum(axis=0))
    assert n_send.sum() == n_recv.sum() == 30_000
    p = theta[2][:, None] * pi * theta[0][None, :]
    assert chi_square_pvalue(n_cd, p) > P_ACCEPT
    wrong = p.copy().ravel()
    wrong[np.argsort(wrong)[-2]] *= 1.1  # the second most likely pair
    assert chi_square_pvalue(n_cd, wrong) < P_ACCEPT


# ---------------------------------------------------------------------------
# Factor updates: rate sums over observed cells only
# ---------------------------------------------------------------------------

def _missing(mask, by="row"):
    csr = sp.csr_matrix(~mask if by == "row" else (~mask).T)
    return csr.indptr.astype(np.int64), csr.indices.astype(np.int64)


def test_topic_theta_update_uses_observed_cells_only():
    rng = np.random.default_rng(2)
    D, V, K = 3, 5, 2
    phiT = rng.gamma(1.0, 1.0, (V, K))
    mask = np.ones((D, V), dtype=bool)
    mask[0, [1, 3]] = False
    n_dk = np.array([[2, 0], [1, 1], [0, 5]], dtype=np.int64)
    draws = []
    for it in range(4_000):
        theta = np.ones((D, K))
        models.topics_update_factor(theta, phiT, n_dk, *_missing(mask), 0.5, 1.5, 4, it, models.UNIT_THETA)
        draws.append(theta[0])
    draws = np.array(draws)
    for k in range(K):
        rate = 1.5 + phiT[mask[0], k].sum()
        assert stats.kstest(draws[:, k], stats.gamma(0.5 + n_dk[0, k], scale=1 / rate).cdf).pvalue > P_ACCEPT
        rate_ignoring_mask = 1.5 + phiT[:, k].sum()
        assert stats.kstest(draws[:, k], stats.gamma(0.5 + n_dk[0, k],
                                                     scale=1 / rate_ignoring_mask).cdf).pvalue < P_ACCEPT


def test_topic_phi_update_uses_observed_cells_only():
    rng = np.random.default_rng(3)
    D, V, K = 4, 3, 2
    theta = rng.gamma(1.0, 1.0, (D, K))
    mask = np.ones((D, V), dtype=bool)
    mask[[0, 2], 1] = False
    n_vk = np.array([[1, 0], [3, 1], [0, 0]], dtype=np.int64)
    draws = []
    for it in range(4_000):
        phiT = np.ones((V, K))
        models.topics_update_factor(phiT, theta, n_vk, *_missing(mask, by="col"), 0.5, 1.0, 4, it,
                                    models.UNIT_PHI)
        draws.append(phiT[1])
    draws = np.array(draws)
    for k in range(K):
        rate = 1.0 + theta[mask[:, 1], k].sum()
        assert stats.kstest(draws[:, k], stats.gamma(0.5 + n_vk[1, k], scale=1 / rate).cdf).pvalue > P_ACCEPT
        # power: the same test rejects a rate that sums over the held-out documents too
        rate_ignoring_mask = 1.0 + theta[:, k].sum()
        assert stats.kstest(draws[:, k], stats.gamma(0.5 + n_vk[1, k],
                                                     scale=1 / rate_ignoring_mask).cdf).pvalue < P_ACCEPT


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
    np.fill_diagonal(missing, False)
    row_missing, col_missing = _missing(~missing), _missing(~missing, by="col")
    n_send = rng.integers(0, 4, (V, C))
    n_recv = rng.integers(0, 4, (V, C))
    draws = []
    for it in range(4_000):
        theta = theta0.copy()
        models.blocks_update_theta(theta, pi, n_send, n_recv, *row_missing, *col_missing, 0.7, 1.0, 1, it)
        draws.append(theta[0])
    draws = np.array(draws)
    rate = 1.0 + _block_rates_brute_force(theta0, pi, mask, 0)
    for c in range(C):
        shape = 0.7 + n_send[0, c] + n_recv[0, c]
        assert stats.kstest(draws[:, c], stats.gamma(shape, scale=1 / rate[c]).cdf).pvalue > P_ACCEPT
        assert stats.kstest(draws[:, c], stats.gamma(shape, scale=1.1 / rate[c]).cdf).pvalue < P_ACCEPT


def test_block_pair_weights_match_brute_force():
    rng = np.random.default_rng(5)
    V, C = 6, 3
    theta = rng.gamma(1.0, 1.0, (V, C))
    mask = rng.random((V, V)) > 0.4
    missing = ~mask
    np.fill_diagonal(missing, False)
    weights = models.blocks_pair_weights(theta, *_missing(~missing))
    expected = sum(np.outer(theta[i], theta[j]) for i in range(V) for j in range(V) if i != j and mask[i, j])
    np.testing.assert_allclose(weights, expected, rtol=1e-12)


# ---------------------------------------------------------------------------
# Log likelihoods, priors, rates, CSR
# ---------------------------------------------------------------------------

def test_topic_count_loglik_matches_scipy_over_observed_cells():
    rng = np.random.default_rng(6)
    theta, phiT = rng.gamma(1.0, 1.0, (4, 2)), rng.gamma(1.0, 1.0, (5, 2))
    Y = rng.poisson(2.0, (4, 5))
    mask = rng.random((4, 5)) > 0.3
    csr = sp.csr_matrix(np.where(mask, Y, 0))
    value = models.topics_count_loglik(csr.indptr.astype(np.int64), csr.indices.astype(np.int64),
                                       csr.data.astype(np.int64), theta, phiT, *_missing(mask))
    expected = stats.poisson.logpmf(Y, theta @ phiT.T)[mask].sum()
    assert value == pytest.approx(expected, rel=1e-12)


def test_block_count_loglik_matches_scipy_over_observed_off_diagonal_cells():
    rng = np.random.default_rng(7)
    theta, pi = rng.gamma(1.0, 1.0, (5, 2)), rng.gamma(1.0, 1.0, (2, 2))
    Y = rng.poisson(2.0, (5, 5))
    mask = rng.random((5, 5)) > 0.3
    observed = mask & ~np.eye(5, dtype=bool)
    missing = ~mask
    np.fill_diagonal(missing, False)
    csr = sp.csr_matrix(np.where(observed, Y, 0))
    value = models.blocks_count_loglik(csr.indptr.astype(np.int64), csr.indices.astype(np.int64),
                                       csr.data.astype(np.int64), theta, pi, *_missing(~missing))
    expected = stats.poisson.logpmf(Y, theta @ pi @ theta.T)[observed].sum()
    assert value == pytest.approx(expected, rel=1e-12)



@pytest.mark.parametrize("model", ["topics", "blocks"])
def test_dense_count_loglik_equals_the_csr_one(model):
    # The private chain scores its latent counts (dense, 0 at missing cells
    # and on the block model's diagonal) without building their CSR.
    rng = np.random.default_rng(10)
    n, K = 40, 3
    theta = rng.gamma(0.3, 1.0, (n, K))
    other = rng.gamma(0.3, 1.0, (n, K) if model == "topics" else (K, K))
    observed = rng.random((n, n)) > 0.2
    missing = ~observed
    if model == "blocks":
        observed &= ~np.eye(n, dtype=bool)
        np.fill_diagonal(missing, False)
    Y = np.where(observed, rng.poisson(1.0, (n, n)), 0).astype(np.int64)
    csr = sp.csr_matrix(Y)
    csr_args = (csr.indptr.astype(np.int64), csr.indices.astype(np.int64), csr.data.astype(np.int64))
    for parallel in (False, True):
        k = models.kernels(parallel)
        count, dense = ((k.topics_count_loglik, k.topics_dense_loglik) if model == "topics"
                        else (k.blocks_count_loglik, k.blocks_dense_loglik))
        assert dense(Y, theta, other, *_missing(~missing)) == count(*csr_args, theta, other, *_missing(~missing))

def test_gamma_log_prior_matches_scipy():
    x = np.random.default_rng(8).gamma(0.1, 1.0, (7, 3)) + 1e-12
    assert models.gamma_log_prior(x, 0.1, 2.0) == pytest.approx(
        stats.gamma.logpdf(x, 0.1, scale=0.5).sum(), rel=1e-12)


def test_rates_of_both_models():
    rng = np.random.default_rng(9)
    theta, phi = rng.gamma(1.0, 1.0, (3, 2)), rng.gamma(1.0, 1.0, (2, 4))
    np.testing.assert_allclose(models.rates("topics", {"theta": theta, "phi": phi}), theta @ phi)
    theta, pi = rng.gamma(1.0, 1.0, (4, 2)), rng.gamma(1.0, 1.0, (2, 2))
    mu = models.rates("blocks", {"theta": theta, "pi": pi})
    expected = np.einsum("ic,cd,jd->ij", theta, pi, theta)
    np.fill_diagonal(expected, 0.0)
    np.testing.assert_allclose(mu, expected)
    with pytest.raises(ValueError, match="model must be"):
        models.rates("lda", {})


def test_dense_to_csr_matches_scipy():
    Y = np.random.default_rng(10).poisson(0.5, (7, 9))
    indptr, indices, counts = models.dense_to_csr(Y, 3)
    csr = sp.csr_matrix(Y)
    np.testing.assert_array_equal(indptr, csr.indptr)
    np.testing.assert_array_equal(indices, csr.indices)
    np.testing.assert_array_equal(counts, csr.data)
