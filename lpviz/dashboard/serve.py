"""Serve the dashboard with safe defaults: ``lpviz serve`` (``make serve``; ``python -m lpviz.dashboard.serve``).

- Binds 127.0.0.1: only this machine can connect. Serving on a network is a
  choice made explicitly with ``--address 0.0.0.0 --allow-websocket-origin
  HOST:PORT`` (anyone who reaches the port can then use the dashboard and
  its CPU; there is no authentication: put it behind an authenticating proxy).
- A closed browser tab stops its chains within a second: a running session
  checks its connection at every drain (see :meth:`lpviz.dashboard.session.fits.Fits.drain`);
  Bokeh discards the session itself later, as usual.
- Uploads travel over the websocket: its largest message is set
  deliberately (``--max-upload``, default 64 MiB).
- Memory: each session may use the server's memory limit
  (``LPVIZ_MEMORY_LIMIT``, default 60% of the machine) divided by the
  sessions expected at once (``--sessions``, ``LPVIZ_APP_SESSIONS``, default 4).
- Epsilon sweeps run on the Dask cluster at ``--scheduler ADDRESS``
  (``LPVIZ_SCHEDULER``) when given, else on one LocalCluster of worker
  processes the server starts at the first sweep and shares between sessions
  (``LPVIZ_SWEEP_WORKERS`` workers, default half the cores).
- With ``--scheduler ADDRESS`` the sessions' chains run on that cluster's
  workers too (``--chains cluster``, the default then; ``LPVIZ_CHAINS``):
  each session on the worker with the fewest sessions per thread, its states
  streamed back (:mod:`lpviz.dashboard.session.remote`), so a class scales by adding workers and
  the server process computes no chain. The server connects at start and
  stops with a clear message if the scheduler cannot be reached; a worker needs
  lpviz installed, nothing more (``pip install lpviz``, then ``dask worker ADDRESS``).
  A lost worker ends its sessions' runs with an error that says so; Start
  runs them again on a live worker. ``--chains server`` keeps the chains in
  the server's threads while sweeps go to the cluster.
- Closed sessions: Bokeh discards a session whose page has gone after
  ``--unused-session-lifetime`` ms (default 15,000, checked every
  ``--check-unused-sessions`` ms, default 17,000); its chains stop at once
  (:meth:`lpviz.dashboard.session.fits.Fits.drain`) and its threads, chains and data are
  released when it is discarded (:meth:`lpviz.dashboard.session.fits.Fits.close`).
- Chains: in the server's threads (without ``--scheduler``), sharing its
  cores fairly between sessions (:class:`lpviz.dashboard.session.turnstile.Turnstile`; on a Dask
  worker, its threads): at most ``--chain-threads`` at once (default the
  cores). Measured on 2 quiet cores (``bench_class.py``): with one chain
  thread a class of 4 had loop lag p50/p95 3/330 ms in the steady window, but
  a class of 12 only 1-3 it/s per session (fairness 0.28); with two, a class
  of 12 ran 3-6 it/s per session (fairness 0.47, lag p50/p95 38/2727 ms). The
  server is bound by Python's GIL at about one core either way; a class
  scales with ``--scheduler`` (chains on Dask workers). The redraws of
  running sessions share the event loop (:data:`lpviz.dashboard.session.fits.REDRAW_LOOP_SHARE`).
- A class (``benchmarks/bench_class.py``; 2 cores shared with other work):
  the chains of 4-12 students progress fairly, but the event loop is the
  limit: building one session's page costs seconds of it (Panel and
  HoloViews), so when a whole class opens at once the pages arrive one after
  another (40-100 s for the last of 4-12 on the loaded machine) and the loop
  lags by seconds while views redraw. Have a class open the page in groups
  of two or three.
- Several processes: ``--procs N`` (``LPVIZ_PROCS``; default one, so the
  front is opt-in until a real browser has been checked through it; for a
  class server, half the cores, at most 8: :func:`lpviz.dashboard.serving.balancer.default_procs`) serves the dashboard
  from N server processes behind the one port, each new page to the process
  with the fewest sessions (:mod:`lpviz.dashboard.serving.balancer`; Panel's ``--num-procs`` does
  not balance websockets). Each process gets ``LPVIZ_MEMORY_LIMIT / N`` and
  the expected sessions over N (so a session's share stays), and
  ``--chain-threads`` chain threads. Without ``--scheduler`` one LocalCluster
  is started and shared by address: every process's sweeps run on it (and
  the chains, with ``--chains cluster``; that also works with one process).
  The processes stop with the server (Ctrl-C, SIGTERM, or the kernel's
  SIGTERM when it is killed); one that dies is reported and gets no new
  session.
- ``LPVIZ_LOOP_LOG=PATH``: the server appends how late its event loop runs a
  callback due every 100 ms (JSON lines), with its sessions and threads every
  second (:func:`lpviz.dashboard.serving.loopwatch.watch_event_loop`; ``benchmarks/bench_class.py`` reads it).
- ``kill -USR1 PID``: the server prints every thread's stack (Python's faulthandler) and every session's
  chains as it holds them (statuses, messages not yet drained, whether the drain runs) and goes on: where
  a run that never ends on screen is waiting (the served tests send it when a run hangs).
- Server-side files are read only from ``--data-folder`` (repeatable;
  default the data cache folder and ``../shared/data``), downloads happen
  only with ``--allow-downloads``.

The same with ``panel serve``::

    LPVIZ_APP_SESSIONS=4 panel serve lpviz/dashboard/app.py --address 127.0.0.1 --port 5006 \\
        --allow-websocket-origin 127.0.0.1:5006 --allow-websocket-origin localhost:5006 \\
        --websocket-max-message-size 67108864
"""

import argparse
import faulthandler
import os
import signal
import sys
from pathlib import Path

from lpviz.dashboard.serving.balancer import default_procs
from lpviz.dashboard.serving.uploads import MAX_UPLOAD_ENV
from lpviz.dashboard.session.remote import CHAINS_ENV, CHAINS_PLACES
from lpviz.dashboard.session.turnstile import CHAIN_THREADS_ENV

LOCAL = ("127.0.0.1", "localhost", "::1")
DEFAULT_MAX_UPLOAD = 64 * 2**20
PROCS_ENV = "LPVIZ_PROCS"
FRONT_ENV = "LPVIZ_FRONT_PORT"  # set by the front (lpviz.dashboard.serving.balancer) for its server processes
DEFAULT_PROCS = 1


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        prog="lpviz serve",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(parser)
    return check_args(parser, parser.parse_args(argv))


def add_arguments(parser):
    """The server's options (``lpviz serve`` and ``python -m lpviz.dashboard.serve`` take the same)."""
    parser.add_argument("--port", type=int, default=5006)
    parser.add_argument(
        "--address",
        default="127.0.0.1",
        help="interface to listen on (default 127.0.0.1: this machine only; 0.0.0.0 serves the "
        "network, with --allow-websocket-origin for the name people use)",
    )
    parser.add_argument(
        "--allow-websocket-origin",
        action="append",
        default=[],
        metavar="HOST[:PORT]",
        help="extra host names browsers may connect from (needed with --address 0.0.0.0)",
    )
    parser.add_argument(
        "--sessions",
        type=int,
        default=None,
        help="sessions expected at once; each gets the memory limit divided by this (default 4)",
    )
    parser.add_argument(
        "--max-upload",
        type=int,
        default=DEFAULT_MAX_UPLOAD,
        metavar="BYTES",
        help="largest websocket message, so the largest upload (default 64 MiB)",
    )
    parser.add_argument(
        "--data-folder",
        action="append",
        default=[],
        type=Path,
        help="folder whose files sessions may read (repeatable)",
    )
    parser.add_argument("--allow-downloads", action="store_true", help="let sessions download the Enron data")
    parser.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help="Dask scheduler the epsilon sweeps, and the sessions' chains (see --chains), run on (e.g. "
        "tcp://host:8786; default: sweeps on a local cluster of worker processes started at the first "
        "sweep, chains in this process)",
    )
    parser.add_argument(
        "--chains",
        choices=CHAINS_PLACES,
        default=None,
        help="where the sessions' chains run: 'cluster' (the workers of --scheduler; the default when it "
        "is given) or 'server' (threads of this process; the default without --scheduler)",
    )
    parser.add_argument(
        "--chain-threads",
        type=int,
        default=None,
        metavar="N",
        help="chains of all sessions running at once in this process (default: $LPVIZ_CHAIN_THREADS, else the "
        "cores; chains take turns, see Turnstile). Fewer leave the event loop more of the GIL: a class of 4 "
        "lags less, a class of 12 progresses slower and less fairly (see benchmarks/bench_class.py)",
    )
    parser.add_argument(
        "--unused-session-lifetime",
        type=int,
        default=15_000,
        metavar="MS",
        help="how long a session whose page has gone is kept before its memory is released (default 15000)",
    )
    parser.add_argument(
        "--check-unused-sessions",
        type=int,
        default=None,
        metavar="MS",
        help="how often gone sessions are looked for (default 17000, or the lifetime if shorter)",
    )
    parser.add_argument(
        "--procs",
        type=int,
        default=None,
        metavar="N",
        help="server processes behind the one port, new sessions to the one with the fewest "
        f"(default: ${PROCS_ENV}, else {DEFAULT_PROCS}; for a class server half the cores, at most 8: here "
        f"{default_procs()}; see lpviz/dashboard/serving/balancer.py)",
    )
    parser.add_argument("--show", action="store_true", help="open a browser")


def check_args(parser, args):
    """``args`` with their defaults filled in, or the parser's error naming the option and the fix."""
    if args.procs is None:
        from lpviz._env import env_count

        args.procs = env_count(PROCS_ENV, DEFAULT_PROCS)
    if args.procs < 1:
        parser.error(f"--procs needs at least one process, got {args.procs}")
    if args.chain_threads is None:  # $LPVIZ_CHAIN_THREADS, else the cores
        from lpviz._env import env_count
        from lpviz._parallel import n_threads

        args.chain_threads = env_count(CHAIN_THREADS_ENV, n_threads())
    if args.chain_threads < 1:
        parser.error(f"--chain-threads needs at least one thread, got {args.chain_threads}")
    if args.sessions is not None and args.sessions < 1:
        parser.error(f"--sessions must be >= 1, got {args.sessions}")
    if args.unused_session_lifetime < 1:
        parser.error(f"--unused-session-lifetime must be >= 1 ms, got {args.unused_session_lifetime}")
    if args.chains is None:
        args.chains = "cluster" if args.scheduler else "server"
    if args.address not in LOCAL and not args.allow_websocket_origin:
        parser.error(
            f"--address {args.address} serves the network: also say which host name browsers use, "
            "e.g. --allow-websocket-origin myhost.example.org:5006"
        )
    return args


def start_local_cluster(args):
    """One LocalCluster for the sweeps (and the chains with ``--chains cluster``) of every server
    process: :func:`lpviz.reproduce.sweep.shared_local_client`, closed at exit; its address."""
    from lpviz.reproduce.sweep import shared_local_client, sweep_workers

    client = shared_local_client(sweep_workers())
    address = client.scheduler.address
    what = "sweeps and chains" if args.chains == "cluster" else "sweeps"
    print(f"lpviz: the {what} run on a local Dask cluster at {address} ({sweep_workers()} workers)", flush=True)
    return address


def backend_argv(args):
    """The flags of each of ``args.procs`` server processes behind the front (all but the port)."""
    from lpviz.dashboard.session.memory import expected_sessions

    sessions = args.sessions or expected_sessions()
    origins = [f"{host}:{args.port}" for host in ("127.0.0.1", "localhost")] + args.allow_websocket_origin
    argv = [
        "--address",
        "127.0.0.1",
        "--sessions",
        str(max(1, -(-sessions // args.procs))),  # the class's sessions shared, so a session's memory stays
        "--max-upload",
        str(args.max_upload),
        "--chains",
        args.chains,
        "--chain-threads",
        str(args.chain_threads),
        "--unused-session-lifetime",
        str(args.unused_session_lifetime),
        *[flag for origin in origins for flag in ("--allow-websocket-origin", origin)],
        *[flag for folder in args.data_folder for flag in ("--data-folder", str(folder))],
        *(["--allow-downloads"] if args.allow_downloads else []),
        *(["--scheduler", args.scheduler] if args.scheduler else []),
        *(["--check-unused-sessions", str(args.check_unused_sessions)] if args.check_unused_sessions else []),
    ]
    return argv


SESSIONS_END = "(end of the sessions)"  # the last line SIGUSR1 prints (a reader knows it has all)


def print_sessions(*_):
    """SIGUSR1's second half: every session's chains as the server holds them (session.fits.describe_sessions)."""
    from lpviz.dashboard.session.fits import describe_sessions

    print(f"sessions (kill -USR1):\n{describe_sessions()}\n{SESSIONS_END}", file=sys.stderr, flush=True)


def main(argv=None):
    serve(parse_args(argv))


def serve(args):
    """Serve the dashboard with the checked options ``args`` (:func:`check_args`); returns when it stops."""
    if hasattr(signal, "SIGUSR1"):  # every thread's stack and every session's chains on request (not on Windows)
        signal.signal(signal.SIGUSR1, print_sessions)  # (in the main thread, once its loop wakes)
        faulthandler.register(signal.SIGUSR1, all_threads=True, chain=True)  # (at once, whatever the loop does)
    if not args.scheduler and (args.chains == "cluster" or args.procs > 1):
        # several processes share one cluster for their sweeps (and chains), by its address
        args.scheduler = start_local_cluster(args)
    if args.procs > 1:
        from lpviz.budget import memory_limit
        from lpviz.dashboard.serving.balancer import serve as serve_behind_front

        where = "this machine only" if args.address in LOCAL else "THE NETWORK (no authentication)"
        print(f"lpviz dashboard: http://127.0.0.1:{args.port}/app  (listening on {args.address}: {where})", flush=True)
        limit = memory_limit()
        serve_behind_front(args.procs, backend_argv(args), args.port, args.address, args.max_upload, limit, args.show)
        return
    if args.sessions is not None:
        os.environ["LPVIZ_APP_SESSIONS"] = str(args.sessions)
    if args.data_folder:
        os.environ["LPVIZ_APP_DATA_FOLDERS"] = os.pathsep.join(str(p) for p in args.data_folder)
    if args.allow_downloads:
        os.environ["LPVIZ_ALLOW_DOWNLOADS"] = "1"
    if args.scheduler:
        os.environ["LPVIZ_SCHEDULER"] = args.scheduler
    os.environ[CHAINS_ENV] = args.chains
    os.environ[MAX_UPLOAD_ENV] = str(args.max_upload)  # the pages refuse a larger file before sending it
    os.environ[CHAIN_THREADS_ENV] = str(args.chain_threads)
    # Bokeh checks every page's document before sending the page: 0.02 s of a page open's 0.3 s of the
    # server, paid 30 times when a class opens together (issue 56), and all it found were the empty columns
    # of the tabs not shown yet (W-1002, four lines of log a page; by design: serving/onscreen.py).
    # BOKEH_VALIDATE_DOC=true where the server starts checks them again.
    os.environ.setdefault("BOKEH_VALIDATE_DOC", "false")
    if args.chains == "cluster":
        from lpviz.dashboard.session.remote import connect
        from lpviz.distributed import cluster_workers

        try:
            cluster = connect(args.scheduler)  # now, so an unreachable scheduler stops the server at once
        except OSError as exc:
            sys.exit(f"lpviz: {exc}")
        workers = cluster_workers(cluster.client)
        print(f"lpviz: the sessions' chains run on the Dask cluster at {args.scheduler} ({len(workers)} workers now)")
    check = args.check_unused_sessions or min(17_000, args.unused_session_lifetime)
    warm_up()
    from panel.command import main as panel

    origins = [f"{host}:{args.port}" for host in ("127.0.0.1", "localhost")] + args.allow_websocket_origin
    where = "this machine only" if args.address in LOCAL else "THE NETWORK (no authentication)"
    front = os.environ.pop(FRONT_ENV, None)
    if front:  # one of --procs N processes: the front says where the dashboard is
        print(f"lpviz: server process {os.getpid()} on 127.0.0.1:{args.port}, behind the port {front}", flush=True)
    else:
        print(f"lpviz dashboard: http://127.0.0.1:{args.port}/app  (listening on {args.address}: {where})", flush=True)
    # Panel's own command (its resources served locally, like `panel serve`), with these flags
    sys.argv = [
        "panel",
        "serve",
        str(Path(__file__).with_name("app.py")),
        "--port",
        str(args.port),
        "--address",
        args.address,
        "--websocket-max-message-size",
        str(args.max_upload),
        "--unused-session-lifetime",
        str(args.unused_session_lifetime),
        "--check-unused-sessions",
        str(check),
        *[flag for origin in origins for flag in ("--allow-websocket-origin", origin)],
        *(["--show"] if args.show else []),
    ]
    panel()


# The collector's youngest generation collected every 20,000 net allocations (Python's default: 700). A
# page open leaves ~27,000 objects the collector tracks, which mostly live as long as its session: at 700
# it ran 45 young, 4 middle and 0.4 full collections a page open (a full one walks every open session's
# objects), at 20,000 1.4 young and 0.2 middle ones; the collector's share of a page open 0.085 -> 0.003 s
# in the same run (bench_page_open, issue 41). Garbage cycles are freed later: a young one after at most
# 20,000 allocations more, an old one at the next full collection, which comes after more allocations
# than before (a server's RSS with 30 pages open: 556-577 MB against main's 507-723 in the same runs).
GC_THRESHOLDS = (20_000, 10, 10)


def warm_up():
    """Import the dashboard's modules before the first page, then freeze what the process holds so far.

    A page open allocates tens of thousands of objects, so Python's cyclic garbage collector runs during
    it; its full collections walked every object of the process, and most of them are the imports'
    (Panel, Bokeh, HoloViews, NumPy, Numba: modules, classes, functions) that live as long as the
    process. ``gc.freeze`` moves them out of the collector's sight for good: a collection walks the
    sessions' objects only (issue 41). Nothing that belongs to a session is frozen: no page exists yet.
    Then the collector runs less often (:data:`GC_THRESHOLDS`).
    """
    import gc

    import lpviz.dashboard.app  # noqa: F401  (the page's modules and everything they import)

    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


if __name__ == "__main__":
    main()
