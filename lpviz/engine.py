"""The one driver: data set -> Release -> run(model, method) -> Posterior -> score.

- :class:`Chain` runs one Markov chain of a model (:mod:`lpviz.models`) under
  a method (:mod:`lpviz.methods`) step by step; its kernels release the GIL,
  so chains run in worker threads and share the kernel pool
  (:mod:`lpviz._parallel`).
- :func:`run` drives a chain for ``n_iter`` iterations as an iterator of
  :class:`ChainState` and feeds a :class:`Posterior` (running mean of the
  rates over the saved samples, the samples, the best one, traces, timings).
- :func:`fit` runs to the end and returns the :class:`Posterior`.
- ``inference="vi"`` in :func:`run`/:func:`fit` drives a variational fit
  (:class:`lpviz.vi.VariationalFit`, a Chain with CAVI sweeps) the same way;
  ``init="vi"`` starts a chain from one.

Each iteration: the method produces the counts the model conditions on
(fixed counts; or, for ``private``, latent true counts drawn given the noised
ones) and the model allocates them to its components; then the model draws
its factors from their gamma conditionals over the observed cells. Every
number a user sees is then computed from the posterior by
:func:`lpviz.metrics.score`.

Data come as a :class:`~lpviz.release.Release` (with a
:class:`~lpviz.release.Truth` beside it for the non-private method), or, as
in lpviz 0.1, as a count matrix with ``alpha`` and ``mask``.
"""

import math
import time
import warnings
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from lpviz import methods as method_registry
from lpviz import models as model_registry
from lpviz._parallel import check_signals, chunk_bounds, limit_blas_threads, new_stop_flag
from lpviz._random import chain_seed_from
from lpviz._validate import check_alpha_rows as _check_alpha
from lpviz.methods.base import Exclusions, excluded_rows
from lpviz.models._kernels import low_rank_rows
from lpviz.models.base import Work, check_count, matrix_shape
from lpviz.release import Release, Truth, check_count_bound, smallest_int_dtype, summed_counts

__all__ = [
    "Chain",
    "ChainState",
    "ChainStopped",
    "Posterior",
    "VariationalPosterior",
    "FitResult",
    "Run",
    "run",  # noqa: F822 -- served by __getattr__ (it lives in lpviz.driver)
    "fit",  # noqa: F822 -- served by __getattr__ (it lives in lpviz.driver)
    "chain_bytes",
    "posterior_bytes",
    "check_posterior_memory",
]

# Up to this many cells the posterior keeps a running sum of the rates; larger
# matrices keep only the saved factors and compute rates by row blocks.
DENSE_MEAN_MAX_CELLS = 16_000_000
# Counts beyond this are far from what count models of words or messages meet:
# the kernels stay O(K) per cell, but such data are usually a unit mistake.
LARGE_COUNT_WARNING = 10**9
FIT_FORMAT = "lpviz-fit-1"


class ChainStopped(RuntimeError):
    """A chain was stopped in the middle of an iteration; its state is incomplete."""


class _LazyRates:
    """``state.mu`` is computed from the factors on first access, so streaming
    states costs nothing when nobody reads mu."""

    def __get__(self, state, owner=None):
        if state is None:
            return None
        if state._mu is None:
            if state.model_instance is not None:
                state._mu = state.model_instance.rates(state.factors)
            else:  # a state built by hand names its model
                state._mu = model_registry.rates(state.model, state.factors)
        return state._mu

    def __set__(self, state, value):
        state._mu = value


@dataclass(eq=False)
class ChainState:
    """The state of a chain after one iteration.

    ``iteration`` counts completed iterations (1 after the first sweep);
    ``log_joint`` the complete-data log joint (:attr:`Chain.log_joint`);
    ``log_marginal`` the marginal log likelihood of the noised counts
    (private chains; NaN otherwise: see :attr:`Chain.log_marginal`);
    ``seconds`` the wall-clock time of this iteration; ``factors`` copies of
    the factors; ``mu`` the rates of every cell (computed on first access);
    ``chain`` the index of the chain in an ensemble (0 for a single chain).
    """

    iteration: int
    mu: np.ndarray = _LazyRates()  # type: ignore[assignment]  # a descriptor: computed on first access
    log_joint: float = math.nan
    seconds: float = 0.0
    factors: dict = field(default_factory=dict)
    model: str = "topics"
    # after lpviz 0.1's fields, so positional construction keeps working
    log_marginal: float = math.nan
    model_instance: object = field(default=None, repr=False)
    _mu: np.ndarray | None = field(default=None, init=False, repr=False)
    # which chain of an ensemble (lpviz.fit(..., chains=C)) produced the state
    chain: int = field(default=0, repr=False)


# ---------------------------------------------------------------------------
# Input checks (the array face)
# ---------------------------------------------------------------------------


# Rows checked at once when float counts are validated and converted (a block of at most this many cells):
# no temporary of the whole matrix's size.
CHECK_BLOCK_CELLS = 1 << 22


def _integer_values(values, what):
    """``values`` as integer counts after checking they are finite integers: integer arrays as they
    are (any integer type, no copy), integer-valued floats converted, a block of rows at a time, to
    the smallest integer type that holds them (a 10,000 x 10,000 float64 matrix of counts is never
    copied whole)."""
    values = np.asarray(values)
    if values.dtype == bool or values.dtype.kind not in "iuf":
        raise TypeError(
            f"{what} must hold integer counts, got dtype {values.dtype}; "
            "pass an integer array (e.g. Y.astype(np.int64))"
        )
    if values.dtype.kind == "u" and values.size and int(values.max()) > np.iinfo(np.int64).max:
        raise ValueError(f"{what} has counts above 2**63 - 1, which no count model here can hold")
    if values.dtype.kind != "f":
        return values
    if values.size == 0:
        return values.astype(np.int64)
    flat = values.reshape(values.shape[0], -1) if values.ndim > 1 else values.reshape(1, -1)
    rows = max(1, CHECK_BLOCK_CELLS // max(flat.shape[1], 1))
    low, high = 0.0, 0.0
    for start in range(0, flat.shape[0], rows):
        block = flat[start : start + rows]
        if not np.all(np.isfinite(block)):
            raise ValueError(
                f"{what} has NaN or infinite entries; counts must be finite integers. "
                "For held-out cells put any integer there (e.g. 0) and set them False in mask"
            )
        if np.any(block != np.floor(block)):
            raise ValueError(f"{what} has non-integer entries; counts must be integers")
        if block.size:
            low, high = min(low, float(block.min())), max(high, float(block.max()))
    if high >= 2.0**63 or low < -(2.0**63):
        raise ValueError(f"{what} has counts beyond the 64-bit integers, which no count model here can hold")
    dtype = smallest_int_dtype(np.array([low, high]))
    out = np.empty(values.shape, dtype=dtype)
    out_flat = out.reshape(flat.shape)
    for start in range(0, flat.shape[0], rows):
        out_flat[start : start + rows] = flat[start : start + rows]
    return out


def _check_counts(Y_obs):
    """Dense integer array (any integer type, any order >= 2, C-contiguous), or a CSR matrix with integer data."""
    if isinstance(Y_obs, np.ma.MaskedArray):
        raise TypeError(
            "Y_obs is a masked array, whose mask a fit would not see: pass Y_obs.filled(0) with "
            "mask=~np.ma.getmaskarray(Y_obs) (True = observed) to leave the masked cells out"
        )
    if sp.issparse(Y_obs):
        if Y_obs.ndim != 2:
            raise ValueError(f"Y_obs must be a 2-D count matrix, got shape {Y_obs.shape}")
        Y = sp.coo_matrix(Y_obs, copy=True)  # any sparse format; repeated entries added exactly below
        Y.data = _integer_values(Y.data, "Y_obs")
        Y = summed_counts(Y, "Y_obs")
    else:
        Y = _integer_values(Y_obs, "Y_obs")
        if Y.ndim < 2:
            raise ValueError(f"Y_obs must be a count array of at least two modes (rows x columns), got shape {Y.shape}")
        Y = np.ascontiguousarray(Y)
    if 0 in Y.shape:
        raise ValueError(f"Y_obs is empty (shape {Y.shape}); it needs at least one row and one column")
    if not sp.issparse(Y):  # (summed_counts held a sparse matrix's sums to the bound)
        check_count_bound(Y, "Y_obs")  # before a kernel loops on a huge count
    return Y


def _check_mask(mask, shape):
    if mask is None:
        return None
    mask = np.asarray(mask)
    if mask.dtype != bool:
        raise TypeError(f"mask must be a boolean array (True = observed), got dtype {mask.dtype}")
    if mask.shape != tuple(shape):
        raise ValueError(f"mask has shape {mask.shape} but Y_obs has shape {tuple(shape)}; they must match")
    return mask


def _either(*masks):
    """Elementwise OR of the masks that are not None (None if all are)."""
    present = [np.asarray(m, dtype=bool) for m in masks if m is not None]
    if not present:
        return None
    out = present[0].copy()
    for mask in present[1:]:
        out |= mask
    return out


def _as_matrix(cells):
    """An array of cells (any order >= 2) as the matrix the methods and kernels see
    (:func:`lpviz.models.base.matrix_shape`): a view, no copy."""
    return None if cells is None else cells.reshape(cells.shape[0], -1)


def _lists(mask, n_rows):
    if mask is None or not mask.any():
        return (np.zeros(n_rows + 1, dtype=np.int64), np.zeros(0, dtype=np.int64))
    return excluded_rows(mask)


# ---------------------------------------------------------------------------
# The chain
# ---------------------------------------------------------------------------


class Chain:
    """A Gibbs sampler for Poisson factorization of (possibly noised) counts.

    Parameters
    ----------
    data : Release, or array-like / scipy.sparse matrix of int (n_rows, n_cols)
        A :class:`~lpviz.release.Release` (it carries alpha, held-out cells
        and structural zeros), or counts as in lpviz 0.1: noised (may be
        negative) for ``"private"`` and ``"naive"``, the true counts for
        ``"nonprivate"``.
    model : str or Model, optional
        A name in :data:`lpviz.models.MODELS` (``"topics"``, ``"blocks"``).
        Default for a Release: the model for its kind.
    method : str or Method
        A name in :data:`lpviz.methods.METHODS` (``"private"``, ``"naive"``,
        ``"nonprivate"``): how the noise is treated.
    n_components : int
        Topics K or communities C.
    alpha : float or array of shape (n_rows,), optional
        With array data: the noise level, one per row for heterogeneous noise
        (required for ``"private"``).
    mask : bool array, optional
        With array data: True where a cell is observed; held-out cells are
        left out of the likelihood and of every rate sum.
    truth : Truth, optional
        With a Release: the true counts, for a method that fits them
        (``"nonprivate"``).
    sampler : str, optional
        The private method's sampler (see :mod:`lpviz.methods.private`).
    a0, b0 : float
        Shape and rate of the gamma priors on every factor.
    random_state : None, int or numpy Generator
        Seed. The same seed gives the same chain for any number of threads.
    parallel : bool, optional
        Split sweeps over the kernel threads (default: when the data have at
        least :data:`lpviz._parallel.PARALLEL_MIN_CELLS` cells). The chain is
        the same either way.
    """

    def __init__(
        self,
        data,
        *,
        model=None,
        method="private",
        n_components,
        alpha=None,
        mask=None,
        truth=None,
        sampler=None,
        a0=0.1,
        b0=1.0,
        random_state=None,
        parallel=None,
    ):
        self.method_instance = method_registry.create(method, sampler=sampler)
        self.method = self.method_instance.name
        if isinstance(data, Release):
            model = model_registry.default_for(data.kind) if model is None else model
        elif model is None:
            raise ValueError("model= is required with a count matrix (or pass a Release, whose kind picks the model)")
        self.model_instance = model_registry.create(model, n_components, a0=a0, b0=b0)
        self.model = self.model_instance.name
        self.n_components = self.model_instance.n_components
        self.a0, self.b0 = self.model_instance.a0, self.model_instance.b0
        self.shape = tuple(data.shape if isinstance(data, Release) or sp.issparse(data) else np.shape(data))
        fitted = self._fitted_counts(data, truth)
        self._itemsize = count_itemsize(fitted)
        # the cells a method that lists some of them keeps (naive, non-private: 16 bytes a positive cell)
        self._positive = None if fitted is None else self.method_instance.positive_cells(fitted)
        if len(self.shape) >= 2:  # what the chain will hold, before it allocates any of it
            self.model_instance.check_shape(self.shape)
            self._check_memory()
        if isinstance(data, Release):
            if alpha is not None or mask is not None:
                raise ValueError(
                    "a Release carries its own alpha and held-out cells: drop alpha= and mask= "
                    "(make a new release with release.with_heldout(...) to change them)"
                )
            counts, alpha_rows, user_excluded = self._from_release(data, truth)
            self.release = data
        else:
            if truth is not None:
                raise ValueError("truth= goes with a Release; with a count matrix, the matrix is what is fitted")
            counts = _check_counts(data)
            mask = _check_mask(mask, counts.shape)
            alpha_rows = _check_alpha(alpha, counts.shape[0], self.method) if self.method_instance.needs_alpha else None
            user_excluded = None if mask is None else ~mask
            self.release = None
        self.shape = tuple(counts.shape)
        self.model_instance.check_shape(self.shape)
        if self.method_instance.needs_alpha and sp.issparse(counts):
            counts = counts.toarray()  # the private sweep visits every cell anyway

        # cells as a matrix (rows = the first mode), whatever the order of the data
        n_rows, n_cols = matrix_shape(self.shape)
        self._warn_on_huge_counts(counts)
        model_zeros = self.model_instance.structural_zeros(self.shape)
        excluded = _either(user_excluded, model_zeros)
        # what the chain left out, for scoring: held-out cells, and cells that do not exist
        release_zeros = self.release.structural_zeros if self.release is not None else None
        self.structural_zeros = _either(release_zeros, model_zeros)
        self.heldout = _either(self.release.heldout if self.release is not None else user_excluded)
        if self.heldout is not None and self.structural_zeros is not None:
            self.heldout &= ~self.structural_zeros
        if self.heldout is not None and not self.heldout.any():
            self.heldout = None
        n_observed = n_rows * n_cols - (0 if excluded is None else int(excluded.sum()))
        if n_observed == 0:
            raise ValueError("mask leaves no observed cell to fit; True marks observed cells")
        excluded = _as_matrix(excluded)
        exclusions = Exclusions(mask=excluded, rows=_lists(excluded, n_rows), n_observed=n_observed)
        missing = user_excluded if model_zeros is None or user_excluded is None else user_excluded & ~model_zeros
        missing = _as_matrix(missing)
        self._chain_seed = chain_seed_from(random_state)
        n_cells = n_rows * n_cols
        limit_blas_threads()
        self._work = Work(
            bounds=chunk_bounds(n_rows, n_cells, parallel),
            column_bounds=chunk_bounds(n_cols, n_cells, parallel),
            parallel=bool(parallel) if parallel is not None else len(chunk_bounds(n_rows, n_cells)) > 1,
            stop=new_stop_flag(),
            chain_seed=self._chain_seed,
            missing_by_row=_lists(missing, n_rows),
            missing_by_column=_lists(None if missing is None else missing.T, n_cols),
        )
        counts = counts if sp.issparse(counts) else _as_matrix(counts)
        self._prepared = self.method_instance.prepare(counts, alpha_rows, exclusions)
        self._start(np.random.default_rng(self._chain_seed))
        self._iteration = 0
        self._log_joint = math.nan
        self._log_marginal = math.nan
        self._broken = False

    def memory_estimate(self, shape=None):
        """Bytes the chain will hold for data of ``shape`` (default its own, whose positive
        cells are counted when the method keeps a list of them): the model's state, the
        method's latent state and the counts it fits (see :mod:`lpviz.budget`)."""
        positive = getattr(self, "_positive", None) if shape is None else None
        shape = self.shape if shape is None else tuple(shape)
        return chain_bytes(self.model_instance, self.method_instance, shape, getattr(self, "_itemsize", None), positive)

    def _fitted_counts(self, data, truth):
        """The integer counts the method will fit, as given (no copy), for the memory check before
        anything is allocated; None when they are not an integer array yet (checked later)."""
        if isinstance(data, Release):
            data = getattr(truth, "Y", truth) if self.method_instance.uses_truth else data.Y_obs
        if sp.issparse(data) and data.format in ("csr", "csc", "coo"):  # (others: converted later)
            return data
        if isinstance(data, np.ndarray) and data.dtype.kind in "iu":
            return data
        return None

    def _check_memory(self):
        from lpviz.budget import check_memory

        check_memory(
            self.memory_estimate(),
            f"a {self.method} chain of the {self.model} model on "
            f"{' x '.join(f'{n:,}' for n in self.shape)} counts with {self.n_components} components",
            fix="Fit fewer rows or columns, or fewer components.",
        )

    @staticmethod
    def _warn_on_huge_counts(counts):
        values = counts.data if sp.issparse(counts) else counts
        # the extremes, not abs(values).max(): no copy of the counts
        largest = max(abs(int(values.min(initial=0))), abs(int(values.max(initial=0))))
        if largest > LARGE_COUNT_WARNING:
            warnings.warn(
                f"counts up to {largest:,}: far beyond what Poisson factorization of word or message "
                "counts is meant for (the sampler stays O(K) per cell, but check the units of the data)",
                stacklevel=3,
            )

    def _start(self, rng):
        """The initial state: random factors and the method's latent state."""
        self._state = self.model_instance.init_state(self.shape, self._prepared.mean_count, rng)
        self._latent = self.method_instance.start(self._prepared, self.model_instance, self._state, self._work, rng)

    def _from_release(self, release, truth):
        if self.method_instance.uses_truth:
            if truth is None:
                raise ValueError(
                    f"method={self.method!r} fits the true counts: pass truth=Truth(Y) beside "
                    "the release (an analyst who holds only the release cannot run it)"
                )
            if not isinstance(truth, Truth):
                truth = Truth(truth)
            if truth.Y.shape != release.shape:
                raise ValueError(f"the true counts have shape {truth.Y.shape} but the release {release.shape}")
            counts = np.array(truth.Y)
        else:
            counts = release.Y_obs  # read-only, in its smallest integer type: methods copy what they keep
        alpha = release.alpha_per_row if self.method_instance.needs_alpha else None
        return counts, alpha, _either(release.heldout, release.structural_zeros)

    # -- public API ---------------------------------------------------------

    @property
    def iteration(self):
        """Number of completed iterations."""
        return self._iteration

    @property
    def factors(self):
        """Copies of the current factors (``theta``/``phi`` for topics, ``theta``/``pi`` for blocks)."""
        return self.model_instance.factors(self._state)

    @property
    def mu(self):
        """Current Poisson rates of every cell (held-out cells included)."""
        return self.model_instance.rates(self.factors)

    @property
    def log_joint(self):
        """Complete-data log joint of the current state (NaN before the first step).

        ``log p(y, factors)`` for the counts ``y`` the chain conditions on
        (true, truncated or, for ``"private"``, the current latent counts):
        Poisson terms over observed cells plus the gamma priors of the
        factors; allocations to components are summed out. For ``"private"``
        it adds, over observed cells, the noise ``log Geom2(ytil - y; alpha)``
        with the auxiliary ``g`` and ``lambda`` integrated out.
        """
        return self._log_joint

    @property
    def log_marginal(self):
        """Marginal log likelihood of the noised counts, ``log p(Y_obs | factors)``
        summed over observed cells, for methods that model the noise (NaN otherwise).

        Evaluated during the sweep, so after iteration t it is that of the
        factors the sweep started from (iteration t - 1's). It does not depend
        on the latent counts, and mixes far faster than the log joint.
        """
        return self._log_marginal

    @property
    def y_latent(self):
        """Copy of the current latent true counts (private chains only, else None).
        Held-out cells are 0 (they are not sampled)."""
        latent = self._latent or {}
        if "y" in latent:
            return latent["y"].reshape(self.shape).copy()
        if latent.get("y_counts") is not None:
            indptr, indices, values = latent["y_counts"]
            matrix = sp.csr_matrix((values, indices, indptr), shape=matrix_shape(self.shape))
            return matrix.toarray().reshape(self.shape)
        return None

    @property
    def bessel_draws(self):
        """Copy of the last sweep's Bessel draws ``m`` (the Bessel sampler only, else None)."""
        latent = self._latent or {}
        return latent["bessel"].reshape(self.shape).copy() if "bessel" in latent else None

    @property
    def alpha(self):
        """Per-row noise levels (methods that model the noise, else None)."""
        return None if self._prepared.alpha is None else self._prepared.alpha.copy()

    def set_factors(self, factors):
        """Move the chain to these factors (a dict like :attr:`factors`), e.g. to start
        it from a variational fit's means (``lpviz.run(..., init="vi")``)."""
        expected = set(self.model_instance.factor_names)
        if not isinstance(factors, dict) or set(factors) != expected:
            raise ValueError(
                f"factors must be a dict with keys {sorted(expected)} (model={self.model!r}); "
                f"got {sorted(factors) if isinstance(factors, dict) else type(factors).__name__}"
            )
        current = self.factors
        for name, value in factors.items():
            value = np.asarray(value, dtype=np.float64)
            if value.shape != current[name].shape:
                raise ValueError(f"factors[{name!r}] has shape {value.shape}, the chain's {current[name].shape}")
            if not np.all(np.isfinite(value)) or np.any(value < 0):
                raise ValueError(f"factors[{name!r}] must be finite and non-negative")
        self.model_instance.set_factors(self._state, factors)

    def step(self, n=1):
        """Run ``n`` iterations; return the :class:`ChainState` of the last one."""
        n = check_count("n", n, 1)
        for _ in range(n):
            seconds = self._advance()
        return self._snapshot(seconds)

    def iterate(self, n_iter):
        """Run ``n_iter`` iterations, yielding a :class:`ChainState` after each.

        A generator: iterations run as it is consumed, so a caller can stop
        early (the chain keeps the state it reached).
        """
        n_iter = check_count("n_iter", n_iter, 0)
        return self._iterate(n_iter)

    def stop(self):
        """Ask a running iteration to stop (thread-safe): its kernels leave at the
        next row and :meth:`step` raises :class:`ChainStopped`; the chain cannot go on."""
        self._work.stop[0] = 1

    def __repr__(self):
        return (
            f"Chain(model={self.model!r}, method={self.method!r}, n_components={self.n_components}, "
            f"shape={self.shape}, iteration={self._iteration})"
        )

    # -- internals ------------------------------------------------------------

    def _iterate(self, n_iter):
        for _ in range(n_iter):
            seconds = self._advance()
            yield self._snapshot(seconds)

    def _snapshot(self, seconds):
        return ChainState(
            iteration=self._iteration,
            log_joint=self._log_joint,
            log_marginal=self._log_marginal,
            seconds=seconds,
            factors=self.factors,
            model=self.model,
            model_instance=self.model_instance,
        )

    def _advance(self):
        """One iteration; returns its wall-clock seconds."""
        if self._broken or self._work.stop[0]:
            self._broken = True
            raise ChainStopped("this chain was stopped in the middle of an iteration; start a new chain")
        start = time.perf_counter()
        iteration = self._iteration + 1
        model, work = self.model_instance, self._work
        try:
            stats = model.new_stats(self._state, work)
            counts, terms = self.method_instance.sweep(
                self._prepared, self._latent, model, self._state, stats, work, iteration
            )
            if work.stop[0]:
                check_signals()  # stopped by a Ctrl-C whose exception a compile swallowed: raise it
                raise ChainStopped("stopped during the sweep")
            log_joint = model.update_and_score(self._state, stats, counts, work, iteration)
            if work.stop[0]:
                check_signals()  # stopped by a Ctrl-C whose exception a compile swallowed: raise it
                raise ChainStopped("stopped during the factor update")
        except BaseException:
            self._broken = True
            raise
        self._iteration = iteration
        self._log_joint = float(log_joint + terms.get("noise", 0.0))
        self._log_marginal = float(terms.get("log_marginal", math.nan))
        return time.perf_counter() - start


# A Posterior's traces (log joint, log marginal, seconds) are lists of Python floats:
# a 24-byte object and an 8-byte slot each, and the lists' spare capacity.
TRACE_BYTES_PER_ITERATION = 3 * 36
# A saved sample beyond its factors' values: the dict, the arrays' headers, its iteration.
SAMPLE_OVERHEAD_BYTES = 512


def posterior_bytes(model, shape, n_iter, burn_in, thin):
    """Bytes a :class:`Posterior` of ``n_iter`` iterations holds at the end: the saved samples of
    the factors (one every ``thin`` after ``burn_in``) and the per-iteration traces."""
    saved = max(0, int(n_iter) - int(burn_in)) // max(1, int(thin))
    return int(saved * (model.factor_bytes(shape) + SAMPLE_OVERHEAD_BYTES) + int(n_iter) * TRACE_BYTES_PER_ITERATION)


def check_posterior_memory(model, shape, n_iter, burn_in, thin, limit=None):
    """Refuse (:class:`lpviz.budget.MemoryBudgetError`) a run whose saved samples would not fit,
    before it starts, naming the thinning that would."""
    from lpviz.budget import check_memory, memory_limit

    need = posterior_bytes(model, shape, n_iter, burn_in, thin)
    available = memory_limit() if limit is None else int(limit)
    if need <= available:
        return
    kept = max(0, int(n_iter) - int(burn_in))
    sample = model.factor_bytes(shape) + SAMPLE_OVERHEAD_BYTES
    room = available - int(n_iter) * TRACE_BYTES_PER_ITERATION
    if room > 0 and kept:
        fix = f"Save fewer samples: thin = {-(-kept * sample // room):,} or more fits, or run fewer iterations."
    else:  # the traces alone are too long: fewer iterations, at this thinning
        per_iteration = TRACE_BYTES_PER_ITERATION + sample / max(1, int(thin))
        most = int((available + int(burn_in) * sample / max(1, int(thin))) // per_iteration)
        fix = (
            f"Run fewer iterations: each keeps {TRACE_BYTES_PER_ITERATION} bytes of traces; at most about "
            f"{most:,} fit at thin = {int(thin)}."
        )
    check_memory(
        need,
        f"a run of {int(n_iter):,} iterations saving {kept // max(1, int(thin)):,} samples of the "
        f"factors ({' x '.join(f'{int(n):,}' for n in shape)} counts, {model.n_components} components)",
        limit=limit,
        fix=fix,
    )


def count_itemsize(counts):
    """Bytes per count of dense integer ``counts`` (what :meth:`Method.count_bytes` may narrow
    from); None for anything else (sparse, float, described rows): not known."""
    dtype = getattr(counts, "dtype", None)
    if dtype is None or sp.issparse(counts) or np.dtype(dtype).kind not in "iu":
        return None
    return int(np.dtype(dtype).itemsize)


def chain_bytes(model, method, shape, itemsize=None, positive=None, variational=False):
    """Bytes a chain of ``model`` (a Model) under ``method`` (a Method) holds for data of ``shape``:
    the model's state and statistics, the method's latent state, the counts as the method keeps
    them (:meth:`~lpviz.methods.base.Method.count_bytes`; ``itemsize``: bytes per count of the
    release's integers, None when not known; ``positive``: :meth:`Method.positive_cells` of them,
    None when not counted; ``variational``: the method's CAVI state instead of its chain's,
    :meth:`~lpviz.methods.base.Method.vi_state_bytes`) (one estimate for the CLI, the loaders, the
    dashboard's budget and the workers of a cluster)."""
    if variational:
        own = method.vi_state_bytes(matrix_shape(shape), model, positive)
    else:
        own = method.state_bytes(matrix_shape(shape), model)  # methods see cells as a matrix
    return int(
        model.state_bytes(shape)
        + own
        + method.count_bytes(matrix_shape(shape), itemsize, positive)
        + 2 * 8 * sum(int(n) for n in shape) * model.n_components
    )


# ---------------------------------------------------------------------------
# The posterior
# ---------------------------------------------------------------------------


class Posterior:
    """What a run leaves: thinned samples after burn-in and their summaries.

    ``mu_hat``: posterior mean of the rates over the saved samples (every
    cell, held-out ones included; 0 at the model's structural zeros);
    ``samples``: the saved factor dicts; ``saved_iterations``; ``best`` /
    ``best_log_joint`` / ``best_iteration``: the saved sample with the highest
    log joint (show topics from it: labels switch between samples);
    ``log_joint``, ``log_marginal``, ``iteration_seconds``: traces, one value
    per iteration; ``seconds``: total sampling time; ``iterations``;
    ``heldout``/``structural_zeros``: the cells the chain held out / that do
    not exist (boolean matrices or None), for scoring.
    """

    inference = "mcmc"
    _keeps_rate_sum = True  # the running sum of the saved samples' rates (small enough releases)

    def __init__(self, model, method, shape, *, burn_in, thin, heldout=None, structural_zeros=None):
        self.model_instance = model
        self.heldout = heldout
        self.structural_zeros = structural_zeros
        self.model = model.name
        self.method = method if isinstance(method, str) else method.name
        self.method_label = method if isinstance(method, str) else method.display_name
        self.n_components = model.n_components
        self.shape = tuple(shape)
        self.burn_in = burn_in
        self.thin = thin
        self.samples, self.saved_iterations = [], []
        self.best, self.best_log_joint, self.best_iteration = None, -math.inf, None
        self._log_joint, self._log_marginal, self._seconds = [], [], []
        n_cells = math.prod(self.shape)
        dense = self._keeps_rate_sum and n_cells <= DENSE_MEAN_MAX_CELLS
        self._rate_sum = np.zeros(self.shape) if dense else None
        self._mu_hat = None

    def add(self, state):
        """Record one iteration's state; returns True when it is saved as a sample."""
        self._log_joint.append(state.log_joint)
        self._log_marginal.append(state.log_marginal)
        self._seconds.append(state.seconds)
        iteration = state.iteration
        if iteration <= self.burn_in or (iteration - self.burn_in) % self.thin:
            return False
        self.add_sample(state.factors, iteration, state.log_joint)
        return True

    def add_sample(self, factors, iteration, log_joint):
        """Save one sample of the factors (VI: the variational mean) with its log joint."""
        self.samples.append(factors)
        self.saved_iterations.append(iteration)
        if self._rate_sum is not None:
            self._rate_sum += self.model_instance.rates(factors)
        self._mu_hat = None
        if self.best is None or log_joint > self.best_log_joint:
            self.best, self.best_log_joint, self.best_iteration = factors, float(log_joint), iteration

    # -- traces ----------------------------------------------------------------
    @property
    def log_joint(self):
        return np.asarray(self._log_joint, dtype=float)

    @property
    def log_marginal(self):
        return np.asarray(self._log_marginal, dtype=float)

    @property
    def iteration_seconds(self):
        return np.asarray(self._seconds, dtype=float)

    @property
    def seconds(self):
        return float(np.sum(self._seconds))

    @property
    def iterations(self):
        return len(self._log_joint)

    @property
    def n_saved(self):
        return len(self.saved_iterations)

    # -- rates -------------------------------------------------------------------
    def rate_rows(self, start, stop):
        """Posterior mean rates of rows [start, stop) (None before the first saved sample)."""
        if not self.samples:
            return None
        if self._rate_sum is not None:
            return self._rate_sum[start:stop] / len(self.samples)
        left = np.hstack([self.model_instance.low_rank(f)[0][start:stop] for f in self.samples])
        right = np.hstack([self.model_instance.low_rank(f)[1] for f in self.samples])
        mu = (low_rank_rows(left, right) / len(self.samples)).reshape((left.shape[0],) + self.shape[1:])
        zeros = self.model_instance.structural_zeros(self.shape)
        if zeros is not None:
            mu[zeros[start:stop]] = 0.0
        return mu

    @property
    def mu_hat(self):
        """Posterior mean rates of every cell (None before the first saved sample)."""
        if not self.samples:
            return None
        if self._mu_hat is None:
            self._mu_hat = self.rate_rows(0, self.shape[0])
        return self._mu_hat

    def save(self, path, release=None, *, overwrite=False):
        """Write the fit as ``.npz`` in the fit schema (:data:`FIT_FORMAT`, docs/formats.md)::

            format              "lpviz-fit-1"
            model, method       str: registry names; method_label: its label with options
            n_components        int
            mu_hat              float (D, V): posterior mean rates (0 at structural zeros)
            heldout             bool (D, V), optional: cells held out of the fit
            structural_zeros    bool (D, V), optional: cells that do not exist (never scored)
            row_labels, col_labels  str, optional: the release's public labels
            log_joint, log_marginal, iteration_seconds  float (T,): traces, one value per iteration
            saved_iterations    int (S,)
            burn_in, thin       int: the schedule samples were saved on
            best_iteration, best_log_joint, best_<factor>: the saved sample with the highest log joint

        With the true counts at hand anyone recomputes every number
        :func:`lpviz.metrics.score` prints from these arrays.
        """
        from pathlib import Path

        from lpviz._files import atomic_write, output_exists, shown

        path = Path(path)
        if output_exists(path) and not overwrite:
            raise FileExistsError(f"{shown(path)} already exists; choose another name or pass overwrite=True")
        arrays = self.fit_arrays(release)
        atomic_write(path, lambda handle: np.savez_compressed(handle, **arrays))
        return path

    def fit_arrays(self, release=None):
        """The arrays :meth:`save` writes, by name (an ensemble's file holds one set per chain)."""
        if self.mu_hat is None:
            raise ValueError("the fit has no saved sample yet; run past burn_in + thin iterations first")
        zeros = self.structural_zeros
        arrays = {
            "format": np.asarray(FIT_FORMAT),
            "model": np.asarray(self.model),
            "method": np.asarray(self.method),
            "method_label": np.asarray(self.method_label),
            "n_components": np.asarray(self.n_components),
            "mu_hat": self.mu_hat,
            "log_joint": self.log_joint,
            "log_marginal": self.log_marginal,
            "iteration_seconds": self.iteration_seconds,
            "saved_iterations": np.asarray(self.saved_iterations, dtype=np.int64),
            "best_iteration": np.asarray(self.best_iteration),
            "best_log_joint": np.asarray(self.best_log_joint),
            "burn_in": np.asarray(self.burn_in, dtype=np.int64),
            "thin": np.asarray(self.thin, dtype=np.int64),
        }
        arrays.update({f"best_{name}": value for name, value in self.best.items()})
        arrays.update(self._extra_arrays())
        if self.heldout is not None:
            arrays["heldout"] = self.heldout
        if zeros is not None:
            arrays["structural_zeros"] = zeros
        for key in ("row_labels", "col_labels"):  # a release holds labels only when they were declared public
            if release is not None and getattr(release, key) is not None:
                arrays[key] = np.asarray(getattr(release, key), dtype=str)
        return arrays

    @classmethod
    def load(cls, path, *, limit=None):
        """Read a fit written by :meth:`save` (``METHOD.npz`` of ``lpviz fit --output``).

        Read through the bounded reader (:class:`lpviz._files.Archive`): the
        headers are checked and what the fit takes in memory is checked
        against the budget (``limit``) before any array is decompressed. The
        result has the posterior mean rates (``mu_hat``, ``rate_rows``), the
        traces, the saved iterations and the best sample; the file keeps no
        other sample, so ``samples`` holds the best one only. A variational
        fit comes back as a :class:`lpviz.vi.VariationalPosterior` (without
        its ``converged`` flag, which the file does not record). Labels, when
        the file has them, are ``row_labels`` and ``col_labels``.
        """
        from lpviz._files import open_archive

        with open_archive(path, what="fit", fix=_FIT_FIX, limit=limit) as archive:
            return _posterior_from_archive(cls, archive)

    def to_inference_data(self, release=None, truth=None, *, cells=None, columns=None, attrs=None):
        """This chain as an ArviZ ``InferenceData`` of one chain: see
        :meth:`lpviz.ensemble.EnsemblePosterior.to_inference_data`."""
        from lpviz.diagnostics import fit_inference_data

        return fit_inference_data(self, [self], release, truth, cells=cells, columns=columns, attrs=attrs)

    def _extra_arrays(self):
        """Arrays a kind of posterior adds to the fit file (a variational fit: its ELBO)."""
        return {}

    def __repr__(self):
        return (
            f"Posterior(model={self.model!r}, method={self.method!r}, shape={self.shape}, "
            f"iterations={self.iterations}, saved={self.n_saved})"
        )


class VariationalPosterior(Posterior):
    """The :class:`~lpviz.engine.Posterior` of a CAVI fit: its one saved "sample" is
    the current ``E_q[factors]`` (replaced every iteration), so ``mu_hat`` is
    ``E_q[mu]`` (mean-field: ``E[theta] E[phi]``), computed on demand by row
    blocks. Traces: ``elbo`` and ``iteration_seconds`` (``log_joint`` and
    ``log_marginal`` are NaN). ``converged``: whether the fit had converged.
    """

    inference = "vi"
    # one mean, not a running sum: rates by row blocks when asked (no rows x columns zeros made and
    # dropped: they were a CAVI driver's largest allocation, 72 MB at 3,000 actors)
    _keeps_rate_sum = False

    def __init__(self, model, method, shape, *, heldout=None, structural_zeros=None):
        super().__init__(model, method, shape, burn_in=0, thin=1, heldout=heldout, structural_zeros=structural_zeros)
        self.method_label = f"{self.method_label}, VI"
        self._elbo = []
        self.converged = False

    def add(self, state):
        """Record one iteration's :class:`lpviz.vi.VariationalState`; its means replace the saved ones."""
        self._log_joint.append(math.nan)
        self._log_marginal.append(math.nan)
        self._seconds.append(state.seconds)
        self._elbo.append(state.elbo)
        self.samples, self.saved_iterations = [state.factors], [state.iteration]
        self.best, self.best_log_joint, self.best_iteration = state.factors, math.nan, state.iteration
        self._mu_hat = None
        self.converged = bool(state.converged)
        return True

    @property
    def elbo(self):
        return np.asarray(self._elbo, dtype=float)

    def _extra_arrays(self):
        return {"inference": np.asarray(self.inference), "elbo": self.elbo}


FitResult = Posterior  # the name lpviz 0.1 gave what fit() returns

_FIT_FIX = "a fit is written by `lpviz fit --output DIR` (or Posterior.save)"
_FIT_TRACES = ("log_joint", "log_marginal", "iteration_seconds")


def _posterior_from_archive(cls, archive):
    """A :class:`Posterior` from an open fit archive (see :meth:`Posterior.load`).

    Checked like a release before anything is built on it: the model, method and inference
    exist and go together; ``mu_hat`` has the model's shape, finite rates >= 0; the masks and
    labels fit it; the schedule (``burn_in >= 0``, ``thin >= 1``), the traces (one length: the
    iterations) and the saved iterations (increasing, on the schedule, within the traces) agree;
    the best sample holds the model's factors, finite and >= 0, of the shapes ``mu_hat`` implies.
    Each problem is a one-line ``ValueError`` naming the file.
    """
    name = archive.name

    def refuse(problem):
        return ValueError(f"{name}: {problem}; {_FIT_FIX}")

    if "format" not in archive or archive.read_text("format", max_chars=64) != FIT_FORMAT:
        raise refuse(f"not a fit ({FIT_FORMAT!r}; it holds {archive.listing()})")
    model_name = archive.read_text("model", max_chars=64) if "model" in archive else ""
    if model_name not in model_registry.MODELS:
        raise refuse(f"model {model_name[:40]!r} is none of {', '.join(model_registry.MODELS)}")
    method_name = archive.read_text("method", max_chars=64) if "method" in archive else ""
    if method_name not in method_registry.METHODS:
        raise refuse(f"method {method_name[:40]!r} is none of {', '.join(method_registry.METHODS)}")
    label = archive.read_text("method_label", max_chars=256) if "method_label" in archive else method_name
    components = archive.read_scalar("n_components", kinds="iu") if "n_components" in archive else 0
    if not 1 <= components <= 100_000:
        raise refuse(f"n_components = {components} is not a number of components")
    inference = archive.read_text("inference", max_chars=16) if "inference" in archive else "mcmc"
    model_class, method_class = model_registry.get(model_name), method_registry.get(method_name)
    if inference not in INFERENCES:
        raise refuse(f"inference {inference[:20]!r} is none of {', '.join(INFERENCES)}")
    if inference not in model_class.inferences or inference not in method_class.inferences:
        raise refuse(f"a {model_name} model fitted by the {method_name} method has no {inference} fit")
    if "mu_hat" not in archive:
        raise refuse("no posterior mean rates 'mu_hat' in it")
    rates = archive.header("mu_hat")
    if rates.ndim < 2 or rates.dtype.kind != "f" or 0 in rates.shape:
        raise refuse(f"'mu_hat' must be a float array of two or more modes, not {rates.shape} of {rates.dtype}")
    model = model_registry.create(model_name, int(components))
    try:
        model.check_shape(rates.shape)
    except ValueError as error:
        raise refuse(f"'mu_hat' {rates.shape} does not fit the model: {error}") from None
    traces = [key for key in (*_FIT_TRACES, "elbo") if key in archive]
    lengths = {archive.header(key).shape for key in traces}
    if len(lengths) > 1 or any(len(shape) != 1 for shape in lengths):
        raise refuse(f"the traces {', '.join(traces)} must be one value per iteration, of one length")
    for key in traces:
        if archive.header(key).dtype.kind not in "iuf":
            raise refuse(f"the trace {key!r} must hold numbers, not {archive.header(key).dtype}")
    n_iterations = next(iter(lengths))[0] if lengths else 0
    for key in ("heldout", "structural_zeros"):
        if key in archive and (archive.header(key).dtype != bool or archive.header(key).shape != rates.shape):
            raise refuse(f"{key!r} must be booleans shaped like mu_hat {rates.shape}")
    for key, n in (("row_labels", rates.shape[0]), ("col_labels", rates.shape[1])):
        if key in archive and (archive.header(key).shape != (n,) or archive.header(key).dtype.kind not in "US"):
            header = archive.header(key)
            raise refuse(
                f"{key!r} must be {n:,} labels (text), one per {key[:3]} of mu_hat, "
                f"not {header.shape} of {header.dtype}"
            )
    best = [
        key for key in archive.keys() if key.startswith("best_") and key not in ("best_iteration", "best_log_joint")
    ]
    if best and sorted(key[len("best_") :] for key in best) != sorted(model.factor_names):
        raise refuse(
            f"the best sample holds {', '.join(k[5:] for k in best)}; a {model_name} model's factors are "
            + ", ".join(model.factor_names)
        )
    # each factor's shape from its header, before a byte of any array is inflated: one side is the
    # components, the other a mode of the rates (or the components: a block model's pi)
    sizes = {*rates.shape, int(components)}
    for key in best:
        shape = archive.header(key).shape
        if len(shape) != 2 or components not in shape or not set(shape) <= sizes:
            raise refuse(
                f"the best sample's factors ({key[len('best_') :]} {shape}) are not those of {components} "
                f"components of a {' x '.join(map(str, rates.shape))} fit (each pairs the components with "
                "one of its sizes)"
            )
    arrays = ["mu_hat", "saved_iterations", *traces, "heldout", "structural_zeros", *best]
    arrays += [key for key in ("row_labels", "col_labels") if key in archive]
    # the constructor's running sum of the rates (replaced by mu_hat) and the labels as Python strings
    labels = sum(archive.header(key).size * 80 for key in ("row_labels", "col_labels") if key in archive)
    archive.require(
        arrays, extra=rates.nbytes + labels, what=f"reading the fit ({rates.shape[0]:,} x {rates.shape[1]:,} rates)"
    )
    schedule = {key: int(archive.read_scalar(key, kinds="iu")) for key in ("burn_in", "thin") if key in archive}
    burn_in, thin = schedule.get("burn_in", 0), schedule.get("thin", 1)
    if burn_in < 0 or thin < 1:
        raise refuse(f"burn_in = {burn_in}, thin = {thin}: a schedule needs burn_in >= 0 and thin >= 1")
    saved = archive.read("saved_iterations") if "saved_iterations" in archive else np.zeros(0, dtype=np.int64)
    if saved.ndim != 1 or saved.dtype.kind not in "iu":
        raise refuse("'saved_iterations' must be a list of whole numbers")
    saved = saved.astype(np.int64)
    on_schedule = (saved > burn_in) & ((saved - burn_in) % thin == 0) if inference == "mcmc" else saved >= 1
    if saved.size and (
        np.any(np.diff(saved) <= 0) or not on_schedule.all() or saved[0] < 1 or saved[-1] > n_iterations
    ):
        raise refuse(
            f"'saved_iterations' ({_few(saved)}) must increase within the {n_iterations:,} traced iterations"
            + (f", after burn_in {burn_in} every thin = {thin}" if inference == "mcmc" else "")
        )
    best_iteration = int(archive.read_scalar("best_iteration", kinds="iu")) if "best_iteration" in archive else None
    if best_iteration is not None and best_iteration not in set(saved.tolist()):
        raise refuse(f"best_iteration {best_iteration} is none of the saved iterations ({_few(saved)})")
    if best and not saved.size:
        raise refuse("it holds a best sample but no saved iteration")
    # the factors (small) are read and checked before the rates (rows x columns) are inflated
    factors = {key[len("best_") :]: archive.read(key) for key in best}
    for key, value in factors.items():
        if value.dtype.kind not in "iuf":
            raise refuse(f"factor 'best_{key}' must hold numbers, not {value.dtype}")
        _check_rates(value, f"factor 'best_{key}'", refuse)
    if factors:
        try:
            left, right = model.low_rank(factors)
            shapes = (np.shape(left), np.shape(right))
        except (ValueError, IndexError, KeyError, TypeError) as error:
            raise refuse(f"the best sample's factors do not make rates ({str(error)[:120]})") from None
        n_rows, n_cols = matrix_shape(rates.shape)
        if shapes != ((n_rows, components), (n_cols, components)):
            raise refuse(
                "the best sample's factors ("
                + ", ".join(f"{k} {np.shape(v)}" for k, v in factors.items())
                + f") are not those of {components} components of a {' x '.join(map(str, rates.shape))} fit"
            )
    mu_hat = archive.read("mu_hat").astype(np.float64, copy=False)
    _check_rates(mu_hat, "'mu_hat'", refuse)
    heldout = archive.read("heldout") if "heldout" in archive else None
    zeros = archive.read("structural_zeros") if "structural_zeros" in archive else None
    if inference == "vi":
        posterior = VariationalPosterior(model, method_name, rates.shape, heldout=heldout, structural_zeros=zeros)
        posterior._elbo = archive.read("elbo").astype(float).tolist() if "elbo" in archive else []
    else:
        posterior = cls(
            model, method_name, rates.shape, burn_in=burn_in, thin=thin, heldout=heldout, structural_zeros=zeros
        )
    posterior.method_label = label
    for key, attribute in zip(_FIT_TRACES, ("_log_joint", "_log_marginal", "_seconds"), strict=True):
        if key in archive:
            setattr(posterior, attribute, archive.read(key).astype(float).tolist())
    posterior.saved_iterations = saved.tolist()
    posterior.best = factors or None
    posterior.best_log_joint = float(archive.read_scalar("best_log_joint")) if "best_log_joint" in archive else math.nan
    posterior.best_iteration = best_iteration
    posterior.samples = [factors] if factors else []
    posterior._rate_sum = mu_hat
    posterior._mu_hat = None
    for key in ("row_labels", "col_labels"):
        setattr(posterior, key, archive.read(key).tolist() if key in archive else None)
    return posterior


def _few(values, n=4):
    """The first few of ``values`` as text (for a one-line message)."""
    values = [int(v) for v in values[: n + 1]]
    return ", ".join(map(str, values[:n])) + (", ..." if len(values) > n else "")


def _check_rates(values, what, refuse):
    """Rates and factors of a fit are finite and >= 0: the first cell that is not, named."""
    bad = ~np.isfinite(values) | (values < 0)
    if bad.any():
        cell = tuple(int(i) for i in np.argwhere(bad)[0])
        raise refuse(f"{what} holds {float(values[cell])!r} at {cell}: rates and factors are finite and >= 0")


# ---------------------------------------------------------------------------
# The driver
# ---------------------------------------------------------------------------


def _schedule(n_iter, burn_in, thin):
    n_iter = check_count("n_iter", n_iter, 1)
    burn_in = n_iter // 6 if burn_in is None else check_count("burn_in", burn_in, 0)
    thin = check_count("thin", thin, 1)
    if burn_in + thin > n_iter:
        raise ValueError(
            f"no sample would be saved: burn_in + thin = {burn_in + thin} exceeds "
            f"n_iter = {n_iter}; raise n_iter or lower burn_in/thin"
        )
    return n_iter, burn_in, thin


class Run:
    """An iterator over the :class:`ChainState` of each iteration of one chain,
    feeding :attr:`posterior` as it goes (see :func:`run`)."""

    def __init__(self, chain, n_iter, burn_in, thin):
        check_posterior_memory(chain.model_instance, chain.shape, n_iter, burn_in, thin)
        self.chain = chain
        self.init = None  # the variational fit the chain started from (run(..., init="vi"))
        self.n_iter = n_iter
        self.posterior = Posterior(
            chain.model_instance,
            chain.method_instance,
            chain.shape,
            burn_in=burn_in,
            thin=thin,
            heldout=chain.heldout,
            structural_zeros=chain.structural_zeros,
        )

    def __iter__(self):
        return self

    def __next__(self):
        check_signals()  # a Ctrl-C or SIGTERM whose exception a compile swallowed ends the run here
        if self.chain.iteration >= self.n_iter:
            raise StopIteration
        state = self.chain.step()
        self.posterior.add(state)
        return state

    def stop(self):
        """Stop the chain, even in the middle of an iteration (thread-safe)."""
        self.chain.stop()

    def __repr__(self):
        return f"Run({self.chain!r}, n_iter={self.n_iter})"


INFERENCES = ("mcmc", "vi")


def __getattr__(name):
    # run() and fit() live in lpviz.driver, above this module and lpviz.vi; still importable from here
    if name in ("run", "fit"):
        from lpviz import driver

        return getattr(driver, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
