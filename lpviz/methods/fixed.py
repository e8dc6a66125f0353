"""Methods that fit fixed counts: every sweep allocates the same matrix."""

import numpy as np

from lpviz.methods.base import Method, Prepared, fixed_counts_csr


class FixedCountsMethod(Method):
    """Fits a count matrix as if it were the true counts (:meth:`counts` says which)."""

    def counts(self, counts):
        """The non-negative matrix this method treats as the true counts."""
        raise NotImplementedError

    def prepare(self, counts, alpha, excluded):
        fitted = fixed_counts_csr(self.counts(counts), excluded.mask)
        n_observed = excluded.n_observed
        return Prepared(counts=fitted, alpha=None, excluded=excluded.rows,
                        mean_count=float(fitted[2].sum()) / max(n_observed, 1))

    def sweep(self, prepared, latent, model, state, stats, work, iteration):
        model.allocate(state, prepared.counts, stats, work, iteration)
        return prepared.counts, {}

    def state_bytes(self, shape, model):
        return 0
