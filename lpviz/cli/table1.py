"""``lpviz table1``: the VI paper's Table 1 (MCMC against CAVI), printed beside the paper's figures.

The experiment is :func:`lpviz.reproduce.table1.run_table1`; this command
runs it (all groups of rows, or ``--groups``), prints lpviz's MAE against the
true rates and wall-clock seconds beside the paper's, and writes to
``--output DIR``: ``table1.csv``, ``table1_traces.csv``, ``table1.png`` (MAE
against seconds for every run) and ``table1.json`` (the settings). A later
run with other ``--groups`` and the same settings adds its rows to the files
in DIR, so the table can be built in parts.
"""

import json
import sys
from pathlib import Path

from . import CLIError

COLUMNS = [
    ("method", "method", "{}"),
    ("iterations", "iterations (paper)", "{}"),
    ("paper_mae", "paper MAE", "{:.3f}"),
    ("mae", "lpviz MAE", "{:.3f}"),
    ("best_constant_mae", "best constant", "{:.3f}"),
    ("independence_mae", "independence", "{:.3f}"),
    ("mass_ratio", "mass ratio", "{:.3f}"),
    ("flags", "health", "{}"),
    ("paper_seconds", "paper s (derived)", "{:.0f}"),
    ("seconds", "lpviz s", "{:.1f}"),
    ("iterations_run", "lpviz iterations", "{}"),
]


def register(subparsers):
    from ..reproduce.table1 import GROUPS

    parser = subparsers.add_parser(
        "table1",
        help="reproduce Table 1 of the VI paper (MCMC against CAVI on a synthetic matrix)",
        description="Runs every row of the VI paper's Table 1 on a synthetic D x V matrix with K components "
        "noised at eps/N = 1 (theta, phi ~ Gamma(0.1, rate 1)) and prints lpviz's MAE against the "
        "true rates and its seconds beside the paper's.",
    )
    parser.add_argument(
        "--quick", action="store_true", help="a 60 x 50 matrix, K = 5 and short runs (a smoke test, seconds)"
    )
    parser.add_argument(
        "--size",
        type=int,
        nargs=2,
        default=None,
        metavar=("D", "V"),
        help="rows and columns (default 1000 1000, the paper's)",
    )
    parser.add_argument("--components", type=int, default=None, help="K (default 50, the paper's)")
    parser.add_argument(
        "--mcmc-scale",
        type=float,
        default=1.0,
        metavar="F",
        help="multiply every chain's burn-in, samples and thinning by F (e.g. 0.1: 500 + 100 "
        "for naive MCMC) to afford the table on a small machine; VI runs are unchanged",
    )
    parser.add_argument(
        "--groups", default=None, metavar="G1,G2", help="only these runs (default all): " + ", ".join(GROUPS)
    )
    parser.add_argument(
        "--sampler",
        choices=("bessel", "collapsed"),
        default="bessel",
        help="the private chains' sampler (default bessel, the paper's)",
    )
    parser.add_argument(
        "--bessel_point",
        choices=("mode", "mean"),
        default="mode",
        help="the private CAVI's q(m) (default mode, the paper's)",
    )
    parser.add_argument(
        "--noise_split",
        choices=("components", "delta"),
        default="components",
        help="the private CAVI's split of y+ between noise and true count: components (DESIGN.md "
        "1c, the CAVI optimum, default) or delta (the paper's eq. 13, G[mu] by the delta method)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the data, noise and runs (default 0)")
    parser.add_argument(
        "--output",
        type=Path,
        default=Path("table1"),
        metavar="DIR",
        help="folder for table1.csv, table1_traces.csv, table1.png (default ./table1)",
    )
    parser.add_argument(
        "--force", action="store_true", help="replace files in DIR made with other settings (default: refuse)"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.set_defaults(func=run)


def _format(table):
    from .fit import format_table

    return format_table(table.to_dict("records"), COLUMNS)


def run(args):
    import pandas as pd

    from lpviz._files import atomic_files, check_results_folder, output_exists, shown

    from ..reproduce.table1 import GROUPS, PAPER, QUICK, ROWS, plot_table1, run_table1, table1_settings

    groups = None if args.groups is None else [g.strip() for g in args.groups.split(",") if g.strip()]
    if groups is not None:
        unknown = [g for g in groups if g not in GROUPS]
        if unknown or not groups:
            raise CLIError(f"--groups takes a comma-separated list of {', '.join(GROUPS)}; got {args.groups!r}")
    n_rows, n_cols = args.size if args.size is not None else ((60, 50) if args.quick else (1000, 1000))
    n_components = args.components if args.components is not None else (5 if args.quick else 50)
    if min(n_rows, n_cols) < 2 or n_components < 1:
        raise CLIError("--size needs at least 2 rows and 2 columns, --components at least 1")
    if not args.mcmc_scale > 0:
        raise CLIError(f"--mcmc-scale must be > 0, got {args.mcmc_scale}")
    schedule = QUICK if args.quick else PAPER
    if args.mcmc_scale != 1.0:
        schedule = schedule.scaled(args.mcmc_scale)
    output = args.output
    try:
        check_results_folder(output, beside=False)  # the files are written inside it, each atomically
    except ValueError as error:
        raise CLIError(str(error)) from None
    settings_path, table_path = output / "table1.json", output / "table1.csv"
    traces_path, plot_path = output / "table1_traces.csv", output / "table1.png"
    paths = (table_path, traces_path, plot_path, settings_path)
    settings = table1_settings(
        n_rows=n_rows,
        n_cols=n_cols,
        n_components=n_components,
        schedule=schedule,
        sampler=args.sampler,
        bessel_point=args.bessel_point,
        noise_split=args.noise_split,
        random_state=args.seed,
    )
    # before the run: only an earlier part of this same table is added to; anything else is replaced
    # only with --force
    earlier = _earlier_part(settings_path, table_path, settings)
    if not args.force and not earlier:
        for path in paths:
            if output_exists(path):
                made = ", made with other settings" if settings_path.exists() else ""
                raise CLIError(
                    f"{shown(path)} already exists{made}; choose another --output or pass --force to replace it"
                )

    say = None if args.quiet else (lambda text: print(text, file=sys.stderr, flush=True))
    table = run_table1(
        n_rows=n_rows,
        n_cols=n_cols,
        n_components=n_components,
        schedule=schedule,
        groups=groups,
        sampler=args.sampler,
        bessel_point=args.bessel_point,
        noise_split=args.noise_split,
        random_state=args.seed,
        callback=say,
    )
    traces = table.attrs["traces"]

    if earlier:  # add these rows to the earlier parts
        old_table = pd.read_csv(table_path)
        old_traces = pd.read_csv(traces_path) if traces_path.exists() else traces.iloc[:0]
        table = pd.concat([old_table[~old_table["row"].isin(table["row"])], table], ignore_index=True)
        traces = pd.concat([old_traces[~old_traces["trace"].isin(traces["trace"])], traces], ignore_index=True)
        order = {key: i for i, key in enumerate(ROWS)}
        table = table.sort_values("row", key=lambda keys: keys.map(order)).reset_index(drop=True)
    output.mkdir(exist_ok=True)
    # the four files whole and all or nothing (temporaries beside them, then moved in); over existing
    # ones only when allowed above, and never over a file that appeared during the run
    atomic_files(
        {
            table_path: lambda handle: handle.write(table.to_csv(index=False).encode()),
            traces_path: lambda handle: handle.write(traces.to_csv(index=False).encode()),
            plot_path: lambda handle: plot_table1(table, traces, handle),
            settings_path: lambda handle: handle.write(json.dumps(settings, indent=2).encode()),
        },
        replace=args.force or earlier,
    )

    print(
        f"VI paper, Table 1: {n_rows} x {n_cols}, K={n_components}, eps/N=1, seed {args.seed}"
        + (" (quick: short runs)" if args.quick else "")
        + (f", chains {args.mcmc_scale:g} x the paper's lengths" if args.mcmc_scale != 1.0 else "")
    )
    print(_format(table))
    print(
        "MAE: against the true rates (lpviz.score rate_mae), beside the best constant's and the row x column "
        "means fit's (both estimated from the release alone); health: lpviz.score's flags (empty: healthy). "
        "paper s: its iterations x its stated 0.8 s per MCMC and 2.8 s per VI iteration."
    )
    for path in paths:
        print(f"wrote {path}")
    return 0


def _earlier_part(settings_path, table_path, settings):
    """True when the folder holds a table made with these settings (this run adds its rows)."""
    if not (settings_path.is_file() and table_path.is_file()):
        return False
    from lpviz._files import load_json

    try:
        return load_json(settings_path.read_bytes()[: 1 << 20]) == settings
    except (ValueError, OSError):  # not lpviz's: never added to
        return False
