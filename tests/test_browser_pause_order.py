"""Issue 37: Pause answers first, on the served dashboard. The message that brings a chain's "paused"
to its progress line (a few words) carries no heatmap: before, the drain that settled the pause also
redrew every view that follows the results (the rate heatmaps among them, whole images: hundreds of
milliseconds of a loaded server) and sent them in the same message, so the page read "paused" only
after all of it. The heatmaps come in later messages, and every one of them then shows the paused
state exactly (its title's sample is its progress line's iteration). Messages are told apart by
wrapping the page's own Bokeh documents' patch application (one call per message from the server);
no time is asserted (bench_page_lag measures the click)."""

import pytest

from benchmarks.bench_page_lag import LINES  # the benchmarks' reading of the progress lines, shared
from tests.browser_harness import N_METHODS

pytestmark = pytest.mark.browser

ITERATIONS, BURN_IN = 100_000, 90_000  # the pause comes in the burn-in: every snapshot is a new state

# Every progress line change ("status", message, word, iteration), heatmap title change ("title",
# message, label, sample) and heatmap image change ("image", message), numbered by the message of the
# server the page applied it from.
RECORD = """() => {
  const events = window.__pause_events = [];
  let message = 0;
  for (const doc of window.Bokeh.documents) {
    const apply = doc.apply_json_patch.bind(doc);
    doc.apply_json_patch = (...args) => { message += 1; return apply(...args); };
    doc.on_change(event => {
      const model = event.model;
      if (!model) return;
      if (event.attr === "text" && typeof model.text === "string") {
        const plain = model.text.replace(/<[^>]*>/g, "").replace(/&lt;[^&]*&gt;/g, "");
        const line = plain.match(/- (\\w+), iteration ([\\d,]+)/);
        if (line) events.push(["status", message, line[1], Number(line[2].replace(/,/g, ""))]);
        const title = plain.match(/^(.*)\\nburn-in, sample (\\d+)/);
        if (title) events.push(["title", message, title[1], Number(title[2])]);
        return;
      }
      const data = model.data instanceof Map ? Object.fromEntries(model.data) : model.data;
      if (data && typeof data === "object" && data.image !== undefined) events.push(["image", message]);
    });
  }
}"""

# {label: [progress line iteration, heatmap title sample]} of every method as the page holds them now.
SHOWN = """() => {
  const shown = {};
  for (const doc of window.Bokeh.documents) for (const m of doc.all_models) {
    if (typeof m.text !== "string") continue;
    const plain = m.text.replace(/<[^>]*>/g, "").replace(/&lt;[^&]*&gt;/g, "");
    const line = plain.match(/^\\s*(.*?) - \\w+, iteration ([\\d,]+)/);
    if (line) (shown[line[1].trim()] = shown[line[1].trim()] || [null, null])[0] = Number(line[2].replace(/,/g, ""));
    const title = plain.match(/^(.*)\\nburn-in, sample (\\d+)/);
    if (title) (shown[title[1].trim()] = shown[title[1].trim()] || [null, null])[1] = Number(title[2]);
  }
  return shown;
}"""


def every(status):
    return f"() => {{ const l = ({LINES})(); return l.length === {N_METHODS} && l.every(x => x[0] === '{status}'); }}"


def test_pause_shows_its_status_before_the_heatmaps_then_the_exact_paused_state(page):
    page.page.get_by_text("Fit settings").first.click()
    page.fill("N iter", ITERATIONS)
    page.fill("Burn in", BURN_IN)  # (after N iter: it must fit in the run)
    page.tab("Fits")
    page.page.get_by_text(f"/ {ITERATIONS:,}").first.wait_for()
    page.click("Start")
    # running, every heatmap drawn from a snapshot in the burn-in
    page.wait_until(f"() => ({LINES})().every(x => x[0] === 'running' && x[1] >= 30)")
    page.wait_until(f"() => Object.values(({SHOWN})()).filter(x => x[1] !== null).length === {N_METHODS}")
    page.evaluate(RECORD)
    page.click("Pause")
    page.wait_until(every("paused"))
    # then the heatmaps: each shows its chain's paused state (the sample its progress line reads)
    page.wait_until(
        f"() => {{ const s = Object.values(({SHOWN})()); "
        f"return s.length === {N_METHODS} && s.every(x => x[0] !== null && x[0] === x[1]); }}"
    )
    events = page.evaluate("() => window.__pause_events")
    paused = [message for kind, message, *rest in events if kind == "status" and rest[0] == "paused"]
    images = [message for kind, message, *_ in events if kind == "image"]
    assert len(paused) >= N_METHODS, events
    # no message that brings a "paused" line brings a heatmap with it
    assert not set(paused) & set(images), events
    # the paused state's heatmaps come after every line reads paused
    titles = [message for kind, message, *_ in events if kind == "title"]
    assert titles and max(titles) > max(paused), events
    shown = page.evaluate(SHOWN)
    assert len(shown) == N_METHODS and all(line == title for line, title in shown.values()), shown
    page.click("Stop")
    page.wait_until(every("stopped"))
    assert page.errors == []
