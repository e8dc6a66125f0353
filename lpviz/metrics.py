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
  Beside the numbers it gives the fit's ``health`` (mass ratio, collapse,
  non-finite rates, a chain that has not mixed) and ``baselines`` (what the
  best constant and the independence fit of the same release score, beside
  every MAE); :func:`rankable` says whether a number may be ranked, starred
  or counted as reproducing a claim.
"""

import math
import threading
import weakref

import numpy as np
import scipy.sparse as sp
from scipy.spatial.distance import cdist

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
    "TraceErrors",
    "not_mixed_reason",
    "ScoreStopped",
    "rankable",
    "release_baselines",
    "estimated_total",
    "estimated_count_median",
    "estimated_count_pmf",
    "estimated_rate_median",
    "independence_rates",
    "component_health",
    "SCORE_LABELS",
    "HEALTH_LABELS",
    "BASELINE_LABELS",
    "HEALTH_FLAGS",
    "MAE_KEYS",
    "MASS_RATIO_MIN",
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
# An ensemble's stacking (chains that never meet, lpviz.stacking): None for other fits
STACKING_KEYS = ("stacking_weights", "stacked_mae", "stacked_heldout_mae", "elpd", "modes")
_SCORE_BLOCK_CELLS = 1 << 22


class ScoreStopped(Exception):
    """:func:`score` left early: its ``should_stop`` said so (a Stop, Reset or closed session)."""


# the running score's ``should_stop`` in this thread (a score within a score: an ensemble's chains
# keep their caller's): read between row blocks, so no helper needs a parameter for it
_STOP = threading.local()


def _check_stop():
    should_stop = getattr(_STOP, "should_stop", None)
    if should_stop is not None and should_stop():
        raise ScoreStopped("the score was stopped")


def _rates_by_rows(fit):
    """A function (start, stop) -> rates of those rows, for a Posterior or a ChainState."""
    if hasattr(fit, "rate_rows"):
        return fit.rate_rows
    mu = fit.mu
    return lambda start, stop: mu[start:stop]


def _as_matrix(cells):
    """Cells of any order >= 2 as the matrix the engine sees (rows = the first mode, the other
    modes flattened): a view."""
    return cells.reshape(cells.shape[0], -1)


def _row_blocks(shape):
    rows = max(1, _SCORE_BLOCK_CELLS // max(math.prod(shape[1:]), 1))
    return [(start, min(shape[0], start + rows)) for start in range(0, shape[0], rows)]


def _block_sums(mu, observed, references, cells_list):
    """One row block's share of :func:`_rate_pass` (rates ``mu`` and the block's rows of the
    masks and references): ``(finite, mass, sums)``, each sum a float of numpy's sum over the
    block. A fit whose rows live elsewhere (:class:`lpviz.distributed.DistributedPosterior`) runs
    this where the rows are: the same operations on the same block, hence the same bits."""
    mu = np.asarray(mu, dtype=np.float64)
    if not np.all(np.isfinite(mu)):
        return False, None, None
    mass = float(mu[observed].sum())
    sums = []
    for reference in references:
        error = np.abs(mu - np.asarray(reference, dtype=np.float64))
        sums.append([float(error[cells].sum()) for cells in cells_list])
    return True, mass, sums


def _block_parts(fit, shape, observed, references, cells_list):
    """:func:`_block_sums` of every row block of :func:`_row_blocks`, in row order: the fit's own
    (``fit.block_sums``: computed where its rows are) or here from its rates, a block at a time."""
    blocks = _row_blocks(shape)
    if callable(getattr(fit, "block_sums", None)):
        return fit.block_sums(blocks, observed, references, cells_list)
    rate_rows = _rates_by_rows(fit)
    return (
        _block_sums(
            rate_rows(start, stop),
            observed[start:stop],
            [reference[start:stop] for reference in references],
            [cells[start:stop] for cells in cells_list],
        )
        for start, stop in blocks
    )


def _rate_pass(fit, shape, observed, references, cells_list):
    """One pass over the fitted rates by row blocks (no dense copy of them): whether every rate
    is finite, their sum over ``observed``, and for each reference (true counts, true rates) the
    sums of ``|rate - reference|`` over each boolean cell set (None when a rate is not finite).
    The blocks' sums are added here in row order, whoever computed them."""
    mass = 0.0
    sums = [[0.0] * len(cells_list) for _ in references]
    for finite, block_mass, block_sums in _block_parts(fit, shape, observed, references, cells_list):
        _check_stop()  # between blocks (on a cluster: between the blocks it hands back)
        if not finite:
            return False, None, None
        mass += block_mass
        for sums_of, block_of in zip(sums, block_sums, strict=True):
            for i, value in enumerate(block_of):
                sums_of[i] += value
    return True, mass, sums


class _Cells:
    """A boolean cell set of ``shape`` that :func:`score` reads by row blocks, each block built when
    asked from the masks it is made of (``within``: the cells it keeps, None: every cell;
    ``without``: masks of cells it leaves out), so the score makes no rows x columns mask of its own.
    ``sum`` and ``any`` go a row block at a time."""

    def __init__(self, shape, within=None, without=()):
        self.shape = tuple(shape)
        self.within = within
        self.without = tuple(mask for mask in without if mask is not None)
        self._count = None

    @property
    def every(self):
        """Whether it is every cell (then nothing of it needs sending or reading)."""
        return self.within is None and not self.without

    def excluding(self, mask):
        """This cell set less ``mask``'s cells (None: itself)."""
        return self if mask is None else _Cells(self.shape, self.within, (*self.without, mask))

    def __getitem__(self, rows):
        if self.within is None:
            block = np.ones((len(range(*rows.indices(self.shape[0]))), *self.shape[1:]), dtype=bool)
        else:
            block = np.array(self.within[rows], dtype=bool)  # a copy: the masks are the caller's
        for mask in self.without:
            block &= ~np.asarray(mask[rows], dtype=bool)
        return block

    def sum(self):
        if self._count is None:
            blocks = _row_blocks(self.shape)
            self._count = (
                math.prod(self.shape) if self.every else sum(_counted(self[start:stop]) for start, stop in blocks)
            )
        return self._count

    def any(self):
        return self.sum() > 0


def _counted(block):
    _check_stop()
    return int(np.count_nonzero(block))


def _finite_or_none(value):
    """A float, or None for the NaN of a number that does not apply (a variational fit's log joint)."""
    value = float(value)
    return None if np.isnan(value) else value


# ---------------------------------------------------------------------------
# Fit health and baselines (score()'s ``health`` and ``baselines``)
# ---------------------------------------------------------------------------

# A fit is "collapsed" when its fitted rates keep less than this share of the data's estimated true
# total (the noised counts' sum over the observed cells: unbiased, the noise has mean 0). The VI
# paper's CAVI ends at 2-25% on its own Table 1 data; every healthy fit measured there keeps 50-130%.
MASS_RATIO_MIN = 0.5
# ...judged only when that estimate is this many of its standard errors above 0 (on tiny or very
# noisy data the noised sum says little about the true one, and no fit is flagged on it).
MASS_MIN_STANDARD_ERRORS = 3.0
# A component is "dead" when its share of the fitted mass is below this fraction of an equal share
# (1 / K); "duplicate" when its profile (a topic's word distribution, a block's member distribution)
# lies within this Jensen-Shannon distance (base 2, in [0, 1]) of another live component's.
DEAD_SHARE = 0.01
DUPLICATE_JS_DISTANCE = 0.05
# ... and the fit is "collapsed" when at least this share of its components is a duplicate, or when
# at most one component is left alive. Dead components alone are no collapse: a sparse prior
# legitimately switches off the ones the data do not need (the non-private fit of Figure 1's true
# counts keeps 2 of 5 communities), and a fit that lost the data's mass that way is caught by the
# mass ratio.
COLLAPSED_COMPONENT_SHARE = 0.5
# A chain has "not mixed" when the split R-hat of its likelihood trace after burn-in
# (lpviz.diagnostics.chain_convergence) exceeds this or its bulk ESS is below ESS_MIN, or when it is
# too short to tell. The dashboard's promise is "R-hat > 1.1 or bulk ESS < 100 is not mixed"; 1.05 is
# stricter than 1.1 (Vehtari et al. 2021 recommend 1.01), so every chain past 1.1 is flagged too.
RHAT_MIXED = 1.05
ESS_MIN = 100.0
# The words of health["flags"], in this order.
HEALTH_FLAGS = ("collapsed", "non-finite", "not mixed", "chains disagree")
# The MAE numbers of score() (each has its baselines) and the baselines' names.
MAE_KEYS = ("mae", "heldout_mae", "rate_mae", "heldout_rate_mae")
BASELINES = ("best_constant", "independence")
HEALTH_LABELS = {
    "mass_ratio": "mass ratio",
    "collapsed": "collapsed",
    "nonfinite": "non-finite",
    "not_mixed": "not mixed",
    "chains_disagree": "chains disagree",
    "dead_components": "dead components",
    "duplicate_components": "duplicate components",
    "healthy": "healthy",
}
BASELINE_LABELS = {
    "best_constant": "best constant",
    "independence": "independence (row x column means)",
}


def _noise_variance(alpha):
    """Variance of two-sided geometric noise, ``2 alpha / (1 - alpha)^2``."""
    alpha = np.asarray(alpha, dtype=np.float64)
    return 2.0 * alpha / (1.0 - alpha) ** 2


class _NoisedSums:
    """The noised counts' statistics over a cell set, from one pass a row block at a time (never a
    rows x columns copy): every one an integer, so exact in any order, and the same whoever sums them.

    ``n_cells``; ``per_row``/``per_column``: the cells' count in each row / column (of the matrix the
    engine sees: the other modes flattened); ``row_sums``/``column_sums`` (int64) and ``total``,
    ``squares`` (Python ints) of the noised counts there; ``top``: their maximum (at least 0); and
    ``histograms``: per distinct alpha of the rows, the count of each noised value from -1 on
    (index j holds value j - 1; values below -1 left out: the pmf's filter reads none of them)."""

    def __init__(self, release, cells):
        Y = release.Y_obs
        alpha = np.broadcast_to(np.asarray(release.alpha_per_row, dtype=np.float64), (release.shape[0],))
        n_rows, n_cols = release.shape[0], math.prod(release.shape[1:])
        self.per_row = np.zeros(n_rows, dtype=np.int64)
        self.row_sums = np.zeros(n_rows, dtype=np.int64)
        self.per_column = np.zeros(n_cols, dtype=np.int64)
        self.column_sums = np.zeros(n_cols, dtype=np.int64)
        self.total = self.squares = self.n_cells = self.top = 0
        self.histograms = {}
        for start, stop in _row_blocks(release.shape):
            _check_stop()  # (a stopped pass caches nothing: _noised_sums stores only whole ones)
            block = _as_matrix(np.asarray(cells[start:stop], dtype=bool))
            noised = np.where(block, _as_matrix(np.asarray(Y[start:stop], dtype=np.int64)), 0)
            self.per_row[start:stop] = block.sum(axis=1)
            self.row_sums[start:stop] = noised.sum(axis=1)
            self.per_column += block.sum(axis=0)
            self.column_sums += noised.sum(axis=0)
            self.total += int(self.row_sums[start:stop].sum())
            values = noised[block]  # the cells' noised counts, in row order
            largest = int(np.abs(values).max(initial=0))
            if largest * largest * values.size < 2**62:  # int64 holds the block's sum of squares
                self.squares += int(np.dot(values, values))
            else:
                self.squares += sum(int(value) ** 2 for value in values)
            self.top = max(self.top, int(values.max(initial=0)))
            levels = alpha[start:stop]
            if levels.size and levels.min() == levels.max():
                groups = [(levels[0], values)]
            else:  # per-row noise: each value's alpha
                each = np.repeat(levels, self.per_row[start:stop])
                groups = [(a, values[each == a]) for a in np.unique(each)]
            for a, mine in groups:
                counts = np.bincount(mine[mine >= -1] + 1)
                held = self.histograms.get(float(a))
                if held is not None:  # the longer of the two, the other added in
                    counts, held = (counts, held) if counts.size >= held.size else (held, counts)
                    counts[: held.size] += held
                self.histograms[float(a)] = counts
        self.n_cells = int(self.per_row.sum())

    def noise_variance(self, alpha_per_row):
        """The noise's variance summed over the cells (numpy's sum over the rows, as before)."""
        return float(np.sum(self.per_row * _noise_variance(alpha_per_row)))

    def moments(self):
        """``(mean, variance with ddof=1)`` of the noised counts over the cells, each correctly rounded
        from the exact integer sums (0.0 for a variance of fewer than 2 cells)."""
        n = self.n_cells
        mean = self.total / n if n else 0.0
        variance = (n * self.squares - self.total**2) / (n * (n - 1)) if n > 1 else 0.0
        return mean, variance


# (id(release), cells' key) -> (weak reference to the release, _NoisedSums): the score's estimated
# total and every baseline read one pass over the noised counts
_NOISED_CACHE: dict = {}


def _cells_key(cells):
    """A digest of a boolean cell set, read a row block at a time (no copy of the whole mask)."""
    import hashlib

    if getattr(cells, "every", False):
        return ("every", cells.shape)
    digest = hashlib.blake2b(repr(tuple(cells.shape)).encode(), digest_size=16)
    for start, stop in _row_blocks(cells.shape):
        digest.update(np.ascontiguousarray(cells[start:stop], dtype=bool))
    return digest.hexdigest()


def _noised_sums(release, cells):
    key = (id(release), _cells_key(cells))
    cached = _NOISED_CACHE.get(key)
    if cached is not None and cached[0]() is release:
        return cached[1]
    sums = _NoisedSums(release, cells)
    if len(_NOISED_CACHE) >= _BASELINE_CACHE_SIZE:
        _NOISED_CACHE.pop(next(iter(_NOISED_CACHE)))
    _NOISED_CACHE[key] = (weakref.ref(release), sums)
    return sums


def estimated_total(release, cells=None):
    """``(total, standard_error)``: the noised counts' sum over ``cells`` (default the
    observed cells), an unbiased estimate of the true counts' sum there (the noise has mean 0),
    and the noise's standard deviation of that sum."""
    sums = _noised_sums(release, release.observed_cells if cells is None else cells)
    return float(sums.total), float(np.sqrt(sums.noise_variance(release.alpha_per_row)))


def estimated_count_pmf(release, cells=None):
    """The true counts' distribution over ``cells`` (default the observed ones), estimated
    without bias from the noised counts alone: ``(values, pmf)`` for values 0, 1, 2, ...

    The two-sided geometric noise has characteristic function
    ``(1 - alpha)^2 / (1 - 2 alpha cos t + alpha^2)``, so its convolution is undone exactly by
    the three-tap filter ``p(k) = ((1 + alpha^2) q(k) - alpha q(k - 1) - alpha q(k + 1)) /
    (1 - alpha)^2`` on the noised counts' empirical pmf ``q`` (per row with per-row alpha). The
    estimate is unbiased term by term; its entries may dip below 0 by sampling noise.
    """
    sums = _noised_sums(release, release.observed_cells if cells is None else cells)
    top = sums.top + 2
    pmf = np.zeros(top + 1)
    values = np.arange(top + 1)
    n_cells = max(sums.n_cells, 1)
    for a in sorted(sums.histograms):
        histogram = np.zeros(top + 3, dtype=np.int64)  # index j holds value j - 1
        histogram[: sums.histograms[a].size] = sums.histograms[a]
        q = histogram / n_cells
        # value k sits at index k + 1; its neighbours at k and k + 2
        pmf += ((1.0 + a * a) * q[1 : top + 2] - a * q[0 : top + 1] - a * q[2 : top + 3]) / (1.0 - a) ** 2
    return values, pmf


def _median_of_pmf(values, pmf):
    cdf = np.cumsum(np.maximum(pmf, 0.0))
    if cdf[-1] <= 0:
        return 0.0
    return float(values[np.searchsorted(cdf, 0.5 * cdf[-1])])


# Above this much negative mass the deconvolved pmf is mostly sampling noise: heavy noise divides
# the empirical pmf's errors by (1 - alpha)^2 (Figure 3's per-row noise, alpha up to 0.97, gave a
# pmf with 31 units of negative mass and a "median" of 29 where the true median count is 2).
DECONVOLUTION_MAX_NEGATIVE_MASS = 0.25


def estimated_count_median(release, cells=None):
    """A median of the true counts over ``cells`` (default the observed ones), from the noised
    counts alone: the median of the exactly deconvolved pmf (:func:`estimated_count_pmf`) while
    that estimate is stable (negative mass at most :data:`DECONVOLUTION_MAX_NEGATIVE_MASS`),
    otherwise the median of the negative binomial (Poisson when not overdispersed) with the true
    counts' mean and variance, both estimated without bias (the noise's variance taken out)."""
    from scipy import stats

    cells = release.observed_cells if cells is None else cells
    values, pmf = estimated_count_pmf(release, cells)
    if float(-pmf[pmf < 0].sum()) <= DECONVOLUTION_MAX_NEGATIVE_MASS:
        return _median_of_pmf(values, pmf)
    sums = _noised_sums(release, cells)
    mean, noised_variance = sums.moments()
    if mean <= 0:
        return 0.0
    noise_variance = sums.noise_variance(release.alpha_per_row) / max(sums.n_cells, 1)
    variance = noised_variance - noise_variance if sums.n_cells > 1 else 0.0
    if variance <= mean:
        return float(stats.poisson.median(mean))
    p = mean / variance
    return float(stats.nbinom.median(mean * p / (1.0 - p), p))


def estimated_rate_median(release, cells=None):
    """A median of the true Poisson rates over ``cells``, estimated from the noised counts alone:
    the median of the Gamma law with the rates' mean and variance, both estimated without bias
    (``E[mu] = E[ytil]``; ``Var[mu] = Var[ytil] - Var[noise] - E[mu]``: the Poisson and the noise
    variances taken out). With no spread left the mean itself."""
    from scipy import stats

    sums = _noised_sums(release, release.observed_cells if cells is None else cells)
    if sums.n_cells < 2:
        return 0.0
    mean, noised_variance = sums.moments()
    noise_variance = sums.noise_variance(release.alpha_per_row) / sums.n_cells
    rate_variance = noised_variance - noise_variance - mean
    if mean <= 0:
        return 0.0
    if rate_variance <= 0:
        return mean
    shape = mean * mean / rate_variance
    return float(stats.gamma.median(shape, scale=rate_variance / mean))


def independence_rates(release, cells=None):
    """The row-mean x column-mean (independence) fit of the noised counts over ``cells`` (default
    the observed ones): ``rate_dv = max(r_d, 0) max(c_v, 0) / m`` with ``r_d``, ``c_v`` the mean
    noised count of row d and column v over those cells and ``m`` the overall mean (each an
    unbiased estimate of the true one). Returns the ``(row_means, column_means / m)`` whose outer
    product is the fit."""
    sums = _noised_sums(release, release.observed_cells if cells is None else cells)
    mean = float(sums.total) / max(sums.n_cells, 1)
    rows = np.maximum(sums.row_sums / np.maximum(sums.per_row, 1), 0.0)
    columns = np.maximum(sums.column_sums / np.maximum(sums.per_column, 1), 0.0)
    if mean <= 0:
        return np.zeros_like(rows), np.zeros_like(columns)
    return rows, columns / mean


# (id(release), id(truth), cells) -> (weak reference to the release, to the truth, baselines): weak, so
# the cache keeps no data alive (strong references kept the last 8 tasks' releases and truths in a
# reproduce worker: 1 GB a task at Figure 4's paper size, a worker's memory growing task after task)
_BASELINE_CACHE: dict = {}
_BASELINE_CACHE_SIZE = 8


def release_baselines(release, truth, observed=None, heldout=None):
    """The baselines of :func:`score`: what a trivial fit of the same release scores.

    Both fits are estimated from the release's noised counts over the observed cells alone
    (the truth only scores them), as an analyst who holds the release could:

    - ``best_constant``: one rate everywhere, the MAE-optimal one for each target: the median of
      the true counts (:func:`estimated_count_median`, the noise deconvolved) against the
      true counts, the median of the true rates (:func:`estimated_rate_median`) against the
      true rates. (On the VI paper's Table 1 data these land within 0.004 of the oracle medians'
      MAEs, 0.394 at 1000 x 1000, K = 50.)
    - ``independence``: :func:`independence_rates`, the rank-one fit.

    Returns a dict: ``best_constant`` (the constant against the true counts),
    ``best_constant_rate`` (against the true rates; None without them) and, for every MAE of
    :data:`MAE_KEYS` that applies, ``best_constant_<mae key>`` and ``independence_<mae key>``
    (e.g. ``best_constant_rate_mae``, ``independence_heldout_mae``). Cached per (release, truth,
    cells): a live view scores every iteration.
    """
    observed = release.observed_cells if observed is None else observed
    key = (id(release), id(truth), _cells_key(observed), None if heldout is None else _cells_key(heldout))
    cached = _BASELINE_CACHE.get(key)
    if cached is not None and cached[0]() is release and cached[1]() is truth:
        return dict(cached[2])
    count_constant = estimated_count_median(release, observed)
    rate_constant = estimated_rate_median(release, observed) if truth.mu is not None else None
    row_means, column_factors = independence_rates(release, observed)
    cells_list = [("", observed)] + ([("heldout_", heldout)] if heldout is not None and heldout.any() else [])
    references = [("", truth.Y, count_constant)]
    if truth.mu is not None:
        references.append(("rate_", truth.mu, rate_constant))
    result = {"best_constant": count_constant, "best_constant_rate": rate_constant}
    shape = release.shape
    for prefix, reference, constant in references:
        constant_sums = [0.0] * len(cells_list)
        independence_sums = [0.0] * len(cells_list)
        for start, stop in _row_blocks(shape):
            _check_stop()
            target = _as_matrix(np.asarray(reference[start:stop], dtype=np.float64))
            fitted = np.outer(row_means[start:stop], column_factors)
            for i, (_, cells) in enumerate(cells_list):
                block = _as_matrix(cells[start:stop])
                constant_sums[i] += float(np.abs(target[block] - constant).sum())
                independence_sums[i] += float(np.abs(target[block] - fitted[block]).sum())
        for i, (where, cells) in enumerate(cells_list):
            n_cells = int(cells.sum())
            result[f"best_constant_{where}{prefix}mae"] = constant_sums[i] / n_cells
            result[f"independence_{where}{prefix}mae"] = independence_sums[i] / n_cells
    if len(_BASELINE_CACHE) >= _BASELINE_CACHE_SIZE:
        _BASELINE_CACHE.pop(next(iter(_BASELINE_CACHE)))
    _BASELINE_CACHE[key] = (weakref.ref(release), weakref.ref(truth), dict(result))
    return result


def component_health(model, factors, left_sums=None):
    """``(dead, duplicate, n_components)`` (all None for a model without ``low_rank``): how many
    of the fit's components carry almost none of its mass
    (share below :data:`DEAD_SHARE` / K), and how many live ones have a near copy (Jensen-Shannon
    distance of their profiles below :data:`DUPLICATE_JS_DISTANCE`). The components are the
    columns of the model's ``low_rank`` factors (``mu = left @ right.T``), a component's
    profile its column of ``right`` normalised (a topic's words, a block's members).
    ``left_sums``: ``left``'s column sums, when its rows are elsewhere (a chain over a cluster:
    :meth:`lpviz.distributed.DistributedPosterior.best_without_rows`); only they are read of it."""
    try:
        left, right = model.low_rank(factors)
    except NotImplementedError:  # a model whose rates are no low-rank product has no components to judge
        return None, None, None
    right = np.asarray(right, dtype=np.float64)
    left_sums = np.asarray(left, dtype=np.float64).sum(axis=0) if left_sums is None else left_sums
    mass = left_sums * right.sum(axis=0)
    n_components = mass.size
    total = float(mass.sum())
    if not total > 0:
        return n_components, 0, n_components
    live = np.flatnonzero(mass / total >= DEAD_SHARE / n_components)
    dead = n_components - live.size
    profiles = right[:, live].T
    sums = profiles.sum(axis=1)
    live_profiles = profiles[sums > 0] / sums[sums > 0, None]
    if len(live_profiles) < 2:
        return dead, 0, n_components
    # scipy's distance is in natural-log units, at most sqrt(log 2): base 2 puts it in [0, 1]
    distances = cdist(live_profiles, live_profiles, "jensenshannon") / np.sqrt(np.log(2.0))
    np.fill_diagonal(distances, np.inf)
    duplicate = int((np.nan_to_num(distances, nan=0.0) < DUPLICATE_JS_DISTANCE).any(axis=1).sum())
    return dead, duplicate, n_components


def _not_mixed(fit, rhat, ess):
    """True/False for a chain's posterior whose R-hat and ESS were computed; None otherwise."""
    if getattr(fit, "inference", None) != "mcmc":
        return None
    if rhat is None or ess is None:
        return True  # too short (or too flat) to tell: not shown to have mixed
    return bool(rhat > RHAT_MIXED or ess < ESS_MIN)


def _disagreement(convergence):
    """The reason of a ``chains disagree`` flag in words, naming each chain in a poorer mode with its
    numbers (None when every chain sits in the best chain's mode, or nothing was diagnosed)."""
    if not convergence or not convergence["odd"]:
        return None
    numbers = convergence["chains"]
    best = max(range(len(numbers)), key=lambda i: numbers[i]["mean"])
    trace = convergence["trace_name"].replace("_", " ")
    parts = []
    for i in convergence["odd"]:
        n = numbers[i]
        parts.append(
            f"chain {i} sits in another mode: its mean {trace} {n['mean']:.6g} is {n['gap']:.4g} below "
            f"chain {best}'s {numbers[best]['mean']:.6g} ({n['sds']:.1f} within-chain sd), and its rates "
            f"differ from the other chains' by {n['rate_distance']:.4g} on average"
        )
    return "the chains disagree: " + "; ".join(parts)


def not_mixed_reason(rhat, ess, chains=1):
    """The words of a ``not mixed`` flag: the check that failed with its threshold, the other number
    beside it (issue 57 MEDIUM 7: "R-hat 1.01, bulk ESS 69" never said that ESS below 100 was why).
    ``rhat``/``ess``: the fit's (split R-hat of one chain, cross-chain R-hat of ``chains`` > 1)."""
    subject = "the chains have" if chains > 1 else "the chain has"
    if rhat is None or ess is None:
        return f"{subject} not mixed (too short to tell)"
    # the numbers as the scoreboard shows them (four significant digits: it showed ESS 2.591 above
    # "bulk ESS 3", issue 57 LOW 23)
    failed = [f"R-hat {rhat:,.4g} > {RHAT_MIXED:g}"] if rhat > RHAT_MIXED else []
    if ess < ESS_MIN:
        failed.append(f"bulk ESS {ess:,.4g} < {ESS_MIN:.0f}")
    if len(failed) == 1:
        failed.append(f"(bulk ESS {ess:,.4g})" if rhat > RHAT_MIXED else f"(R-hat {rhat:,.4g})")
        return f"{subject} not mixed: {' '.join(failed)}"
    return f"{subject} not mixed: {', '.join(failed)}"


def _health(mass_ratio, mass_judged, finite, components, not_mixed, disagree=None):
    """``not_mixed``: the words of the flag (:func:`not_mixed_reason`), False for a fit shown to have
    mixed, None when not diagnosed."""
    dead, duplicate, n_components = components
    collapsed = False
    reasons = []
    if mass_ratio is not None and mass_judged and mass_ratio < MASS_RATIO_MIN:
        collapsed = True
        reasons.append(f"the fitted rates keep {mass_ratio:.1%} of the data's estimated total (< {MASS_RATIO_MIN:.0%})")
    if dead is not None:
        one_left = n_components - dead <= 1
        if n_components > 1 and (duplicate >= COLLAPSED_COMPONENT_SHARE * n_components or one_left):
            collapsed = True
            reasons.append(f"{dead} dead and {duplicate} duplicate of {n_components} components")
    if not finite:
        reasons.append("some fitted rates are NaN or infinite")
    if not_mixed:
        reasons.append(not_mixed)
    if disagree:
        reasons.append(disagree)
    on = (collapsed, not finite, bool(not_mixed), bool(disagree))
    flags = [word for word, flagged in zip(HEALTH_FLAGS, on, strict=True) if flagged]
    return {
        "mass_ratio": mass_ratio,
        "collapsed": collapsed,
        "nonfinite": not finite,
        "not_mixed": not_mixed if not_mixed is None else bool(not_mixed),
        "chains_disagree": bool(disagree),
        "dead_components": dead,
        "duplicate_components": duplicate,
        "flags": flags,
        "reasons": reasons,
        "healthy": not flags,
    }


def _last(trace):
    """The last value of a trace; of an ensemble's ``(chain, iteration)`` traces, the chains' mean."""
    trace = np.asarray(trace, dtype=np.float64)
    return float(trace[-1]) if trace.ndim == 1 else float(np.mean(trace[:, -1]))


def _score_chains(result, ensemble, release, truth, convergence, **options):
    """An ensemble's own numbers beside its pooled ones: ``n_chains``; ``chains``, each chain's
    :func:`score`; ``chain_mae`` (with a truth); ``convergence`` (the cross-chain R-hat/ESS rows of
    :func:`lpviz.diagnostics.summarize_diagnostics`, NaN as None); ``ess_tail``; ``odd_chains``."""
    result["n_chains"] = ensemble.n_chains
    result["chains"] = [score(chain, release, truth, **options) for chain in ensemble.chains]
    result["chain_mae"] = [chain["mae"] for chain in result["chains"]] if truth is not None else None
    rows = (convergence or {}).get("summary") or []
    result["convergence"] = [
        {key: _finite_or_none(value) if isinstance(value, float) else value for key, value in row.items()}
        for row in rows
    ]
    result["ess_tail"] = (convergence or {}).get("ess_tail")
    result["odd_chains"] = list((convergence or {}).get("odd") or [])


def _score_stacking(result, ensemble, release, shape, observed, references, cells):
    """The chains weighed by stacking on the release's noised cells no fit used (:mod:`lpviz.stacking`):
    ``stacking_weights``, ``elpd`` (per chain, pooled, stacked: each ``{"elpd", "se", "n"}``, and
    the ``cells`` scored), ``modes`` (``groups`` of chain numbers counted from 0, their ``weights``, ``text``,
    ``notes``) and, with a truth, ``stacked_mae`` / ``stacked_heldout_mae`` of the stacked rates."""
    if not all(chain.n_saved for chain in ensemble.chains):
        return
    try:
        stacking = ensemble.stacking(release)
    except ValueError:  # no cell to score (every one a structural zero)
        return
    _check_stop()
    result["stacking_weights"] = [float(w) for w in stacking.weights]
    result["elpd"] = stacking.elpd()
    result["modes"] = {
        "groups": [list(members) for members in stacking.modes],  # chains counted from 0, as the reasons
        "weights": stacking.mode_weights(),
        "log_joint": stacking.mode_log_joint,
        "text": stacking.text,
        "notes": list(stacking.notes),
        "seconds": stacking.seconds,
    }
    truths = [reference for prefix, reference in references if prefix == ""]
    if truths:
        finite, _, sums = _rate_pass(ensemble.stacked(release), shape, observed, truths, cells)
        if finite:
            result["stacked_mae"] = sums[0][0] / int(observed.sum())
            if len(cells) > 1:
                result["stacked_heldout_mae"] = sums[0][1] / int(cells[1].sum())


def rankable(scores, key="mae"):
    """``(ok, reasons)``: whether a fit's ``scores[key]`` (an MAE of :func:`score`) may be ranked,
    starred or counted as reproducing a claim: the fit is healthy (no ``health["flags"]``) and
    its MAE beats both baselines (best constant, independence fit). ``reasons`` says in words
    what failed (empty when ``ok``)."""
    reasons = list((scores.get("health") or {}).get("reasons") or [])
    if (scores.get("health") or {}).get("flags") is None:
        reasons.append("no health numbers")
    value = scores.get(key)
    baselines = scores.get("baselines") or {}
    if value is None:
        reasons.append(f"no {SCORE_LABELS.get(key, key)}")
    for name in BASELINES:
        reference = baselines.get(f"{name}_{key}")
        if reference is None:
            reasons.append(f"no {BASELINE_LABELS[name]} baseline for {SCORE_LABELS.get(key, key)}")
        elif value is not None and not value < reference:
            reasons.append(
                f"{SCORE_LABELS.get(key, key)} {value:.4g} does not beat the {BASELINE_LABELS[name]}'s {reference:.4g}"
            )
    return not reasons, reasons


def _score_inputs(fit, release, truth, alpha):
    """``(release, truth)`` for :func:`score`: a count array wrapped as :func:`lpviz.fit` takes
    it (the fit's held-out cells and structural zeros, ``alpha``), and both of the fit's shape."""
    from lpviz.release import Release, Truth, kind_of

    if alpha is not None and (release is None or isinstance(release, Release)):
        raise ValueError("alpha= goes with a count array as release; a Release carries its own alpha")
    shape = getattr(fit, "shape", None)  # a posterior's (a chain state's is its release's)
    if release is not None and not isinstance(release, Release):
        if not (sp.issparse(release) or hasattr(release, "__array__") or isinstance(release, (list, tuple))):
            raise TypeError(
                f"release must be a lpviz Release or a count array (what lpviz.fit takes), not {type(release).__name__}"
            )
        from lpviz.engine import _check_counts

        counts = _check_counts(release)
        counts = counts.toarray() if sp.issparse(counts) else np.asarray(counts)
        if shape is not None and tuple(counts.shape) != tuple(shape):
            raise ValueError(
                f"the counts have shape {_shape_text(counts.shape)} but the fit {_shape_text(shape)}: "
                "score a fit against the counts it was fitted on"
            )
        model = fit.model_instance
        kind = kind_of(counts.shape)
        kind = kind if kind in model.kinds else model.kinds[0]
        release = Release(
            Y_obs=counts,
            alpha=1e-300 if alpha is None else alpha,  # no noise: variance 2 alpha / (1 - alpha)^2 ~ 0
            kind=kind,
            heldout=getattr(fit, "heldout", None),
            structural_zeros=getattr(fit, "structural_zeros", None),
        )
    if truth is not None and not isinstance(truth, Truth):
        truth = Truth(Y=truth)
    reference = tuple(release.shape) if release is not None else (tuple(shape) if shape is not None else None)
    if release is not None and shape is not None and tuple(release.shape) != tuple(shape):
        raise ValueError(
            f"the release is {_shape_text(release.shape)} but the fit {_shape_text(shape)}: score a fit "
            "against the release it was fitted on"
        )
    if truth is not None and reference is not None and tuple(truth.Y.shape) != reference:
        raise ValueError(
            f"the true counts have shape {tuple(truth.Y.shape)} but the "
            f"{'release' if release is not None else 'fit'} {reference}: give the truth of the data the fit saw"
        )
    return release, truth


def _shape_text(shape):
    return " x ".join(f"{int(n):,}" for n in shape)


# Up to this many cells TraceErrors scores from cell masks built once (two booleans a cell); larger
# data go through score, whose checks cost little next to their rate pass there.
TRACE_MASK_CELLS = 4_000_000


class TraceErrors:
    """The error numbers of :func:`score` (``mae``, ``rate_mae`` and their held-out ones; ``topics=False,
    diagnostics=False``) of many fits of one release, bit for bit score's: the same rate pass over the
    same cells, the cell masks built once instead of at every call. The dashboard scores every traced
    row of a chain so (score's checks, cell digests and baselines cost about a millisecond a call,
    Figure 1's iteration 0.1-0.2 ms). Data larger than :data:`TRACE_MASK_CELLS` go through score itself.

    ``TraceErrors(release, truth, model)(fit)`` -> ``{key: value}`` (``{}`` without a truth)."""

    def __init__(self, release, truth, model):
        self.release, self.truth = release, truth
        self.references = _error_references(truth)
        shape = tuple(release.shape)
        self.fast = bool(self.references) and math.prod(shape) <= TRACE_MASK_CELLS
        if not self.fast:
            return
        cells = _scored_cells(shape, release, model)  # score()'s cells, as whole masks
        self.shape = shape
        self.cells = [np.asarray(c[0 : shape[0]], dtype=bool) for c in cells]
        self.counts = [int(c.sum()) for c in cells]

    def __call__(self, fit, should_stop=None):
        """``{key: value}`` of the error numbers for ``fit`` (a chain state or a posterior)."""
        if not self.fast or callable(getattr(fit, "block_sums", None)):
            if not self.references:
                return {}  # no truth: score() has no error numbers either
            return score(fit, self.release, self.truth, topics=False, diagnostics=False, should_stop=should_stop)
        if hasattr(fit, "rate_rows") and not fit.n_saved:
            return {}  # a posterior before its first sample
        observed = self.cells[0]
        finite, _, sums = _rate_pass(fit, self.shape, observed, [r for _, r in self.references], self.cells)
        return _error_numbers(self.references, sums, self.counts) if finite else {}


def _error_references(truth):
    """``[(prefix, reference)]`` an MAE is taken against: the true counts, and the true rates where
    known (``rate_``); none without a truth."""
    if truth is None:
        return []
    return [("", truth.Y)] + ([("rate_", truth.mu)] if truth.mu is not None else [])


def _scored_cells(shape, source, model, release_given=True):
    """The cells an MAE is taken over: ``[observed]``, plus the held-out ones where there are any,
    each less the structural zeros of the release (``release_given``) or of ``source`` as a fit
    recorded them, and the model's. ``source``: the release, else the fit."""
    observed = _Cells(shape, without=(source.heldout, source.structural_zeros))
    # a release's held-out cells less its structural zeros (release.heldout_cells); a fit's as it recorded them
    held_without = (source.structural_zeros,) if release_given else ()
    heldout = None if source.heldout is None else _Cells(shape, within=source.heldout, without=held_without)
    zeros = model.structural_zeros(shape)
    observed = observed.excluding(zeros)
    heldout = None if heldout is None else heldout.excluding(zeros)
    return [observed] + ([heldout] if heldout is not None and heldout.any() else [])


def _error_numbers(references, sums, counts):
    """``{mae, heldout_mae, rate_mae, heldout_rate_mae}`` (those that apply) from the rate pass's
    absolute-error ``sums`` (a reference's, a cell set's) and the cell sets' ``counts``."""
    result = {}
    for (prefix, _), sums_of in zip(references, sums, strict=True):
        result[f"{prefix}mae"] = sums_of[0] / counts[0]
        if len(counts) > 1:
            result[f"heldout_{prefix}mae"] = sums_of[1] / counts[1]
    return result


def score(fit, release=None, truth=None, *, top_n=10, topics=True, diagnostics=True, alpha=None, should_stop=None):
    """Every number a user sees about one fit.

    Parameters
    ----------
    fit : lpviz.engine.Posterior, lpviz.ensemble.EnsemblePosterior or lpviz.engine.ChainState
        A posterior (its mean rates over the saved samples, its best sample's
        topics), several chains' (the rates pooled over them, the best
        sample of any; see below) or one state of a chain (its current rates
        and topics).
    release : lpviz.release.Release, or array-like / scipy.sparse matrix of int, optional
        What the fit saw: which cells were observed, held out, or do not
        exist. Default: what the posterior recorded (required for a ChainState).
        A count array (what :func:`lpviz.fit` also takes) is the counts the fit
        saw, with the fit's held-out cells and structural zeros and ``alpha``.
        Its shape must be the fit's.
    truth : lpviz.release.Truth or array-like of int, optional
        The true counts (and rates, for simulated data). Without it only the
        fit's own numbers are reported. Its shape must be the fit's.
    top_n : int
        Top words per topic for NPMI and UMass.
    topics : bool
        Also score the topics (NPMI, UMass, topic distance) of models that
        have them; False gives the error numbers alone, at a fraction of the
        cost (e.g. for every iteration of a streamed chain).
    diagnostics : bool or "trace"
        Also diagnose a posterior's chain (R-hat, ESS: ArviZ, milliseconds
        per call); False leaves them None (e.g. for every saved sample of a
        streamed chain). ``"trace"``: of an ensemble, the likelihood trace
        alone (R-hat, ESS, the odd chains and the health they give, the same
        as ``True``), without the per-element rows of ``convergence`` for the
        probe cells and topics and without each chain's own topic scores
        (seconds on a large fit: for live views).
    alpha : float or array (n_rows,), optional
        With a count array as ``release``: its noise level, as given to
        :func:`lpviz.fit` (default: counts without noise).
    should_stop : callable () -> bool, optional
        Asked between row blocks and between the parts of the score (on a
        cluster: between the blocks its workers hand back); when it answers
        True the score raises :class:`ScoreStopped` (a dashboard's Stop or
        Reset during a large fit's final score). It changes no number.

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

        An ensemble (``lpviz.fit(..., chains=C)``) is scored on its pooled
        rates; ``log_joint``/``log_marginal`` are the chains' mean at the last
        iteration, ``seconds`` the wall-clock of the chains together; ``rhat``,
        ``ess`` the cross-chain rank-normalised split R-hat and bulk ESS of
        the likelihood trace (:func:`lpviz.diagnostics.ensemble_convergence`),
        and it adds ``ess_tail``, ``convergence`` (one row per quantity: the
        trace, the probe cells' rates, the aligned topics), ``n_chains``,
        ``chains`` (each chain's own score), ``chain_mae`` (with a truth) and
        ``odd_chains``. With a release and ``diagnostics=True`` an ensemble
        of MCMC chains also weighs its chains by stacking on the release's
        noised cells that no fit used (held out, else PSIS-LOO over the
        observed; :mod:`lpviz.stacking`, never the truth): ``stacking_weights``
        (one per chain), ``elpd`` (the log predictive density of those cells
        under the noised law with its standard error, per chain, pooled and
        stacked, the stacked one cross-fitted), ``modes`` (the chains grouped
        by what they predict, the groups' weights and log joints, in words in
        ``text``) and, with a truth, ``stacked_mae`` and
        ``stacked_heldout_mae`` of the stacked rates (None for other fits).
        A variational fit kept from ``restarts=R`` adds
        ``restarts``: the ELBO of each, the one kept, their ELBO range, rate
        range and, with a truth, each one's MAE and their range.

        ``health`` (None before a posterior has a sample), a dict:

        - ``mass_ratio``: the fitted rates' sum over the observed cells over the data's
          estimated true total there (:func:`estimated_total`: the noised counts' sum, unbiased);
          None without a release. Near 1 for a healthy fit of a private release (a naive fit of
          noised counts sits far above 1: it fits the truncated noise).
        - ``collapsed``: the mass ratio is below :data:`MASS_RATIO_MIN` (judged only when the
          estimated total is :data:`MASS_MIN_STANDARD_ERRORS` standard errors above 0), or at
          least :data:`COLLAPSED_COMPONENT_SHARE` of the components are duplicates, or at most
          one is alive (dead components alone are a sparse prior's choice, not a collapse);
        - ``dead_components``, ``duplicate_components``: :func:`component_health` (None when
          ``topics=False``);
        - ``nonfinite``: a fitted rate is NaN or infinite (then every MAE is None);
        - ``not_mixed``: a chain's posterior whose split R-hat exceeds :data:`RHAT_MIXED` (1.05,
          stricter than the usual 1.1) or whose bulk ESS is below :data:`ESS_MIN` (100), or too
          short to tell; None for variational
          fits, chain states and ``diagnostics=False``;
        - ``chains_disagree`` (ensembles): a chain's mean log likelihood after burn-in lies more
          than :data:`lpviz.diagnostics.DISAGREE_SDS` within-chain standard deviations below the
          best chain's (:func:`lpviz.diagnostics.odd_chains`); its reason names the chain, its
          mean, its gap and how far its rates are from the other chains';
        - ``flags``: the words of :data:`HEALTH_FLAGS` that apply ("collapsed", "non-finite",
          "not mixed", "chains disagree"); ``reasons``: each in a sentence with its numbers;
          ``healthy``: no flags.

        ``baselines`` (None without both release and truth), a dict
        (:func:`release_baselines`): the constants ``best_constant`` and ``best_constant_rate``,
        and for every MAE above that applies, ``best_constant_<key>`` and
        ``independence_<key>`` (e.g. ``best_constant_mae``, ``independence_rate_mae``): the
        MAE of the best constant rate and of the row-mean x column-mean fit, both estimated from
        the release's noised counts alone and scored against the same target and cells as the
        fit; ``beats``: ``{key: True}`` for each MAE below both of its baselines.
        :func:`rankable` combines both: nothing is ranked, starred or counted as reproducing a
        claim unless it says so.
    """
    if should_stop is None:  # (a score within a score keeps its caller's should_stop)
        return _score(fit, release, truth, top_n=top_n, topics=topics, diagnostics=diagnostics, alpha=alpha)
    outer, _STOP.should_stop = getattr(_STOP, "should_stop", None), should_stop
    try:
        _check_stop()
        return _score(fit, release, truth, top_n=top_n, topics=topics, diagnostics=diagnostics, alpha=alpha)
    finally:
        _STOP.should_stop = outer


def _score(fit, release, truth, *, top_n, topics, diagnostics, alpha):
    """:func:`score`, its ``should_stop`` (if any) set for this thread."""
    if diagnostics not in (True, False, "trace"):
        raise ValueError(f'diagnostics must be True, False or "trace", got {diagnostics!r}')
    is_posterior = hasattr(fit, "rate_rows")
    ensemble = is_posterior and getattr(fit, "n_chains", None) is not None  # lpviz.ensemble.EnsemblePosterior
    convergence = None
    if release is None and not is_posterior and truth is not None:
        raise ValueError("scoring a single chain state needs the release it was fitted on")
    release, truth = _score_inputs(fit, release, truth, alpha)
    shape = release.shape if release is not None else getattr(fit, "shape", None)
    result = dict.fromkeys(SCORE_LABELS)
    result.update(dict.fromkeys(STACKING_KEYS))
    if is_posterior:
        result.update(iterations=fit.iterations, samples=fit.n_saved, seconds=round(fit.seconds, 3))
        if fit.iterations:
            result["log_joint"] = _finite_or_none(_last(fit.log_joint))
            result["log_marginal"] = _finite_or_none(_last(fit.log_marginal))
            result["iterations_per_second"] = fit.iterations / fit.seconds if fit.seconds > 0 else None
            if getattr(fit, "elbo", None) is not None:  # a variational fit
                result["elbo"] = _finite_or_none(fit.elbo[-1])
        # a fit whose rows live elsewhere (a chain over a cluster) gives its best sample without
        # them and their column sums (component health reads nothing else of them)
        best_without_rows = getattr(fit, "best_without_rows", None)
        factors, left_sums = best_without_rows() if best_without_rows is not None else (fit.best, None)
        if factors is not None:
            result["best_log_joint"] = _finite_or_none(fit.best_log_joint)
        if diagnostics and ensemble:
            if all(chain.n_saved for chain in fit.chains):
                from lpviz.diagnostics import ensemble_convergence

                convergence = ensemble_convergence(fit, release, truth, elements=diagnostics is True)
                result.update(rhat=convergence["rhat"], ess=convergence["ess"])
        elif diagnostics:
            from lpviz.diagnostics import chain_convergence

            result.update({key: chain_convergence(fit)[key] for key in ("rhat", "ess")})
        model = fit.model_instance
        ready = fit.n_saved > 0
        _check_stop()  # after the diagnostics (ArviZ's, not stoppable inside)
    else:
        result.update(iterations=fit.iteration, log_joint=_finite_or_none(fit.log_joint))
        result["log_marginal"] = _finite_or_none(fit.log_marginal)
        result["elbo"] = _finite_or_none(getattr(fit, "elbo", np.nan))
        factors, model, ready, left_sums = fit.factors, fit.model_instance, True, None
    result["health"] = None
    result["baselines"] = None
    if not ready:
        return result
    if truth is not None and tuple(truth.Y.shape) != tuple(shape):
        raise ValueError(f"the true counts have shape {truth.Y.shape} but the release {shape}")

    # the observed and held-out cells, each built a row block at a time where it is read (_Cells): the
    # score makes no rows x columns mask (a fit over a cluster scored without its release, e.g.
    # lpviz fit --data synthetic-topics-blockwise --scheduler, has none here at all)
    source = release if release is not None else fit  # (what the fit recorded: a posterior, a chain state)
    cells = _scored_cells(shape, source, model, release_given=release is not None)
    observed = cells[0]
    references = _error_references(truth)
    finite, mass, sums = _rate_pass(fit, shape, observed, [r for _, r in references], cells)
    if finite and references:
        result.update(_error_numbers(references, sums, [int(c.sum()) for c in cells]))

    _check_stop()
    mass_ratio, mass_judged = None, False
    if release is not None and finite:
        total, standard_error = estimated_total(release, observed)
        if total > 0:
            mass_ratio = mass / total
            mass_judged = total > MASS_MIN_STANDARD_ERRORS * standard_error
    components = (None, None, None)
    if topics and factors is not None and finite:
        components = component_health(model, factors, left_sums)
    not_mixed = _not_mixed(fit, result["rhat"], result["ess"]) if is_posterior and diagnostics else None
    # an ensemble's verdict is the chains' (cross-chain numbers), a chain's its own
    if not_mixed:
        not_mixed = not_mixed_reason(result["rhat"], result["ess"], len(fit.chains) if ensemble else 1)
    result["health"] = _health(mass_ratio, mass_judged, finite, components, not_mixed, _disagreement(convergence))
    if ensemble:
        each_topics = topics and diagnostics != "trace"
        _score_chains(
            result, fit, release, truth, convergence, top_n=top_n, topics=each_topics, diagnostics=diagnostics
        )
    if ensemble and diagnostics is True and release is not None and getattr(fit, "inference", None) == "mcmc":
        _score_stacking(result, fit, release, shape, observed, references, cells)
    if getattr(fit, "restart_spread", None) is not None:
        result["restarts"] = dict(fit.restart_spread, elbo=list(fit.restart_elbos), kept=fit.restart_index)
        if finite and references:
            maes = [
                _rate_pass(other, shape, observed, [references[0][1]], [observed])[2][0][0] / int(observed.sum())
                for other in fit.restarts
            ]
            result["restarts"].update(mae=maes, mae_range=float(max(maes) - min(maes)))
    _check_stop()
    if release is not None and truth is not None:
        baselines = release_baselines(release, truth, observed, cells[1] if len(cells) > 1 else None)
        baselines["beats"] = {
            key: result[key] < min(baselines[f"{name}_{key}"] for name in BASELINES)
            for key in MAE_KEYS
            if result[key] is not None and f"best_constant_{key}" in baselines
        }
        result["baselines"] = baselines
    if truth is None:
        return result

    _check_stop()
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
