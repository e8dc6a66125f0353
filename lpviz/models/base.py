"""The model contract (:class:`Model`), checked at registration, and the work plan a chain hands
to its kernels (:class:`Work`).

How the engine addresses cells. Data of any order >= 2 (documents x words, sender x recipient,
sender x recipient x month, ...) reach the methods and the models' kernels as a matrix: rows are
the first mode, columns every other mode flattened in C order (:func:`matrix_shape`; a free
reshape of a C-contiguous array). The noise, the latent true counts, held-out cells and the
sparse step are per cell and per row, so the methods never know the order of the data; a model
whose columns are several modes maps the flat column back itself (the tensor model:
``column = j * T + t``). The hooks that take ``shape`` get the data's own shape.
"""

import abc
import math
from dataclasses import dataclass

import numpy as np

from lpviz._validate import check_int as check_count
from lpviz._validate import check_positive as check_positive
from lpviz.models._kernels import low_rank_rows


@dataclass
class Work:
    """How a chain's kernels split and seed their work (built by :class:`lpviz.engine.Chain`).

    ``bounds``/``column_bounds``: chunks of row / column stream blocks
    (:func:`lpviz._parallel.chunk_bounds`); ``parallel``: whether the data are
    large enough to split (False: one chunk, run inline); ``stop``: the stop flag the
    kernels poll; ``chain_seed``; ``missing_by_row``/``missing_by_column``:
    (indptr, indices) of the cells left out of the likelihood (held out, or
    structural zeros of the data), except the model's own structural zeros,
    which its kernels skip by construction; ``block_offset``: the stream block
    the rows start at (0 but for a partition of a chain's rows).
    """

    bounds: list
    column_bounds: list
    parallel: bool
    stop: np.ndarray
    chain_seed: int
    missing_by_row: tuple
    missing_by_column: tuple
    # The stream block of the first row: 0 for a whole chain; a partition of its rows on another
    # machine (lpviz.distributed) seeds its blocks as the whole chain does those rows.
    block_offset: int = 0


def matrix_shape(shape):
    """The matrix the methods and kernels see for data of ``shape`` (any order >= 2): rows are the
    first mode, columns the other modes flattened in C order."""
    shape = tuple(int(n) for n in shape)
    if len(shape) < 2:
        raise ValueError(f"count data have at least two modes (rows x columns), got shape {shape}")
    return shape[0], math.prod(shape[1:])


# Every hook a chain, the methods and the engine call (abstract: a model without one is refused
# at registration, naming it). See each method's docstring for its contract.
MCMC_HOOKS = (
    "init_state",
    "factors",
    "set_factors",
    "low_rank",
    "rate_rows",
    "new_stats",
    "allocate",
    "poisson_allocate",
    "update",
    "log_prior",
    "count_loglik",
    "state_bytes",
)
# The hooks of variational inference (models that declare "vi" in ``inferences``; lpviz.vi).
VI_HOOKS = ("vi_init", "vi_factors", "vi_moments", "vi_rates", "vi_new_stats", "vi_allocate", "vi_update")
# What the views can show of a fit, each a hook of that name (models declare theirs in ``shows``).
VIEWS = {
    "topics": "the topic-word matrix (K, V): the topic views",
    "memberships": "row memberships (n_rows, K): the topic map's documents",
    "communities": "actors' memberships in a square network (n_actors, K): the Blocks tab",
    "profiles": "a profile of each component over the last mode (T, K): the time-profile view",
    "pair_maps": "a component's first-by-second-mode map (I, J): the actor-by-actor heatmaps",
}


def contract_problems(model_class):
    """What ``model_class`` lacks of the model contract, in words (empty: it conforms)."""
    from lpviz.release import KINDS

    problems = []
    if not (isinstance(model_class, type) and issubclass(model_class, Model)):
        return [f"{model_class!r} is not a Model subclass"]
    for attribute in ("name", "label"):
        if not isinstance(getattr(model_class, attribute, None), str) or not getattr(model_class, attribute):
            problems.append(f"no {attribute} (a non-empty str class attribute)")
    missing = sorted(getattr(model_class, "__abstractmethods__", ()))
    if missing:
        problems.append(f"missing hooks: {', '.join(missing)}")
    if not model_class.factor_names:
        problems.append("no factor_names (the keys of its factor dicts)")
    unknown_kinds = [kind for kind in model_class.kinds if kind not in KINDS]
    if not model_class.kinds or unknown_kinds:
        problems.append(f"kinds must name the data kinds it fits, among {', '.join(KINDS)}; got {model_class.kinds}")
    stray = [kind for kind in model_class.default_for if kind not in model_class.kinds]
    if stray:
        problems.append(f"default_for names kinds it does not fit: {', '.join(stray)}")
    unknown_inferences = [inference for inference in model_class.inferences if inference not in ("mcmc", "vi")]
    if "mcmc" not in model_class.inferences or unknown_inferences:
        problems.append(f"inferences must include 'mcmc' and name only 'mcmc', 'vi'; got {model_class.inferences}")
    if "vi" in model_class.inferences:
        absent = [hook for hook in VI_HOOKS if getattr(model_class, hook) is getattr(Model, hook)]
        if absent:
            problems.append(f"declares inference 'vi' but lacks its hooks: {', '.join(absent)}")
    for view in model_class.shows:
        if view not in VIEWS:
            problems.append(f"shows {view!r}, which no view reads (known: {', '.join(VIEWS)})")
        elif getattr(model_class, view) is getattr(Model, view):
            problems.append(f"shows {view!r} but does not implement {view}(factors)")
    return problems


class Model(abc.ABC):
    """A Poisson factorization model with gamma priors (shape ``a0``, rate ``b0``): the contract.

    Class attributes: ``name`` (registry key), ``label``, ``component_name``
    ("topic", "community", ...), ``factor_names`` (keys of its factor dicts),
    ``kinds`` (the data kinds it fits: the dashboard's model selector lists
    the models that fit the data's kind), ``default_for`` (the kinds it is the
    default model of), ``inferences`` ("mcmc", and "vi" with the variational
    hooks) and ``shows`` (the views it feeds, :data:`VIEWS`). Each declared
    capability needs its hooks; :func:`lpviz.models.register` refuses a
    class that lacks one, naming it (:func:`contract_problems`).

    The chain's state is a tuple of arrays the kernels update in place;
    factor dicts (:meth:`factors`) are copies in the public orientation.
    Kernel hooks see cells as the matrix of :func:`matrix_shape`; hooks that
    take ``shape`` get the data's shape. Every model is checked by the
    conformance suite (``tests/test_conformance.py``), run over the registry.
    """

    name: str | None = None
    label: str | None = None
    component_name = "component"
    factor_names: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    default_for: tuple[str, ...] = ()
    inferences: tuple[str, ...] = ("mcmc",)
    shows: tuple[str, ...] = ()

    def __init__(self, n_components, a0=0.1, b0=1.0):
        self.n_components = check_count("n_components", n_components, 1)
        self.a0 = check_positive("a0", a0)
        self.b0 = check_positive("b0", b0)

    def __repr__(self):
        return f"{type(self).__name__}(n_components={self.n_components}, a0={self.a0}, b0={self.b0})"

    # -- data ----------------------------------------------------------------------------
    def check_shape(self, shape):
        """Raise a ValueError, naming the fix, if the model cannot fit data of ``shape``."""
        if len(shape) != 2:
            raise ValueError(
                f"model={self.name!r} fits a matrix (rows x columns), got data of shape {tuple(shape)}; "
                "a count array of higher order needs a model of that order (e.g. model='tensor')"
            )

    def structural_zeros(self, shape):
        """Boolean array (the data's shape) of the cells the model has no rate for (None: every cell has one)."""
        return None

    def factor_bytes(self, shape):
        """Bytes of one saved sample of the factors (float64) for data of ``shape``: per row and
        per column a vector of components, and a components x components block (a model whose
        factors differ overrides this)."""
        return 8 * self.n_components * (int(shape[0]) + int(shape[1]) + self.n_components)

    @abc.abstractmethod
    def state_bytes(self, shape):
        """Bytes of the chain's state and statistics for data of ``shape`` (a memory estimate)."""

    # -- state -------------------------------------------------------------------------------
    @abc.abstractmethod
    def init_state(self, shape, mean_count, rng):
        """The initial state tuple for data of ``shape`` whose observed cells average ``mean_count``."""

    @abc.abstractmethod
    def factors(self, state):
        """Copies of the factors as a dict (keys :attr:`factor_names`, public orientation)."""

    @abc.abstractmethod
    def set_factors(self, state, factors):
        """Write a factor dict (as :meth:`factors` gives) into the state, in place."""

    # -- rates -----------------------------------------------------------------------------
    @abc.abstractmethod
    def low_rank(self, factors):
        """``(left, right)`` with the rate matrix (:func:`matrix_shape`) ``mu = left @ right.T``,
        before structural zeros."""

    def rates(self, factors):
        """The Poisson rates of every cell (the data's shape), 0 at the model's structural zeros.
        Built from :meth:`low_rank` as a matrix; a model of higher order reshapes (overrides)."""
        left, right = self.low_rank(factors)
        mu = low_rank_rows(left, right)
        zeros = self.structural_zeros(mu.shape)
        if zeros is not None:
            mu[zeros] = 0.0
        return mu

    @abc.abstractmethod
    def rate_rows(self, state, rows):
        """Dense rates of the matrix rows ``rows`` (len(rows), n_cols), 0 at structural zeros."""

    # -- one MCMC iteration ---------------------------------------------------------------------
    @abc.abstractmethod
    def new_stats(self, state, work):
        """Empty allocation statistics for one iteration."""

    @abc.abstractmethod
    def allocate(self, state, counts, stats, work, iteration):
        """Allocate the counts ``counts`` (CSR (indptr, indices, values) int64 of the matrix) to the
        components, adding to ``stats``."""

    @abc.abstractmethod
    def poisson_allocate(self, state, rows, stats, work, iteration):
        """The sparse step: draw ``y ~ Poisson(scale_d mu_dv)`` at the observed cells with noised
        count <= 0 of the used rows, allocated into ``stats``; return the tokens' (rows, columns)
        (one entry per token). ``rows``: (use_row, noised counts (matrix), excluded indptr,
        excluded indices (sorted per row), scale (n_rows,)). :meth:`poisson_allocate_by_rates`
        is a correct, unhurried implementation any model can delegate to."""

    @abc.abstractmethod
    def update(self, state, stats, work, iteration):
        """Draw the factors from their gamma conditionals given ``stats``, over the observed cells."""

    @abc.abstractmethod
    def log_prior(self, state):
        """Log density of the factors under their gamma priors."""

    def update_and_score(self, state, stats, counts, work, iteration):
        """Draw the factors given ``stats`` (:meth:`update`), then return the log joint's model
        part at the new factors: ``count_loglik(counts) + log_prior``. The engine calls it once per
        iteration after the method's sweep. A model may override it to run the three in one
        compiled call when the work is one chunk (``len(work.bounds) == len(work.column_bounds) ==
        1``: small data), with the same arithmetic as the composed hooks so a chain does not
        depend on the path."""
        self.update(state, stats, work, iteration)
        if work.stop[0]:
            return math.nan
        return self.count_loglik(state, counts, work) + self.log_prior(state)

    @abc.abstractmethod
    def count_loglik(self, state, counts, work):
        """``sum over observed cells of log Pois(y; mu)`` for the counts ``counts`` (CSR)."""

    def poisson_allocate_by_rates(self, state, rows, stats, work, iteration):
        """:meth:`poisson_allocate` by the dense rates of each used row and :meth:`allocate`:
        exact, O(cells) per used row (the models' own sparse steps avoid visiting the cells)."""
        use_row, Y, excluded_indptr, excluded_indices, scale = rows
        rng = np.random.default_rng([work.chain_seed, iteration, 4 << 40])
        used = np.flatnonzero(use_row)
        counts = np.zeros(Y.shape, dtype=np.int64)
        if used.size:
            mu = self.rate_rows(state, used)
            draws = rng.poisson(np.asarray(scale)[used, None] * mu)
            for r, d in enumerate(used):
                draws[r, np.asarray(Y[d]) > 0] = 0
                draws[r, excluded_indices[excluded_indptr[d] : excluded_indptr[d + 1]]] = 0
            counts[used] = draws
        from lpviz.methods.base import fixed_counts_csr

        csr = fixed_counts_csr(counts, None)
        self.allocate(state, csr, stats, work, iteration)
        indptr, indices, values = csr
        token_rows = np.repeat(np.repeat(np.arange(len(indptr) - 1), np.diff(indptr)), values)
        return token_rows.astype(np.int64), np.repeat(indices, values).astype(np.int64)

    # -- variational inference (models with "vi" in ``inferences``; lpviz.vi) -----------------
    # q is a tuple of GammaFactor (lpviz.models._variational).
    def vi_init(self, shape, mean_count, rng):
        """The initial q for data of ``shape``."""
        raise NotImplementedError(f"model={self.name!r} has no variational inference")

    def vi_factors(self, q):
        """Dict of ``E_q[factors]`` (public orientation)."""
        raise NotImplementedError(f"model={self.name!r} has no variational inference")

    def vi_moments(self, q, start, stop, bounds, work):
        """Dense ``(E[mu], V[mu], sum of G products)`` of matrix rows [start, stop), computed by the
        stream-block chunks ``bounds``."""
        raise NotImplementedError(f"model={self.name!r} has no variational inference")

    def vi_rates(self, q, start, stop, weights):
        """Dense plug-in rates of matrix rows [start, stop): ``sum_k`` of the factors' ``G``
        products (``weights="geometric"``) or ``E`` products (``"arithmetic"``); the private
        method's collapsed CAVI step (:mod:`lpviz.vi`) takes each cell's ``q(y)`` at them."""
        raise NotImplementedError(f"model={self.name!r} has no variational inference")

    def vi_new_stats(self, q, work):
        """Empty expected-allocation statistics."""
        raise NotImplementedError(f"model={self.name!r} has no variational inference")

    def vi_allocate(self, q, counts, stats, work, weights="geometric"):
        """Expected allocation of the (float) counts CSR into ``stats`` in proportion to the
        factors' ``G`` products (``weights="geometric"``, the CAVI optimum) or ``E`` products
        (``"arithmetic"``); returns per row sum y log W."""
        raise NotImplementedError(f"model={self.name!r} has no variational inference")

    def vi_update(self, q, stats, work):
        """CAVI updates of the factors; returns their ELBO terms (prior, entropy, rate sums)."""
        raise NotImplementedError(f"model={self.name!r} has no variational inference")

    # -- what the views show (models declare them in ``shows``) ---------------------------
    def topics(self, factors):
        """The topic-word matrix (K, V) when the model has topics, else None."""
        return None

    def memberships(self, factors):
        """Row memberships (n_rows, K) when the model has them, else None."""
        return None

    def communities(self, factors):
        """Actors' community memberships (n_actors, K) of a square network, else None."""
        return None

    def profiles(self, factors):
        """Each component's profile over the last mode (T, K) (e.g. months), else None."""
        return None

    def pair_maps(self, factors, component):
        """Component ``component``'s map over the first two modes (I, J) (e.g. sender x
        recipient), else None."""
        return None
