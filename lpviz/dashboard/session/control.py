"""How the event loop steers one chain's worker: the :class:`Problem` it fits and its :class:`Control`.

A worker follows its Control (run, pause, stop) and, while it waits, looks at it at least every
:data:`WAKE_SECONDS`; a Stop, a pause or a resume also wakes it at once.
"""

import threading
from dataclasses import dataclass

# A waiting worker looks at its Control at least this often (a Stop also wakes it at once).
WAKE_SECONDS = 0.25


@dataclass(frozen=True)
class Problem:
    """What a chain fits: the release, the truth beside it (or None), the model and its size, the seed,
    and the inference (lpviz.engine.INFERENCES: "mcmc" chains or "vi" CAVI fits)."""

    release: object
    truth: object
    model: str
    n_components: int
    seed: int = 0
    inference: str = "mcmc"
    chains: int = 1  # MCMC chains per method (lpviz.ensemble: chain 0 is the single chain of the seed)


class Control:
    """How the event loop steers one worker: run (clear = pause), stop, and the Run to stop mid-iteration.

    A worker waiting (paused, in its :class:`~lpviz.dashboard.session.lockstep.Lockstep`, in line at the
    :class:`~lpviz.dashboard.session.turnstile.Turnstile`) is woken at once by :meth:`stop`,
    :meth:`pause` and :meth:`resume` through ``wakers``.
    """

    def __init__(self):
        self.run_event = threading.Event()
        self.run_event.set()
        self.stop_event = threading.Event()
        self.chain_run = None
        self.wakers = []  # callables that wake whatever this worker waits in
        self.pauses = 0  # how many times the event loop asked to pause: a "paused" names the one it answers
        self._lock = threading.Lock()

    def attach(self, chain_run):
        with self._lock:
            self.chain_run = chain_run
            stopped = self.stop_event.is_set()
        if stopped:
            chain_run.stop()

    def stop(self):
        with self._lock:
            self.stop_event.set()
            self.run_event.set()  # wake a paused worker so it can leave
            if self.chain_run is not None:
                self.chain_run.stop()  # the kernels leave within milliseconds
        self._wake()

    def pause(self):
        self.pauses += 1
        self.run_event.clear()
        self._wake()

    def resume(self):
        self.run_event.set()
        self._wake()

    def _wake(self):
        for wake in list(self.wakers):
            wake()

    def state(self):
        """``(stopped, running, pauses)``: all a worker elsewhere needs to follow this one (:meth:`follow`)."""
        return (self.stop_event.is_set(), self.run_event.is_set(), self.pauses)

    def follow(self, state):
        """Take the :meth:`state` of the Control a worker's steering comes from (a worker on a Dask
        worker follows the server's), waking the worker as :meth:`stop`, :meth:`pause` and :meth:`resume` do."""
        stopped, running, pauses = state
        if stopped:
            self.stop()
            return
        self.pauses = pauses  # a "paused" names the pause it answers, as numbered where the pause was asked
        if running:
            self.resume()
        else:
            self.run_event.clear()
            self._wake()

    @property
    def stopped(self):
        return self.stop_event.is_set()

    @property
    def moving(self):
        """Neither stopped nor asked to pause."""
        return self.run_event.is_set() and not self.stop_event.is_set()
