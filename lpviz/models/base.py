"""What every model provides, and the work plan a chain hands to its kernels."""

import math
from dataclasses import dataclass

import numpy as np

from lpviz._validate import check_int as check_count
from lpviz._validate import check_positive as check_positive


@dataclass
class Work:
    """How a chain's kernels split and seed their work (built by :class:`lpviz.engine.Chain`).

    ``bounds``/``column_bounds``: chunks of row / column stream blocks
    (:func:`lpviz._parallel.chunk_bounds`); ``parallel``: whether the data are
    large enough to split (False: one chunk, run inline); ``stop``: the stop flag the
    kernels poll; ``chain_seed``; ``missing_by_row``/``missing_by_column``:
    (indptr, indices) of the cells left out of the likelihood (held out, or
    structural zeros of the data), except the model's own structural zeros,
    which its kernels skip by construction.
    """

    bounds: list
    column_bounds: list
    parallel: bool
    stop: np.ndarray
    chain_seed: int
    missing_by_row: tuple
    missing_by_column: tuple


class Model:
    """A Poisson factorization model with gamma priors (shape ``a0``, rate ``b0``).

    A subclass sets ``name`` (its registry key), ``label``,
    ``component_name``, ``factor_names`` and ``default_for`` (the data kinds
    it is the default model of), and implements the state, the kernels and
    :meth:`low_rank`. The chain's state is a tuple of arrays the kernels
    update in place; factor dicts (``factors``) are copies in the public
    orientation.
    """

    name: str | None = None
    label: str | None = None
    component_name = "component"
    factor_names: tuple[str, ...] = ()
    default_for: tuple[str, ...] = ()
    # how it can be fitted: "mcmc" (the chains' kernels) and "vi" (the variational hooks below)
    inferences: tuple[str, ...] = ("mcmc",)

    def __init__(self, n_components, a0=0.1, b0=1.0):
        self.n_components = check_count("n_components", n_components, 1)
        self.a0 = check_positive("a0", a0)
        self.b0 = check_positive("b0", b0)

    def __repr__(self):
        return f"{type(self).__name__}(n_components={self.n_components}, a0={self.a0}, b0={self.b0})"

    # -- data ----------------------------------------------------------------------------
    def check_shape(self, shape):
        """Raise a ValueError if the model cannot fit a matrix of ``shape``."""

    def structural_zeros(self, shape):
        """Boolean matrix of the cells the model has no rate for (None: every cell has one)."""
        return None

    def factor_bytes(self, shape):
        """Bytes of one saved sample of the factors (float64) for data of ``shape``: per row and
        per column a vector of components, and a components x components block (a model whose
        factors differ overrides this)."""
        return 8 * self.n_components * (int(shape[0]) + int(shape[1]) + self.n_components)

    # -- rates -----------------------------------------------------------------------------
    def low_rank(self, factors):
        """``(left, right)`` with ``mu = left @ right.T`` (before structural zeros)."""
        raise NotImplementedError

    def rates(self, factors):
        """The Poisson rates ``mu`` of every cell, 0 at the model's structural zeros."""
        left, right = self.low_rank(factors)
        mu = left @ right.T
        zeros = self.structural_zeros(mu.shape)
        if zeros is not None:
            mu[zeros] = 0.0
        return mu

    # Kernel hooks every model implements (see topics.py, blocks.py):
    #   init_state(shape, mean_count, rng) -> state tuple; factors(state) -> dict copies;
    #   set_factors(state, factors); rate_rows(state, rows) -> dense rates of those rows;
    #   new_stats(state, work); allocate(state, counts_csr, stats, work, iteration);
    #   poisson_allocate(state, (use_row, noised counts, excluded indptr, excluded indices, scale),
    #       stats, work, iteration) -> (token rows, token columns): Poisson(scale mu) draws, allocated,
    #       at the observed cells with noised count <= 0 of the used rows (the sparse step);
    #   update(state, stats, work, iteration); log_prior(state); count_loglik(state, counts_csr, work);
    #   state_bytes(shape);
    #   update_and_score(state, stats, counts_csr, work, iteration) -> float: update, then
    #       count_loglik(counts_csr) + log_prior of the new factors. The engine calls it once per
    #       iteration after the method's sweep; the default composes the three hooks. A model
    #       overrides it to run the three in one compiled call when the work is one chunk
    #       (``len(work.bounds) == len(work.column_bounds) == 1``: small data), with the same
    #       arithmetic as the composed hooks so a chain does not depend on the path.
    # Variational hooks (models with "vi" in ``inferences``; see lpviz.vi), on q, a tuple
    # of GammaFactor (lpviz.models._variational):
    #   vi_init(shape, mean_count, rng) -> q; vi_factors(q) -> dict of E[factors];
    #   vi_moments(q, start, stop, bounds, work) -> dense (E[mu], V[mu], sum of G products) of rows
    #       [start, stop), computed by the stream-block chunks ``bounds``;
    #   vi_new_stats(q, work); vi_allocate(q, counts_csr_float, stats, work) -> per-row sum y log W;
    #   vi_update(q, stats, work) -> the ELBO terms of the factors (prior, entropy, rate sums).

    def update_and_score(self, state, stats, counts, work, iteration):
        """Draw the factors given ``stats`` (:meth:`update`), then return the log joint's model
        part at the new factors: ``count_loglik(counts) + log_prior``. Models override it to fuse
        the three for small data (see the hook list above)."""
        self.update(state, stats, work, iteration)
        if work.stop[0]:
            return math.nan
        return self.count_loglik(state, counts, work) + self.log_prior(state)

    def topics(self, factors):
        """The topic-word matrix (K, V) when the model has topics, else None."""
        return None

    def memberships(self, factors):
        """Row memberships (n_rows, K) when the model has them, else None."""
        return None
