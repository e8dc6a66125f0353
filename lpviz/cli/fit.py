"""``lpviz fit``: fit a topic or block model to (noised) counts.

Data come from ``--data SPEC`` (see :func:`lpviz.datasets.load_data`): true
counts are noised here with ``--epsilon/--N`` or ``--alpha`` and ``--seed``;
with ``--already-noised`` SPEC is a release written by ``lpviz privatize``.
The synthetic specs carry their own noised copy, used when no privacy level
is given. With the true counts at hand (everything but an already-noised
release) the summary reports the MAE against them.
"""

import json
import sys
from pathlib import Path

import numpy as np

from . import CLIError
from lpviz._files import atomic_write

from .privatize import add_privacy_arguments, privacy_level, read_release, refuse_overwrite

METHODS = ("private", "naive", "nonprivate")


def register(subparsers):
    parser = subparsers.add_parser(
        "fit",
        help="fit a topic or block model (private, naive, non-private)",
        description="Fit Poisson factorization to counts noised with the geometric mechanism: the "
                    "private chain (noise-aware), the naive chain (negative counts truncated to 0) "
                    "and the non-private chain on the true counts.",
    )
    parser.add_argument("--data", required=True, metavar="SPEC",
                        help="a counts file (.npz, .csv, .mtx, edge list, UCI), enron-topics:PATH, "
                             "enron-network:PATH, synthetic-topics or synthetic-blocks")
    parser.add_argument("--model", choices=("topics", "blocks"), default=None,
                        help="topic model (documents x words) or block model (square network); "
                             "default: what the data are")
    parser.add_argument("--method", choices=METHODS + ("all",), default="private",
                        help="how the noise is treated; 'all' runs the three side by side (default private)")
    add_privacy_arguments(parser)
    parser.add_argument("--already-noised", action="store_true",
                        help="SPEC is a release from `lpviz privatize` (noised counts + alpha)")
    parser.add_argument("--components", type=int, default=None,
                        help="topics K or communities C (default: the truth's for synthetic data)")
    parser.add_argument("--holdout", choices=("none", "random", "top-actors"), default="none",
                        help="cells left out of the fit and scored apart (held-out MAE): 'top-actors' is "
                             "Figure 5's design, every cell involving the top --holdout-actors senders or "
                             "recipients; 'random' a random --holdout-fraction of cells")
    parser.add_argument("--holdout-actors", type=int, default=50, metavar="N",
                        help="with --holdout top-actors: how many top rows/columns (default 50, the paper's)")
    parser.add_argument("--holdout-fraction", type=float, default=0.1, metavar="F",
                        help="with --holdout random: the share of cells held out (default 0.1)")
    parser.add_argument("--iterations", type=int, default=1000, help="Gibbs iterations (default 1000)")
    parser.add_argument("--burn-in", type=int, default=None, help="iterations before saving (default 1/6)")
    parser.add_argument("--thin", type=int, default=25, help="save every THIN-th iteration (default 25)")
    parser.add_argument("--seed", type=int, default=None, help="seed of the noise and the chains")
    parser.add_argument("--output", type=Path, default=None, metavar="DIR",
                        help="write METHOD.npz (mu_hat, best factors, log-joint trace) and summary.json here")
    parser.add_argument("--force", action="store_true", help="replace result files that exist in DIR")
    parser.add_argument("--json", action="store_true", help="print a machine-readable summary")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.set_defaults(func=run)


# ---------------------------------------------------------------------------
# Shared with `lpviz demo`
# ---------------------------------------------------------------------------

def check_run_lengths(iterations, burn_in, thin):
    if iterations < 1:
        raise CLIError(f"--iterations must be >= 1, got {iterations}")
    if thin < 1:
        raise CLIError(f"--thin must be >= 1, got {thin}")
    if burn_in is not None and burn_in < 0:
        raise CLIError(f"--burn-in must be >= 0, got {burn_in}")
    burn = iterations // 6 if burn_in is None else burn_in
    if burn + thin > iterations:
        raise CLIError(f"no sample would be saved: burn-in {burn} + thin {thin} > iterations {iterations}; "
                       "raise --iterations or lower --burn-in/--thin")


def progress_bar(total, description, disable):
    """A tqdm bar on stderr; ``disable=None`` hides it when stderr is not a terminal."""
    from tqdm import tqdm

    return tqdm(total=total, desc=description, unit="it", file=sys.stderr, disable=disable,
                leave=False, dynamic_ncols=True)


def run_method(Y_obs, Y_true, *, model, method, n_components, alpha, mask, iterations, burn_in, thin,
               seed, progress):
    """One :func:`lpviz.inference.fit` with a progress bar; the true counts for ``nonprivate``."""
    from ..inference import fit

    counts = Y_true if method == "nonprivate" else Y_obs
    with progress_bar(iterations, method, progress) as bar:
        return fit(counts, model=model, method=method, n_components=n_components, n_iter=iterations,
                   burn_in=burn_in, thin=thin, alpha=alpha if method == "private" else None, mask=mask,
                   random_state=seed, callback=lambda state: bar.update(1))


def scoring_mask(model, shape, mask):
    """Cells to score: the observed ones, never a network's diagonal (no self loops)."""
    cells = np.ones(shape, dtype=bool) if mask is None else np.asarray(mask, dtype=bool).copy()
    if model == "blocks":
        np.fill_diagonal(cells, False)
    return cells


def method_scores(result, Y_true, model, mask):
    """MAE (and held-out MAE if ``mask`` holds cells out) against the true counts."""
    from ..metrics import heldout_mae, mae

    scores = {"seconds": round(result.seconds, 3), "best_log_joint": result.best_log_joint,
              "final_log_joint": float(result.log_joint[-1]), "saved_samples": len(result.samples)}
    if Y_true is not None:
        cells = scoring_mask(model, result.mu_hat.shape, mask)
        scores["mae"] = mae(result.mu_hat, Y_true, mask=cells)
        held_out = scoring_mask(model, result.mu_hat.shape, None) & ~cells
        if held_out.any():
            scores["heldout_mae"] = heldout_mae(result.mu_hat, Y_true, ~held_out)
    return scores


def save_method(directory, method, result, force):
    arrays = {"mu_hat": result.mu_hat, "log_joint": result.log_joint,
              "saved_iterations": np.asarray(result.saved_iterations), "best_log_joint": result.best_log_joint}
    arrays.update({f"best_{name}": value for name, value in result.best.items()})
    path = directory / f"{method}.npz"
    refuse_overwrite(path, force)
    atomic_write(path, lambda handle: np.savez_compressed(handle, **arrays))
    return path


def save_json(path, summary, force):
    refuse_overwrite(path, force)
    atomic_write(path, lambda handle: handle.write(json.dumps(summary, indent=2).encode("utf-8")))


def format_table(rows, columns):
    """A plain text table: ``rows`` are dicts, ``columns`` (key, header, format) triples."""
    cells = [[header for _, header, _ in columns]]
    for row in rows:
        cells.append([("-" if row.get(key) is None else fmt.format(row[key])) for key, _, fmt in columns])
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    return "\n".join("  ".join(text.ljust(width) for text, width in zip(line, widths)).rstrip()
                     for line in cells)


def resolve_seed(seed):
    """The given seed, or a fresh one (reported, so the run can be repeated)."""
    if seed is None:
        return int(np.random.SeedSequence().entropy % (2**32))
    if seed < 0:
        raise CLIError(f"--seed must be >= 0, got {seed}")
    return seed


# ---------------------------------------------------------------------------
# lpviz fit
# ---------------------------------------------------------------------------

def _load(args, seed):
    """The counts to fit as a dict: Y_true (None for a release), Y_obs (None if still to be
    noised), alpha, epsilon, N, mask, model, source, components (the truth's K, if known)."""
    from ..datasets import SyntheticData, load_data

    if args.already_noised:
        release = read_release(args.data)
        level = privacy_level(args, required=False)
        if release["alpha"] is not None and level is not None:
            raise CLIError(f"{args.data} records the noise it was released with (alpha); "
                           "drop --epsilon/--N/--alpha")
        if release["alpha"] is None and level is None:
            raise CLIError(f"{args.data} does not record its noise level: give --epsilon [--N] or --alpha")
        epsilon, N, alpha = (release["epsilon"], release["N"], release["alpha"]) if level is None else level
        return {"Y_true": None, "Y_obs": release["Y_obs"], "alpha": alpha, "epsilon": epsilon, "N": N,
                "mask": None, "model": release["model"], "source": release["source"], "components": None}

    # the synthetic generators take the seed; files do not
    options = {"random_state": seed} if args.data.startswith("synthetic-") else {}
    data = load_data(args.data, **options)
    loaded = {"Y_true": data.Y, "Y_obs": None, "alpha": None, "epsilon": None, "N": None,
              "mask": data.info.get("mask"), "model": data.model, "source": data.source, "components": None}
    if isinstance(data, SyntheticData):
        loaded["components"] = int(data.factors["theta"].shape[1])
    level = privacy_level(args, required=False)
    if level is not None:
        loaded["epsilon"], loaded["N"], loaded["alpha"] = level
    elif isinstance(data, SyntheticData):  # the generator's own noised copy
        loaded.update(Y_obs=data.Y_obs, alpha=data.alpha, epsilon=data.info.get("epsilon"), N=data.info.get("N"))
    return loaded


def _with_holdout(args, mask, Y, model, seed):
    """The data's own mask (e.g. no self loops) with the --holdout cells taken out too."""
    from ..datasets import holdout_mask

    how = {"none": "none", "random": "random cells", "top-actors": "top actors"}[args.holdout]
    try:
        held = holdout_mask(Y, model, how, fraction=args.holdout_fraction, n_actors=args.holdout_actors,
                            random_state=np.random.default_rng(seed))
    except ValueError as error:
        raise CLIError(f"--holdout {args.holdout}: {error}") from None
    if held is None:
        return mask
    return held if mask is None else np.asarray(mask, dtype=bool) & held


def run(args):
    from ..privacy import privatize

    check_run_lengths(args.iterations, args.burn_in, args.thin)
    if args.components is not None and args.components < 1:
        raise CLIError(f"--components must be >= 1, got {args.components}")
    seed = resolve_seed(args.seed)
    methods = list(METHODS) if args.method == "all" else [args.method]
    if args.already_noised and "nonprivate" in methods:
        if args.method == "nonprivate":
            raise CLIError("--method nonprivate needs the true counts; an already-noised release has none")
        methods.remove("nonprivate")
    if args.output is not None and args.output.exists() and not args.output.is_dir():
        raise CLIError(f"--output {args.output} is a file; give a directory")
    if args.output is not None:
        for name in [f"{m}.npz" for m in methods] + ["summary.json"]:
            refuse_overwrite(args.output / name, args.force)

    loaded = _load(args, seed)
    Y_true, Y_obs, alpha, mask = loaded["Y_true"], loaded["Y_obs"], loaded["alpha"], loaded["mask"]
    model = args.model or loaded["model"]
    n_components = args.components or loaded["components"]
    if n_components is None:
        raise CLIError("give the number of topics/communities with --components K")
    noise_seed, chain_seed, holdout_seed = np.random.SeedSequence(seed).spawn(3)
    mask = _with_holdout(args, mask, Y_true if Y_true is not None else Y_obs, model, holdout_seed)
    if Y_obs is None and any(m != "nonprivate" for m in methods):
        if alpha is None:
            raise CLIError("the private and naive fits need noised counts: give --epsilon E [--N N] or "
                           "--alpha A to noise the data here, or --method nonprivate")
        Y_obs = privatize(Y_true, alpha=alpha, random_state=np.random.default_rng(noise_seed))

    results, scores = {}, {}
    for method in methods:
        result = run_method(Y_obs, Y_true, model=model, method=method, n_components=n_components,
                            alpha=alpha, mask=mask, iterations=args.iterations, burn_in=args.burn_in,
                            thin=args.thin, seed=np.random.default_rng(chain_seed),
                            progress=True if args.json or args.no_progress else None)
        results[method] = result
        scores[method] = method_scores(result, Y_true, model, mask)

    alpha_summary = None if alpha is None else (
        float(alpha) if np.ndim(alpha) == 0 else {"per_row": True, "mean": float(np.mean(alpha)),
                                                  "min": float(np.min(alpha)), "max": float(np.max(alpha))})
    shape = (Y_obs if Y_obs is not None else Y_true).shape
    summary = {
        "data": args.data, "source": loaded["source"], "shape": list(shape), "model": model,
        "n_components": n_components, "epsilon": loaded["epsilon"], "N": loaded["N"], "alpha": alpha_summary,
        "already_noised": bool(args.already_noised), "holdout": args.holdout, "iterations": args.iterations,
        "burn_in": args.iterations // 6 if args.burn_in is None else args.burn_in, "thin": args.thin,
        "seed": seed, "methods": scores,
    }
    if args.output is not None:
        args.output.mkdir(parents=True, exist_ok=True)
        files = [str(save_method(args.output, m, results[m], args.force)) for m in methods]
        summary["files"] = files + [str(args.output / "summary.json")]
        save_json(args.output / "summary.json", summary, args.force)

    if args.json:
        print(json.dumps(summary))
    else:
        _print_summary(summary, methods)
    return 0


def _print_summary(summary, methods):
    alpha = summary["alpha"]
    if isinstance(alpha, dict):
        noise = f"per-row alpha, mean {alpha['mean']:.3g} (from {alpha['min']:.3g} to {alpha['max']:.3g})"
    elif alpha is None:
        noise = "no noise (non-private only)"
    else:
        level = f"epsilon={summary['epsilon']:g}, N={summary['N']:g}, " if summary["epsilon"] is not None \
            and summary["N"] is not None else ""
        noise = f"{level}alpha={alpha:.4g}"
    rows, k = summary["shape"], summary["n_components"]
    print(f"data: {summary['data']} ({rows[0]} x {rows[1]}, {summary['model']}, K={k}); noise: {noise}")
    print(f"{summary['iterations']} iterations, burn-in {summary['burn_in']}, thin {summary['thin']}, "
          f"seed {summary['seed']}")
    table = [{"method": m, **summary["methods"][m]} for m in methods]
    columns = [("method", "method", "{}"), ("mae", "MAE", "{:.4g}"), ("heldout_mae", "held-out MAE", "{:.4g}"),
               ("best_log_joint", "best log joint", "{:.6g}"), ("seconds", "seconds", "{:.1f}")]
    if all(row.get("heldout_mae") is None for row in table):
        columns = [c for c in columns if c[0] != "heldout_mae"]
    if all(row.get("mae") is None for row in table):
        columns = [c for c in columns if c[0] != "mae"]
    print(format_table(table, columns))
    for path in summary.get("files", []):
        print(f"wrote {path}")
