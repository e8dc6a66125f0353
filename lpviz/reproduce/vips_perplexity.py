"""Held-out perplexity by document completion, the same for every fit of the VIPS comparison.

Each held-out document's tokens are split at random into two halves
(``Binomial(n_dv, 1/2)`` tokens of each word go to the first:
:func:`lpviz.reproduce.vips_corpus.completion_halves`); the document's topic
proportions are fitted to the first half with the fit's topics held fixed
(:func:`fold_in`), and the second half is scored (:func:`completion_perplexity`):
``exp(-sum log p(w | d) / tokens)`` with ``p(w | d) = sum_k theta_dk phi_kw``.
``phi`` are the fit's topics normalised to distributions.
"""

import numpy as np
import scipy.sparse as sp

# fold-in: EM on each held-out document's topic proportions, stopped at this largest change or iteration count
FOLD_IN_MAX_ITER = 200
FOLD_IN_TOL = 1e-8
_TINY = 1e-300  # floor of a predicted word probability (a topic set that gives a word no mass at all)


def _distributions(topics):
    topics = np.asarray(topics, dtype=np.float64)
    if topics.ndim != 2 or not np.all(np.isfinite(topics)) or topics.min(initial=0) < 0:
        raise ValueError("topics must be a finite non-negative (K, V) matrix")
    totals = topics.sum(axis=1, keepdims=True)
    if np.any(totals <= 0):
        raise ValueError("a topic has no mass: every topic needs a positive weight on some word")
    return topics / totals


def _rows_of(csr):
    return np.repeat(np.arange(csr.shape[0]), np.diff(csr.indptr))


def fold_in(topics, counts, *, pseudo_count=None, max_iter=FOLD_IN_MAX_ITER, tol=FOLD_IN_TOL):
    """Topic proportions of documents given fixed topics: EM with a symmetric pseudo-count.

    From uniform proportions, iterate for every document ``d``

        theta_dk <- (a + sum_v n_dv theta_dk phi_kv / sum_j theta_dj phi_jv) / (n_d + K a)

    (``phi`` = ``topics`` with rows normalised; ``a`` = ``pseudo_count``,
    default ``1/K``: one pseudo-token in all, as LDA's default document prior)
    until the largest change of any ``theta_dk`` is below ``tol`` or after
    ``max_iter`` sweeps. A document without tokens keeps uniform proportions.

    Parameters
    ----------
    topics : array (K, V), non-negative
    counts : array or sparse (D, V) of counts

    Returns
    -------
    ndarray (D, K), rows summing to 1
    """
    phi = _distributions(topics)
    X = sp.csr_matrix(counts, dtype=np.float64)
    n_topics = phi.shape[0]
    if X.shape[1] != phi.shape[1]:
        raise ValueError(f"counts have {X.shape[1]} words but topics {phi.shape[1]}: use the same vocabulary")
    a = 1.0 / n_topics if pseudo_count is None else float(pseudo_count)
    rows, cols = _rows_of(X), X.indices
    lengths = np.asarray(X.sum(axis=1)).ravel()
    phi_at = np.ascontiguousarray(phi[:, cols].T)  # (stored entries, K)
    theta = np.full((X.shape[0], n_topics), 1.0 / n_topics)
    for _ in range(max_iter):
        predicted = np.maximum(np.einsum("ik,ik->i", theta[rows], phi_at), _TINY)
        weights = sp.csr_matrix((X.data / predicted, cols, X.indptr), shape=X.shape)
        new = (a + theta * (weights @ phi.T)) / (lengths[:, None] + n_topics * a)
        change = float(np.abs(new - theta).max()) if new.size else 0.0
        theta = new
        if change < tol:
            break
    return theta


def completion_perplexity(
    topics, fold_in_counts, evaluate_counts, *, pseudo_count=None, max_iter=FOLD_IN_MAX_ITER, tol=FOLD_IN_TOL
):
    """Per-word held-out perplexity by document completion (see the module docstring).

    The held-out documents' proportions are fitted to ``fold_in_counts``
    (:func:`fold_in`) and ``evaluate_counts`` scored:
    ``exp(-sum_dv m_dv log sum_k theta_dk phi_kv / sum_dv m_dv)``.
    """
    phi = _distributions(topics)
    E = sp.csr_matrix(evaluate_counts, dtype=np.float64)
    total = E.data.sum()
    if total <= 0:
        raise ValueError("the evaluated halves hold no tokens: perplexity is per word, so it needs some")
    theta = fold_in(phi, fold_in_counts, pseudo_count=pseudo_count, max_iter=max_iter, tol=tol)
    rows = _rows_of(E)
    predicted = np.einsum("ik,ki->i", theta[rows], phi[:, E.indices])
    return float(np.exp(-(E.data * np.log(np.maximum(predicted, _TINY))).sum() / total))
