"""Issue 37: Pause answers first, redraws after. Served, the drain that brings a chain's "paused"
(its progress line: a few words) used to redraw every view that follows the results (rate heatmaps,
scores, topics: hundreds of milliseconds of a loaded server) in the same callback, so the page read
"paused" only after all of them. Now the status goes out in the drain's own message and the views
are redrawn in a callback scheduled after it, from the paused run's exact result, once no chain is
still pausing; Resume's "running" redraws nothing at all. The served event loop is stood in for
(``pn.state.execute`` records what a session would schedule); no time is asserted (bench_page_lag
measures the click)."""

import panel as pn
import pytest

import lpviz.dashboard.session.fits as fits_module
from lpviz.dashboard.session.fits import follow_results
from tests.test_app_fits import closing_fits, drain_until


@pytest.fixture
def fits():
    with closing_fits(n_iter=100_000, burn_in=10, thin=5) as fits:
        yield fits


@pytest.fixture
def scheduled(monkeypatch):
    """Served, as the session's event loop would be: the callbacks follow_results schedules are kept
    here and run when the test says (after the drain that scheduled them has sent its message)."""
    callbacks = []
    monkeypatch.setattr(fits_module, "served", lambda: True)
    monkeypatch.setattr(pn.state, "execute", lambda callback, schedule=False: callbacks.append(callback))
    return callbacks


def record(fits):
    """A list of ("status", method, new) for every status change and ("view", method, status, result)
    for every redraw of a view that follows the results, in the order they happen."""
    events = []
    for runner in fits.runners.values():
        runner.param.watch(
            lambda *changes, method=runner.method: events.extend(
                ("status", method, change.new) for change in changes if change.name == "status"
            ),
            ["status"],
        )
    follow_results(fits, lambda runner: events.append(("view", runner.method, runner.status, runner.result)), 0.0)
    return events


def test_pause_sends_every_status_before_any_view_redraws_then_shows_the_paused_run_exactly(fits, scheduled):
    events = record(fits)
    runners = list(fits.runners.values())
    fits.start()
    drain_until(fits, lambda: all(r.result is not None and r.iteration >= 5 for r in runners))
    scheduled.clear()  # the redraws while running (each a callback of its own): not this test's
    del events[:]
    fits.pause()
    drain_until(fits, lambda: all(r.status == "paused" for r in runners))
    # every drain so far has answered with the statuses only: no view has redrawn in them
    assert [event for event in events if event[0] == "view"] == [], events
    assert [event[2] for event in events if event[0] == "status"].count("paused") == len(runners)
    assert scheduled, "the views' redraw is scheduled after the statuses"
    for callback in scheduled:
        callback()
    views = [event for event in events if event[0] == "view"]
    # then every paused run is shown once, from its exact (paused) result
    assert sorted(method for _, method, _, _ in views) == sorted(fits.runners), views
    for _, method, status, result in views:
        runner = fits.runners[method]
        assert status == "paused" and result is runner.result
        assert result["iteration"] == runner.iteration


def test_resume_sends_running_without_redrawing_a_view(fits, scheduled):
    events = record(fits)
    runners = list(fits.runners.values())
    fits.start()
    drain_until(fits, lambda: all(r.result is not None and r.iteration >= 5 for r in runners))
    fits.pause()
    drain_until(fits, lambda: all(r.status == "paused" for r in runners))
    for callback in scheduled:
        callback()
    scheduled.clear()
    del events[:]
    fits.resume()
    assert [event for event in events if event[0] == "status"] == [("status", r.method, "running") for r in runners]
    assert [event for event in events if event[0] == "view"] == [] and scheduled == []


@pytest.mark.parametrize("click", ["pause", "stop"])
def test_pause_and_stop_send_every_status_in_one_message(fits, monkeypatch, click):
    """The click's statuses change under one hold of the page's document (one message to the browser),
    not one message per runner's change (each a write to the socket: on a server whose chains hold the
    GIL, each write waited for it again)."""
    from bokeh.document import Document

    runners = list(fits.runners.values())
    fits.start()
    drain_until(fits, lambda: all(r.iteration >= 5 for r in runners))
    document = Document()
    held = []
    for runner in runners:
        runner.param.watch(lambda *_: held.append(document.callbacks.hold_value), ["status"])
    monkeypatch.setattr(pn.state, "curdoc", document)
    getattr(fits, click)()
    monkeypatch.undo()
    assert len(held) == len(runners) and all(value is not None for value in held), held
    assert document.callbacks.hold_value is None  # released: the message has gone
