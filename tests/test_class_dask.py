"""The sessions' chains on Dask workers (lpviz.dashboard.session.remote): a real LocalCluster of 2 worker processes.

A session's chains run in its host on a worker (threads of the worker process,
not of this one), their trace rows and snapshots stream back into the
runners, and the controls' state machine keeps every invariant it keeps with
local threads (the Hypothesis click test of tests/test_class_state.py runs
against the cluster too). Pause, Stop, Reset and the session's end release the
worker's runs; a killed worker ends its sessions' runs with an error that says
so, other sessions go on, and Start runs again on a live worker.
"""

import os
import signal
import threading
import time

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import precondition, rule

from lpviz.dashboard.session.remote import ChainCluster, DaskPlace
from tests.test_class_state import Clicks, check_consistent, drain_until, make_fits, start_makes_progress

_CLUSTER: dict = {}  # the module's cluster, for the Hypothesis test (which takes no fixture)


@pytest.fixture(scope="module")
def cluster():
    from distributed import Client

    from lpviz.reproduce.grid import local_cluster

    dask_cluster = local_cluster(2, threads=1)  # 2 worker processes, one Dask thread (one chain place) each
    client = Client(dask_cluster, set_as_default=False, direct_to_workers=True)
    chains = ChainCluster(client)
    _CLUSTER["chains"] = chains
    try:
        yield chains
    finally:
        _CLUSTER.clear()
        client.close()
        dask_cluster.close()


def session(cluster, n_iter=100_000):
    fits = make_fits(n_iter=n_iter, place=DaskPlace(cluster))
    return fits


def worker_pids(cluster):
    return cluster.client.run(os.getpid)  # worker address -> pid


def chain_threads_on_workers(cluster):
    """Chain threads alive in each worker process: worker address -> their names."""

    def names():
        return sorted(t.name for t in threading.enumerate() if t.name.endswith("-chain") and t.is_alive())

    return cluster.client.run(names)


def scheduler_keys(cluster):
    return cluster.client.run_on_scheduler(lambda dask_scheduler: [str(key) for key in dask_scheduler.tasks])


def wait_until(condition, what, timeout=60):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} within {timeout} s")
        time.sleep(0.05)


def local_chain_threads():
    return [t.name for t in threading.enumerate() if t.name.startswith("lpviz-") and t.name.endswith("-chain")]


def test_a_sessions_chains_run_on_a_worker_and_stream_back(cluster):
    import psutil

    fits = session(cluster)
    try:
        start_makes_progress(fits)
        handles = {name: runner._worker for name, runner in fits.active.items()}
        pids = worker_pids(cluster)
        host_pid = pids[fits.place.worker]
        # every chain runs in the session's host, a worker process, and none in this one
        assert {handle.pid for handle in handles.values()} == {host_pid} and host_pid != os.getpid()
        assert not local_chain_threads()
        on_workers = chain_threads_on_workers(cluster)
        assert sorted(on_workers[fits.place.worker]) == sorted(f"lpviz-{name}-chain" for name in fits.active)
        # the chains' CPU is the worker's: over two seconds of running, the worker process works
        # (about a core) while this process (the "server": drains, the scheduler, the client) does far less
        worker, here = psutil.Process(host_pid), psutil.Process()
        before = (sum(worker.cpu_times()[:2]), sum(here.cpu_times()[:2]))
        reached = {name: runner.iteration for name, runner in fits.active.items()}
        end = time.monotonic() + 2.0
        while time.monotonic() < end:
            time.sleep(0.2)  # the session's drain period
            fits.drain()
        worker_cpu = sum(worker.cpu_times()[:2]) - before[0]
        here_cpu = sum(here.cpu_times()[:2]) - before[1]
        assert worker_cpu > 3 * here_cpu, (worker_cpu, here_cpu)
        # what the views read streamed back: trace rows, snapshots of the release's shape, scores
        shape = fits.data.release.shape
        for name, runner in fits.active.items():
            assert runner.iteration > reached[name]
            assert len(runner.buffer.data) > 0 and runner.buffer.data["iteration"].is_monotonic_increasing
            # a posterior's score arrives with a snapshot after the first saved sample (two chains per
            # method score more slowly than one: wait for it rather than for a fixed time)
            drain_until(fits, lambda r=runner: r.result is not None and r.result["score"], "a scored snapshot")
            assert runner.result["mu"].shape == shape and runner.result["score"]
            assert runner.iterations_per_second > 0
    finally:
        fits.close()
    # the session's end: its runs gone from the worker, its host gone from the cluster
    assert not any(chain_threads_on_workers(cluster).values())
    wait_until(lambda: not any("lpviz-session" in key for key in scheduler_keys(cluster)), "host released")


def test_pause_stop_reset_extend_and_close_release_the_workers_runs(cluster):
    fits = session(cluster)
    try:
        start_makes_progress(fits)
        fits.pause()
        drain_until(fits, lambda: fits.state == "paused", "paused")
        census = fits.place.census()
        assert len(census) == len(fits.active)
        assert all(state[:2] == (False, False) for _, state in census.values()), census  # paused there too
        held = {name: runner.iteration for name, runner in fits.active.items()}
        time.sleep(0.5)
        fits.drain()
        assert {name: runner.iteration for name, runner in fits.active.items()} == held  # no progress paused
        fits.resume()
        drain_until(fits, lambda: all(r.iteration > held[n] + 2 for n, r in fits.active.items()), "resumed")

        fits.stop()
        drain_until(fits, lambda: fits.state == "stopped", "stopped")
        assert fits.place.census() == {} and not any(chain_threads_on_workers(cluster).values())
        check_consistent(fits)

        start_makes_progress(fits)
        fits.reset()
        drain_until(fits, lambda: fits.state == "idle", "idle")
        assert fits.place.census() == {}
        assert all(r.iteration == 0 and len(r.buffer.data) == 0 for r in fits.runners.values())

        # a run that ends keeps its chain on the worker: Resume continues the same chain there
        fits.settings.n_iter = 60
        fits.start()
        drain_until(fits, lambda: fits.state == "done", "done")
        assert all(r.iteration == 60 for r in fits.active.values())
        saved = {name: runner.result["samples_saved"] for name, runner in fits.active.items()}
        fits.resume()
        drain_until(fits, lambda: fits.state == "done" and all(r.target == 120 for r in fits.active.values()), "ext")
        for name, runner in fits.active.items():
            assert runner.iteration == 120 and runner.result["samples_saved"] > saved[name]  # the same posterior
        check_consistent(fits)
    finally:
        fits.close()
    assert not any(chain_threads_on_workers(cluster).values())
    wait_until(lambda: not any("lpviz-session" in key for key in scheduler_keys(cluster)), "host released")


def test_a_killed_worker_gives_a_clear_error_and_start_runs_again(cluster):
    first, second = session(cluster), session(cluster)
    try:
        start_makes_progress(first)
        start_makes_progress(second)
        assert first.place.worker != second.place.worker  # each session on the worker with fewer sessions
        os.kill(worker_pids(cluster)[first.place.worker], signal.SIGKILL)
        drain_until(first, lambda: all(r.status == "error" for r in first.active.values()), "error", timeout=60)
        for runner in first.active.values():
            assert "was lost" in runner.error and "press Start" in runner.error, runner.error
            assert not runner.is_alive
        check_consistent(first)
        # the other session goes on
        reached = {name: runner.iteration for name, runner in second.active.items()}
        drain_until(second, lambda: all(r.iteration > reached[n] + 2 for n, r in second.active.items()), "progress")
        assert second.state == "running"
        # Start runs again, on a live worker
        cluster.client.wait_for_workers(2, timeout=120)  # the nanny restarts the killed one
        start_makes_progress(first)
        assert first.place.worker in worker_pids(cluster)
    finally:
        first.close()
        second.close()
    wait_until(lambda: not any(chain_threads_on_workers(cluster).values()), "no chain left on the workers")


def test_a_host_whose_server_has_gone_stops_its_chains(cluster):
    """A host nobody takes from (its server died) stops its chains after ``orphan_seconds``."""
    from lpviz.dashboard.session.remote import ChainHost

    fits = session(cluster)  # only for its Problem
    client = cluster.client
    future = client.submit(ChainHost, "orphan", orphan_seconds=2.0, actor=True, key="lpviz-session-orphan")
    try:
        with client.as_current():  # the actor binds to this client
            host = future.result()
            schedule = dict(n_iter=100_000, burn_in=10, thin=10, stride=1, options={})
            steering = (1, (False, True, 0))  # numbered; not stopped, running, no pause
            host.launch("naive-1", "naive", 1, 1, fits.problem(), schedule, 100_000, False, True, steering).result()
            assert [method for method, _ in host.census().result().values()] == ["naive"]
            wait_until(lambda: host.census().result() == {}, "the orphaned chain stopped", timeout=30)
        assert not any(chain_threads_on_workers(cluster).values())
    finally:
        fits.close()
        client.cancel([future], force=True)


def test_the_server_flags_say_where_the_chains_run(cluster, monkeypatch):
    from lpviz.dashboard.serve import parse_args
    from lpviz.dashboard.session import remote
    from lpviz.dashboard.session.remote import default_place
    from lpviz.dashboard.session.runner import LocalPlace

    assert parse_args(["--scheduler", "tcp://example:8786"]).chains == "cluster"
    assert parse_args(["--scheduler", "tcp://example:8786", "--chains", "server"]).chains == "server"
    assert parse_args([]).chains == "server"
    # without an address the server starts a LocalCluster for them (lpviz.dashboard.serve.start_local_cluster)
    args = parse_args(["--chains", "cluster"])
    assert args.chains == "cluster" and args.scheduler is None
    monkeypatch.setenv("LPVIZ_CHAINS", "server")
    assert isinstance(default_place(), LocalPlace)
    monkeypatch.setenv("LPVIZ_CHAINS", "cluster")
    monkeypatch.setattr(remote, "_SHARED", [cluster])  # what `python -m lpviz.dashboard.serve --scheduler` connected
    place = default_place()
    assert isinstance(place, DaskPlace) and place.cluster is cluster
    monkeypatch.setenv("LPVIZ_CHAINS", "elsewhere")
    with pytest.raises(ValueError, match="LPVIZ_CHAINS"):
        default_place()


def check_mirrored(fits, timeout=30):
    """The worker's runs do what the page says: a "paused" runner's run is paused there (the same
    pause), a "running" one's runs (or has just ended), a still one has no run there."""
    deadline = time.monotonic() + timeout
    while True:
        census = fits.place.census()
        wrong = []
        for name, runner in fits.runners.items():
            there = [state for method, state in census.values() if method == name]
            control = runner._control
            if runner.status == "paused":
                ok = there == [(False, False, control.pauses)]
            elif runner.status == "running":
                ok = there in ([], [(False, True, control.pauses)])
            else:
                ok = not there
            if not ok:
                wrong.append(f"{name} reads {runner.status!r}, its runs on the worker: {there}")
        if not wrong:
            return
        if time.monotonic() > deadline:
            pytest.fail("; ".join(wrong))
        time.sleep(0.05)


class DaskClicks(Clicks):
    """tests/test_class_state.py's click sequences, with the session's chains on the cluster."""

    place = staticmethod(lambda: DaskPlace(_CLUSTER["chains"]))

    @precondition(lambda self: self.fits.state in ("pausing", "stopping", "starting"))
    @rule()
    def settle(self):
        """Let the transitions settle; then the runs on the worker are what the page shows."""
        moving = ("pausing", "stopping", "starting")
        drain_until(self.fits, lambda: not any(r.status in moving for r in self.fits.runners.values()), "settled", 30)
        check_mirrored(self.fits)


DaskClicks.TestCase.settings = settings(
    max_examples=6,
    stateful_step_count=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@pytest.mark.usefixtures("cluster")
class TestClickSequencesOnTheCluster(DaskClicks.TestCase):  # type: ignore[name-defined]
    """Any click sequence stays consistent, and Start then runs, with the chains on Dask workers."""
