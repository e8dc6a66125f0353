"""RFC 822 e-mail parsing: one raw message to an :class:`Email`.

A small, careful header/body splitter rather than the stdlib :mod:`email`
parser (about ten times slower on this corpus): headers end at the first
empty line (CRLF or LF), folded lines are unfolded, header names are
case-insensitive, ``quoted-printable`` and ``base64`` bodies are decoded, the
declared charset is used (unknown charsets fall back to cp1252, never an
error), ``multipart`` messages keep their text parts. A message that cannot be
used raises :class:`MalformedEmail` naming the reason (the readers count it in
their report and go on).
"""

from __future__ import annotations

import base64
import binascii
import codecs
import hashlib
import re
from dataclasses import dataclass
from email.utils import parsedate_tz

PARSER_VERSION = 3  # bump when parsing or tokenization changes: invalidates cached corpora (3: the month sent)


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
    no text part. ``month`` is the month of its Date header as written
    (``12 * year + month - 1``; -1 when there is no parseable date).
    """

    message_id: str
    path: str
    sender: str
    recipients: tuple
    names: dict
    text: str | None
    subject: str = ""
    notes: tuple = ()
    month: int = -1


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


def month_of(date: str) -> int:
    """``12 * year + month - 1`` of an RFC 822 Date header as written (its own time zone: a month
    is a month where the mail was sent), -1 when it does not parse."""
    try:
        parsed = parsedate_tz(date) if date else None
    except (TypeError, ValueError, IndexError):
        parsed = None
    if parsed is None or not 1 <= parsed[1] <= 12 or parsed[0] < 1:
        return -1
    return 12 * parsed[0] + parsed[1] - 1


def month_label(month: int) -> str:
    """ "2001-05" for :func:`month_of`'s number."""
    return f"{month // 12:04d}-{month % 12 + 1:02d}"


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
    month = month_of(headers.get("date", ""))
    if month < 0:
        notes.append("no_date")
    return Email(
        month=month,
        message_id=message_id,
        path=path,
        sender=sender,
        recipients=tuple(recipients),
        names=names,
        text=text,
        subject=_decode_header_words(headers.get("subject", "")),
        notes=tuple(notes),
    )
