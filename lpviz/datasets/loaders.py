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

Every count must be a non-negative whole number. Errors name the file, the
line (or cell) and what to do about it. Text files are parsed by pandas' C
reader; when it or a check fails, the file is scanned again line by line only
to say exactly where.
"""

import codecs
import gzip
import inspect
import json
import os
import re
import zipfile
from importlib import import_module
from pathlib import Path

import numpy as np
import pandas as pd
import scipy.sparse as sp

from lpviz._files import atomic_write

from ._types import CountData

__all__ = ["KINDS", "load_counts", "load_data", "save_counts"]

KINDS = ("edges", "npz", "mtx", "uci", "dense-csv")

# Networks with at most this many actors come back dense (what the block
# model takes); bigger ones stay sparse CSR so memory follows the edges.
DENSE_NETWORK_MAX_ACTORS = 5000

_TABLE_SUFFIXES = (".csv", ".tsv", ".txt", ".edges", ".edgelist", ".tab")
_EDGE_HEADER_WORDS = {
    "source", "target", "src", "dst", "from", "to", "sender", "recipient",
    "receiver", "node1", "node2", "u", "v", "i", "j", "head", "tail",
    "count", "weight", "n", "value", "fromnodeid", "tonodeid",
}
_GZIP_MAGIC = b"\x1f\x8b"
_ZIP_MAGIC = b"PK\x03\x04"
_INT_RE = re.compile(r"^[+-]?\d+$")
_ENCODING = "utf-8-sig"  # tolerate a byte-order mark from spreadsheet exports


# ---------------------------------------------------------------- public API

def load_counts(path, kind=None, *, header=None, vocab=None):
    """Read a count matrix from a file.

    Parameters
    ----------
    path : str or Path
        The file (for ``kind="uci"`` also the folder holding ``docword.*``).
    kind : {"edges", "npz", "mtx", "uci", "dense-csv"}, optional
        The format; detected from the name and content when omitted.
    header : bool, optional
        Text tables only: whether the first line is a header. Detected when
        omitted (non-numeric cells where numbers follow, or usual column
        names such as ``source,target,count``).
    vocab : str, Path or sequence of str, optional
        Document-term formats: the column (word) names, as a list or a file
        with one word per line. Overrides names stored in the file; for UCI
        files it replaces the ``vocab.NAME.txt`` beside the counts.

    Returns
    -------
    CountData
        ``model="blocks"`` for edge lists (square, dense up to
        ``DENSE_NETWORK_MAX_ACTORS`` actors), ``model="topics"`` otherwise
        (sparse CSR for ``.mtx`` and UCI files). ``info["format"]`` says how
        the file was read.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file or folder; check the path")
    if kind is None:
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
    elif kind == "edges":
        data = _load_edges(path, header)
    else:
        data = _load_dense_csv(path, header)
    if vocab is not None and kind not in ("uci", "edges"):
        data.col_labels = _vocab_list(vocab, data.shape[1], path)
    elif vocab is not None and kind == "edges":
        raise ValueError(f"{path}: vocab= is for document-term matrices; an edge list names its actors itself")
    data.info.setdefault("format", kind)
    _check_not_empty(data, path)
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
    if path.exists() and not overwrite:
        raise FileExistsError(f"{path} already exists; choose another name or pass overwrite=True")
    arrays = {
        "row_labels": np.asarray([str(label) for label in data.row_labels], dtype=str),
        "col_labels": np.asarray([str(label) for label in data.col_labels], dtype=str),
        "model": np.asarray(data.model, dtype=str),
        "source": np.asarray(str(data.source), dtype=str),
        "info_json": np.asarray(json.dumps(data.info, default=_json_default), dtype=str),
    }
    if sp.issparse(data.Y):
        csr = sp.csr_matrix(data.Y)
        arrays.update(Y_data=np.asarray(csr.data, dtype=np.int64), Y_indices=csr.indices,
                      Y_indptr=csr.indptr, Y_shape=np.asarray(csr.shape, dtype=np.int64))
    else:
        arrays["Y"] = np.asarray(data.Y, dtype=np.int64)
    return atomic_write(path, lambda handle: np.savez(handle, **arrays))


# spec name -> (module, function, whether the spec carries a path)
_SPEC_SOURCES = {
    "enron-topics": ("lpviz.datasets.enron", "build_enron_topics", True),
    "enron-network": ("lpviz.datasets.enron", "build_enron_network", True),
    "synthetic-topics": ("lpviz.datasets.synthetic", "make_topics", False),
    "synthetic-blocks": ("lpviz.datasets.synthetic", "make_blocks", False),
}


def load_data(spec, **options):
    """Resolve a data spec, as the CLI and the app take it, to :class:`CountData`.

    ``spec`` is one of ``"enron-topics:PATH"`` / ``"enron-network:PATH"``
    (the paper's two Enron matrices built from a maildir, tarball or
    ``emails.csv``), ``"synthetic-topics"`` / ``"synthetic-blocks"``
    (generated with known truth), ``"KIND:PATH"`` with a ``kind`` of
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
            raise ValueError(f"data spec {spec!r} needs a path: write {name}:PATH "
                             "(a maildir folder, the CMU .tar.gz or emails.csv)")
        if not takes_path and colon:
            raise ValueError(f"data spec {spec!r} takes no path: write just {name!r}")
        builder = getattr(import_module(module_name), function_name)
        return _call_with_options(builder, (rest,) if takes_path else (), options, spec)
    if name in KINDS and colon:
        return _call_with_options(load_counts, (rest,), {**options, "kind": name}, spec)
    if not Path(spec).exists():
        raise FileNotFoundError(
            f"no data at {spec!r}: give an existing file, or one of "
            + ", ".join(f"{key}:PATH" if takes else key for key, (_, _, takes) in _SPEC_SOURCES.items())
            + f", or KIND:PATH with KIND in {', '.join(KINDS)}")
    return _call_with_options(load_counts, (spec,), options, spec)


def _call_with_options(function, args, options, spec):
    parameters = inspect.signature(function).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    unknown = sorted(set(options) - set(parameters))
    if unknown and not takes_any:
        accepted = list(parameters)[len(args):]
        raise TypeError(f"data spec {spec!r}: unknown option(s) {', '.join(unknown)}; "
                        f"{function.__name__} takes {', '.join(accepted)}")
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
        f"rename the file or pass kind= (one of {', '.join(KINDS)})")


def _sniff_table_kind(path):
    sep, skiprows = _table_layout(path)
    rows = [fields for _, fields in _iter_rows(path, sep, skiprows, limit=20)]
    if not rows:
        raise ValueError(f"{path}: no data lines (only blank or comment lines); is it the right file?")
    first, rest = rows[0], rows[1:]
    if len(first) > 3:
        return "dense-csv"
    if len(first) < 2:
        raise ValueError(f"{path}, line {skiprows + 1}: a single column is neither an edge list "
                         "(source,target[,count]) nor a document x word table; check the separator")
    if _is_edge_header(first):
        return "edges"
    header = _looks_like_header(first, rest)
    data_rows = rest if header else rows
    names_in_front = all(not _is_number(r[0]) and not _is_number(r[1]) for r in data_rows)
    numeric = all(all(_is_number(x) for x in r) for r in data_rows)
    # a header of words over numbers names columns of a narrow dense table
    if names_in_front or (numeric and not header):
        return "edges"
    return "dense-csv"


def _is_edge_header(fields):
    return len(fields) in (2, 3) and all(f.strip().lower() in _EDGE_HEADER_WORDS for f in fields)


def _looks_like_header(first, rest):
    """A first line is a header if it has words where later lines have numbers."""
    if _is_edge_header(first):
        return True
    if not rest:
        return False
    for column, cell in enumerate(first):
        if cell.strip() == "" or _is_number(cell):
            continue
        if all(column < len(r) and _is_number(r[column]) for r in rest):
            return True
    return False


# ---------------------------------------------------------------- text tables

def _strip_gz(name):
    return name[:-3] if name.endswith(".gz") else name


def _open_text(path):
    if path.name.lower().endswith(".gz"):
        return gzip.open(path, "rt", encoding=_ENCODING, newline=None)
    return open(path, encoding=_ENCODING, newline=None)


def _check_text_file(path):
    """Refuse binary or wrongly named compressed files before parsing them."""
    with open(path, "rb") as raw:
        head = raw.read(8192)
    if path.name.lower().endswith(".gz"):
        if not head.startswith(_GZIP_MAGIC):
            raise ValueError(f"{path}: named .gz but not gzip-compressed; remove the .gz from its name")
        try:
            with gzip.open(path, "rb") as unzipped:
                head = unzipped.read(8192)
        except (OSError, EOFError) as error:
            raise ValueError(f"{path}: damaged gzip file ({error}); download or compress it again") from None
    elif head.startswith(_GZIP_MAGIC):
        raise ValueError(f"{path}: this file is gzip-compressed but its name does not end in .gz; "
                         f"rename it to {path.name}.gz or decompress it (gunzip)")
    if head.startswith(_ZIP_MAGIC):
        raise ValueError(f"{path}: this is a zip archive (perhaps a NumPy .npz), not a text table; "
                         "rename it to .npz or unzip it")
    if b"\x00" in head:
        raise ValueError(f"{path}: binary content, not a text table; check that it is the right file")
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError as error:
        raise ValueError(f"{path}: not UTF-8 text (byte {error.start}); save it as UTF-8") from None


def _table_layout(path):
    """(separator, number of leading comment lines) of a text table."""
    _check_text_file(path)
    name = _strip_gz(path.name.lower())
    skiprows = 0
    first = ""
    with _open_text(path) as handle:
        for line in handle:
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
    line = line.rstrip("\r\n")
    return line.split() if sep is None else line.split(sep)


def _iter_rows(path, sep, skiprows, limit=None):
    """(line number, fields) of the data lines, skipping blank lines like pandas."""
    count = 0
    with _open_text(path) as handle:
        for number, line in enumerate(handle, start=1):
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


def _read_table(path, sep, skiprows, columns, what, numeric_from=0):
    """Parse a text table with pandas; on failure find and name the bad line.

    ``columns`` are the column names (their number is the expected field
    count), columns from ``numeric_from`` on are parsed as numbers.
    """
    dtype = {c: (np.float64 if i >= numeric_from else str) for i, c in enumerate(columns)}
    try:
        return pd.read_csv(
            path, sep=r"\s+" if sep is None else sep, header=None, names=list(range(len(columns))),
            skiprows=skiprows, dtype={i: dtype[c] for i, c in enumerate(columns)},
            keep_default_na=False, na_values=[""], encoding=_ENCODING, compression="infer",
            skip_blank_lines=True, engine="c")
    except (pd.errors.ParserError, ValueError, UnicodeDecodeError, EOFError, OSError) as error:
        _diagnose_table(path, sep, skiprows, columns, what, numeric_from)
        raise ValueError(f"{path}: could not read it as {what}: {error}") from None


def _diagnose_table(path, sep, skiprows, columns, what, numeric_from):
    """Raise a ValueError for the first line with a wrong field count or a non-number."""
    for number, fields in _iter_rows(path, sep, skiprows):
        if len(fields) != len(columns):
            raise ValueError(
                f"{path}, line {number}: {len(fields)} fields where {what} has {len(columns)} "
                f"({', '.join(columns)}); fix the ragged line (separator: {_sep_name(sep)})")
        for column, cell in enumerate(fields[numeric_from:], start=numeric_from):
            if not _is_number(cell):
                raise ValueError(
                    f"{path}, line {number}: {columns[column]} {cell.strip()!r} is not a number; "
                    "counts must be non-negative whole numbers")


def _sep_name(sep):
    return {None: "whitespace", ",": "comma", "\t": "tab"}.get(sep, repr(sep))


def _check_count_values(values, path, describe_position):
    """Counts must be finite, non-negative and whole: else name where and how to fix."""
    values = np.asarray(values, dtype=np.float64)
    checks = (
        (~np.isfinite(values), "a missing or non-finite count",
         "fill in every count (a ragged line?)"),
        (values < 0, "a negative count {value:g}",
         "counts must be >= 0; privatized data with negative values is what privatize() makes, "
         "load the true counts here"),
        (values != np.floor(values), "a fractional count {value:g}",
         "counts must be whole numbers; round them or check the column"),
    )
    for bad, problem, fix in checks:
        if bad.any():
            index = np.unravel_index(int(np.flatnonzero(bad.ravel())[0]), values.shape)
            value = values[index]
            raise ValueError(f"{path}, {describe_position(index)}: {problem.format(value=value)}; {fix}")
    return values.astype(np.int64)


# ---------------------------------------------------------------- edge lists

def _load_edges(path, header):
    sep, skiprows = _table_layout(path)
    preview = [fields for _, fields in _iter_rows(path, sep, skiprows, limit=20)]
    if not preview:
        raise ValueError(f"{path}: no edges (only blank or comment lines); expected lines source,target[,count]")
    first = preview[0]
    if header is None:
        header = _looks_like_header(first, preview[1:])
    n_fields = len(first)
    if n_fields not in (2, 3):
        raise ValueError(f"{path}, line {skiprows + 1}: {n_fields} fields; an edge list has "
                         f"source,target or source,target,count (separator: {_sep_name(sep)}); "
                         "pass kind='dense-csv' if it is a document x word table")
    columns = ["source", "target", "count"][:n_fields]
    if header:
        skiprows = _skip_through_first_row(path, sep, skiprows)
    table = _read_table(path, sep, skiprows, columns, "an edge list", numeric_from=2)
    if table.empty:
        raise ValueError(f"{path}: only a header line, no edges; add lines source,target[,count]")

    def position(row):
        number = _row_line(path, sep, skiprows, row)
        return f"line {number}"

    sources = table[0].to_numpy(dtype=object)
    targets = table[1].to_numpy(dtype=object)
    for column, values in (("source", sources), ("target", targets)):
        missing = pd.isna(values) | (pd.Series(values).astype(str).str.strip() == "").to_numpy()
        if missing.any():
            row = int(np.flatnonzero(missing)[0])
            raise ValueError(f"{path}, {position(row)}: empty {column}; every line needs source and target "
                             "(a ragged line?)")
    if n_fields == 3:
        counts = _check_count_values(table[2].to_numpy(), path, lambda index: position(index[0]))
    else:
        counts = np.ones(len(table), dtype=np.int64)
    sources = np.asarray([s.strip() for s in sources], dtype=str)
    targets = np.asarray([t.strip() for t in targets], dtype=str)
    labels, codes = _actor_codes(np.concatenate([sources, targets]))
    n = len(labels)
    rows, cols = codes[: len(sources)], codes[len(sources):]
    Y = sp.coo_matrix((counts, (rows, cols)), shape=(n, n)).tocsr()  # repeated pairs add up
    Y.sum_duplicates()
    if n <= DENSE_NETWORK_MAX_ACTORS:
        Y = Y.toarray()
    labels = [str(label) for label in labels]
    return CountData(Y=Y, row_labels=labels, col_labels=list(labels), model="blocks",
                     source=str(path), info={"format": "edges", "n_edge_lines": int(len(table))})


def _skip_through_first_row(path, sep, skiprows):
    """Lines to skip so pandas starts after the header line."""
    for number, _ in _iter_rows(path, sep, skiprows, limit=1):
        return number
    return skiprows


def _actor_codes(names):
    """Sorted actor names (numerically if all are integers) and each name's index."""
    unique, codes = np.unique(names, return_inverse=True)
    if all(_INT_RE.match(name) for name in unique):
        order = np.argsort([int(name) for name in unique], kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        return unique[order], rank[codes]
    return unique, codes


# ---------------------------------------------------------------- dense CSV

def _load_dense_csv(path, header):
    sep, skiprows = _table_layout(path)
    preview = [fields for _, fields in _iter_rows(path, sep, skiprows, limit=50)]
    if not preview:
        raise ValueError(f"{path}: no rows (only blank or comment lines); expected a document x word table")
    first = preview[0]
    if header is None:
        header = _looks_like_header(first, preview[1:])
    data_preview = preview[1:] if header else preview
    has_row_labels = bool(data_preview) and (
        any(not _is_number(r[0]) for r in data_preview)
        or (header and first[0].strip() == "" and len(first) > 1))
    n_fields = len(first)
    words = [cell.strip() for cell in (first[1:] if has_row_labels else first)] if header else None
    if header:
        skiprows = _skip_through_first_row(path, sep, skiprows)
    offset = 1 if has_row_labels else 0
    columns = (["document name"] if has_row_labels else []) + [
        f"column {c + 1}" for c in range(offset, n_fields)]
    table = _read_table(path, sep, skiprows, columns, "a dense document x word table", numeric_from=offset)
    if table.empty:
        raise ValueError(f"{path}: only a header line, no documents; add one line of counts per document")

    def position(index):
        number = _row_line(path, sep, skiprows, int(index[0]))
        return f"line {number}, column {int(index[1]) + offset + 1}"

    Y = _check_count_values(table.iloc[:, offset:].to_numpy(dtype=np.float64), path, position)
    n_docs, n_words = Y.shape
    row_labels = ([str(x).strip() for x in table[0]] if has_row_labels else [str(i) for i in range(n_docs)])
    col_labels = words if words is not None else [str(j) for j in range(n_words)]
    if len(col_labels) != n_words:
        raise ValueError(f"{path}: the header names {len(col_labels)} words but rows have {n_words} counts; "
                         "fix the header line")
    return CountData(Y=Y, row_labels=row_labels, col_labels=col_labels, model="topics",
                     source=str(path), info={"format": "dense-csv"})


# ---------------------------------------------------------------- coordinate files (UCI, mtx)

def _read_triples(path, skiprows, n_rows, n_cols, nnz, what, with_counts=True):
    """1-based ``row col count`` lines -> CSR (n_rows, n_cols), with checks.

    Without counts (a Matrix Market pattern) every listed cell counts once.
    """
    columns = ["row id", "column id", "count"][: 3 if with_counts else 2]
    table = _read_table(path, None, skiprows, columns, what)
    values = table.to_numpy(dtype=np.float64)

    def position(index):
        number = _row_line(path, None, skiprows, int(index[0]))
        return f"line {number}"

    unreadable = ~np.isfinite(values[:, :2]) | (values[:, :2] != np.floor(values[:, :2]))
    if unreadable.any():
        row, column = np.argwhere(unreadable)[0]
        raise ValueError(f"{path}, {position((row,))}: {columns[column]} is missing or not a whole number; "
                         "every line needs whole-number ids (a ragged line?)")
    if with_counts:
        counts = _check_count_values(values[:, 2], path, lambda index: position((index[0], 2)))
    else:
        counts = np.ones(len(values), dtype=np.int64)
    ids = values[:, :2].astype(np.int64)
    for column, limit, name in ((0, n_rows, "row (document) id"), (1, n_cols, "column (word) id")):
        bad = (ids[:, column] < 1) | (ids[:, column] > limit)
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise ValueError(f"{path}, {position((row,))}: {name} {ids[row, column]} is out of range 1..{limit} "
                             "declared in the header; ids are 1-based, fix the id or the header")
    if nnz is not None and len(table) != nnz:
        raise ValueError(f"{path}: the header declares {nnz} entries but the file has {len(table)}; "
                         "the file is truncated or the header is wrong (download it again)")
    Y = sp.csr_matrix((counts, (ids[:, 0] - 1, ids[:, 1] - 1)), shape=(n_rows, n_cols), dtype=np.int64)
    Y.sum_duplicates()
    return Y


def _header_integers(path, lines, expected, what):
    """Parse header lines of whole numbers, naming the line when one is wrong."""
    values = []
    for number, text in lines:
        fields = text.split()
        if not fields or not all(_INT_RE.match(f) and int(f) >= 0 for f in fields):
            raise ValueError(f"{path}, line {number}: expected {what}, found {text.strip()!r}; "
                             "is this the right kind of file?")
        values.extend(int(f) for f in fields)
    if len(values) != expected:
        raise ValueError(f"{path}: expected {what} in the header, found {values}")
    return values


def _docword_in(folder):
    found = sorted(p for p in folder.iterdir() if re.match(r"docword\..+\.txt(\.gz)?$", p.name))
    if len(found) != 1:
        raise ValueError(f"{folder}: expected exactly one docword.NAME.txt[.gz] in this folder, found "
                         f"{len(found)}; give the docword file itself")
    return found[0]


def _load_uci(path, vocab):
    if path.is_dir():
        path = _docword_in(path)
    _check_text_file(path)
    match = re.match(r"docword\.(.+)\.txt(\.gz)?$", path.name)
    if not match:
        raise ValueError(f"{path}: UCI bag-of-words files are named docword.NAME.txt[.gz]; rename it")
    with _open_text(path) as handle:
        head = [(n, handle.readline()) for n in (1, 2, 3)]
    n_docs, n_words, nnz = _header_integers(path, head, 3, "the three header lines D, W, NNZ")
    Y = _read_triples(path, 3, n_docs, n_words, nnz, "a UCI docword file (docID wordID count)")
    if vocab is None:
        vocab = path.with_name(f"vocab.{match.group(1)}.txt")
        if not vocab.is_file():
            raise FileNotFoundError(f"{vocab} is missing: the UCI format keeps the words beside {path.name}; "
                                    "put it there or pass vocab=PATH")
    return CountData(Y=Y, row_labels=[str(i + 1) for i in range(n_docs)],
                     col_labels=_vocab_list(vocab, n_words, path), model="topics",
                     source=str(path), info={"format": "uci"})


def _load_mtx(path):
    _check_text_file(path)
    with _open_text(path) as handle:
        banner = handle.readline()
        tokens = banner.lower().split()
        if len(tokens) != 5 or tokens[0] != "%%matrixmarket" or tokens[1] != "matrix":
            raise ValueError(f"{path}, line 1: not a Matrix Market file (the first line should read "
                             "'%%MatrixMarket matrix coordinate integer general'); check the file")
        layout, field, symmetry = tokens[2:]
        number, line = 1, handle.readline()
        while line.startswith("%") or (line and not line.strip()):
            number, line = number + 1, handle.readline()
    number += 1
    if layout not in ("coordinate", "array") or field not in ("integer", "real", "pattern"):
        raise ValueError(f"{path}, line 1: a {layout} {field} matrix cannot hold counts; "
                         "save it as 'coordinate integer'")
    if symmetry not in ("general", "symmetric"):
        raise ValueError(f"{path}, line 1: {symmetry} matrices cannot hold counts; save it as 'general'")
    if layout == "coordinate":
        n_rows, n_cols, nnz = _header_integers(path, [(number, line)], 3, "the size line 'rows cols entries'")
        Y = _read_triples(path, number, n_rows, n_cols, nnz, f"a Matrix Market coordinate {field} file",
                          with_counts=field != "pattern")
    else:
        n_rows, n_cols = _header_integers(path, [(number, line)], 2, "the size line 'rows cols'")
        table = _read_table(path, None, number, ["count"], "a Matrix Market array file")
        if len(table) != n_rows * n_cols:
            raise ValueError(f"{path}: the header declares {n_rows} x {n_cols} = {n_rows * n_cols} values but "
                             f"the file has {len(table)}; it is truncated or the header is wrong")

        def position(index):
            row = _row_line(path, None, number, int(index[0]))
            return f"line {row}"

        values = _check_count_values(table[0].to_numpy(), path, position)
        Y = sp.csr_matrix(values.reshape(n_cols, n_rows).T)  # Matrix Market arrays are column-major
    if symmetry == "symmetric":
        Y = _mirror(Y)
    return CountData(Y=Y, row_labels=[str(i) for i in range(Y.shape[0])],
                     col_labels=[str(j) for j in range(Y.shape[1])], model="topics",
                     source=str(path), info={"format": "mtx"})


def _mirror(Y):
    """A symmetric Matrix Market file stores one triangle; restore the other."""
    off_diagonal = sp.triu(Y, k=1) + sp.tril(Y, k=-1)
    return sp.csr_matrix(Y + off_diagonal.T, dtype=np.int64)


# ---------------------------------------------------------------- npz

def _load_npz(path):
    with open(path, "rb") as raw:
        magic = raw.read(6)
    if magic == b"\x93NUMPY":
        raise ValueError(f"{path}: a single .npy array, not an .npz archive; save it with np.savez(path, Y=counts)")
    if not magic.startswith(_ZIP_MAGIC):
        raise ValueError(f"{path}: not a NumPy .npz archive (an .npz is a zip file; this one is not); "
                         "save counts with np.savez(path, Y=counts, vocab=words) or lpviz.datasets.save_counts")
    try:
        archive = np.load(path, allow_pickle=False)
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as error:
        raise ValueError(f"{path}: not a NumPy .npz archive ({error}); save counts with "
                         "np.savez(path, Y=counts, vocab=words) or lpviz.datasets.save_counts") from None
    with archive:
        keys = set(archive.files)
        try:
            if "Y" in keys:
                Y = archive["Y"]
            elif {"Y_data", "Y_indices", "Y_indptr", "Y_shape"} <= keys:
                Y = sp.csr_matrix((archive["Y_data"], archive["Y_indices"], archive["Y_indptr"]),
                                  shape=tuple(int(s) for s in archive["Y_shape"]))
            elif {"data", "indices", "indptr", "shape", "format"} <= keys:
                Y = sp.load_npz(path).tocsr()
            else:
                raise ValueError(f"{path}: no count matrix 'Y' in this .npz (it holds: "
                                 f"{', '.join(sorted(keys)) or 'nothing'}); save it with "
                                 "np.savez(path, Y=counts, vocab=words)")
            texts = {key: archive[key] for key in ("row_labels", "col_labels", "vocab", "model", "source",
                                                   "info_json") if key in keys}
        except ValueError as error:
            if "allow_pickle" in str(error):
                raise ValueError(f"{path}: holds Python objects (pickled), which lpviz does not load for "
                                 "safety; save plain arrays: np.savez(path, Y=counts, vocab=np.array(words))") from None
            raise
    if Y.ndim != 2:
        raise ValueError(f"{path}: 'Y' has shape {Y.shape}; counts must be a 2-d documents x words "
                         "(or actors x actors) matrix")
    if not (np.issubdtype(Y.dtype, np.number) or Y.dtype == bool):
        raise ValueError(f"{path}: 'Y' holds {Y.dtype} values, not numbers; save numeric counts")
    values = Y.data if sp.issparse(Y) else Y
    if sp.issparse(Y):
        coo = Y.tocoo()

        def position(index):
            return f"cell ({coo.row[index[0]]}, {coo.col[index[0]]}) of Y"
        counts = _check_count_values(coo.data, path, position)
        Y = sp.csr_matrix((counts, (coo.row, coo.col)), shape=Y.shape, dtype=np.int64)
    else:
        Y = _check_count_values(values, path, lambda index: f"cell {tuple(int(i) for i in index)} of Y")
    model = str(texts["model"]) if "model" in texts else "topics"
    if model not in ("topics", "blocks"):
        raise ValueError(f"{path}: model {model!r} must be 'topics' or 'blocks'")
    if model == "blocks" and Y.shape[0] != Y.shape[1]:
        raise ValueError(f"{path}: a 'blocks' network must be square, 'Y' is {Y.shape}")
    row_labels = _labels(texts.get("row_labels"), Y.shape[0], path, "row_labels")
    col_labels = _labels(texts.get("col_labels", texts.get("vocab")), Y.shape[1], path,
                         "col_labels" if "col_labels" in texts else "vocab")
    info = json.loads(str(texts["info_json"])) if "info_json" in texts else {}
    info["format"] = "npz"
    return CountData(Y=Y, row_labels=row_labels, col_labels=col_labels, model=model,
                     source=str(texts.get("source", path)), info=info)


def _labels(array, n, path, name):
    if array is None:
        return [str(i) for i in range(n)]
    labels = [str(x) for x in np.asarray(array).ravel()]
    if len(labels) != n:
        raise ValueError(f"{path}: '{name}' has {len(labels)} names for {n} rows/columns of Y; "
                         "save one name per row/column")
    return labels


# ---------------------------------------------------------------- shared helpers

def _vocab_list(vocab, n_words, path):
    if isinstance(vocab, (str, os.PathLike)):
        vocab_path = Path(vocab)
        if not vocab_path.is_file():
            raise FileNotFoundError(f"{vocab_path}: vocabulary file not found; give a file with one word per line")
        _check_text_file(vocab_path)
        with _open_text(vocab_path) as handle:
            words = [line.rstrip("\r\n") for line in handle]
        while words and not words[-1].strip():
            words.pop()
        source = vocab_path
    else:
        words = [str(word) for word in vocab]
        source = "vocab"
    if len(words) != n_words:
        raise ValueError(f"{source} has {len(words)} words but {path} has {n_words} word columns; "
                         "they do not belong together, give the matching vocabulary")
    return words


def _check_not_empty(data, path):
    total = int(data.Y.sum())
    if min(data.shape) == 0 or total == 0:
        raise ValueError(f"{path}: no counts ({data.shape[0]} x {data.shape[1]} matrix, total {total}); "
                         "nothing to fit, check the file or the filter that produced it")


def _json_default(value):
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)
