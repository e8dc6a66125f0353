"""The chain of one method in a worker thread, handed to the event loop in batches.

A :class:`ChainRunner` drives :func:`lpviz.driver.run` on a :class:`Problem`
(the release, with the truth beside it for a method that fits the true counts)
in a daemon thread; the Numba kernels release the GIL, so the chains and the
event loop share the cores. The worker never touches a parameter or a Bokeh
model: it queues trace rows and result snapshots (copies it makes itself),
and the event loop takes them with :meth:`ChainRunner.collect` and
:meth:`ChainRunner.apply` (:class:`lpviz.dashboard.session.fits.Fits` does, every 200 ms). Every
number streamed comes from :func:`lpviz.metrics.score`: the current state's
(one trace row) and the posterior's (the snapshot). A :class:`Lockstep` keeps
the chains of one session level; :func:`warm_up_kernels` loads the kernels
once per process.
"""

import collections
import functools
import math
import os
import queue
import sys
import threading
import time
from dataclasses import dataclass

import holoviews as hv
import numpy as np
import pandas as pd
import param

from lpviz.dashboard.serving.throttle import ROWS_SECONDS, SNAPSHOT_SECONDS, Throttle, messages

# A runner's states. Moving: the worker is (or is about to be) at work, so the event loop keeps
# draining. Still: no worker thread is alive (idle, stopped, done, error, unavailable) or it waits
# (paused). "starting": the previous worker is leaving, the new run begins as soon as it has;
# "stopping": Stop, Reset or the session's end asked the worker to leave, and it has not yet.
STATUSES = (
    "idle",
    "starting",
    "running",
    "pausing",
    "paused",
    "stopping",
    "stopped",
    "done",
    "error",
    "unavailable",
)
MOVING_STATUSES = ("starting", "running", "pausing", "stopping")
# Scores traced per iteration: for the current state and (prefixed "mean_") the posterior mean.
TRACE_SCORES = ("mae", "heldout_mae", "rate_mae", "heldout_rate_mae")
# The most chains a method runs in a session (Settings.chains), and the traces each chain beyond the
# first adds to a row (its own log joint and log marginal: where a chain in another mode shows).
MAX_CHAINS = 4
# MCMC chains per method in a session and in every preset: two, the fewest that can disagree
# (measured in benchmarks/bench_class.py --chains; docs/dashboard.md, "A class on one server").
DASHBOARD_CHAINS = 2
CHAIN_TRACES = ("log_joint", "log_marginal")
TRACE_COLUMNS = (
    "iteration",
    "log_joint",
    "log_marginal",
    "elbo",
    *TRACE_SCORES,
    *(f"mean_{key}" for key in TRACE_SCORES),
    *(f"{trace}_{chain}" for chain in range(1, MAX_CHAINS) for trace in CHAIN_TRACES),
)
# Rows kept per trace: more than a plot a few hundred pixels wide can show;
# long runs trace every k-th iteration so the buffer spans the whole run.
BUFFER_LENGTH = 2_000
# Scoring a state reads every cell once; on large data, trace every k-th
# iteration so that on average at most this many cells are scored per
# iteration (a fixed rule, so which iterations are traced never depends on timing).
SCORED_CELLS_PER_ITERATION = 100_000
RATE_WINDOW_SECONDS = 1.0  # iterations per second are measured over this long, once the run has lasted that
LOCKSTEP_SLACK = 20
# A chain's turn on the process's cores (see Turnstile): long enough that handing over costs
# nothing next to it, short enough that 36 chains waiting in line each run within a second or so.
TURN_SECONDS = 0.05
# A waiting worker looks at its Control at least this often (a Stop also wakes it at once).
WAKE_SECONDS = 0.25
# The session's watchdog (ChainRunner.watch): a running chain that has posted no iteration for this
# long (or ten of its own iterations' time, if longer) is reported in words on its progress line.
STALL_SECONDS = 20.0
# A worker that has left while its status still says it moves is settled after this long (its last
# messages have had time to be drained).
LEFT_SECONDS = 2.0
LEFT_WITHOUT_A_WORD = "its worker left before its run ended, without reporting why (see the server's output)"
# Tests only (tests/test_browser_stop_final.py): seconds every stop check of a run's final score waits
# (unless Stop, Reset or the session's end comes first): a final score as slow as Enron's under load,
# in a served app the test cannot patch. Unset (always, outside that test): no wait.
SLOW_FINAL_SCORE_ENV = "LPVIZ_TEST_SLOW_FINAL_SCORE"


def empty_trace():
    return pd.DataFrame({name: pd.Series(dtype="float64") for name in TRACE_COLUMNS})


def _number(value):
    return math.nan if value is None else float(value)


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

    A worker waiting (paused, in its :class:`Lockstep`, in line at the :class:`Turnstile`) is
    woken at once by :meth:`stop`, :meth:`pause` and :meth:`resume` through ``wakers``.
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


class ChainRunner(param.Parameterized):
    """One method's chain, run in a worker thread and handed over in batches.

    :meth:`configure` with a :class:`Problem`, then :meth:`start`,
    :meth:`pause`, :meth:`resume`, :meth:`stop`, :meth:`reset`: the
    transitions of a small state machine (:data:`STATUSES`) that is the only
    owner of its worker thread. A run starts only once the previous worker has
    left (until then the status reads "starting"), so however fast the buttons
    are pressed there is at most one worker per runner, and the status is what
    the worker does. Nothing the worker computes is visible until :meth:`drain`
    (or :meth:`collect` and :meth:`apply`) runs on the event loop, which also
    :meth:`poll` s for workers that have left.

    ``result`` is None before the first snapshot, then a dict the worker
    copied: ``iteration``; ``mu`` (rates of the current state); ``mu_hat``
    (posterior mean rates, None before the first saved sample); ``best``
    (factors of the saved sample with the highest log joint) and
    ``best_log_joint``; ``samples_saved``; ``score`` (:func:`lpviz.metrics.score`
    of the posterior: what every tab shows); ``bessel_draws`` (the last
    sweep's Bessel draws, methods that make them, else None).
    """

    method = param.String(default="", constant=True, doc="registry name of the method")
    status: param.Selector = param.Selector(default="idle", objects=list(STATUSES))
    iteration = param.Integer(default=0, bounds=(0, None))
    n_iter = param.Integer(default=6000, bounds=(1, None), doc="iterations to run")
    target = param.Integer(default=6000, bounds=(0, None), doc="iterations the current run goes to")
    burn_in = param.Integer(default=1000, bounds=(0, None), doc="iterations before the first saved sample")
    thin = param.Integer(default=25, bounds=(1, None), doc="save every thin-th iteration after burn-in")
    trace_every = param.Integer(default=1, bounds=(1, None), doc="trace every n-th iteration")
    iterations_per_second = param.Number(default=0.0, bounds=(0, None))
    result = param.Dict(default=None, allow_None=True)
    error = param.String(default="")
    note = param.String(default="", doc="the watchdog's words on a run that does not move (or '')")
    options = param.Dict(default={}, doc="the method's options (e.g. the private method's sampler)")

    def __init__(self, method, *, buffer_length=BUFFER_LENGTH, pace=None, place=None, **params):
        """``pace``: a :class:`Lockstep` shared with the session's other runners, or None;
        ``place``: where the worker runs (:class:`LocalPlace` by default: a thread of this process)."""
        super().__init__(method=method, **params)
        self.pace = pace
        self.place = place or LocalPlace()
        # a name of its own for the buffer's data, so several buffers trigger together
        self.buffer = hv.streams.Buffer(
            empty_trace(), length=buffer_length, index=False, rename={"data": f"trace_{method}"}
        )
        self.problem = None
        self._queue = queue.SimpleQueue()
        self._generation = 0
        self._worker = None  # the one worker (a handle with is_alive/join), or None
        self._worker_generation = 0  # the generation the worker was launched for
        self._ending = False  # the worker has posted "ending": its chain has left, only its end-of-run work remains
        self._finishing = None  # a worker a Stop or Reset let go in its end-of-run work (its result still comes)
        self._control = Control()
        self._next = None  # what to launch once the worker has left: "fresh", "extend" or None
        self._after = "stopped"  # the status a stopping worker leaves behind
        self._ended = None  # (status, updates) the worker reported at its end, applied once it has left
        self._carry = {}  # what a run leaves for its continuation (the worker's, while one runs)
        self._rate_mark = None  # (time, iteration) the it/s figure is measured from
        self.reached = 0  # the last iteration the worker posted (not yet drained, perhaps)
        self._progress = None  # (time, reached, alive) the watchdog last saw a change at

    # ---- what the registry says about the method ----------------------------------------
    @property
    def method_class(self):
        from lpviz import methods

        return methods.get(self.method)

    @property
    def label(self):
        vi = self.problem is not None and self.problem.inference == "vi"
        return f"{self.method_class.label}, VI" if vi else self.method_class.label

    @property
    def color(self):
        return self.method_class.color

    @property
    def unavailable_reason(self):
        """Why this method cannot run on the current problem ('' when it can)."""
        if self.problem is not None and self.method_class.uses_truth and self.problem.truth is None:
            return "needs the true counts, which this release does not come with"
        return ""

    # ---- the state machine (event loop) ----------------------------------------------------
    def configure(self, problem):
        """Use ``problem`` for the next run; stops and clears the current one."""
        self.problem = problem
        self.reset()

    def start(self):
        """Start a fresh run (or resume a paused one)."""
        if self.status in ("paused", "pausing"):
            self.resume()
            return
        if self.status in ("running", "starting", "unavailable"):
            return
        if self.problem is None:
            raise RuntimeError("no data to fit: configure the runner with a Problem first")
        self._request("fresh")

    def extend(self):
        """Continue a finished run for another ``n_iter`` iterations (the same chain and posterior)."""
        # the chain is here (a local run), or kept where it ran (a Dask worker's: lpviz.dashboard.session.remote)
        continues = self._carry.get("chain_run") is not None or self._carry.get(REMOTE_CHAIN)
        if self.status == "done" and continues:
            self._request("extend")

    def pause(self):
        """Ask the worker to pause after its current iteration; ``status`` reads "paused"
        once it has handed over everything up to there."""
        if self.status == "running":
            self._control.pause()
            self.param.update(status="pausing", iterations_per_second=0.0)

    def resume(self):
        """Go on after a pause; after the end of a run, run as many iterations again."""
        if self.status == "done":
            self.extend()
        elif self.status in ("paused", "pausing"):
            self._rate_mark = (time.perf_counter(), self.iteration)
            self._control.resume()
            self.status = "running"

    def stop(self):
        """End the run, even in the middle of an iteration; its results stay until :meth:`reset`.
        The status reads "stopping" until the worker has left, then "stopped"."""
        if self.status in ("running", "pausing", "paused", "starting"):
            self._next = None
            self._leave("stopped")

    def halt(self):
        """Stop the worker, whatever it does (the session ends); its results stay."""
        self._next = None
        if self.status in MOVING_STATUSES or self.status == "paused":
            self._leave("stopped")
        else:
            self._control.stop()

    def reset(self, clear=True):
        """Stop and forget the run: empty traces, no result, iteration 0 (the status reads
        "stopping" until the worker has left, then "idle").

        The status (with iteration 0) changes first; the traces and the result (a redraw of every
        trace plot and view: seconds of a loaded server's time) are cleared after it, by the
        returned callable (called here unless ``clear=False``: :meth:`lpviz.dashboard.session.fits.Fits.reset` calls
        it in a callback of its own, once the statuses have gone to the page). It clears nothing
        once a new run has started (that run's start cleared them): no mix of old and new run."""
        self._next = None
        self._generation += 1  # whatever the old worker still sends is ignored
        self.reached = 0
        self._carry = {}
        self._ended = None
        self._leave("unavailable" if self.unavailable_reason else "idle", iteration=0, error="")
        generation = self._generation

        def forget():
            if self._generation == generation:  # no run started since
                self._forget(count=False)

        if clear:
            forget()
        return forget

    def poll(self):
        """Settle what the worker's leaving decides: a "starting" run launches, a "stopping"
        one reads stopped (or idle), a finished one done (or error). Returns whether it changed."""
        if self._worker is None or self._worker.is_alive() or not self._queue.empty():
            return False  # settled once its last messages (rows, snapshot, "done") are collected
        self._worker.join()
        self._worker = None
        if self._ended is not None and self.status in ("running", "pausing", "paused"):
            status, updates = self._ended
            self.param.update(status=status, iterations_per_second=0.0, **updates)
        elif self._next is not None:
            self._launch()
        elif self.status in MOVING_STATUSES or self.status == "paused":
            self._settle_left()
        self._ended = None
        return True

    def _settle_left(self):
        """A worker that has left with the status still moving: asked (stopping), the status it was
        asked for; else it left on its own without a word (no "done", no "error"; a thread cannot,
        short of the interpreter's end): stopped, and the line says so."""
        if self.status == "stopping":
            self.param.update(status=self._after, iterations_per_second=0.0)
        else:
            self.param.update(status="stopped", iterations_per_second=0.0, error=LEFT_WITHOUT_A_WORD)

    def watch(self, now):
        """The watchdog's look at this runner (the session calls it at every drain): a worker that
        has left while the status still says it moves is settled. Returns the seconds since the
        chain last moved (a new iteration, its worker leaving, a new status), None when it is still."""
        if self.status not in MOVING_STATUSES:
            self._progress = None
            if self.note:
                self.note = ""
            return None
        alive = self.is_alive
        seen = (self.reached, alive, self.status)
        if self._progress is None or self._progress[1:] != seen:
            self._progress = (now, *seen)
            if self.note:
                self.note = ""
            return 0.0
        quiet = now - self._progress[0]
        if not alive and quiet >= LEFT_SECONDS:  # its last messages have been drained by now
            if not self.poll() and self._worker is None and self._next is None and self.status in MOVING_STATUSES:
                self._settle_left()
        return quiet

    @property
    def seconds_per_iteration(self):
        return 1.0 / self.iterations_per_second if self.iterations_per_second > 0 else 0.0

    def _request(self, what):
        """Launch ``what`` now if no worker is alive, else once the current one has left."""
        self._next = what
        if self._worker is not None and self._worker.is_alive():
            self._control.stop()
            self.param.update(status="starting", iterations_per_second=0.0)
        else:
            self._worker = None
            self._launch()

    def _leave(self, then, **also):
        """Ask the worker to leave; the status is ``then`` once it has, or at once when its chain has
        already left (it posted "ending": only the final snapshot's score remains, seconds on Enron,
        which a Stop or Reset does not wait for: it leaves at its next row block, ScoreStopped; a run
        stopped in its end-of-run work keeps its last snapshot)."""
        self._control.stop()
        self._after = then
        alive = self._worker is not None and self._worker.is_alive()
        if alive and self._ending:
            self._finishing, self._worker, alive = self._worker, None, False
        self._set(status="stopping" if alive else then, iterations_per_second=0.0, **also)
        if not alive:
            self._worker = None

    def _forget(self, count=True):
        if count:
            self._generation += 1  # whatever the old worker still sends is ignored
        self.reached = 0
        if len(self.buffer.data):  # clearing redraws every trace plot: only when there is something
            self.buffer.clear()
        self._carry = {}
        self._ended = None
        self._set(iteration=0, result=None, error="", iterations_per_second=0.0)

    def _set(self, **values):
        changed = {
            name: value
            for name, value in values.items()
            if getattr(self, name) is not value and getattr(self, name) != value
        }
        if changed:
            self.param.update(**changed)

    def _launch(self):
        what, self._next = self._next, None
        if what == "fresh":
            self._forget()
            self._generation += 1
            schedule = dict(
                n_iter=self.n_iter, burn_in=self.burn_in, thin=self.thin, stride=self.stride, options=dict(self.options)
            )
            self._carry = {"schedule": schedule}
            target = self.n_iter
        else:
            target = self.target + self.n_iter
        self._control = Control()
        self._ended = None
        self._worker_generation, self._ending = self._generation, False
        self.param.update(status="running", target=target, error="")
        self._rate_mark = (time.perf_counter(), self.iteration)
        self._worker = self.place.launch(self, self._generation, self.problem, self._carry, target, self._control)

    @property
    def stride(self):
        """Iterations per trace row: ``trace_every``, or coarser so that the bounded buffer
        spans the whole run and scoring the states stays a small share of the work."""
        cells = int(np.prod(self.problem.release.shape)) if self.problem else 0
        return max(self.trace_every, -(-self.n_iter // self.buffer.length), -(-cells // SCORED_CELLS_PER_ITERATION))

    def join(self, timeout=None):
        """Wait for the worker to leave (tests, session teardown); :meth:`poll` then settles the status."""
        if self._worker is not None:
            self._worker.join(timeout)
            return not self._worker.is_alive()
        return True

    def release(self):
        """Drop the run, its data and its outputs (the session has ended; the worker has left).
        Nothing is redrawn: the buffer's plots are let go first, and no watcher hears of it."""
        hv.streams.Stream.clear(self.buffer)  # the subscribers (the closed page's plots), not the data
        with param.parameterized.discard_events(self):
            self._forget()
        self.problem = None
        self._worker = None if self._worker is not None and not self._worker.is_alive() else self._worker
        self._finishing = None
        self._queue = queue.SimpleQueue()

    @property
    def has_output(self):
        """Something to drain: queued messages, or a worker let go in its end-of-run work (its
        final snapshot is still to come)."""
        if self._finishing is not None and not self._finishing.is_alive():
            self._finishing = None
        return not self._queue.empty() or self._finishing is not None

    @property
    def is_alive(self):
        return self._worker is not None and self._worker.is_alive()

    def trace(self):
        """The streamed trace (bounded by the buffer length) as a DataFrame."""
        return self.buffer.data.copy()

    # ---- event loop side ------------------------------------------------------------------
    def collect(self):
        """Take what the worker queued: ``(trace rows as a DataFrame or None, parameter updates)``.
        Apply with :meth:`apply` (the buffer first, then the parameters)."""
        rows, result, updates, reached, reached_at = [], None, {}, None, None
        for kind, payload in messages(self._queue, self._generation):
            if kind == "rows":
                rows.extend(payload[0])
                reached, reached_at = payload[1], payload[2]
            elif kind == "result":
                result = payload
            elif kind == "paused":
                # only the answer to the latest pause: an older one (pause, resume, pause) is stale
                if self.status == "pausing" and payload == self._control.pauses:
                    updates.update(status="paused", iterations_per_second=0.0)
            elif kind == "done":
                self._ended = ("done", {})
            elif kind == "error":
                self._ended = ("error", {"error": payload})
        if reached is not None:
            updates["iteration"] = max(reached, self.iteration)
        if result is not None:
            updates["result"] = result
            updates["iteration"] = max(result["iteration"], updates.get("iteration", self.iteration))
        if self.status == "running" and reached_at is not None and "iterations_per_second" not in updates:
            # timed by the worker (when it reached the iteration, not when the drain ran):
            # from the first report on, then over a sliding window of at least a second
            then, start_iteration = self._rate_mark
            if reached_at > then and reached > start_iteration:
                updates["iterations_per_second"] = (reached - start_iteration) / (reached_at - then)
                if reached_at - then >= RATE_WINDOW_SECONDS:
                    self._rate_mark = (reached_at, reached)
        frame = pd.DataFrame(rows, columns=list(TRACE_COLUMNS)) if rows else None
        return frame, updates

    def apply(self, frame, updates, trigger=True, settle=True):
        """Append ``frame`` to the buffer (redrawing its plots unless ``trigger=False``), set
        ``updates``, then (unless ``settle=False``: the caller applies the updates later)
        :meth:`poll` (a worker that has left settles the status, after its last result is set)."""
        if frame is not None:
            if trigger:
                self.buffer.send(frame)
            else:
                self.buffer.update(data=frame)
        if updates:
            self.param.update(**updates)
        if settle:
            self.poll()

    def drain(self):
        """Move what the worker produced into the buffer and the parameters; returns rows streamed."""
        frame, updates = self.collect()
        self.apply(frame, updates)
        return 0 if frame is None else len(frame)

    # ---- the worker ----------------------------------------------------------------------------
    def post(self, generation, kind, payload=None):
        """Hand the event loop a worker's message (from any thread): trace rows, a result snapshot,
        "paused", "done" or "error"; :meth:`collect` keeps only the current ``generation``'s.
        ``reached`` follows the chain as it posts, before any drain (a load test's measure);
        "ending" (the chain has left; the end-of-run work begins) is known at once, for :meth:`_leave`."""
        if kind == "rows" and generation == self._generation:
            self.reached = payload[1]
        elif kind == "ending" and generation == self._worker_generation:
            self._ending = True
        self._queue.put((generation, kind, payload))

    def work(self, generation, problem, carry, target, control):
        """The worker's loop, in a thread of this process: run the chain to ``target``, posting
        to this runner, level with its ``pace`` and taking turns at this process's :func:`turnstile`."""
        run_chain(
            self.method,
            problem,
            carry,
            target,
            control,
            lambda kind, payload=None: self.post(generation, kind, payload),
            self.pace,
            turnstile(),
        )


# What a finished run's carry holds when its chain stays on a Dask worker (dashboard.session.remote), for an extension.
REMOTE_CHAIN = "remote_chain"


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


class LocalPlace:
    """Workers as daemon threads of this process (the default).

    A place launches a runner's worker (:meth:`launch` returns a handle with ``is_alive()`` and
    ``join(timeout)``), warms up what the workers need when a served session opens
    (:meth:`warm_up`) and lets go of what it holds when the session ends (:meth:`close`).
    """

    def warm_up(self):  # (compiling at a lower priority too: the page being built comes first)
        threading.Thread(target=giving_way(warm_up_kernels), name="lpviz-warm-up", daemon=True).start()

    def close(self):
        """Nothing to let go: the session's threads have left (:meth:`session.fits.Fits.close` joined them)."""

    def launch(self, runner, generation, problem, carry, target, control):
        thread = threading.Thread(
            target=giving_way(runner.work),
            name=f"lpviz-{runner.method}-chain",
            args=(generation, problem, carry, target, control),
            daemon=True,
        )
        thread.start()
        return thread


def run_chain(method_name, problem, carry, target, control, post, pace, turns):
    """Run one chain to ``target`` iterations: the body of every worker, local or on a Dask worker.

    ``post(kind, payload)`` hands over trace rows, result snapshots and the end
    ("paused", "done", "error"); ``carry`` holds what a continuation needs (the
    chain run, its state and scores) and is filled in when the run ends.
    """
    from lpviz import methods
    from lpviz.driver import run
    from lpviz.engine import ChainStopped
    from lpviz.metrics import ScoreStopped, score

    pace, token = pace or Lockstep(), object()  # a private Lockstep never waits
    release, truth = problem.release, problem.truth
    schedule = carry["schedule"]
    stride = schedule["stride"]
    rows, state, chain_run = [], carry.get("state"), carry.get("chain_run")
    # the posterior's error numbers, for the trace rows, at every saved sample; its full score (topics,
    # R-hat: tens of milliseconds) only for the snapshots the views read, at most every SNAPSHOT_SECONDS
    row_score, row_scored_at = carry.get("row_score", {}), carry.get("row_scored_at", 0)
    posterior_score, scored_at = carry.get("posterior_score", {}), carry.get("scored_at", 0)
    rows_due, snapshot_due = Throttle(ROWS_SECONDS), Throttle(SNAPSHOT_SECONDS)
    inside, turn_ends = False, 0.0
    control.wakers += [turns.wake, pace.wake]

    def stopped():  # every score here leaves between row blocks once Stop, Reset or the session's end asks
        return control.stopped

    slow, said = float(os.environ.get(SLOW_FINAL_SCORE_ENV) or 0), []

    def slowly_stopped():  # (tests only: SLOW_FINAL_SCORE_ENV) each check of the final score waits
        if not said:  # the test reads on the server's output that this chain is in its final score
            said.append(method_name)
            # one write: print() writes the line and its end apart, and two chains' lines came out as
            # "@@...: naive@@...: nonprivate" (the test then waited for a third chain for ever)
            sys.stderr.write(f"@@final score waits: {method_name}\n")
            sys.stderr.flush()
        control.stop_event.wait(slow)
        return control.stopped

    def flush():
        nonlocal rows
        if rows or state is not None:
            post("rows", (rows, state.iteration if state is not None else 0, time.perf_counter()))
            rows = []

    def snapshot(final=False):
        # while the chains run, their diagnostics are the likelihood trace's (all the scoreboard and the
        # health read; the probe cells and topics of several chains cost seconds on Enron); the end's all
        nonlocal posterior_score, scored_at
        if state is not None:
            saved = (_last_saved(chain_run.posterior), final)
            if saved != scored_at:  # without a truth: the fit's own numbers
                diagnostics = True if final else "trace"
                posterior_score = score(
                    chain_run.posterior,
                    release,
                    truth,
                    diagnostics=diagnostics,
                    should_stop=slowly_stopped if final and slow else stopped,
                )
                scored_at = saved
            post("result", _snapshot(state, chain_run, posterior_score))

    def give_turn():
        nonlocal inside
        if inside:
            turns.leave()
            inside = False

    try:
        if chain_run is None:
            method = methods.create(method_name, **schedule["options"])
            # a CAVI fit has no burn-in or thinning: its one "sample" is the current q
            plan = (
                dict(inference="vi")
                if problem.inference == "vi"
                else dict(burn_in=schedule["burn_in"], thin=schedule["thin"])
            )
            chain_run = ChainGroup(
                run(
                    release,
                    model=problem.model,
                    method=method,
                    n_components=problem.n_components,
                    n_iter=target,
                    truth=truth if method.uses_truth else None,
                    random_state=problem.seed,
                    chains=1 if problem.inference == "vi" else problem.chains,
                    **plan,
                )
            )
        chain_run.n_iter = target  # a finished run continues to the new target
        control.attach(chain_run)
        pace.join(token)
        while not control.stopped:
            if not control.run_event.is_set():  # pausing: hand everything over, then say so
                give_turn()
                flush()
                snapshot()
                pace.leave(token)  # a paused chain holds nobody back
                answered = None
                while not control.run_event.is_set():
                    if answered != control.pauses:  # each pause answered (pause, resume, pause while waiting)
                        answered = control.pauses
                        post("paused", answered)
                    control.run_event.wait(WAKE_SECONDS)
                pace.join(token)
                continue
            if pace.ahead(token):  # level with the session's slowest chain, holding no turn meanwhile
                give_turn()
                pace.wait(token, control)
                continue
            if not inside:
                if not turns.enter(control):
                    continue  # stopped or paused while in line
                inside, turn_ends = True, time.monotonic() + turns.turn_seconds
            try:
                state = next(chain_run)
            except StopIteration:
                break
            pace.advance(token)
            if state.iteration % stride == 0 or state.iteration == 1:
                saved = _last_saved(chain_run.posterior)
                if saved != row_scored_at:  # only for traced rows: a long run saves many samples per row
                    row_score = score(
                        chain_run.posterior, release, truth, topics=False, diagnostics=False, should_stop=stopped
                    )
                    row_scored_at = saved
                own = score(state, release, truth, topics=False, should_stop=stopped)
                rows.append(_row(state, own, row_score, chain_run.states[1:]))
            now = time.monotonic()
            if rows_due.due(now) or state.iteration == 1:
                flush()
            if (snapshot_due.due(now) or state.iteration == 1) and not control.stopped:
                snapshot()  # (a Stop answers without this snapshot's score: the last one stays)
            if now >= turn_ends:
                give_turn()  # to the back of the line
        give_turn()
        pace.leave(token)  # a finished chain holds nobody back (nor joins a next run's lockstep)
        flush()
        # the chain has left: the runner need not wait for the rest (ChainRunner._leave)
        post("ending")
        if not control.stopped:
            # the final snapshot scores the whole posterior (topics, diagnostics: 4-12 s for Figure 4's two
            # chains under load): a Stop before it keeps the snapshot of half a second ago; a Stop or
            # Reset during it answers at once (the "ending" above) and the score leaves at its next row
            # block (ScoreStopped), so the worker (and a closing session joining it) waits for nothing
            snapshot(final=True)
            carry.update(
                chain_run=chain_run,
                state=state,
                posterior_score=posterior_score,
                scored_at=scored_at,
                row_score=row_score,
                row_scored_at=row_scored_at,
            )
            post("done")
    except (ChainStopped, ScoreStopped):  # Stop, Reset or the session closed: keep what was handed over
        flush()
    except Exception as exc:  # shown in the UI instead of dying silently in a thread
        post("error", f"{type(exc).__name__}: {exc}")
    finally:
        give_turn()
        pace.leave(token)
        control.wakers.clear()


def _row(state, own, posterior_score, others=()):
    """A trace row: chain 0's state and scores, the posterior's, and the other chains' traces."""
    others = list(others) + [None] * (MAX_CHAINS - 1 - len(others))
    return (
        state.iteration,
        _number(state.log_joint),
        _number(state.log_marginal),
        _number(getattr(state, "elbo", None)),
        *(_number(own.get(key)) for key in TRACE_SCORES),
        *(_number(posterior_score.get(key)) for key in TRACE_SCORES),
        *(math.nan if other is None else _number(getattr(other, trace)) for other in others for trace in CHAIN_TRACES),
    )


class ChainGroup:
    """The chains of one method, stepped in turn in the runner's worker: what the worker iterates.

    ``run(...)`` with ``chains=C`` gives an :class:`lpviz.ensemble.EnsembleRun` (C Runs); each
    ``next()`` advances every chain one iteration (chain 0 first: exactly the single chain of the
    seed) and returns chain 0's state, ``states`` holding every chain's. ``posterior``: the
    ensemble's (pooled rates; :func:`lpviz.metrics.score` judges the chains against each other),
    or the one chain's. One thread steps them: the session's turns and lockstep see one worker.
    """

    def __init__(self, chain_run):
        self.runs = list(getattr(chain_run, "runs", [chain_run]))
        self.states = []

    @property
    def chain(self):
        return self.runs[0].chain

    @property
    def n_iter(self):
        return self.runs[0].n_iter

    @n_iter.setter
    def n_iter(self, value):
        for run in self.runs:
            run.n_iter = value

    @property
    def posterior(self):
        if len(self.runs) == 1:
            return self.runs[0].posterior
        from lpviz.ensemble import EnsemblePosterior

        # stepped in turn by one thread: the ensemble's computing time is the chains' sum
        posteriors = [run.posterior for run in self.runs]
        return EnsemblePosterior(posteriors, seconds=sum(posterior.seconds for posterior in posteriors))

    def stop(self):
        for run in self.runs:
            run.stop()

    def __iter__(self):
        return self

    def __next__(self):
        states = []
        for index, run in enumerate(self.runs):
            state = next(run)
            state.chain = index
            states.append(state)
        self.states = states
        return states[0]


def _snapshot(state, chain_run, posterior_score):
    """What the views read, copied in the worker (nothing here is touched by the chain again)."""
    posterior = chain_run.posterior
    return dict(
        iteration=state.iteration,
        mu=state.mu.copy(),
        mu_hat=posterior.mu_hat,
        best=posterior.best,
        best_log_joint=posterior.best_log_joint if posterior.best else None,
        samples_saved=posterior.n_saved,
        score=dict(posterior_score),
        bessel_draws=getattr(chain_run.chain, "bessel_draws", None),
        model=chain_run.chain.model_instance,
        seconds=posterior.seconds,
        chains=len(chain_run.runs),
    )


def _last_saved(posterior):
    """The iteration of the posterior's last saved sample (0 before the first): what its scores
    depend on (a CAVI fit's one "sample", its q, changes every iteration)."""
    return posterior.saved_iterations[-1] if posterior.saved_iterations else 0


class Lockstep:
    """Keeps the running chains of one session within ``slack`` iterations of each other.

    Chains share two or so cores; left alone, each gets the same CPU time, so
    the cheapest (non-private) runs twice as many iterations as the costliest
    (private) one. In lockstep a chain that is ahead waits, and its CPU time
    goes to the slowest: the traces stay comparable iteration by iteration
    and the slowest chain runs faster.

    Each worker :meth:`join` s (starting level with the slowest chain
    running, so a chain resumed or restarted later holds nobody back),
    :meth:`wait` s while it is :meth:`ahead`, :meth:`advance` s after each
    iteration, and :meth:`leave` s when it pauses or ends. Waiting sleeps on a
    condition that every advance and leave signals: no polling.
    """

    def __init__(self, slack=LOCKSTEP_SLACK):
        self.slack = slack
        self._counts = {}  # worker token -> iterations since it joined, offset to the slowest at joining
        self._condition = threading.Condition()

    def join(self, token):
        with self._condition:
            counts = list(self._counts.values())
            self._counts[token] = min(counts) if counts else 0

    def leave(self, token):
        with self._condition:
            self._counts.pop(token, None)
            self._condition.notify_all()

    def advance(self, token):
        with self._condition:
            self._counts[token] += 1
            self._condition.notify_all()

    def gap(self, token):
        """How many iterations this worker is ahead of the slowest other one (0 alone)."""
        with self._condition:
            return self._gap(token)

    def _gap(self, token):
        own = self._counts.get(token)
        others = [count for key, count in self._counts.items() if key is not token]
        return 0 if own is None or not others else own - min(others)

    def ahead(self, token):
        return self.gap(token) > self.slack

    def wait(self, token, control):
        """Sleep while this worker is more than ``slack`` iterations ahead of another."""
        with self._condition:
            while self._gap(token) > self.slack and control.moving:
                self._condition.wait(WAKE_SECONDS)

    def wake(self):
        with self._condition:
            self._condition.notify_all()


_KERNELS_LOADED = threading.Event()  # process-wide: numba loads each kernel once per process
_KERNELS_LOCK = threading.Lock()


def warm_up_kernels():
    """Load (or compile) the kernels of every registered model and method once per process.

    The first chain of a fresh server process otherwise spends seconds loading
    Numba's cached kernels after Start is pressed; sessions call this in a
    background thread when they open, so the first point streams at once.
    """
    from lpviz import methods, models
    from lpviz.driver import run
    from lpviz.release import KIND_ORDERS, Release, Truth

    with _KERNELS_LOCK:
        if _KERNELS_LOADED.is_set():
            return
        Y = np.array([[0, 3, 1, 0], [2, 0, 5, 1], [1, 1, 0, 4], [0, 2, 3, 0]])
        for model_name, model_class in models.MODELS.items():
            kind = model_class.kinds[0]
            counts = Y if KIND_ORDERS[kind] == 2 else Y.reshape(4, 2, 2)  # an array of the kind's order
            release = Release(Y_obs=counts - 1, alpha=0.5, kind=kind)
            truth = Truth(counts)
            for method_name, method_class in methods.METHODS.items():
                try:
                    for _ in run(
                        release,
                        model=model_name,
                        method=method_name,
                        n_components=2,
                        n_iter=2,
                        burn_in=0,
                        thin=1,
                        truth=truth if method_class.uses_truth else None,
                        random_state=0,
                    ):
                        pass
                except Exception:  # a warm-up only saves time; a real run reports any error
                    pass
        _KERNELS_LOADED.set()
