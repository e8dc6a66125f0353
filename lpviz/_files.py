"""Writing files so that a reader never sees half of one."""

import os
import uuid
from pathlib import Path


def atomic_write(path, write):
    """Call ``write(handle)`` on a temporary file beside ``path``, then move it into place.

    The temporary file is opened like any other (so the result gets the
    user's usual permissions), synced, and renamed over ``path`` with
    :func:`os.replace`; on any error it is removed and ``path`` is untouched.
    Callers decide beforehand whether replacing an existing ``path`` is allowed.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
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
