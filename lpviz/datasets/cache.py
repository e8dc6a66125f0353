"""A small on-disk cache for built count matrices and parsed corpora.

Each entry is two files in the cache directory:

- ``<key>.npz``: the arrays (``np.savez``, no pickles), lists of strings
  stored as one UTF-8 blob plus offsets;
- ``<key>.json``: the manifest, written last, holding the cache format
  version, the key, the SHA-256 and size of the ``.npz`` and caller metadata.

The key is a hash of the entry's kind, the source's fingerprint and the build
parameters (:func:`cache_key`), so a changed source or parameter never maps to
an old entry. Writes go to a temporary file in the same directory and are
moved into place with :func:`os.replace`, so a reader never sees half a file.
On load the manifest, size and checksum are verified; anything that does not
match (truncated, flipped bytes, other format version, half-written entry) is
reported with a warning, removed and treated as a miss, so the caller rebuilds.

The default directory is ``$LPVIZ_DATA_DIR`` if set, else ``<repo>/data`` when
that directory exists and is writable (a source checkout), else
``~/.cache/lpviz``. Pass ``cache_dir=False`` to any builder to skip caching.

Housekeeping, so the cache never needs a person:

- its size is capped (``$LPVIZ_CACHE_LIMIT``, default 4 GiB, e.g. ``500M``):
  after each write the least recently used entries are removed (a load
  touches its entry); other files in the directory are never counted or
  removed;
- temporary files older than an hour (left by a killed process) are removed
  when a process opens the directory (again every 10 minutes in a process
  that lives long, such as the dashboard's server);
- a directory that cannot be written is reported once with a warning and the
  work goes on without caching;
- results built from partial input (meta ``"partial": True``) are never
  stored, so they cannot answer for the complete input later.

:func:`cached` says what happened: ``"hit"``, ``"built"`` (missing, built and
stored), ``"rebuilt"`` (a damaged entry was replaced), ``"uncached"`` (built,
could not be stored), ``"partial"`` (built from partial input, not stored) or
``"off"`` (caching disabled).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import time
import warnings
from itertools import pairwise
from pathlib import Path

import numpy as np

from lpviz._files import atomic_write, open_archive, open_input, remove_stale_temporaries
from lpviz.budget import MemoryBudgetError, format_bytes, parse_bytes

CACHE_FORMAT = 1
LIMIT_ENV_VAR = "LPVIZ_CACHE_LIMIT"
DEFAULT_LIMIT = 4 * 2**30
STALE_TEMPORARY_SECONDS = 3600.0
STATUSES = ("hit", "built", "rebuilt", "uncached", "partial", "off")
_STRINGS_SUFFIX = ".__strings__"
_OFFSETS_SUFFIX = ".__offsets__"
_REPO_DATA = Path(__file__).resolve().parents[2] / "data"


def default_cache_dir() -> Path:
    """The directory cached data goes to when the caller does not choose one."""
    env = os.environ.get("LPVIZ_DATA_DIR")
    if env:
        return Path(env).expanduser()
    if _REPO_DATA.is_dir() and os.access(_REPO_DATA, os.W_OK):
        return _REPO_DATA
    return Path.home() / ".cache" / "lpviz"


def resolve_cache_dir(cache_dir) -> Path | None:
    """``None`` -> the default directory, ``False`` -> no caching, else the given path."""
    if cache_dir is False:
        return None
    if cache_dir is None or cache_dir is True:
        return default_cache_dir()
    if not isinstance(cache_dir, (str, os.PathLike)):
        raise TypeError(
            f"cache_dir must be a path, None (default directory) or False (no cache), got {type(cache_dir).__name__}"
        )
    return Path(cache_dir).expanduser()


def cache_limit() -> int:
    """The cache's size cap in bytes: ``LPVIZ_CACHE_LIMIT`` if set, else 4 GiB."""
    text = os.environ.get(LIMIT_ENV_VAR, "").strip()
    if not text:
        return DEFAULT_LIMIT
    try:
        return parse_bytes(text)
    except ValueError as error:
        raise ValueError(
            f"{LIMIT_ENV_VAR}={text!r} is not a cache size: {error}; unset it for {format_bytes(DEFAULT_LIMIT)}"
        ) from None


_tidied: dict[Path, float] = {}  # directory -> when this process last removed stale temporaries from it
_TIDY_EVERY = 600.0  # seconds: a long-running server tidies again, a scan per write is not needed
_warned_unwritable: set[Path] = set()


def _open(directory: Path) -> None:
    """Opening ``directory`` (at most every 10 min): remove temporaries a killed process left."""
    now = time.monotonic()
    if now - _tidied.get(directory, -_TIDY_EVERY) < _TIDY_EVERY:
        return
    _tidied[directory] = now
    remove_stale_temporaries(directory, STALE_TEMPORARY_SECONDS)


def _warn_unwritable(directory: Path, error: OSError) -> None:
    if directory in _warned_unwritable:
        return
    _warned_unwritable.add(directory)
    warnings.warn(
        f"lpviz cache directory {directory} cannot be written ({error.__class__.__name__}: "
        f"{error.strerror or error}); working without the cache. Set LPVIZ_DATA_DIR or pass "
        "cache_dir to a writable folder, or cache_dir=False to silence this",
        RuntimeWarning,
        stacklevel=4,
    )


def source_fingerprint(path) -> dict:
    """What identifies a source's content cheaply: path, size, mtime and a hash of its head.

    For a file: resolved path, size, modification time (ns) and the SHA-256 of
    its first MiB. For a directory: the number of files, their total size,
    the latest modification time and a hash of the sorted (relative path,
    size, mtime) listing, so adding, removing or editing any file changes it.
    """
    path = Path(path).expanduser()
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file or directory")
    resolved = str(path.resolve())
    if path.is_dir():
        listing = hashlib.sha256()
        n_files = total = latest = 0
        for root, dirs, files in os.walk(path):
            dirs.sort()
            for name in sorted(files):
                st = os.stat(os.path.join(root, name), follow_symlinks=False)
                rel = os.path.relpath(os.path.join(root, name), path)
                listing.update(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\n".encode("utf-8", "surrogateescape"))
                n_files += 1
                total += st.st_size
                latest = max(latest, st.st_mtime_ns)
        return {
            "path": resolved,
            "type": "directory",
            "n_files": n_files,
            "size": total,
            "mtime_ns": latest,
            "listing_sha256": listing.hexdigest(),
        }
    st = path.stat()
    with open(path, "rb") as fh:
        head = hashlib.sha256(fh.read(1 << 20)).hexdigest()
    return {"path": resolved, "type": "file", "size": st.st_size, "mtime_ns": st.st_mtime_ns, "head_sha256": head}


def cache_key(kind: str, **params) -> str:
    """A file-name-safe key: ``kind`` plus a hash of the JSON-encoded parameters."""
    if not kind or not all(c.isalnum() or c in "-_" for c in kind):
        raise ValueError(f"cache kind must be letters, digits, '-' or '_', got {kind!r}")
    blob = json.dumps({"format": CACHE_FORMAT, "kind": kind, **params}, sort_keys=True, default=str)
    return f"{kind}-{hashlib.sha256(blob.encode()).hexdigest()[:32]}"


def _entry_paths(directory: Path, key: str):
    return directory / f"{key}.npz", directory / f"{key}.json"


def _encode_arrays(arrays: dict) -> dict:
    out: dict[str, np.ndarray] = {}
    for name, value in arrays.items():
        if isinstance(value, (list, tuple)) and all(isinstance(s, str) for s in value):
            lengths = np.fromiter((len(s) for s in value), dtype=np.int64, count=len(value))
            offsets = np.zeros(len(value) + 1, dtype=np.int64)
            np.cumsum(lengths, out=offsets[1:])
            blob = "".join(value).encode("utf-8", "surrogatepass")
            out[name + _STRINGS_SUFFIX] = np.frombuffer(blob, dtype=np.uint8)
            out[name + _OFFSETS_SUFFIX] = offsets
        else:
            array = np.asarray(value)
            if array.dtype == object:
                raise TypeError(f"cache array {name!r} has dtype object; store numbers or a list of str")
            out[name] = array
    return out


def _decode_arrays(archive) -> dict:
    """The entry's arrays from an open :class:`lpviz._files.Archive`, read after one budget check."""
    blobs = [name for name in archive.keys() if name.endswith(_STRINGS_SUFFIX)]
    # the lists of str: their characters once more as Python strings, and a list slot each
    extra = sum(
        archive.header(name).nbytes + 64 * archive.header(name[: -len(_STRINGS_SUFFIX)] + _OFFSETS_SUFFIX).size
        for name in blobs
        if name[: -len(_STRINGS_SUFFIX)] + _OFFSETS_SUFFIX in archive
    )
    archive.require(archive.keys(), extra=extra, what="reading a cache entry")
    out = {}
    for name in archive.keys():
        if name.endswith(_OFFSETS_SUFFIX):
            continue
        if name.endswith(_STRINGS_SUFFIX):
            base = name[: -len(_STRINGS_SUFFIX)]
            if base + _OFFSETS_SUFFIX not in archive:
                raise ValueError(f"{archive.name}: {name!r} has no offsets")
            text = archive.read(name).tobytes().decode("utf-8", "surrogatepass")
            offsets = archive.read(base + _OFFSETS_SUFFIX).tolist()
            out[base] = [text[a:b] for a, b in pairwise(offsets)]
        else:
            out[name] = archive.read(name)
    return out


def save_arrays(key: str, arrays: dict, *, cache_dir=None, meta: dict | None = None) -> Path | None:
    """Store ``arrays`` (name -> ndarray or list of str) and JSON-able ``meta`` under ``key``.

    Returns the ``.npz`` path, or ``None`` when caching is off
    (``cache_dir=False``) or the entry alone is larger than the cache limit
    (with a warning). Only the entry's own two files are replaced, then the
    least recently used entries are evicted down to the limit. Raises
    :class:`OSError` when the directory cannot be written.
    """
    directory = resolve_cache_dir(cache_dir)
    if directory is None:
        return None
    directory.mkdir(parents=True, exist_ok=True)
    _open(directory)
    data_path, manifest_path = _entry_paths(directory, key)
    buffer = io.BytesIO()
    np.savez(buffer, **_encode_arrays(arrays))
    payload = buffer.getvalue()
    manifest = {
        "format": CACHE_FORMAT,
        "key": key,
        "size": len(payload),
        "sha256": hashlib.sha256(payload).hexdigest(),
        "meta": meta or {},
    }
    manifest_bytes = json.dumps(manifest, sort_keys=True, default=str).encode()
    limit = cache_limit()
    if len(payload) + len(manifest_bytes) > limit:
        warnings.warn(
            f"lpviz cache entry {key} ({format_bytes(len(payload))}) is larger than the cache limit "
            f"({format_bytes(limit)}, {LIMIT_ENV_VAR}); not cached",
            RuntimeWarning,
            stacklevel=3,
        )
        return None
    # The manifest goes last: an entry without a matching manifest is never trusted.
    atomic_write(data_path, lambda fh: fh.write(payload))
    atomic_write(manifest_path, lambda fh: fh.write(manifest_bytes))
    evict(directory, limit, keep=key)
    return data_path


def entries(directory) -> list:
    """The cache entries in ``directory``, least recently used first: ``(last use, bytes, key)``.

    Only pairs ``KEY.npz`` + ``KEY.json`` whose manifest names this cache
    format and ``KEY`` count; anything else in the folder is not the cache's.
    """
    found: list = []
    try:
        manifests = list(Path(directory).glob("*.json"))
    except OSError:
        return found
    for manifest_path in manifests:
        key = manifest_path.stem
        data_path = manifest_path.with_suffix(".npz")
        try:
            manifest = json.loads(manifest_path.read_bytes())
            if not isinstance(manifest, dict) or manifest.get("format") != CACHE_FORMAT or manifest.get("key") != key:
                continue
            used = manifest_path.stat().st_mtime
            size = manifest_path.stat().st_size + data_path.stat().st_size
        except (OSError, ValueError):
            continue
        found.append((used, size, key))
    return sorted(found)


def evict(directory, limit=None, *, keep=None) -> list:
    """Remove least recently used entries until the cache holds at most ``limit`` bytes.

    ``limit`` defaults to :func:`cache_limit`; the entry ``keep`` (just
    written) is never removed. Returns the removed keys.
    """
    limit = cache_limit() if limit is None else limit
    found = entries(directory)
    total = sum(size for _, size, _ in found)
    removed = []
    for _, size, key in found:
        if total <= limit:
            break
        if key == keep:
            continue
        for path in _entry_paths(Path(directory), key)[::-1]:  # manifest first: never a trusted half
            try:
                path.unlink()
            except FileNotFoundError:
                pass
            except OSError:
                break
        total -= size
        removed.append(key)
    return removed


def _discard(directory: Path, key: str, reason: str) -> None:
    warnings.warn(f"lpviz cache entry {key} in {directory} is {reason}; rebuilding it", RuntimeWarning, stacklevel=4)
    for path in _entry_paths(directory, key):
        try:
            path.unlink()
        except FileNotFoundError:
            pass


def _load(directory: Path, key: str):
    """``((arrays, meta), "hit")``, ``(None, "missing")`` or ``(None, "damaged")`` (entry removed)."""
    data_path, manifest_path = _entry_paths(directory, key)
    try:
        if not manifest_path.exists() and not data_path.exists():
            return None, "missing"
    except OSError:  # a folder we may not look into: as if empty
        return None, "missing"
    _open(directory)
    try:
        manifest = json.loads(_read_small(manifest_path))
    except (OSError, ValueError) as exc:
        _discard(directory, key, f"missing or unreadable manifest ({exc.__class__.__name__})")
        return None, "damaged"
    if not isinstance(manifest, dict) or manifest.get("format") != CACHE_FORMAT or manifest.get("key") != key:
        _discard(directory, key, "from another cache format or key")
        return None, "damaged"
    try:
        size, digest = _file_digest(data_path)
    except (OSError, ValueError):
        _discard(directory, key, "missing its data file")
        return None, "damaged"
    if size != manifest.get("size") or digest != manifest.get("sha256"):
        _discard(directory, key, "corrupt (size or checksum mismatch)")
        return None, "damaged"
    try:  # the bounded reader: an entry that would not fit the memory budget is refused, not loaded
        with open_archive(data_path, what="cache entry", fix="it is rebuilt") as archive:
            arrays = _decode_arrays(archive)
    except MemoryBudgetError:
        raise
    except Exception as exc:  # checksum passed but content unreadable: still never trusted
        _discard(directory, key, f"unreadable ({exc.__class__.__name__}: {exc})")
        return None, "damaged"
    try:
        os.utime(manifest_path)  # last use, for the least-recently-used eviction
    except OSError:
        pass
    return (arrays, manifest.get("meta", {})), "hit"


_MANIFEST_MAX = 1 << 20  # a manifest is a few hundred bytes of JSON


def _read_small(path: Path) -> bytes:
    """A manifest's bytes, refused (ValueError) when it is larger than any manifest: never read whole."""
    with open_input(path, what="cache manifest") as handle:
        data = handle.read(_MANIFEST_MAX + 1)
    if len(data) > _MANIFEST_MAX:
        raise ValueError(f"{path}: larger than a cache manifest")
    return data


def _file_digest(path: Path):
    """(size, SHA-256) of a file read a MiB at a time (an entry is never held whole for its checksum)."""
    digest = hashlib.sha256()
    size = 0
    with open_input(path, what="cache entry") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


def load_arrays(key: str, *, cache_dir=None):
    """Return ``(arrays, meta)`` for a verified entry, or ``None`` if missing or bad.

    A bad entry (unreadable manifest, other format, size or checksum mismatch,
    unreadable arrays) is removed with a ``RuntimeWarning``. A hit marks the
    entry as recently used.
    """
    directory = resolve_cache_dir(cache_dir)
    if directory is None:
        return None
    return _load(directory, key)[0]


def cached(key: str, build, *, cache_dir=None):
    """Load ``key`` or, on a miss, call ``build() -> (arrays, meta)`` and store it.

    Returns ``(arrays, meta, status)``, ``status`` one of :data:`STATUSES`:
    ``"hit"``, ``"built"``, ``"rebuilt"`` (a damaged entry was replaced),
    ``"uncached"`` (the directory cannot be written: warned once, the result
    is still returned), ``"partial"`` (``meta["partial"]`` is true: never
    stored) or ``"off"`` (``cache_dir=False``).
    """
    directory = resolve_cache_dir(cache_dir)
    if directory is None:
        arrays, meta = build()
        return arrays, meta, "off"
    found, state = _load(directory, key)
    if found is not None:
        return found[0], found[1], "hit"
    arrays, meta = build()
    if meta.get("partial"):
        return arrays, meta, "partial"
    try:
        stored = save_arrays(key, arrays, cache_dir=directory, meta=meta)
    except OSError as error:
        _warn_unwritable(directory, error)
        return arrays, meta, "uncached"
    if stored is None:
        return arrays, meta, "uncached"
    return arrays, meta, "rebuilt" if state == "damaged" else "built"
