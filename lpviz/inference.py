"""Gibbs chains for Poisson factorization of noised counts: private, naive, non-private.

:class:`Chain` runs one Markov chain step by step (for streaming to a
dashboard); :func:`fit` runs a chain, keeps thinned samples after burn-in and
returns the posterior mean rates. The three methods share the model code
(:mod:`lpviz.models`) and differ only in which counts they allocate:

- ``"private"``: the true counts are latent; each sweep draws them from
  ``p(y | ytil, mu, lambda)`` with the Skellam/Bessel augmentation of Schein et
  al. (ICML 2019) and updates the noise rates ``lambda+``, ``lambda-``
  (posterior ``Gamma(1 + g, rate 1/alpha)``, one ``alpha`` per row);
- ``"naive"``: the noised counts truncated at 0 (:func:`lpviz.privacy.truncate`)
  are treated as the true counts;
- ``"nonprivate"``: ``Y_obs`` are the true counts.

Kernels release the GIL, so several chains can run in worker threads.
"""

import math
import numbers
import threading
import time
from contextlib import nullcontext
from dataclasses import dataclass, field

import numba
import numpy as np
import scipy.sparse as sp

from lpviz import models
from lpviz._random import chain_seed_from
from lpviz.privacy import _check_alpha as _check_alpha_range
from lpviz.privacy import truncate

__all__ = ["Chain", "ChainState", "FitResult", "fit", "MODELS", "METHODS"]

MODELS = ("topics", "blocks")
METHODS = ("private", "naive", "nonprivate")

# Numba's fallback 'workqueue' threading layer must not be entered by two
# threads at once; the 'omp' and 'tbb' layers may.
_WORKQUEUE_LOCK = threading.Lock()


def _parallel_guard():
    try:
        layer = numba.threading_layer()
    except ValueError:  # no parallel kernel has run yet: be safe
        layer = "unknown"
    return _WORKQUEUE_LOCK if layer in ("workqueue", "unknown") else nullcontext()


class _LazyRates:
    """Dataclass field descriptor: ``state.mu`` is computed from the factors on
    first access, so streaming states costs nothing when nobody reads mu."""

    def __get__(self, state, owner=None):
        if state is None:
            return None  # the field's default
        if state._mu is None:
            state._mu = models.rates(state.model, state.factors)
        return state._mu

    def __set__(self, state, value):
        state._mu = value


@dataclass(eq=False)
class ChainState:
    """The state of a chain after one iteration.

    ``iteration`` counts completed iterations (1 after the first sweep);
    ``mu`` the current Poisson rates of every cell (computed on first access);
    ``log_joint`` the complete-data log joint (see :attr:`Chain.log_joint`);
    ``seconds`` the wall-clock time of this iteration; ``factors`` copies of
    the factors (``theta``/``phi`` for topics, ``theta``/``pi`` for blocks).
    """

    iteration: int
    mu: np.ndarray = _LazyRates()
    log_joint: float = math.nan
    seconds: float = 0.0
    factors: dict = field(default_factory=dict)
    model: str = "topics"
    _mu: np.ndarray = field(default=None, init=False, repr=False)


@dataclass(eq=False)
class FitResult:
    """What :func:`fit` returns.

    ``mu_hat``: posterior mean of the rates over the saved samples (all
    cells, held-out ones included); ``samples``: the saved factor dicts;
    ``log_joint``: the log-joint trace, one value per iteration;
    ``best``/``best_log_joint``: the saved sample with the highest log joint
    (show topics from it: labels switch between samples);
    ``saved_iterations``: the iteration number of each saved sample;
    ``seconds``: total sampling time.
    """

    mu_hat: np.ndarray
    samples: list
    log_joint: np.ndarray
    best: dict
    best_log_joint: float
    saved_iterations: list
    model: str
    method: str
    n_components: int
    seconds: float


# ---------------------------------------------------------------------------
# Input checks
# ---------------------------------------------------------------------------

def _check_choice(name, value, choices):
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}; got {value!r}")


def _check_positive(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return float(value)


def _check_count(name, value, minimum):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def _integer_values(values, what):
    """int64 copy of ``values`` after checking they are finite integers."""
    values = np.asarray(values)
    if values.dtype == bool or values.dtype.kind not in "iuf":
        raise TypeError(f"{what} must hold integer counts, got dtype {values.dtype}; "
                        "pass an integer array (e.g. Y.astype(np.int64))")
    if values.dtype.kind == "f":
        if not np.all(np.isfinite(values)):
            raise ValueError(f"{what} has NaN or infinite entries; counts must be finite integers. "
                             "For held-out cells put any integer there (e.g. 0) and set them False in mask")
        if np.any(values != np.floor(values)):
            raise ValueError(f"{what} has non-integer entries; counts must be integers")
    return values.astype(np.int64)


def _check_counts(Y_obs, model, method):
    """Dense int64 array, or a CSR matrix with int64 data (sparse input, not private)."""
    if sp.issparse(Y_obs):
        if Y_obs.ndim != 2:
            raise ValueError(f"Y_obs must be a 2-D count matrix, got shape {Y_obs.shape}")
        Y = Y_obs.tocsr(copy=True)
        Y.data = _integer_values(Y.data, "Y_obs")
        if method == "private":
            Y = Y.toarray()  # the private sweep visits every cell anyway
    else:
        Y = _integer_values(Y_obs, "Y_obs")
        if Y.ndim != 2:
            raise ValueError(f"Y_obs must be a 2-D count matrix, got shape {Y.shape}")
    n_rows, n_cols = Y.shape
    if n_rows == 0 or n_cols == 0:
        raise ValueError(f"Y_obs is empty (shape {Y.shape}); it needs at least one row and one column")
    if model == "blocks" and n_rows != n_cols:
        raise ValueError(f"model='blocks' needs a square sender x recipient matrix, got shape {Y.shape}; "
                         "use model='topics' for a documents x words matrix")
    if method == "nonprivate":
        smallest = Y.data.min(initial=0) if sp.issparse(Y) else Y.min()
        if smallest < 0:
            raise ValueError("Y_obs has negative entries, but method='nonprivate' needs the true "
                             "(non-negative) counts; use method='private' (or 'naive') for noised counts")
    return np.ascontiguousarray(Y) if not sp.issparse(Y) else Y


def _check_alpha(alpha, n_rows):
    if alpha is None:
        raise ValueError("method='private' needs the noise level: pass alpha (a scalar in (0, 1) "
                         "or one value per row), e.g. alpha=lpviz.alpha_from(epsilon, N)")
    values = _check_alpha_range(alpha)  # the mechanism's own check: numbers strictly in (0, 1)
    if values.ndim == 0:
        values = np.full(n_rows, float(values))
    elif values.shape != (n_rows,):
        raise ValueError(f"alpha must be a scalar or have one value per row ({n_rows}), "
                         f"got shape {values.shape}")
    return np.ascontiguousarray(values, dtype=np.float64)


def _check_mask(mask, shape):
    if mask is None:
        return None
    mask = np.asarray(mask)
    if mask.dtype != bool:
        raise TypeError(f"mask must be a boolean array (True = observed), got dtype {mask.dtype}")
    if mask.shape != tuple(shape):
        raise ValueError(f"mask has shape {mask.shape} but Y_obs has shape {tuple(shape)}; "
                         "they must match")
    return np.ascontiguousarray(mask)


def _missing_lists(missing):
    """(indptr, indices) int64 of the True cells of a boolean matrix, by row."""
    csr = sp.csr_matrix(missing)
    return csr.indptr.astype(np.int64), csr.indices.astype(np.int64)


_EMPTY_INDEX = np.zeros(0, dtype=np.int64)

# Below this many cells a chain runs the serial kernels: a parallel launch
# costs more than the work (the chain is the same either way).
PARALLEL_MIN_CELLS = 40_000


# ---------------------------------------------------------------------------
# The chain
# ---------------------------------------------------------------------------

class Chain:
    """A Gibbs sampler for Poisson factorization of (possibly noised) counts.

    Parameters
    ----------
    Y_obs : array-like or scipy.sparse matrix of int, shape (n_rows, n_cols)
        The counts as released: noised (may be negative) for ``"private"``
        and ``"naive"``, the true counts for ``"nonprivate"``.
    model : {"topics", "blocks"}
        ``"topics"``: ``mu = theta @ phi`` with theta (n_rows, K), phi
        (K, n_cols). ``"blocks"``: ``mu_ij = sum_cd theta_ic theta_jd pi_cd``
        for a square matrix, i != j (the diagonal is never used).
    method : {"private", "naive", "nonprivate"}
        How the noise is treated (see the module docstring).
    n_components : int
        Topics K or communities C.
    alpha : float or array of shape (n_rows,), optional
        Noise level ``exp(-epsilon/N)`` of the two-sided geometric mechanism,
        one per row for heterogeneous noise. Required for ``"private"``;
        ignored by the other methods.
    mask : bool array of Y_obs's shape, optional
        True where a cell is observed. Unobserved (held-out) cells are left
        out of the likelihood and of every rate sum. None: all observed.
    a0, b0 : float
        Shape and rate of the gamma priors on every factor.
    random_state : None, int or numpy Generator
        Seed. The same seed gives the same chain for any number of threads.

    Attributes
    ----------
    model, method, n_components, a0, b0 : as given.
    shape : the shape of Y_obs.
    """

    def __init__(self, Y_obs, *, model, method, n_components, alpha=None, mask=None,
                 a0=0.1, b0=1.0, random_state=None):
        _check_choice("model", model, MODELS)
        _check_choice("method", method, METHODS)
        self.model = model
        self.method = method
        self.n_components = _check_count("n_components", n_components, 1)
        self.a0 = _check_positive("a0", a0)
        self.b0 = _check_positive("b0", b0)
        Y = _check_counts(Y_obs, model, method)
        self.shape = Y.shape
        n_rows, n_cols = Y.shape
        mask = _check_mask(mask, Y.shape)

        observed = np.ones(Y.shape, dtype=bool) if mask is None else mask.copy()
        if model == "blocks":
            np.fill_diagonal(observed, False)
        if not observed.any():
            raise ValueError("mask leaves no observed cell to fit; True marks observed cells")
        self._has_mask = mask is not None
        self._observed = observed if self._has_mask else np.ones((1, 1), dtype=bool)
        if mask is None:
            self._row_missing = (np.zeros(n_rows + 1, np.int64), _EMPTY_INDEX)
            self._col_missing = (np.zeros(n_cols + 1, np.int64), _EMPTY_INDEX)
        else:
            # The block model's kernels leave the diagonal out by themselves.
            missing = ~observed
            if model == "blocks":
                np.fill_diagonal(missing, False)
            self._row_missing = _missing_lists(missing)
            self._col_missing = _missing_lists(missing.T)

        self._parallel = n_rows * n_cols >= PARALLEL_MIN_CELLS
        self._kernels = models.kernels(self._parallel)
        self._chain_seed = chain_seed_from(random_state)
        init_rng = np.random.default_rng(self._chain_seed)
        self._iteration = 0
        self._log_joint = math.nan

        if method == "private":
            self._alpha = _check_alpha(alpha, n_rows)
            self._Y = Y
            # Exponential prior on lambda with rate (1-alpha)/alpha; its
            # posterior given g is Gamma(1 + g, rate 1/alpha): scale alpha.
            self._lambda_posterior_scale = self._alpha.copy()
            prior_mean = (self._alpha / (1.0 - self._alpha))[:, None]
            self._lambda_plus = init_rng.exponential(1.0, Y.shape) * prior_mean
            self._lambda_minus = init_rng.exponential(1.0, Y.shape) * prior_mean
            self._y_latent = np.zeros(Y.shape, dtype=np.int64)
            self._bessel = np.zeros(Y.shape, dtype=np.int64)
            scale_counts = np.maximum(Y, 0)[observed]
        else:
            self._alpha = None
            counts = Y
            if method == "naive":
                if sp.issparse(counts):
                    counts = counts.copy()
                    counts.data = truncate(counts.data)
                else:
                    counts = truncate(counts)
            counts = sp.csr_matrix(counts)
            if self._has_mask or model == "blocks":
                counts = counts.multiply(sp.csr_matrix(observed)).tocsr()
            counts.eliminate_zeros()
            counts.sort_indices()
            self._counts = (counts.indptr.astype(np.int64), counts.indices.astype(np.int64),
                            counts.data.astype(np.int64))
            scale_counts = counts.data
        n_observed = int(observed.sum())
        mean_count = max(float(np.sum(scale_counts)) / n_observed, 1e-2)

        # Start near the data's scale: gamma(1) draws whose products match the
        # mean count, so early sweeps allocate sensibly.
        K = self.n_components
        if model == "topics":
            level = math.sqrt(mean_count / K)
            self._theta = init_rng.gamma(1.0, level, (n_rows, K))
            self._phiT = init_rng.gamma(1.0, level, (n_cols, K))
        else:
            level = (mean_count / (K * K)) ** (1.0 / 3.0)
            self._theta = init_rng.gamma(1.0, level, (n_rows, K))
            self._pi = init_rng.gamma(1.0, level, (K, K))

    # -- public API ---------------------------------------------------------

    @property
    def iteration(self):
        """Number of completed iterations."""
        return self._iteration

    @property
    def factors(self):
        """Copies of the current factors: ``theta`` (D, K) and ``phi`` (K, V)
        for topics; ``theta`` (V, C) and ``pi`` (C, C) for blocks."""
        if self.model == "topics":
            return {"theta": self._theta.copy(), "phi": self._phiT.T.copy()}
        return {"theta": self._theta.copy(), "pi": self._pi.copy()}

    @property
    def mu(self):
        """Current Poisson rates of every cell (held-out cells included)."""
        return models.rates(self.model, self.factors)

    @property
    def log_joint(self):
        """Complete-data log joint of the current state (NaN before the first step).

        ``log p(y, factors)`` for the counts ``y`` the chain conditions on
        (true, truncated or, for ``"private"``, the current latent counts):
        Poisson terms over observed cells plus the gamma priors of the
        factors; allocations to components are summed out. For ``"private"``
        it is ``log p(ytil, y, factors)``: it adds, over observed cells, the
        noise ``log Geom2(ytil - y; alpha)`` with the auxiliary ``g`` and
        ``lambda`` integrated out (exactly), so it tracks what the chain's
        (y, factors) marginal targets. :func:`fit` picks its best sample by it.
        """
        return self._log_joint

    @property
    def y_latent(self):
        """Copy of the current latent true counts (``"private"`` only, else None).
        Held-out cells are 0 (they are not sampled)."""
        return None if self.method != "private" else self._y_latent.copy()

    @property
    def bessel_draws(self):
        """Copy of the last sweep's Bessel draws ``m`` (``"private"`` only, else None)."""
        return None if self.method != "private" else self._bessel.copy()

    @property
    def alpha(self):
        """Per-row noise levels (``"private"`` only, else None)."""
        return None if self._alpha is None else self._alpha.copy()

    def step(self, n=1):
        """Run ``n`` iterations; return the :class:`ChainState` of the last one."""
        n = _check_count("n", n, 1)
        for _ in range(n):
            seconds = self._advance()
        return self._state(seconds)

    def iterate(self, n_iter):
        """Run ``n_iter`` iterations, yielding a :class:`ChainState` after each.

        A generator: iterations run as it is consumed, so a caller can stop
        early (the chain keeps the state it reached).
        """
        n_iter = _check_count("n_iter", n_iter, 0)
        return self._iterate(n_iter)

    def _iterate(self, n_iter):
        for _ in range(n_iter):
            seconds = self._advance()
            yield self._state(seconds)

    def __repr__(self):
        return (f"Chain(model={self.model!r}, method={self.method!r}, n_components={self.n_components}, "
                f"shape={self.shape}, iteration={self._iteration})")

    # -- internals ------------------------------------------------------------

    def _state(self, seconds):
        return ChainState(iteration=self._iteration, log_joint=self._log_joint, seconds=seconds,
                          factors=self.factors, model=self.model)

    def _n_chunks(self):
        n_blocks = -(-self.shape[0] // models.ROWS_PER_STREAM)
        return max(1, min(n_blocks, 4 * numba.get_num_threads()))

    def _advance(self):
        """One Gibbs iteration; returns its wall-clock seconds."""
        start = time.perf_counter()
        iteration = self._iteration + 1
        with _parallel_guard() if self._parallel else nullcontext():
            if self.model == "topics":
                log_joint = self._advance_topics(iteration)
            else:
                log_joint = self._advance_blocks(iteration)
        self._iteration = iteration
        self._log_joint = float(log_joint)
        return time.perf_counter() - start

    def _advance_topics(self, iteration):
        k, seed, chunks, a0, b0 = self._kernels, self._chain_seed, self._n_chunks(), self.a0, self.b0
        noise_log_joint = 0.0
        if self.method == "private":
            n_dk, n_vk, noise_log_joint = k.topics_sweep_private(
                self._Y, self._observed, self._has_mask, self._theta, self._phiT,
                self._lambda_plus, self._lambda_minus, self._y_latent, self._bessel,
                self._alpha, self._lambda_posterior_scale, seed, iteration, chunks)
        else:
            n_dk, n_vk = k.topics_sweep_fixed(*self._counts, self._theta, self._phiT, seed, iteration, chunks)
        k.topics_update_factor(self._theta, self._phiT, n_dk, *self._row_missing, a0, b0, seed, iteration,
                               models.UNIT_THETA)
        k.topics_update_factor(self._phiT, self._theta, n_vk, *self._col_missing, a0, b0, seed, iteration,
                               models.UNIT_PHI)
        if self.method == "private":  # latent counts: dense, 0 at missing cells
            count_loglik = k.topics_dense_loglik(self._y_latent, self._theta, self._phiT, *self._row_missing)
        else:
            count_loglik = k.topics_count_loglik(*self._counts, self._theta, self._phiT, *self._row_missing)
        return (count_loglik
                + k.gamma_log_prior(self._theta, a0, b0) + k.gamma_log_prior(self._phiT, a0, b0)
                + noise_log_joint)

    def _advance_blocks(self, iteration):
        k, seed, chunks, a0, b0 = self._kernels, self._chain_seed, self._n_chunks(), self.a0, self.b0
        noise_log_joint = 0.0
        if self.method == "private":
            n_send, n_recv, n_cd, noise_log_joint = k.blocks_sweep_private(
                self._Y, self._observed, self._has_mask, self._theta, self._pi,
                self._lambda_plus, self._lambda_minus, self._y_latent, self._bessel,
                self._alpha, self._lambda_posterior_scale, seed, iteration, chunks)
        else:
            n_send, n_recv, n_cd = k.blocks_sweep_fixed(*self._counts, self._theta, self._pi,
                                                             seed, iteration, chunks)
        k.blocks_update_theta(self._theta, self._pi, n_send, n_recv, *self._row_missing,
                                   *self._col_missing, a0, b0, seed, iteration)
        k.blocks_update_pi(self._pi, self._theta, n_cd, *self._row_missing, a0, b0, seed, iteration)
        if self.method == "private":  # latent counts: dense, 0 on the diagonal and at missing cells
            count_loglik = k.blocks_dense_loglik(self._y_latent, self._theta, self._pi, *self._row_missing)
        else:
            count_loglik = k.blocks_count_loglik(*self._counts, self._theta, self._pi, *self._row_missing)
        return (count_loglik
                + k.gamma_log_prior(self._theta, a0, b0) + k.gamma_log_prior(self._pi, a0, b0)
                + noise_log_joint)


# ---------------------------------------------------------------------------
# fit
# ---------------------------------------------------------------------------

def fit(Y_obs, *, model, method, n_components, n_iter=1000, burn_in=None, thin=25, alpha=None,
        mask=None, a0=0.1, b0=1.0, random_state=None, callback=None):
    """Run a :class:`Chain` and summarise its thinned samples after burn-in.

    Parameters are those of :class:`Chain`, plus:

    n_iter : int
        Number of iterations.
    burn_in : int, optional
        Iterations discarded before saving; default ``n_iter // 6`` (the
        paper's 1,000 of 6,000).
    thin : int
        Save every ``thin``-th iteration after burn-in (iterations
        ``burn_in + thin``, ``burn_in + 2 thin``, ...). Default 25.
    callback : callable, optional
        Called as ``callback(state)`` with the :class:`ChainState` after every
        iteration (e.g. to drive a progress bar).

    Returns
    -------
    FitResult
    """
    n_iter = _check_count("n_iter", n_iter, 1)
    burn_in = n_iter // 6 if burn_in is None else _check_count("burn_in", burn_in, 0)
    thin = _check_count("thin", thin, 1)
    if burn_in + thin > n_iter:
        raise ValueError(f"no sample would be saved: burn_in + thin = {burn_in + thin} exceeds "
                         f"n_iter = {n_iter}; raise n_iter or lower burn_in/thin")
    if callback is not None and not callable(callback):
        raise TypeError(f"callback must be callable, got {callback!r}")
    chain = Chain(Y_obs, model=model, method=method, n_components=n_components, alpha=alpha,
                  mask=mask, a0=a0, b0=b0, random_state=random_state)
    trace = np.empty(n_iter)
    samples, saved = [], []
    mu_sum = None
    best, best_log_joint = None, -math.inf
    total_seconds = 0.0
    for t in range(n_iter):
        seconds = chain._advance()
        total_seconds += seconds
        trace[t] = chain.log_joint
        iteration = chain.iteration
        if iteration > burn_in and (iteration - burn_in) % thin == 0:
            factors = chain.factors
            mu = models.rates(model, factors)
            mu_sum = mu if mu_sum is None else mu_sum + mu
            samples.append(factors)
            saved.append(iteration)
            if best is None or chain.log_joint > best_log_joint:
                best, best_log_joint = factors, chain.log_joint
        if callback is not None:
            callback(chain._state(seconds))
    return FitResult(mu_hat=mu_sum / len(samples), samples=samples, log_joint=trace, best=best,
                     best_log_joint=float(best_log_joint), saved_iterations=saved, model=model,
                     method=method, n_components=chain.n_components, seconds=total_seconds)
