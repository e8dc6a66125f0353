"""The controls as one state machine per session: any click sequence at any rate stays consistent.

Real chains in worker threads, driven in-process (no document: the test drains,
as the session's periodic callback does). Hypothesis plays random sequences of
Start, Pause, Resume, Stop, Reset, drains and short waits; after every step the
invariants hold: at most one worker thread per runner (one set of threads per
session), the status each runner shows is what its worker does, and Start after
any sequence makes progress.
"""

import inspect
import threading
import time

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from lpviz.dashboard.session.datastore import DataStore
from lpviz.dashboard.session.fits import Fits
from lpviz.dashboard.session.settings import Settings

TIMEOUT = 120  # seconds; a loaded 2-core machine with a cold numba cache
STILL = ("idle", "stopped", "done", "error", "unavailable")


def make_fits(n_iter=100_000, place=None):
    fits = Fits(DataStore(Settings(noise_seed=7)), buffer_length=2_000, place=place)
    fits.settings.param.update(n_iter=n_iter, burn_in=10, thin=10)
    return fits


def drain_until(fits, condition, what, timeout=TIMEOUT):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            statuses = {m: (r.status, r.iteration, r.error, r.is_alive) for m, r in fits.runners.items()}
            pytest.fail(f"no {what} within {timeout} s; runners: {statuses}")
        time.sleep(0.01)
        fits.drain()


def workers_of(runner):
    """Live threads running this runner's chain (whoever started them); with the chains on a Dask
    worker (tests/test_class_dask.py), the runs its host has not seen leave (threads there)."""
    census = getattr(runner.place, "census", None)
    if census is not None:
        return [launch for launch, (method, _) in census().items() if method == runner.method]
    return [
        thread
        for thread in threading.enumerate()
        # (unwrapped: a served chain's thread runs the runner's work behind
        # lpviz.dashboard.session.turnstile.giving_way)
        if getattr(inspect.unwrap(getattr(thread, "_target", None) or (lambda: None)), "__self__", None) is runner
        and thread.is_alive()
    ]


def check_consistent(fits):
    """At most one worker per runner, and each runner's status is what its worker does."""
    for name, runner in fits.runners.items():
        workers = workers_of(runner)
        assert len(workers) <= 1, f"{name}: {len(workers)} workers at once"
        control, status = runner._control, runner.status
        if status in STILL:
            assert not workers, f"{name} reads {status!r} while its worker is alive"
        elif status == "paused":
            assert workers and not control.run_event.is_set() and not control.stopped, f"{name} reads paused"
        elif status == "pausing":
            assert not control.run_event.is_set() and not control.stopped, f"{name} reads pausing"
        elif status == "running":  # at work (or has just ended and the next drain settles it)
            assert control.moving, f"{name} reads running while its worker was told to stop or pause"
        elif status in ("stopping", "starting"):  # the old worker was told to leave
            assert control.stopped, f"{name} reads {status!r} but its worker was not told to leave"
    assert fits.state in {runner.status for runner in fits.runners.values()}


def start_makes_progress(fits):
    """Start, then every chosen method's chain runs and its iteration count grows."""
    fits.start()
    drain_until(fits, lambda: all(r.status == "running" for r in fits.active.values()), "running after Start")
    reached = {name: runner.iteration for name, runner in fits.active.items()}
    drain_until(
        fits,
        lambda: all(runner.iteration > reached[name] + 2 for name, runner in fits.active.items()),
        "progress after Start",
    )
    check_consistent(fits)


def close_and_check_released(fits):
    fits.close()
    for name, runner in fits.runners.items():
        assert not workers_of(runner), f"{name}: a worker outlived its session"
        assert runner.problem is None and runner.result is None and len(runner.buffer.data) == 0


class Clicks(RuleBasedStateMachine):
    """A student clicking the controls of one session, at any rate."""

    place = None  # makes where the chains run (None: threads of this process; a Dask worker's in test_class_dask)

    def __init__(self):
        super().__init__()
        self.fits = make_fits(place=self.place() if self.place is not None else None)

    @rule()
    def start(self):
        self.fits.start()

    @rule()
    def pause(self):
        self.fits.pause()

    @rule()
    def resume(self):
        self.fits.resume()

    @rule()
    def stop(self):
        self.fits.stop()

    @rule()
    def reset(self):
        self.fits.reset()

    @rule()
    def drain(self):
        self.fits.drain()

    @rule(seconds=st.sampled_from([0.0, 0.005, 0.02, 0.1]))
    def wait(self, seconds):
        time.sleep(seconds)

    @precondition(lambda self: self.fits.state in ("running", "starting"))
    @rule()
    def settle_running(self):
        """Let the event loop catch up: a run that was started runs and moves on."""
        drain_until(self.fits, lambda: self.fits.state == "running", "running")
        start_makes_progress(self.fits)

    @invariant()
    def consistent(self):
        check_consistent(self.fits)

    def teardown(self):
        try:
            start_makes_progress(self.fits)  # Start after any sequence makes progress
        finally:
            close_and_check_released(self.fits)


Clicks.TestCase.settings = settings(
    max_examples=15,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_any_click_sequence_stays_consistent_and_start_then_runs = Clicks.TestCase


def test_fifty_rounds_of_start_stop_reset_20_ms_apart_then_start_runs():
    """The issue's reproducer: N iter 100,000; Start, Stop, then 50 rounds of Start/Stop/Reset 20 ms
    apart (the session draining as its event loop would); the next Start, and Reset then Start, run."""
    fits = make_fits(n_iter=100_000)
    try:
        fits.start()
        drain_until(fits, lambda: all(r.iteration > 0 for r in fits.active.values()), "first iterations")
        fits.stop()
        for _ in range(50):
            for click in (fits.start, fits.stop, fits.reset):
                click()
                check_consistent(fits)
                time.sleep(0.02)
                fits.drain()
                check_consistent(fits)
        start_makes_progress(fits)
        fits.reset()
        check_consistent(fits)
        start_makes_progress(fits)
        fits.stop()
        drain_until(fits, lambda: fits.state == "stopped", "stopped")
        assert all(not workers_of(runner) for runner in fits.runners.values())
    finally:
        close_and_check_released(fits)


def test_redraws_of_a_class_wait_for_their_share_of_the_event_loop():
    """A redraw that cost c seconds waits (running sessions) * c / REDRAW_LOOP_SHARE before the next:
    sessions that run slow their redraws; idle ones do not count."""
    from lpviz.dashboard.serving.throttle import Throttle
    from lpviz.dashboard.session.fits import _SESSIONS, REDRAW_LOOP_SHARE, running_sessions, stretch

    sessions = [make_fits() for _ in range(3)]
    try:
        before = sum(1 for fits in list(_SESSIONS) if not fits.closed and fits.moving)  # other tests' leftovers
        for fits in sessions[:2]:
            fits.start()
        assert running_sessions() == before + 2
        clock = [100.0]
        throttle = Throttle(1.0, clock=lambda: clock[0])
        assert throttle.due()
        stretch(throttle, cost=0.4)  # 0.4 s of loop time, (before + 2) sessions running
        wait = running_sessions() * 0.4 / REDRAW_LOOP_SHARE
        clock[0] += wait - 0.01
        assert not throttle.due()
        clock[0] += 0.02
        assert throttle.due()
        cheap = Throttle(1.0, clock=lambda: clock[0])
        assert cheap.due()
        stretch(cheap, cost=0.001)  # a cheap redraw keeps its own period
        clock[0] += 1.0
        assert cheap.due()
        for fits in sessions[:2]:
            fits.close()
        assert running_sessions() == max(1, before)
    finally:
        for fits in sessions:
            fits.close()


def test_served_chains_take_turns_on_chain_threads_the_server_sets(monkeypatch):
    """`lpviz.dashboard.serve` runs at most --chain-threads chains at once (default the cores); the process's
    turnstile takes that number from the environment the server sets."""
    from lpviz._parallel import n_threads
    from lpviz.dashboard.serve import parse_args
    from lpviz.dashboard.session import turnstile as turnstile_module

    assert parse_args([]).chain_threads == n_threads()
    assert parse_args(["--chain-threads", "3"]).chain_threads == 3
    with pytest.raises(SystemExit):
        parse_args(["--chain-threads", "0"])
    monkeypatch.setenv("LPVIZ_CHAIN_THREADS", "2")
    assert parse_args([]).chain_threads == 2  # the environment's, when the flag is not given
    monkeypatch.delenv("LPVIZ_CHAIN_THREADS")
    monkeypatch.setattr(turnstile_module, "_TURNSTILE", [])  # this process's turnstile, made afresh
    monkeypatch.setenv(turnstile_module.CHAIN_THREADS_ENV, "1")
    assert turnstile_module.turnstile().places == 1
    monkeypatch.setattr(turnstile_module, "_TURNSTILE", [])
    monkeypatch.delenv(turnstile_module.CHAIN_THREADS_ENV)
    assert turnstile_module.turnstile().places == n_threads()
