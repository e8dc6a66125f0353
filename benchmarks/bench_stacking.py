"""Chains that never meet, on the real Enron data (issue 54): what stacking and compare say, and their cost.

Two designs, each with ``--chains`` chains per method (default 4) on ``--copies`` noised copies
(default 3, noise seeds 0, 1, 2):

- ``fig5``: the Enron network of Figure 5 (actors with >= 100 emails: 84), the block model with
  C = 5, eps/N = 2, every cell of the top 26 actors held out (the paper's 50 of 161, scaled), 2,500
  iterations, every 10th saved after 500 (the dashboard's preset);
- ``fig4``: Enron emails x words at Figure 4's reduced browser size (400 x 800, K = 10, eps/N = 2),
  400 iterations, every 10th saved after 150, with 10% of the cells held out at random (the preset
  holds none out; the noised cells an analyst keeps back are what compare scores).

Per method and copy: the modes found, the MAE against the true counts of the stacked rates, the
equal-weight pool and the one best sample (the paper's Figure 3 summary), the best constant's, and
the held-out noised cells' elpd (stacked, cross-fitted; pooled) with its standard error. Then
:func:`lpviz.compare` over the copies (with the truth) and the rankings it states, and the seconds
stacking and compare add beside the seconds of the fits (the reference, in the same run).

    python benchmarks/bench_stacking.py                  # both designs: ~15 minutes on 2 cores
    python benchmarks/bench_stacking.py --design fig5 --copies 2
    python benchmarks/bench_stacking.py --tiny           # seconds: the test suite's run
"""

import argparse
import os
import time

import numpy as np

import lpviz
from lpviz.metrics import score
from lpviz.reproduce.chains import build_release

METHODS = ("private", "naive", "nonprivate")
DESIGNS = {
    "fig5": {
        "data": {"source": "enron-network", "min_count": 100, "seed": 0},
        "holdout": {"rule": "top actors", "n_actors": 26},
        "fit": {"model": "blocks", "n_components": 5, "n_iter": 2500, "burn_in": 500, "thin": 10},
    },
    "fig4": {
        "data": {"source": "enron-topics", "n_docs": 400, "n_words": 800, "seed": 0},
        "holdout": {"rule": "random cells", "fraction": 0.1, "seed": 0},
        "fit": {"model": "topics", "n_components": 10, "n_iter": 400, "burn_in": 150, "thin": 10},
    },
}
TINY = {
    "fig5": {"fit": {"n_iter": 60, "burn_in": 20, "thin": 4}, "holdout": {"n_actors": 26}},
    "fig4": {"data": {"n_docs": 60, "n_words": 120}, "fit": {"n_iter": 40, "burn_in": 10, "thin": 3}},
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--design", choices=[*DESIGNS, "both"], default="both")
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--copies", type=int, default=3)
    parser.add_argument("--epsilon", type=float, default=2.0, help="eps/N of the noise (N = 1)")
    parser.add_argument("--tiny", action="store_true", help="the smallest sizes, in seconds (the test suite's run)")
    args = parser.parse_args()
    chains, copies = (2, 1) if args.tiny else (args.chains, args.copies)
    print(f"machine: {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}")
    for name in DESIGNS if args.design == "both" else [args.design]:
        run_design(name, chains, copies, args.epsilon, args.tiny)


def _design(name, tiny):
    design = {part: dict(values) for part, values in DESIGNS[name].items()}
    if tiny:
        for part, values in TINY[name].items():
            design[part].update(values)
    return design


def _mae(mu, truth, cells):
    return float(np.mean(np.abs(mu - truth.Y)[cells]))


def run_design(name, chains, copies, epsilon, tiny):
    design = _design(name, tiny)
    fit_options = dict(design["fit"])
    print(f"\n== {name}: {design['data']} {fit_options}")
    print(f"   {chains} chains per method, {copies} noised copies, eps/N {epsilon:g}")
    fits, releases, truths = {m: [] for m in METHODS}, [], []
    fit_seconds, stack_seconds = 0.0, 0.0
    rows = []
    for copy in range(copies):
        params = {
            "data": design["data"],
            "noise": {"epsilon": epsilon, "N": 1, "seed": copy},
            "holdout": design["holdout"],
        }
        _, release, truth = build_release(params)
        releases.append(release)
        truths.append(truth)
        observed, held = release.observed_cells, release.heldout_cells
        for method in METHODS:
            start = time.perf_counter()
            fit = lpviz.fit(release, method=method, chains=chains, random_state=100 + copy, truth=truth, **fit_options)
            fit_seconds += time.perf_counter() - start
            fits[method].append(fit)
            start = time.perf_counter()
            stacking = fit.stacking(release)
            stacked = fit.stacked(release)
            stack_seconds += time.perf_counter() - start
            model = fit.model_instance
            zeros = model.structural_zeros(release.shape)
            scored = observed if zeros is None else observed & ~zeros
            held_scored = held if zeros is None else held & ~zeros
            best = model.rates(fit.best)
            elpd = stacking.elpd()
            scores = score(fit, release, truth, topics=False, diagnostics="trace")
            rows.append(
                {
                    "copy": copy,
                    "method": method,
                    "modes": len(stacking.modes),
                    "weights": " / ".join(f"{w:.2f}" for w in sorted(stacking.weights, reverse=True)),
                    "rhat": scores["rhat"],
                    "stacked": _mae(stacked.mu_hat, truth, scored),
                    "pooled": _mae(fit.mu_hat, truth, scored),
                    "best sample": _mae(best, truth, scored),
                    "chains": [_mae(c.mu_hat, truth, scored) for c in fit.chains],
                    "constant": scores["baselines"]["best_constant_mae"],
                    "held stacked": _mae(stacked.mu_hat, truth, held_scored),
                    "held pooled": _mae(fit.mu_hat, truth, held_scored),
                    "held best": _mae(best, truth, held_scored),
                    "held constant": scores["baselines"].get("best_constant_heldout_mae"),
                    "elpd stacked": elpd["stacked"],
                    "elpd pooled": elpd["pooled"],
                    "best-sample elpd": _best_sample_elpd(fit, release),
                    "text": stacking.text,
                }
            )
    print(
        "\ncopy method     modes  R-hat | MAE: stacked  pooled    best  chains         const"
        " | held-out MAE: stacked  pooled    best   const | held-out elpd (se): stacked, pooled, best sample"
    )
    for row in rows:
        span = f"{min(row['chains']):.3f}-{max(row['chains']):.3f}"
        rhat = f"{row['rhat']:.2f}" if row["rhat"] is not None else "-"
        held_constant = f"{row['held constant']:.3f}" if row["held constant"] is not None else "-"
        mae = f"{row['stacked']:7.3f} {row['pooled']:7.3f} {row['best sample']:7.3f}  {span:<13} {row['constant']:6.3f}"
        held = f"{row['held stacked']:7.3f} {row['held pooled']:7.3f} {row['held best']:7.3f} {held_constant:>7}"
        stacked, pooled = row["elpd stacked"], row["elpd pooled"]
        elpd = f"{stacked['elpd']:,.1f} ({stacked['se']:.1f}), {pooled['elpd']:,.1f} ({pooled['se']:.1f})"
        print(
            f"{row['copy']:>4} {row['method']:<10} {row['modes']:>5} {rhat:>6} |      {mae} |"
            f"               {held} | {elpd}, {row['best-sample elpd']:,.1f}"
        )
    print("\nmodes in words:")
    for row in rows:
        print(f"  copy {row['copy']} {row['method']}: {row['text']}")
    start = time.perf_counter()
    table = lpviz.compare(fits, releases, truths)
    compare_seconds = time.perf_counter() - start
    shown = table.drop(columns=["flags", "how"])
    print(f"\nlpviz.compare over {copies} copies (cells per copy {table.attrs['cells']}):")
    print(shown.to_string(float_format=lambda v: f"{v:,.3f}"))
    print("flags:")
    for method, flags in table["flags"].items():
        print(f"  {method}: {flags or '-'}")
    print("rankings stated:" if table.attrs["statements"] else "rankings stated: none")
    for statement in table.attrs["statements"]:
        print(f"  - {statement}")
    print(f"rule: {table.attrs['rule']}")
    print(
        f"\nseconds: fits {fit_seconds:.1f} (the reference); stacking of every fit {stack_seconds:.2f} "
        f"({100 * stack_seconds / fit_seconds:.1f}% of the fits); compare {compare_seconds:.2f} (its stacking cached)"
    )


def _best_sample_elpd(fit, release):
    """The held-out elpd of the one sample with the highest log joint (the paper's Figure 3 summary)."""
    from lpviz.privacy import noised_logpmf
    from lpviz.stacking import rates_at_cells, scored_cells

    cells = scored_cells(release, fit.model_instance)
    return float(noised_logpmf(cells.y_noised, rates_at_cells(fit.model_instance, fit.best, cells), cells.alpha).sum())


if __name__ == "__main__":
    main()
