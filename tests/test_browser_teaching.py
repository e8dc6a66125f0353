"""Teaching mode in a real browser: turn it on, click Next through every step, the tabs follow."""

import re

import pytest
from playwright.sync_api import expect

from lpviz.dashboard.session.presets import PRESETS
from lpviz.dashboard.views.teaching import STEPS
from tests.browser_harness import N_METHODS, TIMEOUT_MS
from tests.test_browser_sweep import COUNT_SWEEP_POINTS

pytestmark = pytest.mark.browser


def tab_names(page):
    """The tab headers as the browser shows them (Playwright's locators reach into the shadow roots)."""
    return [name.strip() for name in page.page.locator(".bk-tab").all_inner_texts()]


def active_tab(page):
    active = [name.strip() for name in page.page.locator(".bk-tab.bk-active").all_inner_texts()]
    assert len(active) == 1, active
    return active[0]


def wait_for_tab(page, name):
    expect(page.page.locator(".bk-tab.bk-active")).to_have_text(name)


# The trace lines of the second chain of each method (lpviz.dashboard.views.live_traces names them "<method>: chain 1").
SECOND_CHAIN_LINES = """() => {
  let n = 0;
  for (const doc of window.Bokeh.documents) for (const m of doc.all_models)
    if (m.type === "GlyphRenderer" && typeof m.name === "string" && m.name.endsWith(": chain 1")) n++;
  return n; }"""


def step_title(page, index):
    return page.page.get_by_text(f"Step {index + 1} of {len(STEPS)}: {STEPS[index].title}", exact=False)


# Per figure: its title and the histogram counts it draws (its glyphs' "top" columns summed).
DRAWN = """
() => {
  const figures = [];
  for (const doc of window.Bokeh.documents)
    for (const model of doc.all_models) {
      if (model.type !== "Figure" && model.constructor.name !== "Figure") continue;
      let tops = 0;
      for (const r of model.renderers || []) {
        const source = r.data_source;
        const data = source && (source.data instanceof Map ? Object.fromEntries(source.data) : source.data);
        if (!data) continue;
        if (data.top !== undefined) tops += Array.from(data.top).reduce((a, b) => a + b, 0);
      }
      figures.push({title: model.title ? model.title.text : "", tops});
    }
  return figures;
}
"""


def test_teaching_mode_walks_the_tabs_step_by_step(page, artifacts_dir):
    tabs = tab_names(page)
    assert "Fits" in tabs and active_tab(page) == tabs[0]
    page.tab("Privacy")  # somewhere else first: turning teaching mode on must bring us to step 1's tab
    wait_for_tab(page, "Privacy")
    expect(step_title(page, 0).first).to_be_hidden()  # the steps are hidden until teaching mode is on
    page.page.get_by_role("button", name="Teaching mode").click()
    step_title(page, 0).first.wait_for()
    previous = None
    for index, step in enumerate(STEPS):
        if index:
            page.click("Next")
        step_title(page, index).first.wait_for()
        if step.tab in tabs:
            wait_for_tab(page, step.tab)
            assert active_tab(page) == step.tab
        else:  # a tab this dashboard lacks (the epsilon sweep of another branch): said so, tab unchanged
            page.page.get_by_text(f"no {step.tab} tab yet").first.wait_for()
            assert active_tab(page) == previous
        if step.preset:  # the chains step loads its preset, asking first while the scoreboard step's fits run
            said = page.page.get_by_text(re.compile("confirm the switch in the sidebar|has been loaded for you"))
            said.first.wait_for()
            if "confirm the switch" in said.first.inner_text():
                page.click("Discard them and apply")
            page.page.get_by_text(f"/ {PRESETS[step.preset].settings['n_iter']:,}").first.wait_for()
            # (no wait for "running": on a quiet machine its 1,500 iterations end before the page is read)
            # the page draws the second chain of every method, and once the fits end the scoreboard's
            # R-hat is across the two chains and the private fit is flagged, its odd chain named
            # (twice: on the log-joint plot of every method, and on each method's own plot after burn-in)
            page.wait_until(f"() => ({SECOND_CHAIN_LINES})() === {2 * N_METHODS}")
            expect(page.page.get_by_text("done, iteration 1,500 / 1,500")).to_have_count(N_METHODS, timeout=TIMEOUT_MS)
            page.page.get_by_text("across 2 chains").first.wait_for()
            page.page.get_by_text(re.compile(r"chain 1 sits in another mode")).first.wait_for()
        elif step.starts_fits:  # the scoreboard step starts the chains itself
            page.page.get_by_text("started for you").first.wait_for()
            page.page.get_by_text("running, iteration").first.wait_for()
        if step.tab == "Bessel":  # no Bessel chain runs: the Bessel law on the release, not an empty plot
            page.wait_until(f"() => ({DRAWN})().some(f => f.title === 'Bessel draws on this release' && f.tops > 0)")
            page.page.get_by_text("the Bessel law on this release").first.wait_for()
            page.shot(artifacts_dir, "teaching_mode")
        if step.starts_sweep:  # the sweep step starts the default sweep: its first points arrive in the plot
            page.page.get_by_text("sweep has been started for you").first.wait_for()
            expect(page.page.get_by_text(re.compile(r"[1-9]\d* of 19 fits done")).first).to_be_visible(
                timeout=TIMEOUT_MS * 2  # the server's shared cluster starts, then a fit of 10,000 iterations ends
            )
            page.wait_until(f"() => ({COUNT_SWEEP_POINTS})() > 0")
            page.click("Cancel")  # the rest of the grid: not needed here
            page.page.get_by_text("Sweep cancelled").first.wait_for()
        previous = active_tab(page)
    assert page.page.get_by_role("button", name="Next").is_disabled()
    page.click("Back")
    step_title(page, len(STEPS) - 2).first.wait_for()
    wait_for_tab(page, STEPS[-2].tab)
    # the last step's chains ran to their end (the scoreboard step's were discarded when its preset loaded)
    expect(page.page.get_by_text("done, iteration 1,500 / 1,500")).to_have_count(N_METHODS)
    assert page.errors == []


# Per figure: its title, the names on its axes (Bokeh's label overrides) and how many images it draws.
AXIS_NAMES = """
() => {
  const values = overrides => overrides instanceof Map ? [...overrides.values()] : Object.values(overrides || {});
  const figures = [];
  for (const doc of window.Bokeh.documents)
    for (const model of doc.all_models) {
      if (model.type !== "Figure" && model.constructor.name !== "Figure") continue;
      const images = (model.renderers || []).filter(r => {
        const source = r.data_source;
        const data = source && (source.data instanceof Map ? Object.fromEntries(source.data) : source.data);
        return data && data.image !== undefined;
      }).length;
      figures.push({title: model.title ? model.title.text : "", images,
                    x: values((model.below || [])[0] && model.below[0].major_label_overrides),
                    y: values((model.left || [])[0] && model.left[0].major_label_overrides)});
    }
  return figures;
}
"""


def test_the_enron_network_is_drawn_with_its_addresses_and_the_held_out_cells(page, enron_tarball, artifacts_dir):
    page.choose("enron-network")
    page.page.get_by_text(re.compile(r"enron.*: \d+ x \d+ \(blocks\)", re.IGNORECASE)).first.wait_for()
    page.page.locator("select:has(option:text-is('top actors'))").first.select_option(label="top actors")
    page.page.get_by_text("shaded grey").first.wait_for()
    page.tab("Data & noise")
    # the three heatmaps: each draws the counts and the held-out shade, its axes named by address
    page.wait_until(f"""() => ({AXIS_NAMES})().filter(f => f.images === 2 && f.y.length > 0
                                                      && f.y.every(name => !name.includes("@"))).length === 3""")
    figures = [f for f in page.evaluate(AXIS_NAMES) if f["images"] == 2]
    assert {f["title"] for f in figures} == {
        "True counts (private to the owner)",
        "Noised counts (released)",
        "Noised counts truncated at 0",
    }
    for figure in figures:
        assert 10 <= len(figure["y"]) <= 20 and figure["x"] == figure["y"]  # senders and recipients, thinned
        assert all(re.fullmatch(r"[a-z0-9._'-]+", name) for name in figure["y"]), figure["y"]
    page.shot(artifacts_dir, "network_views")
    assert page.errors == []
