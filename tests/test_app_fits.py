"""Chain runners and the fits view, without a browser: real chains in worker threads."""

import time

import holoviews as hv
from holoviews.core.spaces import get_nested_streams
import numpy as np
import pytest

from app.fits_view import FitsView
from app.runner import METHODS, TRACE_COLUMNS
from app.store import DataStore
from lpviz.metrics import heldout_mae, mae

TIMEOUT = 120  # seconds; generous for a loaded 2-core CI machine and a cold numba cache


def drain_until(store, condition, timeout=TIMEOUT):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out; runners: { {m: (r.status, r.iteration, r.error) for m, r in store.runners.items()} }")
        time.sleep(0.05)
        store.drain()


@pytest.fixture
def store():
    store = DataStore(buffer_length=10_000)
    store.param.update(n_iter=120, burn_in=40, thin=10)
    yield store
    store.close()
    for runner in store.runners.values():
        runner.join(timeout=30)


def test_a_run_streams_every_iteration_and_ends_done(store):
    store.start()
    assert all(r.status == "running" for r in store.runners.values())
    drain_until(store, lambda: all(r.status == "done" for r in store.runners.values()))
    for method, runner in store.runners.items():
        trace = runner.trace()
        assert list(trace.columns) == list(TRACE_COLUMNS)
        np.testing.assert_array_equal(trace["iteration"], np.arange(1, 121))
        assert runner.iteration == 120
        assert np.isfinite(trace["log_joint"]).all() and np.isfinite(trace["mae"]).all()
        # the posterior-mean MAE starts with the first saved sample (iteration 50)
        assert trace["mae_mean"][trace["iteration"] < 50].isna().all()
        assert trace["mae_mean"][trace["iteration"] >= 50].notna().all()
        assert trace["heldout_mae"].isna().all()  # nothing held out
        result = runner.result
        assert result["samples_saved"] == 8 and result["iteration"] == 120
        # the last trace row is the MAE of the final sample and of the posterior mean, against the truth
        assert trace["mae"].iloc[-1] == pytest.approx(mae(result["mu"], store.data.mu))
        assert trace["mae_mean"].iloc[-1] == pytest.approx(mae(result["mu_hat"], store.data.mu))
        assert set(result["best"]) == {"theta", "phi"}
        assert result["best"]["phi"].shape == (3, 15)
        assert result["best_log_joint"] >= trace["log_joint"][trace["iteration"].isin(range(50, 121, 10))].max() - 1e-9
        assert runner.chain is not None and runner.chain.iteration == 120
    assert store.runners["private"].chain.bessel_draws is not None


def test_methods_see_what_they_should(store):
    problem = store.problem()
    np.testing.assert_array_equal(problem.chain_input("private"), store.Y_obs)
    np.testing.assert_array_equal(problem.chain_input("naive"), np.maximum(store.Y_obs, 0))
    np.testing.assert_array_equal(problem.chain_input("nonprivate"), store.Y_true)


def test_pause_stops_the_stream_and_resume_continues(store):
    store.param.update(n_iter=100_000, burn_in=10)
    store.start()
    drain_until(store, lambda: all(r.iteration >= 5 for r in store.runners.values()))
    store.pause()
    time.sleep(0.3)  # let a worker finish the iteration it is in
    store.drain()
    paused_at = {m: len(r.buffer.data) for m, r in store.runners.items()}
    time.sleep(0.5)
    store.drain()
    assert {m: len(r.buffer.data) for m, r in store.runners.items()} == paused_at
    assert all(r.status == "paused" and r.iterations_per_second == 0 for r in store.runners.values())
    store.resume()
    drain_until(store, lambda: all(len(r.buffer.data) > paused_at[m] + 5 for m, r in store.runners.items()))
    assert all(r.status == "running" for r in store.runners.values())
    drain_until(store, lambda: all(r.iterations_per_second > 0 for r in store.runners.values()))
    store.stop()
    assert all(r.status == "stopped" for r in store.runners.values())
    for runner in store.runners.values():
        assert runner.join(timeout=30)
        kept = runner.iteration
        store.drain()
        assert runner.status == "stopped" and runner.iteration >= kept


def test_reset_clears_traces_and_results_and_ignores_late_rows(store):
    store.param.update(n_iter=100_000)
    store.start()
    drain_until(store, lambda: all(len(r.buffer.data) > 3 for r in store.runners.values()))
    store.reset()
    for runner in store.runners.values():
        runner.join(timeout=30)
    store.drain()  # whatever the stopped workers queued is dropped
    for runner in store.runners.values():
        assert runner.status == "idle" and runner.iteration == 0 and runner.result is None
        assert len(runner.buffer.data) == 0


def test_changing_the_noise_resets_running_chains(store):
    store.param.update(n_iter=100_000)
    store.start()
    drain_until(store, lambda: all(r.iteration > 0 for r in store.runners.values()))
    store.epsilon = 3.0
    assert all(r.status == "idle" and len(r.buffer.data) == 0 for r in store.runners.values())
    assert store.runners["private"].problem.alpha == pytest.approx(np.exp(-3.0))


def test_buffers_are_bounded_and_span_the_whole_run(store):
    runner = store.runners["naive"]
    runner.buffer.length = 25  # keep this test short
    store.param.update(n_iter=80)
    assert runner.stride == 4  # 80 iterations into 25 rows
    runner.start()
    drain_until(store, lambda: runner.status == "done")
    np.testing.assert_array_equal(runner.trace()["iteration"], [1, *range(4, 81, 4)])
    assert runner.result["iteration"] == 80


def test_trace_every_thins_the_stream(store):
    store.param.update(trace_every=10, n_iter=60)
    store.runners["nonprivate"].start()
    drain_until(store, lambda: store.runners["nonprivate"].status == "done")
    np.testing.assert_array_equal(store.runners["nonprivate"].trace()["iteration"], [1, 10, 20, 30, 40, 50, 60])


def test_heldout_mae_is_traced_on_blocks(store):
    store.source = "synthetic-blocks"
    store.param.update(holdout="top actors", holdout_actors=2, n_iter=60, burn_in=20, thin=10)
    runner = store.runners["private"]
    runner.start()
    drain_until(store, lambda: runner.status == "done")
    trace, result = runner.trace(), runner.result
    assert trace["heldout_mae"].iloc[-1] == pytest.approx(heldout_mae(result["mu_hat"], store.data.mu, store.mask))
    assert trace["mae"].iloc[-1] == pytest.approx(mae(result["mu"], store.data.mu, store.mask))
    assert set(result["best"]) == {"theta", "pi"}


def test_a_chain_error_is_shown_not_swallowed(store):
    store.n_components = 3
    store.runners["private"].problem = store.problem().__class__(
        **{**store.problem().__dict__, "alpha": None})  # private chains need alpha
    store.runners["private"].start()
    drain_until(store, lambda: store.runners["private"].status == "error")
    assert "alpha" in store.runners["private"].error


def test_two_stores_do_not_share_runs():
    first, second = DataStore(), DataStore()
    first.param.update(n_iter=30)
    first.runners["naive"].start()
    drain_until(first, lambda: first.runners["naive"].status == "done")
    second.drain()
    assert len(first.runners["naive"].buffer.data) == 30
    assert len(second.runners["naive"].buffer.data) == 0 and second.runners["naive"].status == "idle"
    assert first.runners["naive"].buffer is not second.runners["naive"].buffer


def _curves(pane):
    """The curves of a collated overlay of live traces, one per (runner, column)."""
    return list(pane.object[()].traverse(lambda element: element, [hv.Curve]))


def test_fits_view_plots_the_buffers_and_pipes_the_rates(store):
    view = FitsView(store=store)
    mae_pane, joint_pane = view.traces()[0].objects
    assert len(_curves(mae_pane)) == 2 * len(METHODS)  # sample and posterior-mean MAE per method
    assert len(_curves(joint_pane)) == len(METHODS)
    assert set(get_nested_streams(mae_pane.object)) == {store.runners[m].buffer for m in METHODS}
    assert "true rates" in mae_pane.object[()].opts.get().kwargs["title"]
    rates = view.rates()
    store.param.update(n_iter=30, burn_in=10, thin=5)
    store.runners["nonprivate"].start()
    drain_until(store, lambda: store.runners["nonprivate"].status == "done")
    values, title = view._rate_pipes["nonprivate"].data
    np.testing.assert_allclose(values, store.runners["nonprivate"].result["mu_hat"])
    assert "mean of 4 samples" in title
    assert len(rates.object) == 4  # truth + three methods
    store.holdout = "random cells"
    assert len(_curves(view.traces()[0].objects[0])) == 3 * len(METHODS)  # plus held-out MAE


def test_rate_heatmaps_are_throttled_while_running_and_exact_when_paused(store, monkeypatch):
    import app.fits_view

    monkeypatch.setattr(app.fits_view, "RATE_REDRAW_SECONDS", 1000.0)  # no redraw while running here
    view = FitsView(store=store)
    view.rates()
    runner = store.runners["naive"]
    pipe = view._rate_pipes["naive"]
    store.param.update(n_iter=1_000_000, burn_in=10, thin=5)
    runner.start()
    drain_until(store, lambda: runner.result is not None)
    assert pipe.data[1] == "not started"  # Start streams trace rows first; the heatmap follows later
    runner.pause()
    time.sleep(0.3)
    store.drain()
    values, _ = pipe.data
    np.testing.assert_allclose(values, FitsView._rate_frame(runner.result, store.Y_true.shape)[0])
    store.stop()


def test_a_drain_triggers_each_buffer_once_and_streams_every_method(store):
    triggers = []
    for runner in store.runners.values():
        runner.buffer.add_subscriber(lambda runner=runner, **kwargs: triggers.append(runner.method))
    store.param.update(n_iter=40)
    store.start()
    drain_until(store, lambda: all(r.status == "done" for r in store.runners.values()))
    assert all(len(r.buffer.data) == 40 for r in store.runners.values())
    assert set(triggers) == set(METHODS)
    assert store.drain() == 0  # nothing queued: nothing redrawn


def test_lockstep_keeps_a_fast_chain_within_slack_of_a_slow_one():
    import threading

    from app.runner import Lockstep

    pace, stop, run = Lockstep(slack=5), threading.Event(), threading.Event()
    run.set()
    counts, gaps = {"fast": 0, "slow": 0}, []

    def work(name, seconds_per_step):
        token = object()
        pace.join(token)
        for _ in range(40):
            pace.wait(token, stop, run)
            # how far ahead this worker starts its iteration (others only move forward meanwhile)
            snapshot = dict(pace._counts)
            others = [count for key, count in snapshot.items() if key is not token]
            if others:
                gaps.append(snapshot[token] - min(others))
            time.sleep(seconds_per_step)
            pace.advance(token)
            counts[name] += 1
        pace.leave(token)

    threads = [threading.Thread(target=work, args=("fast", 0.0)), threading.Thread(target=work, args=("slow", 0.003))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert counts == {"fast": 40, "slow": 40}
    assert max(gaps) <= 5  # no iteration starts more than the slack ahead of the slowest chain
    assert max(gaps) >= 3  # and the fast chain did run ahead: the bound was what held it

    # a chain joining later starts level with the slowest one running, so it holds nobody back
    ahead, late = object(), object()
    pace.join(ahead)
    for _ in range(100):
        pace.advance(ahead)
    pace.join(late)
    stop.clear()
    started = time.monotonic()
    pace.wait(ahead, stop, run)
    assert time.monotonic() - started < 0.5
    pace.leave(ahead), pace.leave(late)


def test_a_stores_runners_share_one_lockstep(store):
    paces = {id(runner.pace) for runner in store.runners.values()}
    assert len(paces) == 1 and store.runners["private"].pace is not None
    assert DataStore().runners["private"].pace is not store.runners["private"].pace
