"""Issue 37 (HIGH 1): Stop and Reset answer at every point of a run, the end-of-run work included.

A chain that has run all its iterations scores its whole posterior once more (topics, diagnostics
across chains: 4-12 s for Figure 4 on a loaded machine) before it posts "done". A Stop or Reset
then must not wait for that score, nor leave it running in the background: here the final score is
either held at a gate before it starts (an event, no sleep) or made slow row block by row block
(each block waits on an event for BLOCK_SECONDS), while the buttons are pressed.
"""

import threading
import time

import pytest

import lpviz.metrics
from tests.test_app_fits import closing_fits, drain_until, make_fits

# the slow final score: each of its row blocks (a row each) waits this long, unless released
BLOCK_SECONDS = 2.0
# how soon a stopped final score's workers must have left: generous (a loaded machine), yet far below
# the uninterrupted score's BLOCK_SECONDS x rows (asserted in each test)
LEAVE_SECONDS = 10.0


@pytest.fixture
def held_final_score(monkeypatch):
    """Hold every chain's final score (``diagnostics=True``, in a worker) until ``gate`` is set;
    ``entered`` counts the workers waiting there, ``returned`` the scores each worker got."""
    real = lpviz.metrics.score
    state = {"entered": 0, "returned": {}, "gate": threading.Event(), "condition": threading.Condition()}

    def score(*args, **kwargs):
        worker = threading.current_thread().name
        if kwargs.get("diagnostics") is not True or not worker.startswith("lpviz-"):
            return real(*args, **kwargs)
        with state["condition"]:
            state["entered"] += 1
            state["condition"].notify_all()
        state["gate"].wait(60)
        result = real(*args, **kwargs)
        state["returned"][worker] = result
        return result

    monkeypatch.setattr(lpviz.metrics, "score", score)
    yield state
    state["gate"].set()


def chains_alive():
    return [t.name for t in threading.enumerate() if t.name.startswith("lpviz-") and t.name.endswith("-chain")]


def wait_chains_left(seconds):
    """Whether every chain's worker thread has left within ``seconds``."""
    deadline = time.monotonic() + seconds
    while chains_alive():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


@pytest.fixture
def slow_final_score(monkeypatch):
    """Every chain's final score (``diagnostics=True``, in a worker) made slow where it reads the fit's
    rates: a row a block, each block waiting BLOCK_SECONDS on ``release`` (set: no wait). ``entered``:
    the workers inside it; ``finished``: the final scores that returned."""
    real_score, real_block_sums = lpviz.metrics.score, lpviz.metrics._block_sums
    final = threading.local()
    state = {"entered": set(), "finished": 0, "release": threading.Event(), "condition": threading.Condition()}

    def score(*args, **kwargs):
        worker = threading.current_thread().name
        inner = getattr(final, "on", False)  # an ensemble's score of each chain: part of the final one
        if inner or kwargs.get("diagnostics") is not True or not worker.startswith("lpviz-"):
            return real_score(*args, **kwargs)
        final.on = True
        try:
            result = real_score(*args, **kwargs)
        finally:
            final.on = False
        state["finished"] += 1
        return result

    def block_sums(*args):
        if getattr(final, "on", False):
            with state["condition"]:
                state["entered"].add(threading.current_thread().name)
                state["condition"].notify_all()
            state["release"].wait(BLOCK_SECONDS)
        return real_block_sums(*args)

    monkeypatch.setattr(lpviz.metrics, "score", score)
    monkeypatch.setattr(lpviz.metrics, "_block_sums", block_sums)
    monkeypatch.setattr(lpviz.metrics, "_SCORE_BLOCK_CELLS", 1)  # a row a block
    yield state
    state["release"].set()


def wait_slow_entered(state, count):
    with state["condition"]:
        assert state["condition"].wait_for(lambda: len(state["entered"]) >= count, timeout=120), state["entered"]


def wait_entered(state, count):
    with state["condition"]:
        assert state["condition"].wait_for(lambda: state["entered"] >= count, timeout=120), state["entered"]


@pytest.fixture
def fits():
    with closing_fits(n_iter=30, burn_in=10, thin=5) as fits:
        yield fits


def test_a_stop_before_the_end_of_run_score_answers_at_once_and_the_score_is_not_run(fits, held_final_score):
    fits.start()
    runners = list(fits.runners.values())
    wait_entered(held_final_score, len(runners))  # every chain has run its 30 iterations and is to score
    fits.drain()
    assert all(r.status == "running" for r in runners)
    fits.stop()
    # every status reads stopped at once, while every final score is still held
    assert [r.status for r in runners] == ["stopped"] * len(runners)
    before = {r.method: r.result for r in runners}
    held_final_score["gate"].set()
    assert wait_chains_left(LEAVE_SECONDS)
    fits.drain()
    for runner in runners:
        # the score asked should_stop first and left: the last snapshot stays, no "done" comes
        assert not held_final_score["returned"]
        assert runner.status == "stopped" and runner.iteration == 30
        assert before[runner.method] is not None and runner.result is before[runner.method]


def test_a_reset_during_the_end_of_run_score_answers_before_it_returns_and_drops_the_score(fits, held_final_score):
    fits.start()
    runners = list(fits.runners.values())
    wait_entered(held_final_score, len(runners))
    fits.reset()
    assert [r.status for r in runners] == ["idle"] * len(runners)
    assert not held_final_score["returned"]
    held_final_score["gate"].set()
    assert wait_chains_left(LEAVE_SECONDS)
    fits.drain()
    assert not held_final_score["returned"]  # it asked should_stop and left
    for runner in runners:
        assert runner.status == "idle" and runner.iteration == 0 and runner.result is None
        assert len(runner.buffer.data) == 0
    # a new run starts at once and ends (the old workers have let go of the lockstep)
    fits.start()
    drain_until(fits, lambda: all(r.status == "done" for r in runners))
    assert all(r.iteration == 30 and r.result["iteration"] == 30 for r in runners)


def test_a_run_not_stopped_still_ends_done_with_its_final_score(fits, held_final_score):
    fits.start()
    runners = list(fits.runners.values())
    wait_entered(held_final_score, len(runners))
    fits.drain()
    assert all(r.status == "running" and r.iteration == 30 for r in runners)  # not done before its score
    held_final_score["gate"].set()
    drain_until(fits, lambda: all(r.status == "done" for r in runners))
    for runner in runners:
        assert runner.result["score"] == held_final_score["returned"][f"lpviz-{runner.method}-chain"]


@pytest.mark.parametrize("button", ["stop", "reset", "close"])
def test_stop_reset_or_closing_during_a_slow_final_score_answers_at_once_and_the_score_leaves(
    fits, slow_final_score, button
):
    fits.start()
    runners = list(fits.runners.values())
    rows = runners[0].problem.release.shape[0]
    assert BLOCK_SECONDS * rows >= 4 * LEAVE_SECONDS  # the whole score would outlast the bound by far
    wait_slow_entered(slow_final_score, len(runners))  # every chain is inside its final score's rate pass
    fits.drain()
    assert all(r.status == "running" and r.iteration == 30 for r in runners)
    before = {r.method: r.result for r in runners}
    pressed = time.monotonic()
    getattr(fits, button)()
    if button != "close":  # the status changes at once (no drain in between)
        expected = "stopped" if button == "stop" else "idle"
        assert [r.status for r in runners] == [expected] * len(runners)
    # the final scores leave at their next row block: no worker left behind, none finished
    assert wait_chains_left(LEAVE_SECONDS), (chains_alive(), time.monotonic() - pressed)
    assert slow_final_score["finished"] == 0
    if button == "close":
        return
    fits.drain()
    for runner in runners:
        if button == "stop":  # the last snapshot stays
            assert runner.status == "stopped" and runner.iteration == 30
            assert runner.result is before[runner.method] and runner.result is not None
        else:
            assert runner.status == "idle" and runner.iteration == 0 and runner.result is None
    # a new run (the gate open: no wait) starts and ends done with its final score
    slow_final_score["release"].set()
    fits.start()
    drain_until(fits, lambda: all(r.status == "done" for r in runners))
    assert slow_final_score["finished"] == len(runners)


def test_a_stop_on_a_page_sends_its_stopped_status_before_the_trace_redraw(monkeypatch):
    """Served, the drain that finds the stopped workers gone sends every "stopped" in its own message, and
    the trace rows they handed over on leaving in a callback after it: in one message, the trace redraw
    (seconds of a loaded server's and page's time) held the "stopped" back after Stop."""
    import panel as pn

    import lpviz.dashboard.session.fits
    from tests.test_app_reset_order import record

    fits = make_fits()
    fits.settings.param.update(n_iter=100_000, burn_in=10, thin=5)
    runners = list(fits.runners.values())
    try:
        fits.start()
        drain_until(fits, lambda: all(len(r.buffer.data) > 0 for r in runners))
        # the workers hand over rows that no drain has taken yet, then Stop
        deadline = time.monotonic() + 60
        while not all(r.has_output for r in runners):
            assert time.monotonic() < deadline, "the workers handed over no rows"
            time.sleep(0.02)
        scheduled = []
        monkeypatch.setattr(lpviz.dashboard.session.fits, "served", lambda: True)
        monkeypatch.setattr(pn.state, "execute", lambda callback, schedule=False: scheduled.append(callback))
        fits.stop()
        assert all(runner.join(LEAVE_SECONDS) for runner in runners)
        rows_before = {r.method: len(r.buffer.data) for r in runners}
        events = record(runners)
        fits.drain()
        # the drain's message: every line reads stopped, and no trace plot was redrawn
        assert [r.status for r in runners] == ["stopped"] * len(runners)
        assert [kind for kind, _, _ in events if kind == "traces"] == [], events
        assert {r.method: len(r.buffer.data) for r in runners} == rows_before
        # the rows handed over and not drawn yet, per method
        waiting = {method: sum(len(frame) for frame in frames) for method, frames in fits._unsent.items()}
        assert waiting and all(waiting.values())
        # then the callback: those rows, every one of them, in one redraw
        for callback in scheduled:
            callback()
        assert {method for kind, method, _ in events if kind == "traces"} == set(waiting)
        assert {r.method: len(r.buffer.data) for r in runners} == {
            method: rows + waiting.get(method, 0) for method, rows in rows_before.items()
        }
    finally:
        fits.close()
        for runner in runners:
            runner.join(timeout=30)
