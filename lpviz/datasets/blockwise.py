"""A synthetic topic release of any size, built block by block where its rows are needed.

:func:`~lpviz.datasets.make_topics_blockwise` returns a :class:`~lpviz.datasets.BlockwiseTopics`:
a small description (sizes, noise level, seed) with the true topics ``phi`` (K x V, small enough to
send anywhere) and no counts. Rows are drawn in blocks of ``GENERATOR_ROWS`` (1,024) rows, block
``b`` from its own stream keyed by ``(seed, b)``, so any range of rows is the same whoever builds
it: ``lpviz.fit(gen, scheduler=...)`` builds each partition on its worker (the driver never holds
the D x V counts), and :meth:`~lpviz.datasets.BlockwiseTopics.release` builds the same release in
this process (for small sizes and tests).

The truth follows :func:`~lpviz.datasets.make_topics`: topic ``k`` puts ``topic_purity`` of its
mass on its own block of words; document ``d`` belongs to group ``d * K // D``, takes 80% of its
rate from that topic, times a length drawn Gamma(10, mean ``doc_length``); ``Y ~ Pois(theta phi)``;
``alpha_d ~ Beta(c alpha0, c (1 - alpha0))``; ``Y_obs = Y + 2Geo(alpha_d)``.

Noise: seeded, hence a *simulation* (numpy's fast sampler, ``simulated=True`` on the release), as
:func:`lpviz.privacy.privatize` does whenever a seed is given; ``exact=True`` draws the noise with
OpenDP's exact sampler on whoever builds the block (not reproducible, so two builds differ in
``Y_obs`` and only ``Y`` can be compared).
"""

from dataclasses import dataclass, replace

import numpy as np

from .._validate import check_int as _check_int
from .._validate import check_positive as _check_positive
from ..privacy import _geometric_noise_exact, _geometric_noise_fast, heterogeneous_alpha

__all__ = ["GENERATOR_ROWS", "BlockwiseTopics", "BlockwiseRelease", "make_topics_blockwise", "blockwise_release"]

# Rows drawn from one stream: large enough that numpy's vectorised draws dominate, small enough
# that a partition's edge wastes little (a range builds its first and last blocks whole, then cuts).
GENERATOR_ROWS = 1024
WHICH = ("Y_obs", "Y", "alpha")


def _noised(Y, alpha, rng):
    """``Y`` plus two-sided geometric noise: the seeded simulation from ``rng``, or exact (None)."""
    Y_obs = np.array(Y, dtype=np.int64)
    if rng is None:
        _geometric_noise_exact(Y_obs, alpha)
    else:
        _geometric_noise_fast(Y_obs, alpha, rng)
    return Y_obs


def _cut_rows(n_rows, start, stop, block_rows):
    """Rows [start, stop) from whole generator blocks: (block, first row, cut) for each block met."""
    start, stop = int(start), int(stop)
    if not 0 <= start < stop <= n_rows:
        raise ValueError(f"rows [{start}, {stop}) are not inside the {n_rows:,} rows")
    for block in range(start // block_rows, (stop - 1) // block_rows + 1):
        first = block * block_rows
        yield block, first, slice(max(start, first) - first, min(stop, first + block_rows) - first)


class _BuiltByBlocks:
    """Rows built in blocks of ``GENERATOR_ROWS``, block ``b`` from its own stream, so any range of
    rows is the same whoever builds it; a subclass says how one block is built (:meth:`_block`)."""

    kind = "documents"
    heldout = None
    structural_zeros = None
    builds_rows = True  # lpviz.distributed builds its partitions where they live

    def _block(self, block):
        raise NotImplementedError

    def rows(self, start, stop, which="Y_obs"):
        """Rows [start, stop) of ``which`` (``"Y_obs"``, ``"Y"``, ``"alpha"``; the synthetic data
        also ``"theta"``), built block by block: the same values for any cut of the rows."""
        cuts = _cut_rows(self.shape[0], start, stop, GENERATOR_ROWS)
        return np.concatenate([self._block(block)[which][cut] for block, _, cut in cuts])

    def _whole(self, copies, what, fix, **release):
        """The whole release built in this process, its memory (``copies`` dense D x V int64
        arrays at the peak) checked first."""
        from lpviz.budget import check_memory, dense_bytes
        from lpviz.release import Release

        check_memory(copies * dense_bytes(self.shape, np.int64), what, fix=fix)
        return Release(Y_obs=self.rows(0, self.shape[0], "Y_obs"), kind=self.kind, **release)


@dataclass(frozen=True)
class BlockwiseTopics(_BuiltByBlocks):
    """A synthetic topic release described, not held: see :func:`~lpviz.datasets.make_topics_blockwise`."""

    n_docs: int
    n_words: int
    n_topics: int
    alpha0: float
    concentration: float
    doc_length: float
    topic_purity: float
    seed: int
    exact: bool = False

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

    def _block(self, block):
        """(Y, Y_obs, alpha, theta) of stream block ``block``."""
        phi = self.phi()
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
        Y_obs = _noised(Y, alpha, None if self.exact else rng)
        return {"Y": Y, "Y_obs": Y_obs, "alpha": alpha, "theta": theta}

    def release(self):
        """The whole release built in this process (memory checked first)."""
        return self._whole(
            4,
            f"a blockwise synthetic {self.n_docs:,} x {self.n_words:,} release built in one process",
            "Fit it over a cluster instead (lpviz.fit(data, scheduler=...)) or choose fewer rows.",
            alpha=self.rows(0, self.n_docs, "alpha"),
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


@dataclass(frozen=True)
class BlockwiseRelease(_BuiltByBlocks):
    """Counts a data owner holds (a sparse matrix, e.g. every email of an Enron corpus), noised
    block by block where the rows are needed: see :func:`~lpviz.datasets.blockwise_release`."""

    Y: object  # scipy.sparse CSR (or a dense array) of true counts
    alpha: object  # float or one per row (of Y's rows)
    seed: int | None  # None: exact noise
    name: str = ""
    # a worker's piece (holding): Y (and alpha) hold rows [first_row, first_row + len(Y)) of n_rows
    first_row: int = 0
    n_rows: int | None = None

    @property
    def shape(self):
        return (int(self.Y.shape[0]) if self.n_rows is None else self.n_rows, int(self.Y.shape[1]))

    def holding(self, start, stop):
        """This release with only the counts of the generator blocks rows [start, stop) meet: what
        a worker that builds those rows is sent (its rows, not the whole matrix)."""
        low = start // GENERATOR_ROWS * GENERATOR_ROWS
        high = min(self.shape[0], -(-stop // GENERATOR_ROWS) * GENERATOR_ROWS)
        held = slice(low - self.first_row, high - self.first_row)
        if held.start < 0 or high - self.first_row > self.Y.shape[0]:
            raise ValueError(f"rows [{start}, {stop}) are not all held here (rows {self.first_row} on)")
        alpha = self.alpha if np.ndim(self.alpha) == 0 else np.asarray(self.alpha)[held]
        return replace(self, Y=self.Y[held], alpha=alpha, first_row=low, n_rows=self.shape[0])

    def _block(self, block):
        first = block * GENERATOR_ROWS
        stop = min(self.shape[0], first + GENERATOR_ROWS)
        mine = slice(first - self.first_row, stop - self.first_row)
        if mine.start < 0 or mine.stop > self.Y.shape[0]:
            raise ValueError(f"block {block} is not held here (rows {self.first_row} on): see holding()")
        rows = self.Y[mine]
        Y = np.asarray(rows.toarray() if hasattr(rows, "toarray") else rows, dtype=np.int64)
        alpha = np.broadcast_to(np.asarray(self.alpha, dtype=float), (self.Y.shape[0],))[mine]
        rng = None if self.seed is None else np.random.default_rng(np.random.SeedSequence([self.seed, block]))
        return {"Y": Y, "alpha": np.array(alpha), "Y_obs": _noised(Y, alpha, rng)}

    def release(self):
        """The whole release built in this process (memory checked first)."""
        return self._whole(
            3,
            f"a {self.shape[0]:,} x {self.shape[1]:,} release built in one process",
            "Fit it over a cluster instead (lpviz.fit(data, scheduler=...)), whose workers noise their own rows.",
            alpha=self.alpha,
            simulated=self.seed is not None,
            noise_seed=self.seed,
            name=self.name,
        )


def blockwise_release(data, *, epsilon=None, N=1, alpha=None, random_state=None):
    """Counts (a :class:`~lpviz.datasets.CountData`, e.g. ``build_enron_topics(path, n_docs="all")``,
    or a sparse/dense matrix) released block by block where their rows are needed:
    ``lpviz.fit(blockwise_release(data, epsilon=1), scheduler=...)`` noises each partition on its
    worker, so the dense D x V release never exists on the driver.

    Noise as :func:`lpviz.privacy.privatize`: exact (OpenDP) by default; an int ``random_state``
    asks for a seeded simulation (each block of ``lpviz.datasets.GENERATOR_ROWS`` rows from the stream keyed
    by (seed, block), so the same release for any cut of the rows). Each worker is sent the true
    counts of its own rows only (:meth:`BlockwiseRelease.holding`)."""
    from ..privacy import _resolve_alpha, check_noise_level

    Y = getattr(data, "Y", data)
    if not hasattr(Y, "shape") or len(Y.shape) != 2:
        raise ValueError("blockwise_release takes a documents x words matrix (or CountData holding one)")
    a = _resolve_alpha(epsilon, N, alpha, Y.shape[0])
    check_noise_level(a)
    if random_state is not None and (not isinstance(random_state, (int, np.integer)) or random_state < 0):
        raise TypeError(f"random_state must be None (exact noise) or a non-negative int seed, got {random_state!r}")
    Y = Y.tocsr() if hasattr(Y, "tocsr") else np.asarray(Y)
    return BlockwiseRelease(
        Y=Y,
        alpha=a,
        seed=None if random_state is None else int(random_state),
        name=str(getattr(data, "source", "") or ""),
    )
