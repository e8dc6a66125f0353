"""One chain over Dask workers (lpviz.distributed) beside the chain in one process, same seed.

For a private topic-model chain (K = 50, eps/N = 1) on synthetic counts of ROWS x COLUMNS, prints
per iteration: seconds in one process (all kernel threads), and on a LocalCluster of 1 and 2
worker processes (cores split between them): seconds, bytes moved between driver and workers,
and the split of the time (the workers' row rounds, the running-sum passes worker by worker, phi's
draw on the driver); the peak memory the driver allocated during the distributed fit (tracemalloc:
numpy's arrays are counted); whether the chains are the same bits (traces); and a projection to
16 and 64 workers from the measured parts:

    T(W) = rows(1) / W + driver + passes(1) + W * (4 round trips + transfer per worker)

(rows shrink with the workers; phi's draw does not; the running-sum passes add over every row one
worker after the other, so their work stays that of one process; every worker adds its round trips,
1 ms each, and its copies of phi and of its counts at 1 GB/s, sent one after the other).

The release is built here, a block of rows at a time (theta @ phi, Poisson, geometric noise per
block); with ``--generate`` it is :func:`lpviz.datasets.make_topics_blockwise` instead, built on
the workers (the driver never holds the counts) and here only for the in-process chain, when its
state fits this machine's memory (else the memory check's refusal is printed). The workers get
the machine's memory budget (lpviz.budget.memory_limit) split evenly, so a partition too large for
its worker is refused in words before any data moves. ``--project ROWS COLS`` scales the measured
parts to another size (rows' work by cells, phi's draw and the bytes by columns).

    python benchmarks/bench_distributed.py                      # 200,000 x 2,000, 3 iterations
    python benchmarks/bench_distributed.py --rows 20000 --cols 2000 --iterations 3
    python benchmarks/bench_distributed.py --generate --rows 1000000 --cols 5000 --iterations 2
    python benchmarks/bench_distributed.py --tiny        # 400 x 60, K = 3, 2 iterations: seconds

``--tiny`` (here and in bench_distributed_score / _vi) runs every section at the smallest sizes, for
the test suite: its figures are the clusters' start-up, not the chain's.

Timings are wall-clock on a machine that may be shared: read them beside the in-process chain
of the same run.
"""

import argparse
import contextlib
import logging
import os
import time
import tracemalloc

import numpy as np


def build_release(rows, cols, topics, seed, block=20_000, truth=False):
    """A private release of synthetic topic counts, built a block of rows at a time; with
    ``truth=True`` also the true counts (``(release, Truth)``: int64, rows x columns)."""
    from lpviz.privacy import alpha_from
    from lpviz.release import Release, Truth

    rng = np.random.default_rng(seed)
    phi = rng.dirichlet(np.full(cols, 0.05), topics) * 0.1 * cols / topics * 2
    alpha = alpha_from(1.0)
    Y_obs = np.empty((rows, cols), dtype=np.int16)
    Y = np.empty((rows, cols), dtype=np.int64) if truth else None
    for start in range(0, rows, block):
        stop = min(rows, start + block)
        theta = rng.gamma(0.3, 1.0, (stop - start, topics))
        counts = rng.poisson(theta @ phi)
        if truth:
            Y[start:stop] = counts
        # two-sided geometric noise: the difference of two geometric draws
        noise = rng.geometric(1 - alpha, counts.shape) - rng.geometric(1 - alpha, counts.shape)
        Y_obs[start:stop] = np.clip(counts + noise, -30000, 30000)
    release = Release(Y_obs=Y_obs, alpha=alpha, epsilon=1.0, N=1.0, kind="documents", simulated=True)
    return (release, Truth(Y)) if truth else release


@contextlib.contextmanager
def local_cluster(workers, cores, memory_limit="auto"):
    """A LocalCluster of ``workers`` processes of one thread each, the machine's ``cores`` split
    between their kernels, and its Client (the benchmarks' one cluster setup)."""
    from distributed import Client, LocalCluster

    threads = max(1, cores // workers)
    env = {"LPVIZ_NUM_THREADS": str(threads), "NUMBA_NUM_THREADS": str(threads), "OPENBLAS_NUM_THREADS": "1"}
    with (
        LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            env=env,
            memory_limit=memory_limit,
            dashboard_address=None,
            silence_logs=logging.ERROR,
        ) as cluster,
        Client(cluster) as client,
    ):
        yield client


TINY = dict(rows=400, cols=60, topics=3, iterations=2)  # --tiny: the test suite's sizes


def size_arguments(doc, rows, topics, cols=2_000, iterations=3):
    """The benchmarks' command line: ``--rows --cols --topics --iterations`` (these defaults) and
    ``--tiny`` (:data:`TINY`, read by :func:`parse_sizes`), the module's docstring as its help."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=rows)
    parser.add_argument("--cols", type=int, default=cols)
    parser.add_argument("--topics", type=int, default=topics)
    parser.add_argument("--iterations", type=int, default=iterations)
    parser.add_argument("--tiny", action="store_true", help=f"the smallest sizes ({TINY}), in seconds")
    return parser


def parse_sizes(parser):
    """``parser``'s arguments, the sizes those of :data:`TINY` with ``--tiny``."""
    args = parser.parse_args()
    if args.tiny:
        vars(args).update(TINY)
    return args


def timed_in_process(release, options):
    import lpviz

    started = time.perf_counter()
    posterior = lpviz.fit(release, **options)
    return posterior, time.perf_counter() - started


@contextlib.contextmanager
def fit_on_cluster(release, options, workers, cores, memory_limit="auto"):
    """``lpviz.fit(release, scheduler=..., **options)`` on a :func:`local_cluster` of ``workers``
    processes, timed (perf_counter) with the driver's peak allocation during the fit (tracemalloc:
    numpy's arrays are counted): yields ``(posterior, seconds, driver peak bytes)`` while the
    cluster is up (the posterior's rows are on it), then releases the partitions. A chain refused by
    the workers' memory check raises its MemoryBudgetError (the benchmarks' one way to time a fit
    on a cluster)."""
    import lpviz

    with local_cluster(workers, cores, memory_limit=memory_limit) as client:
        tracemalloc.start()
        started = time.perf_counter()
        try:
            posterior = lpviz.fit(release, scheduler=client, **options)
            seconds = time.perf_counter() - started
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        yield posterior, seconds, peak
        if hasattr(posterior, "close"):
            posterior.close()


def chain_figures(posterior, seconds, peak):
    """A chain's figures over the cluster: its seconds per iteration (best and median), bytes
    moved per iteration (mean), the parts of an iteration (best of each), the driver's peak, its
    traces (copied: the partitions go with the cluster)."""
    return {
        "seconds": seconds,
        "iteration": float(np.min(posterior.iteration_seconds)),
        "median": float(np.median(posterior.iteration_seconds)),
        "bytes": float(np.mean(posterior.bytes_moved)),
        "phases": {key: float(np.min([p[key] for p in posterior.phases])) for key in posterior.phases[0]},
        "driver_peak": peak,
        "traces": (posterior.log_joint.copy(), posterior.log_marginal.copy()),
    }


def on_cluster(release, options, workers, cores, budget):
    from lpviz.budget import MemoryBudgetError

    try:
        with fit_on_cluster(release, options, workers, cores, memory_limit=budget // workers) as fitted:
            return chain_figures(*fitted)
    except MemoryBudgetError as error:
        print(f"{workers} worker(s): refused: {error}")
        return None


def in_process_fits(data, topics):
    """Whether the in-process chain on ``data`` fits this machine (the check's words if not)."""
    from lpviz import methods, models
    from lpviz.budget import MemoryBudgetError, check_memory
    from lpviz.distributed import RowsOf
    from lpviz.engine import chain_bytes, count_itemsize

    # a generated release's counts are built narrow (RowsOf.build): count them at the first
    # generator block's dtype, as the workers' check does; a release held here at its own dtype
    held = getattr(data, "Y_obs", None)
    itemsize = count_itemsize(held) if held is not None else RowsOf(data, "Y_obs").sample_itemsize()
    need = chain_bytes(models.create("topics", topics), methods.create("private"), data.shape, itemsize)
    release_bytes = (itemsize or 8) * data.shape[0] * data.shape[1]
    try:
        check_memory(need + release_bytes, f"the in-process chain (state and the release at {itemsize} bytes a count)")
    except MemoryBudgetError as error:
        return str(error)
    return None


def narrow_release(data):
    """``data`` (a blockwise release) built here as the workers build their rows (RowsOf.build: a few
    generator blocks at a time, the counts in their narrowest integers), not int64 whole."""
    from lpviz.distributed import RowsOf
    from lpviz.release import Release

    return Release(
        Y_obs=RowsOf(data, "Y_obs").build(),
        alpha=RowsOf(data, "alpha").build(),
        kind=data.kind,
        simulated=not data.exact,
        noise_seed=None if data.exact else data.seed,
        name=f"synthetic-topics-blockwise {data.shape[0]}x{data.shape[1]}",
    )


def main():
    from lpviz import methods, models
    from lpviz.budget import format_bytes, memory_limit
    from lpviz.datasets import make_topics_blockwise
    from lpviz.distributed import RowsOf, partition_bytes
    from lpviz.privacy import alpha_from

    parser = size_arguments(__doc__, rows=200_000, topics=50)
    parser.add_argument("--cores", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--generate", action="store_true", help="build the release on the workers")
    parser.add_argument("--project", type=int, nargs=2, metavar=("ROWS", "COLS"), help="scale to this size too")
    parser.add_argument(
        "--workers", type=int, nargs="*", default=[1, 2], help="the clusters' sizes, in order (none: one process)"
    )
    parser.add_argument("--no-in-process", action="store_true", help="skip the in-process chain")
    args = parse_sizes(parser)

    budget = memory_limit()
    model, method = models.create("topics", args.topics), methods.create("private")
    if args.generate:
        data = make_topics_blockwise(
            args.rows, args.cols, args.topics, alpha0=float(alpha_from(1.0)), concentration=1e6, random_state=1
        )
        # what the workers' memory check counts: the first generator block's narrowest integers
        itemsize = RowsOf(data, "Y_obs").sample_itemsize()
    else:
        itemsize = 2  # the release built here is int16
    for workers in args.workers:
        rows = -(-args.rows // workers)
        state = format_bytes(partition_bytes(model, method, (args.rows, args.cols), rows, 1, itemsize=itemsize))
        print(f"{args.rows:,} x {args.cols:,}, K = {args.topics}: chain state {state} "
              f"per worker on {workers} worker(s) (memory budget {format_bytes(budget)} on this machine)")  # fmt: skip
    started = time.perf_counter()
    if args.generate and args.no_in_process:
        refusal, release = "--no-in-process", None
    elif args.generate:
        refusal = in_process_fits(data, args.topics)
        release = None if refusal else narrow_release(data)
    else:
        refusal, release = None, build_release(args.rows, args.cols, args.topics, seed=1)
        data = release
    if release is not None:
        print(f"release {args.rows:,} x {args.cols:,}, K = {args.topics}, eps/N = 1: built here in "
              f"{time.perf_counter() - started:.1f} s ({release.Y_obs.nbytes / 1e9:.2f} GB)")  # fmt: skip
    options = dict(
        method="private", n_components=args.topics, n_iter=args.iterations, burn_in=args.iterations - 1, thin=1,
        random_state=7,
    )  # fmt: skip
    reference = None
    if release is not None and args.no_in_process:
        print("in one process: not run (--no-in-process)")
    elif release is None:
        print(f"in one process: not run: {refusal}")
    else:
        reference, total = timed_in_process(release, options)
        in_process = float(np.min(reference.iteration_seconds))
        print(f"in one process ({args.cores} kernel threads): {in_process:.2f} s per iteration (best of "
              f"{args.iterations}), {total:.1f} s with the start")  # fmt: skip
        del release
    if args.no_in_process:
        release = None
    measured = {}
    for workers in args.workers:
        result = on_cluster(data, options, workers, args.cores, budget)
        if result is None:
            continue
        measured[workers] = result
        same = reference is not None and all(np.array_equal(a, b, equal_nan=True) for a, b in zip(result["traces"],
                   (reference.log_joint, reference.log_marginal), strict=True))  # fmt: skip
        phases = ", ".join(f"{key} {value:.3f} s" for key, value in result["phases"].items())
        print(
            f"{workers} worker(s) x {max(1, args.cores // workers)} threads: {result['iteration']:.2f} s per "
            f"iteration ({phases}); {result['bytes'] / 1e6:.1f} MB moved per iteration; driver peak "
            f"{result['driver_peak'] / 1e6:.1f} MB; {result['seconds']:.1f} s with the start; "
            f"same bits as one process: {same if reference is not None else 'no in-process chain'}"
        )
    if 1 not in measured:
        return
    one = measured[1]
    sizes = [(args.rows, args.cols)] + ([tuple(args.project)] if args.project else [])
    for rows, cols in sizes:
        cells = rows * cols / (args.rows * args.cols)
        wide = cols / args.cols
        per_worker_bytes = one["bytes"] * wide
        # a cluster's network: take a conservative 1 GB/s per link
        bandwidth = 1e9
        rows1, passes1 = one["phases"]["rows"] * cells, one["phases"]["passes"]
        driver = one["phases"]["driver"] * wide
        print(f"projection at {rows:,} x {cols:,} (rows' work split evenly; the passes' sums stay serial; "
              "each worker adds 4 round trips of 1 ms and its copies of phi and counts at 1 GB/s, "
              "sent one after the other):")  # fmt: skip
        round_trip = 1e-3
        for workers in (1, 16, 64):
            seconds = rows1 / workers + driver + passes1 + workers * (4 * round_trip + per_worker_bytes / bandwidth)
            state = partition_bytes(model, method, (rows, cols), -(-rows // workers), 1, itemsize=itemsize)
            print(f"  {workers} workers: about {seconds:.2f} s per iteration "
                  f"({per_worker_bytes * workers / 1e6:.0f} MB moved per iteration, "
                  f"{format_bytes(state)} of state per worker)")  # fmt: skip


if __name__ == "__main__":
    main()
