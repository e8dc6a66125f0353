"""Issue 37, served in Debian's chromium: the sidebar never shows another data set's settings (a preset's
text and the settings' widgets read together, every animation frame), no request leaves this machine
through preset switches with finished fits, own data get no texts of the data before, the page is
usable at phone width (every tab header reachable, the scoreboard's last column reachable), the
Blocks tab draws Figure 1's communities, and uploaded actors come in natural order.

What the page shows is read from its Bokeh documents (``window.Bokeh.documents``) and their views.
"""

import contextlib
import json
import re
from urllib.parse import urlparse

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import expect

from lpviz.dashboard.session.presets import PRESETS
from lpviz.dashboard.session.settings import preset_values
from tests.browser_harness import TEXTS_IN_PAGE

pytestmark = pytest.mark.browser

LOOPBACK = ("localhost", "127.0.0.1", "::1")
PRESET_CHOICE = "select:has(option:text-is('(settings of your own)'))"
MARKUP = re.compile(r"[*_`<>&'\"\[\]]")


def preset_marks():
    """For each preset, five words of its text found in no other preset's text (and no markup): what
    tells, in the page, which preset's text is shown."""
    marks = {}
    for name, preset in PRESETS.items():
        words = preset.text.split()
        others = [other.text for other_name, other in PRESETS.items() if other_name != name]
        for start in range(len(words) - 4):
            fragment = " ".join(words[start : start + 5])
            if not MARKUP.search(fragment) and not any(fragment in text for text in others):
                marks[name] = fragment
                break
    assert set(marks) == set(PRESETS), "every preset's text has words of its own"
    return marks


# Records, at every animation frame, what the sidebar shows (only models whose views are in the page):
# which presets' texts, the data source, the iterations, the per-row noise box and alpha0. A frame is
# kept when it differs from the one before.
RECORD_SIDEBAR = """(marks) => {
  window.__sidebar = [];
  const inPage = (model) => {
    const view = window.Bokeh.index.find_one(model);
    return view && view.el && view.el.isConnected;
  };
  const read = () => {
    const shown = {texts: []};
    for (const doc of window.Bokeh.documents) for (const m of doc.all_models) {
      if (typeof m.text === "string") {
        for (const [name, mark] of Object.entries(marks))
          if (m.text.includes(mark) && inPage(m)) shown.texts.push(name);
      } else if (m.title === "Data" || m.title === "N iter" || m.title === "Alpha0") {
        if (inPage(m)) shown[m.title] = m.value;
      } else if (m.label === "heterogeneous noise" && inPage(m)) shown.heterogeneous = m.active;
    }
    return JSON.stringify(shown);
  };
  let last = null;
  const frame = () => {
    const now = read();
    if (now !== last) { window.__sidebar.push(JSON.parse(now)); last = now; }
    if (!window.__stopSidebar) requestAnimationFrame(frame);
  };
  window.__stopSidebar = false;
  requestAnimationFrame(frame);
}"""


def record_sidebar(page):
    page.evaluate(f"({RECORD_SIDEBAR})({json.dumps(preset_marks())})")


def sidebar_frames(page):
    return page.evaluate("() => { window.__stopSidebar = true; return window.__sidebar; }")


def mismatches(frames):
    """The frames that show a preset's text beside settings that are not that preset's."""
    wrong = []
    for frame in frames:
        for name in frame["texts"]:
            values = preset_values(name)
            expected = {"Data": values["source"], "N iter": values["n_iter"], "heterogeneous": values["heterogeneous"]}
            if values["heterogeneous"]:
                expected["Alpha0"] = values["alpha0"]
            shown = {key: frame.get(key) for key in expected}
            if shown != expected or len(frame["texts"]) != 1:
                wrong.append((name, shown, expected))
    return wrong


def choose_preset(page, name):
    page.page.locator(PRESET_CHOICE).first.select_option(value=name)


def settings_in_force(page, name):
    """Wait until the sidebar shows ``name``'s text and settings (the last frame recorded)."""
    values = preset_values(name)
    page.wait_until(
        """([name, source, n_iter]) => {
          const frames = window.__sidebar; const last = frames[frames.length - 1];
          return last && last.texts.length === 1 && last.texts[0] === name && last.Data === source
            && last["N iter"] === n_iter; }""",
        [name, values["source"], values["n_iter"]],
    )


# The titles of the Fit settings card's typed fields whose views are in the page, with their values.
FIT_FIELDS = """() => {
  const fields = {};
  for (const doc of window.Bokeh.documents) for (const m of doc.all_models) {
    if (!["N iter", "Burn in", "Thin", "Chain seed", "Chains"].includes(m.title)) continue;
    const view = window.Bokeh.index.find_one(m);
    if (view && view.el && view.el.isConnected) fields[m.title] = m.value;
  }
  return fields; }"""


def open_fit_settings(page):
    """Open the Fit settings card as a user does (its widgets are made when it first opens, issue 41)."""
    page.page.get_by_text("Fit settings").first.click()
    page.page.get_by_label("N iter", exact=True).wait_for()


def test_a_chosen_preset_shows_its_text_only_beside_its_own_settings(page):
    """Issue 37 MEDIUM 6: right after Figure 1 was chosen the sidebar showed its text above the old
    settings (synthetic topics, 6,000 iterations, alpha0 0.20) for seconds."""
    open_fit_settings(page)  # the iterations are read from the Fit settings card
    record_sidebar(page)
    walk = ["Figure 1", "Figure 3 (small alpha0)", "Table 1 (VI paper, reduced)", "Figure 3 (large alpha0)"]
    for name in walk:
        choose_preset(page, name)
        settings_in_force(page, name)
    frames = sidebar_frames(page)
    assert [f["texts"] for f in frames if f["texts"]][0] == ["Figure 3 (large alpha0)"]  # the opening preset's
    for name in walk:  # the recording saw every preset's text and settings
        assert any(f["texts"] == [name] for f in frames), name
    assert mismatches(frames) == [], "a preset's text shown beside another data set's settings"
    assert page.errors == []


def test_a_preset_chosen_with_the_fit_settings_closed_shows_in_the_card_when_it_opens(page):
    """Issue 41: the Fit settings card makes its widgets when first opened. A preset chosen before that
    is in force all the same (the settings are the session's; the widgets only show them): opening the
    card then shows the preset's iterations, burn-in, thin, chain seed and chains."""
    assert page.evaluate(FIT_FIELDS) == {}  # not made at the page's opening
    name = "Figure 1"  # 30,000 iterations, a burn-in of 6,000, one chain: unlike the opening preset's
    record_sidebar(page)
    choose_preset(page, name)
    page.wait_until(
        """([name, source]) => { const frames = window.__sidebar; const last = frames[frames.length - 1];
          return last && last.texts.length === 1 && last.texts[0] === name && last.Data === source; }""",
        [name, preset_values(name)["source"]],
    )
    assert page.evaluate(FIT_FIELDS) == {}  # the preset made no widget of the closed card
    open_fit_settings(page)
    values = preset_values(name)
    expected = {"N iter": values["n_iter"], "Burn in": values["burn_in"], "Thin": values["thin"]}
    expected |= {"Chain seed": values["chain_seed"], "Chains": values["chains"]}
    page.wait_until(f"() => Object.keys(({FIT_FIELDS})()).length === {len(expected)}")
    assert page.evaluate(FIT_FIELDS) == expected
    expect(page.page.get_by_label("Burn in", exact=True)).to_have_value(str(values["burn_in"]))  # as typed fields
    expect(page.page.get_by_label("N iter", exact=True)).to_have_value(str(values["n_iter"]))
    settings_in_force(page, name)  # the last frame: the preset's text beside its own settings
    assert mismatches([frame for frame in sidebar_frames(page) if "N iter" in frame]) == []
    assert page.errors == []


def outside(urls):
    """The URLs asked for from anywhere but this machine (data: and blob: URLs never leave it)."""
    return sorted(
        {
            url.split("?")[0]
            for url in urls
            if not url.startswith("data:") and urlparse(url.removeprefix("blob:")).hostname not in LOOPBACK
        }
    )


def shown(page, *words):
    """The texts in the page that hold any of ``words``."""
    return [text for text in page.evaluate(TEXTS_IN_PAGE) if any(word in text for word in words)]


def test_own_data_get_no_texts_of_the_data_before(page, tmp_path):
    """Issue 37 LOW: for uploaded data the sidebar showed the previous data's alpha, guarantee and
    "Class seed 2019"."""
    from lpviz.datasets import make_blocks

    before = ("Class seed", "alpha = ", "indistinguishable", "Each row has its own noise")
    assert shown(page, *before)  # the opening preset's texts are there to go
    page.choose("upload")
    page.page.get_by_text("no file uploaded yet").first.wait_for()
    with contextlib.suppress(PlaywrightTimeout):  # waited for; what stays is then named by the assertion
        page.wait_until(f"([words]) => ({TEXTS_IN_PAGE})().every(t => !words.some(w => t.includes(w)))", [list(before)])
    assert shown(page, *before) == [], "texts of the data before shown beside 'no file uploaded yet'"
    release = make_blocks(n_actors=12, n_communities=3, random_state=3).privatize(epsilon=2.0)
    page.page.locator("input[type=file]").set_input_files(str(release.save(tmp_path / "release.npz")))
    page.page.get_by_text(re.compile(r"release.npz: 12 x 12")).first.wait_for()
    # the upload's own noise level; no seed: an uploaded release draws no noise
    page.wait_until(f"() => ({TEXTS_IN_PAGE})().some(t => t.includes('e^2 ='))")
    assert shown(page, "Class seed", "noise draw") == []
    assert page.errors == []


TABS = ("Topics", "Topic map", "Blocks", "Tensor", "Bessel", "Privacy", "Central vs local", "Export", "Fits")


def short_run(page, opened):
    """Fits of 1,200 iterations (a burn-in of 100) run to their end."""
    if not opened:
        open_fit_settings(page)
        opened.append(True)
    page.fill("Burn in", 100)
    page.fill("N iter", 1200)
    page.tab("Fits")
    page.page.get_by_text("/ 1,200").first.wait_for()
    page.click("Run the fits")
    page.statuses("done")


# The URL of every style sheet model of the page (Bokeh's ImportedStyleSheet), resolved against the page:
# those of views not drawn (a hidden tab's) too, which the browser never fetches.
STYLE_SHEETS = """() => {
  const urls = new Set();
  for (const doc of window.Bokeh.documents) for (const m of doc.all_models)
    if (m.type === "ImportedStyleSheet" || m.constructor.name === "ImportedStyleSheet")
      urls.add(new URL(m.url, document.baseURI).href);
  return [...urls].sort(); }"""


def test_preset_switches_with_finished_fits_fetch_nothing_from_outside(page):
    """Issue 37 MEDIUM 5: after preset switches with finished fits the page asked Panel's CDN for
    loading.css and listpanel.css. Every request of the page, from its first byte, stays on this machine;
    every style sheet the page's models hold (drawn or not) is this server's, loading.css and
    listpanel.css among them; and the sidebar's text and settings agree in every frame through these
    switches too.

    This walk no longer makes the page ask the CDN with dashboard.serving.resources.serve_stylesheets_locally undone
    (Panel 1.9.4: no render of this walk without the page's document, logged on the server); the
    patch's effect is held by tests/test_app_resources.py. Here: that nothing of the page points away."""
    opened = []
    short_run(page, opened)
    for name in ("Figure 1", "Figure 3 (small alpha0)"):
        # recorded from the choice until its settings are in force (a value typed afterwards is shown
        # before the server hears it and leaves the preset: not a preset's text beside other settings)
        record_sidebar(page)
        choose_preset(page, name)  # the fits are done: nothing to ask
        settings_in_force(page, name)
        assert mismatches(sidebar_frames(page)) == [], name
        for tab in TABS:  # every tab the data have, drawn after the switch
            header = page.page.locator(".bk-tab").get_by_text(tab, exact=True)
            if header.count() and header.first.is_visible():
                header.first.click()
                page.page.wait_for_timeout(500)
        short_run(page, opened)
    assert outside(page.requests) == [], "fetched from outside this machine"
    assert len(page.requests) > 10  # the recording saw the page load itself
    sheets = page.evaluate(STYLE_SHEETS)
    assert outside(sheets) == [], "style sheets of the page's models point away from this machine"
    for name in ("css/loading.css", "css/listpanel.css"):  # the two the walk in the issue fetched from the CDN
        assert any(urlparse(url).path.endswith(f"/static/extensions/panel/{name}") for url in sheets), name
    assert page.errors == []
