"""An epsilon sweep: short fits of one data set over a range of epsilon / N, as a task grid.

:func:`sweep_tasks` turns a data spec and the fit settings into
:class:`~lpviz.reproduce.grid.Task` s of :func:`~lpviz.reproduce.chains.chain_task`
(one per epsilon / N and noise-dependent method, and one fit of the true
counts for a method that fits them, whose result does not depend on the
noise), so a sweep runs on the same runner as ``lpviz reproduce``
(:func:`~lpviz.reproduce.grid.run_tasks`) and its numbers are the task's
:func:`lpviz.metrics.score`. :class:`SweepRun` runs them in a thread and
hands every point over as its task finishes; it can be cancelled.

Where the tasks run (:func:`default_scheduler`): the Dask cluster at
``$LPVIZ_SCHEDULER`` when that is set (``python -m lpviz.dashboard.serve --scheduler``),
else one LocalCluster of worker processes shared by every caller in this
process (:func:`shared_local_client`), started at the first sweep and closed
when the process exits.

Every point of a sweep uses the same noise seeds and the same chain seed, so
the points differ only by the noise level (common random numbers: the curve
is smooth). With ``n_draws`` > 1 each point is fitted on that many noise
draws (seeds ``noise_seed``, ``noise_seed + 1``, ...): :func:`sweep_curves`
gives their mean, the curve drawn, and their range, the band around it. The
first draw at the session's own epsilon / N is the session's own release.

The defaults (:data:`DEFAULT_ITERATIONS`, :data:`DEFAULT_POINTS`,
:data:`DEFAULT_DRAWS`, the burn-in of :func:`short_schedule`) were measured on
the dashboard's opening preset (90 x 15 counts, K = 3, epsilon / N = 1) at
the class seed and 13 other noise seeds. At the former 300 iterations per fit
(first half burn-in, 6 levels from 0.125 to 4) naive's MAE against the
true counts (the MAE plotted) was below private's at 0.25 and 0.5 and nearly every chain was flagged not mixed. At
10,000 iterations with the first quarter as burn-in every fit at epsilon / N
= 0.5, 1 and 2 is healthy (private's bulk ESS 157 or more; with the first
half as burn-in one chain in 13 had 93 < 100), but a single noise draw can
still put private above naive at 0.5 and at 2 (1 seed in 14 each, by up to
0.002); the mean of 3 draws kept private below naive at every level for
every set of 3 consecutive seeds measured (10 of 10). Below 0.5 the private
chain had not mixed after 10,000 iterations (0.25) or collapsed (0.125: its
rates kept 2% of the data's total). Against the true rates the order is
not the same: naive's mean is below private's at 0.5 and 1 (0.958 against
1.023, 0.627 against 0.666, 14 seeds).
"""

import atexit
import io
import math
import os
import queue
import tempfile
import threading
import time

from lpviz._env import env_count
from lpviz.reproduce.grid import ResultStore, Task, local_cluster, run_tasks

__all__ = [
    "sweep_tasks",
    "default_ratios",
    "short_schedule",
    "point_row",
    "sweep_frame",
    "plotted_scores",
    "sweep_png",
    "SweepRun",
    "default_scheduler",
    "shared_local_client",
    "close_shared_cluster",
    "sweep_curves",
    "DEFAULT_ITERATIONS",
    "DEFAULT_DRAWS",
    "SCHEDULER_ENV",
    "SWEEP_WORKERS_ENV",
    "SWEEP_SCORES",
    "PLOTTED_SCORES",
]

# Iterations per fit: fewer leave the private chain unmixed at epsilon / N = 0.5 on the opening
# preset's data (and its curve crossing naive's); see the module docstring.
DEFAULT_ITERATIONS = 10_000
MIN_ITERATIONS = 10
# Samples a fit saves after its burn-in (its first quarter).
SAVED_SAMPLES = 25
DEFAULT_POINTS = 3
# Noise draws per point: the curve is their mean, the band their range.
DEFAULT_DRAWS = 3
MAX_DRAWS = 20
SCHEDULER_ENV = "LPVIZ_SCHEDULER"
SWEEP_WORKERS_ENV = "LPVIZ_SWEEP_WORKERS"
# Numbers of lpviz.metrics.score kept per point (those that apply), and those plotted against epsilon / N.
SWEEP_SCORES = ("mae", "heldout_mae", "npmi", "rate_mae", "heldout_rate_mae", "topic_distance")
PLOTTED_SCORES = ("mae", "heldout_mae", "npmi")
RATIO_COLUMN = "epsilon_over_N"
# The baselines of lpviz.metrics.score kept per point (those that apply), as "<baseline>_<score>".
BASELINE_COLUMNS = tuple(
    f"{baseline}_{key}"
    for baseline in ("best_constant", "independence")
    for key in ("mae", "heldout_mae", "rate_mae", "heldout_rate_mae")
)


def short_schedule(n_iter):
    """``{"n_iter", "burn_in", "thin"}`` of a sweep's fit: the first quarter burn-in, then
    :data:`SAVED_SAMPLES` samples (fewer for very short fits)."""
    if isinstance(n_iter, bool) or int(n_iter) != n_iter or n_iter < MIN_ITERATIONS:
        raise ValueError(f"iterations per fit must be a whole number >= {MIN_ITERATIONS}, got {n_iter!r}")
    n_iter = int(n_iter)
    burn_in = n_iter // 4  # a half left the private chain's ESS below 100 on 1 of 13 seeds (module docstring)
    return {"n_iter": n_iter, "burn_in": burn_in, "thin": max(1, (n_iter - burn_in) // SAVED_SAMPLES)}


def _ratio_limit():
    from lpviz.privacy import NEGLIGIBLE_ALPHA

    return -math.log(NEGLIGIBLE_ALPHA)  # beyond it the release would be the true counts


def default_ratios(center, points=DEFAULT_POINTS):
    """``points`` values of epsilon / N around ``center``, a factor 2 apart, ``center`` among them
    (from ``center / 2**(points // 2)`` up), leaving out values above the level at which a
    release would be the true counts."""
    if not (isinstance(center, (int, float)) and math.isfinite(center) and center > 0):
        raise ValueError(f"epsilon / N must be a positive number, got {center!r}")
    if int(points) != points or points < 1:
        raise ValueError(f"points must be a whole number >= 1, got {points!r}")
    values = [float(f"{center * 2.0**step:.3g}") for step in range(-(int(points) // 2), int(points) - int(points) // 2)]
    return [value for value in values if value <= _ratio_limit()] or [float(f"{center:.3g}")]


def check_ratios(ratios):
    """``ratios`` as a sorted list of distinct positive floats, or a ValueError saying what is wrong."""
    try:
        values = [float(value) for value in ratios]
    except (TypeError, ValueError):
        raise ValueError(f"epsilon / N values must be numbers, got {ratios!r}") from None
    if not values:
        raise ValueError("give at least one value of epsilon / N")
    bad = [value for value in values if not (math.isfinite(value) and value > 0)]
    if bad:
        raise ValueError(f"epsilon / N must be positive (0 would be all noise), got {bad[0]:g}")
    limit = _ratio_limit()
    too_large = [value for value in values if value > limit]
    if too_large:
        raise ValueError(
            f"epsilon / N = {too_large[0]:g} is above {limit:.3g}: the noise would be negligible, "
            "so the release would be the true counts; give smaller values"
        )
    return sorted(set(values))


def _slug(text):
    return "".join(ch if ch.isalnum() or ch in "=.-" else "_" for ch in text)


def sweep_tasks(
    data,
    ratios,
    methods,
    *,
    n_components,
    N=1.0,
    noise_seed=0,
    holdout=None,
    model=None,
    n_iter=DEFAULT_ITERATIONS,
    chain_seed=0,
    method_options=None,
    n_draws=1,
):
    """The tasks of an epsilon sweep.

    Parameters
    ----------
    data : dict
        A data spec of :func:`~lpviz.reproduce.chains.build_data` that a worker can
        rebuild, e.g. ``{"source": "spec", "spec": "synthetic-topics", "options": {...}}``.
    ratios : list of float
        The values of epsilon / N (see :func:`default_ratios`).
    methods : list of str
        Registry names (:data:`lpviz.methods.METHODS`). A method that fits the true
        counts gets one task (it does not see the noise), the others one per ratio.
    n_components, model : int, str
        The model (None: the data's default) and its number of topics or communities.
    N : float
        The release's N: each point is noised at ``epsilon = ratio * N``.
    noise_seed, chain_seed : int
        The same for every point (the points differ only by the noise level).
    n_draws : int
        Noise draws per point (seeds ``noise_seed``, ``noise_seed + 1``, ...); a
        method that fits the true counts is fitted once.
    holdout : dict, optional
        Held-out cells (:func:`~lpviz.reproduce.chains.build_release`).
    n_iter : int
        Iterations per fit (:func:`short_schedule`).
    method_options : dict, optional
        ``{method: {option: value}}`` (e.g. the private method's sampler); options
        of a variational fit only are left out (the fits are chains).

    Returns
    -------
    list of Task
    """
    from lpviz import methods as registry

    ratios = check_ratios(ratios)
    if not methods:
        raise ValueError("choose at least one method to sweep")
    for method in methods:
        registry.get(method)  # a clear error naming the known methods
    if not isinstance(data, dict) or "source" not in data:
        raise TypeError(f"data must be a data spec dict with a 'source', got {data!r}")
    if not (isinstance(N, (int, float)) and N >= 1):
        raise ValueError(f"N must be a number >= 1, got {N!r}")
    if isinstance(n_draws, bool) or int(n_draws) != n_draws or not 1 <= n_draws <= MAX_DRAWS:
        raise ValueError(f"noise draws per point must be a whole number from 1 to {MAX_DRAWS}, got {n_draws!r}")
    schedule = short_schedule(n_iter)
    method_options = method_options or {}
    common = {
        "experiment": "sweep",
        "data": dict(data),
        "holdout": holdout,
        "model": model,
        "n_components": int(n_components),
        **schedule,
        "chain_seed": int(chain_seed),
        "keep": {},
    }
    tasks = []
    for method in methods:
        method_class = registry.get(method)
        fits_truth = method_class.uses_truth
        # the fits are chains: options of the variational fit only (Method.option_inference) stay out
        options = {
            option: value
            for option, value in method_options.get(method, {}).items()
            if method_class.option_inference.get(option, "mcmc") == "mcmc"
        }
        # a fit of the true counts is the same at every noise level; its release (at the
        # middle ratio) only says which cells are observed and held out
        for ratio in [ratios[len(ratios) // 2]] if fits_truth else ratios:
            for draw in range(1 if fits_truth else int(n_draws)):
                params = {
                    **common,
                    "method": method,
                    "method_options": dict(options),
                    "noise": {"epsilon": ratio * float(N), "N": float(N), "seed": int(noise_seed) + draw},
                    "labels": {"method": method, RATIO_COLUMN: None if fits_truth else ratio, "draw": draw},
                }
                name = "true-data" if fits_truth else f"eps_over_N={ratio:.6g}"
                tasks.append(Task(_slug(f"{name}--{method}" + (f"--draw={draw}" if draw else "")), params))
    return tasks


def point_row(task, record):
    """One point of a sweep from its task and its stored record: the method, epsilon / N
    (NaN for a fit of the true counts), the noise draw, the release's mean alpha, the
    :func:`lpviz.metrics.score` numbers of :data:`SWEEP_SCORES`, the fit's health (``healthy``
    and, in words, ``flags``), its baselines (:data:`BASELINE_COLUMNS`) and its seconds."""
    from lpviz import methods as registry

    method = task.params["method"]
    ratio = task.params["labels"][RATIO_COLUMN]
    scores = record["scores"]
    health = scores.get("health") or {}
    baselines = scores.get("baselines") or {}

    def number(value):
        return math.nan if value is None else float(value)

    return {
        "method": method,
        "label": registry.get(method).label,
        RATIO_COLUMN: math.nan if ratio is None else float(ratio),
        "draw": int(task.params["labels"].get("draw", 0)),
        "alpha": math.nan if ratio is None else float(record["alpha_mean"]),
        **{key: number(scores.get(key)) for key in SWEEP_SCORES},
        "healthy": bool(health.get("healthy")),
        "flags": "; ".join(health.get("reasons") or ([] if "flags" in health else ["no health numbers"])),
        **{column: number(baselines.get(column)) for column in BASELINE_COLUMNS},
        "iterations": task.params["n_iter"],
        "seconds": float(record["seconds_total"]),
        "task": task.id,
    }


def sweep_frame(rows):
    """The points as a DataFrame, one row per finished fit, ordered by method, epsilon / N and draw."""
    import pandas as pd

    columns = [
        "method",
        "label",
        RATIO_COLUMN,
        "draw",
        "alpha",
        *SWEEP_SCORES,
        "healthy",
        "flags",
        *BASELINE_COLUMNS,
        "iterations",
        "seconds",
        "task",
    ]
    from lpviz.methods import METHODS

    frame = pd.DataFrame(list(rows), columns=columns)
    if frame.empty:
        return frame
    order = {name: index for index, name in enumerate(METHODS)}  # the registry's order, as every table
    frame = frame.sort_values("draw", kind="stable").sort_values(RATIO_COLUMN, na_position="first", kind="stable")
    return frame.sort_values("method", key=lambda names: names.map(order), kind="stable").reset_index(drop=True)


def sweep_curves(frame):
    """The curves of a sweep: per method and epsilon / N (NaN: a fit of the true counts), the mean
    over its noise draws of every :data:`SWEEP_SCORES` number and baseline, the range of the scores
    (``<score>_low``, ``<score>_high``), ``draws`` (how many), ``healthy`` (every draw's fit
    healthy) and ``flags`` (the flagged draws' reasons, in words). Ordered as :func:`sweep_frame`."""
    import pandas as pd

    means = [*SWEEP_SCORES, *BASELINE_COLUMNS]
    columns = [
        "method",
        "label",
        RATIO_COLUMN,
        *means,
        *(f"{key}_{end}" for key in SWEEP_SCORES for end in ("low", "high")),
        "draws",
        "healthy",
        "flags",
    ]
    if frame.empty:
        return pd.DataFrame(columns=columns)
    groups = frame.groupby(["method", RATIO_COLUMN], sort=False, dropna=False)
    rows = []
    for (method, ratio), rows_of_point in groups:
        flags = [
            f"draw {draw}: {text}"
            for draw, text in zip(rows_of_point["draw"], rows_of_point["flags"], strict=True)
            if text
        ]
        rows.append(
            {
                "method": method,
                "label": rows_of_point["label"].iloc[0],
                RATIO_COLUMN: ratio,
                **{key: rows_of_point[key].mean() for key in means},
                **{f"{key}_low": rows_of_point[key].min() for key in SWEEP_SCORES},
                **{f"{key}_high": rows_of_point[key].max() for key in SWEEP_SCORES},
                "draws": len(rows_of_point),
                "healthy": bool(rows_of_point["healthy"].all()),
                "flags": "; ".join(flags),
            }
        )
    return pd.DataFrame(rows, columns=columns)


def plotted_scores(frame):
    """The numbers of :data:`PLOTTED_SCORES` that some point has (held-out MAE only when something
    is held out, NPMI only for topic models)."""
    return [key for key in PLOTTED_SCORES if key in frame and frame[key].notna().any()]


def sweep_png(frame, title=""):
    """A PNG (bytes) of the sweep: one panel per plotted score against epsilon / N (log axis), one
    line per method; a fit of the true counts as a dashed horizontal line. Matplotlib's Agg
    canvas on a figure of its own: safe in any thread."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from lpviz import methods as registry
    from lpviz.metrics import SCORE_LABELS

    keys = plotted_scores(frame) or ["mae"]
    figure = Figure(figsize=(4.2 * len(keys), 3.4), dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    ratios = frame[RATIO_COLUMN].dropna()
    span = (ratios.min(), ratios.max()) if len(ratios) else (0.1, 10.0)
    curves = sweep_curves(frame)
    for index, key in enumerate(keys):
        axes = figure.add_subplot(1, len(keys), index + 1)
        for method, rows in curves.groupby("method", sort=False):
            method_class = registry.get(method)
            style = dict(color=method_class.color, label=method_class.label)
            noised = rows[rows[RATIO_COLUMN].notna()]
            if len(noised):
                axes.plot(noised[RATIO_COLUMN], noised[key], marker="o", **style)
                if (noised["draws"] > 1).any():  # the range of the draws around their mean
                    axes.fill_between(
                        noised[RATIO_COLUMN],
                        noised[f"{key}_low"],
                        noised[f"{key}_high"],
                        color=style["color"],
                        alpha=0.2,
                    )
            for value in rows.loc[rows[RATIO_COLUMN].isna(), key]:
                axes.plot(span, [value, value], linestyle="--", **style)
        axes.set_xscale("log")
        axes.set_xlabel("epsilon / N")
        axes.set_title(SCORE_LABELS[key])
        if index == 0:
            axes.legend(fontsize="small")
    if title:
        figure.suptitle(title)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


# ---- where the tasks run --------------------------------------------------------------
# One LocalCluster for the whole process, started by the first sweep and shared by every
# later one (every session of a dashboard server), rather than a cluster per sweep (seconds
# to start, a few hundred MB per worker) or a process pool: run_tasks takes a Dask client,
# so the sweep runs on the very runner of `lpviz reproduce` (retries, a dead worker's task
# rescheduled, cancellation of queued tasks), and the workers keep their compiled kernels
# and built data sets between sweeps.
_SHARED: dict = {}
_SHARED_LOCK = threading.Lock()


def sweep_workers():
    """Workers of the shared LocalCluster: ``$LPVIZ_SWEEP_WORKERS``, else half the cores (at
    least one), leaving the rest to the sessions' own chains and the event loop."""
    return env_count(SWEEP_WORKERS_ENV, max(1, (os.cpu_count() or 1) // 2))


def shared_local_client(workers=None, memory_limit="auto"):
    """The Dask client of this process's shared LocalCluster (started on the first call, in the
    calling thread: never call it on an event loop). ``workers``, ``memory_limit`` (bytes per
    worker) apply when it starts."""
    import dask
    from distributed import Client

    with _SHARED_LOCK:
        client = _SHARED.get("client")
        if client is not None and client.status == "running":
            return client
        with dask.config.set({"distributed.scheduler.allowed-failures": 3}):
            cluster = local_cluster(workers or sweep_workers(), threads=1, memory_limit=memory_limit)
        client = Client(cluster, set_as_default=False)
        if not _SHARED:
            atexit.register(close_shared_cluster)
        _SHARED.update(client=client, cluster=cluster)
        return client


def close_shared_cluster():
    """Close the shared LocalCluster (at exit; a later sweep starts a new one)."""
    with _SHARED_LOCK:
        for name in ("client", "cluster"):
            thing = _SHARED.pop(name, None)
            if thing is not None:
                try:
                    thing.close()
                except Exception:  # noqa: BLE001 - closing at exit must not raise
                    pass


def default_scheduler(memory_limit="auto"):
    """Where sweeps run: the address in ``$LPVIZ_SCHEDULER`` (a Dask cluster the server was given),
    else the shared LocalCluster's client (:func:`shared_local_client`; ``memory_limit`` per worker
    if this call starts it)."""
    address = os.environ.get(SCHEDULER_ENV, "").strip()
    return address or shared_local_client(memory_limit=memory_limit)


def describe_scheduler(scheduler):
    """A few words on where a sweep runs."""
    if scheduler == "serial":
        return "in this process"
    if isinstance(scheduler, str):
        return f"on the Dask cluster at {scheduler}"
    from lpviz.distributed import cluster_workers

    workers = len(cluster_workers(scheduler))
    shared = scheduler is _SHARED.get("client")
    return f"on {'the shared local' if shared else 'a'} Dask cluster ({workers} worker{'s' if workers != 1 else ''})"


class SweepRun:
    """A sweep's tasks run in a thread of their own on :func:`~lpviz.reproduce.grid.run_tasks`.

    :meth:`start`, then :meth:`take` (from any thread, e.g. an event loop's
    periodic callback) hands over what happened since the last call as
    ``(kind, payload)`` pairs: ``("point", row)`` as each task finishes
    (:func:`point_row`), ``("where", text)`` once the workers are found, then
    exactly one of ``("finished", summary)``, ``("cancelled", summary)`` or
    ``("error", message)``; ``summary`` holds ``done``, ``failed``,
    ``cancelled`` (counts), ``seconds`` and ``failures`` (messages).
    :meth:`cancel` stops it: no task starts afterwards, the unfinished ones
    are cancelled and a point that finishes afterwards is never handed over.

    ``scheduler``: as :func:`~lpviz.reproduce.grid.run_tasks` takes it
    (``"serial"``, an address, a Client), default :func:`default_scheduler`
    (found in the sweep's thread; ``memory_limit`` goes to it).
    """

    def __init__(self, tasks, scheduler=None, function=None, memory_limit="auto"):
        from lpviz.reproduce.chains import chain_task

        self.tasks = list(tasks)
        self.scheduler = scheduler
        self.memory_limit = memory_limit
        self.function = function or chain_task
        self._queue = queue.SimpleQueue()
        self._cancel = threading.Event()
        self._thread = None
        self.started = None

    def start(self):
        if self._thread is not None:
            raise RuntimeError("a SweepRun runs once: make a new one")
        self.started = time.monotonic()
        self._thread = threading.Thread(target=self._work, name="lpviz-sweep", daemon=True)
        self._thread.start()
        return self

    def cancel(self):
        self._cancel.set()

    @property
    def cancelled(self):
        return self._cancel.is_set()

    @property
    def alive(self):
        return self._thread is not None and self._thread.is_alive()

    def join(self, timeout=None):
        if self._thread is not None:
            self._thread.join(timeout)
        return not self.alive

    def take(self):
        """Everything that happened since the last call: a list of ``(kind, payload)``."""
        events = []
        while True:
            try:
                events.append(self._queue.get_nowait())
            except queue.Empty:
                return events

    def _post(self, kind, payload):
        self._queue.put((kind, payload))

    def _work(self):
        try:
            scheduler = self.scheduler if self.scheduler is not None else default_scheduler(self.memory_limit)
            self._post("where", describe_scheduler(scheduler))
            handed = []
            with tempfile.TemporaryDirectory(prefix="lpviz-sweep-") as folder:
                store = ResultStore(folder)

                def on_result(task):
                    if not self._cancel.is_set():  # nothing is handed over after a cancel
                        self._post("point", point_row(task, store.read_record(task.id)))
                        handed.append(task)

                stats = run_tasks(
                    self.tasks,
                    store,
                    self.function,
                    scheduler=scheduler,
                    retries=0,
                    cancel=self._cancel,
                    on_result=on_result,
                )
        except Exception as error:  # noqa: BLE001 - shown to whoever started the sweep
            self._post("error", f"{type(error).__name__}: {error}")
            return
        summary = {
            "done": len(handed),
            "failed": len(stats.failed),
            "cancelled": len(self.tasks) - len(handed) - len(stats.failed),
            "seconds": stats.seconds,
            "failures": [f"{task.id}: {type(error).__name__}: {error}" for task, error in stats.failed],
        }
        self._post("cancelled" if self._cancel.is_set() else "finished", summary)
