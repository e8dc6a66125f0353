"""The tensor model on synthetic data with a known truth: recovery and speed.

1. Recovery: ``make_tensor`` (sender x recipient x month, K groups of actors each
   active in a burst of months, no self loops) noised at several eps/N; the
   private, naive and non-private fits by MCMC and by CAVI; the MAE of the
   posterior mean rates against the true rates on the observed cells, beside
   the best constant (the median true rate: no fit that predicts one number
   does better) and the fit's mass (its rates summed over the observed cells
   over the true rates' sum: below 0.5 the fit has collapsed).
2. Speed: seconds per private (collapsed) iteration of the tensor model beside
   the topic model run on the same cells as a matrix (rows x months*recipients,
   the same K): a plain reference in the same run.

    .venv/bin/python benchmarks/bench_tensor.py [--actors 30] [--months 24] [--iterations 600] [--speed-only]
    .venv/bin/python benchmarks/bench_tensor.py --tiny     # both sections at the smallest sizes, seconds
"""

import argparse
import time

import numpy as np

import lpviz
from lpviz.datasets import make_tensor
from lpviz.release import Release


def recovery(args):
    print(f"Recovery: make_tensor({args.actors} actors, {args.months} months, K={args.components}), MAE vs true rates")
    print(f"{'eps/N':>6} {'inference':>9} {'method':>11} {'rate MAE':>9} {'mass':>6} {'best const':>10} {'zero':>6}")
    for eps in args.eps:
        data = make_tensor(args.actors, args.months, args.components, epsilon=eps, random_state=args.seed)
        release, truth = data.release(), data.truth()
        observed = release.observed_cells
        mu = truth.mu[observed]
        constant = np.abs(mu - np.median(mu)).mean()
        for inference in ("mcmc", "vi"):
            for method in ("private", "naive", "nonprivate"):
                mcmc = inference == "mcmc"
                schedule = dict(n_iter=args.iterations, thin=10) if mcmc else dict(n_iter=args.vi_iterations)
                posterior = lpviz.fit(
                    release,
                    method=method,
                    truth=truth,
                    n_components=args.components,
                    inference=inference,
                    random_state=args.seed + 1,
                    **schedule,
                )
                result = lpviz.score(posterior, release, truth)
                mass = posterior.mu_hat[observed].sum() / mu.sum()
                print(
                    f"{eps:>6g} {inference:>9} {method:>11} {result['rate_mae']:>9.4f} {mass:>6.2f} "
                    f"{constant:>10.4f} {mu.mean():>6.3f}"
                )


def speed(args):
    data = make_tensor(args.speed_actors, args.months, args.components, epsilon=1.0, random_state=args.seed)
    release = data.release()
    matrix = Release(
        Y_obs=release.Y_obs.reshape(release.shape[0], -1),
        alpha=release.alpha,
        structural_zeros=release.structural_zeros.reshape(release.shape[0], -1),
    )
    print(
        f"\nSpeed: private collapsed iterations on {release.shape} ({np.prod(release.shape):,} cells), "
        f"K={args.components}; the topic model on the same cells as a {matrix.shape} matrix is the reference"
    )
    chains = {}
    for label, target, model in (("tensor", release, "tensor"), ("topics (reference)", matrix, "topics")):
        chains[label] = lpviz.Chain(target, model=model, method="private", n_components=args.components, random_state=1)
        chains[label].step(5)  # compilation and first-iteration costs
    times = {label: [] for label in chains}
    for _ in range(args.rounds):  # interleaved rounds: the machine's load hits both alike
        for label, chain in chains.items():
            start = time.perf_counter()
            chain.step(args.speed_iterations)
            times[label].append((time.perf_counter() - start) / args.speed_iterations)
    for label, seconds in times.items():
        print(f"  {label:>20}: {1000 * np.median(seconds):8.2f} ms per iteration (median of {args.rounds} rounds)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--actors", type=int, default=30)
    parser.add_argument("--months", type=int, default=24)
    parser.add_argument("--components", type=int, default=4)
    parser.add_argument("--eps", type=float, nargs="+", default=[3.0, 1.0, 0.5])
    parser.add_argument("--iterations", type=int, default=600)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--speed-actors", type=int, default=200)
    parser.add_argument("--speed-iterations", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--vi-iterations", type=int, default=500, help="CAVI's most iterations")
    parser.add_argument("--speed-only", action="store_true", help="only the speed section")
    parser.add_argument("--tiny", action="store_true", help="both sections at the smallest sizes (the test suite's)")
    args = parser.parse_args()
    if args.tiny:
        args.actors, args.months, args.components, args.eps = 8, 4, 2, [1.0]
        args.iterations, args.vi_iterations = 40, 20
        args.speed_actors, args.speed_iterations, args.rounds = 10, 2, 1
    if not args.speed_only:
        recovery(args)
    speed(args)


if __name__ == "__main__":
    main()
