"""The chains of one session: one runner per registered method, each in a worker thread.

:class:`Fits` keeps one :class:`~lpviz.dashboard.session.runner.ChainRunner` per registered
method on the session's release and steers them (Start, Pause, Resume, Stop,
Reset). :meth:`Fits.drain`, called on the event loop every 200 ms, moves
what the workers queued (trace rows, result snapshots) into bounded
``hv.streams.Buffer`` s and the runners' parameters. The view helpers
(:func:`follow_results`, :func:`score_frame`, :func:`model_shows`) read the
runners' results for the tabs.

The runners are made from :data:`lpviz.methods.METHODS`: a method registered
there gets a runner, a trace and a row in every table without a change here.
"""

import time
import weakref
from contextlib import ExitStack
from functools import partial

import holoviews as hv
import pandas as pd
import panel as pn
import param

from lpviz.dashboard.serving.onscreen import OnScreen
from lpviz.dashboard.serving.throttle import TRACE_SECONDS, OffLoop, Pace, Periodic, Throttle, log
from lpviz.dashboard.serving.writes import install as _write_every_queue
from lpviz.dashboard.session.control import Control, Problem
from lpviz.dashboard.session.datastore import DataStore, served
from lpviz.dashboard.session.lockstep import LOCKSTEP_SLACK, Lockstep
from lpviz.dashboard.session.recompute import recompute_once as _recompute_once
from lpviz.dashboard.session.remote import default_place
from lpviz.dashboard.session.runner import (
    BUFFER_LENGTH,
    MOVING_STATUSES,
    RATE_WINDOW_SECONDS,
    SCORED_CELLS_PER_ITERATION,
    STALL_SECONDS,
    STATUSES,
    ChainRunner,
)
from lpviz.dashboard.session.traces import TRACE_COLUMNS, TRACE_SCORES, empty_trace
from lpviz.dashboard.session.warmup import warm_up_kernels

# Panel's write queue, guarded (dashboard.serving.writes): a change queued as an earlier write ended reaches the page
_write_every_queue()

# the runner's names (and those moved on from it by job), importable from here as before the split
__all__ = [
    "BUFFER_LENGTH",
    "LOCKSTEP_SLACK",
    "MOVING_STATUSES",
    "RATE_WINDOW_SECONDS",
    "SCORED_CELLS_PER_ITERATION",
    "SCORE_KEYS",
    "STATUSES",
    "TRACE_COLUMNS",
    "TRACE_SCORES",
    "ChainRunner",
    "Control",
    "Fits",
    "Lockstep",
    "Problem",
    "empty_trace",
    "follow_results",
    "model_shows",
    "score_frame",
    "warm_up_kernels",
]

STILL_STATUSES = ("paused", "stopped", "done", "error", "idle")
# Served, the statuses that answer a click (Pause, Stop, Reset) reach the page before the views that
# follow the results redraw (lpviz.dashboard.session.fits.follow_results): the views come in a callback of their own.
ANSWERS_FIRST = ("paused", "stopped", "idle")
# A session's teardown waits at most this long for each worker to leave (a stop reaches the
# kernels within milliseconds; a worker still building its chain leaves once it is built).
CLOSE_JOIN_SECONDS = 5.0
DRAIN_PERIOD_MS = 200
# Right after Start, Pause or Stop: drain this often until the first rows or the
# acknowledgements are out (for at most this many polls), not at the next periodic drain.
SOON_POLL_MS, SOON_POLLS = 20, 250
# A session whose page has had no connection this long is gone (a closed tab): its chains stop.
LOST_CONNECTION_SECONDS = 0.4
# The event loop serves every session of the process: the redraws of running sessions (trace plots,
# views recomputed from snapshots) may take at most this share of it together. A redraw that cost
# c seconds waits at least (running sessions) * c / share before the next, so a class of N sessions
# slows its redraws instead of starving the loop (clicks, pages opening) and each other.
REDRAW_LOOP_SHARE = 0.5
_SESSIONS: "weakref.WeakSet[Fits]" = weakref.WeakSet()  # every Fits of this process (a closed one drops out)


def running_sessions():
    """How many sessions of this process have chains that move (at least 1)."""
    return max(1, sum(1 for fits in list(_SESSIONS) if not fits.closed and fits.moving))


def describe_sessions():
    """Every session's chains as the server holds them, a line each: what ``kill -USR1`` on a served
    dashboard prints beside the threads' stacks (lpviz.dashboard.serve), so a run that hangs on a page shows
    whether its workers' messages wait undrained, the drain has stopped, or the page has not heard."""
    lines = []
    for number, fits in enumerate(list(_SESSIONS)):
        periodic = fits._draining._scheduled
        drain = "stopped" if periodic is None else f"running={periodic.running} scheduled={periodic._cb is not None}"
        ago = "never" if fits._drained_at is None else f"{time.monotonic() - fits._drained_at:.1f} s ago"
        doc = fits.off_loop._doc
        held = "no document"
        if doc is not None:
            held = f"{doc.callbacks.hold_value} ({len(doc.callbacks._held_events)} events), {_writes(doc)}"
        lines.append(
            f"session {number}: state {fits.state}, busy {fits.busy}, closed {fits.closed}, connected "
            f"{fits._connected}, lost at {fits._lost_at}, drain {drain}, last drain {ago}, held {held}, "
            f"unsent rows {sorted(fits._unsent)}"
        )
        for runner in fits.runners.values():
            control = runner._control
            lines.append(
                f"  {runner.method}: {runner.status}, iteration {runner.iteration}, reached {runner.reached}, "
                f"queued {runner._queue.qsize()}, alive {runner.is_alive}, run {control.run_event.is_set()}, "
                f"stop {control.stopped}, pauses {control.pauses}, generation {runner._generation} "
                f"(worker's {runner._worker_generation}), note {runner.note!r}"
            )
    return "\n".join(lines) or "no session"


def _writes(doc):
    """Panel's messages to a document's page not yet written (its write queue when a socket was busy)
    and whether each connection's socket is mid-write (Bokeh's write lock taken)."""
    from panel.io import document as panel_document

    waiting = sum(len(messages) for messages in panel_document._WRITE_MSGS.get(doc, {}).values())
    futures = [future for future in panel_document._WRITE_FUTURES.get(doc, []) if not future.done()]
    context = doc.session_context
    session = getattr(context, "_session", None) if context is not None else None
    sockets = []
    for connection in getattr(session, "_subscribed_connections", ()):
        lock = getattr(connection._socket, "write_lock", None)
        sockets.append("writing" if lock is not None and lock._block._value == 0 else "free")
    # Bokeh runs a session's callbacks under its document lock until their writes are done: a write
    # that never ends keeps every later callback (the drains) waiting
    lock = getattr(session, "_lock", None)
    locked = lock is not None and lock._block._value == 0
    pending = getattr(session, "_pending_writes", None)
    return (
        f"write block {doc in panel_document._WRITE_BLOCK}, {waiting} messages queued, "
        f"{len(futures)} writes pending, sockets {sockets}, document lock "
        f"{'taken' if locked else 'free'} ({len(pending or ())} writes)"
    )


def stretch(throttle, cost):
    """After a redraw that cost ``cost`` seconds, keep ``throttle`` closed for this session's fair
    share of the loop (see :data:`REDRAW_LOOP_SHARE`), if that is longer than its own period."""
    period = running_sessions() * cost / REDRAW_LOOP_SHARE
    if period > throttle.period:  # (the period a lagging page's pace has stretched, if longer)
        throttle.defer(period)


class Fits(param.Parameterized):
    """The chains of one session, one :class:`ChainRunner` per registered method.

    Follows its :class:`~lpviz.dashboard.session.datastore.DataStore`: new data or noise reset
    the runners onto the new release; fit settings reach them at once.
    Start/Pause/Resume/Stop/Reset act on the methods chosen in the settings:
    each is a transition of the runners' state machines (see
    :class:`~lpviz.dashboard.session.runner.ChainRunner`), which alone own the worker threads, so
    any sequence of clicks at any rate leaves at most one worker per method and
    a status that says what the worker does. :meth:`drain` (every 200 ms on the
    session's event loop while something moves; every 20 ms right after Start,
    Pause and Stop) hands the workers' output to the buffers and parameters and
    settles the transitions. Without a document (a script, a test) nothing is
    scheduled: the caller drains. :meth:`close` (the session's end) stops and
    joins the workers and lets go of the chains and data.
    """

    data = param.ClassSelector(class_=DataStore, constant=True)
    busy = param.Boolean(default=False, doc="a chain runs or data are being built (the header spinner)")
    closed = param.Boolean(default=False, doc="the session has ended: its workers have left, its data are gone")

    def __init__(self, data=None, *, buffer_length=BUFFER_LENGTH, lockstep=True, place=None, **params):
        """``place``: where the workers run (default :func:`lpviz.dashboard.session.remote.default_place`: threads of
        this process, unless the server runs the chains on a Dask cluster)."""
        from lpviz.methods import METHODS

        super().__init__(data=data if data is not None else DataStore(), **params)
        pace = Lockstep() if lockstep else None
        self.place = place = place if place is not None else default_place()
        self.runners = {
            name: ChainRunner(name, buffer_length=buffer_length, pace=pace, place=place) for name in METHODS
        }
        self._draining = Periodic(self.drain, DRAIN_PERIOD_MS)
        self._connected, self._lost_at = False, None
        self._halted_unseen = False  # chains stopped while the page was gone: resend when it is back
        self._drained_at = None  # when drain last ran (time.monotonic())
        self._unsent = {}  # method -> trace rows taken from its worker, not yet in the buffer
        # how much slower than planned this session's page is updated (its page reports its lag:
        # lpviz.dashboard.serving.throttle.PageLag); every redraw throttle of the session stretches by it
        self.pace = Pace()
        self._redraw = Throttle(TRACE_SECONDS, pace=self.pace)
        # whether the trace plots are shown (the Fits tab's view shows or hides them): hidden, the
        # trace rows wait instead of redrawing plots nobody sees
        self.traces_on_screen = OnScreen()
        # the views' computations from results, off the event loop when served
        self.off_loop = OffLoop(background=served(), doc=pn.state.curdoc)
        _SESSIONS.add(self)
        settings = self.settings
        self._sync_schedule()
        self.data.param.watch(lambda *events: self.configure(), ["release", "truth", "model"])
        settings.param.watch(
            lambda *events: settings.still(events) and self.configure(),
            ["inference", "n_components", "chain_seed", "chains"],
        )
        settings.param.watch(
            lambda *events: settings.still(events) and self._sync_schedule(),
            ["n_iter", "burn_in", "thin", "trace_every"],
        )
        settings.discard_check = self.would_discard
        settings.method_options.param.watch(lambda *events: self.configure(), list(settings.method_options.param)[1:])
        for runner in self.runners.values():
            runner.param.watch(self._update_busy, ["status"])
            runner.param.watch(settings.refresh_question, ["status"])
        self.data.param.watch(self._update_busy, ["loading"])
        self._start_when_loaded = False
        self.data.param.watch(self._loaded, ["loading"])  # after configure(): the runners are on the new data
        self.configure()
        if served():
            self.place.warm_up()  # the kernels, where the chains will run
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
            chains=self.settings.chains,
            inference=self.settings.inference,
        )

    def configure(self):
        """Point every runner at the current release (stopping and clearing what ran before)."""
        if self.closed:
            return
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
        if self.closed:
            return
        if self.data.loading:
            # new data are being built: chains started now would run on the old data and be reset
            # when the new ones arrive (a Start clicked just after a preset was lost so): they
            # start on the new data instead
            self._start_when_loaded = True
            return
        problem = self.problem()
        if problem is not None:
            settings = self.settings
            self._check_memory(problem, (settings.n_iter, settings.burn_in, settings.thin))
        with self._batched():
            _each(self.active.values(), "start")
        self._drain_soon(lambda: any(len(r.buffer.data) for r in self.runners.values()) or not self.moving)

    def _loaded(self, event):
        if event.new or not self._start_when_loaded:
            return
        self._start_when_loaded = False
        if self.data.error:  # the build failed and the old data stay: the Start was for the new ones
            return
        try:
            self.start()
        except Exception:  # as a click's would be: logged, and the new data stay applied
            log.exception("the start asked for while the data were built failed")

    def pause(self, *_):
        """Ask the chosen methods' chains to pause: every progress line reads "pausing" in one message
        (sent one runner's change at a time, each a write to the socket: on a server whose chains hold
        the GIL, every write waited for it again, 0.1-0.2 s of the click's answer)."""
        self._start_when_loaded = False
        with self._batched():
            _each(self.active.values(), "pause")
        self._drain_soon(lambda: not any(r.status == "pausing" for r in self.runners.values()))

    def _check_memory(self, problem, run):
        """Refuse a start whose data, chains and (MCMC) saved samples would not fit this session."""
        from lpviz.dashboard.session.memory import check_session

        shape = problem.release.shape
        chains = 1 if problem.inference == "vi" else problem.chains  # every chain holds its own state
        check_session(
            shape,
            f"{' x '.join(f'{n:,}' for n in shape)} counts",
            problem.model,
            problem.n_components,
            [name for name in self.active for _ in range(chains)],
            fix="Fit fewer methods, chains or components.",
            run=None if problem.inference == "vi" else run,
        )

    def resume(self, *_):
        """Go on after a pause; runs that ended run as many iterations again. After a pause only the
        paused runs go on: a run that ended while the others were paused stays done (Resume then
        extended it by a whole run, unasked)."""
        paused = [runner for runner in self.active.values() if runner.status in ("paused", "pausing")]
        if paused:
            with self._batched():
                _each(paused, "resume")
            return
        done = [runner for runner in self.active.values() if runner.status == "done"]
        problem = self.problem()
        if done and problem is not None:  # extended runs keep saving samples: the longest one decides
            settings = self.settings
            target = max(runner.target for runner in done) + settings.n_iter
            self._check_memory(problem, (target, settings.burn_in, settings.thin))
        with self._batched():
            _each(self.active.values(), "resume")

    def stop(self, *_):
        self._start_when_loaded = False
        with self._batched():  # every "stopping" in one message, as Pause's
            _each(self.runners.values(), "stop")
        self._drain_soon(lambda: not self.moving)

    def reset(self, *_):
        """Stop and forget every run. The statuses answer first (a few words each); the traces and
        results are cleared after them (every trace plot and view redrawn: seconds of a loaded
        server's time, which kept Reset's "idle" from the page that long), in one redraw, in a
        callback of its own once the statuses have gone to the page (at once without a page)."""
        self._start_when_loaded = False
        self._unsent = {}
        clears = []

        def clear():
            if self.closed:
                return
            with self._batched():
                for forget in clears:
                    forget()

        served_page = served()  # (Jupyter runs a scheduled callback at once: there the clear comes after)
        if served_page:
            # scheduled before the statuses change: it runs before any view a status change schedules
            # (lpviz.dashboard.session.fits.follow_results' settle), which then draws the empty result, not the old one
            pn.state.execute(clear, schedule=True)
        failures = []
        for runner in list(self.runners.values()):
            try:
                clears.append(runner.reset(clear=False))
            except Exception as error:  # as _each: every runner answers, the first error is raised after
                failures.append(error)
        if not served_page:
            clear()
        self._drain_soon(lambda: not self.moving)
        if failures:
            raise failures[0]

    @property
    def running(self):
        """A chain runs or is about to (starting, running, pausing)."""
        return any(r.status in ("starting", "running", "pausing") for r in self.runners.values())

    @property
    def moving(self):
        """A runner is between states the event loop must settle (a worker at work or leaving)."""
        return any(r.status in MOVING_STATUSES for r in self.runners.values())

    @property
    def state(self):
        """The session's state in one word: the furthest along of its runners' statuses
        (starting, running, pausing, stopping, paused, then done, stopped, error, idle)."""
        statuses = {runner.status for runner in self.runners.values()}
        order = ("starting", "running", "pausing", "stopping", "paused", "done", "stopped", "error", "idle")
        return next((status for status in order if status in statuses), "idle")

    def would_discard(self):
        """What a new data set, release or model would throw away: '' or e.g. 'the running fits (...)'."""
        live = [runner.label for runner in self.runners.values() if runner.status in ("running", "pausing", "paused")]
        return f"the running fits ({', '.join(live)})" if live else ""

    def _update_busy(self, *_):
        busy = self.moving or self.data.loading
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
        """Deliver finished data builds and chain output, and settle the runners' transitions;
        returns trace rows streamed. A session whose page is gone stops its chains instead."""
        self._drained_at = time.monotonic()  # (kill -USR1 says when: describe_sessions)
        connection = self.connection()
        if connection == "lost":
            # nobody watches: the statuses change without redrawing any view (a page's views
            # recomputed for nobody would take the loop from the sessions still open)
            with self._quietly():
                self.halt()
                self._poll()
            # the drain goes on (returning here at once) so that a page that reconnects hears the
            # statuses as they are; the session's end (close) stops it
            self._halted_unseen = True
            return 0
        if connection == "absent":
            self._poll()
            return 0  # nobody is watching: no redraws, until the page is back or gone
        if self._halted_unseen:  # back after its chains were stopped unseen: the page learns the statuses
            self._halted_unseen = False
            self._resend_statuses()
        self.data.poll()
        self.watch_progress()
        if not any(runner.has_output for runner in self.runners.values()):
            self._poll()
            if not self.busy and not any(runner.is_alive for runner in self.runners.values()):
                self._draining.stop()  # nothing runs: no periodic work (and no busy flicker) until Start
            return 0
        collected = [(runner, *runner.collect()) for runner in self.runners.values()]
        for runner, frame, _ in collected:
            if frame is not None:
                self._unsent.setdefault(runner.method, []).append(frame)
        still = any(updates.get("status") in STILL_STATUSES for _, _, updates in collected) or any(
            not runner.is_alive and runner.status in MOVING_STATUSES for runner in self.runners.values()
        )
        # a Stop answered (a worker has left while its line reads "stopping"): on a page, the trace redraw
        # held the "stopped" back (one message: up to 0.4 s of the server's and the page's time after Stop)
        answered = served() and any(r.status == "stopping" and not r.is_alive for r in self.runners.values())
        streamed = 0
        # one hold (one message to the browser) and one freeze (Bokeh walks the model graph once)
        with self._batched():
            redraw_cost = None
            if self._unsent and not self.traces_on_screen.shown:
                # nobody sees the trace plots (another tab is shown): the rows wait, as many as
                # the plots keep, and are drawn in one redraw when the plots are shown again
                self._hold_back_rows()
                self.traces_on_screen.run("traces", self.stream_traces)
            elif self._unsent and answered:
                # the statuses go in this message, the rows the workers handed over on leaving in a
                # callback of its own right after it; scheduled before the statuses change, it runs
                # before the views a "stopped" schedules (follow_results' settle)
                generations = {name: runner._generation for name, runner in self.runners.items()}
                pn.state.execute(partial(self._stream_after_answer, generations), schedule=True)
            elif self._unsent and (still or self._redraw.due()):
                # at most every TRACE_SECONDS while running (a redraw costs the event loop), at
                # once when a run stops moving
                redraw_started = time.perf_counter()
                streamed = self.stream_traces()
                redraw_cost = time.perf_counter() - redraw_started
            # statuses after the rows (but a Stop's answer, above): a page that reads "paused" has every
            # row before it; every runner's, even when a watcher of one fails (its error is raised after
            # the others')
            failures = []
            for runner, _, updates in collected:
                try:
                    runner.apply(None, updates)
                except Exception as error:
                    failures.append(error)
        if failures:
            raise failures[0]
        if redraw_cost is not None and not still:
            stretch(self._redraw, redraw_cost)
        return streamed

    def _stream_after_answer(self, generations):
        """Stream the trace rows a Stop's answer left for after its statuses (a callback of its own);
        ``generations``: the runners' runs then (the rows of a run replaced since, by a Start before
        this callback, are not the new run's)."""
        if self.closed:
            return
        for name in [name for name in self._unsent if self.runners[name]._generation != generations.get(name)]:
            del self._unsent[name]
        if not self._unsent:
            return  # a drain meanwhile streamed them, or their runs were replaced
        with self._batched():
            if self.traces_on_screen.shown:
                self.stream_traces()
            else:
                self._hold_back_rows()
                self.traces_on_screen.run("traces", self.stream_traces)

    def watch_progress(self, now=None):
        """The session's watchdog: a runner whose worker has left without settling its status is
        settled (:meth:`ChainRunner.watch`), and when no running chain of the session has moved for
        :data:`~lpviz.dashboard.session.runner.STALL_SECONDS` (or ten iterations of the slowest), each says so in words
        (its ``note``, on its progress line). A chain waiting for a slower one is not stalled while
        that one moves."""
        now = time.monotonic() if now is None else now
        quiet = {runner: runner.watch(now) for runner in self.runners.values()}
        running = {runner: seconds for runner, seconds in quiet.items() if runner.status == "running"}
        if not running:
            return
        limit = max(STALL_SECONDS, 10 * max(runner.seconds_per_iteration for runner in running))
        still = min(seconds or 0.0 for seconds in running.values())
        for runner in running:
            note = ""
            if still >= limit:
                where = f"iteration {runner.reached:,}" if runner.reached else "its first iteration"
                note = (
                    f"no chain has moved for {still:.0f} s (this one is at {where}, its worker "
                    f"{'alive' if runner.is_alive else 'gone'}): Stop or Reset ends the run"
                )
            if note != runner.note:
                runner.note = note

    def stream_traces(self):
        """Stream the trace rows taken from the workers into the buffers, in one redraw of the
        trace plots (every buffer first, then one trigger for all of them, so a plot over several,
        an overlay of every method's trace, redraws once); returns the rows streamed."""
        if not self._unsent:
            return 0
        streamed, buffers = 0, []
        with self._batched():
            for name, frames in self._unsent.items():
                frame = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
                self.runners[name].apply(frame, {}, trigger=False, settle=False)  # the result first
                buffers.append(self.runners[name].buffer)
                streamed += len(frame)
            self._unsent = {}
            hv.streams.Stream.trigger(buffers)
        return streamed

    def _hold_back_rows(self):
        """Keep of the rows waiting for hidden trace plots only what their buffers would keep."""
        for name, frames in self._unsent.items():
            if len(frames) > 1:
                length = self.runners[name].buffer.length
                frame = pd.concat(frames, ignore_index=True)
                self._unsent[name] = [frame.iloc[-length:] if length else frame]

    def _poll(self):
        """Settle the transitions of runners whose workers have left (one redraw for all)."""
        if any(runner._worker is not None and not runner.is_alive for runner in self.runners.values()):
            with self._batched():
                for runner in self.runners.values():
                    runner.poll()

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
            self._draining.call()  # a failed drain is logged, as the periodic one's (serving.throttle.Periodic)
            if done() or callback.counter >= SOON_POLLS:
                callback.stop()

        callback = pn.state.add_periodic_callback(poll, period=SOON_POLL_MS, count=SOON_POLLS)

    def _resend_statuses(self):
        """Send every runner's status line as it is now (set quietly while the page was away): a page
        that reconnects to its session otherwise reads "running" for chains that were stopped."""
        with self._batched():
            for runner in self.runners.values():
                runner.param.trigger("status", "iteration", "iterations_per_second", "error", "note")

    def _quietly(self):
        """The runners' parameters change without events: no view redraws for a page that has gone."""
        stack = ExitStack()
        for runner in self.runners.values():
            stack.enter_context(param.parameterized.discard_events(runner))
        return stack

    def halt(self):
        """Stop every worker (the page has gone); the statuses read stopped once they have left."""
        for runner in self.runners.values():
            runner.halt()

    def close(self):
        """The session has ended: stop and join the workers, stop the periodic drain and let go of
        the chains, traces and results (nothing is redrawn: nobody is watching any more).
        Safe to call twice, and from a notebook."""
        if self.closed:
            return
        with self._quietly():
            self.halt()
        self._draining.stop()
        deadline = time.monotonic() + CLOSE_JOIN_SECONDS
        for runner in self.runners.values():
            runner.join(max(0.0, deadline - time.monotonic()))
        for runner in self.runners.values():
            runner.release()
        self.off_loop.close()
        self.place.close()
        self._unsent = {}
        self.closed = True


def _each(runners, transition):
    """Take ``transition`` (start, pause, ...) on every runner, even when a watcher of one fails
    (a click that reached only the first runners left the others running: its error is raised
    after the others have moved)."""
    failures = []
    for runner in list(runners):
        try:
            getattr(runner, transition)()
        except Exception as error:
            failures.append(error)
    if failures:
        raise failures[0]


def _has_sample(result):
    return bool(result) and result.get("best") is not None


def follow_results(fits, callback, seconds, *, per_runner=False, needs_sample=False):
    """Call ``callback(runner)`` when a runner's result changes, for views drawn from snapshots.

    At once when a runner pauses, stops, ends or is reset, so a still run is
    shown exactly (served, a pause, stop or reset in a callback after the
    message that carries the statuses: the click's answer first); while it
    runs at most every ``seconds`` (one
    :class:`~lpviz.dashboard.serving.throttle.Throttle` for the view, or one per runner with
    ``per_runner``), and not in the first period after Start or Resume, so
    the first trace points go out before any heavy redraw. ``needs_sample``:
    ignore results before the first saved sample (views of the posterior only).
    """
    pace = getattr(
        fits, "pace", None
    )  # the page's lag stretches the view's period (lpviz.dashboard.serving.throttle.Pace)
    shared = Throttle(seconds, pace=pace)
    throttles = {name: Throttle(seconds, pace=pace) if per_runner else shared for name in fits.runners}

    def show(runner):
        # a view that fails to redraw must not stop the run: this is a watcher of the runner's status,
        # and an exception here skipped the watchers after it and the drain's other runners (two VI
        # chains read "idle, iteration 0" while they ran); the error goes to the server's log
        try:
            callback(runner)
        except Exception:
            log.exception("a view failed to redraw %s's result; the run goes on", runner.label)

    def on_change(*events):
        runner = events[0].obj
        throttle = throttles[runner.method]
        statuses = [event.new for event in events if event.name == "status"]
        # moving ("stopping" included: a redraw then is redone at "stopped" and only delays the click)
        if any(status in MOVING_STATUSES for status in statuses):
            throttle.defer()
            return
        if statuses:  # a run that stopped moving: shown exactly, with its statuses
            if served() and runner.status in ANSWERS_FIRST:
                # the answer to Pause, Stop or Reset: every progress line goes to the page first, in the
                # drain's (or the click's) message; the views (whole heatmaps, scores: hundreds of ms of a
                # loaded server, which kept "paused" from the page that long) in a callback after it
                unshown.add(runner.method)
            else:
                show(runner)
            # once no chain is still pausing or leaving (a chain that ended instead of pausing settles the
            # others too): a redraw, and a message, per chain; one message for all was a task of seconds
            # for a 4x throttled page, and the answer to the next click waited behind it
            if unshown and not any(other.status in ("pausing", "stopping") for other in fits.runners.values()):
                for method in sorted(unshown):
                    pn.state.execute(partial(settle, method), schedule=True)
            return
        if runner.status == "stopped" and any(e.name == "result" and e.new is not None for e in events):
            show(runner)  # the final score of a run stopped in its end-of-run work, come after the "stopped"
            return
        if (
            not served()
            and runner.status in ("idle", "unavailable")
            and any(e.name == "result" and e.new is None for e in events)
        ):
            show(runner)  # a Reset's clearing, after its status (served, the settle callback draws it)
            return
        if needs_sample and not any(_has_sample(e.old) or _has_sample(e.new) for e in events):
            return
        if not throttle.due():
            return
        if served():
            # a redraw while running is a callback of its own, after the drain that brought the
            # result: the loop serves the other sessions (and clicks) between the two
            pn.state.execute(partial(redraw, runner, throttle), schedule=True)
        else:
            redraw(runner, throttle)

    unshown = set()  # methods paused, stopped or reset whose views wait for the other chains' progress lines

    def settle(method):
        if fits.closed or method not in unshown:
            return  # drawn by a settle scheduled before this one
        unshown.discard(method)
        with Fits._batched():
            show(fits.runners[method])

    def redraw(runner, throttle):
        if fits.closed:
            return
        started = time.perf_counter()
        with Fits._batched():
            show(runner)
        stretch(throttle, time.perf_counter() - started)  # the next waits for this session's share of the loop

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
    """Whether the model registered as ``model_name`` declares it shows ``what`` (one of
    :data:`lpviz.models.base.VIEWS`: "topics", "memberships", "communities", ...)."""
    from lpviz import models

    return bool(model_name) and what in models.get(model_name).shows


def chain_progress():
    """Each open session's progress as its chains post it, before the event loop drains it (the
    least iteration of its running methods), by a key of its own: a load test tells the chains'
    fairness from the pages' lag."""
    progress = {}
    for fits in list(_SESSIONS):
        running = [runner.reached for runner in fits.active.values() if runner.status == "running"]
        if not fits.closed and running:
            progress[str(id(fits))] = min(running)
    return progress
