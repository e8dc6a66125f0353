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
    """A chain's figures over the cluster: its seconds per iteration (best; median of the iterations
    between the first and the last), bytes moved per iteration, the parts of an iteration and their
    bytes (each the median over those iterations), the driver's peak, its traces (copied: the
    partitions go with the cluster)."""
    # the parts of the iterations between the first and the last (the median of each): the first's
    # round has no score yet (it comes with the second's sweep) and the last's has one more, its own
    seconds_each = np.asarray(posterior.iteration_seconds)
    middle = list(range(1, len(seconds_each) - 1)) or list(range(len(seconds_each)))
    return {
        "seconds": seconds,
        "iteration": float(np.min(seconds_each)),
        "median": float(np.median(seconds_each[middle])),
        "bytes": float(np.median([posterior.bytes_moved[i] for i in middle])),
        "phases": {key: float(np.median([posterior.phases[i][key] for i in middle])) for key in posterior.phases[0]},
        "part_bytes": {
            key: float(np.median([posterior.part_bytes[i][key] for i in middle])) for key in posterior.part_bytes[0]
        },  # fmt: skip
        "driver_peak": peak,
        "traces": (posterior.log_joint.copy(), posterior.log_marginal.copy()),
        "workers": len(posterior.actors),
    }


def probe_cluster(posterior, repeats=30):
    """The idle cluster's latencies after the chain (medians of ``repeats``; seconds): ``round``, phi
    (the chain's shared factors) sent to every worker at once and back, as an iteration's round moves
    it; ``hop``, one call with a few numbers to one worker after the other, as a pass makes them.
    Measured here with the workers idle, not beside the chain's sweeps (workers of their own)."""
    actors = posterior.actors
    phi = tuple(np.zeros_like(factor) for factor in posterior.shared_samples[-1])
    rounds, hops = [], []
    for _ in range(repeats):
        started = time.perf_counter()
        for future in [actor.probe(phi) for actor in actors]:
            future.result()
        rounds.append(time.perf_counter() - started)
        started = time.perf_counter()
        for actor in actors:
            actor.probe(np.zeros(posterior.n_components)).result()
        hops.append((time.perf_counter() - started) / len(actors))
    return {"round": float(np.median(rounds)), "hop": float(np.median(hops))}


def on_cluster(release, options, workers, cores, budget):
    from lpviz.budget import MemoryBudgetError

    try:
        with fit_on_cluster(release, options, workers, cores, memory_limit=budget // workers) as fitted:
            figures = chain_figures(*fitted)
            figures["probe"] = probe_cluster(fitted[0])
            return figures
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
        print(
            f"{workers} worker(s) x {max(1, args.cores // workers)} threads: {result['iteration']:.2f} s per "
            f"iteration (best; median {result['median']:.2f} s); {result['bytes'] / 1e6:.2f} MB moved per "
            f"iteration; driver peak {result['driver_peak'] / 1e6:.1f} MB; {result['seconds']:.1f} s with the start; "
            f"same bits as one process: {same if reference is not None else 'no in-process chain'}"
        )
    if not measured:
        return
    print_breakdown(measured)
    for workers, result in sorted(measured.items()):
        print(f"{workers} worker(s), idle after the chain: phi to every worker and back "
              f"{result['probe']['round'] * 1e3:.2f} ms; a hop {result['probe']['hop'] * 1e3:.2f} ms")  # fmt: skip
    if 1 not in measured:
        return
    sizes = [(args.rows, args.cols)] + ([tuple(args.project)] if args.project else [])
    for rows, cols in sizes:
        print_projection(measured, rows * cols / (args.rows * args.cols), cols / args.cols, (rows, cols), model,
                         method, itemsize)  # fmt: skip


BREAKDOWN = (
    ("rows", "workers' rounds (driver's clock)"),
    ("sweep", "  sweep, slowest worker's own"),
    ("score", "  score, slowest worker's own"),
    ("wait", "  wait on the slowest (mean worker)"),
    ("overhead", "  overhead (network, Dask)"),
    ("passes", "running-sum passes"),
    ("hop", "  per hop (one worker's call)"),
    ("driver", "phi's draw on the driver"),
)


def print_breakdown(measured):
    """The best iteration's parts for each cluster, side by side (seconds, then bytes)."""
    sizes = sorted(measured)
    print("per-iteration breakdown (medians over the iterations between the first and the last), seconds:")
    print(f"  {'part':<38}" + "".join(f"{f'{w} worker(s)':>14}" for w in sizes))
    print(f"  {'iteration (median)':<38}" + "".join(f"{measured[w]['median']:>14.3f}" for w in sizes))
    for key, label in BREAKDOWN:
        print(f"  {label:<38}" + "".join(f"{measured[w]['phases'][key]:>14.4f}" for w in sizes))
        if key == "hop":
            hops = [round(measured[w]["phases"]["hops"]) for w in sizes]
            print(f"  {'  hops (calls one after the other)':<38}" + "".join(f"{h:>14}" for h in hops))
    print("  bytes moved, MB:")
    for key, label in (("shared", "phi out"), ("counts", "counts back"), ("passes", "passes")):
        print(f"  {'  ' + label:<38}" + "".join(f"{measured[w]['part_bytes'][key] / 1e6:>14.3f}" for w in sizes))


def projection_parts(measured):
    """The projection's parts, each from the measured iterations (nothing assumed): the rows' work of
    one worker (its sweep and score); the imbalance (the wait on the slowest as a share of the rows'
    work, from the largest cluster measured); the overhead of a round, a fixed part and a part per
    worker fitted through the clusters measured (one cluster: all of it fixed); a hop of the passes
    (the mean over the clusters) and hops per worker; phi's draw; bytes per worker."""
    sizes = sorted(measured)
    one, largest = measured[1]["phases"], measured[sizes[-1]]["phases"]
    work = one["sweep"] + one["score"]
    imbalance = largest["wait"] / max(largest["sweep"] + largest["score"], 1e-12)
    if len(sizes) > 1:
        w0, w1 = sizes[0], sizes[-1]
        per_worker = max(0.0, (largest["overhead"] - measured[w0]["phases"]["overhead"]) / (w1 - w0))
        fixed = max(0.0, measured[w0]["phases"]["overhead"] - per_worker * w0)
    else:
        per_worker, fixed = 0.0, one["overhead"]
    hop = float(np.mean([measured[w]["phases"]["hop"] for w in sizes]))
    hops_per_worker = largest["hops"] / sizes[-1]
    bytes_per_worker = measured[sizes[-1]]["bytes"] / sizes[-1]
    return dict(work=work, imbalance=imbalance, fixed=fixed, per_worker=per_worker, hop=hop,
                hops_per_worker=hops_per_worker, driver=one["driver"], bytes_per_worker=bytes_per_worker)  # fmt: skip


def projected_seconds(parts, workers, cells=1.0, wide=1.0):
    """T(W) = work x cells / W x (1 + imbalance) + overhead(W) + hops(W) x hop + driver."""
    return (
        parts["work"] * cells / workers * (1 + (parts["imbalance"] if workers > 1 else 0.0))
        + parts["fixed"]
        + parts["per_worker"] * wide * workers
        + parts["hop"] * parts["hops_per_worker"] * workers
        + parts["driver"] * wide
    )


def probed_parts(measured):
    """:func:`projection_parts` with the idle cluster's latencies (:func:`probe_cluster`) for the
    round's overhead (fixed and per worker, fitted through the clusters measured) and the hop."""
    parts = projection_parts(measured)
    sizes = sorted(measured)
    rounds = [measured[w]["probe"]["round"] for w in sizes]
    if len(sizes) > 1:
        per_worker = max(0.0, (rounds[-1] - rounds[0]) / (sizes[-1] - sizes[0]))
        fixed = max(0.0, rounds[0] - per_worker * sizes[0])
    else:
        per_worker, fixed = 0.0, rounds[0]
    hop = float(np.mean([measured[w]["probe"]["hop"] for w in sizes]))
    return dict(parts, fixed=fixed, per_worker=per_worker, hop=hop)


def print_projection(measured, cells, wide, size, model, method, itemsize):
    for latencies, parts in (
        ("the chain's own latencies, beside its sweeps", projection_parts(measured)),
        ("the idle cluster's latencies (probed after the chain)", probed_parts(measured)),
    ):
        print_projection_of(parts, latencies, cells, wide, size, model, method, itemsize)


def print_projection_of(parts, latencies, cells, wide, size, model, method, itemsize):
    from lpviz.budget import format_bytes
    from lpviz.distributed import partition_bytes

    rows, cols = size
    print(f"projection at {rows:,} x {cols:,} from the measured parts, {latencies} (workers on machines of "
          f"their own, each with the 1-worker run's threads): rows' work {parts['work'] * cells:.3f} s / W x "
          f"(1 + imbalance {parts['imbalance']:.3f}) + overhead {parts['fixed']:.4f} s + "
          f"{parts['per_worker'] * wide:.4f} s x W + {parts['hops_per_worker']:.1f} W hops x {parts['hop']:.4f} s "
          f"+ phi's draw {parts['driver'] * wide:.4f} s:")  # fmt: skip
    base = projected_seconds(parts, 1, cells, wide)
    for workers in (1, 2, 16, 64):
        seconds = projected_seconds(parts, workers, cells, wide)
        serial = seconds - parts["work"] * cells / workers * (1 + (parts["imbalance"] if workers > 1 else 0.0))
        state = partition_bytes(model, method, (rows, cols), -(-rows // workers), 1, itemsize=itemsize)
        print(f"  {workers} workers: about {seconds:.3f} s per iteration (speed-up {base / seconds:.2f}x, "
              f"parallel efficiency {base / seconds / workers:.0%}; not divided: {serial:.3f} s; "
              f"{parts['bytes_per_worker'] * wide * workers / 1e6:.1f} MB moved per iteration, "
              f"{format_bytes(state)} of state per worker)")  # fmt: skip


if __name__ == "__main__":
    main()
