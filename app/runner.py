"""Chains in worker threads, streamed to the browser in batches.

Each :class:`ChainRunner` runs one :class:`lpviz.inference.Chain` in a
daemon thread. The Numba kernels release the GIL, so three chains and the
event loop share the cores. The worker never touches a parameter or a
Bokeh model: it puts batches of trace rows and occasional result snapshots
on a queue, and :meth:`ChainRunner.drain` - called on the event loop every
100-250 ms by the store - moves them into a bounded ``hv.streams.Buffer``
and the runner's parameters. (``Buffer.send`` from a worker thread once
per iteration drops rows in the browser.)
"""

import queue
import threading
import time
from dataclasses import dataclass

import holoviews as hv
import numpy as np
import pandas as pd
import param

METHODS = ("private", "naive", "nonprivate")
STATUSES = ("idle", "running", "paused", "stopped", "done", "error")
TRACE_COLUMNS = ("iteration", "mae", "mae_mean", "heldout_mae", "log_joint")

# How often a worker hands over trace rows and a result snapshot: rows often
# enough that the first point arrives at once, snapshots (copies of the rates
# and factors, redrawn as heatmaps) rarely enough not to flood the browser.
ROWS_EVERY_SECONDS = 0.05
RATE_WINDOW_SECONDS = 1.0  # iterations per second are measured over this long at least
RESULT_EVERY_SECONDS = 0.5
# Rows kept per trace: more than a plot a few hundred pixels wide can show;
# long runs stream every k-th iteration so the buffer spans the whole run.
BUFFER_LENGTH = 2_000
# Running chains of one session stay within this many iterations of each
# other (see Lockstep): the slowest one gets the CPU the others would spend
# running ahead.
LOCKSTEP_SLACK = 20


@dataclass(frozen=True)
class FitProblem:
    """Everything a chain needs, fixed when the data or the noise change.

    ``Y_obs`` are the noised counts, ``Y_true`` the true counts;
    ``reference`` is what the MAE is measured against (the true rates when
    the data are synthetic, else the true counts) and ``reference_name``
    says which. ``mask`` is True for observed cells (None: all observed).
    """

    Y_obs: np.ndarray
    Y_true: np.ndarray
    model: str
    n_components: int
    alpha: object
    mask: object = None
    reference: np.ndarray = None
    reference_name: str = "true counts"
    a0: float = 0.1
    b0: float = 1.0
    seed: int = 0

    def chain_input(self, method):
        """The counts each method is allowed to see."""
        if method == "nonprivate":
            return self.Y_true
        if method == "naive":
            from lpviz.privacy import truncate

            return truncate(self.Y_obs)
        return self.Y_obs


def empty_trace():
    return pd.DataFrame({name: pd.Series(dtype="float64") for name in TRACE_COLUMNS})


class ChainRunner(param.Parameterized):
    """One method's chain, run in a worker thread and streamed in batches.

    Call :meth:`configure` with a :class:`FitProblem`, then :meth:`start`,
    :meth:`pause`, :meth:`resume`, :meth:`stop`, :meth:`reset`. Nothing the
    worker computes is visible until :meth:`drain` runs (on the event loop).

    ``result`` is None before the first snapshot, then a dict with
    ``mu_hat`` (posterior mean of the rates over saved samples, None before
    the first saved sample), ``mu`` (rates of the latest sample), ``best``
    (factor dict of the saved sample with the highest log joint, None before
    the first), ``best_log_joint``, ``samples_saved`` and ``iteration``.
    """

    method = param.Selector(default="private", objects=list(METHODS), constant=True)
    status = param.Selector(default="idle", objects=list(STATUSES))
    iteration = param.Integer(default=0, bounds=(0, None))
    n_iter = param.Integer(default=6000, bounds=(1, None), doc="iterations to run")
    burn_in = param.Integer(default=1000, bounds=(0, None), doc="iterations before the first saved sample")
    thin = param.Integer(default=25, bounds=(1, None), doc="save every thin-th iteration after burn-in")
    trace_every = param.Integer(default=1, bounds=(1, None), doc="stream every n-th iteration to the traces")
    iterations_per_second = param.Number(default=0.0, bounds=(0, None))
    result = param.Dict(default=None, allow_None=True)
    chain = param.Parameter(default=None, doc="the running lpviz.inference.Chain (bessel_draws, y_latent)")
    error = param.String(default="")

    def __init__(self, method, *, buffer_length=BUFFER_LENGTH, pace=None, **params):
        """``pace``: a :class:`Lockstep` shared with the other runners, or None."""
        super().__init__(method=method, **params)
        self.pace = pace
        self.buffer = hv.streams.Buffer(empty_trace(), length=buffer_length, index=False)
        self.problem = None
        self._queue = queue.SimpleQueue()
        self._generation = 0
        self._thread = None
        self._stop_event = threading.Event()
        self._run_event = threading.Event()
        self._rate_mark = None  # (time, iteration) of the last rate measurement

    # ---- control (event loop) -------------------------------------------------
    def configure(self, problem):
        """Use ``problem`` for the next run; stops and clears the current one."""
        self.reset()
        self.problem = problem

    def start(self):
        """Start a fresh run (or resume a paused one)."""
        if self.status == "paused":
            self.resume()
            return
        if self.status == "running":
            return
        if self.problem is None:
            raise RuntimeError("no data to fit: configure the runner with a FitProblem first")
        self.reset()
        self._generation += 1
        self._stop_event = threading.Event()
        self._run_event = threading.Event()
        self._run_event.set()
        settings = dict(n_iter=self.n_iter, burn_in=self.burn_in, thin=self.thin,
                        trace_every=self.stride)
        self._thread = threading.Thread(
            target=self._work, name=f"lpviz-{self.method}-chain",
            args=(self._generation, self.problem, settings, self._stop_event, self._run_event),
            daemon=True)
        self.status = "running"
        self._rate_mark = (time.perf_counter(), 0)
        self._thread.start()

    def pause(self):
        if self.status == "running":
            self._run_event.clear()
            self.status = "paused"
            self.iterations_per_second = 0.0

    def resume(self):
        if self.status == "paused":
            self._rate_mark = (time.perf_counter(), self.iteration)
            self._run_event.set()
            self.status = "running"

    def stop(self):
        """End the run; its results stay until :meth:`reset`."""
        self._stop_event.set()
        self._run_event.set()  # wake a paused worker so it can leave
        if self.status in ("running", "paused"):
            self.status = "stopped"
            self.iterations_per_second = 0.0

    def reset(self):
        """Stop and forget the run: empty traces, no result, iteration 0."""
        self.stop()
        self._generation += 1  # whatever the old worker still sends is ignored
        if len(self.buffer.data):  # clearing redraws every trace plot: only when there is something
            self.buffer.clear()
        fresh = dict(status="idle", iteration=0, iterations_per_second=0.0, result=None, chain=None, error="")
        changed = {name: value for name, value in fresh.items() if getattr(self, name) is not value
                   and getattr(self, name) != value}
        if changed:
            self.param.update(**changed)

    @property
    def stride(self):
        """Iterations per streamed trace row: ``trace_every``, or coarser so the
        bounded buffer spans the whole run (a plot cannot show more rows anyway,
        and a long run then costs the browser no more than a short one)."""
        return max(self.trace_every, -(-self.n_iter // self.buffer.length))

    def join(self, timeout=None):
        """Wait for the worker thread to finish (tests, session teardown)."""
        if self._thread is not None:
            self._thread.join(timeout)
            return not self._thread.is_alive()
        return True

    @property
    def has_output(self):
        """True when the worker has queued something for :meth:`drain`."""
        return not self._queue.empty()

    @property
    def is_alive(self):
        return self._thread is not None and self._thread.is_alive()

    # ---- event loop side --------------------------------------------------------
    def drain(self, trigger=True):
        """Move what the worker produced into the buffer and the parameters.

        Returns the number of trace rows streamed. Call on the event loop.
        ``trigger=False`` appends the rows to the buffer without redrawing its
        plots: the caller triggers several buffers at once with
        :func:`trigger_buffers`.
        """
        rows, result, updates, reached, reached_at = [], None, {}, None, None
        while True:
            try:
                generation, kind, payload = self._queue.get_nowait()
            except queue.Empty:
                break
            if generation != self._generation:
                continue
            if kind == "rows":
                rows.extend(payload[0])
                reached, reached_at = payload[1], payload[2]
            elif kind == "result":
                result = payload
            elif kind == "chain":
                updates["chain"] = payload
            elif kind == "done":
                if self.status == "running":
                    updates["status"] = "done"
                updates["iterations_per_second"] = 0.0
            elif kind == "error":
                updates.update(status="error", error=payload, iterations_per_second=0.0)
        if rows:
            frame = pd.DataFrame(rows, columns=list(TRACE_COLUMNS))
            if trigger:
                self.buffer.send(frame)
            else:
                self.buffer.update(data=frame)
        if reached is not None:
            updates["iteration"] = max(reached, self.iteration)
        if result is not None:
            updates["result"] = result
            updates["iteration"] = max(result["iteration"], updates.get("iteration", self.iteration))
        if self.status == "running" and reached_at is not None and "iterations_per_second" not in updates:
            # timed by the worker (when it reached the iteration, not when the
            # drain ran), over at least a second: a steady figure
            then, start_iteration = self._rate_mark
            if reached_at - then >= RATE_WINDOW_SECONDS:
                updates["iterations_per_second"] = (reached - start_iteration) / (reached_at - then)
                self._rate_mark = (reached_at, reached)
        if updates:
            self.param.update(**updates)
        return len(rows)

    def trace(self):
        """The streamed trace (bounded by the buffer length) as a DataFrame."""
        return self.buffer.data.copy()

    # ---- worker thread ------------------------------------------------------------
    def _work(self, generation, problem, settings, stop_event, run_event):
        post = self._queue.put
        pace, token = self.pace or Lockstep(), object()  # a private Lockstep never waits
        try:
            from lpviz.inference import Chain
            from lpviz.metrics import heldout_mae, mae

            chain = Chain(problem.chain_input(self.method), model=problem.model,
                          method=self.method, n_components=problem.n_components,
                          alpha=problem.alpha if self.method == "private" else None,
                          mask=problem.mask, a0=problem.a0, b0=problem.b0,
                          random_state=problem.seed)
            post((generation, "chain", chain))
            reference, mask = problem.reference, problem.mask
            burn_in, thin, trace_every = settings["burn_in"], settings["thin"], settings["trace_every"]
            mu_sum, n_saved, best, best_log_joint = None, 0, None, -np.inf
            mae_mean = heldout_mean = np.nan
            rows, last_rows = [], time.perf_counter()
            last_result, state, completed = last_rows, None, 0
            pace.join(token)
            for iteration in range(1, settings["n_iter"] + 1):
                if not run_event.is_set():
                    pace.leave(token)  # a paused chain holds nobody back
                    while not run_event.is_set():
                        run_event.wait(0.1)
                    pace.join(token)
                if stop_event.is_set():
                    break
                pace.wait(token, stop_event, run_event)
                state = chain.step()
                pace.advance(token)
                completed = iteration
                saved = iteration > burn_in and (iteration - burn_in) % thin == 0
                if saved:
                    mu_sum = state.mu.copy() if mu_sum is None else mu_sum + state.mu
                    n_saved += 1
                    if state.log_joint > best_log_joint:
                        best, best_log_joint = state.factors, state.log_joint
                    mu_hat = mu_sum / n_saved
                    mae_mean = mae(mu_hat, reference, mask)
                    if mask is not None:
                        heldout_mean = heldout_mae(mu_hat, reference, mask)
                if iteration % trace_every == 0 or iteration == 1:
                    rows.append((iteration, mae(state.mu, reference, mask), mae_mean,
                                 heldout_mean, state.log_joint))
                now = time.perf_counter()
                if now - last_rows >= ROWS_EVERY_SECONDS or iteration == 1:
                    # with the iteration reached, so the progress and rate are
                    # exact even when rows are sparse (long runs stream every k-th)
                    post((generation, "rows", (rows, iteration, now)))
                    rows, last_rows = [], now
                if now - last_result >= RESULT_EVERY_SECONDS or iteration == 1:
                    post((generation, "result", self._snapshot(state, iteration, mu_sum, n_saved,
                                                               best, best_log_joint)))
                    last_result = now
            if rows:
                post((generation, "rows", (rows, completed, time.perf_counter())))
            if state is not None:
                post((generation, "result", self._snapshot(state, completed, mu_sum, n_saved,
                                                           best, best_log_joint)))
            if not stop_event.is_set():
                post((generation, "done", None))
        except Exception as exc:  # shown in the UI instead of dying silently in a thread
            post((generation, "error", f"{type(exc).__name__}: {exc}"))
        finally:
            pace.leave(token)

    @staticmethod
    def _snapshot(state, iteration, mu_sum, n_saved, best, best_log_joint):
        return dict(iteration=iteration, mu=state.mu,
                    mu_hat=None if mu_sum is None else mu_sum / n_saved,
                    best=best, best_log_joint=best_log_joint if best is not None else None,
                    samples_saved=n_saved)


class Lockstep:
    """Keeps the running chains of one session within ``slack`` iterations of each other.

    Three chains share two or so cores; left alone, each gets the same CPU
    time, so the cheapest (non-private) runs twice as many iterations as the
    costliest (private) one. In lockstep a chain that is ahead sleeps, and
    its CPU time goes to the slowest: the three traces stay comparable
    iteration by iteration and the slowest chain runs faster.

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

    def wait(self, token, stop_event, run_event):
        """Sleep while this worker is more than ``slack`` iterations ahead of another."""
        while True:
            own = self._counts.get(token)
            others = [count for key, count in list(self._counts.items()) if key is not token]
            if (own is None or not others or own - min(others) <= self.slack
                    or stop_event.is_set() or not run_event.is_set()):
                return
            time.sleep(self.POLL_SECONDS)


def trigger_buffers(buffers):
    """Redraw the plots of several updated ``Buffer`` streams at once.

    What ``hv.streams.Stream.trigger(buffers)`` does, so that a plot of
    several buffers (an overlay of every method's trace) re-renders once,
    each curve streaming only its new rows; without its check for clashing
    parameter names, which every ``Buffer`` (all named ``data``) fails.
    """
    from holoviews.streams import triggering_streams

    if not buffers:
        return
    if len(buffers) == 1:
        buffers[0].trigger(buffers)
        return
    by_precedence = {}
    for stream in buffers:
        stream._on_trigger()
        for precedence, subscriber in stream._subscribers:
            by_precedence.setdefault(precedence, []).append(subscriber)
    subscribers = []
    for precedence in sorted(by_precedence):
        for subscriber in by_precedence[precedence]:
            if subscriber not in subscribers:
                subscribers.append(subscriber)
    with triggering_streams(buffers):
        for subscriber in subscribers:
            subscriber()


_KERNELS_LOADED = threading.Event()  # process-wide: numba loads each kernel once per process
_KERNELS_LOCK = threading.Lock()


def warm_up_kernels():
    """Load (or compile) every chain kernel once per process.

    The first chain of a fresh server process otherwise spends seconds loading
    Numba's cached kernels after Start is pressed; sessions call this in a
    background thread when they open, so the first point streams at once.
    """
    with _KERNELS_LOCK:
        if _KERNELS_LOADED.is_set():
            return
        from lpviz.inference import Chain

        Y = np.array([[0, 3, 1, 0], [2, 0, 5, 1], [1, 1, 0, 4], [0, 2, 3, 0]])
        mask = ~np.eye(4, dtype=bool)
        for model in ("topics", "blocks"):
            for method in METHODS:
                Chain(Y - (method == "private"), model=model, method=method, n_components=2,
                      alpha=0.5 if method == "private" else None,
                      mask=mask if model == "blocks" else None, random_state=0).step(2)
        _KERNELS_LOADED.set()


def make_runners(buffer_length=BUFFER_LENGTH, lockstep=True):
    """One runner per method, keyed by method name, in :class:`Lockstep` unless ``lockstep=False``."""
    pace = Lockstep() if lockstep else None
    return {method: ChainRunner(method, buffer_length=buffer_length, pace=pace) for method in METHODS}
