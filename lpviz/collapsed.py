"""The collapsed conditional of a true count given its noised count (DESIGN.md 1b).

With ``y ~ Pois(mu)`` and two-sided geometric noise ``ytil - y ~ Geom2(alpha)``,
``Geom2(t; alpha) = (1 - alpha) / (1 + alpha) alpha^|t|`` (the law of
``g+ - g-`` once the Bessel route's noise rates ``lambda+-`` are integrated
out), the true count given the noised count ``ytil = n`` has weights::

    w(y) = Pois(y; mu) alpha^|n - y|,   y = 0, 1, 2, ...

Write ``a = mu / alpha`` and ``b = mu alpha``. For ``y <= n`` the weights are
proportional to ``a^y / y!``, for ``y >= n`` to ``b^y / y!`` (the two forms
agree at ``y = n``). So

- ``n <= 0``: ``y ~ Poisson(b)`` exactly (:func:`sample_poisson`);
- ``n > 0``: the ratio ``r(y) = w(y + 1) / w(y)`` is ``a / (y + 1)`` for
  ``y < n`` and ``b / (y + 1)`` for ``y >= n``: strictly decreasing in ``y``
  (it drops by ``alpha^2`` at ``n``), so ``w`` is log-concave with mode
  ``floor(a)`` if ``a < n``, ``floor(b)`` if ``b >= n + 1``, else ``n`` (the
  largest maximiser; ratios decrease strictly, so at most one tie, between the
  mode and the value just below it).

Sampling (:func:`sample_true_count`) never needs the normaliser, so no
incomplete gamma function is evaluated per draw:

- modes up to :data:`_UPWARD_MAX_MODE`: inversion upward from 0 against
  bounds on the normaliser, as in :mod:`lpviz.bessel`. Terms ``t_y =
  w(y) / w(0)`` are products of ratios; once a ratio ``r_m < 1`` the terms
  not yet summed are at most ``t_m r_m / (1 - r_m)`` (ratios only shrink).
  A candidate ``j`` is returned as soon as ``t_0 + ... + t_j > u T`` holds for
  every normaliser ``T`` the bounds allow, and passed over as soon as it
  fails for all of them: the result is the inverse CDF at ``u``, with no
  truncation. At mode 0, ``u < 1 - r_0`` settles ``y = 0`` at once. Terms
  stay below ``1e300`` because ``a <=`` :data:`_UPWARD_MAX_A` is required too
  (otherwise rejection is used, which has no such limit);
- larger modes: rejection from an envelope that is flat on ``[L, R]`` around
  the mode and geometric beyond, with the ratios at the break points. By
  log-concavity ``w(R + j) <= w(R) r(R)^j`` and ``w(L - j) <= w(L)
  r(L - 1)^-j``, so the envelope dominates ``w`` for any break points;
  they sit about 1.1 local standard deviations from the mode, shortened on
  a side whose ratio already decays fast (the kink at ``n`` when alpha is
  small), which keeps the acceptance rate near 0.8 at any ``mu``, ``n`` and
  ``alpha``. The acceptance test compares log weights relative to the
  mode, computed piecewise with the local rate (``a`` or ``b``) and
  Stirling's series differenced term by term (:func:`_log_rate_ratio`), so
  nothing of size ``mu log mu`` cancels. On the flat part a squeeze accepts
  most proposals without that evaluation: ``log w`` is concave, so it lies
  above its chords from the mode to the break points.

Poisson draws (:func:`sample_poisson`; the ``n <= 0`` branch and the sparse
step): inversion from 0 below :data:`_PTRS_MIN_LAM` (the running remainder
``u - F(k)``; a ``u`` that falls in the rounding gap past the last
representable term is redrawn), above it PTRS (Hormann 1993, the transformed
rejection with squeeze that NumPy uses; valid from ``lam = 10``), with the
acceptance test on the log pmf written as Loader's saddle-point form
(:func:`log_poisson_pmf`), exact to rounding at any ``lam``
(``-lam + k log lam - lgamma(k + 1)`` loses ~1e-9 at ``lam = 1e6``).

The marginal (:func:`log_marginal_nb`, the per-cell term of the marginal log
likelihood)::

    p(n | mu, alpha) = (1 - alpha) / (1 + alpha) sum_y w(y)

is ``alpha^|n| exp(-mu (1 - alpha))`` times the constant for ``n <= 0``. For
``n > 0`` and modes the sampler inverts upward from 0, the terms ``w(y) /
w(0)`` are few: they are summed until the geometric bound on the rest is
below ``1e-17`` of the sum (:func:`sample_true_count_and_log_marginal`
finishes the sum its search started). Otherwise the sum splits into the
pieces ``y <= n`` and ``y > n``; each is its largest term times a sum of
terms relative to it, and that relative sum is a ratio of a Poisson CDF (or
survival function) to a Poisson pmf:

- lower piece, ``a < n + 1``: peak ``floor(a)``, relative sum
  ``(1 - P(Y_a > n)) / Pois(floor(a); a)``; ``P(Y_a > n) = Pois(n+1; a)
  sum_j prod_{i<=j} a/(n+1+i)`` is at most 0.64, so ``log1p`` of minus it
  is well conditioned;
- lower piece, ``a >= n + 1``: peak ``n``, relative sum ``sum_j
  prod_{i<j} (n-i)/a`` (the Poisson CDF over its last term);
- upper piece, ``b < n + 1``: peak ``n + 1``, relative sum ``sum_j
  prod_{i<=j} b/(n+1+i)`` (the survival function over its first term);
- upper piece, ``b >= n + 1``: peak ``floor(b)``, relative sum
  ``(1 - P(Y_b <= n)) / Pois(floor(b); b)``, ``P(Y_b <= n) <= 0.64``.

These are the series of the regularised incomplete gamma functions (NR 6.2.5
and its finite counterpart), summed directly with a geometric bound on what
is left (:func:`_up_sum`, :func:`_down_sum`): they stop when the bound falls
below ``1e-17`` of the sum, after about ``9 sqrt(n)`` terms at worst (``x``
near ``n``: the terms fall like ``exp(-j^2 / 2n)``), a few when ``x`` is far
from ``n``. The peak weights come from Loader's ``stirlerr`` and ``bd0`` and
the peaks relative to the mode from :func:`_log_relative_weight`, so the two
masses are compared in log space however many orders of magnitude apart
they are, and nothing cancels: the result is accurate to about
``1e-15 * |log p|``.

Edge cases: ``mu == 0`` gives ``y = 0`` surely; ``b`` may underflow (``mu``
near ``1e-300``, ``alpha`` tiny), which only removes an upper piece smaller
than ``1e-300`` of the lower one; ``a`` may be as large as ``1e18`` (then the
draw is ``n`` with probability ``1 - n / a``); ``alpha`` near 1 is used
through ``1 - alpha`` (exact for ``alpha >= 1/2``) and ``log1p(-alpha)``.
"""

import math

import numpy as np
from numba import njit

from lpviz._random import chain_seed_from, seed_state, uniform

__all__ = [
    "sample_poisson",
    "sample_true_count",
    "sample_true_count_and_log_marginal",
    "sample_true_count_and_marginal_parts",
    "add_marginal_factor",
    "log_marginal_nb",
    "log_poisson_pmf",
    "logpmf",
    "pmf",
    "sample",
    "log_marginal",
    "mean",
    "MAX_COUNT",
    "MAX_MU",
]

# Largest |ytil| and mu accepted by the Python functions: the sums of
# log_marginal cost O(sqrt(n)) terms near the transition, and float64 must
# count the support one by one. The same bound as every count lpviz fits
# (lpviz.release.MAX_COUNT): the chains' kernels take these functions' word.
MAX_COUNT = 1e12
MAX_MU = 1e12

# Up to this mode the upward inversion (a few divisions per unit of y) beats
# rejection (a few logs per proposal); benchmarks/bench_collapsed.py.
_UPWARD_MAX_MODE = 16.0
# Upward inversion keeps terms w(y)/w(0) <= a^mode / mode! below 1e300.
_UPWARD_MAX_A = math.exp((math.log(1e300) + math.lgamma(_UPWARD_MAX_MODE + 1.0)) / _UPWARD_MAX_MODE)
# Break points of the rejection envelope, in local standard deviations.
_FLAT_WIDTH = 1.1
# PTRS (Hormann 1993) is valid from lam = 10 on; below this rate inversion
# from 0 (~lam divisions) is the faster (benchmarks/bench_collapsed.py).
_PTRS_MIN_LAM = 16.0
# A sum stops once the geometric bound on its remaining terms is below this
# fraction of it: the rest is below double precision.
_NEGLIGIBLE = 1e-17
# Terms of a normaliser summed before its stopping rule is tested (_complete_sum).
_UNCONDITIONAL_TERMS = 8
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


# --------------------------------------------------------------------------
# Log Poisson pmf (Loader 2000: stirlerr and bd0)
# --------------------------------------------------------------------------


def _stirlerr_table(n_max=15):
    """stirlerr(k) = log k! - [(k + 1/2) log k - k + log(2 pi)/2] for k <= n_max.

    By the exact recursion stirlerr(k) = stirlerr(k+1) + (k + 1/2) log1p(1/k) - 1
    down from Stirling's series at k = 40 (error < 1e-20 there), not from a
    difference of lgamma values of size 30.
    """
    k = 40.0
    inv2 = 1.0 / (k * k)
    value = (1 / 12 - inv2 * (1 / 360 - inv2 * (1 / 1260 - inv2 * (1 / 1680 - inv2 / 1188)))) / k
    table = {}
    for j in range(39, 0, -1):
        value = value + (j + 0.5) * math.log1p(1.0 / j) - 1.0
        table[j] = value
    return np.array([0.0] + [table[j] for j in range(1, n_max + 1)])


_STIRLERR = _stirlerr_table()


@njit(nogil=True, cache=True)
def _stirlerr(k):
    """log k! - [(k + 1/2) log k - k + log(2 pi)/2] for integer k >= 1 (float)."""
    if k <= 15.0:
        return _STIRLERR[int(k)]
    inv2 = 1.0 / (k * k)
    # Truncation error below 3e-17 in each range (Loader's cut points).
    if k > 500.0:
        return (1.0 / 12.0 - inv2 / 360.0) / k
    if k > 80.0:
        return (1.0 / 12.0 - inv2 * (1.0 / 360.0 - inv2 / 1260.0)) / k
    if k > 35.0:
        return (1.0 / 12.0 - inv2 * (1.0 / 360.0 - inv2 * (1.0 / 1260.0 - inv2 / 1680.0))) / k
    return (1.0 / 12.0 - inv2 * (1.0 / 360.0 - inv2 * (1.0 / 1260.0 - inv2 * (1.0 / 1680.0 - inv2 / 1188.0)))) / k


@njit(nogil=True, cache=True)
def _bd0(x, lam):
    """The deviance term x log(x / lam) + lam - x >= 0, for x > 0, lam > 0.

    By its series in v = (x - lam) / (x + lam) when x and lam are within 10%
    (where the direct form cancels), else directly.
    """
    if abs(x - lam) < 0.1 * (x + lam):
        v = (x - lam) / (x + lam)
        total = (x - lam) * v
        term = 2.0 * x * v
        v2 = v * v
        j = 1.0
        while True:
            term *= v2
            updated = total + term / (2.0 * j + 1.0)
            if updated == total:
                return total
            total = updated
            j += 1.0
    ratio = x / lam
    if ratio > 0.0 and ratio < math.inf:
        return x * math.log(ratio) + lam - x
    return x * (math.log(x) - math.log(lam)) + lam - x


@njit(nogil=True, cache=True)
def log_poisson_pmf(k, lam):
    """log Pois(k; lam) for integer-valued float k >= 0 and lam >= 0.

    Loader's form ``-stirlerr(k) - bd0(k, lam) - log(2 pi k)/2``: relative
    accuracy ~1e-15 of the result at any size (no ``k log lam - lam`` of size
    1e7 cancelling to a number of size 10).
    """
    if lam <= 0.0:
        return 0.0 if k == 0.0 else -math.inf
    if k == 0.0:
        return -lam
    return -_stirlerr(k) - _bd0(k, lam) - 0.5 * math.log(k) - _LOG_SQRT_2PI


# --------------------------------------------------------------------------
# Poisson sampler
# --------------------------------------------------------------------------


@njit(nogil=True, cache=True, inline="always")
def _poisson_inversion(lam, state):
    """Poisson(lam), 0 < lam < _PTRS_MIN_LAM, by inversion from 0."""
    p0 = math.exp(-lam)
    while True:
        u = uniform(state)
        k = 0
        p = p0
        while u >= p:
            u -= p
            k += 1
            p *= lam / k
            if p == 0.0:
                break
        if p > 0.0:
            return k
        # u fell past every representable term (mass < 1e-300 + rounding):
        # a new u, which conditions on the complement of that null event.


@njit(nogil=True, cache=True)
def _poisson_ptrs(lam, state):
    """Poisson(lam), lam >= 10 (used from _PTRS_MIN_LAM): PTRS, Hormann (1993), Table 2.

    Transformed rejection from a hat of the form (2a/us + b) u + lam + 0.43
    with a squeeze (us >= 0.07 and v <= v_r) proven inside the acceptance
    region; the acceptance test itself uses the exact log pmf.
    """
    sqrt_lam = math.sqrt(lam)
    b = 0.931 + 2.53 * sqrt_lam
    a = -0.059 + 0.02483 * b
    log_inv_alpha = math.log(1.1239 + 1.1328 / (b - 3.4))
    v_r = 0.9277 - 3.6224 / (b - 2.0)
    while True:
        u = uniform(state) - 0.5
        v = uniform(state)
        us = 0.5 - abs(u)
        if us <= 0.0:  # u = -1/2 exactly (probability 2^-53): the hat is infinite there
            continue
        k = math.floor((2.0 * a / us + b) * u + lam + 0.43)
        if us >= 0.07 and v <= v_r:
            return int(k)
        if k < 0.0 or (us < 0.013 and v > us):
            continue
        if math.log(v) + log_inv_alpha - math.log(a / (us * us) + b) <= log_poisson_pmf(k, lam):
            return int(k)


@njit(nogil=True, cache=True, inline="always")
def sample_poisson(lam, state):
    """One exact Poisson(lam) draw (int) from the xoshiro256** ``state``
    (see :func:`lpviz._random.seed_state`; ``None`` for Numba's generator).

    ``lam <= 0`` (a rate that underflowed) gives 0. Not checked: callers
    guarantee a finite ``lam``.
    """
    if lam < _PTRS_MIN_LAM:
        if not lam > 0.0:
            return 0
        return _poisson_inversion(lam, state)
    return _poisson_ptrs(lam, state)


# --------------------------------------------------------------------------
# The conditional of y given ytil: weights relative to the mode
# --------------------------------------------------------------------------


@njit(nogil=True, cache=True, inline="always")
def _ratio(y, n, a, b):
    """w(y + 1) / w(y)."""
    return (a if y < n else b) / (y + 1.0)


@njit(nogil=True, cache=True, inline="always")
def _mode(n, a, b):
    """The largest maximiser of w for n >= 1 (r(mode - 1) >= 1 > r(mode))."""
    if a < n:
        return math.floor(a)
    if b >= n + 1.0:
        return math.floor(b)
    return n


# From here on Stirling's series (five terms) replaces lgamma: cheaper, and
# its truncation error 691 / (360360 x^11) is below 1e-17.
_STIRLING_MIN = 20.0


@njit(nogil=True, cache=True)
def _lgamma_correction(x):
    """lgamma(x) - [(x - 1/2) log x - x + log(2 pi)/2] for x >= _STIRLING_MIN."""
    inv = 1.0 / x
    inv2 = inv * inv
    return inv * (1.0 / 12.0 - inv2 * (1.0 / 360.0 - inv2 * (1.0 / 1260.0 - inv2 * (1.0 / 1680.0 - inv2 / 1188.0))))


@njit(nogil=True, cache=True)
def _log_rate_ratio(k, d, c):
    """log(c^d k! / (k + d)!) for integers k, k + d >= 0 and a rate c >= 0.

    The log of w(k + d) / w(k) when both lie on the side of n where the
    weights are c^y / y!. For large arguments Stirling's series is
    differenced term by term and log c only meets log(k + 1 + d) as their
    ratio, so the O(d log c) parts never cancel.
    """
    if d == 0.0:
        return 0.0
    x = k + 1.0
    z = x + d
    if x < _STIRLING_MIN or z < _STIRLING_MIN:
        return d * math.log(c) - (math.lgamma(z) - math.lgamma(x))
    return d * (math.log(c / z) + 1.0) - (x - 0.5) * math.log1p(d / x) - (_lgamma_correction(z) - _lgamma_correction(x))


@njit(nogil=True, cache=True)
def _log_relative_weight(y, mode, n, a, b):
    """log w(y) - log w(mode), split at n when y and mode lie on either side."""
    if y <= n and mode <= n:
        return _log_rate_ratio(mode, y - mode, a)
    if y >= n and mode >= n:
        return _log_rate_ratio(mode, y - mode, b)
    if mode < n:  # y > n
        return _log_rate_ratio(mode, n - mode, a) + _log_rate_ratio(n, y - n, b)
    return _log_rate_ratio(mode, n - mode, b) + _log_rate_ratio(n, y - n, a)


# --------------------------------------------------------------------------
# The conditional of y given ytil: sampler
# --------------------------------------------------------------------------


@njit(nogil=True, cache=True, inline="always")
def _complete_sum(m, term_m, sum_m, ratio_m, n, a, b):
    """``(T, last)``: the normaliser ``T`` relative to w(0) and the index of
    the last term added to it, given the terms up to ``m`` (the last
    ``term_m``, their sum ``sum_m`` and the next ratio ``ratio_m``; from 0:
    ``0.0, 1.0, 1.0, _ratio(0.0, n, a, b)``): terms are added until the
    geometric bound on the rest is below :data:`_NEGLIGIBLE` of the sum.

    The first :data:`_UNCONDITIONAL_TERMS` terms are added without testing:
    a loop whose exit depends on each term waits on every division and
    mispredicts its exit, three times the cost for the few terms a cell
    needs. Terms past the stopping point are below half an ulp of the sum,
    so adding them leaves it unchanged: the result is the same.
    """
    for _ in range(_UNCONDITIONAL_TERMS):
        term_m *= ratio_m
        m += 1.0
        sum_m += term_m
        ratio_m = _ratio(m, n, a, b)
    while not (ratio_m < 1.0 and term_m * ratio_m <= _NEGLIGIBLE * sum_m * (1.0 - ratio_m)):
        term_m *= ratio_m
        m += 1.0
        sum_m += term_m
        ratio_m = _ratio(m, n, a, b)
    return sum_m, m


@njit(nogil=True, cache=True)
def _upward_search(u, n, a, b, complete):
    """Inversion upward from 0 for the uniform ``u`` (module docstring): the
    first j with t_0 + ... + t_j > u T, decided against bounds
    [sum_m, sum_m + tail] on the normaliser T = sum_y w(y) / w(0).

    Returns ``(j, T)`` when ``complete``, else ``(j, 0.0)``: the search has
    summed the terms up to the draw already, so finishing the normaliser
    for the marginal costs only the terms past it.
    """
    j = 0.0  # the candidate draw, its term and the sum of terms up to it
    term_j = 1.0
    sum_j = 1.0
    m = 0.0  # terms known up to m: the last one, their sum and the next ratio
    term_m = 1.0
    sum_m = 1.0
    ratio_m = _ratio(0.0, n, a, b)
    while True:
        # sum_j / T > u for every T allowed: sum_j > u (sum_m + tail), with
        # tail = term_m r / (1 - r) multiplied out
        if ratio_m < 1.0 and sum_j * (1.0 - ratio_m) > u * (sum_m * (1.0 - ratio_m) + term_m * ratio_m):
            if complete:
                return j, _complete_sum(m, term_m, sum_m, ratio_m, n, a, b)[0]
            return j, 0.0
        if sum_j <= u * sum_m:  # sum_j / T <= u: the draw is above j
            term_j *= _ratio(j, n, a, b)
            j += 1.0
            sum_j += term_j
            if j > m:  # the same products and sums as below: equal values
                m = j
                term_m = term_j
                sum_m = sum_j
                ratio_m = _ratio(m, n, a, b)
            continue
        # Undecided: one more term narrows the bounds (the tail vanishes once
        # it is below the rounding of sum_m, which settles any u < 1).
        term_m *= ratio_m
        m += 1.0
        sum_m += term_m
        ratio_m = _ratio(m, n, a, b)


@njit(nogil=True, cache=True, inline="always")
def _next_term(m, term_m, sum_m, ratio_m, n, a, b):
    """The terms up to ``m + 1`` from those up to ``m``: one step of :func:`_complete_sum`."""
    term_m *= ratio_m
    m += 1.0
    sum_m += term_m
    return m, term_m, sum_m, _ratio(m, n, a, b)


@njit(nogil=True, cache=True, inline="always")
def _below(sum_j, target):
    """1 when the partial sum ``sum_j`` is at most ``target`` (the draw lies above its index), else 0."""
    return 1.0 if sum_j <= target else 0.0


@njit(nogil=True, cache=True)
def _upward_inversion(u, n, a, b):
    """``(j, T)``: the draw of :func:`_upward_search` for the uniform ``u`` and the normaliser
    ``T`` relative to w(0), for a caller that needs both (the chains' sweeps).

    The normaliser first, summed from 0 as :func:`_complete_sum` sums it (every term is needed
    anyway), then the inversion against it: the first j with ``t_0 + ... + t_j > u T``.
    Summed this way the terms are one short loop whose divisions pipeline, with one
    unpredictable exit, where the search interleaves them with its bound tests (a mispredicted
    branch a term): 0.75x the time per cell at mu ~ 0.5, ytil ~ 1-3. The same draw and the same
    ``T``, bit for bit: the search sums the same terms in the same order, terms past the
    stopping point leave the sum unchanged (each is below half an ulp of it), and its bounds
    enclose this ``T``, so its decisions fall on the same j except for a ``u T`` within
    rounding of a partial sum (probability ~1e-16 per cell).

    The first 8 partial sums summed before any test stay in registers:
    partial sums never decrease, so the first j below 8 with ``t_0 + ... + t_j > u T`` is the
    number of them at most ``u T``, counted without a branch (a walk from 0 recomputes each
    term's division and mispredicts its exit, which depends on the draw); only a draw of 8 or
    more walks on, from the 8th term.
    """
    m, t, s1, r = _next_term(0.0, 1.0, 1.0, _ratio(0.0, n, a, b), n, a, b)
    m, t, s2, r = _next_term(m, t, s1, r, n, a, b)
    m, t, s3, r = _next_term(m, t, s2, r, n, a, b)
    m, t, s4, r = _next_term(m, t, s3, r, n, a, b)
    m, t, s5, r = _next_term(m, t, s4, r, n, a, b)
    m, t, s6, r = _next_term(m, t, s5, r, n, a, b)
    m, t, s7, r = _next_term(m, t, s6, r, n, a, b)
    m, term_8, s8, r = _next_term(m, t, s7, r, n, a, b)
    # the rest of _complete_sum: terms until the geometric bound on the rest is negligible
    term_m, sum_m = term_8, s8
    while not (r < 1.0 and term_m * r <= _NEGLIGIBLE * sum_m * (1.0 - r)):
        m, term_m, sum_m, r = _next_term(m, term_m, sum_m, r, n, a, b)
    total = sum_m
    target = u * total
    # the sum up to 0 is 1.0 (t_0 = 1); m >= 8, so the walk's cap j < m binds only past 8
    j = _below(1.0, target) + _below(s1, target) + _below(s2, target) + _below(s3, target)
    j += _below(s4, target) + _below(s5, target) + _below(s6, target) + _below(s7, target)
    if j < 8.0:
        return j, total
    sum_j = s8
    term_j = term_8
    while sum_j <= target and j < m:  # past m the terms are below the rounding of T
        term_j *= _ratio(j, n, a, b)
        j += 1.0
        sum_j += term_j
    return j, total


@njit(nogil=True, cache=True)
def _flat_width(ratio, spread):
    """Half-width of the flat part of the envelope on one side of the mode.

    ``ratio`` is the first ratio away from the mode (<= 1), ``spread`` the
    local standard deviation. Past the mode log w falls like ``-rho j -
    j^2 / (2 spread^2)`` with ``rho = -log ratio >= 1 - ratio``; a flat part
    reaching where the slope is about 1.1 / spread keeps the envelope's
    excess mass small whether the curvature or the slope dominates. Any
    width gives a valid envelope: this only sets the acceptance rate.
    """
    width = math.floor(_FLAT_WIDTH * spread - (1.0 - ratio) * spread * spread + 0.5)
    return max(width, 0.0)


@njit(nogil=True, cache=True)
def _sample_rejection(n, a, b, mode, state):
    """Rejection from the flat-and-geometric envelope (module docstring)."""
    spread = math.sqrt(mode + 1.0)

    right = mode + _flat_width(_ratio(mode, n, a, b), spread)
    log_w_right = _log_relative_weight(right, mode, n, a, b)
    r = _ratio(right, n, a, b)  # < 1: ratios decrease strictly from r(mode) < 1
    log_r = math.log(r)
    mass_right = math.exp(log_w_right) * r / (1.0 - r)

    left = mode
    mass_left = 0.0
    log_w_left = 0.0
    log_s = -math.inf
    if mode > 0.0:
        # r(mode - 1) >= 1; at a tie (== 1) the width is >= 1, and below
        # mode - 1 the ratios exceed 1 strictly, so s < 1.
        left = mode - min(mode, _flat_width(1.0 / _ratio(mode - 1.0, n, a, b), spread))
        log_w_left = _log_relative_weight(left, mode, n, a, b)
        if left > 0.0:
            s = 1.0 / _ratio(left - 1.0, n, a, b)
            log_s = math.log(s)
            mass_left = math.exp(log_w_left) * s / (1.0 - s)
    # Squeeze: log w is concave, so on [left, right] it lies above the chords
    # from the mode to the break points; most proposals there are accepted
    # without evaluating log w.
    slope_right = log_w_right / (right - mode) if right > mode else 0.0
    slope_left = log_w_left / (mode - left) if left < mode else 0.0

    mass_middle = right - left + 1.0
    total = mass_middle + mass_right + mass_left
    while True:
        u = uniform(state) * total
        if u < mass_middle:
            # u is uniform on [0, mass_middle) here: its integer part picks the point
            y = left + math.floor(u)
            log_accept = math.log(1.0 - uniform(state))
            chord = (y - mode) * slope_right if y >= mode else (mode - y) * slope_left
            if log_accept <= chord:
                return y
            log_envelope = 0.0
        else:
            if u < mass_middle + mass_right:
                # j >= 1 with P(j) proportional to r^j
                j = 1.0 + math.floor(math.log(1.0 - uniform(state)) / log_r)
                y = right + j
                log_envelope = log_w_right + j * log_r
            else:
                j = 1.0 + math.floor(math.log(1.0 - uniform(state)) / log_s)
                y = left - j
                if y < 0.0:
                    continue
                log_envelope = log_w_left + j * log_s
            log_accept = math.log(1.0 - uniform(state))
        if log_accept <= _log_relative_weight(y, mode, n, a, b) - log_envelope:
            return y


@njit(nogil=True, cache=True, inline="always")
def _uses_upward(mode, a):
    """Whether the draw inverts upward from 0 (else: rejection)."""
    return mode <= _UPWARD_MAX_MODE and a <= _UPWARD_MAX_A


@njit(nogil=True, cache=True, inline="always")
def sample_true_count(ytil, mu, alpha, state):
    """One exact draw (int) of the true count from
    ``p(y | ytil, mu, alpha) ∝ Pois(y; mu) alpha^|ytil - y|``.

    ``ytil`` integer, ``mu >= 0`` finite, ``0 < alpha < 1``; ``state`` a
    xoshiro256** state (:func:`lpviz._random.seed_state`) or ``None`` for
    Numba's generator. Arguments are not checked: callers guarantee them.
    The noise rates, the Bessel draw and the split of the Bessel route are
    integrated out: one call replaces ``models.sample_true_count`` and
    ``models.draw_noise_rates`` for a cell.
    """
    if ytil <= 0:
        return sample_poisson(mu * alpha, state)
    if not mu > 0.0:
        return 0
    n = float(ytil)
    a = mu / alpha
    b = mu * alpha
    mode = _mode(n, a, b)
    if _uses_upward(mode, a):
        u = uniform(state)
        # Every ratio is <= r(0): the normaliser is <= 1 / (1 - r(0)).
        if u < 1.0 - _ratio(0.0, n, a, b):
            return 0
        return int(_upward_search(u, n, a, b, False)[0])
    return int(_sample_rejection(n, a, b, mode, state))


@njit(nogil=True, cache=True, inline="always")
def sample_true_count_and_log_marginal(ytil, mu, alpha, state):
    """``(y, log p(ytil | mu, alpha))``: the draw of :func:`sample_true_count`
    (the same value from the same ``state``) and :func:`log_marginal_nb`.

    Where the draw inverts upward from 0 the search has summed most of the
    normaliser already; finishing it costs a few terms and a log instead of
    the closed form.
    """
    log_alpha = math.log(alpha)
    log_geometric_norm = math.log1p(-alpha) - math.log1p(alpha)
    if ytil <= 0:
        return sample_poisson(mu * alpha, state), log_geometric_norm - ytil * log_alpha - mu * (1.0 - alpha)
    y, linear, factor = sample_true_count_and_marginal_parts(float(ytil), mu, alpha, log_alpha, state)
    return y, log_geometric_norm + linear + math.log(factor)


# A factor above this goes to the log at once: a running product of factors
# at most _FLUSH_PRODUCT times this stays finite.
_FACTOR_TO_LOG = 1e50
_FLUSH_PRODUCT = 1e250


@njit(nogil=True, cache=True, inline="always")
def sample_true_count_and_marginal_parts(n, mu, alpha, log_alpha, state):
    """``(y, linear, factor)`` for a positive noised count ``n`` (float >= 1):
    the draw of :func:`sample_true_count` (the same value from the same
    ``state``) and ``log p(n | mu, alpha) = log((1 - alpha) / (1 + alpha)) +
    linear + log(factor)``, ``factor >= 1`` (``log_alpha = log(alpha)``).

    A kernel that sums the marginal over many cells multiplies their factors
    and adds their linear parts (:func:`add_marginal_factor`), so the common
    cell (upward inversion, where the factor is the normaliser the search
    summed) costs no log at all.
    """
    if not mu > 0.0:
        return 0, n * log_alpha, 1.0
    a = mu / alpha
    b = mu * alpha
    mode = _mode(n, a, b)
    if _uses_upward(mode, a):
        y, total = _upward_inversion(uniform(state), n, a, b)
        return int(y), n * log_alpha - mu, total  # log w(0) = log Pois(0; mu) + n log alpha
    y = _sample_rejection(n, a, b, mode, state)
    return (
        int(y),
        (log_poisson_pmf(mode, mu) + abs(n - mode) * log_alpha + _log_relative_normaliser(n, a, b, mode)),
        1.0,
    )


@njit(nogil=True, cache=True, inline="always")
def add_marginal_factor(logs, product, factor):
    """``(logs, product)`` after multiplying ``factor >= 1`` in: the sum of logs is
    ``logs + log(product)``; a log is taken only when the product grows large."""
    if factor > _FACTOR_TO_LOG:
        return logs + math.log(factor), product
    product *= factor
    if product > _FLUSH_PRODUCT:
        return logs + math.log(product), 1.0
    return logs, product


# --------------------------------------------------------------------------
# The marginal p(ytil | mu, alpha) and the normaliser
# --------------------------------------------------------------------------


@njit(nogil=True, cache=True)
def _up_sum(s, x):
    """sum_{j>=0} prod_{i=1..j} x / (s + i) for 0 <= x < s + 1: a Poisson(x)
    survival function P(Y >= s) over its first term Pois(s; x)."""
    total = 1.0
    term = 1.0
    i = 1.0
    while True:
        term *= x / (s + i)
        total += term
        # the terms after this one are at most term * r / (1 - r)
        r = x / (s + i + 1.0)
        if term * r <= _NEGLIGIBLE * total * (1.0 - r):
            return total
        i += 1.0


@njit(nogil=True, cache=True)
def _down_sum(n, x):
    """sum_{j=0..n} prod_{i<j} (n - i) / x for x > n >= 0: a Poisson(x) CDF
    P(Y <= n) over its last term Pois(n; x)."""
    total = 1.0
    term = 1.0
    k = n
    while k > 0.0:
        term *= k / x
        total += term
        r = (k - 1.0) / x
        if term * r <= _NEGLIGIBLE * total * (1.0 - r):
            return total
        k -= 1.0
    return total


@njit(nogil=True, cache=True)
def _log_add(x, y):
    """log(e^x + e^y), -inf allowed."""
    high = max(x, y)
    if high == -math.inf:
        return -math.inf
    return high + math.log1p(math.exp(min(x, y) - high))


@njit(nogil=True, cache=True)
def _log_relative_normaliser(n, a, b, mode):
    """log(sum_y w(y) / w(mode)) for n >= 1 and mu > 0: each piece as its
    peak relative to the mode times the sum of its terms relative to the
    peak (module docstring)."""
    if a < n + 1.0:
        peak_low = math.floor(a)
        beyond = math.exp(log_poisson_pmf(n + 1.0, a)) * _up_sum(n + 1.0, a)  # P(Y_a > n) <= 0.64
        log_low = math.log1p(-beyond) - log_poisson_pmf(peak_low, a)
    else:
        peak_low = n
        log_low = math.log(_down_sum(n, a))
    if b < n + 1.0:
        peak_up = n + 1.0
        log_up = math.log(_up_sum(n + 1.0, b))
    else:
        peak_up = math.floor(b)
        within = math.exp(log_poisson_pmf(n, b)) * _down_sum(n, b)  # P(Y_b <= n) <= 0.64
        log_up = math.log1p(-within) - log_poisson_pmf(peak_up, b)
    log_low += _log_relative_weight(peak_low, mode, n, a, b)
    log_up += _log_relative_weight(peak_up, mode, n, a, b)
    return _log_add(log_low, log_up)


@njit(nogil=True, cache=True)
def log_marginal_nb(ytil, mu, alpha):
    """log p(ytil | mu, alpha) = log sum_y Pois(y; mu) Geom2(ytil - y; alpha).

    The per-cell term of the marginal log likelihood, in closed form
    (module docstring); accurate to ~1e-15 of its size. Arguments as for
    :func:`sample_true_count`, not checked.
    """
    log_alpha = math.log(alpha)
    log_geometric_norm = math.log1p(-alpha) - math.log1p(alpha)
    if ytil <= 0:
        return log_geometric_norm - ytil * log_alpha - mu * (1.0 - alpha)
    n = float(ytil)
    if not mu > 0.0:
        return log_geometric_norm + n * log_alpha
    a = mu / alpha
    b = mu * alpha
    mode = _mode(n, a, b)
    if _uses_upward(mode, a):
        # few terms: sum them relative to w(0) = Pois(0; mu) alpha^n
        total = _complete_sum(0.0, 1.0, 1.0, _ratio(0.0, n, a, b), n, a, b)[0]
        return log_geometric_norm - mu + n * log_alpha + math.log(total)
    return (
        log_geometric_norm
        + log_poisson_pmf(mode, mu)
        + abs(n - mode) * log_alpha
        + _log_relative_normaliser(n, a, b, mode)
    )


@njit(nogil=True, cache=True)
def _log_normaliser_at_mode(t, mu, alpha):
    """(mode, log(Z(t) / w_t(mode))) for t >= 0 and mu > 0, where
    w_t(y) = Pois(y; mu) alpha^|t - y| and Z(t) = sum_y w_t(y)."""
    a = mu / alpha
    b = mu * alpha
    mode = _mode(t, a, b)
    if t == 0.0:  # w_0(y) = exp(b - mu) Pois(y; b), mode floor(b)
        return mode, -log_poisson_pmf(mode, b)
    return mode, _log_relative_normaliser(t, a, b, mode)


@njit(nogil=True, cache=True)
def _mean_nb(ytil, mu, alpha):
    """E[y | ytil, mu, alpha] = mu Z(ytil - 1) / Z(ytil)."""
    if ytil <= 0 or not mu > 0.0:
        return mu * alpha
    n = float(ytil)
    mode, log_norm = _log_normaliser_at_mode(n, mu, alpha)
    mode_before, log_norm_before = _log_normaliser_at_mode(n - 1.0, mu, alpha)
    # log w_{n-1}(mode_before) - log w_n(mode): the modes differ by at most 1
    log_peaks = _log_rate_ratio(mode, mode_before - mode, mu) + (abs(n - 1.0 - mode_before) - abs(n - mode)) * math.log(
        alpha
    )
    return mu * math.exp(log_peaks + log_norm_before - log_norm)


# --------------------------------------------------------------------------
# Vectorised loops
# --------------------------------------------------------------------------


@njit(nogil=True, cache=True)
def _normalisers_many(ytil, mu, alpha, modes, log_norms):
    """Per parameter triple with ytil > 0 and mu > 0: the mode and
    log(Z / w(mode)) (:func:`_log_normaliser_at_mode`); 0 elsewhere."""
    for i in range(ytil.size):
        if ytil[i] > 0 and mu[i] > 0.0:
            modes[i], log_norms[i] = _log_normaliser_at_mode(float(ytil[i]), mu[i], alpha[i])
        else:
            modes[i] = 0.0
            log_norms[i] = 0.0


@njit(nogil=True, cache=True)
def _logpmf_many(y, ytil, mu, alpha, modes, log_norms, out):
    """log p(y | ytil, mu, alpha) for integer y >= 0 (float), given the
    normalisers of :func:`_normalisers_many`."""
    for i in range(out.size):
        if ytil[i] <= 0:
            out[i] = log_poisson_pmf(y[i], mu[i] * alpha[i])
        elif not mu[i] > 0.0:
            out[i] = 0.0 if y[i] == 0.0 else -math.inf
        else:
            out[i] = (
                _log_relative_weight(y[i], modes[i], float(ytil[i]), mu[i] / alpha[i], mu[i] * alpha[i]) - log_norms[i]
            )


@njit(nogil=True, cache=True)
def _log_marginal_many(ytil, mu, alpha, out):
    for i in range(out.size):
        out[i] = log_marginal_nb(ytil[i], mu[i], alpha[i])


@njit(nogil=True, cache=True)
def _mean_many(ytil, mu, alpha, out):
    for i in range(out.size):
        out[i] = _mean_nb(ytil[i], mu[i], alpha[i])


@njit(nogil=True, cache=True)
def _sample_many(ytil, mu, alpha, out, chain_seed):
    state = np.empty(4, dtype=np.uint64)
    seed_state(state, chain_seed, 0, 0)
    for i in range(out.size):
        out[i] = sample_true_count(ytil[i], mu[i], alpha[i], state)


# --------------------------------------------------------------------------
# Public functions
# --------------------------------------------------------------------------


def _as_parameters(ytil, mu, alpha):
    """Check and broadcast (ytil, mu, alpha); raise naming the fix."""
    ytil = np.asarray(ytil)
    if ytil.dtype == bool or not (np.issubdtype(ytil.dtype, np.integer) or np.issubdtype(ytil.dtype, np.floating)):
        raise TypeError(f"ytil must hold integer noised counts; got dtype {ytil.dtype}")
    ytil_float = ytil.astype(float)
    bad = ~np.isfinite(ytil_float) | (ytil_float != np.floor(ytil_float)) | (np.abs(ytil_float) > MAX_COUNT)
    if np.any(bad):
        raise ValueError(
            f"ytil must be integer-valued noised counts with |ytil| <= {MAX_COUNT:g}; got {ytil[bad].ravel()[:3]}"
        )
    mu = np.asarray(mu, dtype=float)
    bad = ~(np.isfinite(mu) & (mu >= 0) & (mu <= MAX_MU))
    if np.any(bad):
        raise ValueError(
            f"mu (the Poisson rate of the true count) must be finite, >= 0 and <= {MAX_MU:g}; got {mu[bad].ravel()[:3]}"
        )
    alpha = np.asarray(alpha, dtype=float)
    bad = ~((alpha > 0) & (alpha < 1))
    if np.any(bad):
        raise ValueError(
            f"alpha (the geometric noise parameter, exp(-epsilon/N)) must lie in (0, 1); got {alpha[bad].ravel()[:3]}"
        )
    return np.broadcast_arrays(ytil.astype(np.int64), mu, alpha)


def _flat(*arrays):
    return [np.ascontiguousarray(x).ravel() for x in arrays]


def logpmf(y, ytil, mu, alpha):
    """Log pmf of the true count ``y`` given the noised count ``ytil``.

    ``p(y | ytil, mu, alpha) ∝ Pois(y; mu) alpha^|ytil - y|``, normalised;
    ``-inf`` off the support 0, 1, 2, ... . Broadcasts its arguments.

    Parameters
    ----------
    y : int or array_like
        True counts.
    ytil : int or array_like of int
        Noised counts (any sign).
    mu : float or array_like, >= 0
        Poisson rate of the true count.
    alpha : float or array_like, in (0, 1)
        Noise parameter ``exp(-epsilon / N)``.

    Returns
    -------
    float or ndarray
    """
    ytil, mu, alpha = _as_parameters(ytil, mu, alpha)
    # the normaliser once per parameter triple, not once per y
    modes = np.empty(ytil.shape)
    log_norms = np.empty(ytil.shape)
    _normalisers_many(*_flat(ytil, mu, alpha), modes.reshape(-1), log_norms.reshape(-1))
    y = np.asarray(y, dtype=float)
    y, ytil, mu, alpha, modes, log_norms = np.broadcast_arrays(y, ytil, mu, alpha, modes, log_norms)
    out = np.full(y.shape, -np.inf)
    on_support = np.isfinite(y) & (y >= 0) & (y == np.floor(y))
    if np.any(on_support):
        values = np.empty(int(on_support.sum()))
        _logpmf_many(*_flat(*(x[on_support] for x in (y, ytil, mu, alpha, modes, log_norms))), values)
        out[on_support] = values
    return out[()]


def pmf(y, ytil, mu, alpha):
    """Pmf of the true count given the noised count; see :func:`logpmf`."""
    return np.exp(logpmf(y, ytil, mu, alpha))


def log_marginal(ytil, mu, alpha):
    """Log marginal ``log p(ytil | mu, alpha) = log sum_y Pois(y; mu) Geom2(ytil - y; alpha)``.

    The law of a noised count once the true count is summed out: the
    per-cell term of a private chain's marginal log likelihood. Broadcasts
    its arguments; see :func:`logpmf` for them.

    Returns
    -------
    float or ndarray
    """
    ytil, mu, alpha = _as_parameters(ytil, mu, alpha)
    out = np.empty(ytil.shape)
    _log_marginal_many(*_flat(ytil, mu, alpha), out.reshape(-1))
    return out[()]


def mean(ytil, mu, alpha):
    """Posterior mean ``E[y | ytil, mu, alpha]``.

    Since ``y Pois(y; mu) = mu Pois(y - 1; mu)``, the mean is
    ``mu Z(ytil - 1) / Z(ytil)`` with ``Z(t) = sum_y Pois(y; mu) alpha^|t - y|``;
    ``mu alpha`` for ``ytil <= 0``. The ratio is formed from the normalisers
    relative to their modes, which differ by at most one, so no large log
    marginals are subtracted.
    """
    ytil, mu, alpha = _as_parameters(ytil, mu, alpha)
    out = np.empty(ytil.shape)
    _mean_many(*_flat(ytil, mu, alpha), out.reshape(-1))
    return out[()]


def sample(ytil, mu, alpha, size=None, random_state=None):
    """Draw true counts from ``p(y | ytil, mu, alpha)``.

    Parameters
    ----------
    ytil, mu, alpha : array_like
        As for :func:`logpmf`; broadcast together (and to ``size``).
    size : int or tuple of ints, optional
        Output shape; default the broadcast shape of the parameters.
    random_state : None, int or numpy.random.Generator
        Seed; the same seed gives the same draws.

    Returns
    -------
    int or ndarray of int64
    """
    ytil, mu, alpha = _as_parameters(ytil, mu, alpha)
    shape = ytil.shape if size is None else tuple(np.atleast_1d(size))
    try:
        ytil, mu, alpha = (np.broadcast_to(x, shape) for x in (ytil, mu, alpha))
    except ValueError:
        raise ValueError(
            f"size {shape} does not fit parameters of shape {ytil.shape}: give a size they broadcast to"
        ) from None
    out = np.empty(int(np.prod(shape)), dtype=np.int64)
    _sample_many(*_flat(ytil, mu, alpha), out, chain_seed_from(random_state))
    out = out.reshape(shape)
    return int(out) if out.ndim == 0 else out
