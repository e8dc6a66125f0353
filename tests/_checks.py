"""Goodness-of-fit helpers shared by the sampler tests (test_models, test_methods)."""

import numpy as np
from scipy import stats

P_ACCEPT = 1e-3  # a correct sampler fails a test at this rate (fixed seeds: never, in practice)


def chi_square_pvalue(observed_counts, probabilities, min_expected=5.0):
    """Chi-square goodness of fit; cells expecting fewer than ``min_expected`` draws pooled into one."""
    observed_counts = np.asarray(observed_counts, dtype=float).ravel()
    probabilities = np.asarray(probabilities, dtype=float).ravel()
    probabilities = probabilities / probabilities.sum()
    expected = observed_counts.sum() * probabilities
    small = expected < min_expected
    obs = np.append(observed_counts[~small], observed_counts[small].sum())
    exp = np.append(expected[~small], expected[small].sum())
    if exp[-1] == 0:
        assert obs[-1] == 0, "draws fell where the exact pmf is 0"
        obs, exp = obs[:-1], exp[:-1]
    elif exp[-1] < min_expected and len(exp) > 2:
        # the pooled tail itself expects too little: merge it into the smallest other bin
        j = int(np.argmin(exp[:-1]))
        obs[j] += obs[-1]
        exp[j] += exp[-1]
        obs, exp = obs[:-1], exp[:-1]
    return stats.chisquare(obs, exp).pvalue


def flat_numbers(value, skip=(), prefix=""):
    """Nested scores (an ensemble's chains and convergence) as one flat mapping, ``skip`` keys left out."""
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, (list, tuple)):
        items = enumerate(value)
    else:
        return {prefix: value}
    flat = {}
    for key, item in items:
        if key not in skip:
            flat.update(flat_numbers(item, skip, f"{prefix}.{key}" if prefix else str(key)))
    return flat
