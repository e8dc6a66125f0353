"""Files in and out: one bounded reader for every archive, all-or-nothing writers, clear errors.

Reading. Every ``.npz`` lpviz reads (a release, a fit, counts, an upload, a
cache entry) goes through :class:`Archive`. It opens the file only if it is a
regular file (a FIFO would block, a device never end), opens each member by
its exact name (an archive holding ``Y`` beside ``Y.npy``, or two ``Y_obs``,
is refused: :func:`numpy.load` would read one and the size checks another),
reads each member's ``.npy`` header, checks that the sizes the zip directory
declares agree with it and could come out of the compressed bytes, and checks
shape x dtype against the memory budget (:mod:`lpviz.budget`) before a byte
of data is decompressed. The data are then read in bounded chunks into the
one array the check allowed.

Writing. :func:`atomic_write` writes a file under a temporary name beside
it and renames it into place; :func:`atomic_folder` does the same for a
whole folder of results. On any failure (a full disk, a read-only file
system, Ctrl-C, SIGTERM) the temporaries are removed and nothing appears at
the destination; a process killed outright leaves only a hidden temporary,
which the next writer in that folder removes (:func:`remove_stale_temporaries`).

Errors. :func:`describe_os_error` turns an :class:`OSError` into one line
naming the file, the problem and the fix; :func:`check_input_path` refuses
NUL bytes, over-long paths and special files with the same kind of line.
"""

from __future__ import annotations

import ast
import contextlib
import errno
import math
import os
import re
import shutil
import stat
import struct
import time
import uuid
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lpviz.budget import check_memory, dense_bytes, format_bytes

# .NAME.PID.RANDOM.tmp: what atomic_write and atomic_folder leave behind when their process is killed
_TEMPORARY = re.compile(r"^\..+\.(\d+)\.[0-9a-f]{8}\.tmp$")

PATH_MAX = 4096  # bytes in a path, with its terminating NUL (Linux)
NAME_MAX = 255  # bytes in one name

# ---------------------------------------------------------------------------------------------
# Paths and OS errors as one line
# ---------------------------------------------------------------------------------------------


def shown(path) -> str:
    """``path`` for a one-line message: control characters escaped, a very long path shortened."""
    text = os.fsdecode(path) if isinstance(path, (bytes, os.PathLike)) else str(path)
    if not text.isprintable():
        text = repr(text)[1:-1]
    if len(text) > 200:
        text = f"{text[:120]}...{text[-60:]} ({len(text):,} characters)"
    return text


# errno -> (the problem in words, the fix); "{doing}" is read / write
_OS_PROBLEMS = {
    errno.ENOENT: ("no such file or folder", "check the path"),
    errno.EACCES: (
        "permission denied",
        "check the permissions of the file and its folders (ls -l), or {doing} a copy you may use",
    ),
    errno.EPERM: ("operation not permitted", "check the permissions of the file and its folders (ls -l)"),
    errno.EROFS: ("the file system is read-only", "write to a folder on a writable disk"),
    errno.ENOSPC: ("the disk is full", "free some space or write to another disk"),
    errno.EDQUOT: ("the disk quota is used up", "free some space or write to another disk"),
    errno.EFBIG: ("the file would be larger than allowed (ulimit -f)", "raise the limit or write less"),
    errno.ENAMETOOLONG: ("the path is too long", "use a shorter path"),
    errno.EISDIR: ("it is a folder", "give a file"),
    errno.ENOTDIR: ("a part of the path is a file, not a folder", "check the path"),
    errno.ELOOP: ("too many levels of symbolic links", "check where the links point"),
    errno.EIO: ("an input/output error (a failing disk or network share?)", "check the disk and try again"),
    errno.EMFILE: ("too many open files", "close other programs or raise the limit (ulimit -n)"),
    errno.ENFILE: ("too many open files on the system", "close other programs and try again"),
    errno.ENXIO: ("no device behind it", "give a regular file"),
    errno.ETXTBSY: ("the file is busy", "try again when the program using it has finished"),
}


def describe_os_error(error: OSError, path=None, doing: str = "read") -> str:
    """One line: ``PATH: cannot read it: permission denied; check the permissions ...``."""
    path = path if path is not None else (error.filename if error.filename is not None else "")
    fallback = (error.strerror or str(error), "check the path and try again")
    problem, fix = _OS_PROBLEMS.get(error.errno, fallback) if error.errno is not None else fallback
    where = f"{shown(path)}: " if path != "" else ""
    return f"{where}cannot {doing} it: {problem}; {fix.format(doing=doing)}"


def clear_os_error(error: OSError, path=None, doing: str = "read") -> OSError:
    """The same kind of :class:`OSError` (same errno), its message the one line of :func:`describe_os_error`."""
    clear = type(error)(describe_os_error(error, path, doing))
    clear.errno = error.errno  # str() stays the one line (setting filename would change it)
    return clear


def is_one_line(error: BaseException) -> bool:
    """True for an error whose message lpviz wrote (not Python's ``[Errno 28] ...: 'path'``)."""
    text = str(error)
    return bool(text) and "\n" not in text and not text.startswith("[Errno")


def check_path_text(path) -> None:
    """Refuse a path with a NUL byte or longer than the system takes, naming it and the fix."""
    text = os.fspath(path)
    nul = "\0" if isinstance(text, str) else b"\0"
    if nul in text:
        raise ValueError(
            f"{shown(text)}: the path contains a NUL byte, which no file name can hold; check how the path was made"
        )
    encoded = os.fsencode(text)
    if len(encoded) >= PATH_MAX:
        raise ValueError(
            f"{shown(text)}: the path is {len(encoded):,} bytes long; this system takes paths of up to "
            f"{PATH_MAX - 1:,} bytes: use a shorter path"
        )
    longest = max((len(part) for part in encoded.split(b"/")), default=0)
    if longest > NAME_MAX:
        raise ValueError(
            f"{shown(text)}: one name in the path is {longest:,} bytes long; this system takes names of up "
            f"to {NAME_MAX} bytes: use a shorter name"
        )


_SPECIAL = (
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def _kind_of(mode) -> str | None:
    """What a non-regular file is, in words (None for a regular file or a folder)."""
    for test, words in _SPECIAL:
        if test(mode):
            return words
    return None


def check_input_path(path, *, what="file", fix="check the path", folder_ok=False) -> Path:
    """``path`` as a :class:`Path` if it names an existing regular file (or a folder when
    ``folder_ok``); else a one-line error: ValueError for NUL bytes, over-long paths, special
    files and folders, :class:`FileNotFoundError`/:class:`PermissionError` naming the path."""
    check_path_text(path)
    path = Path(path)
    try:
        mode = os.stat(path).st_mode
    except OSError as error:
        if error.errno == errno.ENOENT:
            missing = FileNotFoundError(f"{shown(path)}: no such file{' or folder' if folder_ok else ''}; {fix}")
            missing.errno = errno.ENOENT
            raise missing from None
        raise clear_os_error(error, path) from None
    special = _kind_of(mode)
    if special is not None:
        raise ValueError(f"{shown(path)}: this is {special}, not a regular file; give the {what} itself")
    if stat.S_ISDIR(mode) and not folder_ok:
        raise ValueError(f"{shown(path)}: this is a folder; give the {what} inside it")
    return path


def open_input(path, *, what="file", fix="check the path"):
    """A regular file opened for binary reading, checked without blocking.

    The file is opened non-blocking and checked with ``fstat`` before
    anything is read, so a FIFO or a device is refused at once instead of
    blocking forever or streaming without end.
    """
    check_path_text(path)
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        if error.errno == errno.ENOENT:
            missing = FileNotFoundError(f"{shown(path)}: no such file; {fix}")
            missing.errno = errno.ENOENT
            raise missing from None
        if error.errno == errno.EISDIR:
            raise ValueError(f"{shown(path)}: this is a folder; give the {what} inside it") from None
        raise clear_os_error(error, path) from None
    try:
        mode = os.fstat(descriptor).st_mode
        special = _kind_of(mode)
        if special is not None:
            raise ValueError(f"{shown(path)}: this is {special}, not a regular file; give the {what} itself")
        if stat.S_ISDIR(mode):
            raise ValueError(f"{shown(path)}: this is a folder; give the {what} inside it")
        os.set_blocking(descriptor, True)
        return os.fdopen(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise


# ---------------------------------------------------------------------------------------------
# Writing whole files and whole folders
# ---------------------------------------------------------------------------------------------


def output_exists(path) -> bool:
    """True when ``path`` names anything, a dangling symbolic link included (never replaced silently)."""
    return os.path.lexists(path)


def _temporary_name(path: Path) -> Path:
    return path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")


def atomic_write(path, write, *, by_name=False, exclusive=False):
    """Call ``write(handle)`` on a temporary file beside ``path``, then move it into place.

    With ``by_name``, ``write(temporary_path)`` writes the file itself (for
    writers that take a file name, like netCDF's). With ``exclusive``, the
    move fails with :class:`FileExistsError` if ``path`` exists by then (a
    hard link, which never replaces: a file that appeared while the content
    was made is kept), where :func:`os.replace` would replace it.

    The temporary file is opened like any other (so the result gets the
    user's usual permissions), synced, and renamed over ``path`` with
    :func:`os.replace`; on any error (Ctrl-C included) it is removed and
    ``path`` is untouched, and a failure of the file system is an
    :class:`OSError` whose message names the file, the problem and the fix.
    Callers decide beforehand whether replacing an existing ``path`` is
    allowed. The folder must exist: a mistyped output path is an error naming
    the missing folder, never a silently created folder tree.
    """
    check_path_text(path)
    path = Path(path)
    missing = _missing_folder(path)
    if missing is not None:
        what = "is a file, not a folder" if missing.exists() else "does not exist"
        error = FileNotFoundError(
            f"{shown(path)}: the folder {shown(missing)} {what}; create the folder first or choose a path "
            "in an existing folder"
        )
        error.errno = errno.ENOENT
        raise error
    temporary = _temporary_name(path)
    try:
        if by_name:
            write(temporary)
        else:
            with open(temporary, "xb") as handle:
                write(handle)
                handle.flush()
                os.fsync(handle.fileno())
        if exclusive:
            _link_new(temporary, path)
        else:
            os.replace(temporary, path)
    except BaseException as error:
        with contextlib.suppress(OSError):  # a read-only or vanished folder must not hide the cause
            temporary.unlink(missing_ok=True)
        if isinstance(error, OSError) and not is_one_line(error):
            raise clear_os_error(error, path, "write") from None
        raise
    return path


def atomic_files(writes, *, replace=False):
    """:func:`atomic_write` for several files at once, all or nothing: ``writes`` maps each path
    to its ``write(handle)``. Every file is written under a temporary name beside it first; then
    all are moved into place. Without ``replace`` none may exist by then (a hard link each: a file
    that appeared meanwhile is kept, and the files this call had moved in are removed again)."""
    temporaries = {}
    try:
        for path, write in writes.items():
            path = Path(path)
            temporaries[path] = _temporary_name(path)
            atomic_write(temporaries[path], write)
        moved = []
        try:
            for path, temporary in temporaries.items():
                if replace:
                    os.replace(temporary, path)
                else:
                    _link_new(temporary, path)
                moved.append(path)
        except BaseException:
            if not replace:  # only files this call created: nothing of the user's
                for path in moved:
                    with contextlib.suppress(OSError):
                        os.unlink(path)
            raise
    finally:
        for temporary in temporaries.values():
            with contextlib.suppress(OSError):
                temporary.unlink(missing_ok=True)
    return list(writes)


def _link_new(temporary: Path, path: Path) -> None:
    """Move ``temporary`` to ``path`` unless ``path`` exists, in one step (no check-then-write race)."""

    def exists():
        error = FileExistsError(f"{shown(path)} already exists; choose another name or allow replacing it")
        error.errno = errno.EEXIST
        return error

    try:
        os.link(temporary, path)
    except FileExistsError:
        raise exists() from None
    except OSError as error:
        if error.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
            raise
        if output_exists(path):  # no hard links here: a check just before the move
            raise exists() from None
        os.replace(temporary, path)
        return
    os.unlink(temporary)


def _missing_folder(path):
    """The outermost missing folder on the way to ``path``, or None if its folder exists."""
    parent = Path(path).parent
    if parent.is_dir():
        return None
    missing = parent
    while not missing.parent.is_dir() and missing.parent != missing:
        missing = missing.parent
    return missing


def check_results_folder(path, flag="--output", *, beside=True) -> None:
    """Before any work: ``path`` can take a folder of results. It has a name of its own (not
    ``.``, ``..`` or ``/``: :func:`atomic_folder` builds the results under a temporary name beside
    it), its parent folder exists, it is a folder or nothing yet, and the folders written to are
    writable. ``beside=False``: the results are written inside ``path`` only (a name is not needed).
    A ``ValueError`` naming the problem and the fix."""
    check_path_text(path)
    path = Path(path)
    if beside and path.name in ("", ".", ".."):
        raise ValueError(
            f"{flag} {shown(path)} names no folder of its own: the results are gathered beside it and "
            f"moved into it by name; give a folder name, e.g. {flag} results (created if it does not exist)"
        )
    if output_exists(path) and not path.is_dir():
        what = "a symbolic link to nothing" if path.is_symlink() else "a file"
        raise ValueError(f"{flag} {shown(path)} is {what}; give a folder (a new name or an existing folder)")
    if not path.parent.is_dir():
        raise ValueError(f"folder {shown(path.parent)} does not exist; create it first (or fix {flag})")
    written = ([path.parent] if beside or not path.is_dir() else []) + ([path] if path.is_dir() else [])
    for folder in written:
        if not os.access(folder, os.W_OK | os.X_OK):  # the same line as the write itself would give
            read_only = hasattr(os, "statvfs") and os.statvfs(folder).f_flag & os.ST_RDONLY
            raise ValueError(describe_os_error(OSError(errno.EROFS if read_only else errno.EACCES, ""), path, "write"))


@contextlib.contextmanager
def atomic_folder(path, *, replace_files=False):
    """Yield a hidden temporary folder beside ``path``; on success its files move into ``path``.

    If ``path`` does not exist the folder is renamed into place in one step.
    If it exists (a folder), each file moves in; files already there are
    replaced only with ``replace_files`` and are put back if a later move
    fails. On any error (Ctrl-C and SIGTERM included, see
    :func:`raise_on_sigterm`) the temporary folder is removed and nothing
    appears under ``path``. Leftovers of a killed process are removed first.
    """
    check_path_text(path)
    path = Path(path)
    if not path.parent.is_dir():
        raise FileNotFoundError(f"{shown(path.parent)}: the folder does not exist; create it first (or fix the path)")
    remove_stale_temporaries(path.parent, older_than=math.inf, dead_owners=True, prefix=f".{path.name}.")
    temporary = _temporary_name(path)
    try:
        os.mkdir(temporary)
    except OSError as error:
        raise clear_os_error(error, path, "write") from None
    try:
        yield temporary
        _move_into_place(temporary, path, replace_files)
    except BaseException as error:
        shutil.rmtree(temporary, ignore_errors=True)
        if isinstance(error, OSError):  # named after the folder the user gave, not the temporary one
            text = str(error) if is_one_line(error) else describe_os_error(error, path, "write")
            clear = type(error)(text.replace(str(temporary), str(path)))
            clear.errno = error.errno
            raise clear from None
        raise
    shutil.rmtree(temporary, ignore_errors=True)


def _move_into_place(temporary: Path, path: Path, replace_files: bool) -> None:
    if not output_exists(path):
        os.rename(temporary, path)  # the whole folder at once
        return
    if path.is_symlink() or not path.is_dir():
        raise FileExistsError(f"{shown(path)} exists and is not a folder; choose another name")
    names = sorted(entry.name for entry in os.scandir(temporary))
    clashes = [name for name in names if output_exists(path / name)]
    if clashes and not replace_files:
        raise FileExistsError(f"{shown(path / clashes[0])} already exists; choose another folder or replace it")
    backup = temporary / ".replaced"
    backup.mkdir()
    moved, kept = [], []
    try:
        for name in clashes:
            os.replace(path / name, backup / name)
            kept.append(name)
        for name in names:
            os.replace(temporary / name, path / name)
            moved.append(name)
    except BaseException:
        for name in moved:  # undo: the folder is as it was
            with contextlib.suppress(OSError):
                os.unlink(path / name)
        for name in kept:
            with contextlib.suppress(OSError):
                os.replace(backup / name, path / name)
        raise


def remove_stale_temporaries(folder, older_than=3600.0, *, dead_owners=False, prefix=""):
    """Delete leftovers of :func:`atomic_write` / :func:`atomic_folder` in ``folder``.

    A leftover goes when it has not been modified for ``older_than`` seconds
    (a write in progress touches its file continuously), or, with
    ``dead_owners``, when the process that made it (its name holds the pid)
    no longer runs on this machine. Only names starting with ``prefix`` are
    considered. Returns the number removed; entries that vanish or cannot be
    removed are left alone.
    """
    removed = 0
    deadline = time.time() - older_than
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return 0
    for entry in entries:
        match = _TEMPORARY.match(entry.name)
        if match is None or not entry.name.startswith(prefix):
            continue
        try:
            info = entry.stat(follow_symlinks=False)
            stale = info.st_mtime < deadline or (dead_owners and not _running(int(match.group(1))))
            if not stale:
                continue
            if stat.S_ISDIR(info.st_mode):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
            removed += 1
        except OSError:
            continue
    return removed


def _running(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # it exists, it is someone else's
    return True


class Terminated(BaseException):
    """SIGTERM arrived: unwinds like Ctrl-C, so every temporary is removed on the way out."""


@contextlib.contextmanager
def raise_on_sigterm():
    """Within the block, SIGTERM raises :class:`Terminated` in the main thread (the CLI's runs), so
    ``finally`` and ``except BaseException`` clean-ups run; the previous handler comes back after."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise Terminated("terminated (SIGTERM)")

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


# ---------------------------------------------------------------------------------------------
# The bounded reader
# ---------------------------------------------------------------------------------------------

NPZ_FIX = "write it again with numpy.savez (or the lpviz function that made it)"
MAX_MEMBERS = 4096  # lpviz's archives hold a few dozen; the zip directory is read whole
MAX_DIRECTORY_BYTES = 16 * 2**20
MAX_HEADER_BYTES = 65536  # numpy writes headers of at most a few hundred bytes and reads up to 10,000
# Deflate turns at most 258 bytes into 2 bits: no honest member expands by more than 1032 times.
DEFLATE_MAX_RATIO = 1032
_METHODS = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflate"}
_METHOD_NAMES = {zipfile.ZIP_BZIP2: "bzip2", zipfile.ZIP_LZMA: "lzma"}
_MAGIC = b"\x93NUMPY"
_CHUNK = 1 << 20
_DAMAGE = (zlib.error, zipfile.BadZipFile, EOFError, NotImplementedError, RuntimeError, struct.error)


def _ends_as_a_zip(handle) -> bool:
    """Whether the file's last bytes hold a zip end record (a zip archive, wherever it starts)."""
    size = handle.seek(0, os.SEEK_END)
    handle.seek(max(size - 65536 - 22, 0))
    return b"PK\x05\x06" in handle.read()


def _directory_entries(handle, start, directory, stop) -> int:
    """The entries the zip directory at ``start`` (``directory`` bytes) really holds, counted
    up to ``stop``: each is a 46-byte record plus its name, extra field and comment. A record
    that is not one ends the count (zipfile then names the damage)."""
    if start < 0:
        return 0
    count, at, end = 0, start, start + directory
    while at + 46 <= end and count < stop:
        handle.seek(at)
        record = handle.read(46)
        if len(record) < 46 or record[:4] != b"PK\x01\x02":
            break
        name, extra, comment = struct.unpack("<HHH", record[28:34])
        at += 46 + name + extra + comment
        count += 1
    return count


@dataclass(frozen=True)
class ArrayHeader:
    """What a member's ``.npy`` header declares: its shape and dtype (any number of dimensions)."""

    key: str
    shape: tuple
    dtype: np.dtype
    fortran_order: bool
    offset: int  # bytes of magic and header before the data

    @property
    def nbytes(self) -> int:
        return dense_bytes(self.shape, self.dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)


class Archive:
    """An ``.npz`` opened for bounded reading (see the module docstring).

    ``what`` names the file in messages ("release"), ``fix`` says how to
    make a good one, ``limit`` is the memory budget (default
    :func:`lpviz.budget.memory_limit`). ``archive.keys()`` are the member
    names without ``.npy``; :meth:`header` reads one member's header,
    :meth:`require` checks what reading some members will cost (plus any
    ``extra`` bytes the caller will make of them) before any is read, and
    :meth:`read` reads one, checking the bytes handed out so far against the
    budget first. ``not_zip`` replaces the explanation given for a file that
    is not a zip archive at all. Use it as a context manager.
    """

    def __init__(self, path, *, what="archive", fix=NPZ_FIX, limit=None, not_zip=None):
        self.path = Path(path)
        self.name = shown(path)
        self.what = what
        self.fix = fix
        self.limit = limit
        self._spent = 0
        self._headers = {}
        handle = open_input(path, what=what, fix=fix)
        try:
            head = handle.read(6)
            if head == _MAGIC:
                raise self.error(f"a single .npy array, not an .npz {what}; {fix}")
            if not head.startswith(b"PK"):
                if _ends_as_a_zip(handle):
                    # zipfile would read it (it tolerates bytes before the archive), numpy would not
                    raise self.error(
                        f"not an .npz {what}: it ends as a zip archive but does not start as one (bytes were "
                        f"added before the archive, or its start was cut off), and an .npz starts at its "
                        f"first byte; use the file as it was written, not a copy wrapped or cut; {fix}"
                    )
                raise self.error(f"not an .npz {what} ({not_zip or 'an .npz is a zip file; this one is not'}); {fix}")
            self._check_directory(handle)
            handle.seek(0)
            self._zip = zipfile.ZipFile(handle)
        except ValueError:
            handle.close()
            raise
        except OSError as error:
            handle.close()
            raise clear_os_error(error, path) from None
        except (*_DAMAGE, IndexError) as error:
            handle.close()
            raise self.error(f"not a readable .npz {what} ({_detail(error)}); {fix}") from None
        self.members = {}
        for info in self._zip.infolist():
            key = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
            if key in self.members:
                self.close()
                first, second = self.members[key].filename, info.filename
                same = "two members named" if first == second else "members named"
                names = f"{first!r}" if first == second else f"{first!r} and {second!r}"
                raise self.error(
                    f"holds {same} {names}: numpy would read one of them and hide the other, so the "
                    f"archive is ambiguous; {fix}"
                )
            self.members[key] = info

    def error(self, problem) -> ValueError:
        return ValueError(f"{self.name}: {problem}")

    def _check_directory(self, handle) -> None:
        """Refuse a zip directory too large to read before :mod:`zipfile` reads it whole."""
        size = handle.seek(0, os.SEEK_END)
        tail_size = min(size, 65536 + 22)
        handle.seek(size - tail_size)
        tail = handle.read(tail_size)
        at = tail.rfind(b"PK\x05\x06")
        if at < 0 or at + 22 > len(tail):
            return  # zipfile names the problem
        entries, directory = struct.unpack("<10xHI4x", tail[at : at + 20])
        end_record = size - tail_size + at
        start = end_record - directory  # where zipfile will read the directory from
        if at >= 20 and tail[at - 20 : at - 16] == b"PK\x06\x07":  # zipfile reads a zip64 record whenever present
            (offset,) = struct.unpack("<Q", tail[at - 12 : at - 4])
            if 0 <= offset < size:
                handle.seek(offset)
                record = handle.read(56)
                if len(record) == 56 and record[:4] == b"PK\x06\x06":
                    entries, directory = struct.unpack("<32xQQ8x", record)
                    start = end_record - 20 - 56 - directory
        if entries <= MAX_MEMBERS and directory <= MAX_DIRECTORY_BYTES:
            # the count the end record claims is only a claim: zipfile parses every entry the
            # directory's bytes hold (300,000 in a file claiming 10 took 158 MiB), so count them
            held = _directory_entries(handle, start, directory, MAX_MEMBERS + 1)
            if held > MAX_MEMBERS:
                raise self.error(
                    f"the zip directory holds more than {MAX_MEMBERS:,} members though its end record claims "
                    f"{entries:,}; an .npz lpviz reads has at most {MAX_MEMBERS:,} (is it the right file?); {self.fix}"
                )
        if entries > MAX_MEMBERS or directory > MAX_DIRECTORY_BYTES:
            raise self.error(
                f"the zip directory lists {entries:,} members in {format_bytes(directory)}; an .npz lpviz "
                f"reads has at most {MAX_MEMBERS:,} (is it the right file?); {self.fix}"
            )

    # -- context -------------------------------------------------------------------------------
    def close(self) -> None:
        zipped = getattr(self, "_zip", None)
        if zipped is not None:
            fp = zipped.fp
            zipped.close()
            if fp is not None:
                fp.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __contains__(self, key) -> bool:
        return key in self.members

    def keys(self) -> list:
        return list(self.members)

    def listing(self, limit=12) -> str:
        """The member names for a message (at most ``limit``, each shortened)."""
        names = sorted(self.members)
        text = ", ".join(repr(name[:40]) for name in names[:limit]) or "nothing"
        return text + (f" and {len(names) - limit:,} more" if len(names) > limit else "")

    # -- headers ------------------------------------------------------------------------------
    def header(self, key) -> ArrayHeader:
        """The member's declared shape and dtype, checked against the zip directory's sizes."""
        if key in self._headers:
            return self._headers[key]
        if key not in self.members:
            raise self.error(f"has no member {key!r} (it holds {self.listing()}); {self.fix}")
        info = self.members[key]
        label = f"member {key!r}"
        if info.flag_bits & 0x1:
            raise self.error(f"{label} is encrypted; {self.fix}")
        if info.compress_type not in _METHODS:
            method = _METHOD_NAMES.get(info.compress_type, f"method {info.compress_type}")
            raise self.error(f"{label} is compressed with {method}, which .npz files never are; {self.fix}")
        if info.compress_type == zipfile.ZIP_STORED and info.file_size != info.compress_size:
            raise self.error(
                f"{label} is stored uncompressed in {info.compress_size:,} bytes but the zip directory says "
                f"{info.file_size:,}: the archive is damaged or forged; {self.fix}"
            )
        if info.file_size > max(info.compress_size, 1) * DEFLATE_MAX_RATIO + 1024:
            raise self.error(
                f"{label} claims to expand from {format_bytes(info.compress_size)} to "
                f"{format_bytes(info.file_size)}, more than deflate can ({DEFLATE_MAX_RATIO}:1): the archive "
                f"is damaged or forged; {self.fix}"
            )
        try:
            with self._zip.open(info) as member:
                header = self._parse_header(key, member)
        except ValueError:
            raise
        except OSError as error:
            raise clear_os_error(error, self.path) from None
        except _DAMAGE as error:
            raise self.error(f"{label} is damaged ({_detail(error)}); {self.fix}") from None
        declared = header.offset + header.nbytes
        if info.file_size != declared:
            raise self.error(
                f"{label}'s header declares {_shape_text(header.shape)} {header.dtype} "
                f"({format_bytes(header.nbytes)}) but the zip directory says it holds "
                f"{format_bytes(max(info.file_size - header.offset, 0))}: the archive is damaged or forged; "
                f"{self.fix}"
            )
        self._headers[key] = header
        return header

    def _parse_header(self, key, member) -> ArrayHeader:
        label = f"member {key!r}"
        start = member.read(8)
        if start[:6] != _MAGIC:
            raise self.error(f"{label} is not a NumPy array (no .npy header); {self.fix}")
        if len(start) < 8 or start[6] not in (1, 2, 3) or start[7] != 0:
            raise self.error(f"{label} has a .npy header of an unknown version; {self.fix}")
        version = start[6]
        size_format = "<H" if version == 1 else "<I"
        raw_size = member.read(struct.calcsize(size_format))
        if len(raw_size) != struct.calcsize(size_format):
            raise self.error(f"{label} ends inside its .npy header; {self.fix}")
        (length,) = struct.unpack(size_format, raw_size)
        if length > MAX_HEADER_BYTES:
            raise self.error(
                f"{label} declares a .npy header of {length:,} bytes (numpy writes a few hundred); {self.fix}"
            )
        raw = member.read(length)
        if len(raw) != length:
            raise self.error(f"{label} ends inside its .npy header; {self.fix}")
        try:
            text = raw.decode("utf-8" if version == 3 else "latin1")
            fields = ast.literal_eval(text)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError, UnicodeDecodeError):
            raise self.error(f"{label} has an unreadable .npy header; {self.fix}") from None
        if not isinstance(fields, dict) or set(fields) != {"descr", "fortran_order", "shape"}:
            raise self.error(f"{label} has an unreadable .npy header (not shape, dtype, order); {self.fix}")
        shape, fortran = fields["shape"], fields["fortran_order"]
        if (
            not isinstance(shape, tuple)
            or not all(type(n) is int for n in shape)
            or any(n < 0 for n in shape)
            or len(shape) > 32
        ):
            raise self.error(f"{label} declares the shape {str(shape)[:80]}, which no array has; {self.fix}")
        if not isinstance(fortran, bool):
            raise self.error(f"{label} has an unreadable .npy header (its order); {self.fix}")
        try:
            dtype = np.lib.format.descr_to_dtype(fields["descr"])
        except (TypeError, ValueError, KeyError, IndexError, OverflowError, MemoryError, RecursionError):
            raise self.error(f"{label} declares a data type numpy does not know; {self.fix}") from None
        if dtype.hasobject:
            raise self.error(
                f"{label} holds Python objects (pickled), which lpviz never loads, for safety (loading them can run "
                f"code); save plain arrays: numbers, and text as str arrays"
            )
        if math.prod(shape) > 2**62:
            raise self.error(f"{label} declares {_shape_text(shape)} cells, more than any machine holds; {self.fix}")
        return ArrayHeader(key, shape, dtype, fortran, len(start) + len(raw_size) + length)

    # -- budget and reading ---------------------------------------------------------------------
    def require(self, keys, *, extra=0, what=None, fix="") -> int:
        """Check reading ``keys`` (and ``extra`` bytes made from them) against the budget, before any is read.

        ``what`` describes the reading for the message (after the file's name);
        by default the members and their shapes.
        """
        keys = [key for key in keys if key in self.members]
        total = sum(self.header(key).nbytes for key in keys) + int(extra)
        if what is None:
            shapes = ", ".join(f"{key} {_shape_text(self.header(key).shape)}" for key in keys[:4])
            what = f"reading its arrays ({shapes}{', ...' if len(keys) > 4 else ''})"
        check_memory(
            self._spent + total,
            f"{self.name}: {what}",
            limit=self.limit,
            fix=fix or "Check the file; if it is right, use a machine with more memory (or a smaller data set).",
        )
        return total

    def read(self, key) -> np.ndarray:
        """The member ``key`` as an array; the budget is checked before its memory is allocated."""
        header = self.header(key)
        check_memory(
            self._spent + header.nbytes,
            f"{self.name}: member {key!r} ({_shape_text(header.shape)} {header.dtype})",
            limit=self.limit,
            fix="Check the file; if it is right, use a machine with more memory (or a smaller data set).",
        )
        try:
            flat = np.empty(header.size, dtype=header.dtype)
        except (ValueError, MemoryError) as error:
            raise self.error(f"member {key!r} cannot be allocated ({_detail(error)}); {self.fix}") from None
        raw = flat.view(np.uint8) if header.dtype.itemsize else flat[:0].view(np.uint8)
        try:
            with self._zip.open(self.members[key]) as member:
                member.read(header.offset)
                position = 0
                while position < raw.size:
                    chunk = member.read(min(_CHUNK, raw.size - position))
                    if not chunk:
                        raise self.error(
                            f"member {key!r} ends after {format_bytes(position)} of the "
                            f"{format_bytes(raw.size)} its header declares: the file is truncated; {self.fix}"
                        )
                    raw[position : position + len(chunk)] = np.frombuffer(chunk, dtype=np.uint8)
                    position += len(chunk)
                if member.read(1):  # also ends the stream, which checks the CRC
                    raise self.error(f"member {key!r} is longer than its header declares; {self.fix}")
        except ValueError:
            raise
        except OSError as error:
            raise clear_os_error(error, self.path) from None
        except _DAMAGE as error:
            raise self.error(f"member {key!r} is damaged ({_detail(error)}); {self.fix}") from None
        self._spent += header.nbytes
        if header.fortran_order and header.ndim > 1:
            return flat.reshape(header.shape[::-1]).T
        return flat.reshape(header.shape)

    def read_text(self, key, *, max_chars=4096) -> str:
        """A member holding one short string (``np.asarray("...")``), as str."""
        header = self.header(key)
        if header.size != 1 or header.dtype.kind not in "US" or header.dtype.itemsize > 4 * max_chars:
            raise self.error(
                f"member {key!r} must hold one short text, not {_shape_text(header.shape)} {header.dtype}; {self.fix}"
            )
        value = self.read(key).reshape(-1)[0]
        return decode_text(value, self.name, key)

    def read_scalar(self, key, kinds="biuf"):
        """A member holding one number (bool, int or float kinds), as a Python number."""
        header = self.header(key)
        if header.size != 1 or header.dtype.kind not in kinds or header.ndim > 1:
            raise self.error(
                f"member {key!r} must hold one number, not {_shape_text(header.shape)} {header.dtype}; {self.fix}"
            )
        return self.read(key).reshape(-1)[0].item()


JSON_MAX_DEPTH = 64  # arrays and objects inside one another in a JSON text lpviz reads (its own: < 10)
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')


def json_depth(text) -> int:
    """How deeply arrays and objects nest in the JSON ``text`` (brackets inside strings aside),
    counted without parsing: vectorised, so a 1 MiB text of brackets takes milliseconds."""
    text = text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text)
    codes = np.frombuffer(_JSON_STRING.sub('""', text).encode("utf-8", "replace"), dtype=np.uint8)
    steps = np.isin(codes, (0x5B, 0x7B)).astype(np.int64) - np.isin(codes, (0x5D, 0x7D))
    return int(np.cumsum(steps).max(initial=0))


def load_json(text, *, what="JSON", fix="", max_depth=JSON_MAX_DEPTH):
    """``json.loads(text)`` with its nesting checked first: a text nested deeper than ``max_depth``
    (100,000 brackets made Python's parser raise RecursionError) is a one-line ``ValueError``
    naming ``what`` and ``fix``, like a text that is not JSON."""
    import json

    depth = json_depth(text)
    if depth > max_depth:
        tail = f"; {fix}" if fix else ""
        raise ValueError(f"{what} nests {depth:,} levels deep (at most {max_depth} are read){tail}")
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as error:
        raise ValueError(f"{what} is not JSON ({str(error)[:200]}){'; ' + fix if fix else ''}") from None


def decode_text(value, name="", key="") -> str:
    """A str from a numpy string item: bytes are decoded as UTF-8 (never written as ``"b'x'"``)."""
    if isinstance(value, (bytes, np.bytes_)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            where = f"{name}: member {key!r}" if name else "a label"
            raise ValueError(f"{where} holds bytes that are not UTF-8 text; save the labels as str") from None
    return str(value)


def open_archive(path, **options) -> Archive:
    """:class:`Archive` (a context manager): ``with open_archive(path, what="a release") as archive: ...``."""
    return Archive(path, **options)


def _shape_text(shape) -> str:
    return " x ".join(f"{n:,}" for n in shape) if shape else "a scalar"


def _detail(error) -> str:
    text = str(error).splitlines()[0] if str(error) else ""
    return f"{type(error).__name__}: {text[:160]}" if text else type(error).__name__
