"""CAVI over a Dask cluster (lpviz.fit(..., inference="vi", scheduler=...)): the ELBO trace and the
fit equal, bit for bit, the one-process fit of the same seed, for any number of workers.

What makes that possible (lpviz.models._variational, add_fixed): the expected allocations summed
over rows are added as fixed-point integers, exact in any order; every other sum over rows is left
to right and handed on from partition to partition in row order."""

import dataclasses
import json

import numpy as np
import pytest

import lpviz
from lpviz import distributed
from lpviz.cli import main
from lpviz.datasets import make_tensor, make_topics
from lpviz.models._variational import FIXED_MAX_TOTAL, check_fixed_bound
from lpviz.models.blocks import BlockModel
from lpviz.release import Release
from tests._distributed_checks import (
    check_excluded_cells,
    cluster_that_lost_a_worker,
    resume_vi_fit_after_a_lost_worker,
    vi_differences,
    with_truth,
)

pytest.importorskip("distributed")

CLUSTER_WORKERS = 3  # the conftest's client: a LocalCluster of 3 worker threads
WORKERS = (1, 2, 3)


@pytest.fixture(scope="module")
def data():
    # 61 rows: 8 stream blocks, the last partial, so 3 workers get 3, 3 and 2 blocks
    return make_topics(n_docs=61, n_words=40, random_state=3)


@pytest.mark.parametrize("method", ["private", "naive", "nonprivate"])
def test_topic_cavi_is_the_same_bits_on_any_number_of_workers(client, data, method):
    options = with_truth(dict(method=method, n_components=3, n_iter=15, inference="vi", random_state=11), data.Y)
    release = data.release()
    reference = lpviz.fit(release, **options)
    assert reference.iterations == 15 and np.all(np.isfinite(reference.elbo))
    for n_workers in WORKERS:
        states = []
        posterior = lpviz.fit(release, scheduler=client, workers=n_workers, callback=states.append, **options)
        assert len(posterior.partitions) == n_workers
        assert vi_differences(posterior, reference) == [], f"{method} on {n_workers} workers"
        assert [state.elbo for state in states] == reference.elbo.tolist()  # the callback's states too
        assert sorted(states[-1].factors) == ["phi"]  # theta stays on the workers while the fit runs


@pytest.mark.parametrize(
    "options",
    [dict(variant="geometric"), dict(bessel_point="mode"), dict(bessel_point="mean", noise_split="delta")],
    ids=["geometric", "paper-mode", "paper-mean-delta"],
)
def test_the_private_variants_are_the_same_bits_on_the_cluster(client, data, options):
    """The private method's other local steps (the geometric weights, the paper's Bessel point and
    noise rates per cell) keep their state on the workers' rows."""
    arguments = dict(method="private", n_components=3, n_iter=8, inference="vi", random_state=2, **options)
    release = data.release()
    reference = lpviz.fit(release, **arguments)
    for n_workers in (2, 3):
        posterior = lpviz.fit(release, scheduler=client, workers=n_workers, **arguments)
        assert vi_differences(posterior, reference) == [], f"{options} on {n_workers} workers"


@pytest.mark.parametrize("method", ["private", "naive", "nonprivate"])
def test_tensor_cavi_is_the_same_bits_on_any_number_of_workers(client, method):
    """The tensor model splits over its first mode: senders' q on the workers, recipients' and
    months' q updated on the driver from sums over the senders."""
    data = make_tensor(n_actors=27, n_times=3, n_components=2, self_loops=True, random_state=4)
    options = with_truth(
        dict(model="tensor", method=method, n_components=2, n_iter=8, inference="vi", random_state=13), data.Y
    )
    release = data.release()
    reference = lpviz.fit(release, **options)
    for n_workers in WORKERS:
        posterior = lpviz.fit(release, scheduler=client, workers=n_workers, **options)
        assert vi_differences(posterior, reference) == [], f"{method} on {n_workers} workers"


@pytest.mark.parametrize("model", ["topics", "tensor"])
@pytest.mark.parametrize("method", ["private", "naive", "nonprivate"])
def test_held_out_cells_and_structural_zeros_are_the_same_bits_on_the_cluster(client, model, method):
    """Excluded cells: each worker leaves its rows' out of the local step and theta's update; the
    sums over them that the shared factors' updates and the ELBO need (phi's partner sums, the
    tensor's b and c parts, their rate) pass through the workers in row order."""
    rng = np.random.default_rng(0)
    if model == "topics":
        data = make_topics(n_docs=61, n_words=40, random_state=3)
        zeros = np.zeros(data.shape, dtype=bool)
        zeros[5, :3] = zeros[40, 7] = True  # cells that do not exist
        release = dataclasses.replace(data.release(), structural_zeros=zeros)
    else:
        data = make_tensor(n_actors=27, n_times=3, n_components=2, random_state=4)  # self loops left out
        release = data.release()
    release = dataclasses.replace(release, heldout=(rng.random(release.shape) < 0.1) & ~release.structural_zeros)
    options = dict(model=model, method=method, n_components=2, n_iter=8, inference="vi", random_state=13)
    check_excluded_cells(client, release, data.Y, options, WORKERS, vi_differences)


@pytest.mark.parametrize("options", [dict(), dict(bessel_point="mean")], ids=["collapsed", "paper"])
def test_a_lost_worker_costs_the_iterations_since_the_checkpoint_and_resumes_the_same_fit(tmp_path, data, options):
    """CAVI checkpoints: every 3 iterations each worker saves its rows' q (theta's; the paper
    variant's noise rates' q per cell too), the driver the shared factors' q and the ELBO trace; a
    worker killed at iteration 7 stops the fit with the checkpoint to resume from, and the fit
    resumed on the workers left (the rows cut otherwise) is the unbroken fit, bit for bit."""

    arguments = dict(method="private", n_components=3, n_iter=12, tol=0.0, inference="vi", random_state=5, **options)
    release = data.release()
    reference = lpviz.fit(release, **arguments)
    with cluster_that_lost_a_worker(release, tmp_path, **arguments) as client:
        resume_vi_fit_after_a_lost_worker(client, release, tmp_path, arguments, reference)
        with pytest.raises(ValueError, match="inference='vi', not 'mcmc'"):
            distributed.fit(release, scheduler=client, checkpoint=tmp_path, resume=True, n_components=3, thin=1)
        another = dict(arguments, random_state=6)
        with pytest.raises(ValueError, match="another chain"):
            distributed.fit(release, scheduler=client, checkpoint=tmp_path, resume=True, **another)
    # the comparison has power: from another start, the fit differs
    other = lpviz.fit(release, **another)
    assert vi_differences(other, reference) != []


def test_one_process_cavi_is_the_same_bits_on_any_number_of_chunks(data):
    """The fixed-point sums make the one-process fit itself independent of how its rows are
    chunked over threads (parallel=True: four chunks per thread; False: one)."""
    release = data.release()
    fits = [
        lpviz.fit(release, n_components=3, n_iter=10, inference="vi", random_state=5, parallel=parallel)
        for parallel in (False, True)
    ]
    assert vi_differences(fits[1], fits[0]) == []


def test_bytes_per_iteration_do_not_grow_with_the_rows(client):
    """Each iteration moves the shared factors' q and their totals, never anything of the rows."""
    moved = {}
    for n_docs in (40, 160):
        release = make_topics(n_docs=n_docs, n_words=30, random_state=1).release()
        posterior = lpviz.fit(
            release, scheduler=client, n_components=3, n_iter=3, tol=0.0, inference="vi", random_state=1
        )
        assert len(posterior.bytes_moved) == 3
        moved[n_docs] = posterior.bytes_moved
    assert moved[40] == moved[160]
    # per worker: phi's q sent (2 x V x K floats) and its totals back (V x K x 2 integers), plus a few numbers
    assert moved[160][0] < CLUSTER_WORKERS * (4 * 30 * 3 * 8 + 1000)


def test_column_totals_beyond_the_exact_sums_are_refused_with_the_fix():
    assert check_fixed_bound(FIXED_MAX_TOTAL / 2) == FIXED_MAX_TOTAL / 2
    Y = np.ones((16, 5), dtype=np.int64)
    Y[:2, 0] = 10**12  # one column's total: 2e12 expected counts
    with pytest.raises(ValueError, match=r"expected counts of one column total 2e\+12.*inference='mcmc'"):
        lpviz.fit(Release(Y, alpha=0.5), method="naive", n_components=2, n_iter=2, inference="vi")


def test_refusals_name_the_fix(client, data):
    release = data.release()

    class Unsplit(BlockModel):  # a model whose CAVI lacks the split's hooks (every registered one has them)
        vi_update_rows = None

    with pytest.raises(
        ValueError, match=r"model='blocks' has no variational fit over machines yet \(only topics, .*blocks"
    ):
        distributed.fit(release, scheduler=client, model=Unsplit(2), n_components=2, inference="vi")
    with pytest.raises(ValueError, match="no burn-in"):
        lpviz.fit(release, scheduler=client, n_components=2, inference="vi", burn_in=3)
    with pytest.raises(ValueError, match="sampler='bessel' applies to inference='mcmc'"):
        lpviz.fit(release, scheduler=client, n_components=2, inference="vi", sampler="bessel")
    with pytest.raises(ValueError, match="tol must be a finite number"):
        lpviz.fit(release, scheduler=client, n_components=2, inference="vi", tol=-1.0)


def _untimed(value):
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if k not in ("seconds", "iterations_per_second")}
    return value


def test_cli_vi_on_a_scheduler_prints_the_in_process_summary(client, capsys):
    """`lpviz fit --inference vi --scheduler ADDRESS`: the scores of the one-process fit."""
    args = ["fit", "--data", "synthetic-topics", "--iterations", "30", "--seed", "3", "--noise-seed", "3"]
    args += ["--inference", "vi", "--chains", "1", "--no-progress", "--json"]
    assert main(args) == 0
    here = json.loads(capsys.readouterr().out)
    assert main(args + ["--scheduler", client.scheduler.address]) == 0
    there = json.loads(capsys.readouterr().out)
    assert there["methods"]["private"]["elbo"] == here["methods"]["private"]["elbo"]
    assert _untimed(there) == _untimed(here)
