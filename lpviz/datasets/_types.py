"""The containers every data source returns, so chains, CLI and app take one shape."""

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp


@dataclass
class CountData:
    """A matrix of non-negative integer counts with labels.

    ``model`` says which model the counts are meant for: ``"topics"`` (rows
    are documents, columns are words) or ``"blocks"`` (a square
    sender x recipient network, rows and columns are the same actors).
    ``Y`` is a dense ``ndarray`` or a ``scipy.sparse`` matrix; :meth:`dense`
    gives an int64 array. ``info`` holds build parameters and reports.
    """

    Y: object
    row_labels: list
    col_labels: list
    model: str
    source: str = ""
    info: dict = field(default_factory=dict)

    @property
    def shape(self):
        return self.Y.shape

    def dense(self):
        """The counts as a dense int64 array (checked against the memory budget first)."""
        from lpviz.budget import check_memory, dense_bytes

        if sp.issparse(self.Y):
            check_memory(dense_bytes(self.Y.shape, np.int64), f"{self.source or 'the counts'}: the dense "
                         f"{self.Y.shape[0]:,} x {self.Y.shape[1]:,} matrix of {self.Y.nnz:,} nonzero counts",
                         fix="Keep the counts sparse, or select fewer rows or columns.")
            return np.asarray(self.Y.toarray(), dtype=np.int64)
        return np.asarray(self.Y, dtype=np.int64)


@dataclass
class SyntheticData(CountData):
    """Counts drawn from a known model, with the truth and one noised copy.

    ``Y`` are the true counts, ``Y_obs`` the privatized counts, ``alpha`` the
    noise parameter (scalar or one value per row), ``mu`` the true rates and
    ``factors`` the true factors (``theta``/``phi`` for topics,
    ``theta``/``pi`` for blocks).
    """

    Y_obs: np.ndarray = None
    alpha: object = None
    mu: np.ndarray = None
    factors: dict = field(default_factory=dict)
