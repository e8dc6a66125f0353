"""The block model's chain over Dask workers (lpviz.distributed) beside the chain in one process.

A private block-model chain (mixed-membership SBM, eps = 1) on a synthetic network of ACTORS x
ACTORS (:func:`lpviz.datasets.make_blocks`), C communities. Prints per iteration: seconds in one
process (all kernel threads), and on a LocalCluster of 1 and 2 worker processes (cores split
between them): seconds, bytes moved between driver and workers, the split of the time (the
workers' row rounds, the running-sum passes, the driver's draw of theta and pi), the driver's peak
allocation during the distributed fit (tracemalloc), and whether the chains are the same bits;
then the in-process chain once more (a shared machine's load drifts during a run).

Per iteration each worker gets theta and pi (ACTORS x C + C x C floats) twice (sweep, score) and
returns n_send, n_recv (ACTORS x C integers each) and n_cd (C x C): about 5 x ACTORS x C x 8 bytes
per worker, against ACTORS^2 cells of data that never move after the start.

    python benchmarks/bench_distributed_blocks.py                    # 3,000 actors, C = 10
    python benchmarks/bench_distributed_blocks.py --actors 1000 --iterations 3
    python benchmarks/bench_distributed_blocks.py --inference vi     # the CAVI fit (private, default variant)
    python benchmarks/bench_distributed_blocks.py --tiny             # 60 actors, C = 3, 2 iterations: seconds

CAVI (``--inference vi``): per iteration each worker gets q(theta) and q(pi) (their shapes and
rates: 2 x (ACTORS x C + C x C) floats) and returns its rows of R (concatenated in row order through
the workers) and its fixed-point part of the expected counts received (ACTORS x C x 2 integers).

Timings are wall-clock on a machine that may be shared: read them beside the in-process chain
of the same run.
"""

import argparse
import os
import time

import numpy as np
from bench_distributed import chain_figures, fit_on_cluster


def on_cluster(release, options, workers, cores):
    with fit_on_cluster(release, options, workers, cores) as (posterior, seconds, peak):
        if options.get("inference") == "vi":
            return {
                "seconds": seconds,
                "iteration": float(np.min(posterior.iteration_seconds)),
                "median": float(np.median(posterior.iteration_seconds)),
                "bytes": float(np.mean(posterior.bytes_moved)),
                "driver_peak": peak,
                "elbo": posterior.elbo.copy(),
                "mu_hat": posterior.mu_hat.copy(),
            }
        return dict(chain_figures(posterior, seconds, peak), mu_hat=posterior.mu_hat.copy())


def same_as(result, reference):
    """Whether a fit over the cluster is the one-process fit's bits (traces, mu_hat)."""
    if "elbo" in result:
        traces = [(result["elbo"], reference.elbo)]
    else:
        traces = zip(result["traces"], (reference.log_joint, reference.log_marginal), strict=True)
    return all(np.array_equal(a, b, equal_nan=True) for a, b in traces) and np.array_equal(
        result["mu_hat"], reference.mu_hat
    )


def main():
    import lpviz
    from lpviz.datasets import make_blocks

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--actors", type=int, default=3_000)
    parser.add_argument("--communities", type=int, default=10)
    parser.add_argument("--iterations", type=int, default=4)
    parser.add_argument("--cores", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--inference", choices=("mcmc", "vi"), default="mcmc")
    parser.add_argument("--tiny", action="store_true", help="60 actors, C = 3, 2 iterations (the test suite's run)")
    args = parser.parse_args()
    if args.tiny:
        args.actors, args.communities, args.iterations = 60, 3, 2

    started = time.perf_counter()
    data = make_blocks(n_actors=args.actors, n_communities=args.communities, epsilon=1.0, random_state=1)
    release = data.release()
    print(f"network {args.actors:,} x {args.actors:,}, C = {args.communities}, eps = 1 (N = {data.info['N']:.2f}): "
          f"built in {time.perf_counter() - started:.1f} s")  # fmt: skip
    options = dict(method="private", n_components=args.communities, n_iter=args.iterations, random_state=7)
    if args.inference == "vi":
        options.update(inference="vi", tol=0.0)  # every iteration runs: the same count on each side
    else:
        options.update(burn_in=args.iterations - 1, thin=1)
    started = time.perf_counter()
    reference = lpviz.fit(release, **options)
    total = time.perf_counter() - started
    print(f"in one process ({args.cores} kernel threads): {np.min(reference.iteration_seconds):.2f} s per iteration "
          f"(best of {args.iterations}; median {np.median(reference.iteration_seconds):.2f} s), "
          f"{total:.1f} s with the start")  # fmt: skip
    for workers in (1, 2):
        result = on_cluster(release, options, workers, args.cores)
        same = same_as(result, reference)
        phases = "; ".join(f"{key} {value:.3f} s" for key, value in result.get("phases", {}).items()) or "-"
        print(
            f"{workers} worker(s) x {max(1, args.cores // workers)} threads: {result['iteration']:.2f} s per "
            f"iteration (best; median {result['median']:.2f} s; phases {phases}); {result['bytes'] / 1e6:.2f} MB moved "
            f"per iteration; driver peak {result['driver_peak'] / 1e6:.1f} MB; {result['seconds']:.1f} s with "
            f"the start; same bits as one process (traces, mu_hat): {same}"
        )
    # the machine's load drifts over a run: the in-process chain once more, after the cluster's
    again = lpviz.fit(release, **options)
    print(f"in one process again, after: {np.min(again.iteration_seconds):.2f} s per iteration (best; median "
          f"{np.median(again.iteration_seconds):.2f} s)")  # fmt: skip


if __name__ == "__main__":
    main()
