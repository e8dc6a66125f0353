"""The Topic map tab in a real browser: after a run on the opening preset (Figure 3: synthetic topics),
moving the lambda slider from the keyboard reorders every method's word bars, as relevance says.

The bars are read from the Bokeh documents in the page (their data source, most relevant word first).
"""

import pytest

from tests.test_browser import N_METHODS, Page, browser, page, server  # noqa: F401

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


def descending(values):
    return all(a >= b * (1 - 1e-9) for a, b in zip(values, values[1:]))


def move_lambda(page, key, value):
    """Press ``key`` on the lambda slider's handle (as a keyboard user would) and wait for new bars."""
    before = page.evaluate(BARS)
    title = page.page.locator(".bk-slider-title", has_text="lambda (relevance)")
    handle = page.page.locator(".bk-input-group", has=title).locator(".noUi-handle")
    handle.focus()
    handle.press(key)
    page.wait_until(f"() => ({LAMBDA_VALUE})() === {value}")
    page.wait_until(f"(before) => JSON.stringify(({BARS})()) !== JSON.stringify(before)", before)
    return page.evaluate(BARS)


def test_the_lambda_slider_reorders_the_word_bars(page, artifacts_dir):
    page.tab("Fits")
    page.click("Start")
    page.statuses("done")
    page.tab("Topic map")
    page.wait_until(f"() => ({BARS})().length === {N_METHODS}")
    opening = page.evaluate(BARS)
    assert page.evaluate(LAMBDA_VALUE) == 0.6

    by_probability = move_lambda(page, "End", 1)  # lambda = 1: by the word's tokens in the topic
    for bars in by_probability:
        assert descending(bars["in_topic"])
    by_lift = move_lambda(page, "Home", 0)  # lambda = 0: by lift, P(w | k) / P(w) ~ tokens in topic / overall
    for bars in by_lift:
        assert descending([t / o for t, o in zip(bars["in_topic"], bars["overall"])])
    for shown in (by_probability, by_lift):
        assert len(shown) == N_METHODS and all(len(bars["words"]) == 15 for bars in shown)
        # the same words of the same topics, reordered
        assert [sorted(b["words"]) for b in shown] == [sorted(b["words"]) for b in opening]
    assert [b["words"] for b in by_probability] != [b["words"] for b in by_lift]
    page.page.wait_for_timeout(500)
    page.page.screenshot(path=str(artifacts_dir / "browser-topic-map.png"))
    assert page.errors == []
