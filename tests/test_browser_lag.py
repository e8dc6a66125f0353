"""Issue 37 (HIGH 2): the page never freezes while the fits stream. One served page in chromium, its
CPU throttled 4x through the DevTools protocol (a cheap student laptop), runs Figure 1 (cut to a
short run) and answers a click on Pause while the chains stream: the progress line reads "pausing"
(or "paused") within a bound generous enough for a loaded 2-core CI machine, where the page of the
code before (scoreboard made visible: the whole tab laid out again; every redraw at the planned rate
whatever the page could take) took 2-19 s. The latency and the page's timer lag are recorded
(artifacts/browser-latency.json); the bound is the only timed assertion, on the user's side of it."""

import math
import time

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from tests.browser_harness import N_METHODS, record_latency

pytestmark = pytest.mark.browser

N_ITER = 4_000  # Figure 1's 30,000 cut: the first minute of its run is what froze the page
CLICK_BOUND_S = 2.0  # generous: the target is 0.2 s at 4x throttling on a quiet machine
LINES = """() => {
  const out = [];
  for (const doc of window.Bokeh.documents) for (const m of doc.all_models)
    if (typeof m.text === "string" && m.text.includes(", iteration")) {
      const plain = m.text.replace(/<[^>]*>/g, "").replace(/&lt;[^&]*&gt;/g, "");
      const x = plain.match(/- (\\w+), iteration ([\\d,]+) \\/ ([\\d,]+)/);
      if (x) out.push([x[1], Number(x[2].replace(/,/g, "")), Number(x[3].replace(/,/g, ""))]);
    }
  return out; }"""
# The page's own timer lag: how late a 100 ms timer fires, sampled from the start of the run.
LAG_SAMPLER = """() => {
  const lag = window.__timer_lag = [];
  const tick = () => { const due = performance.now() + 100;
    setTimeout(() => { lag.push(performance.now() - due); if (!window.__stop_lag) tick(); }, 100); };
  tick(); }"""


def test_a_page_at_4x_throttling_answers_a_click_while_the_fits_stream(page):
    page.tab("Fits")
    page.page.locator("select:has(option:text-is('(settings of your own)'))").first.select_option(value="Figure 1")
    page.wait_until(f"() => {{ const l = ({LINES})(); return l.length === {N_METHODS} && l[0][2] === 30000; }}")
    page.page.get_by_text("Fit settings").first.click()
    page.fill("Burn in", N_ITER // 5)  # first: a burn-in of 6,000 does not fit 4,000 iterations
    page.fill("N iter", N_ITER)
    page.wait_until(f"() => ({LINES})().every(x => x[0] === 'idle' && x[2] === {N_ITER})")
    cdp = page.context.new_cdp_session(page.page)
    cdp.send("Emulation.setCPUThrottlingRate", {"rate": 4})
    page.evaluate(LAG_SAMPLER)
    page.click("Start")
    # well into the run: the traces and heatmaps stream, the scoreboard is about to come
    page.wait_until(f"() => ({LINES})().every(x => x[0] === 'running' && x[1] >= {N_ITER // 4})")
    # from sending the click (the page must be free to take it) until the page holds the new status
    # a plain mouse click at the button's place, as a user's (Playwright's click first waits for the
    # page to be still, which a page that lags is not)
    box = page.page.get_by_role("button", name="Pause", exact=True).bounding_box()
    started = time.perf_counter()
    page.page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    try:
        page.page.wait_for_function(f"() => ({LINES})().some(x => x[0].startsWith('paus'))", polling=10, timeout=60_000)
        seconds = time.perf_counter() - started
    except PlaywrightTimeout:  # the click was never answered (the page so far behind that the run ended)
        seconds = math.inf
    record_latency("Pause clicked at 4x CPU throttling while Figure 1 streams (s)", min(seconds, 60.0))
    assert seconds < CLICK_BOUND_S, f"the page took {seconds:.2f} s to show a click on Pause"
    page.wait_until(f"() => ({LINES})().every(x => x[0] === 'paused')")
    page.click("Resume")
    page.wait_until(f"() => ({LINES})().every(x => x[0] === 'done')")
    lags = sorted(page.evaluate("() => { window.__stop_lag = true; return window.__timer_lag; }"))
    record_latency(
        "timer lag p95 at 4x CPU throttling over a Figure 1 run (s)", lags[int(0.95 * (len(lags) - 1))] / 1000
    )
    assert page.errors == []
