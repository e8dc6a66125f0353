"""A synthetic topic release of any size, built block by block where its rows are needed.

:func:`make_topics_blockwise` returns a :class:`BlockwiseTopics`: a small description (sizes, noise
level, seed) with the true topics ``phi`` (K x V, small enough to send anywhere) and no counts.
Rows are drawn in blocks of :data:`GENERATOR_ROWS` rows, block ``b`` from its own stream keyed by
``(seed, b)``, so any range of rows is the same whoever builds it: ``lpviz.fit(gen, scheduler=...)``
builds each partition on its worker (the driver never holds the D x V counts), and
:meth:`BlockwiseTopics.release` builds the same release in this process (for small sizes and
tests).

The truth follows :func:`~lpviz.datasets.make_topics`: topic ``k`` puts ``topic_purity`` of its
mass on its own block of words; document ``d`` belongs to group ``d * K // D``, takes 80% of its
rate from that topic, times a length drawn Gamma(10, mean ``doc_length``); ``Y ~ Pois(theta phi)``;
``alpha_d ~ Beta(c alpha0, c (1 - alpha0))``; ``Y_obs = Y + 2Geo(alpha_d)``.

Noise: seeded, hence a *simulation* (numpy's fast sampler, ``simulated=True`` on the release), as
:func:`lpviz.privacy.privatize` does whenever a seed is given; ``exact=True`` draws the noise with
OpenDP's exact sampler on whoever builds the block (not reproducible, so two builds differ in
``Y_obs`` and only ``Y`` can be compared).
"""

from dataclasses import dataclass

import numpy as np

from .._validate import check_int as _check_int
from .._validate import check_positive as _check_positive
from ..privacy import _geometric_noise_exact, _geometric_noise_fast, heterogeneous_alpha

__all__ = ["GENERATOR_ROWS", "BlockwiseTopics", "make_topics_blockwise"]

# Rows drawn from one stream: large enough that numpy's vectorised draws dominate, small enough
# that a partition's edge wastes little (a range builds its first and last blocks whole, then cuts).
GENERATOR_ROWS = 1024
WHICH = ("Y_obs", "Y", "alpha")


@dataclass(frozen=True)
class BlockwiseTopics:
    """A synthetic topic release described, not held: see :func:`make_topics_blockwise`."""

    n_docs: int
    n_words: int
    n_topics: int
    alpha0: float
    concentration: float
    doc_length: float
    topic_purity: float
    seed: int
    exact: bool = False

    kind = "documents"
    heldout = None
    structural_zeros = None
    builds_rows = True  # lpviz.distributed builds its partitions where they live

    @property
    def shape(self):
        return (self.n_docs, self.n_words)

    def phi(self):
        """The true topics (K x V), rows summing to one; deterministic."""
        K, V = self.n_topics, self.n_words
        word_block = np.concatenate([np.full(len(b), k) for k, b in enumerate(np.array_split(np.arange(V), K))])
        phi = np.empty((K, V))
        for k in range(K):
            own = word_block == k
            if (~own).any():
                phi[k, own] = self.topic_purity / own.sum()
                phi[k, ~own] = (1.0 - self.topic_purity) / (~own).sum()
            else:  # a single topic owns every word
                phi[k] = 1.0 / V
        return phi

    def _block(self, block, phi):
        """(Y, Y_obs, alpha, theta) of stream block ``block``."""
        first = block * GENERATOR_ROWS
        rows = np.arange(first, min(self.n_docs, first + GENERATOR_ROWS))
        rng = np.random.default_rng(np.random.SeedSequence([self.seed, block]))
        K = self.n_topics
        dominant = 0.8 if K > 1 else 1.0
        shares = np.full((rows.size, K), (1.0 - dominant) / max(K - 1, 1))
        shares[np.arange(rows.size), rows * K // self.n_docs] = dominant
        theta = rng.gamma(10.0, self.doc_length / 10.0, size=rows.size)[:, None] * shares
        Y = rng.poisson(theta @ phi).astype(np.int64)
        alpha = heterogeneous_alpha(rows.size, self.alpha0, self.concentration, random_state=rng)
        Y_obs = Y.copy()
        if self.exact:
            _geometric_noise_exact(Y_obs, alpha)
        else:
            _geometric_noise_fast(Y_obs, alpha, rng)
        return {"Y": Y, "Y_obs": Y_obs, "alpha": alpha, "theta": theta}

    def rows(self, start, stop, which="Y_obs"):
        """Rows [start, stop) of ``which`` (``"Y_obs"``, ``"Y"``, ``"alpha"`` or ``"theta"``),
        built block by block: the same values for any cut of the rows."""
        start, stop = int(start), int(stop)
        if not 0 <= start < stop <= self.n_docs:
            raise ValueError(f"rows [{start}, {stop}) are not inside the {self.n_docs:,} rows")
        phi = self.phi()
        pieces = []
        for block in range(start // GENERATOR_ROWS, (stop - 1) // GENERATOR_ROWS + 1):
            first = block * GENERATOR_ROWS
            values = self._block(block, phi)[which]
            pieces.append(values[max(start, first) - first : min(stop, first + GENERATOR_ROWS) - first])
        return np.concatenate(pieces)

    def release(self):
        """The whole release built in this process (memory checked first)."""
        from lpviz.budget import check_memory, dense_bytes
        from lpviz.release import Release

        check_memory(
            4 * dense_bytes(self.shape, np.int64),
            f"a blockwise synthetic {self.n_docs:,} x {self.n_words:,} release built in one process",
            fix="Fit it over a cluster instead (lpviz.fit(data, scheduler=...)) or choose fewer rows.",
        )
        return Release(
            Y_obs=self.rows(0, self.n_docs, "Y_obs"),
            alpha=self.rows(0, self.n_docs, "alpha"),
            kind="documents",
            simulated=not self.exact,
            noise_seed=None if self.exact else self.seed,
            name=f"synthetic-topics-blockwise {self.n_docs}x{self.n_words}",
        )

    def truth(self):
        """The true counts, rates' factors (built in this process: small sizes)."""
        from lpviz.release import Truth

        theta = self.rows(0, self.n_docs, "theta")
        phi = self.phi()
        return Truth(Y=self.rows(0, self.n_docs, "Y"), mu=theta @ phi, factors={"theta": theta, "phi": phi})


def make_topics_blockwise(
    n_docs=1_000_000,
    n_words=5_000,
    n_topics=50,
    alpha0=0.8,
    concentration=10,
    doc_length=50.0,
    topic_purity=0.9,
    random_state=0,
    exact=False,
):
    """A :func:`~lpviz.datasets.make_topics`-like release of any size, described and built block by
    block where it is needed (on the workers of a fit with ``scheduler=``): see the module's notes.

    ``random_state`` must be an int (the seed of every block's stream); ``exact=True`` noises each
    block with OpenDP's exact sampler instead of the seeded simulation."""
    n_topics = _check_int("n_topics", n_topics, 1)
    n_docs = _check_int("n_docs", n_docs, n_topics)
    n_words = _check_int("n_words", n_words, n_topics)
    topic_purity = _check_positive("topic_purity", topic_purity)
    if topic_purity > 1:
        raise ValueError(f"topic_purity is a share of mass, in (0, 1], got {topic_purity}")
    if not isinstance(random_state, (int, np.integer)) or isinstance(random_state, bool) or random_state < 0:
        raise TypeError(
            f"random_state must be a non-negative int (each block's stream is keyed by it), got {random_state!r}"
        )
    if not 0 < float(alpha0) < 1:
        raise ValueError(f"alpha0 is a mean noise level in (0, 1), got {alpha0}")
    return BlockwiseTopics(
        n_docs=n_docs,
        n_words=n_words,
        n_topics=n_topics,
        alpha0=float(alpha0),
        concentration=float(concentration),
        doc_length=_check_positive("doc_length", doc_length),
        topic_purity=topic_purity,
        seed=int(random_state),
        exact=bool(exact),
    )
