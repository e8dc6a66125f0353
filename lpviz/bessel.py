"""The Bessel distribution (Yuan & Kalbfleisch 2000): pmf, moments, sampler.

For ``nu >= 0`` and ``a > 0``::

    P(m) = (a/2)^(2m+nu) / (I_nu(a) m! Gamma(m+nu+1)),   m = 0, 1, 2, ...

The private chains draw one Bessel variable per noised cell and sweep
(:func:`sample_nb`), so the sampler is a Numba kernel that needs no special
function: the pmf ratio ``P(m+1)/P(m) = (a^2/4) / ((m+1)(m+nu+1))`` is
decreasing in ``m`` (the pmf is log-concave), which gives

- at small modes (mode 0 for about 93% of a private chain's cells, and
  up to :data:`_UPWARD_MAX_MODE`), inversion upward from 0 against bounds
  on the normaliser: past the mode the ratios are below 1 and shrink, so
  the terms not yet summed are at most a geometric tail. Most draws are
  settled by the first bound (``P(0) >= 1 - r_0`` at mode 0), with no
  division and no sum;
- inversion outward from the mode for other narrow distributions: the
  normaliser is the sum of the pmf terms relative to the mode, summed until
  they are negligible;
- rejection from a three-piece log-concave envelope (flat around the mode,
  geometric tails, in the spirit of Devroye 2002) for wide ones (large
  ``a``), which costs O(1) per draw at any ``a`` and ``nu``.

``a == 0`` is the point mass at 0 (the limit ``a -> 0``): the chains meet it
when a rate underflows.

The vectorised public functions (:func:`logpmf`, :func:`mean`, ...) work in
log space through :func:`log_iv`, which stays finite where
``log(scipy.special.ive(nu, a)) + a`` underflows (e.g. ``nu=1e4, a=10``).
"""

import math

import numpy as np
from numba import njit
from scipy import special

from lpviz._random import chain_seed_from, seed_state, uniform

__all__ = ["logpmf", "pmf", "mean", "mode", "var", "log_iv", "sample", "sample_nb", "sample_stream", "mean_nb"]

# Inversion walks ~20 standard deviations of pmf terms per draw, rejection
# costs a few lgamma calls at any width; below this mode (variance < mode + 1)
# inversion is the faster (benchmarks/bench_bessel.py).
_INVERSION_MAX_MODE = 100.0
# Up to this mode the upward inversion from 0 (few terms before the mode,
# no normaliser summed to the end) beats the outward one; its terms relative
# to P(0) stay far from overflow.
_UPWARD_MAX_MODE = 8.0
# A side of the inversion sum stops once its terms fall below this
# fraction of the mode's term: the rest is below double precision.
_NEGLIGIBLE = 1e-17
# Largest ``a`` accepted (mode ~ a/2): float64 must still count the support
# near the mode one by one (its spacing reaches 1 at 9e15).
A_MAX = 1e15


# --------------------------------------------------------------------------
# Numba kernels
# --------------------------------------------------------------------------


@njit(nogil=True, cache=True)
def mode_nb(nu, a):
    """Mode of Bessel(nu, a): the largest m with m (m + nu) <= a^2 / 4."""
    quarter_a2 = 0.25 * a * a
    if quarter_a2 < nu + 1.0:  # P(1) < P(0): the common case in the chains
        return 0.0
    # (sqrt(a^2+nu^2) - nu) / 2 written without cancellation when nu >> a.
    m = math.floor(quarter_a2 * 2.0 / (math.sqrt(a * a + nu * nu) + nu))
    # Rounding can leave m one off; the defining inequality settles it.
    while (m + 1.0) * (m + 1.0 + nu) <= quarter_a2:
        m += 1.0
    while m > 0.0 and m * (m + nu) > quarter_a2:
        m -= 1.0
    return m


# Above this mode the mean kernel uses Amos's (1974) bounds on I_{nu+1}/I_nu
# instead of summing the pmf (about 40 sqrt(mode) terms): their midpoint is
# within (nu + 1) / a^2 (relative) of the exact ratio, a < 1e-9 error there
# for any nu the data can produce (nu < 4000).
_MEAN_SUM_MAX_MODE = 1e6


@njit(nogil=True, cache=True)
def mean_nb(nu, a):
    """Mean of Bessel(nu, a), ``a I_{nu+1}(a) / (2 I_nu(a))``, without Bessel functions.

    Sums ``(m - mode) P(m)`` outward from the mode with the pmf ratio until
    the terms fall below double precision (exact to rounding; a few terms
    when the mode is small, as in the variational fits), then adds the mode.
    Beyond a mode of :data:`_MEAN_SUM_MAX_MODE`, the midpoint of Amos's
    bounds ``a / (nu + 1/2 + sqrt(a^2 + (nu + c)^2))``, c = 3/2 and 1/2.
    """
    if not a > 0.0:
        return 0.0
    quarter_a2 = 0.25 * a * a
    mode = mode_nb(nu, a)
    if mode > _MEAN_SUM_MAX_MODE:
        low = a / (nu + 0.5 + math.sqrt(a * a + (nu + 1.5) ** 2))
        high = a / (nu + 0.5 + math.sqrt(a * a + (nu + 0.5) ** 2))
        return 0.25 * a * (low + high)
    total = 1.0
    offset_sum = 0.0
    term = 1.0
    m = mode
    while True:
        term *= quarter_a2 / ((m + 1.0) * (m + nu + 1.0))
        m += 1.0
        total += term
        offset_sum += (m - mode) * term
        if term < _NEGLIGIBLE:
            break
    term = 1.0
    m = mode
    while m > 0.0:
        term *= m * (m + nu) / quarter_a2
        m -= 1.0
        total += term
        offset_sum += (m - mode) * term
        if term < _NEGLIGIBLE:
            break
    return mode + offset_sum / total


@njit(nogil=True, cache=True)
def _log_gamma_ratio(x, d):
    """log Gamma(x + d) - log Gamma(x) without cancellation for large x."""
    y = x + d
    if x < 100.0 or y < 100.0:
        return math.lgamma(y) - math.lgamma(x)
    # Stirling series, differenced term by term; the first term rewritten
    # with log1p so the O(x log x) parts cancel exactly.
    main = (x - 0.5) * math.log1p(d / x) + d * math.log(y) - d
    corr_y = 1.0 / (12.0 * y) - 1.0 / (360.0 * y**3) + 1.0 / (1260.0 * y**5)
    corr_x = 1.0 / (12.0 * x) - 1.0 / (360.0 * x**3) + 1.0 / (1260.0 * x**5)
    return main + corr_y - corr_x


@njit(nogil=True, cache=True)
def _log_relative_pmf(m, mode, nu, log_half_a):
    """log P(m) - log P(mode)."""
    d = m - mode
    return 2.0 * d * log_half_a - _log_gamma_ratio(mode + 1.0, d) - _log_gamma_ratio(mode + nu + 1.0, d)


@njit(nogil=True, cache=True)
def _sample_inversion(nu, a, mode, state):
    """Inversion by sequential search outward from the mode.

    Terms are pmf values divided by P(mode), built from the pmf ratio; the
    search visits values in decreasing order of probability, so its expected
    length is about one standard deviation.
    """
    quarter_a2 = 0.25 * a * a
    total = 1.0
    term = 1.0
    m = mode
    while True:
        term *= quarter_a2 / ((m + 1.0) * (m + nu + 1.0))
        m += 1.0
        total += term
        if term < _NEGLIGIBLE:
            break
    term = 1.0
    m = mode
    while m > 0.0:
        term *= m * (m + nu) / quarter_a2
        m -= 1.0
        total += term
        if term < _NEGLIGIBLE:
            break

    u = uniform(state) * total
    cumulative = 1.0
    if u < cumulative:
        return int(mode)
    up = mode
    low = mode
    next_up = quarter_a2 / ((up + 1.0) * (up + nu + 1.0))
    next_low = low * (low + nu) / quarter_a2 if low > 0.0 else 0.0
    while True:
        if next_up >= next_low:
            up += 1.0
            cumulative += next_up
            if u < cumulative:
                return int(up)
            next_up *= quarter_a2 / ((up + 1.0) * (up + nu + 1.0))
        else:
            low -= 1.0
            cumulative += next_low
            if u < cumulative:
                return int(low)
            next_low = next_low * low * (low + nu) / quarter_a2 if low > 0.0 else 0.0
        if next_up < 1e-300 and next_low < 1e-300:
            # u fell in the rounding gap between the two sums (~1e-16).
            return int(up)


@njit(nogil=True, cache=True)
def _sample_rejection(nu, a, mode, state):
    """Rejection from an envelope that is flat on [left, right] around the
    mode and geometric beyond, using the pmf ratio at the break points.

    Log-concavity makes the envelope dominate: beyond ``right`` the ratios
    P(m+1)/P(m) only shrink, so P(right + j) <= P(right) r^j with
    r = P(right+1)/P(right), and likewise on the left. Break points about 1.1
    standard deviations from the mode accept ~78% of proposals.
    """
    quarter_a2 = 0.25 * a * a
    log_half_a = math.log(0.5 * a)
    variance = 1.0 / (1.0 / (mode + 1.0) + 1.0 / (mode + nu + 1.0))
    width = max(1.0, math.floor(1.1 * math.sqrt(variance) + 0.5))

    right = mode + width
    log_p_right = _log_relative_pmf(right, mode, nu, log_half_a)
    log_r = math.log(quarter_a2) - math.log(right + 1.0) - math.log(right + nu + 1.0)
    r = math.exp(log_r)
    mass_right = math.exp(log_p_right) * r / (1.0 - r)

    left = mode - width
    if left <= 0.0:
        left = 0.0
        log_p_left = 0.0
        log_s = -math.inf
        mass_left = 0.0
    else:
        log_p_left = _log_relative_pmf(left, mode, nu, log_half_a)
        log_s = math.log(left) + math.log(left + nu) - math.log(quarter_a2)
        s = math.exp(log_s)
        mass_left = math.exp(log_p_left) * s / (1.0 - s)

    mass_middle = right - left + 1.0
    total = mass_middle + mass_right + mass_left
    while True:
        u = uniform(state) * total
        if u < mass_middle:
            m = left + math.floor(uniform(state) * mass_middle)
            log_envelope = 0.0
        elif u < mass_middle + mass_right:
            # j >= 1 with P(j) proportional to r^j
            j = 1.0 + math.floor(math.log(1.0 - uniform(state)) / log_r)
            m = right + j
            log_envelope = log_p_right + j * log_r
        else:
            j = 1.0 + math.floor(math.log(1.0 - uniform(state)) / log_s)
            m = left - j
            if m < 0.0:
                continue
            log_envelope = log_p_left + j * log_s
        log_u = math.log(1.0 - uniform(state))
        if log_u <= _log_relative_pmf(m, mode, nu, log_half_a) - log_envelope:
            return int(m)


@njit(nogil=True, cache=True)
def _sample_upward(nu, quarter_a2, state):
    """Inversion upward from 0, for small modes (see :func:`_upward_from`)."""
    return _upward_from(uniform(state), nu, quarter_a2)


@njit(nogil=True, cache=True, inline="always")
def _upward_from(u, nu, quarter_a2):
    """Inversion upward from 0, for small modes, with the uniform ``u``.

    With terms ``t_m = P(m)/P(0)`` (``t_0 = 1``) and ratios
    ``r_m = t_{m+1}/t_m = (a^2/4) / ((m+1)(m+nu+1))``, decreasing, and below 1
    from the mode on, the normaliser ``T = sum t_m`` lies in
    ``[L_n, L_n + t_n r_n / (1 - r_n)]`` once ``L_n = t_0 + ... + t_n`` is
    known and ``r_n < 1`` (before that, in ``[L_n, inf)``). The draw is the
    first ``j`` with ``t_0 + ... + t_j > u T``; a candidate ``j`` is accepted
    or passed over as soon as the bounds decide it, and more terms are summed
    only while they do not. At mode 0, ``T <= 1 / (1 - r_0)`` settles
    ``m = 0`` for ``u < 1 - r_0``.
    """
    first_ratio_denominator = nu + 1.0
    # u < 1 - r_0, multiplied out (never true when r_0 >= 1).
    if u * first_ratio_denominator < first_ratio_denominator - quarter_a2:
        return 0
    return _upward_search(u, nu, quarter_a2)


@njit(nogil=True, cache=True)
def _upward_search(u, nu, quarter_a2):
    """The search of :func:`_upward_from` once ``m = 0`` is not settled at once.

    A separate (not inlined) function of scalars only: the chains' sweeps
    inline the first test and call this for the few cells it leaves."""
    first_ratio_denominator = nu + 1.0
    j = 0.0  # the candidate draw, its term and the sum of terms up to it
    term_j = 1.0
    sum_j = 1.0
    n = 0.0  # terms known up to n: the last one, their sum and the next ratio
    term_n = 1.0
    sum_n = 1.0
    ratio_n = quarter_a2 / first_ratio_denominator
    while True:
        tail = term_n * ratio_n / (1.0 - ratio_n) if ratio_n < 1.0 else math.inf
        if sum_j > u * (sum_n + tail):  # sum_j / T > u for every T allowed
            return int(j)
        if sum_j <= u * sum_n:  # sum_j / T <= u: the draw is above j
            term_j *= quarter_a2 / ((j + 1.0) * (j + nu + 1.0))
            j += 1.0
            sum_j += term_j
            if j > n:  # the same products and sums as below: equal values
                n = j
                term_n = term_j
                sum_n = sum_j
                ratio_n = quarter_a2 / ((n + 1.0) * (n + nu + 1.0))
            continue
        # Undecided: one more term narrows the bounds (the tail vanishes
        # once it is below the rounding of sum_n, which settles any u).
        term_n *= ratio_n
        n += 1.0
        sum_n += term_n
        ratio_n = quarter_a2 / ((n + 1.0) * (n + nu + 1.0))


@njit(nogil=True, cache=True, inline="always")
def _sample(nu, quarter_a2, state):
    """Bessel(nu, a) for ``quarter_a2 = a^2 / 4``; ``state`` as for
    :func:`lpviz._random.uniform`.

    Inlined into its callers with the upward inversion's first test: most
    draws of a sweep end there, and a call that passes the ``state`` array
    costs reference counting (atomic operations) on every cell.
    """
    if quarter_a2 <= 0.0:
        return 0
    # mode <= M exactly when (M + 1)(M + 1 + nu) > a^2/4; mode 0 is the
    # common case in the chains
    if quarter_a2 < (_UPWARD_MAX_MODE + 1.0) * (_UPWARD_MAX_MODE + 1.0 + nu):
        return _upward_from(uniform(state), nu, quarter_a2)
    return _sample_wide(nu, quarter_a2, state)


@njit(nogil=True, cache=True)
def _sample_wide(nu, quarter_a2, state):
    """Bessel(nu, a) when the mode exceeds :data:`_UPWARD_MAX_MODE`."""
    a = 2.0 * math.sqrt(quarter_a2)
    mode = mode_nb(nu, a)
    if mode < _INVERSION_MAX_MODE:
        return _sample_inversion(nu, a, mode, state)
    return _sample_rejection(nu, a, mode, state)


@njit(nogil=True, cache=True)
def sample_nb(nu, a):
    """One Bessel(nu, a) draw (int) for float ``nu >= 0`` and ``a >= 0``.

    Draws with Numba's thread-local ``np.random``, so
    :func:`lpviz._random.seed_stream` called by the caller fixes the result.
    ``a == 0`` returns 0. Arguments are not checked: callers guarantee them.
    """
    return _sample(nu, 0.25 * a * a, None)


@njit(nogil=True, cache=True, inline="always")
def sample_stream(nu, quarter_a2, state):
    """One Bessel(nu, a) draw from the xoshiro256** ``state`` (see
    :func:`lpviz._random.seed_state`), given ``quarter_a2 = a^2 / 4``: the
    chains have it as a product of rates, with no square root to take."""
    return _sample(nu, quarter_a2, state)


@njit(nogil=True, cache=True)
def _sample_many(nu, a, out, chain_seed):
    state = np.empty(4, dtype=np.uint64)
    seed_state(state, chain_seed, 0, 0)
    for i in range(out.size):
        out[i] = _sample(nu[i], 0.25 * a[i] * a[i], state)


# --------------------------------------------------------------------------
# Vectorised public functions
# --------------------------------------------------------------------------


def _as_parameters(nu, a, *, allow_zero_a=True):
    """Broadcast and check (nu, a); raise a ValueError naming the fix."""
    nu = np.asarray(nu, dtype=float)
    a = np.asarray(a, dtype=float)
    if not np.all(np.isfinite(nu)) or np.any(nu < 0):
        raise ValueError(
            "Bessel order nu must be finite and >= 0 (nu = |noised count|); "
            f"got {nu[~(np.isfinite(nu) & (nu >= 0))].ravel()[:3]}"
        )
    if not np.all(np.isfinite(a)) or np.any(a < 0) or np.any(a > A_MAX):
        bad = a[~(np.isfinite(a) & (a >= 0) & (a <= A_MAX))].ravel()[:3]
        raise ValueError(
            f"Bessel argument a must be finite, >= 0 and <= {A_MAX:g} (a = 2 sqrt(lambda1 lambda2)); got {bad}"
        )
    return np.broadcast_arrays(nu, a)


def _debye_log_iv(nu, a):
    """log I_nu(a) by the uniform asymptotic (Debye) expansion, DLMF 10.41.3.

    Relative error about u_5(t) / nu^5: below 1e-12 for nu >= 300, where it is
    used.
    """
    z = a / nu
    root = np.sqrt(1.0 + z * z)
    t = 1.0 / root
    eta = root + np.log(z / (1.0 + root))
    t2 = t * t
    u1 = t * (3.0 - 5.0 * t2) / 24.0
    u2 = t2 * (81.0 - 462.0 * t2 + 385.0 * t2**2) / 1152.0
    u3 = t * t2 * (30375.0 - 369603.0 * t2 + 765765.0 * t2**2 - 425425.0 * t2**3) / 414720.0
    u4 = (
        t2
        * t2
        * (4465125.0 - 94121676.0 * t2 + 349922430.0 * t2**2 - 446185740.0 * t2**3 + 185910725.0 * t2**4)
        / 39813120.0
    )
    series = 1.0 + u1 / nu + u2 / nu**2 + u3 / nu**3 + u4 / nu**4
    return nu * eta - 0.5 * np.log(2.0 * np.pi * nu) + 0.5 * np.log(t) + np.log(series)


def _series_log_ive(nu, a):
    """log I_nu(a) - a = logsumexp_m [(2m+nu) log(a/2) - log m! - log Gamma(m+nu+1) - a].

    Exact in floating point once the sum runs well past the largest term;
    the fallback where ``ive`` underflows and neither the short series nor
    the Debye expansion applies. One element at a time.
    """
    out = np.empty(nu.shape)
    for i, (n, x) in enumerate(zip(nu.ravel(), a.ravel(), strict=True)):
        centre = float(mode_nb(n, x))
        spread = math.sqrt(1.0 / (1.0 / (centre + 1.0) + 1.0 / (centre + n + 1.0)))
        m = np.arange(0.0, centre + 40.0 * spread + 60.0)
        out.flat[i] = special.logsumexp(_log_scaled_term(m, np.full(m.shape, n), np.full(m.shape, x)))
    return out


def _short_series_log_ive(nu, a):
    """log I_nu(a) - a by the series when a^2/4 <= nu + 1, vectorised.

    The term ratio (a^2/4) / ((m+1)(m+nu+1)) is then at most 1/(m+1), so the
    sum of terms relative to the first is a short, overflow-free product
    series: many cells (a Skellam log pmf over a noised matrix) at once.
    """
    quarter_a2 = 0.25 * a * a
    total = np.ones(nu.shape)
    term = np.ones(nu.shape)
    for m in range(60):  # 1/60! ~ 1e-82: the loop always ends by the break
        term *= quarter_a2 / ((m + 1.0) * (m + nu + 1.0))
        total += term
        if np.all(term < 1e-17 * total):
            break
    return _log_scaled_term(np.zeros(nu.shape), nu, a) + np.log(total)


def _log_ive(nu, a):
    """log I_nu(a) - a for a > 0 (broadcast float arrays of one shape)."""
    with np.errstate(under="ignore"):
        scaled = special.ive(nu, a)
    out = np.empty(nu.shape)
    # Below ~1e-280 ive loses digits to subnormals or underflows to 0.
    trusted = np.isfinite(scaled) & (scaled > 1e-280)
    out[trusted] = np.log(scaled[trusted])
    rest = ~trusted
    short = rest & (0.25 * a * a <= nu + 1.0)
    debye = rest & ~short & (nu >= 300.0)
    series = rest & ~short & ~debye  # not met in practice: ive holds there
    if np.any(short):
        out[short] = _short_series_log_ive(nu[short], a[short])
    if np.any(debye):
        out[debye] = _debye_log_iv(nu[debye], a[debye]) - a[debye]
    if np.any(series):
        out[series] = _series_log_ive(nu[series], a[series])
    return out


def log_iv(nu, a):
    """Natural log of the modified Bessel function of the first kind, I_nu(a).

    Parameters
    ----------
    nu : float or array_like, >= 0
        Order (need not be an integer).
    a : float or array_like, >= 0
        Argument.

    Returns
    -------
    float or ndarray
        ``log I_nu(a)``, finite for every ``a > 0`` (no underflow at large
        ``nu`` and small ``a``, no overflow at large ``a``); ``log I_nu(0)``
        is 0 for ``nu == 0`` and ``-inf`` otherwise.
    """
    nu, a = _as_parameters(nu, a)
    out = np.where(nu == 0.0, 0.0, -np.inf)
    positive = a > 0
    if np.any(positive):
        out[positive] = _log_ive(nu[positive], a[positive]) + a[positive]
    return out[()]


def logpmf(m, nu, a):
    """Log pmf of Bessel(nu, a) at ``m`` (``-inf`` off the support 0, 1, 2, ...).

    Broadcasts ``m``, ``nu`` and ``a``. ``a == 0`` is the point mass at 0.
    """
    m = np.asarray(m, dtype=float)
    nu, a = _as_parameters(nu, a)
    # The normaliser once per (nu, a), not once per m.
    log_norm = np.zeros(nu.shape)  # log I_nu(a) - a
    positive = a > 0
    if np.any(positive):
        log_norm[positive] = _log_ive(nu[positive], a[positive])
    m, nu, a, log_norm = np.broadcast_arrays(m, nu, a, log_norm)
    out = np.full(m.shape, -np.inf)
    on_support = (m >= 0) & (m == np.floor(m)) & np.isfinite(m)
    out[on_support & (a == 0) & (m == 0)] = 0.0
    live = on_support & (a > 0)
    if np.any(live):
        out[live] = _log_scaled_term(m[live], nu[live], a[live]) - log_norm[live]
    return out[()]


def _stirling_correction(x):
    """log Gamma(x) - [(x - 1/2) log x - x + log(2 pi)/2] for x >= 100 (error < 1e-17)."""
    inv = 1.0 / x
    inv2 = inv * inv
    return inv * (1.0 / 12.0 - inv2 * (1.0 / 360.0 - inv2 / 1260.0))


def _log_term_part(x, a, log_half_a):
    """(x - 1) log(a/2) - log Gamma(x) - x, accurate when both halves are huge.

    For x >= 100 Stirling's series is rearranged so that log(a/2) and log x
    only meet as log(a / 2x), taken by log1p when a is near 2x: the
    O(x log x) parts then never get computed, let alone cancel.
    """
    out = (x - 1.0) * log_half_a - special.gammaln(x) - x
    large = x >= 100.0
    if np.any(large):
        xl, al = x[large], a[large]
        ratio = al / (2.0 * xl)
        near = (ratio > 0.5) & (ratio < 2.0)
        log_ratio = np.where(near, np.log1p((al - 2.0 * xl) / (2.0 * xl)), np.log(ratio))
        out[large] = (
            (xl - 0.5) * log_ratio - 0.5 * log_half_a[large] - 0.5 * np.log(2.0 * np.pi) - _stirling_correction(xl)
        )
    return out


def _log_scaled_term(m, nu, a):
    """(2m + nu) log(a/2) - log m! - log Gamma(m + nu + 1) - a, for a > 0.

    Written as part(m+1) + part(m+nu+1) + (2m + 2 - a) + nu: near the mode
    2m + 2 - a is exact, so the pmf keeps ~1e-14 relative accuracy even at
    a = 1e8, where the direct formula loses 8 digits to cancellation.
    """
    log_half_a = np.log(0.5 * a)
    return (
        _log_term_part(m + 1.0, a, log_half_a)
        + _log_term_part(m + nu + 1.0, a, log_half_a)
        + ((2.0 * m + 2.0) - a)
        + nu
    )


def pmf(m, nu, a):
    """Pmf of Bessel(nu, a) at ``m``; see :func:`logpmf`."""
    return np.exp(logpmf(m, nu, a))


def mode(nu, a):
    """Mode ``floor((sqrt(a^2 + nu^2) - nu) / 2)`` (int64; the larger one on ties)."""
    nu, a = _as_parameters(nu, a)
    out = np.array([mode_nb(n, x) for n, x in zip(nu.ravel(), a.ravel(), strict=True)], dtype=np.int64)
    return out.reshape(nu.shape)[()]


def _ratio(nu, a):
    """R_nu(a) = I_{nu+1}(a) / I_nu(a) for a > 0, from the scaled logs."""
    return np.exp(_log_ive(nu + 1.0, a) - _log_ive(nu, a))


def mean(nu, a):
    """Mean ``a I_{nu+1}(a) / (2 I_nu(a))``."""
    nu, a = _as_parameters(nu, a)
    out = np.zeros(nu.shape)
    positive = a > 0
    if np.any(positive):
        out[positive] = 0.5 * a[positive] * _ratio(nu[positive], a[positive])
    return out[()]


def var(nu, a):
    """Variance ``mean + (a^2/4) R_nu (R_{nu+1} - R_nu)``, ``R_nu = I_{nu+1}/I_nu``."""
    nu, a = _as_parameters(nu, a)
    out = np.zeros(nu.shape)
    positive = a > 0
    if np.any(positive):
        n, x = nu[positive], a[positive]
        r0 = _ratio(n, x)
        r1 = _ratio(n + 1.0, x)
        out[positive] = 0.5 * x * r0 + 0.25 * x * x * r0 * (r1 - r0)
    return out[()]


def sample(nu, a, size=None, random_state=None):
    """Draw Bessel(nu, a) variates.

    Parameters
    ----------
    nu, a : float or array_like
        Order (>= 0) and argument (>= 0); broadcast together (and to ``size``).
    size : int or tuple of ints, optional
        Output shape; default the broadcast shape of ``nu`` and ``a``.
    random_state : None, int or numpy.random.Generator
        Seed; the same seed gives the same draws.

    Returns
    -------
    int or ndarray of int64
    """
    nu, a = _as_parameters(nu, a)
    shape = nu.shape if size is None else tuple(np.atleast_1d(size))
    try:
        nu = np.ascontiguousarray(np.broadcast_to(nu, shape)).ravel()
        a = np.ascontiguousarray(np.broadcast_to(a, shape)).ravel()
    except ValueError:
        raise ValueError(
            f"size {shape} does not fit nu and a of shape {nu.shape}: give a size they broadcast to"
        ) from None
    out = np.empty(nu.size, dtype=np.int64)
    _sample_many(nu, a, out, chain_seed_from(random_state))
    out = out.reshape(shape)
    return int(out) if out.ndim == 0 else out
