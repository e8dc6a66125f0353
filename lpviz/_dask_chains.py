"""Whole chains on Dask workers: ``lpviz.fit(..., chains=C, scheduler=...)``.

Each of the C chains (or, for ``inference="vi"``, each of the R restarts) is
one task: the data are scattered to the cluster once, each task runs the whole
chain on its worker with the same kernels as one process, and the posteriors
come back as one :class:`~lpviz.ensemble.EnsemblePosterior`. The seeds are
:func:`~lpviz.ensemble.spawn_seeds`'s, so the ensemble is the one
``lpviz.fit(..., chains=C)`` gives in one process, bit for bit.

(``chains=1, scheduler=`` is another thing: one chain whose rows are split over
the workers, :mod:`lpviz.distributed`.)

While the chains run, each task sends its iterations' traces (no factors) to a
Dask queue every :data:`PROGRESS_SECONDS`, so ``callback`` hears every
iteration of every chain. Ctrl-C (or an error in ``callback``) sets a Dask
event that every task watches: the chains stop at their next row. A worker
lost in the middle makes Dask run its chain again on another worker (a chain is
a pure function of its seed: the same answer); a chain whose worker kept dying
is one error naming the chain. Each worker refuses, before it allocates, a chain
that does not fit its memory (:mod:`lpviz.budget`), as one process does.
"""

import copy
import threading
import time
import uuid

import numpy as np

from lpviz.distributed import CONNECT_TIMEOUT, connect
from lpviz.ensemble import EnsemblePosterior, best_restart, spawn_seeds

__all__ = ["fit_chains", "PROGRESS_SECONDS"]

# How often a task hands its iterations to the driver and a worker looks at the stop event (s).
PROGRESS_SECONDS = 0.25


class ChainLost(RuntimeError):
    """A chain's task failed on every worker Dask gave it to."""


def fit_chains(
    data, *, scheduler, count, random_state, restarts=False, callback=None, timeout=CONNECT_TIMEOUT, **arguments
):
    """The posterior of ``count`` chains (restarts, with ``restarts=True``) of
    :func:`lpviz.run` ``(data, **arguments)``, each a task on the cluster at ``scheduler``."""
    from distributed import Event, Queue

    seeds = spawn_seeds(random_state, count)
    client, owned = connect(scheduler, timeout)
    token = uuid.uuid4().hex
    stop = Event(f"lpviz-chains-stop-{token}", client=client)
    progress = Queue(f"lpviz-chains-progress-{token}", client=client) if callback is not None else None
    futures = []
    try:
        _check_workers(client)
        [scattered] = client.scatter([data], hash=False)
        futures = [
            client.submit(
                _run_chain,
                scattered,
                seed,
                index,
                arguments,
                stop.name,
                None if progress is None else progress.name,
                key=f"lpviz-chain-{index}-{token}",
                pure=False,
            )
            for index, seed in enumerate(seeds)
        ]
        start = time.perf_counter()
        posteriors = _collect(client, futures, progress, callback)
        seconds = time.perf_counter() - start
    except BaseException:
        stop.set()  # every running chain stops at its next row; the queued ones never start
        client.cancel(futures)
        raise
    finally:
        if owned:
            client.close()
    if restarts:
        return best_restart(posteriors)
    return EnsemblePosterior(posteriors, seconds=seconds)


def _collect(client, futures, progress, callback):
    """The chains' posteriors in chain order, feeding ``callback`` every iteration meanwhile."""
    from distributed import wait
    from distributed.scheduler import KilledWorker

    pending = set(futures)
    while pending:
        try:
            done, pending = wait(pending, timeout=PROGRESS_SECONDS, return_when="FIRST_COMPLETED")
        except TimeoutError:  # no chain finished meanwhile: hand on their progress
            done = set()
        _deliver(progress, callback)
        for future in done:
            if future.status == "error":
                error = future.exception()
                index = futures.index(future)
                if isinstance(error, KilledWorker):
                    raise ChainLost(
                        f"chain {index} was lost with every worker it ran on ({error}); the workers may be "
                        "short of memory: give them more (dask worker --memory-limit) or run fewer chains"
                    ) from None
                raise error
    _deliver(progress, callback)
    return [future.result() for future in futures]


def _deliver(progress, callback):
    if progress is None:
        return
    while progress.qsize():
        for batch in progress.get(batch=True):
            for state in batch:
                callback(state)


def _check_workers(client):
    if not client.scheduler_info().get("workers"):
        from lpviz.distributed import SchedulerUnreachable

        raise SchedulerUnreachable("the Dask scheduler has no workers; start some (`dask worker ADDRESS`)")


def _run_chain(data, seed, index, arguments, stop_name, progress_name):
    """One chain on a worker: its posterior; its traces to the progress queue as it goes."""
    from distributed import Event, Queue, get_client

    from lpviz.driver import run

    client = get_client()
    stop = Event(stop_name, client=client)
    progress = None if progress_name is None else Queue(progress_name, client=client)
    chain_run = run(data, random_state=seed, **arguments)
    finished = threading.Event()

    def watch():  # a stop request reaches a chain in the middle of a long iteration
        while not finished.is_set():
            if stop.wait(PROGRESS_SECONDS):
                chain_run.stop()
                return

    watcher = threading.Thread(target=watch, name=f"lpviz-chain-{index}-stop", daemon=True)
    watcher.start()
    batch, sent = [], time.perf_counter()
    try:
        for state in chain_run:
            if progress is not None:
                batch.append(_light(state, index))
                if time.perf_counter() - sent >= PROGRESS_SECONDS:
                    progress.put(batch)
                    batch, sent = [], time.perf_counter()
        if batch:
            progress.put(batch)
    finally:
        finished.set()
        watcher.join()
    return chain_run.posterior


def _light(state, index):
    """A copy of ``state`` without its factors or rates (the driver's callback hears traces)."""
    light = copy.copy(state)
    light.factors, light.model_instance, light._mu = {}, None, np.empty(0)
    light.chain = index
    return light
