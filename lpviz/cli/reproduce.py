"""``lpviz reproduce``: the papers' figures and tables as task grids, on Dask.

``lpviz reproduce NAME [--preset tiny|quick|paper] [--chains C] [--scheduler ADDRESS] [--workers W]
[--output DIR] [--resume]`` runs one experiment (or ``all``) and writes
``DIR/NAME/``: CSV tables, PNG and HTML figures and ``report.md`` (see
:mod:`lpviz.reproduce`).

Where tasks run: by default a LocalCluster of W worker processes (default:
one per core), each running one chain at a time whose kernels use
``cores // W`` threads (``LPVIZ_NUM_THREADS``): workers x threads = cores.
Many small chains (fig1, fig3): one worker per core. Few big chains (fig4
at the paper's size, several GB each): fewer workers, more threads each, so
the chains fit in memory. ``--scheduler tcp://host:8786`` sends the tasks to
an existing cluster instead (start its workers with ``--nthreads 1`` and
``LPVIZ_NUM_THREADS`` set by the same rule); ``--serial`` runs them in this
process without Dask.
"""

import sys
from pathlib import Path

from . import CLIError


def register(subparsers):
    from ..reproduce import DEFAULT_OUTPUT, EXPERIMENTS

    names = list(EXPERIMENTS) + ["all"]
    parser = subparsers.add_parser(
        "reproduce",
        help="the papers' figures and tables (" + ", ".join(names) + ") as task grids on Dask",
        description="Reproduce a figure or table of the papers: a grid of seeded chains (settings x methods x "
        "noised copies x chains) run on Dask, every number as CSV, figures as PNG and HTML, and "
        "report.md with the paper's claims beside lpviz's numbers. "
        + " ".join(f"{name}: {e.title}." for name, e in EXPERIMENTS.items()),
    )
    parser.add_argument("name", choices=names, metavar="NAME", help="one of " + ", ".join(names))
    parser.add_argument(
        "--preset",
        choices=("tiny", "quick", "paper"),
        default="quick",
        help="quick: minutes on 2 cores (smaller sizes and fewer iterations, same design); "
        "paper: the papers' sizes and iteration counts; tiny: seconds, for tests "
        "(default quick)",
    )
    parser.add_argument(
        "--chains",
        type=int,
        default=None,
        metavar="C",
        help="chains per setting, method and noised copy (default: the preset's)",
    )
    parser.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help="run on an existing Dask cluster, e.g. tcp://host:8786 (default: a LocalCluster)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="W",
        help="LocalCluster worker processes (default: one per core); each chain's kernels get cores // W threads",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        metavar="T",
        help="kernel threads per LocalCluster worker (LPVIZ_NUM_THREADS; default cores // W)",
    )
    parser.add_argument("--serial", action="store_true", help="run the tasks in this process, without Dask")
    parser.add_argument(
        "--output",
        type=Path,
        default=DEFAULT_OUTPUT,
        metavar="DIR",
        help=f"results go to DIR/NAME (default {DEFAULT_OUTPUT})",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue an interrupted run in DIR/NAME: finished tasks are kept, the rest run",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace the report, tables and figures already in DIR/NAME (default: refuse them before running)",
    )
    parser.add_argument("--seed", type=int, default=0, help="base seed of every data, noise and chain seed (default 0)")
    parser.add_argument(
        "--probe",
        type=int,
        default=None,
        metavar="ITER",
        help="instead of the grid: ITER iterations of one chain per setting and method at the "
        "paper's sizes, to measure seconds per iteration (probe.csv) for the report's "
        "projected paper wall-clock",
    )
    parser.add_argument(
        "--sampler",
        choices=("bessel", "collapsed"),
        default=None,
        help="the private method's sampler (default: bessel, the paper's route; collapsed: the "
        "exact conditional with the sparse step, faster where most noised counts are <= 0, "
        "i.e. sparse data at large eps/N)",
    )
    parser.add_argument("--retries", type=int, default=2, help="times a failing task is retried (default 2)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.set_defaults(func=run)


def _check(args):
    if args.chains is not None and args.chains < 1:
        raise CLIError(f"--chains must be >= 1, got {args.chains}")
    if args.workers is not None and args.workers < 1:
        raise CLIError(f"--workers must be >= 1, got {args.workers}")
    if args.threads is not None and args.threads < 1:
        raise CLIError(f"--threads must be >= 1, got {args.threads}")
    if args.serial and (args.scheduler or args.workers or args.threads):
        raise CLIError(
            "--serial runs without Dask in this process (its kernel threads: LPVIZ_NUM_THREADS): "
            "drop --scheduler/--workers/--threads"
        )
    if args.scheduler and (args.workers or args.threads):
        raise CLIError("--workers/--threads size a LocalCluster; an existing cluster (--scheduler) has its own workers")
    if args.seed < 0:
        raise CLIError(f"--seed must be >= 0, got {args.seed}")
    if args.probe is not None and args.probe < 2:
        raise CLIError(f"--probe needs at least 2 iterations (the first carries one-off costs), got {args.probe}")
    if args.retries < 0:
        raise CLIError(f"--retries must be >= 0, got {args.retries}")
    if args.output.exists() and not args.output.is_dir():
        raise CLIError(f"--output {args.output} is a file; give a directory")


def _print_claims(report_path):
    """The claims table of a report, as written."""
    text = Path(report_path).read_text(encoding="utf-8")
    start = text.find("## Claims")
    end = text.find("\n## ", start + 1)
    if start >= 0:
        print(text[start : end if end > 0 else None].strip())


def run(args):
    from ..reproduce import EXPERIMENTS, NotAvailableError, TaskFailedError, reproduce
    from ..reproduce.grid import StaleResultError

    _check(args)
    if args.name == "all":
        unavailable = [f"{name} ({e.unavailable()})" for name, e in EXPERIMENTS.items() if e.unavailable()]
        if unavailable:
            print("not available yet, skipped: " + "; ".join(unavailable), file=sys.stderr)
    scheduler = "serial" if args.serial else args.scheduler
    try:
        paths = reproduce(
            args.name,
            args.preset,
            chains=args.chains,
            scheduler=scheduler,
            workers=args.workers,
            threads=args.threads,
            output=args.output,
            resume=args.resume,
            seed=args.seed,
            probe=args.probe,
            sampler=args.sampler,
            progress=not args.no_progress and sys.stderr.isatty(),
            retries=args.retries,
            force=args.force,
        )
    except (NotAvailableError, StaleResultError) as error:
        raise CLIError(str(error)) from None
    except NotImplementedError as error:
        raise CLIError(str(error)) from None
    except TaskFailedError as error:
        print(f"lpviz reproduce: {error}", file=sys.stderr)
        return 1
    for path in paths:
        if path.name == "report.md":
            print(f"# {path.parent.name}")
            _print_claims(path)
        print(f"wrote {path}")
    return 0
