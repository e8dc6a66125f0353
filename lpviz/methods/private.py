"""The private method: the true counts are latent, drawn given the noised ones each sweep.

``sampler="bessel"`` is the paper's route (Schein et al., ICML 2019; DESIGN.md
section 1). For one observed cell with noised count ``ytil``, current rate
``mu`` and noise rates ``lambda+``, ``lambda-``:
``m ~ Bessel(|ytil|, 2 sqrt((lambda+ + mu) lambda-))``; split into
``y+ = y + g+`` and ``g-``; ``y ~ Binomial(y+, mu / (mu + lambda+))``; then
``lambda* ~ Gamma(1 + g*, rate 1/alpha)`` -- the posterior of the exponential
prior with rate ``(1-alpha)/alpha`` (the ICML paper's ``alpha/(1-alpha) + 1``
is a typo). ``alpha`` is per row (heterogeneous noise).

``sampler="collapsed"`` draws the true count from its exact conditional with
``lambda``, the Bessel variable and the split integrated out (DESIGN.md 1b,
:mod:`lpviz.collapsed`): ``p(y | ytil, mu, alpha) ∝ Pois(y; mu) alpha^|ytil - y|``.
No noise rates or Bessel draws are kept. Its *sparse step* (``sparse_step="auto"``)
handles the cells of a row with ``ytil <= 0`` (where ``y ~ Poisson(alpha mu)``)
without visiting them: the model draws Poisson tokens over the whole row per
component and drops those that land on other cells (Poisson thinning,
:meth:`~lpviz.models.base.Model` ``poisson_allocate``), so a row costs its
``ytil > 0`` cells and a few draws per component. Which rows take it is the rule
at :data:`SPARSE_MAX_SKIP_SHARE`; other rows, and every row with
``sparse_step="off"``, run the dense loop over their cells. Either way the rates
come a block of rows at a time from the model's dense product.

Each sweep records, per row, the noise term ``log Geom2(ytil - y; alpha)`` of
the log joint (``g`` and ``lambda`` integrated out exactly) and the marginal
log likelihood ``log p(ytil | mu, alpha)`` of the rates the sweep started from.

Variational inference (:mod:`lpviz.vi`, the VI paper's CAVI, DESIGN.md 1c):
per cell ``q(lambda+-) = Gamma(E[g+-] + 1, rate 1/alpha)`` and ``q(m)`` a
point mass at the mode (``bessel_point="mode"``, the paper's) or the mean
(``"mean"``) of ``Bessel(|ytil|, 2 sqrt(G[lambda-] G[lambda+ + mu]))``; the
expected true counts ``E[y]`` go to the model's expected allocation
(:func:`_vi_private_chunk`). The fit keeps ``E[g+]``, ``E[g-]`` and
``E[log lambda+]`` per cell, no draws.
"""

import math

import numpy as np
from numba import njit
from scipy import special

from lpviz._parallel import ROWS_PER_STREAM, chunk_bounds, main_thread_kernel, run_chunks, submit_call, submit_chunks
from lpviz._random import seed_state, seed_stream, uniform
from lpviz.bessel import mean_nb, mode_nb, sample_stream
from lpviz.collapsed import (
    add_marginal_factor,
    log_marginal_nb,
    sample_poisson,
    sample_true_count_and_marginal_parts,
)
from lpviz.methods.base import Method, Prepared, mean_count_of
from lpviz.models._kernels import binomial, ordered_sum, row_sum, standard_gamma
from lpviz.models._variational import (
    collapsed_vi_chunk,
    digamma_plus_one,
    geo_plus_one,
    lgamma_digamma_plus_one,
    lgamma_plus_one,
    positive_csr_float,
)
from lpviz.release import smallest_int_dtype

UNIT_LATENT = 5 << 40
# A row takes the sparse step when at most this share of its cells has a
# positive noised count or is excluded. A sparse row costs its ytil > 0 cells,
# a pass summing its rates and a few Poisson draws per component plus the
# thinned tokens (about alpha times the row's rate); a dense row draws every
# cell, a Poisson(alpha mu) draw at each zero cell. Measured at 1000 x 1000,
# K = 50 (ms per iteration, every row dense / every row sparse): Enron-like
# counts 31.6 / 21.8 at eps/N = 1 (28% of cells positive), 29.5 / 18.0 at 3;
# dense synthetic counts 98.8 / 87.5 at eps/N = 1 (45%), 84.2 / 75.0 at 3,
# 99.9 / 102.7 at 0.5 (58%): the sparse step wins up to about half.
SPARSE_MAX_SKIP_SHARE = 0.5
# Rows narrower than this take the dense loop whatever their share: skipping a few cells saves less
# than the sparse step's own cost (alias tables, a Poisson draw per component, merging the tokens).
SPARSE_MIN_COLUMNS = 32
# Rows of rates computed at once (a dense block of rates of at most this many cells).
BLOCK_CELLS = 1 << 22
# The CAVI step holds four dense blocks (E[mu], V[mu], G products, E[y]) of at most this many cells.
VI_BLOCK_CELLS = 1 << 20
# Below these sizes the cheap exact construction beats numba's generic sampler.
_SMALL_GAMMA_SHAPE = 12


# ---------------------------------------------------------------------------
# Per-cell steps (the Bessel route)
# ---------------------------------------------------------------------------


@njit(nogil=True, cache=True, inline="always")
def gamma_integer_shape(shape, scale, state):
    """Gamma(shape, scale) for integer shape >= 1: ``-log`` of a product of
    uniforms for the small shapes the noise rates meet (exact, one log)."""
    if shape <= _SMALL_GAMMA_SHAPE:
        product = 1.0
        for _ in range(shape):
            product *= 1.0 - uniform(state)  # in (0, 1]: log stays finite
        return -scale * math.log(product)
    return scale * standard_gamma(float(shape), state)


@njit(nogil=True, cache=True, inline="always")
def sample_true_count(ytil, mu, lambda_plus, lambda_minus, state):
    """Steps 1-3 of the Bessel route for one cell: ``(y, g_plus, g_minus, m)``.

    An exact draw of the true count ``y`` and the noise parts ``g+``, ``g-``
    from ``p(y, g+, g- | ytil, mu, lambda+, lambda-)`` where
    ``ytil = y + g+ - g-``, ``y ~ Pois(mu)``, ``g* ~ Pois(lambda*)``; ``m`` is
    the Bessel draw ``min(y + g+, g-)``.
    """
    # Bessel(|ytil|, a) with a^2/4 = (lambda+ + mu) lambda-.
    m = sample_stream(float(abs(ytil)), (lambda_plus + mu) * lambda_minus, state)
    if ytil <= 0:
        y_plus = m
        g_minus = m - ytil
    else:
        g_minus = m
        y_plus = m + ytil
    y = binomial(y_plus, mu / (mu + lambda_plus), state) if mu > 0.0 else 0
    return y, y_plus - y, g_minus, m


@njit(nogil=True, cache=True, inline="always")
def draw_noise_rates(g_plus, g_minus, posterior_scale, state):
    """Step 4: ``lambda* ~ Gamma(1 + g*, scale posterior_scale)`` (scale alpha:
    rate 1/alpha), the posterior of the Exp(rate (1-alpha)/alpha) prior.

    When ``g+ + g- <= 1`` (about two cells in three) both come from one log:
    for independent ``X ~ Gamma(a)``, ``Z ~ Gamma(b)`` (one scale),
    ``S = X + Z ~ Gamma(a + b)`` and ``B = X / S ~ Beta(a, b)`` are
    independent, so ``(S B, S (1 - B))`` has exactly the law of ``(X, Z)``.
    """
    n_extra = g_plus + g_minus
    if n_extra <= 1:
        product = (1.0 - uniform(state)) * (1.0 - uniform(state))  # in (0, 1]
        if n_extra == 1:
            product *= 1.0 - uniform(state)
        total = -posterior_scale * math.log(product)
        share = uniform(state)
        if n_extra == 1:
            other = uniform(state)
            share = max(share, other) if g_plus == 1 else min(share, other)
        return total * share, total * (1.0 - share)
    return (
        gamma_integer_shape(1 + g_plus, posterior_scale, state),
        gamma_integer_shape(1 + g_minus, posterior_scale, state),
    )


@njit(nogil=True, cache=True)
def geometric_log_lik(n_cells, total_size, alpha):
    """Sum of ``log Geom2(tau; alpha)`` over ``n_cells`` noise values whose
    absolute values sum to ``total_size``."""
    if n_cells == 0:
        return 0.0
    return n_cells * math.log((1.0 - alpha) / (1.0 + alpha)) + total_size * math.log(alpha)


@njit(nogil=True, cache=True)
def _bessel_chunk(chunk, first, last, data, rates, latent, seeds, row_terms):
    """The Bessel route over the rows of stream blocks [first, last).

    ``data``: (noised counts, per-row alpha, excluded indptr, excluded
    indices); ``rates``: (dense rates of a row block, its first row);
    ``latent``: (lambda+, lambda-, y, m, the per-row scale of the lambda
    posterior), updated in place; ``seeds``: (chain seed, iteration, stop
    flag); ``row_terms[d]``: the noise log term of row d.
    """
    Y, alpha, excluded_indptr, excluded_indices = data
    mu, origin = rates
    lambda_plus, lambda_minus, y_latent, bessel_m, posterior_scale = latent
    chain_seed, iteration, stop = seeds
    n_cols = Y.shape[1]
    state = np.empty(4, dtype=np.uint64)
    for block in range(first, last):
        if stop[0]:
            return
        seed_stream(chain_seed, iteration, UNIT_LATENT + block)
        seed_state(state, chain_seed, iteration, UNIT_LATENT + block)
        for d in range(block * ROWS_PER_STREAM, min(Y.shape[0], (block + 1) * ROWS_PER_STREAM)):
            scale = posterior_scale[d]
            next_excluded = excluded_indptr[d]
            n_cells = 0
            noise_size = 0
            for v in range(n_cols):
                if stop[0]:  # per cell: a cell near MAX_COUNT costs milliseconds (bench_stop.py)
                    return
                if next_excluded < excluded_indptr[d + 1] and excluded_indices[next_excluded] == v:
                    next_excluded += 1
                    continue
                ytil = np.int64(Y[d, v])
                y, g_plus, g_minus, m = sample_true_count(
                    ytil, mu[d - origin, v], lambda_plus[d, v], lambda_minus[d, v], state
                )
                lambda_plus[d, v], lambda_minus[d, v] = draw_noise_rates(g_plus, g_minus, scale, state)
                y_latent[d, v] = y
                bessel_m[d, v] = m
                n_cells += 1
                noise_size += abs(ytil - y)
            row_terms[d] = geometric_log_lik(n_cells, noise_size, alpha[d])


@njit(nogil=True, cache=True)
def _bessel_marginal_chunk(chunk, first, last, data, rates, seeds, row_terms):
    """The marginal log likelihood of the rows of stream blocks [first, last) (Bessel sampler)."""
    Y, alpha, excluded_indptr, excluded_indices = data
    mu, origin = rates
    stop = seeds[2]
    for d in range(first * ROWS_PER_STREAM, min(Y.shape[0], last * ROWS_PER_STREAM)):
        if stop[0]:
            return
        next_excluded = excluded_indptr[d]
        total = 0.0
        for v in range(Y.shape[1]):
            if stop[0]:  # per cell, as in _bessel_chunk
                return
            if next_excluded < excluded_indptr[d + 1] and excluded_indices[next_excluded] == v:
                next_excluded += 1
                continue
            total += log_marginal_nb(np.int64(Y[d, v]), mu[d - origin, v], alpha[d])
        row_terms[d] = total


@njit(nogil=True, cache=True)
def _bessel_serial(
    Y,
    alpha,
    excluded_indptr,
    excluded_indices,
    mu,
    lambda_plus,
    lambda_minus,
    y_latent,
    bessel_m,
    posterior_scale,
    chain_seed,
    iteration,
    stop,
    row_terms,
    marginal,
):
    """The Bessel route's sweep of every row in one call (data of one row block, one chunk):
    the marginal, the draws and the CSR of the positive true counts."""
    n_blocks = (Y.shape[0] + ROWS_PER_STREAM - 1) // ROWS_PER_STREAM
    data = (Y, alpha, excluded_indptr, excluded_indices)
    seeds = (chain_seed, iteration, stop)
    _bessel_marginal_chunk(0, 0, n_blocks, data, (mu, 0), seeds, marginal)
    _bessel_chunk(
        0,
        0,
        n_blocks,
        data,
        (mu, 0),
        (lambda_plus, lambda_minus, y_latent, bessel_m, posterior_scale),
        seeds,
        row_terms,
    )
    return positive_csr(y_latent, 0, Y.shape[0])


@njit(nogil=True, cache=True)
def _collapsed_rows_chunk(
    chunk,
    first,
    last,
    Y,
    alpha,
    excluded_indptr,
    excluded_indices,
    mu,
    origin,
    use_row,
    cell_indptr,
    cell_indices,
    slots,
    slot_indices,
    slot_values,
    n_drawn,
    chain_seed,
    iteration,
    stop,
    noise_log,
    marginal_log,
    block_offset=0,
):
    """The collapsed draws of the rows of stream blocks [first, last) (rows of one row block).

    A dense row (``use_row[d]`` False) draws every observed cell. A sparse row draws its listed
    cells (``ytil > 0``; ``cell_indptr``/``cell_indices``); its other cells are the thinning
    step's, and only their rate sum is needed here, for the marginal: the row's rate sum minus
    the listed and excluded cells' rates.

    ``mu``: dense rates of the block's rows (row ``d - origin``). Row ``d``'s positive draws go,
    in column order, to ``slot_indices``/``slot_values`` from ``slots[d] - slots[origin]`` on (its
    room: its cells), their number to ``n_drawn[d]`` (:func:`_compact` makes the CSR).
    ``noise_log``/``marginal_log``: the noise log term and the marginal log likelihood per row,
    added to (a sparse row's zero cells' constant terms are added by the caller).
    """
    n_cols = Y.shape[1]
    base = slots[origin]
    state = np.empty(4, dtype=np.uint64)
    for block in range(first, last):
        if stop[0]:
            return
        seed_state(state, chain_seed, iteration, UNIT_LATENT + block_offset + block)
        for d in range(block * ROWS_PER_STREAM, min(Y.shape[0], (block + 1) * ROWS_PER_STREAM)):
            r = d - origin
            a = alpha[d]
            log_a = math.log(a)
            log_norm = math.log1p(-a) - math.log1p(a)
            n_cells = 0
            noise_size = 0
            linear = 0.0
            logs = 0.0
            product = 1.0
            zero_abs = 0
            zero_rate = 0.0
            pos = slots[d] - base
            if not use_row[d]:
                next_excluded = excluded_indptr[d]
                for v in range(n_cols):
                    if stop[0]:  # per cell: a cell near MAX_COUNT costs milliseconds (bench_stop.py)
                        return
                    if next_excluded < excluded_indptr[d + 1] and excluded_indices[next_excluded] == v:
                        next_excluded += 1
                        continue
                    ytil = np.int64(Y[d, v])
                    m = mu[r, v]
                    if ytil <= 0:  # y ~ Poisson(alpha mu); the marginal's closed form is summed below
                        y = sample_poisson(a * m, state)
                        zero_abs -= ytil
                        zero_rate += m
                    else:
                        y, part, factor = sample_true_count_and_marginal_parts(float(ytil), m, a, log_a, state)
                        linear += part
                        logs, product = add_marginal_factor(logs, product, factor)
                    # written whatever y, kept when positive: no branch on the draw (mispredicted
                    # about one cell in three); the row's room covers every cell it visits
                    slot_indices[pos] = v
                    slot_values[pos] = y
                    pos += y > 0
                    n_cells += 1
                    noise_size += abs(ytil - y)
            else:
                listed_rate = 0.0
                for idx in range(cell_indptr[d], cell_indptr[d + 1]):
                    if stop[0]:
                        return
                    v = cell_indices[idx]
                    ytil = np.int64(Y[d, v])
                    m = mu[r, v]
                    listed_rate += m
                    y, part, factor = sample_true_count_and_marginal_parts(float(ytil), m, a, log_a, state)
                    linear += part
                    logs, product = add_marginal_factor(logs, product, factor)
                    # as in the dense loop: no branch on the draw
                    slot_indices[pos] = v
                    slot_values[pos] = y
                    pos += y > 0
                    noise_size += abs(ytil - y)
                n_cells = cell_indptr[d + 1] - cell_indptr[d]
                for idx in range(excluded_indptr[d], excluded_indptr[d + 1]):
                    listed_rate += mu[r, excluded_indices[idx]]
                row_rate = row_sum(mu, r)
                # the thinning step's cells; rounding may leave a tiny negative difference
                zero_rate = max(row_rate - listed_rate, 0.0)
            n_drawn[d] = pos - (slots[d] - base)
            noise_log[d] += geometric_log_lik(n_cells, noise_size, a)
            marginal_log[d] += (
                n_cells * log_norm + zero_abs * log_a + linear + logs + math.log(product) - (1.0 - a) * zero_rate
            )


@njit(nogil=True, cache=True)
def _compact(first_row, last_row, slots, n_drawn, slot_indices, slot_values):
    """CSR (indptr, indices, values) int64 of rows [first_row, last_row) from their slots: row d's
    ``n_drawn[d]`` entries from ``slots[d] - slots[first_row]`` on."""
    n_rows = last_row - first_row
    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    for i in range(n_rows):
        indptr[i + 1] = indptr[i] + n_drawn[first_row + i]
    indices = np.empty(indptr[-1], dtype=np.int64)
    values = np.empty(indptr[-1], dtype=np.int64)
    base = slots[first_row]
    for i in range(n_rows):
        d = first_row + i
        source = slots[d] - base
        for j in range(n_drawn[d]):
            indices[indptr[i] + j] = slot_indices[source + j]
            values[indptr[i] + j] = slot_values[source + j]
    return indptr, indices, values


@njit(nogil=True, cache=True)
def _collapsed_serial(
    Y,
    alpha,
    excluded_indptr,
    excluded_indices,
    mu,
    use_row,
    cell_indptr,
    cell_indices,
    slots,
    chain_seed,
    iteration,
    stop,
    noise_log,
    marginal_log,
    block_offset=0,
):
    """Every row's collapsed draws in one call (data of one row block, one chunk): what
    :func:`_collapsed_rows_chunk` and :func:`_compact` do for a block, without their Python
    round trips (the whole sweep of a small matrix costs tens of microseconds)."""
    n_rows = Y.shape[0]
    room = slots[n_rows]
    slot_indices = np.empty(room, dtype=np.int64)
    slot_values = np.empty(room, dtype=np.int64)
    n_drawn = np.zeros(n_rows, dtype=np.int64)
    n_blocks = (n_rows + ROWS_PER_STREAM - 1) // ROWS_PER_STREAM
    _collapsed_rows_chunk(
        0,
        0,
        n_blocks,
        Y,
        alpha,
        excluded_indptr,
        excluded_indices,
        mu,
        0,
        use_row,
        cell_indptr,
        cell_indices,
        slots,
        slot_indices,
        slot_values,
        n_drawn,
        chain_seed,
        iteration,
        stop,
        noise_log,
        marginal_log,
        block_offset,
    )
    return _compact(0, n_rows, slots, n_drawn, slot_indices, slot_values)


@njit(nogil=True, cache=True)
def _add_tokens(counts, token_rows, token_cols):
    """The CSR ``counts`` plus one at each token's cell (tokens land on cells absent from it).

    The tokens go to their rows by a counting sort; a row's distinct columns are counted in a
    dense scratch row and only they are sorted (a row's ~100 tokens, not one sort of every
    token's 64-bit key: 0.2x the time at 1000 x 1000, K = 50, 80,000 tokens)."""
    indptr, indices, values = counts
    n_rows = indptr.shape[0] - 1
    n_tokens = token_rows.shape[0]
    n_cols = 0
    for t in range(n_tokens):
        n_cols = max(n_cols, token_cols[t] + 1)
    # the tokens' columns by row, in their order (a stable counting sort)
    row_start = np.zeros(n_rows + 1, dtype=np.int64)
    for t in range(n_tokens):
        row_start[token_rows[t] + 1] += 1
    for d in range(n_rows):
        row_start[d + 1] += row_start[d]
    fill = row_start[:-1].copy()
    by_row = np.empty(n_tokens, dtype=np.int64)
    for t in range(n_tokens):
        by_row[fill[token_rows[t]]] = token_cols[t]
        fill[token_rows[t]] += 1
    # each row's distinct token columns, sorted, and their token counts
    scratch = np.zeros(n_cols, dtype=np.int64)
    distinct = np.empty(n_tokens, dtype=np.int64)
    tally = np.empty(n_tokens, dtype=np.int64)
    n_distinct = np.zeros(n_rows + 1, dtype=np.int64)
    for d in range(n_rows):
        first = n_distinct[d]
        k = first
        for t in range(row_start[d], row_start[d + 1]):
            column = by_row[t]
            if scratch[column] == 0:
                distinct[k] = column
                k += 1
            scratch[column] += 1
        distinct[first:k] = np.sort(distinct[first:k])
        n_distinct[d + 1] = k
        for i in range(first, k):  # the counts, in sorted order; the scratch row cleared
            tally[i] = scratch[distinct[i]]
            scratch[distinct[i]] = 0
    new_indptr = np.zeros(n_rows + 1, dtype=np.int64)
    for d in range(n_rows):
        new_indptr[d + 1] = new_indptr[d] + (indptr[d + 1] - indptr[d]) + (n_distinct[d + 1] - n_distinct[d])
    new_indices = np.empty(new_indptr[-1], dtype=np.int64)
    new_values = np.empty(new_indptr[-1], dtype=np.int64)
    for d in range(n_rows):  # merge two sorted lists of distinct columns
        pos = new_indptr[d]
        idx, end = indptr[d], indptr[d + 1]
        i, last = n_distinct[d], n_distinct[d + 1]
        while idx < end or i < last:
            if i < last and (idx >= end or distinct[i] < indices[idx]):
                new_indices[pos] = distinct[i]
                new_values[pos] = tally[i]
                i += 1
            else:
                new_indices[pos] = indices[idx]
                new_values[pos] = values[idx]
                idx += 1
            pos += 1
    return new_indptr, new_indices, new_values


@njit(nogil=True, cache=True)
def _row_counts(Y, excluded_indptr, excluded_indices):
    """Per row: the observed cells with ytil > 0, and the count and |ytil| sum of the
    observed cells with ytil <= 0."""
    n_rows, n_cols = Y.shape
    n_positive = np.zeros(n_rows, dtype=np.int64)
    zero_cells = np.zeros(n_rows, dtype=np.int64)
    zero_abs = np.zeros(n_rows, dtype=np.int64)
    for d in range(n_rows):
        next_excluded = excluded_indptr[d]
        for v in range(n_cols):
            if next_excluded < excluded_indptr[d + 1] and excluded_indices[next_excluded] == v:
                next_excluded += 1
            elif Y[d, v] > 0:
                n_positive[d] += 1
            else:
                zero_cells[d] += 1
                zero_abs[d] -= Y[d, v]
    return n_positive, zero_cells, zero_abs


@njit(nogil=True, cache=True)
def _listed_cells(Y, use_row, excluded_indptr, excluded_indices, n_positive):
    """CSR pattern of the observed ytil > 0 cells of the rows ``use_row`` marks (sorted
    columns, int32: columns < 2**31, half the memory); other rows empty."""
    n_rows, n_cols = Y.shape
    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    for d in range(n_rows):
        indptr[d + 1] = indptr[d] + (n_positive[d] if use_row[d] else 0)
    indices = np.empty(indptr[-1], dtype=np.int32)
    for d in range(n_rows):
        if not use_row[d]:
            continue
        pos = indptr[d]
        next_excluded = excluded_indptr[d]
        for v in range(n_cols):
            if next_excluded < excluded_indptr[d + 1] and excluded_indices[next_excluded] == v:
                next_excluded += 1
            elif Y[d, v] > 0:
                indices[pos] = v
                pos += 1
    return indptr, indices


@njit(nogil=True, cache=True)
def positive_csr(Y, first_row, last_row):
    """CSR (indptr, indices, values) int64 of the positive entries of rows [first_row, last_row)."""
    n_cols = Y.shape[1]
    n_rows = last_row - first_row
    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    for i in range(n_rows):
        count = 0
        for j in range(n_cols):
            if Y[first_row + i, j] > 0:
                count += 1
        indptr[i + 1] = indptr[i] + count
    indices = np.empty(indptr[-1], dtype=np.int64)
    values = np.empty(indptr[-1], dtype=np.int64)
    for i in range(n_rows):
        pos = indptr[i]
        for j in range(n_cols):
            value = Y[first_row + i, j]
            if value > 0:
                indices[pos] = j
                values[pos] = value
                pos += 1
    return indptr, indices, values


# ---------------------------------------------------------------------------
# Variational inference (CAVI): the local step (the VI paper, DESIGN.md 1c)
# ---------------------------------------------------------------------------


@njit(nogil=True, cache=True)
def _vi_private_chunk(chunk, first, last, data, moments, latent, point, out):
    """The CAVI local step over the observed cells of rows in stream blocks [first, last).

    Per cell with noised count ``ytil``, from the current q: ``G[lambda-]``
    of ``q(lambda-) = Gamma(E[g-] + 1, rate 1/alpha)``; ``G[lambda+ + mu]``
    by the delta method, ``E[log X] ~ log E[X] - V[X] / (2 E[X]^2)``; the
    Bessel point ``m`` (mode, or mean) of
    ``Bessel(|ytil|, 2 sqrt(G[lambda-] G[lambda+ + mu]))``; ``y+`` and ``g-``
    from ``m`` and ``ytil`` (step 2 of the sampler); ``y+`` split over
    ``(lambda+, mu_1..K)`` in proportion to ``(G[lambda+], G[theta_dk] G[phi_kv])``:
    ``E[g+] = y+ G[lambda+] / W`` and ``E[y] = y+ sum_k G[theta_dk] G[phi_kv] / W``
    (DESIGN.md 1c, the paper's eq. 15; the CAVI optimum of the split); then
    ``q(lambda+-) = Gamma(E[g+-] + 1, rate 1/alpha)``.

    ``noise_split="delta"`` instead splits ``y+`` between noise and true count
    in proportion to ``(G[lambda+], G[mu])`` with ``G[mu]`` of the sum by the
    delta method (the paper's eq. 13, a binomial; ``E[y]`` then goes to the
    components as before). ``G[mu] >= sum_k G[theta_dk] G[phi_kv]``, so more
    of ``y+`` goes to the true count; not a CAVI optimum.

    ``data``: (noised counts, per-row alpha, excluded indptr, excluded
    indices); ``moments``: (E[mu], V[mu], sum_k G[theta_dk] G[phi_kv], first
    row) of a block of rows; ``latent``: (E[g+], E[g-], E[log lambda+]),
    dense, updated in place; ``point``: (use the mean, delta split, stop flag); ``out``:
    (E[y] of the block's cells, 0 where excluded; the rows' ELBO terms).

    The cell's ELBO terms, exact for the q the step leaves, with q(lambda)
    at its optimum and the split's q as allocated (``W = G[lambda+] + w``,
    ``w`` the true count's weight, from the q before this step)::

        y+ log W - log y+! - E[g+] E[log lambda+] + log E[g+]!
        + (E[g+] + g-) log alpha + 2 log(1 - alpha)
        [+ E[y] (log sum_k G[theta_dk] G[phi_kv] - log w), 0 unless noise_split="delta"]

    (the lambda terms integrate to the geometric marginals of g+-); the
    factors' terms are the model's (:meth:`vi_update`).
    """
    Y, alpha, excluded_indptr, excluded_indices = data
    mean_mu, var_mu, weight_mu, origin = moments
    g_plus, g_minus, elog_plus = latent
    use_mean, delta_split, stop = point
    y_expected, row_terms = out
    n_cols = Y.shape[1]
    for d in range(first * ROWS_PER_STREAM, min(Y.shape[0], last * ROWS_PER_STREAM)):
        if stop[0]:
            return
        r = d - origin
        a = alpha[d]
        log_a = math.log(a)
        elog_at_zero = digamma_plus_one(0.0) + log_a  # E[log lambda+] when E[g+] = 0
        next_excluded = excluded_indptr[d]
        n_cells = 0
        total = 0.0
        for v in range(n_cols):
            if stop[0]:  # per cell: the Bessel mode/mean of a huge count is a long sum
                return
            if next_excluded < excluded_indptr[d + 1] and excluded_indices[next_excluded] == v:
                next_excluded += 1
                y_expected[r, v] = 0.0
                continue
            n_cells += 1
            ytil = np.int64(Y[d, v])
            gp = g_plus[d, v]
            mean_x = a * (gp + 1.0) + mean_mu[r, v]
            var_x = a * a * (gp + 1.0) + var_mu[r, v]
            geo_x = mean_x * math.exp(-0.5 * var_x / (mean_x * mean_x))
            quarter_a2 = a * geo_plus_one(g_minus[d, v]) * geo_x
            nu = float(abs(ytil))
            if use_mean:
                m = mean_nb(nu, 2.0 * math.sqrt(quarter_a2))
            elif quarter_a2 < nu + 1.0:  # most cells: mode 0
                m = 0.0
            else:
                m = mode_nb(nu, 2.0 * math.sqrt(quarter_a2))
            if ytil <= 0:
                y_plus = m
                gm = m - ytil
            else:
                y_plus = m + ytil
                gm = m
            g_minus[d, v] = gm
            total += gm * log_a
            if y_plus > 0.0:
                elog_p = elog_plus[d, v]
                geo_p = math.exp(elog_p)
                weight = weight_mu[r, v]
                geo_mu = weight
                if delta_split:  # the paper's eq. 13: G[mu] of the sum, by the delta method
                    mean = mean_mu[r, v]
                    geo_mu = mean * math.exp(-0.5 * var_mu[r, v] / (mean * mean)) if mean > 0.0 else 0.0
                split = geo_p + geo_mu
                gp_new = y_plus * geo_p / split
                expected = y_plus * geo_mu / split
                y_expected[r, v] = expected
                log_factorial_gp, digamma_gp = lgamma_digamma_plus_one(gp_new)
                total += (
                    y_plus * math.log(split)
                    - lgamma_plus_one(y_plus)
                    - gp_new * elog_p
                    + log_factorial_gp
                    + gp_new * log_a
                )
                if delta_split and expected > 0.0 and weight > 0.0:
                    total += expected * (math.log(weight) - math.log(geo_mu))
                g_plus[d, v] = gp_new
                elog_plus[d, v] = digamma_gp + log_a
            else:
                y_expected[r, v] = 0.0
                g_plus[d, v] = 0.0
                elog_plus[d, v] = elog_at_zero
        row_terms[d] = total + n_cells * 2.0 * math.log1p(-a)


# ---------------------------------------------------------------------------
# The method
# ---------------------------------------------------------------------------


def row_blocks(n_rows, n_cols, cells=None):
    """Row ranges aligned to stream blocks whose dense rates stay below ``cells`` cells
    (default :data:`BLOCK_CELLS`, read when called)."""
    cells = BLOCK_CELLS if cells is None else cells
    rows = max(ROWS_PER_STREAM, (cells // max(n_cols, 1)) // ROWS_PER_STREAM * ROWS_PER_STREAM)
    return [(start, min(n_rows, start + rows)) for start in range(0, n_rows, rows)]


class Private(Method):
    name = "private"
    label = "private (models the noise)"
    color = "#d62728"
    description = (
        "Treats the true counts as latent and draws them given the noised counts and the "
        "noise level each sweep (Schein et al. 2019): the noise is part of the model."
    )
    needs_alpha = True
    # collapsed first: the default (exact, cheaper, better mixing; tests/test_geweke.py, test_collapsed.py)
    options = {
        "sampler": ("collapsed", "bessel"),
        "sparse_step": ("auto", "off"),
        "variant": ("arithmetic", "geometric", "paper"),
        "bessel_point": ("mode", "mean"),
        "noise_split": ("components", "delta"),
    }
    inferences = ("mcmc", "vi")
    # CAVI only: variant: q(y) the exact collapsed conditional at the factors' arithmetic means
    # (the default) or geometric means (exact mean-field CAVI), or the VI paper's Bessel route
    # (lpviz.vi explains all three); the paper's own options: bessel_point: q(m), a point mass at
    # the Bessel mode (the VI paper's) or mean; noise_split: how E[y+] is split between noise and
    # true count (see _vi_private_chunk). Giving either of those two selects variant="paper".
    option_inference = {
        "sampler": "mcmc",
        "sparse_step": "mcmc",
        "variant": "vi",
        "bessel_point": "vi",
        "noise_split": "vi",
    }

    def __init__(self, **options):
        # giving an option of the paper's variant without a variant selects it; with another variant
        # only their defaults are accepted (forms that pass every option, e.g. the app's, give those)
        paper_options = [key for key in ("bessel_point", "noise_split") if options.get(key) is not None]
        if paper_options and options.get("variant") is None:
            options = dict(options, variant="paper")
        super().__init__(**options)
        changed = [key for key in paper_options if self.settings[key] != self.options[key][0]]
        if changed and self.settings["variant"] != "paper":
            raise ValueError(
                f"{changed[0]}={self.settings[changed[0]]!r} is an option of the VI paper's Bessel route "
                f"(variant='paper'), not of variant={self.settings['variant']!r}; drop it or set variant='paper'"
            )

    def prepare(self, counts, alpha, excluded):
        counts = np.asarray(counts)
        fitted = np.ascontiguousarray(counts, dtype=smallest_int_dtype(counts))
        # The noise has mean 0, so the noised counts' mean estimates the true mean count without
        # bias; the mean of their positive parts (the naive method's) is far larger when most
        # counts are 0 (40x on Enron-like data at eps/N = 1), and a chain started there spends
        # its first iterations allocating tens of millions of spurious tokens.
        total = int(fitted.sum(dtype=np.int64))
        if excluded.mask is not None:
            total -= int(fitted[excluded.mask].sum(dtype=np.int64))
        return Prepared(
            counts=fitted,
            alpha=alpha,
            excluded=excluded.rows,
            mean_count=mean_count_of(total, excluded.n_observed),
            count_total=total,
        )

    def state_bytes(self, shape, model):
        n_cells = int(shape[0]) * int(shape[1])
        block = 8 * 2 * min(n_cells, BLOCK_CELLS)  # rates and draws of one row block
        if self.settings["sampler"] == "bessel":  # lambda+, lambda-, y, m: dense
            return n_cells * 32 + block
        # the listed (ytil > 0) cells' columns, 4 bytes each: about a third of the cells at eps/N = 1
        return n_cells * 4 // 3 + block

    def count_bytes(self, shape, itemsize=None, positive=None):
        # prepare keeps the counts dense in the smallest integer dtype that holds them, never wider
        # than the release's own (int8 at eps/N = 1 on topic-like data); unknown: int64, the widest
        return (8 if itemsize is None else int(itemsize)) * int(shape[0]) * int(shape[1])

    def start(self, prepared, model, state, work, rng):
        shape = prepared.counts.shape
        if self.settings["sampler"] == "collapsed":
            counts, (excluded_indptr, excluded_indices) = prepared.counts, prepared.excluded
            n_positive, zero_cells, zero_abs = _row_counts(counts, excluded_indptr, excluded_indices)
            use_row = np.zeros(shape[0], dtype=np.bool_)
            if self.settings["sparse_step"] == "auto" and shape[1] >= SPARSE_MIN_COLUMNS:
                skipped = n_positive + np.diff(excluded_indptr)
                use_row = skipped <= SPARSE_MAX_SKIP_SHARE * shape[1]
            # the listed (ytil > 0) cells of sparse rows; dense rows draw every cell themselves
            cells = _listed_cells(counts, use_row, excluded_indptr, excluded_indices, n_positive)
            # room for each row's positive draws: every cell of a dense row, the listed ones of a sparse row
            slots = np.zeros(shape[0] + 1, dtype=np.int64)
            np.cumsum(np.where(use_row, np.diff(cells[0]), shape[1]), out=slots[1:])
            # a sparse row's zero cells' log terms that need no rates: the same every sweep
            alpha, log_alpha = prepared.alpha, np.log(prepared.alpha)
            zero_terms = np.where(
                use_row, zero_cells * (np.log1p(-alpha) - np.log1p(alpha)) + zero_abs * log_alpha, 0.0
            )
            return {
                "use_row": use_row,
                "any_sparse": bool(use_row.any()),
                "cells": cells,
                "slots": slots,
                "zero_terms": zero_terms,
                "log_alpha": log_alpha,
                "all_rows": np.arange(shape[0]),
                "y_counts": None,
            }
        # Exponential prior on lambda with mean alpha/(1-alpha).
        prior_mean = (prepared.alpha / (1.0 - prepared.alpha))[:, None]
        return {
            "lambda_plus": rng.exponential(1.0, shape) * prior_mean,
            "lambda_minus": rng.exponential(1.0, shape) * prior_mean,
            "y": np.zeros(shape, dtype=np.int64),
            "bessel": np.zeros(shape, dtype=np.int64),
            "posterior_scale": prepared.alpha.copy(),
        }

    def sweep(self, prepared, latent, model, state, stats, work, iteration):
        counts, rows = self.sweep_rows(prepared, latent, model, state, stats, work, iteration)
        return counts, {name: ordered_sum(values) for name, values in rows.items()}

    def sweep_rows(self, prepared, latent, model, state, stats, work, iteration):
        if self.settings["sampler"] == "collapsed":
            return self._collapsed_sweep(prepared, latent, model, state, stats, work, iteration)
        if work.block_offset:
            raise ValueError(
                "the Bessel sampler's noise rates start from one random stream over every cell, so its "
                "chain cannot be split over machines; use sampler='collapsed' (the default)"
            )
        return self._bessel_sweep(prepared, latent, model, state, stats, work, iteration)

    def _bessel_sweep(self, prepared, latent, model, state, stats, work, iteration):
        Y = prepared.counts
        n_rows, n_cols = Y.shape
        row_terms = np.zeros(n_rows)
        marginal = np.zeros(n_rows)
        blocks = row_blocks(n_rows, n_cols)
        arrays = (
            latent["lambda_plus"],
            latent["lambda_minus"],
            latent["y"],
            latent["bessel"],
            latent["posterior_scale"],
        )
        if len(blocks) == 1 and not work.parallel:  # small data: the whole sweep in one compiled call
            mu = model.rate_rows(state, np.arange(n_rows))
            with main_thread_kernel(work.stop):  # Ctrl-C and SIGTERM reach the flag meanwhile
                counts = _bessel_serial(
                    Y,
                    prepared.alpha,
                    *prepared.excluded,
                    mu,
                    *arrays,
                    work.chain_seed,
                    iteration,
                    work.stop,
                    row_terms,
                    marginal,
                )
        else:
            data = (Y, prepared.alpha, *prepared.excluded)
            seeds = (work.chain_seed, iteration, work.stop)
            for start, stop in blocks:
                mu = model.rate_rows(state, np.arange(start, stop))
                bounds = _shift(chunk_bounds(stop - start, mu.size, work.parallel), start // ROWS_PER_STREAM)
                run_chunks(_bessel_marginal_chunk, bounds, work.stop, data, (mu, start), seeds, marginal)
                run_chunks(_bessel_chunk, bounds, work.stop, data, (mu, start), arrays, seeds, row_terms)
            counts = positive_csr(latent["y"], 0, n_rows)
        model.allocate(state, counts, stats, work, iteration)
        return counts, {"noise": row_terms, "log_marginal": marginal}

    def _collapsed_sweep(self, prepared, latent, model, state, stats, work, iteration):
        Y, alpha = prepared.counts, prepared.alpha
        n_rows, n_cols = Y.shape
        noise_log, marginal_log = np.zeros(n_rows), np.zeros(n_rows)
        use_row, cells, slots = latent["use_row"], latent["cells"], latent["slots"]

        blocks = row_blocks(n_rows, n_cols)
        serial = len(blocks) == 1 and not work.parallel
        # the first block's rates on the pool while the sparse step draws: they do not depend on it
        # (the same product either way), and the main thread builds the step's tables meanwhile
        first_rates = None
        if latent["any_sparse"] and not serial:
            first_rates = submit_call(model.rate_rows, state, np.arange(*blocks[0]), parallel=work.parallel)

        # sparse rows: the ytil <= 0 cells by thinning (their rate-free log terms here)
        tokens = None
        if latent["any_sparse"]:
            tokens = model.poisson_allocate(state, (use_row, Y, *prepared.excluded, alpha), stats, work, iteration)
            # each token adds one to its cell's |ytil - y| (tokens land in sparse rows only)
            per_row = np.bincount(tokens[0], minlength=n_rows)
            noise_log += latent["zero_terms"] + per_row * latent["log_alpha"]
            marginal_log += latent["zero_terms"]

        if serial:  # small data: every row's draws in one compiled call
            mu = model.rate_rows(state, latent["all_rows"])
            with main_thread_kernel(work.stop):  # Ctrl-C and SIGTERM reach the flag meanwhile
                counts = _collapsed_serial(
                    Y,
                    alpha,
                    *prepared.excluded,
                    mu,
                    use_row,
                    *cells,
                    slots,
                    work.chain_seed,
                    iteration,
                    work.stop,
                    noise_log,
                    marginal_log,
                    work.block_offset,
                )
        else:
            counts = self._collapsed_blocks(
                prepared, latent, model, state, work, iteration, blocks, noise_log, marginal_log, first_rates
            )
        # the thinned tokens merge into the counts on the pool beside the allocation (it reads the
        # counts, the merge makes new ones): a core would otherwise wait for the merge
        merged = None
        if tokens is not None and tokens[0].size:
            merged = submit_call(_add_tokens, counts, *tokens, parallel=work.parallel)
        model.allocate(state, counts, stats, work, iteration)
        if merged is not None:
            counts = merged.result()[0]
        latent["y_counts"] = counts
        return counts, {"noise": noise_log, "log_marginal": marginal_log}

    @staticmethod
    def _collapsed_blocks(
        prepared, latent, model, state, work, iteration, blocks, noise_log, marginal_log, first_rates=None
    ):
        """The collapsed draws a block of rows at a time, rates by the model's dense product: dense
        rows draw every cell, sparse rows their listed ones (a matrix product beats gathering the
        listed cells' rates one dot product at a time, even when a fifth of the cells is listed).
        Pipelined: the next block's product runs on the pool beside this block's kernels, and the
        previous block's counts are compacted here meanwhile, so no core waits on another."""
        Y, alpha = prepared.counts, prepared.alpha
        use_row, cells, slots = latent["use_row"], latent["cells"], latent["slots"]
        pieces = []
        pipelined = work.parallel and len(blocks) > 1
        rates = first_rates
        if rates is None:
            rates = submit_call(model.rate_rows, state, np.arange(*blocks[0]), parallel=pipelined)
        n_drawn = np.zeros(Y.shape[0], dtype=np.int64)
        previous = None
        for index, (start, stop) in enumerate(blocks):
            mu = rates.result()[0]
            if index + 1 < len(blocks):
                rates = submit_call(model.rate_rows, state, np.arange(*blocks[index + 1]), parallel=pipelined)
            room = slots[stop] - slots[start]
            slot_indices, slot_values = np.empty(room, dtype=np.int64), np.empty(room, dtype=np.int64)
            bounds = _shift(chunk_bounds(stop - start, mu.size, work.parallel), start // ROWS_PER_STREAM)
            pending = submit_chunks(
                _collapsed_rows_chunk,
                bounds,
                work.stop,
                Y,
                alpha,
                *prepared.excluded,
                mu,
                start,
                use_row,
                *cells,
                slots,
                slot_indices,
                slot_values,
                n_drawn,
                work.chain_seed,
                iteration,
                work.stop,
                noise_log,
                marginal_log,
                work.block_offset,
            )
            if previous is not None:
                pieces.append(_gather_block(previous, slots, n_drawn))
            previous = (pending, start, stop, slot_indices, slot_values)
        pieces.append(_gather_block(previous, slots, n_drawn))
        return _concatenate_csr(pieces)

    # -- variational inference (CAVI, lpviz.vi) ----------------------------------------
    def vi_start(self, prepared, model, q, work):
        if self.settings["variant"] != "paper":  # no noise rates: q(y) is the collapsed conditional
            return {"y_expected": None}
        alpha = prepared.alpha[:, None]
        shape = prepared.counts.shape
        # q(lambda+-) starts at the prior mean alpha / (1 - alpha) = alpha (E[g] + 1)
        start = np.broadcast_to(alpha / (1.0 - alpha), shape)
        return {
            "g_plus": start.copy(),
            "g_minus": start.copy(),
            "elog_plus": np.ascontiguousarray(special.digamma(start + 1.0) + np.log(alpha)),
            "y_expected": None,
        }

    def vi_sweep(self, prepared, latent, model, q, stats, work):
        if self.settings["variant"] != "paper":
            return vi_collapsed_sweep(prepared, latent, model, q, stats, work, self.settings["variant"])
        Y = prepared.counts
        n_rows, n_cols = Y.shape
        data = (Y, prepared.alpha, *prepared.excluded)
        arrays = (latent["g_plus"], latent["g_minus"], latent["elog_plus"])
        point = (self.settings["bessel_point"] == "mean", self.settings["noise_split"] == "delta", work.stop)
        row_terms = np.zeros(n_rows)
        pieces = []
        for start, stop in row_blocks(n_rows, n_cols, VI_BLOCK_CELLS):
            bounds = _shift(
                chunk_bounds(stop - start, (stop - start) * n_cols, work.parallel), start // ROWS_PER_STREAM
            )
            mean_mu, var_mu, weight_mu = model.vi_moments(q, start, stop, bounds, work)
            y_block = np.empty_like(mean_mu)
            run_chunks(
                _vi_private_chunk,
                bounds,
                work.stop,
                data,
                (mean_mu, var_mu, weight_mu, start),
                arrays,
                point,
                (y_block, row_terms),
            )
            pieces.append(positive_csr_float(y_block))
        counts = _concatenate_csr(pieces)
        model.vi_allocate(q, counts, stats, work)
        latent["y_expected"] = counts
        latent["cell_rows"] = row_terms  # the rows' ELBO terms (summed in row order)
        return ordered_sum(row_terms)

    def vi_state_bytes(self, shape, model, positive=None):
        n_rows, n_cols = int(shape[0]), int(shape[1])
        n_cells = n_rows * n_cols
        start, stop = row_blocks(n_rows, n_cols, VI_BLOCK_CELLS)[0]
        block = (stop - start) * n_cols
        # the expected counts' CSR (value and column: 16 bytes a positive cell, at most every cell):
        # the row blocks' pieces and their concatenation, both alive when the model allocates them
        expected = 2 * (16 * n_cells + 8 * n_rows) + 8 * len(row_blocks(n_rows, n_cols, VI_BLOCK_CELLS)) + 8
        if self.settings["variant"] == "paper":
            # q of the noise rates per cell (g_plus, g_minus, elog_plus) and a row block's moments
            # of the rates (mean, variance, weight) and expected counts
            return expected + 24 * n_cells + 32 * block + 8 * n_rows
        return expected + 16 * block + 8 * n_rows  # a row block's rates and expected counts; the rows' terms

    def vi_warm_start(self, prepared, latent, vi_latent):
        # the Bessel sampler from the paper's variant: noise rates at their q means alpha (E[g] + 1)
        if "lambda_plus" in latent and "g_plus" in vi_latent:
            alpha = prepared.alpha[:, None]
            latent["lambda_plus"][...] = alpha * (vi_latent["g_plus"] + 1.0)
            latent["lambda_minus"][...] = alpha * (vi_latent["g_minus"] + 1.0)


def vi_collapsed_sweep(prepared, latent, model, q, stats, work, weights):
    """The collapsed local step (:func:`lpviz.models._variational.collapsed_vi_chunk`) over every
    row block at the model's plug-in rates (``weights``: "arithmetic" or "geometric", see
    :mod:`lpviz.vi`), then the model's expected allocation with the same weights; returns the
    cells' ELBO terms."""
    Y = prepared.counts
    n_rows, n_cols = Y.shape
    data = (Y, prepared.alpha, *prepared.excluded)
    row_terms = np.zeros(n_rows)
    pieces = []
    for start, stop in row_blocks(n_rows, n_cols, VI_BLOCK_CELLS):
        bounds = _shift(chunk_bounds(stop - start, (stop - start) * n_cols, work.parallel), start // ROWS_PER_STREAM)
        rates = model.vi_rates(q, start, stop, weights)
        y_block = np.empty_like(rates)
        run_chunks(collapsed_vi_chunk, bounds, work.stop, data, (rates, start, work.stop), (y_block, row_terms))
        pieces.append(positive_csr_float(y_block))
    counts = _concatenate_csr(pieces)
    model.vi_allocate(q, counts, stats, work, weights)
    latent["y_expected"] = counts
    latent["cell_rows"] = row_terms  # the rows' ELBO terms (summed in row order)
    return ordered_sum(row_terms)


def _gather_block(block, slots, n_drawn):
    """Wait for a block's collapsed draws; their CSR of positive draws."""
    pending, start, stop, slot_indices, slot_values = block
    pending.result()
    return _compact(start, stop, slots, n_drawn, slot_indices, slot_values)


def _concatenate_csr(pieces):
    """One CSR of consecutive row blocks."""
    if len(pieces) == 1:
        return pieces[0]
    offsets = np.cumsum([0] + [piece[0][-1] for piece in pieces[:-1]])
    indptr = np.concatenate([[0]] + [piece[0][1:] + offset for piece, offset in zip(pieces, offsets, strict=True)])
    return (indptr.astype(np.int64), np.concatenate([p[1] for p in pieces]), np.concatenate([p[2] for p in pieces]))


def _shift(bounds, offset):
    return [(first + offset, last + offset) for first, last in bounds]
