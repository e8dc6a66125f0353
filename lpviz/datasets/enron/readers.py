"""Reading the CMU release: every message of a source, parsed and de-duplicated.

:func:`read_emails` accepts the release in its three common shapes, chosen
from what the path is:

- a maildir directory (``maildir/<user>/<folder>/<n>.``; every regular file
  below it that does not start with ``.`` is read, in sorted order);
- the tarball (``.tar.gz``/``.tgz``, or a plain ``.tar``), read as a stream
  (``tarfile`` mode ``"r|gz"``), never extracted to disk;
- the widely shared ``emails.csv`` (columns ``file`` and ``message``).

Messages that cannot be used are skipped and counted by reason in a
:class:`ReadReport`; one bad message never stops a build. A truncated or
corrupt archive does: it is an error naming where it stops, unless
``allow_partial=True`` (then the messages before the break are used, reported
as partial and never cached). The same message sits in several folders of the
CMU release: messages are de-duplicated by Message-ID (first one read wins;
messages without a Message-ID are keyed by a hash of their bytes).

Hostile sources are bounded: a message above ``max_message_bytes`` (10 MiB)
is skipped without being read into memory, the messages read add up to at
most the memory limit, and maildir symlinks that lead out of the maildir are
not followed.
"""

from __future__ import annotations

import csv
import gzip
import os
import stat
import tarfile
import warnings
import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from lpviz._validate import check_int as _check_int
from lpviz.budget import MemoryBudgetError, format_bytes, memory_limit

from .parser import MalformedEmail, parse_email


@dataclass
class ReadReport:
    """What a read did: messages seen, kept, skipped by reason, and non-fatal notes.

    ``skipped`` reasons: ``"unparseable"`` (no RFC 822 header block),
    ``"unreadable"`` (I/O error or a broken archive member), ``"empty"``
    (zero bytes), ``"duplicate_message_id"``, ``"too_large"`` (a message
    above ``max_message_bytes``: never read into memory), ``"outside_root"``
    (a maildir symlink leading out of the maildir: not followed),
    ``"archive_truncated"`` (the archive ends early; only with
    ``allow_partial=True``, else that is an error). ``partial`` is True when
    the read stopped early (``stopped`` says where); a partial corpus is never
    cached. ``notes`` count things that were repaired, e.g.
    ``"unknown_charset"``, ``"no_message_id"``, ``"non_text"`` (no text
    part: usable for the network, not for topics).
    """

    source: str = ""
    n_read: int = 0
    n_parsed: int = 0
    skipped: Counter = field(default_factory=Counter)
    notes: Counter = field(default_factory=Counter)
    examples: dict = field(default_factory=dict)
    partial: bool = False
    stopped: str = ""

    def skip(self, reason: str, path: str = "") -> None:
        self.skipped[reason] += 1
        self.examples.setdefault(reason, path)

    def as_dict(self) -> dict:
        return {
            "source": self.source,
            "n_read": self.n_read,
            "n_parsed": self.n_parsed,
            "skipped": dict(self.skipped),
            "notes": dict(self.notes),
            "examples": dict(self.examples),
            "partial": self.partial,
            "stopped": self.stopped,
        }

    def __str__(self) -> str:
        skipped = ", ".join(f"{k}={v}" for k, v in sorted(self.skipped.items())) or "none"
        partial = f" (PARTIAL: {self.stopped})" if self.partial else ""
        return f"{self.n_read} messages read from {self.source}, {self.n_parsed} kept; skipped: {skipped}{partial}"


def _source_shape(path: Path) -> str:
    if path.is_dir():
        return "maildir"
    if not path.is_file():
        raise FileNotFoundError(
            f"{path}: no such file or directory. Point at a maildir directory, the CMU tarball "
            "(.tar.gz/.tgz) or emails.csv, or download the corpus with `lpviz fetch-enron`."
        )
    name = path.name.lower()
    with open(path, "rb") as fh:
        magic = fh.read(512)
    if name.endswith(".csv"):
        return "csv"
    if magic[:2] == b"\x1f\x8b":  # gzip data is read as a tarball whatever its name
        return "tar.gz"
    if len(magic) >= 262 and magic[257:262] == b"ustar":
        return "tar"
    if name.endswith((".tar.gz", ".tgz", ".gz")):
        raise ValueError(
            f"{path}: named like a gzip tarball but is not gzip data; "
            "re-download it (`lpviz fetch-enron`) or pass the right file"
        )
    raise ValueError(
        f"{path}: not a maildir directory, a .tar.gz/.tgz/.tar archive or an emails.csv "
        "(columns file, message); pass one of those"
    )


def _iter_maildir(root: Path, report: ReadReport, limits):
    # Symlinks are followed only when they stay inside the maildir: a link to ~/.ssh or
    # /dev/zero must not become part of a corpus (os.walk already keeps off linked folders).
    real_root = os.path.realpath(root)
    for directory, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if name.startswith("."):
                continue
            full = os.path.join(directory, name)
            relative = os.path.relpath(full, root)
            if os.path.islink(full):
                target = os.path.realpath(full)
                if os.path.commonpath([real_root, target]) != real_root:
                    report.n_read += 1
                    report.skip("outside_root", f"{relative} -> {target}")
                    continue
            try:
                info = os.stat(full)
                if not stat.S_ISREG(info.st_mode):  # a FIFO or device would block or never end
                    report.n_read += 1
                    report.skip("unreadable", full)
                    continue
                if info.st_size > limits.message:
                    report.n_read += 1
                    report.skip("too_large", f"{relative} ({format_bytes(info.st_size)})")
                    continue
                with open(full, "rb") as fh:
                    data = fh.read(limits.message + 1)  # the file may have grown since stat
            except OSError:
                report.n_read += 1
                report.skip("unreadable", full)
                continue
            if len(data) > limits.message:
                report.n_read += 1
                report.skip("too_large", f"{relative} (more than {format_bytes(limits.message)})")
                continue
            limits.add(len(data), report)
            yield relative, data


class _Eager:
    """A stream whose ``read`` returns what is ready (``read1``): at a truncation it hands over
    every byte decompressed before it, so no complete message before the break is lost."""

    def __init__(self, stream):
        self.read = getattr(stream, "read1", stream.read)


def _iter_tar(path: Path, compressed: bool, report: ReadReport, limits, allow_partial):
    members_seen = complete = 0
    last = "none"
    archive = None
    # gzip is undone by GzipFile, not by tarfile's "r|gz": tarfile re-slices its whole buffer on
    # every 10 KB read, which makes skipping a 1.5 GB member take a minute instead of seconds.
    with open(path, "rb") as raw, gzip.GzipFile(fileobj=raw) if compressed else raw as stream:
        try:
            with tarfile.open(fileobj=_Eager(stream), mode="r|", bufsize=1 << 16) as archive:  # type: ignore[call-overload]  # the stubs want a seekable file; "r|" only reads
                for member in archive:
                    members_seen += 1
                    if not member.isfile() or os.path.basename(member.name).startswith("."):
                        continue
                    if member.size > limits.message:
                        # never read into memory: the stream skips it in blocks (it still takes time)
                        report.n_read += 1
                        report.skip("too_large", f"{member.name} ({format_bytes(member.size)})")
                        limits.add(member.size, report)
                        continue
                    try:
                        data = archive.extractfile(member).read()
                    except (OSError, tarfile.TarError, EOFError, zlib.error):
                        report.n_read += 1
                        report.skip("unreadable", member.name)
                        raise
                    limits.add(len(data), report)
                    complete, last = complete + 1, member.name
                    yield member.name, data
        except (OSError, tarfile.TarError, EOFError, zlib.error) as exc:
            if members_seen == 0:
                raise ValueError(
                    f"{path}: not a readable tar archive ({exc.__class__.__name__}: {exc}); pass "
                    "the CMU tarball (re-download it if it was cut short), a maildir directory or "
                    "emails.csv"
                ) from exc
            into = getattr(archive, "offset", 0)
            where = (
                f"after {complete:,} complete messages (the last one {last}), {into:,} bytes into the "
                f"unpacked archive; the file has {path.stat().st_size:,} bytes"
            )
            if not allow_partial:
                raise ValueError(
                    f"{path}: the archive is truncated or corrupt: it stops {where} "
                    f"({exc.__class__.__name__}: {exc}). Re-download it (`lpviz fetch-enron`), or pass "
                    "allow_partial=True (--allow-partial) to use the messages before that point"
                ) from exc
            report.skip("archive_truncated", f"{path}: {exc}")
            report.partial, report.stopped = True, f"the archive stops {where}"
            warnings.warn(
                f"{path}: archive is truncated or corrupt: it stops {where} "
                f"({exc.__class__.__name__}: {exc}); using what was read (allow_partial=True, "
                "not cached). Re-download it (`lpviz fetch-enron`) for the full corpus.",
                RuntimeWarning,
                stacklevel=2,
            )


def _iter_csv(path: Path, report: ReadReport, limits):
    # the field limit is per process: set it for this read, as large as a message may be
    csv.field_size_limit(limits.message)
    with open(path, newline="", encoding="utf-8", errors="surrogateescape") as fh:
        reader = csv.reader(fh)
        try:
            header = next(reader, None)
            if header is None:
                raise ValueError(f"{path}: empty CSV; emails.csv needs a header row with columns file, message")
            columns = [h.strip().lower() for h in header]
            if "message" not in columns:
                raise ValueError(
                    f"{path}: line 1: no 'message' column (found {header[:5]}); emails.csv needs columns file, message"
                )
            i_msg = columns.index("message")
            i_file = columns.index("file") if "file" in columns else None
            for row in reader:
                line = reader.line_num
                if len(row) <= i_msg:
                    report.n_read += 1
                    report.skip("unparseable", f"{path}:{line}")
                    continue
                name = row[i_file] if i_file is not None and i_file < len(row) else f"{path.name}:{line}"
                limits.add(len(row[i_msg]), report)
                yield name, row[i_msg]
        except csv.Error as exc:
            # a field over the limit cannot be skipped: the reader has lost its place in the file
            raise ValueError(
                f"{path}, line {reader.line_num}: {exc}: a message larger than "
                f"{format_bytes(limits.message)} or a quote that is never closed; fix the line or "
                "pass a larger max_message_bytes"
            ) from None


MAX_MESSAGE_BYTES = 10 * 2**20  # the CMU corpus' largest message is under 2.5 MB


class _ReadLimits:
    """Bytes a read may take: per message (larger ones are skipped) and in total (else an error)."""

    def __init__(self, source, message, total):
        self.given = total is not None
        self.source, self.message, self.read = source, int(message), 0
        self.total = total if self.given else memory_limit()

    def add(self, nbytes, report):
        self.read += nbytes
        if self.read > self.total:
            how = (
                "max_total_bytes"
                if self.given
                else "max_total_bytes, by default the memory limit: set LPVIZ_MEMORY_LIMIT to change it"
            )
            raise MemoryBudgetError(
                f"{self.source}: the messages add up to more than {format_bytes(self.total)} ({how}) after "
                f"{report.n_read:,} messages. Read a smaller part of the corpus"
            )


def read_emails(source, *, allow_partial=False, max_message_bytes=MAX_MESSAGE_BYTES, max_total_bytes=None):
    """Read every message of ``source``; return ``(iterator of Email, ReadReport)``.

    ``source`` is a maildir directory, a ``.tar.gz``/``.tgz``/``.tar``
    archive (streamed, never extracted) or an ``emails.csv``. The report is
    filled in as the iterator is consumed. Duplicates (same Message-ID) are
    skipped and counted.

    Parameters
    ----------
    allow_partial : bool
        A truncated or corrupt archive is an error naming where it stops,
        unless this is True: then the messages before that point are used,
        with a warning, and the report says ``partial``.
    max_message_bytes : int
        Messages larger than this are skipped (``"too_large"`` in the
        report) without being read into memory.
    max_total_bytes : int, optional
        Stop with a :class:`~lpviz.budget.MemoryBudgetError` once the
        messages read (skipped ones included: they are decompressed too) add
        up to more than this; default :func:`lpviz.budget.memory_limit`.
        (The parsed corpus itself is held to the memory budget by
        :func:`read_corpus`.)
    """
    path = Path(source).expanduser()
    shape = _source_shape(path)
    max_message_bytes = _check_int("max_message_bytes", max_message_bytes, 1)
    if max_total_bytes is not None:
        max_total_bytes = _check_int("max_total_bytes", max_total_bytes, 1)
    report = ReadReport(source=str(path))
    limits = _ReadLimits(path, max_message_bytes, max_total_bytes)
    if shape == "maildir":
        raw_items = _iter_maildir(path, report, limits)
    elif shape == "csv":
        raw_items = _iter_csv(path, report, limits)
    else:
        raw_items = _iter_tar(path, shape == "tar.gz", report, limits, allow_partial)

    def emails():
        seen = set()
        for name, raw in raw_items:
            report.n_read += 1
            try:
                message = parse_email(raw, name)
            except MalformedEmail as exc:
                report.skip(exc.reason, name)
                continue
            if message.message_id in seen:
                report.skip("duplicate_message_id", name)
                continue
            seen.add(message.message_id)
            report.n_parsed += 1
            for note in message.notes:
                report.notes[note] += 1
            yield message

    return emails(), report
