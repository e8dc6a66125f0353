"""``python -m lpviz.dashboard.serve --procs 2`` in Debian's chromium (issue 41): pages served through the front.

The process-balancing tests (``tests/test_serve_procs.py``) open pages as bokehjs does, over the
websocket protocol; here real browser pages go through the front (``lpviz/dashboard/serving/balancer.py``): its HTML,
its static files, its websockets. Asserted: two pages opened get their documents and draw the Data &
noise tab (its three heatmaps, as the single-process browser tests wait for), their sessions land one
on each server process, and a click on a page reaches its own process (its Fits tab opens there).
"""

import time
import urllib.request

import pytest

from tests.browser_harness import Page
from tests.test_serve_procs import SMALL_CLUSTER, bench, procs_status, sessions_by_pid  # noqa: F401  (the fixture)

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def front(bench):  # noqa: F811  (the fixture imported above)
    server = bench.Server(extra_args=["--procs", "2"], env=SMALL_CLUSTER, session_lifetime_ms=1000)
    try:
        # Each process's first page asked straight from it, past the front (whose counts stay the
        # pages'), as the single-process browser tests' server is asked for one before any browser
        # comes: the first page of a process pays its imports and caches, not the pages timed here.
        for proc in procs_status(server)["procs"]:
            with urllib.request.urlopen(f"http://127.0.0.1:{proc['port']}/app", timeout=300) as response:
                assert response.status == 200
        yield server
    finally:
        server.close()


def sessions(server, total, timeout=120):
    """Each process's sessions from the front's account, once they add up to ``total``."""
    deadline = time.monotonic() + timeout
    while True:
        counts = sorted(proc["sessions"] for proc in procs_status(server)["procs"])
        if sum(counts) == total or time.monotonic() > deadline:
            return counts
        time.sleep(0.5)


def test_two_browser_pages_through_the_front_get_their_documents_on_both_processes(bench, front, browser):  # noqa: F811
    with urllib.request.urlopen(front.url, timeout=120) as response:  # the front serves the page itself
        assert response.status == 200 and b"bokeh" in response.read().lower()
    pages = []
    try:
        for _ in range(2):
            pages.append(Page(browser, front.url))  # waits for the documents and the three heatmaps
        assert sessions(front, 2) == [1, 1]  # one page on each process
        # each process's own log says so too: its page besides the page asked straight from it at
        # the start and the front's own (above), kept until they connect (lpviz.dashboard.app.keep_until_connected)
        by_pid = sessions_by_pid(bench, front, 2 + 2 + 1)
        assert sorted(by_pid.values()) == [2, 3], by_pid
        for page in pages:
            page.tab("Fits")  # a click reaches the page's own process: the tab is built there
            page.page.get_by_role("button", name="Start").first.wait_for()
            assert page.errors == [], page.errors
    finally:
        for page in pages:
            page.close()
    assert sessions(front, 0) == [0, 0]  # closed pages stop counting
