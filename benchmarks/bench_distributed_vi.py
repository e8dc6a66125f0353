"""CAVI over Dask workers (lpviz.fit(..., inference="vi", scheduler=...)) beside CAVI in one process.

For a private topic-model fit (K = 50, eps/N = 1) on synthetic counts of ROWS x COLUMNS (the
release of benchmarks/bench_distributed.py), prints per iteration: seconds in one process (all
kernel threads) and on a LocalCluster of 1 and 2 worker processes (cores split between them),
bytes moved between driver and workers, the driver's peak allocation during the fit (tracemalloc:
numpy's arrays are counted; E[theta], rows x K, is gathered at the end) and whether the ELBO traces
are the same bits.

    python benchmarks/bench_distributed_vi.py                    # 20,000 x 2,000, 3 iterations
    python benchmarks/bench_distributed_vi.py --rows 100000 --cols 2000 --iterations 2
    python benchmarks/bench_distributed_vi.py --tiny     # 400 x 60, K = 3, 2 iterations: seconds

Timings are wall-clock on a machine that may be shared: read them beside the one-process fit of
the same run.
"""

import os
import time

import numpy as np
from bench_distributed import build_release, fit_on_cluster, parse_sizes, size_arguments


def fit_options(topics, iterations):
    return dict(n_components=topics, n_iter=iterations, tol=0.0, inference="vi", random_state=0)


def main():
    import lpviz
    from lpviz.budget import format_bytes

    parser = size_arguments(__doc__, rows=20_000, topics=50)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    args = parse_sizes(parser)
    cores = os.cpu_count() or 1
    release = build_release(args.rows, args.cols, args.topics, seed=0)
    options = fit_options(args.topics, args.iterations)
    print(
        f"private CAVI, {args.rows:,} x {args.cols:,}, K = {args.topics}, {args.iterations} iterations, {cores} cores"
    )
    lpviz.fit(release, **dict(options, n_iter=1))  # compile the kernels before timing
    started = time.perf_counter()
    reference = lpviz.fit(release, **options)
    total = time.perf_counter() - started
    print(f"one process: {np.min(reference.iteration_seconds):.2f} s / iteration (best), {total:.1f} s in all")
    for workers in args.workers:
        with fit_on_cluster(release, options, workers, cores) as (posterior, seconds, peak):
            same = np.array_equal(posterior.elbo, reference.elbo) and np.array_equal(posterior.mu_hat, reference.mu_hat)
        print(
            f"{workers} worker(s): {np.min(posterior.iteration_seconds):.2f} s / iteration (best), "
            f"{seconds:.1f} s in all (the start's transfer and compilation included), "
            f"moved {format_bytes(np.mean(posterior.bytes_moved))} / iteration, "
            f"driver peak {format_bytes(peak)}, same bits: {'yes' if same else 'NO'}"
        )


if __name__ == "__main__":
    main()
