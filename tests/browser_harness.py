"""The browser harness shared by the served-dashboard tests (a pytest plugin, see conftest.py).

``python -m lpviz.dashboard.serve`` (what ``make serve`` runs) listens on a free local
port for each test module; each test opens its own page (its own session) in
Debian's chromium driven by Playwright. What the page shows is read from the
Bokeh documents in the browser (``window.Bokeh.documents``), so points are
counted, not eyeballed.
"""

import contextlib
import html
import json
import os
import re
import secrets
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

from lpviz.dashboard.session.settings import SOURCES
from lpviz.methods import METHODS

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
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


class Server:
    def __init__(self, url, pid, port, log_path):
        self.url, self.pid, self.port, self.log_path = url, pid, port, log_path

    def log_tail(self, lines=80):
        """The end of the server's own output (its warnings and tracebacks)."""
        text = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])

    def thread_stacks(self, wait=60.0):
        """Every thread's stack in the server now and its sessions' chains (lpviz.dashboard.serve prints them on
        SIGUSR1): where a hung run waits. The sessions come when the server's main thread next runs
        Python (at once from an idle loop; a loaded one, busy importing, took over 2 s): read until
        they end, at most ``wait`` seconds (a main thread stuck for good: the stacks alone)."""
        from lpviz.dashboard.serve import SESSIONS_END

        before = len(self.log_path.read_text(errors="replace"))
        try:
            os.kill(self.pid, signal.SIGUSR1)
        except OSError as error:
            return f"not asked: {error}"
        deadline = time.monotonic() + wait
        while True:
            printed = self.log_path.read_text(errors="replace")[before:]
            if SESSIONS_END in printed or time.monotonic() > deadline:
                return printed or "(nothing printed)"
            time.sleep(0.1)

    def cpu_seconds(self):
        """CPU time the server process has used (all its threads)."""
        with open(f"/proc/{self.pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def cpu_rate(self, seconds):
        """Cores the server keeps busy over the next ``seconds``."""
        start = self.cpu_seconds()
        time.sleep(seconds)
        return (self.cpu_seconds() - start) / seconds


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with served(tmp_path_factory) as running:
        yield running


@contextlib.contextmanager
def served(tmp_path_factory, *options, command=None, cwd=REPO, env=None, app="app"):
    """``python -m lpviz.dashboard.serve`` with ``options`` on a free port, as `make serve` runs it, answering.

    ``command``: another server command than this checkout's (e.g. ``[VENV/bin/lpviz, "serve"]``), run
    in ``cwd`` with ``env`` (default this process's), serving the page ``/app`` (or ``app``)."""
    port = free_port()
    panel = [*(command or [sys.executable, "-m", "lpviz.dashboard.serve"]), "--port", str(port), *options]
    # kept where a failed test can show its end (CI prints only the test report)
    log_path = tmp_path_factory.mktemp("server") / f"browser-server-{port}.log"
    log = open(log_path, "w")
    process = subprocess.Popen(panel, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://localhost:{port}/{app}"
    deadline = time.monotonic() + 120
    while True:
        if process.poll() is not None:
            pytest.fail(f"panel serve exited with code {process.returncode}: {log_path.read_text()[-3000:]}")
        try:
            # A first render under load can take more than 5 s, and an abandoned request still
            # builds its session: a short timeout would pile sessions up and never succeed.
            with urllib.request.urlopen(url, timeout=60) as response:
                if response.status == 200:
                    break
        except OSError:
            if time.monotonic() > deadline:
                process.kill()
                pytest.fail(f"panel serve did not answer on {url} within 120 s")
            time.sleep(0.5)
    try:
        yield Server(url, process.pid, port, log_path)
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
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
    """One browser session on the dashboard, collecting console errors and failed requests (every one:
    a style sheet of Panel's CDN too, which dashboard.serving.resources keeps on this server, issue 37 MEDIUM 5)."""

    def __init__(self, browser, url, viewport=None):
        self.context = browser.new_context(viewport=viewport or {"width": 1500, "height": 1000})
        self.page = self.context.new_page()
        self.page.set_default_timeout(TIMEOUT_MS)
        self.errors = []
        self.requests, self.console = [], []  # every URL asked for and every console message, from the start
        self.page.on("request", lambda request: self.requests.append(request.url))
        self.page.on("console", lambda message: self.console.append((message.type, message.text)))
        self.page.on("console", lambda message: self.errors.append(message.text) if message.type == "error" else None)
        self.page.on("requestfailed", lambda request: self.errors.append(f"failed: {request.url}"))
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

    def fill(self, label, value):
        field = self.page.get_by_label(label, exact=True)
        field.fill(str(value))
        field.press("Enter")

    def choose(self, source):
        self.source_select().select_option(label=SOURCE_LABELS[source])

    def one_alpha(self):
        """Untick per-row noise (the opening preset's): one alpha for every row, set by epsilon and N.
        The box and its label share a shadow root; the label is no <label>."""
        self.page.get_by_text("heterogeneous noise", exact=True).first.evaluate(
            "label => label.parentNode.querySelector('input[type=checkbox]').click()"
        )
        self.page.get_by_label("N", exact=True).wait_for()

    def source_select(self):
        """The data selector (the presets have a selector of their own)."""
        label = SOURCE_LABELS["synthetic-topics"]
        return self.page.locator(f"select:has(option:text-is('{label}'))").first

    def click(self, name):
        self.page.get_by_role("button", name=name).click()

    def statuses(self, status, count=N_METHODS, timeout_ms=TIMEOUT_MS):
        """Wait until ``count`` progress lines read ``status`` (at most ``timeout_ms``)."""
        expect(self.page.get_by_text(f"{status}, iteration")).to_have_count(count, timeout=timeout_ms)

    def timed(self, action, done, poll_ms=5):
        """Seconds from ``action`` (a button name, clicked inside the page) until the JavaScript
        condition ``done`` holds, timed by the page itself."""
        button = self.page.get_by_role("button", name=action, exact=True).element_handle()
        return self.page.evaluate(
            f"""async (button) => {{
            const done = {done};
            const start = performance.now();
            button.click();
            while (!done()) {{
                if (performance.now() - start > {TIMEOUT_MS}) throw new Error("timed out waiting after " + "{action}");
                await new Promise(resolve => setTimeout(resolve, {poll_ms}));
            }}
            return (performance.now() - start) / 1000;
        }}""",
            button,
        )

    def long_runs(self, iterations=100_000):
        self.page.get_by_text("Fit settings").first.click()
        self.fill("N iter", iterations)
        self.tab("Fits")
        self.page.get_by_text(f"/ {iterations:,}").first.wait_for()


def count_texts(text):
    """JavaScript: how many text models (Markdown panes) of the page say ``text``."""
    return f"""() => {{
      let n = 0;
      for (const doc of window.Bokeh.documents) for (const m of doc.all_models)
        if (typeof m.text === "string" && m.text.includes({json.dumps(text)})) n++;
      return n; }}"""


# The progress lines the page holds (the models' text): what the server last sent. A line reads
# "<method> - <status>, iteration <i> / <goal>": a plot title that names an iteration is none.
# The texts of the page's text models whose views are in the page.
TEXTS_IN_PAGE = """() => {
  const texts = [];
  for (const doc of window.Bokeh.documents) for (const m of doc.all_models) {
    if (typeof m.text !== "string" || !m.text) continue;
    const view = window.Bokeh.index.find_one(m);
    if (view && view.el && view.el.isConnected) texts.push(m.text);
  }
  return texts; }"""

PROGRESS_TEXTS = """() => {
  const lines = [];
  for (const doc of window.Bokeh.documents) for (const m of doc.all_models)
    if (typeof m.text === "string" && /, iteration [\\d,]+ \\/ [\\d,]+/.test(m.text)) lines.push(m.text);
  return lines; }"""


CONSOLE_TAIL = 20  # console messages a failed served test's report shows


def record_latency(name, seconds):
    """Add a latency a user feels to artifacts/browser-latency.json (reported, not asserted)."""
    path = REPO / "artifacts" / "browser-latency.json"
    path.parent.mkdir(exist_ok=True)
    figures = json.loads(path.read_text()) if path.exists() else {}
    figures[name] = round(seconds, 3)
    path.write_text(json.dumps(figures, indent=2))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed served-dashboard test shows what the server printed and what the page read."""
    outcome = yield
    report = outcome.get_result()
    if not report.failed or call.when != "call":
        return
    server = item.funcargs.get("server")
    if server is not None:
        report.sections.append(("server output (last lines)", server.log_tail()))
        report.sections.append(("server threads (kill -USR1)", server.thread_stacks()))
    page = item.funcargs.get("page")
    if isinstance(page, Page):
        try:
            lines = [re.sub(r"<[^>]*>", "", html.unescape(text)).strip() for text in page.evaluate(PROGRESS_TEXTS)]
            report.sections.append(("progress lines on the page", "\n".join(lines) or "(none)"))
        except Exception as error:  # a page that broke cannot be read: say so, keep the report
            report.sections.append(("progress lines on the page", f"unreadable: {error}"))
        # a page whose BokehJS failed on a message stops applying the ones after it: its errors say so
        report.sections.append(("page errors", "\n".join(page.errors) or "(none)"))
        tail = [f"{kind}: {text}" for kind, text in page.console[-CONSOLE_TAIL:]]
        report.sections.append((f"page console (last {CONSOLE_TAIL})", "\n".join(tail) or "(none)"))


@pytest.fixture
def page(browser, server):
    page = Page(browser, server.url)
    yield page
    page.close()


COUNT_PLOTS = """
() => {
  let plots = 0;
  for (const doc of window.Bokeh.documents)
    for (const model of doc.all_models)
      if (model.type === "Figure" || model.type === "Plot" || model.constructor.name === "Figure") plots += 1;
  return plots;
}
"""

# The figures shown (not those of a hidden tab): each one's title, x range, images' sizes and x label.
FIGURES = """
() => {
  const figures = [];
  for (const doc of window.Bokeh.documents)
    for (const model of doc.all_models) {
      if (model.type !== "Figure" && model.constructor.name !== "Figure") continue;
      // a figure of a hidden tab (kept in the page once built) is not shown
      const view = window.Bokeh.index.find_one(model);
      if (view && view.el && !view.el.checkVisibility({visibilityProperty: true})) continue;
      const images = [];
      for (const renderer of model.renderers || []) {
        const source = renderer.data_source;
        if (!source) continue;
        const data = source.data instanceof Map ? Object.fromEntries(source.data) : source.data;
        if (data && data.image !== undefined) for (const image of data.image) images.push(image.length);
      }
      const axis = (model.below || [])[0];
      figures.push({title: model.title ? model.title.text : "", start: model.x_range.start,
                    end: model.x_range.end, images, xlabel: axis ? axis.axis_label : ""});
    }
  return figures;
}
"""

# Whether any loading spinner of the page spins: Panel's spinners are HTML models classed "loader", plus
# "spin" while their value is true; the header's (dashboard.serving.paint.busy_spinner) an HTML text of those classes.
SPINNING = """
() => {
  for (const doc of window.Bokeh.documents)
    for (const model of doc.all_models) {
      const classes = model.css_classes || [];
      if (classes.includes("loader") && classes.includes("spin")) return true;
      if (typeof model.text === "string" && model.text.includes("loader spin")) return true;
    }
  return false;
}
"""


# JupyterLab driven in chromium (tests/test_browser_jupyter.py: the tour in the checkout's kernel;
# tests/test_package.py: a Dashboard() notebook in the installed environment's own kernel).
JUPYTER_TIMEOUT_MS = 240_000  # a loaded 2-core machine
# every code cell ran (an execution count, no "*" prompt); the notebook model's outputs of every cell
ALL_CELLS_RAN = """() => {
  const panel = window.jupyterapp.shell.currentWidget;
  return panel.content.widgets.every(cell => cell.model.type !== "code" ||
    (cell.model.executionCount !== null && !cell.promptNode.textContent.includes("*")));
}"""
CELL_OUTPUTS = """() => window.jupyterapp.shell.currentWidget.content.widgets
  .filter(cell => cell.model.type === "code")
  .map(cell => ({source: cell.model.sharedModel.getSource(), outputs: cell.model.outputs.toJSON()}))"""
JUPYTER_PROGRESS = re.compile(r"(?P<label>.+?) - (?P<status>\w+), iteration (?P<iteration>[\d,]+) / (?P<goal>[\d,]+)")
JUPYTER_PROGRESS_LINE = re.compile(r", iteration [\d,]+ / [\d,]+")  # the locator's (JavaScript) pattern


def kernel_idle(name):
    """JavaScript: the open notebook's kernel is ``name`` (its kernelspec) and idle."""
    return f"""() => {{
  const context = window.jupyterapp && window.jupyterapp.shell.currentWidget
    && window.jupyterapp.shell.currentWidget.sessionContext;
  const kernel = context && context.session && context.session.kernel;
  return Boolean(kernel) && kernel.name === {json.dumps(name)} && kernel.status === "idle";
}}"""


def cell_progress(cell):
    """``{label: (status, iteration, goal)}`` as the progress lines in a notebook cell's output read now."""
    found = {}
    for line in cell.get_by_text(JUPYTER_PROGRESS_LINE).all_inner_texts():
        match = JUPYTER_PROGRESS.search(line)
        if match:
            number = int(match["iteration"].replace(",", "")), int(match["goal"].replace(",", ""))
            found[match["label"].strip()] = (match["status"], *number)
    return found


@contextlib.contextmanager
def jupyterlab(root, folder, kernels, env=None):
    """JupyterLab serving ``folder`` on a free local port with a token, its config, data, runtime and
    settings folders under ``root``, its kernelspecs those installed with ``--prefix kernels`` (none of
    the machine's), no PYTHONPATH (only a kernelspec makes anything importable), no news popup;
    ``env`` added to its environment (its kernels inherit it). ``(base URL, token, seconds to answer)``."""
    started = time.perf_counter()
    settings = root / "lab-settings"
    news = settings / "@jupyterlab" / "apputils-extension"
    news.mkdir(parents=True)
    (news / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false"}))
    environment = {key: value for key, value in os.environ.items() if not key.startswith(("JUPYTER", "JPY_"))}
    environment.pop("PYTHONPATH", None)
    environment.update(env or {})
    environment.update(
        JUPYTER_CONFIG_DIR=str(root / "config"),
        JUPYTER_DATA_DIR=str(root / "data"),
        JUPYTER_RUNTIME_DIR=str(root / "runtime"),
        JUPYTER_PATH=str(Path(kernels) / "share" / "jupyter"),
        JUPYTERLAB_SETTINGS_DIR=str(settings),
        JUPYTERLAB_WORKSPACES_DIR=str(root / "workspaces"),
        IPYTHONDIR=str(root / "ipython"),
    )
    port, token = free_port(), secrets.token_hex(16)
    log_path = root / "jupyterlab.log"
    log = log_path.open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--allow-root", f"--port={port}"]
        + ["--ServerApp.ip=127.0.0.1", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}"]
        + [f"--ServerApp.root_dir={folder}", "--LabApp.expose_app_in_browser=True"]
        + ["--LabApp.extension_manager=readonly"],
        env=environment,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=5):
                    break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"JupyterLab did not start:\n{log_path.read_text()[-3000:]}")
                time.sleep(0.3)
        yield base, token, time.perf_counter() - started
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()
