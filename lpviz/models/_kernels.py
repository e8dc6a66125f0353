"""Numba helpers shared by the models: dot products, exact small samplers,
multinomial allocation in O(K) per cell, log likelihood pieces, CSR helpers.

Per-cell helpers are ``inline="always"`` and take arrays plus indices rather
than row views. The per-cell draws come from a xoshiro256** ``state``
(:mod:`lpviz._random`); the generic samplers (gamma, large binomials) from
Numba's thread-local ``np.random``, which every stream block reseeds.
"""

import math

import numpy as np
from numba import njit

from lpviz._random import uniform

# Up to this many tokens a cell's allocation draws token by token (a walk, or
# a binary search in cumulative weights); beyond, conditional binomials split
# all tokens at once: O(K) per cell whatever the count.
_FEW_TOKENS = 4
_SPLIT_TOKENS = 64
# Below these sizes the cheap exact constructions beat numba's generic samplers.
_SMALL_BINOMIAL = 16

# log(y!) for the small counts that dominate the Poisson log likelihood.
_LOG_FACTORIAL = np.array([math.lgamma(y + 1.0) for y in range(256)])
_TINY = 2.2250738585072014e-308

# Reassociation lets LLVM vectorise the K-long dot products; results stay
# deterministic (the same code runs for a cell whatever thread runs it).
FAST_DOT = {"reassoc", "contract", "nsz", "arcp"}


@njit(nogil=True, cache=True, fastmath=FAST_DOT, inline="always")
def dot_rows(A, i, B, j):
    """``A[i] . B[j]``."""
    total = 0.0
    for k in range(A.shape[1]):
        total += A[i, k] * B[j, k]
    return total


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


@njit(nogil=True, cache=True)
def _binomial_large(n, p):
    return np.random.binomial(n, p)


@njit(nogil=True, cache=True, inline="always")
def binomial(n, p, state):
    """Binomial(n, p); n Bernoulli trials when n is small (exact and cheap)."""
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
    return _binomial_large(n, p)


@njit(nogil=True, cache=True, fastmath=FAST_DOT, inline="always")
def draw_product(A, i, B, j, total, state):
    """An index k drawn with probability ``A[i, k] B[j, k] / total`` (``total`` = A[i] . B[j]):
    a walk along the running sum that stops early, with no buffer (one token of a cell)."""
    n = A.shape[1]
    if not total > 0.0:
        return int(uniform(state) * n)  # all weights underflowed: any component is as (im)plausible
    u = uniform(state) * total
    running = 0.0
    for k in range(n):
        running += A[i, k] * B[j, k]
        if u < running:
            return k
    # ``total`` summed in another order can exceed the walk's sum by ~1e-16
    for k in range(n - 1, -1, -1):
        if A[i, k] * B[j, k] > 0.0:
            return k
    return n - 1


@njit(nogil=True, cache=True, inline="always")
def draw_weighted(weights, total, state):
    """An index k drawn with probability ``weights[k] / total`` (a walk that stops early)."""
    n = weights.shape[0]
    if not total > 0.0:
        # All weights underflowed: the model gives such a cell rate 0, so any
        # component is as (im)plausible as another.
        return int(uniform(state) * n)
    u = uniform(state) * total
    running = 0.0
    for k in range(n):
        running += weights[k]
        if u < running:
            return k
    # ``total`` summed in another order can exceed the walk's sum by ~1e-16.
    for k in range(n - 1, -1, -1):
        if weights[k] > 0.0:
            return k
    return n - 1


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
    if y <= _FEW_TOKENS:
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
    total = 0.0
    for i in range(values.shape[0]):
        total += values[i]
    return total


@njit(nogil=True, cache=True)
def gamma_log_prior(x, a0, b0):
    """Sum over ``x`` of the Gamma(shape a0, rate b0) log density."""
    const = a0 * math.log(b0) - math.lgamma(a0)
    total = 0.0
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
    out = np.zeros(x.shape[1])
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
