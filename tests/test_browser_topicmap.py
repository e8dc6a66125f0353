"""The Topic map tab in a real browser: after a run on the opening preset (Figure 3: synthetic topics),
moving the lambda slider from the keyboard reorders every method's word bars, as relevance says, and
clicking a topic's circle highlights its matched topic in every method.

The bars and circles are read from the Bokeh documents in the page (their data sources).
"""

from itertools import pairwise

import pytest

from lpviz.methods import METHODS
from tests.browser_harness import N_METHODS

pytestmark = pytest.mark.browser

# Every word-bar source of the page: its words (most relevant first) and the expected tokens
# of each word in the topic and overall.
BARS = """
() => {
  const bars = [];
  for (const doc of window.Bokeh.documents)
    for (const model of doc.all_models) {
      if (model.type !== "ColumnDataSource" && model.constructor.name !== "ColumnDataSource") continue;
      const data = model.data instanceof Map ? Object.fromEntries(model.data) : model.data;
      if (!data || data.in_topic === undefined || data.word === undefined || data.word.length === 0) continue;
      bars.push({words: Array.from(data.word), in_topic: Array.from(data.in_topic), overall: Array.from(data.overall)});
    }
  return bars;
}
"""
LAMBDA_VALUE = """
() => {
  for (const doc of window.Bokeh.documents)
    for (const model of doc.all_models) if (model.title === "lambda (relevance)") return model.value;
  return null;
}
"""

# The circles of the map titled ``title``: their colours, and where circle ``k`` is on the screen.
CIRCLES = """
([title, k]) => {
  for (const doc of window.Bokeh.documents)
    for (const model of doc.all_models) {
      if (!model.title || model.title.text !== title || !model.renderers) continue;
      for (const renderer of model.renderers) {
        const source = renderer.data_source;
        const data = source && (source.data instanceof Map ? Object.fromEntries(source.data) : source.data);
        if (!data || data.radius === undefined) continue;
        const view = window.Bokeh.index.find_one(model);
        const canvas = view.canvas_view.el.getBoundingClientRect();
        return {colours: Array.from(data.colour), x: canvas.left + view.frame.x_scale.compute(data.x[k]),
                y: canvas.top + view.frame.y_scale.compute(data.y[k])};
      }
    }
  return null;
}
"""
# The titles of the word-bar figures ("topic 2 (31.0% of tokens): top words").
BAR_TITLES = """
() => {
  const titles = [];
  for (const doc of window.Bokeh.documents)
    for (const model of doc.all_models)
      if (model.title && typeof model.title.text === "string" && model.title.text.endsWith("top words"))
        titles.push(model.title.text);
  return titles.sort();
}
"""
CHOSEN = "#b2182b"


def highlighted(page):
    """Each method's highlighted topic (index) on its map."""
    shown = {}
    for method in METHODS.values():
        colours = page.page.evaluate(CIRCLES, [method.label, 0])["colours"]
        assert colours.count(CHOSEN) == 1, (method.label, colours)
        shown[method.label] = colours.index(CHOSEN)
    return shown


def click_topic(page, label, topic):
    """Click circle ``topic`` of the map ``label``; each method's highlighted topic, once its bars show it."""
    where = page.page.evaluate(CIRCLES, [label, topic])
    page.page.mouse.click(where["x"], where["y"])
    page.wait_until(
        f"([label, topic]) => ({CIRCLES})([label, 0]).colours.indexOf('{CHOSEN}') === topic", [label, topic]
    )
    shown = highlighted(page)
    prefixes = sorted(f"topic {k + 1} " for k in shown.values())
    page.wait_until(
        f"(prefixes) => {{ const titles = ({BAR_TITLES})();"
        f" return prefixes.every((prefix, i) => titles[i] && titles[i].startsWith(prefix)); }}",
        prefixes,
    )
    return shown


def descending(values):
    return all(a >= b * (1 - 1e-9) for a, b in pairwise(values))


# Whether every method's bars are ordered by the tokens in the topic (lambda = 1) or by those over the
# word's tokens overall (lambda = 0: lift, P(w | k) / P(w), up to a factor per topic), within rounding.
ORDERED = """
(key) => {
  const bars = (BARS)();
  const value = (b, i) => key === "in_topic" ? b.in_topic[i] : b.in_topic[i] / b.overall[i];
  return bars.length === N_METHODS &&
    bars.every(b => b.words.every((_, i) => i === 0 || value(b, i - 1) >= value(b, i) * (1 - 1e-9)));
}
""".replace("BARS", BARS).replace("N_METHODS", str(N_METHODS))


def move_lambda(page, key, value, order):
    """Press ``key`` on the lambda slider's handle (as a keyboard user would); the bars once they
    are ordered by ``order``."""
    title = page.page.locator(".bk-slider-title", has_text="lambda (relevance)")
    handle = page.page.locator(".bk-input-group", has=title).locator(".noUi-handle")
    handle.focus()
    handle.press(key)
    page.wait_until(f"() => ({LAMBDA_VALUE})() === {value}")
    page.wait_until(ORDERED, order)
    return page.evaluate(BARS)


def test_the_lambda_slider_reorders_the_word_bars(page, artifacts_dir):
    page.tab("Fits")
    page.click("Start")
    # the opening preset's whole run (10,000 iterations): past 120 s when the suite's package tests
    # (a fresh environment's server, cluster and kernel) run beside it on 2 cores
    page.statuses("done", timeout_ms=600_000)
    page.tab("Topic map")
    page.wait_until(f"() => ({BARS})().length === {N_METHODS}")
    opening = page.evaluate(BARS)
    assert page.evaluate(LAMBDA_VALUE) == 0.6

    by_probability = move_lambda(page, "End", 1, "in_topic")  # lambda = 1: by P(w | k)
    for bars in by_probability:
        assert descending(bars["in_topic"])
    by_lift = move_lambda(page, "Home", 0, "lift")  # lambda = 0: by lift
    for bars in by_lift:
        assert descending([t / o for t, o in zip(bars["in_topic"], bars["overall"], strict=True)])
    for shown in (opening, by_probability, by_lift):
        assert len(shown) == N_METHODS and all(len(bars["words"]) == 15 for bars in shown)
    assert [b["words"] for b in by_probability] != [b["words"] for b in by_lift]

    # a click on a topic of one method: every method highlights its matched topic, and the matching
    # goes both ways (a click on the partner highlights the first topic again)
    first, second = (method.label for method in list(METHODS.values())[:2])
    assert highlighted(page)[first] == 0  # the opening choice: topic 1 of the first method
    shown = click_topic(page, second, 2)
    assert shown[second] == 2
    back = click_topic(page, first, shown[first])
    assert back[first] == shown[first] and back[second] == 2
    page.page.mouse.move(5, 5)  # no tooltip over the picture
    page.page.wait_for_timeout(500)
    page.page.screenshot(path=str(artifacts_dir / "browser-topic-map.png"))  # the window, not the long page
    assert page.errors == []
