"""The geometric mechanism: privacy map, both samplers' law, input checks, log pmfs.

Samplers are checked with chi-square goodness of fit against the exact pmf
(tail bins pooled so every bin expects >= 5 draws), each with a power check:
the same draws must be rejected at a slightly wrong alpha.
"""

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats
from scipy.special import gammaln, logsumexp

import lpviz
from lpviz import privacy
from lpviz.privacy import (
    alpha_from,
    epsilon_from,
    geometric_logpmf,
    heterogeneous_alpha,
    privatize,
    skellam_logpmf,
    truncate,
)
from lpviz.release import smallest_int_dtype

ACCEPT = 1e-3  # a correct sampler with a fixed seed must give p above this
REJECT = 1e-6  # a wrong parameter must give p below this


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------


def chisquare_pvalue(draws, logpmf, min_expected=5.0, window=4000):
    """Chi-square GOF p-value of integer ``draws`` against ``logpmf(support)``.

    Cells expecting fewer than ``min_expected`` draws are pooled into a left
    and a right tail bin (the mass outside ``window`` goes to the tails too).
    """
    draws = np.asarray(draws).ravel()
    n = draws.size
    center = int(np.median(draws))
    support = np.arange(center - window, center + window + 1)
    p = np.exp(logpmf(support))
    interior = np.flatnonzero(n * p >= min_expected)
    lo, hi = support[interior[0]], support[interior[-1]]
    inside = (support >= lo) & (support <= hi)
    p_left = p[support < lo].sum()
    p_mid = p[inside]
    p_right = max(1.0 - p_left - p_mid.sum(), 0.0)
    expected = n * np.concatenate([[p_left], p_mid, [p_right]])
    counts = np.bincount(np.clip(draws, lo - 1, hi + 1) - (lo - 1), minlength=hi - lo + 3)
    keep = expected > 0
    assert counts[~keep].sum() == 0, "draws outside the support of the pmf"
    # Pool a tail bin that expects too little into its neighbour.
    obs, exp = list(counts[keep]), list(expected[keep])
    for end in (0, -1):
        if exp[end] < min_expected and len(exp) > 2:
            j = 1 if end == 0 else -2
            exp[j] += exp[end]
            obs[j] += obs[end]
            del exp[end], obs[end]
    obs, exp = np.array(obs, float), np.array(exp, float)
    exp *= obs.sum() / exp.sum()  # remove round-off between the two totals
    return stats.chisquare(obs, exp).pvalue


def geo(alpha):
    return lambda t: geometric_logpmf(t, alpha)


def assert_law_and_power(noise, alpha, delta=0.03):
    """``noise`` fits 2Geo(alpha) and is rejected at alpha * (1 -/+ delta)."""
    assert chisquare_pvalue(noise, geo(alpha)) > ACCEPT
    assert chisquare_pvalue(noise, geo(alpha * (1 - delta))) < REJECT
    assert chisquare_pvalue(noise, geo(alpha * (1 + delta))) < REJECT


def skellam_logpmf_bruteforce(k, mu1, mu2, n_terms=4000):
    """log sum_n Pois(n + k; mu1) Pois(n; mu2), k >= 0, by log-sum-exp."""
    if k < 0:
        return skellam_logpmf_bruteforce(-k, mu2, mu1, n_terms)
    n = np.arange(n_terms, dtype=float)
    terms = (n + k) * np.log(mu1) - mu1 - gammaln(n + k + 1) + n * np.log(mu2) - mu2 - gammaln(n + 1)
    return float(logsumexp(terms))


# ---------------------------------------------------------------------------
# privacy map
# ---------------------------------------------------------------------------


def test_alpha_from_is_the_theorem1_map_and_only_epsilon_over_N_matters():
    assert alpha_from(1.0) == pytest.approx(np.exp(-1.0), rel=1e-15)
    assert alpha_from(3.0, N=2) == pytest.approx(np.exp(-1.5), rel=1e-15)
    assert alpha_from(3.0, N=2) == pytest.approx(alpha_from(6.0, N=4), rel=1e-15)
    assert isinstance(alpha_from(1.0), float)
    eps = np.array([0.1, 1.0, 3.0])
    np.testing.assert_allclose(alpha_from(eps, N=5), np.exp(-eps / 5), rtol=1e-15)
    np.testing.assert_allclose(epsilon_from(alpha_from(eps, N=5), N=5), eps, rtol=1e-12)
    assert epsilon_from(0.5, N=3) == pytest.approx(3 * np.log(2.0), rel=1e-15)


def test_privacy_map_agrees_with_opendp_discrete_laplace():
    import opendp.prelude as dp

    dp.enable_features("contrib")
    space = (dp.vector_domain(dp.atom_domain(T="i64")), dp.l1_distance(T="i64"))
    for epsilon, N in [(1.0, 1), (0.5, 3), (3.0, 2)]:
        alpha = alpha_from(epsilon, N)
        scale = -1.0 / np.log(alpha)  # the scale privatize(exact=True) uses
        assert scale == pytest.approx(N / epsilon, rel=1e-12)
        measurement = dp.m.make_laplace(*space, scale=scale)
        assert measurement.map(N) == pytest.approx(epsilon, rel=1e-9)
        assert epsilon_from(alpha, N) == pytest.approx(measurement.map(N), rel=1e-9)


@pytest.mark.parametrize(
    "epsilon, N, match",
    [
        (0.0, 1, "epsilon must be finite and > 0"),
        (-1.0, 1, "epsilon must be finite and > 0"),
        (np.nan, 1, "epsilon must be finite and > 0"),
        ([1.0, 0.0], 1, "epsilon must be finite and > 0"),
        (1.0, 0.5, "N must be >= 1"),
        (1.0, 0, "N must be >= 1"),
        (1.0, np.inf, "N must be >= 1"),
    ],
)
def test_alpha_from_rejects_bad_privacy_levels(epsilon, N, match):
    with pytest.raises(ValueError, match=match):
        alpha_from(epsilon, N)


@pytest.mark.parametrize("alpha", [0.0, 1.0, -0.2, 1.5, np.nan, [0.5, 1.0]])
def test_epsilon_from_rejects_alpha_outside_unit_interval(alpha):
    with pytest.raises(ValueError, match=r"alpha must lie strictly between 0 and 1"):
        epsilon_from(alpha)


def test_N_must_be_a_number():
    with pytest.raises(TypeError, match="N must be a number"):
        alpha_from(1.0, N="2")


# ---------------------------------------------------------------------------
# the fast sampler's law
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("alpha", [0.3, 0.85])
def test_fast_noise_is_two_sided_geometric(alpha):
    rng = np.random.default_rng(1)
    Y = rng.poisson(3.0, size=(200, 1000))
    noise = privatize(Y, alpha=alpha, random_state=2).Y_obs - Y
    assert_law_and_power(noise, alpha)


def test_epsilon_and_N_set_the_noise_law():
    Y = np.zeros((100, 2000), dtype=np.int64)
    noise = privatize(Y, epsilon=3.0, N=2, random_state=3).Y_obs
    assert_law_and_power(noise, np.exp(-1.5))


def test_empirical_log_ratio_slope_is_minus_epsilon_over_N():
    epsilon, N = 1.0, 2
    Y = np.full((400, 1000), 7)
    noise = (privatize(Y, epsilon=epsilon, N=N, random_state=4).Y_obs - Y).ravel()
    for side in (noise, -noise):  # both tails
        C = np.bincount(side[side >= 0])
        k = np.arange(np.argmax(C < 100))  # 0, 1, ... while every count is >= 100
        slope, _ = np.polyfit(k, np.log(C[k]), 1, w=np.sqrt(C[k]))
        # standard error of a weighted fit with var(log C) = 1/C
        se = 1.0 / np.sqrt(np.sum(C[k] * (k - np.average(k, weights=C[k])) ** 2))
        assert abs(slope - (-epsilon / N)) < 4 * se
        assert 4 * se < 0.02 * epsilon / N  # the check is tight enough to mean something
        # each step ln(C[k+1]/C[k]) where both counts are large
        step = np.flatnonzero((C[:-1] >= 2000) & (C[1:] >= 2000))
        assert step.size >= 5
        ratios = np.log(C[step + 1] / C[step])
        assert np.all(np.abs(ratios + epsilon / N) < 4 * np.sqrt(1 / C[step] + 1 / C[step + 1]))


def test_neighbouring_inputs_are_epsilon_indistinguishable():
    """Outputs for y and y + N: the histograms' log ratio stays within epsilon."""
    epsilon, N, y, n = 1.0, 3, 5, 400_000
    out_y, out_yN, out_y2N = (
        privatize(np.full((1, n), count), epsilon=epsilon, N=N, random_state=seed).Y_obs[0]
        for count, seed in ((y, 5), (y + N, 6), (y + 2 * N, 7))
    )
    lo = min(out_y.min(), out_yN.min(), out_y2N.min())
    H_y, H_yN, H_y2N = (np.bincount(o - lo) for o in (out_y, out_yN, out_y2N))
    size = max(H_y.size, H_yN.size, H_y2N.size)
    H_y, H_yN, H_y2N = (np.pad(H, (0, size - H.size)) for H in (H_y, H_yN, H_y2N))

    both = (H_y >= 500) & (H_yN >= 500)
    log_ratio = np.log(H_y[both] / H_yN[both])
    tolerance = 4 * np.sqrt(1 / H_y[both] + 1 / H_yN[both])
    assert np.all(np.abs(log_ratio) <= epsilon + tolerance)
    # The bound is attained outside [y, y + N]: the map is tight, not loose.
    assert np.max(np.abs(log_ratio)) > epsilon - np.max(tolerance)

    # Power: inputs 2N apart are only 2 epsilon-indistinguishable, and the check sees it.
    both = (H_y >= 500) & (H_y2N >= 500)
    far = np.abs(np.log(H_y[both] / H_y2N[both])) - 4 * np.sqrt(1 / H_y[both] + 1 / H_y2N[both])
    assert np.max(far) > epsilon * 1.5


# ---------------------------------------------------------------------------
# Theorem 2: exponentially randomized Skellam noise is two-sided geometric
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("alpha", [0.4, 0.8])
def test_theorem2_exponential_skellam_mixture_is_two_sided_geometric(alpha):
    rng = np.random.default_rng(8)
    n = 200_000
    mean = alpha / (1 - alpha)  # Exp with MEAN alpha/(1-alpha), i.e. rate (1-alpha)/alpha
    lam_plus = rng.exponential(mean, size=n)
    lam_minus = rng.exponential(mean, size=n)
    assert abs(lam_plus.mean() - mean) < 4 * mean / np.sqrt(n)
    assert stats.kstest(lam_minus, stats.expon(scale=mean).cdf).pvalue > ACCEPT
    tau = rng.poisson(lam_plus) - rng.poisson(lam_minus)
    assert_law_and_power(tau, alpha)
    # The paper's misprinted rate (Exp with RATE alpha/(1-alpha)) gives another law.
    wrong = rng.poisson(rng.exponential(1 / mean, n)) - rng.poisson(rng.exponential(1 / mean, n))
    assert chisquare_pvalue(wrong, geo(alpha)) < REJECT


def test_theorem2_holds_exactly_for_skellam_logpmf():
    """Integrate Skellam(k; l+, l-) over the two Exp priors (Gauss-Laguerre)."""
    alpha = 0.6
    mean = alpha / (1 - alpha)
    x, w = np.polynomial.laguerre.laggauss(80)
    l1, l2 = np.meshgrid(mean * x, mean * x, indexing="ij")
    log_w = np.log(w)[:, None] + np.log(w)[None, :]
    for k in [0, 1, -2, 5, -9]:
        mixed = logsumexp(log_w + skellam_logpmf(k, l1, l2))
        assert mixed == pytest.approx(geometric_logpmf(k, alpha), abs=1e-9)
    # Power: Exp with the misprinted RATE alpha/(1-alpha) misses the law by far more.
    l1, l2 = np.meshgrid(x / mean, x / mean, indexing="ij")
    misprint = logsumexp(log_w + skellam_logpmf(5, l1, l2))
    assert abs(misprint - geometric_logpmf(5, alpha)) > 0.1


# ---------------------------------------------------------------------------
# heterogeneous noise
# ---------------------------------------------------------------------------


def test_per_row_alpha_gives_each_row_its_own_law(monkeypatch):
    # small blocks so rows of one alpha span several blocks of the fast sampler
    monkeypatch.setattr(privacy, "_CELLS_PER_BLOCK", 3 * 50_000)
    alpha = np.array([0.2, 0.9, 0.5, 0.7, 0.2, 0.9, 0.5])
    Y = np.random.default_rng(9).poisson(2.0, size=(alpha.size, 50_000))
    noise = privatize(Y, alpha=alpha, random_state=10).Y_obs - Y
    for a in np.unique(alpha):
        assert_law_and_power(noise[alpha == a], a, delta=0.05)


def test_per_row_epsilon_equals_per_row_alpha():
    Y = np.arange(40).reshape(4, 10)
    eps = np.array([0.5, 1.0, 2.0, 4.0])
    a = privatize(Y, epsilon=eps, N=2, random_state=11)
    b = privatize(Y, alpha=np.exp(-eps / 2), random_state=11)
    np.testing.assert_array_equal(a.Y_obs, b.Y_obs)
    # a per-row epsilon is recorded as the per-row alpha it gives
    np.testing.assert_allclose(a.alpha, np.exp(-eps / 2), rtol=1e-15)
    assert a.epsilon is None and a.N is None


def test_heterogeneous_alpha_is_beta_around_alpha0():
    alpha0, c, n = 0.3, 10.0, 20_000
    draws = heterogeneous_alpha(n, alpha0, concentration=c, random_state=12)
    assert draws.shape == (n,)
    assert np.all((draws > 0) & (draws < 1))
    sd = np.sqrt(alpha0 * (1 - alpha0) / (c + 1))
    assert abs(draws.mean() - alpha0) < 4 * sd / np.sqrt(n)
    beta = stats.beta(c * alpha0, c * (1 - alpha0))
    assert stats.kstest(draws, beta.cdf).pvalue > ACCEPT
    assert stats.kstest(draws, stats.beta(c * 0.32, c * 0.68).cdf).pvalue < REJECT
    np.testing.assert_array_equal(draws, heterogeneous_alpha(n, alpha0, c, random_state=12))
    # a tiny alpha0 with a small concentration still gives alphas in (0, 1) the mechanism accepts ...
    tiny = heterogeneous_alpha(1000, 1e-3, concentration=1, random_state=13)
    assert np.all((tiny > 0) & (tiny < 1))
    privatize(np.ones((1000, 2), dtype=int), alpha=tiny, random_state=0, allow_no_noise=True)
    # ... but most are below 1e-12 (no noise at all), which privatize refuses unless asked
    assert np.mean(tiny < privacy.NEGLIGIBLE_ALPHA) > 0.5
    with pytest.raises(ValueError, match="allow_no_noise=True"):
        privatize(np.ones((1000, 2), dtype=int), alpha=tiny, random_state=0)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(n_rows=0, alpha0=0.5), ValueError, "n_rows must be >= 1"),
        (dict(n_rows=2.5, alpha0=0.5), TypeError, "n_rows must be an integer"),
        (dict(n_rows=3, alpha0=1.0), ValueError, "alpha must lie strictly between 0 and 1"),
        (dict(n_rows=3, alpha0=[0.2, 0.3]), TypeError, "alpha0 must be one number"),
        (dict(n_rows=3, alpha0=0.5, concentration=0), ValueError, "concentration must be"),
    ],
)
def test_heterogeneous_alpha_rejects_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        heterogeneous_alpha(**kwargs)


# ---------------------------------------------------------------------------
# the exact (OpenDP) sampler has the same law
# ---------------------------------------------------------------------------
# OpenDP's secure generator cannot be seeded: these draws differ run to run,
# so the thresholds leave a false-failure chance below 1e-6 per test.


def test_exact_sampler_has_the_two_sided_geometric_law(monkeypatch):
    monkeypatch.setattr(privacy, "_EXACT_CELLS_PER_CALL", 30_000)  # several batches
    epsilon, N = 1.5, 2
    alpha = alpha_from(epsilon, N)
    Y = np.zeros((100, 1000), dtype=np.int64)
    release = privatize(Y, epsilon=epsilon, N=N, exact=True)
    assert not release.simulated and release.noise_seed is None
    exact = release.Y_obs
    assert exact.dtype == smallest_int_dtype(exact) and exact.dtype.kind == "i" and exact.shape == Y.shape
    assert chisquare_pvalue(exact, geo(alpha)) > REJECT
    assert chisquare_pvalue(exact, geo(alpha * 0.97)) < REJECT
    assert chisquare_pvalue(exact, geo(alpha * 1.03)) < REJECT
    # and the same law as the fast path: two-sample chi-square on pooled bins
    fast = privatize(Y, epsilon=epsilon, N=N, random_state=14).Y_obs
    edges = np.arange(-8, 10) - 0.5
    bins = np.digitize(np.concatenate([exact.ravel(), fast.ravel()]), edges)
    table = np.stack([np.bincount(b, minlength=edges.size + 1) for b in np.split(bins, 2)])
    assert stats.chi2_contingency(table).pvalue > REJECT


def test_exact_sampler_per_row_alpha(monkeypatch):
    monkeypatch.setattr(privacy, "_EXACT_CELLS_PER_CALL", 30_000)  # one row per batch
    alpha = np.array([0.3, 0.8, 0.3, 0.8])
    Y = np.full((4, 25_000), 3)
    noise = privatize(Y, alpha=alpha, exact=True).Y_obs - Y
    for a in (0.3, 0.8):
        assert chisquare_pvalue(noise[alpha == a], geo(a)) > REJECT
        assert chisquare_pvalue(noise[alpha == a], geo(a * 1.05)) < REJECT


def test_exact_sampler_refuses_a_seed():
    with pytest.raises(ValueError, match="cannot be seeded"):
        privatize(np.ones((1, 3), dtype=int), epsilon=1.0, exact=True, random_state=0)


# ---------------------------------------------------------------------------
# privatize: inputs, outputs, errors
# ---------------------------------------------------------------------------


def test_privatize_is_reproducible_and_leaves_input_alone():
    Y = np.random.default_rng(15).poisson(4.0, size=(6, 15))
    before = Y.copy()
    a = privatize(Y, epsilon=1.0, random_state=16).Y_obs
    assert a.shape == Y.shape and a.dtype == smallest_int_dtype(a) and a.dtype.kind == "i"  # the smallest integer type
    np.testing.assert_array_equal(Y, before)
    np.testing.assert_array_equal(a, privatize(Y, epsilon=1.0, random_state=16).Y_obs)
    assert not np.array_equal(a, privatize(Y, epsilon=1.0, random_state=17).Y_obs)
    # a Generator is accepted and advanced
    rng = np.random.default_rng(18)
    assert not np.array_equal(
        privatize(Y, epsilon=1.0, random_state=rng).Y_obs, privatize(Y, epsilon=1.0, random_state=rng).Y_obs
    )
    # integral floats, lists, unsigned ints and sparse matrices are counts too
    for same in (Y.astype(float), Y.astype(np.uint16), Y.tolist(), sp.csr_matrix(Y)):
        np.testing.assert_array_equal(a, privatize(same, epsilon=1.0, random_state=16).Y_obs)
    floats = Y.astype(float)
    privatize(floats, epsilon=1.0, random_state=0)
    np.testing.assert_array_equal(floats, before)


def test_top_level_names_are_the_privacy_functions():
    assert lpviz.privatize is privatize
    assert lpviz.alpha_from is alpha_from
    assert lpviz.truncate is truncate
    assert lpviz.heterogeneous_alpha is heterogeneous_alpha


@pytest.mark.parametrize(
    "Y, kwargs, error, match",
    [
        ([[1, -2], [3, 4]], dict(epsilon=1.0), ValueError, "1 negative entries"),
        ([1.0, 2.5], dict(epsilon=1.0), ValueError, "non-integer entries"),
        ([1.0, np.nan], dict(epsilon=1.0), ValueError, "NaN or infinite"),
        ([1.0, np.inf], dict(epsilon=1.0), ValueError, "NaN or infinite"),
        (sp.csr_matrix(np.array([[0, 1.5]])), dict(epsilon=1.0), ValueError, "non-integer entries"),
        ([True, False], dict(epsilon=1.0), TypeError, "boolean"),
        (["1", "2"], dict(epsilon=1.0), TypeError, "must hold integer counts"),
        (np.zeros((0, 3), dtype=int), dict(epsilon=1.0), ValueError, "Y is empty"),
        (5, dict(epsilon=1.0), ValueError, "Y is a scalar"),
        ([1, 2], dict(epsilon=1.0), ValueError, "at least two modes"),
        (np.ones((2, 3, 4), dtype=int), dict(epsilon=1.0, kind="network"), ValueError, "kind='tensor'"),
        ([[1, 2]], dict(), ValueError, "give the privacy level"),
        ([[1, 2]], dict(epsilon=1.0, alpha=0.5), ValueError, "not both"),
        ([[1, 2]], dict(alpha=0.5, N=2), ValueError, "leave N at 1"),
        ([[1, 2]], dict(epsilon=0.0), ValueError, "epsilon must be finite and > 0"),
        ([[1, 2]], dict(epsilon=1.0, N=0), ValueError, "N must be >= 1"),
        ([[1, 2]], dict(alpha=1.0), ValueError, "strictly between 0 and 1"),
        ([[1, 2], [3, 4]], dict(alpha=[0.5, 0.5, 0.5]), ValueError, "Y has 2 rows"),
        ([[1, 2], [3, 4]], dict(epsilon=[1.0, 2.0, 3.0]), ValueError, "Y has 2 rows"),
        ([[1, 2]], dict(epsilon=1.0, exact="yes"), TypeError, "exact must be True, False or None"),
    ],
)
def test_privatize_rejects_bad_input_with_a_clear_message(Y, kwargs, error, match):
    with pytest.raises(error, match=match):
        privatize(Y, **kwargs)


def test_truncate_is_what_the_naive_method_sees():
    Y_obs = np.array([[-3, 0, 2], [5, -1, 1]])
    before = Y_obs.copy()
    out = truncate(Y_obs)
    np.testing.assert_array_equal(out, [[0, 0, 2], [5, 0, 1]])
    assert out.dtype == np.int64
    np.testing.assert_array_equal(Y_obs, before)
    sparse = sp.csr_matrix(Y_obs)
    out_sparse = truncate(sparse)
    assert sp.issparse(out_sparse) and out_sparse.nnz == 3
    np.testing.assert_array_equal(out_sparse.toarray(), out)
    np.testing.assert_array_equal(sparse.toarray(), before)
    with pytest.raises(ValueError, match="non-integer"):
        truncate([0.5, 1.0])
    with pytest.raises(ValueError, match="NaN"):
        truncate([np.nan])


# ---------------------------------------------------------------------------
# log pmfs far in the tails
# ---------------------------------------------------------------------------


def test_geometric_logpmf_normalised_and_finite_in_the_tails():
    for alpha in (0.05, 0.5, 0.999):
        tau = np.arange(-200_000, 200_001)
        assert logsumexp(geometric_logpmf(tau, alpha)) == pytest.approx(0.0, abs=1e-9)
        steps = np.diff(geometric_logpmf(np.arange(0, 50), alpha))
        np.testing.assert_allclose(steps, np.log(alpha), rtol=1e-12)
    far = geometric_logpmf(10**9, 0.5)
    assert np.isfinite(far)
    assert far == pytest.approx(np.log(1 / 3) + 1e9 * np.log(0.5), rel=1e-12)
    np.testing.assert_allclose(geometric_logpmf([-3, 3], [0.2, 0.2]), np.log((0.8 / 1.2) * 0.2**3), rtol=1e-12)


@pytest.mark.parametrize(
    "k, mu1, mu2",
    [
        (200, 1.0, 1.0),  # scipy.stats.skellam gives -inf here
        (-200, 1.0, 1.0),
        (0, 1.0, 1.0),
        (3, 2.5, 0.7),
        (-40, 0.3, 30.0),
        (500, 400.0, 2.0),
        (1000, 0.01, 0.02),
        (7, 1e-6, 50.0),
    ],
)
def test_skellam_logpmf_matches_the_poisson_convolution(k, mu1, mu2):
    got = skellam_logpmf(k, mu1, mu2)
    assert np.isfinite(got)
    assert got == pytest.approx(skellam_logpmf_bruteforce(k, mu1, mu2), rel=1e-9, abs=1e-9)


def test_skellam_logpmf_normalised_broadcast_and_one_sided():
    k = np.arange(-300, 301)
    for mu1, mu2 in [(1.0, 1.0), (20.0, 3.0), (0.05, 80.0)]:
        assert logsumexp(skellam_logpmf(k, mu1, mu2)) == pytest.approx(0.0, abs=1e-9)
        # agrees with scipy where scipy is accurate
        mid = np.arange(-10, 11)
        np.testing.assert_allclose(skellam_logpmf(mid, mu1, mu2), stats.skellam.logpmf(mid, mu1, mu2), rtol=1e-7)
    out = skellam_logpmf(np.array([[0], [3]]), np.array([1.0, 2.0]), 0.5)
    assert out.shape == (2, 2)
    # one rate zero: a Poisson law on one side
    np.testing.assert_allclose(skellam_logpmf([0, 4], 3.0, 0.0), stats.poisson.logpmf([0, 4], 3.0), rtol=1e-12)
    np.testing.assert_allclose(skellam_logpmf([0, -4], 0.0, 3.0), stats.poisson.logpmf([0, 4], 3.0), rtol=1e-12)
    assert skellam_logpmf(-1, 3.0, 0.0) == -np.inf
    assert skellam_logpmf(0, 0.0, 0.0) == 0.0
    with pytest.raises(ValueError, match="rates"):
        skellam_logpmf(0, -1.0, 1.0)
    with pytest.raises(ValueError, match="whole numbers"):
        skellam_logpmf(0.5, 1.0, 1.0)
