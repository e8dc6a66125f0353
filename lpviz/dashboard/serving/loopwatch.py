"""The event loop's lag as the server saw it, for load tests (``benchmarks/bench_class.py``).

Apart from :mod:`lpviz.dashboard.serve` (which starts the server and imports the page before the first
session): the page (:mod:`lpviz.dashboard.app`) starts the watch, and would otherwise import its own launcher.
"""

import collections
import json
import os
import re
import threading
import time

LOOP_LOG_ENV = "LPVIZ_LOOP_LOG"
LOOP_PERIOD_SECONDS = 0.1
_watching = threading.Lock()
_watched: list[str] = []


def watch_event_loop(server_context=None, period=LOOP_PERIOD_SECONDS, progress=dict):
    """Record the event loop's lag: how late a callback due every ``period`` seconds runs.

    Once per process, from the first session on (``lpviz/dashboard/app.py`` calls this), and only when
    ``$LPVIZ_LOOP_LOG`` names a file: each tick appends ``{"t": monotonic seconds, "lag_ms": ...}``;
    every second also the sessions the server holds, each session's progress (``progress()``: the
    session layer's :func:`~lpviz.dashboard.session.fits.chain_progress`, handed down so that
    serving imports no session), its Python threads by name (digits dropped) and the loop
    thread's CPU seconds, so a load test reads what the server itself saw. Returns whether it runs.
    """
    path = os.environ.get(LOOP_LOG_ENV)
    if not path:
        return False
    with _watching:
        if _watched:
            return True
        _watched.append(path)
    from tornado.ioloop import IOLoop

    loop = IOLoop.current()
    handle = open(path, "a", buffering=1)  # noqa: SIM115  (open for the process's life)
    last_summary = [0.0]

    def summary(now):
        names = collections.Counter(re.sub(r"[_-]?\d+$", "", thread.name) for thread in threading.enumerate())
        sessions = len(server_context.sessions) if server_context is not None else None
        # the loop thread's own CPU seconds (this runs on it): how busy the loop is, apart from the chains
        return {
            "t": now,
            "pid": os.getpid(),
            "sessions": sessions,
            "threads": dict(names),
            "iterations": progress(),
            "loop_cpu": time.thread_time(),
        }

    def tick(due):
        now = time.monotonic()
        handle.write(json.dumps({"t": now, "lag_ms": round((now - due) * 1000, 2)}) + "\n")
        if now - last_summary[0] >= 1.0:
            last_summary[0] = now
            handle.write(json.dumps(summary(now)) + "\n")
        loop.call_at(loop.time() + period, tick, now + period)

    loop.call_at(loop.time() + period, tick, time.monotonic() + period)
    return True
