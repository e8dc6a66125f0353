"""Scoring a chain over Dask workers: the row blocks' sums on the workers, beside pulling the rates.

For a private topic-model chain on synthetic counts of ROWS x COLUMNS (the release and true counts
of benchmarks/bench_distributed.py, 10% of the cells held out), fits the chain in one process and
on LocalClusters of W worker processes, then times ``lpviz.metrics.score(posterior, release,
truth)`` and prints, per W:

- ``workers``: the score as it is (``DistributedPosterior.block_sums``: each row block inside one
  partition checked and summed on its worker; a block across a partition's edge comes here);
- ``pulled``: the score as it was before (every row block's rates brought here, ``rate_rows``);

with the bytes moved between driver and workers by the score, the driver's peak allocation during
the score (tracemalloc: numpy's arrays are counted) and its seconds, beside the in-process score of
the same chain; and whether every number of the score equals the in-process score's (==). Every
score is cold: the release's baselines and estimated total (cached per release for a live view)
are computed in it.

    python benchmarks/bench_distributed_score.py                    # 50,000 x 2,000, K = 10
    python benchmarks/bench_distributed_score.py --rows 20000 --workers 1 2 3
    python benchmarks/bench_distributed_score.py --tiny     # 400 x 60, K = 3, W = 1 and 2: seconds

Timings are wall-clock on a machine that may be shared: read them beside the in-process score of
the same run.
"""

import dataclasses
import os
import time
import tracemalloc

import numpy as np
from bench_distributed import build_release, fit_on_cluster, parse_sizes, size_arguments

TIMING = ("seconds", "iterations_per_second")


def timed_score(posterior, release, truth, between=None):
    """(score without its timing keys, seconds, driver peak bytes, the same two of the rates' pass
    alone: metrics._rate_pass, the part of the score that reads the rates)."""
    from lpviz import metrics

    metrics._BASELINE_CACHE.clear()  # a cold score: the release's baselines and estimated total computed in it
    getattr(metrics, "_NOISED_CACHE", {}).clear()
    tracemalloc.start()
    started = time.perf_counter()
    result = metrics.score(posterior, release, truth)
    seconds = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    if between is not None:
        between()
    observed, heldout = release.observed_cells, release.heldout_cells
    references, cells = [truth.Y] + ([truth.mu] if truth.mu is not None else []), [observed, heldout]
    tracemalloc.start()
    started = time.perf_counter()
    metrics._rate_pass(posterior, release.shape, observed, references, cells)
    pass_seconds = time.perf_counter() - started
    _, pass_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    result = {key: value for key, value in result.items() if key not in TIMING}
    return result, (seconds, pass_seconds), (peak, pass_peak)


def pulled_score(posterior, release, truth):
    """The score as before: every row block's rates brought to the driver (``rate_rows``); returns
    timed_score's and the bytes moved (the rates, and the saved shared factors sent to each
    partition a block touches, as rate_rows sends them)."""
    from lpviz.distributed import DistributedPosterior, _nbytes

    moved, marks = [], []
    rate_rows = posterior.rate_rows
    shared = _nbytes(posterior.shared_samples) if np.prod(posterior.shape) > 16_000_000 else 0

    def counted(start, stop):
        mu = rate_rows(start, stop)
        touched = sum(first < stop and start < last for first, last in posterior.partitions)
        moved.append(mu.nbytes + touched * shared)
        return mu

    posterior.rate_rows = counted
    block_sums = DistributedPosterior.block_sums
    DistributedPosterior.block_sums = None  # metrics.score falls back to the rates by row blocks
    try:
        result = timed_score(posterior, release, truth, between=lambda: marks.append(sum(moved)))
    finally:
        DistributedPosterior.block_sums = block_sums
        del posterior.rate_rows
    return (*result, marks[0])  # the score's bytes (the pass alone moves them again)


def main():
    import lpviz
    from lpviz.budget import format_bytes

    parser = size_arguments(__doc__, rows=50_000, topics=10)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 3])
    args = parse_sizes(parser)
    if args.tiny:
        args.workers = args.workers[:2]  # a third cluster's start-up is the most of a tiny run
    cores = os.cpu_count() or 1
    release, truth = build_release(args.rows, args.cols, args.topics, seed=0, truth=True)
    heldout = np.random.default_rng(1).random(release.shape) < 0.1
    release = dataclasses.replace(release, heldout=heldout)
    options = dict(
        method="private", n_components=args.topics, n_iter=args.iterations, burn_in=1, thin=1, random_state=3
    )
    rates = args.rows * args.cols * 8
    print(
        f"score of a private chain, {args.rows:,} x {args.cols:,}, K = {args.topics}, {args.iterations} "
        f"iterations, 10% held out, {cores} cores; the rates are {format_bytes(rates)}, the true counts "
        f"{100 * np.count_nonzero(truth.Y) / truth.Y.size:.1f}% nonzero"
    )
    reference = lpviz.fit(release, **options)

    def figures(seconds, peak):
        return (
            f"score {seconds[0]:.2f} s, driver peak {format_bytes(peak[0])} "
            f"(the rates' pass alone {seconds[1]:.2f} s, peak {format_bytes(peak[1])})"
        )

    expected, seconds, peak = timed_score(reference, release, truth)
    print(f"in one process: {figures(seconds, peak)}; mae {expected['mae']:.6g}")
    for workers in args.workers:
        with fit_on_cluster(release, options, workers, cores) as (posterior, _, _):
            after, after_seconds, after_peak = timed_score(posterior, release, truth)
            before, before_seconds, before_peak, before_bytes = pulled_score(posterior, release, truth)
        print(
            f"W = {workers}: sums on the workers: {format_bytes(posterior.score_bytes)} moved, "
            f"{figures(after_seconds, after_peak)}, equal to one process: {after == expected}\n"
            f"       rates pulled (before): {format_bytes(before_bytes)} moved, "
            f"{figures(before_seconds, before_peak)}, equal: {before == expected}"
        )


if __name__ == "__main__":
    main()
