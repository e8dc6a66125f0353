"""Download the CMU Enron release: resumable, size- and checksum-checked, moved into place atomically.

Bytes go to ``DEST.part`` first. An interrupted transfer leaves that file
behind and the next call (or the next retry) asks the server for the rest with
an HTTP ``Range`` request; a server that ignores ``Range`` is downloaded again
from the start. Only a file of the announced size (``Content-Length`` or the
total in ``Content-Range``, and ``expected_size`` when given) and, when
``known_hash`` is given, of that checksum is renamed to ``DEST``, with
:func:`os.replace`, so ``DEST`` is never a partial or foreign file.

Why not pooch (the ecosystem's downloader, a dependency of lpviz): pooch
checks hashes in the same ``"sha256:HEX"`` form used here, but it retries a
broken transfer from byte 0 (no ``Range`` requests). The CMU file is 423 MB
from one university server; on a link that drops every few minutes pooch
never finishes, this downloader does. The checksum is the part of pooch's
design kept.
"""

import hashlib
import http.client
import os
import re
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

from tqdm.auto import tqdm

from .cache import default_cache_dir

__all__ = ["DEFAULT_URL", "fetch_enron", "file_hash"]

DEFAULT_URL = "https://www.cs.cmu.edu/~enron/enron_mail_20150507.tar.gz"

_CONTENT_RANGE = re.compile(r"bytes\s+(\d+)-(\d+)/(\d+|\*)")
_GZIP_MAGIC = b"\x1f\x8b"


class _Interrupted(Exception):
    """The transfer stopped early; what arrived is kept in the .part file."""


def fetch_enron(
    dest=None,
    url=DEFAULT_URL,
    *,
    expected_size=None,
    known_hash=None,
    progress=True,
    timeout=60.0,
    retries=3,
    retry_wait=2.0,
    chunk_size=1 << 20,
):
    """Download the Enron tarball (about 423 MB for the CMU release) and return its path.

    Parameters
    ----------
    dest : str or Path, optional
        The file to create, or an existing folder to put it in. Default: the
        data cache folder (``LPVIZ_DATA_DIR``, else ``<repo>/data``, else
        ``~/.cache/lpviz``), named after the URL.
    url : str
        Where to download from (HTTP or HTTPS).
    expected_size : int, optional
        The size in bytes the file must have; checked against the server's
        announcement before downloading and against the result after.
    known_hash : str, optional
        The file's checksum as ``"ALGORITHM:HEX"`` (``"sha256:..."``; a bare
        hex string is SHA-256), as pooch writes it. A download that does not
        match is deleted and refused; so is checking an existing ``dest``.
        Without it the SHA-256 of the result can be read with
        :func:`file_hash`, to pin it next time.
    progress : bool
        Show a tqdm progress bar on stderr.
    timeout : float
        Seconds to wait for the server on connect and on each read.
    retries : int
        How many times an interrupted transfer is resumed automatically
        before giving up (the ``.part`` file stays for a later call).
    retry_wait : float
        Seconds between retries (doubled each time).
    chunk_size : int
        Bytes read per step.

    Returns
    -------
    Path
        The complete file. If it already exists (and has ``expected_size``
        when given) it is returned untouched without any network access.

    Raises
    ------
    FileExistsError
        ``dest`` exists with a size other than ``expected_size``: it is left
        alone; move it away or choose another ``dest``.
    ValueError
        The server's size disagrees with ``expected_size``, or the server
        sent more than it announced, or a ``.gz`` download is not gzip data,
        or the download does not match ``known_hash`` (it is deleted), or
        ``known_hash`` is not a checksum.
    ConnectionError
        The server cannot be reached, answers with an HTTP error, or the
        transfer kept breaking off after ``retries`` resumes.
    """
    algorithm, digest = _parse_known_hash(known_hash)
    final = _destination(dest, url)
    if final.exists():
        if final.is_dir():
            raise IsADirectoryError(f"{final} is a folder; give a file name or an existing folder as dest")
        size = final.stat().st_size
        if expected_size is not None and size != expected_size:
            raise FileExistsError(
                f"{final} already exists with {size} bytes, not the expected {expected_size}; "
                "lpviz does not overwrite it: move it away or choose another dest"
            )
        if digest is not None and file_hash(final, algorithm) != digest:
            raise FileExistsError(
                f"{final} already exists but its {algorithm} is {file_hash(final, algorithm)}, "
                f"not the known {digest}; lpviz does not overwrite it: move it away or "
                "choose another dest"
            )
        return final
    if dest is None:
        final.parent.mkdir(parents=True, exist_ok=True)  # the cache folder: lpviz's own
    elif not final.parent.is_dir():
        raise FileNotFoundError(
            f"{final}: the folder {final.parent} does not exist; create it first or choose a path in an existing folder"
        )
    part = final.with_name(final.name + ".part")
    failures = 0
    while True:
        try:
            total = _transfer(url, part, expected_size, progress, timeout, chunk_size, final.name)
            break
        except _Interrupted as error:
            failures += 1
            if failures > retries:
                have = part.stat().st_size if part.exists() else 0
                raise ConnectionError(
                    f"download of {url} interrupted ({error}); {have} bytes are kept in {part}: run again to resume"
                ) from None
            time.sleep(retry_wait * 2 ** (failures - 1))
    _check_downloaded(part, url, total, expected_size)
    if digest is not None:
        got = file_hash(part, algorithm)
        if got != digest:
            part.unlink()
            raise ValueError(
                f"download of {url} has {algorithm} {got}, not the known {digest}: the file was "
                "deleted. The server sent another file (a new release, an error page or "
                "tampering); check the URL and the hash"
            )
    if final.exists():  # someone else finished first: keep theirs, never overwrite
        part.unlink()
        return final
    os.replace(part, final)
    return final


def file_hash(path, algorithm="sha256"):
    """The hex digest of a file, read a MiB at a time."""
    digest = hashlib.new(algorithm)
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _parse_known_hash(known_hash):
    """``"sha256:HEX"`` (or bare hex) -> (algorithm, lower-case hex); (None, None) when not given."""
    if known_hash is None:
        return "sha256", None
    if not isinstance(known_hash, str):
        raise TypeError(f"known_hash must be a string like 'sha256:HEX', got {type(known_hash).__name__}")
    algorithm, _, digest = known_hash.strip().rpartition(":")
    algorithm = algorithm.lower() or "sha256"
    if algorithm not in hashlib.algorithms_guaranteed or algorithm.startswith("shake"):
        raise ValueError(f"known_hash {known_hash!r}: unknown algorithm {algorithm!r}; write 'sha256:HEX'")
    size = hashlib.new(algorithm).digest_size * 2
    if not re.fullmatch(rf"[0-9a-fA-F]{{{size}}}", digest):
        raise ValueError(f"known_hash {known_hash!r}: a {algorithm} checksum is {size} hex digits; write 'sha256:HEX'")
    return algorithm, digest.lower()


def _destination(dest, url):
    name = Path(urlparse(url).path).name or "enron_mail.tar.gz"
    if dest is None:
        return default_cache_dir() / name
    dest = Path(dest).expanduser()
    return dest / name if dest.is_dir() else dest


def _transfer(url, part, expected_size, progress, timeout, chunk_size, label):
    """Append the missing bytes to ``part``; return the full size (None if unknown)."""
    offset = part.stat().st_size if part.exists() else 0
    headers = {"User-Agent": "lpviz (fetch_enron)", "Accept-Encoding": "identity"}
    if offset:
        headers["Range"] = f"bytes={offset}-"
    try:
        response = urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout)
    except urllib.error.HTTPError as error:
        if error.code == 416 and offset:
            # nothing left to send: either the .part is already complete or it is stale
            total = _range_total(error.headers.get("Content-Range", ""))
            if total is not None and total == offset:
                return total
            part.unlink()
            raise _Interrupted(f"the server refused to resume at byte {offset}; starting again") from None
        raise ConnectionError(f"could not download {url}: HTTP {error.code} {error.reason}; check the URL") from None
    except (urllib.error.URLError, OSError, http.client.HTTPException) as error:
        reason = getattr(error, "reason", error)
        raise _Interrupted(f"could not reach {urlparse(url).netloc}: {reason}") from None
    with response:
        if response.status == 206:
            start, total = _content_range(response.headers.get("Content-Range", ""), url)
            if start != offset:
                part.unlink()
                raise _Interrupted(f"the server resumed at byte {start}, not {offset}; starting again")
            mode = "ab"
        elif response.status == 200:
            # a server that ignores Range sends everything again: start over
            offset = 0
            length = response.headers.get("Content-Length")
            total = int(length) if length and length.isdigit() else None
            mode = "wb"
        else:
            raise ConnectionError(f"could not download {url}: unexpected HTTP {response.status}")
        if total is None:
            total = expected_size
        elif expected_size is not None and total != expected_size:
            raise ValueError(
                f"{url} is {total} bytes but expected_size={expected_size}: a different file or "
                "release; check the URL or the expected size"
            )
        with (
            open(part, mode) as out,
            tqdm(
                total=total,
                initial=offset,
                unit="B",
                unit_scale=True,
                unit_divisor=1024,
                desc=label,
                disable=not progress,
                leave=False,
            ) as bar,
        ):
            while True:
                try:
                    chunk = response.read(chunk_size)
                except (OSError, http.client.HTTPException) as error:
                    raise _Interrupted(f"connection lost: {error!r}") from None
                if not chunk:
                    break
                out.write(chunk)
                bar.update(len(chunk))
            out.flush()
            os.fsync(out.fileno())
    size = part.stat().st_size
    if total is not None and size < total:
        raise _Interrupted(f"the connection closed after {size} of {total} bytes")
    return total


def _content_range(header, url):
    match = _CONTENT_RANGE.match(header.strip())
    if not match:
        raise ConnectionError(f"{url}: partial answer without a usable Content-Range ({header!r})")
    total = None if match.group(3) == "*" else int(match.group(3))
    return int(match.group(1)), total


def _range_total(header):
    match = re.match(r"bytes\s+\*/(\d+)", header.strip())
    return int(match.group(1)) if match else None


def _check_downloaded(part, url, total, expected_size):
    """Size and, for .gz files, the gzip signature: else the .part is removed."""
    size = part.stat().st_size
    for wanted in (total, expected_size):
        if wanted is not None and size != wanted:
            part.unlink()
            raise ValueError(
                f"download of {url} has {size} bytes, expected {wanted}: the file is truncated "
                "or corrupt and was not kept; run again"
            )
    if urlparse(url).path.endswith((".gz", ".tgz")):
        with open(part, "rb") as handle:
            if handle.read(2) != _GZIP_MAGIC:
                part.unlink()
                raise ValueError(f"{url} did not return gzip data (an error page?); check the URL")
