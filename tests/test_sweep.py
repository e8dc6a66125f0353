"""The epsilon sweep's library part: its task grid, points streamed as tasks finish, cancellation."""

import io
import math
import os
import threading
import time

import numpy as np
import pytest

from lpviz.engine import run
from lpviz.metrics import score
from lpviz.reproduce.chains import build_release, chain_task
from lpviz.reproduce.grid import ResultStore, run_tasks
from lpviz.reproduce.sweep import (
    RATIO_COLUMN,
    SWEEP_SCORES,
    SweepRun,
    check_ratios,
    close_shared_cluster,
    default_ratios,
    plotted_scores,
    point_row,
    shared_local_client,
    short_schedule,
    sweep_curves,
    sweep_frame,
    sweep_png,
    sweep_tasks,
)

DATA = {
    "source": "spec",
    "spec": "synthetic-topics",
    "options": {"n_docs": 30, "n_words": 10, "n_topics": 2, "random_state": 3},
}
METHODS = ["private", "naive", "nonprivate"]
RATIOS = [0.5, 1.0, 2.0]


def small_tasks(ratios=RATIOS, methods=METHODS, n_iter=40, **options):
    return sweep_tasks(
        DATA, ratios, methods, n_components=2, N=2.0, noise_seed=11, chain_seed=5, n_iter=n_iter, **options
    )


@pytest.fixture(scope="module")
def dask_client():
    """A LocalCluster of one in-process worker (threads, not processes: quick to start)."""
    from distributed import Client, LocalCluster

    with (
        LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster,
        Client(cluster, set_as_default=False) as client,
    ):  # run_tasks must not need a default client
        yield client


def test_the_grid_has_one_task_per_ratio_and_noised_method_and_one_fit_of_the_true_counts():
    tasks = small_tasks(holdout={"rule": "random cells", "fraction": 0.2, "seed": 4})
    assert [t.id for t in tasks] == [
        "eps_over_N=0.5--private",
        "eps_over_N=1--private",
        "eps_over_N=2--private",
        "eps_over_N=0.5--naive",
        "eps_over_N=1--naive",
        "eps_over_N=2--naive",
        "true-data--nonprivate",
    ]
    schedule = short_schedule(40)
    assert schedule == {"n_iter": 40, "burn_in": 10, "thin": 1}
    for task in tasks:
        params = task.params
        assert params["data"] == DATA and params["n_components"] == 2 and params["chain_seed"] == 5
        assert {key: params[key] for key in schedule} == schedule
        assert params["noise"]["N"] == 2.0 and params["noise"]["seed"] == 11
        assert params["holdout"] == {"rule": "random cells", "fraction": 0.2, "seed": 4}
        ratio = params["labels"][RATIO_COLUMN]
        if params["method"] == "nonprivate":
            assert ratio is None and params["noise"]["epsilon"] == 2.0  # the middle ratio: only its masks count
        else:
            assert params["noise"]["epsilon"] == pytest.approx(ratio * 2.0)
    # the release of each point is noised at alpha = exp(-epsilon / N), with the same held-out cells
    releases = [build_release(task.params)[1] for task in tasks[:3]]
    for release, ratio in zip(releases, RATIOS, strict=True):
        assert float(np.mean(release.alpha)) == pytest.approx(math.exp(-ratio))
        assert 0.1 < release.heldout.mean() < 0.3
        np.testing.assert_array_equal(release.heldout, releases[0].heldout)


def test_default_ratios_are_a_factor_two_apart_around_the_current_one_and_bad_ratios_are_refused():
    assert default_ratios(1.0) == [0.5, 1.0, 2.0]  # DEFAULT_POINTS: measured (lpviz.reproduce.sweep)
    assert default_ratios(1.0, points=6) == [0.125, 0.25, 0.5, 1.0, 2.0, 4.0]
    assert default_ratios(0.3, points=3) == [0.15, 0.3, 0.6]
    assert max(default_ratios(20.0)) <= 40  # none where the noise would be negligible
    assert check_ratios([2, 1, 2]) == [1.0, 2.0]
    with pytest.raises(ValueError, match="positive"):
        check_ratios([1, 0])
    with pytest.raises(ValueError, match="true counts"):
        check_ratios([1e6])
    with pytest.raises(ValueError, match="at least one method"):
        sweep_tasks(DATA, [1.0], [], n_components=2)
    with pytest.raises(ValueError, match="method must be one of"):
        sweep_tasks(DATA, [1.0], ["no-such-method"], n_components=2)
    with pytest.raises(ValueError, match="iterations per fit"):
        sweep_tasks(DATA, [1.0], ["private"], n_components=2, n_iter=3)
    for bad in (0, 2.5, True, 21):
        with pytest.raises(ValueError, match="noise draws per point"):
            sweep_tasks(DATA, [1.0], ["private"], n_components=2, n_draws=bad)


def test_each_point_is_noised_n_draws_times_with_consecutive_seeds_and_the_true_counts_fitted_once():
    tasks = small_tasks(ratios=[0.5, 2.0], n_draws=3)
    assert [t.id for t in tasks] == [
        "eps_over_N=0.5--private",
        "eps_over_N=0.5--private--draw=1",
        "eps_over_N=0.5--private--draw=2",
        "eps_over_N=2--private",
        "eps_over_N=2--private--draw=1",
        "eps_over_N=2--private--draw=2",
        "eps_over_N=0.5--naive",
        "eps_over_N=0.5--naive--draw=1",
        "eps_over_N=0.5--naive--draw=2",
        "eps_over_N=2--naive",
        "eps_over_N=2--naive--draw=1",
        "eps_over_N=2--naive--draw=2",
        "true-data--nonprivate",
    ]
    assert [t.params["noise"]["seed"] for t in tasks[:3]] == [11, 12, 13]
    assert [t.params["labels"]["draw"] for t in tasks[:3]] == [0, 1, 2]
    # the first draw is the single-draw sweep's point; the others are other releases at the same level
    assert tasks[0].params == small_tasks(ratios=[0.5, 2.0])[0].params
    releases = [build_release(task.params)[1] for task in tasks[:3]]
    assert not np.array_equal(releases[0].Y_obs, releases[1].Y_obs)
    assert all(float(np.mean(r.alpha)) == pytest.approx(math.exp(-0.5)) for r in releases)


def _point(method, ratio, draw, mae, healthy=True, flags=""):
    return {
        "method": method,
        "label": method,
        RATIO_COLUMN: ratio,
        "draw": draw,
        "alpha": math.exp(-ratio) if ratio == ratio else math.nan,
        **{key: math.nan for key in SWEEP_SCORES},
        "mae": mae,
        "healthy": healthy,
        "flags": flags,
        "best_constant_mae": 2.0 + draw,
        "independence_mae": 2.5 + draw,
        "iterations": 40,
        "seconds": 0.1,
        "task": f"{method}-{ratio}-{draw}",
    }


def test_the_curves_are_the_mean_over_draws_with_their_range_and_a_flagged_draw_flags_its_point():
    rows = [
        _point("naive", 1.0, 1, 3.0),
        _point("private", 1.0, 0, 1.0),
        _point("private", 1.0, 1, 2.0),
        _point("private", 1.0, 2, 6.0, healthy=False, flags="the chain has not mixed (R-hat, ESS)"),
        _point("naive", 1.0, 0, 5.0),
        _point("nonprivate", math.nan, 0, 0.5),
    ]
    frame = sweep_frame(rows)
    assert list(frame["method"]) == ["private"] * 3 + ["naive"] * 2 + ["nonprivate"]
    assert list(frame["draw"]) == [0, 1, 2, 0, 1, 0]
    curves = sweep_curves(frame).set_index("method")
    assert curves.loc["private", "mae"] == pytest.approx(3.0)
    assert (curves.loc["private", "mae_low"], curves.loc["private", "mae_high"]) == (1.0, 6.0)
    assert curves.loc["private", "draws"] == 3 and not curves.loc["private", "healthy"]
    assert curves.loc["private", "flags"] == "draw 2: the chain has not mixed (R-hat, ESS)"
    assert curves.loc["private", "best_constant_mae"] == pytest.approx(3.0)  # baselines averaged too
    assert curves.loc["naive", "mae"] == 4.0 and curves.loc["naive", "healthy"]
    assert math.isnan(curves.loc["nonprivate", RATIO_COLUMN]) and curves.loc["nonprivate", "draws"] == 1
    assert sweep_curves(sweep_frame([])).empty


def _run_to_the_end(sweep, timeout=120):
    events, deadline = [], time.monotonic() + timeout
    while not events or events[-1][0] not in ("finished", "cancelled", "error"):
        assert time.monotonic() < deadline, f"the sweep did not end: {events}"
        events += sweep.take()
        time.sleep(0.02)
    return events


def _own_score(task):
    """score() of the fit a task describes, fitted here with engine.run (not through chain_task)."""
    from lpviz import methods

    params = task.params
    _, release, truth = build_release(params)
    chain = run(
        release,
        model=params["model"],
        method=params["method"],
        n_components=params["n_components"],
        n_iter=params["n_iter"],
        burn_in=params["burn_in"],
        thin=params["thin"],
        random_state=params["chain_seed"],
        truth=truth if methods.get(params["method"]).uses_truth else None,
    )
    for _ in chain:
        pass
    return score(chain.posterior, release, truth)


@pytest.mark.parametrize("where", ["dask", "in-process"])
def test_points_stream_in_as_tasks_finish_and_every_number_is_the_fits_score(where, dask_client):
    tasks = small_tasks(holdout={"rule": "random cells", "fraction": 0.2, "seed": 4})
    sweep = SweepRun(tasks, scheduler=dask_client if where == "dask" else "serial").start()
    first_points_at, events = None, []
    deadline = time.monotonic() + 120
    while not events or events[-1][0] not in ("finished", "cancelled", "error"):
        assert time.monotonic() < deadline
        events += sweep.take()
        if first_points_at is None and any(kind == "point" for kind, _ in events):
            first_points_at = len([kind for kind, _ in events if kind == "point"])
            still_running = sweep.alive
        time.sleep(0.005)
    assert events[-1][0] == "finished", events[-1]
    points = [payload for kind, payload in events if kind == "point"]
    assert sorted(p["task"] for p in points) == sorted(t.id for t in tasks)
    assert first_points_at < len(tasks) and still_running  # streamed while the rest still ran
    assert events[-1][1]["done"] == len(tasks) and events[-1][1]["cancelled"] == 0
    by_id = {t.id: t for t in tasks}
    for point in points[:1] + points[-2:]:  # a noised fit and the fit of the true counts (the last, 1 worker)
        expected = _own_score(by_id[point["task"]])
        for key in SWEEP_SCORES:
            if expected[key] is None:
                assert math.isnan(point[key])
            else:
                assert point[key] == pytest.approx(expected[key], rel=1e-12), key
    frame = sweep_frame(points)
    assert len(frame) == len(tasks) and plotted_scores(frame) == ["mae", "heldout_mae", "npmi"]
    assert frame[RATIO_COLUMN].isna().sum() == 1  # the fit of the true counts
    # more noise, worse naive fit: its MAE falls as epsilon / N grows
    naive = frame[frame["method"] == "naive"].sort_values(RATIO_COLUMN)
    assert naive["mae"].iloc[0] > naive["mae"].iloc[-1]


def _counting(calls):
    def function(params):
        calls.append(params["labels"])
        return chain_task(params)

    return function


def test_cancel_after_the_first_result_leaves_the_rest_unrun_in_process(tmp_path):
    tasks = small_tasks()
    cancel, calls = threading.Event(), []
    store = ResultStore(tmp_path)
    stats = run_tasks(
        tasks, store, _counting(calls), scheduler="serial", cancel=cancel, on_result=lambda task: cancel.set()
    )
    assert len(calls) == 1 and [t.id for t in stats.executed] == [tasks[0].id]
    assert [t.id for t in stats.cancelled] == [t.id for t in tasks[1:]] and not stats.failed
    assert store.ids() == [tasks[0].id]


def test_cancel_after_the_first_result_leaves_the_rest_unrun_on_dask(tmp_path, dask_client):
    from distributed import get_task_stream

    tasks = small_tasks(n_iter=2000)  # each task longer than the cancel takes to arrive, even on a loaded machine
    cancel = threading.Event()
    store = ResultStore(tmp_path)
    with get_task_stream(dask_client) as stream:
        stats = run_tasks(
            tasks, store, chain_task, scheduler=dask_client, cancel=cancel, on_result=lambda task: cancel.set()
        )
        time.sleep(1.0)  # a task already running when the cancel came would be reported by now
    assert len(stats.executed) == 1 and store.ids() == [stats.executed[0].id]
    assert len(stats.cancelled) == len(tasks) - 1 and not stats.failed
    ran = {entry["key"] for entry in stream.data if "lpviz-" in str(entry["key"])}
    assert 1 <= len(ran) <= 2  # the finished one and at most the one running beside it; the rest never started
    # without a cancel flag the runner is as before: every task, in any order
    stats = run_tasks(tasks[:2], ResultStore(tmp_path / "again"), chain_task, scheduler=dask_client)
    assert len(stats.executed) == 2 and not stats.cancelled


def test_a_cancelled_sweep_hands_over_no_point_after_the_cancel(dask_client):
    tasks = small_tasks(n_iter=400)
    sweep = SweepRun(tasks, scheduler=dask_client).start()
    events, deadline = [], time.monotonic() + 120
    while not any(kind == "point" for kind, _ in events):
        assert time.monotonic() < deadline
        events += sweep.take()
        time.sleep(0.005)
    sweep.cancel()
    events += _run_to_the_end(sweep)
    points = [payload for kind, payload in events if kind == "point"]
    kind, summary = events[-1]
    assert kind == "cancelled" and summary["done"] == len(points) < len(tasks)
    assert summary["cancelled"] == len(tasks) - len(points)


def test_the_shared_local_cluster_runs_a_sweep_on_worker_processes():
    from distributed import get_task_stream

    try:
        client = shared_local_client(workers=1)
        assert shared_local_client() is client  # one cluster for every later sweep
        worker_pids = set(client.run(os.getpid).values())
        assert len(worker_pids) == 1 and os.getpid() not in worker_pids  # a worker process, not this one
        tasks = small_tasks(ratios=[1.0], methods=["private", "naive"])
        with get_task_stream(client) as stream:
            events = _run_to_the_end(SweepRun(tasks).start())  # the default scheduler: the shared cluster
        assert events[0] == ("where", "on the shared local Dask cluster (1 worker)")
        points = [payload for kind, payload in events if kind == "point"]
        assert events[-1][0] == "finished" and sorted(p["task"] for p in points) == sorted(t.id for t in tasks)
        assert len([entry for entry in stream.data if "lpviz-" in str(entry["key"])]) == 2  # run by its worker
    finally:
        close_shared_cluster()


def test_the_png_draws_one_panel_per_plotted_score(tmp_path):
    tasks = small_tasks(ratios=[0.5, 2.0])
    rows = []
    store = ResultStore(tmp_path)
    run_tasks(
        tasks,
        store,
        chain_task,
        scheduler="serial",
        on_result=lambda task: rows.append(point_row(task, store.read_record(task.id))),
    )
    frame = sweep_frame(rows)
    assert plotted_scores(frame) == ["mae", "npmi"]  # nothing held out: no held-out MAE
    png = sweep_png(frame, title="test")
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    from PIL import Image

    width, height = Image.open(io.BytesIO(png)).size
    assert width > 1.8 * height  # two panels side by side


def test_a_server_given_a_scheduler_address_runs_its_sweeps_on_that_cluster(dask_client, monkeypatch):
    from distributed import get_task_stream

    from lpviz.dashboard.serve import parse_args

    assert parse_args(["--scheduler", "tcp://example:8786"]).scheduler == "tcp://example:8786"
    address = dask_client.scheduler.address
    monkeypatch.setenv("LPVIZ_SCHEDULER", address)  # what `python -m lpviz.dashboard.serve --scheduler` sets
    tasks = small_tasks(ratios=[1.0], methods=["naive"])
    with get_task_stream(dask_client) as stream:
        events = _run_to_the_end(SweepRun(tasks).start())
    assert events[0] == ("where", f"on the Dask cluster at {address}")
    assert events[-1][0] == "finished" and [p["task"] for k, p in events if k == "point"] == [tasks[0].id]
    assert [entry["key"] for entry in stream.data if "lpviz-" in str(entry["key"])]  # ran on that cluster
