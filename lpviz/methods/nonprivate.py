"""The non-private method: the chain on the true counts (the yardstick)."""

import numpy as np
import scipy.sparse as sp

from lpviz.methods.fixed import FixedCountsMethod


class NonPrivate(FixedCountsMethod):
    name = "nonprivate"
    label = "non-private (true data)"
    color = "#2ca02c"
    description = "Fits the true counts, which no analyst holds under local privacy: the best any method can do."
    uses_truth = True

    def counts(self, counts):
        smallest = counts.data.min(initial=0) if sp.issparse(counts) else np.min(counts, initial=0)
        if smallest < 0:
            raise ValueError(
                "the counts have negative entries, but method='nonprivate' needs the true "
                "(non-negative) counts; use method='private' (or 'naive') for noised counts"
            )
        return counts
