"""Whole chains on Dask workers: ``lpviz.fit(..., chains=C, scheduler=...)`` with C > 1.

Each of the C chains is one task on the cluster: the data (release or counts, with the truth and
mask if given) is scattered once to the workers chosen, and each task builds the chain of
``lpviz.run(..., chains=C)`` that it stands for (the same seed from
:func:`lpviz.ensemble.spawn_seeds`, the same arguments, :func:`lpviz.driver._one_run`) and runs it
to the end on its worker's kernels. The chains come back as plain
:class:`~lpviz.engine.Posterior` objects in an :class:`~lpviz.ensemble.EnsemblePosterior`, equal to
the in-process ensemble of the same seed (same kernels, same seeds: the draws do not depend on
the thread or the machine that runs them).

This is not :mod:`lpviz.distributed`, which cuts ONE chain's rows over the workers (for data too
large for one machine): ``chains=1, scheduler=`` keeps meaning that. With ``chains > 1`` each
chain must fit on one worker, and any model, method or option of the in-process ensemble works.

Progress streams: each task posts its iterations' traces (iteration, log joint, log marginal,
seconds) to a :class:`distributed.Queue` at most every :data:`FLUSH_SECONDS`, and
:class:`DaskEnsembleRun` yields them as :class:`~lpviz.engine.ChainState` objects (without the
factors, which stay on the workers until the chain ends). A chain that Dask re-runs after losing
a worker replays the same iterations: the ones already yielded are skipped.

Stopping: :meth:`DaskEnsembleRun.stop` sets a :class:`distributed.Event` that a watcher thread in
every task polls; the task stops its chain at the next row and returns what it has. Ctrl-C, an
error or a caller that stops iterating also cancels the tasks.
"""

import copy
import threading
import time
import uuid

from lpviz.ensemble import EnsemblePosterior

__all__ = ["DaskEnsembleRun", "FLUSH_SECONDS"]

# How often (seconds) a task posts its chain's progress: one scheduler round trip per post, not
# one per iteration (a small chain's iteration takes a millisecond).
FLUSH_SECONDS = 0.25
# How often the driver and the tasks' watchers look at the queue and the stop event: Ctrl-C and
# stop() land within it.
_POLL_SECONDS = 0.2


def _chain_task(payload, arguments, index, random_state, names):
    """Run chain ``index`` on this worker; return its :class:`~lpviz.engine.Posterior`."""
    from distributed import Event, Queue, get_client

    from lpviz._parallel import limit_blas_threads
    from lpviz.engine import ChainStopped

    limit_blas_threads()
    client = get_client()
    progress, halt = Queue(names[0], client=client), Event(names[1], client=client)
    data, truth, mask = payload
    # the builder lpviz.driver hands over (its _one_run): this module never imports the driver back
    arguments = dict(arguments)
    build = arguments.pop("build")
    run = build(data, truth=truth, mask=mask, random_state=random_state, **arguments)
    finished = threading.Event()

    def watch():  # the chain runs in this task's thread: stop it from another one
        while not finished.is_set():
            try:
                if halt.wait(_POLL_SECONDS):
                    run.stop()
                    return
            except Exception:  # the client is closing: the task is being cancelled anyway
                return

    watcher = threading.Thread(target=watch, name=f"lpviz-chain-{index}-watch", daemon=True)
    watcher.start()
    buffer, posted = [], time.monotonic()
    try:
        for state in run:
            buffer.append((state.iteration, state.log_joint, state.log_marginal, state.seconds))
            if time.monotonic() - posted >= FLUSH_SECONDS:
                progress.put((index, buffer))
                buffer, posted = [], time.monotonic()
    except ChainStopped:  # stop(): the iterations done so far are the chain's result
        pass
    finally:
        finished.set()
    if buffer:
        progress.put((index, buffer))
    watcher.join()
    return run.posterior


class DaskEnsembleRun:
    """C chains of one fit, each a task on a Dask cluster (see the module docstring): the face of
    :class:`lpviz.ensemble.EnsembleRun`.

    Iterate it to run them: it submits the tasks and yields ``(chain, state)`` as the chains'
    progress arrives (``state``: a :class:`~lpviz.engine.ChainState` with ``iteration``,
    ``log_joint``, ``log_marginal``, ``seconds`` and ``chain``; no factors). ``posterior``: an
    :class:`~lpviz.ensemble.EnsemblePosterior` once the chains have ended; ``seconds``: the
    wall-clock of the whole run; ``stop()`` stops every chain (thread-safe); ``workers``: the
    worker each chain was placed on.
    """

    restarts = False

    def __init__(self, client, owned, payload, arguments, seeds, n_iter, model):
        self.client, self._owned = client, owned
        self._payload, self._arguments, self._seeds = payload, arguments, seeds
        self.n_iter, self.model = n_iter, model
        self.n_chains = len(seeds)
        self.seconds = None
        self.workers = []
        self._posteriors = None
        self._halt = None
        self._started = False
        self._stop_requested = threading.Event()
        self._token = uuid.uuid4().hex

    @property
    def posterior(self):
        if self._posteriors is None:
            raise RuntimeError("the chains have not ended yet: iterate the run (or use lpviz.fit) first")
        return EnsemblePosterior(self._posteriors, seconds=self.seconds)

    def stop(self):
        """Stop every chain at its next row (thread-safe); each returns the iterations it finished."""
        self._stop_requested.set()
        halt = self._halt
        if halt is not None:
            try:
                halt.set()
            except Exception:  # the client is already closed: the chains are over
                pass

    def close(self):
        """Close the client if this run opened it (an address was given)."""
        if self._owned:
            self._owned = False
            self.client.close()

    def __iter__(self):
        if self._started:
            raise RuntimeError("this run has been iterated already; start a new one with lpviz.run")
        self._started = True
        return self._drive()

    def _place(self):
        from lpviz.distributed import cluster_workers

        workers = sorted(cluster_workers(self.client))
        if not workers:
            from lpviz.distributed import SchedulerUnreachable

            raise SchedulerUnreachable("the Dask scheduler has no workers; start some (`dask worker ADDRESS`)")
        # one chain per worker round the cluster, so C chains use min(C, workers) machines
        return [workers[i % len(workers)] for i in range(self.n_chains)]

    def _drive(self):
        from distributed import Event, Queue

        client = self.client
        names = (f"lpviz-chains-progress-{self._token}", f"lpviz-chains-stop-{self._token}")
        progress, self._halt = Queue(names[0], client=client), Event(names[1], client=client)
        if self._stop_requested.is_set():
            self._halt.set()
        start = time.perf_counter()
        futures, finished = [], False
        try:
            self.workers = self._place()
            chosen = sorted(set(self.workers))
            [payload] = client.scatter([self._payload], workers=chosen, broadcast=True, hash=False)
            self._payload = None  # the workers hold it now
            for index, (seed, worker) in enumerate(zip(self._seeds, self.workers, strict=True)):
                futures.append(
                    client.submit(
                        _chain_task,
                        payload,
                        self._arguments,
                        index,
                        seed,
                        names,
                        key=f"lpviz-chain{index}-{self._token}",
                        workers=[worker],
                        allow_other_workers=True,  # a chain whose worker is lost may run again elsewhere
                        pure=False,
                    )
                )
            del payload
            yielded = [0] * self.n_chains
            results = [None] * self.n_chains
            while any(result is None for result in results):
                # everything posted so far, without waiting (a get that times out logs an error on the scheduler)
                posts = progress.get(batch=True)
                for index, batch in posts:
                    yield from self._states(index, batch, yielded)
                for index, future in enumerate(futures):
                    if results[index] is None and future.done():
                        results[index] = self._result(index, future)
                        # what the last post did not carry (the queue may still hold it: skipped then)
                        yield from self._states(index, _traces(results[index]), yielded)
                if not posts:
                    time.sleep(_POLL_SECONDS)
            self._posteriors = results
            finished = True
        finally:
            if not finished:  # an error, Ctrl-C or a caller that stopped iterating: stop every chain
                self.stop()
                if futures:
                    client.cancel(futures)
            self.seconds = time.perf_counter() - start
            for resource in (progress,):
                try:
                    resource.close()
                except Exception:  # the client is closing
                    pass
            self.close()

    def _states(self, index, batch, yielded):
        from lpviz.engine import ChainState

        for iteration, log_joint, log_marginal, seconds in batch:
            if iteration <= yielded[index]:  # a chain run again after a lost worker replays its iterations
                continue
            yielded[index] = iteration
            state = ChainState(
                iteration, log_joint=log_joint, seconds=seconds, model=self.model, log_marginal=log_marginal
            )
            state.chain = index
            yield index, state

    def _result(self, index, future):
        from distributed import CancelledError

        try:
            return future.result()
        except CancelledError:
            raise RuntimeError(
                f"chain {index} of {self.n_chains} was cancelled on the cluster (its task "
                f"{future.key!r}); start the fit again"
            ) from None
        except Exception as error:
            from distributed.scheduler import KilledWorker

            if isinstance(error, KilledWorker):
                from lpviz.distributed import WorkerLost

                raise WorkerLost(
                    f"chain {index} of {self.n_chains} was lost with its worker "
                    f"({self.workers[index] if index < len(self.workers) else 'unknown'}: {error}); "
                    "start the fit again (its chains are the same for the same seed), or give the "
                    "cluster steadier workers"
                ) from None
            raise

    def __repr__(self):
        return f"DaskEnsembleRun({self.n_chains} chains, n_iter={self.n_iter}, client={self.client!r})"


def _traces(posterior):
    return list(
        zip(
            range(1, posterior.iterations + 1),
            posterior.log_joint,
            posterior.log_marginal,
            posterior.iteration_seconds,
            strict=False,
        )
    )


def prepare(scheduler, data, *, truth, mask, random_state, chains, timeout, model_name, **arguments):
    """A :class:`DaskEnsembleRun` of ``chains`` chains of :func:`lpviz.run`'s ``arguments`` on the
    cluster at ``scheduler`` (an address, or a ``distributed.Client``, which stays the caller's)."""
    from lpviz._random import chain_seed_from
    from lpviz.distributed import connect
    from lpviz.ensemble import spawn_seeds

    seeds = spawn_seeds(random_state, chains)
    # each task gets a copy of its seed's generator (pickled); draw the chain seed here too, so a
    # Generator given as random_state moves on as the in-process ensemble moves it
    sent = [copy.deepcopy(seed) for seed in seeds]
    for seed in seeds:
        chain_seed_from(seed)
    client, owned = connect(scheduler, timeout)
    return DaskEnsembleRun(client, owned, (data, truth, mask), arguments, sent, arguments["n_iter"], model_name)
