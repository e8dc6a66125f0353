"""Issue 37 (HIGH 1): Stop and Reset answer at every point of a run, the end-of-run work included.

A chain that has run all its iterations scores its whole posterior once more (topics, diagnostics
across chains: 4-12 s for Figure 4 on a loaded machine) before it posts "done". A Stop or Reset
then must not wait for that score: here the final score is held at a gate (an event, no sleep)
while the buttons are pressed, and released afterwards.
"""

import threading

import pytest

import lpviz.metrics
from app.fits import follow_results
from tests.test_app_fits import drain_until, make_fits


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


def wait_entered(state, count):
    with state["condition"]:
        assert state["condition"].wait_for(lambda: state["entered"] >= count, timeout=120), state["entered"]


@pytest.fixture
def fits():
    fits = make_fits()
    fits.settings.param.update(n_iter=30, burn_in=10, thin=5)
    yield fits
    fits.close()
    for runner in fits.runners.values():
        runner.join(timeout=30)


def test_a_stop_during_the_end_of_run_score_answers_before_it_returns_and_the_score_still_comes(fits, held_final_score):
    shown = []
    # a view throttled to once an hour: the late final score must still be drawn
    follow_results(fits, lambda runner: shown.append((runner.method, runner.status, runner.result)), 3600)
    fits.start()
    runners = list(fits.runners.values())
    wait_entered(held_final_score, len(runners))  # every chain has run its 30 iterations and scores
    fits.drain()
    assert all(r.status == "running" for r in runners)
    fits.stop()
    # every status reads stopped at once, while every final score is still held
    assert [r.status for r in runners] == ["stopped"] * len(runners)
    assert not held_final_score["returned"]
    before = {r.method: r.result for r in runners}
    shown.clear()
    held_final_score["gate"].set()
    drain_until(
        fits, lambda: len(held_final_score["returned"]) == len(runners) and not any(r.has_output for r in runners)
    )
    for runner in runners:
        final = held_final_score["returned"][f"lpviz-{runner.method}-chain"]
        # what the run has (its last snapshot) stayed; the final score, come after "stopped", replaced it
        assert before[runner.method] is not None
        assert runner.status == "stopped" and runner.iteration == 30
        assert runner.result["score"] == final and runner.result["score"] != before[runner.method]["score"]
        assert (runner.method, "stopped", runner.result) in shown  # drawn at once, despite the throttle
    fits.drain()
    assert [r.status for r in runners] == ["stopped"] * len(runners)  # its late "done" changes nothing


def test_a_reset_during_the_end_of_run_score_answers_before_it_returns_and_drops_the_score(fits, held_final_score):
    fits.start()
    runners = list(fits.runners.values())
    wait_entered(held_final_score, len(runners))
    fits.reset()
    assert [r.status for r in runners] == ["idle"] * len(runners)
    assert not held_final_score["returned"]
    held_final_score["gate"].set()
    drain_until(
        fits, lambda: len(held_final_score["returned"]) == len(runners) and not any(r.has_output for r in runners)
    )
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
