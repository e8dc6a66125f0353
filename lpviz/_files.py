"""Writing files so that a reader never sees half of one."""

import os
import re
import time
import uuid
from pathlib import Path

# .NAME.PID.RANDOM.tmp: what atomic_write leaves behind when its process is killed mid-write
_TEMPORARY = re.compile(r"^\..+\.\d+\.[0-9a-f]{8}\.tmp$")


def atomic_write(path, write):
    """Call ``write(handle)`` on a temporary file beside ``path``, then move it into place.

    The temporary file is opened like any other (so the result gets the
    user's usual permissions), synced, and renamed over ``path`` with
    :func:`os.replace`; on any error it is removed and ``path`` is untouched.
    Callers decide beforehand whether replacing an existing ``path`` is allowed.
    The folder must exist: a mistyped output path is an error naming the
    missing folder, never a silently created folder tree.
    """
    path = Path(path)
    missing = _missing_folder(path)
    if missing is not None:
        what = "is a file, not a folder" if missing.exists() else "does not exist"
        raise FileNotFoundError(
            f"{path}: the folder {missing} {what}; create the folder first or choose a path in an existing folder"
        )
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(temporary, "xb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return path


def _missing_folder(path):
    """The outermost missing folder on the way to ``path``, or None if its folder exists."""
    parent = Path(path).parent
    if parent.is_dir():
        return None
    missing = parent
    while not missing.parent.is_dir() and missing.parent != missing:
        missing = missing.parent
    return missing


def remove_stale_temporaries(folder, older_than=3600.0):
    """Delete ``atomic_write`` leftovers in ``folder`` not modified for ``older_than`` seconds.

    A write in progress touches its file continuously, so an hour-old
    temporary file belongs to a process that was killed. Returns the number
    of files removed; files that vanish or cannot be removed are left alone.
    """
    removed = 0
    deadline = time.time() - older_than
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return 0
    for entry in entries:
        if not _TEMPORARY.match(entry.name):
            continue
        try:
            if entry.is_file(follow_symlinks=False) and entry.stat(follow_symlinks=False).st_mtime < deadline:
                os.unlink(entry.path)
                removed += 1
        except OSError:
            continue
    return removed
