"""The fair sharing of the process's cores between sessions: chains take turns at one :class:`Turnstile`.

Every chain of every session runs its iterations in turns of :data:`TURN_SECONDS` at this process's
:func:`turnstile` (``$LPVIZ_CHAIN_THREADS`` places, :data:`CHAIN_THREADS_ENV`), and its thread gives
way to the event loop (:func:`give_way`: a lower CPU priority, by :data:`CHAIN_NICE_STEP`).
"""

import collections
import functools
import os
import sys
import threading

from lpviz.dashboard.session.control import WAKE_SECONDS

# A chain's turn on the process's cores (see Turnstile): long enough that handing over costs
# nothing next to it, short enough that 36 chains waiting in line each run within a second or so.
TURN_SECONDS = 0.05


class Turnstile:
    """Chains take turns on the process's cores: at most ``places`` at once, first come first served.

    Every chain of every session queues here before running a turn of iterations
    (:data:`TURN_SECONDS`), then queues again at the back. No chain waits longer
    than the turns of the chains ahead of it, however many sessions there are; a
    class's sessions progress at the same pace; and only ``places`` threads want
    the GIL besides the event loop (which stays responsive), instead of every
    session's chains at once. One per process (:func:`turnstile`), with
    ``lpviz._parallel.n_threads()`` places (``LPVIZ_NUM_THREADS``, default the cores).
    """

    def __init__(self, places, turn_seconds=TURN_SECONDS):
        if places < 1:
            raise ValueError(f"places must be >= 1, got {places}")
        self.places = places
        self.turn_seconds = turn_seconds
        self._line = collections.deque()  # tickets waiting, first in line first
        self._inside = 0
        self._condition = threading.Condition()

    def enter(self, control):
        """Wait for a place (in line); True once inside, False if ``control`` stopped or paused first."""
        ticket = object()
        with self._condition:
            self._line.append(ticket)
            try:
                while not (self._line[0] is ticket and self._inside < self.places):
                    if not control.moving:
                        return False
                    self._condition.wait(WAKE_SECONDS)
                self._line.popleft()
                self._inside += 1
                return True
            finally:
                if ticket in self._line:
                    self._line.remove(ticket)
                    self._condition.notify_all()  # whoever was behind may now be first

    def leave(self):
        with self._condition:
            self._inside -= 1
            self._condition.notify_all()

    def wake(self):
        with self._condition:
            self._condition.notify_all()

    @property
    def waiting(self):
        return len(self._line)

    @property
    def inside(self):
        return self._inside


_TURNSTILE: list[Turnstile] = []
_TURNSTILE_LOCK = threading.Lock()


# Chains running at once in a served process (lpviz.dashboard.serve's --chain-threads): the cores less one there.
CHAIN_THREADS_ENV = "LPVIZ_CHAIN_THREADS"


def turnstile(places=None):
    """This process's :class:`Turnstile` (made on first use, with ``places`` places: default
    ``$LPVIZ_CHAIN_THREADS``, else ``lpviz._parallel.n_threads()``; a Dask worker's chains use its
    thread count)."""
    with _TURNSTILE_LOCK:
        if not _TURNSTILE:
            from lpviz._env import env_count
            from lpviz._parallel import n_threads

            _TURNSTILE.append(Turnstile(places or env_count(CHAIN_THREADS_ENV, n_threads())))
        return _TURNSTILE[0]


# The chains' threads give way to the server's event loop (a click's answer, the pages' messages, the
# drains): a served class runs many chain threads on few cores, and at the loop's own priority the
# loop got a share of the CPU like any one of them whenever it asked. Linux keeps a nice value per
# thread (new threads, Numba's pool among them, take their creator's), and lowering one's own
# priority needs no privilege.
CHAIN_NICE_STEP = 10


def give_way():
    """Lower the calling thread's CPU priority by ``CHAIN_NICE_STEP`` (to at most nice 19), on Linux;
    elsewhere a thread id is no process id for ``setpriority``, and nothing changes."""
    if not sys.platform.startswith("linux"):
        return
    thread = threading.get_native_id()
    try:
        os.setpriority(os.PRIO_PROCESS, thread, min(19, os.getpriority(os.PRIO_PROCESS, thread) + CHAIN_NICE_STEP))
    except OSError:  # refused (a sandbox): the chain runs as before
        pass


def giving_way(work):
    """``work`` run in a thread that first gives way (:func:`give_way`); ``__wrapped__`` is ``work``
    (``inspect.unwrap`` finds whose a thread's target is)."""

    @functools.wraps(work)
    def run(*args):
        give_way()
        return work(*args)

    return run
