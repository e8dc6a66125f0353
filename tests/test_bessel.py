"""The Bessel distribution: log I_nu, pmf, moments and the Numba sampler.

References are computed independently of lpviz.bessel: log I_nu(a) and the
pmf normaliser by log-sum-exp of the defining series in float64, moments by
brute-force sums over the support, sampler output by chi-square goodness of
fit against the exact pmf (tails pooled) with a power check at a slightly
wrong parameter.
"""

import math

import numpy as np
import pytest
from numba import njit
from scipy import special, stats

from lpviz import bessel
from lpviz._random import seed_stream
from lpviz.bessel import (
    _INVERSION_MAX_MODE,
    _UPWARD_MAX_MODE,
    _log_gamma_ratio,
    _sample_inversion,
    _sample_rejection,
    _sample_upward,
    mode_nb,
    sample_nb,
)

ALPHA_FIT = 1e-3  # a correct sampler passes at this level (fixed seeds)
ALPHA_POWER = 1e-6  # the same test must reject a slightly wrong pmf this hard


def series_log_iv(nu, a):
    """log I_nu(a) from the series sum_m (a/2)^(2m+nu) / (m! Gamma(m+nu+1))."""
    m = np.arange(0.0, 0.5 * a + 50.0 * math.sqrt(a + 1.0) + 200.0)
    terms = (2.0 * m + nu) * math.log(0.5 * a) - special.gammaln(m + 1.0) - special.gammaln(m + nu + 1.0)
    return special.logsumexp(terms)


def support_window(nu, a, width=15.0):
    """Integers around the mode holding all but ~1e-40 of the mass."""
    centre = int(bessel.mode(nu, a))
    spread = math.sqrt(centre + 1.0)  # variance < mode + 1
    low = max(0, int(centre - width * spread - 10))
    return np.arange(low, int(centre + width * spread + 20) + 1)


def chi_square_pvalue(draws, nu, a, min_expected=10.0):
    """Chi-square p-value of ``draws`` against Bessel(nu, a).

    Cells of the support window are merged left to right until each expects
    at least ``min_expected`` draws; draws outside the window join the end
    cells, whose expectation also absorbs the (negligible) mass outside.
    """
    values = support_window(nu, a)
    probs = bessel.pmf(values, nu, a)
    n = draws.size
    clipped = np.clip(draws, values[0], values[-1]) - values[0]
    observed_cells = np.bincount(clipped, minlength=values.size)
    expected_cells = n * probs
    expected_cells[-1] += n * max(0.0, 1.0 - probs.sum())

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


# (nu, a, wrong nu, wrong a, draws): a grid over both sampler branches and the
# extremes; the wrong parameters are off by 10% at most, mostly far less.
SAMPLER_CASES = [
    (0.0, 0.1, 0.0, 0.11, 1_000_000),  # inversion, mode 0, rare 1s
    (1e4, 10.0, 1e4, 11.0, 1_000_000),  # huge nu, small a: ive underflows
    (0.0, 1.0, 0.0, 1.04, 200_000),
    # mode 0 with r_0 = (a^2/4) / (nu + 1) near 1: the upward inversion
    # must sum many terms before its bounds on the normaliser decide a draw
    (0.0, 1.99, 0.0, 1.94, 200_000),
    (5.0, 4.89, 5.0, 4.8, 200_000),
    # the largest mode inverted upward from 0, and the next (outward)
    (0.0, 2 * math.sqrt(_UPWARD_MAX_MODE * (_UPWARD_MAX_MODE + 1) + 8), 0.0, 17.5, 200_000),
    (0.0, 2 * (_UPWARD_MAX_MODE + 1) + 0.1, 0.0, 18.5, 200_000),
    (3.0, 2.5, 3.5, 2.5, 200_000),  # wrong nu
    (0.5, 4.0, 0.5, 4.1, 200_000),  # non-integer nu
    (20.0, 10.0, 20.0, 10.3, 200_000),  # where the chains live
    (2.7, 7.3, 3.2, 7.3, 200_000),  # non-integer nu and a, wrong nu
    # nu = 0: mode = floor(a/2); the widest inversion and narrowest rejection
    (0.0, 2 * _INVERSION_MAX_MODE - 1, 0.0, 2 * _INVERSION_MAX_MODE - 3, 200_000),
    (0.0, 2 * _INVERSION_MAX_MODE + 1, 0.0, 2 * _INVERSION_MAX_MODE + 3, 200_000),
    (0.5, 1000.0, 0.5, 990.0, 200_000),
    (0.0, 1e4, 0.0, 1e4 * 0.998, 200_000),
    (1e4, 1e4, 1.01e4, 1e4, 200_000),  # large nu and a, wrong nu
    (37.5, 1e6, 37.5, 1e6 * 0.9998, 200_000),
    (0.5, 1e8, 0.5, 1e8 * 0.99998, 200_000),  # far beyond the chains
]


@pytest.mark.parametrize(
    "nu, a, wrong_nu, wrong_a, n_draws", SAMPLER_CASES, ids=[f"nu={c[0]:g}-a={c[1]:g}" for c in SAMPLER_CASES]
)
def test_sample_matches_exact_pmf_and_rejects_wrong_one(nu, a, wrong_nu, wrong_a, n_draws):
    draws = bessel.sample(nu, a, size=n_draws, random_state=20190609)
    assert draws.dtype == np.int64 and draws.min() >= 0
    assert chi_square_pvalue(draws, nu, a) > ALPHA_FIT
    assert chi_square_pvalue(draws, wrong_nu, wrong_a) < ALPHA_POWER


def test_sampler_grid_covers_every_branch():
    modes = [mode_nb(nu, a) for nu, a, *_ in SAMPLER_CASES]
    assert sum(m == 0 for m in modes) >= 5
    assert sum(0 < m <= _UPWARD_MAX_MODE for m in modes) >= 4
    assert any(m == _UPWARD_MAX_MODE for m in modes)
    assert sum(_UPWARD_MAX_MODE < m < _INVERSION_MAX_MODE for m in modes) >= 2
    assert sum(m >= _INVERSION_MAX_MODE for m in modes) >= 5


@njit(nogil=True)
def _forced_draws(branch, nu, a, n, seed):
    np.random.seed(seed)
    mode = mode_nb(nu, a)
    out = np.empty(n, dtype=np.int64)
    for i in range(n):
        if branch == 0:
            out[i] = _sample_inversion(nu, a, mode, None)
        elif branch == 1:
            out[i] = _sample_rejection(nu, a, mode, None)
        else:
            out[i] = _sample_upward(nu, 0.25 * a * a, None)
    return out


# Each branch on its own, outside the range where sample_nb picks it:
# rejection at mode 0, 1 and 30 (its envelope loses the left tail at the
# first two), outward inversion at mode 0, 30 and 500 (a long walk, both
# directions) and upward inversion at mode 4 and 30.
@pytest.mark.parametrize(
    "branch, nu, a, wrong_a",
    [
        (1, 3.0, 2.5, 2.6),
        (1, 0.5, 4.0, 4.15),
        (1, 0.0, 60.0, 61.0),
        (0, 0.0, 60.0, 61.0),
        (0, 0.5, 1000.0, 990.0),
        (0, 0.0, 1.0, 1.04),  # outward inversion at mode 0, where upward is used
        (2, 3.0, 12.0, 12.3),  # upward inversion at mode 4 and mode 30
        (2, 0.0, 60.0, 61.0),
    ],
)
def test_each_sampler_branch_alone(branch, nu, a, wrong_a):
    draws = _forced_draws(branch, nu, a, 200_000, 7)
    assert chi_square_pvalue(draws, nu, a) > ALPHA_FIT
    assert chi_square_pvalue(draws, nu, wrong_a) < ALPHA_POWER


@pytest.mark.parametrize("nu", [0.0, 2.5, 1e4])
def test_zero_and_tiny_a(nu):
    # a == 0 (a rate underflowed in the chain) is the point mass at 0.
    assert sample_nb(nu, 0.0) == 0
    assert np.all(bessel.sample(nu, 0.0, size=1000, random_state=0) == 0)
    assert bessel.pmf(0, nu, 0.0) == 1.0 and bessel.pmf(1, nu, 0.0) == 0.0
    assert bessel.mean(nu, 0.0) == 0.0 and bessel.var(nu, 0.0) == 0.0 and bessel.mode(nu, 0.0) == 0
    # a = 1e-8: P(1) = a^2 / (4 (nu+1)) to leading order, far below 2^-53.
    a = 1e-8
    assert np.all(bessel.sample(nu, a, size=100_000, random_state=0) == 0)
    expected_p1 = a * a / (4.0 * (nu + 1.0))
    assert bessel.pmf(1, nu, a) == pytest.approx(expected_p1, rel=1e-12)
    assert bessel.logpmf(0, nu, a) == pytest.approx(-expected_p1, rel=1e-6)
    assert bessel.mean(nu, a) == pytest.approx(expected_p1, rel=1e-12)


LOG_IV_NU = [0.0, 0.5, 1.0, 2.7, 10.0, 99.5, 150.3, 299.0, 300.0, 301.0, 1000.0, 1e4, 3e4]
LOG_IV_A = [1e-8, 1e-3, 0.1, 1.0, 10.0, 45.0, 300.0, 1e3, 1e4, 3e4]


def test_log_iv_matches_series_on_a_wide_grid():
    nu, a = np.meshgrid(LOG_IV_NU, LOG_IV_A, indexing="ij")
    ours = bessel.log_iv(nu, a)
    reference = np.vectorize(series_log_iv)(nu, a)
    assert ours.shape == nu.shape and np.all(np.isfinite(ours))
    np.testing.assert_allclose(ours, reference, rtol=1e-12, atol=1e-12)


def test_log_iv_stays_finite_where_log_ive_underflows():
    with np.errstate(divide="ignore", under="ignore"):
        naive = np.log(special.ive(1e4, 10.0)) + 10.0
    assert naive == -np.inf
    assert bessel.log_iv(1e4, 10.0) == pytest.approx(series_log_iv(1e4, 10.0), rel=1e-13)
    # and no overflow at large a
    assert bessel.log_iv(0.0, 1e6) == pytest.approx(1e6 - 0.5 * math.log(2 * math.pi * 1e6), rel=1e-12)


def test_log_iv_at_zero_and_scalar_types():
    assert bessel.log_iv(0.0, 0.0) == 0.0
    assert bessel.log_iv(2.0, 0.0) == -np.inf
    assert isinstance(bessel.log_iv(1.0, 2.0), float)
    assert bessel.log_iv(1.0, 2.0) == pytest.approx(math.log(special.iv(1.0, 2.0)), rel=1e-14)


MOMENT_CASES = [
    (0.0, 1e-8),
    (3.0, 1e-3),
    (0.0, 0.5),
    (1.0, 1.0),
    (0.5, 4.0),
    (2.7, 7.3),
    (20.0, 10.0),
    (1e4, 10.0),
    (0.0, 127.0),
    (5.0, 300.0),
    (300.5, 1000.0),
    (0.0, 1e4),
    (1e4, 1e4),
    (37.5, 1e5),
]


@pytest.mark.parametrize("nu, a", MOMENT_CASES, ids=[f"nu={n:g}-a={x:g}" for n, x in MOMENT_CASES])
def test_pmf_and_moments_match_brute_force_sums(nu, a):
    values = support_window(nu, a, width=40.0)
    probs = bessel.pmf(values, nu, a)
    # float64 holds log I_nu(a) - a only to ~1e-16 of its size (6.6e4 at
    # nu=1e4, a=10), which bounds the pmf's relative accuracy
    log_scale = max(1.0, abs(bessel.log_iv(nu, a) - a))
    assert probs.sum() == pytest.approx(1.0, abs=1e-13 + 1e-14 * log_scale)
    brute_mean = np.sum(values * probs)
    brute_var = np.sum((values - brute_mean) ** 2 * probs)
    assert bessel.mean(nu, a) == pytest.approx(brute_mean, rel=1e-9, abs=1e-300)
    assert bessel.var(nu, a) == pytest.approx(brute_var, rel=1e-8, abs=1e-300)
    # a maximiser (nu=0, a=1e4 is a tie: P(4999) == P(5000))
    assert bessel.pmf(bessel.mode(nu, a), nu, a) == pytest.approx(probs.max(), rel=1e-12)
    # the pmf ratio the sampler relies on
    finite = probs[:-1] > 1e-250
    ratio = probs[1:][finite] / probs[:-1][finite]
    expected = 0.25 * a * a / ((values[:-1] + 1.0) * (values[:-1] + nu + 1.0))
    np.testing.assert_allclose(ratio, expected[finite], rtol=1e-7)


def test_mean_within_one_of_mode_on_a_wide_grid():
    # Schofield's proposition, used by the variational method.
    nu = np.concatenate([[0.0, 0.25, 0.5, 1.0], np.logspace(-3, 4, 40)])
    a = np.concatenate([[1e-8], np.logspace(-4, 6, 90)])
    nu, a = np.meshgrid(nu, a)
    gap = np.abs(bessel.mean(nu, a) - bessel.mode(nu, a))
    assert gap.shape == nu.shape
    assert np.all(gap <= 1.0)
    assert gap.max() > 0.5  # the bound is nearly attained, not vacuous


def test_mode_follows_the_closed_form():
    nu = np.array([0.0, 0.0, 1.0, 2.5, 1e4, 1e4, 7.0])
    a = np.array([1e-8, 2.0, 10.0, 6.0, 10.0, 1e4, 1e6])
    expected = np.floor((np.sqrt(a**2 + nu**2) - nu) / 2)
    np.testing.assert_array_equal(bessel.mode(nu, a), expected)
    # the exact tie m (m + nu) = a^2 / 4 (a = 2 sqrt(6), nu = 1 -> P(1) == P(2))
    a_tie = 2.0 * math.sqrt(6.0)
    assert bessel.pmf(2, 1.0, a_tie) == pytest.approx(bessel.pmf(1, 1.0, a_tie), rel=1e-12)


def test_log_gamma_ratio_matches_exact_sums_of_logs():
    for x in [1.5, 50.0, 99.0, 150.0, 1e4, 3.3e6, 1e9, 1e12]:
        for d in [-37.0, -1.0, 1.0, 5.0, 120.0]:
            if x + d <= 0:
                continue
            start, stop = (x, x + d) if d > 0 else (x + d, x)
            exact = math.fsum(math.log(start + k) for k in range(int(abs(d))))
            exact = exact if d > 0 else -exact
            assert _log_gamma_ratio(x, d) == pytest.approx(exact, rel=1e-13, abs=1e-13)


def test_logpmf_off_support_and_broadcasting():
    out = bessel.logpmf([-1, 0.5, np.inf, 0, 1], 2.0, 3.0)
    assert np.all(out[:3] == -np.inf) and np.all(np.isfinite(out[3:]))
    table = bessel.pmf(np.arange(5)[:, None], [0.0, 1.5, 4.0], [[1.0], [2.0], [3.0], [4.0], [5.0]])
    assert table.shape == (5, 3)
    assert bessel.pmf(3, 1.5, 4.0) == table[3, 1]


def test_sample_is_reproducible_and_shaped():
    first = bessel.sample([0.0, 3.0, 1e4], [2.0, 500.0, 1e4], random_state=11)
    again = bessel.sample([0.0, 3.0, 1e4], [2.0, 500.0, 1e4], random_state=11)
    np.testing.assert_array_equal(first, again)
    assert first.shape == (3,)
    grid = bessel.sample([1.0, 2.0], 5.0, size=(4, 2), random_state=11)
    assert grid.shape == (4, 2)
    other = bessel.sample(1.0, 5.0, size=1000, random_state=12)
    assert not np.array_equal(other, bessel.sample(1.0, 5.0, size=1000, random_state=13))
    assert isinstance(bessel.sample(1.0, 5.0, random_state=0), int)


@njit(nogil=True)
def _stream_draws(chain_seed, unit, nu, a, n):
    seed_stream(chain_seed, 3, unit)
    out = np.empty(n, dtype=np.int64)
    for i in range(n):
        out[i] = sample_nb(nu, a)
    return out


def test_kernel_draws_follow_the_callers_stream():
    first = _stream_draws(99, 5, 2.0, 40.0, 200)
    np.testing.assert_array_equal(first, _stream_draws(99, 5, 2.0, 40.0, 200))
    assert not np.array_equal(first, _stream_draws(99, 6, 2.0, 40.0, 200))


@pytest.mark.parametrize(
    "nu, a, needle",
    [
        (-1.0, 1.0, "nu must be"),
        (np.nan, 1.0, "nu must be"),
        (1.0, -0.5, "a must be"),
        (1.0, np.inf, "a must be"),
        (1.0, 1e20, "a must be"),
    ],
)
def test_bad_parameters_are_named(nu, a, needle):
    for call in (
        lambda: bessel.sample(nu, a),
        lambda: bessel.logpmf(0, nu, a),
        lambda: bessel.mean(nu, a),
        lambda: bessel.log_iv(nu, a),
    ):
        with pytest.raises(ValueError, match=needle):
            call()


def test_size_that_does_not_fit_is_explained():
    with pytest.raises(ValueError, match="size"):
        bessel.sample([1.0, 2.0, 3.0], 1.0, size=(4, 2))
