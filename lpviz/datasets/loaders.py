"""Load your own count data into :class:`~lpviz.datasets.CountData`.

Formats (``kind``; detected from the file name and, for text tables, its
first lines):

``"edges"``
    An edge list ``source,target[,count]`` (``.csv`` comma, ``.tsv`` tab,
    ``.txt``/``.edges`` tab, comma or whitespace; optionally ``.gz``), with or
    without a header line, ``#``/``%`` comment lines at the top allowed (SNAP
    style). Gives a square sender x recipient count matrix (``model="blocks"``)
    whose rows and columns are the actors, sorted (numerically when every
    name is an integer). Repeated pairs add up; a missing count means 1.
    The first line is a header by rule: known column names (``source``,
    ``target``, ``count``, ``sender_email``, ``FromNodeId`` ...) and a count
    column that is not a number; never because a count failed to parse (a
    bad count on line 1 is an error naming it). Self loops are dropped with
    a warning (the block model has no diagonal); ``info["lines"]`` counts
    the lines read, skipped, merged and dropped.
``"npz"``
    A NumPy archive with the counts in ``Y`` (dense) or as CSR arrays
    ``Y_data``/``Y_indices``/``Y_indptr``/``Y_shape`` (what :func:`save_counts`
    writes), or a :func:`scipy.sparse.save_npz` file; optional ``vocab`` or
    ``col_labels``, ``row_labels``, ``model``.
``"mtx"``
    Matrix Market (``coordinate`` or ``array``, ``integer``/``real``/
    ``pattern``, ``general``/``symmetric``), rows are documents.
``"uci"``
    The UCI bag-of-words format: ``docword.NAME.txt[.gz]`` (three header
    lines D, W, NNZ, then ``docID wordID count``, 1-based) with
    ``vocab.NAME.txt`` beside it. The path may also be the folder holding them.
``"dense-csv"``
    A dense document x word table; a header line gives the words, a first
    column of non-numeric names (or an unnamed first header cell, as pandas
    writes) gives the document names.

Text tables with two or three columns and no recognisable header are read as
edge lists; pass ``kind="dense-csv"`` for a narrow dense matrix.

Every count must be a non-negative whole number of at most 10**12
(:data:`lpviz.release.MAX_COUNT`, the bound on every count lpviz fits), and so
must the sum of repeated entries (edge-list pairs, Matrix Market, UCI or CSR
duplicates): they are added exactly, never wrapping. Errors name the file,
the line (or cell) and what to do about it. Text files are parsed by pandas' C
reader (Matrix Market files by :func:`scipy.io.mmread`); when it or a check
fails, the file is scanned again line by line only to say exactly where.

Hostile or mistaken files cannot exhaust memory: before anything large is
allocated, what the file declares (a Matrix Market or UCI header, the .npy
headers inside an .npz, the number of actors of an edge list) and what its
text will cost to parse are checked against the memory budget
(:mod:`lpviz.budget`, ``LPVIZ_MEMORY_LIMIT``; an .npz goes through the
bounded reader, :class:`lpviz._files.Archive`); gzip files are decompressed
once as a stream to learn their size (and to find a truncated one) before
they are parsed. Refusals are :class:`~lpviz.budget.MemoryBudgetError`
(a ``ValueError``) naming the file, the size asked and the size allowed.
"""

import codecs
import csv
import functools
import gzip
import inspect
import json
import os
import re
import warnings
import zlib
from importlib import import_module
from pathlib import Path

import numpy as np
import pandas as pd
import scipy.io
import scipy.sparse as sp

from lpviz._files import atomic_write, check_input_path, check_path_text, decode_text, open_archive, output_exists
from lpviz.budget import MemoryBudgetError, check_memory, dense_bytes, format_bytes, memory_limit
from lpviz.release import MAX_COUNT, count_bound_problem, summed_counts

from ._types import CountData

__all__ = ["KINDS", "format_spec_options", "load_counts", "load_data", "parse_spec_options", "save_counts"]

KINDS = ("edges", "npz", "mtx", "uci", "dense-csv")

# Networks with at most this many actors come back dense (what the block
# model takes); bigger ones stay sparse CSR so memory follows the edges.
DENSE_NETWORK_MAX_ACTORS = 5000

_TABLE_SUFFIXES = (".csv", ".tsv", ".txt", ".edges", ".edgelist", ".tab")
_EDGE_HEADER_WORDS = {
    "source",
    "target",
    "src",
    "dst",
    "from",
    "to",
    "sender",
    "recipient",
    "receiver",
    "node1",
    "node2",
    "u",
    "v",
    "i",
    "j",
    "head",
    "tail",
    "count",
    "weight",
    "n",
    "value",
    "fromnodeid",
    "tonodeid",
}
_GZIP_MAGIC = b"\x1f\x8b"
_ZIP_MAGIC = b"PK\x03\x04"
_INT_RE = re.compile(r"^[+-]?\d+$")
_DIGITS_RE = re.compile(r"(\d+)")
_ENCODING = "utf-8-sig"  # tolerate a byte-order mark from spreadsheet exports

# Counts are read as float64 from text, exact up to 2**53; lpviz's bound MAX_COUNT (10**12,
# lpviz.release) is far below, so every accepted count was read exactly.

# Memory a byte of text costs once parsed, per format: peak RSS growth over file size on the
# least favourable files (shortest fields), rounded up: edges "12,34" 14x, dense "0,1,0" 23x,
# UCI "1 2 3" 10x. pandas' tables of float64 and Python strings, the checks, the CSR or dense
# result and the labels. Matrix Market is bounded by its header (scipy.io.mmread parses in C).
_TEXT_COST = {"edges": 24, "dense-csv": 32, "uci": 16, "mtx": 4}
_LABEL_BYTES = 64  # one row/column name as a Python str in a list ("123456": 55 + 8 bytes)
_CHECK_CHUNK = 1 << 20  # cells checked at a time, so checking never copies a whole matrix


# ---------------------------------------------------------------- public API


def load_counts(path, kind=None, *, header=None, vocab=None, allow_zero=False):
    """Read a count matrix from a file.

    Parameters
    ----------
    path : str or Path
        The file (for ``kind="uci"`` also the folder holding ``docword.*``).
    kind : {"edges", "npz", "mtx", "uci", "dense-csv"}, optional
        The format; detected from the name and content when omitted.
    header : bool, optional
        Text tables only: whether the first line is a header. Detected by
        rule when omitted: for an edge list, known column names such as
        ``source,target,count`` with a non-numeric count column; for a dense
        table, a name (not a number) in every count column.
    vocab : str, Path or sequence of str, optional
        Document-term formats: the column (word) names, as a list or a file
        with one word per line. Overrides names stored in the file; for UCI
        files it replaces the ``vocab.NAME.txt`` beside the counts.
    allow_zero : bool
        Accept a matrix without a single count (refused by default: there is
        nothing to fit; noising one is fine).

    Returns
    -------
    CountData
        ``model="blocks"`` for edge lists (square, dense up to
        ``DENSE_NETWORK_MAX_ACTORS`` actors), ``model="topics"`` otherwise
        (sparse CSR for ``.mtx`` and UCI files). ``info["format"]`` says how
        the file was read.
    """
    # NUL bytes, over-long paths, FIFOs and devices: refused here, before any reader opens the path
    path = check_input_path(path, what="data file", fix="check the path", folder_ok=True)
    if path.is_file() and path.name.lower().endswith(".gz"):
        _text_bytes(path)  # a gzip bomb or a truncated file is refused before a line is read
    guessed = kind is None
    if guessed:
        kind = _detect_kind(path)
    elif kind not in KINDS:
        raise ValueError(f"kind={kind!r} is not a format lpviz reads; use one of {', '.join(KINDS)}")
    if kind != "uci" and path.is_dir():
        raise ValueError(f"{path} is a folder; give the data file inside it")
    if kind == "npz":
        data = _load_npz(path)
    elif kind == "mtx":
        data = _load_mtx(path)
    elif kind == "uci":
        data = _load_uci(path, vocab)
    elif kind == "edges" and guessed:
        data = _load_guessed_edges(path, header)
    elif kind == "edges":
        data = _load_edges(path, header)
    else:
        data = _load_dense_csv(path, header)
    if vocab is not None and kind not in ("uci", "edges"):
        data.col_labels = _vocab_list(vocab, data.shape[1], path)
    elif vocab is not None and kind == "edges":
        raise ValueError(f"{path}: vocab= is for document-term matrices; an edge list names its actors itself")
    data.info.setdefault("format", kind)
    _check_not_empty(data, path, allow_zero)
    return data


def save_counts(data, path, *, overwrite=False):
    """Write ``data`` (a :class:`CountData`) to ``path`` (``.npz``), atomically.

    Sparse counts are stored as CSR arrays, labels as text, ``info`` as JSON,
    so :func:`load_counts` gives the same matrix back. An existing file is
    only replaced with ``overwrite=True``.
    """
    path = Path(path)
    if path.suffix != ".npz":
        raise ValueError(f"{path}: counts are saved as NumPy archives; give a name ending in .npz")
    if output_exists(path) and not overwrite:
        raise FileExistsError(f"{path} already exists; choose another name or pass overwrite=True")
    arrays = {
        "row_labels": np.asarray([decode_text(label) for label in data.row_labels], dtype=str),
        "col_labels": np.asarray([decode_text(label) for label in data.col_labels], dtype=str),
        "model": np.asarray(data.model, dtype=str),
        "source": np.asarray(data.name, dtype=str),  # the data set's name, never its folder
        "info_json": np.asarray(json.dumps(data.info, default=_json_default), dtype=str),
    }
    if sp.issparse(data.Y):
        csr = sp.csr_matrix(data.Y)
        arrays.update(
            Y_data=np.asarray(csr.data, dtype=np.int64),
            Y_indices=csr.indices,
            Y_indptr=csr.indptr,
            Y_shape=np.asarray(csr.shape, dtype=np.int64),
        )
    else:
        arrays["Y"] = np.asarray(data.Y, dtype=np.int64)
    return atomic_write(path, lambda handle: np.savez(handle, **arrays))


# spec name -> (module, function, whether the spec carries a path)
_SPEC_SOURCES = {
    "enron-topics": ("lpviz.datasets.enron", "build_enron_topics", True),
    "enron-network": ("lpviz.datasets.enron", "build_enron_network", True),
    "enron-tensor": ("lpviz.datasets.enron", "enron_tensor", True),
    "synthetic-topics": ("lpviz.datasets.synthetic", "make_topics", False),
    "synthetic-blocks": ("lpviz.datasets.synthetic", "make_blocks", False),
    "synthetic-tensor": ("lpviz.datasets.synthetic", "make_tensor", False),
    "synthetic-topics-blockwise": ("lpviz.datasets.blockwise", "make_topics_blockwise", False),
}


def load_data(spec, **options):
    """Resolve a data spec, as the CLI and the app take it, to :class:`CountData`.

    ``spec`` is one of ``"enron-topics:PATH"`` / ``"enron-network:PATH"`` / ``"enron-tensor:PATH"``
    (the paper's two Enron matrices built from a maildir, tarball or
    ``emails.csv``), ``"synthetic-topics"`` / ``"synthetic-blocks"``
    (generated with known truth), ``"synthetic-topics-blockwise"`` (a
    :class:`~lpviz.datasets.BlockwiseTopics`, built where its rows are needed),
    a generator's spec with options ``"NAME:key=value,..."`` (e.g.
    ``"synthetic-topics-blockwise:n_docs=200000,n_words=2000,n_topics=50"``: ints,
    floats, true/false; ``parse_spec_options`` in this module), ``"KIND:PATH"`` with a ``kind`` of
    :func:`load_counts`, or a plain file path. ``options`` go to the builder
    (for example ``n_docs``, ``n_words``, ``min_count``, ``random_state``,
    ``cache_dir``; ``header``/``vocab`` for files).
    """
    if isinstance(spec, os.PathLike):
        return _call_with_options(load_counts, (spec,), options, str(spec))
    if not isinstance(spec, str) or not spec:
        raise TypeError(f"data spec must be a non-empty string or path, got {spec!r}")
    name, colon, rest = spec.partition(":")
    if name in _SPEC_SOURCES:
        module_name, function_name, takes_path = _SPEC_SOURCES[name]
        if takes_path and not rest:
            raise ValueError(
                f"data spec {spec!r} needs a path: write {name}:PATH (a maildir folder, the CMU .tar.gz or emails.csv)"
            )
        builder = getattr(import_module(module_name), function_name)
        if not takes_path and colon:  # a generator's sizes and settings: NAME:key=value,...
            options = {**_spec_options(spec, name, rest, builder, options), **options}
        if takes_path:  # a folder (maildir), a tarball or a CSV: refused here if a FIFO, a device, NUL bytes ...
            check_input_path(
                rest, what="Enron source", fix="give a maildir folder, the CMU .tar.gz or emails.csv", folder_ok=True
            )
        return _call_with_options(builder, (rest,) if takes_path else (), options, spec)
    if name in KINDS and colon:
        return _call_with_options(load_counts, (rest,), {**options, "kind": name}, spec)
    check_path_text(spec)
    if not os.path.lexists(spec):
        raise FileNotFoundError(
            f"no data at {spec!r}: give an existing file, or one of "
            + ", ".join(f"{key}:PATH" if takes else key for key, (_, _, takes) in _SPEC_SOURCES.items())
            + f", or KIND:PATH with KIND in {', '.join(KINDS)}"
        )
    return _call_with_options(load_counts, (spec,), options, spec)


def parse_spec_options(text):
    """``"n_docs=200000,alpha0=0.5,exact=false"`` -> ``{"n_docs": 200000, "alpha0": 0.5, "exact": False}``:
    the options of a generator's data spec (``NAME:OPTIONS``), each value an int (``200000``,
    ``200_000``), a finite float (``0.5``, ``1e-3``) or a bool (``true``/``false``). Raises
    ValueError naming the pair that is not one, with the form to write instead."""
    options = {}
    for pair in text.split(","):
        key, equals, value = (part.strip() for part in pair.partition("="))
        if not equals or not key.isidentifier() or not value:
            raise ValueError(f"{pair!r} is not a key=value option; write e.g. n_docs=200000,n_words=2000")
        if key in options:
            raise ValueError(f"{key} is given twice; give each option once")
        options[key] = _spec_value(key, value)
    return options


def format_spec_options(options):
    """The inverse of :func:`parse_spec_options`: ``{"n_docs": 200000}`` -> ``"n_docs=200000"``."""
    return ",".join(
        f"{key}={str(value).lower() if isinstance(value, bool) else repr(value)}" for key, value in options.items()
    )


_SPEC_INT_RE = re.compile(r"^[+-]?\d+(_\d+)*$")


def _spec_value(key, text):
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    if _SPEC_INT_RE.match(text):
        return int(text)
    try:
        value = float(text)
    except ValueError:
        value = None
    if value is None or not np.isfinite(value):
        raise ValueError(f"{key}={text}: the value is not a number or true/false; write e.g. {key}=1000")
    return value


def _spec_options(spec, name, text, builder, given):
    """The options written in a generator's spec, checked against what ``builder`` takes and the
    options also given as keywords (one ValueError naming the problem and the fix)."""
    accepted = list(inspect.signature(builder).parameters)
    try:
        options = parse_spec_options(text)
    except ValueError as error:
        raise ValueError(
            f"data spec {spec!r}: {error} ({name} takes no path; its options: {', '.join(accepted)})"
        ) from None
    unknown = [key for key in options if key not in accepted]
    if unknown:
        raise ValueError(
            f"data spec {spec!r}: {name} has no option {', '.join(unknown)}; it takes {', '.join(accepted)}"
        )
    twice = [key for key in options if key in given]
    if twice:
        raise ValueError(
            f"data spec {spec!r}: {', '.join(twice)} also given as a keyword option (e.g. the CLI's --noise-seed "
            "sets random_state); give each once"
        )
    return options


def _call_with_options(function, args, options, spec):
    parameters = inspect.signature(function).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    unknown = sorted(set(options) - set(parameters))
    if unknown and not takes_any:
        accepted = list(parameters)[len(args) :]
        raise TypeError(
            f"data spec {spec!r}: unknown option(s) {', '.join(unknown)}; "
            f"{function.__name__} takes {', '.join(accepted)}"
        )
    return function(*args, **options)


# ---------------------------------------------------------------- detection


def _detect_kind(path):
    name = path.name.lower()
    if path.is_dir():
        _docword_in(path)  # raises if there is none
        return "uci"
    if name.endswith(".npz"):
        return "npz"
    if name.endswith((".mtx", ".mtx.gz")):
        return "mtx"
    if name.startswith("docword."):
        return "uci"
    if _strip_gz(name).endswith(_TABLE_SUFFIXES):
        return _sniff_table_kind(path)
    raise ValueError(
        f"{path}: cannot tell the format from the name {path.name!r}. lpviz reads edge lists and "
        "dense tables (.csv/.tsv/.txt), .npz, Matrix Market .mtx and UCI docword.*.txt; "
        f"rename the file or pass kind= (one of {', '.join(KINDS)})"
    )


def _load_guessed_edges(path, header):
    """An edge list lpviz guessed from the first line: a refusal says so, and where the lines are
    numbers, what the file's first bad line is read as a document x word table (the user's
    ``1,2,3 / 4,five,6 / 7,8`` was refused at line 3 as an edge list, though line 2 is its first
    bad line as a table)."""
    try:
        return _load_edges(path, header)
    except ValueError as error:
        if not str(error).startswith(f"{path}, line "):  # not a line lpviz could not read: no format to question
            raise
        said = (
            f"{str(error).rstrip('.')}. lpviz read {path.name} as an edge list (source,target[,count]), "
            "guessed from its first line"
        )
        sep, skiprows = _table_layout(path)
        first = next((fields for _, fields in _iter_rows(path, sep, skiprows, limit=1)), [])
        if not first or not all(_is_number(field) for field in first):
            raise ValueError(f"{said}; if it is a document x word table, pass kind='dense-csv'") from None
        try:
            _load_dense_csv(path, header)
        except ValueError as table_error:
            words = str(table_error).removeprefix(f"{path}").lstrip(",: ")
            raise ValueError(f"{said}; read as a document x word table (kind='dense-csv'): {words}") from None
        raise ValueError(f"{said}; it reads as a document x word table: pass kind='dense-csv'") from None


def _sniff_table_kind(path):
    sep, skiprows = _table_layout(path)
    rows = [fields for _, fields in _iter_rows(path, sep, skiprows, limit=20)]
    if not rows:
        raise ValueError(f"{path}: no data lines (only blank or comment lines); is it the right file?")
    first, rest = rows[0], rows[1:]
    if len(first) > 3:
        return "dense-csv"
    if len(first) < 2:
        raise ValueError(
            f"{path}, line {skiprows + 1}: a single column is neither an edge list "
            "(source,target[,count]) nor a document x word table; check the separator"
        )
    if _is_edge_header(first):
        return "edges"
    # A narrow dense table: a header of words over rows of numbers (names, if any, only in front).
    # Anything else with two or three columns is an edge list.
    if not _is_word_header(first) or not rest:
        return "edges"
    numeric_rows = all(len(r) == len(first) and all(_is_number(x) for x in r[1:]) for r in rest)
    names_in_front = all(len(r) < 2 or (not _is_number(r[0]) and not _is_number(r[1])) for r in rest)
    return "dense-csv" if numeric_rows and not names_in_front else "edges"


# words that make a column name an edge list's when part of it (sender_email); the one-letter names count only whole
_EDGE_ROLE_WORDS = _EDGE_HEADER_WORDS - {"u", "v", "i", "j", "n"}


def _is_edge_name(field):
    """A column name of an edge list: one of the usual names, or made of one (``sender_email``, ``FromNodeId``)."""
    name = field.strip()
    if name.lower() in _EDGE_HEADER_WORDS:
        return True
    words = re.split(r"[^a-z0-9]+", re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name).lower())
    return any(word in _EDGE_ROLE_WORDS for word in words)


def _is_edge_header(fields):
    """The rule for an edge list's header line: two or three known column names, the count column not a number."""
    if len(fields) not in (2, 3) or (len(fields) == 3 and _is_number(fields[2])):
        return False
    return all(_is_edge_name(field) for field in fields)


def _is_word_header(fields):
    """The rule for a dense table's header line: every count column a non-numeric name (the first cell
    may be empty or a name, over a column of document names)."""
    first, counts = fields[0].strip(), fields[1:]
    return bool(counts) and all(cell.strip() and not _is_number(cell) for cell in counts) and not _is_number(first)


# ---------------------------------------------------------------- text tables


def _strip_gz(name):
    return name[:-3] if name.endswith(".gz") else name


def _is_gz(path):
    return path.name.lower().endswith(".gz")


def _open_text(path):
    """The file as text; undecodable bytes are kept as surrogates for :func:`_iter_lines` to name."""
    if _is_gz(path):
        return gzip.open(path, "rt", encoding=_ENCODING, errors="surrogateescape", newline=None)
    return open(path, encoding=_ENCODING, errors="surrogateescape", newline=None)


def _iter_lines(path):
    """(line number, text) of every line; a byte that is not UTF-8 is an error naming file and line."""
    with _open_text(path) as handle:
        for number, line in enumerate(handle, start=1):
            if not line.isascii():
                try:
                    line.encode("utf-8")
                except UnicodeEncodeError as error:
                    byte = line[error.start].encode("utf-8", "surrogateescape")
                    raise ValueError(
                        f"{path}, line {number}: not UTF-8 text (byte {byte!r} at character "
                        f"{error.start + 1}); save it as UTF-8"
                    ) from None
            yield number, line


def _check_text_file(path):
    """Refuse binary or wrongly named compressed files before parsing them."""
    with open(path, "rb") as raw:
        head = raw.read(8192)
    if _is_gz(path):
        if not head.startswith(_GZIP_MAGIC):
            raise ValueError(f"{path}: named .gz but not gzip-compressed; remove the .gz from its name")
        _text_bytes(path)  # the whole stream is sound and not a bomb
        with gzip.open(path, "rb") as unzipped:
            head = unzipped.read(8192)
    elif head.startswith(_GZIP_MAGIC):
        raise ValueError(
            f"{path}: this file is gzip-compressed but its name does not end in .gz; "
            f"rename it to {path.name}.gz or decompress it (gunzip)"
        )
    if head.startswith(_ZIP_MAGIC):
        raise ValueError(
            f"{path}: this is a zip archive (perhaps a NumPy .npz), not a text table; rename it to .npz or unzip it"
        )
    if b"\x00" in head:
        raise ValueError(f"{path}: binary content, not a text table; check that it is the right file")
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)  # may end inside a character
    except UnicodeDecodeError as error:
        line = head[: error.start].count(b"\n") + 1
        raise ValueError(
            f"{path}, line {line}: not UTF-8 text (byte {head[error.start : error.start + 1]!r} at byte "
            f"{error.start + 1} of the file); save it as UTF-8"
        ) from None


def _text_bytes(path):
    """Bytes of text in ``path``: its size, or for gzip its decompressed size.

    A gzip stream is decompressed once, a MiB at a time, and given up as soon
    as its text could not be parsed within the memory budget even by the
    leanest format, so a bomb costs a bounded time and no memory. A truncated
    or damaged stream is a ValueError saying where it stops.
    """
    stat = path.stat()
    return _text_bytes_cached(str(path), stat.st_size, stat.st_mtime_ns, memory_limit())


@functools.lru_cache(maxsize=16)
def _text_bytes_cached(name, size, mtime_ns, limit):
    path = Path(name)
    if not _is_gz(path):
        return size
    with open(path, "rb") as raw:
        if raw.read(2) != _GZIP_MAGIC:
            return size  # not gzip: _check_text_file names the problem
    cost = _least_text_cost(path.name.lower())
    cap = limit // cost
    total = 0
    try:
        with gzip.open(path, "rb") as stream:
            while chunk := stream.read(1 << 20):
                total += len(chunk)
                if total > cap:
                    # stopped early: what parsing would need is only known to be above the limit
                    raise MemoryBudgetError(
                        f"{path}: its text decompresses to more than {format_bytes(total)} (from "
                        f"{format_bytes(size)} of gzip); parsing that much text needs more than the memory "
                        f"limit of {format_bytes(limit)} (set LPVIZ_MEMORY_LIMIT to change it). Is it a "
                        "decompression bomb? Otherwise split the file."
                    )
    except (EOFError, OSError, zlib.error) as error:
        raise ValueError(
            f"{path}: the gzip data is truncated or damaged: it stops after {total:,} decompressed "
            f"bytes ({error}); download or compress the file again"
        ) from None
    return total


def _least_text_cost(name):
    """The cheapest format a file of this name could be read as (before its kind is known)."""
    if name.endswith(".mtx.gz"):
        return _TEXT_COST["mtx"]
    if name.startswith("docword."):
        return _TEXT_COST["uci"]
    return min(_TEXT_COST["edges"], _TEXT_COST["dense-csv"])


def _check_text_budget(path, kind, what):
    """The text of ``path``, parsed as ``kind``, against the memory budget."""
    text = _text_bytes(path)
    check_memory(
        text * _TEXT_COST[kind],
        f"{path}: parsing {format_bytes(text)} of text as {what}",
        fix="Split the file, or convert it to a compact format (.npz with sparse arrays).",
    )


def _table_layout(path):
    """(separator, number of leading comment lines) of a text table."""
    _check_text_file(path)
    name = _strip_gz(path.name.lower())
    skiprows = 0
    first = ""
    for _, line in _iter_lines(path):
        if line.startswith(("#", "%")):
            skiprows += 1
            continue
        if line.strip():
            first = line
            break
        skiprows += 1  # blank lines before the data are skipped the same way
    if name.endswith(".csv"):
        return ",", skiprows
    if name.endswith(".tsv"):
        return "\t", skiprows
    if "\t" in first:
        return "\t", skiprows
    if "," in first:
        return ",", skiprows
    return None, skiprows  # runs of whitespace


def _split(line, sep):
    """A line's fields as pandas' C reader sees them: a quoted field may hold the separator
    (``"Smith, J",b,3`` is three fields)."""
    line = line.rstrip("\r\n")
    if sep is None:
        return line.split()
    if '"' not in line:
        return line.split(sep)
    return next(csv.reader([line], delimiter=sep), [])


def _iter_rows(path, sep, skiprows, limit=None):
    """(line number, fields) of the data lines, skipping blank lines like pandas."""
    count = 0
    for number, line in _iter_lines(path):
        if number <= skiprows or not line.strip():
            continue
        yield number, _split(line, sep)
        count += 1
        if limit is not None and count >= limit:
            return


def _row_line(path, sep, skiprows, row):
    """File line number of the ``row``-th data row (0-based)."""
    for index, (number, _) in enumerate(_iter_rows(path, sep, skiprows)):
        if index == row:
            return number
    return None


def _is_number(text):
    try:
        float(text)
    except ValueError:
        return False
    return text.strip().lower() not in ("nan", "inf", "-inf", "+inf", "infinity", "-infinity")


def _read_table(path, sep, skiprows, columns, what, numeric_from=0, first_line_hint=""):
    """Parse a text table with pandas; on failure find and name the bad line.

    ``columns`` are the column names (their number is the expected field
    count), columns from ``numeric_from`` on are parsed as numbers.
    """
    dtype = {c: (np.float64 if i >= numeric_from else object) for i, c in enumerate(columns)}
    try:
        return pd.read_csv(
            path,
            sep=r"\s+" if sep is None else sep,
            header=None,
            names=list(range(len(columns))),
            skiprows=skiprows,
            dtype={i: dtype[c] for i, c in enumerate(columns)},
            keep_default_na=False,
            na_values=[""],
            encoding=_ENCODING,
            compression="infer",
            skip_blank_lines=True,
            engine="c",
        )
    except (pd.errors.ParserError, ValueError, UnicodeDecodeError, EOFError, OSError) as error:
        _diagnose_table(path, sep, skiprows, columns, what, numeric_from, first_line_hint)
        raise ValueError(f"{path}: could not read it as {what}: {error}") from None


def _diagnose_table(path, sep, skiprows, columns, what, numeric_from, first_line_hint=""):
    """Raise a ValueError for the first line with a wrong field count or a non-number."""
    for row, (number, fields) in enumerate(_iter_rows(path, sep, skiprows)):
        if len(fields) != len(columns):
            raise ValueError(
                f"{path}, line {number}: {len(fields)} fields where {what} has {len(columns)} "
                f"({', '.join(columns)}); fix the ragged line (separator: {_sep_name(sep)})"
            )
        for column, cell in enumerate(fields[numeric_from:], start=numeric_from):
            if not _is_number(cell):
                raise ValueError(
                    f"{path}, line {number}: {columns[column]} {cell.strip()!r} is not a number; "
                    f"counts must be non-negative whole numbers{first_line_hint if row == 0 else ''}"
                )


def _sep_name(sep):
    return {None: "whitespace", ",": "comma", "\t": "tab"}.get(sep, repr(sep))


def _check_count_values(values, path, describe_position, hint=None):
    """Counts must be finite, non-negative, whole and below MAX_COUNT: else name where and how to fix.

    Checked a chunk at a time, so the only large allocation is the int64
    result (none when the values already are int64).
    """
    values = np.asarray(values)
    if values.dtype.kind not in "biuf":
        raise ValueError(f"{path}: counts of type {values.dtype} cannot be read; save whole numbers")
    flat = values.reshape(-1) if values.dtype.kind != "b" else values[:0]  # booleans need no check
    for start in range(0, flat.size, _CHECK_CHUNK):
        chunk = flat[start : start + _CHECK_CHUNK]
        if values.dtype.kind == "f":
            bad = ~np.isfinite(chunk) | (chunk < 0) | (chunk != np.floor(chunk)) | (chunk > MAX_COUNT)
        else:
            bad = (chunk < 0) | (chunk > MAX_COUNT)
        if bad.any():
            offset = int(np.flatnonzero(bad)[0])
            index = np.unravel_index(start + offset, values.shape)
            extra = hint(index) if hint is not None else ""
            raise ValueError(f"{path}, {describe_position(index)}: {_count_problem(chunk[offset])}{extra}")
    return values.astype(np.int64, copy=False)


def _count_problem(value):
    if not np.isfinite(value):
        return "a missing or non-finite count; fill in every count (a ragged line?)"
    if value < 0:
        return (
            f"a negative count {value:g}; counts must be >= 0; privatized data with negative values is "
            "what privatize() makes, load the true counts here"
        )
    if value > MAX_COUNT:
        return count_bound_problem(value)
    return f"a fractional count {value:g}; counts must be whole numbers; round them or check the column"


# ---------------------------------------------------------------- edge lists


def _load_edges(path, header):
    sep, skiprows = _table_layout(path)
    _check_text_budget(path, "edges", "an edge list")
    preview = [fields for _, fields in _iter_rows(path, sep, skiprows, limit=20)]
    if not preview:
        raise ValueError(f"{path}: no edges (only blank or comment lines); expected lines source,target[,count]")
    first = preview[0]
    n_fields = len(first)
    if n_fields not in (2, 3):
        raise ValueError(
            f"{path}, line {skiprows + 1}: {n_fields} fields; an edge list has "
            f"source,target or source,target,count (separator: {_sep_name(sep)}); "
            "pass kind='dense-csv' if it is a document x word table"
        )
    first_line = _skip_through_first_row(path, sep, skiprows)
    if header is None:
        # by rule, never because a count failed to parse: known column names, the count column not a number
        header = _is_edge_header(first)
        if not header and _names_over_ids(first, preview[1:]):
            raise ValueError(
                f"{path}, line {first_line}: {sep_join(first, sep)!r} looks like a header (names where every "
                "other line has numeric ids) but its column names are not ones lpviz knows; name the columns "
                "source,target[,count], or pass header=True (header=False if it is an edge)"
            )
    columns = ["source", "target", "count"][:n_fields]
    if header:
        skiprows = first_line
    hint = (
        f"; if line {first_line} is a header, name its columns source,target,count (or pass header=True)"
        if not header
        else ""
    )
    table = _read_table(path, sep, skiprows, columns, "an edge list", numeric_from=2, first_line_hint=hint)
    if table.empty:
        raise ValueError(f"{path}: only a header line, no edges; add lines source,target[,count]")

    def position(row):
        number = _row_line(path, sep, skiprows, row)
        return f"line {number}"

    n_lines = len(table)
    # Names are hashed once (factorize) and only the distinct ones stripped and sorted: the
    # work per line stays in C, a fixed-width numpy string array is never made.
    codes, names = pd.factorize(np.concatenate([table[0].to_numpy(dtype=object), table[1].to_numpy(dtype=object)]))
    stripped = np.asarray([str(name).strip() for name in names], dtype=object)
    empty = np.append(stripped == "", True)  # code -1 (a missing cell) indexes the last entry
    missing = empty[codes]
    if missing.any():
        line, column = _first_missing(np.flatnonzero(missing), n_lines)
        raise ValueError(
            f"{path}, {position(line)}: empty {('source', 'target')[column]}; every line needs "
            "source and target (a ragged line?)"
        )
    if n_fields == 3:
        counts = _check_count_values(
            table[2].to_numpy(),
            path,
            lambda index: position(index[0]),
            hint=lambda index: hint if index[0] == 0 else "",
        )
    else:
        counts = np.ones(n_lines, dtype=np.int64)
    del table
    labels, rank = _actor_codes(stripped)
    codes = rank[codes]
    n = len(labels)
    rows, cols = codes[:n_lines], codes[n_lines:]
    # The block model has no self loops (its diagonal is a structural zero): they are dropped, counted
    # and warned about, never fitted silently as zeros.
    loops = rows == cols
    n_loops = int(loops.sum())
    loop_counts = int(counts[loops].sum()) if n_loops else 0
    if n_loops == n_lines:
        raise ValueError(
            f"{path}: every one of its {n_lines:,} lines is a self loop (an actor to itself); the block model "
            "has no self loops (a network's diagonal does not exist), so nothing is left to fit; is it the "
            "right file?"
        )
    if n_loops:
        keep = ~loops
        rows, cols, counts = rows[keep], cols[keep], counts[keep]
        warnings.warn(
            f"{path.name}: {n_loops:,} self-loop line{'s' if n_loops != 1 else ''} (an actor to itself, "
            f"{loop_counts:,} counts) dropped: the block model has no self loops",
            UserWarning,
            stacklevel=4,
        )
    # repeated pairs add up, exactly, and their sum is held to the bound like any count
    Y = summed_counts(
        sp.coo_matrix((counts, (rows, cols)), shape=(n, n)),
        str(path),
        lambda row, col: f"the pair {labels[row]!r} -> {labels[col]!r}",
    )
    pairs = Y.nnz  # explicit zeros (lines with count 0) included: every distinct pair once
    zero_lines = int((counts == 0).sum())
    Y.eliminate_zeros()
    total_lines, _ = _line_count(path)
    info = {
        "format": "edges",
        "n_edge_lines": int(n_lines),
        "lines": {
            "total": total_lines,
            "header": int(bool(header)),
            "skipped_blank_or_comment": max(0, total_lines - n_lines - int(bool(header))),
            "edges": int(n_lines),
            "merged_repeated_pairs": int(n_lines - n_loops - pairs),
            "self_loops_dropped": n_loops,
            "self_loop_counts_dropped": loop_counts,
            "zero_counts": zero_lines,
        },
    }
    if n <= DENSE_NETWORK_MAX_ACTORS:
        check_memory(
            dense_bytes((n, n), np.int64),
            f"{path}: the dense {n:,} x {n:,} network",
            fix="Lower the memory it needs elsewhere, or keep fewer actors.",
        )
        Y = Y.toarray()
    return CountData(Y=Y, row_labels=labels, col_labels=list(labels), model="blocks", source=str(path), info=info)


def sep_join(fields, sep):
    return (" " if sep is None else sep).join(fields)


def _names_over_ids(first, rest):
    """True when line 1 has non-numeric names where every following line has integer ids."""
    return (
        bool(rest)
        and not any(_INT_RE.match(field.strip()) for field in first[:2])
        and all(len(r) >= 2 and all(_INT_RE.match(field.strip()) for field in r[:2]) for r in rest)
    )


def _line_count(path):
    """(lines, bytes) of a text file (a .gz decompressed), counted a MiB at a time."""
    lines = size = 0
    last = b"\n"
    with gzip.open(path, "rb") if _is_gz(path) else open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            lines += chunk.count(b"\n")
            size += len(chunk)
            last = chunk[-1:]
    return lines + (last != b"\n"), size


def describe_lines(info):
    """One line on what reading a file dropped or merged (edge lists), or "" when nothing was."""
    lines = info.get("lines")
    if not lines:
        return ""
    parts = [f"{lines['edges']:,} edge lines read"]
    if lines["header"]:
        parts.append("1 header line")
    if lines["skipped_blank_or_comment"]:
        parts.append(f"{lines['skipped_blank_or_comment']:,} blank or comment lines skipped")
    if lines["merged_repeated_pairs"]:
        parts.append(f"{lines['merged_repeated_pairs']:,} repeated pairs added to earlier lines")
    if lines["self_loops_dropped"]:
        parts.append(
            f"{lines['self_loops_dropped']:,} self loops dropped ({lines['self_loop_counts_dropped']:,} counts)"
        )
    if lines["zero_counts"]:
        parts.append(f"{lines['zero_counts']:,} lines with count 0")
    return "; ".join(parts)


def _skip_through_first_row(path, sep, skiprows):
    """Lines to skip so pandas starts after the header line."""
    for number, _ in _iter_rows(path, sep, skiprows, limit=1):
        return number
    return skiprows


def _first_missing(flat, n_lines):
    """(line, column) of the first empty name: sources are checked before targets."""
    sources = flat[flat < n_lines]
    return (int(sources[0]), 0) if sources.size else (int(flat[0]) - n_lines, 1)


def _natural_key(name):
    """Sort key of ``name`` comparing its digit runs as numbers; text and number parts alternate
    (re.split keeps the digits at odd positions), so two keys never compare a str with an int."""
    parts = _DIGITS_RE.split(name)
    parts[1::2] = [int(part) for part in parts[1::2]]
    return parts


def _actor_codes(names):
    """Sorted actor names and the rank of each given name: numerically if all are integers, else
    naturally (digit runs compare as numbers: actor2 before actor10, as people number actors).

    Names that are equal once stripped become one actor. They stay Python
    strings: a fixed-width numpy string array would cost the longest name
    times the number of names.
    """
    codes, unique = pd.factorize(names)
    unique = np.asarray(unique, dtype=object)
    order = np.argsort(unique, kind="stable")  # lexicographic, as str comparison orders
    if all(_INT_RE.match(name) for name in unique):
        numbers = np.asarray([int(name) for name in unique[order]], dtype=object)
        order = order[np.argsort(numbers, kind="stable")]
    else:
        # sorted() is stable, so names with equal keys ("a01", "a1") keep their text order
        order = np.asarray(sorted(order, key=lambda k: _natural_key(unique[k])), dtype=np.int64)
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return [str(name) for name in unique[order]], rank[codes]


# ---------------------------------------------------------------- dense CSV


def _load_dense_csv(path, header):
    sep, skiprows = _table_layout(path)
    _check_text_budget(path, "dense-csv", "a dense document x word table")
    preview = [fields for _, fields in _iter_rows(path, sep, skiprows, limit=50)]
    if not preview:
        raise ValueError(f"{path}: no rows (only blank or comment lines); expected a document x word table")
    first = preview[0]
    if header is None:
        header = _is_word_header(first)  # by rule: every count column of line 1 a name
    data_preview = preview[1:] if header else preview
    has_row_labels = bool(data_preview) and (
        any(not _is_number(r[0]) for r in data_preview) or (header and first[0].strip() == "" and len(first) > 1)
    )
    n_fields = len(first)
    words = [cell.strip() for cell in (first[1:] if has_row_labels else first)] if header else None
    if header:
        skiprows = _skip_through_first_row(path, sep, skiprows)
    offset = 1 if has_row_labels else 0
    columns = (["document name"] if has_row_labels else []) + [f"column {c + 1}" for c in range(offset, n_fields)]
    table = _read_table(path, sep, skiprows, columns, "a dense document x word table", numeric_from=offset)
    if table.empty:
        raise ValueError(f"{path}: only a header line, no documents; add one line of counts per document")

    def position(index):
        number = _row_line(path, sep, skiprows, int(index[0]))
        return f"line {number}, column {int(index[1]) + offset + 1}"

    Y = _check_count_values(table.iloc[:, offset:].to_numpy(dtype=np.float64), path, position)
    n_docs, n_words = Y.shape
    row_labels = [str(x).strip() for x in table[0]] if has_row_labels else [str(i) for i in range(n_docs)]
    col_labels = words if words is not None else [str(j) for j in range(n_words)]
    if len(col_labels) != n_words:
        raise ValueError(
            f"{path}: the header names {len(col_labels)} words but rows have {n_words} counts; fix the header line"
        )
    return CountData(
        Y=Y,
        row_labels=row_labels,
        col_labels=col_labels,
        model="topics",
        source=str(path),
        info={"format": "dense-csv"},
    )


# ---------------------------------------------------------------- coordinate files (UCI, Matrix Market)


def _read_triples(path, skiprows, n_rows, n_cols, nnz, what):
    """1-based ``row col count`` lines -> CSR (n_rows, n_cols), with checks."""
    columns = ["row id", "column id", "count"]
    table = _read_table(path, None, skiprows, columns, what)
    values = table.to_numpy(dtype=np.float64)
    n_lines = len(table)
    del table

    def position(index):
        number = _row_line(path, None, skiprows, int(index[0]))
        return f"line {number}"

    unreadable = ~np.isfinite(values[:, :2]) | (values[:, :2] != np.floor(values[:, :2]))
    if unreadable.any():
        row, column = np.argwhere(unreadable)[0]
        raise ValueError(
            f"{path}, {position((row,))}: {columns[column]} is missing or not a whole number; "
            "every line needs whole-number ids (a ragged line?)"
        )
    counts = _check_count_values(values[:, 2], path, lambda index: position((index[0], 2)))
    for column, limit, name in ((0, n_rows, "row (document) id"), (1, n_cols, "column (word) id")):
        bad = (values[:, column] < 1) | (values[:, column] > limit)  # on floats: no int64 overflow
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise ValueError(
                f"{path}, {position((row,))}: {name} {values[row, column]:.0f} is out of range "
                f"1..{limit} declared in the header; ids are 1-based, fix the id or the header"
            )
    if nnz is not None and n_lines != nnz:
        raise ValueError(
            f"{path}: the header declares {nnz} entries but the file has {n_lines}; "
            "the file is truncated or the header is wrong (download it again)"
        )
    ids = values[:, :2].astype(np.int64) - 1
    del values
    return summed_counts(
        sp.coo_matrix((counts, (ids[:, 0], ids[:, 1])), shape=(n_rows, n_cols)),
        str(path),
        lambda row, col: f"row {row + 1}, column {col + 1} (1-based)",
    )


def _header_integers(path, lines, expected, what):
    """Parse header lines of whole numbers, naming the line when one is wrong."""
    values = []
    for number, text in lines:
        fields = text.split()
        if not fields or not all(_INT_RE.match(f) and int(f) >= 0 for f in fields):
            raise ValueError(
                f"{path}, line {number}: expected {what}, found {text.strip()[:80]!r}; is this the right kind of file?"
            )
        values.extend(int(f) for f in fields)
    if len(values) != expected:
        raise ValueError(f"{path}: expected {what} in the header, found {values}")
    return values


# Peak bytes per stored entry while a coordinate file becomes a checked CSR matrix:
# UCI through pandas (float64 table, its copy, int64 ids and counts, COO -> CSR), Matrix
# Market through scipy.io.mmread (COO arrays, CSR, int64 counts; a symmetric file doubles).
_UCI_ENTRY_BYTES = 120
_MTX_ENTRY_BYTES = 64
_MTX_ARRAY_CELL_BYTES = 40  # dense values, int64 counts, the CSR they become


def _check_declared_size(path, n_rows, n_cols, entry_bytes, n_entries, what):
    """What a header declares, with the row pointer and the labels it implies, against the budget."""
    need = n_entries * entry_bytes + (n_rows + 1) * 8 + (n_rows + n_cols) * _LABEL_BYTES
    check_memory(
        need,
        f"{path}: {what} ({n_rows:,} x {n_cols:,}, {n_entries:,} entries, as the header declares)",
        fix="Check the header; if it is right the matrix is too large for this machine.",
    )


def _docword_in(folder):
    found = sorted(p for p in folder.iterdir() if re.match(r"docword\..+\.txt(\.gz)?$", p.name))
    if len(found) != 1:
        raise ValueError(
            f"{folder}: expected exactly one docword.NAME.txt[.gz] in this folder, found "
            f"{len(found)}; give the docword file itself"
        )
    return found[0]


def _load_uci(path, vocab):
    if path.is_dir():
        path = _docword_in(path)
    _check_text_file(path)
    match = re.match(r"docword\.(.+)\.txt(\.gz)?$", path.name)
    if not match:
        raise ValueError(f"{path}: UCI bag-of-words files are named docword.NAME.txt[.gz]; rename it")
    _check_text_budget(path, "uci", "a UCI docword file")
    head = []
    for number, line in _iter_lines(path):
        head.append((number, line))
        if number == 3:
            break
    head += [(number, "") for number in range(len(head) + 1, 4)]
    n_docs, n_words, nnz = _header_integers(path, head, 3, "the three header lines D, W, NNZ")
    _check_declared_size(path, n_docs, n_words, _UCI_ENTRY_BYTES, nnz, "a UCI bag of words")
    Y = _read_triples(path, 3, n_docs, n_words, nnz, "a UCI docword file (docID wordID count)")
    if vocab is None:
        vocab = path.with_name(f"vocab.{match.group(1)}.txt")
        if not vocab.is_file():
            raise FileNotFoundError(
                f"{vocab} is missing: the UCI format keeps the words beside {path.name}; "
                "put it there or pass vocab=PATH"
            )
    return CountData(
        Y=Y,
        row_labels=[str(i + 1) for i in range(n_docs)],
        col_labels=_vocab_list(vocab, n_words, path),
        model="topics",
        source=str(path),
        info={"format": "uci"},
    )


_MM_BANNER = "'%%MatrixMarket matrix coordinate integer general'"
_MM_LINE = re.compile(r"^Line (\d+): (.*)$", re.S)


def _load_mtx(path):
    _check_text_file(path)
    _check_text_budget(path, "mtx", "a Matrix Market file")
    # scipy.io.mminfo reads only the header: its sizes are checked before mmread allocates them
    try:
        n_rows, n_cols, entries, layout, field, symmetry = scipy.io.mminfo(str(path))
    except (ValueError, OverflowError, RuntimeError, IndexError) as error:
        raise ValueError(_mm_error(path, error, "the header")) from None
    if field not in ("integer", "real", "pattern") or layout not in ("coordinate", "array"):
        raise ValueError(
            f"{path}, line 1: a {layout} {field} matrix cannot hold counts; save it as 'coordinate integer'"
        )
    if symmetry not in ("general", "symmetric"):
        raise ValueError(f"{path}, line 1: {symmetry} matrices cannot hold counts; save it as 'general'")
    if symmetry == "symmetric" and n_rows != n_cols:
        # scipy would mirror it anyway, into cells the header does not have
        raise ValueError(
            f"{path}, line 2: a symmetric matrix must be square, but the header declares {n_rows} x {n_cols}; "
            "write 'general' in the first line (each entry is then read once, unmirrored)"
        )
    if n_rows == 0 or n_cols == 0:
        # nothing to count, and scipy's reader (1.17) dies of a floating-point exception on an
        # 'array' body with zero rows: refuse before it runs
        raise ValueError(
            f"{path}, line 2: the header declares an empty {n_rows} x {n_cols} matrix; "
            "a count matrix needs at least one row and one column"
        )
    if layout == "coordinate":
        entry_bytes = _MTX_ENTRY_BYTES * (2 if symmetry == "symmetric" else 1)
        _check_declared_size(path, n_rows, n_cols, entry_bytes, entries, "a Matrix Market coordinate matrix")
    else:
        _check_declared_size(
            path, n_rows, n_cols, _MTX_ARRAY_CELL_BYTES, n_rows * n_cols, "a dense Matrix Market array"
        )
    try:
        matrix = scipy.io.mmread(str(path))
    except (ValueError, OverflowError, RuntimeError, IndexError, EOFError, OSError) as error:
        if "Truncated file" in str(error):
            declared = f"{n_rows} x {n_cols} = {n_rows * n_cols} values" if layout == "array" else f"{entries} entries"
            raise ValueError(
                f"{path}: the header declares {declared} but the file ends early ({error}); "
                "it is truncated or the header is wrong (download it again)"
            ) from None
        raise ValueError(_mm_error(path, error, "the entries")) from None
    if sp.issparse(matrix):
        coo = sp.coo_matrix(matrix)

        def position(index):
            return f"the entry at row {int(coo.row[index[0]]) + 1}, column {int(coo.col[index[0]]) + 1}"

        counts = _check_count_values(coo.data, path, position)
        Y = summed_counts(
            sp.coo_matrix((counts, (coo.row, coo.col)), shape=coo.shape),
            str(path),
            lambda row, col: f"row {row + 1}, column {col + 1} (1-based)",
        )
    else:
        values = _check_count_values(
            np.asarray(matrix), path, lambda index: f"row {int(index[0]) + 1}, column {int(index[1]) + 1}"
        )
        Y = sp.csr_matrix(values)
    return CountData(
        Y=Y,
        row_labels=[str(i) for i in range(Y.shape[0])],
        col_labels=[str(j) for j in range(Y.shape[1])],
        model="topics",
        source=str(path),
        info={"format": "mtx"},
    )


def _mm_error(path, error, part):
    """scipy's 'Line 3: Invalid integer value.' as 'PATH, line 3: invalid integer value; ...'."""
    text = str(error).strip().rstrip(".")
    if "banner" in text.lower():
        return f"{path}, line 1: not a Matrix Market file (the first line should read {_MM_BANNER}); check the file"
    match = _MM_LINE.match(text)
    where = f"{path}, line {match.group(1)}" if match else str(path)
    problem = match.group(2) if match else text
    problem = problem[:1].lower() + problem[1:]
    return (
        f"{where}: {problem} (in {part}); a Matrix Market count file has a header "
        f"{_MM_BANNER}, a size line 'rows cols entries' and lines 'row col count', 1-based"
    )


# ---------------------------------------------------------------- npz

_NPZ_SAVE_HINT = "save counts with np.savez(path, Y=counts, vocab=words) or lpviz.datasets.save_counts"
_NPZ_TEXT_KEYS = ("row_labels", "col_labels", "vocab", "model", "info_json")
_NPZ_LAYOUTS = (  # (members, how the counts are stored), first match wins
    (("Y",), "dense"),
    (("Y_data", "Y_indices", "Y_indptr", "Y_shape"), "lpviz csr"),
    (("data", "indices", "indptr", "shape", "format"), "scipy"),
)


def _load_npz(path):
    """Counts from an .npz, every member read through the bounded reader (:class:`lpviz._files.Archive`)."""
    with open_archive(path, what="archive", fix=_NPZ_SAVE_HINT) as archive:
        layout = next((kind for needed, kind in _NPZ_LAYOUTS if all(key in archive for key in needed)), None)
        if layout is None:
            raise ValueError(
                f"{path}: no count matrix 'Y' in this .npz (it holds: {archive.listing()}); save it with "
                "np.savez(path, Y=counts, vocab=words)"
            )
        Y, texts = _read_npz_arrays(path, archive, layout)
    if sp.issparse(Y):
        csr = Y.tocsr()

        def position(index):
            row = int(np.searchsorted(csr.indptr, index[0], side="right")) - 1
            return f"cell ({row}, {int(csr.indices[index[0]])}) of Y"

        counts = _check_count_values(csr.data, path, position)
        Y = summed_counts(
            sp.csr_matrix((counts, csr.indices, csr.indptr), shape=csr.shape),
            str(path),
            lambda row, col: f"cell ({row}, {col}) of Y (its repeated entries)",
        )
    else:
        Y = _check_count_values(Y, path, lambda index: f"cell {tuple(int(i) for i in index)} of Y")
    from lpviz import models

    model = texts["model"] if "model" in texts else models.default_for("documents")
    if model not in models.MODELS:
        raise ValueError(f"{path}: model {model[:40]!r} must be one of {', '.join(map(repr, models.MODELS))}")
    try:
        models.get(model)(1).check_shape(Y.shape)
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from None
    row_labels = _labels(texts.get("row_labels"), Y.shape[0], path, "row_labels")
    col_labels = _labels(
        texts.get("col_labels", texts.get("vocab")),
        Y.shape[1],
        path,
        "col_labels" if "col_labels" in texts else "vocab",
    )
    info = {}
    if "info_json" in texts:
        from lpviz._files import load_json

        # its nesting bounded before it is parsed (100,000 levels: a RecursionError traceback)
        info = load_json(texts["info_json"], what=f"{path}: 'info_json'", fix=_NPZ_SAVE_HINT)
        if not isinstance(info, dict):
            raise ValueError(
                f"{path}: 'info_json' must hold a JSON object, not {type(info).__name__}; {_NPZ_SAVE_HINT}"
            )
    info["format"] = "npz"
    # the data set is named after the file the user gave, never after a path stored inside it
    return CountData(Y=Y, row_labels=row_labels, col_labels=col_labels, model=model, source=str(path), info=info)


def _read_npz_arrays(path, archive, layout):
    """The counts (dense or CSR, not yet checked) and the text members, read after the budget check."""
    prefix = "Y_" if layout == "lpviz csr" else ""
    if layout == "dense":
        header = archive.header("Y")
        shape, dtype = header.shape, header.dtype
        if len(shape) != 2:
            raise ValueError(
                f"{path}: 'Y' has shape {shape}; counts must be a 2-d documents x words (or actors x actors) matrix"
            )
    else:
        shape_key = "Y_shape" if layout == "lpviz csr" else "shape"
        header = archive.header(shape_key)
        if header.shape != (2,) or header.dtype.kind not in "iu":
            raise ValueError(f"{path}: {shape_key!r} must hold the two integers (rows, columns); {_NPZ_SAVE_HINT}")
        values = archive.read(shape_key)
        if (values < 0).any():
            raise ValueError(f"{path}: {shape_key!r} holds a negative size {values.tolist()}; {_NPZ_SAVE_HINT}")
        shape = tuple(int(n) for n in values)
        dtype = archive.header(prefix + "data").dtype
        for key in ("indices", "indptr"):
            member = archive.header(prefix + key)
            if member.dtype.kind not in "iu" or member.ndim != 1:
                raise ValueError(f"{path}: {prefix + key!r} must be a 1-d array of integers; {_NPZ_SAVE_HINT}")
    if dtype.kind not in "biuf":
        raise ValueError(f"{path}: 'Y' holds {dtype} values, not numbers; save numeric counts")
    for key in _NPZ_TEXT_KEYS:
        if key in archive and archive.header(key).dtype.kind not in "US":
            raise ValueError(f"{path}: {key!r} must hold text, not {archive.header(key).dtype}; {_NPZ_SAVE_HINT}")
    members = ["Y"] if layout == "dense" else [prefix + key for key in ("data", "indices", "indptr")]
    stored = sum(archive.header(key).nbytes for key in members)
    if layout == "dense":
        converted = dense_bytes(shape, np.int64)
    else:  # CSR with int64 counts, from at most as many values as stored
        converted = dense_bytes(archive.header(prefix + "data").shape, np.int64) * 3
    labels = sum(shape) * _LABEL_BYTES
    archive.require(
        members + [key for key in _NPZ_TEXT_KEYS if key in archive],
        extra=converted + labels,
        what=f"loading its arrays (the counts are {' x '.join(f'{n:,}' for n in shape)}, "
        f"{format_bytes(stored)} uncompressed)",
        fix="Check the file; if it is right, store the counts sparse (lpviz.datasets.save_counts "
        "with a scipy.sparse matrix) or use a machine with more memory.",
    )
    if layout == "dense":
        Y = archive.read("Y")
    else:
        sparse_format = sp.csr_matrix
        if layout == "scipy":
            name = archive.read_text("format", max_chars=16)
            if name not in ("csr", "csc"):
                raise ValueError(
                    f"{path}: a scipy.sparse {name[:10]!r} matrix; lpviz reads CSR or CSC: save it "
                    "with scipy.sparse.save_npz(path, matrix.tocsr())"
                )
            sparse_format = sp.csc_matrix if name == "csc" else sp.csr_matrix
        arrays = tuple(archive.read(prefix + key) for key in ("data", "indices", "indptr"))
        try:
            Y = sparse_format(arrays, shape=shape)
            Y.check_format(full_check=True)
        except (ValueError, TypeError, IndexError, OverflowError) as error:
            raise ValueError(
                f"{path}: the sparse arrays do not form a {shape[0]} x {shape[1]} matrix ({error}); {_NPZ_SAVE_HINT}"
            ) from None
    texts = {}
    for key in _NPZ_TEXT_KEYS:
        if key not in archive:
            continue
        if key in ("model", "info_json"):
            texts[key] = archive.read_text(key, max_chars=1 << 20)
        else:
            texts[key] = archive.read(key)
    return Y, texts


def _labels(array, n, path, name):
    if array is None:
        return [str(i) for i in range(n)]
    labels = [decode_text(x, str(path), name) for x in np.asarray(array).ravel()]
    if len(labels) != n:
        raise ValueError(
            f"{path}: '{name}' has {len(labels)} names for {n} rows/columns of Y; save one name per row/column"
        )
    return labels


# ---------------------------------------------------------------- shared helpers


def _vocab_list(vocab, n_words, path):
    if isinstance(vocab, (str, os.PathLike)):
        vocab_path = Path(vocab)
        if not vocab_path.is_file():
            raise FileNotFoundError(f"{vocab_path}: vocabulary file not found; give a file with one word per line")
        _check_text_file(vocab_path)
        check_memory(_text_bytes(vocab_path) * _TEXT_COST["edges"], f"{vocab_path}: reading the vocabulary")
        words = [line.rstrip("\r\n") for _, line in _iter_lines(vocab_path)]
        while words and not words[-1].strip():
            words.pop()
        source = vocab_path
    else:
        words = [str(word) for word in vocab]
        source = "vocab"
    if len(words) != n_words:
        raise ValueError(
            f"{source} has {len(words)} words but {path} has {n_words} word columns; "
            "they do not belong together, give the matching vocabulary"
        )
    return words


def _check_not_empty(data, path, allow_zero=False):
    # counts are >= 0, so no nonzero cell means a total of 0 (and an int64 sum could overflow)
    if min(data.shape) == 0:
        raise ValueError(
            f"{path}: an empty {data.shape[0]} x {data.shape[1]} matrix; it needs at least one row and one column"
        )
    nonzero = data.Y.count_nonzero() if sp.issparse(data.Y) else np.count_nonzero(data.Y)
    if nonzero == 0 and not allow_zero:
        raise ValueError(
            f"{path}: no counts ({data.shape[0]} x {data.shape[1]} matrix, total 0); "
            "nothing to fit, check the file or the filter that produced it"
        )


def _json_default(value):
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)
