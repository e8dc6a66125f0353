"""The memory budget: how many bytes one request (a load, a build, a chain) may allocate.

Every part of lpviz that is about to make a large allocation from sizes it
was given (a file header, a user's shape, a number of actors) asks
:func:`check_memory` first, so hostile or mistaken input gets a clear
:class:`MemoryBudgetError` naming the size asked and the size allowed instead
of a traceback from the allocator or a visit from the OOM killer.

The limit is ``LPVIZ_MEMORY_LIMIT`` when set (bytes, or a number with a unit:
``512M``, ``8G``, ``1.5GiB``, ``2GB``), else 60% of the machine's memory (the
smaller of the physical memory and a container's cgroup limit).
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import os
import re

import numpy as np

__all__ = [
    "MemoryBudgetError",
    "check_memory",
    "dense_bytes",
    "format_bytes",
    "largest_square_that_fits",
    "memory_budget",
    "memory_limit",
    "parse_bytes",
]

ENV_VAR = "LPVIZ_MEMORY_LIMIT"
DEFAULT_FRACTION = 0.6  # leaves room for the interpreter, the other sessions and the page cache

# Bare letters and IEC names are powers of 1024 (as Docker and the JVM read "512m"); an SI
# name spelled with a B ("2GB", "500kB") is a power of 1000, as written.
_UNITS = {
    "": 1,
    "b": 1,
    "k": 2**10,
    "ki": 2**10,
    "kib": 2**10,
    "kb": 10**3,
    "m": 2**20,
    "mi": 2**20,
    "mib": 2**20,
    "mb": 10**6,
    "g": 2**30,
    "gi": 2**30,
    "gib": 2**30,
    "gb": 10**9,
    "t": 2**40,
    "ti": 2**40,
    "tib": 2**40,
    "tb": 10**12,
}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-zA-Z]*)\s*$")
# cgroup v2, then v1; "max" or a huge number means no limit
_CGROUP_LIMITS = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")


class MemoryBudgetError(ValueError):
    """An allocation would exceed the memory limit (see :func:`memory_limit`)."""


# (limit, whose limit it is in words): set by memory_budget() for the code it runs (this thread only)
_SCOPED: contextvars.ContextVar[tuple[int, str] | None] = contextvars.ContextVar("lpviz_memory_budget", default=None)


@contextlib.contextmanager
def memory_budget(limit, name):
    """Run a block under a smaller memory limit, e.g. a dashboard session's share of the server.

    Inside the block :func:`memory_limit` returns ``limit`` and refusals name
    ``name`` (``"this session's share of the server"``) instead of the
    environment variable. It holds for the calling thread (a context
    variable), so one session's limit never leaks into another's work.
    """
    token = _SCOPED.set((int(limit), str(name)))
    try:
        yield
    finally:
        _SCOPED.reset(token)


def parse_bytes(text) -> int:
    """``"512M"`` -> 536870912: a byte count written with an optional unit.

    Units: ``K``/``M``/``G``/``T`` and ``KiB``/``MiB``/``GiB``/``TiB`` are
    powers of 1024, ``kB``/``MB``/``GB``/``TB`` powers of 1000; case does
    not matter. Raises :class:`ValueError` for anything else or for zero.
    """
    match = _SIZE.match(str(text))
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _UNITS:
        raise ValueError(f"{text!r} is not a size; write bytes or a number with a unit, e.g. 512M, 8G, 1.5GiB")
    value = float(match.group(1)) * _UNITS[unit]
    if not value < 2.0**63:  # 5,000 digits are inf as a float: no int() OverflowError traceback
        raise ValueError("larger than any memory (2**63 bytes or more); write e.g. 512M, 8G, 1.5GiB")
    value = int(value)
    if value <= 0:
        raise ValueError(f"{text!r} is not a positive size; write e.g. 512M, 8G, 1.5GiB")
    return value


def physical_memory() -> int:
    """Bytes of memory this process can have: RAM, or a smaller cgroup (container) limit."""
    total = None
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemTotal:"):
                    total = int(line.split()[1]) * 1024  # the kernel's "kB" are KiB
                    break
    except (OSError, ValueError, IndexError):
        total = None
    if total is None:
        try:
            total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (OSError, ValueError, AttributeError):
            total = 4 * 2**30  # no way to ask: assume a small machine rather than none
    for path in _CGROUP_LIMITS:
        try:
            with open(path) as handle:
                text = handle.read().strip()
        except OSError:
            continue
        if text.isdigit() and 0 < int(text) < total:
            total = int(text)
    return total


def memory_limit() -> int:
    """Bytes one request may allocate: ``LPVIZ_MEMORY_LIMIT`` if set, else 60% of the memory.

    Inside :func:`memory_budget` it is that block's limit. Raises
    :class:`ValueError` naming the variable when it is set to something
    that is not a size.
    """
    scoped = _SCOPED.get()
    if scoped is not None:
        return scoped[0]
    text = os.environ.get(ENV_VAR, "").strip()
    if text:
        try:
            return parse_bytes(text)
        except ValueError as error:
            raise ValueError(
                f"{ENV_VAR}={text if len(text) <= 40 else text[:40] + '...'!r} is not a memory limit: {error}; "
                f"unset it for {DEFAULT_FRACTION:.0%} of the machine's memory"
            ) from None
    return int(physical_memory() * DEFAULT_FRACTION)


def format_bytes(n) -> str:
    """A byte count for people: ``format_bytes(20_000_000_000) == "18.6 GiB"``."""
    n = int(n)
    if abs(n) < 1024:
        return f"{n} bytes"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        value /= 1024
        if abs(value) < 1024 or unit == "EiB":
            return f"{value:.1f} {unit}"
    raise AssertionError("unreachable")


def dense_bytes(shape, dtype) -> int:
    """Bytes of a dense array of ``shape`` and ``dtype``, as a Python int (never overflows)."""
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    cells = 1
    for size in shape:
        size = int(size)
        if size < 0:
            raise ValueError(f"negative dimension {size} in shape {tuple(shape)}")
        cells *= size
    return cells * np.dtype(dtype).itemsize


def check_memory(nbytes, what, *, limit=None, fix="") -> None:
    """Raise :class:`MemoryBudgetError` if ``nbytes`` is more than the limit.

    Parameters
    ----------
    nbytes : int
        What the allocation needs (estimate it before allocating).
    what : str
        What is being allocated, e.g. ``"data.mtx: a 50,000 x 50,000 dense matrix"``.
    limit : int, optional
        The limit in bytes; :func:`memory_limit` when omitted.
    fix : str
        What the user can do instead (appended to the message).
    """
    env_limit = limit is None
    if env_limit:
        limit = memory_limit()
    if int(nbytes) <= int(limit):
        return
    scoped = _SCOPED.get() if env_limit else None
    if scoped is not None:
        how = f" ({scoped[1]})"
    else:
        how = f" (set {ENV_VAR} to change it)" if env_limit else ""
    message = f"{what} needs {format_bytes(nbytes)} but the memory limit is {format_bytes(limit)}{how}."
    raise MemoryBudgetError(f"{message} {fix}".strip())


def largest_square_that_fits(bytes_per_cell, limit=None) -> int:
    """The largest ``n`` such that an ``n x n`` array of ``bytes_per_cell`` fits the limit."""
    if bytes_per_cell <= 0:
        raise ValueError(f"bytes_per_cell must be positive, got {bytes_per_cell}")
    if limit is None:
        limit = memory_limit()
    return math.isqrt(int(limit // bytes_per_cell))
