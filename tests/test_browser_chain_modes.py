"""Issue 57 MEDIUM 8 and LOW 25 on the served dashboard.

MEDIUM 8: "Two chains, two modes" teaches that the private chains sit in different modes, but at the
log-joint plot's default zoom the gap (30-40 between the chains' levels, a within-chain sd of 5) was
invisible on an axis spanning thousands (the climb and every method's level). Now each method's chains
are drawn alone after burn-in, on the trace their health is judged on: the gap between the two private
chains' mean levels must be a visible share of that plot's axis. Before: no such plot.

LOW 25: the trace legends sat inside the frames and covered the lines (the log joint's bottom right,
the MAE's top band). Now every trace legend stands outside its frame.
"""

import pytest

from lpviz.dashboard.session.presets import PRESETS
from tests.browser_harness import TIMEOUT_MS
from tests.test_browser_trust import BOKEH_VIEWS, choose_preset

pytestmark = pytest.mark.browser

NAME = "Two chains, two modes"
BURN_IN = PRESETS[NAME].settings["burn_in"]

# Each trace plot shown (a figure with an "iteration" axis): its title, y range, the mean after burn-in
# of each line's data, and whether its legend's box overlaps its frame's.
TRACES = """
(burnIn) => {
  BOKEH_VIEWS
  const views = bokehViews();
  const overlap = (a, b) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
  return views
    .filter(v => (v.model.type === "Figure" || v.model.constructor.name === "Figure") && v.el.isConnected
      && (v.model.below || []).some(axis => axis.axis_label === "iteration")
      && v.el.getBoundingClientRect().width > 0)
    .map(v => {
      const legends = views.filter(l => (l.model.type === "Legend" || l.model.constructor.name === "Legend")
        && [...(v.model.center || []), ...(v.model.above || []), ...(v.model.below || [])].includes(l.model));
      const frame = v.frame.bbox;
      const means = v.model.renderers.filter(r => r.glyph && r.glyph.type === "Line").map(r => {
        const data = r.data_source.data instanceof Map ? Object.fromEntries(r.data_source.data) : r.data_source.data;
        const xs = data.iteration, ys = data[r.glyph.y.field];
        let sum = 0, n = 0;
        for (let i = 0; i < xs.length; i++) if (xs[i] > burnIn && Number.isFinite(ys[i])) { sum += ys[i]; n += 1; }
        return n ? sum / n : null;
      });
      return {title: v.model.title.text, low: v.model.y_range.start, high: v.model.y_range.end, means,
              legends: legends.length,
              covering: legends.filter(l => l.bbox && overlap(l.bbox, frame)).length};
    });
}
""".replace("BOKEH_VIEWS", BOKEH_VIEWS)


def test_the_two_modes_are_seen_on_each_methods_own_plot_and_no_legend_covers_a_line(page, artifacts_dir):
    choose_preset(page, NAME)
    page.tab("Fits")
    page.page.get_by_text("/ 1,500").first.wait_for(timeout=TIMEOUT_MS)
    page.click("Start")
    page.statuses("done", timeout_ms=4 * TIMEOUT_MS)
    note = page.page.get_by_text("Each method's chains alone, after burn-in").first
    note.wait_for(timeout=TIMEOUT_MS)
    page.wait_until(
        "(burnIn) => (" + TRACES + ")(burnIn).filter(p => p.title.endsWith('after burn-in')).length === 3", BURN_IN
    )
    page.page.wait_for_timeout(1000)  # the last rows streamed
    plots = page.page.evaluate(TRACES, BURN_IN)
    note.scroll_into_view_if_needed()
    page.page.screenshot(path=str(artifacts_dir / "browser-chain-modes.png"))
    chains = {p["title"].split(":")[0]: p for p in plots if p["title"].endswith("after burn-in")}
    assert sorted(chains) == ["naive", "nonprivate", "private"], plots
    private = chains["private"]
    assert "log likelihood of the noised data" in private["title"]
    assert len(private["means"]) == 2 and None not in private["means"], private
    gap = abs(private["means"][0] - private["means"][1])
    span = private["high"] - private["low"]
    # the modes are seen: the chains' levels apart by at least a tenth of the axis
    # (on the log-joint plot the same kind of gap was about 1/200 of it)
    assert gap >= 0.1 * span, (gap, span, private)
    joint = next(p for p in plots if p["title"].startswith("Log joint"))
    assert joint["high"] - joint["low"] > span  # the plot of every method spans far more
    # LOW 25: every trace plot has its legend, and none overlaps its frame
    assert all(p["legends"] == 1 and p["covering"] == 0 for p in plots), plots
    assert page.errors == []
