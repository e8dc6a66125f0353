"""The block model: ``mu_ij = sum_cd theta_ic pi_cd theta_jd`` for ``i != j``.

A mixed-membership stochastic block model of a square sender x recipient
matrix with gamma priors (shape ``a0``, rate ``b0``) on ``theta`` and ``pi``.
Self loops do not exist: the diagonal is the model's structural zero, never
observed and skipped by every kernel; other excluded cells (held out) are
listed by row and by column.
"""

import math

import numpy as np
from numba import njit

from lpviz._parallel import ROWS_PER_STREAM, run_chunks
from lpviz._random import seed_state
from lpviz.collapsed import sample_poisson
from lpviz.models._kernels import (
    FAST_DOT,
    column_alias_tables,
    column_sums,
    dot_rows,
    draw_alias,
    gamma_log_prior,
    grow,
    in_sorted,
    log_factorial,
    low_rank_rows,
    multinomial,
    ordered_sum,
    standard_gamma,
)
from lpviz.models._variational import (
    VI_INIT_SHAPE,
    GammaFactor,
    add_fixed,
    allocation_gap,
    check_fixed_bound,
    fixed_total,
    refresh_row,
    weights_of,
)
from lpviz.models.base import Model

UNIT_SWEEP = 0
UNIT_THETA = 1 << 40
UNIT_PI = 3 << 40
UNIT_POISSON = 4 << 40


# ---------------------------------------------------------------------------
# Kernels
# ---------------------------------------------------------------------------


@njit(nogil=True, cache=True)
def _sender_tables(theta, i, pi, sender_pi, given_receiver):
    """``sender_pi[0, d] = (theta_i^T pi)_d`` and ``given_receiver[d, c] = theta_ic pi_cd``."""
    n_comm = theta.shape[1]
    for d in range(n_comm):
        running = 0.0
        for c in range(n_comm):
            w = theta[i, c] * pi[c, d]
            given_receiver[d, c] = w
            running += w
        sender_pi[0, d] = running


@njit(nogil=True, cache=True)
def _allocate_chunk(chunk, first, last, counts, factors, seeds, stats):
    """Split the counts of senders in blocks [first, last) over community pairs (c, d).

    Exactly in two stages: ``d ~ (theta_i^T pi)_d theta_jd``, then
    ``c | d ~ theta_ic pi_cd``, each a multinomial over all tokens of the cell.
    ``seeds``: (chain seed, iteration, stop flag, the first row's actor: 0 but for a
    partition of the senders on another machine, whose row r is actor first_row + r);
    ``stats``: (n_send (the counts' rows), n_recv parts (every actor), n_cd parts).
    """
    indptr, indices, values = counts
    theta, pi = factors
    chain_seed, iteration, stop, first_row = seeds
    n_send, n_recv_parts, n_cd_parts = stats
    n_recv = n_recv_parts[chunk]
    n_cd = n_cd_parts[chunk]
    n_rows = indptr.shape[0] - 1
    n_comm = theta.shape[1]
    block_offset = first_row // ROWS_PER_STREAM
    sender_pi = np.empty((1, n_comm))
    given_receiver = np.empty((n_comm, n_comm))
    weights = np.empty(n_comm)
    by_receiver = np.zeros(n_comm, dtype=np.int64)
    by_sender = np.zeros(n_comm, dtype=np.int64)
    state = np.empty(4, dtype=np.uint64)
    for block in range(first, last):
        if stop[0]:
            return
        seed_state(state, chain_seed, iteration, UNIT_SWEEP + block_offset + block)
        for r in range(block * ROWS_PER_STREAM, min(n_rows, (block + 1) * ROWS_PER_STREAM)):
            if indptr[r + 1] == indptr[r]:
                continue
            i = first_row + r
            _sender_tables(theta, i, pi, sender_pi, given_receiver)
            for idx in range(indptr[r], indptr[r + 1]):
                y = values[idx]
                j = indices[idx]
                if y <= 0 or j == i:
                    continue
                total = 0.0
                for d in range(n_comm):
                    weights[d] = sender_pi[0, d] * theta[j, d]
                    total += weights[d]
                multinomial(y, weights, total, state, by_receiver)
                for d in range(n_comm):
                    if by_receiver[d] == 0:
                        continue
                    n_recv[j, d] += by_receiver[d]
                    weights[:] = given_receiver[d]
                    multinomial(by_receiver[d], weights, sender_pi[0, d], state, by_sender)
                    for c in range(n_comm):
                        if by_sender[c]:
                            n_send[r, c] += by_sender[c]
                            n_cd[c, d] += by_sender[c]


@njit(nogil=True, cache=True)
def _partner_sum(theta, total, i, missing_indptr, missing_indices, out):
    """``out = sum over j != i with (i, j) observed of theta_j`` (lists by row)."""
    out[:] = total - theta[i]
    for idx in range(missing_indptr[i], missing_indptr[i + 1]):
        out -= theta[missing_indices[idx]]
    for c in range(out.shape[0]):
        if out[c] < 0.0:  # rounding when almost every partner is missing
            out[c] = 0.0


@njit(nogil=True, cache=True)
def _update_theta(theta, pi, counts, missing, prior, seeds):
    """theta_ic ~ Gamma(a0 + n_send_ic + n_recv_ic, b0 + sum_{j: (i,j) obs} (pi theta_j)_c
    + sum_{j: (j,i) obs} (pi^T theta_j)_c), in place.

    Rows are coupled (theta_i's rate depends on every other theta_j), so they
    are updated one after another: each draw is from its exact conditional.
    ``counts``: (n_send, n_recv); ``missing``: (row indptr, row indices, column
    indptr, column indices); ``seeds``: (chain seed, iteration).
    """
    n_send, n_recv = counts
    row_indptr, row_indices, col_indptr, col_indices = missing
    a0, b0 = prior
    chain_seed, iteration = seeds
    n_actors, n_comm = theta.shape
    state = np.empty(4, dtype=np.uint64)
    seed_state(state, chain_seed, iteration, UNIT_THETA)
    total = column_sums(theta)
    receivers = np.empty(n_comm)
    senders = np.empty(n_comm)
    for i in range(n_actors):
        _partner_sum(theta, total, i, row_indptr, row_indices, receivers)
        _partner_sum(theta, total, i, col_indptr, col_indices, senders)
        for c in range(n_comm):
            rate = b0
            for d in range(n_comm):
                rate += pi[c, d] * receivers[d] + pi[d, c] * senders[d]
            new = standard_gamma(a0 + n_send[i, c] + n_recv[i, c], state) / rate
            total[c] += new - theta[i, c]
            theta[i, c] = new


@njit(nogil=True, cache=True)
def pair_weights(theta, missing_indptr, missing_indices):
    """W_cd = sum over observed pairs i != j of theta_ic theta_jd (C, C)."""
    n_actors, n_comm = theta.shape
    total = column_sums(theta)
    receivers = np.empty(n_comm)
    weights = np.zeros((n_comm, n_comm))
    for i in range(n_actors):
        _partner_sum(theta, total, i, missing_indptr, missing_indices, receivers)
        for c in range(n_comm):
            for d in range(n_comm):
                weights[c, d] += theta[i, c] * receivers[d]
    return weights


@njit(nogil=True, cache=True)
def _update_pi(pi, theta, n_cd, missing, prior, seeds):
    """pi_cd ~ Gamma(a0 + n_cd, b0 + sum over observed i != j of theta_ic theta_jd), in place."""
    a0, b0 = prior
    chain_seed, iteration = seeds
    state = np.empty(4, dtype=np.uint64)
    seed_state(state, chain_seed, iteration, UNIT_PI)
    weights = pair_weights(theta, missing[0], missing[1])
    n_comm = pi.shape[0]
    for c in range(n_comm):
        for d in range(n_comm):
            pi[c, d] = standard_gamma(a0 + n_cd[c, d], state) / (b0 + weights[c, d])


@njit(nogil=True, cache=True)
def _loglik_chunk(chunk, first, last, counts, factors, row_log, first_row):
    """``row_log[r] = sum of y log mu_ij - log y!`` over sender i = first_row + r's off-diagonal
    cells (``first_row``: 0 but for a partition of the senders, as :func:`_allocate_chunk`)."""
    indptr, indices, values = counts
    theta, pi = factors
    n_rows = row_log.shape[0]
    n_comm = theta.shape[1]
    sender_pi = np.zeros((1, n_comm))
    for r in range(first * ROWS_PER_STREAM, min(n_rows, last * ROWS_PER_STREAM)):
        i = first_row + r
        for d in range(n_comm):
            running = 0.0
            for c in range(n_comm):
                running += theta[i, c] * pi[c, d]
            sender_pi[0, d] = running
        total = 0.0
        for idx in range(indptr[r], indptr[r + 1]):
            y = values[idx]
            j = indices[idx]
            if y > 0 and j != i:
                total += y * math.log(dot_rows(sender_pi, 0, theta, j)) - log_factorial(y)
        row_log[r] = total


@njit(nogil=True, cache=True)
def _update_and_score(
    theta,
    pi,
    n_send,
    n_recv,
    n_cd,
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
    """:meth:`BlockModel.update_and_score` of data in one chunk, in one call: theta, pi, then the
    log likelihood of the counts and the log prior at the new factors (the same kernels and the
    same order of arithmetic as the hooks one by one)."""
    prior = (a0, b0)
    missing = (row_missing_indptr, row_missing_indices, column_missing_indptr, column_missing_indices)
    _update_theta(theta, pi, (n_send, n_recv), missing, prior, (chain_seed, iteration))
    _update_pi(pi, theta, n_cd, (row_missing_indptr, row_missing_indices), prior, (chain_seed, iteration))
    row_log = np.zeros(theta.shape[0])
    n_blocks = (theta.shape[0] + ROWS_PER_STREAM - 1) // ROWS_PER_STREAM
    _loglik_chunk(0, 0, n_blocks, (indptr, indices, values), (theta, pi), row_log, 0)
    weights = pair_weights(theta, row_missing_indptr, row_missing_indices)
    loglik = ordered_sum(row_log) - ordered_sum((weights * pi).ravel())
    return loglik + (gamma_log_prior(theta, a0, b0) + gamma_log_prior(pi, a0, b0))


@njit(nogil=True, cache=True)
def _poisson_chunk(chunk, first, last, rows, factors, tables, seeds, stats):
    """Draw ``y_ij ~ Poisson(scale_i mu_ij)`` at the observed cells with ``ytil_ij <= 0`` of
    the used senders, without visiting them: per community pair ``T_icd ~ Poisson(scale_i
    theta_ic pi_cd sum_j theta_jd)`` tokens, each placed at a receiver j with probability
    ``theta_jd / sum_j theta_jd`` (alias table over all actors) and dropped when its cell
    is not one of those (``j = i``, ``ytil > 0`` or excluded): Poisson thinning, as in the
    topic model's step.

    ``rows``: (use_row, noised counts, excluded indptr, excluded indices (sorted per row),
    scale), of the counts' rows; ``tables``: (theta's column sums, alias probability, alias
    index), (C, V) each; ``seeds``: as :func:`_allocate_chunk`'s (row r is actor first_row + r);
    ``stats``: (n_send, n_recv parts, n_cd parts). Returns the tokens' (rows, columns).
    """
    use_row, Y, excluded_indptr, excluded_indices, scale = rows
    theta, pi = factors
    theta_sum, probability, alias = tables
    chain_seed, iteration, stop, first_row = seeds
    n_send, n_recv_parts, n_cd_parts = stats
    n_recv = n_recv_parts[chunk]
    n_cd = n_cd_parts[chunk]
    n_rows = use_row.shape[0]
    n_comm = theta.shape[1]
    block_offset = first_row // ROWS_PER_STREAM
    state = np.empty(4, dtype=np.uint64)
    token_rows = np.empty(64, dtype=np.int64)
    token_cols = np.empty(64, dtype=np.int64)
    n_tokens = 0
    for block in range(first, last):
        if stop[0]:
            break
        seed_state(state, chain_seed, iteration, UNIT_POISSON + block_offset + block)
        for r in range(block * ROWS_PER_STREAM, min(n_rows, (block + 1) * ROWS_PER_STREAM)):
            if not use_row[r]:
                continue
            i = first_row + r
            start, end = excluded_indptr[r], excluded_indptr[r + 1]
            for d in range(n_comm):
                for c in range(n_comm):
                    tokens = sample_poisson(scale[r] * theta[i, c] * pi[c, d] * theta_sum[d], state)
                    if tokens == 0:
                        continue
                    token_rows = grow(token_rows, n_tokens + tokens)
                    token_cols = grow(token_cols, n_tokens + tokens)
                    for _ in range(tokens):
                        j = draw_alias(probability, alias, d, state)
                        if j == i or Y[r, j] > 0 or (end > start and in_sorted(excluded_indices, start, end, j)):
                            continue
                        n_send[r, c] += 1
                        n_cd[c, d] += 1
                        n_recv[j, d] += 1
                        token_rows[n_tokens] = r
                        token_cols[n_tokens] = j
                        n_tokens += 1
    return token_rows[:n_tokens], token_cols[:n_tokens]


# ---------------------------------------------------------------------------
# Variational inference (CAVI) kernels
# ---------------------------------------------------------------------------


@njit(nogil=True, cache=True, fastmath=FAST_DOT)
def _vi_allocate_chunk(chunk, first, last, counts, geo, stats, row_log, rows):
    """Expected allocation of the (expected) counts of senders in blocks [first, last)
    over community pairs: ``E[y_ijcd] = y_ij G[theta_ic] G[pi_cd] G[theta_jd] / W_ij``.

    Kept factored, so a cell costs O(C), not O(C^2): with
    ``s_id = sum_c G[theta_ic] G[pi_cd]``, ``W_ij = s_i . G[theta_j]``,
    ``stats`` = (R (n, C), receiver parts (chunks, n, C, 2) int64) get
    ``R_i = sum_j (y / W) G[theta_j]`` and ``n_recv_j += (y / W) s_i G[theta_j]`` (the
    expected counts received, ``G[theta_j] Q_j``) in fixed point
    (:func:`~lpviz.models._variational.add_fixed`: sums over senders exact in any order, so
    the same on any number of chunks or machines); then ``n_send = G[theta] (R G[pi]^T)``,
    ``n_cd = G[pi] (G[theta]^T R)`` (elementwise products).
    ``row_log[i] = sum_j y_ij log W_ij``. ``rows``: (first_row, stop flag): row r of the counts
    is sender first_row + r (0 but for a partition of the senders on another machine).
    """
    first_row, stop = rows
    indptr, indices, values = counts
    geo_theta, geo_pi = geo
    row_sums, column_parts = stats
    column_sums_part = column_parts[chunk]
    n_comm = geo_theta.shape[1]
    sender = np.empty(n_comm)
    row_sum = np.empty(n_comm)
    for r in range(first * ROWS_PER_STREAM, min(len(indptr) - 1, last * ROWS_PER_STREAM)):
        if stop[0]:
            return
        if indptr[r + 1] == indptr[r]:
            continue
        i = first_row + r
        for d in range(n_comm):
            running = 0.0
            for c in range(n_comm):
                running += geo_theta[i, c] * geo_pi[c, d]
            sender[d] = running
        row_sum[:] = 0.0
        total = 0.0
        for idx in range(indptr[r], indptr[r + 1]):
            y = values[idx]
            j = indices[idx]
            if not y > 0.0 or j == i:
                continue
            theta_j = geo_theta[j]
            weight = 0.0
            for d in range(n_comm):
                weight += sender[d] * theta_j[d]
            if not weight > 0.0:  # every G underflowed: the cell has no rate to share
                continue
            scale = y / weight
            column_j = column_sums_part[j]
            for d in range(n_comm):
                share = scale * theta_j[d]
                row_sum[d] += share
                add_fixed(column_j[d], share * sender[d])  # E[y_ij.d]: at most y, in fixed point
            total += y * math.log(weight)
        row_sums[r] = row_sum
        row_log[r] = total


@njit(nogil=True, cache=True, fastmath=FAST_DOT)
def _vi_moments_chunk(chunk, first, last, theta, pi, out):
    """Moments of ``mu_ij = theta_i^T pi theta_j`` (i != j) under mean-field q at every
    cell of the senders in stream blocks [first, last): ``E[mu]``, ``V[mu]`` and
    ``sum_cd G[theta_ic] G[pi_cd] G[theta_jd]``. With ``a = E[theta_i]``,
    ``b = E[theta_j]``, ``V`` and ``E2`` their variances and second moments::

        V[mu] = sum_d V[b_d] (a^T E[pi])_d^2 + sum_c V[a_c] (E[pi] b)_c^2
                + V[a]^T (E[pi]^2) V[b] + E2[a]^T V[pi] E2[b]

    ``theta``: (E, V, G) (n, C); ``pi``: (E, V, G) (C, C) and the receivers'
    ``(E[pi] E[theta_j])^2`` (n, C); ``out``: (mean, variance, G sum) blocks of
    rows from ``origin`` on, origin, the sender of row 0 (``first_row``: 0 but for a
    partition of the senders), stop flag. The diagonal gets values too
    (the model's structural zero: every caller skips it).
    """
    mean_theta, var_theta, geo_theta = theta
    mean_pi, var_pi, geo_pi, receiver_square = pi
    mean_out, var_out, weight_out, origin, first_row, stop = out
    n_actors, n_comm = mean_theta.shape
    sender = np.empty(n_comm)  # (a^T E[pi])_d
    sender_square = np.empty(n_comm)
    sender_var = np.empty(n_comm)  # (V[a]^T E[pi]^2)_d
    sender_second = np.empty(n_comm)  # (E2[a]^T V[pi])_d
    sender_geo = np.empty(n_comm)
    for row in range(first * ROWS_PER_STREAM, min(origin + mean_out.shape[0], last * ROWS_PER_STREAM)):
        if stop[0]:
            return
        r = row - origin
        i = first_row + row
        for d in range(n_comm):
            s = 0.0
            u = 0.0
            w = 0.0
            g = 0.0
            for c in range(n_comm):
                s += mean_theta[i, c] * mean_pi[c, d]
                u += var_theta[i, c] * mean_pi[c, d] * mean_pi[c, d]
                w += (var_theta[i, c] + mean_theta[i, c] * mean_theta[i, c]) * var_pi[c, d]
                g += geo_theta[i, c] * geo_pi[c, d]
            sender[d], sender_square[d], sender_var[d], sender_second[d], sender_geo[d] = s, s * s, u, w, g
        var_i = var_theta[i]
        for j in range(n_actors):
            mean_j, var_j, geo_j, square_j = mean_theta[j], var_theta[j], geo_theta[j], receiver_square[j]
            mean = 0.0
            variance = 0.0
            weight = 0.0
            for d in range(n_comm):
                mean += sender[d] * mean_j[d]
                variance += (
                    (sender_square[d] + sender_var[d]) * var_j[d]
                    + var_i[d] * square_j[d]
                    + sender_second[d] * (var_j[d] + mean_j[d] * mean_j[d])
                )
                weight += sender_geo[d] * geo_j[d]
            mean_out[r, j] = mean
            var_out[r, j] = variance
            weight_out[r, j] = weight


@njit(nogil=True, cache=True)
def _vi_update_theta(theta, pi_mean, n_theta, missing, prior):
    """CAVI update of every row of theta's Gamma q, one after another (rows are
    coupled, as in :func:`_update_theta`): ``shape_ic = a0 + n_ic``,
    ``rate_ic = b0 + sum_{j: (i,j) obs} (E[pi] E[theta_j])_c + sum_{j: (j,i) obs} (E[pi]^T E[theta_j])_c``.

    ``theta``: (shape, rate, mean, var, geo, elog); ``n_theta``: expected
    counts as sender plus as receiver. Returns theta's prior + entropy ELBO terms.
    """
    gamma_shape, gamma_rate, mean = theta[0], theta[1], theta[2]
    row_indptr, row_indices, col_indptr, col_indices = missing
    a0, b0 = prior
    n_actors, n_comm = mean.shape
    total = column_sums(mean)
    receivers = np.empty(n_comm)
    senders = np.empty(n_comm)
    old = np.empty(n_comm)
    elbo = 0.0
    for i in range(n_actors):
        _partner_sum(mean, total, i, row_indptr, row_indices, receivers)
        _partner_sum(mean, total, i, col_indptr, col_indices, senders)
        for c in range(n_comm):
            rate = b0
            for d in range(n_comm):
                rate += pi_mean[c, d] * receivers[d] + pi_mean[d, c] * senders[d]
            gamma_shape[i, c] = a0 + n_theta[i, c]
            gamma_rate[i, c] = rate
            old[c] = mean[i, c]
        elbo += refresh_row(theta, i, prior)
        for c in range(n_comm):
            total[c] += mean[i, c] - old[c]
    return elbo


def _no_cells(n_rows):
    """(indptr, indices) of no excluded cell in ``n_rows`` rows."""
    return np.zeros(n_rows + 1, dtype=np.int64), np.zeros(0, dtype=np.int64)


# ---------------------------------------------------------------------------
# The model
# ---------------------------------------------------------------------------


class BlockModel(Model):
    """Mixed-membership stochastic block model of a square network, no self loops.

    ``mu_ij = (theta_i^T pi) . theta_j`` for ``i != j``; ``theta`` (V, C)
    memberships, ``pi`` (C, C) community-to-community rates.
    """

    name = "blocks"
    label = "block model (mixed-membership SBM)"
    component_name = "community"
    factor_names = ("theta", "pi")
    kinds = ("network",)
    default_for = ("network",)
    inferences = ("mcmc", "vi")
    shows = ("memberships", "communities")

    def check_shape(self, shape):
        super().check_shape(shape)
        if shape[0] != shape[1]:
            raise ValueError(
                f"model='blocks' needs a square sender x recipient matrix, got shape {tuple(shape)}; "
                "use model='topics' for a documents x words matrix"
            )

    def structural_zeros(self, shape):
        return np.eye(shape[0], shape[1], dtype=bool)

    def factor_bytes(self, shape):
        return 8 * self.n_components * (int(shape[0]) + self.n_components)  # theta and pi

    def state_bytes(self, shape):
        n = shape[0]
        C = self.n_components
        return 8 * (n * C * (2 + 4 * 2) + 4 * 2 * C * C)

    # -- state ----------------------------------------------------------------------------
    # A chain's state is (theta, pi). A partition of the senders on another machine
    # (lpviz.distributed) holds (rows, theta, pi): its rows own no factor (``rows`` has zero
    # columns, :attr:`split_row_width`), theta and pi are every row's, drawn on the driver; the
    # hooks read theta and pi as ``state[-2:]`` and the rows' count as ``state[0].shape[0]``.
    first_row = 0  # the actor of the counts' first row (place_rows: a partition's first sender)

    def start_level(self, mean_count):
        """The scale of the start's gamma(1) draws: theta pi theta's products match the mean count."""
        C = self.n_components
        return (max(mean_count, 1e-2) / (C * C)) ** (1.0 / 3.0)

    def init_state(self, shape, mean_count, rng):
        C = self.n_components
        level = self.start_level(mean_count)
        theta = rng.gamma(1.0, level, (shape[0], C))
        pi = rng.gamma(1.0, level, (C, C))
        return (theta, pi)

    def factors(self, state):
        theta, pi = state[-2:]
        return {"theta": theta.copy(), "pi": pi.copy()}

    def set_factors(self, state, factors):
        theta, pi = state
        theta[...] = factors["theta"]
        pi[...] = factors["pi"]

    def low_rank(self, factors):
        theta = factors["theta"]
        return theta @ factors["pi"], theta

    def memberships(self, factors):
        return factors["theta"]

    def communities(self, factors):
        return factors["theta"]

    # -- kernels ----------------------------------------------------------------------------
    def rate_rows(self, state, rows):
        theta, pi = state[-2:]
        rows = np.asarray(rows)
        actors = rows + self.first_row
        mu = (theta[actors] @ pi) @ theta.T
        mu[np.arange(rows.size), actors] = 0.0
        return mu

    def new_stats(self, state, work):
        theta, pi = state[-2:]
        n, C = theta.shape
        n_chunks = len(work.bounds)
        return (
            np.zeros((state[0].shape[0], C), dtype=np.int64),  # the senders of these rows
            np.zeros((n_chunks, n, C), dtype=np.int64),  # every actor, as a receiver
            np.zeros((n_chunks, C, C), dtype=np.int64),
        )

    def _seeds(self, work, iteration):
        return (work.chain_seed, iteration, work.stop, self.first_row)

    def allocate(self, state, counts, stats, work, iteration):
        run_chunks(_allocate_chunk, work.bounds, work.stop, counts, state[-2:], self._seeds(work, iteration), stats)

    def poisson_allocate(self, state, rows, stats, work, iteration):
        theta, pi = state[-2:]
        tables = column_alias_tables(theta)
        tokens = run_chunks(
            _poisson_chunk, work.bounds, work.stop, rows, (theta, pi), tables, self._seeds(work, iteration), stats
        )
        return np.concatenate([t[0] for t in tokens]), np.concatenate([t[1] for t in tokens])

    def update(self, state, stats, work, iteration):
        theta, pi = state
        n_send, n_recv_parts, n_cd_parts = stats
        prior = (self.a0, self.b0)
        _update_theta(
            theta,
            pi,
            (n_send, n_recv_parts.sum(axis=0)),
            (*work.missing_by_row, *work.missing_by_column),
            prior,
            (work.chain_seed, iteration),
        )
        _update_pi(pi, theta, n_cd_parts.sum(axis=0), work.missing_by_row, prior, (work.chain_seed, iteration))

    def log_prior(self, state):
        theta, pi = state
        return gamma_log_prior(theta, self.a0, self.b0) + gamma_log_prior(pi, self.a0, self.b0)

    def count_loglik(self, state, counts, work):
        theta, pi = state
        weights = pair_weights(theta, *work.missing_by_row)
        return ordered_sum(self.row_loglik(state, counts, work)) - ordered_sum((weights * pi).ravel())

    # -- the chain over machines (lpviz.distributed) ------------------------------------------
    # Given theta and pi the senders' allocations are independent, so a partition of the senders
    # allocates its rows' counts; theta's conditional couples every actor (as a sender, a
    # receiver, and through the partner sums of every other actor's theta), so the driver draws
    # theta, one actor after another as :func:`_update_theta` does, and pi, from integer sums
    # the partitions return: n_send and n_recv (actors x C) and n_cd (C x C). Its rows own no
    # factor: theta and pi go to every partition each iteration (actors x C + C x C floats).
    split_row_width = 0  # the columns of a partition's own row factor: none (the driver holds theta)

    def split_shared_shapes(self, shape):
        """The factors the driver holds and draws, in the start's order: theta, then pi."""
        C = self.n_components
        return ((int(shape[0]), C), (C, C))

    def split_worker_bytes(self, shape, rows, n_chunks, dense_mean, variational=False):
        """Bytes a partition of ``rows`` senders holds beyond its rows' chain
        (:func:`lpviz.distributed.partition_bytes`): each chunk's n_recv part (every actor x C
        integers, :meth:`new_stats`) and, with the dense running mean, a saved sample's rates of
        every actor (:meth:`partition_rates` computes the n x n rates, then keeps its rows').
        ``variational``: a CAVI partition's instead (it computes no rates): each chunk's n_recv
        part in fixed point (two int64 a cell, :meth:`vi_new_stats`), their sum the sweep
        returns, and its senders' rows of R (rows x C floats)."""
        n, C = int(shape[0]), self.n_components
        if variational:
            return 16 * n_chunks * n * C + 16 * n * C + 8 * int(rows) * C
        return 8 * n_chunks * n * C + (8 * n * n if dense_mean else 0)

    def place_rows(self, start, stop):
        """This instance's counts are senders [start, stop) (a partition on another machine)."""
        self.first_row = int(start)

    def structural_zeros_of_rows(self, start, stop, n_cols):
        """The self loops of senders [start, stop): cells (r, start + r)."""
        zeros = np.zeros((stop - start, n_cols), dtype=bool)
        zeros[np.arange(stop - start), np.arange(start, stop)] = True
        return zeros

    def update_rows(self, state, n_send, work, iteration):
        """Nothing: the rows own no factor (theta is drawn on the driver, :meth:`update_columns`)."""

    def column_counts(self, stats):
        """What the driver's draw needs, integers summed over the row chunks: (n_send (every
        actor: zero outside these rows), n_recv, n_cd); their sums over partitions are exact."""
        n_send, n_recv_parts, n_cd_parts = stats
        n_recv = n_recv_parts.sum(axis=0)
        senders = np.zeros_like(n_recv)
        senders[self.first_row : self.first_row + n_send.shape[0]] = n_send
        return senders, n_recv, n_cd_parts.sum(axis=0)

    # On the driver: a fit's excluded pairs (held out; structural zeros of the release) by row and by
    # column, gathered from the partitions once per fit (keyed by the fit's driver ``work``: a model
    # instance may serve several fits), and the by-row lists of the pairs the last draw left out
    # (the rate sum of the same iteration, observed_rate_of_sums, leaves out the same)
    _excluded = None
    _rate_rows = None

    def update_columns(self, state, column_counts, theta_sum, work, iteration):
        """The driver's draw of theta, then pi, given every row's counts ``column_counts`` (as
        :meth:`column_counts`): :meth:`update`'s calls on the same numbers (``theta_sum`` unused:
        the driver holds theta)."""
        theta, pi = state[-2:]
        n_send, n_recv, n_cd = column_counts
        prior = (self.a0, self.b0)
        seeds = (work.chain_seed, iteration)
        if self._excluded is not None and self._excluded[0] is work:
            by_row, by_column = self._excluded[1]
        else:
            by_row = by_column = _no_cells(theta.shape[0])
        self._rate_rows = by_row
        _update_theta(theta, pi, (n_send, n_recv), (*by_row, *by_column), prior, seeds)
        _update_pi(pi, theta, n_cd, by_row, prior, seeds)

    def update_columns_excluded(self, state, column_counts, theta_sum, work, iteration, through_rows):
        """:meth:`update_columns` leaving out the excluded pairs, which the partitions hand over once
        in row order (``through_rows``: their (sender, receiver) pairs, 16 bytes each); the driver
        keeps their lists by row and by column, as one process's ``work`` holds them."""
        self._excluded_lists(work, state[-2].shape[0], through_rows)
        self.update_columns(state, column_counts, theta_sum, work, iteration)

    def _excluded_lists(self, work, n, through_rows):
        """The excluded pairs by row and by column, gathered once per fit (keyed by ``work``)."""
        if self._excluded is None or self._excluded[0] is not work:
            pairs = through_rows("pairs", np.zeros((0, 2), dtype=np.int64), {})
            by_column = np.lexsort((pairs[:, 0], pairs[:, 1]))  # by receiver, senders ascending
            lists = (
                (np.concatenate([[0], np.cumsum(np.bincount(pairs[:, 0], minlength=n))]), pairs[:, 1].copy()),
                (np.concatenate([[0], np.cumsum(np.bincount(pairs[:, 1], minlength=n))]), pairs[by_column, 0]),
            )
            self._excluded = (work, lists)
        return self._excluded[1]

    def rows_pass(self, kind, state, work, carry):
        """These rows' excluded pairs (``kind`` "pairs"), (sender, receiver), appended to ``carry``."""
        indptr, indices = work.missing_by_row
        senders = self.first_row + np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
        return np.concatenate([carry, np.stack([senders, indices], axis=1).astype(np.int64)])

    @staticmethod
    def excluded_rate_from(state, work, carry):
        """Nothing to add: the driver's rate sum (:meth:`observed_rate_of_sums`) leaves the excluded
        pairs out itself, as :meth:`count_loglik` does."""
        return carry

    def row_loglik(self, state, counts, work):
        """Per sender row, ``sum over its cells of y log mu - log y!`` (the rate sum is subtracted once)."""
        row_log = np.zeros(state[0].shape[0])
        run_chunks(_loglik_chunk, work.bounds, work.stop, counts, state[-2:], row_log, self.first_row)
        return row_log

    def observed_rate_of_sums(self, theta_sum, theta, pi):
        """:meth:`count_loglik`'s rate sum over the observed pairs: the same arithmetic (the driver
        holds theta; the pairs left out are those of this iteration's draw; ``theta_sum`` unused)."""
        by_row = self._rate_rows if self._rate_rows is not None else _no_cells(theta.shape[0])
        return ordered_sum((pair_weights(theta, *by_row) * pi).ravel())

    def partition_rates(self, factors, start, stop):
        """The rates of senders [start, stop), as :meth:`rates` computes them for every actor (the
        same arithmetic: a saved sample's dense rates, summed on the worker holding those rows)."""
        return self.rates(factors)[start:stop]

    def partition_rate_rows(self, samples, start, stop, n_samples):
        """Posterior mean rates of senders [start, stop) from the saved ``samples`` (factor dicts),
        as :meth:`lpviz.engine.Posterior.rate_rows` computes them (low-rank, self loops 0)."""
        left = np.hstack([self.low_rank(f)[0][start:stop] for f in samples])
        right = np.hstack([self.low_rank(f)[1] for f in samples])
        mu = low_rank_rows(left, right) / n_samples
        mu[np.arange(stop - start), np.arange(start, stop)] = 0.0
        return mu

    def update_and_score(self, state, stats, counts, work, iteration):
        if len(work.bounds) > 1:
            return super().update_and_score(state, stats, counts, work, iteration)
        theta, pi = state
        n_send, n_recv_parts, n_cd_parts = stats
        return _update_and_score(
            theta,
            pi,
            n_send,
            n_recv_parts[0],
            n_cd_parts[0],
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
    # q is (theta, pi): two GammaFactor. A partition of the senders on another machine
    # (lpviz.distributed) holds (its rows' empty factor, theta, pi): theta and pi are q[-2:],
    # and q[0] has a row per row of the counts.
    def vi_init(self, shape, mean_count, rng):
        theta, pi = self.init_state(shape, mean_count, rng)
        prior = (self.a0, self.b0)
        return (GammaFactor.around(theta, VI_INIT_SHAPE, prior), GammaFactor.around(pi, VI_INIT_SHAPE, prior))

    def vi_factors(self, q):
        theta, pi = q[-2:]
        return {"theta": theta.mean.copy(), "pi": pi.mean.copy()}

    def vi_moments(self, q, start, stop, bounds, work):
        theta, pi = q[-2:]
        shape = (stop - start, theta.n_rows)
        mean_mu, var_mu, weight_mu = np.empty(shape), np.empty(shape), np.empty(shape)
        receiver = theta.mean @ pi.mean.T  # (E[pi] E[theta_j])_c
        run_chunks(
            _vi_moments_chunk,
            bounds,
            work.stop,
            (theta.mean, theta.var, theta.geo),
            (pi.mean, pi.var, pi.geo, receiver * receiver),
            (mean_mu, var_mu, weight_mu, start, self.first_row, work.stop),
        )
        return mean_mu, var_mu, weight_mu

    def vi_rates(self, q, start, stop, weights):
        theta, pi = q[-2:]
        theta_w = weights_of(theta, weights)
        first, last = self.first_row + start, self.first_row + stop
        rates = (theta_w[first:last] @ weights_of(pi, weights)) @ theta_w.T
        rates[np.arange(stop - start), np.arange(first, last)] = 0.0  # no self loops
        return rates

    def vi_new_stats(self, q, work):
        # R: a row per row of the counts; the receivers' parts: every actor
        n, C = q[-2].n_rows, self.n_components
        receiver_parts = np.zeros((len(work.bounds), n, C, 2), dtype=np.int64)
        return {"sums": (np.zeros((q[0].n_rows, C)), receiver_parts), "weights": "geometric"}

    def vi_allocate(self, q, counts, stats, work, weights="geometric"):
        theta, pi = q[-2:]
        stats["weights"] = weights
        # the counts each actor receives bound its fixed-point sums: refuse what would overflow
        # (a CSR of the positive expected counts: summed as they are, no copy of a float a cell)
        received = np.bincount(counts[1], counts[2], theta.n_rows)
        stats["bound"] = check_fixed_bound(float(received.max(initial=0.0)))
        row_log = np.zeros(len(counts[0]) - 1)
        factors = (weights_of(theta, weights), weights_of(pi, weights))
        rows = (self.first_row, work.stop)
        run_chunks(_vi_allocate_chunk, work.bounds, work.stop, counts, factors, stats["sums"], row_log, rows)
        return row_log

    def vi_update(self, q, stats, work):
        row_sums, column_parts = stats["sums"]
        missing = (*work.missing_by_row, *work.missing_by_column)
        return self._vi_update_global(q, row_sums, fixed_total(column_parts), stats["weights"], missing)

    def _vi_update_global(self, q, row_sums, n_recv, weights, missing):
        """q(theta) and q(pi) from every sender's ``R`` (``row_sums``) and the expected counts
        received (``n_recv``); ``missing``: the excluded pairs by row and by column. Returns the
        factors' ELBO terms."""
        theta, pi = q[-2:]
        theta_w, pi_w = weights_of(theta, weights), weights_of(pi, weights)
        n_theta = theta_w * (row_sums @ pi_w.T) + n_recv
        n_cd = pi_w * (theta_w.T @ row_sums)
        gap = 0.0
        if weights == "arithmetic":  # the allocation's distance from the optimum, at the q it used
            gap = allocation_gap(theta, n_theta) + allocation_gap(pi, n_cd)
        old_elog = (theta.elog.copy(), pi.elog.copy())
        prior = (self.a0, self.b0)
        theta_elbo = _vi_update_theta(theta.arrays(), pi.mean, n_theta, missing, prior)
        weights = pair_weights(theta.mean, *missing[:2])
        pi.gamma_shape[...] = self.a0 + n_cd
        pi.gamma_rate[...] = self.b0 + weights
        pi_elbo = pi.refresh()
        observed_rate = ordered_sum((weights * pi.mean).ravel())
        # the allocation q stays as allocated: its log-rate terms move with E[log theta], E[log pi]
        moved = float(np.sum(n_theta * (theta.elog - old_elog[0]))) + float(np.sum(n_cd * (pi.elog - old_elog[1])))
        return moved - gap - observed_rate + theta_elbo + pi_elbo

    # CAVI over machines (lpviz.distributed): the partitions run the local step and the allocation
    # of their senders at the driver's q(theta), q(pi) and return their rows of R (handed on in row
    # order: concatenated) and their fixed-point parts of the expected counts received (integers:
    # summed exactly); the driver runs :meth:`_vi_update_global`, the one-process update's own call.
    def vi_update_rows(self, q, row_sums, weights, work):
        """Nothing to update (the rows own no factor): these senders' rows of R."""
        return row_sums

    def vi_no_totals(self):
        """R of no sender yet."""
        return np.zeros((0, self.n_components))

    def vi_row_totals(self, q, rows, carry):
        """R of the senders so far, these rows' appended."""
        return np.concatenate([carry, rows])

    def vi_update_columns(self, q, columns, weights, totals, work, through_rows=None):
        """The driver's update of q(theta), q(pi) from every sender's R (``totals``) and the
        expected counts received (``columns``: (n_recv,)); the excluded pairs come once per fit
        from the partitions in row order (``through_rows``, as :meth:`update_columns_excluded`)."""
        (n_recv,) = columns
        n = q[-2].n_rows
        if through_rows is None:
            by_row = by_column = _no_cells(n)
        else:
            by_row, by_column = self._excluded_lists(work, n, through_rows)
        return self._vi_update_global(q, totals, n_recv, weights, (*by_row, *by_column))

    def vi_rows_pass(self, kind, q, work, carry):
        """These rows' excluded pairs (``kind`` "pairs"), (sender, receiver), appended to ``carry``."""
        return self.rows_pass(kind, None, work, carry)
