"""The columns of a chain's trace: the scores and chains each row holds (:data:`TRACE_COLUMNS`), and the empty trace.

The chain loop writes the rows (:func:`lpviz.dashboard.session.chain.run_chain`); a
:class:`~lpviz.dashboard.session.runner.ChainRunner` streams them into its buffer.
"""

import pandas as pd

# Scores traced per iteration: for the current state and (prefixed "mean_") the posterior mean.
TRACE_SCORES = ("mae", "heldout_mae", "rate_mae", "heldout_rate_mae")
# The most chains a method runs in a session (Settings.chains), and the traces each chain beyond the
# first adds to a row (its own log joint and log marginal: where a chain in another mode shows).
MAX_CHAINS = 4
CHAIN_TRACES = ("log_joint", "log_marginal")
TRACE_COLUMNS = (
    "iteration",
    "log_joint",
    "log_marginal",
    "elbo",
    *TRACE_SCORES,
    *(f"mean_{key}" for key in TRACE_SCORES),
    *(f"{trace}_{chain}" for chain in range(1, MAX_CHAINS) for trace in CHAIN_TRACES),
)


def empty_trace():
    return pd.DataFrame({name: pd.Series(dtype="float64") for name in TRACE_COLUMNS})
