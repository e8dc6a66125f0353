"""The VIPS comparison's data: a dataset split into training and held-out documents.

:func:`split_corpus` draws, once per process and seed, which documents are held
out; every fit sees only the training documents (:class:`Corpus`), and each
held-out document's tokens are split into two halves (:func:`completion_halves`):
the first to fold the document in, the second to score it
(:mod:`lpviz.reproduce.vips_perplexity`).
"""

import functools
import json
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp


def completion_halves(counts, random_state):
    """Split every document's tokens at random into two halves: ``(fold_in, evaluate)`` CSR matrices.

    Each of the ``n_dv`` tokens of word ``v`` goes to ``fold_in`` with
    probability 1/2 (``Binomial(n_dv, 1/2)``), the rest to ``evaluate``.
    """
    counts = sp.csr_matrix(counts, dtype=np.int64)
    rng = np.random.default_rng(random_state)
    first = counts.copy()
    first.data = rng.binomial(counts.data, 0.5).astype(np.int64)
    second = counts - first
    first.eliminate_zeros()
    second.eliminate_zeros()
    return first, second


@dataclass(frozen=True)
class Corpus:
    """A dataset split for the comparison: the training documents (``train``: CountData, ``truth``)
    and the held-out documents (``heldout``: their rows in the dataset; ``fold_in``/``evaluate``:
    the two halves of their tokens, CSR)."""

    train: object
    truth: object
    heldout: np.ndarray
    fold_in: sp.csr_matrix
    evaluate: sp.csr_matrix

    @property
    def heldout_counts(self):
        return self.fold_in + self.evaluate


@functools.lru_cache(maxsize=2)
def _cached_corpus(data_json, split_json):
    from lpviz.datasets import CountData
    from lpviz.release import Truth
    from lpviz.reproduce.chains import build_data

    data, split = build_data(json.loads(data_json)), json.loads(split_json)
    Y = sp.csr_matrix(data.Y, dtype=np.int64)
    n_docs = Y.shape[0]
    n_heldout = heldout_size(n_docs, split["heldout_fraction"])
    rng = np.random.default_rng(split["seed"])
    order = rng.permutation(n_docs)
    heldout, train = np.sort(order[:n_heldout]), np.sort(order[n_heldout:])
    fold, evaluate = completion_halves(Y[heldout], rng)
    Y_train = Y[train]
    train_data = CountData(
        Y=Y_train,
        row_labels=[data.row_labels[i] for i in train],
        col_labels=data.col_labels,
        model="topics",
        source=data.source,
        info={"rows": train},
    )
    mu, factors = getattr(data, "mu", None), getattr(data, "factors", None)
    if mu is not None and factors:
        truth = Truth(Y_train.toarray(), mu[train], {"theta": factors["theta"][train], "phi": factors["phi"]})
    else:
        truth = Truth(Y_train.toarray())
    return Corpus(train_data, truth, heldout, fold, evaluate)


def split_corpus(data_spec, split_spec):
    """The :class:`Corpus` of a data spec (:func:`lpviz.reproduce.chains.build_data`) and a split spec
    ``{"heldout_fraction": f, "seed": s}``; built once per process."""
    return _cached_corpus(json.dumps(data_spec, sort_keys=True), json.dumps(split_spec, sort_keys=True))


def heldout_size(n_docs, fraction):
    """Held-out documents of a corpus of ``n_docs``: ``round(fraction * n_docs)``, at least 1."""
    if not 0 < fraction < 1:
        raise ValueError(f"heldout_fraction must be in (0, 1), got {fraction!r}")
    return max(1, int(round(fraction * n_docs)))
