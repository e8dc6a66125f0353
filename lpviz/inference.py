"""The name lpviz 0.1 gave the chains; they live in :mod:`lpviz.engine` now."""

from lpviz.driver import fit, run  # noqa: F401
from lpviz.engine import Chain, ChainState, FitResult, Posterior  # noqa: F401

__all__ = ["Chain", "ChainState", "FitResult", "Posterior", "fit", "run"]
