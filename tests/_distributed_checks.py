"""Checks shared by the tests of fits over a Dask cluster (test_distributed, test_distributed_blocks,
test_distributed_vi)."""

import contextlib

import numpy as np
import pytest

import lpviz
from lpviz import distributed
from lpviz.metrics import score
from lpviz.release import Truth


def with_truth(options, Y):
    """A fit's ``options``, with ``truth=Truth(Y)`` for the non-private method (it fits the true counts)."""
    return dict(options, truth=Truth(Y)) if options["method"] == "nonprivate" else options


def same_chain(posterior, reference):
    """Which results of a chain over a cluster differ from the one-process chain's (an empty list:
    the same bits): the traces, mu_hat, the saved iterations, every saved sample, the best one."""
    problems = []
    for trace in ("log_joint", "log_marginal"):
        if not np.array_equal(getattr(posterior, trace), getattr(reference, trace), equal_nan=True):
            problems.append(trace)
    if not np.array_equal(posterior.mu_hat, reference.mu_hat):
        problems.append("mu_hat")
    if posterior.saved_iterations != reference.saved_iterations:
        problems.append("saved_iterations")
    ours, theirs = posterior.samples, reference.samples
    if len(ours) != len(theirs) or any(
        sorted(a) != sorted(b) or any(not np.array_equal(a[name], b[name]) for name in b)
        for a, b in zip(ours, theirs, strict=False)
    ):
        problems.append("samples")
    if posterior.best_iteration != reference.best_iteration:
        problems.append("best")
    return problems


def vi_differences(posterior, reference):
    """What differs between two variational posteriors (an empty list: the same bits)."""
    problems = [
        name for name in ("elbo", "mu_hat") if not np.array_equal(getattr(posterior, name), getattr(reference, name))
    ]
    ours, theirs = posterior.samples[0], reference.samples[0]
    if sorted(ours) != sorted(theirs) or any(not np.array_equal(ours[name], theirs[name]) for name in theirs):
        problems.append("factors")
    if (posterior.iterations, posterior.converged) != (reference.iterations, reference.converged):
        problems.append("iterations")
    return problems


def check_excluded_cells(client, release, Y, options, workers, differences):
    """A release with held-out cells (and structural zeros) fitted over ``workers`` workers (each
    count in turn) gives the one-process fit (``differences(ours, theirs) == []``: the same bits)
    and its score: the same MAE and held-out MAE, to the bit. ``Y``: the true counts; the
    non-private method fits them."""
    options = with_truth(options, Y)
    reference = lpviz.fit(release, **options)
    expected = score(reference, release, Truth(Y))
    assert np.isfinite(expected["heldout_mae"])
    for n_workers in workers:
        posterior = lpviz.fit(release, scheduler=client, workers=n_workers, **options)
        assert differences(posterior, reference) == [], f"{options} on {n_workers} workers"
        scores = score(posterior, release, Truth(Y))
        assert (scores["mae"], scores["heldout_mae"]) == (expected["mae"], expected["heldout_mae"])


@contextlib.contextmanager
def cluster_that_lost_a_worker(release, folder, **options):
    """A LocalCluster of 3 workers on which ``lpviz.distributed.fit(release, **options)``,
    checkpointed into ``folder`` every 3 iterations, lost its second worker at iteration 7's callback:
    the fit stopped naming the checkpoint of iteration 6 to resume from. Yields the client, 2 workers left."""
    from distributed import Client, LocalCluster

    with (
        LocalCluster(n_workers=3, processes=False, threads_per_worker=1, dashboard_address=None) as cluster,
        Client(cluster) as client,
    ):
        victim = sorted(distributed.cluster_workers(client))[1]
        worker = next(w for w in cluster.workers.values() if w.address == victim)

        def kill_at_seven(state):
            if state.iteration == 7:
                client.sync(worker.close, executor_wait=False)

        # the loss shows at the next call to the workers: CAVI's iteration 8; a chain's iteration 9, since
        # its callback of iteration 7 comes in iteration 8's round (7's score ran beside 8's sweep)
        lost_at = 8 if options.get("inference") == "vi" else 9
        with pytest.raises(distributed.WorkerLost, match=f"iteration {lost_at}.*checkpoint of iteration 6"):
            distributed.fit(
                release, scheduler=client, checkpoint=folder, checkpoint_every=3, callback=kill_at_seven, **options
            )
        assert (folder / "LATEST").read_text() == "iteration-000000006"
        assert victim not in distributed.cluster_workers(client)
        yield client


def resume_vi_fit_after_a_lost_worker(client, release, folder, arguments, reference):
    """A CAVI fit resumed from ``folder``'s checkpoint on ``client`` (the two workers a
    :func:`cluster_that_lost_a_worker` left) runs iterations 7-12 only and is ``reference``, bit for
    bit; returns the resumed posterior."""
    seen = []
    resumed = distributed.fit(
        release, scheduler=client, checkpoint=folder, resume=True, callback=seen.append, **arguments
    )
    assert len(resumed.partitions) == 2
    assert [state.iteration for state in seen] == list(range(7, 13))  # iterations 1-6 not run again
    assert vi_differences(resumed, reference) == []
    assert [state.elbo for state in seen] == reference.elbo.tolist()[6:]
    return resumed


def refused_one_byte_short_then_passing_at_the_limit(release, need, options, check):
    """A one-worker LocalCluster with one byte less than ``need`` refuses ``distributed.fit`` in words
    naming the bytes, before anything is scattered; then ``check(client, address)`` runs the memory
    check alone against the same worker offered exactly ``need`` (it must pass)."""
    from distributed import Client, LocalCluster

    from lpviz.budget import MemoryBudgetError, format_bytes

    rows = release.shape[0]
    with (
        LocalCluster(n_workers=1, processes=False, memory_limit=need - 1, dashboard_address=None) as cluster,
        Client(cluster) as client,
    ):
        (address,) = distributed.cluster_workers(client)
        with pytest.raises(
            MemoryBudgetError, match=f"{rows} rows needs about {format_bytes(need)} on worker {address}"
        ):
            distributed.fit(release, scheduler=client, **options)
        assert not any(client.has_what().values())  # nothing was scattered

        class Enough:  # the same worker with exactly the bytes (the check alone: no chain runs on it)
            def scheduler_info(self):
                return {"workers": {address: {"memory_limit": need}}}

            def run(self, function, workers):
                return client.run(function, workers=workers)

        check(Enough(), address)
