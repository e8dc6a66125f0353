"""One chain over a Dask cluster (lpviz.distributed): the same chain, bit for bit, for any number
of workers, as the chain of one process with the same seed."""

import dataclasses
import socket

import numpy as np
import pytest

import lpviz
from lpviz import distributed
from lpviz.budget import MemoryBudgetError
from lpviz.datasets import make_tensor, make_topics
from lpviz.metrics import score
from tests._distributed_checks import (
    check_excluded_cells,
    cluster_that_lost_a_worker,
    refused_one_byte_short_then_passing_at_the_limit,
    same_chain,
    with_truth,
)

pytest.importorskip("distributed")
from distributed import Client, LocalCluster  # noqa: E402

WORKERS = (1, 2, 3, 4)
CLUSTER_WORKERS = 4  # the conftest's client: a LocalCluster of 4 worker threads


@pytest.fixture(scope="module")
def data():
    # 61 rows: 8 stream blocks, the last partial; 40 words: the private method's sparse step is on
    return make_topics(n_docs=61, n_words=40, random_state=3)


@pytest.mark.parametrize("method", ["private", "naive", "nonprivate"])
def test_topic_chain_is_the_same_bits_on_any_number_of_workers(client, data, method):
    options = with_truth(dict(method=method, n_components=3, n_iter=10, burn_in=3, thin=2, random_state=11), data.Y)
    release = data.release()
    reference = lpviz.fit(release, **options)
    for n_workers in WORKERS:
        posterior = distributed.fit(release, scheduler=client, workers=n_workers, **options)
        assert len(posterior.partitions) == n_workers
        assert same_chain(posterior, reference) == [], f"{method} on {n_workers} workers"


@pytest.mark.parametrize("method", ["private", "naive", "nonprivate"])
def test_held_out_cells_and_structural_zeros_are_the_same_bits_on_any_number_of_workers(client, data, method):
    """Excluded cells: each worker leaves its rows' out of the sweeps and theta's draw; phi's rate
    sums (theta's column sums less the excluded cells' theta, per column) and the excluded rate of the
    log likelihood pass through the workers in row order, as one process subtracts and adds them."""
    rng = np.random.default_rng(0)
    zeros = np.zeros(data.shape, dtype=bool)
    zeros[5, :3] = zeros[40, 7] = True  # cells that do not exist
    heldout = (rng.random(data.shape) < 0.1) & ~zeros
    release = dataclasses.replace(data.release(), heldout=heldout, structural_zeros=zeros)
    _check_excluded_cells(client, data, release, dict(method=method, n_components=3, n_iter=8, burn_in=2, thin=2))


@pytest.mark.parametrize("method", ["private", "naive", "nonprivate"])
def test_a_tensor_without_self_loops_and_held_out_cells_is_the_same_bits_on_any_number_of_workers(client, method):
    """The tensor's excluded cells: the sums b's and c's draws leave out (over the excluded cells of
    each recipient, then of each month, c's after b's draw) pass through the workers in row order."""
    data = make_tensor(n_actors=27, n_times=3, n_components=2, random_state=4)  # self loops left out
    release = data.release()
    heldout = (np.random.default_rng(1).random(release.shape) < 0.1) & ~release.structural_zeros
    release = dataclasses.replace(release, heldout=heldout)
    options = dict(model="tensor", method=method, n_components=2, n_iter=6, burn_in=2, thin=2)
    _check_excluded_cells(client, data, release, options)


def _check_excluded_cells(client, data, release, options):
    check_excluded_cells(client, release, data.Y, dict(options, random_state=11), WORKERS, same_chain)


@pytest.fixture(scope="module")
def tensor_data():
    # 27 senders: 4 stream blocks, the last partial (one partition per worker up to 4); self loops kept
    # (left out, they are excluded cells: the test of excluded cells above)
    return make_tensor(n_actors=27, n_times=3, n_components=2, self_loops=True, random_state=4)


@pytest.mark.parametrize("method", ["private", "naive", "nonprivate"])
def test_tensor_chain_is_the_same_bits_on_any_number_of_workers(client, tensor_data, method):
    """The tensor model splits over its first mode: senders' factors on the workers, recipients' and
    months' drawn on the driver from sums over the senders."""
    options = with_truth(
        dict(model="tensor", method=method, n_components=2, n_iter=8, burn_in=2, thin=2, random_state=13), tensor_data.Y
    )
    release = tensor_data.release()
    reference = lpviz.fit(release, **options)
    assert sorted(reference.samples[0]) == ["a", "b", "c"]
    for n_workers in WORKERS:
        posterior = distributed.fit(release, scheduler=client, workers=n_workers, **options)
        assert len(posterior.partitions) == n_workers
        assert posterior.mu_hat.shape == release.shape
        assert same_chain(posterior, reference) == [], f"tensor, {method} on {n_workers} workers"
    other = distributed.fit(release, scheduler=client, workers=2, **dict(options, random_state=14))
    assert not np.array_equal(other.log_joint, reference.log_joint)  # the comparison has power


def test_chunked_sweeps_are_the_same_bits(client):
    """Rows in several chunks per worker (parallel=True) and a different seed give the same chain too,
    and a different seed a different one (the comparison has power)."""
    release = make_topics(n_docs=203, n_words=48, random_state=5).release()
    options = dict(method="private", n_components=4, n_iter=6, burn_in=2, thin=1, parallel=True)
    reference = lpviz.fit(release, random_state=1, **options)
    posterior = distributed.fit(release, scheduler=client, workers=3, random_state=1, **options)
    assert same_chain(posterior, reference) == []
    other = distributed.fit(release, scheduler=client, workers=3, random_state=2, **options)
    assert not np.array_equal(other.log_joint, reference.log_joint)


def test_fit_and_the_env_route_to_the_cluster(client, data, monkeypatch):
    options = dict(method="naive", n_components=3, n_iter=5, burn_in=1, thin=1, random_state=4)
    reference = lpviz.fit(data.release(), **options)
    seen = []
    posterior = lpviz.fit(
        data.release(), scheduler=client, callback=lambda state: seen.append(state.iteration), **options
    )
    assert isinstance(posterior, distributed.DistributedPosterior)
    assert seen == [1, 2, 3, 4, 5]
    assert same_chain(posterior, reference) == []
    # LPVIZ_SCHEDULER is the CLI's (and the dashboard's): the library distributes only when asked
    monkeypatch.setenv("LPVIZ_SCHEDULER", client.scheduler.address)
    assert not isinstance(lpviz.fit(data.release(), **options), distributed.DistributedPosterior)


def test_rates_by_row_blocks_and_gather(client, data):
    options = dict(method="private", n_components=3, n_iter=6, burn_in=2, thin=2, random_state=8)
    reference = lpviz.fit(data.release(), **options)
    posterior = distributed.fit(data.release(), scheduler=client, workers=3, **options)
    # a block across a partition's edge, before any dense gather
    assert np.array_equal(posterior.rate_rows(13, 41), reference.rate_rows(13, 41))
    assert posterior._mu_hat is None
    local = posterior.gather()
    assert type(local) is lpviz.Posterior
    assert same_chain(local, reference) == []
    assert posterior.bytes_moved and all(b > 0 for b in posterior.bytes_moved)


@pytest.mark.parametrize("dense_mean", [True, False], ids=["rate sums", "low rank"])
def test_score_sums_its_row_blocks_on_the_workers_to_the_same_bits(client, data, monkeypatch, dense_mean):
    """score of a chain over the cluster: each row block inside one partition is checked and summed on
    its worker (its rates never leave it), only a block across a partition's edge comes here; every
    number equals the one-process chain's score, for W = 1, 2, 3, 4, held-out cells and true rates.
    Component health reads theta's column sums, summed on the workers: no sample's theta comes here."""
    from lpviz import engine, metrics

    monkeypatch.setattr(metrics, "_SCORE_BLOCK_CELLS", 5 * data.shape[1])  # blocks of 5 rows: some cross edges
    monkeypatch.setattr(distributed, "SCORE_CELLS_IN_FLIGHT", 12 * data.shape[1])  # calls of 1-2 blocks, in rounds
    if not dense_mean:  # no running rate sum: rates from the saved factors, on the workers too
        monkeypatch.setattr(engine, "DENSE_MEAN_MAX_CELLS", 0)
        monkeypatch.setattr(distributed, "DENSE_MEAN_MAX_CELLS", 0)
    heldout = np.random.default_rng(2).random(data.shape) < 0.15
    release = dataclasses.replace(data.release(), heldout=heldout)
    truth = data.truth()
    assert truth.mu is not None
    options = dict(method="private", n_components=3, n_iter=6, burn_in=2, thin=2, random_state=9)
    reference = lpviz.fit(release, **options)
    timing = ("seconds", "iterations_per_second")
    expected = {key: value for key, value in score(reference, release, truth).items() if key not in timing}
    assert all(expected[key] is not None for key in metrics.MAE_KEYS)
    blocks = metrics._row_blocks(data.shape)
    for n_workers in WORKERS:
        posterior = distributed.fit(release, scheduler=client, workers=n_workers, **options)
        pulled, gathered = [], []
        monkeypatch.setattr(posterior, "rate_rows", _recording(posterior.rate_rows, pulled))
        monkeypatch.setattr(posterior, "_sample", gathered.append)  # a sample's theta brought here
        result = {key: value for key, value in score(posterior, release, truth).items() if key not in timing}
        assert result == expected, f"{n_workers} workers"
        assert expected["health"]["dead_components"] is not None and gathered == []  # theta's column sums only
        across = [(a, b) for a, b in blocks if not any(p <= a and b <= q for p, q in posterior.partitions)]
        assert pulled == across and len(across) < n_workers, f"{n_workers} workers"
        assert posterior._mu_hat is None  # nothing gathered


def _recording(rate_rows, pulled):
    """``rate_rows`` that notes each block of rows it brings to the driver."""

    def recorded(start, stop):
        pulled.append((start, stop))
        return rate_rows(start, stop)

    return recorded


def test_a_rate_that_is_not_finite_on_a_worker_is_named_by_the_score(client, data, monkeypatch):
    options = dict(method="naive", n_components=3, n_iter=4, burn_in=1, thin=1, random_state=3)
    posterior = distributed.fit(data.release(), scheduler=client, workers=3, **options)
    assert score(posterior, data.release(), data.truth())["health"]["nonfinite"] is False
    rate_rows = distributed.Partition.rate_rows

    def broken(self, start, stop, n_samples, shared_samples):  # the last partition's rates (on its worker)
        rates = rate_rows(self, start, stop, n_samples, shared_samples)
        return rates * np.nan if self.start_row > 0 else rates

    monkeypatch.setattr(distributed.Partition, "rate_rows", broken)
    result = score(posterior, data.release(), data.truth())
    assert result["health"]["nonfinite"] is True and result["mae"] is None


def test_partitions_are_whole_stream_blocks():
    assert distributed.partition_rows(61, 3) == [(0, 16), (16, 40), (40, 61)]
    assert distributed.partition_rows(10, 4) == [(0, 8), (8, 10)]  # no empty partition
    for rows, workers in ((1000, 7), (9, 2), (8, 1)):
        parts = distributed.partition_rows(rows, workers)
        assert parts[0][0] == 0 and parts[-1][1] == rows
        assert all(start % 8 == 0 and start < stop for start, stop in parts)
        assert all(a[1] == b[0] for a, b in zip(parts, parts[1:], strict=False))


def test_a_blockwise_release_sends_each_worker_only_its_rows(client, monkeypatch):
    """blockwise_release: each worker is sent the true counts of the generator blocks its partition
    meets (BlockwiseRelease.holding), not the whole sparse matrix, and the chain stays the one-process
    chain of the release built here, for W = 1, 2, 3."""
    import scipy.sparse as sp

    from lpviz.datasets import GENERATOR_ROWS, blockwise_release

    rng = np.random.default_rng(6)
    n_rows = 3 * GENERATOR_ROWS + 37
    Y = sp.random(n_rows, 25, density=0.1, format="csr", random_state=rng, data_rvs=lambda n: rng.integers(1, 5, n))
    Y = Y.astype(np.int64)
    source = blockwise_release(Y, epsilon=1.0, random_state=2)
    options = dict(method="private", n_components=3, n_iter=3, burn_in=1, thin=1, random_state=5)
    reference = lpviz.fit(source.release(), **options)
    sent = []
    scatter, submit = client.scatter, client.submit
    monkeypatch.setattr(client, "scatter", lambda data, **kw: sent.extend(data) or scatter(data, **kw))
    monkeypatch.setattr(client, "submit", lambda *args, **kw: sent.extend(args) or submit(*args, **kw))
    for n_workers in (1, 2, 3):
        sent.clear()
        posterior = lpviz.fit(source, scheduler=client, workers=n_workers, **options)
        assert same_chain(posterior, reference) == [], f"{n_workers} workers"
        pieces = [piece for piece in sent if isinstance(piece, distributed.RowsOf)]
        assert sorted({(piece.start, piece.stop) for piece in pieces}) == posterior.partitions
        assert len(pieces) == 2 * n_workers  # each partition's counts and noise levels
        for piece in pieces:
            low = piece.start // GENERATOR_ROWS * GENERATOR_ROWS
            high = min(n_rows, -(-piece.stop // GENERATOR_ROWS) * GENERATOR_ROWS)
            held = piece.source
            assert (held.first_row, held.Y.shape[0], held.shape) == (low, high - low, (n_rows, 25))
            assert (held.Y != Y[low:high]).nnz == 0
        if n_workers > 1:
            assert all(piece.source.Y.nnz < Y.nnz for piece in pieces)


def test_the_workers_are_fetched_not_read_from_the_clients_cache(client):
    """Upstream (distributed 2026.8): the client's periodic refresh of its scheduler info asks for no
    workers, so ``client.scheduler_info()`` read just after a refresh has none, and a chain was refused
    "the scheduler has no workers" on CI. When the first assertion fails, upstream has changed and
    :func:`lpviz.distributed.cluster_workers` may read ``client.scheduler_info()`` again."""
    client.sync(client._update_scheduler_info)  # what the client's loop does every 2 s
    assert client._scheduler_identity["workers"] == {}
    assert len(distributed.cluster_workers(client)) == CLUSTER_WORKERS
    assert client._scheduler_identity["workers"] == {}  # fetched, not read from (or written to) the cache


def test_unreachable_scheduler_is_one_clear_message():
    with socket.socket() as probe:  # a loopback port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    release = make_topics(random_state=0).release()
    with pytest.raises(distributed.SchedulerUnreachable, match=f"127.0.0.1:{port}.*within 1 s"):
        lpviz.fit(release, n_components=3, n_iter=3, thin=1, scheduler=f"tcp://127.0.0.1:{port}", timeout=1)


def test_a_chain_too_large_for_the_workers_is_refused_before_data_moves(tmp_path):
    release = make_topics(n_docs=400, n_words=300, random_state=0).release()
    with (
        LocalCluster(n_workers=1, processes=False, memory_limit="200kB", dashboard_address=None) as cluster,
        Client(cluster) as client,
    ):
        with pytest.raises(MemoryBudgetError, match=r"needs about .* on worker .* memory limit is"):
            distributed.fit(release, scheduler=client, n_components=10, n_iter=3, thin=1)
        assert not client.has_what() or not any(client.has_what().values())  # nothing was scattered


def test_refusals_name_the_fix(client):
    release = make_topics(random_state=0).release()
    with pytest.raises(ValueError, match="sampler='collapsed'"):
        distributed.fit(release, scheduler=client, n_components=3, n_iter=3, thin=1, sampler="bessel")
    with pytest.raises(ValueError, match="drop restarts=2"):
        lpviz.fit(release, n_components=3, n_iter=3, scheduler=client, inference="vi", restarts=2)
    with pytest.raises(ValueError, match="bessel_point='mode' applies to inference='vi'"):
        distributed.fit(release, scheduler=client, n_components=3, n_iter=3, thin=1, bessel_point="mode")


def test_a_lost_worker_costs_the_iterations_since_the_checkpoint_and_resumes_the_same_chain(tmp_path, data):
    options = dict(method="private", n_components=3, n_iter=10, burn_in=3, thin=2, random_state=5)
    release = data.release()
    reference = lpviz.fit(release, **options)
    with cluster_that_lost_a_worker(release, tmp_path, **options) as client:
        # resumed on the two workers left (the rows cut otherwise): the unbroken chain's bits
        resumed = distributed.fit(release, scheduler=client, checkpoint=tmp_path, resume=True, **options)
        assert len(resumed.partitions) == 2
        assert same_chain(resumed, reference) == []
        with pytest.raises(ValueError, match="another chain"):
            other = dict(options, random_state=6)
            distributed.fit(release, scheduler=client, checkpoint=tmp_path, resume=True, **other)


def test_a_release_generated_on_the_workers_is_the_release_built_here_and_gives_the_same_chain(client, monkeypatch):
    """make_topics_blockwise: each worker builds its partition's rows (the driver sends only a
    description), a generator block at a time into the smallest integer dtype that holds them; the
    chain equals the one-process chain on the release built here, for W = 1, 2, 3 (the naive and
    non-private chains on 2), and the rows are the same whatever cut of the rows builds them."""
    from lpviz.datasets import GENERATOR_ROWS, make_topics_blockwise
    from lpviz.release import smallest_int_dtype

    monkeypatch.setattr(distributed, "BUILD_CELLS", GENERATOR_ROWS * 30)  # a block at a time: 3 pieces

    gen = make_topics_blockwise(n_docs=2 * GENERATOR_ROWS + 37, n_words=30, n_topics=3, random_state=4)
    release = gen.release()
    assert release.simulated and release.noise_seed == 4
    # the rows built in pieces cut anywhere (not on the generator's blocks) are the rows built at once
    cuts = [0, 5, GENERATOR_ROWS + 3, GENERATOR_ROWS + 4, gen.n_docs]
    for which, whole in (("Y_obs", release.Y_obs), ("alpha", release.alpha_per_row)):
        pieces = np.concatenate([gen.rows(a, b, which) for a, b in zip(cuts, cuts[1:], strict=False)])
        assert np.array_equal(pieces, whole), which
    assert not np.array_equal(release.Y_obs, gen.truth().Y)  # noised
    on_worker = client.submit(gen.rows, 3, gen.n_docs - 2, "Y_obs", pure=False).result()
    assert np.array_equal(on_worker, release.Y_obs[3:-2])
    other = make_topics_blockwise(n_docs=gen.n_docs, n_words=30, n_topics=3, random_state=5).release()
    assert not np.array_equal(other.Y_obs, release.Y_obs)  # the seed matters (the comparison has power)
    options = dict(method="private", n_components=3, n_iter=5, burn_in=2, thin=1, random_state=7)
    reference = lpviz.fit(release, **options)
    for n_workers in (1, 2, 3):
        posterior = lpviz.fit(gen, scheduler=client, workers=n_workers, **options)
        assert len(posterior.partitions) == n_workers
        assert same_chain(posterior, reference) == [], f"generated on {n_workers} workers"
    built = distributed.RowsOf(gen, "Y_obs")[5 : gen.n_docs].build()  # from inside a block, over three
    assert built.dtype == smallest_int_dtype(release.Y_obs) and built.itemsize < gen.rows(5, 6, "Y_obs").itemsize
    assert np.array_equal(built, release.Y_obs[5:])
    for method, truth in (("naive", None), ("nonprivate", gen.truth())):
        reference = lpviz.fit(release, **dict(options, method=method, truth=truth))
        posterior = lpviz.fit(gen, scheduler=client, workers=2, **dict(options, method=method))
        assert same_chain(posterior, reference) == [], f"{method} generated on 2 workers"


def test_generated_rows_counted_narrow_and_refused_when_wider():
    """The memory check counts generated rows at the narrowest integers of their first generator
    block (RowsOf.sample_itemsize, built before any data moves); rows that turn out wider are
    refused in words while being built, not held silently over the count."""
    from lpviz.datasets import make_topics_blockwise
    from lpviz.datasets.blockwise import GENERATOR_ROWS
    from lpviz.release import smallest_int_dtype

    gen = make_topics_blockwise(n_docs=3 * GENERATOR_ROWS, n_words=40, n_topics=3, random_state=2)
    rows = distributed.RowsOf(gen, "Y_obs")
    first = smallest_int_dtype(gen.rows(0, GENERATOR_ROWS, "Y_obs"))
    assert rows.sample_itemsize() == np.dtype(first).itemsize
    assert rows[GENERATOR_ROWS : 2 * GENERATOR_ROWS].itemsize == rows.itemsize  # the pieces sent carry it
    built = rows.build()
    assert built.dtype.itemsize <= rows.itemsize
    # the whole rows' own narrowest dtype is wider than one byte here (long documents): a check that
    # counted one byte a count is refused by the build, naming the rows and the fix
    long = make_topics_blockwise(n_docs=2 * GENERATOR_ROWS, n_words=40, n_topics=3, doc_length=2000.0, random_state=2)
    assert np.dtype(smallest_int_dtype(long.rows(GENERATOR_ROWS, 2 * GENERATOR_ROWS, "Y_obs"))).itemsize > 1
    with pytest.raises(MemoryBudgetError, match="wider than the 1 bytes the memory check counted"):
        distributed.RowsOf(long, "Y_obs", itemsize=1).build()
    assert distributed.RowsOf(long, "Y_obs").build().dtype.itemsize > 1  # unchecked: built as wide as it needs


def test_a_worker_whose_nanny_restarts_it_is_offered_what_the_nanny_leaves():
    """Dask's nanny restarts a worker at 95% of its memory limit (``distributed.worker.memory.terminate``),
    and the worker's process holds memory of its own: a chain counted at its whole limit was restarted
    in its second iteration (1,000,000 x 5,000 on two 7 GiB workers, 6.5 GiB counted: WorkerLost after
    six minutes). A partition between the room the nanny leaves and the limit is refused before any
    data moves, in words naming the restart; one inside the room passes."""
    import psutil

    from lpviz import methods, models

    limit, cols = 1024 * 2**20, 5000
    model, method = models.create("topics", 50), methods.create("private")

    def need(rows):
        return distributed.partition_bytes(model, method, (rows, cols), rows, 1, threads=1, itemsize=1)

    with (
        LocalCluster(n_workers=1, processes=True, threads_per_worker=1, memory_limit=limit, dashboard_address=None)
        as cluster,
        Client(cluster) as client,
    ):  # fmt: skip
        (address,) = distributed.cluster_workers(client)
        threads, usable, words = distributed._worker_room(client, [address])[address]
        memory = client.run(lambda: psutil.Process().memory_info().rss)[address]
        assert memory > 20 * 2**20  # a process of its own, holding its interpreter
        assert usable <= int(0.95 * limit) - distributed.WORKER_RUNTIME_BYTES - memory // 2
        rows = 1
        while need(rows) <= usable:  # the fewest rows beyond the room, by doubling then halving the step
            rows *= 2
        step = rows // 4
        while step:
            rows = rows - step if need(rows - step) > usable else rows
            step //= 2
        assert usable < need(rows) <= limit  # the limit alone took it
        with pytest.raises(MemoryBudgetError, match=r"nanny restarts it at 95% of that, and it holds .* for the chain"):
            distributed._check_worker_memory(client, [address], [(0, rows)], model, method, (rows, cols), 2, 1, 1,
                                             itemsize=1)  # fmt: skip
        inside = rows // 2
        assert need(inside) < usable
        distributed._check_worker_memory(client, [address], [(0, inside)], model, method, (inside, cols), 2, 1, 1,
                                         itemsize=1)  # fmt: skip


def test_fixed_count_methods_are_counted_by_their_positive_cells():
    """The naive and non-private methods keep an int64 CSR of the positive cells (16 bytes each and
    the row pointers): the check counts a partition's positive cells (Method.positive_cells), so a
    worker one byte short of that is refused before any data moves, naming the bytes, and a worker
    with exactly that much passes. Generated rows are estimated from their first generator block; a
    worker whose rows hold more refuses them in words while preparing them."""
    from lpviz import methods, models
    from lpviz._parallel import n_threads
    from lpviz.datasets import make_topics_blockwise
    from lpviz.datasets.blockwise import GENERATOR_ROWS
    from lpviz.engine import chain_bytes, count_itemsize

    release = make_topics(n_docs=300, n_words=200, random_state=4).release()
    model, naive = models.create("topics", 3), methods.create("naive")
    positive = int(np.count_nonzero(release.Y_obs > 0))
    assert distributed._positive_cells(naive, release.Y_obs, 0, 300) == positive
    itemsize = count_itemsize(release.Y_obs)
    need = distributed.partition_bytes(model, naive, release.shape, 300, 1, threads=n_threads(), positive=positive,
                                       itemsize=itemsize)  # fmt: skip
    generic = distributed.partition_bytes(model, naive, release.shape, 300, 1, threads=n_threads(), itemsize=itemsize)
    assert need - generic == 16 * positive + 8 * 301 - 8 * 300 * 200  # the CSR, not 8 bytes a cell
    assert chain_bytes(model, naive, release.shape, itemsize, positive) < chain_bytes(model, naive, release.shape)
    options = dict(method="naive", n_components=3, n_iter=2, burn_in=1, thin=1, random_state=0)
    refused_one_byte_short_then_passing_at_the_limit(
        release, need, options,
        lambda client, address: distributed._check_worker_memory(
            client, [address], [(0, 300)], model, naive, release.shape, 2, 1, 1, itemsize=itemsize, positive=[positive]
        ),
    )  # fmt: skip
    # generated rows: the first generator block's positive cells scaled to the rows, rounded up
    gen = make_topics_blockwise(n_docs=2 * GENERATOR_ROWS, n_words=40, n_topics=3, random_state=2)
    rows = distributed.RowsOf(gen, "Y_obs")
    first = int(np.count_nonzero(gen.rows(0, GENERATOR_ROWS, "Y_obs") > 0))
    assert distributed._positive_cells(naive, rows, 0, 2 * GENERATOR_ROWS) == 2 * first
    spec = {"model": "topics", "n_components": 3, "a0": 0.1, "b0": 0.1, "method": "naive", "options": {},
            "chain_seed": 1, "parallel": False, "dense_mean": True}  # fmt: skip
    actual = int(np.count_nonzero(rows.build() > 0))
    alpha = distributed.RowsOf(gen, "alpha")
    with pytest.raises(MemoryBudgetError, match=f"hold {actual:,} positive cells, more than the {actual - 1:,}"):
        distributed.Partition(dict(spec, rows=(0, 2 * GENERATOR_ROWS), positive=actual - 1), rows, alpha)
    distributed.Partition(dict(spec, rows=(0, 2 * GENERATOR_ROWS), positive=actual), rows, alpha)  # at the count


def test_a_stopped_score_leaves_between_the_workers_rounds(client, data, monkeypatch):
    """A Stop (score's ``should_stop``) during a score over the cluster leaves between the rounds the
    workers sum (it waited for every round before: minutes for a 1M-row release), the workers let the
    samples go, and the next score is whole and the same."""
    from lpviz import metrics
    from lpviz.metrics import ScoreStopped

    monkeypatch.setattr(metrics, "_SCORE_BLOCK_CELLS", 2 * data.shape[1])  # blocks of 2 rows
    monkeypatch.setattr(distributed, "SCORE_CELLS_IN_FLIGHT", 3 * 2 * data.shape[1])  # a block a call: rounds
    options = dict(method="private", n_components=3, n_iter=4, burn_in=1, thin=1, random_state=9)
    release, truth = data.release(), data.truth()
    posterior = distributed.fit(release, scheduler=client, workers=3, **options)
    calls = []
    block_sums = distributed.Partition.block_sums

    def counted(self, *args):
        calls.append(self.start_row)
        return block_sums(self, *args)

    monkeypatch.setattr(distributed.Partition, "block_sums", counted)
    whole = score(posterior, release, truth, diagnostics=False)
    n_calls = len(calls)
    assert n_calls > 6 * 3  # many rounds of three calls
    calls.clear()
    with pytest.raises(ScoreStopped):
        score(posterior, release, truth, diagnostics=False, should_stop=lambda: len(calls) > 0)
    assert 0 < len(calls) <= 2 * 3  # the first round, and the next sent meanwhile
    calls.clear()
    assert score(posterior, release, truth, diagnostics=False) == whole
    assert len(calls) == n_calls
