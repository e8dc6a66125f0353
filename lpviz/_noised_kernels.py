"""The law of a noised count given its rate, in Numba (DESIGN.md 1f).

``ytil = y + tau`` with ``y ~ Pois(mu)`` and ``tau`` two-sided geometric of level ``alpha``::

    p(ytil | mu, alpha) = (1-alpha)/(1+alpha) * [ alpha^ytil exp(mu (1/alpha - 1)) F(ytil; mu/alpha)
                                                 + alpha^-ytil exp(-mu (1 - alpha)) (1 - F(ytil; mu alpha)) ]

``F(k; lam)`` is the Poisson CDF (0 for k < 0): ``F(k; lam) = Q(k + 1, lam)``, the regularized upper
incomplete gamma, and ``1 - F(k; lam) = P(k + 1, lam)``, the lower one. Both are evaluated in logs
(the first term is a huge exponential times a tiny CDF): the series of P below ``x < a + 1``, the
continued fraction of Q above it (Numerical Recipes 6.2), each giving its own logarithm directly,
and the other as ``log1p(-.)``. Small pure functions over scalars and arrays: the scoring's and the
kernels' one implementation (:func:`lpviz.privacy.noised_logpmf` broadcasts its arguments into
:func:`noised_logpmf_array`).
"""

import math

import numpy as np
from numba import njit

__all__ = ["noised_logpmf_scalar", "noised_logpmf_array", "NO_NOISE_ALPHA"]

# Below this alpha the noise is nothing a double can hold beside a count (tau = 0 with probability
# 1 - 2 alpha): the law is Poisson's times (1-alpha)/(1+alpha); mu / alpha would overflow.
NO_NOISE_ALPHA = 1e-12
_EPS = 1e-16
_TINY = 1e-300
_MAX_TERMS = 100_000


@njit(nogil=True, cache=True)
def _log_lower_series(a, x):
    """log P(a, x) by its series (x < a + 1): P = x^a e^-x / Gamma(a + 1) * sum_n x^n / ((a+1)...(a+n))."""
    term = 1.0
    total = 1.0
    ap = a
    for _ in range(_MAX_TERMS):
        ap += 1.0
        term *= x / ap
        total += term
        if term < total * _EPS:
            break
    return a * math.log(x) - x - math.lgamma(a + 1.0) + math.log(total)


@njit(nogil=True, cache=True)
def _log_upper_fraction_plus_x(a, x):
    """x + log Q(a, x) by its continued fraction (x >= a + 1), without forming e^-x (modified Lentz)."""
    b = x + 1.0 - a
    c = 1.0 / _TINY
    d = 1.0 / b
    h = d
    for i in range(1, _MAX_TERMS):
        an = -i * (i - a)
        b += 2.0
        d = an * d + b
        if abs(d) < _TINY:
            d = _TINY
        c = b + an / c
        if abs(c) < _TINY:
            c = _TINY
        d = 1.0 / d
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < _EPS:
            break
    return a * math.log(x) - math.lgamma(a) + math.log(h)


@njit(nogil=True, cache=True)
def _log_cdf_plus_lam(k, lam):
    """lam + log F(k; lam), the Poisson CDF at k >= 0 (lam >= 0)."""
    if lam == 0.0:
        return 0.0
    a = k + 1.0
    if lam < a + 1.0:
        return lam + math.log1p(-math.exp(_log_lower_series(a, lam)))
    return _log_upper_fraction_plus_x(a, lam)


@njit(nogil=True, cache=True)
def _log_survival(k, lam):
    """log (1 - F(k; lam)) = log P(k + 1, lam), the Poisson upper tail beyond k >= 0."""
    if lam == 0.0:
        return -np.inf
    a = k + 1.0
    if lam < a + 1.0:
        return _log_lower_series(a, lam)
    return math.log1p(-math.exp(_log_upper_fraction_plus_x(a, lam) - lam))


@njit(nogil=True, cache=True)
def _logaddexp(u, v):
    if u == -np.inf:
        return v
    if v == -np.inf:
        return u
    high = max(u, v)
    return high + math.log1p(math.exp(-abs(u - v)))


@njit(nogil=True, cache=True)
def noised_logpmf_scalar(y_noised, mu, alpha):
    """log p(ytil | mu, alpha) of one noised count (integer-valued float), rate mu >= 0, 0 < alpha < 1."""
    log_a = math.log(alpha)
    norm = math.log1p(-alpha) - math.log1p(alpha)
    if y_noised < 0.0:  # every y >= 0 lies above ytil: only the second term, with F = 0
        return norm - y_noised * log_a - mu * (1.0 - alpha)
    if alpha < NO_NOISE_ALPHA:  # tau = 0 but for O(alpha): Poisson
        if mu == 0.0:
            return norm if y_noised == 0.0 else -np.inf
        return norm + y_noised * math.log(mu) - mu - math.lgamma(y_noised + 1.0)
    lam_low = mu / alpha
    # alpha^ytil e^{mu/alpha - mu} F(ytil; mu/alpha): the e^{mu/alpha} cancels inside _log_cdf_plus_lam
    first = y_noised * log_a - mu + _log_cdf_plus_lam(y_noised, lam_low)
    second = -y_noised * log_a - mu * (1.0 - alpha) + _log_survival(y_noised, mu * alpha)
    return norm + _logaddexp(first, second)


@njit(nogil=True, cache=True)
def noised_logpmf_array(y_noised, mu, alpha, out):
    """:func:`noised_logpmf_scalar` over flat arrays of one length (broadcast by the caller) into ``out``."""
    for i in range(y_noised.size):
        out[i] = noised_logpmf_scalar(y_noised[i], mu[i], alpha[i])
    return out
