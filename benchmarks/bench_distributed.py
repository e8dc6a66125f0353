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
block); at the largest sizes the data should be built on the workers instead (not done yet).

    python benchmarks/bench_distributed.py                      # 200,000 x 2,000, 3 iterations
    python benchmarks/bench_distributed.py --rows 20000 --cols 2000 --iterations 3

Timings are wall-clock on a machine that may be shared: read them beside the in-process chain
of the same run.
"""

import argparse
import logging
import os
import time
import tracemalloc

import numpy as np


def build_release(rows, cols, topics, seed, block=20_000):
    from lpviz.privacy import alpha_from
    from lpviz.release import Release

    rng = np.random.default_rng(seed)
    phi = rng.dirichlet(np.full(cols, 0.05), topics) * 0.1 * cols / topics * 2
    alpha = alpha_from(1.0)
    Y_obs = np.empty((rows, cols), dtype=np.int16)
    for start in range(0, rows, block):
        stop = min(rows, start + block)
        theta = rng.gamma(0.3, 1.0, (stop - start, topics))
        counts = rng.poisson(theta @ phi)
        # two-sided geometric noise: the difference of two geometric draws
        noise = rng.geometric(1 - alpha, counts.shape) - rng.geometric(1 - alpha, counts.shape)
        Y_obs[start:stop] = np.clip(counts + noise, -30000, 30000)
    return Release(Y_obs=Y_obs, alpha=alpha, epsilon=1.0, N=1.0, kind="documents", simulated=True)


def timed_in_process(release, options):
    import lpviz

    started = time.perf_counter()
    posterior = lpviz.fit(release, **options)
    return posterior, time.perf_counter() - started


def on_cluster(release, options, workers, cores):
    from distributed import Client, LocalCluster

    import lpviz
    from lpviz import distributed

    threads = max(1, cores // workers)
    env = {"LPVIZ_NUM_THREADS": str(threads), "NUMBA_NUM_THREADS": str(threads), "OPENBLAS_NUM_THREADS": "1"}
    with (
        LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            env=env,
            memory_limit=0,
            dashboard_address=None,
            silence_logs=logging.ERROR,
        ) as cluster,
        Client(cluster) as client,
    ):
        tracemalloc.start()
        started = time.perf_counter()
        posterior = lpviz.fit(release, scheduler=client, **options)
        seconds = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        traces = (posterior.log_joint.copy(), posterior.log_marginal.copy())
        result = {
            "seconds": seconds,
            "iteration": float(np.min(posterior.iteration_seconds)),
            "bytes": float(np.mean(posterior.bytes_moved)),
            "phases": {key: float(np.min([p[key] for p in posterior.phases])) for key in posterior.phases[0]},
            "driver_peak": peak,
            "traces": traces,
        }
        assert isinstance(posterior, distributed.DistributedPosterior)
        posterior.close()
        return result


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--cols", type=int, default=2_000)
    parser.add_argument("--topics", type=int, default=50)
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--cores", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()

    started = time.perf_counter()
    release = build_release(args.rows, args.cols, args.topics, seed=1)
    print(f"release {args.rows:,} x {args.cols:,}, K = {args.topics}, eps/N = 1: built in "
          f"{time.perf_counter() - started:.1f} s ({release.Y_obs.nbytes / 1e9:.2f} GB int16)")  # fmt: skip
    options = dict(
        method="private", n_components=args.topics, n_iter=args.iterations, burn_in=args.iterations - 1, thin=1,
        random_state=7,
    )  # fmt: skip
    reference, total = timed_in_process(release, options)
    in_process = float(np.min(reference.iteration_seconds))
    print(f"in one process ({args.cores} kernel threads): {in_process:.2f} s per iteration (best of "
          f"{args.iterations}), {total:.1f} s with the start")  # fmt: skip
    measured = {}
    for workers in (1, 2):
        result = on_cluster(release, options, workers, args.cores)
        measured[workers] = result
        same = all(np.array_equal(a, b, equal_nan=True) for a, b in zip(result["traces"], (reference.log_joint,
                   reference.log_marginal), strict=True))  # fmt: skip
        phases = ", ".join(f"{key} {value:.3f} s" for key, value in result["phases"].items())
        print(
            f"{workers} worker(s) x {max(1, args.cores // workers)} threads: {result['iteration']:.2f} s per "
            f"iteration ({phases}); {result['bytes'] / 1e6:.1f} MB moved per iteration; driver peak "
            f"{result['driver_peak'] / 1e6:.1f} MB; {result['seconds']:.1f} s with the start; "
            f"same bits as one process: {same}"
        )
    one = measured[1]
    per_worker_bytes = one["bytes"]
    # the transfer rate seen on this machine: bytes of one worker over its round's time beyond compute is not
    # separable here, so take a conservative 1 GB/s per link for a cluster's network
    bandwidth = 1e9
    rows1, driver, passes1 = one["phases"]["rows"], one["phases"]["driver"], one["phases"]["passes"]
    print("projection (rows' work split evenly; the passes' sums stay serial; each worker adds 4 round trips of 1 ms "
          "and its copies of phi and counts at 1 GB/s, sent one after the other):")  # fmt: skip
    round_trip = 1e-3
    for workers in (16, 64):
        seconds = rows1 / workers + driver + passes1 + workers * (4 * round_trip + per_worker_bytes / bandwidth)
        print(f"  {workers} workers: about {seconds:.2f} s per iteration "
              f"({per_worker_bytes * workers / 1e6:.0f} MB moved per iteration)")  # fmt: skip


if __name__ == "__main__":
    main()
