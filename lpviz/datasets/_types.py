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
            check_memory(
                dense_bytes(self.Y.shape, np.int64),
                f"{self.source or 'the counts'}: the dense "
                f"{self.Y.shape[0]:,} x {self.Y.shape[1]:,} matrix of {self.Y.nnz:,} nonzero counts",
                fix="Keep the counts sparse, or select fewer rows or columns.",
            )
            return np.asarray(self.Y.toarray(), dtype=np.int64)
        return np.asarray(self.Y, dtype=np.int64)

    @property
    def kind(self):
        """``"documents"`` or ``"network"``: the data kind of the model the counts are meant for."""
        from lpviz import models

        return models.get(self.model).default_for[0]

    def truth(self):
        """The true counts as a :class:`~lpviz.release.Truth` (with rates and factors when simulated)."""
        from lpviz.release import Truth

        return Truth(self.Y, mu=getattr(self, "mu", None), factors=getattr(self, "factors", None) or None)

    def privatize(
        self,
        epsilon=None,
        N=1,
        *,
        alpha=None,
        heldout=None,
        random_state=None,
        exact=None,
        public_labels=False,
        allow_no_noise=False,
    ):
        """Noise the counts: a :class:`~lpviz.release.Release` (see :func:`lpviz.privacy.privatize`).

        Labels are released only with ``public_labels=True``: a vocabulary or a
        list of actors chosen by their true frequency reveals the true data.
        """
        from lpviz.privacy import privatize

        labels = (
            dict(row_labels=self.row_labels, col_labels=self.col_labels, mode_labels=self.info.get("mode_labels"))
            if public_labels
            else {}
        )
        return privatize(
            self.Y,
            epsilon,
            N,
            alpha=alpha,
            kind=self.kind,
            heldout=heldout,
            structural_zeros=self.info.get("structural_zeros"),
            name=self.name,
            random_state=random_state,
            exact=exact,
            allow_no_noise=allow_no_noise,
            **labels,
        )

    @property
    def name(self):
        """A short name of the data set (the file name, never its folder)."""
        from pathlib import PurePath

        return PurePath(str(self.source)).name if self.source else ""


@dataclass
class SyntheticData(CountData):
    """Counts drawn from a known model, with the truth and one noised copy.

    ``Y`` are the true counts, ``Y_obs`` the privatized counts, ``alpha`` the
    noise parameter (scalar or one value per row), ``mu`` the true rates and
    ``factors`` the true factors (``theta``/``phi`` for topics,
    ``theta``/``pi`` for blocks).
    """

    Y_obs: np.ndarray | None = None
    alpha: object = None
    mu: np.ndarray | None = None
    factors: dict = field(default_factory=dict)

    def release(self, heldout=None):
        """The generator's own noised copy as a (simulated) :class:`~lpviz.release.Release`."""
        from lpviz.release import Release

        return Release(
            Y_obs=self.Y_obs,
            alpha=self.alpha,
            epsilon=self.info.get("epsilon"),
            N=self.info.get("N") if self.info.get("epsilon") is not None else None,
            kind=self.kind,
            heldout=heldout,
            structural_zeros=self.info.get("structural_zeros"),
            row_labels=self.row_labels,
            col_labels=self.col_labels,
            mode_labels=self.info.get("mode_labels"),
            simulated=True,
            noise_seed=self.info.get("noise_seed"),
            name=self.source,
        )
