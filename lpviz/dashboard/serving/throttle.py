"""The app's one pacing mechanism: do something at most every so many seconds.

A chain's worker hands over trace rows every :data:`ROWS_SECONDS` and result
snapshots every :data:`SNAPSHOT_SECONDS`; the trace plots redraw at most every
:data:`TRACE_SECONDS`; the views that redraw from those
snapshots (rate heatmaps, topic tables, block panels, Bessel draws) redraw at
most every :data:`VIEW_SECONDS` while chains run, and at once when a run
pauses, stops or ends. Every one of them asks a :class:`Throttle`.

Workers hand their output over through a queue that the event loop empties
on a :class:`Periodic` callback, keeping only the current run's
:func:`messages`. Views compute what they draw from results (topic alignment,
scores, topic maps) in a thread pool shared by the process, :class:`OffLoop`,
and only apply it on the event loop.

Those periods are for a page that keeps up. A page whose main thread does not (a cheap laptop, six
tabs on two cores: BokehJS repaints a figure in 50-300 ms, 4x that at 4x CPU throttling) says so:
:class:`PageLag`, a zero-size element of the page, measures how much of the last seconds its main
thread was blocked and reports it to the server every :data:`LAG_REPORT_MS`; the session's
:class:`Pace` turns the reports into a factor by which every paced :class:`Throttle` of the session
stretches its period, so the page's share of time spent on updates settles near
:data:`PACE_TARGET_SHARE` (and the period returns to its plan when the page is quiet again).
"""

import logging
import math
import queue
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import panel as pn
from panel.custom import JSComponent

# Trace rows: often enough that the first point is out at once and the plot moves smoothly.
ROWS_SECONDS = 0.05
# Result snapshots (copies of rates and factors): twice a second is plenty for heatmaps.
SNAPSHOT_SECONDS = 0.5
# Trace plots redraw with the rows gathered meanwhile: a redraw costs the event loop far
# more than the rows it adds, so not at every 200 ms drain.
TRACE_SECONDS = 1.0
# Views that recompute from a snapshot (NPMI over a large vocabulary, Hungarian
# alignment, whole images re-sent to the browser).
VIEW_SECONDS = 2.0
# Threads computing for the views of every session of the process (as many as the cores of the
# machine a class was measured on; each session has at most one computation in flight).
VIEW_THREADS = 2
VIEW_POOL_THREADS = "lpviz-view-pool"  # their names' prefix: the process's, not a session's (they stay)
log = logging.getLogger("lpviz.app")

# The page's blocked share (the time its main thread ran something else when a timer was due, over
# the last LAG_WINDOW_MS) that the pace aims at: a tenth leaves the page free to answer a click at
# once nine times out of ten, and a repaint's long task rarely meets a sampled timer.
PACE_TARGET_SHARE = 0.1
PACE_MAX = 32.0  # at most this much slower (a trace redraw every 32 s): a page that lags that much still moves
# One report changes the factor at most so much: up fast (a freeze costs a click), down slowly.
PACE_UP, PACE_DOWN = 2.0, 0.8
LAG_REPORT_MS = 1000  # how often the page reports
LAG_WINDOW_MS = 5000  # over which window (a redraw period or two)
LAG_TICK_MS = 100  # how often the page samples its timer lag


class Pace:
    """How much slower than planned a session's page is updated: :attr:`factor` (1 = as planned,
    up to :data:`PACE_MAX`), set from the page's reports (:meth:`report`) of the share of time its
    main thread was blocked. Each report moves the factor toward the one that would bring that share
    to :data:`PACE_TARGET_SHARE` (the update work a page gets is proportional to 1 / factor), by
    at most :data:`PACE_UP` up and :data:`PACE_DOWN` down per report."""

    def __init__(self):
        self.factor = 1.0
        self.blocked_share = 0.0  # the last report's
        self.max_lag_ms = 0.0

    def report(self, blocked_share, max_lag_ms=0.0):
        share = min(max(float(blocked_share), 0.0), 1.0)
        self.blocked_share, self.max_lag_ms = share, float(max_lag_ms)
        step = min(max((share / PACE_TARGET_SHARE) ** 0.5, PACE_DOWN), PACE_UP)
        self.factor = min(max(self.factor * step, 1.0), PACE_MAX)
        return self.factor

    def __repr__(self):
        return f"Pace(x{self.factor:.2f}, blocked {self.blocked_share:.0%})"


class PageLag(JSComponent):
    """A zero-size element that measures its page's main thread and reports to the session's
    :class:`Pace`.

    A timer ticks every :data:`LAG_TICK_MS`; a tick that comes late was held by other work on the
    main thread (a repaint, a patch from the server), by as long as it is late. Every
    :data:`LAG_REPORT_MS` the page sends ``[blocked share, max lag ms]`` over the last
    :data:`LAG_WINDOW_MS` (the share: how late its ticks were, summed, over the window).

    The report is a message (Panel's ``model.send_msg``), not a property the page sets: BokehJS takes
    a property of a component's own model for one that may hold models, and every change of such a
    property from the page put off its document's walk of the models still in use (until 30 s after
    the last change): reporting every second, a page never let go of the figures it had dropped
    (after a data switch, the previous data's heatmaps and progress lines stayed in its document).
    """

    _esm = f"""
export function render({{ model }}) {{
  const ticks = [];  // [when, how late] of each tick
  const born = performance.now();
  let last = born, timer = null;
  const tick = () => {{
    const now = performance.now();
    ticks.push([now, Math.max(0, now - last - {LAG_TICK_MS})]);
    last = now;
    timer = setTimeout(tick, {LAG_TICK_MS});
  }};
  timer = setTimeout(tick, {LAG_TICK_MS});
  const reporter = setInterval(() => {{
    const now = performance.now();
    while (ticks.length && ticks[0][0] < now - {LAG_WINDOW_MS}) ticks.shift();
    if (!ticks.length) return;
    const held = ticks.reduce((sum, t) => sum + t[1], 0);
    const span = Math.max(Math.min(now - born, {LAG_WINDOW_MS}), {LAG_REPORT_MS});
    const worst = ticks.reduce((most, t) => Math.max(most, t[1]), 0);
    // while the page reconnects its socket is not open: that report is dropped (the next one counts)
    try {{ model.send_msg([Math.min(1, held / span), Math.round(worst)]); }} catch (error) {{ return; }}
  }}, {LAG_REPORT_MS});
  model.on("remove", () => {{ clearTimeout(timer); clearInterval(reporter); }});
}}
"""

    def __init__(self, pace, **params):
        params.setdefault("width", 0)
        params.setdefault("height", 0)
        params.setdefault("margin", 0)
        super().__init__(**params)
        self.pace = pace

    def _handle_msg(self, data):
        """A report from the page: ``[blocked share, max lag ms]`` (anything else is not one)."""
        try:
            share, worst = (float(value) for value in data)
        except (TypeError, ValueError):
            return
        self.pace.report(share, worst)


class Throttle:
    """True at most once every ``seconds`` (thread-safe), stretched by ``pace`` (a :class:`Pace`:
    its page lags) when given: the :attr:`period` is ``seconds * pace.factor``.

    ``due()`` says whether the period has passed since the last time it said
    so, and if it has, starts a new period; ``force()`` makes the next
    ``due()`` true; ``defer(seconds)`` makes it false for that long.
    """

    def __init__(self, seconds, clock=time.monotonic, pace=None):
        if not seconds >= 0:
            raise ValueError(f"seconds must be >= 0, got {seconds!r}")
        self.seconds = float(seconds)
        self.pace = pace
        self._clock = clock
        self._last = -math.inf
        self._lock = threading.Lock()

    @property
    def period(self):
        """The period now: ``seconds``, stretched by the pace of a page that lags."""
        return self.seconds * (self.pace.factor if self.pace is not None else 1.0)

    def due(self, now=None):
        """True when a :attr:`period` has passed since the last true answer (and start a new period)."""
        now = self._clock() if now is None else now
        with self._lock:
            if now - self._last < self.period:
                return False
            self._last = now
            return True

    def force(self):
        """Make the next :meth:`due` true whatever the time."""
        with self._lock:
            self._last = -math.inf

    def defer(self, seconds=None):
        """Make :meth:`due` false for the next ``seconds`` (default: one period)."""
        period = self.period
        seconds = period if seconds is None else seconds
        with self._lock:
            self._last = self._clock() - period + seconds

    def __repr__(self):
        paced = f" x{self.pace.factor:.2f}" if self.pace is not None else ""
        return f"Throttle({self.seconds:g} s{paced})"


class Periodic:
    """Call ``callback`` every ``period_ms`` on the session's event loop (served or Jupyter) from
    :meth:`start` until :meth:`stop`; without a document (tests, scripts) nothing is scheduled
    and the owner calls ``callback`` itself. How the chains, the central fit and the sweep hand
    their workers' output to the page."""

    def __init__(self, callback, period_ms):
        self.callback = callback
        self.period_ms = period_ms
        self._scheduled = None

    @property
    def running(self):
        return self._scheduled is not None

    def start(self):
        if self._scheduled is None and pn.state.curdoc is not None:
            self._scheduled = pn.state.add_periodic_callback(self.call, period=self.period_ms)

    def call(self):
        """Call ``callback`` once now (what each period does); a failure is logged, not raised."""
        # In Jupyter, Panel repeats a periodic callback in an asyncio task that one exception ends
        # for good (Bokeh's server logs it and goes on): a failed drain must not leave the
        # session's chains running with a page that no longer hears from them.
        try:
            self.callback()
        except Exception:
            log.exception("a periodic update failed; the next one runs as planned")

    def stop(self):
        if self._scheduled is not None:
            self._scheduled.stop()
            self._scheduled = None


def messages(inbox, generation):
    """``(kind, payload)`` of every message in ``inbox`` (a queue of ``(generation, kind, payload)``
    a worker filled) that belongs to ``generation``; a replaced run's messages are dropped."""
    while True:
        try:
            sent_for, kind, payload = inbox.get_nowait()
        except queue.Empty:
            return
        if sent_for == generation:
            yield kind, payload


_pool: list = []  # the process's ThreadPoolExecutor for the views, made when first needed
_pool_lock = threading.Lock()


def view_pool():
    with _pool_lock:
        if not _pool:
            _pool.append(ThreadPoolExecutor(max_workers=VIEW_THREADS, thread_name_prefix=VIEW_POOL_THREADS))
        return _pool[0]


class OffLoop:
    """One session's view computations, off its event loop: ``submit(kind, compute, apply)`` runs
    ``compute()`` in the process's :func:`view_pool` and ``apply(outcome)`` (its result, or the
    exception it raised) on the session's event loop, where the views' models may be changed.

    At most one computation of the session is in flight, so a session cannot take the pool from the
    others; what is submitted meanwhile waits, a newer submission of the same ``kind`` replacing the
    older. Without ``background`` (no server: a notebook, a script, a test) both run at once.
    """

    def __init__(self, background, doc=None):
        self.background = background
        self._doc = doc
        self._waiting = {}  # kind -> (compute, apply)
        self._busy = False
        self._closed = False

    @property
    def idle(self):
        """Nothing computes or waits."""
        return not self._busy and not self._waiting

    def submit(self, kind, compute, apply):
        """Call from the event loop."""
        if self._closed:
            return
        if not self.background:
            try:
                outcome = compute()
            except Exception as exc:  # the view shows it, as it would a result
                outcome = exc
            apply(outcome)
            return
        self._waiting.pop(kind, None)  # a newer submission of a kind goes last
        self._waiting[kind] = (compute, apply)
        if not self._busy:
            self._next()

    def _next(self):
        if self._closed or not self._waiting:
            self._busy = False
            return
        kind = next(iter(self._waiting))
        compute, apply = self._waiting.pop(kind)
        self._busy = True
        doc = self._doc

        def work():
            try:
                outcome = compute()
            except Exception as exc:
                outcome = exc
            try:
                doc.add_next_tick_callback(partial(self._done, apply, outcome))  # Bokeh's thread-safe way in
            except Exception:  # the session has ended meanwhile
                log.debug("a view computation outlived its session", exc_info=True)

        view_pool().submit(work)

    def _done(self, apply, outcome):
        try:
            if not self._closed:
                apply(outcome)
        finally:
            self._next()

    def close(self):
        """The session has ended: nothing more is computed or applied."""
        self._closed = True
        self._waiting = {}
