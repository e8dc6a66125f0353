"""The chain of one method in a worker thread, handed to the event loop in batches: :class:`ChainRunner`.

A :class:`ChainRunner` drives :func:`lpviz.driver.run` on a :class:`Problem`
(the release, with the truth beside it for a method that fits the true counts)
in a daemon thread; the Numba kernels release the GIL, so the chains and the
event loop share the cores. The worker never touches a parameter or a Bokeh
model: it queues trace rows and result snapshots (copies it makes itself),
and the event loop takes them with :meth:`ChainRunner.collect` and
:meth:`ChainRunner.apply` (:class:`lpviz.dashboard.session.fits.Fits` does, every 200 ms). Every
number streamed comes from :func:`lpviz.metrics.score`: the current state's
(one trace row) and the posterior's (the snapshot).

The rest of the runner's work lives by job beside it (moved from here, and still importable from
here): the :class:`Problem` and the :class:`Control` that steers a worker in
:mod:`lpviz.dashboard.session.control`; the fair sharing of the process's cores (:class:`Turnstile`,
:func:`turnstile`, :func:`give_way`) in :mod:`lpviz.dashboard.session.turnstile`; the chain loop
(:func:`run_chain`, :class:`ChainGroup`, :class:`LocalPlace`) in :mod:`lpviz.dashboard.session.chain`;
the trace's columns in :mod:`lpviz.dashboard.session.traces`; the :class:`Lockstep` that keeps the
chains of one session level in :mod:`lpviz.dashboard.session.lockstep`; and
:func:`warm_up_kernels`, which loads the kernels once per process, in
:mod:`lpviz.dashboard.session.warmup`.
"""

import queue
import time

import holoviews as hv
import numpy as np
import pandas as pd
import param

from lpviz.dashboard.serving.throttle import messages
from lpviz.dashboard.session.chain import (
    SLOW_FINAL_SCORE_ENV,
    ChainGroup,
    LocalPlace,
    _last_saved,
    _number,
    _row,
    _snapshot,
    run_chain,
)
from lpviz.dashboard.session.control import WAKE_SECONDS, Control, Problem
from lpviz.dashboard.session.lockstep import LOCKSTEP_SLACK, Lockstep
from lpviz.dashboard.session.traces import CHAIN_TRACES, MAX_CHAINS, TRACE_COLUMNS, TRACE_SCORES, empty_trace
from lpviz.dashboard.session.turnstile import (
    _TURNSTILE,
    _TURNSTILE_LOCK,
    CHAIN_NICE_STEP,
    CHAIN_THREADS_ENV,
    TURN_SECONDS,
    Turnstile,
    give_way,
    giving_way,
    turnstile,
)
from lpviz.dashboard.session.warmup import _KERNELS_LOADED, _KERNELS_LOCK, warm_up_kernels

__all__ = [
    # the runner's own
    "BUFFER_LENGTH",
    "DASHBOARD_CHAINS",
    "LEFT_SECONDS",
    "LEFT_WITHOUT_A_WORD",
    "MOVING_STATUSES",
    "RATE_WINDOW_SECONDS",
    "REMOTE_CHAIN",
    "SCORED_CELLS_PER_ITERATION",
    "STALL_SECONDS",
    "STATUSES",
    "ChainRunner",
    # moved by job, importable from here as before the split (issue 55 item 3)
    "CHAIN_NICE_STEP",
    "CHAIN_THREADS_ENV",
    "CHAIN_TRACES",
    "LOCKSTEP_SLACK",
    "MAX_CHAINS",
    "SLOW_FINAL_SCORE_ENV",
    "TRACE_COLUMNS",
    "TRACE_SCORES",
    "TURN_SECONDS",
    "WAKE_SECONDS",
    "_KERNELS_LOADED",
    "_KERNELS_LOCK",
    "_TURNSTILE",
    "_TURNSTILE_LOCK",
    "ChainGroup",
    "Control",
    "LocalPlace",
    "Lockstep",
    "Problem",
    "Turnstile",
    "_last_saved",
    "_number",
    "_row",
    "_snapshot",
    "empty_trace",
    "give_way",
    "giving_way",
    "run_chain",
    "turnstile",
    "warm_up_kernels",
]

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
# MCMC chains per method in a session and in every preset: two, the fewest that can disagree
# (measured in benchmarks/bench_class.py --chains; docs/dashboard.md, "A class on one server").
DASHBOARD_CHAINS = 2
# Rows kept per trace: more than a plot a few hundred pixels wide can show;
# long runs trace every k-th iteration so the buffer spans the whole run.
BUFFER_LENGTH = 2_000
# Scoring a state reads every cell once; on large data, trace every k-th
# iteration so that on average at most this many cells are scored per
# iteration (a fixed rule, so which iterations are traced never depends on timing).
SCORED_CELLS_PER_ITERATION = 100_000
RATE_WINDOW_SECONDS = 1.0  # iterations per second are measured over this long, once the run has lasted that
# The session's watchdog (ChainRunner.watch): a running chain that has posted no iteration for this
# long (or ten of its own iterations' time, if longer) is reported in words on its progress line.
STALL_SECONDS = 20.0
# A worker that has left while its status still says it moves is settled after this long (its last
# messages have had time to be drained).
LEFT_SECONDS = 2.0
LEFT_WITHOUT_A_WORD = "its worker left before its run ended, without reporting why (see the server's output)"


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
