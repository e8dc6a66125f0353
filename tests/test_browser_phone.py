"""Issue 37 MEDIUM 12, served in Debian's chromium at a phone's width (412 x 915): the walk found the
scoreboard cut after ESS, the Topics tab cut at the right and 5 of the 11 tab headers shown. Here the
opening preset's fits run to their end; then every tab (and the Blocks tab of Figure 1's network) is
read for anything cut.

What is cut is measured in the page, not eyeballed: for each element, its box is followed up through
its ancestors (across the shadow roots of Bokeh's and Panel's components). A box that scrolls sideways
(overflow auto or scroll) holds the element when the element lies inside its scroll area; the element
is then reachable if that box is. A box that clips (overflow hidden) must hold the element whole. The
page's own containers (the template's main column and above) count as the page: the element must lie
within the screen's width, since a main column scrolled sideways takes the tab headers and the status
lines away with it.
"""

import json

import pytest

from tests.browser_harness import Page
from tests.test_browser_trust import choose_preset, toggle_sidebar

pytestmark = pytest.mark.browser

PHONE = {"width": 412, "height": 915}
TAB_TITLES = (
    "Data & noise",
    "Fits",
    "Topics",
    "Topic map",
    "Blocks",
    "Tensor",
    "Bessel",
    "Privacy",
    "Central vs local",
    "Epsilon sweep",
    "Export",
)
# The columns of the opening preset's scoreboard once its fits have saved samples (the synthetic topics:
# true rates, topics, two chains), as their headers begin.
SCOREBOARD_COLUMNS = ("method", "health", "MAE", "NPMI", "UMass", "topic error", "R-hat", "ESS", "iterations", "it/s")

# The elements matching ``selector`` that are shown (with ``content``: only those holding text of their
# own, or a canvas, an image or an input: what a reader needs whole), each with why it is cut (null when
# reachable). With ``now``: whether it is in sight without scrolling anything.
CUT = """([selector, content, now]) => {
  const parentOf = (el) => el.assignedSlot || el.parentElement
    || (el.parentNode instanceof ShadowRoot ? el.parentNode.host : null);
  const all = [];
  const walk = (root) => {
    for (const el of root.querySelectorAll("*")) { all.push(el); if (el.shadowRoot) walk(el.shadowRoot); }
  };
  walk(document);
  const name = (el) => {
    const cls = typeof el.className === "string" ? el.className.trim() : "";
    return el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") + (cls ? "." + cls.split(/\\s+/).join(".") : "");
  };
  // the page's own containers: every ancestor of the tabs
  const page = new Set();
  for (const el of all) if (el.classList.contains("bk-panel-models-tabs-Tabs"))
    for (let node = parentOf(el); node; node = parentOf(node)) page.add(node);
  const ownText = (el) => [...el.childNodes].some(n => n.nodeType === Node.TEXT_NODE && n.textContent.trim());
  const cut = (el) => {
    const box = el.getBoundingClientRect();
    let left = box.left, right = box.right;
    for (let node = parentOf(el); node && !page.has(node); node = parentOf(node)) {
      const overflow = getComputedStyle(node).overflowX;
      if (overflow === "visible") continue;
      const r = node.getBoundingClientRect();
      if ((overflow === "auto" || overflow === "scroll") && !now) {
        const start = left - r.left - node.clientLeft + node.scrollLeft;
        const end = right - r.left - node.clientLeft + node.scrollLeft;
        if (start < -1 || end > node.scrollWidth + 1) return `outside the scroll area of ${name(node)}`;
        left = r.left; right = r.right;  // reachable in there: now the box itself must be
      } else if (left < r.left - 1 || right > r.right + 1) {
        return `cut by ${name(node)} (overflow ${overflow}, ${Math.round(r.left)}-${Math.round(r.right)} px)`;
      }
    }
    if (left < -1 || right > window.innerWidth + 1) return `cut by the page's edge (${window.innerWidth} px)`;
    return null;
  };
  return all
    .filter(el => el.matches(selector) && el.checkVisibility({visibilityProperty: true})
      && el.getBoundingClientRect().width > 0
      && (!content || ownText(el) || ["CANVAS", "IMG", "INPUT", "SELECT", "BUTTON", "TEXTAREA"].includes(el.tagName)))
    .map(el => { const box = el.getBoundingClientRect();
      return {element: name(el), text: (el.innerText || el.textContent || "").trim().slice(0, 40),
              left: Math.round(box.left), right: Math.round(box.right), cut: cut(el)}; });
}"""
# Whether a text model whose view is shown in the page says ``text``.
SHOWN_TEXT = """(text) => {
  for (const doc of window.Bokeh.documents) for (const m of doc.all_models) {
    if (typeof m.text !== "string" || !m.text.includes(text)) continue;
    const view = window.Bokeh.index.find_one(m);
    if (view && view.el && view.el.isConnected && view.el.checkVisibility()) return true;
  }
  return false; }"""
# How far the main column scrolls sideways (0: it fits the page).
MAIN_OVERFLOW = "() => { const main = document.getElementById('main'); return main.scrollWidth - main.clientWidth; }"


def shown(page, selector, *, content=False, now=False):
    return page.page.evaluate(CUT, [selector, content, now])


def cut(elements):
    return [element for element in elements if element["cut"]]


def tab_whole(page):
    """What of the shown tab is cut (an empty list: nothing), and whether the main column scrolls
    sideways (it must not: the tab headers and the status lines would go with it)."""
    problems = cut(shown(page, "*", content=True))
    overflow = page.evaluate(MAIN_OVERFLOW)
    return problems + ([f"the main column scrolls sideways by {overflow} px"] if overflow > 1 else [])


def short_fits(page):
    """The opening preset's fits, 1,200 iterations after a burn-in of 100, set in the sidebar (folded
    at this width: opened with the header's toggle) and run to their end from the Fits tab."""
    toggle_sidebar(page, shown=True)
    page.page.get_by_text("Fit settings").first.click()
    page.fill("Burn in", 100)
    page.fill("N iter", 1200)
    toggle_sidebar(page, shown=False)
    page.tab("Fits")
    page.page.get_by_text("/ 1,200").first.wait_for()
    page.click("Start")
    page.statuses("done")


def test_at_phone_width_the_scoreboard_the_tab_headers_and_every_tab_are_whole(browser, server, artifacts_dir):
    page = Page(browser, server.url, viewport=PHONE)
    try:
        # every tab header in sight at once (they wrap): none waits past the edge unseen
        tabs = shown(page, ".bk-tab", now=True)
        assert [tab["text"] for tab in tabs] == list(TAB_TITLES)
        assert cut(tabs) == [], "tab headers out of sight"

        short_fits(page)
        page.wait_until(
            """(columns) => { const heads = [];
              const walk = (root) => { for (const el of root.querySelectorAll("*")) {
                if (el.matches("table.scoreboard th")) heads.push(el.textContent);
                if (el.shadowRoot) walk(el.shadowRoot); } };
              walk(document);
              return columns.every(c => heads.some(h => h.startsWith(c))); }""",
            list(SCOREBOARD_COLUMNS),
        )
        headers = shown(page, "table.scoreboard th")
        assert len(headers) >= len(SCOREBOARD_COLUMNS)
        assert cut(headers) == [], f"scoreboard columns out of reach: {json.dumps(headers, indent=1)}"
        assert cut(shown(page, "table.scoreboard td", content=True)) == []
        # the scoreboard is wider than the phone: it scrolls in a box of its own, inside the page
        assert max(header["right"] for header in headers) > PHONE["width"]
        assert cut(shown(page, "*", content=True)) == [], "the Fits tab cut by the page"
        assert page.evaluate(MAIN_OVERFLOW) <= 1, "the Fits tab makes the main column scroll sideways"

        page.tab("Topics")
        page.page.get_by_text("Topics are aligned to the true topics").first.wait_for()
        page.page.locator("table.panel-df th").get_by_text("NPMI", exact=True).first.wait_for()
        page.page.wait_for_timeout(2000)  # the heatmaps laid out
        topics = shown(page, "*", content=True)
        assert any(element["text"] == "NPMI" for element in topics)
        assert cut(topics) == [], f"the Topics tab cut: {json.dumps(cut(topics), indent=1)}"
        assert page.evaluate(MAIN_OVERFLOW) <= 1, "the Topics tab makes the main column scroll sideways"
        assert cut(shown(page, ".bk-tab", now=True)) == []
        page.page.screenshot(path=str(artifacts_dir / "browser-phone-topics.png"), full_page=False)

        # every other tab whole too (their rows of controls and plot pairs wrap)
        for tab in TAB_TITLES:
            page.tab(tab)
            page.page.wait_for_timeout(2500)  # drawn and laid out
            assert tab_whole(page) == [], tab

        # and the Blocks tab of a network (Figure 1): its score table, heatmaps and axis names
        choose_preset(page, "Figure 1")
        page.tab("Blocks")
        page.wait_until(SHOWN_TEXT, "Actors ordered by their main community")
        page.page.wait_for_timeout(2500)
        assert tab_whole(page) == [], "Blocks (Figure 1)"
        assert page.errors == []
    finally:
        page.close()


def test_a_phone_lays_the_page_out_at_its_own_width(browser, server):
    """Issue 57 MEDIUM 15: the page had no meta viewport, so a phone's browser (mobile emulation,
    412 px) laid it out at 980 px, unreadable, with the last tabs beyond the edge."""
    context = browser.new_context(viewport=PHONE, is_mobile=True, has_touch=True, device_scale_factor=2.625)
    try:
        page = context.new_page()
        page.goto(server.url)
        page.wait_for_function("() => window.Bokeh && window.Bokeh.documents.length > 0")
        page.locator(".bk-tab").get_by_text("Export", exact=True).first.wait_for(state="attached")
        widths = page.evaluate("() => [window.innerWidth, document.documentElement.clientWidth]")
        assert widths == [PHONE["width"], PHONE["width"]], f"laid out at {widths} px on a {PHONE['width']} px phone"
    finally:
        context.close()
