"""Issue 37 (LOW), the Privacy tab served in Debian's chromium, at a desktop's width and a phone's (412 px):
its titles were cut (a per-row release's median epsilon with six digits; at a phone's width every title ran
past its plot) and its legends stood over curves (the Skellam laws' over two peaks, the geometric law's over
its peak).

A title is drawn in the plot's canvas, not as a page element, so what the page draws is measured there:
each shown figure's title is measured with the canvas' own font metrics (the font Bokeh draws it with)
from where Bokeh starts it (the frame's left edge) to the plot's right edge; each legend's box, as Bokeh
laid it out, against the frame that holds the data.
"""

import re

import pytest

from tests.browser_harness import Page

pytestmark = pytest.mark.browser

# Each shown figure, in the page's coordinates: its title, how wide it is drawn (with the canvas' font
# metrics, in the font Bokeh draws it with; its widest line) and where it starts (the frame's left edge),
# the plot's box, its frame (the data area) and its legends' boxes (HTML elements in Bokeh 3.9).
PRIVACY_FIGURES = """() => {
  const out = [];
  const ctx = document.createElement("canvas").getContext("2d");
  const rect = (r) => ({left: r.left, right: r.right, top: r.top, bottom: r.bottom});
  for (const doc of window.Bokeh.documents) for (const model of doc.all_models) {
    if (model.type !== "Figure" && model.constructor.name !== "Figure") continue;
    const view = window.Bokeh.index.find_one(model);
    if (!view || !view.el || !view.el.isConnected || !view.el.checkVisibility()) continue;
    const title = model.title;
    ctx.font = `${title.text_font_style} ${title.text_font_size} ${title.text_font}`;
    const lines = title.text.split("\\n");  // a title of several lines: its widest
    const plot = view.el.getBoundingClientRect(), frame = view.frame.bbox;
    const legends = [];
    for (const side of ["center", "left", "right", "above", "below"])
      for (const r of model[side])
        if (r.type === "Legend" || r.constructor.name === "Legend")
          legends.push(rect(window.Bokeh.index.find_one(r).el.getBoundingClientRect()));
    const widest = Math.max(...lines.map(line => ctx.measureText(line).width));
    out.push({title: title.text, title_left: plot.left + frame.left, title_right: plot.left + frame.left + widest,
              plot: rect(plot),
              frame: {left: plot.left + frame.left, right: plot.left + frame.right, top: plot.top + frame.top,
                      bottom: plot.top + frame.bottom}, legends});
  }
  return out;
}"""
PHONE = {"width": 412, "height": 915}
DESKTOP = {"width": 1500, "height": 1000}
# The opening preset's plots with a legend (the log-ratio plot has none)
WITH_LEGENDS = 3


def overlaps(box, frame):
    return (
        box["left"] < frame["right"] - 1
        and box["right"] > frame["left"] + 1
        and (box["top"] < frame["bottom"] - 1 and box["bottom"] > frame["top"] + 1)
    )


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_privacy_titles_are_whole_and_legends_stand_beside_the_data(browser, server, viewport):
    page = Page(browser, server.url, viewport=viewport)
    try:
        page.tab("Privacy")
        page.page.get_by_text("The plots show the median row's alpha").first.wait_for()
        page.wait_until(f"() => ({PRIVACY_FIGURES})().length === 4")
        page.page.wait_for_timeout(1500)  # laid out at the page's width
        figures = page.evaluate(PRIVACY_FIGURES)
        assert sum(1 for figure in figures if figure["legends"]) == WITH_LEGENDS, figures
        width = page.evaluate("() => window.innerWidth")
        for figure in figures:
            title, plot = figure["title"], figure["plot"]
            # on one line, whole: from the frame's left edge to the plot's right edge
            assert figure["title_right"] <= plot["right"] + 1, figure
            # numbers with three significant digits at most (the median row's epsilon read 0.280424)
            for number in re.findall(r"\d+\.\d+(?:e[-+]\d+)?", title):
                assert len(number.split("e")[0].replace(".", "").lstrip("0")) <= 3, title
            for legend in figure["legends"]:
                # over no plot's data (its own or, one plot under another on a phone, the next one's)
                assert not any(overlaps(legend, other["frame"]) for other in figures), (title, legend)
                # whole, across: within its plot and the page
                assert plot["left"] - 1 <= legend["left"] and legend["right"] <= plot["right"] + 1, (title, legend)
                assert legend["right"] <= width + 1, (title, legend)
        assert page.errors == []
    finally:
        page.close()
