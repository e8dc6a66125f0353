"""``lpviz privatize``: noise a count matrix with the geometric mechanism.

The result is a *release*: an ``.npz`` holding the noised counts ``Y_obs``
(which can be negative), the noise level ``alpha`` and the labels, so that
``lpviz fit --data RELEASE --already-noised`` knows how it was noised.
``.csv`` output writes just the noised table (for other tools).
"""

import json
import sys
import zipfile
from pathlib import Path

import numpy as np

from lpviz._files import atomic_write

from . import CLIError

RELEASE_KEY = "Y_obs"


def register(subparsers):
    parser = subparsers.add_parser(
        "privatize",
        help="noise counts with the two-sided geometric mechanism",
        description="Read counts (a file, or any --data spec of `lpviz fit`), add two-sided geometric "
                    "noise with alpha = exp(-epsilon/N), and write the noised matrix. OUTPUT .npz is a "
                    "release `lpviz fit --already-noised` reads; .csv is a plain table.",
    )
    parser.add_argument("input", metavar="INPUT", help="counts: .npz (key Y), .csv, other formats or a data spec")
    parser.add_argument("output", metavar="OUTPUT", help="where to write the noised counts (.npz or .csv)")
    add_privacy_arguments(parser)
    parser.add_argument("--seed", type=int, default=None, help="seed of the noise (simulations; not with --exact)")
    parser.add_argument("--exact", action="store_true",
                        help="OpenDP's exact sampler with a secure generator (for releasing real data)")
    parser.add_argument("--force", action="store_true", help="replace OUTPUT if it exists")
    parser.add_argument("--json", action="store_true", help="print a machine-readable summary")
    parser.set_defaults(func=run)


def add_privacy_arguments(parser):
    """--epsilon/--N or --alpha, shared by `privatize` and `fit`."""
    group = parser.add_argument_group("privacy level (alpha = exp(-epsilon/N))")
    group.add_argument("--epsilon", type=float, default=None, help="privacy budget epsilon > 0")
    group.add_argument("--N", type=float, default=None, dest="N",
                       help="l1 distance made indistinguishable (default 1; with --epsilon)")
    group.add_argument("--alpha", type=float, default=None, help="noise level in (0, 1), instead of --epsilon")


def privacy_level(args, required=True):
    """(epsilon, N, alpha) from the arguments, exactly one of epsilon/alpha set; None if absent."""
    if args.epsilon is not None and args.alpha is not None:
        raise CLIError("give --epsilon (with --N) or --alpha, not both: alpha = exp(-epsilon/N)")
    if args.N is not None and args.epsilon is None:
        raise CLIError("--N goes with --epsilon (alpha = exp(-epsilon/N)); add --epsilon")
    if args.epsilon is None and args.alpha is None:
        if required:
            raise CLIError("give the privacy level: --epsilon E [--N N] or --alpha A")
        return None
    from ..privacy import alpha_from

    if args.alpha is not None:
        if not 0 < args.alpha < 1:
            raise CLIError(f"--alpha must lie strictly between 0 and 1, got {args.alpha:g}")
        return None, None, float(args.alpha)
    N = 1.0 if args.N is None else args.N
    if not args.epsilon > 0:
        raise CLIError(f"--epsilon must be > 0 (smaller = more noise), got {args.epsilon:g}")
    if not N >= 1:
        raise CLIError(f"--N must be >= 1 (the l1 distance the mechanism hides), got {N:g}")
    return float(args.epsilon), float(N), float(alpha_from(args.epsilon, N))


def refuse_overwrite(path, force):
    if path.exists() and not force:
        raise CLIError(f"{path} already exists; choose another name or pass --force to replace it")


def write_release(path, Y_obs, alpha, *, epsilon, N, row_labels, col_labels, model, source):
    """Write noised counts with their noise level as an .npz release."""
    arrays = {
        RELEASE_KEY: np.asarray(Y_obs, dtype=np.int64),
        "alpha": np.asarray(alpha, dtype=np.float64),
        "epsilon": np.asarray(np.nan if epsilon is None else epsilon),
        "N": np.asarray(np.nan if N is None else N),
        "row_labels": np.asarray([str(label) for label in row_labels], dtype=str),
        "col_labels": np.asarray([str(label) for label in col_labels], dtype=str),
        "model": np.asarray(model, dtype=str),
        "source": np.asarray(str(source), dtype=str),
    }
    atomic_write(path, lambda handle: np.savez_compressed(handle, **arrays))


def read_release(path):
    """Read a release written by :func:`write_release` (``lpviz privatize``).

    Returns a dict with ``Y_obs``, ``alpha`` (float or per-row array),
    ``epsilon``/``N`` (None if unknown), labels, ``model`` and ``source``.
    """
    path = Path(path)
    if not path.is_file():
        raise CLIError(f"{path}: no such file; --already-noised reads a release written by `lpviz privatize`")
    if not zipfile.is_zipfile(path):  # np.load would try it as a pickle and say so
        raise CLIError(f"{path}: not an .npz release (a .csv from `lpviz privatize` is a plain table without "
                       "its noise level); write one with `lpviz privatize IN OUT.npz`")
    try:
        archive = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as error:
        raise CLIError(f"{path}: not an .npz release ({error}); write one with `lpviz privatize IN OUT.npz`")
    with archive:
        if RELEASE_KEY not in archive.files:
            raise CLIError(f"{path}: no noised counts '{RELEASE_KEY}' in it (it holds "
                           f"{', '.join(sorted(archive.files)) or 'nothing'}); --already-noised reads a release "
                           "written by `lpviz privatize` (drop --already-noised to noise true counts here)")
        Y_obs = archive[RELEASE_KEY]
        if Y_obs.ndim != 2 or not np.issubdtype(Y_obs.dtype, np.integer):
            raise CLIError(f"{path}: '{RELEASE_KEY}' must be a 2-d integer matrix, got {Y_obs.dtype} {Y_obs.shape}")

        def optional(key, default=None):
            return archive[key] if key in archive.files else default

        alpha = optional("alpha")
        epsilon, N = optional("epsilon"), optional("N")
        release = {
            "Y_obs": Y_obs.astype(np.int64),
            "alpha": None if alpha is None else (float(alpha) if alpha.ndim == 0 else alpha.astype(float)),
            "epsilon": None if epsilon is None or np.isnan(epsilon) else float(epsilon),
            "N": None if N is None or np.isnan(N) else float(N),
            "row_labels": [str(x) for x in optional("row_labels", np.arange(Y_obs.shape[0]))],
            "col_labels": [str(x) for x in optional("col_labels", np.arange(Y_obs.shape[1]))],
            "model": str(optional("model", "topics")),
            "source": str(optional("source", path)),
        }
    return release


def _write_csv(path, Y_obs, row_labels, col_labels):
    import pandas as pd

    table = pd.DataFrame(Y_obs, index=row_labels, columns=col_labels)
    atomic_write(path, lambda handle: handle.write(table.to_csv().encode("utf-8")))


def run(args):
    from ..datasets import load_data
    from ..privacy import privatize

    output = Path(args.output)
    if output.suffix.lower() not in (".npz", ".csv"):
        raise CLIError(f"OUTPUT {output} must end in .npz (a release for `lpviz fit`) or .csv (a table)")
    refuse_overwrite(output, args.force)
    epsilon, N, alpha = privacy_level(args)
    if args.exact and args.seed is not None:
        raise CLIError("--exact draws from a secure generator that cannot be seeded; drop --seed")
    if args.seed is not None and args.seed < 0:
        raise CLIError(f"--seed must be >= 0, got {args.seed}")
    data = load_data(args.input)
    Y_obs = privatize(data.Y, alpha=alpha, random_state=args.seed, exact=args.exact)
    if data.model == "blocks":
        np.fill_diagonal(Y_obs, 0)  # no self loops: the diagonal is not data
    if output.suffix.lower() == ".npz":
        write_release(output, Y_obs, alpha, epsilon=epsilon, N=N, row_labels=data.row_labels,
                      col_labels=data.col_labels, model=data.model, source=data.source or args.input)
    else:
        _write_csv(output, Y_obs, data.row_labels, data.col_labels)

    summary = {
        "input": str(args.input),
        "output": str(output),
        "shape": list(Y_obs.shape),
        "model": data.model,
        "epsilon": epsilon,
        "N": N,
        "alpha": alpha,
        "exact": bool(args.exact),
        "seed": args.seed,
        "negative_fraction": float(np.mean(Y_obs < 0)),
    }
    if args.json:
        print(json.dumps(summary))
    else:
        level = f"epsilon={epsilon:g}, N={N:g}, " if epsilon is not None else ""
        print(f"wrote {output}: {Y_obs.shape[0]} x {Y_obs.shape[1]} noised counts "
              f"({level}alpha={alpha:.4g}); {100 * summary['negative_fraction']:.1f}% of cells are negative",
              file=sys.stdout)
    return 0
