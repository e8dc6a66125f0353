"""What every inference method provides.

A method decides what it sees of a :class:`~lpviz.release.Release`
(:meth:`Method.prepare`), keeps whatever latent state it needs
(:meth:`Method.start`) and, each iteration, produces the counts the model
allocates to its components (:meth:`Method.sweep`). The model's factor update
is the same for every method: that is the point of the augmentation.
"""

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from lpviz.models._kernels import count_positive_outside, fill_positive_outside, row_csr_pattern


@dataclass
class Exclusions:
    """The cells left out of the likelihood: held out, structural zeros of the data,
    and the model's own structural zeros (a network's diagonal).

    ``mask``: dense boolean matrix of them (None when there are none);
    ``rows``: their (indptr, indices) by row; ``n_observed``: cells left in.
    """

    mask: object
    rows: tuple
    n_observed: int


@dataclass
class Prepared:
    """What a method fits: ``counts`` (dense array or CSR matrix, int), per-row
    ``alpha`` (None unless the method models the noise), and the cells left out
    of the likelihood as row lists ``excluded`` (indptr, indices), every kind of
    exclusion included."""

    counts: object
    alpha: object
    excluded: tuple
    mean_count: float
    # the integer sum of the counts behind ``mean_count`` (:func:`mean_count_of`): partitions of the
    # rows add theirs to start a chain on several machines as on one (lpviz.distributed)
    count_total: int = 0


def mean_count_of(count_total, n_observed):
    """The mean count a chain starts its factors from: the counts' sum over the observed cells
    (clipped at 0: noised counts may sum below it) per observed cell."""
    return max(float(count_total), 0.0) / max(int(n_observed), 1)


class Method:
    """An inference method: how the noise is treated.

    Subclasses set ``name`` (registry key), ``label``, ``color``,
    ``description``, ``uses_truth`` (True when the method fits the true
    counts), ``needs_alpha`` and ``options`` ({option: allowed values, first
    is the default}), and implement :meth:`prepare`, :meth:`start`,
    :meth:`sweep`.
    """

    name: str | None = None
    label: str | None = None
    color = "#7f7f7f"
    description = ""
    uses_truth = False
    needs_alpha = False
    options: dict[str, tuple] = {}
    # how it can be fitted: "mcmc" (start/sweep) and "vi" (vi_start/vi_sweep, lpviz.vi)
    inferences: tuple[str, ...] = ("mcmc",)
    # options that apply to one inference only ({option: "mcmc" or "vi"}); the others apply to both
    option_inference: dict[str, str] = {}

    def __init__(self, **options):
        unknown = sorted(set(options) - set(self.options))
        if unknown:
            raise ValueError(
                f"method={self.name!r} has no option {unknown[0]!r}"
                + (f"; its options: {', '.join(self.options)}" if self.options else "")
            )
        self.settings = {}
        for option, choices in self.options.items():
            value = options.get(option)
            if value is None:
                value = choices[0]
            if value not in choices:
                raise ValueError(f"{option} must be one of {', '.join(map(repr, choices))}; got {value!r}")
            self.settings[option] = value

    def __repr__(self):
        settings = "".join(f", {key}={value!r}" for key, value in self.settings.items())
        return f"{type(self).__name__}({settings.lstrip(', ')})"

    @property
    def display_name(self):
        """The label with non-default options, e.g. 'private (models the noise), bessel sampler'."""
        extra = [f"{value} {key}" for key, value in self.settings.items() if value != next(iter(self.options[key]))]
        return self.label + (", " + ", ".join(extra) if extra else "")

    def prepare(self, counts, alpha, excluded):
        raise NotImplementedError

    def start(self, prepared, model, state, work, rng):
        """The method's own latent state at the start of a chain (None if it has none)."""
        return None

    def sweep(self, prepared, latent, model, state, stats, work, iteration):
        """Allocate this iteration's counts into ``stats``; return ``(counts_csr, terms)``:
        the counts the model conditioned on and a dict of extra log terms."""
        raise NotImplementedError

    def sweep_rows(self, prepared, latent, model, state, stats, work, iteration):
        """:meth:`sweep` with each extra log term as its per-row values (arrays whose
        :func:`~lpviz.models._kernels.ordered_sum` is the term): what a partition of the rows on
        another machine returns (lpviz.distributed). Methods without such terms need not override."""
        counts, terms = self.sweep(prepared, latent, model, state, stats, work, iteration)
        if terms:
            raise NotImplementedError(f"method={self.name!r} gives no per-row terms to split its chain over machines")
        return counts, {}

    def state_bytes(self, shape, model):
        """Bytes of the method's own state for data of ``shape`` (a memory estimate)."""
        return 0

    def count_bytes(self, shape, itemsize=None, positive=None):
        """Bytes of the counts :meth:`prepare` keeps for data of ``shape`` (a memory estimate);
        ``itemsize``: bytes per count of the release's integers when known (None: not known);
        ``positive``: the cells :meth:`positive_cells` counts (None: not counted). Here 8 bytes a
        cell, a generic guess: methods that know what they keep say so."""
        return 8 * int(shape[0]) * int(shape[1])

    def positive_cells(self, counts):
        """What :meth:`count_bytes` needs to know of ``counts`` beyond their shape and itemsize
        (None here: nothing; methods that keep a list of some cells count them)."""
        return None

    # -- variational inference (methods with "vi" in ``inferences``; lpviz.vi) --------
    def vi_start(self, prepared, model, q, work):
        """The method's own variational state at the start of a CAVI fit (None if it has none)."""
        return None

    def vi_sweep(self, prepared, latent, model, q, stats, work):
        """One CAVI local step: the expected true counts, allocated by ``model.vi_allocate``
        into ``stats``; returns the ELBO terms of the cells (everything but the factors' terms)."""
        raise NotImplementedError

    def vi_constant_from(self, latent, carry):
        """The constant :meth:`vi_sweep` subtracts from its rows' terms (``latent["cell_rows"]``,
        summed in row order), of these rows, continued from ``carry`` (lpviz.distributed)."""
        return carry

    def vi_warm_start(self, prepared, latent, vi_latent):
        """Set a chain's latent state (``latent``, from :meth:`start`) from a CAVI fit's (``vi_latent``)."""

    def vi_state_bytes(self, shape, model, positive=None):
        """Bytes of the method's own CAVI state and its local step's arrays at their peak for data
        of ``shape`` beside the counts :meth:`count_bytes` counts (a memory estimate: a CAVI
        partition's on a cluster, lpviz.distributed); ``positive`` as for :meth:`count_bytes`.
        Here the chain's (:meth:`state_bytes`): methods that know their CAVI arrays say so."""
        return self.state_bytes(shape, model)


def excluded_rows(excluded_mask):
    """(indptr, indices) by row of a boolean matrix of excluded cells (None: none)."""
    return row_csr_pattern(np.ascontiguousarray(excluded_mask, dtype=np.bool_))


# Rows of dense counts transformed at once (a block of at most this many cells): no temporary of
# the whole matrix's size, whatever the counts' integer type.
CSR_BLOCK_CELLS = 1 << 18


def fixed_counts_csr(counts, excluded_mask, transform=None):
    """CSR (indptr, indices, values) int64 of the positive entries of ``transform(counts)`` (default:
    the counts) outside the excluded cells. Dense counts go a block of rows at a time, twice (count,
    then fill): the CSR is the only array of the matrix's size made."""
    transform = transform or (lambda block: block)
    if sp.issparse(counts):
        matrix = sp.csr_matrix(transform(counts))
        if excluded_mask is not None:
            matrix = matrix.multiply(sp.csr_matrix(~excluded_mask)).tocsr()
        matrix.data[matrix.data < 0] = 0
        matrix.eliminate_zeros()
        matrix.sort_indices()
        return (matrix.indptr.astype(np.int64), matrix.indices.astype(np.int64), matrix.data.astype(np.int64))
    counts = np.asarray(counts)
    n_rows, n_cols = counts.shape
    excluded = (
        excluded_rows(excluded_mask)
        if excluded_mask is not None
        else (np.zeros(n_rows + 1, dtype=np.int64), np.zeros(0, dtype=np.int64))
    )
    rows = max(1, CSR_BLOCK_CELLS // max(n_cols, 1))
    starts = range(0, n_rows, rows)
    row_counts = np.zeros(n_rows, dtype=np.int64)
    for start in starts:
        count_positive_outside(
            np.ascontiguousarray(transform(counts[start : start + rows])), start, *excluded, row_counts
        )
    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(row_counts, out=indptr[1:])
    indices, values = np.empty(indptr[-1], dtype=np.int64), np.empty(indptr[-1], dtype=np.int64)
    for start in starts:  # one transformed block alive at a time
        fill_positive_outside(
            np.ascontiguousarray(transform(counts[start : start + rows])), start, *excluded, indptr, indices, values
        )
    return indptr, indices, values
