"""The parsed corpus: every usable message of a source, read once and cached.

:func:`read_corpus` reduces a source to an :class:`EnronCorpus` (token counts,
senders, recipients, display names) and caches it by the source's fingerprint
beside the built matrices (see :mod:`lpviz.datasets.cache`), so building both
matrices reads the tarball once. The parse is checked against the memory budget
(:mod:`lpviz.budget`) as it grows.
"""

from __future__ import annotations

import itertools
from array import array
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from lpviz.budget import check_memory

from .. import cache as _cache
from .parser import PARSER_VERSION
from .readers import MAX_MESSAGE_BYTES, _source_shape, read_emails
from .tokens import _keep, _words


@dataclass
class EnronCorpus:
    """Every usable message of a source, reduced to what the two matrices need.

    Rows are messages sorted by Message-ID (so a maildir, its tarball and its
    ``emails.csv`` give the same corpus). ``tokens`` is a CSR
    (messages x ``types``) of token counts after tokenization; ``n_tokens`` its
    row sums; ``has_text`` is False for messages without a text part.
    ``senders[i]`` indexes ``addresses`` (-1: no sender); recipients of message
    ``i`` are ``recipient_indices[recipient_indptr[i]:recipient_indptr[i+1]]``
    (distinct, without the sender). ``names[a]`` is the most frequent display
    name of ``addresses[a]`` ("" if none). ``months[i]``: the month message ``i``
    was sent (``12 * year + month - 1``, -1 without a date; :func:`~.parser.month_label`).
    """

    message_ids: list
    paths: list
    tokens: sp.csr_matrix
    n_tokens: np.ndarray
    has_text: np.ndarray
    types: list
    senders: np.ndarray
    recipient_indptr: np.ndarray
    recipient_indices: np.ndarray
    addresses: list
    names: list
    months: np.ndarray
    report: dict
    source: str = ""
    fingerprint: dict = field(default_factory=dict)
    # what read_corpus's cache did (lpviz.datasets.cache.STATUSES); not part of the corpus
    cache_status: str = field(default="", compare=False, repr=False)

    def __len__(self):
        return len(self.message_ids)

    def __repr__(self):
        return (
            f"EnronCorpus({len(self)} emails, {len(self.types)} word types, {len(self.addresses)} "
            f"addresses, source={self.source!r})"
        )

    def _arrays(self) -> dict:
        return {
            "message_ids": self.message_ids,
            "paths": self.paths,
            "types": self.types,
            "addresses": self.addresses,
            "names": self.names,
            "token_data": self.tokens.data,
            "token_indices": self.tokens.indices,
            "token_indptr": self.tokens.indptr,
            "n_tokens": self.n_tokens,
            "has_text": self.has_text,
            "senders": self.senders,
            "recipient_indptr": self.recipient_indptr,
            "recipient_indices": self.recipient_indices,
            "months": self.months,
        }

    @classmethod
    def _from_arrays(cls, arrays: dict, meta: dict) -> EnronCorpus:
        n, n_types = len(arrays["message_ids"]), len(arrays["types"])
        tokens = sp.csr_matrix(
            (arrays["token_data"], arrays["token_indices"], arrays["token_indptr"]), shape=(n, n_types)
        )
        return cls(
            message_ids=arrays["message_ids"],
            paths=arrays["paths"],
            tokens=tokens,
            n_tokens=arrays["n_tokens"],
            has_text=arrays["has_text"],
            types=arrays["types"],
            senders=arrays["senders"],
            recipient_indptr=arrays["recipient_indptr"],
            recipient_indices=arrays["recipient_indices"],
            addresses=arrays["addresses"],
            names=arrays["names"],
            months=arrays["months"],
            report=meta["report"],
            source=meta["source"],
            fingerprint=meta["fingerprint"],
        )


# Bytes the corpus holds while it is parsed and assembled, per item: a token entry (column and
# count, then copies while the CSR is reordered), a word type (str key in a dict), an address
# (key, name votes), a message (Message-ID, path, pointers), a recipient entry. On the shared
# subset (58,168 messages, 4.6 M token entries) this gives 156 MiB; the parse grows RSS by 154.
_CORPUS_BYTES = {"token": 28, "type": 130, "address": 500, "message": 300, "recipient": 12}
_CORPUS_CHECK_EVERY = 1000  # messages between checks of the parsed corpus against the budget


def _check_corpus_memory(source, n_messages, n_tokens, n_types, n_addresses, n_recipients):
    """The parse so far, with what assembling it will add, against the memory budget."""
    need = (
        n_tokens * _CORPUS_BYTES["token"]
        + n_types * _CORPUS_BYTES["type"]
        + n_addresses * _CORPUS_BYTES["address"]
        + n_messages * _CORPUS_BYTES["message"]
        + n_recipients * _CORPUS_BYTES["recipient"]
    )
    check_memory(
        need,
        f"{source}: the corpus parsed so far ({n_messages:,} messages, {n_types:,} word types, "
        f"{n_tokens:,} token entries)",
        fix="Read a smaller corpus (a part of the maildir) or give lpviz more memory.",
    )


def _parse_corpus(source: Path, fingerprint: dict, allow_partial: bool = False) -> EnronCorpus:
    emails, report = read_emails(source, allow_partial=allow_partial)
    # defaultdict(count().__next__) numbers new keys in C: no Python call per token.
    word_ids: defaultdict[str, int] = defaultdict(itertools.count().__next__)
    address_ids: defaultdict[str, int] = defaultdict(itertools.count().__next__)
    name_votes: dict = {}
    message_ids, paths, has_text = [], [], []
    # Typed arrays, not lists: the full CMU corpus has tens of millions of entries.
    token_cols, token_vals, token_ptr = array("i"), array("i"), array("q", [0])
    recipient_cols, recipient_ptr, senders, word_totals = array("i"), array("q", [0]), array("i"), array("q")
    months = array("i")
    for message in emails:
        message_ids.append(message.message_id)
        paths.append(message.path)
        has_text.append(message.text is not None)
        words = _words(message.text) if message.text is not None else []
        counts = Counter(words)
        token_cols.extend(map(word_ids.__getitem__, counts))
        token_vals.extend(counts.values())
        token_ptr.append(len(token_cols))
        word_totals.append(len(words))
        senders.append(address_ids[message.sender] if message.sender else -1)
        months.append(message.month)
        recipient_cols.extend(map(address_ids.__getitem__, message.recipients))
        recipient_ptr.append(len(recipient_cols))
        for address, name in message.names.items():
            name_votes.setdefault(address, Counter())[name] += 1
        if len(message_ids) % _CORPUS_CHECK_EVERY == 0:
            _check_corpus_memory(
                source, len(message_ids), len(token_cols), len(word_ids), len(address_ids), len(recipient_cols)
            )
    _check_corpus_memory(
        source, len(message_ids), len(token_cols), len(word_ids), len(address_ids), len(recipient_cols)
    )
    n = len(message_ids)
    if n == 0:
        raise ValueError(
            f"{source}: no readable email in this source ({report}); point at a maildir, the CMU tarball or emails.csv"
        )
    # Canonical order (messages by Message-ID, types and addresses alphabetical) so every
    # shape of the same corpus gives the same arrays; words outside the vocabulary rules go.
    order = np.array(sorted(range(n), key=message_ids.__getitem__), dtype=np.int64)
    types = sorted(w for w in word_ids if _keep(w))
    all_tokens = sp.csr_matrix(
        (
            np.frombuffer(token_vals, dtype=np.int32),
            np.frombuffer(token_cols, dtype=np.int32),
            np.frombuffer(token_ptr, dtype=np.int64),
        ),
        shape=(n, len(word_ids)),
    )
    tokens = all_tokens[order][
        :, np.fromiter(map(word_ids.__getitem__, types), dtype=np.int64, count=len(types))
    ].tocsr()
    tokens.sort_indices()
    addresses = sorted(address_ids)
    address_rank = np.empty(len(addresses), dtype=np.int32)
    address_rank[np.fromiter(map(address_ids.__getitem__, addresses), dtype=np.int64, count=len(addresses))] = (
        np.arange(len(addresses), dtype=np.int32)
    )
    recipients = sp.csr_matrix(
        (
            np.ones(len(recipient_cols), dtype=np.int8),
            address_rank[np.frombuffer(recipient_cols, dtype=np.int32)],
            np.frombuffer(recipient_ptr, dtype=np.int64),
        ),
        shape=(n, len(addresses)),
    )[order]
    sender_array = np.frombuffer(senders, dtype=np.int32).astype(np.int64)
    sender_array = np.where(sender_array >= 0, address_rank[np.maximum(sender_array, 0)], -1)[order]
    names = []
    for address in addresses:
        votes = name_votes.get(address)
        names.append(min(votes.items(), key=lambda kv: (-kv[1], kv[0]))[0] if votes else "")
    return EnronCorpus(
        message_ids=[message_ids[i] for i in order],
        paths=[paths[i] for i in order],
        tokens=tokens,
        n_tokens=np.frombuffer(word_totals, dtype=np.int64)[order],
        has_text=np.asarray(has_text, dtype=bool)[order],
        types=types,
        senders=sender_array.astype(np.int32),
        recipient_indptr=recipients.indptr.astype(np.int64),
        recipient_indices=recipients.indices.astype(np.int32),
        addresses=addresses,
        names=names,
        months=np.frombuffer(months, dtype=np.int32)[order].copy(),
        report=report.as_dict(),
        source=str(source),
        fingerprint=fingerprint,
    )


def read_corpus(source, cache_dir=None, *, allow_partial=False) -> EnronCorpus:
    """Parse ``source`` once into an :class:`EnronCorpus`, cached by the source's fingerprint.

    ``cache_dir``: ``None`` for the default cache directory, a path, or
    ``False`` to parse without caching. ``allow_partial``: accept a truncated
    archive (see :func:`read_emails`); the partial corpus is returned but
    never cached. The parse is held to the memory budget
    (:mod:`lpviz.budget`). ``cache_status`` on the result says what the
    cache did (``"hit"``, ``"built"``, ...).
    """
    if isinstance(source, EnronCorpus):
        return source
    path = Path(source).expanduser()
    fingerprint = _fingerprint(path)
    key = _cache.cache_key(
        "enron-corpus", fingerprint=fingerprint, parser=PARSER_VERSION, max_message_bytes=MAX_MESSAGE_BYTES
    )

    def build():
        corpus = _parse_corpus(path, fingerprint, allow_partial)
        return corpus._arrays(), {
            "report": corpus.report,
            "source": corpus.source,
            "fingerprint": fingerprint,
            "partial": corpus.report["partial"],
        }

    arrays, meta, status = _cache.cached(key, build, cache_dir=cache_dir)
    corpus = EnronCorpus._from_arrays(arrays, meta)
    corpus.cache_status = status
    return corpus


def _fingerprint(source) -> dict:
    """The source's fingerprint without parsing it, so a cached matrix loads without its corpus."""
    if isinstance(source, EnronCorpus):
        return source.fingerprint  # empty for a corpus made by hand: not cached
    path = Path(source).expanduser()
    _source_shape(path)  # clear errors for missing or foreign files first
    return _cache.source_fingerprint(path)
