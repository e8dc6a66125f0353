"""The served dashboard in a real browser: Debian's chromium driven by Playwright.

``panel serve app/app.py`` runs on a free local port for the module; each test
opens its own page (its own session). What the page shows is read from the
Bokeh documents in the browser (``window.Bokeh.documents``), so points are
counted, not eyeballed. Screenshots go to the artifacts directory.
"""

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from playwright.sync_api import expect

from app.settings import SOURCES
from lpviz.methods import METHODS

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
TIMEOUT_MS = 120_000  # a loaded 2-core CI machine, cold numba caches
N_METHODS = len(METHODS)
LABELS = {name: method.label for name, method in METHODS.items()}
SOURCE_LABELS = {name: source.label for name, source in SOURCES.items()}

# Sum of the lengths of every data source holding a trace column, per column.
COUNT_TRACE_POINTS = """
() => {
  let total = 0;
  for (const doc of window.Bokeh.documents) {
    for (const model of doc.all_models) {
      if (model.type !== "ColumnDataSource" && model.constructor.name !== "ColumnDataSource") continue;
      const data = model.data instanceof Map ? Object.fromEntries(model.data) : model.data;
      if (data && data.iteration !== undefined) total += data.iteration.length;
    }
  }
  return total;
}
"""

# A checksum of every image (heatmap) in the page, to see which ones were redrawn.
IMAGE_CHECKSUMS = """
() => {
  const sums = [];
  for (const doc of window.Bokeh.documents) {
    for (const model of doc.all_models) {
      if (model.type !== "ColumnDataSource" && model.constructor.name !== "ColumnDataSource") continue;
      const data = model.data instanceof Map ? Object.fromEntries(model.data) : model.data;
      if (!data || data.image === undefined) continue;
      for (const image of data.image) {
        let sum = 0, weighted = 0, i = 0;
        for (const value of image) { sum += value; weighted += value * ((i++ % 97) + 1); }
        sums.push(`${image.length}:${sum}:${weighted}`);
      }
    }
  }
  return sums.sort();
}
"""


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def server():
    port = free_port()
    panel = [sys.executable, "-m", "app.serve", "--port", str(port)]  # as `make serve` runs it
    log = open(REPO / "artifacts" / f"browser-server-{port}.log", "w") if (REPO / "artifacts").is_dir() \
        else subprocess.DEVNULL
    process = subprocess.Popen(panel, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://localhost:{port}/app"
    deadline = time.monotonic() + 120
    while True:
        if process.poll() is not None:
            pytest.fail(f"panel serve exited with code {process.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                if response.status == 200:
                    break
        except OSError:
            if time.monotonic() > deadline:
                process.kill()
                pytest.fail(f"panel serve did not answer on {url} within 120 s")
            time.sleep(0.5)
    yield url
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    if log is not subprocess.DEVNULL:
        log.close()


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists() or shutil.which("chromium") is None:
        if os.environ.get("CI"):
            pytest.fail(f"{CHROMIUM} is missing: `make browser` installs Debian's chromium")
        pytest.skip(f"{CHROMIUM} is missing: run `make browser` (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


class Page:
    """One browser session on the dashboard, collecting console errors."""

    def __init__(self, browser, url):
        self.context = browser.new_context(viewport={"width": 1500, "height": 1000})
        self.page = self.context.new_page()
        self.page.set_default_timeout(TIMEOUT_MS)
        self.errors = []
        self.page.on("console", lambda message: self.errors.append(message.text)
                     if message.type == "error" else None)
        self.page.on("pageerror", lambda error: self.errors.append(str(error)))
        self.page.goto(url)
        self.page.wait_for_function("() => window.Bokeh && window.Bokeh.documents.length > 0")
        self.page.get_by_text("Noise changed").first.wait_for()
        self.page.wait_for_function(f"() => ({IMAGE_CHECKSUMS})().length === 3")

    def tab(self, name):
        # the tab header itself: the same word may also stand in the sidebar (e.g. "Privacy")
        self.page.locator(".bk-tab").get_by_text(name, exact=True).click()

    def evaluate(self, script):
        return self.page.evaluate(script)

    def wait_until(self, script, argument=None):
        self.page.wait_for_function(script, arg=argument, timeout=TIMEOUT_MS)

    def shot(self, artifacts_dir, name):
        self.page.screenshot(path=str(artifacts_dir / f"browser-{name}.png"), full_page=True)

    def close(self):
        self.context.close()


@pytest.fixture
def page(browser, server):
    page = Page(browser, server)
    yield page
    page.close()


def test_page_loads_with_the_noised_heatmaps_and_no_console_errors(page, artifacts_dir):
    assert len(page.evaluate(IMAGE_CHECKSUMS)) == 3  # true, noised, truncated
    page.page.get_by_text("eps/N = 1, alpha").first.wait_for()
    page.shot(artifacts_dir, "data-and-noise")
    assert page.errors == []


def test_changing_epsilon_over_N_redraws_the_noised_heatmap(page, artifacts_dir):
    before = page.evaluate(IMAGE_CHECKSUMS)
    field = page.page.get_by_label("N", exact=True)
    field.fill("4")
    field.press("Enter")
    page.page.get_by_text("eps/N = 0.25").first.wait_for()
    # (replaced models may linger in the document for a while: look for new images, not a count)
    page.wait_until("""([script, before]) => eval(script)().filter(sum => !before.includes(sum)).length >= 2""",
                    [IMAGE_CHECKSUMS, before])
    changed = [sum for sum in page.evaluate(IMAGE_CHECKSUMS) if sum not in before]
    # the noised and truncated heatmaps change; the true counts stay what they were
    assert len(changed) == 2
    page.shot(artifacts_dir, "noise-eps-over-N-0.25")
    assert page.errors == []


def test_start_streams_points_into_the_traces_and_pause_stops_them(browser, page, server, artifacts_dir):
    page.page.get_by_text("Fit settings").first.click()  # long runs, so pausing always meets running chains
    iterations = page.page.get_by_label("N iter", exact=True)
    iterations.fill("100000")
    iterations.press("Enter")
    page.tab("Fits")
    page.page.get_by_text("/ 100,000").first.wait_for()
    assert page.evaluate(COUNT_TRACE_POINTS) == 0
    other = Page(browser, server)  # a second session, left alone
    try:
        other.tab("Fits")
        other.page.get_by_text("Solid: the current sample").first.wait_for()
        page.page.get_by_role("button", name="Start").click()
        # 100,000 iterations into 2,000-row buffers: a row every 50 iterations
        page.wait_until(f"() => ({COUNT_TRACE_POINTS})() >= 3 * 10")
        first = page.evaluate(COUNT_TRACE_POINTS)
        page.wait_until(f"() => ({COUNT_TRACE_POINTS})() > {first}")  # still streaming
        page.page.get_by_role("button", name="Pause").click()
        # "paused" shows once a worker handed over its last rows, in the same message as them
        expect(page.page.get_by_text("paused, iteration")).to_have_count(N_METHODS, timeout=TIMEOUT_MS)
        paused = page.evaluate(COUNT_TRACE_POINTS)
        page.page.wait_for_timeout(1500)
        assert page.evaluate(COUNT_TRACE_POINTS) == paused
        page.shot(artifacts_dir, "fits-paused")
        assert other.evaluate(COUNT_TRACE_POINTS) == 0  # sessions do not share chains
        page.page.get_by_role("button", name="Resume").click()
        page.wait_until(f"() => ({COUNT_TRACE_POINTS})() > {paused}")
        page.page.get_by_role("button", name="Stop").click()
        page.page.get_by_text("stopped, iteration").first.wait_for()
        assert page.errors == [] and other.errors == []
    finally:
        other.close()


COUNT_PLOTS = """
() => {
  let plots = 0;
  for (const doc of window.Bokeh.documents)
    for (const model of doc.all_models)
      if (model.type === "Figure" || model.type === "Plot" || model.constructor.name === "Figure") plots += 1;
  return plots;
}
"""


@pytest.mark.parametrize("tab, source", [("Topics", None), ("Blocks", "synthetic-blocks"), ("Bessel", None),
                                         ("Privacy", None)])
def test_result_and_explanation_tabs_render(page, artifacts_dir, tab, source):
    if source is not None:
        page.page.locator("select").first.select_option(label=SOURCE_LABELS[source])
        page.page.get_by_text("(blocks)").first.wait_for()
    plots_before = page.evaluate(COUNT_PLOTS)
    page.tab(tab)  # tabs render when first shown: new plots arrive in the document
    page.wait_until(f"() => ({COUNT_PLOTS})() > {plots_before}")
    page.page.wait_for_timeout(1000)
    page.shot(artifacts_dir, f"tab-{tab.lower()}")
    assert page.errors == []


def test_export_downloads_the_noised_heatmaps_as_png(page, artifacts_dir, tmp_path):
    page.tab("Export")
    page.page.get_by_text("Figure as PNG").first.wait_for()
    with page.page.expect_download() as download_info:
        page.page.get_by_text("Figure as PNG").first.click()
    download = download_info.value
    assert download.suggested_filename == "lpviz_simulation_noise_heatmaps.png"
    saved = tmp_path / download.suggested_filename
    download.save_as(saved)
    assert saved.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and saved.stat().st_size > 5_000
    page.shot(artifacts_dir, "tab-export")
    assert page.errors == []


def test_enron_network_from_the_shared_file(page, enron_tarball, artifacts_dir):
    before = page.evaluate(IMAGE_CHECKSUMS)
    page.page.locator("select").first.select_option(label=SOURCE_LABELS["enron-network"])
    page.page.get_by_text("(blocks)").first.wait_for()
    page.wait_until("""([script, before]) => eval(script)().filter(sum => !before.includes(sum)).length >= 3""",
                    [IMAGE_CHECKSUMS, before])
    page.page.get_by_text(re.compile(r"enron.*: \d+ x \d+", re.IGNORECASE)).first.wait_for()
    page.shot(artifacts_dir, "enron-network")
    assert page.errors == []
