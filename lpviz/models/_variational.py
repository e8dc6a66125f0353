"""Numba helpers of the variational fits (CAVI) the models and methods share.

- :func:`digamma` and the ``*_plus_one`` special functions with table
  lookups for the small whole numbers the private method's point masses
  produce;
- :class:`GammaFactor`: a mean-field Gamma ``q`` over one factor matrix
  (shape, rate) with the expectations the updates read (mean, variance,
  geometric mean ``G[x] = exp E[log x]``, ``E[log x]``);
- :func:`refresh_row`, the one place a row of ``q`` is set from its shape
  and rate, with its part of the ELBO (prior minus ``q`` entropy terms);
- :func:`positive_csr_float`: the CSR of the positive entries of a dense
  block of expected counts.

The ELBO of a Gamma factor entry ``x`` with prior Gamma(a0, rate b0) and
``q(x) = Gamma(s, rate r)``::

    E[log p(x)] + H[q] = a0 log b0 - lgamma(a0) + (a0 - 1) E[log x] - b0 E[x]
                         + s - log r + lgamma(s) + (1 - s) digamma(s)

nothing dropped.
"""

import math

import numpy as np
from numba import njit

from lpviz._parallel import ROWS_PER_STREAM
from lpviz.collapsed import _mean_nb as conditional_mean_nb
from lpviz.collapsed import log_marginal_nb
from lpviz.models._kernels import column_sums_from, ordered_sum_from

EULER_GAMMA = 0.5772156649015329
# Whole numbers below this read digamma(n + 1), lgamma(n + 1) from tables.
_TABLE_SIZE = 256
_TINY = 2.2250738585072014e-308
# Shape of every q at the start: the means are the chains' random initial
# factors, the shape sets how sure q starts out about them.
VI_INIT_SHAPE = 1.0


@njit(nogil=True, cache=True)
def digamma(x):
    """The digamma function psi(x) for x > 0 (absolute error below 1e-14).

    Shifts x up to 10 with psi(x) = psi(x + 1) - 1/x, then the asymptotic
    series through x^-12 (the first omitted term is below 1e-15 there).
    """
    result = 0.0
    while x < 10.0:
        result -= 1.0 / x
        x += 1.0
    inv = 1.0 / x
    inv2 = inv * inv
    series = inv2 * (
        1.0 / 12.0
        - inv2
        * (1.0 / 120.0 - inv2 * (1.0 / 252.0 - inv2 * (1.0 / 240.0 - inv2 * (1.0 / 132.0 - inv2 * (691.0 / 32760.0)))))
    )
    return result + math.log(x) - 0.5 * inv - series


def _digamma_table():
    table = np.empty(_TABLE_SIZE)
    harmonic = 0.0
    for n in range(_TABLE_SIZE):
        table[n] = harmonic - EULER_GAMMA  # psi(n + 1) = H_n - gamma
        harmonic += 1.0 / (n + 1)
    return table


_DIGAMMA_PLUS_ONE = _digamma_table()
_GEO_PLUS_ONE = np.exp(_DIGAMMA_PLUS_ONE)
_LGAMMA_PLUS_ONE = np.array([math.lgamma(n + 1.0) for n in range(_TABLE_SIZE)])


@njit(nogil=True, cache=True, inline="always")
def digamma_plus_one(x):
    """psi(x + 1) for x >= 0; a table lookup when x is a small whole number."""
    if x < _TABLE_SIZE:
        n = int(x)
        if n == x:
            return _DIGAMMA_PLUS_ONE[n]
    return digamma(x + 1.0)


_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


@njit(nogil=True, cache=True)
def lgamma_digamma_plus_one(x):
    """``(log Gamma(x + 1), psi(x + 1))`` for x >= 0, sharing one shift of the
    argument to z >= 10 and its logarithm (cheaper than ``math.lgamma`` and
    :func:`digamma` apart; absolute errors below 1e-13); tables for small
    whole numbers."""
    if x < _TABLE_SIZE:
        n = int(x)
        if n == x:
            return _LGAMMA_PLUS_ONE[n], _DIGAMMA_PLUS_ONE[n]
    z = x + 1.0
    # product P and sum of reciprocals N / P of the shifted-over arguments, one division
    product = 1.0
    numerator = 0.0
    while z < 10.0:
        numerator = numerator * z + product
        product *= z
        z += 1.0
    inv = 1.0 / z
    inv2 = inv * inv
    log_z = math.log(z)
    lgamma_z = (
        (z - 0.5) * log_z
        - z
        + _HALF_LOG_2PI
        + inv
        * (1.0 / 12.0 - inv2 * (1.0 / 360.0 - inv2 * (1.0 / 1260.0 - inv2 * (1.0 / 1680.0 - inv2 * (1.0 / 1188.0)))))
    )
    digamma_z = (
        log_z
        - 0.5 * inv
        - inv2
        * (
            1.0 / 12.0
            - inv2
            * (
                1.0 / 120.0
                - inv2 * (1.0 / 252.0 - inv2 * (1.0 / 240.0 - inv2 * (1.0 / 132.0 - inv2 * (691.0 / 32760.0))))
            )
        )
    )
    if product == 1.0:
        return lgamma_z, digamma_z
    return lgamma_z - math.log(product), digamma_z - numerator / product


@njit(nogil=True, cache=True, inline="always")
def geo_plus_one(x):
    """exp(psi(x + 1)) for x >= 0 (the geometric mean of Gamma(x + 1, rate 1)); a table lookup
    when x is a small whole number."""
    if x < _TABLE_SIZE:
        n = int(x)
        if n == x:
            return _GEO_PLUS_ONE[n]
    return math.exp(digamma(x + 1.0))


@njit(nogil=True, cache=True, inline="always")
def lgamma_plus_one(x):
    """log Gamma(x + 1) = log x! for x >= 0; a table lookup for small whole numbers."""
    if x < _TABLE_SIZE:
        n = int(x)
        if n == x:
            return _LGAMMA_PLUS_ONE[n]
    return math.lgamma(x + 1.0)


@njit(nogil=True, cache=True)
def refresh_row(factor, r, prior):
    """Set the expectations of row ``r`` of a Gamma ``q`` from its shape and rate;
    returns the row's ELBO terms ``sum_k E[log p(x_rk)] + H[q(x_rk)]``.

    ``factor``: (shape, rate, mean, var, geo, elog) arrays of one shape;
    ``prior``: (a0, b0).
    """
    shape, rate, mean, var, geo, elog = factor
    a0, b0 = prior
    const = a0 * math.log(b0) - math.lgamma(a0)
    total = 0.0
    for k in range(shape.shape[1]):
        s = shape[r, k]
        t = rate[r, k]
        log_rate = math.log(t)
        psi = digamma(s)
        m = s / t
        mean[r, k] = m
        var[r, k] = m / t
        elog[r, k] = psi - log_rate
        geo[r, k] = math.exp(psi - log_rate)
        total += const + (a0 - 1.0) * (psi - log_rate) - b0 * m + s - log_rate + math.lgamma(s) + (1.0 - s) * psi
    return total


@njit(nogil=True, cache=True)
def refresh_all(factor, prior):
    """:func:`refresh_row` over every row; returns the summed ELBO terms."""
    total = 0.0
    for r in range(factor[0].shape[0]):
        total += refresh_row(factor, r, prior)
    return total


class RowTotals:
    """The CAVI sums over a model's rows (its first factor) that its other factors' updates need,
    continued block by block in row order so a fit split over machines sums them exactly as one
    process does (lpviz.distributed). ``self.n_components``: the model's K."""

    def vi_no_totals(self):
        """The row totals before the first row (:meth:`vi_row_totals`)."""
        return (np.zeros(self.n_components), 0.0, 0.0, 0.0)

    def vi_row_totals(self, q, rows, carry):
        """The first factor's column sums of E[.] and the rows' gap, ELBO and moved terms,
        continued from ``carry`` (the rows before these)."""
        column_sum, *scalars = carry
        return (
            column_sums_from(q[0].mean, column_sum),
            *(ordered_sum_from(terms, total) for terms, total in zip(rows, scalars, strict=True)),
        )


class GammaFactor:
    """Mean-field ``q(x) = Gamma(gamma_shape, gamma_rate)`` over every entry of one factor matrix.

    ``gamma_shape``, ``gamma_rate``: the variational parameters; ``mean``,
    ``var``, ``geo`` (``exp E[log x]``), ``elog`` (``E[log x]``): their
    expectations, kept in step by :meth:`refresh` (kernels update rows in
    place through :func:`refresh_row`). :meth:`arrays` is the tuple the
    kernels take, in that order.
    """

    def __init__(self, gamma_shape, gamma_rate, prior):
        self.gamma_shape = np.ascontiguousarray(gamma_shape, dtype=np.float64)
        self.gamma_rate = np.ascontiguousarray(gamma_rate, dtype=np.float64)
        self.mean = np.empty_like(self.gamma_shape)
        self.var = np.empty_like(self.gamma_shape)
        self.geo = np.empty_like(self.gamma_shape)
        self.elog = np.empty_like(self.gamma_shape)
        self.prior = prior
        self.refresh()

    @classmethod
    def around(cls, mean, gamma_shape, prior):
        """A ``q`` with the given means and one shape for every entry."""
        mean = np.maximum(np.asarray(mean, dtype=np.float64), _TINY)
        shapes = np.full(mean.shape, float(gamma_shape))
        return cls(shapes, shapes / mean, prior)

    @property
    def n_rows(self):
        return self.gamma_shape.shape[0]

    def arrays(self):
        return (self.gamma_shape, self.gamma_rate, self.mean, self.var, self.geo, self.elog)

    def refresh(self):
        """Recompute the expectations from shape and rate; returns the prior + entropy ELBO terms."""
        return refresh_all(self.arrays(), self.prior)


@njit(nogil=True, cache=True)
def positive_csr_float(block):
    """CSR (indptr, indices, values) of the positive entries of a dense float block."""
    n_rows, n_cols = block.shape
    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    for i in range(n_rows):
        count = 0
        for j in range(n_cols):
            if block[i, j] > 0.0:
                count += 1
        indptr[i + 1] = indptr[i] + count
    indices = np.empty(indptr[-1], dtype=np.int64)
    values = np.empty(indptr[-1])
    for i in range(n_rows):
        pos = indptr[i]
        for j in range(n_cols):
            value = block[i, j]
            if value > 0.0:
                indices[pos] = j
                values[pos] = value
                pos += 1
    return indptr, indices, values


# ---------------------------------------------------------------------------
# The private method's collapsed local step (variants "arithmetic" and "geometric")
# ---------------------------------------------------------------------------

# How the collapsed local step weighs the components (lpviz.methods.private, variant=...):
# "geometric" by G[theta] G[phi] (exact mean-field CAVI), "arithmetic" by E[theta] E[phi].
WEIGHTS = ("arithmetic", "geometric")


def weights_of(factor, weights):
    """The per-entry weights of a :class:`GammaFactor` in the expected allocation:
    ``G[x]`` (``"geometric"``, the CAVI optimum) or ``E[x]`` (``"arithmetic"``)."""
    return factor.mean if weights == "arithmetic" else factor.geo


def allocation_gap(factor, counts):
    """``sum n (log E[x] - E[log x])`` over one factor's entries, with ``n`` the expected
    allocations an arithmetic local step gave them: the ELBO's cost of allocating in proportion to
    ``E`` products instead of the optimal ``G`` products (the allocations' KL divergence from the
    optimum, summed over cells, is this total over the factors' entries)."""
    return float(np.sum(allocation_gap_rows(factor, counts)))


def allocation_gap_rows(factor, counts):
    """:func:`allocation_gap` of each row (left to right over its entries): row totals that sum
    in row order to the same number on one machine or over several (:mod:`lpviz.distributed`)."""
    return row_totals(counts * (np.log(np.maximum(factor.mean, _TINY)) - factor.elog))


@njit(nogil=True, cache=True)
def row_totals(x):
    """Left-to-right sum of each row of a matrix (the same rounding however the rows are split)."""
    out = np.zeros(x.shape[0])
    for r in range(x.shape[0]):
        total = 0.0
        for k in range(x.shape[1]):
            total += x[r, k]
        out[r] = total
    return out


# The expected allocations summed over rows into a column's totals are added as integers: integer
# sums are exact in any order, so the totals (and the whole CAVI fit) are the same for any number of
# threads, chunks or machines (lpviz.distributed). Each contribution x is split into a whole number
# of 2^-FIXED_HIGH_BITS (its "high" part, floor) and the rest in units of 2^-(FIXED_HIGH_BITS +
# FIXED_LOW_BITS) (2^-52: rounded there, as fine as a double's rounding of a count near 1). A
# column's total must stay below FIXED_MAX_TOTAL (2^40, 1.1e12 expected counts) for the int64 high
# sums to stay exact in a double.
FIXED_HIGH_BITS = 20
FIXED_LOW_BITS = 32
FIXED_HIGH_ONE = float(2**FIXED_HIGH_BITS)
FIXED_LOW_ONE = float(2**FIXED_LOW_BITS)
FIXED_MAX_TOTAL = float(2**40)


@njit(nogil=True, cache=True, inline="always")
def add_fixed(pair, x):
    """Add ``x >= 0`` to a fixed-point total ``pair`` (two int64: high, low units)."""
    scaled = x * FIXED_HIGH_ONE
    high = math.floor(scaled)
    pair[0] += np.int64(high)
    pair[1] += np.int64((scaled - high) * FIXED_LOW_ONE + 0.5)  # the fraction is exact: no rounding before


def fixed_total(parts):
    """The float totals of fixed-point parts (..., 2) summed over the first axis (integers: exact)."""
    total = parts.sum(axis=0)
    high = total[..., 0] + (total[..., 1] >> FIXED_LOW_BITS)  # carry whole units of the low part up
    low = total[..., 1] & ((1 << FIXED_LOW_BITS) - 1)
    return high / FIXED_HIGH_ONE + low / (FIXED_HIGH_ONE * FIXED_LOW_ONE)


def check_fixed_bound(bound):
    """Refuse allocations whose column totals could overflow the fixed-point sums."""
    if not bound < FIXED_MAX_TOTAL:
        raise ValueError(
            f"the expected counts of one column total {bound:.4g}, beyond the {FIXED_MAX_TOTAL:.4g} the "
            "variational fit's exact sums hold; fit with inference='mcmc' or scale the counts down"
        )
    return bound


# The direct sum of collapsed_moments_nb: noised counts and rates up to this, r / alpha up to
# _DIRECT_MAX_RATIO (so no partial product of ratios exceeds ~1e190); beyond, lpviz.collapsed.
_DIRECT_MAX = 30.0
_DIRECT_MAX_RATIO = 1e6
_NEGLIGIBLE = 1e-17


@njit(nogil=True, cache=True, inline="always")
def collapsed_moments_nb(ytil, rate, alpha, log_alpha, log_norm):
    """``(E[y], log p(ytil | rate, alpha))`` of ``p(y | ytil) ∝ Pois(y; rate) alpha^|ytil - y|``;
    ``log_alpha``, ``log_norm``: ``log alpha`` and ``log((1 - alpha) / (1 + alpha))``.

    ``ytil <= 0``: ``(alpha rate, log((1 - alpha) / (1 + alpha)) - ytil log alpha - rate (1 -
    alpha))`` in closed form. Small ``ytil > 0`` and rates (the common case): one sum over ``y``
    of the weights relative to ``w(0)``, built by their ratios (``rate / alpha / (y + 1)`` below
    ``ytil``, ``rate alpha / (y + 1)`` from it on: decreasing, so the sum stops once the rest is
    negligible), giving both numbers at once; else :mod:`lpviz.collapsed`'s exact functions.
    """
    if ytil <= 0:
        return alpha * rate, log_norm - ytil * log_alpha - rate * (1.0 - alpha)
    n = float(ytil)
    if not rate > 0.0:
        return 0.0, log_norm + n * log_alpha
    if n > _DIRECT_MAX or rate > _DIRECT_MAX or rate > _DIRECT_MAX_RATIO * alpha:
        return conditional_mean_nb(ytil, rate, alpha), log_marginal_nb(ytil, rate, alpha)
    low, high = rate / alpha, rate * alpha
    term, total, first_moment = 1.0, 1.0, 0.0
    y = 0.0
    while True:
        ratio = (low if y < n else high) / (y + 1.0)
        term *= ratio
        y += 1.0
        total += term
        first_moment += y * term
        # past ytil the ratios only shrink: the rest is below term r / (1 - r), its first moment below
        # that times (y + 1 / (1 - r))
        if y >= n:
            rest = high / (y + 1.0)
            if rest < 0.5 and term * rest * (y + 2.0) <= _NEGLIGIBLE * (1.0 - rest) * (first_moment + total):
                break
    return first_moment / total, log_norm - rate + n * log_alpha + math.log(total)


@njit(nogil=True, cache=True)
def collapsed_vi_chunk(chunk, first, last, data, rates, out):
    """The collapsed local step over the observed cells of rows in stream blocks [first, last).

    Per cell with noised count ``ytil``, from the plug-in rate ``r`` of the cell (``W = sum_k
    G[theta_dk] G[phi_kv]`` or ``m = sum_k E[theta_dk] E[phi_kv]``, see
    :mod:`lpviz.vi`): ``q(y) ∝ Pois(y; r) alpha^|ytil - y|`` -- the exact conditional of
    DESIGN.md 1b at rate ``r`` (:mod:`lpviz.collapsed`) -- whose mean ``E[y]`` goes to the model's
    expected allocation. The cell's ELBO terms: ``log p(ytil | r, alpha) + r`` (with the model's
    ``- E[mu]`` and, for the arithmetic weights, its :func:`allocation_gap`, the exact ELBO of the
    q held; at ``r = W`` the log normaliser of the CAVI optimum).

    ``data``: (noised counts, per-row alpha, excluded indptr, excluded indices); ``rates``:
    (the plug-in rates of a block of rows, first row, stop flag); ``out``: (E[y] of the block's
    cells, 0 where excluded; the rows' ELBO terms).
    """
    Y, alpha, excluded_indptr, excluded_indices = data
    rate_block, origin, stop = rates
    y_expected, row_terms = out
    n_cols = Y.shape[1]
    for d in range(first * ROWS_PER_STREAM, min(Y.shape[0], last * ROWS_PER_STREAM)):
        if stop[0]:
            return
        r = d - origin
        a = alpha[d]
        log_a = math.log(a)
        log_norm = math.log1p(-a) - math.log1p(a)
        next_excluded = excluded_indptr[d]
        total = 0.0
        for v in range(n_cols):
            if next_excluded < excluded_indptr[d + 1] and excluded_indices[next_excluded] == v:
                next_excluded += 1
                y_expected[r, v] = 0.0
                continue
            ytil = np.int64(Y[d, v])
            rate = rate_block[r, v]
            expected, log_marginal = collapsed_moments_nb(ytil, rate, a, log_a, log_norm)
            y_expected[r, v] = expected
            total += log_marginal + rate
        row_terms[d] = total
