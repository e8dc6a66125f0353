"""The Enron email corpus: readers and the paper's two count matrices.

Readers (:func:`read_emails`) accept the CMU release in its three common
shapes, chosen from what the path is:

- a maildir directory (``maildir/<user>/<folder>/<n>.``; every regular file
  below it that does not start with ``.`` is read, in sorted order);
- the tarball (``.tar.gz``/``.tgz``, or a plain ``.tar``), read as a stream
  (``tarfile`` mode ``"r|gz"``), never extracted to disk;
- the widely shared ``emails.csv`` (columns ``file`` and ``message``).

Parsing is a small, careful header/body splitter rather than the stdlib
:mod:`email` parser (about ten times slower on this corpus): headers end at
the first empty line (CRLF or LF), folded lines are unfolded, header names
are case-insensitive, ``quoted-printable`` and ``base64`` bodies are decoded,
the declared charset is used (unknown charsets fall back to cp1252, never an
error), ``multipart`` messages keep their text parts. Messages that cannot be
used are skipped and counted by reason in a :class:`ReadReport`; one bad
message never stops a build. A truncated or corrupt archive does: it is an
error naming where it stops, unless ``allow_partial=True`` (then the messages
before the break are used, reported as partial and never cached). The same
message sits in several folders of the CMU release: messages are
de-duplicated by Message-ID (first one read wins; messages without a
Message-ID are keyed by a hash of their bytes).

Hostile sources are bounded: a message above ``max_message_bytes`` (10 MiB)
is skipped without being read into memory, the messages read add up to at
most the memory limit, the parsed corpus and the dense network are checked
against the memory budget (:mod:`lpviz.budget`) as they grow, and maildir
symlinks that lead out of the maildir are not followed.

Tokenization (kept in ``CountData.info["tokenization"]``), applied to the
body only (not the subject):

1. the text is lower-cased;
2. header lines of quoted and forwarded messages are removed:
   ``-----Original Message-----`` and ``----- Forwarded by ...`` lines,
   Lotus Notes reply headers (``Name <addr> on 12/13/2000 10:37 AM``, or a
   date/time line of its own), ``From:``/``Sent:``/``Date:`` lines,
   ``To:``/``cc:``/``bcc:`` lines with their wrapped continuation lines, and
   the ``Subject:`` label. The quoted *text* is kept: sent-folder emails are
   mostly short replies and the paper's counts include it. Of the shared
   58,168 sent emails 34,153 have >= 50 words this way (38,410 when header
   lines and addresses are counted too, the design notes' "about 38,000");
   dropping quoted text altogether would leave about 13,700;
3. e-mail addresses and URLs are dropped whole (the whitespace-separated
   chunk that holds them);
4. a word is a maximal run of ASCII letters ``a-z`` (digits, punctuation and
   other characters separate words, so ``don't`` gives ``don`` and ``t``);
5. the vocabulary only admits words of 3 to 25 letters that are not English
   stop words (:data:`STOP_WORDS`).

An email's token count (for ``min_tokens``) counts every word of step 4, as
the paper counts "word tokens"; the matrix counts only the words of step 5
that make the vocabulary cut.

The topic matrix (:func:`build_enron_topics`) follows Schein et al. (2019):
``n_docs`` emails drawn at random (seeded) among those with at least
``min_tokens`` tokens, then the ``n_words`` most frequent word types among
those whose document frequency in the drawn emails is below ``max_df``.
The network (:func:`build_enron_network`) counts sender -> recipient emails.

Reading the corpus is done once per source: the parsed corpus
(:class:`EnronCorpus`, from :func:`read_corpus`) is cached beside the built
matrices (see :mod:`lpviz.datasets.cache`), so building both matrices reads
the tarball once; a builder also accepts an :class:`EnronCorpus` directly.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import csv
import gzip
import hashlib
import itertools
import os
import re
import stat
import tarfile
import warnings
import zlib
from array import array
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from lpviz.budget import MemoryBudgetError, check_memory, dense_bytes, format_bytes, memory_limit

from .. import cache as _cache
from .._types import CountData

__all__ = [
    "Email",
    "EnronCorpus",
    "MalformedEmail",
    "ReadReport",
    "STOP_WORDS",
    "TOKENIZATION",
    "build_enron_network",
    "build_enron_topics",
    "parse_email",
    "read_corpus",
    "read_emails",
    "clean_body",
    "tokenize",
]

PARSER_VERSION = 2  # bump when parsing or tokenization changes: invalidates cached corpora

STOP_WORDS = frozenset(
    """
a about above after again against all am an and any are aren arent as at be because been before being
below between both but by can cannot could couldn did didn didnt do does doesn doesnt doing don dont down
during each few for from further had hadn hadnt has hasn hasnt have haven havent having he her here hers
herself him himself his how i if in into is isn isnt it its itself just ll me more most mustn my myself
needn no nor not now of off on once only or other ought our ours ourselves out over own re same shan she
should shouldn so some such than that the their theirs them themselves then there these they this those
through to too under until up ve very was wasn wasnt we were weren what when where which while who whom
why will with won wont would wouldn you your yours yourself yourselves also may might must shall us
""".split()
)

MIN_WORD_LENGTH = 3
MAX_WORD_LENGTH = 25

TOKENIZATION = {
    "version": PARSER_VERSION,
    "text": "message body only (not the subject); text/* parts of multipart messages",
    "case": "lower",
    "removed": "header lines of quoted/forwarded messages ('-----Original Message-----', "
    "'----- Forwarded by', Lotus 'X on 12/13/2000 10:37 AM' and date lines, From:/Sent:/Date:, "
    "To:/cc:/bcc: with wrapped lines, the 'Subject:' label); e-mail addresses and URLs. "
    "Quoted text itself is kept",
    "word": "maximal run of ASCII letters a-z",
    "vocabulary_words": f"{MIN_WORD_LENGTH} to {MAX_WORD_LENGTH} letters, not in "
    "lpviz.datasets.enron.STOP_WORDS (English)",
    "min_tokens_counts": "every word of the cleaned body (before the stop-word and length filter)",
}

# ---------------------------------------------------------------------------------------------
# Reports and parsed messages


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


class MalformedEmail(ValueError):
    """A message that cannot be used; ``reason`` is the report key."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


@dataclass
class Email:
    """One parsed message.

    ``sender`` and ``recipients`` are normalised addresses (lower-case, no
    angle brackets or quotes); ``recipients`` is the ordered union of To, Cc
    and Bcc without repeats and without the sender. ``names`` maps addresses
    to display names found in From/To/Cc or the ``X-From``/``X-To``/``X-cc``
    headers. ``text`` is the decoded body text, ``None`` if the message has
    no text part.
    """

    message_id: str
    path: str
    sender: str
    recipients: tuple
    names: dict
    text: str | None
    subject: str = ""
    notes: tuple = ()


# ---------------------------------------------------------------------------------------------
# Parsing

_HEADER_END = re.compile(rb"\r?\n\r?\n")
_FOLD = re.compile(r"\r?\n[ \t]+")
_HEADER_NAME = re.compile(r"[!-9;-~]+")
_PARAM = re.compile(r';\s*([A-Za-z0-9_.-]+)\s*=\s*(?:"([^"]*)"|([^;\s]*))')
_ADDRESS_ITEM = re.compile(r'(?:"[^"]*"|<[^>]*>|[^,])+')
_ANGLE = re.compile(r"<([^<>]*)>")
_ENCODED_WORD = re.compile(r"=\?[^?]+\?[bBqQ]\?[^?]*\?=")
_KNOWN_HEADERS = frozenset(
    {
        "from",
        "to",
        "cc",
        "bcc",
        "message-id",
        "date",
        "subject",
        "mime-version",
        "content-type",
        "x-from",
        "received",
        "return-path",
        "sender",
    }
)


def _split_header_block(raw: bytes):
    if raw[:1] == b"\n" or raw[:2] == b"\r\n":  # no headers at all (allowed in MIME parts)
        return b"", raw.partition(b"\n")[2]
    match = _HEADER_END.search(raw)
    if match is None:
        return raw, b""
    return raw[: match.start()], raw[match.end() :]


def _parse_headers(block: str) -> dict:
    """Unfold and split a header block into {lower-case name: value} (first occurrence wins)."""
    headers: dict[str, str] = {}
    for line in _FOLD.sub(" ", block).splitlines():
        name, sep, value = line.partition(":")
        if not sep or not _HEADER_NAME.fullmatch(name):
            continue
        headers.setdefault(name.lower(), value.strip())
    return headers


def _decode_header_block(head: bytes) -> str:
    # Headers should be ASCII; 8-bit names are UTF-8 in emails.csv and newer mail, else Latin-1.
    try:
        return head.decode("utf-8")
    except UnicodeDecodeError:
        return head.decode("latin-1")


def _content_type(headers: dict):
    value = headers.get("content-type", "text/plain")
    ctype = value.split(";", 1)[0].strip().lower() or "text/plain"
    params = {
        m.group(1).lower(): (m.group(2) if m.group(2) is not None else m.group(3)) for m in _PARAM.finditer(value)
    }
    return ctype, params


def _decode_header_words(value: str) -> str:
    if "=?" not in value or not _ENCODED_WORD.search(value):
        return value
    from email.header import decode_header, make_header  # rare: RFC 2047 encoded words

    try:
        return str(make_header(decode_header(value)))
    except Exception:
        return value


def _decode_bytes(data: bytes, charset: str | None, notes: list) -> str:
    charset = (charset or "us-ascii").strip().strip('"').lower()
    try:
        codec = codecs.lookup(charset).name
    except LookupError:
        notes.append("unknown_charset")
        codec = "cp1252"
    if codec == "ascii":  # declared ASCII often holds cp1252 bytes (smart quotes)
        codec = "cp1252"
    try:
        return data.decode(codec)
    except UnicodeDecodeError:
        notes.append("charset_errors")
        return data.decode(codec, errors="replace")


def _decode_transfer(data: bytes, encoding: str, notes: list) -> bytes:
    encoding = encoding.strip().lower()
    if encoding == "quoted-printable":
        return binascii.a2b_qp(data)
    if encoding == "base64":
        try:
            return base64.b64decode(re.sub(rb"[^A-Za-z0-9+/=]", b"", data), validate=False)
        except (binascii.Error, ValueError):
            notes.append("bad_base64")
            return b""
    return data


_TAG = re.compile(r"<[^>]*>")


def _body_text(headers: dict, body: bytes, notes: list, depth: int = 0, already_decoded: bool = False):
    """The text of a (possibly multipart) body, or None if it holds no text part.

    ``already_decoded``: the message came as text (emails.csv), re-encoded as UTF-8 here;
    only quoted-printable or base64 bodies are still in their declared charset.
    """
    ctype, params = _content_type(headers)
    if ctype.startswith("multipart/") and params.get("boundary") and depth < 5:
        delimiter = b"--" + params["boundary"].encode("latin-1", "replace")
        texts: list[str] = []
        htmls: list[str] = []
        for part in body.split(delimiter)[1:]:
            if part.startswith(b"--"):
                break  # closing delimiter
            head, sub_body = _split_header_block(part.partition(b"\n")[2])  # after the delimiter line
            sub_headers = _parse_headers(_decode_header_block(head))
            if "attachment" in sub_headers.get("content-disposition", "").lower():
                continue
            sub_type, _ = _content_type(sub_headers)
            text = _body_text(sub_headers, sub_body, notes, depth + 1, already_decoded)
            if text is not None:
                (htmls if sub_type == "text/html" else texts).append(text)
        if texts or htmls:
            return "\n".join(texts) if texts else "\n".join(htmls)
        return None
    if not ctype.startswith("text/"):
        return None
    transfer = headers.get("content-transfer-encoding", "").strip().lower()
    data = _decode_transfer(body, transfer, notes)
    charset = "utf-8" if already_decoded and transfer not in ("quoted-printable", "base64") else params.get("charset")
    text = _decode_bytes(data, charset, notes)
    if ctype == "text/html":
        text = _TAG.sub(" ", text)
    return text


def _normalise_address(address: str) -> str:
    address = address.strip().strip("\"' ").lower()
    if address.startswith("mailto:"):
        address = address[7:]
    return address.strip(".'\" ")


def _parse_address_list(value: str):
    """[(address, display name)] from a To/Cc/From value; items without '@' are dropped."""
    if not value:
        return []
    value = _decode_header_words(value)
    pairs = []
    if "<" not in value and '"' not in value:
        for item in value.split(","):
            address = _normalise_address(item)
            if "@" in address:
                pairs.append((address, ""))
        return pairs
    for item in _ADDRESS_ITEM.findall(value):
        angle = _ANGLE.search(item)
        if angle:
            address = _normalise_address(angle.group(1))
            name = (item[: angle.start()] + item[angle.end() :]).strip().strip("\"' ")
        else:
            address, name = _normalise_address(item), ""
        if "@" in address:
            pairs.append((address, "" if "@" in name else name))
    return pairs


def parse_email(raw, path: str = "") -> Email:
    """Parse one raw message (``bytes``, or ``str`` already decoded, as in ``emails.csv``).

    Raises :class:`MalformedEmail` (a ``ValueError``) with ``reason`` set
    when the message cannot be used.
    """
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogateescape")
        already_decoded = True
    elif isinstance(raw, (bytes, bytearray, memoryview)):
        raw = bytes(raw)
        already_decoded = False
    else:
        raise TypeError(f"parse_email takes bytes or str, got {type(raw).__name__}")
    if not raw.strip():
        raise MalformedEmail("empty", path)
    raw = raw.lstrip(b"\r\n")
    if raw.startswith(b"From "):  # an mbox "From " envelope line is not a header
        raw = raw.partition(b"\n")[2]
    head, body = _split_header_block(raw)
    head_text = _decode_header_block(head)
    first_name, sep, _ = head_text.lstrip("\r\n").partition(":")
    if not sep or not _HEADER_NAME.fullmatch(first_name):
        raise MalformedEmail("unparseable", f"{path}: does not start with a header line")
    headers = _parse_headers(head_text)
    if not _KNOWN_HEADERS.intersection(headers):
        raise MalformedEmail("unparseable", f"{path}: no From, To, Date or Message-ID header")
    notes: list[str] = []
    text = _body_text(headers, body, notes, already_decoded=already_decoded)
    if text is None:
        notes.append("non_text")
    else:
        text = text.replace("\r\n", "\n")
    message_id = headers.get("message-id", "").strip()
    if not message_id:
        notes.append("no_message_id")
        message_id = "<sha1:" + hashlib.sha1(raw).hexdigest() + ">"
    names: dict[str, str] = {}
    senders = _parse_address_list(headers.get("from", ""))
    sender = senders[0][0] if senders else ""
    if not sender:
        notes.append("no_sender")
    recipients = []
    seen = {sender}
    for header in ("to", "cc", "bcc"):
        for address, name in _parse_address_list(headers.get(header, "")):
            if name:
                names.setdefault(address, name)
            if address not in seen:
                seen.add(address)
                recipients.append(address)
    if senders and senders[0][1]:
        names[sender] = senders[0][1]
    x_from = _decode_header_words(headers.get("x-from", "")).strip().strip("\"' ")
    if sender and x_from and "@" not in x_from and "<" not in x_from:
        names.setdefault(sender, x_from)
    for header in ("x-from", "x-to", "x-cc"):
        value = headers.get(header, "")
        if "<" in value:
            for address, name in _parse_address_list(value):
                if name:
                    names.setdefault(address, name)
    return Email(
        message_id=message_id,
        path=path,
        sender=sender,
        recipients=tuple(recipients),
        names=names,
        text=text,
        subject=_decode_header_words(headers.get("subject", "")),
        notes=tuple(notes),
    )


# ---------------------------------------------------------------------------------------------
# Sources


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


# ---------------------------------------------------------------------------------------------
# Tokenization

# Header lines of quoted and forwarded messages (with the wrapped lines of their To/cc lists)
# hold addresses, names and dates, not what anyone wrote; left in, "ect", "hou" and "cc"
# would fill the vocabulary. The quoted text itself is kept, as in the paper's counts.
# Patterns work on lower-cased text with a leading "\n" so every line starts with a literal
# newline, which keeps the regex engine off all other positions (10x faster than MULTILINE).
_QUOTED_HEADER_LINE = re.compile(
    r"\n[ \t>]*(?:"
    r"(?:to|cc|bcc):[^\n]*(?:\n(?![ \t>]*(?:subject|from|sent|date|to|cc|bcc):)[ \t>]*[^\s>][^\n]*)*"
    r"|(?:from|sent|date):[^\n]*"
    r"|subject:"
    r"|-{2,}[ \t]*(?:original message|forwarded by)[^\n]*"
    r"|\d{1,2}/\d{1,2}/\d{2,4} \d{1,2}:\d{2}(?::\d{2})?[ \t]*[ap]m[ \t]*(?=\n|$))"
)
# Lotus Notes reply header: "Richard Donoghue <rd@x.com> on 12/13/2000 10:37:08 AM".
_LOTUS_REPLY = re.compile(r" on \d{1,2}/\d{1,2}/\d{2,4} \d{1,2}:\d{2}(?::\d{2})?[ \t]*[ap]m[^\n]*")
_WORD = re.compile(r"[a-z]+")


def _drop_addresses_and_urls(text: str) -> str:
    # Whole whitespace-separated chunks go, so an address never leaves name words behind;
    # splitting is much faster than a regex with a leading character class.
    if "@" not in text and "http" not in text and "www." not in text:
        return text
    return " ".join(chunk for chunk in text.split() if "@" not in chunk and "http" not in chunk and "www." not in chunk)


def clean_body(text: str) -> str:
    """The lower-cased body without the header lines of quoted or forwarded messages."""
    text = "\n" + text.lower()
    if " on " in text:
        pieces, position = [], 0
        for match in _LOTUS_REPLY.finditer(text):
            line_start = text.rfind("\n", position, match.start())
            pieces.append(text[position : max(line_start, position)])
            position = match.end()
        if pieces:
            pieces.append(text[position:])
            text = "".join(pieces)
    return _QUOTED_HEADER_LINE.sub("\n", text)


def _keep(word: str) -> bool:
    return MIN_WORD_LENGTH <= len(word) <= MAX_WORD_LENGTH and word not in STOP_WORDS


def _words(text: str) -> list:
    """Every word of a message body, in order, before the vocabulary filter."""
    return _WORD.findall(_drop_addresses_and_urls(clean_body(text)))


def tokenize(text: str) -> list:
    """The vocabulary-eligible tokens of a message body, in order (see the module docstring)."""
    return [w for w in _words(text) if _keep(w)]


# ---------------------------------------------------------------------------------------------
# The parsed corpus: read once, cached, shared by both builders


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
    name of ``addresses[a]`` ("" if none).
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


# ---------------------------------------------------------------------------------------------
# The paper's two matrices


def _check_int(name, value, minimum):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def _fingerprint(source) -> dict:
    """The source's fingerprint without parsing it, so a cached matrix loads without its corpus."""
    if isinstance(source, EnronCorpus):
        return source.fingerprint  # empty for a corpus made by hand: not cached
    path = Path(source).expanduser()
    _source_shape(path)  # clear errors for missing or foreign files first
    return _cache.source_fingerprint(path)


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
        D and V (paper: 10,000 each).
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
    if eligible.size > n_docs:
        chosen = np.sort(rng.choice(eligible, size=n_docs, replace=False))
    else:
        chosen = eligible
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
            f"only {eligible.size} emails have >= {min_tokens} tokens: all are used" if eligible.size < n_docs else ""
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


def _build_network(corpus, min_count) -> CountData:
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
    check_memory(
        dense_bytes((keep.size, keep.size), np.int64),
        f"{corpus.source}: the {keep.size:,} x {keep.size:,} network of the actors passing min_count={min_count}",
        fix="Raise min_count.",
    )
    position = np.full(n_addresses, -1, dtype=np.int64)
    position[keep] = np.arange(keep.size)
    edge_sender = np.repeat(np.where(corpus.senders >= 0, position[np.maximum(corpus.senders, 0)], -1), n_recipients)
    edge_recipient = position[corpus.recipient_indices]
    kept = (edge_sender >= 0) & (edge_recipient >= 0)
    Y = np.zeros((keep.size, keep.size), dtype=np.int64)
    np.add.at(Y, (edge_sender[kept], edge_recipient[kept]), 1)
    if keep.size < 2 or not Y.any():
        # a network with no email between its actors has nothing for the block model to fit
        raise ValueError(
            f"{corpus.source}: the {keep.size} actor(s) passing min_count={min_count} sent no email "
            "to one another (0 counts among them); lower min_count or use a larger corpus"
        )
    labels = [corpus.addresses[a] for a in keep]
    message_of_edge = np.repeat(np.arange(len(corpus)), n_recipients)
    info = {
        "builder": "build_enron_network",
        "params": {"min_count": min_count},
        "rule": "actor kept if it sent >= 1 email and sent + received >= min_count (whole corpus); "
        "one count per distinct recipient over To, Cc and Bcc; no self loops",
        "names": [corpus.names[a] for a in keep],
        "sent": sent[keep].tolist(),
        "received": received[keep].tolist(),
        "n_actors_seen": int(np.count_nonzero((sent + received) > 0)),
        "n_emails_used": int(np.unique(message_of_edge[kept]).size),
        "report": corpus.report,
    }
    return CountData(Y=Y, row_labels=labels, col_labels=list(labels), model="blocks", source=corpus.source, info=info)
