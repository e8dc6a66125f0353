"""The chains of one session: one runner per registered method, each in a worker thread.

Each :class:`ChainRunner` drives :func:`lpviz.engine.run` on the session's
release (with the truth beside it for a method that fits the true counts) in
a daemon thread; the Numba kernels release the GIL, so the chains and the
event loop share the cores. The worker never touches a parameter or a Bokeh
model: it queues trace rows and result snapshots (copies it makes itself),
and :meth:`Fits.drain`, called on the event loop every 200 ms, moves them
into bounded ``hv.streams.Buffer`` s and the runners' parameters. Every
number streamed comes from :func:`lpviz.metrics.score`: the current state's
(one trace row) and the posterior's (the snapshot).

The runners are made from :data:`lpviz.methods.METHODS`: a method registered
there gets a runner, a trace and a row in every table without a change here.
"""

import math
import queue
import threading
import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

import holoviews as hv
import numpy as np
import pandas as pd
import panel as pn
import param

from app.datastore import DataStore, served
from app.throttle import ROWS_SECONDS, SNAPSHOT_SECONDS, TRACE_SECONDS, Periodic, Throttle, messages

STATUSES = ("idle", "running", "pausing", "paused", "stopped", "done", "error", "unavailable")
# Scores traced per iteration: for the current state and (prefixed "mean_") the posterior mean.
TRACE_SCORES = ("mae", "heldout_mae", "rate_mae", "heldout_rate_mae")
TRACE_COLUMNS = (
    "iteration",
    "log_joint",
    "log_marginal",
    "elbo",
    *TRACE_SCORES,
    *(f"mean_{key}" for key in TRACE_SCORES),
)
# Rows kept per trace: more than a plot a few hundred pixels wide can show;
# long runs trace every k-th iteration so the buffer spans the whole run.
BUFFER_LENGTH = 2_000
# Scoring a state reads every cell once; on large data, trace every k-th
# iteration so that on average at most this many cells are scored per
# iteration (a fixed rule, so which iterations are traced never depends on timing).
SCORED_CELLS_PER_ITERATION = 100_000
STILL_STATUSES = ("paused", "stopped", "done", "error")
RATE_WINDOW_SECONDS = 1.0  # iterations per second are measured over this long, once the run has lasted that
LOCKSTEP_SLACK = 20
DRAIN_PERIOD_MS = 200
# Right after Start, Pause or Stop: drain this often until the first rows or the
# acknowledgements are out (for at most this many polls), not at the next periodic drain.
SOON_POLL_MS, SOON_POLLS = 20, 250
# A session whose page has had no connection this long is gone (a closed tab): its chains stop.
LOST_CONNECTION_SECONDS = 0.4


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


class Control:
    """How the event loop steers one worker: run (clear = pause), stop, and the Run to stop mid-iteration."""

    def __init__(self):
        self.run_event = threading.Event()
        self.run_event.set()
        self.stop_event = threading.Event()
        self.chain_run = None
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

    @property
    def stopped(self):
        return self.stop_event.is_set()


class ChainRunner(param.Parameterized):
    """One method's chain, run in a worker thread and handed over in batches.

    :meth:`configure` with a :class:`Problem`, then :meth:`start`,
    :meth:`pause`, :meth:`resume`, :meth:`stop`, :meth:`reset`. Nothing the
    worker computes is visible until :meth:`drain` runs on the event loop.

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
    options = param.Dict(default={}, doc="the method's options (e.g. the private method's sampler)")

    def __init__(self, method, *, buffer_length=BUFFER_LENGTH, pace=None, **params):
        """``pace``: a :class:`Lockstep` shared with the session's other runners, or None."""
        super().__init__(method=method, **params)
        self.pace = pace
        # a name of its own for the buffer's data, so several buffers trigger together
        self.buffer = hv.streams.Buffer(
            empty_trace(), length=buffer_length, index=False, rename={"data": f"trace_{method}"}
        )
        self.problem = None
        self._queue = queue.SimpleQueue()
        self._generation = 0
        self._thread = None
        self._control = Control()
        self._carry = {}  # what a run leaves for its continuation (the worker's, while one runs)
        self._rate_mark = None  # (time, iteration) the it/s figure is measured from

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

    # ---- control (event loop) -------------------------------------------------------
    def configure(self, problem):
        """Use ``problem`` for the next run; stops and clears the current one."""
        self.reset()
        self.problem = problem
        reason = self.unavailable_reason
        if reason:
            self.param.update(status="unavailable", error=reason)

    def start(self):
        """Start a fresh run (or resume a paused one)."""
        if self.status in ("paused", "pausing"):
            self.resume()
            return
        if self.status == "running" or self.status == "unavailable":
            return
        if self.problem is None:
            raise RuntimeError("no data to fit: configure the runner with a Problem first")
        self.reset()
        self._generation += 1
        schedule = dict(
            n_iter=self.n_iter, burn_in=self.burn_in, thin=self.thin, stride=self.stride, options=dict(self.options)
        )
        self._carry = {"schedule": schedule}
        self._launch(self.n_iter)

    def extend(self):
        """Continue a finished run for another ``n_iter`` iterations (the same chain and posterior)."""
        if self.status != "done" or self._carry.get("chain_run") is None:
            return
        self._launch(self.target + self.n_iter)

    def _launch(self, target):
        self._control = Control()
        self._thread = threading.Thread(
            target=self._work,
            name=f"lpviz-{self.method}-chain",
            args=(self._generation, self.problem, self._carry, target, self._control),
            daemon=True,
        )
        self.param.update(status="running", target=target, error="")
        self._rate_mark = (time.perf_counter(), self.iteration)
        self._thread.start()

    def pause(self):
        """Ask the worker to pause after its current iteration; ``status`` reads "paused"
        once it has handed over everything up to there."""
        if self.status == "running":
            self._control.run_event.clear()
            self.param.update(status="pausing", iterations_per_second=0.0)

    def resume(self):
        """Go on after a pause; after the end of a run, run as many iterations again."""
        if self.status == "done":
            self.extend()
        elif self.status in ("paused", "pausing"):
            self._rate_mark = (time.perf_counter(), self.iteration)
            self._control.run_event.set()
            self.status = "running"

    def halt(self):
        """Stop the worker (even in the middle of an iteration) and change nothing else."""
        self._control.stop()

    def stop(self):
        """End the run, even in the middle of an iteration; its results stay until :meth:`reset`."""
        self._control.stop()
        if self.status in ("running", "pausing", "paused"):
            self.param.update(status="stopped", iterations_per_second=0.0)

    def reset(self):
        """Stop and forget the run: empty traces, no result, iteration 0."""
        self.stop()
        self._generation += 1  # whatever the old worker still sends is ignored
        if len(self.buffer.data):  # clearing redraws every trace plot: only when there is something
            self.buffer.clear()
        self._carry = {}
        fresh = dict(status="idle", iteration=0, iterations_per_second=0.0, result=None, error="")
        changed = {
            name: value
            for name, value in fresh.items()
            if getattr(self, name) is not value and getattr(self, name) != value
        }
        if changed:
            self.param.update(**changed)

    @property
    def stride(self):
        """Iterations per trace row: ``trace_every``, or coarser so that the bounded buffer
        spans the whole run and scoring the states stays a small share of the work."""
        cells = self.problem.release.shape[0] * self.problem.release.shape[1] if self.problem else 0
        return max(self.trace_every, -(-self.n_iter // self.buffer.length), -(-cells // SCORED_CELLS_PER_ITERATION))

    def join(self, timeout=None):
        """Wait for the worker thread to finish (tests, session teardown)."""
        if self._thread is not None:
            self._thread.join(timeout)
            return not self._thread.is_alive()
        return True

    @property
    def has_output(self):
        return not self._queue.empty()

    @property
    def is_alive(self):
        return self._thread is not None and self._thread.is_alive()

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
                if self.status == "pausing":
                    updates.update(status="paused", iterations_per_second=0.0)
            elif kind == "done":
                if self.status in ("running", "pausing"):
                    updates["status"] = "done"
                updates["iterations_per_second"] = 0.0
            elif kind == "error":
                updates.update(status="error", error=payload, iterations_per_second=0.0)
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

    def apply(self, frame, updates, trigger=True):
        """Append ``frame`` to the buffer (redrawing its plots unless ``trigger=False``) and set ``updates``."""
        if frame is not None:
            if trigger:
                self.buffer.send(frame)
            else:
                self.buffer.update(data=frame)
        if updates:
            self.param.update(**updates)

    def drain(self):
        """Move what the worker produced into the buffer and the parameters; returns rows streamed."""
        frame, updates = self.collect()
        self.apply(frame, updates)
        return 0 if frame is None else len(frame)

    # ---- worker thread ----------------------------------------------------------------------
    def _work(self, generation, problem, carry, target, control):
        from lpviz import methods
        from lpviz.engine import ChainStopped, run
        from lpviz.metrics import score

        post = lambda kind, payload=None: self._queue.put((generation, kind, payload))  # noqa: E731
        pace, token = self.pace or Lockstep(), object()  # a private Lockstep never waits
        release, truth = problem.release, problem.truth
        schedule = carry["schedule"]
        stride = schedule["stride"]
        rows, state, chain_run = [], carry.get("state"), carry.get("chain_run")
        # the posterior's error numbers, for the trace rows, at every saved sample; its full score (topics,
        # R-hat: tens of milliseconds) only for the snapshots the views read, at most every SNAPSHOT_SECONDS
        row_score, row_scored_at = carry.get("row_score", {}), carry.get("row_scored_at", 0)
        posterior_score, scored_at = carry.get("posterior_score", {}), carry.get("scored_at", 0)
        rows_due, snapshot_due = Throttle(ROWS_SECONDS), Throttle(SNAPSHOT_SECONDS)

        def flush():
            nonlocal rows
            if rows or state is not None:
                post("rows", (rows, state.iteration if state is not None else 0, time.perf_counter()))
                rows = []

        def snapshot():
            nonlocal posterior_score, scored_at
            if state is not None:
                saved = _last_saved(chain_run.posterior)
                if saved != scored_at:  # without a truth: the fit's own numbers
                    posterior_score, scored_at = score(chain_run.posterior, release, truth), saved
                post("result", self._snapshot(state, chain_run, posterior_score))

        try:
            if chain_run is None:
                method = methods.create(self.method, **schedule["options"])
                # a CAVI fit has no burn-in or thinning: its one "sample" is the current q
                plan = (
                    dict(inference="vi")
                    if problem.inference == "vi"
                    else dict(burn_in=schedule["burn_in"], thin=schedule["thin"])
                )
                chain_run = run(
                    release,
                    model=problem.model,
                    method=method,
                    n_components=problem.n_components,
                    n_iter=target,
                    truth=truth if method.uses_truth else None,
                    random_state=problem.seed,
                    **plan,
                )
            chain_run.n_iter = target  # a finished run continues to the new target
            control.attach(chain_run)
            pace.join(token)
            while not control.stopped:
                if not control.run_event.is_set():  # pausing: hand everything over, then say so
                    flush()
                    snapshot()
                    post("paused")
                    pace.leave(token)  # a paused chain holds nobody back
                    control.run_event.wait()
                    pace.join(token)
                    continue
                pace.wait(token, control)
                try:
                    state = next(chain_run)
                except StopIteration:
                    break
                pace.advance(token)
                if state.iteration % stride == 0 or state.iteration == 1:
                    saved = _last_saved(chain_run.posterior)
                    if saved != row_scored_at:  # only for traced rows: a long run saves many samples per row
                        row_score = score(chain_run.posterior, release, truth, topics=False, diagnostics=False)
                        row_scored_at = saved
                    own = score(state, release, truth, topics=False)
                    rows.append(self._row(state, own, row_score))
                now = time.monotonic()
                if rows_due.due(now) or state.iteration == 1:
                    flush()
                if snapshot_due.due(now) or state.iteration == 1:
                    snapshot()
            flush()
            snapshot()
            if not control.stopped:
                carry.update(
                    chain_run=chain_run,
                    state=state,
                    posterior_score=posterior_score,
                    scored_at=scored_at,
                    row_score=row_score,
                    row_scored_at=row_scored_at,
                )
                post("done")
        except ChainStopped:  # Stop, Reset or the session closed: keep what was handed over
            flush()
        except Exception as exc:  # shown in the UI instead of dying silently in a thread
            post("error", f"{type(exc).__name__}: {exc}")
        finally:
            pace.leave(token)

    @staticmethod
    def _row(state, own, posterior_score):
        return (
            state.iteration,
            _number(state.log_joint),
            _number(state.log_marginal),
            _number(getattr(state, "elbo", None)),
            *(_number(own.get(key)) for key in TRACE_SCORES),
            *(_number(posterior_score.get(key)) for key in TRACE_SCORES),
        )

    @staticmethod
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
        )


def _last_saved(posterior):
    """The iteration of the posterior's last saved sample (0 before the first): what its scores
    depend on (a CAVI fit's one "sample", its q, changes every iteration)."""
    return posterior.saved_iterations[-1] if posterior.saved_iterations else 0


class Lockstep:
    """Keeps the running chains of one session within ``slack`` iterations of each other.

    Chains share two or so cores; left alone, each gets the same CPU time, so
    the cheapest (non-private) runs twice as many iterations as the costliest
    (private) one. In lockstep a chain that is ahead sleeps, and its CPU time
    goes to the slowest: the traces stay comparable iteration by iteration
    and the slowest chain runs faster.

    Each worker :meth:`join` s (starting level with the slowest chain
    running, so a chain resumed or restarted later holds nobody back),
    :meth:`wait` s before and :meth:`advance` s after each iteration, and
    :meth:`leave` s when it pauses or ends.
    """

    POLL_SECONDS = 0.001

    def __init__(self, slack=LOCKSTEP_SLACK):
        self.slack = slack
        self._counts = {}  # worker token -> iterations since it joined, offset to the slowest at joining
        self._lock = threading.Lock()

    def join(self, token):
        with self._lock:
            counts = list(self._counts.values())
            self._counts[token] = min(counts) if counts else 0

    def leave(self, token):
        with self._lock:
            self._counts.pop(token, None)

    def advance(self, token):
        self._counts[token] += 1  # only this worker writes its entry

    def gap(self, token):
        """How many iterations this worker is ahead of the slowest other one (0 alone)."""
        own = self._counts.get(token)
        others = [count for key, count in list(self._counts.items()) if key is not token]
        return 0 if own is None or not others else own - min(others)

    def wait(self, token, control):
        """Sleep while this worker is more than ``slack`` iterations ahead of another."""
        while self.gap(token) > self.slack and not control.stopped and control.run_event.is_set():
            time.sleep(self.POLL_SECONDS)


_KERNELS_LOADED = threading.Event()  # process-wide: numba loads each kernel once per process
_KERNELS_LOCK = threading.Lock()


def warm_up_kernels():
    """Load (or compile) the kernels of every registered model and method once per process.

    The first chain of a fresh server process otherwise spends seconds loading
    Numba's cached kernels after Start is pressed; sessions call this in a
    background thread when they open, so the first point streams at once.
    """
    from lpviz import methods, models
    from lpviz.engine import run
    from lpviz.release import Release, Truth

    with _KERNELS_LOCK:
        if _KERNELS_LOADED.is_set():
            return
        Y = np.array([[0, 3, 1, 0], [2, 0, 5, 1], [1, 1, 0, 4], [0, 2, 3, 0]])
        for model_name, model_class in models.MODELS.items():
            kind = model_class.default_for[0] if model_class.default_for else "documents"
            release = Release(Y_obs=Y - 1, alpha=0.5, kind=kind)
            truth = Truth(Y)
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


@contextmanager
def _recompute_once(doc):
    """Like Bokeh's ``doc.models.freeze()``, but the model graph is walked once at the end,
    and only if a change inside asked for it.

    ``freeze()`` always walks the graph (every model of every tab) when it ends, and
    HoloViews freezes around every plot refresh: while chains ran, these walks were half
    of the event loop's time, time the chains' threads waited for the GIL. A drain that
    streams trace rows and sets numbers changes no reference; a redraw that adds models
    calls ``invalidate`` (``Model.trigger`` does), and then the graph is walked once here.
    """
    models = doc.models
    if getattr(models, "_lpviz_recompute_once", False):  # inside one already: the outer one walks
        yield
        return
    own = vars(models)
    saved = {name: own[name] for name in ("invalidate", "recompute") if name in own}
    recompute = models.recompute
    asked = []
    models.invalidate = models.recompute = lambda: asked.append(True)  # Model.trigger calls invalidate
    models._lpviz_recompute_once = True
    try:
        yield
    finally:
        del models.invalidate, models.recompute, models._lpviz_recompute_once
        own.update(saved)
        if asked:
            recompute()


class Fits(param.Parameterized):
    """The chains of one session, one :class:`ChainRunner` per registered method.

    Follows its :class:`~app.datastore.DataStore`: new data or noise reset
    the runners onto the new release; fit settings reach them at once.
    Start/Pause/Resume/Stop/Reset act on the methods chosen in the settings.
    :meth:`drain` (every 200 ms on the session's event loop while something
    runs; every 20 ms right after Start, Pause and Stop) hands the workers'
    output to the buffers and parameters.
    """

    data = param.ClassSelector(class_=DataStore, constant=True)
    busy = param.Boolean(default=False, doc="a chain runs or data are being built (the header spinner)")

    def __init__(self, data=None, *, buffer_length=BUFFER_LENGTH, lockstep=True, **params):
        from lpviz.methods import METHODS

        super().__init__(data=data if data is not None else DataStore(), **params)
        pace = Lockstep() if lockstep else None
        self.runners = {name: ChainRunner(name, buffer_length=buffer_length, pace=pace) for name in METHODS}
        self._draining = Periodic(self.drain, DRAIN_PERIOD_MS)
        self._connected, self._lost_at = False, None
        self._unsent = {}  # method -> trace rows taken from its worker, not yet in the buffer
        self._redraw = Throttle(TRACE_SECONDS)
        settings = self.settings
        self._sync_schedule()
        self.data.param.watch(lambda *events: self.configure(), ["release", "truth", "model"])
        settings.param.watch(
            lambda *events: settings.still(events) and self.configure(), ["inference", "n_components", "chain_seed"]
        )
        settings.param.watch(
            lambda *events: settings.still(events) and self._sync_schedule(),
            ["n_iter", "burn_in", "thin", "trace_every"],
        )
        settings.discard_check = self.would_discard
        settings.method_options.param.watch(lambda *events: self.configure(), list(settings.method_options.param)[1:])
        for runner in self.runners.values():
            runner.param.watch(self._update_busy, ["status"])
        self.data.param.watch(self._update_busy, ["loading"])
        self.configure()
        if served():
            threading.Thread(target=warm_up_kernels, name="lpviz-warm-up", daemon=True).start()
            pn.state.on_session_destroyed(lambda session_context: self.close())
        self._update_busy()

    @property
    def settings(self):
        return self.data.settings

    @property
    def active(self):
        """The runners of the methods chosen in the settings, in registry order."""
        return {name: runner for name, runner in self.runners.items() if name in self.settings.methods}

    def problem(self):
        data = self.data
        if data.release is None:
            return None
        return Problem(
            release=data.release,
            truth=data.truth,
            model=data.model,
            n_components=self.settings.n_components,
            seed=self.settings.chain_seed,
            inference=self.settings.inference,
        )

    def configure(self):
        """Point every runner at the current release (stopping and clearing what ran before)."""
        self._unsent = {}
        problem = self.problem()
        for runner in self.runners.values():
            runner.options = self.settings.options_for(runner.method_class)
            runner.configure(problem)

    def _sync_schedule(self):
        settings = {name: getattr(self.settings, name) for name in ("n_iter", "burn_in", "thin", "trace_every")}
        for runner in self.runners.values():
            runner.param.update(**settings)

    # ---- controls -----------------------------------------------------------------------
    def start(self, *_):
        """Start (or resume) the chosen methods' chains (refused if they would not fit this
        session's share of the server's memory)."""
        problem = self.problem()
        if problem is not None:
            settings = self.settings
            self._check_memory(problem, (settings.n_iter, settings.burn_in, settings.thin))
        with self._batched():
            for runner in self.active.values():
                runner.start()
        self._drain_soon(lambda: any(len(r.buffer.data) for r in self.runners.values()) or not self.running)

    def pause(self, *_):
        for runner in self.active.values():
            runner.pause()
        self._drain_soon(lambda: not any(r.status == "pausing" for r in self.runners.values()))

    def _check_memory(self, problem, run):
        """Refuse a start whose data, chains and (MCMC) saved samples would not fit this session."""
        from app.memory import check_session

        shape = problem.release.shape
        check_session(
            shape,
            f"{shape[0]:,} x {shape[1]:,} counts",
            problem.model,
            problem.n_components,
            list(self.active),
            fix="Fit fewer methods or components.",
            run=None if problem.inference == "vi" else run,
        )

    def resume(self, *_):
        """Go on after a pause; runs that ended run as many iterations again."""
        done = [runner for runner in self.active.values() if runner.status == "done"]
        problem = self.problem()
        if done and problem is not None:  # extended runs keep saving samples: the longest one decides
            settings = self.settings
            target = max(runner.target for runner in done) + settings.n_iter
            self._check_memory(problem, (target, settings.burn_in, settings.thin))
        with self._batched():
            for runner in self.active.values():
                runner.resume()

    def stop(self, *_):
        for runner in self.runners.values():
            runner.stop()
        self._drain_soon(lambda: not any(r.is_alive for r in self.runners.values()))

    def reset(self, *_):
        self._unsent = {}
        for runner in self.runners.values():
            runner.reset()
            if runner.unavailable_reason:
                runner.param.update(status="unavailable", error=runner.unavailable_reason)

    @property
    def running(self):
        return any(r.status in ("running", "pausing") for r in self.runners.values())

    def would_discard(self):
        """What a new data set, release or model would throw away: '' or e.g. 'the running fits (...)'."""
        live = [runner.label for runner in self.runners.values() if runner.status in ("running", "pausing", "paused")]
        return f"the running fits ({', '.join(live)})" if live else ""

    def _update_busy(self, *_):
        busy = self.running or self.data.loading
        if busy != self.busy:
            self.busy = busy
        if busy:
            self._draining.start()

    # ---- event loop ---------------------------------------------------------------------
    def connection(self):
        """This session's page: "present" (or not served, or not connected yet), "absent" (no
        connection right now) or "lost" (none for :data:`LOST_CONNECTION_SECONDS`: its tab was
        closed; Bokeh discards such a session only 15-30 s later, far too late to stop its chains)."""
        context = getattr(pn.state.curdoc, "session_context", None)
        server = getattr(context, "server_context", None)
        if server is None:
            return "present"  # not served
        count = next((session.connection_count for session in server.sessions if session.id == context.id), 0)
        if count:
            self._connected, self._lost_at = True, None
            return "present"
        if not self._connected:
            return "present"  # the page has not connected yet
        now = time.monotonic()
        self._lost_at = self._lost_at or now
        return "lost" if now - self._lost_at >= LOST_CONNECTION_SECONDS else "absent"

    def drain(self):
        """Deliver finished data builds and chain output; returns trace rows streamed.
        A session whose page is gone stops its chains instead."""
        connection = self.connection()
        if connection == "lost":
            self.close()
            return 0
        if connection == "absent":
            return 0  # nobody is watching: no redraws, until the page is back or gone
        self.data.poll()
        if not any(runner.has_output for runner in self.runners.values()):
            if not self.busy and not any(runner.is_alive for runner in self.runners.values()):
                self._draining.stop()  # nothing runs: no periodic work (and no busy flicker) until Start
            return 0
        collected = [(runner, *runner.collect()) for runner in self.runners.values()]
        for runner, frame, _ in collected:
            if frame is not None:
                self._unsent.setdefault(runner.method, []).append(frame)
        still = any(updates.get("status") in STILL_STATUSES for _, _, updates in collected)
        streamed = 0
        # one hold (one message to the browser) and one freeze (Bokeh walks the model graph once)
        with self._batched():
            if self._unsent and (still or self._redraw.due()):
                # every buffer first, then one trigger for all of them, so a plot over several
                # (an overlay of every method's trace) redraws once; at most every TRACE_SECONDS
                # while running (a redraw costs the event loop), at once when a run stops moving
                buffers = []
                for name, frames in self._unsent.items():
                    frame = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
                    self.runners[name].apply(frame, {}, trigger=False)
                    buffers.append(self.runners[name].buffer)
                    streamed += len(frame)
                self._unsent = {}
                hv.streams.Stream.trigger(buffers)
            # statuses after the rows: a page that reads "paused" has every row before it
            for runner, _, updates in collected:
                runner.apply(None, updates)
        return streamed

    @staticmethod
    def _batched(hold=True, freeze=True):
        """Hold the document's events and freeze its model graph: the browser gets one
        message, and Bokeh walks the model graph at most once (and only if a change
        asked for it: see :func:`_recompute_once`)."""
        doc = pn.state.curdoc
        stack = ExitStack()
        if doc is not None:
            if hold:
                stack.enter_context(pn.io.hold())
            if freeze:
                stack.enter_context(_recompute_once(doc))
        return stack

    def _drain_soon(self, done):
        """Drain every 20 ms until ``done()`` (for at most five seconds), instead of
        waiting up to 200 ms for the next periodic drain."""
        self._draining.start()
        if pn.state.curdoc is None:
            return

        def poll():
            self.drain()
            if done() or callback.counter >= SOON_POLLS:
                callback.stop()

        callback = pn.state.add_periodic_callback(poll, period=SOON_POLL_MS, count=SOON_POLLS)

    def close(self):
        """Stop the workers and the periodic drain (session end). Nothing is redrawn: nobody is
        watching any more, and the views' updates would keep the event loop busy for nothing."""
        for runner in self.runners.values():
            runner.halt()
        self._draining.stop()


def _has_sample(result):
    return bool(result) and result.get("best") is not None


def follow_results(fits, callback, seconds, *, per_runner=False, needs_sample=False):
    """Call ``callback(runner)`` when a runner's result changes, for views drawn from snapshots.

    At once when a runner pauses, stops, ends or is reset, so a still run is
    shown exactly; while it runs at most every ``seconds`` (one
    :class:`~app.throttle.Throttle` for the view, or one per runner with
    ``per_runner``), and not in the first period after Start or Resume, so
    the first trace points go out before any heavy redraw. ``needs_sample``:
    ignore results before the first saved sample (views of the posterior only).
    """
    shared = Throttle(seconds)
    throttles = {name: Throttle(seconds) if per_runner else shared for name in fits.runners}

    def on_change(*events):
        runner = events[0].obj
        throttle = throttles[runner.method]
        statuses = [event.new for event in events if event.name == "status"]
        if any(status in ("running", "pausing") for status in statuses):
            throttle.defer()
            return
        if not statuses:
            if needs_sample and not any(_has_sample(e.old) or _has_sample(e.new) for e in events):
                return
            if not throttle.due():
                return
        callback(runner)

    return [(runner, runner.param.watch(on_change, ["result", "status"])) for runner in fits.runners.values()]


# Numbers of lpviz.metrics.score shown in the score tables, in this order (those that apply).
SCORE_KEYS = (
    "mae",
    "heldout_mae",
    "rate_mae",
    "heldout_rate_mae",
    "npmi",
    "umass",
    "topic_distance",
    "best_log_joint",
    "samples",
)


def score_frame(runners, keys=SCORE_KEYS):
    """One row per runner with a scored posterior: its :func:`lpviz.metrics.score` numbers
    (the same dict every tab shows), columns headed by :data:`lpviz.metrics.SCORE_LABELS`."""
    from lpviz.metrics import SCORE_LABELS

    rows = [
        {"method": runner.label, **{key: (runner.result or {}).get("score", {}).get(key) for key in keys}}
        for runner in runners
        if (runner.result or {}).get("score")
    ]
    shown = [key for key in keys if any(row[key] is not None for row in rows)]
    frame = pd.DataFrame(rows, columns=["method", *keys])[["method", *shown]]
    return frame.rename(columns={key: SCORE_LABELS[key] for key in shown})


def model_shows(model_name, what):
    """Whether the model registered as ``model_name`` has ``what`` ("topics" or "memberships")
    to show: asks the model itself, on a tiny state."""
    from lpviz import models

    if not model_name:
        return False
    model = models.create(model_name, 1)
    factors = model.factors(model.init_state((2, 2), 1.0, np.random.default_rng(0)))
    return getattr(model, what)(factors) is not None
