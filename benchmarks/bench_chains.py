"""Single chains against ensembles of four, where single chains sometimes stick (issue 39).

The data: :func:`lpviz.datasets.make_topics` with 120 documents x 40 words, K = 4
topics and its own per-document noise (``alpha0=0.5``: per-row alpha about
0.14-0.81), fitted by the private method (collapsed sampler, and with
``--sampler bessel`` the Bessel one) for 1,500 iterations, thin 25, at 20
seeds. For each seed the ensemble is ``lpviz.fit(..., chains=4)``; its chain 0
is exactly the single chain of that seed (checked), so the "single chain"
column is chain 0 scored alone, the "chains=4" column the ensemble scored by
:func:`lpviz.metrics.score` (pooled rates, cross-chain R-hat, ``chains
disagree``).

A chain is *stuck* when its MAE (against the true counts) is more than
``--stuck`` (default 5%) above the median MAE of every chain of the run: the
issue measured 0.836-0.844 for the chains that found the main mode and
0.92-1.25 for the stuck ones.

Then the wall-clock of ``chains=4`` against one chain (``chains=1``) on the
same data and seeds, in the same process. The machine may be shared: every
time is printed beside its reference, measured in the same run.

    python benchmarks/bench_chains.py                 # 20 seeds, collapsed sampler
    python benchmarks/bench_chains.py --seeds 8 --sampler bessel
    python benchmarks/bench_chains.py --scaling       # wall-clock of chains = 1, 2, 4: small and medium data

``--scaling`` times ``lpviz.fit(..., chains=C)`` for C = 1, 2, 4 on the small
set above (120 x 40, K = 4) and a medium one (``make_topics(1000, 1000, 10)``,
one million cells: its sweeps split over the kernel pool), best of
``--repeats``, to choose the library's default number of chains.

``--score`` times :func:`lpviz.metrics.score` of an ensemble of C = 1, 2, 4 chains (the dashboard
scores each method's chains at every snapshot): in full (the likelihood trace, the probe cells'
rates and the aligned topics diagnosed element by element) and with ``diagnostics="trace"`` (the
trace alone: what the live snapshots use), beside the single chain's full score.

    python benchmarks/bench_chains.py --score

``--tiny`` (with any of the three) runs the same tables at the smallest sizes in seconds, for the
test suite: 2 seeds of 100 iterations; ``--scaling`` on the small set alone; ``--score`` at Figure 3's
size alone.
"""

import argparse
import time

import numpy as np

import lpviz
from lpviz._parallel import n_threads
from lpviz.datasets import make_topics


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--iterations", type=int, default=1500)
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--sampler", choices=("collapsed", "bessel"), default="collapsed")
    parser.add_argument("--stuck", type=float, default=0.05, help="stuck: MAE this share above the median chain's")
    parser.add_argument("--timed-seeds", type=int, default=3, help="seeds timed as a single chain (reference)")
    parser.add_argument("--scaling", action="store_true", help="time chains = 1, 2, 4 instead")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument(
        "--dask-workers",
        type=int,
        default=0,
        metavar="W",
        help="with --scaling: also time the chains whole on a LocalCluster of W one-thread worker processes",
    )
    parser.add_argument("--data-seed", type=int, default=0, help="seed of the synthetic data set")
    parser.add_argument("--score", action="store_true", help="time score() of ensembles, full and trace-only")
    parser.add_argument("--tiny", action="store_true", help="the smallest sizes, in seconds (the test suite's run)")
    args = parser.parse_args()
    if args.tiny:
        args.seeds, args.iterations, args.timed_seeds, args.repeats = 2, 100, 1, 1
    if args.score:
        return score_cost(args.repeats, args.tiny)
    if args.scaling:
        return scaling(args.repeats, args.dask_workers, args.tiny)

    data = make_topics(120, 40, 4, alpha0=0.5, random_state=args.data_seed)
    release, truth = data.release(), data.truth()
    alpha = release.alpha_per_row
    print(
        f"data: make_topics(120, 40, 4, alpha0=0.5, random_state={args.data_seed}), "
        f"per-row alpha {alpha.min():.2f}-{alpha.max():.2f}; "
        f"private ({args.sampler}), {args.iterations} iterations, thin 25; {args.seeds} seeds; "
        f"{n_threads()} kernel threads"
    )
    options = dict(n_components=4, n_iter=args.iterations, thin=25, sampler=args.sampler)

    ensembles, walls = [], []
    for seed in range(args.seeds):
        start = time.perf_counter()
        ensemble = lpviz.fit(release, random_state=seed, chains=args.chains, **options)
        walls.append(time.perf_counter() - start)
        ensembles.append(ensemble)
        print(f"  seed {seed}: {walls[-1]:.1f} s", flush=True)

    singles_wall = []
    for seed in range(min(args.timed_seeds, args.seeds)):
        start = time.perf_counter()
        single = lpviz.fit(release, random_state=seed, chains=1, **options)
        singles_wall.append(time.perf_counter() - start)
        assert np.array_equal(single.mu_hat, ensembles[seed].chains[0].mu_hat), "chain 0 is not the single chain"

    scores = [lpviz.score(e, release, truth) for e in ensembles]
    chain_mae = np.array([s["chain_mae"] for s in scores])  # (seed, chain)
    threshold = np.median(chain_mae) * (1 + args.stuck)
    stuck = chain_mae > threshold
    single_flagged = np.array([bool(s["chains"][0]["health"]["flags"]) for s in scores])
    ensemble_flagged = np.array([bool(s["health"]["flags"]) for s in scores])
    disagree = np.array([s["health"]["chains_disagree"] for s in scores])
    named = [
        set(s["odd_chains"]) == set(np.flatnonzero(row)) for s, row in zip(scores, stuck, strict=True) if row.any()
    ]

    for seed, (result, row) in enumerate(zip(scores, stuck, strict=True)):
        if row.any() or result["health"]["chains_disagree"]:
            print(
                f"  seed {seed}: chain MAEs {np.round(result['chain_mae'], 3).tolist()}, "
                f"stuck {np.flatnonzero(row).tolist()}, "
                f"flags {result['health']['flags']}, cross-chain R-hat {result['rhat']:.3g}"
            )
            for reason in result["health"]["reasons"]:
                print(f"    {reason}")

    # every chain scored alone is a single fit of its own seed (chain 0: the seed's; the others: spawned)
    each_flagged = np.array([[bool(c["health"]["flags"]) for c in s["chains"]] for s in scores])

    def describe(values):
        return f"{np.mean(values):.3f} (min {np.min(values):.3f}, max {np.max(values):.3f})"

    n_all = stuck.size
    pooled = np.array([s["mae"] for s in scores])
    columns = ("single chain (chain 0)", "every chain alone", f"chains={args.chains}")
    rows = [
        ("fits", args.seeds, n_all, args.seeds),
        ("fits with a stuck chain", int(stuck[:, 0].sum()), int(stuck.sum()), int(stuck.any(axis=1).sum())),
        ("fits flagged (any health flag)", *(int(f.sum()) for f in (single_flagged, each_flagged, ensemble_flagged))),
        (
            "flagged fits with a stuck chain",
            int((single_flagged & stuck[:, 0]).sum()),
            int((each_flagged & stuck).sum()),
            int((ensemble_flagged & stuck.any(axis=1)).sum()),
        ),
        (
            "fits with a stuck chain, unflagged",
            int((~single_flagged & stuck[:, 0]).sum()),
            int((~each_flagged & stuck).sum()),
            int((~ensemble_flagged & stuck.any(axis=1)).sum()),
        ),
        ("flagged chains disagree", "-", "-", int(disagree.sum())),
        ("  ... naming exactly the stuck ones", "-", "-", f"{sum(named)} of {len(named)}"),
        ("MAE, mean", *(f"{np.mean(v):.3f}" for v in (chain_mae[:, 0], chain_mae, pooled))),
        ("MAE, worst", *(f"{np.max(v):.3f}" for v in (chain_mae[:, 0], chain_mae, pooled))),
    ]
    print()
    print(f"{'':<36}" + "".join(f"{c:>24}" for c in columns))
    for label, *values in rows:
        print(f"{label:<36}" + "".join(f"{str(v):>24}" for v in values))
    print(f"pooled MAE of chains={args.chains}: {describe([s['mae'] for s in scores])}")
    print()
    print(
        f"wall-clock per fit (shared machine: noisy): chains={args.chains} {np.mean(walls):.2f} s "
        f"(min {np.min(walls):.2f}); one chain {np.mean(singles_wall):.2f} s (min {np.min(singles_wall):.2f}, "
        f"{len(singles_wall)} seeds); ratio of means {np.mean(walls) / np.mean(singles_wall):.2f}"
    )


def _cores_available(n=50_000_000):
    """The plain reference: a GIL-free Numba loop on one thread and on two. On an idle 2-core
    machine two take the time of one; on a shared one the ratio says how many cores this process
    gets, and so what concurrency the chains can show."""
    import threading

    from numba import njit

    @njit(nogil=True)
    def spin(n):
        total = 0.0
        for i in range(n):
            total += np.sqrt(i)
        return total

    spin(10)
    start = time.perf_counter()
    spin(n)
    one = time.perf_counter() - start
    threads = [threading.Thread(target=spin, args=(n,)) for _ in range(2)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    two = time.perf_counter() - start
    return one, two


def score_cost(repeats, tiny=False):
    """Seconds per :func:`lpviz.metrics.score` call of a C-chain ensemble, full and trace-only
    (``tiny``: Figure 3's size alone)."""
    problems = {
        "Figure 3's size 90 x 15, K=3": (make_topics(90, 15, 3, alpha0=0.75, random_state=0), 3),
    }
    if not tiny:
        problems["Figure 4's browser size 400 x 800, K=10"] = (
            make_topics(400, 800, 10, alpha0=0.5, random_state=0),
            10,
        )
    print(f"200 iterations, 40 samples saved per chain; best of {repeats} (shared machine: noisy)")
    for name, (data, k) in problems.items():
        release, truth = data.release(), data.truth()
        cells = []
        for chains in (1, 2, 4):
            fit = lpviz.fit(release, n_components=k, n_iter=200, burn_in=0, thin=5, random_state=0, chains=chains)
            for diagnostics in (True, "trace") if chains > 1 else (True,):
                best = np.inf
                for _ in range(repeats):
                    start = time.perf_counter()
                    lpviz.score(fit, release, truth, diagnostics=diagnostics)
                    best = min(best, time.perf_counter() - start)
                label = "full" if diagnostics is True else "trace"
                cells.append(f"chains={chains} {label}: {1000 * best:.0f} ms")
        print(f"{name}: " + ", ".join(cells))


def scaling(repeats, dask_workers=0, tiny=False):
    """``tiny``: the small set alone, 50 iterations, a shorter reference loop."""
    one, two = _cores_available(5_000_000 if tiny else 50_000_000)
    print(
        f"reference: a nogil loop {one:.2f} s on one thread, two of them {two:.2f} s on two threads "
        f"(1.0x on an idle 2-core machine; here {two / one:.2f}x: about {2 * one / two:.1f} cores for this process)"
    )
    problems = {
        "small 120 x 40, K=4, 300 it": (make_topics(120, 40, 4, alpha0=0.5, random_state=0), 4, 300),
        "medium 1000 x 1000, K=10, 30 it": (make_topics(1000, 1000, 10, alpha0=0.5, random_state=0), 10, 30),
    }
    if tiny:
        problems = {"small 120 x 40, K=4, 50 it": (make_topics(120, 40, 4, alpha0=0.5, random_state=0), 4, 50)}
    print(f"{n_threads()} kernel threads; best of {repeats} (shared machine: noisy)")
    for name, (data, k, n_iter) in problems.items():
        release = data.release()
        lpviz.fit(release, n_components=k, n_iter=n_iter, thin=5, random_state=0)  # warm: kernels, caches
        times = {}
        for chains in (1, 2, 4):
            best = np.inf
            for repeat in range(repeats):
                start = time.perf_counter()
                lpviz.fit(release, n_components=k, n_iter=n_iter, thin=5, random_state=repeat, chains=chains)
                best = min(best, time.perf_counter() - start)
            times[chains] = best
        row = ", ".join(f"chains={c}: {t:.2f} s ({t / times[1]:.2f}x)" for c, t in times.items())
        print(f"{name}: {row}")
        if dask_workers:
            row = _dask_row(release, k, n_iter, repeats, dask_workers, times[1])
            print(f"  on Dask ({dask_workers} worker processes, whole chains): {row}")


def _dask_row(release, k, n_iter, repeats, workers, reference):
    """The same fits with ``scheduler=``: each chain whole on a worker (lpviz._dask_chains), against
    the one in-process chain (``reference`` seconds)."""
    from distributed import Client, LocalCluster

    with (
        LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
        Client(cluster) as client,
    ):
        lpviz.fit(release, n_components=k, n_iter=n_iter, thin=5, random_state=0, chains=2, scheduler=client)  # warm
        times = {}
        for chains in (2, 4):
            best = np.inf
            for repeat in range(repeats):
                start = time.perf_counter()
                lpviz.fit(release, n_components=k, n_iter=n_iter, thin=5, random_state=repeat, chains=chains,
                          scheduler=client)  # fmt: skip
                best = min(best, time.perf_counter() - start)
            times[chains] = best
    return ", ".join(f"chains={c}: {t:.2f} s ({t / reference:.2f}x one in-process chain)" for c, t in times.items())


if __name__ == "__main__":
    main()
