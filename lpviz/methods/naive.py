"""The naive method: noised counts truncated at 0, fitted as if they were true."""

from lpviz.methods.fixed import FixedCountsMethod
from lpviz.privacy import truncate


class Naive(FixedCountsMethod):
    name = "naive"
    label = "naive (truncated data)"
    color = "#1f77b4"
    description = (
        "Treats the noised counts as true after setting negative ones to 0 (the truncated "
        "geometric mechanism): it ignores the noise, so small counts are biased upward."
    )

    def counts(self, counts):
        return truncate(counts)
