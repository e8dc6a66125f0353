"""Numba kernels for the two Poisson factorization models and the private step.

Models (gamma priors with shape ``a0`` and rate ``b0`` on every factor):

- ``"topics"``: ``mu_dv = sum_k theta_dk phi_kv`` (Poisson matrix
  factorization / a topic model). Inside the kernels ``phi`` is stored
  transposed as ``phiT`` (V, K), so every cell reads two contiguous K-vectors.
- ``"blocks"``: ``mu_ij = sum_cd theta_ic theta_jd pi_cd`` for ``i != j``
  (mixed-membership stochastic block model); the diagonal is never observed.

Every kernel is a small function over arrays. Parallel kernels split rows into
fixed blocks of :data:`ROWS_PER_STREAM` rows, and seed the random streams of
each block from (chain seed, iteration, unit), so a chain does not depend on
the number of threads. The per-cell draws of the sweeps come from a
xoshiro256** ``state`` (uint64[4], :mod:`lpviz._random`) held by the block;
the generic samplers (``np.random.gamma`` for the factors, large binomials and
gammas) from Numba's thread-local generator, reseeded per block. Latent counts are integers, so
per-chunk count accumulators sum to the same result in any order.

The private step (DESIGN.md section 1) for one observed cell with noised count
``ytil``, current rate ``mu`` and noise rates ``lambda+``, ``lambda-``:
``m ~ Bessel(|ytil|, 2 sqrt((lambda+ + mu) lambda-))``; split into
``y+ = y + g+`` and ``g-``; ``y ~ Binomial(y+, mu / (mu + lambda+))``; then
``lambda* ~ Gamma(1 + g*, rate 1/alpha)`` -- the posterior of the
exponential prior with rate ``(1-alpha)/alpha`` (the ICML paper's
``alpha/(1-alpha) + 1`` is a typo).

Missing cells are left out of the likelihood: rate sums are computed as the
full factor sums minus the contributions of the missing cells, which are
passed as compressed lists (``missing_indptr``/``missing_indices`` by row, and
by column where a column-parallel update needs them).
"""

import math
import types

import numpy as np
from numba import njit, prange, types as nbtypes
from numba.core import cgutils
from numba.extending import intrinsic

from lpviz._random import seed_state, seed_stream, uniform
from lpviz.bessel import sample_stream

__all__ = [
    "ROWS_PER_STREAM",
    "sample_true_count", "draw_noise_rates",
    "topics_sweep_fixed", "topics_sweep_private", "topics_update_factor",
    "topics_count_loglik", "topics_dense_loglik", "topics_missing_rate_sum",
    "blocks_sweep_fixed", "blocks_sweep_private", "blocks_update_theta", "blocks_update_pi",
    "blocks_pair_weights", "blocks_count_loglik", "blocks_dense_loglik",
    "gamma_log_prior", "dense_to_csr", "rates", "kernels",
]

# Rows that share one random stream. Fixed (not tied to the thread count) so
# the chain is the same for any number of threads; large enough that reseeding
# the Mersenne Twister (~1 us) is negligible next to the rows' work.
ROWS_PER_STREAM = 8

# Unit offsets: each phase of an iteration draws from its own streams.
UNIT_SWEEP = 0
UNIT_THETA = 1 << 40
UNIT_PHI = 2 << 40
UNIT_PI = 3 << 40

# Up to this many tokens a cell's allocation walks the weights per token.
_FEW_TOKENS = 4

# Below these sizes the cheap exact constructions beat numba's generic samplers.
_SMALL_BINOMIAL = 16
_SMALL_GAMMA_SHAPE = 12

# log(y!) for the small counts that dominate the Poisson log likelihood.
_LOG_FACTORIAL = np.array([math.lgamma(y + 1.0) for y in range(256)])

# Reassociation lets LLVM vectorise the K-long dot products; results stay
# deterministic (the same code runs for a cell whatever thread runs it).
_FAST_DOT = {"reassoc", "contract", "nsz", "arcp"}


# ---------------------------------------------------------------------------
# Small exact samplers and helpers
# ---------------------------------------------------------------------------

# Per-cell helpers take (matrix, row) pairs rather than row views and are
# inlined into the sweeps: a call that passes arrays reference-counts them,
# which costs as much as the arithmetic.


@intrinsic
def _borrow(typingctx, arr):
    """A view of ``arr`` that Numba does not reference-count (NULL meminfo).

    Numba counts references to arrays with atomic operations, and inlining a
    helper that takes an array aliases it, so the per-cell loops paid several
    atomic increments and decrements per cell (~15% of a sweep on one thread;
    with more threads the shared counters of theta and phi bounce between
    cores). The hot loops therefore work on borrowed views. A borrowed view
    must not outlive its array: the kernels borrow their arguments (alive for
    the whole call) and keep their own buffers alive with :func:`_keep_alive`.
    """
    if not isinstance(arr, nbtypes.Array):
        return None

    def codegen(context, builder, signature, args):
        view = cgutils.create_struct_proxy(signature.return_type)(context, builder, value=args[0])
        view.meminfo = cgutils.get_null_value(view.meminfo.type)
        view.parent = cgutils.get_null_value(view.parent.type)
        return view._getvalue()

    return arr(arr), codegen


@njit(nogil=True, cache=True)
def _keep_alive(buffer):
    """A use of ``buffer`` after its borrowed views' last use: Numba frees an
    array after the last use of its own variable."""
    return buffer.shape[0]


@njit(nogil=True, cache=True, fastmath=_FAST_DOT)
def _dot(x, y):
    total = 0.0
    for k in range(x.shape[0]):
        total += x[k] * y[k]
    return total


@njit(nogil=True, cache=True, fastmath=_FAST_DOT)
def _dot_rows(A, i, B, j):
    """``A[i] . B[j]``."""
    total = 0.0
    for k in range(A.shape[1]):
        total += A[i, k] * B[j, k]
    return total


@njit(nogil=True, cache=True)
def _binomial_large(n, p):
    return np.random.binomial(n, p)


@njit(nogil=True, cache=True, inline="always")
def _binomial(n, p, state):
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


@njit(nogil=True, cache=True)
def _gamma_large(shape, scale):
    return np.random.gamma(shape, scale)


@njit(nogil=True, cache=True, inline="always")
def _gamma_integer_shape(shape, scale, state):
    """Gamma(shape, scale) for integer shape >= 1.

    A sum of ``shape`` unit exponentials: ``-log`` of a product of uniforms,
    exact and a single log for the small shapes the noise rates meet.
    """
    if shape <= _SMALL_GAMMA_SHAPE:
        product = 1.0
        for _ in range(shape):
            product *= 1.0 - uniform(state)  # in (0, 1]: log stays finite
        return -scale * math.log(product)
    return _gamma_large(shape, scale)


@njit(nogil=True, cache=True, inline="always")
def _draw_index(cumulative, row, n, state):
    """An index k < n drawn with probability proportional to the increments of
    ``cumulative[row]`` (binary search)."""
    total = cumulative[row, n - 1]
    if not total > 0.0:
        # All weights underflowed: the model gives such a cell rate 0, so any
        # component is as (im)plausible as another.
        return int(uniform(state) * n)
    u = uniform(state) * total
    lo = 0
    hi = n - 1
    while lo < hi:
        mid = (lo + hi) >> 1
        if u < cumulative[row, mid]:
            hi = mid
        else:
            lo = mid + 1
    return lo


@njit(nogil=True, cache=True, inline="always")
def sample_true_count(ytil, mu, lambda_plus, lambda_minus, state):
    """Steps 1-3 of the private sweep for one cell: ``(y, g_plus, g_minus, m)``.

    An exact draw of the true count ``y`` and the noise parts ``g+``, ``g-``
    from ``p(y, g+, g- | ytil, mu, lambda+, lambda-)`` where
    ``ytil = y + g+ - g-``, ``y ~ Pois(mu)``, ``g* ~ Pois(lambda*)``; ``m`` is
    the Bessel draw ``min(y + g+, g-)``. ``state``: see :func:`lpviz._random.uniform`.
    """
    # Bessel(|ytil|, a) with a^2/4 = (lambda+ + mu) lambda-.
    m = sample_stream(float(abs(ytil)), (lambda_plus + mu) * lambda_minus, state)
    if ytil <= 0:
        y_plus = m
        g_minus = m - ytil
    else:
        g_minus = m
        y_plus = m + ytil
    y = _binomial(y_plus, mu / (mu + lambda_plus), state) if mu > 0.0 else 0
    return y, y_plus - y, g_minus, m


@njit(nogil=True, cache=True, inline="always")
def draw_noise_rates(g_plus, g_minus, posterior_scale, state):
    """Step 4: ``lambda* ~ Gamma(1 + g*, scale posterior_scale)`` (scale alpha:
    rate 1/alpha), the posterior of the Exp(rate (1-alpha)/alpha) prior.

    When ``g+ + g- <= 1`` (about two cells in three) both come from one log:
    for independent ``X ~ Gamma(a)``, ``Z ~ Gamma(b)`` (one scale),
    ``S = X + Z ~ Gamma(a + b)`` and ``B = X / S ~ Beta(a, b)`` are
    independent, so ``(S B, S (1 - B))`` has exactly the law of ``(X, Z)``.
    ``S`` is ``-log`` of a product of ``a + b`` uniforms and ``B`` a uniform
    (Beta(1, 1)) or the larger or smaller of two (Beta(2, 1), Beta(1, 2)).
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
    return (_gamma_integer_shape(1 + g_plus, posterior_scale, state),
            _gamma_integer_shape(1 + g_minus, posterior_scale, state))


@njit(nogil=True, cache=True)
def _geometric_log_lik(n_cells, total_size, alpha):
    """Sum of ``log Geom2(tau; alpha)`` over ``n_cells`` noise values whose
    absolute values sum to ``total_size``."""
    if n_cells == 0:
        return 0.0
    return n_cells * math.log((1.0 - alpha) / (1.0 + alpha)) + total_size * math.log(alpha)


@njit(nogil=True, cache=True)
def _chunk_blocks(chunk, n_chunks, n_rows):
    """The stream blocks [first, last) that chunk ``chunk`` of ``n_chunks`` sweeps."""
    n_blocks = (n_rows + ROWS_PER_STREAM - 1) // ROWS_PER_STREAM
    return chunk * n_blocks // n_chunks, (chunk + 1) * n_blocks // n_chunks


@njit(nogil=True, cache=True)
def _log_factorial(y):
    return _LOG_FACTORIAL[y] if y < 256 else math.lgamma(y + 1.0)


@njit(nogil=True, cache=True)
def _ordered_sum(values):
    """Left-to-right sum. Inside a parallel kernel ``values.sum()`` becomes a
    parallel reduction whose rounding depends on the thread count."""
    total = 0.0
    for i in range(values.shape[0]):
        total += values[i]
    return total


@njit(nogil=True, cache=True)
def _sum_parts(parts):
    total = parts[0].copy()
    for c in range(1, parts.shape[0]):
        total += parts[c]
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
        value = max(flat[i], 2.2250738585072014e-308)
        total += const + (a0 - 1.0) * math.log(value) - b0 * value
    return total


@njit(nogil=True, cache=True, fastmath=_FAST_DOT, inline="always")
def _draw_product(A, i, B, j, total, state):
    """An index k drawn with probability ∝ A[i, k] B[j, k]; ``total`` = A[i] . B[j].

    A walk along the running sum that stops early: cheaper than building the
    cumulative sums when only a token or two is drawn.
    """
    u = uniform(state) * total
    running = 0.0
    n = A.shape[1]
    for k in range(n):
        # A zero weight is never chosen: u >= running already held at k - 1.
        running += A[i, k] * B[j, k]
        if u < running:
            return k
    # ``total`` summed in another order can exceed the walk's sum by ~1e-16:
    # take the last component with weight.
    for k in range(n - 1, -1, -1):
        if A[i, k] * B[j, k] > 0.0:
            return k
    # All weights underflowed: the model gives such a cell rate 0, so any
    # component is as (im)plausible as another.
    return int(uniform(state) * n)


@njit(nogil=True, cache=True, inline="always")
def _cumulative_product(A, i, B, j, cumulative):
    """``cumulative[0, k] = sum_{l <= k} A[i, l] B[j, l]``."""
    running = 0.0
    for k in range(A.shape[1]):
        running += A[i, k] * B[j, k]
        cumulative[0, k] = running


# ---------------------------------------------------------------------------
# Topic model: mu_dv = theta_d . phiT_v
# ---------------------------------------------------------------------------

@njit(nogil=True, cache=True, inline="always")
def _topics_allocate(theta, d, phiT, v, y, mu, cumulative, n_dk, n_vk, state):
    """Split ``y`` tokens of cell (d, v) over topics (prob ∝ theta_dk phi_vk).

    ``mu`` is the cell's rate (the sum of the weights); ``cumulative`` a
    (1, K) buffer. O(K) per token by walking for a few tokens;
    O(K + y log K) with cumulative sums beyond.
    """
    if y <= _FEW_TOKENS:
        for _ in range(y):
            k = _draw_product(theta, d, phiT, v, mu, state)
            n_dk[d, k] += 1
            n_vk[v, k] += 1
        return
    _cumulative_product(theta, d, phiT, v, cumulative)
    n_topics = theta.shape[1]
    for _ in range(y):
        k = _draw_index(cumulative, 0, n_topics, state)
        n_dk[d, k] += 1
        n_vk[v, k] += 1


@njit(nogil=True, cache=True)
def _topics_fixed_blocks(indptr, indices, counts, theta, phiT, chain_seed, iteration, first, last,
                         n_dk, n_vk):
    """Stream blocks [first, last) of :func:`topics_sweep_fixed` (one chunk)."""
    indptr = _borrow(indptr)
    indices = _borrow(indices)
    counts = _borrow(counts)
    theta = _borrow(theta)
    phiT = _borrow(phiT)
    n_dk = _borrow(n_dk)
    n_vk = _borrow(n_vk)
    n_docs, n_topics = theta.shape
    cumulative_buffer = np.empty((1, n_topics))
    cumulative = _borrow(cumulative_buffer)
    state_buffer = np.empty(4, dtype=np.uint64)
    state = _borrow(state_buffer)
    for block in range(first, last):
        seed_stream(chain_seed, iteration, UNIT_SWEEP + block)
        seed_state(state, chain_seed, iteration, UNIT_SWEEP + block)
        for d in range(block * ROWS_PER_STREAM, min(n_docs, (block + 1) * ROWS_PER_STREAM)):
            for idx in range(indptr[d], indptr[d + 1]):
                v = indices[idx]
                _topics_allocate(theta, d, phiT, v, counts[idx], _dot_rows(theta, d, phiT, v),
                                 cumulative, n_dk, n_vk, state)
    _keep_alive(cumulative_buffer)
    _keep_alive(state_buffer)


@njit(nogil=True, cache=True, parallel=True)
def topics_sweep_fixed(indptr, indices, counts, theta, phiT, chain_seed, iteration, n_chunks):
    """Allocate fixed counts (CSR of observed nonzero cells) to topics.

    Returns ``(n_dk (D, K), n_vk (V, K))`` int64 topic counts.
    """
    n_docs, n_topics = theta.shape
    n_words = phiT.shape[0]
    n_dk = np.zeros((n_docs, n_topics), dtype=np.int64)
    n_vk_parts = np.zeros((n_chunks, n_words, n_topics), dtype=np.int64)
    for chunk in prange(n_chunks):
        first, last = _chunk_blocks(chunk, n_chunks, n_docs)
        _topics_fixed_blocks(indptr, indices, counts, theta, phiT, chain_seed, iteration, first, last,
                             n_dk, n_vk_parts[chunk])
    return n_dk, _sum_parts(n_vk_parts)


@njit(nogil=True, cache=True)
def _topics_private_blocks(Y_obs, observed, has_mask, theta, phiT, lambda_plus, lambda_minus,
                           y_latent, bessel_m, alpha, posterior_scale, chain_seed, iteration,
                           first, last, n_dk, n_vk, row_log):
    """Stream blocks [first, last) of :func:`topics_sweep_private` (one chunk)."""
    Y_obs = _borrow(Y_obs)
    observed = _borrow(observed)
    theta = _borrow(theta)
    phiT = _borrow(phiT)
    lambda_plus = _borrow(lambda_plus)
    lambda_minus = _borrow(lambda_minus)
    y_latent = _borrow(y_latent)
    bessel_m = _borrow(bessel_m)
    n_dk = _borrow(n_dk)
    n_vk = _borrow(n_vk)
    n_docs, n_topics = theta.shape
    n_words = phiT.shape[0]
    cumulative_buffer = np.empty((1, n_topics))
    cumulative = _borrow(cumulative_buffer)
    state_buffer = np.empty(4, dtype=np.uint64)
    state = _borrow(state_buffer)
    for block in range(first, last):
        seed_stream(chain_seed, iteration, UNIT_SWEEP + block)
        seed_state(state, chain_seed, iteration, UNIT_SWEEP + block)
        for d in range(block * ROWS_PER_STREAM, min(n_docs, (block + 1) * ROWS_PER_STREAM)):
            scale = posterior_scale[d]
            n_cells = 0
            noise_size = 0
            for v in range(n_words):
                if has_mask and not observed[d, v]:
                    continue
                mu = _dot_rows(theta, d, phiT, v)
                y, g_plus, g_minus, m = sample_true_count(
                    Y_obs[d, v], mu, lambda_plus[d, v], lambda_minus[d, v], state)
                lambda_plus[d, v], lambda_minus[d, v] = draw_noise_rates(g_plus, g_minus, scale, state)
                y_latent[d, v] = y
                bessel_m[d, v] = m
                n_cells += 1
                noise_size += abs(Y_obs[d, v] - y)
                if y > 0:
                    _topics_allocate(theta, d, phiT, v, y, mu, cumulative, n_dk, n_vk, state)
            row_log[d] = _geometric_log_lik(n_cells, noise_size, alpha[d])
    _keep_alive(cumulative_buffer)
    _keep_alive(state_buffer)


@njit(nogil=True, cache=True, parallel=True)
def topics_sweep_private(Y_obs, observed, has_mask, theta, phiT, lambda_plus, lambda_minus,
                         y_latent, bessel_m, alpha, posterior_scale,
                         chain_seed, iteration, n_chunks):
    """One private sweep (steps 1-5) over every observed cell of the topic model.

    Updates ``lambda_plus``, ``lambda_minus``, ``y_latent`` and ``bessel_m``
    in place (cells with ``observed == False`` are skipped when ``has_mask``).
    ``alpha`` is per row; ``posterior_scale`` is the scale of the lambda
    posterior per row (``alpha`` itself: rate 1/alpha). Returns
    ``(n_dk, n_vk, noise_log_lik)`` with ``noise_log_lik`` the sum over
    observed cells of ``log Geom2(ytil - y; alpha)``: the noise given the new
    latent counts, with g and lambda integrated out.
    """
    n_docs, n_topics = theta.shape
    n_words = phiT.shape[0]
    n_dk = np.zeros((n_docs, n_topics), dtype=np.int64)
    n_vk_parts = np.zeros((n_chunks, n_words, n_topics), dtype=np.int64)
    row_log = np.zeros(n_docs)
    for chunk in prange(n_chunks):
        first, last = _chunk_blocks(chunk, n_chunks, n_docs)
        _topics_private_blocks(Y_obs, observed, has_mask, theta, phiT, lambda_plus, lambda_minus,
                               y_latent, bessel_m, alpha, posterior_scale, chain_seed, iteration,
                               first, last, n_dk, n_vk_parts[chunk], row_log)
    return n_dk, _sum_parts(n_vk_parts), _ordered_sum(row_log)


@njit(nogil=True, cache=True, parallel=True)
def topics_update_factor(factor, other, counts, missing_indptr, missing_indices, a0, b0,
                         chain_seed, iteration, unit):
    """One side of the topic model's factor update, in place.

    ``factor[r, k] ~ Gamma(a0 + counts[r, k], b0 + sum over the observed
    partners s of other[s, k])``. For theta: ``factor = theta``,
    ``other = phiT``, ``counts = n_dk``, missing cells listed by row; for phi:
    ``factor = phiT``, ``other = theta``, ``counts = n_vk``, missing cells
    listed by column. ``unit`` keeps the two sides on separate streams.
    """
    n_rows, n_topics = factor.shape
    other_sum = np.zeros(n_topics)
    for s in range(other.shape[0]):
        other_sum += other[s]
    n_blocks = (n_rows + ROWS_PER_STREAM - 1) // ROWS_PER_STREAM
    for block in prange(n_blocks):
        seed_stream(chain_seed, iteration, unit + block)
        rate = np.empty(n_topics)
        for r in range(block * ROWS_PER_STREAM, min(n_rows, (block + 1) * ROWS_PER_STREAM)):
            rate[:] = other_sum
            for idx in range(missing_indptr[r], missing_indptr[r + 1]):
                rate -= other[missing_indices[idx]]
            for k in range(n_topics):
                factor[r, k] = np.random.gamma(a0 + counts[r, k], 1.0 / (b0 + max(rate[k], 0.0)))


@njit(nogil=True, cache=True)
def topics_missing_rate_sum(theta, phiT, missing_indptr, missing_indices):
    """Sum of mu over the missing cells (listed by row)."""
    total = 0.0
    for d in range(theta.shape[0]):
        for idx in range(missing_indptr[d], missing_indptr[d + 1]):
            total += _dot_rows(theta, d, phiT, missing_indices[idx])
    return total


@njit(nogil=True, cache=True)
def _topics_row_loglik(indptr, indices, counts, theta, phiT, d):
    """``sum of y log mu_dv - log y!`` over row ``d``'s cells in the CSR."""
    indices = _borrow(indices)
    counts = _borrow(counts)
    theta = _borrow(theta)
    phiT = _borrow(phiT)
    total = 0.0
    for idx in range(indptr[d], indptr[d + 1]):
        y = counts[idx]
        if y > 0:
            total += y * math.log(_dot_rows(theta, d, phiT, indices[idx])) - _log_factorial(y)
    return total


@njit(nogil=True, cache=True, parallel=True)
def topics_count_loglik(indptr, indices, counts, theta, phiT, missing_indptr, missing_indices):
    """``sum over observed cells of log Pois(y_dv; mu_dv)`` for counts in CSR form.

    The CSR holds the observed nonzero cells; the ``-mu`` terms of all
    observed cells come from the factor sums minus the missing cells.
    """
    n_docs, n_topics = theta.shape
    row_log = np.zeros(n_docs)
    for d in prange(n_docs):
        row_log[d] = _topics_row_loglik(indptr, indices, counts, theta, phiT, d)
    return _ordered_sum(row_log) - _topics_observed_rate_sum(theta, phiT, missing_indptr, missing_indices)


@njit(nogil=True, cache=True)
def _topics_observed_rate_sum(theta, phiT, missing_indptr, missing_indices):
    """Sum of mu over the observed cells: the factor sums minus the missing cells."""
    n_topics = theta.shape[1]
    theta_sum = np.zeros(n_topics)
    for d in range(theta.shape[0]):
        theta_sum += theta[d]
    phi_sum = np.zeros(n_topics)
    for v in range(phiT.shape[0]):
        phi_sum += phiT[v]
    return _dot(theta_sum, phi_sum) - topics_missing_rate_sum(theta, phiT, missing_indptr, missing_indices)


@njit(nogil=True, cache=True)
def _topics_dense_row_loglik(Y, theta, phiT, d):
    """:func:`_topics_row_loglik` for counts held dense (same terms, same order)."""
    Y = _borrow(Y)
    theta = _borrow(theta)
    phiT = _borrow(phiT)
    total = 0.0
    for v in range(Y.shape[1]):
        y = Y[d, v]
        if y > 0:
            total += y * math.log(_dot_rows(theta, d, phiT, v)) - _log_factorial(y)
    return total


@njit(nogil=True, cache=True, parallel=True)
def topics_dense_loglik(Y, theta, phiT, missing_indptr, missing_indices):
    """:func:`topics_count_loglik` for a dense count matrix that is 0 at the
    missing cells (the private chain's latent counts): one pass over the
    matrix instead of building its CSR first. Equal to the CSR version."""
    n_docs = theta.shape[0]
    row_log = np.zeros(n_docs)
    for d in prange(n_docs):
        row_log[d] = _topics_dense_row_loglik(Y, theta, phiT, d)
    return _ordered_sum(row_log) - _topics_observed_rate_sum(theta, phiT, missing_indptr, missing_indices)


@njit(nogil=True, cache=True, parallel=True)
def dense_to_csr(Y, n_chunks):
    """CSR (indptr, indices, counts) of the positive entries of an int matrix."""
    n_rows, n_cols = Y.shape
    row_nnz = np.zeros(n_rows + 1, dtype=np.int64)
    for i in prange(n_rows):
        count = 0
        for j in range(n_cols):
            if Y[i, j] > 0:
                count += 1
        row_nnz[i + 1] = count
    indptr = np.cumsum(row_nnz)
    indices = np.empty(indptr[-1], dtype=np.int64)
    counts = np.empty(indptr[-1], dtype=np.int64)
    for i in prange(n_rows):
        pos = indptr[i]
        for j in range(n_cols):
            if Y[i, j] > 0:
                indices[pos] = j
                counts[pos] = Y[i, j]
                pos += 1
    return indptr, indices, counts


# ---------------------------------------------------------------------------
# Block model: mu_ij = sum_cd theta_ic pi_cd theta_jd = (theta_i^T pi) . theta_j
# ---------------------------------------------------------------------------

@njit(nogil=True, cache=True)
def _blocks_sender_tables(theta, i, pi, sender_pi, given_receiver):
    """Per-sender tables: ``sender_pi[0] = theta_i^T pi`` and, for each receiver
    community d, the cumulative weights of sender communities c ∝ theta_ic pi_cd."""
    n_comm = theta.shape[1]
    for d in range(n_comm):
        running = 0.0
        for c in range(n_comm):
            running += theta[i, c] * pi[c, d]
            given_receiver[d, c] = running
        sender_pi[0, d] = running


@njit(nogil=True, cache=True, inline="always")
def _blocks_allocate(sender_pi, given_receiver, theta, i, j, y, mu, n_send, n_recv, n_cd, state):
    """Split ``y`` tokens of cell (i, j) with rate ``mu`` over community pairs
    (c, d), exactly in two stages: d ∝ (theta_i^T pi)_d theta_jd, then
    c | d ∝ theta_ic pi_cd (tables from :func:`_blocks_sender_tables`)."""
    n_comm = theta.shape[1]
    for _ in range(y):
        d = _draw_product(sender_pi, 0, theta, j, mu, state)
        c = _draw_index(given_receiver, d, n_comm, state)
        n_send[i, c] += 1
        n_recv[j, d] += 1
        n_cd[c, d] += 1


@njit(nogil=True, cache=True)
def _blocks_fixed_blocks(indptr, indices, counts, theta, pi, chain_seed, iteration, first, last,
                         n_send, n_recv, n_cd):
    """Stream blocks [first, last) of :func:`blocks_sweep_fixed` (one chunk)."""
    indptr = _borrow(indptr)
    indices = _borrow(indices)
    counts = _borrow(counts)
    theta = _borrow(theta)
    n_send = _borrow(n_send)
    n_recv = _borrow(n_recv)
    n_cd = _borrow(n_cd)
    n_actors, n_comm = theta.shape
    sender_pi_buffer = np.empty((1, n_comm))
    sender_pi = _borrow(sender_pi_buffer)
    given_receiver_buffer = np.empty((n_comm, n_comm))
    given_receiver = _borrow(given_receiver_buffer)
    state_buffer = np.empty(4, dtype=np.uint64)
    state = _borrow(state_buffer)
    for block in range(first, last):
        seed_stream(chain_seed, iteration, UNIT_SWEEP + block)
        seed_state(state, chain_seed, iteration, UNIT_SWEEP + block)
        for i in range(block * ROWS_PER_STREAM, min(n_actors, (block + 1) * ROWS_PER_STREAM)):
            if indptr[i + 1] == indptr[i]:
                continue
            _blocks_sender_tables(theta, i, pi, sender_pi, given_receiver)
            for idx in range(indptr[i], indptr[i + 1]):
                j = indices[idx]
                _blocks_allocate(sender_pi, given_receiver, theta, i, j, counts[idx],
                                 _dot_rows(sender_pi, 0, theta, j), n_send, n_recv, n_cd, state)
    _keep_alive(sender_pi_buffer)
    _keep_alive(given_receiver_buffer)
    _keep_alive(state_buffer)


@njit(nogil=True, cache=True, parallel=True)
def blocks_sweep_fixed(indptr, indices, counts, theta, pi, chain_seed, iteration, n_chunks):
    """Allocate fixed counts (CSR of observed off-diagonal nonzero cells).

    Returns ``(n_send (V, C), n_recv (V, C), n_cd (C, C))`` int64 counts.
    """
    n_actors, n_comm = theta.shape
    n_send = np.zeros((n_actors, n_comm), dtype=np.int64)
    n_recv_parts = np.zeros((n_chunks, n_actors, n_comm), dtype=np.int64)
    n_cd_parts = np.zeros((n_chunks, n_comm, n_comm), dtype=np.int64)
    for chunk in prange(n_chunks):
        first, last = _chunk_blocks(chunk, n_chunks, n_actors)
        _blocks_fixed_blocks(indptr, indices, counts, theta, pi, chain_seed, iteration, first, last,
                             n_send, n_recv_parts[chunk], n_cd_parts[chunk])
    return n_send, _sum_parts(n_recv_parts), _sum_parts(n_cd_parts)


@njit(nogil=True, cache=True)
def _blocks_private_blocks(Y_obs, observed, has_mask, theta, pi, lambda_plus, lambda_minus,
                           y_latent, bessel_m, alpha, posterior_scale, chain_seed, iteration,
                           first, last, n_send, n_recv, n_cd, row_log):
    """Stream blocks [first, last) of :func:`blocks_sweep_private` (one chunk)."""
    Y_obs = _borrow(Y_obs)
    observed = _borrow(observed)
    theta = _borrow(theta)
    lambda_plus = _borrow(lambda_plus)
    lambda_minus = _borrow(lambda_minus)
    y_latent = _borrow(y_latent)
    bessel_m = _borrow(bessel_m)
    n_send = _borrow(n_send)
    n_recv = _borrow(n_recv)
    n_cd = _borrow(n_cd)
    n_actors, n_comm = theta.shape
    sender_pi_buffer = np.empty((1, n_comm))
    sender_pi = _borrow(sender_pi_buffer)
    given_receiver_buffer = np.empty((n_comm, n_comm))
    given_receiver = _borrow(given_receiver_buffer)
    state_buffer = np.empty(4, dtype=np.uint64)
    state = _borrow(state_buffer)
    for block in range(first, last):
        seed_stream(chain_seed, iteration, UNIT_SWEEP + block)
        seed_state(state, chain_seed, iteration, UNIT_SWEEP + block)
        for i in range(block * ROWS_PER_STREAM, min(n_actors, (block + 1) * ROWS_PER_STREAM)):
            scale = posterior_scale[i]
            _blocks_sender_tables(theta, i, pi, sender_pi, given_receiver)
            n_cells = 0
            noise_size = 0
            for j in range(n_actors):
                if j == i or (has_mask and not observed[i, j]):
                    continue
                mu = _dot_rows(sender_pi, 0, theta, j)
                y, g_plus, g_minus, m = sample_true_count(
                    Y_obs[i, j], mu, lambda_plus[i, j], lambda_minus[i, j], state)
                lambda_plus[i, j], lambda_minus[i, j] = draw_noise_rates(g_plus, g_minus, scale, state)
                y_latent[i, j] = y
                bessel_m[i, j] = m
                n_cells += 1
                noise_size += abs(Y_obs[i, j] - y)
                if y > 0:
                    _blocks_allocate(sender_pi, given_receiver, theta, i, j, y, mu, n_send, n_recv, n_cd,
                                     state)
            row_log[i] = _geometric_log_lik(n_cells, noise_size, alpha[i])
    _keep_alive(sender_pi_buffer)
    _keep_alive(given_receiver_buffer)
    _keep_alive(state_buffer)


@njit(nogil=True, cache=True, parallel=True)
def blocks_sweep_private(Y_obs, observed, has_mask, theta, pi, lambda_plus, lambda_minus,
                         y_latent, bessel_m, alpha, posterior_scale,
                         chain_seed, iteration, n_chunks):
    """One private sweep over every observed off-diagonal cell of the block model.

    Same contract as :func:`topics_sweep_private`; returns
    ``(n_send, n_recv, n_cd, noise_log_lik)``.
    """
    n_actors, n_comm = theta.shape
    n_send = np.zeros((n_actors, n_comm), dtype=np.int64)
    n_recv_parts = np.zeros((n_chunks, n_actors, n_comm), dtype=np.int64)
    n_cd_parts = np.zeros((n_chunks, n_comm, n_comm), dtype=np.int64)
    row_log = np.zeros(n_actors)
    for chunk in prange(n_chunks):
        first, last = _chunk_blocks(chunk, n_chunks, n_actors)
        _blocks_private_blocks(Y_obs, observed, has_mask, theta, pi, lambda_plus, lambda_minus,
                               y_latent, bessel_m, alpha, posterior_scale, chain_seed, iteration,
                               first, last, n_send, n_recv_parts[chunk], n_cd_parts[chunk], row_log)
    return n_send, _sum_parts(n_recv_parts), _sum_parts(n_cd_parts), _ordered_sum(row_log)


@njit(nogil=True, cache=True)
def _blocks_partner_sum(theta, total, i, missing_indptr, missing_indices, out):
    """``out = sum over j != i with (i, j) observed of theta_j`` (lists by row)."""
    out[:] = total - theta[i]
    for idx in range(missing_indptr[i], missing_indptr[i + 1]):
        out -= theta[missing_indices[idx]]
    for c in range(out.shape[0]):
        if out[c] < 0.0:  # rounding when almost every partner is missing
            out[c] = 0.0


@njit(nogil=True, cache=True)
def blocks_update_theta(theta, pi, n_send, n_recv, row_missing_indptr, row_missing_indices,
                        col_missing_indptr, col_missing_indices, a0, b0, chain_seed, iteration):
    """theta_ic ~ Gamma(a0 + n_send_ic + n_recv_ic, b0 + sum_{j: (i,j) obs} (pi theta_j)_c
    + sum_{j: (j,i) obs} (pi^T theta_j)_c), in place.

    Rows are coupled (theta_i's rate depends on every other theta_j), so they
    are updated one after another: each draw is from its exact conditional.
    Missing lists exclude the diagonal (never observed).
    """
    n_actors, n_comm = theta.shape
    seed_stream(chain_seed, iteration, UNIT_THETA)
    total = np.zeros(n_comm)
    for j in range(n_actors):
        total += theta[j]
    receivers = np.empty(n_comm)
    senders = np.empty(n_comm)
    for i in range(n_actors):
        _blocks_partner_sum(theta, total, i, row_missing_indptr, row_missing_indices, receivers)
        _blocks_partner_sum(theta, total, i, col_missing_indptr, col_missing_indices, senders)
        for c in range(n_comm):
            rate = b0
            for d in range(n_comm):
                rate += pi[c, d] * receivers[d] + pi[d, c] * senders[d]
            new = np.random.gamma(a0 + n_send[i, c] + n_recv[i, c], 1.0 / rate)
            total[c] += new - theta[i, c]
            theta[i, c] = new


@njit(nogil=True, cache=True)
def blocks_pair_weights(theta, row_missing_indptr, row_missing_indices):
    """W_cd = sum over observed pairs i != j of theta_ic theta_jd (C, C)."""
    n_actors, n_comm = theta.shape
    total = np.zeros(n_comm)
    for j in range(n_actors):
        total += theta[j]
    receivers = np.empty(n_comm)
    weights = np.zeros((n_comm, n_comm))
    for i in range(n_actors):
        _blocks_partner_sum(theta, total, i, row_missing_indptr, row_missing_indices, receivers)
        for c in range(n_comm):
            for d in range(n_comm):
                weights[c, d] += theta[i, c] * receivers[d]
    return weights


@njit(nogil=True, cache=True)
def blocks_update_pi(pi, theta, n_cd, row_missing_indptr, row_missing_indices, a0, b0, chain_seed, iteration):
    """pi_cd ~ Gamma(a0 + n_cd, b0 + sum over observed i != j of theta_ic theta_jd), in place."""
    seed_stream(chain_seed, iteration, UNIT_PI)
    weights = blocks_pair_weights(theta, row_missing_indptr, row_missing_indices)
    n_comm = pi.shape[0]
    for c in range(n_comm):
        for d in range(n_comm):
            pi[c, d] = np.random.gamma(a0 + n_cd[c, d], 1.0 / (b0 + weights[c, d]))


@njit(nogil=True, cache=True)
def _blocks_row_loglik(indptr, indices, counts, theta, pi, i):
    """``sum of y log mu_ij - log y!`` over row ``i``'s cells in the CSR."""
    indices = _borrow(indices)
    counts = _borrow(counts)
    theta = _borrow(theta)
    n_comm = theta.shape[1]
    sender_pi_buffer = np.zeros((1, n_comm))
    sender_pi = _borrow(sender_pi_buffer)
    for c in range(n_comm):
        for d in range(n_comm):
            sender_pi[0, d] += theta[i, c] * pi[c, d]
    total = 0.0
    for idx in range(indptr[i], indptr[i + 1]):
        y = counts[idx]
        if y > 0:
            total += y * math.log(_dot_rows(sender_pi, 0, theta, indices[idx])) - _log_factorial(y)
    _keep_alive(sender_pi_buffer)
    return total


@njit(nogil=True, cache=True, parallel=True)
def blocks_count_loglik(indptr, indices, counts, theta, pi, row_missing_indptr, row_missing_indices):
    """``sum over observed off-diagonal cells of log Pois(y_ij; mu_ij)`` (CSR counts)."""
    n_actors, n_comm = theta.shape
    row_log = np.zeros(n_actors)
    for i in prange(n_actors):
        row_log[i] = _blocks_row_loglik(indptr, indices, counts, theta, pi, i)
    weights = blocks_pair_weights(theta, row_missing_indptr, row_missing_indices)
    return _ordered_sum(row_log) - _ordered_sum((weights * pi).ravel())


@njit(nogil=True, cache=True)
def _blocks_dense_row_loglik(Y, theta, pi, i):
    """:func:`_blocks_row_loglik` for counts held dense (same terms, same order)."""
    Y = _borrow(Y)
    theta = _borrow(theta)
    n_comm = theta.shape[1]
    sender_pi_buffer = np.zeros((1, n_comm))
    sender_pi = _borrow(sender_pi_buffer)
    for c in range(n_comm):
        for d in range(n_comm):
            sender_pi[0, d] += theta[i, c] * pi[c, d]
    total = 0.0
    for j in range(Y.shape[1]):
        y = Y[i, j]
        if y > 0:
            total += y * math.log(_dot_rows(sender_pi, 0, theta, j)) - _log_factorial(y)
    _keep_alive(sender_pi_buffer)
    return total


@njit(nogil=True, cache=True, parallel=True)
def blocks_dense_loglik(Y, theta, pi, row_missing_indptr, row_missing_indices):
    """:func:`blocks_count_loglik` for a dense count matrix that is 0 on the
    diagonal and at the missing cells (the private chain's latent counts)."""
    n_actors = theta.shape[0]
    row_log = np.zeros(n_actors)
    for i in prange(n_actors):
        row_log[i] = _blocks_dense_row_loglik(Y, theta, pi, i)
    weights = blocks_pair_weights(theta, row_missing_indptr, row_missing_indices)
    return _ordered_sum(row_log) - _ordered_sum((weights * pi).ravel())


# ---------------------------------------------------------------------------
# Python-level helpers
# ---------------------------------------------------------------------------

def rates(model, factors):
    """The Poisson rates ``mu`` (all cells, observed or not) of a factor dict.

    ``topics``: ``theta @ phi`` (D, V); ``blocks``: ``theta @ pi @ theta.T``
    with a zero diagonal (no self loops).
    """
    if model == "topics":
        return factors["theta"] @ factors["phi"]
    if model == "blocks":
        theta = factors["theta"]
        mu = theta @ factors["pi"] @ theta.T
        np.fill_diagonal(mu, 0.0)
        return mu
    raise ValueError(f"model must be 'topics' or 'blocks', got {model!r}")


# ---------------------------------------------------------------------------
# Serial twins of the parallel kernels
# ---------------------------------------------------------------------------

# Launching a parallel region costs tens of microseconds (milliseconds when
# the cores are busy), more than a whole sweep of a small data set. Each
# parallel kernel therefore has a serial twin compiled from the same source;
# both draw the same numbers (per-block streams), so they give the same chain.
_PARALLEL_KERNELS = (
    "topics_sweep_fixed", "topics_sweep_private", "topics_update_factor",
    "topics_count_loglik", "topics_dense_loglik", "blocks_sweep_fixed", "blocks_sweep_private",
    "blocks_count_loglik", "blocks_dense_loglik", "dense_to_csr",
)
_SERIAL_ONLY = ("blocks_update_theta", "blocks_update_pi", "gamma_log_prior")


def _serial_twin(kernel):
    func = kernel.py_func
    twin = types.FunctionType(func.__code__, func.__globals__, func.__name__ + "_serial",
                              func.__defaults__, func.__closure__)
    # A distinct qualified name gives the twin its own on-disk cache entry.
    twin.__qualname__ = func.__qualname__ + "_serial"
    twin.__doc__ = func.__doc__
    return njit(nogil=True, cache=True)(twin)


_SERIAL_TWINS = {name: _serial_twin(globals()[name]) for name in _PARALLEL_KERNELS}


def kernels(parallel):
    """The kernel set a chain calls: parallel ones, or their serial twins."""
    chosen = {name: (globals()[name] if parallel else _SERIAL_TWINS[name]) for name in _PARALLEL_KERNELS}
    chosen.update({name: globals()[name] for name in _SERIAL_ONLY})
    return types.SimpleNamespace(**chosen)
