"""The collapsed conditional p(y | ytil, mu, alpha) ∝ Pois(y; mu) alpha^|ytil - y|.

References are computed independently of lpviz.collapsed: the conditional and
the marginal by brute-force log-sum-exp of Pois(y; mu) Geom2(ytil - y; alpha)
over a long range of y (the Poisson log pmf anchored at floor(mu) and built
by cumulative sums of log(mu / i), so that mu = 1e6 keeps ~1e-12 accuracy),
the noise law by integrating the Bessel route's Skellam over its exponential
noise rates and by simulating the generative process, sampler output by
chi-square goodness of fit against the brute-force pmf (tails pooled to
expected counts >= 5) with a power check at a slightly wrong parameter.
"""

import math

import numpy as np
import pytest
from numba import njit
from scipy import special, stats

from lpviz import collapsed
from lpviz._random import new_state, seed_state, seed_stream, uniform
from lpviz.collapsed import (
    _PTRS_MIN_LAM,
    _UPWARD_MAX_A,
    _UPWARD_MAX_MODE,
    _log_rate_ratio,
    _mode,
    _sample_rejection,
    _stirlerr,
    _upward_search,
    log_marginal_nb,
    log_poisson_pmf,
    sample_poisson,
    sample_true_count,
    sample_true_count_and_log_marginal,
)
from lpviz.methods import private as models  # the Bessel route's per-cell steps
from lpviz.privacy import geometric_logpmf, skellam_logpmf

P_FIT = 1e-3  # a correct sampler passes at this level (fixed seeds)
P_POWER = 1e-6  # the same test must reject a slightly wrong pmf this hard


# ---------------------------------------------------------------------------
# Brute-force references
# ---------------------------------------------------------------------------


def stirling_remainder(k):
    """log k! - [(k + 1/2) log k - k + log(2 pi)/2] by Stirling's series, k >= 20."""
    inv2 = 1.0 / (k * k)
    return (1 / 12 - inv2 * (1 / 360 - inv2 * (1 / 1260 - inv2 * (1 / 1680 - inv2 / 1188)))) / k


def ref_log_poisson(y, mu):
    """log Pois(y; mu) for integers y >= 0 and mu > 0.

    Anchored at k0 = floor(mu) (direct formula for small k0, Stirling's
    series with log1p otherwise: no large terms cancel) and extended by
    cumulative sums of log(mu / i), which are small near the mode.
    """
    y = np.asarray(y, dtype=np.int64)
    k0 = int(math.floor(mu))
    if k0 < 20:
        anchor = k0 * math.log(mu) - mu - math.lgamma(k0 + 1.0)
    else:
        anchor = k0 * math.log1p((mu - k0) / k0) - (mu - k0) - 0.5 * math.log(2 * math.pi * k0) - stirling_remainder(k0)
    lo, hi = min(int(y.min()), k0), max(int(y.max()), k0)
    steps = np.log(mu / np.arange(lo + 1, hi + 1, dtype=float))  # log Pois(i)/Pois(i-1), i = lo+1..hi
    table = np.empty(hi - lo + 1)
    table[k0 - lo] = anchor
    table[k0 - lo + 1 :] = anchor + np.cumsum(steps[k0 - lo :])
    table[: k0 - lo] = anchor - np.cumsum(steps[: k0 - lo][::-1])[::-1]
    return table[y - lo]


def ref_conditional(ytil, mu, alpha):
    """(y, log p(y | ytil), log p(ytil)) by brute force over y = 0..y_max.

    The log marginal is the convolution log sum_y Pois(y; mu) Geom2(ytil - y; alpha)
    with the project's two-sided geometric pmf. Its terms can be of size
    1e7 while the conditional's log pmf near its mode is of size 1, so the
    terms are built relative to the largest one, from the ratios
    Pois(y+1; mu) Geom2(ytil-y-1) / (Pois(y; mu) Geom2(ytil-y)) summed
    outward from it.
    """
    scale = max(abs(ytil), mu, 1.0)
    y = np.arange(0, int(max(ytil, 0) + mu + 60 * math.sqrt(scale) + 200))
    # Pois(y+1)/Pois(y) = mu/(y+1); Geom2(t - 1)/Geom2(t) = alpha^(|t - 1| - |t|)
    log_steps = np.log(mu / np.arange(1.0, y.size))
    log_steps += np.where(y[:-1] < ytil, -math.log(alpha), math.log(alpha))
    # the largest term, roughly (any point near it will do): log w(i+1) - log w(0) = cumulative[i]
    cumulative = np.cumsum(log_steps)
    top = int(np.argmax(cumulative)) + 1
    if cumulative[top - 1] < 0.0:
        top = 0
    log_relative = np.empty(y.size)
    log_relative[top] = 0.0
    np.cumsum(log_steps[top:], out=log_relative[top + 1 :])
    log_relative[:top] = -np.cumsum(log_steps[:top][::-1])[::-1]
    largest = log_relative.max()
    log_norm = largest + math.log(np.sum(np.exp(log_relative - largest)))
    assert log_relative[-1] < log_norm - 200, "the brute-force range is too short"
    log_marginal = ref_log_poisson([top], mu)[0] + geometric_logpmf(ytil - top, alpha) + log_norm
    return y, log_relative - log_norm, log_marginal


def chi_square_pvalue(draws, first, log_probs, min_expected=5.0):
    """Chi-square p-value of ``draws`` against the pmf exp(log_probs) on
    first, first + 1, ..., first + len - 1.

    The window keeps all but 1e-14 of the mass; draws outside it join the
    end cells, whose expectations also absorb the mass outside. Cells are
    merged left to right until each expects at least ``min_expected``.
    """
    probs = np.exp(log_probs)
    cdf = np.cumsum(probs)
    lo = int(np.searchsorted(cdf, 1e-14))
    hi = int(np.searchsorted(cdf, 1.0 - 1e-14))
    hi = min(max(hi, lo + 1), probs.size - 1)
    n = draws.size
    clipped = np.clip(draws - first, lo, hi) - lo
    observed_cells = np.bincount(clipped, minlength=hi - lo + 1).astype(float)
    expected_cells = n * probs[lo : hi + 1]
    expected_cells[0] += n * probs[:lo].sum()
    expected_cells[-1] += n * max(0.0, 1.0 - probs[: hi + 1].sum())
    observed, expected = [], []
    obs_acc = exp_acc = 0.0
    for o, e in zip(observed_cells, expected_cells, strict=True):
        obs_acc += o
        exp_acc += e
        if exp_acc >= min_expected:
            observed.append(obs_acc)
            expected.append(exp_acc)
            obs_acc = exp_acc = 0.0
    observed[-1] += obs_acc
    expected[-1] += exp_acc
    observed, expected = np.array(observed), np.array(expected)
    assert observed.size >= 2, "the test needs at least two cells"
    statistic = np.sum((observed - expected) ** 2 / expected)
    return stats.chi2.sf(statistic, observed.size - 1)


def gof(draws, ytil, mu, alpha):
    """Chi-square p-value of draws against the brute-force conditional."""
    _, log_p, _ = ref_conditional(ytil, mu, alpha)
    return chi_square_pvalue(draws, 0, log_p)


# ---------------------------------------------------------------------------
# Numba drivers
# ---------------------------------------------------------------------------


@njit(nogil=True)
def draw_true_counts(ytil, mu, alpha, n, seed):
    state = new_state(seed, 0, 0)
    out = np.empty(n, dtype=np.int64)
    for i in range(n):
        out[i] = sample_true_count(ytil, mu, alpha, state)
    return out


@njit(nogil=True)
def draw_poisson(lam, n, seed):
    state = new_state(seed, 0, 0)
    out = np.empty(n, dtype=np.int64)
    for i in range(n):
        out[i] = sample_poisson(lam, state)
    return out


@njit(nogil=True)
def forced_branch_draws(branch, ytil, mu, alpha, n, seed):
    """Draws from one branch of sample_true_count (0: upward inversion,
    1: rejection), also outside the range where it is picked."""
    state = new_state(seed, 0, 0)
    a = mu / alpha
    b = mu * alpha
    nn = float(ytil)
    mode = _mode(nn, a, b)
    out = np.empty(n, dtype=np.int64)
    for i in range(n):
        if branch == 0:
            out[i] = int(_upward_search(uniform(state), nn, a, b, False)[0])
        else:
            out[i] = int(_sample_rejection(nn, a, b, mode, state))
    return out


@njit(nogil=True)
def bessel_route_draws(ytil, mu, lambda_plus, lambda_minus, seed):
    """The true count of the Bessel route (models.sample_true_count) for each
    pair of noise rates."""
    seed_stream(seed, 0, 0)  # Numba's generator: its large binomials
    state = new_state(seed, 0, 0)
    out = np.empty(lambda_plus.size, dtype=np.int64)
    for i in range(lambda_plus.size):
        y, _, _, _ = models.sample_true_count(ytil, mu, lambda_plus[i], lambda_minus[i], state)
        out[i] = y
    return out


# ---------------------------------------------------------------------------
# The law: log pmf and log marginal against brute force
# ---------------------------------------------------------------------------

GRID_MU = [1e-300, 1e-3, 0.7, 7.0, 300.0, 1e4, 1e6]
GRID_ALPHA = [1e-12, 1e-3, math.exp(-1.0), 0.9, 1.0 - 1e-6, 1.0 - 1e-12]
GRID_YTIL = [-1_000_000, -50, 0, 1, 3, 10, 57, 300, 10_000, 1_000_000]


@pytest.mark.parametrize("mu", GRID_MU, ids=[f"mu={m:g}" for m in GRID_MU])
def test_logpmf_log_marginal_and_mean_match_brute_force_on_a_grid(mu):
    for alpha in GRID_ALPHA:
        for ytil in GRID_YTIL:
            y, ref_log_p, ref_log_marginal = ref_conditional(ytil, mu, alpha)
            ours = collapsed.log_marginal(ytil, mu, alpha)
            assert abs(ours - ref_log_marginal) <= 1e-10 * max(1.0, abs(ref_log_marginal)), (ytil, alpha)
            # the pmf wherever it is above e^-300, and one far tail point
            window = np.flatnonzero(ref_log_p > -300.0)
            window = np.append(window, min(y.size - 1, window[-1] + 50))
            log_p = collapsed.logpmf(y[window], ytil, mu, alpha)
            tolerance = 1e-10 * np.maximum(1.0, np.abs(ref_log_p[window]))
            assert np.all(np.abs(log_p - ref_log_p[window]) <= tolerance), (ytil, alpha)
            # the Numba kernel is what the wrapper calls
            assert log_marginal_nb(ytil, mu, alpha) == ours
            weighty = ref_log_p > -740.0  # all that float64 can weigh
            exact_mean = np.sum(y[weighty] * np.exp(ref_log_p[weighty]))
            assert collapsed.mean(ytil, mu, alpha) == pytest.approx(exact_mean, rel=1e-10, abs=1e-300)


def test_grid_covers_both_ways_to_the_marginal():
    # summed from y = 0 where the sampler inverts upward, the closed form elsewhere
    upward = closed_form = 0
    for mu in GRID_MU:
        for alpha in GRID_ALPHA:
            for ytil in GRID_YTIL:
                if ytil > 0:
                    a = mu / alpha
                    if _mode(float(ytil), a, mu * alpha) <= _UPWARD_MAX_MODE and a <= _UPWARD_MAX_A:
                        upward += 1
                    else:
                        closed_form += 1
    assert upward >= 50 and closed_form >= 100


@njit(nogil=True)
def fused_and_separate(ytil, mu, alpha, seed):
    separate_state = new_state(seed, 0, 0)
    fused_state = new_state(seed, 0, 0)
    separate = np.empty(ytil.size, dtype=np.int64)
    fused = np.empty(ytil.size, dtype=np.int64)
    log_marginals = np.empty(ytil.size)
    for i in range(ytil.size):
        separate[i] = sample_true_count(ytil[i], mu[i], alpha[i], separate_state)
        fused[i], log_marginals[i] = sample_true_count_and_log_marginal(ytil[i], mu[i], alpha[i], fused_state)
    return separate, fused, log_marginals


def test_fused_kernel_draws_the_same_counts_and_the_log_marginal():
    rng = np.random.default_rng(3)
    n = 30_000
    mu = np.exp(rng.uniform(math.log(1e-3), math.log(1e4), n))
    mu[:100] = 0.0
    alpha = rng.choice([1e-6, 0.1, E1, 0.8, 0.99], n)
    ytil = rng.poisson(mu) + rng.integers(-30, 30, n)
    separate, fused, log_marginals = fused_and_separate(ytil, mu, alpha, 17)
    np.testing.assert_array_equal(fused, separate)
    expected = np.array([log_marginal_nb(t, m, a) for t, m, a in zip(ytil, mu, alpha, strict=True)])
    np.testing.assert_allclose(log_marginals, expected, rtol=1e-13, atol=1e-13)
    # both branches and both signs of ytil were met
    modes = np.array([_mode(float(t), m / a, m * a) for t, m, a in zip(ytil, mu, alpha, strict=True)])
    assert np.sum((ytil > 0) & (modes <= _UPWARD_MAX_MODE)) > 1000
    assert np.sum((ytil > 0) & (modes > _UPWARD_MAX_MODE)) > 1000
    assert np.sum(ytil <= 0) > 1000


def test_zero_rate_is_a_point_mass_at_zero():
    for ytil in [-4, 0, 1, 7, 10_000]:
        for alpha in [1e-12, 0.5, 1.0 - 1e-12]:
            assert collapsed.logpmf(0, ytil, 0.0, alpha) == 0.0
            assert collapsed.logpmf(1, ytil, 0.0, alpha) == -np.inf
            assert collapsed.mean(ytil, 0.0, alpha) == 0.0
            assert np.all(draw_true_counts(ytil, 0.0, alpha, 1000, 1) == 0)
            # the marginal is then the noise pmf at ytil
            assert collapsed.log_marginal(ytil, 0.0, alpha) == pytest.approx(
                geometric_logpmf(ytil, alpha), rel=1e-14, abs=1e-14
            )


@pytest.mark.parametrize("mu, alpha", [(0.3, 0.2), (2.0, 0.6), (7.0, 0.8), (40.0, math.exp(-0.1)), (1e3, 0.99)])
def test_marginal_sums_to_one_over_ytil(mu, alpha):
    spread = int(mu + 40 * math.sqrt(mu + 1) + 60 / (1 - alpha))
    ytil = np.arange(-spread, 2 * spread)
    log_p = collapsed.log_marginal(ytil, mu, alpha)
    assert math.fsum(np.exp(log_p)) == pytest.approx(1.0, abs=1e-12)
    # the mean of ytil is mu: the noise is symmetric
    assert math.fsum(ytil * np.exp(log_p)) == pytest.approx(mu, rel=1e-10)


@pytest.mark.parametrize(
    "ytil, mu, alpha", [(3, 2.0, 0.6), (-2, 1.5, 0.5), (0, 0.7, 0.3), (12, 9.0, 0.8), (-7, 3.0, 0.9)]
)
def test_marginal_is_the_skellam_integrated_over_exponential_noise_rates(ytil, mu, alpha):
    # The Bessel route's model: ytil ~ Skellam(lambda+ + mu, lambda-) with
    # lambda+- ~ Exp(mean alpha / (1 - alpha)); Gauss-Laguerre in both rates.
    rate = (1.0 - alpha) / alpha
    nodes, weights = special.roots_laguerre(120)
    lambda_plus, lambda_minus = np.meshgrid(nodes / rate, nodes / rate, indexing="ij")
    integral = np.sum(np.outer(weights, weights) * stats.skellam.pmf(ytil, lambda_plus + mu, lambda_minus))
    assert collapsed.log_marginal(ytil, mu, alpha) == pytest.approx(math.log(integral), abs=1e-11)
    # and the project's own Skellam gives the same integral
    ours = np.sum(np.outer(weights, weights) * np.exp(skellam_logpmf(ytil, lambda_plus + mu, lambda_minus)))
    assert ours == pytest.approx(integral, rel=1e-11)


def test_log_poisson_pmf_matches_reference():
    for lam in [1e-300, 1e-3, 0.5, 7.0, 15.5, 99.9, 1234.5, 1e6, 3e9]:
        centre = int(lam)
        near = np.unique(np.clip([centre - 40, centre - 3, centre, centre + 1, centre + 40], 0, None))
        np.testing.assert_allclose(
            [log_poisson_pmf(float(k), lam) for k in near], ref_log_poisson(near, lam), rtol=1e-12, atol=1e-12
        )
        # far from lam the log pmf is large and the direct formula accurate
        # relative to it (both branches of bd0, every range of stirlerr)
        far = np.array(
            [k for k in [0, 1, 2, 15, 16, 35, 36, 80, 81, 500, 501, 2 * centre + 5] if abs(k - lam) > 0.5 * lam + 10]
        )
        direct = far * math.log(lam) - lam - special.gammaln(far + 1.0)
        np.testing.assert_allclose([log_poisson_pmf(float(k), lam) for k in far], direct, rtol=1e-12)
    assert log_poisson_pmf(0.0, 0.0) == 0.0 and log_poisson_pmf(3.0, 0.0) == -np.inf


def test_stirling_remainder_table_matches_exact_sums():
    for k in range(1, 60):
        exact = math.fsum(math.log(i) for i in range(1, k + 1)) - (
            (k + 0.5) * math.log(k) - k + 0.5 * math.log(2 * math.pi)
        )
        # the reference subtracts numbers of size k log k
        assert _stirlerr(float(k)) == pytest.approx(exact, abs=1e-15 * max(1.0, k * math.log(k)))


def test_log_rate_ratio_matches_sums_of_logs():
    # log(c^d k! / (k + d)!): the sampler's log weights relative to the mode,
    # by lgamma below 20 and Stirling's series differenced above
    for k in [0, 5, 18, 19, 20, 25, 99, 100, 1000, 1e6]:
        for d in [-37, -1, 1, 5, 120]:
            if k + d < 0:
                continue
            for c in [k + 0.5, 2.0 * k + 1.0, 0.3 * (k + 1.0)]:
                if d > 0:
                    exact = math.fsum(math.log(c / (k + i)) for i in range(1, d + 1))
                else:
                    exact = math.fsum(math.log((k + i) / c) for i in range(d + 1, 1))
                assert _log_rate_ratio(float(k), float(d), c) == pytest.approx(exact, rel=1e-12, abs=1e-12)


# ---------------------------------------------------------------------------
# The sampler: goodness of fit with power checks
# ---------------------------------------------------------------------------

E1 = math.exp(-1.0)
E01 = math.exp(-0.1)

# (ytil, mu, alpha, [(wrong mu, wrong alpha), ...], draws)
SAMPLER_CASES = [
    (-3, 4.0, 0.5, [(4.0, 0.51), (4.04, 0.5)], 200_000),  # ytil <= 0: Poisson(mu alpha)
    (2, 0.3, 0.5, [(0.3, 0.51), (0.306, 0.5)], 200_000),  # mode 0: the first test
    (3, 2.0, 0.6, [(2.0, 0.61), (2.04, 0.6)], 200_000),  # mode at the kink
    (5, 2.5, 0.5, [(2.5, 0.51), (2.55, 0.5)], 200_000),  # tie: a = ytil, w(4) = w(5)
    (5, 12.0, 0.5, [(12.0, 0.51), (12.24, 0.5)], 200_000),  # tie: b = ytil + 1, w(5) = w(6)
    (7, 7.0, 0.8, [(7.0, 0.82), (7.14, 0.8)], 200_000),  # both pieces heavy (Figure 3)
    (40, 16.5 * 0.9, 0.9, [(16.5 * 0.9, 0.918), (15.15, 0.9)], 200_000),  # the largest upward mode (16)
    (40, 17.5 * 0.9, 0.9, [(17.5 * 0.9, 0.918), (16.07, 0.9)], 200_000),  # the smallest rejection mode (17)
    (100, 202.0, 0.5, [(202.0, 0.51), (206.0, 0.5)], 200_000),  # rejection at a tie b = ytil + 1
    (100, 50.0, 0.5, [(50.0, 0.51), (51.0, 0.5)], 200_000),  # rejection at a tie a = ytil
    (300, 300.0, E01, [(300.0, E01 * 1.02), (306.0, E01)], 200_000),  # heavy-tailed network cells
    (300, 300.0, E1, [(300.0, E1 * 1.02), (303.0, E1)], 200_000),
    (10_050, 1e4, 0.9, [(1e4, 0.918), (1.02e4, 0.9)], 200_000),  # large mu
    (-5, 2e4, 0.7, [(2e4, 0.714), (2.04e4, 0.7)], 200_000),  # PTRS through ytil <= 0
    (9_900, 1e4, 1.0 - 1e-6, [(1.005e4, 1.0 - 1e-6)], 200_000),  # alpha near 1: wrong mu only
    (10_000, 30.0, 1.0 - 1e-12, [(30.6, 1.0 - 1e-12)], 200_000),
    (7, 5.0, 0.01, [(5.0, 0.012), (4.0, 0.01)], 200_000),  # alpha small: y = ytil mostly
    (50, 1e3, 1e-3, [(1e3, 1.2e-3), (1.2e3, 1e-3)], 1_000_000),  # huge a: rejection at the kink
    (1_000_000, 1e6, 0.5, [(1e6, 0.51)], 200_000),  # mu = ytil = 1e6
    (1_002_000, 1e6, 1.0 - 1e-3, [(1e6, 0.9985)], 200_000),  # mode floor(a) < ytil, wide
]


@pytest.mark.parametrize(
    "ytil, mu, alpha, wrong, n_draws",
    SAMPLER_CASES,
    ids=[f"ytil={c[0]}-mu={c[1]:g}-alpha={c[2]:.6g}" for c in SAMPLER_CASES],
)
def test_sample_true_count_matches_exact_pmf_and_rejects_wrong_ones(ytil, mu, alpha, wrong, n_draws):
    draws = draw_true_counts(ytil, mu, alpha, n_draws, 20190609)
    assert draws.min() >= 0
    assert gof(draws, ytil, mu, alpha) > P_FIT
    for wrong_mu, wrong_alpha in wrong:
        assert gof(draws, ytil, wrong_mu, wrong_alpha) < P_POWER, (wrong_mu, wrong_alpha)


def test_sampler_grid_covers_every_branch():
    upward = rejection = 0
    kinds = set()
    for ytil, mu, alpha, *_ in SAMPLER_CASES:
        if ytil <= 0:
            kinds.add("poisson-ptrs" if mu * alpha >= _PTRS_MIN_LAM else "poisson-inversion")
            continue
        a, b = mu / alpha, mu * alpha
        mode = _mode(float(ytil), a, b)
        kinds.add("below" if mode < ytil else "above" if mode > ytil else "kink")
        if mode <= _UPWARD_MAX_MODE:
            upward += 1
        else:
            rejection += 1
    assert kinds == {"poisson-ptrs", "poisson-inversion", "below", "above", "kink"}
    assert upward >= 5 and rejection >= 8


# Each branch on its own, also where sample_true_count does not pick it:
# rejection at modes 0, 3, 5 (a tie at the kink) and 6 (a tie past it),
# where its left tail is cut at 0; upward inversion at modes 30 and 100.
@pytest.mark.parametrize(
    "branch, ytil, mu, alpha, wrong_mu",
    [
        (1, 2, 0.3, 0.5, 0.33),
        (1, 3, 2.0, 0.6, 2.1),
        (1, 5, 2.5, 0.5, 2.6),
        (1, 5, 12.0, 0.5, 12.5),
        (1, 1, 1e-3, 0.5, 2e-3),
        (0, 40, 27.0, 0.9, 27.8),
        (0, 100, 50.0, 0.5, 51.0),
    ],
)
def test_each_sampler_branch_alone(branch, ytil, mu, alpha, wrong_mu):
    draws = forced_branch_draws(branch, ytil, mu, alpha, 200_000, 7)
    assert gof(draws, ytil, mu, alpha) > P_FIT
    assert gof(draws, ytil, wrong_mu, alpha) < P_POWER


def test_sampler_is_exact_in_every_regime():
    # Every corner of the parameter box: the draws stay where the pmf is not
    # negligible and their mean and variance match the exact ones within
    # Monte Carlo error. The moments are sums over a window of the log pmf
    # (checked against brute force above); the window must hold all the mass.
    n = 20_000
    for i, mu in enumerate(GRID_MU):
        for j, alpha in enumerate(GRID_ALPHA):
            for k, ytil in enumerate(GRID_YTIL):
                case = (ytil, mu, alpha)
                draws = draw_true_counts(ytil, mu, alpha, n, 1000 * i + 100 * j + k)
                spread = 20.0 * math.sqrt(max(draws.var(), 1.0)) + 30.0
                y = np.arange(max(0, int(draws.min() - spread)), int(draws.max() + spread))
                p = collapsed.pmf(y, ytil, mu, alpha)
                assert np.sum(p) == pytest.approx(1.0, abs=1e-9), case
                assert np.all(collapsed.logpmf(np.unique(draws), ytil, mu, alpha) > -60.0), case
                exact_mean = np.sum(y * p)
                assert collapsed.mean(ytil, mu, alpha) == pytest.approx(exact_mean, rel=1e-9), case
                centred = (y - exact_mean) ** 2
                variance = np.sum(centred * p)
                fourth = np.sum(centred * centred * p)
                mean_error = math.sqrt(variance / n)
                assert abs(draws.mean() - exact_mean) <= 6.0 * mean_error + 1e-9 * (1 + exact_mean), case
                # the sample variance's standard error is sqrt((mu_4 - var^2) / n)
                variance_error = math.sqrt(max(fourth - variance**2, 0.0) / n)
                assert abs(draws.var() - variance) <= 6.0 * variance_error + 1e-9, case


def test_degenerate_corners():
    # alpha = 1e-12: y = ytil but with probability ~ ytil/a + b/(ytil+1)
    assert np.all(draw_true_counts(20, 1e6, 1e-12, 100_000, 3) == 20)
    assert collapsed.pmf(21, 20, 1e6, 1e-12) == pytest.approx(1e-6 / 21, rel=1e-6)
    # mu = 1e-300: y = 0 surely, in both branches
    for ytil in [-1_000_000, 0, 1, 1_000_000]:
        assert np.all(draw_true_counts(ytil, 1e-300, 0.5, 10_000, 4) == 0)
    assert collapsed.logpmf(1, 5, 1e-300, 0.5) == pytest.approx(math.log(2e-300), rel=1e-12)


# ---------------------------------------------------------------------------
# Agreement with the model: the generative process and the Bessel route
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "ytil, mu, alpha, wrong_alpha", [(3, 2.0, 0.6, 0.63), (-1, 1.5, 0.5, 0.53), (6, 4.0, 0.75, 0.78)]
)
def test_generative_process_and_bessel_route_follow_the_collapsed_law(ytil, mu, alpha, wrong_alpha):
    # Exact draws from p(y, lambda+-, g+- | ytil): simulate the model
    # (lambda+- ~ Exp(mean alpha/(1-alpha)), y ~ Pois(mu), g+- ~ Pois(lambda+-))
    # and keep the runs whose ytil = y + g+ - g- matches.
    rng = np.random.default_rng(20190609)
    n_runs = 1_500_000
    scale = alpha / (1.0 - alpha)
    lambda_plus = rng.exponential(scale, n_runs)
    lambda_minus = rng.exponential(scale, n_runs)
    y = rng.poisson(mu, n_runs)
    keep = y + rng.poisson(lambda_plus) - rng.poisson(lambda_minus) == ytil
    exact_draws = y[keep]
    # The Bessel route given exact posterior noise rates draws y from the
    # same conditional (what the Gibbs chain targets).
    bessel_draws = bessel_route_draws(ytil, mu, lambda_plus[keep], lambda_minus[keep], 11)
    # And the collapsed sampler itself.
    collapsed_draws = draw_true_counts(ytil, mu, alpha, exact_draws.size, 12)
    support = np.arange(0, int(mu + ytil + 30 / (1 - alpha) + 60))
    log_p = collapsed.logpmf(support, ytil, mu, alpha)
    log_p_wrong = collapsed.logpmf(support, ytil, mu, wrong_alpha)
    assert exact_draws.size > 100_000
    for draws in (exact_draws, bessel_draws, collapsed_draws):
        assert chi_square_pvalue(draws, 0, log_p) > P_FIT
        assert chi_square_pvalue(draws, 0, log_p_wrong) < P_POWER


# ---------------------------------------------------------------------------
# The Poisson sampler
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "lam, wrong_lam",
    [
        (1e-3, 1.5e-3),
        (0.5, 0.51),
        (5.0, 5.1),
        (10.0, 10.15),
        (15.99, 16.2),
        (16.0, 16.2),
        (37.2, 37.7),
        (1e4, 1.0025e4),
        (1e6, 1.00025e6),
        (1e8, 1.000025e8),
    ],
)
def test_sample_poisson_matches_exact_pmf_and_rejects_wrong_one(lam, wrong_lam):
    draws = draw_poisson(lam, 200_000, 20190609)
    first = max(0, int(lam - 12 * math.sqrt(lam) - 20))
    values = np.arange(first, int(lam + 12 * math.sqrt(lam) + 40))
    assert chi_square_pvalue(draws, first, ref_log_poisson(values, lam)) > P_FIT
    assert chi_square_pvalue(draws, first, ref_log_poisson(values, wrong_lam)) < P_POWER


def test_sample_poisson_at_zero_and_tiny_rates():
    assert np.all(draw_poisson(0.0, 1000, 1) == 0)
    assert np.all(draw_poisson(1e-300, 100_000, 1) == 0)


# ---------------------------------------------------------------------------
# Streams, wrappers and input checks
# ---------------------------------------------------------------------------


@njit(nogil=True)
def _draws_from_state(chain_seed, unit, ytil, mu, alpha, n):
    state = np.empty(4, dtype=np.uint64)
    seed_state(state, chain_seed, 3, unit)
    out = np.empty(n, dtype=np.int64)
    for i in range(n):
        out[i] = sample_true_count(ytil, mu, alpha, state)
    return out


@njit(nogil=True)
def _draws_from_numba_generator(chain_seed, unit, ytil, mu, alpha, n):
    seed_stream(chain_seed, 3, unit)
    out = np.empty(n, dtype=np.int64)
    for i in range(n):
        out[i] = sample_true_count(ytil, mu, alpha, None)
    return out


@pytest.mark.parametrize("ytil, mu, alpha", [(-2, 3.0, 0.5), (4, 3.0, 0.5), (300, 300.0, E1), (-1, 1e4, 0.9)])
def test_the_same_state_gives_the_same_draws(ytil, mu, alpha):
    for draw in (_draws_from_state, _draws_from_numba_generator):
        first = draw(99, 5, ytil, mu, alpha, 300)
        np.testing.assert_array_equal(first, draw(99, 5, ytil, mu, alpha, 300))
        assert not np.array_equal(first, draw(99, 6, ytil, mu, alpha, 300))


def test_sample_is_reproducible_and_shaped():
    first = collapsed.sample([-3, 5, 300], [2.0, 7.0, 300.0], 0.8, random_state=11)
    np.testing.assert_array_equal(first, collapsed.sample([-3, 5, 300], [2.0, 7.0, 300.0], 0.8, random_state=11))
    assert first.shape == (3,) and first.dtype == np.int64
    grid = collapsed.sample([1, 2], 5.0, [[0.3], [0.6], [0.9], [0.99]], size=(4, 2), random_state=11)
    assert grid.shape == (4, 2)
    assert isinstance(collapsed.sample(3, 5.0, 0.5, random_state=0), int)
    # the wrapper draws from the same kernel: its law is the exact pmf
    draws = collapsed.sample(6, 4.0, 0.75, size=100_000, random_state=5)
    assert gof(draws, 6, 4.0, 0.75) > P_FIT


def test_logpmf_off_support_and_broadcasting():
    out = collapsed.logpmf([-1, 0.5, np.inf, 0, 3], 4, 2.0, 0.5)
    assert np.all(out[:3] == -np.inf) and np.all(np.isfinite(out[3:]))
    table = collapsed.pmf(np.arange(6)[:, None, None], [-2, 3, 8], 2.0, [[0.3], [0.95]])
    assert table.shape == (6, 2, 3)
    assert collapsed.pmf(4, 8, 2.0, 0.95) == table[4, 1, 2]
    assert collapsed.pmf(2, -2, 2.0, 0.3) == table[2, 0, 0]
    assert isinstance(collapsed.log_marginal(3, 2.0, 0.5), float)
    assert collapsed.log_marginal([[1, 2, 3]], [[1.0], [2.0]], 0.5).shape == (2, 3)
    assert collapsed.mean([1, 2], 2.0, 0.5).shape == (2,)
    # integer-valued floats are counts
    assert collapsed.log_marginal(3.0, 2.0, 0.5) == collapsed.log_marginal(3, 2.0, 0.5)


@pytest.mark.parametrize(
    "ytil, mu, alpha, error, needle",
    [
        (2.5, 1.0, 0.5, ValueError, "ytil must be integer"),
        (np.nan, 1.0, 0.5, ValueError, "ytil must be integer"),
        (1e13, 1.0, 0.5, ValueError, "ytil must be integer"),
        ("3", 1.0, 0.5, TypeError, "ytil must hold integer"),
        (True, 1.0, 0.5, TypeError, "ytil must hold integer"),
        (3, -1.0, 0.5, ValueError, "mu"),
        (3, np.inf, 0.5, ValueError, "mu"),
        (3, np.nan, 0.5, ValueError, "mu"),
        (3, 1.0, 0.0, ValueError, "alpha"),
        (3, 1.0, 1.0, ValueError, "alpha"),
        (3, 1.0, np.nan, ValueError, "alpha"),
        (3, 1.0, -0.2, ValueError, "alpha"),
    ],
)
def test_bad_parameters_are_named(ytil, mu, alpha, error, needle):
    for call in (
        lambda: collapsed.sample(ytil, mu, alpha),
        lambda: collapsed.logpmf(0, ytil, mu, alpha),
        lambda: collapsed.log_marginal(ytil, mu, alpha),
        lambda: collapsed.mean(ytil, mu, alpha),
    ):
        with pytest.raises(error, match=needle):
            call()


def test_size_that_does_not_fit_is_explained():
    with pytest.raises(ValueError, match="size"):
        collapsed.sample([1, 2, 3], 1.0, 0.5, size=(4, 2))
