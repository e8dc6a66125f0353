"""The Enron emails as sender x recipient x month counts, for the tensor model.

:func:`enron_tensor` counts, for the actors of the network
(:func:`~lpviz.datasets.enron.builders.build_enron_network`'s rule: an actor
sent at least one email and sent plus received at least ``min_count``), the
emails actor ``i`` sent with actor ``j`` among its recipients in month ``t``
(the month of the Date header, as written). Self loops do not exist (a sender
is never its own recipient): they are the tensor's structural zeros, the
network's rule. The months span the corpus: every month from the one where
the first :data:`COVERAGE_TAIL` of the dated emails end to the one where the
last begins (so a few misdated emails, 1980 or 2044 in the CMU release, do not
stretch the axis over decades), empty months included; emails outside the
span or without a date are counted in ``info`` and left out.
"""

from __future__ import annotations

import numpy as np

from lpviz.budget import check_memory, dense_bytes

from .._types import CountData
from .builders import _cached_count_data, _corpus_for, _network_actors
from .parser import month_label
from .readers import _check_int

# The share of dated emails left out at each end of the time axis (misdated outliers).
COVERAGE_TAIL = 0.005


def _parse_month(text, name):
    """``12 * year + month - 1`` of a "YYYY-MM" string."""
    try:
        year, month = (int(part) for part in str(text).split("-"))
    except ValueError:
        raise ValueError(f"{name} must be a month written YYYY-MM (e.g. '2000-01'), got {text!r}") from None
    if not (1 <= month <= 12 and 1 <= year <= 9999):
        raise ValueError(f"{name} must be a month written YYYY-MM (e.g. '2000-01'), got {text!r}")
    return 12 * year + month - 1


def enron_tensor(
    source, min_count=100, months=None, cache_dir=None, *, allow_partial=False, on_cache=None
) -> CountData:
    """Sender x recipient x month email counts of the Enron corpus.

    Parameters
    ----------
    source : str or Path or EnronCorpus
        A maildir directory, the CMU tarball (.tar.gz/.tgz) or emails.csv.
    min_count : int
        The network's sent-or-received threshold for an actor (100 as in Figure 5).
    months : (str, str), optional
        The first and last month ("YYYY-MM") of the time axis; default: the months
        spanning the corpus (all but the first and last :data:`COVERAGE_TAIL` of its
        dated emails between the kept actors).
    cache_dir, allow_partial, on_cache
        As for :func:`~lpviz.datasets.enron.builders.build_enron_topics`.

    Returns
    -------
    CountData
        ``model="tensor"``, ``Y`` a dense int64 array (actors, actors, months);
        ``row_labels == col_labels`` the actors' addresses (sorted);
        ``info["mode_labels"]`` the months ("1999-05", ...); ``info["structural_zeros"]``
        the self loops (every month); ``info["names"]``, the rule, the parameters,
        the emails used and left out, the reader report.
    """
    min_count = _check_int("min_count", min_count, 0)
    span = None
    if months is not None:
        if isinstance(months, str) or len(months) != 2:
            raise ValueError(f"months must be (first, last), each YYYY-MM, got {months!r}")
        span = (_parse_month(months[0], "months[0]"), _parse_month(months[1], "months[1]"))
        if span[1] < span[0]:
            raise ValueError(f"months: the last month {months[1]} comes before the first {months[0]}")

    def build():
        return _build_tensor(_corpus_for(source, cache_dir, allow_partial, on_cache), min_count, span)

    params = {"min_count": min_count, "months": None if span is None else [month_label(m) for m in span]}
    data = _cached_count_data("enron-tensor", source, params, build, cache_dir, on_cache)
    # the self loops, beside the counts (a cached matrix's info is JSON: the mask is made here)
    Y = np.asarray(data.Y)
    n_actors, n_months = Y.shape[0], Y.shape[2]
    loops = np.zeros(Y.shape, dtype=bool)
    loops[np.arange(n_actors), np.arange(n_actors)] = True
    data.info["structural_zeros"] = loops
    if len(data.info.get("mode_labels", [[]])[0]) != n_months:
        raise ValueError(f"{source}: the cached tensor's month labels do not match its {n_months} months")
    return data


def _build_tensor(corpus, min_count, span) -> CountData:
    keep, sent, received, (edge_sender, edge_recipient, message_of_edge) = _network_actors(corpus, min_count)
    edge_month = np.asarray(corpus.months, dtype=np.int64)[message_of_edge]
    dated = edge_month >= 0
    if not dated.any():
        raise ValueError(
            f"{corpus.source}: no email between the {keep.size} actors passing min_count={min_count} has a "
            "readable Date header; a tensor over months needs dates"
        )
    if span is None:
        # every dated email once (not once per recipient) sets the span
        messages = np.unique(message_of_edge[dated])
        message_months = np.sort(np.asarray(corpus.months, dtype=np.int64)[messages])
        tail = int(np.floor(COVERAGE_TAIL * message_months.size))
        span = (int(message_months[tail]), int(message_months[message_months.size - 1 - tail]))
    first, last = span
    n_months = last - first + 1
    shape = (keep.size, keep.size, n_months)
    check_memory(
        dense_bytes(shape, np.int64),
        f"{corpus.source}: the {keep.size:,} x {keep.size:,} x {n_months:,} tensor of the actors passing "
        f"min_count={min_count} over {month_label(first)} to {month_label(last)}",
        fix="Raise min_count, or give fewer months (months=(first, last)).",
    )
    inside = dated & (edge_month >= first) & (edge_month <= last)
    Y = np.zeros(shape, dtype=np.int64)
    np.add.at(Y, (edge_sender[inside], edge_recipient[inside], edge_month[inside] - first), 1)
    if keep.size < 2 or not Y.any():
        raise ValueError(
            f"{corpus.source}: the {keep.size} actor(s) passing min_count={min_count} sent no email to one "
            f"another between {month_label(first)} and {month_label(last)}; lower min_count or widen months"
        )
    labels = [corpus.addresses[a] for a in keep]
    info = {
        "builder": "enron_tensor",
        "params": {"min_count": min_count, "months": [month_label(first), month_label(last)]},
        "rule": "the network's actors (sent >= 1 email and sent + received >= min_count, whole corpus); "
        "one count per distinct recipient over To, Cc and Bcc in the month of the Date header; no self loops; "
        f"months from the first to the last holding all but {COVERAGE_TAIL:.1%} of the dated emails at each end",
        "mode_labels": [[month_label(m) for m in range(first, last + 1)]],
        "names": [corpus.names[a] for a in keep],
        "sent": sent[keep].tolist(),
        "received": received[keep].tolist(),
        "n_emails_used": int(np.unique(message_of_edge[inside]).size),
        "n_emails_undated": int(np.unique(message_of_edge[~dated]).size),
        "n_emails_outside_months": int(np.unique(message_of_edge[dated & ~inside]).size),
        "report": corpus.report,
    }
    return CountData(Y=Y, row_labels=labels, col_labels=list(labels), model="tensor", source=corpus.source, info=info)
