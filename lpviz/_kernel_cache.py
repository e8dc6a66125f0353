"""Numba's on-disk cache of lpviz's kernels, kept in step with their sources.

Numba checks a cached kernel against its own file only (numba/numba#8396 is still open), but a
kernel's machine code holds every kernel it calls, inlined or linked, and lpviz's kernels call
across files (``models/_kernels.py``, ``collapsed.py``, ``_random.py``). After an edit, a
``git pull`` or a branch switch that changes only the callee's file, the callers' cached code
would still run the old callee, silently. So when lpviz is imported and a file that defines
kernels has changed since the caches beside the sources were written, all of them are dropped
and compiled afresh.

Caches outside the package's own ``__pycache__`` folders (``NUMBA_CACHE_DIR``, or Numba's
user-wide folder for a read-only install) are not visited: an install writes every file anew,
so their stamps change anyway.
"""

import json
import os
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parent
# Per source file: [mtime_ns, size, defines kernels]
STAMP_NAME = "kernel-sources.json"


def _defines_kernels(path):
    text = path.read_bytes()
    return b"@njit" in text or b"@overload" in text


def _is_entry(entry):
    return isinstance(entry, list) and len(entry) == 3 and isinstance(entry[2], bool)


def drop_stale_kernels(root=PACKAGE_ROOT):
    """Delete the cached kernels (``*.nbi``, ``*.nbc``) under ``root`` when a ``.py`` file there
    that defines kernels was added, changed or removed since the last call; returns whether it did.

    Only files whose size or modification time changed are read, so a call costs a ``stat`` per
    file. A folder that cannot be written (a read-only install) is not looked at: Numba caches its
    kernels elsewhere."""
    if not os.access(root, os.W_OK):  # Numba keeps no caches beside read-only sources
        return False
    stamp_path = root / "__pycache__" / STAMP_NAME
    try:
        recorded = json.loads(stamp_path.read_text())
    except (OSError, ValueError):
        recorded = None
    previous = {}
    if isinstance(recorded, dict):
        previous = {name: entry for name, entry in recorded.items() if _is_entry(entry)}
    current = {}
    stale = not isinstance(recorded, dict)
    for path in sorted(root.rglob("*.py")):
        name = path.relative_to(root).as_posix()
        known = previous.get(name)
        try:
            status = path.stat()
            if known is not None and known[:2] == [status.st_mtime_ns, status.st_size]:
                current[name] = known
                continue
            kernels = _defines_kernels(path)
        except OSError:  # removed while we looked
            continue
        current[name] = [status.st_mtime_ns, status.st_size, kernels]
        stale = stale or kernels or (known is not None and known[2])
    stale = stale or any(entry[2] for name, entry in previous.items() if name not in current)
    if stale:
        for cache in [*root.rglob("*.nbi"), *root.rglob("*.nbc")]:
            try:
                cache.unlink()
            except OSError:  # another process was first, or the folder is read-only
                pass
    if current != recorded:
        try:
            stamp_path.parent.mkdir(exist_ok=True)
            partial = stamp_path.with_name(f"{STAMP_NAME}.{os.getpid()}")
            partial.write_text(json.dumps(current))
            os.replace(partial, stamp_path)
        except OSError:
            pass
    return stale
