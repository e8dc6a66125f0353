"""Several chains on a Dask cluster (issue 39): lpviz.fit(..., chains=C, scheduler=...) places each
whole chain on a worker and returns the ensemble one process gives, bit for bit."""

import json
import os
import signal
import socket
import time

import numpy as np
import pytest

import lpviz
from lpviz.cli import main
from lpviz.datasets import make_topics
from lpviz.distributed import SchedulerUnreachable

pytest.importorskip("distributed")
from distributed import Client, LocalCluster  # noqa: E402


@pytest.fixture(scope="module")
def cluster():
    # worker processes: the chains cross a real pickling boundary, as on a cluster
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def client(cluster):
    with Client(cluster) as client:
        yield client


@pytest.fixture(scope="module")
def data():
    return make_topics(n_docs=61, n_words=40, random_state=3)


def _same_ensemble(ours, theirs):
    """Which results differ (an empty list: the same bits)."""
    problems = []
    if ours.n_chains != theirs.n_chains:
        return ["n_chains"]
    if not np.array_equal(ours.mu_hat, theirs.mu_hat):
        problems.append("mu_hat")
    for trace in ("log_joint", "log_marginal"):
        if not np.array_equal(getattr(ours, trace), getattr(theirs, trace), equal_nan=True):
            problems.append(trace)
    for index, (a, b) in enumerate(zip(ours.chains, theirs.chains, strict=True)):
        if a.saved_iterations != b.saved_iterations or any(
            not np.array_equal(x[name], y[name]) for x, y in zip(a.samples, b.samples, strict=True) for name in x
        ):
            problems.append(f"chain {index} samples")
    return problems


@pytest.mark.parametrize("method", ["private", "naive"])
def test_chains_on_workers_are_the_ensemble_of_one_process(client, data, method):
    options = dict(method=method, n_components=3, n_iter=14, burn_in=4, thin=2, random_state=11, chains=3)
    reference = lpviz.fit(data.release(), **options)
    seen = []
    ensemble = lpviz.fit(
        data.release(), scheduler=client, callback=lambda state: seen.append((state.chain, state.iteration)), **options
    )
    assert isinstance(ensemble, lpviz.ensemble.EnsemblePosterior)
    assert _same_ensemble(ensemble, reference) == []
    # the callback heard every iteration of every chain, each chain's in order
    for chain in range(3):
        assert [i for c, i in seen if c == chain] == list(range(1, 15))
    # and the result is the same for another seed only if the seeds are the same (power)
    other = lpviz.fit(data.release(), scheduler=client, **dict(options, random_state=12))
    assert "mu_hat" in _same_ensemble(other, reference)


def test_restarts_on_workers_keep_the_same_best(client, data):
    options = dict(n_components=3, inference="vi", restarts=3, random_state=4, n_iter=60)
    reference = lpviz.fit(data.release(), **options)
    best = lpviz.fit(data.release(), scheduler=client, **options)
    assert best.restart_index == reference.restart_index
    assert np.array_equal(best.mu_hat, reference.mu_hat)
    assert best.restart_elbos == reference.restart_elbos
    assert best.restart_spread == reference.restart_spread


def test_an_interrupt_stops_every_chain_on_the_workers(client):
    big = make_topics(n_docs=400, n_words=200, n_topics=5, random_state=1)

    def interrupt(state):
        if state.iteration >= 3:
            raise KeyboardInterrupt

    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        # 200,000 iterations: hours of work if the chains went on after the interrupt
        lpviz.fit(
            big.release(), n_components=5, n_iter=200_000, thin=1000, random_state=0, chains=3, scheduler=client,
            callback=interrupt,
        )  # fmt: skip
    deadline = time.monotonic() + 60
    while any(client.processing().values()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(client.processing().values()), "chains still running on the workers after the interrupt"
    assert time.monotonic() - started < 60


def test_a_lost_worker_runs_its_chain_again_with_the_same_answer(data):
    options = dict(method="private", n_components=3, n_iter=6000, thin=200, random_state=5, chains=2)
    reference = lpviz.fit(data.release(), **options)
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
        Client(cluster) as client,
    ):
        killed = []

        def kill_one(state):
            if not killed and state.chain == 1 and state.iteration >= 20:
                # the worker running chain 1 dies (its nanny starts a new one): the chain runs again
                for address, keys in client.processing().items():
                    if any("chain-1-" in key for key in keys):
                        pid = client.run(os.getpid, workers=[address])[address]
                        os.kill(pid, signal.SIGKILL)
                        killed.append(state.iteration)

        ensemble = lpviz.fit(data.release(), scheduler=client, callback=kill_one, **options)
    assert killed, "chain 1 ended before its worker could be killed: give it more iterations"
    assert _same_ensemble(ensemble, reference) == []


def test_unreachable_scheduler_is_one_message(data):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(SchedulerUnreachable, match="no Dask scheduler answered"):
        lpviz.fit(
            data.release(), n_components=3, n_iter=3, thin=1, chains=2, scheduler=f"tcp://127.0.0.1:{port}", timeout=1
        )


def test_cli_chains_on_a_cluster_print_what_one_process_prints(client, capsys):
    args = [
        "fit", "--data", "synthetic-topics", "--iterations", "30",
        "--thin", "5", "--seed", "3", "--noise-seed", "3", "--no-progress", "--chains", "2", "--json",
    ]  # fmt: skip
    assert main(args) == 0
    local = json.loads(capsys.readouterr().out)
    assert main(args + ["--scheduler", client.scheduler.address]) == 0
    remote = json.loads(capsys.readouterr().out)

    def untimed(value):
        if isinstance(value, dict):
            return {k: untimed(v) for k, v in value.items() if k not in ("seconds", "iterations_per_second")}
        if isinstance(value, list):
            return [untimed(v) for v in value]
        return value

    assert untimed(remote["methods"]) == untimed(local["methods"])
    assert untimed(remote["chains"]) == untimed(local["chains"])
    assert remote["diagnostics"] == local["diagnostics"]
