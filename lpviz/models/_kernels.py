"""Numba helpers shared by the models: dot products, exact samplers,
multinomial allocation in O(K) per cell, log likelihood pieces, CSR helpers.

Per-cell helpers are ``inline="always"`` and take arrays plus indices rather
than row views. Every draw comes from a xoshiro256** ``state``
(:mod:`lpviz._random`), seeded per stream block in a fraction of a
nanosecond: the gamma (:func:`standard_gamma`) and binomial (:func:`binomial`)
samplers here are exact and need no Numba Mersenne Twister, whose seeding
costs ~1.3 us per stream block (26 blocks per iteration at Figure 3's size:
a tenth of an iteration).
"""

import math

import numpy as np
from numba import njit

from lpviz._random import uniform
from lpviz.collapsed import _bd0, _stirlerr

# Up to this many tokens a cell's allocation draws token by token (a walk, or
# a binary search in cumulative weights); beyond, conditional binomials split
# all tokens at once: O(K) per cell whatever the count.
FEW_TOKENS = 4
_SPLIT_TOKENS = 64
# Up to this many trials a binomial is its Bernoulli trials.
_SMALL_BINOMIAL = 16
# BTRS (Hormann 1993) is valid from a mean of 10 on; below it inversion from 0.
_BTRS_MIN_MEAN = 10.0

# log(y!) for the small counts that dominate the Poisson log likelihood.
_LOG_FACTORIAL = np.array([math.lgamma(y + 1.0) for y in range(256)])
_TINY = 2.2250738585072014e-308

# Reassociation lets LLVM vectorise the K-long dot products; results stay
# deterministic (the same code runs for a cell whatever thread runs it).
FAST_DOT = {"reassoc", "contract", "nsz", "arcp"}


@njit(nogil=True, cache=True, fastmath=FAST_DOT, inline="always")
def dot_rows(A, i, B, j):
    """``A[i] . B[j]``. Inlined as Numba IR, so compiled with the caller's flags: vectorised only
    in a ``fastmath=FAST_DOT`` caller (a serial chain of additions otherwise, ~4x slower at K = 50)."""
    total = 0.0
    for k in range(A.shape[1]):
        total += A[i, k] * B[j, k]
    return total


@njit(nogil=True, cache=True, fastmath=FAST_DOT)
def low_rank_rows(left, right):
    """``left @ right.T``, each cell its own :func:`dot_rows`: a row's rates are the same bits in
    whatever block of rows they are computed (BLAS's sums follow the block's shape: on some CPUs a
    block's rows differed in the last bit from the same rows of a taller block, so rates summed by
    partitions were not one process's)."""
    out = np.empty((left.shape[0], right.shape[0]))
    for i in range(left.shape[0]):
        for j in range(right.shape[0]):
            out[i, j] = dot_rows(left, i, right, j)
    return out


@njit(nogil=True, cache=True, fastmath=FAST_DOT)
def row_sum(A, i):
    """``A[i].sum()``, vectorised (in order, a sum waits on each addition: 4x slower)."""
    total = 0.0
    for k in range(A.shape[1]):
        total += A[i, k]
    return total


@njit(nogil=True, cache=True, inline="always")
def products(A, i, B, j, out):
    """``out[k] = A[i, k] * B[j, k]``; returns their sum."""
    total = 0.0
    for k in range(A.shape[1]):
        w = A[i, k] * B[j, k]
        out[k] = w
        total += w
    return total


# ---------------------------------------------------------------------------
# Exact gamma and binomial samplers on the xoshiro stream
# ---------------------------------------------------------------------------


@njit(nogil=True, cache=True, inline="always")
def standard_normal(state):
    """N(0, 1) by Marsaglia's polar method (exact; one of the pair is kept)."""
    while True:
        u = 2.0 * uniform(state) - 1.0
        v = 2.0 * uniform(state) - 1.0
        s = u * u + v * v
        if 0.0 < s < 1.0:
            return u * math.sqrt(-2.0 * math.log(s) / s)


@njit(nogil=True, cache=True)
def _gamma_marsaglia_tsang(shape, state):
    """Gamma(shape, 1) for shape >= 1: Marsaglia & Tsang (2000), the squeeze and the exact log test.

    ``log v`` as ``3 log1p(c x)``: at shapes of 1e12 ``v`` is within 1e-6 of 1.
    """
    d = shape - 1.0 / 3.0
    c = 1.0 / math.sqrt(9.0 * d)
    while True:
        x = standard_normal(state)
        cx = c * x
        if cx <= -1.0:
            continue
        v = (1.0 + cx) * (1.0 + cx) * (1.0 + cx)
        u = 1.0 - uniform(state)  # in (0, 1]
        x2 = x * x
        if u < 1.0 - 0.0331 * x2 * x2:
            return d * v
        if math.log(u) < 0.5 * x2 + d * (1.0 - v + 3.0 * math.log1p(cx)):
            return d * v


@njit(nogil=True, cache=True)
def standard_gamma(shape, state):
    """One exact Gamma(shape, scale 1) draw, shape > 0, from the xoshiro ``state``.

    Shapes below 1 by the boost ``Gamma(shape + 1) U^(1/shape)`` (in logs); a
    draw below the smallest double (shape ~ 0.1 and less) is 0, as numpy's is.
    """
    if shape >= 1.0:
        return _gamma_marsaglia_tsang(shape, state)
    boost = math.log(1.0 - uniform(state)) / shape  # U in (0, 1]
    return math.exp(math.log(_gamma_marsaglia_tsang(shape + 1.0, state)) + boost)


@njit(nogil=True, cache=True)
def _log_binomial_pmf(k, n, p, q):
    """log Bin(k; n, p) (k, n integer-valued floats, q = 1 - p): Loader's saddle-point form,
    accurate to ~1e-15 of the result at any n (no lgamma of size 1e13 cancelling)."""
    if k == 0.0:
        return n * math.log1p(-p)
    if k == n:
        return n * math.log(p)
    return (
        _stirlerr(n)
        - _stirlerr(k)
        - _stirlerr(n - k)
        - _bd0(k, n * p)
        - _bd0(n - k, n * q)
        + 0.5 * math.log(n / (2.0 * math.pi * k * (n - k)))
    )


@njit(nogil=True, cache=True)
def _binomial_inversion(n, p, state):
    """Binomial(n, p), n p < _BTRS_MIN_MEAN, p <= 1/2: inversion from 0 (about n p steps)."""
    q = 1.0 - p
    ratio = p / q
    f0 = math.exp(n * math.log1p(-p))
    while True:
        u = uniform(state)
        k = 0
        f = f0
        while u >= f:
            u -= f
            k += 1
            if k > n:
                break
            f *= ratio * (n - k + 1) / k
            if f == 0.0:
                break
        if k <= n and f > 0.0:
            return k
        # u fell past every representable term (rounding): a new u, conditioning on that null event's complement


@njit(nogil=True, cache=True)
def _binomial_btrs(n, p, state):
    """Binomial(n, p), n p >= 10, p <= 1/2: BTRS, Hormann (1993), transformed rejection with a
    squeeze; the acceptance test on the exact log pmf relative to the mode's."""
    q = 1.0 - p
    nf = float(n)
    spq = math.sqrt(nf * p * q)
    b = 1.15 + 2.53 * spq
    a = -0.0873 + 0.0248 * b + 0.01 * p
    c = nf * p + 0.5
    v_r = 0.92 - 4.2 / b
    log_alpha = math.log((2.83 + 5.1 / b) * spq)
    mode = math.floor((nf + 1.0) * p)
    log_mode = _log_binomial_pmf(mode, nf, p, q)
    while True:
        u = uniform(state) - 0.5
        v = uniform(state)
        us = 0.5 - abs(u)
        if us <= 0.0:  # u = -1/2 exactly: the hat is infinite there
            continue
        k = math.floor((2.0 * a / us + b) * u + c)
        if k < 0.0 or k > nf:
            continue
        if us >= 0.07 and v <= v_r:
            return int(k)
        if v <= 0.0:
            return int(k)
        if math.log(v) + log_alpha - math.log(a / (us * us) + b) <= _log_binomial_pmf(k, nf, p, q) - log_mode:
            return int(k)


@njit(nogil=True, cache=True, inline="always")
def binomial(n, p, state):
    """One exact Binomial(n, p) draw from the xoshiro ``state``: n Bernoulli trials when n is
    small, else inversion (n min(p, 1 - p) < 10) or BTRS, on the smaller of p and 1 - p."""
    if n <= 0 or p <= 0.0:
        return 0
    if p >= 1.0:
        return n
    if n <= _SMALL_BINOMIAL:
        successes = 0
        for _ in range(n):
            if uniform(state) < p:
                successes += 1
        return successes
    small = min(p, 1.0 - p)
    if n * small < _BTRS_MIN_MEAN:
        drawn = _binomial_inversion(n, small, state)
    else:
        drawn = _binomial_btrs(n, small, state)
    return drawn if small == p else n - drawn


@njit(nogil=True, cache=True, inline="always")
def draw_weighted(weights, total, state, order=None):
    """An index k drawn with probability ``weights[k] / total``: a walk that stops early, over
    the indices in ``order`` (a permutation of them) or in their own order.

    Any fixed order gives the same law. The walk is a serial chain of additions, so an order
    whose first entries hold most of the weight stops it sooner: in each row's order of theta,
    a naive topic chain at 2,000 x 10,000, K = 50, eps/N = 1 walks 13 steps a token instead of
    25, and its allocation takes 0.87x the time. (Adding two weights a step, their sum formed
    off the chain, was slower there: 0.98x.) ``order=None`` is resolved when Numba compiles."""
    n = weights.shape[0]
    if not total > 0.0:
        # All weights underflowed: the model gives such a cell rate 0, so any
        # component is as (im)plausible as another.
        return int(uniform(state) * n)
    u = uniform(state) * total
    running = 0.0
    for j in range(n):
        k = j if order is None else order[j]
        running += weights[k]
        if u < running:
            return k
    # ``total`` summed in another order can exceed the walk's sum by ~1e-16.
    for j in range(n - 1, -1, -1):
        k = j if order is None else order[j]
        if weights[k] > 0.0:
            return k
    return n - 1 if order is None else order[n - 1]


@njit(nogil=True, cache=True)
def descending_orders(x, first_row, last_row):
    """Each row's column indices in decreasing order of its values, rows [first_row, last_row)
    (int32: half the bytes of the rows themselves)."""
    orders = np.empty((last_row - first_row, x.shape[1]), dtype=np.int32)
    for r in range(first_row, last_row):
        orders[r - first_row] = np.argsort(-x[r])
    return orders


@njit(nogil=True, cache=True, inline="always")
def multinomial(y, weights, total, state, out):
    """``out[k] ~ Multinomial(y, weights / total)``, exactly; ``weights`` is overwritten.

    Few tokens: one walk per token. Up to :data:`_SPLIT_TOKENS`: cumulative
    weights (in place) and a binary search per token. More: conditional
    binomials ``out[k] ~ Bin(remaining, w_k / remaining weight)``, O(K) draws
    whatever ``y`` is (a cell of 10^12 costs what a cell of 100 does).
    """
    n = weights.shape[0]
    for k in range(n):
        out[k] = 0
    if y <= 0:
        return
    if not total > 0.0:
        # All weights underflowed: the model gives such a cell rate 0, so any
        # component is as (im)plausible as another.
        for k in range(n):
            weights[k] = 1.0
        total = float(n)
    if y <= FEW_TOKENS:
        for _ in range(y):
            out[draw_weighted(weights, total, state)] += 1
        return
    if y <= _SPLIT_TOKENS:
        running = 0.0
        for k in range(n):
            running += weights[k]
            weights[k] = running
        for _ in range(y):
            u = uniform(state) * running
            lo = 0
            hi = n - 1
            while lo < hi:
                mid = (lo + hi) >> 1
                if u < weights[mid]:
                    hi = mid
                else:
                    lo = mid + 1
            out[lo] += 1
        return
    remaining = y
    rest = 0.0
    for k in range(n):
        rest += weights[k]
    for k in range(n - 1):
        if remaining == 0:
            return
        drawn = binomial(remaining, min(weights[k] / rest, 1.0), state) if rest > 0.0 else 0
        out[k] = drawn
        remaining -= drawn
        rest -= weights[k]
    out[n - 1] = remaining


@njit(nogil=True, cache=True, inline="always")
def log_factorial(y):
    return _LOG_FACTORIAL[y] if y < 256 else math.lgamma(y + 1.0)


@njit(nogil=True, cache=True)
def ordered_sum(values):
    """Left-to-right sum: the same rounding whatever ran the parts."""
    return ordered_sum_from(values, 0.0)


@njit(nogil=True, cache=True)
def ordered_sum_from(values, start):
    """:func:`ordered_sum` continued from ``start``: summing consecutive pieces of ``values`` each
    from the last's total gives the whole sum's rounding exactly (lpviz.distributed's rows)."""
    total = start
    for i in range(values.shape[0]):
        total += values[i]
    return total


@njit(nogil=True, cache=True)
def gamma_log_prior(x, a0, b0):
    """Sum over ``x`` of the Gamma(shape a0, rate b0) log density."""
    return gamma_log_prior_from(x, a0, b0, 0.0)


@njit(nogil=True, cache=True)
def gamma_log_prior_from(x, a0, b0, start):
    """:func:`gamma_log_prior` added to ``start`` term by term (consecutive row pieces chain exactly)."""
    const = a0 * math.log(b0) - math.lgamma(a0)
    total = start
    flat = x.ravel()
    for i in range(flat.shape[0]):
        # A factor that underflowed to 0 counts as the smallest normal double,
        # which keeps the log joint finite.
        value = max(flat[i], _TINY)
        total += const + (a0 - 1.0) * math.log(value) - b0 * value
    return total


@njit(nogil=True, cache=True)
def column_sums(x):
    """``x.sum(axis=0)`` in row order (deterministic)."""
    return column_sums_from(x, np.zeros(x.shape[1]))


@njit(nogil=True, cache=True)
def column_sums_from(x, start):
    """:func:`column_sums` continued from the sums ``start`` (consecutive row pieces chain exactly)."""
    out = start.copy()
    for r in range(x.shape[0]):
        for k in range(x.shape[1]):
            out[k] += x[r, k]
    return out


@njit(nogil=True, cache=True)
def row_csr_pattern(dense_mask):
    """(indptr, indices) int64 of the True cells of a boolean matrix, by row."""
    n_rows, n_cols = dense_mask.shape
    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    for i in range(n_rows):
        count = 0
        for j in range(n_cols):
            if dense_mask[i, j]:
                count += 1
        indptr[i + 1] = indptr[i] + count
    indices = np.empty(indptr[-1], dtype=np.int64)
    for i in range(n_rows):
        pos = indptr[i]
        for j in range(n_cols):
            if dense_mask[i, j]:
                indices[pos] = j
                pos += 1
    return indptr, indices


@njit(nogil=True, cache=True)
def count_positive_outside(block, first_row, excluded_indptr, excluded_indices, row_counts):
    """``row_counts[first_row + i]``: the positive entries of row i of the dense ``block`` (rows
    ``first_row`` on of a matrix) outside the excluded cells (listed by row of the matrix, sorted)."""
    n_rows, n_cols = block.shape
    for i in range(n_rows):
        count = 0
        for j in range(n_cols):
            if block[i, j] > 0:
                count += 1
        for idx in range(excluded_indptr[first_row + i], excluded_indptr[first_row + i + 1]):
            if block[i, excluded_indices[idx]] > 0:
                count -= 1
        row_counts[first_row + i] = count


@njit(nogil=True, cache=True)
def fill_positive_outside(block, first_row, excluded_indptr, excluded_indices, indptr, indices, values):
    """Write the positive entries of ``block`` outside the excluded cells into the CSR arrays
    (``indptr`` of the whole matrix, from :func:`count_positive_outside`)."""
    n_rows, n_cols = block.shape
    for i in range(n_rows):
        pos = indptr[first_row + i]
        next_excluded, stop = excluded_indptr[first_row + i], excluded_indptr[first_row + i + 1]
        for j in range(n_cols):
            if next_excluded < stop and excluded_indices[next_excluded] == j:
                next_excluded += 1
                continue
            if block[i, j] > 0:
                indices[pos] = j
                values[pos] = block[i, j]
                pos += 1


# ---------------------------------------------------------------------------
# Alias tables and sorted lists (the sparse step)
# ---------------------------------------------------------------------------


@njit(nogil=True, cache=True)
def build_alias(weights, probability, alias):
    """Vose's alias table of ``weights`` (non-negative, positive sum) into
    ``probability``/``alias``: one uniform and one comparison per draw."""
    n = weights.shape[0]
    total = 0.0
    for i in range(n):
        total += weights[i]
    small = np.empty(n, dtype=np.int64)
    large = np.empty(n, dtype=np.int64)
    n_small = 0
    n_large = 0
    for i in range(n):
        probability[i] = weights[i] * n / total if total > 0.0 else 1.0
        alias[i] = i
        if probability[i] < 1.0:
            small[n_small] = i
            n_small += 1
        else:
            large[n_large] = i
            n_large += 1
    while n_small > 0 and n_large > 0:
        n_small -= 1
        s = small[n_small]
        n_large -= 1
        g = large[n_large]
        alias[s] = g
        probability[g] = probability[g] + probability[s] - 1.0
        if probability[g] < 1.0:
            small[n_small] = g
            n_small += 1
        else:
            large[n_large] = g
            n_large += 1
    for i in range(n_large):
        probability[large[i]] = 1.0
    for i in range(n_small):  # rounding leftovers
        probability[small[i]] = 1.0


@njit(nogil=True, cache=True)
def column_alias_tables(columns):
    """Per column k of ``columns`` (rows x K), the alias table of column k over the rows, and the
    column sums: what the sparse step draws a row's cell from (a topic's words, a community's actors)."""
    n_rows, n_columns = columns.shape
    probability = np.empty((n_columns, n_rows))
    alias = np.empty((n_columns, n_rows), dtype=np.int64)
    weights = np.empty(n_rows)
    for k in range(n_columns):
        for row in range(n_rows):
            weights[row] = columns[row, k]
        build_alias(weights, probability[k], alias[k])
    return column_sums(columns), probability, alias


@njit(nogil=True, cache=True, inline="always")
def draw_alias(probability, alias, row, state):
    """An index drawn from row ``row`` of alias tables (``probability``/``alias`` 2-D)."""
    n = probability.shape[1]
    u = uniform(state) * n
    i = min(int(u), n - 1)
    return i if u - i < probability[row, i] else alias[row, i]


@njit(nogil=True, cache=True, inline="always")
def in_sorted(values, start, stop, x):
    """True when ``x`` is among ``values[start:stop]`` (sorted ascending)."""
    lo = start
    hi = stop
    while lo < hi:
        mid = (lo + hi) >> 1
        if values[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo < stop and values[lo] == x


@njit(nogil=True, cache=True)
def grow(array, size):
    """``array`` with room for at least ``size`` entries (doubling)."""
    if size <= array.shape[0]:
        return array
    bigger = np.empty(max(size, 2 * array.shape[0]), dtype=array.dtype)
    bigger[: array.shape[0]] = array
    return bigger
