"""How good a fit is: reconstruction error, topic quality, topic recovery.

- :func:`mae`, :func:`heldout_mae`: mean absolute error of posterior mean
  rates ``mu_hat`` against the true counts (Schein et al. 2019, eq. 17).
  Masks follow the chains' convention: ``True`` = observed, held-out = ``~mask``.
- :func:`npmi` (Lau et al. 2014) and :func:`umass_coherence` (Mimno et al.
  2011): per-topic quality of each topic's top words, measured on a
  reference corpus (in the paper, the non-private data). Both count
  *documents*: ``D(w)`` is the number of rows in which word ``w`` occurs,
  ``D(w, w')`` the number in which both occur.
- :func:`top_words`, :func:`align_topics` (Hungarian matching of estimated
  to true topics, Newman et al. 2009) and :func:`aligned_topic_distance`.
- :func:`score`: every number a user sees about one fit, from its posterior,
  its release and (when known) the truth. The CLI, the dashboard, the
  notebook, the benchmarks and the reproductions call it and nothing else.
"""

import numpy as np
import scipy.sparse as sp

from lpviz._validate import as_2d_float as _as_2d_float
from lpviz.alignment import align_topics, aligned_topic_distance

__all__ = [
    "mae",
    "heldout_mae",
    "npmi",
    "umass_coherence",
    "top_words",
    "align_topics",
    "aligned_topic_distance",
    "score",
    "SCORE_LABELS",
]


def _check_mask(mask, shape):
    mask = np.asarray(mask)
    if mask.dtype != np.bool_:
        raise TypeError(
            f"mask must be a boolean array (True = observed), got dtype {mask.dtype}; "
            "build it with e.g. `mask = np.ones(Y.shape, bool)` and set held-out cells to False"
        )
    if mask.shape != tuple(shape):
        raise ValueError(
            f"mask has shape {mask.shape} but the data have shape {tuple(shape)}; give one boolean per cell"
        )
    return mask


def _absolute_error_sum(mu_hat, Y_true, cells):
    """Sum of |mu_hat - Y_true| over ``cells`` (a boolean array, or None = all)."""
    if sp.issparse(Y_true):
        if cells is None:
            # |mu - 0| everywhere, corrected at the stored nonzeros: no dense copy of Y
            coo = Y_true.tocoo()
            mu_at = mu_hat[coo.row, coo.col]
            return float(np.abs(mu_hat).sum() + (np.abs(mu_at - coo.data) - np.abs(mu_at)).sum())
        Y_true = Y_true.toarray()
    difference = np.abs(mu_hat - np.asarray(Y_true, dtype=np.float64))
    return float(difference.sum() if cells is None else difference[cells].sum())


def _checked_pair(mu_hat, Y_true):
    mu_hat = _as_2d_float("mu_hat", mu_hat)
    shape = Y_true.shape if sp.issparse(Y_true) else np.shape(Y_true)
    if tuple(shape) != mu_hat.shape:
        raise ValueError(
            f"mu_hat has shape {mu_hat.shape} but Y_true has shape {tuple(shape)}; "
            "compare the posterior mean rates with the true counts of the same matrix"
        )
    if not np.all(np.isfinite(mu_hat)):
        raise ValueError("mu_hat contains NaN or infinite values; check the fit that produced it")
    return mu_hat


def mae(mu_hat, Y_true, mask=None):
    """Mean absolute error of rates ``mu_hat`` against true counts ``Y_true``.

    Parameters
    ----------
    mu_hat : array (n_rows, n_cols)
        Posterior mean rates (e.g. ``FitResult.mu_hat``).
    Y_true : array or scipy.sparse matrix (n_rows, n_cols)
        The non-private counts.
    mask : bool array, optional
        ``True`` = observed. If given, the error is averaged over the
        observed cells only (e.g. to leave out a network's diagonal);
        by default over all cells.

    Returns
    -------
    float
    """
    mu_hat = _checked_pair(mu_hat, Y_true)
    if mask is None:
        return _absolute_error_sum(mu_hat, Y_true, None) / mu_hat.size
    cells = _check_mask(mask, mu_hat.shape)
    if not cells.any():
        raise ValueError("mask selects no cells (all False); mask=True marks the cells to score")
    return _absolute_error_sum(mu_hat, Y_true, cells) / int(cells.sum())


def heldout_mae(mu_hat, Y_true, mask):
    """Mean absolute error over the held-out cells ``~mask`` (link prediction).

    ``mask`` is the boolean array the chain was fitted with (``True`` =
    observed), so the cells it never saw are ``~mask``.
    """
    mu_hat = _checked_pair(mu_hat, Y_true)
    if mask is None:
        raise ValueError("heldout_mae needs the mask the chain was fitted with (True = observed)")
    held_out = ~_check_mask(mask, mu_hat.shape)
    if not held_out.any():
        raise ValueError("mask holds nothing out (all True): there are no held-out cells to score")
    return _absolute_error_sum(mu_hat, Y_true, held_out) / int(held_out.sum())


def _document_frequencies(Y_ref, words):
    """D(w) for each word and D(w, w') for each pair, counted over rows of Y_ref."""
    if sp.issparse(Y_ref):
        occurs = (Y_ref.tocsc()[:, words] > 0).astype(np.int64).toarray()
    else:
        Y_ref = np.asarray(Y_ref)
        if Y_ref.ndim != 2:
            raise ValueError(f"Y_ref must be a 2-D documents x words matrix, got shape {Y_ref.shape}")
        occurs = (Y_ref[:, words] > 0).astype(np.int64)
    return occurs.sum(axis=0), occurs.T @ occurs


def _checked_top_words(topics_top_words, Y_ref, top_n):
    if isinstance(top_n, bool) or not isinstance(top_n, (int, np.integer)) or top_n < 2:
        raise ValueError(f"top_n must be an integer >= 2 (a score needs word pairs), got {top_n!r}")
    shape = Y_ref.shape if sp.issparse(Y_ref) else np.shape(Y_ref)
    if len(shape) != 2:
        raise ValueError(f"Y_ref must be a 2-D documents x words matrix, got shape {tuple(shape)}")
    n_docs, n_words = shape
    if n_docs == 0:
        raise ValueError("the reference corpus Y_ref has no documents (0 rows)")
    if sp.issparse(Y_ref):
        negative = Y_ref.data.size and Y_ref.data.min() < 0
    else:
        negative = np.asarray(Y_ref).min(initial=0) < 0
    if negative:
        raise ValueError(
            "Y_ref has negative counts; the reference corpus must be the non-private "
            "counts (privatized data can be negative)"
        )
    try:
        topics = np.asarray(topics_top_words, dtype=np.int64)
    except (TypeError, ValueError):
        raise TypeError(
            "topics_top_words must be word indices, one row per topic, e.g. top_words(phi, n=10) (not words as strings)"
        ) from None
    if topics.ndim != 2:
        raise ValueError(
            f"topics_top_words must be a (n_topics, n_top) array of word indices, got shape {topics.shape}"
        )
    if topics.shape[1] < top_n:
        raise ValueError(
            f"each topic lists {topics.shape[1]} words but top_n={top_n}; pass more top words or a smaller top_n"
        )
    topics = topics[:, :top_n]
    if topics.size and (topics.min() < 0 or topics.max() >= n_words):
        raise ValueError(
            f"word indices must lie in [0, {n_words}) (the columns of Y_ref), "
            f"got values from {topics.min()} to {topics.max()}"
        )
    for k, row in enumerate(topics):
        if len(set(row.tolist())) != len(row):
            raise ValueError(f"topic {k} repeats a word among its top {top_n}: {row.tolist()}")
    return topics, n_docs


def npmi(topics_top_words, Y_ref, top_n=10):
    """Normalised pointwise mutual information of each topic (Lau et al. 2014).

    For each topic, the mean over unordered pairs of its ``top_n`` words of
    ``NPMI(wi, wj) = log(P(wi, wj) / (P(wi) P(wj))) / -log P(wi, wj)``, with
    probabilities estimated as document frequencies in ``Y_ref`` (the
    whole document is the co-occurrence window). Conventions: a pair that
    never co-occurs scores -1 (the limit as ``P(wi, wj) -> 0``); a pair that
    co-occurs in every document scores 1.

    Parameters
    ----------
    topics_top_words : int array (n_topics, >= top_n)
        Word indices per topic, most probable first (see :func:`top_words`).
    Y_ref : array or scipy.sparse matrix (n_docs, n_words)
        Reference corpus of non-negative counts.
    top_n : int

    Returns
    -------
    ndarray (n_topics,), values in [-1, 1]
    """
    topics, n_docs = _checked_top_words(topics_top_words, Y_ref, top_n)
    scores = np.empty(len(topics))
    for k, words in enumerate(topics):
        single, joint = _document_frequencies(Y_ref, words)
        p_single = single / n_docs
        pair_scores = []
        for i in range(top_n):
            for j in range(i + 1, top_n):
                p_joint = joint[i, j] / n_docs
                if p_joint == 0:
                    pair_scores.append(-1.0)
                elif p_joint == 1:
                    pair_scores.append(1.0)
                else:
                    pmi = np.log(p_joint / (p_single[i] * p_single[j]))
                    pair_scores.append(pmi / -np.log(p_joint))
        scores[k] = np.mean(pair_scores)
    return scores


def umass_coherence(topics_top_words, Y_ref, top_n=10):
    """UMass coherence of each topic (Mimno et al. 2011).

    ``C(t) = sum_{m=2..M} sum_{l<m} log((D(v_m, v_l) + 1) / D(v_l))`` over the
    topic's top ``M = top_n`` words ``v_1, v_2, ...`` in order of decreasing
    probability, with document frequencies from ``Y_ref``. Higher (closer to
    0) is better. The score is undefined when a conditioning word never
    occurs in the reference corpus; that raises a ValueError naming it.

    Returns
    -------
    ndarray (n_topics,)
    """
    topics, _ = _checked_top_words(topics_top_words, Y_ref, top_n)
    scores = np.empty(len(topics))
    for k, words in enumerate(topics):
        single, joint = _document_frequencies(Y_ref, words)
        absent = [int(words[i]) for i in range(top_n - 1) if single[i] == 0]
        if absent:
            raise ValueError(
                f"topic {k}: word(s) {absent} never occur in the reference corpus, so "
                "UMass coherence (which divides by their document frequency) is "
                "undefined; drop words the reference corpus lacks from the vocabulary"
            )
        total = 0.0
        for m in range(1, top_n):
            for earlier in range(m):
                total += np.log((joint[m, earlier] + 1) / single[earlier])
        scores[k] = total
    return scores


def top_words(phi, n=10, vocab=None):
    """The ``n`` heaviest words of each topic, heaviest first.

    Parameters
    ----------
    phi : array (n_topics, n_words)
        Topic-word weights (any non-negative scale).
    n : int
    vocab : sequence of str, optional
        Word labels; if given, words are returned instead of indices.

    Returns
    -------
    int ndarray (n_topics, n), or a list of lists of words if ``vocab`` is given.
    Ties keep the lower word index first.
    """
    phi = _as_2d_float("phi", phi)
    n_words = phi.shape[1]
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 1 <= n <= n_words:
        raise ValueError(f"n must be an integer between 1 and the number of words ({n_words}), got {n!r}")
    order = np.argsort(-phi, axis=1, kind="stable")[:, :n]
    if vocab is None:
        return order
    if len(vocab) != n_words:
        raise ValueError(f"vocab has {len(vocab)} labels but phi has {n_words} words (columns)")
    return [[vocab[v] for v in row] for row in order]


# ---------------------------------------------------------------------------
# One scoring function
# ---------------------------------------------------------------------------

# What each number of :func:`score` means, for tables and legends.
SCORE_LABELS = {
    "mae": "MAE",
    "heldout_mae": "held-out MAE",
    "rate_mae": "MAE vs true rates",
    "heldout_rate_mae": "held-out MAE vs true rates",
    "npmi": "NPMI",
    "umass": "UMass",
    "topic_distance": "topic error (TV)",
    "rhat": "R-hat",
    "ess": "ESS",
    "log_joint": "log joint",
    "best_log_joint": "best log joint",
    "log_marginal": "log marginal likelihood",
    "elbo": "ELBO",
    "iterations": "iterations",
    "samples": "samples",
    "seconds": "seconds",
    "iterations_per_second": "it/s",
}
_SCORE_BLOCK_CELLS = 1 << 22


def _rates_by_rows(fit):
    """A function (start, stop) -> rates of those rows, for a Posterior or a ChainState."""
    if hasattr(fit, "rate_rows"):
        return fit.rate_rows
    mu = fit.mu
    return lambda start, stop: mu[start:stop]


def _error_sums(rate_rows, reference, cells_list, shape):
    """Sums of |rate - reference| over each boolean cell set, by row blocks (no dense copy of the rates)."""
    sums = [0.0] * len(cells_list)
    rows = max(1, _SCORE_BLOCK_CELLS // max(shape[1], 1))
    for start in range(0, shape[0], rows):
        stop = min(shape[0], start + rows)
        mu = np.asarray(rate_rows(start, stop), dtype=np.float64)
        if not np.all(np.isfinite(mu)):
            raise ValueError("the fitted rates contain NaN or infinite values; check the fit that produced them")
        error = np.abs(mu - np.asarray(reference[start:stop], dtype=np.float64))
        for i, cells in enumerate(cells_list):
            sums[i] += float(error[cells[start:stop]].sum())
    return sums


def _finite_or_none(value):
    """A float, or None for the NaN of a number that does not apply (a variational fit's log joint)."""
    value = float(value)
    return None if np.isnan(value) else value


def score(fit, release=None, truth=None, *, top_n=10, topics=True, diagnostics=True):
    """Every number a user sees about one fit.

    Parameters
    ----------
    fit : lpviz.engine.Posterior or lpviz.engine.ChainState
        A posterior (its mean rates over the saved samples, its best sample's
        topics) or one state of a chain (its current rates and topics).
    release : lpviz.release.Release, optional
        What the fit saw: which cells were observed, held out, or do not
        exist. Default: what the posterior recorded (required for a ChainState).
    truth : lpviz.release.Truth, optional
        The true counts (and rates, for simulated data). Without it only the
        fit's own numbers are reported.
    top_n : int
        Top words per topic for NPMI and UMass.
    topics : bool
        Also score the topics (NPMI, UMass, topic distance) of models that
        have them; False gives the error numbers alone, at a fraction of the
        cost (e.g. for every iteration of a streamed chain).
    diagnostics : bool
        Also diagnose a posterior's chain (R-hat, ESS: ArviZ, milliseconds
        per call); False leaves them None (e.g. for every saved sample of a
        streamed chain).

    Returns
    -------
    dict
        ``mae``: mean |rate - true count| over the observed cells;
        ``heldout_mae``: the same over the held-out cells (None when nothing
        is held out); ``rate_mae``/``heldout_rate_mae``: against the true
        rates (simulations; the VI paper's Table 1 measure); ``npmi``,
        ``umass``: mean topic quality of the (best sample's) topics with the
        true counts as reference corpus, models with topics only;
        ``topic_distance``: mean total-variation distance of those topics to
        the true ones after Hungarian alignment (simulations);
        ``log_joint`` (last iteration), ``best_log_joint``, ``log_marginal``,
        ``elbo`` (variational fits: last iteration); ``rhat``, ``ess``:
        split R-hat and bulk ESS of the chain's likelihood trace after burn-in
        (:func:`lpviz.diagnostics.chain_convergence`; posteriors of chains
        only), ``iterations``,
        ``samples``, ``seconds``, ``iterations_per_second``.
        Structural zeros (a network's self loops) are never scored. Numbers
        that do not apply are None.
    """
    is_posterior = hasattr(fit, "rate_rows")
    if release is None and not is_posterior and truth is not None:
        raise ValueError("scoring a single chain state needs the release it was fitted on")
    shape = release.shape if release is not None else getattr(fit, "shape", None)
    result = dict.fromkeys(SCORE_LABELS)
    if is_posterior:
        result.update(iterations=fit.iterations, samples=fit.n_saved, seconds=round(fit.seconds, 3))
        if fit.iterations:
            result["log_joint"] = _finite_or_none(fit.log_joint[-1])
            result["log_marginal"] = _finite_or_none(fit.log_marginal[-1])
            result["iterations_per_second"] = fit.iterations / fit.seconds if fit.seconds > 0 else None
            if getattr(fit, "elbo", None) is not None:  # a variational fit
                result["elbo"] = _finite_or_none(fit.elbo[-1])
        if fit.best is not None:
            result["best_log_joint"] = _finite_or_none(fit.best_log_joint)
        if diagnostics:
            from lpviz.diagnostics import chain_convergence

            convergence = chain_convergence(fit)
            result.update(rhat=convergence["rhat"], ess=convergence["ess"])
        factors = fit.best
        model = fit.model_instance
        ready = fit.n_saved > 0
    else:
        result.update(iterations=fit.iteration, log_joint=_finite_or_none(fit.log_joint))
        result["log_marginal"] = _finite_or_none(fit.log_marginal)
        result["elbo"] = _finite_or_none(getattr(fit, "elbo", np.nan))
        factors, model, ready = fit.factors, fit.model_instance, True
    if truth is None or not ready:
        return result
    if tuple(truth.Y.shape) != tuple(shape):
        raise ValueError(f"the true counts have shape {truth.Y.shape} but the release {shape}")

    if release is not None:
        observed, heldout = release.observed_cells, release.heldout_cells
    else:  # a posterior (a chain state without its release was refused above)
        heldout = fit.heldout
        observed = np.ones(shape, dtype=bool)
        for cells in (fit.heldout, fit.structural_zeros):
            if cells is not None:
                observed &= ~cells
    zeros = model.structural_zeros(shape)
    if zeros is not None:
        observed &= ~zeros
        if heldout is not None:
            heldout = heldout & ~zeros
    cells = [observed] + ([heldout] if heldout is not None and heldout.any() else [])
    rate_rows = _rates_by_rows(fit)
    references = [("", truth.Y)] + ([("rate_", truth.mu)] if truth.mu is not None else [])
    for prefix, reference in references:
        sums = _error_sums(rate_rows, reference, cells, shape)
        result[f"{prefix}mae"] = sums[0] / int(observed.sum())
        if len(cells) > 1:
            result[f"heldout_{prefix}mae"] = sums[1] / int(cells[1].sum())

    fitted = model.topics(factors) if factors is not None and topics else None
    if fitted is not None:
        n_top = min(top_n, fitted.shape[1])
        if n_top >= 2:
            top = top_words(fitted, n=n_top)
            result["npmi"] = float(np.mean(npmi(top, truth.Y, top_n=n_top)))
            coherence = []
            for k in range(len(top)):  # a topic whose word is absent from the corpus has no UMass score
                try:
                    coherence.append(umass_coherence(top[k : k + 1], truth.Y, top_n=n_top)[0])
                except ValueError:
                    pass
            result["umass"] = float(np.mean(coherence)) if coherence else None
        true_topics = model.topics(truth.factors) if truth.factors else None
        if true_topics is not None and true_topics.shape == fitted.shape:
            result["topic_distance"] = aligned_topic_distance(fitted, true_topics)
    return result
