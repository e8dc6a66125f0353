"""Issue 37: Stop during a run's final score, on the served dashboard. A chain that has run all its
iterations posts "ending", then scores its whole posterior once more (topics, diagnostics: 4-12 s for
Figure 4 on a loaded machine) before "done". Here the served app's final score is made slow
deterministically (dashboard.session.chain.SLOW_FINAL_SCORE_ENV: each of its stop checks waits, unless Stop comes;
the worker says on the server's output when it is there), and Stop is clicked while every chain is in
it: every progress line reads "stopped" (a hang guard waits, no timing is asserted), the page keeps its
last result (trace points and heatmaps as before the click), no "done" comes later, and no error."""

import os
import re
import time

import pytest

from benchmarks.bench_page_lag import LINES  # the benchmarks' reading of the progress lines, shared
from lpviz.dashboard.session.chain import SLOW_FINAL_SCORE_ENV
from lpviz.dashboard.session.presets import PRESETS
from tests.browser_harness import COUNT_TRACE_POINTS, IMAGE_CHECKSUMS, N_METHODS, served

pytestmark = pytest.mark.browser

FIGURE4 = "Figure 4 (reduced size for the browser)"
MARK = "@@final score waits: "  # what the worker prints as its final score's first stop check waits
SLOW_SECONDS = 600  # each check of the final score waits this long unless stopped: it never ends alone here


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    before = os.environ.get(SLOW_FINAL_SCORE_ENV)
    os.environ[SLOW_FINAL_SCORE_ENV] = str(SLOW_SECONDS)  # the server inherits it
    try:
        with served(tmp_path_factory) as running:
            yield running
    finally:
        if before is None:
            os.environ.pop(SLOW_FINAL_SCORE_ENV, None)
        else:
            os.environ[SLOW_FINAL_SCORE_ENV] = before


def blank(checksums):
    """How many heatmaps of the page (IMAGE_CHECKSUMS) are all zeros (nothing drawn)."""
    return sum(1 for checksum in checksums if checksum.endswith(":0:0"))


def waiting_in_final_score(server):
    """The methods whose worker is in its final score (as the server's output says; every mark read,
    also two on one line, as threads' writes may come out)."""
    text = server.log_path.read_text(errors="replace")
    return set(re.findall(re.escape(MARK) + r"(\w+)", text))


def test_stop_during_the_final_score_reads_stopped_and_keeps_the_last_result(page, server):
    page.tab("Fits")
    page.page.locator("select:has(option:text-is('(settings of your own)'))").first.select_option(value=FIGURE4)
    goal = PRESETS[FIGURE4].settings["n_iter"]
    page.wait_until(
        f"() => {{ const l = ({LINES})(); return l.length === {N_METHODS} && "
        f"l.every(x => x[0] === 'idle' && x[2] === {goal}); }}"
    )
    page.click("Run the fits")
    # every chain has run its iterations and waits in its final score (hang guard: a generous deadline)
    deadline = time.monotonic() + 600
    while len(waiting_in_final_score(server)) < N_METHODS:
        assert time.monotonic() < deadline, f"not every chain reached its final score: {waiting_in_final_score(server)}"
        time.sleep(0.5)
    # the page has every iteration, and still reads running (the final score has not come)
    page.wait_until(f"() => ({LINES})().every(x => x[0] === 'running' && x[1] === {goal})")
    page.wait_until(f"() => ({COUNT_TRACE_POINTS})() > 0")
    # the last drain's redraws have reached the page (throttled to its pace: seconds on a loaded machine)
    points, images = page.evaluate(COUNT_TRACE_POINTS), page.evaluate(IMAGE_CHECKSUMS)
    still = time.monotonic() + 300  # a hang guard
    while True:
        time.sleep(2.0)
        now = page.evaluate(COUNT_TRACE_POINTS), page.evaluate(IMAGE_CHECKSUMS)
        if now == (points, images):
            break
        assert time.monotonic() < still, "the page's traces and heatmaps never came to rest"
        points, images = now
    assert images and blank(images) < len(images), "no heatmap drawn on the page to keep"
    page.click("Stop")
    page.wait_until(f"() => ({LINES})().every(x => x[0] === 'stopped' && x[1] === {goal})")
    # the stopped final scores have left: nothing comes after the "stopped" (no "done", no new result)
    time.sleep(2.0)
    assert page.evaluate(LINES) == [["stopped", goal, goal]] * N_METHODS
    # the traces stay: no point lost (the rows a throttled redraw held back come at "stopped": 594 -> 606)
    assert page.evaluate(COUNT_TRACE_POINTS) >= points
    # the heatmaps keep the last result (drawn exactly once stopped: a view the run's throttle had not
    # drawn yet may fill in, none is emptied)
    after = page.evaluate(IMAGE_CHECKSUMS)
    assert len(after) == len(images) and blank(after) <= blank(images) < len(after), (images, after)
    assert "Traceback" not in server.log_tail(200)
    assert page.errors == []
