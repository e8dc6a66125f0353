"""Central differential privacy for topic models: private online LDA (VIPS).

Trust model: a *trusted curator* holds the true documents, runs stochastic
variational LDA (online LDA, Hoffman et al. 2010) and releases only the
fitted topics. The data enter the algorithm only through each minibatch's
expected sufficient statistics (a K x V matrix); VIPS (Park et al. 2016,
Foulds et al. 2020) noises that matrix with the Gaussian mechanism before
every update, and the subsampled-Gaussian accountant of
:mod:`lpviz.accounting` composes the steps. Privacy unit: one whole
document added or removed, (epsilon, delta)-DP. Compare the local model of
:mod:`lpviz.privacy`: there every owner noises their own counts, nobody is
trusted, and the unit is N tokens of a document ((N, epsilon)-LPLP).

- :class:`PrivateLDA`: the estimator (scikit-learn style).
- :func:`expected_statistics`: the E-step on a set of documents and their
  per-document clipped statistic, summed (what is released, before noise).
- :func:`noisy_statistics`: the Gaussian mechanism on that sum.
- :func:`epsilon_spent`: what a fitted model spent under either accountant.
"""

import math
import numbers
import threading
import time

import numpy as np
import pandas as pd
import scipy.sparse as sp
from numba import njit, prange
from scipy.special import digamma

from . import accounting
from ._validate import check_int as _check_int
from ._validate import check_positive as _check_positive

__all__ = ["PrivateLDA", "expected_statistics", "noisy_statistics", "posterior", "epsilon_spent"]

# Added to each word's normaliser sum_k exp(E log theta_k) w_kv against a
# division by zero, as in Hoffman's onlineldavb.py (1e-100), not scikit-learn's
# float eps: the kernels get each word's column w_kv scaled to a maximum of 1
# (see _word_scaled_topic_weights), so the normaliser is rarely below 1e-30.
_PHI_FLOOR = 1e-100


# ---------------------------------------------------------------------------
# Numba kernels: per-document E-step, clipped statistic, evidence bound
# ---------------------------------------------------------------------------


@njit(nogil=True, cache=True)
def _digamma(x):
    """psi(x) for x > 0: recurrence up to x >= 6, then the asymptotic series (abs. error < 1e-13)."""
    result = 0.0
    while x < 6.0:
        result -= 1.0 / x
        x += 1.0
    f = 1.0 / (x * x)
    series = f * (1.0 / 12 - f * (1.0 / 120 - f * (1.0 / 252 - f * (1.0 / 240 - f * (1.0 / 132)))))
    return result + math.log(x) - 0.5 / x - series


@njit(nogil=True, cache=True)
def _exp_dirichlet_expectation(gamma, out):
    """out = exp(E[log theta]) for theta ~ Dirichlet(gamma)."""
    total = 0.0
    for k in range(gamma.shape[0]):
        total += gamma[k]
    psi_total = _digamma(total)
    for k in range(gamma.shape[0]):
        out[k] = math.exp(_digamma(gamma[k]) - psi_total)


@njit(nogil=True, cache=True)
def _document_fixed_point(word_ids, counts, word_topic_weights, alpha, max_iter, tol, gamma):
    """Hoffman et al. (2010) per-document updates of ``gamma`` (in place, from its initial value).

    Iterate ``gamma_k = alpha + exp(E log theta_k) sum_v n_v w_vk / norm_v``
    with ``norm_v = sum_k exp(E log theta_k) w_vk`` until the mean absolute
    change is below ``tol`` or ``max_iter`` sweeps (scikit-learn's
    ``_update_doc_distribution`` order). ``word_topic_weights`` (V, K) holds
    ``w_vk = exp(E log beta_kv)`` up to a factor per word, which cancels.
    """
    n_topics = gamma.shape[0]
    n_words = word_ids.shape[0]
    local = np.empty((n_words, n_topics))
    for j in range(n_words):
        local[j, :] = word_topic_weights[word_ids[j], :]
    exp_theta = np.empty(n_topics)
    _exp_dirichlet_expectation(gamma, exp_theta)
    new = np.empty(n_topics)
    for _ in range(max_iter):
        new[:] = 0.0
        for j in range(n_words):
            norm = _PHI_FLOOR
            for k in range(n_topics):
                norm += exp_theta[k] * local[j, k]
            weight = counts[j] / norm
            for k in range(n_topics):
                new[k] += weight * local[j, k]
        change = 0.0
        for k in range(n_topics):
            value = alpha + exp_theta[k] * new[k]
            change += abs(value - gamma[k])
            gamma[k] = value
        _exp_dirichlet_expectation(gamma, exp_theta)
        if change / n_topics < tol:
            break


@njit(nogil=True, cache=True, parallel=True)
def _fit_documents_parallel(indptr, indices, counts, word_topic_weights, alpha, max_iter, tol, gamma):
    """Per-document fixed points for every row of a CSR matrix; ``gamma`` (D, K) holds the start."""
    for d in prange(indptr.shape[0] - 1):
        start, stop = indptr[d], indptr[d + 1]
        _document_fixed_point(
            indices[start:stop], counts[start:stop], word_topic_weights, alpha, max_iter, tol, gamma[d]
        )


@njit(nogil=True, cache=True)
def _fit_documents_serial(indptr, indices, counts, word_topic_weights, alpha, max_iter, tol, gamma):
    """:func:`_fit_documents_parallel` on one thread (small batches)."""
    for d in range(indptr.shape[0] - 1):
        start, stop = indptr[d], indptr[d + 1]
        _document_fixed_point(
            indices[start:stop], counts[start:stop], word_topic_weights, alpha, max_iter, tol, gamma[d]
        )


@njit(nogil=True, cache=True)
def _accumulate_clipped(indptr, indices, counts, word_topic_weights, gamma, clip_norm, statistic_T):
    """Add each document's statistic ``n_dv phi_dvk``, clipped to Frobenius norm ``clip_norm``.

    ``statistic_T`` is (V, K). ``clip_norm <= 0`` means no clipping. Serial, so
    the sum is the same for any thread count. Returns the number clipped.
    """
    n_topics = gamma.shape[1]
    exp_theta = np.empty(n_topics)
    n_clipped = 0
    for d in range(indptr.shape[0] - 1):
        start, stop = indptr[d], indptr[d + 1]
        if stop == start:
            continue
        _exp_dirichlet_expectation(gamma[d], exp_theta)
        weights = np.empty(stop - start)
        squared_norm = 0.0
        for j in range(start, stop):
            row = word_topic_weights[indices[j]]
            norm = _PHI_FLOOR
            for k in range(n_topics):
                norm += exp_theta[k] * row[k]
            weights[j - start] = counts[j] / norm
            for k in range(n_topics):
                entry = weights[j - start] * exp_theta[k] * row[k]
                squared_norm += entry * entry
        scale = 1.0
        if clip_norm > 0 and squared_norm > clip_norm * clip_norm:
            scale = clip_norm / math.sqrt(squared_norm)
            n_clipped += 1
        for j in range(start, stop):
            row = word_topic_weights[indices[j]]
            weight = scale * weights[j - start]
            for k in range(n_topics):
                statistic_T[indices[j], k] += weight * exp_theta[k] * row[k]
    return n_clipped


@njit(nogil=True, cache=True)
def _document_bound(word_ids, counts, elog_topic_word_T, gamma, alpha):
    """Evidence lower bound ``E_q[log p(w_d, theta_d, z_d | beta)] - E_q[log q(theta_d, z_d)]`` of one document.

    With ``E[log beta]`` plugged in (Hoffman et al. 2010, eq. 3 without the
    corpus-level beta term): the word term is ``sum_v n_dv logsumexp_k(E log
    theta_dk + E log beta_kv)``, computed in log space so noisy topics with
    tiny ``exp(E log beta)`` do not underflow.
    """
    n_topics = gamma.shape[0]
    elog_theta = np.empty(n_topics)
    total = 0.0
    for k in range(n_topics):
        total += gamma[k]
    psi_total = _digamma(total)
    for k in range(n_topics):
        elog_theta[k] = _digamma(gamma[k]) - psi_total
    bound = 0.0
    for j in range(word_ids.shape[0]):
        row = elog_topic_word_T[word_ids[j]]
        peak = -np.inf
        for k in range(n_topics):
            peak = max(peak, elog_theta[k] + row[k])
        mass = 0.0
        for k in range(n_topics):
            mass += math.exp(elog_theta[k] + row[k] - peak)
        bound += counts[j] * (peak + math.log(mass))
    log_gamma_alpha = math.lgamma(alpha)
    for k in range(n_topics):
        bound += (alpha - gamma[k]) * elog_theta[k] + math.lgamma(gamma[k]) - log_gamma_alpha
    return bound + math.lgamma(alpha * n_topics) - math.lgamma(total)


@njit(nogil=True, cache=True, parallel=True)
def _document_bounds(indptr, indices, counts, elog_topic_word_T, gamma, alpha, out):
    """:func:`_document_bound` of every row of a CSR matrix, into ``out``."""
    for d in prange(indptr.shape[0] - 1):
        start, stop = indptr[d], indptr[d + 1]
        out[d] = _document_bound(indices[start:stop], counts[start:stop], elog_topic_word_T, gamma[d], alpha)


# ---------------------------------------------------------------------------
# input checks
# ---------------------------------------------------------------------------


def _is_int(value):
    return isinstance(value, (numbers.Integral, np.integer)) and not isinstance(value, (bool, np.bool_))


def _is_real(value):
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def _as_counts(X, name="X"):
    """A CSR float64 copy of a documents x words count matrix, after checking its values."""
    if sp.issparse(X):
        if X.ndim != 2:
            raise ValueError(f"{name} must be a 2-D documents x words matrix, got shape {X.shape}")
        matrix = sp.csr_matrix(X)
        values = matrix.data
    else:
        if isinstance(X, (str, bytes)) or X is None:
            raise TypeError(
                f"{name} must be a documents x words count matrix (numpy array or scipy.sparse), got {type(X).__name__}"
            )
        array = np.asarray(X)
        if array.ndim != 2:
            raise ValueError(
                f"{name} must be a 2-D documents x words matrix, got shape {array.shape}; "
                "one row per document, one column per word"
            )
        matrix, values = array, array
    if matrix.dtype == np.bool_:
        raise TypeError(f"{name} is boolean: pass word counts, e.g. {name}.astype(np.int64)")
    if not (np.issubdtype(matrix.dtype, np.integer) or np.issubdtype(matrix.dtype, np.floating)):
        raise TypeError(f"{name} must hold numeric word counts, got dtype {matrix.dtype}")
    n_docs, n_words = matrix.shape
    if n_docs == 0 or n_words == 0:
        raise ValueError(f"{name} is empty (shape {matrix.shape}): it needs at least one document and one word")
    if values.size:
        if np.issubdtype(values.dtype, np.floating) and not np.all(np.isfinite(values)):
            raise ValueError(f"{name} contains NaN or infinite values; pass finite word counts")
        if values.min() < 0:
            raise ValueError(
                f"{name} has negative counts (min {values.min()}); word counts must be >= 0 "
                "(central DP noises the statistics, not the data)"
            )
        if np.issubdtype(values.dtype, np.floating) and np.any(values != np.floor(values)):
            bad = values[values != np.floor(values)].flat[0]
            raise ValueError(
                f"{name} has non-integer counts (e.g. {bad}); pass raw word counts (round or re-count them)"
            )
    csr = sp.csr_matrix(matrix, dtype=np.float64, copy=True)
    csr.sum_duplicates()
    csr.eliminate_zeros()
    return csr


def _kernel_arrays(csr):
    return (csr.indptr.astype(np.int64), csr.indices.astype(np.int64), csr.data)


# Below this many (stored word, topic) pairs a batch's E-step runs on one
# thread: starting the thread team costs more than it saves on small batches,
# and far more when other processes load the cores (measured 10x slower for
# 50 documents x 40 words x 4 topics on a loaded 2-core machine).
_PARALLEL_MIN_WORK = 200_000
# Numba's parallel kernels run on one process-wide thread team; its "workqueue" layer
# (what a machine without OpenMP or TBB gets) aborts the process when two threads enter
# it at once. Fits in threads (two dashboard sessions, a grid in threads) take turns.
_PARALLEL_LOCK = threading.Lock()


def _fit_documents(indptr, indices, counts, word_topic_weights, alpha, max_iter, tol, gamma):
    if len(indices) * gamma.shape[1] < _PARALLEL_MIN_WORK:
        _fit_documents_serial(indptr, indices, counts, word_topic_weights, alpha, max_iter, tol, gamma)
        return
    with _PARALLEL_LOCK:
        _fit_documents_parallel(indptr, indices, counts, word_topic_weights, alpha, max_iter, tol, gamma)


# ---------------------------------------------------------------------------
# pure steps of the algorithm
# ---------------------------------------------------------------------------


def _elog_topic_word(components):
    """E[log beta] for beta_k ~ Dirichlet(components[k])."""
    return digamma(components) - digamma(components.sum(axis=1))[:, None]


def _word_scaled_topic_weights(components):
    """(V, K) array ``exp(E log beta_kv - max_k E log beta_kv)``, what the E-step kernels take.

    The E-step uses each word's ``exp(E log beta_kv)`` only through ratios
    across topics (``phi_dvk`` is normalised over ``k``), so dividing a word's
    column by its largest entry changes nothing but keeps noisy topics, whose
    ``exp(E log beta)`` can underflow (``E log beta`` below -745), usable.
    """
    elog = _elog_topic_word(components)
    return np.ascontiguousarray(np.exp(elog - elog.max(axis=0)).T)


def expected_statistics(
    X, components, doc_topic_prior, *, clip_norm=None, max_doc_update_iter=100, mean_change_tol=1e-3
):
    """E-step on documents ``X`` and their summed, per-document clipped statistics.

    For document ``d`` the expected sufficient statistic is the K x V matrix
    ``s_d[k, v] = n_dv phi_dvk`` (``phi_dv`` = the variational topic
    distribution of word ``v``; its entries sum to the document's length).
    Each ``s_d`` is scaled down to Frobenius norm ``clip_norm`` if larger
    (Park et al. 2016, eq. 4, applied per document), and the clipped
    matrices are summed. Since the E-step of one document does not depend on
    the others, adding or removing one document changes the sum by exactly
    its clipped ``s_d``: the L2 sensitivity of the sum is ``clip_norm``.

    Parameters
    ----------
    X : array or scipy.sparse matrix (n_docs, V) of counts
    components : array (K, V) > 0
        Variational Dirichlet parameters ``lambda`` of the topics
        (``PrivateLDA.components_``).
    doc_topic_prior : float > 0
    clip_norm : float > 0 or None
        None: no clipping (non-private SVI).
    max_doc_update_iter, mean_change_tol :
        Stopping rule of the per-document fixed point (scikit-learn's).

    Returns
    -------
    statistic : ndarray (K, V)
    doc_topic : ndarray (n_docs, K)
        The variational Dirichlet parameters ``gamma`` of each document.
    n_clipped : int
        Number of documents whose statistic was scaled down.
    """
    components = np.asarray(components, dtype=np.float64)
    if components.ndim != 2:
        raise ValueError(f"components must be a (K, V) matrix, got shape {components.shape}")
    if not np.all(np.isfinite(components)) or components.min() <= 0:
        raise ValueError("components must be finite and > 0 (Dirichlet parameters of the topics)")
    csr = _as_counts(X)
    if csr.shape[1] != components.shape[1]:
        raise ValueError(
            f"X has {csr.shape[1]} words (columns) but components has "
            f"{components.shape[1]}; both must use the same vocabulary"
        )
    alpha = _check_positive("doc_topic_prior", doc_topic_prior)
    if clip_norm is not None:
        clip_norm = _check_positive("clip_norm", clip_norm, " (or None for no clipping)")
    return _expected_statistics(
        csr,
        _word_scaled_topic_weights(components),
        alpha,
        clip_norm,
        _check_int("max_doc_update_iter", max_doc_update_iter, 1),
        _check_positive("mean_change_tol", mean_change_tol),
    )


def _expected_statistics(csr, word_topic_weights, alpha, clip_norm, max_iter, tol):
    indptr, indices, counts = _kernel_arrays(csr)
    n_words, n_topics = word_topic_weights.shape
    doc_topic = np.ones((csr.shape[0], n_topics))
    _fit_documents(indptr, indices, counts, word_topic_weights, alpha, max_iter, tol, doc_topic)
    statistic_T = np.zeros((n_words, n_topics))
    n_clipped = _accumulate_clipped(
        indptr, indices, counts, word_topic_weights, doc_topic, -1.0 if clip_norm is None else clip_norm, statistic_T
    )
    return statistic_T.T, doc_topic, int(n_clipped)


def noisy_statistics(statistic, noise_std, rng):
    """The Gaussian mechanism on a statistic: ``max(0, statistic + N(0, noise_std**2))`` per entry.

    Negative entries are set to 0 (post-processing, free of privacy cost:
    expected counts cannot be negative). ``noise_std = 0`` returns the
    statistic unchanged and draws nothing.

    Parameters
    ----------
    statistic : array
    noise_std : float >= 0
        ``noise_multiplier * sensitivity``.
    rng : numpy.random.Generator
    """
    statistic = np.asarray(statistic, dtype=np.float64)
    if not _is_real(noise_std) or not np.isfinite(noise_std) or noise_std < 0:
        raise ValueError(f"noise_std must be a finite number >= 0, got {noise_std!r}")
    if noise_std == 0:
        return statistic
    noisy = statistic + noise_std * rng.standard_normal(statistic.shape)
    np.maximum(noisy, 0.0, out=noisy)
    return noisy


# ---------------------------------------------------------------------------
# the estimator
# ---------------------------------------------------------------------------


def _seed_sequence(random_state):
    """The SeedSequence behind PrivateLDA's three streams (see its ``random_state``)."""
    if random_state is None or (_is_int(random_state) and random_state >= 0):
        return np.random.SeedSequence(random_state)
    if isinstance(random_state, np.random.Generator):
        return np.random.SeedSequence(int(random_state.integers(2**63)))
    raise TypeError(f"random_state must be None, an integer >= 0 or a numpy Generator, got {random_state!r}")


class PrivateLDA:
    """Latent Dirichlet allocation by online variational Bayes with central DP (VIPS).

    Online LDA (Hoffman et al. 2010) in which each minibatch's expected
    sufficient statistics are clipped per document and noised with the
    Gaussian mechanism (Park et al. 2016), accounted with ``dp-accounting``.

    Algorithm (step ``t = 1 .. n_steps``):

    1. **Poisson minibatch**: every document joins independently with
       probability ``q = batch_size / n_documents`` (the sampling the
       accountant assumes; the batch size is random with mean ``batch_size``).
    2. **E-step** on the batch given ``E[log beta]`` of the current
       ``lambda`` (per-document fixed point, as scikit-learn's
       ``_update_doc_distribution``, ``gamma`` started at 1).
    3. **Clip**: document ``d``'s statistic ``s_d[k, v] = n_dv phi_dvk`` is
       scaled to Frobenius norm at most ``Delta = clip * doc_length``.
    4. **Noise**: ``S = sum_d clipped s_d`` gets ``N(0, sigma**2 Delta**2)``
       on every one of its K x V entries; negatives are set to 0.
    5. **M-step**: ``lambda <- (1 - rho_t) lambda + rho_t (eta + S / q)``,
       ``rho_t = (learning_offset + t) ** -learning_decay``. Dividing by
       ``q`` (i.e. ``n_documents / batch_size``, the *expected* batch size)
       and not by the actual batch size keeps the data-dependent count out
       of the release.

    Sensitivity. Adding or removing one document changes ``S`` by that
    document's clipped ``s_d`` only (the E-step of one document does not
    depend on the others given ``lambda``), whose Frobenius norm is at most
    ``Delta = clip * doc_length`` by construction; so the L2 sensitivity of
    ``S`` under add/remove-one neighbours is ``Delta``, and step 4 is the
    Gaussian mechanism with noise multiplier ``sigma``. This is Park et al.'s
    bound made per document: ``||s_d||_F <= ||s_d||_1 = N_d`` (the entries
    are non-negative and sum to the document's length ``N_d``), so for
    documents of at most ``doc_length = N`` tokens the worst case is ``N``
    (all tokens one word, one topic) and ``clip = a`` in (0, 1] is the
    paper's fraction ``a`` of it (they clip to ``a N / S`` after dividing by
    the batch size ``S``; the noise in the paper's update is then the same).
    Documents are not truncated or resampled: longer ones are just clipped
    harder. Post-processing (``S / q``, the M-step, ``transform``) is free.

    Accounting. ``n_steps = n_epochs * ceil(n_documents / batch_size)``
    releases of ``PoissonSampledDpEvent(q, GaussianDpEvent(sigma))``,
    composed by :func:`lpviz.accounting.epsilon`. Given ``epsilon``, ``sigma``
    is the smallest that spends at most ``epsilon`` over those ``n_steps``
    (:func:`lpviz.accounting.noise_multiplier`); given ``noise_multiplier``,
    ``epsilon_`` reports what it spends. ``n_documents`` is treated as
    public, as in the paper.

    What is covered: ``components_`` and anything computed from it.
    ``trace_`` (actual batch sizes, clip counts, timings) is the curator's
    diagnostics and is not. The noise is numpy's floating-point Gaussian:
    fine for research, not hardened against floating-point attacks
    (Mironov 2012).

    Parameters
    ----------
    n_components : int >= 1
        Number of topics ``K``.
    noise_multiplier : float >= 0, optional
        ``sigma``: noise std in units of the sensitivity. 0 = non-private
        SVI (``epsilon_ = inf``). Give exactly one of ``noise_multiplier``
        and ``epsilon``.
    epsilon : float > 0, optional
        Privacy budget for the whole fit; ``sigma`` is calibrated to it.
    delta : float in (0, 1)
        The delta of the guarantee. Default 1e-5.
    batch_size : int >= 1
        Expected minibatch size ``S`` (at most ``n_documents``). Default 128
        (scikit-learn's); private fits need far larger batches for the
        signal to beat the noise (the paper used 5,000 to 20,000).
    n_epochs : int >= 1
        Expected passes over the corpus. Default 1.
    clip : float in (0, 1] or None
        Fraction ``a`` of the worst-case sensitivity ``doc_length`` each
        document's statistic is clipped to. Default 0.1 (the paper's). None
        = no clipping, only allowed with ``noise_multiplier=0`` (plain
        online LDA); ``noise_multiplier=0`` with a ``clip`` isolates the
        effect of clipping.
    doc_length : float > 0
        ``N``, the document length the worst case is stated for, so
        ``Delta = clip * doc_length``. Default 500 (the paper's). Must not
        be chosen from the private data.
    learning_offset : float >= 0
        ``tau_0``. Default 10.
    learning_decay : float in (0.5, 1]
        ``kappa``. Default 0.7.
    doc_topic_prior, topic_word_prior : float > 0, optional
        ``alpha`` and ``eta``; None means ``1 / n_components`` (as
        scikit-learn).
    max_doc_update_iter : int >= 1
        Cap on per-document fixed-point sweeps. Default 100.
    mean_change_tol : float > 0
        Per-document stopping tolerance on the mean change of ``gamma``.
        Default 1e-3.
    accountant : {"pld", "rdp"}
        Default "pld".
    random_state : None, int or numpy Generator
        Seeds ``numpy.random.SeedSequence(random_state)``, spawned into three
        streams used in this order: the initial ``lambda``
        (``Gamma(100, 1/100)`` per entry, as Hoffman's code and
        scikit-learn), the batches (``n_documents`` uniforms per step; a
        document is in the batch if its uniform is ``< q``), and the noise
        (``K * V`` standard normals per step, when ``sigma > 0``).

    Attributes
    ----------
    components_ : ndarray (K, V)
        Variational Dirichlet parameters ``lambda`` of the topics;
        normalise the rows for topic-word distributions.
    exp_dirichlet_component_ : ndarray (K, V)
        ``exp(E[log beta])``.
    noise_multiplier_ : float
        ``sigma`` used (given or calibrated).
    sensitivity_ : float
        ``Delta = clip * doc_length`` (inf when ``clip`` is None).
    noise_std_ : float
        ``sigma * Delta``, the per-entry noise standard deviation of ``S``.
    sampling_rate_ : float
        ``q``.
    n_steps_ : int
    epsilon_, delta_ : float
        The guarantee spent: (``epsilon_``, ``delta_``)-DP per document.
    trace_ : pandas.DataFrame
        One row per step: ``step``, ``n_documents`` (in the batch),
        ``n_clipped``, ``rho``, ``noise_std``, ``epsilon`` (spent after
        that step), ``seconds`` (wall time of the step).
    n_features_in_ : int
    doc_topic_prior_, topic_word_prior_ : float

    Examples
    --------
    >>> model = PrivateLDA(10, epsilon=1.0, batch_size=2000).fit(X)  # doctest: +SKIP
    >>> model.epsilon_, model.noise_multiplier_                       # doctest: +SKIP
    """

    def __init__(
        self,
        n_components,
        *,
        noise_multiplier=None,
        epsilon=None,
        delta=1e-5,
        batch_size=128,
        n_epochs=1,
        clip=0.1,
        doc_length=500,
        learning_offset=10.0,
        learning_decay=0.7,
        doc_topic_prior=None,
        topic_word_prior=None,
        max_doc_update_iter=100,
        mean_change_tol=1e-3,
        accountant="pld",
        random_state=None,
    ):
        self.n_components = n_components
        self.noise_multiplier = noise_multiplier
        self.epsilon = epsilon
        self.delta = delta
        self.batch_size = batch_size
        self.n_epochs = n_epochs
        self.clip = clip
        self.doc_length = doc_length
        self.learning_offset = learning_offset
        self.learning_decay = learning_decay
        self.doc_topic_prior = doc_topic_prior
        self.topic_word_prior = topic_word_prior
        self.max_doc_update_iter = max_doc_update_iter
        self.mean_change_tol = mean_change_tol
        self.accountant = accountant
        self.random_state = random_state

    def __repr__(self):
        budget = (
            f"epsilon={self.epsilon!r}"
            if self.noise_multiplier is None
            else f"noise_multiplier={self.noise_multiplier!r}"
        )
        return (
            f"PrivateLDA({self.n_components!r}, {budget}, delta={self.delta!r}, "
            f"batch_size={self.batch_size!r}, n_epochs={self.n_epochs!r}, clip={self.clip!r})"
        )

    # -- parameter checks -------------------------------------------------

    def _checked_parameters(self):
        """Every constructor parameter that does not depend on the data, checked."""
        n_topics = _check_int("n_components", self.n_components, 1)
        if (self.noise_multiplier is None) == (self.epsilon is None):
            raise ValueError(
                "give exactly one of noise_multiplier (noise std / sensitivity; 0 = no "
                "privacy) and epsilon (the budget to calibrate the noise to), got "
                f"noise_multiplier={self.noise_multiplier!r}, epsilon={self.epsilon!r}"
            )
        if self.noise_multiplier is not None:
            accounting._check_noise_multiplier(self.noise_multiplier)
        else:
            accounting._check_epsilon(self.epsilon)
        accounting._check_delta(self.delta)
        accounting._check_accountant(self.accountant)
        _check_int("batch_size", self.batch_size, 1)
        _check_int("n_epochs", self.n_epochs, 1)
        if self.clip is None:
            if self.noise_multiplier != 0:
                raise ValueError(
                    "clip=None (no clipping) leaves the sensitivity unbounded, so it is only "
                    "allowed with noise_multiplier=0; give clip in (0, 1] for a private fit"
                )
        elif not _is_real(self.clip) or not 0 < self.clip <= 1:
            raise ValueError(
                f"clip must be a fraction in (0, 1] of the worst-case sensitivity doc_length "
                f"(or None with noise_multiplier=0), got {self.clip!r}"
            )
        _check_positive("doc_length", self.doc_length, " (the document length the sensitivity is stated for)")
        if not _is_real(self.learning_offset) or not np.isfinite(self.learning_offset) or self.learning_offset < 0:
            raise ValueError(f"learning_offset must be a finite number >= 0, got {self.learning_offset!r}")
        if not _is_real(self.learning_decay) or not 0.5 < self.learning_decay <= 1:
            raise ValueError(
                f"learning_decay must be in (0.5, 1] (Hoffman et al.'s convergence "
                f"condition), got {self.learning_decay!r}"
            )
        alpha = (
            1.0 / n_topics
            if self.doc_topic_prior is None
            else _check_positive("doc_topic_prior", self.doc_topic_prior, " (or None for 1 / n_components)")
        )
        eta = (
            1.0 / n_topics
            if self.topic_word_prior is None
            else _check_positive("topic_word_prior", self.topic_word_prior, " (or None for 1 / n_components)")
        )
        _check_int("max_doc_update_iter", self.max_doc_update_iter, 1)
        _check_positive("mean_change_tol", self.mean_change_tol)
        seeds = _seed_sequence(self.random_state)
        return n_topics, alpha, eta, seeds

    # -- fitting ----------------------------------------------------------

    def fit(self, X, y=None, *, callback=None):
        """Fit the topics to the documents x words count matrix ``X`` (dense or scipy.sparse).

        Parameters
        ----------
        X : array or scipy.sparse (n_documents, n_words) of counts
        y : ignored
        callback : callable, optional
            ``callback(step, n_steps)``: called once the noise is calibrated
            (``step = 0``) and after every step, e.g. to show progress. An
            exception it raises aborts the fit and propagates (how a caller
            cancels a fit running in another thread); the estimator is then
            left as it was before the call.

        Returns
        -------
        self
        """
        if callback is not None and not callable(callback):
            raise TypeError(f"callback must be a function callback(step, n_steps) or None, got {callback!r}")
        n_topics, alpha, eta, seeds = self._checked_parameters()
        csr = _as_counts(X)
        n_docs, n_words = csr.shape
        if self.batch_size > n_docs:
            raise ValueError(
                f"batch_size={self.batch_size} exceeds the number of documents ({n_docs}); "
                f"use batch_size <= {n_docs} (batch_size={n_docs} samples every document "
                "each step, with no amplification by subsampling)"
            )
        if csr.nnz == 0:
            raise ValueError("X has no words (all counts are 0): there is nothing to fit")
        q = self.batch_size / n_docs
        n_steps = self.n_epochs * math.ceil(n_docs / self.batch_size)
        if self.noise_multiplier is not None:
            sigma = float(self.noise_multiplier)
        else:
            sigma = accounting.noise_multiplier(self.epsilon, self.delta, q, n_steps, self.accountant)
        sensitivity = np.inf if self.clip is None else float(self.clip) * float(self.doc_length)
        noise_std = 0.0 if sigma == 0 else sigma * sensitivity
        clip_norm = None if self.clip is None else sensitivity

        if callback is not None:
            callback(0, n_steps)
        init_rng, batch_rng, noise_rng = (np.random.default_rng(s) for s in seeds.spawn(3))
        components = init_rng.gamma(100.0, 0.01, (n_topics, n_words))
        rows = []
        for step in range(1, n_steps + 1):
            started = time.perf_counter()
            batch = np.flatnonzero(batch_rng.random(n_docs) < q)
            statistic, _, n_clipped = _expected_statistics(
                csr[batch],
                _word_scaled_topic_weights(components),
                alpha,
                clip_norm,
                self.max_doc_update_iter,
                self.mean_change_tol,
            )
            statistic = noisy_statistics(statistic, noise_std, noise_rng)
            rho = (self.learning_offset + step) ** -self.learning_decay
            components *= 1.0 - rho
            components += rho * (eta + statistic / q)
            rows.append((step, len(batch), n_clipped, rho, noise_std, time.perf_counter() - started))
            if callback is not None:
                callback(step, n_steps)

        self.components_ = components
        self.exp_dirichlet_component_ = np.exp(_elog_topic_word(components))
        self.n_features_in_ = n_words
        self.doc_topic_prior_ = alpha
        self.topic_word_prior_ = eta
        self.noise_multiplier_ = sigma
        self.sensitivity_ = sensitivity
        self.noise_std_ = noise_std
        self.sampling_rate_ = q
        self.n_steps_ = n_steps
        self.delta_ = float(self.delta)
        epsilons = accounting.epsilon(q, sigma, np.arange(1, n_steps + 1), self.delta, self.accountant)
        self.epsilon_ = float(epsilons[-1])
        self.trace_ = pd.DataFrame(rows, columns=["step", "n_documents", "n_clipped", "rho", "noise_std", "seconds"])
        self.trace_.insert(5, "epsilon", epsilons)
        return self

    # -- using the fitted topics -----------------------------------------

    def _checked_input(self, X):
        if not hasattr(self, "components_"):
            raise ValueError("this PrivateLDA is not fitted yet: call fit(X) first")
        csr = _as_counts(X)
        if csr.shape[1] != self.n_features_in_:
            raise ValueError(
                f"X has {csr.shape[1]} words (columns) but the model was fitted on "
                f"{self.n_features_in_}; use the same vocabulary"
            )
        return csr

    def _doc_topic(self, csr):
        indptr, indices, counts = _kernel_arrays(csr)
        doc_topic = np.ones((csr.shape[0], self.n_components))
        _fit_documents(
            indptr,
            indices,
            counts,
            _word_scaled_topic_weights(self.components_),
            self.doc_topic_prior_,
            self.max_doc_update_iter,
            self.mean_change_tol,
            doc_topic,
        )
        return doc_topic

    def transform(self, X):
        """Topic proportions of each document (rows sum to 1): the normalised ``gamma``.

        Uses only the released topics, so it costs no privacy.
        """
        doc_topic = self._doc_topic(self._checked_input(X))
        return doc_topic / doc_topic.sum(axis=1, keepdims=True)

    def perplexity(self, X):
        """Per-word perplexity bound on documents ``X`` (e.g. held out).

        ``exp(-sum_d ELBO_d / sum_d N_d)`` with the per-document evidence
        lower bound ``E_q[log p(w_d, theta_d, z_d | beta)] - E_q[log q(theta_d,
        z_d)]`` at ``E[log beta]`` of the fitted topics (Hoffman et al. 2010;
        Park et al. 2016, section 5). Unlike scikit-learn's ``perplexity``
        it leaves out the corpus-level ``E[log p(beta) - log q(beta)]`` term,
        which does not belong to the held-out documents. Lower is better.
        """
        csr = self._checked_input(X)
        n_tokens = csr.sum()
        if n_tokens == 0:
            raise ValueError("X has no words (all counts are 0): perplexity is per word, so it needs some")
        doc_topic = self._doc_topic(csr)
        elog_topic_word_T = np.ascontiguousarray(_elog_topic_word(self.components_).T)
        bounds = np.empty(csr.shape[0])
        indptr, indices, counts = _kernel_arrays(csr)
        with _PARALLEL_LOCK:
            _document_bounds(indptr, indices, counts, elog_topic_word_T, doc_topic, self.doc_topic_prior_, bounds)
        return float(np.exp(-bounds.sum() / n_tokens))


def epsilon_spent(model, accountant):
    """The epsilon a fitted :class:`PrivateLDA` spent at its ``delta_``, under ``accountant``.

    The same composition as ``model.epsilon_`` (its ``n_steps_`` releases at
    sampling rate ``sampling_rate_`` and noise multiplier
    ``noise_multiplier_``), asked of ``"rdp"`` or ``"pld"`` whichever the
    model was calibrated with; ``inf`` for a non-private fit
    (``noise_multiplier_ = 0``).
    """
    if not hasattr(model, "components_"):
        raise ValueError("this PrivateLDA is not fitted yet: call fit(X) first")
    accounting._check_accountant(accountant)
    if accountant == model.accountant:
        return float(model.epsilon_)
    if model.noise_multiplier_ == 0:
        return math.inf
    return float(
        accounting.epsilon(model.sampling_rate_, model.noise_multiplier_, model.n_steps_, model.delta_, accountant)
    )


def posterior(model, X):
    """A fitted :class:`PrivateLDA` as a :class:`~lpviz.engine.Posterior` of the topic model,
    so that :func:`lpviz.metrics.score` measures it like every other fit.

    LDA's topics are distributions and its documents proportions; the Poisson
    rates they imply are ``mu_dv = n_d sum_k theta_dk phi_kv`` with ``n_d`` the
    document's length (known to the curator). The posterior holds that one
    point (``theta = n_d * proportions``, ``phi`` = normalised topics).
    """
    from lpviz.engine import Posterior
    from lpviz.models import create

    csr = model._checked_input(X)
    lengths = np.asarray(csr.sum(axis=1)).ravel().astype(float)
    theta = model.transform(csr) * lengths[:, None]
    phi = model.components_ / model.components_.sum(axis=1, keepdims=True)
    fit = Posterior(create("topics", model.n_components), "central", csr.shape, burn_in=0, thin=1)
    fit.method_label = "central DP (private online LDA)"
    fit.add_sample({"theta": theta, "phi": phi}, model.n_steps_, np.nan)
    return fit
