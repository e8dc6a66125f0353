"""The paper's two count matrices from the corpus (Schein et al. 2019, section 5).

The topic matrix (:func:`build_enron_topics`): ``n_docs`` emails drawn at
random (seeded) among those with at least ``min_tokens`` tokens, then the
``n_words`` most frequent word types among those whose document frequency in
the drawn emails is below ``max_df``. The network (:func:`build_enron_network`)
counts sender -> recipient emails. Both are cached by the source's fingerprint
and their parameters; a builder also accepts an :class:`EnronCorpus` directly.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from lpviz._validate import check_int as _check_int
from lpviz.budget import check_memory, dense_bytes

from .. import cache as _cache
from .._types import CountData
from .corpus import _fingerprint, read_corpus
from .parser import PARSER_VERSION
from .readers import MAX_MESSAGE_BYTES
from .tokens import TOKENIZATION


def _cached_count_data(kind, source, params, build, cache_dir, on_cache) -> CountData:
    """``build()`` through the cache, keyed by the source's fingerprint and ``params``."""
    fingerprint = _fingerprint(source)
    if not fingerprint or _cache.resolve_cache_dir(cache_dir) is None:
        data = build()
        _report_cache(on_cache, "matrix", "off")
        return data

    def build_arrays():
        data = build()
        if sp.issparse(data.Y):
            arrays = {
                "data": data.Y.data,
                "indices": data.Y.indices,
                "indptr": data.Y.indptr,
                "shape": np.asarray(data.Y.shape, dtype=np.int64),
            }
        else:
            arrays = {"Y": data.Y}
        arrays.update(row_labels=data.row_labels, col_labels=data.col_labels)
        return arrays, {
            "source": data.source,
            "model": data.model,
            "info": data.info,
            "partial": bool(data.info.get("report", {}).get("partial")),
        }

    key = _cache.cache_key(
        kind, fingerprint=fingerprint, parser=PARSER_VERSION, max_message_bytes=MAX_MESSAGE_BYTES, **params
    )
    arrays, meta, status = _cache.cached(key, build_arrays, cache_dir=cache_dir)
    _report_cache(on_cache, "matrix", status)
    if "Y" in arrays:
        Y = arrays["Y"]
    else:
        Y = sp.csr_matrix(
            (arrays["data"], arrays["indices"], arrays["indptr"]), shape=tuple(int(n) for n in arrays["shape"])
        )
    return CountData(
        Y=Y,
        row_labels=list(arrays["row_labels"]),
        col_labels=list(arrays["col_labels"]),
        model=meta["model"],
        source=meta["source"],
        info=meta["info"],
    )


def _report_cache(on_cache, entry, status):
    if on_cache is not None:
        on_cache(entry, status)


def _corpus_for(source, cache_dir, allow_partial, on_cache):
    corpus = read_corpus(source, cache_dir=cache_dir, allow_partial=allow_partial)
    _report_cache(on_cache, "corpus", corpus.cache_status or "given")
    return corpus


def build_enron_topics(
    source,
    n_docs=10000,
    n_words=10000,
    min_tokens=50,
    max_df=0.3,
    random_state=0,
    cache_dir=None,
    *,
    allow_partial=False,
    on_cache=None,
) -> CountData:
    """The paper's document x word count matrix (Schein et al. 2019, section 5).

    Draws ``n_docs`` emails at random among those with at least
    ``min_tokens`` word tokens (all of them if fewer qualify, noted in
    ``info``), then keeps the ``n_words`` most frequent word types (ties
    alphabetical) whose document frequency among the drawn emails is below
    ``max_df``.

    Parameters
    ----------
    source : str or Path or EnronCorpus
        A maildir directory, the CMU tarball (.tar.gz/.tgz) or emails.csv.
    n_docs, n_words : int
        D and V (paper: 10,000 each). ``n_docs="all"``: every email with at least ``min_tokens``
        tokens (the whole corpus given, no draw; the memory it needs is checked before it is
        allocated). For a fit over a cluster, :func:`lpviz.datasets.blockwise_release` noises the
        result block by block on the workers.
    min_tokens : int
        Minimum number of word tokens an email needs to be drawn.
    max_df : float in (0, 1]
        Words in at least this fraction of the drawn emails are left out.
    random_state : int, numpy Generator or None
        Seed of the draw. Only integer seeds are cached.
    cache_dir : path, None or False
        Where the corpus and the matrix are cached (None: default directory,
        False: no cache).
    allow_partial : bool
        Accept a truncated archive: build from the messages before the break
        (``info["report"]["partial"]`` says so; nothing partial is cached).
        Otherwise a truncated archive is an error.
    on_cache : callable, optional
        Told what the cache did: ``on_cache(entry, status)`` with ``entry``
        ``"matrix"`` or ``"corpus"`` (only when the matrix had to be built)
        and ``status`` one of :data:`lpviz.datasets.cache.STATUSES`.

    Returns
    -------
    CountData
        ``model="topics"``, ``Y`` a CSR int64 matrix (rows sorted by
        Message-ID, columns by decreasing frequency), ``row_labels`` the
        Message-IDs, ``col_labels`` the vocabulary; ``info`` holds the build
        parameters, ``paths`` of the drawn emails, the reader report and the
        tokenization.
    """
    if isinstance(n_docs, str):
        if n_docs != "all":
            raise ValueError(f"n_docs must be a number of emails or 'all' (every eligible email), got {n_docs!r}")
    else:
        n_docs = _check_int("n_docs", n_docs, 1)
    n_words = _check_int("n_words", n_words, 1)
    min_tokens = _check_int("min_tokens", min_tokens, 0)
    if isinstance(max_df, bool) or not isinstance(max_df, (int, float, np.floating, np.integer)) or not 0 < max_df <= 1:
        raise ValueError(f"max_df must be a fraction in (0, 1], got {max_df!r}")
    max_df = float(max_df)
    if isinstance(random_state, (int, np.integer)) and not isinstance(random_state, bool):
        random_state = int(random_state)
        cache_params = {
            "n_docs": n_docs,
            "n_words": n_words,
            "min_tokens": min_tokens,
            "max_df": max_df,
            "random_state": random_state,
        }
    else:  # a Generator or None cannot key a cache entry: the matrix is rebuilt, the corpus still cached
        cache_params = None

    def build():
        return _build_topics(
            _corpus_for(source, cache_dir, allow_partial, on_cache),
            n_docs=n_docs,
            n_words=n_words,
            min_tokens=min_tokens,
            max_df=max_df,
            random_state=random_state,
        )

    if cache_params is None:
        data = build()
        _report_cache(on_cache, "matrix", "off")
        return data
    return _cached_count_data("enron-topics", source, cache_params, build, cache_dir, on_cache)


def _build_topics(corpus, *, n_docs, n_words, min_tokens, max_df, random_state) -> CountData:
    eligible = np.flatnonzero(corpus.has_text & (corpus.n_tokens >= max(min_tokens, 1)))
    if eligible.size == 0:
        raise ValueError(
            f"{corpus.source}: no email has at least {min_tokens} word tokens "
            f"({len(corpus)} emails read); lower min_tokens or use a larger corpus"
        )
    rng = np.random.default_rng(random_state)
    if n_docs == "all":
        chosen = eligible
    elif eligible.size > n_docs:
        chosen = np.sort(rng.choice(eligible, size=n_docs, replace=False))
    else:
        chosen = eligible
    # the chosen rows' copy: values and column indices (8 + 4 bytes per stored count), twice (the
    # vocabulary's cut); every eligible email of a full corpus is a few hundred MB, checked first
    stored = int(np.diff(corpus.tokens.indptr)[chosen].sum())
    check_memory(
        2 * 12 * stored + 16 * len(chosen),
        f"{corpus.source}: the counts of {len(chosen):,} emails ({stored:,} stored counts)",
        fix="Draw fewer emails (n_docs=N instead of 'all') or raise min_tokens.",
    )
    X = corpus.tokens[chosen]
    doc_freq = np.bincount(X.indices, minlength=X.shape[1])
    word_freq = np.bincount(X.indices, weights=X.data, minlength=X.shape[1]).astype(np.int64)
    allowed = np.flatnonzero((doc_freq < max_df * len(chosen)) & (word_freq > 0))
    if allowed.size == 0:
        # max_df is at most 1: beyond that only more emails can leave words below it
        fix = "raise max_df" if max_df < 1 else "draw more emails (n_docs) or use a larger corpus"
        raise ValueError(
            f"{corpus.source}: every word is in at least max_df={max_df} of the {len(chosen)} drawn emails; {fix}"
        )
    # Most frequent first; ties by the alphabetical type index (types are sorted).
    ranked = allowed[np.lexsort((allowed, -word_freq[allowed]))][:n_words]
    Y = X[:, ranked].astype(np.int64).tocsr()
    Y.sort_indices()
    info = {
        "builder": "build_enron_topics",
        "params": {
            "n_docs": n_docs,
            "n_words": n_words,
            "min_tokens": min_tokens,
            "max_df": max_df,
            "random_state": random_state if isinstance(random_state, (int, type(None))) else repr(random_state),
        },
        "n_eligible": int(eligible.size),
        "n_docs": int(len(chosen)),
        "n_words": int(len(ranked)),
        "note": (
            f"every one of the {eligible.size} emails with >= {min_tokens} tokens (n_docs='all')"
            if n_docs == "all"
            else f"only {eligible.size} emails have >= {min_tokens} tokens: all are used"
            if eligible.size < n_docs
            else ""
        ),
        "paths": [corpus.paths[i] for i in chosen],
        "report": corpus.report,
        "tokenization": TOKENIZATION,
    }
    return CountData(
        Y=Y,
        row_labels=[corpus.message_ids[i] for i in chosen],
        col_labels=[corpus.types[j] for j in ranked],
        model="topics",
        source=corpus.source,
        info=info,
    )


def build_enron_network(source, min_count=100, cache_dir=None, *, allow_partial=False, on_cache=None) -> CountData:
    """The paper's sender -> recipient count matrix (Schein et al. 2019, section 5).

    ``Y[i, j]`` is the number of emails actor ``i`` sent with actor ``j``
    among its recipients: an email adds one per distinct recipient over To,
    Cc and Bcc (in the CMU files Bcc repeats Cc, so the union is taken) and
    nothing for the sender writing to itself (the block model has no self
    loops). An actor (normalised address) is kept if it sent at least one
    email (with a recipient) and the number of emails it sent plus the number
    it received is at least ``min_count``; counts are taken over the whole
    corpus, then the matrix is restricted to the kept actors.

    Parameters
    ----------
    source : str or Path or EnronCorpus
        A maildir directory, the CMU tarball (.tar.gz/.tgz) or emails.csv.
    min_count : int
        The sent-or-received threshold (paper: 100).
    cache_dir : path, None or False
        Where the corpus and the matrix are cached (None: default, False: none).
    allow_partial : bool
        Accept a truncated archive (see :func:`build_enron_topics`).
    on_cache : callable, optional
        Told what the cache did (see :func:`build_enron_topics`).

    Returns
    -------
    CountData
        ``model="blocks"``, ``Y`` a dense square int64 array, ``row_labels ==
        col_labels`` the kept addresses (sorted), ``info["names"]`` their
        display names ("" if none found), ``info["sent"]``/``info["received"]``
        their corpus-wide counts, the rule, the parameters and the reader report.
    """
    min_count = _check_int("min_count", min_count, 0)

    def build():
        return _build_network(_corpus_for(source, cache_dir, allow_partial, on_cache), min_count)

    return _cached_count_data("enron-network", source, {"min_count": min_count}, build, cache_dir, on_cache)


def _network_actors(corpus, min_count):
    """The network's actors and its edges among them: ``(keep, sent, received, edges)`` where ``keep``
    indexes the kept addresses (sorted), ``sent``/``received`` are every address's corpus-wide counts
    and ``edges`` = (sender position, recipient position, message index) of every email-recipient pair
    between kept actors (one per distinct recipient; never the sender itself)."""
    n_addresses = len(corpus.addresses)
    n_recipients = np.diff(corpus.recipient_indptr)
    sends = (corpus.senders >= 0) & (n_recipients > 0)
    sent = np.bincount(corpus.senders[sends], minlength=n_addresses)
    received = np.bincount(corpus.recipient_indices, minlength=n_addresses)
    keep = np.flatnonzero((sent >= 1) & (sent + received >= min_count))
    if keep.size == 0:
        raise ValueError(
            f"{corpus.source}: no actor sent an email and sent or received at least "
            f"{min_count} (most active: {int((sent + received).max(initial=0))}); "
            "lower min_count"
        )
    position = np.full(n_addresses, -1, dtype=np.int64)
    position[keep] = np.arange(keep.size)
    edge_sender = np.repeat(np.where(corpus.senders >= 0, position[np.maximum(corpus.senders, 0)], -1), n_recipients)
    edge_recipient = position[corpus.recipient_indices]
    message_of_edge = np.repeat(np.arange(len(corpus)), n_recipients)
    kept = (edge_sender >= 0) & (edge_recipient >= 0)
    return keep, sent, received, (edge_sender[kept], edge_recipient[kept], message_of_edge[kept])


def _build_network(corpus, min_count) -> CountData:
    keep, sent, received, (edge_sender, edge_recipient, message_of_edge) = _network_actors(corpus, min_count)
    check_memory(
        dense_bytes((keep.size, keep.size), np.int64),
        f"{corpus.source}: the {keep.size:,} x {keep.size:,} network of the actors passing min_count={min_count}",
        fix="Raise min_count.",
    )
    Y = np.zeros((keep.size, keep.size), dtype=np.int64)
    np.add.at(Y, (edge_sender, edge_recipient), 1)
    if keep.size < 2 or not Y.any():
        # a network with no email between its actors has nothing for the block model to fit
        raise ValueError(
            f"{corpus.source}: the {keep.size} actor(s) passing min_count={min_count} sent no email "
            "to one another (0 counts among them); lower min_count or use a larger corpus"
        )
    labels = [corpus.addresses[a] for a in keep]
    info = {
        "builder": "build_enron_network",
        "params": {"min_count": min_count},
        "rule": "actor kept if it sent >= 1 email and sent + received >= min_count (whole corpus); "
        "one count per distinct recipient over To, Cc and Bcc; no self loops",
        "names": [corpus.names[a] for a in keep],
        "sent": sent[keep].tolist(),
        "received": received[keep].tolist(),
        "n_actors_seen": int(np.count_nonzero((sent + received) > 0)),
        "n_emails_used": int(np.unique(message_of_edge).size),
        "report": corpus.report,
    }
    return CountData(Y=Y, row_labels=labels, col_labels=list(labels), model="blocks", source=corpus.source, info=info)
