"""Methods that fit fixed counts: every sweep allocates the same matrix."""

import numpy as np
import scipy.sparse as sp
from scipy.special import gammaln

from lpviz.methods.base import CSR_BLOCK_CELLS, Method, Prepared, fixed_counts_csr, mean_count_of
from lpviz.models._kernels import ordered_sum, ordered_sum_from


class FixedCountsMethod(Method):
    """Fits a count matrix as if it were the true counts (:meth:`counts` says which)."""

    inferences = ("mcmc", "vi")

    def counts(self, counts):
        """The non-negative matrix this method treats as the true counts."""
        raise NotImplementedError

    def prepare(self, counts, alpha, excluded):
        fitted = fixed_counts_csr(counts, excluded.mask, self.counts)
        total = int(fitted[2].sum())
        return Prepared(
            counts=fitted,
            alpha=None,
            excluded=excluded.rows,
            mean_count=mean_count_of(total, excluded.n_observed),
            count_total=total,
        )

    def sweep(self, prepared, latent, model, state, stats, work, iteration):
        model.allocate(state, prepared.counts, stats, work, iteration)
        return prepared.counts, {}

    def state_bytes(self, shape, model):
        return 0

    def count_bytes(self, shape, itemsize=None, positive=None):
        # prepare keeps an int64 CSR of the positive cells (column and value: 16 bytes each) and its
        # row pointers; positive cells not counted: the generic 8 bytes a cell (half of them positive)
        if positive is None:
            return super().count_bytes(shape, itemsize)
        return 16 * int(positive) + 8 * (int(shape[0]) + 1)

    def positive_cells(self, counts):
        """The cells of ``counts`` positive after :meth:`counts` (what prepare lists, the excluded
        cells included: an upper bound), a block of rows at a time: no copy of the matrix."""
        if sp.issparse(counts):
            return int(np.count_nonzero(self.counts(counts).data > 0))
        counts = np.asarray(counts)
        n_rows = counts.shape[0]
        rows = max(1, CSR_BLOCK_CELLS // max(int(np.prod(counts.shape[1:])), 1))
        return sum(int(np.count_nonzero(self.counts(counts[s : s + rows]) > 0)) for s in range(0, n_rows, rows))

    def vi_start(self, prepared, model, q, work):
        indptr, indices, values = prepared.counts
        # sum of log y! over the cells: the one constant of the ELBO, kept so it bounds log p(y);
        # in row order, so rows split over machines continue it exactly (lpviz.distributed)
        return {
            "counts": (indptr, indices, values.astype(np.float64)),
            "log_factorials": ordered_sum(gammaln(values + 1.0)),
        }

    def vi_state_bytes(self, shape, model, positive=None):
        # vi_start's float copy of the positive counts (their columns and row pointers are
        # prepare's) and, while it sums their log factorials, two more floats a positive count (the
        # peak: a sweep adds only the rows' terms); positive cells not counted: every cell
        cells = int(shape[0]) * int(shape[1]) if positive is None else int(positive)
        return 3 * 8 * cells + 8 * int(shape[0])

    def vi_constant_from(self, latent, carry):
        return ordered_sum_from(gammaln(latent["counts"][2] + 1.0), carry)

    def vi_sweep(self, prepared, latent, model, q, stats, work):
        row_log = model.vi_allocate(q, latent["counts"], stats, work)
        latent["cell_rows"] = row_log  # the rows' ELBO terms (summed in row order)
        return ordered_sum(row_log) - latent["log_factorials"]
