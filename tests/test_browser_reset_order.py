"""Issue 37: Reset answers first, on the served dashboard. Reset's status (a few words on each progress
line) changes first, with iteration 0 in the same change, before the traces and results are cleared
(every trace plot and view redrawn: seconds of a loaded server's time, which used to come first, in the
click's own callback, and keep "idle" from the page that long). The page never shows a line of a half
reset run: before, the iteration went to 0 with the traces and result, and the old status followed
("done, iteration 0 / 300" on every line). Afterwards every line reads idle at iteration 0 and the trace
plots are empty. The order is read from the page's own Bokeh documents (every change the server's
messages make, in the order the page applies them); no time is asserted (bench_stop --page measures it)."""

import pytest

from benchmarks.bench_page_lag import LINES  # the benchmarks' reading of the progress lines, shared
from tests.browser_harness import COUNT_TRACE_POINTS, N_METHODS

pytestmark = pytest.mark.browser

PRESET = "Table 1 (VI paper, reduced)"  # three small VI fits: seconds to their end

# Every change of a progress line ("status", its status word and iteration) and of a trace source
# ("traces", its rows), in the order the page applies the server's messages.
RECORD = """() => {
  const events = window.__reset_events = [];
  for (const doc of window.Bokeh.documents) doc.on_change(event => {
    const model = event.model;
    if (!model) return;
    if (event.attr === "text" && typeof model.text === "string" && model.text.includes(", iteration")) {
      const plain = model.text.replace(/<[^>]*>/g, "").replace(/&lt;[^&]*&gt;/g, "");
      const word = plain.match(/- (\\w+), iteration ([\\d,]+)/);
      if (word) events.push(["status", `${word[1]} ${word[2]}`]);
      return;
    }
    const data = model.data instanceof Map ? Object.fromEntries(model.data) : model.data;
    if (data && typeof data === "object" && data.iteration !== undefined)
      events.push(["traces", data.iteration.length]);
  });
}"""


def every(status):
    return f"() => {{ const l = ({LINES})(); return l.length === {N_METHODS} && l.every(x => x[0] === '{status}'); }}"


def test_reset_shows_its_status_before_the_traces_are_cleared_and_then_nothing_of_the_run(page):
    page.tab("Fits")
    page.page.locator("select:has(option:text-is('(settings of your own)'))").first.select_option(value=PRESET)
    page.wait_until(every("idle"))
    page.click("Run the fits")
    page.wait_until(every("done"))
    page.wait_until(f"() => ({COUNT_TRACE_POINTS})() > 0")
    page.evaluate(RECORD)
    page.page.get_by_role("button", name="Reset", exact=True).click()
    page.wait_until(f"() => ({LINES})().every(x => x[0] === 'idle' && x[1] === 0) && ({COUNT_TRACE_POINTS})() === 0")
    events = page.evaluate("() => window.__reset_events")
    statuses = [index for index, (kind, _) in enumerate(events) if kind == "status"]
    cleared = [index for index, (kind, rows) in enumerate(events) if kind == "traces" and rows == 0]
    assert statuses and cleared, events
    # every progress line has answered (idle, or stopping: none here, the fits had ended) before any trace
    # plot is cleared
    assert len(statuses) >= N_METHODS and statuses[N_METHODS - 1] < cleared[0], events
    # every line Reset shows reads idle (or stopping, while a worker leaves) at iteration 0: none of a
    # half-reset run (the old status beside iteration 0)
    assert {events[index][1] for index in statuses} <= {"idle 0", "stopping 0"}, events
    lines = page.evaluate(LINES)
    assert len(lines) == N_METHODS and all(line[:2] == ["idle", 0] for line in lines), lines
    assert page.evaluate(COUNT_TRACE_POINTS) == 0
    assert page.errors == []
