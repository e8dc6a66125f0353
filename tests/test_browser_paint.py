"""Issue 37: a served page that streams fits is laid out once, and paints one plot per task.

At 4x CPU throttling the page's long tasks, and the clicks that waited for them, were of three kinds
(dashboard/serving/paint.py says how they were found): every plot that asked for a paint within one frame painted in
that frame's one task (0.6-0.8 s after a Pause); a trace plot whose tick labels got wider laid the
whole page out again (0.5-0.8 s); and a pane that changed height (the scoreboard at each Pause, the
claim's verdict at the end, the header's spinner at each Pause and Resume) did too (0.4-0.6 s). This
test runs fits with a Pause and a Resume to their end and counts, in the page, every task that painted
more than one plot and every time a layout root was laid out again. Each plot's paint also took
0.1-0.15 s, most of it recalculating the page's styles: every renderer wrote its position into its
``<style>`` again, the same text; the test counts such writes. A message of the server applied
before the page drew the one before it (a "pausing" and the trace rows right behind it) kept that
change off the screen for the next one's long task: the test counts them. No time is asserted
(bench_page_lag.py measures the clicks)."""

import pytest

from benchmarks.bench_page_lag import LINES  # the benchmarks' reading of the progress lines, shared
from tests.browser_harness import N_METHODS

pytestmark = pytest.mark.browser

ITERATIONS = 6_000

# window.__paint: the tasks that painted more than one plot (their plots' titles), and every layout of
# a layout root (BokehJS's whole-page layout) with the view's model. A task's end is found by a timer:
# set at a task's first paint, it can run only after that task.
RECORD = """() => {
  const record = window.__paint = {
    shared: [], roots: [], resized: [], paints: 0, rewritten: 0, patches: 0, unframed: 0,
  };
  const {PlotView} = Bokeh.require("models/plots/plot_canvas");
  const {LayoutDOMView} = Bokeh.require("models/layouts/layout_dom");
  const title = (view) => String(view.model.title && view.model.title.text || view.model.id);
  let painted = null;  // the plots painted in this task
  const paint = PlotView.prototype.paint;
  PlotView.prototype.paint = function (...args) {
    if (!this.is_paused && !this.model.hold_render && this.is_displayed) {
      record.paints += 1;
      if (painted === null) {
        painted = new Set();
        setTimeout(() => { if (painted.size > 1) record.shared.push([...painted]); painted = null; }, 0);
      }
      painted.add(title(this));
    }
    return paint.apply(this, args);
  };
  // what changed size (the views whose boxes did: what a root's layout followed), for the report
  const sized = new Map();
  const observer = new ResizeObserver((entries) => {
    for (const entry of entries) {
      const view = entry.target.__lpviz_view;
      const size = [Math.round(entry.contentRect.width), Math.round(entry.contentRect.height)];
      const before = sized.get(entry.target);
      sized.set(entry.target, size);
      const changed = before !== undefined && (before[0] !== size[0] || before[1] !== size[1]);
      if (changed && view instanceof LayoutDOMView && !(view instanceof PlotView))
        record.resized.push(`${view.model.type} ${view.model.name || ""}: ${before} -> ${size}`);
    }
  });
  for (const view of Bokeh.index.all_views())
    if (view.el instanceof Element) { view.el.__lpviz_view = view; observer.observe(view.el); }
  // a <style> written the text it already has: the page's styles go stale for nothing, and the next
  // CSS read recalculates them (BokehJS wrote every renderer's position so at every paint)
  const text = Object.getOwnPropertyDescriptor(Node.prototype, "textContent");
  Object.defineProperty(HTMLStyleElement.prototype, "textContent", {
    configurable: true,
    get() { return text.get.call(this); },
    set(value) {
      if (text.get.call(this) === value) record.rewritten += 1;
      text.set.call(this, value);
    },
  });
  // the server's messages applied, and those applied before the page drew a frame after the one before
  let frames = 0, framed_at = -1;
  const count_frame = () => { frames += 1; requestAnimationFrame(count_frame); };
  requestAnimationFrame(count_frame);
  for (const doc of Bokeh.documents) {
    const apply = doc.apply_json_patch.bind(doc);
    doc.apply_json_patch = (...args) => {
      record.patches += 1;
      if (frames === framed_at) record.unframed += 1;
      framed_at = frames;
      return apply(...args);
    };
  }
  const compute_layout = LayoutDOMView.prototype.compute_layout;
  LayoutDOMView.prototype.compute_layout = function (...args) {
    if (!(this.parent instanceof LayoutDOMView)) record.roots.push(this.model.type + " " + (this.model.name || ""));
    return compute_layout.apply(this, args);
  };
}"""


def every(status):
    return f"() => {{ const l = ({LINES})(); return l.length === {N_METHODS} && l.every(x => x[0] === '{status}'); }}"


def test_a_run_paints_one_plot_per_task_and_never_lays_the_page_out_again(page):
    page.long_runs(ITERATIONS)
    page.evaluate(RECORD)
    page.click("Start")
    page.wait_until(f"() => ({LINES})().every(x => x[0] === 'running' && x[1] >= 500)")
    page.click("Pause")
    page.wait_until(every("paused"))
    page.page.wait_for_timeout(3000)  # the views redraw after the statuses
    page.click("Resume")
    page.wait_until(every("done"))
    page.page.wait_for_timeout(3000)  # the end's scores, verdict and heatmaps drawn
    record = page.evaluate("() => window.__paint")
    assert record["paints"] >= 2 * N_METHODS  # the plots did paint (traces and heatmaps, several times)
    assert record["shared"] == [], "tasks that painted several plots"
    assert record["roots"] == [], f"layout roots laid out again while the fits ran, after {record['resized']}"
    assert record["rewritten"] == 0, "style sheets written again with the text they had"
    assert record["patches"] > 20  # the server's messages were counted
    assert record["unframed"] == 0, "messages applied before the page drew the one before"
    assert page.errors == []


def test_a_page_that_draws_no_frames_still_applies_every_message(page):
    """The page applies a message that comes before it has drawn the last one after that frame; a
    page the browser does not draw (no animation frame for a second) applies everything waiting at
    once, so messages never pile up behind frames that do not come. Here no frame ever comes (the
    page's ``requestAnimationFrame`` never calls back): the fits' every message still arrives (the
    progress lines read "done" at their goals), several in one task. With one message a second
    instead, the page fell behind its server for as long as the fits ran (and caught up after)."""
    page.long_runs(ITERATIONS)
    page.evaluate(NO_FRAMES)
    page.click("Start")
    # polled on a timer: the page's animation frames are the ones stopped
    page.page.wait_for_function(every("done"), polling=250, timeout=120_000)
    assert page.evaluate(f"() => ({LINES})().every(x => x[1] === x[2])")  # every line at its goal
    # what waited was applied together, not one message a second (which fell ever further behind)
    assert page.evaluate("() => window.__most_in_a_task") > 1
    assert page.errors == []


# No animation frame ever comes; window.__most_in_a_task: the most server messages one task applied.
NO_FRAMES = """() => {
  window.requestAnimationFrame = () => 0;
  window.__most_in_a_task = 0;
  let in_task = 0;
  for (const doc of Bokeh.documents) {
    const apply = doc.apply_json_patch.bind(doc);
    doc.apply_json_patch = (...args) => {
      if (in_task === 0) setTimeout(() => { in_task = 0; }, 0);
      in_task += 1;
      window.__most_in_a_task = Math.max(window.__most_in_a_task, in_task);
      return apply(...args);
    };
  }
}"""
