"""Row chunks of nogil Numba kernels on one shared thread pool.

Every sweep of a chain splits the rows of the data into fixed *stream blocks*
of :data:`ROWS_PER_STREAM` rows; each block seeds its own random streams from
(chain seed, iteration, unit + block), so a chain does not depend on how
blocks are grouped into chunks or on the number of threads. Chunks (runs of
consecutive blocks) go to one process-wide :class:`~concurrent.futures.ThreadPoolExecutor`:
the kernels release the GIL, so the chunks run on all cores, and several
chains (the dashboard runs three) share the same workers fairly instead of
each launching its own parallel region. One mechanism serves every kernel,
serial runs included (one chunk, called inline), so no kernel needs a
``parallel=True`` twin.

A chunk kernel is called as ``kernel(chunk, first_block, last_block, *args)``
and checks the chain's stop flag (a one-element array) between rows (the
private sweeps between cells: a cell near :data:`lpviz.release.MAX_COUNT`
costs milliseconds), so a stop request ends a sweep within milliseconds
whatever the data.

SIGINT (Ctrl-C) and SIGTERM reach those flags at once (:func:`watch_signals`):
Python runs a signal handler only between bytecodes of the main thread, which
never come while the main thread is itself inside a kernel (a small chain runs
its one chunk inline). The C-level handler also writes the signal's number to
a wakeup file descriptor; a watcher thread reading it sets the stop flag of
every kernel the main thread is running (:func:`main_thread_kernel`), the
kernel returns, and the handler then runs as usual (KeyboardInterrupt, the
CLI's Terminated). Kernels on the pool need none of this: the main thread
waits for them interruptibly and :class:`Pending` sets their flag. Chains
that are idle, or run by other threads (the dashboard's), are left alone.
"""

import contextlib
import functools
import os
import signal
import sys
import threading
from concurrent.futures import ThreadPoolExecutor, wait

import numba
import numpy as np

from lpviz._env import env_count

__all__ = [
    "ROWS_PER_STREAM",
    "PARALLEL_MIN_CELLS",
    "n_threads",
    "chunk_bounds",
    "run_chunks",
    "new_stop_flag",
    "limit_blas_threads",
    "submit_chunks",
    "submit_call",
    "Pending",
    "watch_signals",
    "main_thread_kernel",
    "cli_signal_handlers",
    "check_signals",
]

# Rows that share one random stream: fixed (not tied to the thread count) so
# the chain is the same for any number of threads; large enough that seeding
# a stream is negligible next to the rows' work.
ROWS_PER_STREAM = 8
# Below this many cells one chunk runs inline: handing work to a thread costs
# more than the work.
PARALLEL_MIN_CELLS = 40_000
# Chunks per thread: enough to even out rows of unequal cost.
_CHUNKS_PER_THREAD = 4

_pool = None
_pool_lock = threading.Lock()
_blas_limited = False


def n_threads():
    """Worker threads for the kernels: ``LPVIZ_NUM_THREADS``, else Numba's thread count."""
    return env_count("LPVIZ_NUM_THREADS", max(1, int(numba.config.NUMBA_NUM_THREADS)))


def _executor():
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=n_threads(), thread_name_prefix="lpviz-kernel")
        return _pool


def limit_blas_threads():
    """Run BLAS (numpy's matrix products) on one thread, once per process, from the first chain on.

    A chain's parallelism is this module's pool, and the dashboard and the
    experiment grids run several chains at once. OpenBLAS's own worker threads
    spin between the chains' frequent small products and take the cores the
    pool's kernels need: three Enron chains (1000 x 1000, K = 10) ran at 26-28
    it/s each with two BLAS threads and at 43-45 with one, and a 10,000 x
    10,000 private iteration (the largest products lpviz makes) took the same
    time either way (benchmarks/bench_app.py, bench_private_iteration.py).
    ``LPVIZ_BLAS_THREADS`` sets another count; ``0`` leaves BLAS alone.
    """
    global _blas_limited
    with _pool_lock:
        if _blas_limited:
            return
        _blas_limited = True
    count = env_count("LPVIZ_BLAS_THREADS", 1, minimum=0)
    if count:
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=count, user_api="blas")


def n_stream_blocks(n_rows):
    return -(-n_rows // ROWS_PER_STREAM)


def chunk_bounds(n_rows, n_cells, parallel=None):
    """``[(first_block, last_block), ...]``: the chunks a sweep over ``n_rows`` rows runs as.

    One chunk when the data are small (``n_cells < PARALLEL_MIN_CELLS``) or
    ``parallel`` is False, else about four per thread.
    """
    n_blocks = n_stream_blocks(n_rows)
    if parallel is None:
        parallel = n_cells >= PARALLEL_MIN_CELLS
    n_chunks = 1 if not parallel else max(1, min(n_blocks, _CHUNKS_PER_THREAD * n_threads()))
    bounds = [(c * n_blocks // n_chunks, (c + 1) * n_blocks // n_chunks) for c in range(n_chunks)]
    return [(first, last) for first, last in bounds if last > first] or [(0, 0)]


def new_stop_flag():
    """The flag a chain's kernels poll between rows: set ``flag[0] = 1`` to stop them.

    Made in the main thread, it also installs :func:`watch_signals`, so Ctrl-C and SIGTERM
    stop the chain's kernels even while the main thread is inside one."""
    global _swallowed_interrupt
    watch_signals()
    if threading.get_ident() == _MAIN_THREAD:
        _swallowed_interrupt = False  # one from before this chain (the user's own code) is not its
    return np.zeros(1, dtype=np.uint8)


# The stop flags of the kernels the main thread is inside (id -> flag), and the signal watcher.
_armed: dict = {}
_watcher = None
_MAIN_THREAD = threading.main_thread().ident
_STOP_SIGNALS = frozenset({int(signal.SIGINT), int(signal.SIGTERM)})
_last_stop_signal = None


def stop_signal_received():
    """The last SIGINT or SIGTERM the watcher saw (its number), or None: for a caller whose
    handler's exception was lost (raised inside a Numba compilation, which carried on)."""
    return _last_stop_signal


@contextlib.contextmanager
def main_thread_kernel(stop):
    """Around a kernel called directly (not through :func:`submit_chunks`): if this is the main
    thread, SIGINT and SIGTERM set ``stop`` while it runs (:func:`watch_signals`)."""
    if stop is None or threading.get_ident() != _MAIN_THREAD:
        yield
        return
    check_signals()  # one whose exception a compile swallowed: not a whole sweep later
    key = id(stop)
    _armed[key] = stop
    try:
        yield
    except SystemError as error:
        raise_interrupt_behind(error)
        raise
    finally:
        _armed.pop(key, None)


def interrupt_behind(error):
    """The KeyboardInterrupt (or the CLI's Terminated) behind a SystemError, or None.

    A signal's handler runs at the first bytecode after it arrives; when that bytecode is one
    Numba's dispatcher runs from C (it unpickles a constant as a kernel returns, which is just
    when a stopped kernel returns), the handler's exception comes back wrapped as "SystemError:
    CPUDispatcher(...) returned a result with an exception set"."""
    seen = 0
    while error is not None and seen < 16:
        if isinstance(error, BaseException) and not isinstance(error, Exception):
            return error
        error = error.__cause__ or error.__context__
        seen += 1
    return None


def raise_interrupt_behind(error):
    """Raise the interrupt behind ``error`` (:func:`interrupt_behind`) if there is one."""
    interrupt = interrupt_behind(error)
    if interrupt is not None:
        raise interrupt.with_traceback(None) from None


def _stop_armed():
    for flag in list(_armed.values()):
        flag[0] = 1


def watch_signals():
    """Make SIGINT and SIGTERM set every live stop flag the moment they arrive; True if installed.

    Installs :func:`signal.set_wakeup_fd` (once per process, from the main thread) with a daemon
    thread reading it. Where a wakeup descriptor is set already (an asyncio loop's signal
    handlers) it is left alone and False returned: that loop's own handlers run promptly.
    SIGTERM with no Python handler (the default) ends the process at once anyway; with one
    (``lpviz``'s CLI) the kernels stop, then the handler runs.
    """
    global _watcher
    if _watcher is not None:
        return True
    if threading.current_thread() is not threading.main_thread():
        return False
    reader, writer = os.pipe()  # raw descriptors: open for the process's life, never "unclosed"
    os.set_blocking(writer, False)
    try:
        previous = signal.set_wakeup_fd(writer, warn_on_full_buffer=False)
    except (ValueError, OSError):
        os.close(reader)
        os.close(writer)
        return False
    if previous != -1:  # someone else's descriptor: give it back
        signal.set_wakeup_fd(previous)
        os.close(reader)
        os.close(writer)
        return False
    thread = threading.Thread(target=_watch, args=(reader,), name="lpviz-signals", daemon=True)
    _watcher = (reader, writer, thread)
    thread.start()
    sys.unraisablehook = functools.partial(_record_swallowed_interrupt, previous=sys.unraisablehook)
    return True


def _record_swallowed_interrupt(report, previous):
    """sys.unraisablehook, wrapped: remember a KeyboardInterrupt that could not be raised (Ctrl-C's
    handler ran inside a ctypes callback while Numba compiled) so :func:`check_signals` raises it
    at the fit's next poll; the report itself goes on to the previous hook unchanged."""
    global _swallowed_interrupt
    if report.exc_type is KeyboardInterrupt:
        _swallowed_interrupt = True
    previous(report)


def _watch(reader):
    """The watcher thread: a SIGINT or SIGTERM byte on the wakeup descriptor stops every chain."""
    while True:
        try:
            received = os.read(reader, 64)
        except OSError:
            return
        if not received:
            return
        stops = [number for number in received if number in _STOP_SIGNALS]
        if stops:
            global _last_stop_signal
            _last_stop_signal = stops[-1]
            _stop_armed()


# The signal the CLI's handlers took (its number), or None. A handler's exception can be lost:
# raised inside a ctypes callback (llvmlite's, while Numba compiles or loads a cached kernel) it is
# printed as "Exception ignored" and the callback's caller carries on. check_signals() raises it
# again at the next point the fit or grid polls, so no Ctrl-C or SIGTERM is ever lost.
_pending_signal = None
# Outside the CLI (``lpviz.fit`` in plain Python): a Ctrl-C whose KeyboardInterrupt was swallowed.
_swallowed_interrupt = False


def _signal_exception(number):
    if number == signal.SIGTERM:
        from lpviz._files import Terminated

        return Terminated("terminated (SIGTERM)")
    return KeyboardInterrupt()


def check_signals():
    """In the main thread, raise the SIGINT (KeyboardInterrupt) or SIGTERM (Terminated) that the
    CLI's handlers took (:func:`cli_signal_handlers`), or, outside the CLI, a KeyboardInterrupt
    that was swallowed (:func:`_record_swallowed_interrupt`); a no-op elsewhere or if none arrived.
    Called every iteration of a fit and between the tasks of a grid: cheap (two global reads)."""
    global _swallowed_interrupt
    if threading.get_ident() != _MAIN_THREAD:
        return
    number = _pending_signal
    if number is not None:
        raise _signal_exception(number)
    if _swallowed_interrupt:
        _swallowed_interrupt = False
        raise KeyboardInterrupt


@contextlib.contextmanager
def cli_signal_handlers():
    """Within the block (the CLI's run, main thread): SIGINT raises KeyboardInterrupt and SIGTERM
    :class:`lpviz._files.Terminated`, and each is remembered so :func:`check_signals` raises it
    again if the first was swallowed (a ctypes callback). The "Exception ignored" report of such a
    swallowed exception is kept off stderr (the user sees one line). A SIGINT ignored at start (a
    job started in the background by a shell without job control) stays ignored."""
    global _pending_signal
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(number, frame):
        global _pending_signal
        _pending_signal = number
        raise _signal_exception(number)

    def unraisable(report, previous=sys.unraisablehook):
        from lpviz._files import Terminated

        if _pending_signal is not None and isinstance(report.exc_value, (KeyboardInterrupt, Terminated)):
            return  # check_signals raises it again at the next poll
        previous(report)

    previous_int = signal.getsignal(signal.SIGINT)
    previous_term = signal.signal(signal.SIGTERM, handler)
    if previous_int is signal.default_int_handler:
        signal.signal(signal.SIGINT, handler)
    previous_hook, sys.unraisablehook = sys.unraisablehook, unraisable
    _pending_signal = None
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous_term)
        if previous_int is signal.default_int_handler:
            signal.signal(signal.SIGINT, previous_int)
        sys.unraisablehook = previous_hook
        _pending_signal = None


def run_chunks(kernel, bounds, stop, *args):
    """Call ``kernel(chunk, first, last, *args)`` for every chunk; return the results in order.

    Several chunks run on the shared pool. If the caller is interrupted
    (Ctrl-C) while waiting, ``stop`` is raised so the running chunks leave at
    their next row, and the interrupt propagates once they have.
    """
    return submit_chunks(kernel, bounds, stop, *args).result()


class Pending:
    """Work handed to the pool: :meth:`result` waits for it (results in order)."""

    def __init__(self, futures, stop, done=None):
        self._futures, self._stop, self._done = futures, stop, done

    def result(self):
        if self._done is not None:
            return self._done
        try:
            return [future.result() for future in self._futures]
        except BaseException:
            if self._stop is not None:  # the chunks still running leave at their next row
                self._stop[0] = 1
            wait(self._futures)
            raise


def submit_chunks(kernel, bounds, stop, *args):
    """:func:`run_chunks` without waiting: the caller does other work meanwhile, then calls
    ``.result()`` (a single chunk runs at once, in the caller's thread)."""
    check_signals()  # a signal whose exception a compile swallowed stops the chain before its next kernel
    if len(bounds) == 1:
        first, last = bounds[0]
        if stop is None or threading.get_ident() != _MAIN_THREAD:
            return Pending(None, stop, [kernel(0, first, last, *args)])
        key = id(stop)  # main_thread_kernel, inlined: this path runs several times per iteration
        _armed[key] = stop
        try:
            return Pending(None, stop, [kernel(0, first, last, *args)])
        except SystemError as error:
            raise_interrupt_behind(error)
            raise
        finally:
            _armed.pop(key, None)
    pool = _executor()
    return Pending([pool.submit(kernel, chunk, first, last, *args) for chunk, (first, last) in enumerate(bounds)], stop)


def submit_call(function, *args, parallel=True):
    """``function(*args)`` on the pool (it should release the GIL: a matrix product, a
    kernel) when ``parallel``, else at once; returns a :class:`Pending` of one result."""
    if not parallel:
        return Pending(None, None, [function(*args)])
    return Pending([_executor().submit(function, *args)], None)
