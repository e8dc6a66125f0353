"""A small class on a served dashboard: real client sessions over Bokeh's websocket protocol.

``python -m lpviz.dashboard.serve`` runs in a subprocess (its event loop logs its lag, sessions
and threads: ``LPVIZ_LOOP_LOG``); the students of ``benchmarks/bench_class.py``
open the page, choose a preset, press Start, switch tabs and close, as a
browser tab does. Asserted: every student's chains progress, none is starved
(fairness = least progress / most, loosely), and closing the sessions joins
their threads and frees their memory (three rounds; threads back to what they
were, resident memory flat from round 2 to round 3). No timing is asserted:
the figures are ``bench_class.py``'s to print.
"""

import asyncio
import importlib.util
import sys
from pathlib import Path

import pytest

from lpviz.dashboard.serving.throttle import VIEW_POOL_THREADS

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_class.py"
RELEASE_SECONDS = 120  # the server discards closed sessions within ~2 s; generous for a loaded machine


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_class", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_class"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("bench_class", None)


@pytest.fixture(scope="module")
def server(bench):
    server = bench.Server(session_lifetime_ms=1000)
    try:
        server.wait_ready()
        yield server
    finally:
        server.close()


def chain_threads(server):
    """The sessions' threads (the process's pool for the views, a fixed two, is no session's)."""
    return sum(
        count
        for name, count in server.python_threads().items()
        if name.startswith("lpviz-") and not name.startswith(VIEW_POOL_THREADS)
    )


def play(bench, server, n, **plan):
    plan = bench.Plan(**{"timeout": 240.0, "tab_seconds": 0.5, **plan})
    progresses, begin, moment = asyncio.run(bench.play_class(server.url, n, plan))
    return progresses, bench.summarize(progresses, begin, moment)


def released(bench, server):
    """Wait until the server holds no session and no chain thread; its (RSS MB, OS threads)."""
    rss, threads = bench.wait_for_release(server, None, timeout=RELEASE_SECONDS)
    assert server.sessions() == 0, "closed sessions were not discarded"
    assert chain_threads(server) == 0, f"chain threads outlived their sessions: {server.python_threads()}"
    return rss, threads


def test_a_class_of_four_all_progress_and_none_is_starved(bench, server):
    progresses, figures = play(bench, server, 4, window=10.0)
    assert figures["failed"] == []
    for progress in progresses:
        assert progress.first_point == progress.first_point, f"student {progress.index} saw no trace point"
        seen = {status for _, _, statuses in progress.samples for status in statuses}
        assert "running" in seen, f"student {progress.index}'s page never said running: {seen}"
    assert len(figures["made"]) == 4 and min(figures["made"]) > 0, figures["made"]
    # loosely (the pages' progress lines lag the chains by the loop's lag; the bar at 12 sessions is 0.3)
    assert figures["fairness"] >= 0.2, figures["made"]
    released(bench, server)


def test_closing_sessions_joins_their_threads_and_frees_their_memory(bench, server):
    figures = []
    for _ in range(3):
        _, round_figures = play(bench, server, 2, window=2.0)
        assert round_figures["failed"] == []
        figures.append(released(bench, server))
    (rss1, threads1), (rss2, threads2), (rss3, threads3) = figures
    assert threads2 <= threads1 and threads3 <= threads1, figures  # no thread left behind by a round
    assert rss3 - rss2 < 50, figures  # MB: the bar from round 2 to round 3
