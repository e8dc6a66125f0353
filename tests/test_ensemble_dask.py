"""Whole chains on Dask workers (issue 39 item 1): lpviz.fit/run(chains=C > 1, scheduler=...) equal to
the in-process ensemble of the same seed; progress streams; stop, Ctrl-C and errors end every chain."""

import json
import socket
import time

import numpy as np
import pytest

pytest.importorskip("distributed")

from distributed import Client, LocalCluster  # noqa: E402

import lpviz  # noqa: E402
from lpviz.cli import main  # noqa: E402
from lpviz.datasets import make_topics  # noqa: E402
from lpviz.distributed import SchedulerUnreachable, cluster_workers  # noqa: E402
from lpviz.ensemble import EnsemblePosterior  # noqa: E402

FIT = dict(n_components=3, n_iter=120, thin=5, random_state=11)
CLUSTER_WORKERS = 2  # the conftest's client: a LocalCluster of 2 worker threads


@pytest.fixture(scope="module")
def data():
    return make_topics(alpha0=0.5, random_state=0)  # 90 x 15, K = 3


def _equal(a, b):
    assert isinstance(b, EnsemblePosterior) and b.n_chains == a.n_chains
    assert np.array_equal(a.mu_hat, b.mu_hat)
    assert np.array_equal(a.log_joint, b.log_joint)
    assert np.array_equal(a.log_marginal, b.log_marginal, equal_nan=True)
    assert a.saved_iterations == b.saved_iterations
    for x, y in zip(a.samples, b.samples, strict=True):
        assert np.array_equal(x["theta"], y["theta"]) and np.array_equal(x["phi"], y["phi"])


def test_chains_on_workers_equal_the_in_process_ensemble(client, data):
    release = data.release()
    reference = lpviz.fit(release, chains=3, **FIT)
    states = []
    got = lpviz.fit(release, chains=3, scheduler=client, callback=states.append, **FIT)
    _equal(reference, got)
    # every iteration of every chain reported once, in order, with the chain's own log joint
    for chain in range(3):
        mine = [s for s in states if s.chain == chain]
        assert [s.iteration for s in mine] == list(range(1, FIT["n_iter"] + 1))
        assert np.array_equal([s.log_joint for s in mine], reference.chains[chain].log_joint)


def test_run_streams_states_and_a_generator_seed_moves_as_in_process(client, data):
    release = data.release()
    rng_here, rng_there = np.random.default_rng(5), np.random.default_rng(5)
    reference = lpviz.fit(release, n_components=3, n_iter=80, thin=5, random_state=rng_here, chains=2)
    run = lpviz.run(release, n_components=3, n_iter=80, thin=5, random_state=rng_there, chains=2, scheduler=client)
    seen = [(chain, state.iteration) for chain, state in run]
    assert sorted(seen) == [(c, i) for c in range(2) for i in range(1, 81)]
    _equal(reference, run.posterior)
    assert rng_here.integers(1 << 30) == rng_there.integers(1 << 30)  # the caller's generator moved alike


def test_chains_on_worker_processes_equal_the_in_process_ensemble(data):
    release = data.release()
    reference = lpviz.fit(release, chains=2, sampler="bessel", **FIT)
    with LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None) as cluster:
        got = lpviz.fit(release, chains=2, sampler="bessel", scheduler=cluster.scheduler_address, **FIT)
    _equal(reference, got)


def _no_chain_tasks(client, wait=30.0):
    """Whether every lpviz chain task has left the cluster within ``wait`` seconds (cancelled or stopped)."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        running = [key for keys in client.processing().values() for key in keys if "lpviz-chain" in str(key)]
        if not running:
            return True
        time.sleep(0.2)
    return False


def test_ctrl_c_stops_every_chain_on_the_cluster(client, data):
    # chains that would run for minutes: a KeyboardInterrupt in the callback must end them all
    def interrupt(state):
        if state.iteration >= 20:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        lpviz.fit(
            data.release(), n_components=3, n_iter=2_000_000, thin=1000, chains=2, scheduler=client, callback=interrupt
        )
    assert _no_chain_tasks(client)


def test_stop_ends_every_chain_with_what_it_has(client, data):
    run = lpviz.run(data.release(), n_components=3, n_iter=2_000_000, thin=1000, chains=2, scheduler=client)
    for _, state in run:
        if state.iteration >= 30:
            run.stop()
    posterior = run.posterior
    assert all(30 <= chain.iterations < 2_000_000 for chain in posterior.chains)
    assert _no_chain_tasks(client)


def test_an_error_on_a_worker_reaches_the_caller(client, data):
    with pytest.raises(ValueError, match="sampler"):
        lpviz.fit(data.release(), chains=2, scheduler=client, sampler="nonsense", **FIT)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_scheduler_is_one_clear_message(data):
    port = _free_port()
    started = time.monotonic()
    with pytest.raises(SchedulerUnreachable, match=f"127.0.0.1:{port}.*within 1 s"):
        lpviz.fit(data.release(), chains=2, scheduler=f"tcp://127.0.0.1:{port}", timeout=1, **FIT)
    assert time.monotonic() - started < 60  # a bound on a hang, not a speed target


def test_run_refuses_one_chain_or_restarts_on_a_scheduler(client, data):
    with pytest.raises(ValueError, match="chains=1, scheduler="):
        lpviz.run(data.release(), chains=1, scheduler=client, **FIT)
    with pytest.raises(ValueError, match="restarts"):
        lpviz.run(data.release(), inference="vi", restarts=2, scheduler=client, n_components=3)


ARGS = ["fit", "--data", "synthetic-topics", "--iterations", "60", "--thin", "5", "--seed", "3", "--noise-seed", "3"]
ARGS += ["--no-progress", "--json", "--chains", "2"]


def _untimed(value):
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if k not in ("seconds", "iterations_per_second")}
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    return value


def test_cli_chains_on_a_scheduler_print_the_in_process_summary(client, capsys):
    assert main(ARGS) == 0
    here = json.loads(capsys.readouterr().out)
    assert main(ARGS + ["--scheduler", client.scheduler.address]) == 0
    there = json.loads(capsys.readouterr().out)
    assert _untimed(there) == _untimed(here)
    assert "chains" in there and len(there["chains"]["private"]) == 2


def test_a_lost_worker_is_an_error_naming_the_chain(data):
    import os
    import signal

    import dask

    from lpviz.distributed import WorkerLost

    # Dask gives a task up after its worker dies allowed-failures + 1 times: at once here
    with (
        dask.config.set({"distributed.scheduler.allowed-failures": 0}),
        LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None) as cluster,
        Client(cluster) as client,
    ):
        victim = sorted(cluster_workers(client))[1]  # chain 1's worker
        pid = client.run(os.getpid, workers=[victim])[victim]

        killed = []

        def kill(state):
            if state.chain == 1 and state.iteration >= 5 and not killed:
                killed.append(pid)
                os.kill(pid, signal.SIGKILL)

        with pytest.raises(WorkerLost, match="chain 1 of 2 was lost with its worker"):
            lpviz.fit(
                data.release(), n_components=3, n_iter=2_000_000, thin=1000, chains=2, scheduler=client, callback=kill
            )
        assert _no_chain_tasks(client)
