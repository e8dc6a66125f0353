"""``python -m dashboard.serve --procs N``: several server processes behind one port (:mod:`serving.balancer`).

Real pages on loopback: each opened as bokehjs opens it (``GET /app``, the websocket, the
document; ``benchmarks/bench_class.py``'s :class:`Student`). Asserted: 8 pages opened at once on
2 processes land 4 and 4 (each process's own log says so, not only the front), every page gets its
document, a process that dies gets no new session while the other serves them, each process has
its share of the memory limit, and the processes stop with the front however it stops. No timing
is asserted (``bench_class.py --opens`` prints them).
"""

import asyncio
import importlib.util
import json
import math
import os
import signal
import sys
import time
import urllib.request
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_class.py"
OPEN_SECONDS = 600  # a loaded 2-core machine builds 8 pages in minutes; nothing here is timed
GONE_SECONDS = 60
SMALL_CLUSTER = {"LPVIZ_SWEEP_WORKERS": "1"}  # the shared sweep cluster, as small as it goes


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_class", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_class"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("bench_class", None)


def procs_status(server, timeout=300):
    """The front's account of its processes (``/lpviz-procs``), once it answers."""
    deadline = time.monotonic() + timeout
    while True:
        if server.process.poll() is not None:
            raise RuntimeError(f"the server exited: {server.log_text()}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/lpviz-procs", timeout=30) as response:
                return json.loads(response.read())
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def with_pages(bench, server, n, check):
    """Open ``n`` pages at once, run ``check(students)`` while they are open (in a thread: the
    pages' connections stay served), close them."""

    async def run():
        students = await asyncio.wait_for(bench.open_pages(server.url, n), OPEN_SECONDS)
        try:
            await asyncio.to_thread(check, students)
        finally:
            await bench.close_pages(students)

    asyncio.run(run())


def sessions_by_pid(bench, server, total, timeout=60):
    """Each process's sessions as it logs them, once they add up to ``total``."""
    deadline = time.monotonic() + timeout
    while True:
        by_pid = server.sessions_by_pid()
        if sum(by_pid.values()) == total or time.monotonic() > deadline:
            return by_pid
        time.sleep(0.5)


def assert_documents(students):
    for student in students:
        assert not student.progress.error, f"page {student.progress.index}: {student.progress.error}"
        assert not math.isnan(student.progress.opened), f"page {student.progress.index} got no document"
        names = {model["name"] for model in student.models.values()}
        assert any(name.endswith("Button") for name in names), f"page {student.progress.index}: {sorted(names)[:20]}"


def descendants(pid):
    import psutil

    return psutil.Process(pid).children(recursive=True)


def wait_gone(processes, timeout=GONE_SECONDS):
    import psutil

    _, alive = psutil.wait_procs(processes, timeout=timeout)
    return [(process.pid, process.cmdline()[:4]) for process in alive if process.is_running()]


@pytest.fixture(scope="module")
def two(bench):
    server = bench.Server(extra_args=["--procs", "2"], env=SMALL_CLUSTER, session_lifetime_ms=1000)
    try:
        procs_status(server)
        yield server
    finally:
        server.close()


def test_eight_pages_at_once_land_four_and_four_and_each_gets_its_document(bench, two):
    def check(students):
        assert_documents(students)
        backends = {proc["pid"] for proc in procs_status(two)["procs"]}
        by_pid = sessions_by_pid(bench, two, 8)
        assert set(by_pid) == backends, (by_pid, backends)  # the sessions live in the two server processes
        assert sorted(by_pid.values()) == [4, 4], by_pid
        assert sorted(proc["sessions"] for proc in procs_status(two)["procs"]) == [4, 4]

    with_pages(bench, two, 8, check)
    deadline = time.monotonic() + 60
    while any(proc["sessions"] for proc in procs_status(two)["procs"]) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert [proc["sessions"] for proc in procs_status(two)["procs"]] == [0, 0]  # closed pages stop counting


@pytest.mark.slow
def test_twelve_pages_at_once_each_get_their_document(bench, two):
    with_pages(bench, two, 12, assert_documents)


def test_a_server_process_that_dies_gets_no_new_session(bench, two):
    dead, other = procs_status(two)["procs"]
    os.kill(dead["pid"], signal.SIGKILL)
    deadline = time.monotonic() + 30
    while procs_status(two)["procs"][0]["alive"] and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not procs_status(two)["procs"][0]["alive"], "the front did not notice its process died"
    assert "exited with code" in two.log_text()  # said on the server's output

    def check(students):
        assert_documents(students)
        after = procs_status(two)["procs"]
        assert after[1]["opened"] == other["opened"] + 2 and after[0]["opened"] == dead["opened"], after
        assert after[1]["sessions"] == 2

    with_pages(bench, two, 2, check)


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL], ids=["stopped", "killed"])
def test_the_server_processes_stop_with_the_front(bench, how):
    limit = 4 * 2**30
    server = bench.Server(extra_args=["--procs", "2"], env={**SMALL_CLUSTER, "LPVIZ_MEMORY_LIMIT": str(limit)})
    try:
        backends = procs_status(server)["procs"]
        children = descendants(server.pid)
        assert {proc["pid"] for proc in backends} <= {child.pid for child in children}
        addresses = set()
        for proc in backends:  # each process its share of the memory limit, and the one shared cluster
            environ = Path(f"/proc/{proc['pid']}/environ").read_bytes().split(b"\0")
            assert f"LPVIZ_MEMORY_LIMIT={limit // 2}".encode() in environ
            argv = Path(f"/proc/{proc['pid']}/cmdline").read_bytes().decode().split("\0")
            addresses.add(argv[argv.index("--scheduler") + 1])
        (address,) = addresses
        assert address.startswith("tcp://127.0.0.1:") and f"local Dask cluster at {address}" in server.log_text()
        server.process.send_signal(how)  # the front alone, not its process group
        assert wait_gone(children) == []
    finally:
        server.close()


def test_procs_flags(monkeypatch):
    from lpviz.dashboard.serve import backend_argv, parse_args

    monkeypatch.delenv("LPVIZ_PROCS", raising=False)
    assert parse_args([]).procs == 1  # the front is opt-in, whatever the machine's cores
    with pytest.raises(SystemExit):
        parse_args(["--procs", "0"])
    args = parse_args(["--procs", "3", "--sessions", "8", "--port", "7000"])
    argv = backend_argv(args)
    assert argv[argv.index("--sessions") + 1] == "3"  # 8 sessions over 3 processes: at most 3 each
    assert "127.0.0.1:7000" in argv and "--scheduler" not in argv  # the public origin; no cluster yet
