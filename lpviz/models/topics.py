"""The topic model: Poisson matrix factorization ``mu_dv = sum_k theta_dk phi_kv``.

Gamma priors with shape ``a0`` and rate ``b0`` on every factor. Inside the
kernels ``phi`` is stored transposed as ``phiT`` (V, K), so every cell reads
two contiguous K-vectors. Excluded cells (held out, or structural zeros of the
data) are left out of the likelihood: rate sums are the full factor sums minus
the excluded cells, listed by row and by column.
"""

import math

import numpy as np
from numba import njit

from lpviz._parallel import ROWS_PER_STREAM, run_chunks
from lpviz._random import seed_state
from lpviz.collapsed import sample_poisson
from lpviz.models._kernels import (
    FAST_DOT,
    FEW_TOKENS,
    column_alias_tables,
    column_sums,
    descending_orders,
    dot_rows,
    draw_alias,
    draw_weighted,
    gamma_log_prior,
    grow,
    in_sorted,
    log_factorial,
    multinomial,
    ordered_sum,
    products,
    standard_gamma,
)
from lpviz.models._variational import (
    VI_INIT_SHAPE,
    GammaFactor,
    RowTotals,
    add_fixed,
    allocation_gap,
    allocation_gap_rows,
    check_fixed_bound,
    fixed_total,
    refresh_row,
    row_totals,
    weights_of,
)
from lpviz.models.base import Model

# Units: each phase of an iteration draws from its own streams.
UNIT_SWEEP = 0
UNIT_THETA = 1 << 40
UNIT_PHI = 2 << 40
UNIT_POISSON = 4 << 40

# The allocation sweeps words in tiles whose phi rows and n_kv columns take about this many bytes
# (16 per topic per word): they stay in a core's cache while every row of the chunk draws.
TILE_BYTES = 1 << 20


# From this many topics on, each row's tokens walk its topics in its order of theta, largest
# first (about half the steps at K = 50); with fewer, a walk is a few steps and sorting every
# row costs more than it saves (Figure 3's size, K = 3: +25 us on a 0.15 ms iteration).
SORTED_WALK_TOPICS = 16

# ---------------------------------------------------------------------------
# Kernels: one chunk of stream blocks each
# ---------------------------------------------------------------------------


@njit(nogil=True, cache=True)
def words_per_tile(n_topics):
    """Words per tile of the allocation sweep: :data:`TILE_BYTES` of per-word data, at least 64."""
    return max(64, TILE_BYTES // (16 * n_topics))


@njit(nogil=True, cache=True, fastmath=FAST_DOT)
def _allocate_chunk(chunk, first, last, counts, factors, seeds, stats):
    """Split the counts of rows in blocks [first, last) over topics.

    ``counts``: CSR (indptr, indices, values) of the cells to allocate; ``factors``: (theta,
    phiT); ``seeds``: (chain seed, iteration, stop flag); ``stats``: (n_dk, n_kv parts): rows
    of n_dk belong to the chunk, n_kv is summed over chunks later.

    A cell's K products go into a buffer in one vectorised loop (``fastmath=FAST_DOT``), then
    each of its tokens walks the buffer in its row's order of theta, largest first
    (:func:`draw_weighted`; :func:`multinomial` beyond a few tokens: binary search or
    binomial splits). At 2,000 x 10,000, K = 50, eps/N = 1 (5.4M
    positive cells, 8.6M tokens) this is 0.6x the time of proposing each token from its word's
    alias table over topics and accepting on theta (~3.4 proposals a token, a mispredicted
    branch and two dependent cache loads each, and 9% of tokens still walking).

    The chunk's cells go a tile of ``words_per_tile(K)`` words at a time, every row of the
    chunk in each: the tile's phi rows and n_kv columns stay in the core's cache while all rows
    draw from them (a row after row sweep fetched every positive cell's word from memory: 1.5x
    the time). Each stream block keeps its own xoshiro state across tiles, so the draws do not
    depend on the chunks. ``n_kv`` is topics x words: each topic's counts of a tile are one
    short stream.
    """
    indptr, indices, values = counts
    theta, phiT = factors
    chain_seed, iteration, stop, block_offset = seeds
    n_dk, n_kv_parts = stats
    n_kv = n_kv_parts[chunk]
    n_docs, n_topics = theta.shape
    n_words = phiT.shape[0]
    first_row, last_row = first * ROWS_PER_STREAM, min(n_docs, last * ROWS_PER_STREAM)
    if last_row <= first_row:
        return
    weights = np.empty(n_topics)
    drawn = np.zeros(n_topics, dtype=np.int64)
    states = np.empty((last - first, 4), dtype=np.uint64)
    for block in range(first, last):
        seed_state(states[block - first], chain_seed, iteration, UNIT_SWEEP + block_offset + block)
    cursor = indptr[first_row:last_row].copy()
    sort_rows = n_topics >= SORTED_WALK_TOPICS
    if sort_rows:
        orders = descending_orders(theta, first_row, last_row)
    else:  # one order, the topics' own, for every row
        orders = np.arange(n_topics).astype(np.int32).reshape((1, n_topics))
    tile = words_per_tile(n_topics)
    for tile_start in range(0, n_words, tile):
        tile_end = min(n_words, tile_start + tile)
        for block in range(first, last):
            if stop[0]:
                return
            state = states[block - first]
            for d in range(block * ROWS_PER_STREAM, min(n_docs, (block + 1) * ROWS_PER_STREAM)):
                row = d - first_row
                order = orders[row if sort_rows else 0]
                idx = cursor[row]
                end = indptr[d + 1]
                while idx < end and indices[idx] < tile_end:
                    y = values[idx]
                    v = indices[idx]
                    idx += 1
                    if y <= 0:
                        continue
                    total = products(theta, d, phiT, v, weights)
                    if y <= FEW_TOKENS:  # most cells: a walk per token, no multinomial bookkeeping
                        for _ in range(y):
                            k = draw_weighted(weights, total, state, order)
                            n_dk[d, k] += 1
                            n_kv[k, v] += 1
                        continue
                    multinomial(y, weights, total, state, drawn)
                    for k in range(n_topics):
                        if drawn[k]:
                            n_dk[d, k] += drawn[k]
                            n_kv[k, v] += drawn[k]
                cursor[row] = idx


@njit(nogil=True, cache=True)
def _update_chunk(chunk, first, last, sides, prior, seeds):
    """Draw rows in blocks [first, last) of one factor from their gamma conditional.

    ``sides``: (factor, other, counts, other_sum, missing indptr, missing
    indices): ``factor[r, k] ~ Gamma(a0 + counts[r, k], b0 + sum over the
    observed partners s of other[s, k])``. ``prior``: (a0, b0); ``seeds``:
    (chain seed, iteration, unit, stop flag).
    """
    factor, other, counts, other_sum, missing_indptr, missing_indices = sides
    a0, b0 = prior
    chain_seed, iteration, unit, stop = seeds
    n_rows, n_topics = factor.shape
    rate = np.empty(n_topics)
    state = np.empty(4, dtype=np.uint64)
    for block in range(first, last):
        if stop[0]:
            return
        seed_state(state, chain_seed, iteration, unit + block)
        for r in range(block * ROWS_PER_STREAM, min(n_rows, (block + 1) * ROWS_PER_STREAM)):
            rate[:] = other_sum
            for idx in range(missing_indptr[r], missing_indptr[r + 1]):
                s = missing_indices[idx]
                for k in range(n_topics):
                    rate[k] -= other[s, k]
            for k in range(n_topics):
                factor[r, k] = standard_gamma(a0 + counts[r, k], state) / (b0 + max(rate[k], 0.0))


@njit(nogil=True, cache=True, fastmath=FAST_DOT)
def _loglik_chunk(chunk, first, last, counts, factors, row_log):
    """``row_log[d] = sum over row d's cells of y log mu_dv - log y!`` for rows in [first, last),
    summed a tile of words at a time (0.7x the time of row by row at 2,000 x 10,000, K = 50).

    ``fastmath=FAST_DOT``: :func:`dot_rows` is inlined as Numba IR and compiled with this
    kernel's flags, so only here do its products vectorise (a serial chain of additions
    otherwise: the log likelihood took 0.21-0.28 s of naive's iteration at 2,000 x 10,000,
    K = 50, eps/N = 1, and 0.10 s with the flags)."""
    indptr, indices, values = counts
    theta, phiT = factors
    n_docs, n_topics = theta.shape
    n_words = phiT.shape[0]
    first_row, last_row = first * ROWS_PER_STREAM, min(n_docs, last * ROWS_PER_STREAM)
    if last_row <= first_row:
        return
    row_log[first_row:last_row] = 0.0
    cursor = indptr[first_row:last_row].copy()
    tile = words_per_tile(n_topics)  # the tile's phi rows stay in cache, as in the allocation
    for tile_start in range(0, n_words, tile):
        tile_end = min(n_words, tile_start + tile)
        for d in range(first_row, last_row):
            idx = cursor[d - first_row]
            end = indptr[d + 1]
            total = 0.0
            while idx < end and indices[idx] < tile_end:
                y = values[idx]
                if y > 0:
                    total += y * math.log(dot_rows(theta, d, phiT, indices[idx])) - log_factorial(y)
                idx += 1
            cursor[d - first_row] = idx
            row_log[d] += total


@njit(nogil=True, cache=True)
def _excluded_rate_sum(theta, phiT, missing_indptr, missing_indices):
    """Sum of mu over the excluded cells (listed by row)."""
    return _excluded_rate_sum_from(theta, phiT, missing_indptr, missing_indices, 0.0)


@njit(nogil=True, cache=True)
def _excluded_rate_sum_from(theta, phiT, missing_indptr, missing_indices, start):
    """:func:`_excluded_rate_sum` continued from ``start`` (consecutive row pieces chain exactly)."""
    total = start
    for d in range(theta.shape[0]):
        for idx in range(missing_indptr[d], missing_indptr[d + 1]):
            total += dot_rows(theta, d, phiT, missing_indices[idx])
    return total


@njit(nogil=True, cache=True)
def _subtract_missing(theta, missing_indptr, missing_indices, partner):
    """``partner[v] -= theta[d]`` for every excluded cell (d, v), rows in order: per column, the
    subtractions :func:`_update_chunk` makes from theta's column sums for phi's rate."""
    for d in range(theta.shape[0]):
        for idx in range(missing_indptr[d], missing_indptr[d + 1]):
            v = missing_indices[idx]
            for k in range(theta.shape[1]):
                partner[v, k] -= theta[d, k]
    return partner


@njit(nogil=True, cache=True)
def _update_rates_chunk(chunk, first, last, sides, prior, seeds):
    """:func:`_update_chunk` with each row's rate sums given (``sides``: factor, counts, rates):
    the same draws from the same streams."""
    factor, counts, rates = sides
    a0, b0 = prior
    chain_seed, iteration, unit, stop = seeds
    n_rows, n_topics = factor.shape
    state = np.empty(4, dtype=np.uint64)
    for block in range(first, last):
        if stop[0]:
            return
        seed_state(state, chain_seed, iteration, unit + block)
        for r in range(block * ROWS_PER_STREAM, min(n_rows, (block + 1) * ROWS_PER_STREAM)):
            for k in range(n_topics):
                factor[r, k] = standard_gamma(a0 + counts[r, k], state) / (b0 + max(rates[r, k], 0.0))


@njit(nogil=True, cache=True)
def _observed_rate(theta, phiT, missing_indptr, missing_indices):
    """Sum of mu over the observed cells: every cell's (column sums' product) less the excluded."""
    theta_sum = column_sums(theta)
    phi_sum = column_sums(phiT)
    total = 0.0
    for k in range(theta_sum.shape[0]):
        total += theta_sum[k] * phi_sum[k]
    return total - _excluded_rate_sum(theta, phiT, missing_indptr, missing_indices)


@njit(nogil=True, cache=True)
def _update_and_score(
    theta,
    phiT,
    n_dk,
    n_vk,
    indptr,
    indices,
    values,
    row_missing_indptr,
    row_missing_indices,
    column_missing_indptr,
    column_missing_indices,
    a0,
    b0,
    chain_seed,
    iteration,
    stop,
):
    """:meth:`TopicModel.update_and_score` of data in one chunk, in one call: theta, then phi given
    it, then the log likelihood of the counts and the log prior at the new factors (the same
    kernels and the same order of arithmetic as the hooks one by one)."""
    prior = (a0, b0)
    n_row_blocks = (theta.shape[0] + ROWS_PER_STREAM - 1) // ROWS_PER_STREAM
    n_column_blocks = (phiT.shape[0] + ROWS_PER_STREAM - 1) // ROWS_PER_STREAM
    sides = (theta, phiT, n_dk, column_sums(phiT), row_missing_indptr, row_missing_indices)
    _update_chunk(0, 0, n_row_blocks, sides, prior, (chain_seed, iteration, UNIT_THETA, stop))
    sides = (phiT, theta, n_vk, column_sums(theta), column_missing_indptr, column_missing_indices)
    _update_chunk(0, 0, n_column_blocks, sides, prior, (chain_seed, iteration, UNIT_PHI, stop))
    row_log = np.zeros(theta.shape[0])
    _loglik_chunk(0, 0, n_row_blocks, (indptr, indices, values), (theta, phiT), row_log)
    loglik = ordered_sum(row_log) - _observed_rate(theta, phiT, row_missing_indptr, row_missing_indices)
    return loglik + (gamma_log_prior(theta, a0, b0) + gamma_log_prior(phiT, a0, b0))


@njit(nogil=True, cache=True)
def _poisson_chunk(chunk, first, last, rows, factors, tables, seeds, stats):
    """Draw ``y_dv ~ Poisson(scale_d mu_dv)`` at the observed cells with ``ytil_dv <= 0``
    of the used rows, without visiting them: per topic ``T_dk ~ Poisson(scale_d theta_dk
    sum_v phi_kv)`` tokens, each placed at a word ``v`` with probability ``phi_kv / sum_v
    phi_kv`` (alias table) and dropped when its cell is not one of those (``ytil > 0``
    or excluded). The tokens at each cell then form ``Poisson(scale_d theta_dk phi_kv)``,
    independently over cells and topics (Poisson thinning): no rate sums over a row's
    cells, no rejection loop; the tokens dropped are about ``scale_d`` times the rate of
    the other cells.

    ``rows``: (use_row, noised counts, excluded indptr, excluded indices (sorted per row),
    scale); ``tables``: (phi column sums, alias probability, alias index), (K, V) each;
    ``stats``: (n_dk, n_kv parts): allocations are added. Returns the tokens' (rows, columns).
    """
    use_row, Y, excluded_indptr, excluded_indices, scale = rows
    theta, phiT = factors
    phi_sum, probability, alias = tables
    chain_seed, iteration, stop, block_offset = seeds
    n_dk, n_kv_parts = stats
    n_kv = n_kv_parts[chunk]
    n_docs, n_topics = theta.shape
    state = np.empty(4, dtype=np.uint64)
    token_rows = np.empty(64, dtype=np.int64)
    token_cols = np.empty(64, dtype=np.int64)
    n_tokens = 0
    for block in range(first, last):
        if stop[0]:
            break
        seed_state(state, chain_seed, iteration, UNIT_POISSON + block_offset + block)
        for d in range(block * ROWS_PER_STREAM, min(n_docs, (block + 1) * ROWS_PER_STREAM)):
            if not use_row[d]:
                continue
            start, end = excluded_indptr[d], excluded_indptr[d + 1]
            any_excluded = end > start
            for k in range(n_topics):
                tokens = sample_poisson(scale[d] * theta[d, k] * phi_sum[k], state)
                if tokens == 0:
                    continue
                token_rows = grow(token_rows, n_tokens + tokens)
                token_cols = grow(token_cols, n_tokens + tokens)
                kept = 0
                for _ in range(tokens):
                    v = draw_alias(probability, alias, k, state)
                    # no branch on where the token fell (about half are dropped, at random): it is
                    # written in any case and counted when kept
                    keep = np.int64(Y[d, v] <= 0)
                    if any_excluded and in_sorted(excluded_indices, start, end, v):
                        keep = 0
                    n_kv[k, v] += keep
                    token_rows[n_tokens] = d
                    token_cols[n_tokens] = v
                    n_tokens += keep
                    kept += keep
                n_dk[d, k] += kept
    return token_rows[:n_tokens], token_cols[:n_tokens]


# ---------------------------------------------------------------------------
# Variational inference (CAVI) kernels
# ---------------------------------------------------------------------------


@njit(nogil=True, cache=True, fastmath=FAST_DOT)
def _vi_allocate_chunk(chunk, first, last, counts, geo, stats, row_log, stop):
    """Expected allocation of the (expected) counts of rows in blocks [first, last):
    ``E[y_dvk] = y_dv G[theta_dk] G[phi_kv] / W_dv``, ``W_dv = sum_k G[theta_dk] G[phi_kv]``.

    ``stats`` = (R (D, K), N parts (chunks, V, K, 2) int64) get ``R_d = sum_v (y / W) G[phi_v]``
    (then ``n_dk = G[theta_dk] R_dk``: a row's own sum) and ``N_v += E[y_dvk]`` in fixed point
    (:func:`~lpviz.models._variational.add_fixed`: sums over rows exact in any order, so the
    same on any number of chunks or machines). ``row_log[d] = sum_v y_dv log W_dv``.
    """
    indptr, indices, values = counts
    geo_theta, geo_phiT = geo
    row_sums, column_parts = stats
    column_sums_part = column_parts[chunk]
    n_docs, n_topics = geo_theta.shape
    row_sum = np.empty(n_topics)
    for d in range(first * ROWS_PER_STREAM, min(n_docs, last * ROWS_PER_STREAM)):
        if stop[0]:
            return
        row_sum[:] = 0.0
        theta_d = geo_theta[d]
        total = 0.0
        for idx in range(indptr[d], indptr[d + 1]):
            y = values[idx]
            if not y > 0.0:
                continue
            v = indices[idx]
            phi_v = geo_phiT[v]
            weight = 0.0
            for k in range(n_topics):
                weight += theta_d[k] * phi_v[k]
            if not weight > 0.0:  # every G underflowed: the cell has no rate to share
                continue
            scale = y / weight
            column_v = column_sums_part[v]
            for k in range(n_topics):
                share = scale * phi_v[k]
                row_sum[k] += share
                add_fixed(column_v[k], share * theta_d[k])
            total += y * math.log(weight)
        row_sums[d] = row_sum
        row_log[d] = total


@njit(nogil=True, cache=True, fastmath=FAST_DOT)
def _vi_moments_chunk(chunk, first, last, rows, columns, out):
    """Moments of ``mu_dv = sum_k theta_dk phi_kv`` under q at every cell of the rows in
    stream blocks [first, last): ``E[mu]``, ``V[mu] = sum_k V[theta] E[phi^2] + E[theta]^2 V[phi]``
    (no cancellation) and ``sum_k G[theta_dk] G[phi_kv]``.

    ``rows``: (E, V, G) of theta (D, K); ``columns``: (E, E[x^2], V, G) of phi, (V, K);
    ``out``: (mean, variance, G sum) blocks of rows from ``origin`` on, origin, stop flag.
    """
    mean_theta, var_theta, geo_theta = rows
    mean_phi, second_phi, var_phi, geo_phi = columns
    mean_out, var_out, weight_out, origin, stop = out
    n_docs, n_topics = mean_theta.shape
    n_words = mean_phi.shape[0]
    square = np.empty(n_topics)
    for d in range(first * ROWS_PER_STREAM, min(n_docs, last * ROWS_PER_STREAM)):
        if stop[0]:
            return
        r = d - origin
        mean_d, var_d, geo_d = mean_theta[d], var_theta[d], geo_theta[d]
        for k in range(n_topics):
            square[k] = mean_d[k] * mean_d[k]
        for v in range(n_words):
            mean_v, second_v, var_v, geo_v = mean_phi[v], second_phi[v], var_phi[v], geo_phi[v]
            mean = 0.0
            variance = 0.0
            weight = 0.0
            for k in range(n_topics):
                mean += mean_d[k] * mean_v[k]
                variance += var_d[k] * second_v[k] + square[k] * var_v[k]
                weight += geo_d[k] * geo_v[k]
            mean_out[r, v] = mean
            var_out[r, v] = variance
            weight_out[r, v] = weight


@njit(nogil=True, cache=True)
def _vi_update_chunk(chunk, first, last, factor, sides, prior, row_elbo):
    """CAVI update of rows in blocks [first, last) of one factor's Gamma q:
    ``shape_rk = a0 + n_rk``, ``rate_rk = b0 + sum over the observed partners s
    of E[other_sk]``; ``row_elbo[r]``: the row's prior + entropy terms.

    ``factor``: (shape, rate, mean, var, geo, elog); ``sides``: (n, other's
    means, their column sums, missing indptr, missing indices, stop flag).
    """
    shape, rate = factor[0], factor[1]
    counts, other, other_sum, missing_indptr, missing_indices, stop = sides
    a0, b0 = prior
    n_rows, n_topics = shape.shape
    partner = np.empty(n_topics)
    for r in range(first * ROWS_PER_STREAM, min(n_rows, last * ROWS_PER_STREAM)):
        if stop[0]:
            return
        partner[:] = other_sum
        for idx in range(missing_indptr[r], missing_indptr[r + 1]):
            s = missing_indices[idx]
            for k in range(n_topics):
                partner[k] -= other[s, k]
        for k in range(n_topics):
            shape[r, k] = a0 + counts[r, k]
            rate[r, k] = b0 + max(partner[k], 0.0)
        row_elbo[r] = refresh_row(factor, r, prior)


@njit(nogil=True, cache=True)
def _vi_update_rates_chunk(chunk, first, last, factor, sides, prior, row_elbo):
    """:func:`_vi_update_chunk` with each row's partner sums given (``sides``: n, rates, stop flag):
    the same update (lpviz.distributed: the sums over the excluded cells come from the workers)."""
    shape, rate = factor[0], factor[1]
    counts, partner, stop = sides
    a0, b0 = prior
    n_rows, n_topics = shape.shape
    for r in range(first * ROWS_PER_STREAM, min(n_rows, last * ROWS_PER_STREAM)):
        if stop[0]:
            return
        for k in range(n_topics):
            shape[r, k] = a0 + counts[r, k]
            rate[r, k] = b0 + max(partner[r, k], 0.0)
        row_elbo[r] = refresh_row(factor, r, prior)


def _seeds(work, iteration):
    """The sweep kernels' seeds: (chain seed, iteration, stop flag, the rows' first stream block)."""
    return (work.chain_seed, iteration, work.stop, work.block_offset)


# ---------------------------------------------------------------------------
# The model
# ---------------------------------------------------------------------------


class TopicModel(RowTotals, Model):
    """Poisson factorization of a documents x words matrix (a topic model).

    ``mu = theta @ phi`` with ``theta`` (D, K) and ``phi`` (K, V). Works on any
    matrix (a network too, with its diagonal excluded as a structural zero).
    """

    name = "topics"
    label = "topic model (Poisson factorization)"
    component_name = "topic"
    factor_names = ("theta", "phi")
    kinds = ("documents", "network")
    default_for = ("documents",)
    inferences = ("mcmc", "vi")
    shows = ("topics", "memberships")

    # -- shapes and memory --------------------------------------------------------
    def factor_bytes(self, shape):
        return 8 * self.n_components * (int(shape[0]) + int(shape[1]))  # theta and phi

    def state_bytes(self, shape):
        n_rows, n_cols = shape
        # factors, their statistics (n_dk, n_kv, and one n_kv part per chunk); the allocation's
        # orders of topics per row (int32), from SORTED_WALK_TOPICS on
        K = self.n_components
        orders = 4 * K * n_rows if K >= SORTED_WALK_TOPICS else 0
        return 8 * K * (2 * (n_rows + n_cols) + 4 * 2 * n_cols) + orders

    # -- state ----------------------------------------------------------------------
    def start_level(self, mean_count):
        """The scale of the start's gamma(1) draws: theta phi's products then match the mean count."""
        return math.sqrt(max(mean_count, 1e-2) / self.n_components)

    def init_state(self, shape, mean_count, rng):
        n_rows, n_cols = shape
        K = self.n_components
        level = self.start_level(mean_count)
        # gamma(1) draws whose products match the mean count: early sweeps allocate sensibly
        theta = rng.gamma(1.0, level, (n_rows, K))
        phiT = rng.gamma(1.0, level, (n_cols, K))
        return (theta, phiT)

    def factors(self, state):
        theta, phiT = state
        return {"theta": theta.copy(), "phi": phiT.T.copy()}

    def set_factors(self, state, factors):
        theta, phiT = state
        theta[...] = factors["theta"]
        phiT[...] = np.asarray(factors["phi"]).T

    def low_rank(self, factors):
        return factors["theta"], np.asarray(factors["phi"]).T

    def topics(self, factors):
        return factors["phi"]

    def memberships(self, factors):
        return factors["theta"]

    # -- kernels ------------------------------------------------------------------------
    def rate_rows(self, state, rows):
        theta, phiT = state
        return theta[rows] @ phiT.T

    def new_stats(self, state, work):
        theta, phiT = state
        K = self.n_components
        return (
            np.zeros((theta.shape[0], K), dtype=np.int64),
            np.zeros((len(work.bounds), K, phiT.shape[0]), dtype=np.int64),
        )

    def allocate(self, state, counts, stats, work, iteration):
        run_chunks(_allocate_chunk, work.bounds, work.stop, counts, state, _seeds(work, iteration), stats)

    def poisson_allocate(self, state, rows, stats, work, iteration):
        tables = column_alias_tables(state[1])
        tokens = run_chunks(_poisson_chunk, work.bounds, work.stop, rows, state, tables, _seeds(work, iteration), stats)
        return np.concatenate([t[0] for t in tokens]), np.concatenate([t[1] for t in tokens])

    def update(self, state, stats, work, iteration):
        theta, phiT = state
        self.update_rows(state, stats[0], work, iteration)
        self.update_columns(state, stats[1].sum(axis=0), column_sums(theta), work, iteration)

    # The update in two halves, for a chain whose rows live on several machines (lpviz.distributed):
    # the rows' half runs where the rows are, the columns' half needs only sums over the rows.
    def update_rows(self, state, n_dk, work, iteration):
        """Draw theta (the rows of ``state``, stream blocks from ``work.block_offset`` on) given
        their allocations ``n_dk`` and phi."""
        theta, phiT = state
        run_chunks(
            _update_chunk,
            work.bounds,
            work.stop,
            (theta, phiT, n_dk, column_sums(phiT), *work.missing_by_row),
            (self.a0, self.b0),
            (work.chain_seed, iteration, UNIT_THETA + work.block_offset, work.stop),
        )

    def column_counts(self, stats):
        """The allocations phi's draw needs, summed over the row chunks: n_kv (K, V), integers."""
        return stats[1].sum(axis=0)

    def update_columns(self, state, n_kv, theta_sum, work, iteration):
        """Draw phi given its allocations ``n_kv`` (K, V: summed over every row) and the column
        sums of the new theta ``theta_sum`` (K,), by :func:`column_sums` over every row in order."""
        theta, phiT = state
        run_chunks(
            _update_chunk,
            work.column_bounds,
            work.stop,
            (phiT, theta, n_kv.T, theta_sum, *work.missing_by_column),
            (self.a0, self.b0),
            (work.chain_seed, iteration, UNIT_PHI, work.stop),
        )

    # Excluded cells (held out, structural zeros of the data) on a cluster: phi's rate sums and the
    # excluded rate, each continued over the rows in order (lpviz.distributed).
    @staticmethod
    def rows_pass(kind, state, work, carry):
        """Continue phi's rate sums ``carry`` (V, K; theta's column sums at the start: ``kind`` "phi")
        over these rows' excluded cells."""
        return _subtract_missing(state[0], *work.missing_by_row, carry)

    @staticmethod
    def excluded_rate_from(state, work, carry):
        """The rate summed over these rows' excluded cells, continued from ``carry``."""
        return _excluded_rate_sum_from(state[0], state[1], *work.missing_by_row, carry)

    def update_columns_excluded(self, state, n_kv, theta_sum, work, iteration, through_rows):
        """:meth:`update_columns` of data with excluded cells, phi's rate sums over the observed
        rows continued through the rows by ``through_rows(kind, start, factors)``."""
        partner = through_rows("phi", np.repeat(theta_sum[None, :], state[1].shape[0], axis=0), {})
        run_chunks(
            _update_rates_chunk,
            work.column_bounds,
            work.stop,
            (state[1], n_kv.T, partner),
            (self.a0, self.b0),
            (work.chain_seed, iteration, UNIT_PHI, work.stop),
        )

    def log_prior(self, state):
        theta, phiT = state
        return gamma_log_prior(theta, self.a0, self.b0) + gamma_log_prior(phiT, self.a0, self.b0)

    def count_loglik(self, state, counts, work):
        theta, phiT = state
        return ordered_sum(self.row_loglik(state, counts, work)) - _observed_rate(theta, phiT, *work.missing_by_row)

    def row_loglik(self, state, counts, work):
        """Per row, ``sum over its cells of y log mu - log y!`` (the rate sum is subtracted once)."""
        row_log = np.zeros(state[0].shape[0])
        run_chunks(_loglik_chunk, work.bounds, work.stop, counts, state, row_log)
        return row_log

    @staticmethod
    def observed_rate_of_sums(theta_sum, phiT):
        """:func:`_observed_rate` of data without excluded cells, from theta's column sums:
        the same arithmetic, a sum over the topics of theta's sums times phi's."""
        no_cells = np.zeros(2, dtype=np.int64), np.zeros(0, dtype=np.int64)
        return _observed_rate(np.ascontiguousarray(theta_sum).reshape(1, -1), phiT, *no_cells)

    def update_and_score(self, state, stats, counts, work, iteration):
        if len(work.bounds) > 1 or len(work.column_bounds) > 1:
            return super().update_and_score(state, stats, counts, work, iteration)
        theta, phiT = state
        n_dk, n_kv_parts = stats
        return _update_and_score(
            theta,
            phiT,
            n_dk,
            n_kv_parts[0].T,
            *counts,
            *work.missing_by_row,
            *work.missing_by_column,
            self.a0,
            self.b0,
            work.chain_seed,
            iteration,
            work.stop,
        )

    # -- variational inference (CAVI, lpviz.vi) --------------------------------------
    # q is (theta, phiT): two GammaFactor, phi transposed as in the chains' state.
    def vi_init(self, shape, mean_count, rng):
        theta, phiT = self.init_state(shape, mean_count, rng)
        prior = (self.a0, self.b0)
        return (GammaFactor.around(theta, VI_INIT_SHAPE, prior), GammaFactor.around(phiT, VI_INIT_SHAPE, prior))

    def vi_factors(self, q):
        theta, phiT = q
        return {"theta": theta.mean.copy(), "phi": phiT.mean.T.copy()}

    def vi_moments(self, q, start, stop, bounds, work):
        theta, phiT = q
        shape = (stop - start, phiT.n_rows)
        mean_mu, var_mu, weight_mu = np.empty(shape), np.empty(shape), np.empty(shape)
        columns = (phiT.mean, phiT.var + phiT.mean * phiT.mean, phiT.var, phiT.geo)
        run_chunks(
            _vi_moments_chunk,
            bounds,
            work.stop,
            (theta.mean, theta.var, theta.geo),
            columns,
            (mean_mu, var_mu, weight_mu, start, work.stop),
        )
        return mean_mu, var_mu, weight_mu

    def vi_rates(self, q, start, stop, weights):
        theta, phiT = q
        rows = weights_of(theta, weights)[start:stop]
        if rows.shape[0] == 1:  # one row alone goes through BLAS's matrix-vector path, whose rounding differs
            return (np.vstack([rows, rows]) @ weights_of(phiT, weights).T)[:1]
        return rows @ weights_of(phiT, weights).T

    def vi_new_stats(self, q, work):
        theta, phiT = q
        K = self.n_components
        return {
            "sums": (np.zeros((theta.n_rows, K)), np.zeros((len(work.bounds), phiT.n_rows, K, 2), dtype=np.int64)),
            "weights": "geometric",
        }

    def vi_allocate(self, q, counts, stats, work, weights="geometric"):
        theta, phiT = q
        stats["weights"] = weights
        # the column totals of the counts bound every fixed-point sum: refuse what would overflow
        stats["bound"] = check_fixed_bound(float(np.bincount(counts[1], counts[2], phiT.n_rows).max(initial=0.0)))
        row_log = np.zeros(theta.n_rows)
        factors = (weights_of(theta, weights), weights_of(phiT, weights))
        run_chunks(_vi_allocate_chunk, work.bounds, work.stop, counts, factors, stats["sums"], row_log, work.stop)
        return row_log

    def vi_update(self, q, stats, work):
        row_sums, column_parts = stats["sums"]
        rows = self.vi_update_rows(q, row_sums, stats["weights"], work)
        totals = self.vi_row_totals(q, rows, self.vi_no_totals())
        return self.vi_update_columns(q, (fixed_total(column_parts),), stats["weights"], totals, work)

    # The update in two halves, for a fit whose rows live on several machines (lpviz.distributed):
    # theta's where its rows are, their totals handed on in row order, phi's on the driver.
    def vi_update_rows(self, q, row_sums, weights, work):
        """theta's update (at phi's q); returns its rows' terms (allocation gap, ELBO, moved)."""
        theta, phiT = q
        n_dk = weights_of(theta, weights) * row_sums
        # the allocation's distance from the optimum, at the q it used
        gap = allocation_gap_rows(theta, n_dk) if weights == "arithmetic" else np.zeros(theta.n_rows)
        old_elog = theta.elog.copy()
        theta_elbo = np.zeros(theta.n_rows)
        run_chunks(
            _vi_update_chunk,
            work.bounds,
            work.stop,
            theta.arrays(),
            (n_dk, phiT.mean, column_sums(phiT.mean), *work.missing_by_row, work.stop),
            (self.a0, self.b0),
            theta_elbo,
        )
        # the allocation q stays as allocated: its log-rate terms move with E[log theta]
        return gap, theta_elbo, row_totals(n_dk * (theta.elog - old_elog))

    def vi_rows_pass(self, kind, q, work, carry):
        """Continue over these rows a sum over their excluded cells: phi's partner sums ("phi":
        E[theta]'s column sums less E[theta] at each excluded cell) or their rate ("rate")."""
        if kind == "phi":
            return _subtract_missing(q[0].mean, *work.missing_by_row, carry)
        return _excluded_rate_sum_from(q[0].mean, q[1].mean, *work.missing_by_row, carry)

    def vi_update_columns(self, q, columns, weights, totals, work, through_rows=None):
        """phi's update from the allocated totals ``columns`` = (n_vk (V, K),) and theta's row
        totals; returns the factors' ELBO terms. On a cluster's driver ``q[0]`` is a placeholder
        row and the sums over excluded cells come from ``through_rows(kind, start, factors)``."""
        theta, phiT = q
        (n_vk,) = columns
        theta_sum, gap, theta_elbo, moved = totals
        if weights == "arithmetic":
            gap = gap + allocation_gap(phiT, n_vk)
        old_elog = phiT.elog.copy()
        phi_elbo = np.zeros(phiT.n_rows)
        if through_rows is None:
            sides = (n_vk, theta.mean, theta_sum, *work.missing_by_column, work.stop)
            run_chunks(
                _vi_update_chunk, work.column_bounds, work.stop, phiT.arrays(), sides, (self.a0, self.b0), phi_elbo
            )
            excluded = _excluded_rate_sum(theta.mean, phiT.mean, *work.missing_by_row)
        else:
            partner = through_rows("phi", np.repeat(theta_sum[None, :], phiT.n_rows, axis=0), {})
            sides = (n_vk, partner, work.stop)
            run_chunks(
                _vi_update_rates_chunk,
                work.column_bounds,
                work.stop,
                phiT.arrays(),
                sides,
                (self.a0, self.b0),
                phi_elbo,
            )
            excluded = through_rows("rate", 0.0, {1: phiT})
        observed_rate = float(theta_sum @ column_sums(phiT.mean)) - excluded
        # the allocation q stays as allocated: its log-rate terms move with E[log phi]
        moved = moved + float(np.sum(n_vk * (phiT.elog - old_elog)))
        return moved - gap - observed_rate + theta_elbo + ordered_sum(phi_elbo)
