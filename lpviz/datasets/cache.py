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
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import warnings
from pathlib import Path

import numpy as np

from lpviz._files import atomic_write

CACHE_FORMAT = 1
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
        raise TypeError(f"cache_dir must be a path, None (default directory) or False (no cache), "
                        f"got {type(cache_dir).__name__}")
    return Path(cache_dir).expanduser()


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
                st = os.stat(os.path.join(root, name))
                rel = os.path.relpath(os.path.join(root, name), path)
                listing.update(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\n".encode("utf-8", "surrogateescape"))
                n_files += 1
                total += st.st_size
                latest = max(latest, st.st_mtime_ns)
        return {"path": resolved, "type": "directory", "n_files": n_files, "size": total,
                "mtime_ns": latest, "listing_sha256": listing.hexdigest()}
    st = path.stat()
    with open(path, "rb") as fh:
        head = hashlib.sha256(fh.read(1 << 20)).hexdigest()
    return {"path": resolved, "type": "file", "size": st.st_size, "mtime_ns": st.st_mtime_ns,
            "head_sha256": head}


def cache_key(kind: str, **params) -> str:
    """A file-name-safe key: ``kind`` plus a hash of the JSON-encoded parameters."""
    if not kind or not all(c.isalnum() or c in "-_" for c in kind):
        raise ValueError(f"cache kind must be letters, digits, '-' or '_', got {kind!r}")
    blob = json.dumps({"format": CACHE_FORMAT, "kind": kind, **params}, sort_keys=True, default=str)
    return f"{kind}-{hashlib.sha256(blob.encode()).hexdigest()[:32]}"


def _entry_paths(directory: Path, key: str):
    return directory / f"{key}.npz", directory / f"{key}.json"


def _encode_arrays(arrays: dict) -> dict:
    out = {}
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


def _decode_arrays(npz) -> dict:
    out = {}
    for name in npz.files:
        if name.endswith(_OFFSETS_SUFFIX):
            continue
        if name.endswith(_STRINGS_SUFFIX):
            base = name[: -len(_STRINGS_SUFFIX)]
            text = npz[name].tobytes().decode("utf-8", "surrogatepass")
            offsets = npz[base + _OFFSETS_SUFFIX].tolist()
            out[base] = [text[a:b] for a, b in zip(offsets[:-1], offsets[1:])]
        else:
            out[name] = npz[name]
    return out


def save_arrays(key: str, arrays: dict, *, cache_dir=None, meta: dict | None = None) -> Path | None:
    """Store ``arrays`` (name -> ndarray or list of str) and JSON-able ``meta`` under ``key``.

    Returns the ``.npz`` path, or ``None`` when caching is off
    (``cache_dir=False``). Only the entry's own two files are replaced.
    """
    directory = resolve_cache_dir(cache_dir)
    if directory is None:
        return None
    directory.mkdir(parents=True, exist_ok=True)
    data_path, manifest_path = _entry_paths(directory, key)
    buffer = io.BytesIO()
    np.savez(buffer, **_encode_arrays(arrays))
    payload = buffer.getvalue()
    manifest = {"format": CACHE_FORMAT, "key": key, "size": len(payload),
                "sha256": hashlib.sha256(payload).hexdigest(), "meta": meta or {}}
    manifest_bytes = json.dumps(manifest, sort_keys=True, default=str).encode()
    # The manifest goes last: an entry without a matching manifest is never trusted.
    atomic_write(data_path, lambda fh: fh.write(payload))
    atomic_write(manifest_path, lambda fh: fh.write(manifest_bytes))
    return data_path


def _discard(directory: Path, key: str, reason: str) -> None:
    warnings.warn(f"lpviz cache entry {key} in {directory} is {reason}; rebuilding it", RuntimeWarning,
                  stacklevel=3)
    for path in _entry_paths(directory, key):
        try:
            path.unlink()
        except FileNotFoundError:
            pass


def load_arrays(key: str, *, cache_dir=None):
    """Return ``(arrays, meta)`` for a verified entry, or ``None`` if missing or bad.

    A bad entry (unreadable manifest, other format, size or checksum mismatch,
    unreadable arrays) is removed with a ``RuntimeWarning``.
    """
    directory = resolve_cache_dir(cache_dir)
    if directory is None:
        return None
    data_path, manifest_path = _entry_paths(directory, key)
    if not manifest_path.exists() and not data_path.exists():
        return None
    try:
        manifest = json.loads(manifest_path.read_bytes())
    except (OSError, ValueError) as exc:
        _discard(directory, key, f"missing or unreadable manifest ({exc.__class__.__name__})")
        return None
    if not isinstance(manifest, dict) or manifest.get("format") != CACHE_FORMAT or manifest.get("key") != key:
        _discard(directory, key, "from another cache format or key")
        return None
    try:
        payload = data_path.read_bytes()
    except OSError:
        _discard(directory, key, "missing its data file")
        return None
    if len(payload) != manifest.get("size") or hashlib.sha256(payload).hexdigest() != manifest.get("sha256"):
        _discard(directory, key, "corrupt (size or checksum mismatch)")
        return None
    try:
        with np.load(io.BytesIO(payload), allow_pickle=False) as npz:
            arrays = _decode_arrays(npz)
    except Exception as exc:  # checksum passed but content unreadable: still never trusted
        _discard(directory, key, f"unreadable ({exc.__class__.__name__}: {exc})")
        return None
    return arrays, manifest.get("meta", {})


def cached(key: str, build, *, cache_dir=None):
    """Load ``key`` or, on a miss, call ``build() -> (arrays, meta)`` and store it.

    Returns ``(arrays, meta, hit)`` where ``hit`` says whether the cache answered.
    """
    found = load_arrays(key, cache_dir=cache_dir)
    if found is not None:
        return found[0], found[1], True
    arrays, meta = build()
    save_arrays(key, arrays, cache_dir=cache_dir, meta=meta)
    return arrays, meta, False
