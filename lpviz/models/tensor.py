"""The tensor model: Bayesian Poisson CP factorization ``mu_ijt = sum_k a_ik b_jk c_tk``.

Schein, Paisley, Blei and Wallach (KDD 2015), for dyadic event counts such as
sender x recipient x month: Gamma priors (shape ``a0``, rate ``b0``) on every
factor entry, each count split over the K components in proportion to
``a_ik b_jk c_tk`` (the auxiliary allocation), and each mode's factor drawn
from its gamma conditional given the other two, mode by mode, exactly as the
matrix models do for their two factors (DESIGN.md 1e). Nothing private is
here: the noise, the latent true counts and the sparse step are per cell and
live in the methods, which see the tensor as the matrix of rows ``i`` and
columns ``j * T + t`` (:func:`lpviz.models.base.matrix_shape`); this model maps
a column back to ``(j, t)``.

Excluded cells (held out, or structural zeros of the data such as the self
loops of an email tensor) are left out of the likelihood: each mode's rate
sums are the product of the other modes' factor sums minus the excluded
cells' products, from the row lists of excluded cells.
"""

import math

import numpy as np
from numba import njit

from lpviz._parallel import ROWS_PER_STREAM, chunk_bounds, run_chunks
from lpviz._random import seed_state, seed_stream
from lpviz.collapsed import sample_poisson
from lpviz.models._kernels import (
    FAST_DOT,
    column_alias_tables,
    column_sums,
    draw_alias,
    draw_weighted,
    gamma_log_prior,
    grow,
    in_sorted,
    log_factorial,
    multinomial,
    ordered_sum,
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

# Units: each phase of an iteration draws from its own streams (as the matrix models').
UNIT_SWEEP = 0
UNIT_A = 1 << 40
UNIT_B = 2 << 40
UNIT_C = 3 << 40
UNIT_POISSON = 4 << 40
# The mode a factor update is for (the other two give its rates).
MODE_A, MODE_B, MODE_C = 0, 1, 2


# ---------------------------------------------------------------------------
# MCMC kernels: one chunk of stream blocks each
# ---------------------------------------------------------------------------


@njit(nogil=True, cache=True, fastmath=FAST_DOT, inline="always")
def _cell_weights(A, i, B, j, C, t, out):
    """``out[k] = a_ik b_jk c_tk``; returns their sum (the cell's rate)."""
    total = 0.0
    for k in range(A.shape[1]):
        w = A[i, k] * B[j, k] * C[t, k]
        out[k] = w
        total += w
    return total


@njit(nogil=True, cache=True, fastmath=FAST_DOT)
def _allocate_chunk(chunk, first, last, counts, factors, seeds, stats):
    """Split the counts of rows (first-mode indices) in blocks [first, last) over components.

    ``fastmath=FAST_DOT``: :func:`_cell_weights` is inlined as Numba IR and compiled with this
    kernel's flags, so only here do its products vectorise (as in the topic model's kernels).

    ``counts``: CSR (indptr, indices, values) of the cells to allocate, columns
    ``j * T + t``; ``factors``: (A, B, C); ``seeds``: (chain seed, iteration,
    stop flag, block offset: the global stream block of local row 0, for a chain whose
    rows are split over machines); ``stats``: (n_a, n_b parts, n_c parts): rows of n_a belong to the
    chunk, the parts are summed over chunks later.
    """
    indptr, indices, values = counts
    A, B, C = factors
    chain_seed, iteration, stop, block_offset = seeds
    n_a, n_b_parts, n_c_parts = stats
    n_b = n_b_parts[chunk]
    n_c = n_c_parts[chunk]
    n_rows, n_components = A.shape
    n_times = C.shape[0]
    weights = np.empty(n_components)
    drawn = np.zeros(n_components, dtype=np.int64)
    state = np.empty(4, dtype=np.uint64)
    for block in range(first, last):
        if stop[0]:
            return
        seed_state(state, chain_seed, iteration, UNIT_SWEEP + block_offset + block)
        for i in range(block * ROWS_PER_STREAM, min(n_rows, (block + 1) * ROWS_PER_STREAM)):
            for idx in range(indptr[i], indptr[i + 1]):
                y = values[idx]
                if y <= 0:
                    continue
                j, t = divmod(indices[idx], n_times)
                total = _cell_weights(A, i, B, j, C, t, weights)
                if y == 1:  # most cells: one walk, no multinomial
                    k = draw_weighted(weights, total, state)
                    n_a[i, k] += 1
                    n_b[j, k] += 1
                    n_c[t, k] += 1
                    continue
                multinomial(y, weights, total, state, drawn)
                for k in range(n_components):
                    if drawn[k]:
                        n_a[i, k] += drawn[k]
                        n_b[j, k] += drawn[k]
                        n_c[t, k] += drawn[k]


@njit(nogil=True, cache=True)
def _excluded_products(mode, factors, missing_indptr, missing_indices, out):
    """``out[r, k]`` = sum over the excluded cells whose index in ``mode`` is r of the product of
    the other two modes' factors (what the rate sums of row r of that mode leave out); returns
    the sum over the excluded cells of their rates ``a_ik b_jk c_tk`` summed over k."""
    out[:] = 0.0
    return _excluded_products_from(mode, factors, missing_indptr, missing_indices, out, 0.0)


@njit(nogil=True, cache=True)
def _excluded_products_from(mode, factors, missing_indptr, missing_indices, out, start):
    """:func:`_excluded_products` continued: ``out`` and the total (from ``start``) are added to
    row by row, so consecutive row pieces chain exactly (lpviz.distributed)."""
    A, B, C = factors
    n_times = C.shape[0]
    total = start
    for i in range(A.shape[0]):
        for idx in range(missing_indptr[i], missing_indptr[i + 1]):
            j, t = divmod(missing_indices[idx], n_times)
            for k in range(A.shape[1]):
                a, b, c = A[i, k], B[j, k], C[t, k]
                total += a * b * c
                if mode == MODE_A:
                    out[i, k] += b * c
                elif mode == MODE_B:
                    out[j, k] += a * c
                else:
                    out[t, k] += a * b
    return total


@njit(nogil=True, cache=True)
def _gamma_rows_chunk(chunk, first, last, factor, counts, rates, prior, seeds):
    """Draw rows in blocks [first, last) of one factor from their gamma conditional:
    ``factor[r, k] ~ Gamma(a0 + counts[r, k], b0 + full[k] - excluded[r, k])``.

    ``rates``: (full, excluded): the rate sum over every cell and the excluded
    cells' part of it; ``prior``: (a0, b0); ``seeds``: (chain seed, iteration, unit, stop flag).
    """
    full, excluded = rates
    a0, b0 = prior
    chain_seed, iteration, unit, stop = seeds
    n_rows, n_components = factor.shape
    for block in range(first, last):
        if stop[0]:
            return
        seed_stream(chain_seed, iteration, unit + block)
        for r in range(block * ROWS_PER_STREAM, min(n_rows, (block + 1) * ROWS_PER_STREAM)):
            for k in range(n_components):
                rate = max(full[k] - excluded[r, k], 0.0)  # rounding when almost every cell is excluded
                factor[r, k] = np.random.gamma(a0 + counts[r, k], 1.0 / (b0 + rate))


@njit(nogil=True, cache=True, fastmath=FAST_DOT)
def _loglik_chunk(chunk, first, last, counts, factors, row_log):
    """``row_log[i] = sum over row i's cells of y log mu_ijt - log y!`` for rows in blocks [first, last)
    (``fastmath=FAST_DOT`` for :func:`_cell_weights`, as in :func:`_allocate_chunk`)."""
    indptr, indices, values = counts
    A, B, C = factors
    n_times = C.shape[0]
    weights = np.empty(A.shape[1])
    for i in range(first * ROWS_PER_STREAM, min(A.shape[0], last * ROWS_PER_STREAM)):
        total = 0.0
        for idx in range(indptr[i], indptr[i + 1]):
            y = values[idx]
            if y > 0:
                j, t = divmod(indices[idx], n_times)
                total += y * math.log(_cell_weights(A, i, B, j, C, t, weights)) - log_factorial(y)
        row_log[i] = total


@njit(nogil=True, cache=True)
def _poisson_chunk(chunk, first, last, rows, factors, tables, seeds, stats):
    """Draw ``y_ijt ~ Poisson(scale_i mu_ijt)`` at the observed cells with ``ytil <= 0`` of the
    used rows without visiting them: per component ``T_ik ~ Poisson(scale_i a_ik sum_j b_jk
    sum_t c_tk)`` tokens, each placed at ``j`` with probability ``b_jk / sum_j b_jk`` and at
    ``t`` with probability ``c_tk / sum_t c_tk`` (two alias tables) and dropped when its cell
    is not one of those (``ytil > 0`` or excluded): Poisson thinning, as in the matrix
    models' steps.

    ``rows``: (use_row, noised counts (matrix), excluded indptr, excluded indices (sorted per
    row), scale); ``tables``: the alias tables of B and of C ((column sums, probability,
    alias) each); ``stats``: (n_a, n_b parts, n_c parts). Returns the tokens' (rows, columns).
    """
    use_row, Y, excluded_indptr, excluded_indices, scale = rows
    A, B, C = factors
    (b_sum, b_probability, b_alias), (c_sum, c_probability, c_alias) = tables
    chain_seed, iteration, stop, block_offset = seeds
    n_a, n_b_parts, n_c_parts = stats
    n_b = n_b_parts[chunk]
    n_c = n_c_parts[chunk]
    n_rows, n_components = A.shape
    n_times = C.shape[0]
    state = np.empty(4, dtype=np.uint64)
    token_rows = np.empty(64, dtype=np.int64)
    token_cols = np.empty(64, dtype=np.int64)
    n_tokens = 0
    for block in range(first, last):
        if stop[0]:
            break
        seed_state(state, chain_seed, iteration, UNIT_POISSON + block_offset + block)
        for i in range(block * ROWS_PER_STREAM, min(n_rows, (block + 1) * ROWS_PER_STREAM)):
            if not use_row[i]:
                continue
            start, end = excluded_indptr[i], excluded_indptr[i + 1]
            for k in range(n_components):
                tokens = sample_poisson(scale[i] * A[i, k] * b_sum[k] * c_sum[k], state)
                if tokens == 0:
                    continue
                token_rows = grow(token_rows, n_tokens + tokens)
                token_cols = grow(token_cols, n_tokens + tokens)
                for _ in range(tokens):
                    j = draw_alias(b_probability, b_alias, k, state)
                    t = draw_alias(c_probability, c_alias, k, state)
                    column = j * n_times + t
                    if Y[i, column] > 0 or (end > start and in_sorted(excluded_indices, start, end, column)):
                        continue
                    n_a[i, k] += 1
                    n_b[j, k] += 1
                    n_c[t, k] += 1
                    token_rows[n_tokens] = i
                    token_cols[n_tokens] = column
                    n_tokens += 1
    return token_rows[:n_tokens], token_cols[:n_tokens]


# ---------------------------------------------------------------------------
# Variational inference (CAVI) kernels
# ---------------------------------------------------------------------------


@njit(nogil=True, cache=True, fastmath=FAST_DOT)
def _vi_allocate_chunk(chunk, first, last, counts, geo, stats, row_log, stop):
    """Expected allocation of the (expected) counts of rows in blocks [first, last):
    ``E[y_ijtk] = y G[a_ik] G[b_jk] G[c_tk] / W_ijt``, ``W_ijt = sum_k G[a_ik] G[b_jk] G[c_tk]``.

    ``stats`` = (R (I, K), N_b parts (chunks, J, K, 2), N_c parts (chunks, T, K, 2) int64) get
    ``R_i += (y / W) G[b_j] G[c_t]`` (then ``n_a = G[a] R``: a row's own sum) and ``N_b,j``,
    ``N_c,t += E[y_ijtk]`` in fixed point (:func:`~lpviz.models._variational.add_fixed`: sums
    over rows exact in any order). ``row_log[i] = sum y log W``.
    """
    indptr, indices, values = counts
    geo_a, geo_b, geo_c = geo
    row_sums, b_parts, c_parts = stats
    b_part = b_parts[chunk]
    c_part = c_parts[chunk]
    n_rows, n_components = geo_a.shape
    n_times = geo_c.shape[0]
    row_sum = np.empty(n_components)
    for i in range(first * ROWS_PER_STREAM, min(n_rows, last * ROWS_PER_STREAM)):
        if stop[0]:
            return
        row_sum[:] = 0.0
        total = 0.0
        for idx in range(indptr[i], indptr[i + 1]):
            y = values[idx]
            if not y > 0.0:
                continue
            j, t = divmod(indices[idx], n_times)
            weight = 0.0
            for k in range(n_components):
                weight += geo_a[i, k] * geo_b[j, k] * geo_c[t, k]
            if not weight > 0.0:  # every G underflowed: the cell has no rate to share
                continue
            scale = y / weight
            for k in range(n_components):
                share = scale * geo_b[j, k] * geo_c[t, k]
                row_sum[k] += share
                expected = share * geo_a[i, k]  # E[y_ijtk]: at most y, its sum over rows in fixed point
                add_fixed(b_part[j, k], expected)
                add_fixed(c_part[t, k], expected)
            total += y * math.log(weight)
        row_sums[i] = row_sum
        row_log[i] = total


@njit(nogil=True, cache=True, fastmath=FAST_DOT)
def _vi_moments_chunk(chunk, first, last, a, b, c, out):
    """Moments of ``mu_ijt = sum_k a_ik b_jk c_tk`` under mean-field q at every cell of the rows
    in stream blocks [first, last): ``E[mu]``, ``V[mu]`` and ``sum_k G[a] G[b] G[c]``. Per
    component ``V[abc] = V[a] E2[b] E2[c] + E[a]^2 V[b] E2[c] + E[a]^2 E[b]^2 V[c]`` (a
    telescoped ``E2 E2 E2 - E^2 E^2 E^2``: no cancellation), summed over the independent
    components.

    ``a``, ``b``, ``c``: (E, V, G) of each factor; ``out``: (mean, variance, G sum) blocks of
    matrix rows from ``origin`` on, origin, stop flag.
    """
    mean_a, var_a, geo_a = a
    mean_b, var_b, geo_b = b
    mean_c, var_c, geo_c = c
    mean_out, var_out, weight_out, origin, stop = out
    n_rows, n_components = mean_a.shape
    n_second, n_times = mean_b.shape[0], mean_c.shape[0]
    square_a = np.empty(n_components)
    pair_mean = np.empty(n_components)
    pair_var = np.empty(n_components)  # V[a] E2[b] + E[a]^2 V[b]
    pair_square = np.empty(n_components)  # (E[a] E[b])^2
    pair_geo = np.empty(n_components)
    for i in range(first * ROWS_PER_STREAM, min(n_rows, last * ROWS_PER_STREAM)):
        if stop[0]:
            return
        r = i - origin
        for k in range(n_components):
            square_a[k] = mean_a[i, k] * mean_a[i, k]
        for j in range(n_second):
            for k in range(n_components):
                second_b = var_b[j, k] + mean_b[j, k] * mean_b[j, k]
                pair_mean[k] = mean_a[i, k] * mean_b[j, k]
                pair_var[k] = var_a[i, k] * second_b + square_a[k] * var_b[j, k]
                pair_square[k] = pair_mean[k] * pair_mean[k]
                pair_geo[k] = geo_a[i, k] * geo_b[j, k]
            for t in range(n_times):
                mean = 0.0
                variance = 0.0
                weight = 0.0
                for k in range(n_components):
                    m_c = mean_c[t, k]
                    v_c = var_c[t, k]
                    mean += pair_mean[k] * m_c
                    variance += pair_var[k] * (v_c + m_c * m_c) + pair_square[k] * v_c
                    weight += pair_geo[k] * geo_c[t, k]
                column = j * n_times + t
                mean_out[r, column] = mean
                var_out[r, column] = variance
                weight_out[r, column] = weight


@njit(nogil=True, cache=True)
def _vi_rows_chunk(chunk, first, last, factor, counts, rates, prior, row_elbo):
    """CAVI update of rows in blocks [first, last) of one factor's Gamma q:
    ``shape_rk = a0 + n_rk``, ``rate_rk = b0 + full[k] - excluded[r, k]`` (the other modes'
    expected factor sums over the observed cells); ``row_elbo[r]``: the row's prior + entropy
    terms. ``factor``: (shape, rate, mean, var, geo, elog); ``rates``: (full, excluded, stop flag).
    """
    shape, rate = factor[0], factor[1]
    full, excluded, stop = rates
    a0, b0 = prior
    n_rows, n_components = shape.shape
    for r in range(first * ROWS_PER_STREAM, min(n_rows, last * ROWS_PER_STREAM)):
        if stop[0]:
            return
        for k in range(n_components):
            shape[r, k] = a0 + counts[r, k]
            rate[r, k] = b0 + max(full[k] - excluded[r, k], 0.0)
        row_elbo[r] = refresh_row(factor, r, prior)


# ---------------------------------------------------------------------------
# The model
# ---------------------------------------------------------------------------


def _other_sums(factors, mode):
    """``prod over the other two modes of their factors' column sums`` (K,): a mode's rate sum
    over every cell."""
    sums = [column_sums(f) for m, f in enumerate(factors) if m != mode]
    return sums[0] * sums[1]


class TensorModel(RowTotals, Model):
    """Bayesian Poisson CP factorization of a three-way count array (Schein et al. 2015).

    ``mu_ijt = sum_k a_ik b_jk c_tk`` with ``a`` (I, K), ``b`` (J, K), ``c`` (T, K):
    for an email tensor, senders, recipients and months. Factor dict keys ``a``, ``b``,
    ``c``; the views read each component's profile over the last mode (``c``, e.g.
    months) and its first-by-second-mode map ``a_k b_k^T`` (sender x recipient).
    """

    name = "tensor"
    label = "tensor model (Poisson CP factorization)"
    component_name = "component"
    factor_names = ("a", "b", "c")
    kinds = ("tensor",)
    default_for = ("tensor",)
    inferences = ("mcmc", "vi")
    shows = ("profiles", "pair_maps")

    # -- shapes and memory --------------------------------------------------------
    def check_shape(self, shape):
        if len(shape) != 3:
            raise ValueError(
                f"model='tensor' fits a three-way array (e.g. sender x recipient x month), got shape "
                f"{tuple(shape)}; for a matrix use model='topics' or model='blocks'"
                + ("; reshape a higher-order array by merging modes" if len(shape) > 3 else "")
            )

    def factor_bytes(self, shape):
        return 8 * self.n_components * sum(int(n) for n in shape)

    def state_bytes(self, shape):
        n_rows, n_second, n_times = (int(n) for n in shape)
        # factors, n_a, per-chunk parts of n_b and n_c (up to 8 chunks), and the update's rate arrays
        return 8 * self.n_components * (3 * (n_rows + n_second + n_times) + 8 * (n_second + n_times))

    # -- state ----------------------------------------------------------------------
    def start_level(self, mean_count):
        """The scale of the start's gamma(1) draws: their triple products then match the mean count."""
        return (max(mean_count, 1e-2) / self.n_components) ** (1.0 / 3.0)

    def init_state(self, shape, mean_count, rng):
        K = self.n_components
        level = self.start_level(mean_count)
        # gamma(1) draws whose products match the mean count: early sweeps allocate sensibly
        return tuple(rng.gamma(1.0, level, (int(n), K)) for n in shape)

    def factors(self, state):
        return {name: factor.copy() for name, factor in zip(self.factor_names, state, strict=True)}

    def set_factors(self, state, factors):
        for name, factor in zip(self.factor_names, state, strict=True):
            factor[...] = factors[name]

    # -- rates -------------------------------------------------------------------------
    def low_rank(self, factors):
        a, b, c = (np.asarray(factors[name]) for name in self.factor_names)
        return a, (b[:, None, :] * c[None, :, :]).reshape(-1, a.shape[1])  # Khatri-Rao: column j * T + t

    def rates(self, factors):
        a, b, c = (np.asarray(factors[name], dtype=np.float64) for name in self.factor_names)
        return np.matmul(a[:, None, :] * b[None, :, :], c.T)

    def rate_rows(self, state, rows):
        A, B, C = state
        # one matrix product with the Khatri-Rao columns (J T x K), as the topic model's theta @ phi
        return A[rows] @ (B[:, None, :] * C[None, :, :]).reshape(-1, A.shape[1]).T

    def profiles(self, factors):
        return np.asarray(factors["c"])

    def pair_maps(self, factors, component):
        return np.outer(factors["a"][:, component], factors["b"][:, component])

    # -- kernels ------------------------------------------------------------------------
    def new_stats(self, state, work):
        A, B, C = state
        K, n_chunks = self.n_components, len(work.bounds)
        return (
            np.zeros((A.shape[0], K), dtype=np.int64),
            np.zeros((n_chunks, B.shape[0], K), dtype=np.int64),
            np.zeros((n_chunks, C.shape[0], K), dtype=np.int64),
        )

    def allocate(self, state, counts, stats, work, iteration):
        run_chunks(_allocate_chunk, work.bounds, work.stop, counts, state, self._seeds(work, iteration), stats)

    @staticmethod
    def _seeds(work, iteration):
        return (work.chain_seed, iteration, work.stop, work.block_offset)

    def poisson_allocate(self, state, rows, stats, work, iteration):
        tables = (column_alias_tables(state[1]), column_alias_tables(state[2]))
        tokens = run_chunks(
            _poisson_chunk, work.bounds, work.stop, rows, state, tables, self._seeds(work, iteration), stats
        )
        return np.concatenate([t[0] for t in tokens]), np.concatenate([t[1] for t in tokens])

    def _mode_bounds(self, state, mode, work):
        """The chunks of a mode's rows: the chain's row chunks for the first mode."""
        if mode == MODE_A:
            return work.bounds
        n_cells = state[0].shape[0] * state[1].shape[0] * state[2].shape[0]
        return chunk_bounds(state[mode].shape[0], n_cells, work.parallel)

    def update(self, state, stats, work, iteration):
        self.update_rows(state, stats[0], work, iteration)
        self.update_columns(state, self.column_counts(stats), column_sums(state[0]), work, iteration)

    # The update in two halves, for a chain whose first-mode rows live on several machines
    # (lpviz.distributed): the first mode's half runs where its rows are; the other modes' half
    # needs over those rows only the allocated counts and the first factor's column sums.
    def _draw_mode(self, state, mode, unit, counts, full, work, iteration, excluded=None):
        if excluded is None:
            excluded = np.empty_like(state[mode])
            _excluded_products(mode, state, *work.missing_by_row, excluded)
        run_chunks(
            _gamma_rows_chunk,
            self._mode_bounds(state, mode, work),
            work.stop,
            state[mode],
            counts,
            (full, excluded),
            (self.a0, self.b0),
            (work.chain_seed, iteration, unit, work.stop),
        )

    def update_rows(self, state, n_a, work, iteration):
        """Draw the first mode's factor (its rows: stream blocks from ``work.block_offset`` on)."""
        self._draw_mode(state, MODE_A, UNIT_A + work.block_offset, n_a, _other_sums(state, MODE_A), work, iteration)

    def column_counts(self, stats):
        """The allocations the other modes' draws need, summed over the row chunks (integers)."""
        return (stats[1].sum(axis=0), stats[2].sum(axis=0))

    def update_columns(self, state, column_counts, row_sum, work, iteration):
        """Draw the second, then the third mode's factor given their allocations ``column_counts``
        (summed over every row) and the first factor's column sums ``row_sum`` (K,), by
        :func:`column_sums` over every row in order (what :func:`_other_sums` computes in one process)."""
        n_b, n_c = column_counts
        self._draw_mode(state, MODE_B, UNIT_B, n_b, row_sum * column_sums(state[MODE_C]), work, iteration)
        self._draw_mode(state, MODE_C, UNIT_C, n_c, row_sum * column_sums(state[MODE_B]), work, iteration)

    # Excluded cells (structural zeros such as self loops, held-out cells) on a cluster: the sums over
    # the excluded cells that b's and c's draws and the log likelihood need, each continued over the
    # first mode's rows in order (lpviz.distributed).
    @staticmethod
    def rows_pass(kind, state, work, carry):
        """Continue over these rows the excluded part of mode ``kind``'s ("b" or "c") rate sums."""
        _excluded_products_from(MODE_B if kind == "b" else MODE_C, state, *work.missing_by_row, carry, 0.0)
        return carry

    @staticmethod
    def excluded_rate_from(state, work, carry):
        """The rate summed over these rows' excluded cells, continued from ``carry``."""
        scratch = np.zeros_like(state[MODE_A])
        return _excluded_products_from(MODE_A, state, *work.missing_by_row, scratch, carry)

    def update_columns_excluded(self, state, column_counts, row_sum, work, iteration, through_rows):
        """:meth:`update_columns` of data with excluded cells, their sums over the rows continued
        through them by ``through_rows(kind, start, factors)`` (``factors``: the shared factors
        drawn since, by mode)."""
        n_b, n_c = column_counts
        excluded = through_rows("b", np.zeros_like(state[MODE_B]), {})
        self._draw_mode(state, MODE_B, UNIT_B, n_b, row_sum * column_sums(state[MODE_C]), work, iteration, excluded)
        excluded = through_rows("c", np.zeros_like(state[MODE_C]), {MODE_B: state[MODE_B]})
        self._draw_mode(state, MODE_C, UNIT_C, n_c, row_sum * column_sums(state[MODE_B]), work, iteration, excluded)

    def row_loglik(self, state, counts, work):
        """Per first-mode row, ``sum over its cells of y log mu - log y!`` (the rate sum is subtracted once)."""
        row_log = np.zeros(state[0].shape[0])
        run_chunks(_loglik_chunk, work.bounds, work.stop, counts, state, row_log)
        return row_log

    @staticmethod
    def observed_rate_of_sums(row_sum, B, C):
        """:meth:`_observed_rate` of data without excluded cells, from the first factor's column sums."""
        return float(row_sum @ (column_sums(B) * column_sums(C)))

    def log_prior(self, state):
        return sum(gamma_log_prior(factor, self.a0, self.b0) for factor in state)

    def _observed_rate(self, factors, work):
        """Sum of the rates over the observed cells."""
        scratch = np.empty_like(factors[0])
        excluded_rate = _excluded_products(MODE_A, factors, *work.missing_by_row, scratch)
        full = float(column_sums(factors[0]) @ _other_sums(factors, MODE_A))
        return full - excluded_rate

    def count_loglik(self, state, counts, work):
        return ordered_sum(self.row_loglik(state, counts, work)) - self._observed_rate(state, work)

    # -- variational inference (CAVI, lpviz.vi) --------------------------------------
    # q is (a, b, c): three GammaFactor.
    def vi_init(self, shape, mean_count, rng):
        prior = (self.a0, self.b0)
        return tuple(GammaFactor.around(f, VI_INIT_SHAPE, prior) for f in self.init_state(shape, mean_count, rng))

    def vi_factors(self, q):
        return {name: factor.mean.copy() for name, factor in zip(self.factor_names, q, strict=True)}

    def vi_moments(self, q, start, stop, bounds, work):
        a, b, c = q
        shape = (stop - start, b.n_rows * c.n_rows)
        mean_mu, var_mu, weight_mu = np.empty(shape), np.empty(shape), np.empty(shape)
        run_chunks(
            _vi_moments_chunk,
            bounds,
            work.stop,
            (a.mean, a.var, a.geo),
            (b.mean, b.var, b.geo),
            (c.mean, c.var, c.geo),
            (mean_mu, var_mu, weight_mu, start, work.stop),
        )
        return mean_mu, var_mu, weight_mu

    def vi_rates(self, q, start, stop, weights):
        a, b, c = (weights_of(factor, weights) for factor in q)
        rows, columns = a[start:stop], (b[:, None, :] * c[None, :, :]).reshape(-1, a.shape[1])
        if rows.shape[0] == 1:  # one row alone goes through BLAS's matrix-vector path, whose rounding differs
            return (np.vstack([rows, rows]) @ columns.T)[:1]
        return rows @ columns.T

    def vi_new_stats(self, q, work):
        a, b, c = q
        K, n_chunks = self.n_components, len(work.bounds)
        sums = (
            np.zeros((a.n_rows, K)),
            np.zeros((n_chunks, b.n_rows, K, 2), dtype=np.int64),
            np.zeros((n_chunks, c.n_rows, K, 2), dtype=np.int64),
        )
        return {"sums": sums, "weights": "geometric"}

    def vi_allocate(self, q, counts, stats, work, weights="geometric"):
        stats["weights"] = weights
        # each mode's index totals of the counts bound its fixed-point sums: refuse what would overflow
        n_times = q[2].n_rows
        j, t = np.divmod(counts[1], n_times)
        totals = (np.bincount(j, counts[2], q[1].n_rows), np.bincount(t, counts[2], n_times))
        stats["bound"] = check_fixed_bound(float(max(total.max(initial=0.0) for total in totals)))
        row_log = np.zeros(q[0].n_rows)
        factors = tuple(weights_of(factor, weights) for factor in q)
        run_chunks(_vi_allocate_chunk, work.bounds, work.stop, counts, factors, stats["sums"], row_log, work.stop)
        return row_log

    def vi_update(self, q, stats, work):
        row_sums, b_parts, c_parts = stats["sums"]
        rows = self.vi_update_rows(q, row_sums, stats["weights"], work)
        totals = self.vi_row_totals(q, rows, self.vi_no_totals())
        return self.vi_update_columns(q, (fixed_total(b_parts), fixed_total(c_parts)), stats["weights"], totals, work)

    # The update in two halves, for a fit whose first mode's rows live on several machines
    # (lpviz.distributed): a's where its rows are, their totals handed on in row order, b's and c's
    # on the driver.
    def vi_update_rows(self, q, row_sums, weights, work):
        """a's update (at b's and c's q); returns its rows' terms (allocation gap, ELBO, moved)."""
        a = q[0]
        n_a = weights_of(a, weights) * row_sums
        # the allocation's distance from the optimum, at the q it used
        gap = allocation_gap_rows(a, n_a) if weights == "arithmetic" else np.zeros(a.n_rows)
        old_elog = a.elog.copy()
        means = tuple(factor.mean for factor in q)
        excluded = np.empty_like(means[MODE_A])
        _excluded_products(MODE_A, means, *work.missing_by_row, excluded)
        row_elbo = np.zeros(a.n_rows)
        run_chunks(
            _vi_rows_chunk,
            work.bounds,
            work.stop,
            a.arrays(),
            n_a,
            (_other_sums(means, MODE_A), excluded, work.stop),
            (self.a0, self.b0),
            row_elbo,
        )
        # the allocation q stays as allocated: its log-rate terms move with E[log a]
        return gap, row_elbo, row_totals(n_a * (a.elog - old_elog))

    def vi_rows_pass(self, kind, q, work, carry):
        """Continue over these rows a sum over their excluded cells: the excluded part of b's or c's
        rate sums ("b", "c") or their rate ("rate")."""
        means = tuple(factor.mean for factor in q)
        if kind == "rate":
            return _excluded_products_from(MODE_A, means, *work.missing_by_row, np.zeros_like(means[0]), carry)
        _excluded_products_from(MODE_B if kind == "b" else MODE_C, means, *work.missing_by_row, carry, 0.0)
        return carry

    def vi_update_columns(self, q, columns, weights, totals, work, through_rows=None):
        """b's and c's updates from their allocated totals ``columns`` = (n_b, n_c) and a's row
        totals; returns the factors' ELBO terms. On a cluster's driver ``q[0]`` is a placeholder
        row and the sums over excluded cells come from ``through_rows(kind, start, factors)``."""
        a_sum, gap, elbo, moved = totals
        expected = (None, *columns)
        if weights == "arithmetic":
            for mode in (MODE_B, MODE_C):
                gap = gap + allocation_gap(q[mode], expected[mode])
        old_elog = tuple(factor.elog.copy() for factor in q)
        prior = (self.a0, self.b0)
        means = tuple(factor.mean for factor in q)  # updated in place, mode by mode
        for mode in (MODE_B, MODE_C):
            if through_rows is None:
                excluded = np.empty_like(means[mode])
                _excluded_products(mode, means, *work.missing_by_row, excluded)
            else:  # c's after b's update: the workers take b's new q first
                drawn = {} if mode == MODE_B else {MODE_B: q[MODE_B]}
                excluded = through_rows("b" if mode == MODE_B else "c", np.zeros_like(means[mode]), drawn)
            row_elbo = np.zeros(q[mode].n_rows)
            other = column_sums(means[MODE_C if mode == MODE_B else MODE_B])
            run_chunks(
                _vi_rows_chunk,
                self._mode_bounds(means, mode, work),
                work.stop,
                q[mode].arrays(),
                expected[mode],
                (a_sum * other, excluded, work.stop),
                prior,
                row_elbo,
            )
            elbo += ordered_sum(row_elbo)
        # the allocation q stays as allocated: its log-rate terms move with each E[log factor]
        for mode in (MODE_B, MODE_C):
            moved = moved + float(np.sum(expected[mode] * (q[mode].elog - old_elog[mode])))
        if through_rows is None:
            excluded_rate = _excluded_products(MODE_A, means, *work.missing_by_row, np.empty_like(means[MODE_A]))
        else:
            excluded_rate = through_rows("rate", 0.0, {MODE_B: q[MODE_B], MODE_C: q[MODE_C]})
        observed_rate = float(a_sum @ _other_sums(means, MODE_A)) - excluded_rate
        return moved - gap - observed_rate + elbo
