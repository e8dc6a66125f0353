"""``lpviz demo``: the paper's Figure 3 experiment from the command line.

Synthetic topics (D=90, V=15, K=3) noised per document, fitted three ways
(private, naive, non-private); prints an MAE table and writes a picture:
true and noised counts (red positive, blue negative), each method's
posterior mean rates, and the true and recovered topics.
"""

import json
from pathlib import Path

import numpy as np

from lpviz._files import atomic_write

from . import CLIError
from .fit import check_run_lengths, format_table, progress_bar, refuse_overwrite, run_method, save_json

DEFAULT_ITERATIONS = 6000  # the paper: 6,000 iterations, every 25th saved after 1,000
FIGURE_NAME = "figure3.png"
SUMMARY_NAME = "summary.json"


def register(subparsers):
    parser = subparsers.add_parser(
        "demo",
        help="Figure 3: private vs naive vs non-private topic recovery",
        description="Reproduce Figure 3 of Schein et al. (2019) at a small scale: synthetic topics under "
        "heterogeneous noise, three fits side by side, an MAE table and a picture.",
    )
    parser.add_argument(
        "--iterations",
        type=int,
        default=DEFAULT_ITERATIONS,
        help=f"Gibbs iterations per method (default {DEFAULT_ITERATIONS}; the paper ran 6000)",
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=Path("results/demo"),
        metavar="DIR",
        help=f"where to write {FIGURE_NAME} and {SUMMARY_NAME} (default results/demo)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the data, the noise and the chains")
    parser.add_argument(
        "--alpha0", type=float, default=0.8, help="mean per-document noise level (default 0.8: high noise; 0.2: low)"
    )
    parser.add_argument("--force", action="store_true", help="replace an earlier demo's files in DIR")
    parser.add_argument("--json", action="store_true", help="print a machine-readable summary")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.set_defaults(func=run)


def run(args):
    from ..datasets import make_topics
    from ..methods import METHODS
    from ..metrics import align_topics

    # short runs (tests, a first look) save every iteration so the posterior mean has samples
    thin = 25 if args.iterations >= 150 else 1
    check_run_lengths(args.iterations, None, thin)
    if args.seed < 0:
        raise CLIError(f"--seed must be >= 0, got {args.seed}")
    if not 0 < args.alpha0 < 1:
        raise CLIError(f"--alpha0 must lie strictly between 0 and 1, got {args.alpha0:g}")
    if args.output.exists() and not args.output.is_dir():
        raise CLIError(f"--output {args.output} is a file; give a directory")
    figure_path, summary_path = args.output / FIGURE_NAME, args.output / SUMMARY_NAME
    for path in (figure_path, summary_path):
        refuse_overwrite(path, args.force)

    data = make_topics(alpha0=args.alpha0, random_state=args.seed)
    release, truth = data.release(), data.truth()
    progress = True if args.json or args.no_progress else None
    results, scores = {}, {}
    for method in METHODS:
        results[method], scores[method] = run_method(
            release,
            truth,
            model="topics",
            method=method,
            n_components=3,
            iterations=args.iterations,
            burn_in=None,
            thin=thin,
            seed=args.seed,
            progress=progress,
        )
    recovered = {m: r.best["phi"][align_topics(r.best["phi"], data.factors["phi"])] for m, r in results.items()}

    args.output.mkdir(parents=True, exist_ok=True)
    with progress_bar(1, "figure", progress) as bar:
        _draw(figure_path, data, results, recovered, scores)
        bar.update(1)
    summary = {
        "experiment": "Schein et al. 2019, Figure 3 (synthetic topic recovery)",
        "shape": list(data.Y.shape),
        "n_components": 3,
        "alpha0": args.alpha0,
        "alpha_mean": float(np.mean(data.alpha)),
        "iterations": args.iterations,
        "thin": thin,
        "seed": args.seed,
        "methods": scores,
        "files": [str(figure_path), str(summary_path)],
    }
    save_json(summary_path, summary, args.force)

    if args.json:
        print(json.dumps(summary))
        return 0
    print(
        f"Figure 3: {data.Y.shape[0]} documents x {data.Y.shape[1]} words, K=3, per-document noise "
        f"alpha_d ~ Beta (mean {np.mean(data.alpha):.2f}), {args.iterations} iterations per method"
    )
    rows = [{"method": m, **scores[m]} for m in results]
    print(
        format_table(
            rows,
            [
                ("method", "method", "{}"),
                ("mae", "MAE", "{:.3f}"),
                ("topic_distance", "topic error (TV)", "{:.3f}"),
                ("seconds", "seconds", "{:.1f}"),
            ],
        )
    )
    print(
        "MAE: posterior mean rates vs the true counts; topic error: distance of the best sample's "
        "topics to the truth after Hungarian alignment (0 = exact, 1 = disjoint). Lower is better."
    )
    print(f"wrote {figure_path}")
    print(f"wrote {summary_path}")
    return 0


def _draw(path, data, results, recovered, scores):
    """Counts and rates (red = positive, blue = negative) on one scale; topics on another."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.colors import TwoSlopeNorm
    from matplotlib.figure import Figure

    # one colour scale for every count panel, centred on 0 so negative noise shows blue;
    top = float(max(data.Y.max(), 1))  # the truth fills the scale; larger noise saturates
    counts_norm = TwoSlopeNorm(vmin=-top, vcenter=0.0, vmax=top)
    phi_true = data.factors["phi"] / data.factors["phi"].sum(axis=1, keepdims=True)
    topics = {"truth": phi_true}
    topics.update({m: phi / phi.sum(axis=1, keepdims=True) for m, phi in recovered.items()})
    topic_top = max(float(t.max()) for t in topics.values())

    figure = Figure(figsize=(15, 8.5), layout="constrained")
    FigureCanvasAgg(figure)
    grid = figure.add_gridspec(2, 2 + len(results), height_ratios=[4, 1])
    panels = [("true counts Y", data.Y), ("noised counts Y_obs", data.Y_obs)]
    panels += [(f"{m}: mu_hat (MAE {scores[m]['mae']:.2f})", results[m].mu_hat) for m in results]
    image = None
    for column, (title, matrix) in enumerate(panels):
        axes = figure.add_subplot(grid[0, column])
        image = axes.imshow(matrix, cmap="RdBu_r", norm=counts_norm, aspect="auto", interpolation="nearest")
        axes.set_title(title, fontsize=10)
        axes.set_xlabel("word")
        if column == 0:
            axes.set_ylabel("document")
    figure.colorbar(image, ax=figure.axes, location="right", shrink=0.6, label="count / rate")

    topic_panels = [("true topics", topics["truth"])]
    topic_panels += [(f"{m} topics (error {scores[m]['topic_distance']:.2f})", topics[m]) for m in results]
    for column, (title, matrix) in zip([0] + list(range(2, 2 + len(results))), topic_panels, strict=True):
        axes = figure.add_subplot(grid[1, column])
        axes.imshow(matrix, cmap="Reds", vmin=0, vmax=topic_top, aspect="auto", interpolation="nearest")
        axes.set_title(title, fontsize=10)
        axes.set_yticks(range(matrix.shape[0]))
        axes.set_xlabel("word")
    figure.suptitle(
        "Topic recovery under local privacy (Schein et al. 2019, Figure 3): private vs naive vs non-private"
    )
    atomic_write(path, lambda handle: figure.savefig(handle, format="png", dpi=100))
