"""Held-out cells for link prediction (the paper's Figure 5 design).

A mask is True for observed cells; the chains leave False cells out of the
likelihood and of every rate sum, and :func:`lpviz.metrics.heldout_mae`
scores the posterior mean on them.
"""

import numpy as np

HOLDOUTS = ("none", "random cells", "top actors")


def _is_dyadic(kind, shape):
    """Whether rows and columns are the same actors: a network, or a tensor whose first two
    modes are (sender x recipient x ...). ``kind`` is a data kind or, as in lpviz 0.1, a model name."""
    from lpviz import models
    from lpviz.release import KINDS

    kind = kind if kind in KINDS else models.get(kind).default_for[0]
    return kind == "network" or (kind == "tensor" and shape[0] == shape[1])


def holdout_mask(Y, kind, holdout, *, fraction=0.1, n_actors=50, random_state=None):
    """True for observed cells; None when nothing is held out.

    ``"random cells"`` holds out a random ``fraction`` of the cells.
    ``"top actors"`` (Figure 5: "all cells involving the top 50 senders or
    recipients") holds out every cell in the rows of the ``n_actors`` rows with
    the largest totals and in the columns of the ``n_actors`` columns with the
    largest totals; for a network (``kind="network"``, or a model fitted to
    networks) those actors are held out in both roles, as senders and as
    recipients. For an array of order 3 or more (a tensor) rows and columns are its first two
    modes: the top actors' cells are held out in every further mode (every month).
    """
    Y = np.asarray(Y)
    if Y.ndim < 2:
        raise ValueError(f"Y must be a count array of at least two modes (rows x columns), got shape {Y.shape}")
    if holdout == "none":
        return None
    if holdout == "random cells":
        if not 0.0 < fraction < 1.0:
            raise ValueError(f"fraction is the share of cells held out, in (0, 1); got {fraction}")
        return np.random.default_rng(random_state).random(Y.shape) >= fraction
    if holdout == "top actors":
        if int(n_actors) != n_actors or n_actors < 1:
            raise ValueError(f"n_actors must be a whole number >= 1, got {n_actors}")
        n_actors = int(n_actors)
        if n_actors >= min(Y.shape[:2]):
            raise ValueError(
                f"holding out the top {n_actors} of {min(Y.shape[:2])} rows/columns leaves no "
                "observed cell: choose a smaller n_actors"
            )
        further = tuple(range(2, Y.ndim))
        top_rows = np.argsort(-Y.sum(axis=(1, *further)), kind="stable")[:n_actors]
        top_cols = np.argsort(-Y.sum(axis=(0, *further)), kind="stable")[:n_actors]
        mask = np.ones(Y.shape, dtype=bool)
        mask[top_rows, :] = False
        mask[:, top_cols] = False
        if _is_dyadic(kind, Y.shape):  # the same actors as senders and recipients
            mask[:, top_rows[top_rows < Y.shape[1]]] = False
            mask[top_cols[top_cols < Y.shape[0]], :] = False
        return mask
    raise ValueError(f"unknown holdout {holdout!r}: choose one of {', '.join(map(repr, HOLDOUTS))}")
