"""The private method: the true counts are latent, drawn given the noised ones each sweep.

``sampler="bessel"`` is the paper's route (Schein et al., ICML 2019; DESIGN.md
section 1). For one observed cell with noised count ``ytil``, current rate
``mu`` and noise rates ``lambda+``, ``lambda-``:
``m ~ Bessel(|ytil|, 2 sqrt((lambda+ + mu) lambda-))``; split into
``y+ = y + g+`` and ``g-``; ``y ~ Binomial(y+, mu / (mu + lambda+))``; then
``lambda* ~ Gamma(1 + g*, rate 1/alpha)`` -- the posterior of the exponential
prior with rate ``(1-alpha)/alpha`` (the ICML paper's ``alpha/(1-alpha) + 1``
is a typo). ``alpha`` is per row (heterogeneous noise).

Each sweep also records, per row, the noise term ``log Geom2(ytil - y; alpha)``
of the log joint (``g`` and ``lambda`` integrated out exactly).
"""

import math

import numpy as np
from numba import njit

from lpviz._parallel import ROWS_PER_STREAM, chunk_bounds, run_chunks
from lpviz._random import seed_state, seed_stream, uniform
from lpviz.bessel import sample_stream
from lpviz.methods.base import Method, Prepared
from lpviz.models._kernels import binomial, ordered_sum

UNIT_LATENT = 5 << 40
# Rows of rates computed at once (a dense block of rates of at most this many cells).
BLOCK_CELLS = 1 << 22
# Below these sizes the cheap exact construction beats numba's generic sampler.
_SMALL_GAMMA_SHAPE = 12


# ---------------------------------------------------------------------------
# Per-cell steps (the Bessel route)
# ---------------------------------------------------------------------------

@njit(nogil=True, cache=True)
def _gamma_large(shape, scale):
    return np.random.gamma(shape, scale)


@njit(nogil=True, cache=True, inline="always")
def gamma_integer_shape(shape, scale, state):
    """Gamma(shape, scale) for integer shape >= 1: ``-log`` of a product of
    uniforms for the small shapes the noise rates meet (exact, one log)."""
    if shape <= _SMALL_GAMMA_SHAPE:
        product = 1.0
        for _ in range(shape):
            product *= 1.0 - uniform(state)  # in (0, 1]: log stays finite
        return -scale * math.log(product)
    return _gamma_large(shape, scale)


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
    return (gamma_integer_shape(1 + g_plus, posterior_scale, state),
            gamma_integer_shape(1 + g_minus, posterior_scale, state))


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
                if next_excluded < excluded_indptr[d + 1] and excluded_indices[next_excluded] == v:
                    next_excluded += 1
                    continue
                ytil = np.int64(Y[d, v])
                y, g_plus, g_minus, m = sample_true_count(ytil, mu[d - origin, v], lambda_plus[d, v],
                                                          lambda_minus[d, v], state)
                lambda_plus[d, v], lambda_minus[d, v] = draw_noise_rates(g_plus, g_minus, scale, state)
                y_latent[d, v] = y
                bessel_m[d, v] = m
                n_cells += 1
                noise_size += abs(ytil - y)
            row_terms[d] = geometric_log_lik(n_cells, noise_size, alpha[d])


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
# The method
# ---------------------------------------------------------------------------

def smallest_int_dtype(values):
    """The smallest signed integer dtype that holds every entry of ``values``."""
    low, high = (int(values.min()), int(values.max())) if values.size else (0, 0)
    for dtype in (np.int8, np.int16, np.int32, np.int64):
        info = np.iinfo(dtype)
        if info.min <= low and high <= info.max:
            return dtype
    return np.int64


def row_blocks(n_rows, n_cols):
    """Row ranges aligned to stream blocks whose dense rates stay below :data:`BLOCK_CELLS` cells."""
    rows = max(ROWS_PER_STREAM, (BLOCK_CELLS // max(n_cols, 1)) // ROWS_PER_STREAM * ROWS_PER_STREAM)
    return [(start, min(n_rows, start + rows)) for start in range(0, n_rows, rows)]


class Private(Method):
    name = "private"
    label = "private (models the noise)"
    color = "#d62728"
    description = ("Treats the true counts as latent and draws them given the noised counts and the "
                   "noise level each sweep (Schein et al. 2019): the noise is part of the model.")
    needs_alpha = True
    options = {"sampler": ("bessel",)}

    def prepare(self, counts, alpha, excluded):
        counts = np.asarray(counts)
        fitted = np.ascontiguousarray(counts, dtype=smallest_int_dtype(counts))
        observed_sum = float(np.maximum(fitted, 0).sum())
        if excluded.mask is not None:
            observed_sum -= float(np.maximum(fitted, 0)[excluded.mask].sum())
        return Prepared(counts=fitted, alpha=alpha, excluded=excluded.rows,
                        mean_count=observed_sum / max(excluded.n_observed, 1))

    def state_bytes(self, shape, model):
        n_cells = int(shape[0]) * int(shape[1])
        return n_cells * (8 + 8 + 8 + 8) + 8 * min(n_cells, BLOCK_CELLS)

    def start(self, prepared, model, state, work, rng):
        shape = prepared.counts.shape
        # Exponential prior on lambda with mean alpha/(1-alpha).
        prior_mean = (prepared.alpha / (1.0 - prepared.alpha))[:, None]
        return {"lambda_plus": rng.exponential(1.0, shape) * prior_mean,
                "lambda_minus": rng.exponential(1.0, shape) * prior_mean,
                "y": np.zeros(shape, dtype=np.int64), "bessel": np.zeros(shape, dtype=np.int64),
                "posterior_scale": prepared.alpha.copy()}

    def sweep(self, prepared, latent, model, state, stats, work, iteration):
        Y = prepared.counts
        n_rows, n_cols = Y.shape
        data = (Y, prepared.alpha, *prepared.excluded)
        arrays = (latent["lambda_plus"], latent["lambda_minus"], latent["y"], latent["bessel"],
                  latent["posterior_scale"])
        row_terms = np.zeros(n_rows)
        seeds = (work.chain_seed, iteration, work.stop)
        for start, stop in row_blocks(n_rows, n_cols):
            mu = model.rate_rows(state, start, stop)
            bounds = _shift(chunk_bounds(stop - start, mu.size, work.parallel), start // ROWS_PER_STREAM)
            run_chunks(_bessel_chunk, bounds, work.stop, data, (mu, start), arrays, seeds, row_terms)
        counts = positive_csr(latent["y"], 0, n_rows)
        model.allocate(state, counts, stats, work, iteration)
        return counts, {"noise": ordered_sum(row_terms)}


def _shift(bounds, offset):
    return [(first + offset, last + offset) for first, last in bounds]
