"""The sessions' chains on Dask workers: a class scales by adding workers.

``python -m lpviz.dashboard.serve --scheduler ADDRESS`` runs every session's chains on the
workers of that Dask cluster (``LPVIZ_CHAINS=cluster``); the server process
keeps the pages, the controls' state machines and the views, and computes no
chain. Each session gets one :class:`ChainHost`, a Dask actor on the worker
with the fewest sessions per thread, so a new worker takes the next sessions.
The host runs the session's chains in threads of the worker process, exactly
as the server runs them in its own (:func:`lpviz.dashboard.session.chain.run_chain`: the same
:class:`~lpviz.dashboard.session.lockstep.Lockstep` per session, the worker's
:class:`~lpviz.dashboard.session.turnstile.Turnstile` with one place per Dask thread), keeps a
finished chain there for an extension, and queues what the chains post
(trace rows, result snapshots, "paused", "done", "error").

On the server, :class:`DaskPlace` is the session's place (see
:class:`lpviz.dashboard.session.chain.LocalPlace`): :meth:`DaskPlace.launch` returns a
:class:`RemoteChain` handle that the runner's state machine owns like a
thread. Every call to the cluster runs on the Dask client's own event loop,
never on the server's: the Start/Pause/Stop clicks send the runner's
:class:`~lpviz.dashboard.session.control.Control` state (numbered, so calls overtaking each other
cannot undo a later click), and one pump per session fetches the host's
messages about ten times a second (the actor call waits on the worker until
one is there) into the runners' queues, which :meth:`lpviz.dashboard.session.fits.Fits.drain`
empties as before. Actor calls go straight to the worker, not through the
scheduler.

A worker that is lost (killed, restarted, cut off) ends its sessions' runs
with an error that says so; the runners settle as after any error, and the
next Start makes a new host on a live worker. Closing the session stops its
chains, closes the host and releases it (the worker frees the chains and
data). A host whose server has gone quiet for :data:`ORPHAN_SECONDS` stops
its own chains.

The workers need lpviz installed (the dashboard is part of the package: ``pip install lpviz``
then ``dask worker ADDRESS`` on each machine), at the server's version.
"""

import asyncio
import collections
import itertools
import os
import threading
import time
import uuid

from lpviz.dashboard.session.chain import LocalPlace, run_chain
from lpviz.dashboard.session.control import Control
from lpviz.dashboard.session.lockstep import Lockstep
from lpviz.dashboard.session.runner import REMOTE_CHAIN
from lpviz.dashboard.session.turnstile import turnstile
from lpviz.dashboard.session.warmup import warm_up_kernels

# Where a session's chains run: "server" (threads of this process) or "cluster" (Dask workers).
CHAINS_ENV = "LPVIZ_CHAINS"
CHAINS_PLACES = ("server", "cluster")

# A take waits on the worker this long at most for the first message (then returns empty).
TAKE_WAIT_SECONDS = 1.0
# Between two takes of one session: its output reaches the server at most this often
# (the drain runs every 200 ms; trace rows are posted every 50 ms).
PUMP_SECONDS = 0.1
# A call to the cluster that has not answered in this long means the cluster (or the worker) is gone.
CALL_SECONDS = 30.0
# A session's host on a worker that has not run one yet imports the dashboard and loads (on a fresh
# Numba cache: compiles) the chains' kernels first: 30 s was too short on 2 loaded cores, and the first
# session's private chain ended in a TimeoutError (tests/test_package.py, a fresh environment's workers)
HOST_SECONDS = 600.0
# A host nobody has taken from in this long (its server died) stops its chains.
ORPHAN_SECONDS = 60.0
# A session's close waits this long at most for its host to stop its chains.
CLOSE_SECONDS = 10.0


def default_place():
    """Where a session's chains run: threads of this process (:class:`~lpviz.dashboard.session.chain.LocalPlace`), or,
    when ``$LPVIZ_CHAINS`` is "cluster" (``python -m lpviz.dashboard.serve --scheduler ADDRESS``), the workers
    of the server's Dask cluster (:class:`DaskPlace`)."""
    chains = os.environ.get(CHAINS_ENV, "server").strip() or "server"
    if chains not in CHAINS_PLACES:
        raise ValueError(f"${CHAINS_ENV} must be one of {', '.join(CHAINS_PLACES)}, got {chains!r}")
    return DaskPlace() if chains == "cluster" else LocalPlace()


# ---- on the worker -------------------------------------------------------------------------------------


class ChainHost:
    """One session's chains on a Dask worker (made there as an actor by :class:`DaskPlace`)."""

    def __init__(self, session, orphan_seconds=ORPHAN_SECONDS):
        from distributed import get_worker

        worker = get_worker()
        self.session = session
        self.worker = worker.address
        self.pid = os.getpid()
        turnstile(places=worker.state.nthreads)  # the worker's chains take turns on its Dask threads
        self.pace = Lockstep()  # the session's chains stay level, as on the server
        self._outbox = collections.deque()  # (launch, kind, payload), appended by the chain threads
        self._arrived = None  # an asyncio.Event on the worker's event loop, made by the first take
        self._loop = None
        self._taken_at = time.monotonic()
        self._runs = {}  # launch -> (method, thread, Control, last steering number applied)
        self._carries = {}  # method -> (generation, launch, carry) of a finished run, for an extension
        self._problem = (None, None)  # (token, Problem) the session's chains fit
        self._closed = False
        self._watching = False  # whether _watch is scheduled
        self.orphan_seconds = orphan_seconds
        threading.Thread(target=warm_up_kernels, name="lpviz-warm-up", daemon=True).start()

    # -- called by the server (actor calls, on the worker's event loop: none of them blocks) --
    async def launch(self, launch, method, generation, token, problem, schedule, target, extend, lockstep, steering):
        """Start a chain thread for ``launch``; returns where it runs (pid, worker address)."""
        if self._closed:
            raise RuntimeError("this session's chains were closed")
        if problem is not None:
            self._problem = (token, problem)
        if self._problem[0] != token:
            raise RuntimeError("the data to fit did not reach the worker: press Start again")
        if extend:
            generation_kept, _, carry = self._carries.get(method, (None, None, None))
            if carry is None or generation_kept != generation:
                raise RuntimeError("the finished run's chain is no longer on the worker: press Start for a new run")
        else:
            self._carries.pop(method, None)
            carry = {"schedule": schedule}
        number, state = steering
        control = Control()
        control.follow(state)
        thread = threading.Thread(
            target=self._work,
            args=(launch, method, generation, self._problem[1], carry, target, control, lockstep),
            name=f"lpviz-{method}-chain",
            daemon=True,
        )
        self._runs[launch] = [method, thread, control, number]
        thread.start()
        if not self._watching:
            self._watching = True
            asyncio.get_running_loop().call_later(self.orphan_seconds / 4, self._watch)
        return {"pid": self.pid, "worker": self.worker}

    async def steer(self, launch, method, steering):
        """Follow the server's Control of ``launch`` (a stop also drops the run's chain kept for an extension)."""
        number, state = steering
        run = self._runs.get(launch)
        if run is not None and number > run[3]:
            run[3] = number
            run[2].follow(state)
        if state[0]:
            kept = self._carries.get(method)
            if kept is not None and kept[1] == launch:
                del self._carries[method]

    async def take(self, wait=TAKE_WAIT_SECONDS):
        """Everything the chains posted since the last take, waiting up to ``wait`` s for the first."""
        self._taken_at = time.monotonic()
        if self._arrived is None:
            self._loop, self._arrived = asyncio.get_running_loop(), asyncio.Event()
        self._arrived.clear()
        if not self._outbox and not self._closed:
            try:
                await asyncio.wait_for(self._arrived.wait(), wait)
            except TimeoutError:
                pass
        self._taken_at = time.monotonic()
        taken = []
        while self._outbox:
            taken.append(self._outbox.popleft())
        return taken

    async def census(self):
        """The runs whose chain has not left: ``{launch: (method, control state)}`` (tests, diagnostics)."""
        return {launch: (run[0], run[2].state()) for launch, run in list(self._runs.items())}  # threads change it

    async def close(self):
        """Stop every chain, wait for them to leave (at most :data:`CLOSE_SECONDS`) and drop the chains
        and data; returns the runs still running (none unless a chain would not stop)."""
        self._closed = True
        for run in list(self._runs.values()):
            run[2].stop()
        deadline = time.monotonic() + CLOSE_SECONDS
        while self._runs and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        self._carries.clear()
        self._problem = (None, None)
        self._outbox.clear()
        if self._arrived is not None:
            self._arrived.set()
        return len(self._runs)

    def _watch(self):
        """On the worker's loop, every ``orphan_seconds / 4`` while it has runs: a host nobody has
        taken from for ``orphan_seconds`` (its server died or was cut off) stops its chains."""
        if time.monotonic() - self._taken_at > self.orphan_seconds:
            for run in list(self._runs.values()):
                run[2].stop()
        if self._closed or not self._runs:
            self._watching = False
            return
        asyncio.get_running_loop().call_later(self.orphan_seconds / 4, self._watch)

    # -- the chain threads --
    def _work(self, launch, method, generation, problem, carry, target, control, lockstep):
        ended = []

        def post(kind, payload=None):
            if kind == "done":
                ended.append(kind)
            self._post((launch, kind, payload))

        try:
            run_chain(method, problem, carry, target, control, post, self.pace if lockstep else None, turnstile())
        except BaseException as exc:  # run_chain reports its own errors; anything else still ends the run
            post("error", f"{type(exc).__name__}: {exc}")
        finally:
            if ended and not control.stopped and not self._closed:
                self._carries[method] = (generation, launch, carry)  # an extension continues this chain
            self._runs.pop(launch, None)  # before "left": whoever has seen "left" sees no run
            self._post((launch, "left", None))

    def _post(self, message):
        self._outbox.append(message)
        loop, arrived = self._loop, self._arrived
        if loop is not None and arrived is not None:
            try:
                loop.call_soon_threadsafe(arrived.set)
            except RuntimeError:  # the worker's loop has closed (the worker is shutting down)
                pass


# ---- on the server ---------------------------------------------------------------------------------------


class ChainCluster:
    """The Dask cluster this server's sessions run their chains on: a client (its own event loop, in a
    thread of its own) and how many sessions each worker hosts. One per process (:func:`shared_cluster`)."""

    def __init__(self, client, address=None):
        self.client = client
        self.address = address or client.scheduler.address
        self.hosts = collections.Counter()  # worker address -> sessions hosted (changed on the client's loop)

    @classmethod
    def connect(cls, address, timeout=10):
        """Connect to the scheduler at ``address``; an OSError names it when it cannot be reached."""
        from distributed import Client

        try:
            client = Client(address, timeout=timeout, set_as_default=False, direct_to_workers=True)
        except (OSError, TimeoutError) as exc:
            raise OSError(
                f"cannot reach the Dask scheduler at {address} ({type(exc).__name__}: {exc}): start it "
                "(dask scheduler), or serve the chains in this process (--chains server)"
            ) from exc
        return cls(client, address)

    def warm_up(self):
        """Load the kernels on every worker there is now (a task each, in the background), so the
        first chains of a class do not wait for them; a worker that joins later loads them when it
        gets its first session."""
        from distributed import fire_and_forget

        from lpviz.distributed import cluster_workers

        for address in cluster_workers(self.client):
            fire_and_forget(self.client.submit(warm_up_kernels, workers=[address], pure=False))

    def call(self, coroutine_function, *args):
        """Run ``coroutine_function(*args)`` on the client's event loop (returns at once; any thread)."""
        self.client.loop.add_callback(coroutine_function, *args)

    def wait(self, coroutine_function, *args, timeout=CALL_SECONDS):
        """Run it there and wait for its result (never on the client's loop itself; tests, diagnostics)."""
        return self.client.sync(coroutine_function, *args, callback_timeout=timeout)

    async def new_host(self, session):
        """A :class:`ChainHost` for ``session`` on the worker with the fewest sessions per thread:
        ``(worker address, actor future, actor)``."""
        info = await _answer(self.client.scheduler.identity(n_workers=-1))
        workers = {address: max(1, worker.get("nthreads", 1)) for address, worker in info.get("workers", {}).items()}
        if not workers:
            raise RuntimeError(
                f"no Dask worker is connected to the scheduler at {self.address}: start one (dask worker "
                f"{self.address}) where lpviz is installed"
            )
        address = min(workers, key=lambda worker: (self.hosts[worker] / workers[worker], self.hosts[worker]))
        future = self.client.submit(
            ChainHost,
            session,
            actor=True,
            workers=[address],
            allow_other_workers=True,  # if it is lost, the host may be remade anywhere (and is then dropped)
            key=f"lpviz-session-{session}",
        )
        with self.client.as_current():  # the actor binds to this client (not to a default one)
            actor = await _answer(future, HOST_SECONDS)
        self.hosts[address] += 1
        return address, future, actor

    def close(self):
        self.client.close()


_SHARED: list[ChainCluster] = []
_SHARED_LOCK = threading.Lock()
SCHEDULER_ENV = "LPVIZ_SCHEDULER"


def connect(address):
    """Connect this process's :class:`ChainCluster` to ``address`` (the server does at start, so an
    unreachable scheduler is reported before anyone opens a page)."""
    with _SHARED_LOCK:
        if _SHARED and _SHARED[0].address == address and _SHARED[0].client.status == "running":
            return _SHARED[0]
        cluster = ChainCluster.connect(address)
        cluster.warm_up()
        _SHARED[:] = [cluster]
        return cluster


def shared_cluster():
    """This process's :class:`ChainCluster`, connected to ``$LPVIZ_SCHEDULER`` on first use."""
    with _SHARED_LOCK:
        if _SHARED:
            return _SHARED[0]
    address = os.environ.get(SCHEDULER_ENV, "").strip()
    if not address:
        raise RuntimeError(
            "chains on a Dask cluster (LPVIZ_CHAINS=cluster) need its scheduler's address: "
            "python -m lpviz.dashboard.serve --scheduler ADDRESS (or set LPVIZ_SCHEDULER)"
        )
    return connect(address)


class RemoteChain:
    """The handle of one run on a :class:`ChainHost` (what a thread is to :class:`dashboard.session.chain.LocalPlace`):
    alive until the host says its chain has left (every message before that is in the runner's queue),
    or until the run cannot go on (the worker was lost: an "error" message says so first)."""

    _numbers = itertools.count(1)

    def __init__(self, place, runner, generation, carry, control):
        self.place, self.runner, self.generation = place, runner, generation
        self.carry, self.control = carry, control
        self.launch = f"{runner.method}-{next(self._numbers)}"
        self.pid = None  # the worker process the chain runs in, once launched
        self.worker = None
        self.launched = False
        self._steered = 0  # the number of the last Control state sent
        self._sent_state = None
        self._left = threading.Event()

    def is_alive(self):
        return not self._left.is_set()

    def join(self, timeout=None):
        self._left.wait(timeout)

    # -- on the client's event loop --
    def deliver(self, kind, payload):
        if kind == "left":
            self._left.set()
            return
        if kind == "done":
            self.carry[REMOTE_CHAIN] = self.worker  # the chain stays on the worker: the run can be extended
        self.runner.post(self.generation, kind, payload)

    def fail(self, message):
        """The run cannot go on: say why (unless it was asked to stop anyway), and let it go."""
        if not self._left.is_set():
            if not self.control.stopped:
                self.runner.post(self.generation, "error", message)
            self._left.set()

    def steering(self):
        """The Control's state, numbered (the host ignores a state older than one it has applied)."""
        self._steered += 1
        self._sent_state = self.control.state()
        return self._steered, self._sent_state

    async def steer(self):
        if not self.launched or self.control.state() == self._sent_state:
            return  # not there yet (the launch sends the state then), or nothing new
        if self._left.is_set() and not self.control.stopped:
            return  # gone; only a stop still matters (the host drops a finished chain kept for an extension)
        host = self.place.host
        if host is None:
            return
        try:
            await _answer(host.steer(self.launch, self.runner.method, self.steering()))
        except Exception as exc:  # noqa: BLE001 - the pump reports a lost host; a stop here still ends the run
            if self.control.stopped:
                self.fail(f"lost while stopping: {exc}")

    def steer_soon(self):
        """Called by the Control (on the server's event loop) at every stop, pause and resume."""
        self.place.cluster.call(self.steer)


class DaskPlace:
    """A session's chains on a Dask worker (see the module's text): the place of its runners."""

    def __init__(self, cluster=None):
        self.cluster = cluster if cluster is not None else shared_cluster()
        self.session = uuid.uuid4().hex[:12]
        self.host = None  # the session's ChainHost actor, once made
        self.worker = None  # its worker's address
        self._future = None
        self._handles = {}  # launch -> RemoteChain not yet left (changed on the client's loop only)
        self._lock = None  # an asyncio.Lock on the client's loop: one host, launches in order
        self._shipped = None  # the Problem the host holds
        self._tokens = itertools.count(1)
        self._token = 0
        self._closed = False

    # -- the place, called on the server's event loop: nothing here waits for the cluster --
    def launch(self, runner, generation, problem, carry, target, control):
        handle = RemoteChain(self, runner, generation, carry, control)
        control.wakers.append(handle.steer_soon)
        extend, lockstep = bool(carry.get(REMOTE_CHAIN)), runner.pace is not None
        self.cluster.call(self._launch, handle, problem, dict(carry["schedule"]), target, extend, lockstep)
        return handle

    def warm_up(self):
        """Make the session's host now (its worker loads the kernels), so the first Start runs at once."""
        self.cluster.call(self._host_ready)

    def close(self):
        """Stop the host's chains, close it and release it (the worker drops its chains and data)."""
        self._closed = True
        self.cluster.call(self._close)

    def census(self):
        """``{launch: (method, control state)}`` of the host's runs whose chain has not left; waits for
        the cluster, so never call it on an event loop (tests, diagnostics)."""
        return self.cluster.wait(self._census)

    # -- on the client's event loop --
    async def _census(self):
        host = self.host
        return {} if host is None else await _answer(host.census())

    def _locked(self):
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    async def _host_ready(self):
        async with self._locked():
            return await self._ensure_host()

    async def _ensure_host(self):
        if self._closed:
            raise RuntimeError("the session has ended")
        if self.host is None:
            self.worker, self._future, self.host = await self.cluster.new_host(self.session)
            self._shipped = None
            asyncio.ensure_future(self._pump(self.host))
        return self.host

    async def _launch(self, handle, problem, schedule, target, extend, lockstep):
        self._handles[handle.launch] = handle
        try:
            async with self._locked():
                host = await self._ensure_host()
                if problem is not self._shipped:
                    self._token = next(self._tokens)
                ship = problem if problem is not self._shipped else None  # the data go once per release
                where = await _answer(
                    host.launch(
                        handle.launch,
                        handle.runner.method,
                        handle.generation,
                        self._token,
                        ship,
                        schedule,
                        target,
                        extend,
                        lockstep,
                        handle.steering(),
                    )
                )
                self._shipped = problem
            handle.pid, handle.worker, handle.launched = where["pid"], where["worker"], True
        except Exception as exc:  # noqa: BLE001 - any failure to start is the run's error, shown in the page
            self._handles.pop(handle.launch, None)
            handle.fail(f"could not start the chain on the Dask cluster at {self.cluster.address}: {_describe(exc)}")
            return
        await handle.steer()  # a click that came while the launch was on its way

    async def _pump(self, host):
        """Move the host's messages into the runners' queues until the session ends or the host is lost."""
        while self.host is host:
            try:
                messages = await _answer(host.take(TAKE_WAIT_SECONDS), TAKE_WAIT_SECONDS + CALL_SECONDS)
            except Exception as exc:  # noqa: BLE001 - whatever broke the link, the host's runs cannot go on
                if self.host is host:
                    self._lost(f"the Dask worker {self.worker} running this chain was lost ({_describe(exc)})")
                return
            for launch, kind, payload in messages:
                handle = self._handles.get(launch)
                if handle is not None:
                    handle.deliver(kind, payload)
                    if kind == "left":
                        del self._handles[launch]
            await asyncio.sleep(PUMP_SECONDS)

    def _lost(self, message):
        """The host is gone: its runs end with ``message``; the next Start makes a new host."""
        self._drop_host()
        for handle in list(self._handles.values()):
            handle.fail(f"{message}: press Start to run it again")
        self._handles.clear()

    def _drop_host(self):
        if self.host is not None:
            self.cluster.hosts[self.worker] -= 1
            if self.cluster.hosts[self.worker] <= 0:
                del self.cluster.hosts[self.worker]
        future, self.host, self._future, self._shipped = self._future, None, None, None
        if future is not None:
            # cancelled, not only released: the actor's own reference to its key (Dask's) would keep
            # the host on the worker until this process's garbage collector found it
            cancel = self.cluster.client.cancel([future], asynchronous=True, force=True, reason="the session has ended")
            asyncio.ensure_future(cancel)

    async def _close(self):
        async with self._locked():
            host = self.host
            if host is not None:
                try:
                    await _answer(host.close(), CLOSE_SECONDS + CALL_SECONDS)
                except Exception:  # noqa: BLE001, S110 - a lost host has nothing left to close
                    pass
            self._drop_host()
            for handle in list(self._handles.values()):
                handle.fail("the session has ended")
            self._handles.clear()


async def _answer(call, seconds=CALL_SECONDS):
    """The result of an actor call (or any awaitable), or TimeoutError after ``seconds``."""
    return await asyncio.wait_for(asyncio.ensure_future(call), seconds)


def _describe(exc):
    text = str(exc) or type(exc).__name__
    return text if isinstance(exc, RuntimeError) else f"{type(exc).__name__}: {text}"
