"""Issue 37: Reset answers first, clears after. Its status (a few words on the progress line) changes
before the traces and the result are cleared (every trace plot and view redrawn: seconds of a loaded
server, which kept "idle" from the page that long), and the traces and result are empty afterwards; a
clear left pending when a new run starts clears nothing of the new run (no mix of old and new)."""

import pytest

from tests.test_app_fits import closing_fits, drain_until


@pytest.fixture
def fits():
    with closing_fits(n_iter=30, burn_in=10, thin=5) as fits:
        yield fits


def record(runners):
    """A list that gets ("status", method, new), ("result", method, new) and ("traces", method, rows)
    in the order the runners' parameters change and their trace buffers are sent."""
    events = []
    for runner in runners:
        method = runner.method

        def on_change(*changes, method=method):
            for change in changes:
                events.append((change.name, method, change.new))

        runner.param.watch(on_change, ["status", "result"])
        runner.buffer.add_subscriber(lambda method=method, **data: events.append(("traces", method, None)))
    return events


@pytest.mark.parametrize("when", ["done", "running"])
def test_reset_changes_the_status_before_clearing_the_traces_and_result(fits, when):
    runners = list(fits.runners.values())
    fits.start()
    if when == "done":
        drain_until(fits, lambda: all(r.status == "done" for r in runners))
    else:
        drain_until(fits, lambda: all(r.result is not None and len(r.buffer.data) for r in runners))
    assert all(r.result is not None and len(r.buffer.data) > 0 for r in runners)
    events = record(runners)
    fits.reset()
    drain_until(fits, lambda: all(r.status == "idle" for r in runners))
    for runner in runners:
        mine = [(kind, new) for kind, method, new in events if method == runner.method]
        first_status = next(i for i, (kind, _) in enumerate(mine) if kind == "status")
        cleared = [i for i, (kind, new) in enumerate(mine) if kind == "traces" or (kind == "result" and new is None)]
        assert len(cleared) == 2, mine  # the traces once, the result once
        assert first_status < min(cleared), mine  # the status first ("idle", or "stopping" when a worker leaves)
        assert mine[first_status][1] in ("idle", "stopping")
        # and afterwards: nothing of the old run
        assert runner.status == "idle" and runner.iteration == 0 and runner.result is None
        assert len(runner.buffer.data) == 0


def test_a_clear_left_pending_by_reset_clears_nothing_of_a_new_run(fits):
    runner = fits.runners["nonprivate"]
    fits.settings.param.update(methods=["nonprivate"])
    runner.start()
    drain_until(fits, lambda: runner.status == "done")
    forget = runner.reset(clear=False)
    # the status has answered, the old traces and result are still there (until forget runs)
    assert runner.status == "idle" and runner.iteration == 0
    assert runner.result is not None and len(runner.buffer.data) > 0
    runner.start()  # a new run before the pending clear: its start clears the old run itself
    drain_until(fits, lambda: runner.status == "done")
    result, rows = runner.result, len(runner.buffer.data)
    assert result["iteration"] == 30 and rows > 0
    forget()  # comes late: must not touch the new run
    assert runner.result is result and len(runner.buffer.data) == rows and runner.iteration == 30
    # a pending clear of the current (reset) run does clear
    runner.reset(clear=False)()
    assert runner.result is None and len(runner.buffer.data) == 0
