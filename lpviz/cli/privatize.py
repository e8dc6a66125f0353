"""``lpviz privatize``: noise a count matrix with the geometric mechanism.

The result is a *release* (:class:`lpviz.release.Release`): an ``.npz`` with
the noised counts and the noise level, so that ``lpviz fit --data RELEASE
--already-noised`` knows how it was noised (the schema is in docs/formats.md and
in :mod:`lpviz.release`). ``.csv`` output writes just the noised table (for
other tools). The noise is exact (OpenDP, secure generator) unless
``--simulate`` asks for a seeded, replayable simulation.
"""

import json
import sys
from pathlib import Path

import numpy as np

from lpviz._files import atomic_write, check_path_text

from . import CLIError
from ._common import add_privacy_arguments, check_output_folder, privacy_level, read_release, refuse_overwrite

__all__ = ["register", "run", "add_privacy_arguments", "privacy_level", "read_release", "refuse_overwrite"]


def register(subparsers):
    parser = subparsers.add_parser(
        "privatize",
        help="noise counts with the two-sided geometric mechanism",
        description="Read counts (a file, or any --data spec of `lpviz fit`), add two-sided geometric "
        "noise with alpha = exp(-epsilon/N), and write the noised matrix. OUTPUT .npz is a "
        "release `lpviz fit --already-noised` reads; .csv is a plain table. The noise comes "
        "from OpenDP's exact sampler with a secure generator; --simulate --seed S makes a "
        "reproducible simulation instead (never for real data: the seed undoes the noise).",
    )
    parser.add_argument("input", metavar="INPUT", help="counts: .npz (key Y), .csv, other formats or a data spec")
    parser.add_argument("output", metavar="OUTPUT", help="where to write the noised counts (.npz or .csv)")
    add_privacy_arguments(parser)
    parser.add_argument(
        "--simulate",
        action="store_true",
        help="a simulation: numpy's fast seeded sampler (reproducible, so NOT private)",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=None,
        help="seed of a --simulate run (default: a fresh one); printed, never written into OUTPUT "
        "unless --keep-noise-seed",
    )
    parser.add_argument(
        "--keep-noise-seed",
        action="store_true",
        help="with --simulate and a .npz OUTPUT: write the noise seed into the release; it reveals "
        "the noise, so whoever has the file rebuilds the true counts exactly",
    )
    parser.add_argument(
        "--labels",
        choices=("none", "public"),
        default="none",
        help="'public' writes the row/column labels into the release; only do so when they are "
        "public anyway: labels chosen from the true data (the most frequent words, the "
        "busiest senders, message ids) reveal it (default none)",
    )
    parser.add_argument("--force", action="store_true", help="replace OUTPUT if it exists")
    parser.add_argument("--json", action="store_true", help="print a machine-readable summary")
    parser.set_defaults(func=run)


def _write_csv(path, Y_obs, row_labels, col_labels):
    import pandas as pd

    from lpviz._files import decode_text

    def texts(labels):  # labels as text: never "b'x0'"
        return None if labels is None else [decode_text(label) for label in labels]

    table = pd.DataFrame(Y_obs, index=texts(row_labels), columns=texts(col_labels))
    atomic_write(path, lambda handle: handle.write(table.to_csv().encode("utf-8")))


def run(args):
    from ..datasets import load_data
    from ..datasets.loaders import KINDS

    check_path_text(args.input)
    output = Path(args.output)
    if output.suffix.lower() not in (".npz", ".csv"):
        raise CLIError(f"OUTPUT {output} must end in .npz (a release for `lpviz fit`) or .csv (a table)")
    refuse_overwrite(output, args.force)
    check_output_folder(output)
    epsilon, N, alpha = privacy_level(args)
    if args.seed is not None and not args.simulate:
        raise CLIError(
            "--seed makes the noise replayable (whoever knows the seed subtracts it): it is only "
            "for simulations; add --simulate if that is what you want, never for real data"
        )
    if args.seed is not None and args.seed < 0:
        raise CLIError(f"--seed must be >= 0, got {args.seed}")
    if args.keep_noise_seed and not (args.simulate and output.suffix.lower() == ".npz"):
        raise CLIError(
            "--keep-noise-seed records a --simulate run's seed in a .npz release; exact noise has no "
            "seed and a .csv table holds counts only: drop --keep-noise-seed"
        )
    seed = None
    if args.simulate:
        seed = args.seed if args.seed is not None else int(np.random.SeedSequence().entropy % (2**63))
    # a matrix of zeros is a valid input to noise (nothing to fit, but something to release)
    is_file = Path(args.input).exists() or args.input.partition(":")[0] in KINDS
    data = load_data(args.input, **({"allow_zero": True} if is_file else {}))
    public = args.labels == "public"
    if public:
        print(
            "warning: writing row/column labels into the release; labels chosen from the true data "
            "(frequent words, active senders, message ids) reveal it",
            file=sys.stderr,
        )
    level = dict(alpha=alpha) if epsilon is None else dict(epsilon=epsilon, N=N)
    try:
        release = data.privatize(
            **level,
            random_state=seed,
            exact=None if args.simulate else True,
            public_labels=public,
            allow_no_noise=args.allow_no_noise,
        )
    except ValueError as error:
        raise CLIError(str(error)) from None
    if output.suffix.lower() == ".npz":
        release.save(output, overwrite=args.force, noise_seed=args.keep_noise_seed)
    else:
        labels = (data.row_labels, data.col_labels) if public else (None, None)
        _write_csv(output, release.Y_obs, *labels)

    summary = {
        "input": str(args.input),
        "output": str(output),
        "shape": list(release.shape),
        "kind": release.kind,
        "epsilon": epsilon,
        "N": N,
        "alpha": alpha,
        "simulated": release.simulated,
        "seed": seed,
        "labels": args.labels,
        "negative_fraction": float(np.mean(release.Y_obs < 0)),
    }
    if args.json:
        print(json.dumps(summary))
    else:
        from ..release import format_alpha

        level_text = f"epsilon={epsilon:g}, N={N:g}, " if epsilon is not None else ""
        how = (
            f"a SIMULATION with seed {seed} (replayable: not private)"
            if release.simulated
            else "exact noise (OpenDP, secure generator)"
        )
        print(
            f"wrote {output}: {release.shape[0]} x {release.shape[1]} noised counts "
            f"({level_text}alpha={format_alpha(alpha)}), {how}; "
            f"{100 * summary['negative_fraction']:.1f}% of cells are negative"
        )
    return 0
