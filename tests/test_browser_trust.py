"""Trust what the served dashboard shows: titles and axes bound to their data after many preset and
data switches (one at phone width), a preset's claim checked on screen with the health marks beside
the scores, and the class seed.

Read from the page's Bokeh documents (every figure's title, x range and image sizes), in Debian's
chromium driven by Playwright. Screenshots go to docs/screenshots/.
"""

import math
import re
from pathlib import Path
from urllib.parse import urlparse

import pytest

from lpviz.dashboard.session.presets import CLASS_SEED, PRESETS
from lpviz.dashboard.session.settings import preset_values
from lpviz.dashboard.views.fits_view import RATE_MIN_WIDTH
from tests.browser_harness import FIGURES, LABELS, N_METHODS, TIMEOUT_MS, Page

pytestmark = pytest.mark.browser

SCREENSHOTS = Path(__file__).resolve().parents[1] / "docs" / "screenshots"
MAX_DISPLAY = 300
# The matrices the presets draw (rows x columns) and whether the truth drawn is rates or counts.
SHAPES = {
    "Figure 3 (large alpha0)": (90, 15, "rates"),
    "Figure 3 (small alpha0)": (90, 15, "rates"),
    "Figure 1": (20, 20, "rates"),
    "Figure 4 (reduced size for the browser)": (400, 800, "counts"),
    "Central vs local": (400, 800, "counts"),
    "Table 1 (VI paper, reduced)": (300, 100, "rates"),
    "Figure 5": (84, 84, "counts"),
}


PHONE = {"width": 412, "height": 900}
DESKTOP = {"width": 1500, "height": 1000}  # the harness's page
MAIN_MIN_PHONE_PX = 360  # the main column at 412 px (beside the 340 px sidebar it was 72 px)
LOOPBACK = ("localhost", "127.0.0.1", "::1")
# Console warnings the served page may show, each allowed by name with its reason; every other
# warning, and every error, fails the test.
ALLOWED_WARNINGS = {
    "GPU stall due to ReadPixels": "headless chromium's software WebGL reporting its own driver (Bokeh reads "
    "pixels back for hit testing); the browser's message, not the page's",
}
MAIN_WIDTH = "() => document.getElementById('main').getBoundingClientRect().width"
# Every Bokeh view of the page (children, and the renderers' views: a title's), for the scripts below.
BOKEH_VIEWS = """function bokehViews() {
    const views = [];
    const walk = (view) => {
      if (!view || views.includes(view)) return;
      views.push(view);
      for (const child of view.child_views || []) walk(child);
      if (view.renderer_views) for (const renderer of view.renderer_views.values()) walk(renderer);
    };
    for (const root of Object.values(window.Bokeh.index)) walk(root);
    return views;
  }"""
# Every heatmap drawn (a figure with an image) as laid out in the page: its title's lines, where the
# title starts in its plot (the frame's left: the title's view's box), the widest line as the page
# measures it in the title's own font (a canvas's measureText), and the plot's width (its canvas).
HEATMAP_TITLES = """
() => {
  BOKEH_VIEWS
  const views = bokehViews();
  const context = document.createElement("canvas").getContext("2d");
  const titles = [];
  for (const view of views) {
    const model = view.model;
    if (model.type !== "Figure" && model.constructor.name !== "Figure") continue;
    if (!view.el.isConnected || !view.el.checkVisibility()) continue;  // in a hidden tab: not shown
    const images = (model.renderers || []).some(r => {
      const source = r.data_source;
      const data = source && (source.data instanceof Map ? Object.fromEntries(source.data) : source.data);
      return data && data.image !== undefined;
    });
    if (!images || !model.title || !model.title.text) continue;
    const title = model.title;
    const titleView = views.find(v => v.model === title);
    context.font = `${title.text_font_style} ${title.text_font_size} ${title.text_font}`;
    titles.push({
      text: title.text,
      start: titleView && titleView.bbox ? titleView.bbox.x + title.offset : null,
      width: Math.max(...title.text.split("\\n").map(line => context.measureText(line).width)),
      plot: view.bbox ? view.bbox.width : null,
      model_width: model.outer_width,
    });
  }
  return titles;
}
"""
SIDEBAR_SHOWN = "() => document.getElementById('sidebar').classList.contains('show')"
# The rate heatmaps laid out in the page (figures whose colour bar says "rate"): each one's box.
RATE_PLOTS = """
() => {
  BOKEH_VIEWS
  const views = bokehViews();
  return views
    .filter(v => (v.model.type === "Figure" || v.model.constructor.name === "Figure")
      && (v.model.right || []).some(bar => bar.title === "rate") && v.el.isConnected)
    .map(v => { const box = v.el.getBoundingClientRect();
                return {title: v.model.title.text, left: box.left, right: box.right, top: box.top, width: box.width}; })
    .filter(box => box.width > 0);
}
"""
# The live trace plots laid out in the page (figures whose x axis is "iteration"): each one's box, its
# title's start and measured width, and its legend's box, in the plot's own pixels.
TRACE_PLOTS = """
() => {
  BOKEH_VIEWS
  const views = bokehViews();
  const context = document.createElement("canvas").getContext("2d");
  return views
    .filter(v => (v.model.type === "Figure" || v.model.constructor.name === "Figure") && v.el.isConnected
      && (v.model.below || []).some(axis => axis.axis_label === "iteration"))
    .map(v => {
      const box = v.el.getBoundingClientRect();
      const title = v.model.title;
      const titleView = views.find(t => t.model === title);
      const legendView = views.find(l => [...(v.model.center || []), ...(v.model.above || [])].includes(l.model)
        && (l.model.type === "Legend" || l.model.constructor.name === "Legend"));
      context.font = `${title.text_font_style} ${title.text_font_size} ${title.text_font}`;
      return {title: title.text, left: box.left, right: box.right, top: box.top, width: box.width,
              title_start: titleView && titleView.bbox ? titleView.bbox.x + title.offset : null,
              title_width: context.measureText(title.text).width,
              legend: legendView && legendView.bbox
                ? {left: legendView.bbox.left, right: legendView.bbox.right} : null};
    })
    .filter(plot => plot.width > 0);
}
"""
HEATMAP_TITLES, RATE_PLOTS, TRACE_PLOTS = (
    script.replace("BOKEH_VIEWS", BOKEH_VIEWS) for script in (HEATMAP_TITLES, RATE_PLOTS, TRACE_PLOTS)
)
# Whether the page itself scrolls sideways.
PAGE_OVERFLOW = "() => document.scrollingElement.scrollWidth - window.innerWidth"


def outside_requests(page):
    """The URLs the page asked for from anywhere but this machine (data: and blob: URLs never leave it)."""
    urls = {url.split("?")[0] for url in page.requests}
    return sorted(
        url
        for url in urls
        if not url.startswith("data:") and urlparse(url.removeprefix("blob:")).hostname not in LOOPBACK
    )


def console_problems(page):
    """Console errors, and warnings not allowed by name in ALLOWED_WARNINGS."""
    return [
        f"{kind}: {text}"
        for kind, text in page.console
        if kind == "error" or (kind == "warning" and not any(name in text for name in ALLOWED_WARNINGS))
    ]


def choose_preset(page, name):
    """Choose a preset in the sidebar; at phone width, where the sidebar is folded, open it with the
    header's toggle first and fold it again after."""
    folded = not page.evaluate(SIDEBAR_SHOWN)
    if folded:
        toggle_sidebar(page, shown=True)
    page.page.locator("select:has(option:text-is('(settings of your own)'))").first.select_option(value=name)
    if folded:
        toggle_sidebar(page, shown=False)


def toggle_sidebar(page, *, shown):
    page.page.locator("#sidebar-toggle").click()
    state = "" if shown else "!"
    page.wait_until(
        f"() => {state}({SIDEBAR_SHOWN})() && !document.getElementById('sidebar').classList.contains('collapsing')"
    )


def expected_heatmaps(name):
    rows, cols, truth = SHAPES[name]
    steps = [max(1, math.ceil(n / MAX_DISPLAY)) for n in (rows, cols)]
    shown = [math.ceil(n / step) for n, step in zip((rows, cols), steps, strict=True)]
    vi = PRESETS[name].settings["inference"] == "vi"
    titles = [f"truth (true {truth})", *(f"{LABELS[m]}{', VI' if vi else ''}\nnot started" for m in LABELS)]
    return titles, shown[0] * shown[1], cols, steps[1]


def heatmaps_ok(page, name):
    """Wait until the Fits tab's heatmaps are the preset's: one per title (the truth, each method),
    each image the matrix's size and its x axis the matrix's columns. Returns the figures."""
    titles, size, cols, step = expected_heatmaps(name)
    script = """([script, titles, size, cols, step]) => {
      const figures = eval(script)().filter(f => f.images.length > 0);
      if (figures.length !== titles.length) return false;
      const seen = figures.map(f => f.title).sort();
      if (JSON.stringify(seen) !== JSON.stringify([...titles].sort())) return false;
      return figures.every(f => f.images.every(n => n === size) && Math.abs((f.end - f.start) - cols) < step);
    }"""
    try:
        page.wait_until(script, [FIGURES, titles, size, cols, step])
    except Exception:  # say what the page showed instead
        figures = [f for f in page.evaluate(FIGURES) if f["images"]]
        pytest.fail(f"{name}: expected {titles} of {size} cells over {cols} columns; the page shows {figures}")
    return [f for f in page.evaluate(FIGURES) if f["images"]]


def rate_rows(page, count=1 + N_METHODS):
    """Wait until the page has laid out ``count`` rate heatmaps; their titles' first lines by row, top to
    bottom (a row: the heatmaps whose tops are within a pixel)."""
    page.wait_until(f"() => ({RATE_PLOTS})().length === {count}")
    rows = {}
    for plot in sorted(page.evaluate(RATE_PLOTS), key=lambda plot: (plot["top"], plot["left"])):
        top = next((top for top in rows if abs(top - plot["top"]) <= 1), plot["top"])
        rows.setdefault(top, []).append(plot["title"].split("\n")[0])
    return list(rows.values())


def heatmap_titles_fit(page, count=1 + N_METHODS):
    """Wait until the page has laid out ``count`` heatmaps and every title's widest line, from where
    it starts, ends inside its plot (a title past the plot's edge is cut off); fail saying which do not."""
    script = """([script, count]) => {
      const titles = eval(script)();
      return titles.length === count && titles.every(t => t.start !== null && t.plot === t.model_width
        && t.start >= 0 && t.start + t.width <= t.plot);
    }"""
    try:
        page.wait_until(script, [HEATMAP_TITLES, count])
    except Exception:
        titles = page.evaluate(HEATMAP_TITLES)
        cut = [t for t in titles if t["start"] is None or t["start"] + t["width"] > t["plot"]]
        pytest.fail(f"expected {count} heatmaps, each title inside its plot; cut off: {cut}; all: {titles}")
    titles = page.evaluate(HEATMAP_TITLES)
    assert all(t["width"] > 50 for t in titles)  # measured text, not an empty font
    return titles


def test_heatmap_titles_and_axes_follow_ten_preset_and_data_switches_at_desktop_and_phone_width(
    browser, server, artifacts_dir
):
    page = Page(browser, server.url)
    try:
        page.tab("Fits")
        heatmaps_ok(page, "Figure 3 (large alpha0)")
        walk = [
            "Figure 1",
            "Figure 4 (reduced size for the browser)",
            "Table 1 (VI paper, reduced)",
            "Figure 5",
            "Figure 3 (small alpha0)",
            "Central vs local",
            "Figure 1",
            "Table 1 (VI paper, reduced)",
            "Figure 3 (large alpha0)",
            "Figure 5",
            "Figure 4 (reduced size for the browser)",
            "Figure 3 (small alpha0)",
        ]
        for i, name in enumerate(walk):
            if i == len(walk) - 3:  # the last three at phone width: the sidebar folds away, the tabs get the width
                page.page.set_viewport_size(PHONE)
                page.wait_until(f"() => !({SIDEBAR_SHOWN})() && ({MAIN_WIDTH})() >= {MAIN_MIN_PHONE_PX}")
            choose_preset(page, name)
            figures = heatmaps_ok(page, name)
            assert len({f["title"] for f in figures}) == 1 + N_METHODS
            heatmap_titles_fit(page)  # the method's name and its fit's state, at desktop and phone width
            # the settings in force are the preset's (shown in the sidebar's data line)
            rows, cols, _ = SHAPES[name]
            page.page.get_by_text(re.compile(rf"{rows:,} x {cols:,}")).first.wait_for(state="attached")
        values = preset_values("Figure 3 (small alpha0)")
        page.page.get_by_text(f"Class seed {CLASS_SEED}").first.wait_for(state="attached")
        assert values["noise_seed"] == CLASS_SEED
        assert page.evaluate(MAIN_WIDTH) >= MAIN_MIN_PHONE_PX and not page.evaluate(SIDEBAR_SHOWN)
        page.page.screenshot(path=str(SCREENSHOTS / "phone-412px.png"), full_page=False)
        assert page.errors == []
    finally:
        page.close()


def test_a_preset_claim_is_checked_on_screen_with_health_and_baselines(browser, server):
    page = Page(browser, server.url)
    try:
        name = "Table 1 (VI paper, reduced)"
        choose_preset(page, name)
        page.tab("Fits")
        heatmaps_ok(page, name)
        page.page.get_by_text("Checked when the run ends").first.wait_for()
        page.click("Start")
        page.page.locator(".claim-verdict[data-held='held']").wait_for(timeout=TIMEOUT_MS)
        text = page.page.locator(".claim-verdict").inner_text()
        assert PRESETS[name].claim.text in text and "Held" in text
        header = page.page.locator("table.scoreboard th").all_inner_texts()
        assert "health" in header and "MAE vs true rates: best constant" in header
        health = page.page.locator("table.scoreboard tbody tr td:nth-child(2)").all_inner_texts()
        assert health == ["healthy"] * N_METHODS
        page.page.screenshot(path=str(SCREENSHOTS / "claim-held.png"), full_page=True)
        # the titles after the run (each method's name and its fit's state) fit their heatmaps, also at
        # phone width, where each heatmap is its narrowest
        methods = [t["text"] for t in heatmap_titles_fit(page) if "\n" in t["text"]]  # each method's
        assert len(methods) == N_METHODS and all(", VI\n" in t and "not started" not in t for t in methods), methods
        assert [len(row) for row in rate_rows(page)] == [2, 2]  # two to a row on a desktop
        page.page.set_viewport_size(PHONE)
        narrow = f"Math.max(({MAIN_WIDTH})(), {RATE_MIN_WIDTH})"
        page.wait_until(f"() => ({HEATMAP_TITLES})().every(t => t.plot <= {narrow})")
        heatmap_titles_fit(page)
        # one to a row on a phone, each wholly inside the screen's width, and the page does not scroll
        # sideways (at 412 px the second of a row of two stood past the right edge)
        assert [len(row) for row in rate_rows(page)] == [1] * (1 + N_METHODS)
        plots = page.evaluate(RATE_PLOTS)
        assert all(0 <= plot["left"] and plot["right"] <= PHONE["width"] for plot in plots), plots
        assert all(plot["width"] >= RATE_MIN_WIDTH for plot in plots), plots
        # the trace plots too: one to a row, inside the screen, each title and legend inside its plot
        # (two to a row at 412 px cut the titles and the legends' method names)
        page.wait_until(f"() => ({TRACE_PLOTS})().length === 2")
        traces = page.evaluate(TRACE_PLOTS)
        assert len({round(plot["top"]) for plot in traces}) == 2, traces
        assert all(0 <= plot["left"] and plot["right"] <= PHONE["width"] for plot in traces), traces
        for plot in traces:
            assert plot["title_start"] is not None and plot["title_start"] + plot["title_width"] <= plot["width"], plot
            assert plot["legend"] is not None and 0 <= plot["legend"]["left"], plot
            assert plot["legend"]["right"] <= plot["width"], plot
        assert page.evaluate(PAGE_OVERFLOW) <= 0
        page.page.set_viewport_size(DESKTOP)
        if not page.evaluate(SIDEBAR_SHOWN):
            toggle_sidebar(page, shown=True)
        # a new noise draw: the same preset, another release, and the page says so
        page.click("New noise draw")
        page.page.get_by_text("A new noise draw").first.wait_for()
        assert page.errors == []
    finally:
        page.close()


def test_unmixed_chains_are_flagged_run_longer_and_the_claim_says_so(browser, server):
    page = Page(browser, server.url)
    try:
        choose_preset(page, "Figure 3 (small alpha0)")
        page.page.get_by_text("Fit settings").first.click()
        page.fill("Thin", 1)  # burn-in and thin first: 60 iterations after a burn-in of 1,000 are refused
        page.fill("Burn in", 20)
        page.fill("N iter", 60)
        page.tab("Fits")
        page.page.get_by_text("/ 60").first.wait_for()
        page.click("Start")
        page.statuses("done")
        flagged = page.page.locator("table.scoreboard tbody tr td:nth-child(2)")
        flagged.first.wait_for()
        assert flagged.all_inner_texts() == ["not mixed: run longer"] * N_METHODS
        assert "\u2605" not in page.page.locator("table.scoreboard").inner_text()  # nothing starred
        assert page.page.locator("ul.flagged-fits li").count() == N_METHODS
        page.page.screenshot(path=str(SCREENSHOTS / "flagged-unmixed.png"), full_page=True)
        assert page.errors == []
    finally:
        page.close()


def test_a_collapsed_fit_is_flagged_in_words_and_the_claim_did_not_hold(browser, server):
    page = Page(browser, server.url)
    try:
        name = "Table 1 (VI paper, reduced)"
        choose_preset(page, name)
        page.page.get_by_text("Fit settings").first.click()
        # the VI paper's own CAVI variant, which collapses on these data (a method option: still the preset)
        page.page.locator("select:has(option:text-is('geometric'))").first.select_option("paper")
        page.tab("Fits")
        page.click("Start")
        page.page.locator(".claim-verdict[data-held='did not hold']").wait_for(timeout=TIMEOUT_MS)
        assert "never counts" in page.page.locator(".claim-verdict").inner_text()
        cells = page.page.locator("table.scoreboard tbody tr").all()
        private = next(row for row in cells if row.locator("td").first.inner_text().startswith("private"))
        assert private.locator("td").nth(1).inner_text().startswith("collapsed")
        assert "\u2605" not in private.inner_text()  # never starred
        page.page.screenshot(path=str(SCREENSHOTS / "flagged-collapsed-claim-not-held.png"), full_page=True)
        assert page.errors == []
    finally:
        page.close()


def test_the_opening_page_and_the_own_data_help(browser, server):
    page = Page(browser, server.url)
    try:
        page.page.get_by_role("button", name="Run the fits").wait_for()  # Start from the opening screen
        page.page.screenshot(path=str(SCREENSHOTS / "opening-page.png"), full_page=False)
        page.choose("upload")
        page.page.get_by_text("Your own data").first.wait_for()
        page.page.get_by_text("Y_indptr").first.wait_for()
        with page.page.expect_download() as download:
            page.page.get_by_role("button", name="Download an example (edge list)").click()
        assert download.value.suggested_filename == "example_edges.csv"
        page.page.screenshot(path=str(SCREENSHOTS / "own-data-help.png"), full_page=False)
        assert page.errors == []
    finally:
        page.close()


def test_at_phone_width_the_page_opens_with_the_sidebar_folded_and_the_main_column_usable(browser, server):
    page = Page(browser, server.url, viewport=PHONE)
    try:
        page.wait_until(f"() => !({SIDEBAR_SHOWN})()")
        assert page.evaluate(MAIN_WIDTH) >= MAIN_MIN_PHONE_PX
        heatmap = page.page.locator(".bk-Figure").first.bounding_box()
        assert heatmap is not None and heatmap["width"] >= MAIN_MIN_PHONE_PX / 2  # the plots have room
        # the header's toggle opens the sidebar over the main column: Run the fits is one tap away
        toggle_sidebar(page, shown=True)
        page.page.get_by_role("button", name="Run the fits").wait_for(state="visible")
        assert page.evaluate(MAIN_WIDTH) >= MAIN_MIN_PHONE_PX  # drawn over it, not squeezing it
        toggle_sidebar(page, shown=False)
        assert console_problems(page) == [] and outside_requests(page) == []
    finally:
        page.close()


def test_the_served_page_fetches_nothing_from_outside_and_logs_no_warnings(browser, server):
    """Every request and console message from the page's first byte: a run of the fits, every tab
    (the Topic map twice: its empty maps once warned 108 times a visit) and a network preset."""
    page = Page(browser, server.url)
    try:
        page.page.get_by_text("Fit settings").first.click()
        page.fill("N iter", 2000)  # short chains (after a burn-in of 1,000): this test is about the page
        page.tab("Fits")
        page.page.get_by_text("/ 2,000").first.wait_for()
        page.click("Run the fits")
        for tab in ("Fits", "Topics", "Topic map", "Blocks", "Tensor", "Bessel", "Privacy", "Central vs local"):
            page.tab(tab)
            page.page.wait_for_timeout(1500)
        page.tab("Fits")
        page.statuses("done")
        page.tab("Topic map")
        page.wait_until(f"() => ({FIGURES})().some(f => f.title.endsWith('top words'))")  # the maps drawn
        choose_preset(page, "Figure 5")
        page.tab("Blocks")
        page.page.get_by_text("held-out cells").first.wait_for()
        for tab in ("Epsilon sweep", "Export", "Data & noise"):
            page.tab(tab)
            page.page.wait_for_timeout(1500)
        assert outside_requests(page) == [], "fetched from outside this machine"
        assert console_problems(page) == []
        assert len(page.requests) > 10  # the recording saw the page load itself
    finally:
        page.close()
