"""Download the CMU Enron release: resumable, size-checked, moved into place atomically.

Bytes go to ``DEST.part`` first. An interrupted transfer leaves that file
behind and the next call (or the next retry) asks the server for the rest with
an HTTP ``Range`` request; a server that ignores ``Range`` is downloaded again
from the start. Only a file of the announced size (``Content-Length`` or the
total in ``Content-Range``, and ``expected_size`` when given) is renamed to
``DEST``, with :func:`os.replace`, so ``DEST`` is never a partial file.
"""

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

__all__ = ["DEFAULT_URL", "fetch_enron"]

DEFAULT_URL = "https://www.cs.cmu.edu/~enron/enron_mail_20150507.tar.gz"

_CONTENT_RANGE = re.compile(r"bytes\s+(\d+)-(\d+)/(\d+|\*)")
_GZIP_MAGIC = b"\x1f\x8b"


class _Interrupted(Exception):
    """The transfer stopped early; what arrived is kept in the .part file."""


def fetch_enron(dest=None, url=DEFAULT_URL, *, expected_size=None, progress=True, timeout=60.0,
                retries=3, retry_wait=2.0, chunk_size=1 << 20):
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
        sent more than it announced, or a ``.gz`` download is not gzip data.
    ConnectionError
        The server cannot be reached, answers with an HTTP error, or the
        transfer kept breaking off after ``retries`` resumes.
    """
    final = _destination(dest, url)
    if final.exists():
        if final.is_dir():
            raise IsADirectoryError(f"{final} is a folder; give a file name or an existing folder as dest")
        size = final.stat().st_size
        if expected_size is None or size == expected_size:
            return final
        raise FileExistsError(f"{final} already exists with {size} bytes, not the expected {expected_size}; "
                              "lpviz does not overwrite it: move it away or choose another dest")
    final.parent.mkdir(parents=True, exist_ok=True)
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
                raise ConnectionError(f"download of {url} interrupted ({error}); {have} bytes are kept in "
                                      f"{part}: run again to resume") from None
            time.sleep(retry_wait * 2 ** (failures - 1))
    _check_downloaded(part, url, total, expected_size)
    if final.exists():  # someone else finished first: keep theirs, never overwrite
        part.unlink()
        return final
    os.replace(part, final)
    return final


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
            raise ValueError(f"{url} is {total} bytes but expected_size={expected_size}: a different file or "
                             "release; check the URL or the expected size")
        with open(part, mode) as out, tqdm(total=total, initial=offset, unit="B", unit_scale=True,
                                           unit_divisor=1024, desc=label, disable=not progress,
                                           leave=False) as bar:
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
            raise ValueError(f"download of {url} has {size} bytes, expected {wanted}: the file is truncated "
                             "or corrupt and was not kept; run again")
    if urlparse(url).path.endswith((".gz", ".tgz")):
        with open(part, "rb") as handle:
            if handle.read(2) != _GZIP_MAGIC:
                part.unlink()
                raise ValueError(f"{url} did not return gzip data (an error page?); check the URL")
