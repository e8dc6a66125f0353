"""Synthetic count data with a known truth: the paper's Figure 3 and Figure 1, and an LDA corpus.

- :func:`make_topics` (Figure 3, topic recovery): D=90 documents, V=15 words,
  K=3 well-separated topics, documents in three groups of thirty, each
  document noised with its own ``alpha_d ~ Beta(c alpha0, c (1 - alpha0))``.
- :func:`make_blocks` (Figure 1, block recovery): V=20 actors, C=5
  communities, ``theta, pi ~ Gamma``, ``N`` = the empirical mean count,
  ``alpha = exp(-epsilon / N)``, no self loops.
- :func:`lda_corpus` (the VIPS comparison's synthetic corpus): LDA with a
  Poisson document length and known topics, no noised copy.
- :func:`make_tensor` (the tensor model): sender x recipient x month counts
  from a CP model whose components are groups of actors active in a burst of
  months, no self loops.

All four return :class:`~lpviz.datasets.SyntheticData` holding the true counts
``Y``, (all but lda_corpus) one noised copy ``Y_obs``, the noise level ``alpha``, the true rates
``mu`` and factors, all drawn from one seeded generator.
"""

import numpy as np

from .._validate import check_int as _check_int
from .._validate import check_positive as _check_positive
from ..privacy import alpha_from, heterogeneous_alpha, privatize
from ._types import SyntheticData

__all__ = ["make_topics", "make_blocks", "lda_corpus", "make_tensor"]


def _check_size(*shape):
    """The generator holds the rates, the counts and the noised copy densely (about five
    8-byte arrays with noising): refuse sizes that do not fit before drawing anything."""
    from lpviz.budget import check_memory, dense_bytes

    check_memory(
        5 * dense_bytes(shape, np.float64),
        f"a synthetic {' x '.join(f'{n:,}' for n in shape)} data set",
        fix="Choose fewer rows or columns.",
    )


def make_topics(
    n_docs=90,
    n_words=15,
    n_topics=3,
    alpha0=0.8,
    concentration=10,
    doc_length=50.0,
    topic_purity=0.9,
    random_state=None,
):
    """The synthetic topic-recovery data of Figure 3 (Schein et al. 2019).

    The paper: "We set Phi* so that the topics were well separated, with
    each putting the majority of its mass on five different word types. We
    also ensured that the documents were well separated into three equal
    groups of thirty, with each document putting the majority of its mass
    on a different topic." It gives no magnitudes; this generator uses:

    - ``phi[k]``: the words are split into ``n_topics`` equal blocks (5 of
      15); topic ``k`` puts ``topic_purity`` (0.9) of its mass evenly on its
      own block and the rest evenly on the other words. Rows sum to one.
    - ``theta[d]``: documents are split into ``n_topics`` equal groups (30 of
      90); a document of group ``g`` takes 80% of its rate from topic ``g``
      and the rest evenly from the others (so every document is ensured to
      put the majority on its own topic), times its own length drawn
      Gamma(shape 10, mean ``doc_length``).
    - ``y[d, v] ~ Pois(mu[d, v])``, ``mu = theta @ phi``.
    - ``alpha_d ~ Beta(c alpha0, c (1 - alpha0))`` per document
      (:func:`lpviz.privacy.heterogeneous_alpha`), then
      ``Y_obs = Y + tau``, ``tau[d, v] ~ 2Geo(alpha_d)``.

    The paper shows "a small and a large" ``alpha0`` without values; the
    default ``alpha0=0.8`` is the large one (noise standard deviation
    ``sqrt(2 alpha) / (1 - alpha)`` of about 6 against topic-word rates of
    about 7), where the naive fit fails; ``alpha0=0.2`` is a small one.

    Parameters
    ----------
    n_docs, n_words, n_topics : int
        ``n_docs`` and ``n_words`` must be at least ``n_topics``.
    alpha0 : float in (0, 1)
        Mean per-document noise level.
    concentration : float
        Beta concentration ``c`` of the per-document noise levels.
    doc_length : float
        Expected number of tokens per document.
    topic_purity : float in (0, 1]
        Share of each topic's mass on its own block of words.
    random_state : None, int or numpy.random.Generator

    Returns
    -------
    SyntheticData
        ``model="topics"``, ``Y``/``Y_obs`` int64 (n_docs, n_words), ``alpha``
        (n_docs,), ``mu``, ``factors={"theta": (D, K), "phi": (K, V)}`` and
        ``info["groups"]``: the dominant topic of each document.
    """
    n_topics = _check_int("n_topics", n_topics, 1)
    n_docs = _check_int("n_docs", n_docs, n_topics)
    n_words = _check_int("n_words", n_words, n_topics)
    doc_length = _check_positive("doc_length", doc_length)
    topic_purity = _check_positive("topic_purity", topic_purity)
    if topic_purity > 1:
        raise ValueError(f"topic_purity is a share of mass, in (0, 1], got {topic_purity}")
    _check_size(n_docs, n_words)
    rng = np.random.default_rng(random_state)

    word_block = np.concatenate(
        [np.full(len(block), k) for k, block in enumerate(np.array_split(np.arange(n_words), n_topics))]
    )
    phi = np.empty((n_topics, n_words))
    for k in range(n_topics):
        own = word_block == k
        phi[k, own] = topic_purity / own.sum()
        if (~own).any():
            phi[k, ~own] = (1.0 - topic_purity) / (~own).sum()
        else:  # a single topic owns every word
            phi[k] = 1.0 / n_words

    groups = np.concatenate(
        [np.full(len(block), k) for k, block in enumerate(np.array_split(np.arange(n_docs), n_topics))]
    )
    dominant_share = 0.8 if n_topics > 1 else 1.0
    shares = np.full((n_docs, n_topics), (1.0 - dominant_share) / max(n_topics - 1, 1))
    shares[np.arange(n_docs), groups] = dominant_share
    length_shape = 10.0
    lengths = rng.gamma(length_shape, doc_length / length_shape, size=n_docs)
    theta = lengths[:, None] * shares

    mu = theta @ phi
    Y = rng.poisson(mu).astype(np.int64)
    alpha = heterogeneous_alpha(n_docs, alpha0, concentration, random_state=rng)
    Y_obs = privatize(Y, alpha=alpha, random_state=rng).Y_obs

    return SyntheticData(
        Y=Y,
        row_labels=[f"doc {d}" for d in range(n_docs)],
        col_labels=[f"word {v}" for v in range(n_words)],
        model="topics",
        source="synthetic-topics",
        info={
            "groups": groups,
            "word_blocks": word_block,
            "alpha0": float(alpha0),
            "concentration": float(concentration),
            "doc_length": doc_length,
            "topic_purity": topic_purity,
            "description": "Schein et al. 2019, Figure 3: topic recovery under heterogeneous noise",
        },
        Y_obs=Y_obs,
        alpha=alpha,
        mu=mu,
        factors={"theta": theta, "phi": phi},
    )


def make_blocks(n_actors=20, n_communities=5, epsilon=1.0, *, a0=0.1, b0=0.1, random_state=None):
    """The synthetic block-recovery network of Figure 1 (Schein et al. 2019).

    ``theta[i, c], pi[c, d] ~ Gamma(shape a0, rate b0)`` independently,
    ``mu[i, j] = sum_cd theta[i, c] pi[c, d] theta[j, d]`` for ``i != j``,
    ``y[i, j] ~ Pois(mu[i, j])``; then ``N`` = the empirical mean of the
    off-diagonal counts, ``alpha = exp(-epsilon / N)`` and
    ``Y_obs = Y + tau``, ``tau ~ 2Geo(alpha)``. The paper's levels are
    ``epsilon`` in {2.5, 1, 0.75}.

    Self loops do not exist: the diagonal of ``Y``, ``Y_obs`` and ``mu`` is 0,
    a structural zero of the network (its release never fits or scores it).

    About the prior. The paper writes Gamma(a0, b0) with ``a0 = 0.01``,
    ``b0 = 0.5`` and, in the same section, calls ``b0`` a *rate* (its
    authors' code samples ``gamma(a, 1 / b)``). Taken literally that draws
    almost-empty networks: the expected mean count is
    ``C^2 (a0 / b0)^3 = 2e-4``, the median over seeds about 1e-7, so ``Y``
    is all zeros, ``N = 0`` and ``alpha`` is undefined, and only ~1% of
    cells have any rate (no visible blocks, unlike Figure 1). The defaults
    here, ``a0 = 0.1``, ``b0 = 0.1`` (rate; the authors' block-model code's
    default), keep the sparsity-inducing shape < 1 and give Figure-1-like
    data: about 20% of cells carry the block structure, mean count ~15.
    ``make_blocks(a0=0.01, b0=0.5)`` reproduces the literal reading and
    raises when the draw is empty.

    Parameters
    ----------
    n_actors, n_communities : int
    epsilon : float > 0
        Privacy level; ``alpha = exp(-epsilon / N)``.
    a0, b0 : float > 0
        Gamma shape and rate of the true factors.
    random_state : None, int or numpy.random.Generator

    Returns
    -------
    SyntheticData
        ``model="blocks"``, ``Y``/``Y_obs`` int64 (V, V), scalar ``alpha``,
        ``mu``, ``factors={"theta": (V, C), "pi": (C, C)}``,
        ``info["N"]``, ``info["epsilon"]``.
    """
    n_actors = _check_int("n_actors", n_actors, 2)
    n_communities = _check_int("n_communities", n_communities, 1)
    epsilon = _check_positive("epsilon", epsilon)
    a0 = _check_positive("a0", a0)
    b0 = _check_positive("b0", b0)
    _check_size(n_actors, n_actors)
    rng = np.random.default_rng(random_state)

    theta = rng.gamma(a0, 1.0 / b0, size=(n_actors, n_communities))
    pi = rng.gamma(a0, 1.0 / b0, size=(n_communities, n_communities))
    mu = theta @ pi @ theta.T
    np.fill_diagonal(mu, 0.0)
    Y = rng.poisson(mu).astype(np.int64)
    mask = ~np.eye(n_actors, dtype=bool)

    N = float(Y[mask].mean())
    if N == 0:
        raise ValueError(
            f"the drawn network has no events (all off-diagonal counts are 0), so N = mean count = 0 "
            f"and alpha = exp(-epsilon/N) is undefined; Gamma({a0}, rate {b0}) factors are too "
            "sparse: use larger a0/b0 ratio (the defaults a0=0.1, b0=0.1) or another random_state"
        )
    # only the ratio epsilon/N matters; N here is a real number that can be < 1
    alpha = alpha_from(epsilon / N)
    Y_obs = privatize(Y, alpha=alpha, kind="network", random_state=rng).Y_obs  # diagonal: not noised, 0

    return SyntheticData(
        Y=Y,
        row_labels=[f"actor {i}" for i in range(n_actors)],
        col_labels=[f"actor {i}" for i in range(n_actors)],
        model="blocks",
        source="synthetic-blocks",
        info={
            "N": N,
            "epsilon": epsilon,
            "a0": a0,
            "b0": b0,
            "description": "Schein et al. 2019, Figure 1: block recovery, N = mean count",
        },
        Y_obs=Y_obs,
        alpha=alpha,
        mu=mu,
        factors={"theta": theta, "pi": pi},
    )


def lda_corpus(
    n_docs=1000,
    n_words=500,
    n_topics=10,
    *,
    doc_length=100.0,
    topic_concentration=0.1,
    doc_concentration=0.3,
    random_state=None,
):
    """An LDA-like corpus with known topics (the VIPS comparison's synthetic data).

    ``phi_k ~ Dirichlet(topic_concentration)`` over the words,
    ``pi_d ~ Dirichlet(doc_concentration)`` over the topics, a length
    ``L_d ~ Gamma(10, mean doc_length)``, and ``y_dv ~ Poisson(L_d sum_k
    pi_dk phi_kv)``: LDA with a Poisson document length (given its length a
    document's words are LDA's multinomial draw), written as the Poisson topic
    model with ``theta_dk = L_d pi_dk`` so that every fit's truth is the same.

    Returns
    -------
    SyntheticData
        ``model="topics"``, ``Y`` int64 (n_docs, n_words), ``mu``,
        ``factors={"theta": (D, K), "phi": (K, V) rows summing to 1}``; no
        noised copy (``Y_obs`` None: the experiment noises the training documents).
    """
    n_topics = _check_int("n_topics", n_topics, 1)
    n_docs = _check_int("n_docs", n_docs, 2)
    n_words = _check_int("n_words", n_words, 2)
    doc_length = _check_positive("doc_length", doc_length)
    topic_concentration = _check_positive("topic_concentration", topic_concentration)
    doc_concentration = _check_positive("doc_concentration", doc_concentration)
    _check_size(n_docs, n_words)
    rng = np.random.default_rng(random_state)
    phi = rng.dirichlet(np.full(n_words, topic_concentration), n_topics)
    shares = rng.dirichlet(np.full(n_topics, doc_concentration), n_docs)
    lengths = rng.gamma(10.0, doc_length / 10.0, n_docs)
    theta = lengths[:, None] * shares
    mu = theta @ phi
    Y = rng.poisson(mu).astype(np.int64)
    return SyntheticData(
        Y=Y,
        row_labels=[f"doc {d}" for d in range(n_docs)],
        col_labels=[f"word {v}" for v in range(n_words)],
        model="topics",
        source="synthetic-lda",
        info={
            "doc_length": doc_length,
            "topic_concentration": topic_concentration,
            "doc_concentration": doc_concentration,
            "description": "LDA-like corpus with known topics (VIPS comparison)",
        },
        mu=mu,
        factors={"theta": theta, "phi": phi},
    )


def make_tensor(
    n_actors=30,
    n_times=24,
    n_components=4,
    epsilon=1.0,
    N=1.0,
    *,
    mean_count=0.5,
    a0=0.3,
    self_loops=False,
    random_state=None,
):
    """Sender x recipient x month counts with a known CP truth, for the tensor model.

    Each component k is a group of senders and recipients active in a burst of
    months: ``a[i, k], b[j, k] ~ Gamma(shape a0, rate 1)`` (sparse for
    ``a0 < 1``: a few actors carry each component), and ``c[t, k]`` a bump
    ``exp(-(t - centre_k)^2 / (2 width^2))`` with the centres spread evenly over
    the months and ``width = n_times / (2 K)`` (at least one month), so each
    component's time profile is known and different. The rates
    ``mu[i, j, t] = sum_k a[i, k] b[j, k] c[t, k]`` are scaled so that the
    cells that exist average ``mean_count``; ``y ~ Pois(mu)``; then
    ``Y_obs = Y + tau``, ``tau ~ 2Geo(alpha)``, ``alpha = exp(-epsilon / N)``.

    Self loops (``i == j``, every month) do not exist unless ``self_loops``:
    they are structural zeros (0 in ``Y``, ``Y_obs`` and ``mu``; never
    noised, fitted or scored), the rule of the Enron network.

    Parameters
    ----------
    n_actors, n_times, n_components : int
        I = J actors, T months, K components (``n_times >= 1``, ``n_actors >= 2``).
    epsilon, N : float > 0, N >= 1
        Privacy level of the noised copy.
    mean_count : float > 0
        Mean rate over the cells that exist.
    a0 : float > 0
        Gamma shape of the actors' factors.
    self_loops : bool
    random_state : None, int or numpy.random.Generator

    Returns
    -------
    SyntheticData
        ``model="tensor"``, ``Y``/``Y_obs`` int64 (I, I, T), scalar ``alpha``,
        ``mu``, ``factors={"a": (I, K), "b": (I, K), "c": (T, K)}``;
        ``info["mode_labels"]`` (the months' labels), ``info["structural_zeros"]``
        (None with self loops), ``info["epsilon"]``, ``info["N"]``.
    """
    n_actors = _check_int("n_actors", n_actors, 2)
    n_times = _check_int("n_times", n_times, 1)
    n_components = _check_int("n_components", n_components, 1)
    epsilon = _check_positive("epsilon", epsilon)
    mean_count = _check_positive("mean_count", mean_count)
    a0 = _check_positive("a0", a0)
    alpha = alpha_from(epsilon, N)
    _check_size(n_actors, n_actors, n_times)
    rng = np.random.default_rng(random_state)

    a = rng.gamma(a0, 1.0, size=(n_actors, n_components))
    b = rng.gamma(a0, 1.0, size=(n_actors, n_components))
    centres = (np.arange(n_components) + 0.5) * n_times / n_components
    width = max(n_times / (2.0 * n_components), 1.0)
    months = np.arange(n_times)[:, None]
    c = np.exp(-0.5 * ((months - centres[None, :]) / width) ** 2)
    mu = np.einsum("ik,jk,tk->ijt", a, b, c)
    zeros = None
    if not self_loops:
        zeros = np.zeros(mu.shape, dtype=bool)
        zeros[np.arange(n_actors), np.arange(n_actors), :] = True
        mu[zeros] = 0.0
    level = mean_count / (mu.mean() if zeros is None else mu[~zeros].mean())
    c *= level
    mu *= level
    Y = rng.poisson(mu).astype(np.int64)
    release = privatize(Y, alpha=alpha, kind="tensor", structural_zeros=zeros, random_state=rng)

    return SyntheticData(
        Y=Y,
        row_labels=[f"actor {i}" for i in range(n_actors)],
        col_labels=[f"actor {i}" for i in range(n_actors)],
        model="tensor",
        source="synthetic-tensor",
        info={
            "epsilon": epsilon,
            "N": float(N),
            "mean_count": mean_count,
            "a0": a0,
            "structural_zeros": zeros,
            "mode_labels": [[f"month {t + 1}" for t in range(n_times)]],
            "description": "sender x recipient x month: K groups of actors, each active in a burst of months",
        },
        Y_obs=release.Y_obs,
        alpha=alpha,
        mu=mu,
        factors={"a": a, "b": b, "c": c},
    )
