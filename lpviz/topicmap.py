"""A topic map in the spirit of LDAvis (Sievert & Shirley 2014), from a fitted topic model.

- :func:`expected_word_counts`: the expected number of tokens of each word
  each topic accounts for. For the Poisson topic model ``mu = theta @ phi``,
  topic ``k`` contributes ``theta[:, k].sum() * phi[k, v]`` tokens of word ``v``.
  Everything below is read from this one matrix: :func:`topic_sizes` (each
  topic's share of the tokens), :func:`word_frequency` (the model's marginal
  word distribution) and the topics as word distributions. They come from
  the fitted factors, never from the counts: the true counts are private.
- :func:`jensen_shannon_distances` between topics and :func:`classical_mds`
  (Torgerson) to place them in two dimensions.
- :func:`relevance` and :func:`top_words_by_relevance`:
  ``lambda * log phi_kw + (1 - lambda) * log(phi_kw / p_w)``.
- :func:`align_to_reference` and :func:`aligned_partners`: which topic of
  each method matches a given topic of another, through one reference
  method (the Hungarian matching of :func:`lpviz.metrics.align_topics`).
- :func:`topic_map`: all of it for one fit, as a :class:`TopicMap`.
"""

from dataclasses import dataclass

import numpy as np
from scipy.spatial.distance import pdist, squareform

from lpviz.alignment import align_topics

__all__ = [
    "DEFAULT_LAMBDA",
    "TopicMap",
    "align_to_reference",
    "aligned_partners",
    "classical_mds",
    "expected_word_counts",
    "jensen_shannon_distances",
    "relevance",
    "top_words_by_relevance",
    "topic_map",
    "topic_sizes",
    "word_distributions",
    "word_frequency",
]

# Sievert & Shirley's user study found lambda = 0.6 best for interpreting topics.
DEFAULT_LAMBDA = 0.6


def _nonnegative_matrix(name, values):
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 2:
        raise ValueError(f"{name} must be a 2-D matrix, got an array of shape {array.shape}")
    if array.size and (not np.all(np.isfinite(array)) or array.min() < 0):
        raise ValueError(f"{name} must be finite and non-negative")
    return array


def word_distributions(topics):
    """Rows of ``topics`` (K x V, any non-negative scale) as distributions over words.

    Raises ValueError for a topic with no weight at all (it has no distribution).
    """
    topics = _nonnegative_matrix("topics", topics)
    totals = topics.sum(axis=1, keepdims=True)
    if np.any(totals <= 0):
        empty = np.flatnonzero(totals[:, 0] <= 0).tolist()
        raise ValueError(f"topics {empty} have all-zero weights: they are no distribution over words")
    return topics / totals


def expected_word_counts(memberships, topics):
    """Expected tokens of each word due to each topic, ``theta[:, k].sum() * phi[k, v]`` (K x V).

    Parameters
    ----------
    memberships : array (n_documents, K)
        The fitted ``theta`` (the model's ``memberships(factors)``).
    topics : array (K, V)
        The fitted ``phi`` (the model's ``topics(factors)``), unnormalised.
    """
    memberships = _nonnegative_matrix("memberships", memberships)
    topics = _nonnegative_matrix("topics", topics)
    if memberships.shape[1] != topics.shape[0]:
        raise ValueError(
            f"memberships have {memberships.shape[1]} topics (columns) but topics have "
            f"{topics.shape[0]} (rows): pass theta (documents x topics) and phi (topics x words) "
            "of the same fit"
        )
    return memberships.sum(axis=0)[:, None] * topics


def _total(counts):
    total = counts.sum()
    if not total > 0:
        raise ValueError("the fit accounts for no tokens at all (every expected count is 0)")
    return total


def topic_sizes(memberships, topics):
    """Each topic's share of the expected tokens, ``sum_d theta_dk * sum_v phi_kv`` normalised to sum to 1."""
    counts = expected_word_counts(memberships, topics)
    return counts.sum(axis=1) / _total(counts)


def word_frequency(memberships, topics):
    """The model's marginal word distribution ``p_w`` (expected tokens of each word, normalised)."""
    counts = expected_word_counts(memberships, topics)
    return counts.sum(axis=0) / _total(counts)


def jensen_shannon_distances(topics):
    """Jensen-Shannon distance between every pair of topics (K x K).

    The distance is the square root of the Jensen-Shannon divergence in bits
    (log base 2), so it is a metric bounded by 1 (topics on disjoint words);
    it is ``scipy.spatial.distance.jensenshannon(p, q, base=2)`` for every
    pair, computed by :func:`scipy.spatial.distance.pdist`. Rows of ``topics``
    are normalised first.
    """
    p = word_distributions(topics)
    # scipy's pdist takes no base for this metric: natural-log distances, then to bits (the divergence
    # scales by 1 / ln 2, its square root by 1 / sqrt(ln 2)); rounding can step just outside [0, 1]
    distances = squareform(pdist(p, "jensenshannon")) / np.sqrt(np.log(2.0))
    return np.clip(distances, 0.0, 1.0)


def classical_mds(distances, n_components=2):
    """Classical (Torgerson) multidimensional scaling of a distance matrix.

    Double-centres the squared distances, ``B = -J D^2 J / 2``, and returns
    the top ``n_components`` eigenvectors scaled by the square roots of their
    eigenvalues (negative eigenvalues, from non-Euclidean distances, count as
    0). Each axis's sign is fixed so that its largest-magnitude coordinate is
    positive, so equal input gives equal output.

    Returns
    -------
    array (n_points, n_components)
        Exact Euclidean distances are reproduced up to rotation and reflection.
    """
    distances = np.asarray(distances, dtype=np.float64)
    if distances.ndim != 2 or distances.shape[0] != distances.shape[1]:
        raise ValueError(f"distances must be a square matrix, got shape {distances.shape}")
    if not np.all(np.isfinite(distances)) or (distances.size and distances.min() < 0):
        raise ValueError("distances must be finite and non-negative")
    if not np.allclose(distances, distances.T, rtol=1e-9, atol=1e-12):
        raise ValueError("distances must be symmetric")
    if isinstance(n_components, bool) or not isinstance(n_components, (int, np.integer)) or n_components < 1:
        raise ValueError(f"n_components must be a positive integer, got {n_components!r}")
    n = distances.shape[0]
    centring = np.eye(n) - np.full((n, n), 1.0 / n)
    inner = -0.5 * centring @ (distances**2) @ centring
    eigenvalues, eigenvectors = np.linalg.eigh((inner + inner.T) / 2)
    order = np.argsort(-eigenvalues, kind="stable")[:n_components]
    coordinates = np.zeros((n, n_components))
    kept = eigenvectors[:, order] * np.sqrt(np.clip(eigenvalues[order], 0.0, None))
    signs = np.sign(kept[np.argmax(np.abs(kept), axis=0), np.arange(kept.shape[1])])
    coordinates[:, : kept.shape[1]] = kept * np.where(signs == 0, 1.0, signs)
    return coordinates


def _check_lambda(lambda_):
    if (
        isinstance(lambda_, bool)
        or not isinstance(lambda_, (int, float, np.integer, np.floating))
        or not 0.0 <= float(lambda_) <= 1.0
    ):
        raise ValueError(f"lambda_ must be a number between 0 and 1, got {lambda_!r}")
    return float(lambda_)


def relevance(topics, word_frequency, lambda_=DEFAULT_LAMBDA):
    """Relevance of each word to each topic (Sievert & Shirley 2014), K x V.

    ``lambda_ * log(phi_kw) + (1 - lambda_) * log(phi_kw / p_w)``: at
    ``lambda_ = 1`` the words' probability in the topic, at ``lambda_ = 0``
    their lift (how much more likely in the topic than overall). Rows of
    ``topics`` are normalised first; a word with ``phi_kw = 0`` has relevance
    ``-inf`` (it is never relevant to that topic).

    Parameters
    ----------
    topics : array (K, V)
    word_frequency : array (V,)
        The marginal word distribution ``p_w`` (normalised here); every word a
        topic uses must have ``p_w > 0``.
    lambda_ : float in [0, 1]
    """
    lambda_ = _check_lambda(lambda_)
    phi = word_distributions(topics)
    p = np.asarray(word_frequency, dtype=np.float64)
    if p.shape != (phi.shape[1],):
        raise ValueError(f"word_frequency must have one entry per word ({phi.shape[1]}), got shape {p.shape}")
    if not np.all(np.isfinite(p)) or p.min(initial=0) < 0 or not p.sum() > 0:
        raise ValueError("word_frequency must be finite, non-negative and not all zero")
    p = p / p.sum()
    used = phi > 0
    if np.any(used & (p[None, :] <= 0)):
        raise ValueError(
            "word_frequency is 0 for a word a topic uses: p_w must cover every topic's words "
            "(take it from the same fit, e.g. lpviz.topicmap.word_frequency)"
        )
    with np.errstate(divide="ignore", invalid="ignore"):
        log_phi = np.where(used, np.log(phi), -np.inf)
        lift = np.where(used, log_phi - np.log(np.where(p > 0, p, 1.0))[None, :], -np.inf)
    if lambda_ == 1.0:
        return log_phi
    if lambda_ == 0.0:
        return lift
    return lambda_ * log_phi + (1 - lambda_) * lift


def top_words_by_relevance(topics, word_frequency, lambda_=DEFAULT_LAMBDA, n=15):
    """The ``n`` most relevant words of each topic, most relevant first (int array K x n).

    Ties keep the lower word index first; ``n`` is capped at the number of words.
    """
    scores = relevance(topics, word_frequency, lambda_)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    return np.argsort(-scores, axis=1, kind="stable")[:, : min(n, scores.shape[1])]


def align_to_reference(topics_by_method, reference):
    """Each method's topics matched to the topics of ``reference`` (Hungarian on L1 distance).

    Returns ``{method: permutation}`` with ``topics_by_method[method][permutation[j]]``
    the topic matched to topic ``j`` of the reference (the reference's own is the identity).
    """
    if reference not in topics_by_method:
        raise ValueError(f"reference {reference!r} is not one of the methods {list(topics_by_method)}")
    reference_topics = topics_by_method[reference]
    return {
        method: (np.arange(len(reference_topics)) if method == reference else align_topics(topics, reference_topics))
        for method, topics in topics_by_method.items()
    }


def aligned_partners(alignment, method, topic):
    """The topic of every method matched to topic ``topic`` of ``method``, through the reference.

    Parameters
    ----------
    alignment : dict
        ``{method: permutation}`` from :func:`align_to_reference` (computed once; a click
        then costs a look-up, not a matching).
    method : str
    topic : int
        An index into ``method``'s topics.

    Returns
    -------
    dict ``{method: topic index}``; a topic the reference has no match for (its method has
    more topics than the reference) has no partners: ``{method: topic}`` only.
    """
    if method not in alignment:
        raise ValueError(f"method {method!r} is not one of {list(alignment)}")
    if isinstance(topic, bool) or not isinstance(topic, (int, np.integer)) or topic < 0:
        raise ValueError(f"topic must be a non-negative index, got {topic!r}")
    matched = np.flatnonzero(np.asarray(alignment[method]) == topic)
    if not matched.size:
        return {method: int(topic)}
    return {name: int(permutation[matched[0]]) for name, permutation in alignment.items()}


@dataclass(frozen=True)
class TopicMap:
    """One fit's topic map: everything is indexed by topic in the order of the factors.

    Attributes
    ----------
    coordinates : array (K, 2)
        Classical MDS of the Jensen-Shannon distances.
    sizes : array (K,)
        Each topic's share of the expected tokens (sums to 1).
    distributions : array (K, V)
        Each topic's distribution over words.
    word_frequency : array (V,)
        The model's marginal word distribution.
    word_counts : array (K, V)
        Expected tokens of each word due to each topic.
    distances : array (K, K)
        The Jensen-Shannon distances.
    """

    coordinates: np.ndarray
    sizes: np.ndarray
    distributions: np.ndarray
    word_frequency: np.ndarray
    word_counts: np.ndarray
    distances: np.ndarray

    def top_words(self, topic, lambda_=DEFAULT_LAMBDA, n=15):
        """The ``n`` most relevant words of ``topic`` (indices), most relevant first."""
        if isinstance(topic, bool) or not isinstance(topic, (int, np.integer)) or not 0 <= topic < len(self.sizes):
            raise ValueError(f"topic must be an index between 0 and {len(self.sizes) - 1}, got {topic!r}")
        return top_words_by_relevance(self.distributions[topic : topic + 1], self.word_frequency, lambda_, n)[0]


def topic_map(memberships, topics):
    """The :class:`TopicMap` of a fit with ``theta`` = ``memberships`` and ``phi`` = ``topics``."""
    counts = expected_word_counts(memberships, topics)
    total = _total(counts)
    distributions = word_distributions(topics)
    distances = jensen_shannon_distances(distributions)
    return TopicMap(
        coordinates=classical_mds(distances),
        sizes=counts.sum(axis=1) / total,
        distributions=distributions,
        word_frequency=counts.sum(axis=0) / total,
        word_counts=counts,
        distances=distances,
    )
