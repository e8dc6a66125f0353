"""Task grids: seeded tasks, one result file per task, run serially or on Dask distributed.

A :class:`Task` is an id and a dict of JSON parameters that describe it
completely (data, noise, method, iterations and every seed), so running it
is a pure function of its parameters: the same parameters give the same
result on any machine, any worker, any number of kernel threads, with or
without Dask.

:class:`ResultStore` keeps one ``.npz`` per task (``DIR/tasks/<id>.npz``:
its arrays plus a JSON record holding the parameters), written atomically
(:func:`lpviz._files.atomic_write`) by the driver as each task finishes. A
task counts as done when its file exists and records the same parameters,
so an interrupted run resumes without redoing finished tasks and, since the
file name is the task id, never holds a task twice.

:func:`run_tasks` runs the pending tasks in-process (``scheduler="serial"``)
or on Dask distributed: a :class:`~distributed.LocalCluster` of worker
*processes* by default, or an existing cluster given by its scheduler
address. Workers x kernel threads = cores: each worker runs one chain at a
time (one Dask thread) and that chain's Numba kernels use
``LPVIZ_NUM_THREADS`` threads (:mod:`lpviz._parallel`), set for the local
workers to ``cores // workers``. A task that raises is retried
(``retries``); a task whose worker dies (crash, out of memory) is
rescheduled on another worker by the scheduler, up to
``distributed.scheduler.allowed-failures`` deaths; a task that still fails
is reported as failed (its file is not written), never silently skipped.
A run can be cancelled from another thread (``cancel``, e.g. a
``threading.Event``): no task starts after it is set, the unfinished ones are
cancelled (a chain already running on a worker finishes there and is
discarded) and reported as such, never written.
"""

import json
import logging
import math
import os
import time
import uuid
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from lpviz._files import atomic_write, open_archive
from lpviz._parallel import check_signals

__all__ = [
    "Task",
    "ResultStore",
    "RunStats",
    "StaleResultError",
    "TaskFailedError",
    "seed_for",
    "run_tasks",
    "default_workers",
    "threads_per_worker",
    "local_cluster",
]

RECORD_KEY = "__record__"
# How often a cancellable run looks at its cancel flag while it waits for results.
CANCEL_POLL_SECONDS = 0.05
TASKS_FOLDER = "tasks"


def seed_for(base_seed, *parts):
    """A seed (int < 2**63) derived from ``base_seed`` and ``parts`` (ints or strings):
    distinct parts give independent streams (NumPy ``SeedSequence`` spawn keys)."""
    key = tuple(zlib.crc32(str(part).encode("utf-8")) for part in parts)
    state = np.random.SeedSequence(int(base_seed), spawn_key=key).generate_state(1, np.uint64)[0]
    return int(state >> np.uint64(1))


def _canonical(params):
    return json.dumps(params, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class Task:
    """One unit of a grid: ``id`` (also its file name) and its JSON ``params``."""

    id: str
    params: dict = field(hash=False)

    def __post_init__(self):
        if not self.id or any(ch in self.id for ch in "/\\") or self.id.startswith("."):
            raise ValueError(f"task id {self.id!r} must be a plain file name (no slashes, not hidden)")
        try:
            _canonical(self.params)
        except TypeError as error:
            raise TypeError(f"task {self.id}: params must be JSON data (str, numbers, lists, dicts): {error}") from None


class StaleResultError(RuntimeError):
    """A result file on disk was made with other parameters than the task now asks for."""


class TaskFailedError(RuntimeError):
    """Some tasks failed after their retries; their results are missing."""

    def __init__(self, failures):
        self.failures = failures
        lines = "; ".join(f"{task.id}: {type(error).__name__}: {error}" for task, error in failures[:5])
        more = f" (and {len(failures) - 5} more)" if len(failures) > 5 else ""
        super().__init__(
            f"{len(failures)} task(s) failed after retries: {lines}{more}. Run again with --resume to retry only those"
        )


class ResultStore:
    """One ``.npz`` per task under ``directory/tasks``: its arrays and a JSON record."""

    def __init__(self, directory):
        self.directory = Path(directory)
        self.folder = self.directory / TASKS_FOLDER

    def path(self, task_id):
        return self.folder / f"{task_id}.npz"

    def ids(self):
        """Ids of every stored result."""
        if not self.folder.is_dir():
            return []
        return sorted(p.name[:-4] for p in self.folder.glob("*.npz") if not p.name.startswith("."))

    def done(self, task):
        """True when the task's result is stored with the same parameters.

        Raises :class:`StaleResultError` when a result with this id holds other
        parameters (e.g. another preset wrote into the same folder).
        """
        path = self.path(task.id)
        if not path.is_file():
            return False
        record = self.read_record(task.id)
        if _canonical(record.get("params")) != _canonical(task.params):
            raise StaleResultError(
                f"{path} holds a result of task {task.id} with other parameters (another "
                "preset, --chains or seed?); use another --output folder or delete "
                f"{self.folder}"
            )
        return True

    def write(self, task, result):
        """Store ``result`` = ``{"record": dict, "arrays": {name: ndarray}}`` of ``task`` atomically."""
        record = dict(result.get("record", {}))
        record["task_id"] = task.id
        record["params"] = task.params
        arrays = {name: np.asarray(value) for name, value in result.get("arrays", {}).items()}
        if RECORD_KEY in arrays:
            raise ValueError(f"array name {RECORD_KEY!r} is reserved")
        arrays[RECORD_KEY] = np.asarray(json.dumps(record))
        self.folder.mkdir(parents=True, exist_ok=True)  # the store's own folders
        atomic_write(self.path(task.id), lambda handle: np.savez_compressed(handle, **arrays))

    def read_record(self, task_id):
        with open_archive(self.path(task_id), what="task result") as archive:
            return json.loads(archive.read_text(RECORD_KEY, max_chars=1 << 24))

    def read(self, task_id):
        """``(record, arrays)`` of one stored task (through the bounded reader, lpviz._files.Archive)."""
        with open_archive(self.path(task_id), what="task result") as archive:
            arrays = {name: archive.read(name) for name in archive.keys() if name != RECORD_KEY}
            record = json.loads(archive.read_text(RECORD_KEY, max_chars=1 << 24))
        return record, arrays

    def read_all(self, tasks=None):
        """``[(record, arrays), ...]`` of the given tasks (default: every stored one), in task order."""
        ids = self.ids() if tasks is None else [t.id for t in tasks if self.path(t.id).is_file()]
        return [self.read(task_id) for task_id in ids]


@dataclass
class RunStats:
    """What :func:`run_tasks` did: tasks run now, found done, failed, cancelled; wall-clock; where."""

    executed: list = field(default_factory=list)
    skipped: list = field(default_factory=list)
    failed: list = field(default_factory=list)
    cancelled: list = field(default_factory=list)
    seconds: float = 0.0
    scheduler: str = "serial"
    workers: int = 1
    threads_per_worker: int = 1


def default_workers():
    """Workers of the default LocalCluster: one per core (each chain on one kernel thread)."""
    return max(1, os.cpu_count() or 1)


def threads_per_worker(workers, cores=None):
    """Kernel threads per worker so that workers x threads = cores (at least 1)."""
    cores = cores or os.cpu_count() or 1
    return max(1, cores // workers)


def local_cluster(workers, threads=None, memory_limit="auto"):
    """A LocalCluster of ``workers`` processes, one Dask thread each, whose chains use
    ``threads`` kernel threads (``LPVIZ_NUM_THREADS``; default ``cores // workers``);
    ``memory_limit``: bytes per worker (Dask's; its nanny restarts a worker beyond it)."""
    from distributed import LocalCluster

    threads = threads or threads_per_worker(workers)
    env = {
        "LPVIZ_NUM_THREADS": str(threads),
        "NUMBA_NUM_THREADS": str(threads),
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }
    return LocalCluster(
        n_workers=workers,
        threads_per_worker=1,
        processes=True,
        env=env,
        memory_limit=memory_limit,
        dashboard_address=None,
        # a task's error reaches the client as its exception; the workers' own ERROR lines are shutdown
        # noise (a heartbeat to the scheduler that closed first, on Ctrl-C: a traceback after "interrupted")
        silence_logs=logging.CRITICAL,
        preload=["lpviz.reproduce._worker_setup"],  # Ctrl-C is the client's to handle: no worker tracebacks
    )


def _progress(total, initial, description, enabled):
    from tqdm import tqdm

    return tqdm(
        total=total,
        initial=initial,
        desc=description,
        unit="task",
        disable=not enabled,
        dynamic_ncols=True,
        smoothing=0.1,
    )


def run_tasks(
    tasks,
    store,
    function,
    *,
    scheduler=None,
    workers=None,
    threads=None,
    retries=2,
    progress=False,
    description="tasks",
    on_result=None,
    cancel=None,
):
    """Run the tasks whose results ``store`` lacks; write each result as it finishes.

    Parameters
    ----------
    tasks : list of Task
    store : ResultStore
    function : callable
        ``function(params) -> {"record": dict, "arrays": dict}``; must be
        importable by the workers (a module-level function).
    scheduler : None, "serial", str or distributed.Client
        None: a new LocalCluster of ``workers`` processes; "serial": in this
        process, no Dask; an address (``tcp://host:8786``): that cluster; a Client: use it.
    workers, threads : int, optional
        LocalCluster size (default :func:`default_workers`) and kernel threads per worker.
    retries : int
        Times a task that raised is run again (Dask ``retries``).
    progress : bool
        A progress bar with ETA on stderr.
    on_result : callable, optional
        Called as ``on_result(task)`` after each result is written (the tests interrupt runs with it;
        the dashboard's epsilon sweep streams its points with it).
    cancel : object with ``is_set()``, optional
        E.g. a ``threading.Event`` set from another thread: once set, no further
        task starts and the unfinished ones are cancelled (``stats.cancelled``; a
        chain already running on a Dask worker finishes there and is discarded).

    Returns
    -------
    RunStats
    """
    tasks = list(tasks)
    ids = [t.id for t in tasks]
    if len(set(ids)) != len(ids):
        duplicated = sorted({i for i in ids if ids.count(i) > 1})
        raise ValueError(f"task ids must be unique; repeated: {', '.join(duplicated[:5])}")
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise ValueError(f"retries must be an integer >= 0, got {retries!r}")
    stats = RunStats()
    pending = []
    for task in tasks:
        (stats.skipped if store.done(task) else pending).append(task)
    start = time.perf_counter()
    if scheduler == "serial":
        with _progress(len(tasks), len(stats.skipped), description, progress) as bar:
            for index, task in enumerate(pending):
                check_signals()  # a Ctrl-C or SIGTERM whose exception was swallowed stops the grid here
                if _cancelled(cancel):
                    stats.cancelled.extend(pending[index:])
                    break
                try:
                    result = function(task.params)
                except Exception as error:  # noqa: BLE001 - reported, not swallowed
                    stats.failed.append((task, error))
                else:
                    store.write(task, result)
                    stats.executed.append(task)
                    if on_result is not None:
                        on_result(task)
                bar.update(1)
        stats.seconds = time.perf_counter() - start
        return stats
    if not pending:
        stats.scheduler, stats.workers, stats.threads_per_worker = "nothing to run", 0, 0
    else:
        _run_on_dask(
            pending,
            store,
            function,
            stats,
            scheduler=scheduler,
            workers=workers,
            threads=threads,
            retries=retries,
            total=len(tasks),
            progress=progress,
            description=description,
            on_result=on_result,
            cancel=cancel,
        )
    stats.seconds = time.perf_counter() - start
    return stats


def _cancelled(cancel):
    return cancel is not None and cancel.is_set()


def _connect(scheduler, workers, threads, stats):
    """``(client, owned)``; ``owned`` lists what to close afterwards."""
    import dask
    from distributed import Client

    from lpviz.distributed import cluster_workers

    if scheduler:  # an address (ours to close) or a Client (the caller's)
        client = Client(scheduler) if isinstance(scheduler, str) else scheduler
        stats.scheduler = f"Dask cluster at {client.scheduler.address}"
        stats.workers = len(cluster_workers(client))
        stats.threads_per_worker = 0  # kernel threads: as the cluster's workers were started (LPVIZ_NUM_THREADS)
        return client, [client] if isinstance(scheduler, str) else []
    workers = workers or default_workers()
    threads = threads or threads_per_worker(workers)
    # a task may see this many worker deaths before it is failed (KilledWorker), not skipped
    with dask.config.set({"distributed.scheduler.allowed-failures": 3}):
        cluster = local_cluster(workers, threads)
    client = Client(cluster)
    stats.scheduler = "LocalCluster"
    stats.workers, stats.threads_per_worker = workers, threads
    return client, [client, cluster]


def _run_on_dask(
    pending,
    store,
    function,
    stats,
    *,
    scheduler,
    workers,
    threads,
    retries,
    total,
    progress,
    description,
    on_result,
    cancel=None,
):
    from distributed import as_completed

    client, owned = _connect(scheduler, workers, threads, stats)
    token = uuid.uuid4().hex[:8]
    futures = {}
    try:
        for task in pending:
            future = client.submit(function, task.params, key=f"lpviz-{task.id}-{token}", retries=retries, pure=False)
            futures[future] = task
        handled = set()
        with _progress(total, total - len(pending), description, progress) as bar:
            # the client's loop: it need not be the default client (e.g. a shared one made with set_as_default=False)
            for future in _completed(as_completed(futures, loop=client.loop), cancel):
                check_signals()  # a Ctrl-C or SIGTERM whose exception was swallowed stops the grid here
                task = futures[future]
                handled.add(future)
                try:
                    result = future.result()
                except Exception as error:  # noqa: BLE001 - KilledWorker included: reported as failed
                    stats.failed.append((task, error))
                else:
                    store.write(task, result)
                    stats.executed.append(task)
                    if on_result is not None:
                        on_result(task)
                future.release()
                bar.update(1)
        if _cancelled(cancel):
            unfinished = [future for future in futures if future not in handled]
            client.cancel(unfinished)
            stats.cancelled.extend(futures[future] for future in unfinished)
    except BaseException:
        for future in futures:
            future.cancel()
        raise
    finally:
        for thing in owned:
            try:
                thing.close()
            except Exception:  # noqa: BLE001 - closing after an interrupt must not mask it
                pass


def _completed(finished, cancel):
    """The futures of ``finished`` (an ``as_completed``) as they finish, until ``cancel`` is set
    (looked at every :data:`CANCEL_POLL_SECONDS` while nothing finishes)."""
    if cancel is None:
        yield from finished
        return
    while not finished.is_empty() and not cancel.is_set():
        batch = finished.next_batch(block=False)
        if not batch:
            time.sleep(CANCEL_POLL_SECONDS)
        for future in batch:
            if cancel.is_set():  # finished, but after the cancel: not handed out (counted as cancelled)
                return
            yield future


def projected_seconds(task_seconds, workers):
    """Wall-clock of running tasks of the given durations on ``workers`` workers.

    Longest-processing-time-first list scheduling (what a Dask queue does with
    the longest tasks submitted first): every task goes to the worker that
    frees up first. Within 4/3 of the optimum; at least max(task), sum/workers.
    """
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    loads = np.zeros(int(workers))
    for seconds in sorted(task_seconds, reverse=True):
        loads[np.argmin(loads)] += seconds
    return float(loads.max()) if len(loads) else 0.0


def format_duration(seconds):
    """'42 s', '3.5 min', '2.1 h', '3.4 days'."""
    if seconds is None or not math.isfinite(seconds):
        return "-"
    if seconds < 10:
        return f"{seconds:.2g} s"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"
