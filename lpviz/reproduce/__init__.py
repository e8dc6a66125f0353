"""The papers' figures and tables as task grids on Dask: ``lpviz reproduce NAME``.

Each experiment is a small module with an :class:`~lpviz.reproduce.base.Experiment`
subclass and one :func:`register` line below. :func:`reproduce` runs one:
it builds the task grid of a preset, runs the tasks whose results are not on
disk yet (:func:`lpviz.reproduce.grid.run_tasks`: a LocalCluster by default,
any Dask cluster by address, or in-process), then writes ``DIR/NAME/``:

    tasks/<task>.npz     one file per finished task (arrays + JSON record; what --resume reads)
    tasks.csv            one row per task: labels, seeds, every score() number, wall-clock
    summary.csv          mean/sd/min/max over the chains and noised copies of each setting and method
    diagnostics.csv      R-hat and ESS per group of chains and quantity
    traces.csv           log joint / marginal log likelihood / seconds per iteration of every task
    *.png, *.html        the figures (matplotlib; Bokeh with inline resources, works offline)
    report.md            the paper's claims beside lpviz's numbers, verdicts, settings, seeds,
                         versions, wall-clock per task, diagnostics and the scale section
    probe.csv            (--probe) seconds per iteration at the paper's sizes

:func:`outputs` lists a finished report's files (the app's "Reproduce" view reads it).
"""

import json
import os
import time
from pathlib import Path

from lpviz._registry import Registry
from lpviz.reproduce.base import Experiment, NotAvailableError
from lpviz.reproduce.grid import ResultStore, TaskFailedError, run_tasks

__all__ = [
    "EXPERIMENTS",
    "register",
    "get",
    "reproduce",
    "outputs",
    "finished",
    "Experiment",
    "NotAvailableError",
    "TaskFailedError",
    "DEFAULT_OUTPUT",
]

EXPERIMENTS: dict[str, Experiment] = {}
DEFAULT_OUTPUT = Path("results") / "reproduce"
ALL = "all"


_REGISTRY = Registry(
    EXPERIMENTS,
    accepts=lambda entry: isinstance(entry, Experiment),
    takes="an Experiment instance with a name",
    unknown=lambda name, table: f"unknown experiment {name!r}; choose one of {', '.join(table)} or {ALL!r}",
)


def register(experiment):
    """Add an :class:`Experiment` instance to the registry under its ``name``."""
    return _REGISTRY.register(experiment)


def get(name):
    """The registered experiment ``name``."""
    return _REGISTRY.get(name)


def _write_json(path, data):
    from lpviz.reproduce.report import write_text

    write_text(path, json.dumps(data, indent=2, default=str))


def reproduce(
    name,
    preset="quick",
    *,
    chains=None,
    scheduler=None,
    workers=None,
    threads=None,
    output=None,
    resume=False,
    seed=0,
    probe=None,
    sampler=None,
    progress=False,
    retries=2,
    on_result=None,
    force=False,
):
    """Run experiment ``name`` (or ``"all"``) and write its report; returns the report paths.

    Parameters
    ----------
    name : str
        A key of :data:`EXPERIMENTS`, or ``"all"`` (every experiment that can
        run here: :meth:`~lpviz.reproduce.base.Experiment.unavailable` says why
        the others cannot).
    preset : {"tiny", "quick", "paper"}
    chains : int, optional
        Chains per setting, method and noised copy (default: the preset's).
    scheduler : None, "serial", address or distributed.Client
        See :func:`lpviz.reproduce.grid.run_tasks`.
    workers, threads : int, optional
        LocalCluster workers and kernel threads per worker (default: one
        worker per core, one thread each).
    output : path
        Results go to ``output/NAME`` (default ``results/reproduce``).
    resume : bool
        Continue a run in that folder: finished tasks are kept, the others run.
        Without it, a folder holding results is refused.
    force : bool
        Replace the files a run writes (report.md, tables, figures) that are already in
        ``output/NAME``; without it (or ``resume``) they are refused before any task runs.
    seed : int
        Base seed of every data, noise and chain seed.
    probe : int, optional
        Instead of the grid, run a few (``probe``) iterations of one chain per
        setting and method at the paper's sizes and write ``probe.csv``: the
        seconds per iteration the report's scale section projects from.
    sampler : {"bessel", "collapsed"}, optional
        The private method's sampler (default: the registry's, the paper's Bessel route).
    """
    if name == ALL:
        paths = []
        for experiment in EXPERIMENTS.values():
            if experiment.unavailable():  # the CLI lists these and why
                continue
            paths += reproduce(
                experiment.name,
                preset,
                chains=chains,
                scheduler=scheduler,
                workers=workers,
                threads=threads,
                output=output,
                resume=resume,
                seed=seed,
                probe=probe,
                sampler=sampler,
                progress=progress,
                retries=retries,
                on_result=on_result,
                force=force,
            )
        return paths
    experiment = get(name)
    experiment.check_available()
    settings = experiment.settings("paper" if probe else preset)
    settings["sampler"] = sampler
    if chains is not None and (isinstance(chains, bool) or not isinstance(chains, int) or chains < 1):
        raise ValueError(f"chains must be an integer >= 1, got {chains!r}")
    root = Path(output or DEFAULT_OUTPUT)
    if output is not None and not root.parent.is_dir():  # a typo must not create a folder tree
        raise ValueError(f"folder {root.parent} does not exist; create it first (or fix --output)")
    out_dir = root / name
    if probe:
        tasks = experiment.probe_tasks(probe, seed=seed, sampler=sampler)
        store = ResultStore(out_dir / "probe")
    else:
        tasks = experiment.tasks(preset, chains=chains, seed=seed, sampler=sampler)
        store = ResultStore(out_dir)
    if store.ids() and not resume:
        raise ValueError(
            f"{store.folder} holds {len(store.ids())} results of an earlier run; pass --resume to "
            "continue it (finished tasks are kept), or choose another --output"
        )
    existing = _existing_outputs(out_dir, probe)
    if existing and not (resume or force):
        raise ValueError(
            f"{out_dir} already holds {', '.join(existing[:3])}{' ...' if len(existing) > 3 else ''}; "
            "pass --force to replace them, or choose another --output"
        )
    out_dir.mkdir(parents=True, exist_ok=True)
    started = time.time()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None  # a shared machine slows every number
    experiment.prepare(settings, seed)
    stats = run_tasks(
        tasks,
        store,
        experiment.task_function,
        scheduler=scheduler,
        workers=workers,
        threads=threads,
        retries=retries,
        progress=progress,
        description=f"{name} ({'probe' if probe else preset})",
        on_result=on_result,
    )
    if stats.failed:
        raise TaskFailedError(stats.failed)
    invocation = {
        "started": started,
        "finished": time.time(),
        "executed": len(stats.executed),
        "skipped": len(stats.skipped),
        "seconds": stats.seconds,
        "scheduler": stats.scheduler,
        "workers": stats.workers,
        "threads_per_worker": stats.threads_per_worker,
        "cores": os.cpu_count(),
        "load_average": load,
    }
    manifest = out_dir / ("probe.json" if probe else "run.json")
    previous = json.loads(manifest.read_text()) if resume and manifest.is_file() else {}
    run_info = {
        "experiment": name,
        "preset": preset,
        "probe_iterations": probe,
        "chains": chains,
        "seed": seed,
        "sampler": sampler,
        "tasks": len(tasks),
        "invocations": previous.get("invocations", []) + [invocation],
    }
    _write_json(manifest, run_info)
    results = store.read_all(tasks)
    from lpviz.reproduce.finish import write_outputs, write_probe

    if probe:
        return [write_probe(experiment, out_dir, results, run_info)]
    return [write_outputs(experiment, out_dir, preset, settings, results, run_info)]


def _existing_outputs(out_dir, probe):
    """The names in ``out_dir`` a run would write over (a probe: its probe files only; hidden
    temporaries and the task results, which --resume governs, aside)."""
    from lpviz.reproduce.grid import TASKS_FOLDER

    if not out_dir.is_dir():
        return []
    names = sorted(entry.name for entry in os.scandir(out_dir) if not entry.name.startswith("."))
    if probe:
        return [name for name in names if name.startswith("probe.")]
    return [name for name in names if name not in (TASKS_FOLDER, "probe") and not name.startswith("probe.")]


def outputs(output, name):
    """The files of a finished report in ``output/NAME``: ``{"report": path or None,
    "figures": [png...], "html": [...], "tables": [csv...]}`` (sorted; empty lists when nothing is there)."""
    folder = Path(output) / name
    report = folder / "report.md"
    return {
        "report": report if report.is_file() else None,
        "figures": sorted(folder.glob("*.png")),
        "html": sorted(folder.glob("*.html")),
        "tables": sorted(folder.glob("*.csv")),
    }


def finished(output=None):
    """Names of the experiments with a finished report under ``output``."""
    output = Path(output or DEFAULT_OUTPUT)
    return [name for name in EXPERIMENTS if (output / name / "report.md").is_file()]


from lpviz.reproduce.fig1 import Figure1  # noqa: E402
from lpviz.reproduce.fig3 import Figure3  # noqa: E402
from lpviz.reproduce.fig4 import Figure4  # noqa: E402
from lpviz.reproduce.fig5 import Figure5  # noqa: E402
from lpviz.reproduce.table1 import Table1  # noqa: E402
from lpviz.reproduce.tensor import TensorExperiment  # noqa: E402
from lpviz.reproduce.vips import Vips  # noqa: E402

register(Figure1())
register(Figure3())
register(Figure4())
register(Figure5())
register(Table1())
register(Vips())
register(TensorExperiment())
