"""The tour in a real JupyterLab, driven in Debian's chromium: every cell runs, the fits view is live.

JupyterLab (the test extra installs it) serves a temporary copy of
``notebooks/tour.ipynb`` from a temporary folder, on a free local port with a
token, with its config, data, runtime and settings folders its own; its kernel
is the ``lpviz`` kernelspec (:func:`lpviz.dashboard.in_jupyter.install_kernel`, what ``make
notebook`` installs). The page runs all cells, then Start in the tour's
embedded fits view must move the iteration counter (the worker threads' output
reaching the page through the kernel's comms), Pause must hold it, Resume move it
again, Stop stop it and Reset bring it back to 0. Any cell
error, anything written to a cell's stderr, any browser console error and any
request leaving the machine fail the test. The Enron section takes its
documented skip path here (``$LPVIZ_ENRON`` points at nothing): reading the
corpus cold takes a minute, and tests/test_notebook.py runs that section on
the real corpus. A screenshot after Start goes to docs/screenshots/jupyter_tour.png.
"""

import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from lpviz.methods import METHODS

REPO = Path(__file__).resolve().parents[1]
NOTEBOOK = REPO / "notebooks" / "tour.ipynb"
SCREENSHOT = REPO / "docs" / "screenshots" / "jupyter_tour.png"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
TIMEOUT_MS = 240_000  # a loaded 2-core machine
PROGRESS = re.compile(r"(?P<label>.+?) - (?P<status>\w+), iteration (?P<iteration>[\d,]+) / (?P<goal>[\d,]+)")
PROGRESS_LINE = re.compile(r", iteration [\d,]+ / [\d,]+")  # the locator's (JavaScript) pattern
START_ITERATIONS = 10_000  # what Start runs in the tour's fits view
LABELS = [method.label for method in METHODS.values()]

pytestmark = pytest.mark.browser

# every code cell ran (an execution count, no "*" prompt); the notebook model's outputs of every cell
ALL_CELLS_RAN = """() => {
  const panel = window.jupyterapp.shell.currentWidget;
  return panel.content.widgets.every(cell => cell.model.type !== "code" ||
    (cell.model.executionCount !== null && !cell.promptNode.textContent.includes("*")));
}"""
CELL_OUTPUTS = """() => window.jupyterapp.shell.currentWidget.content.widgets
  .filter(cell => cell.model.type === "code")
  .map(cell => ({source: cell.model.sharedModel.getSource(), outputs: cell.model.outputs.toJSON()}))"""
KERNEL_IDLE = """() => {
  const context = window.jupyterapp && window.jupyterapp.shell.currentWidget
    && window.jupyterapp.shell.currentWidget.sessionContext;
  const kernel = context && context.session && context.session.kernel;
  return Boolean(kernel) && kernel.name === "lpviz" && kernel.status === "idle";
}"""


def _free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def jupyterlab(tmp_path_factory):
    """JupyterLab on a copy of the tour in a folder of its own: ``(base URL, token, folder, timings)``."""
    from lpviz.dashboard.in_jupyter import install_kernel

    started = time.perf_counter()
    root = tmp_path_factory.mktemp("jupyterlab")
    folder = root / "anywhere"
    folder.mkdir()
    shutil.copy(NOTEBOOK, folder / "tour.ipynb")
    install_kernel(prefix=root / "kernels")
    settings = root / "lab-settings"
    news = settings / "@jupyterlab" / "apputils-extension"
    news.mkdir(parents=True)
    (news / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false"}))  # no news popup
    env = {key: value for key, value in os.environ.items() if not key.startswith(("JUPYTER", "JPY_"))}
    env.pop("PYTHONPATH", None)  # only the kernelspec makes the checkout importable
    env.update(
        JUPYTER_CONFIG_DIR=str(root / "config"),
        JUPYTER_DATA_DIR=str(root / "data"),
        JUPYTER_RUNTIME_DIR=str(root / "runtime"),
        JUPYTER_PATH=str(root / "kernels" / "share" / "jupyter"),
        JUPYTERLAB_SETTINGS_DIR=str(settings),
        JUPYTERLAB_WORKSPACES_DIR=str(root / "workspaces"),
        IPYTHONDIR=str(root / "ipython"),
        LPVIZ_ENRON=str(root / "no-enron-here.tar.gz"),
    )
    port, token = _free_port(), secrets.token_hex(16)
    log = (root / "jupyterlab.log").open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--allow-root", f"--port={port}"]
        + ["--ServerApp.ip=127.0.0.1", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}"]
        + [f"--ServerApp.root_dir={folder}", "--LabApp.expose_app_in_browser=True"]
        + ["--LabApp.extension_manager=readonly"],
        env=env,
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
                    pytest.fail(f"JupyterLab did not start:\n{(root / 'jupyterlab.log').read_text()[-3000:]}")
                time.sleep(0.3)
        yield base, token, folder, {"server_start_s": time.perf_counter() - started}
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


def _progress(cell):
    """``{label: (status, iteration, goal)}`` as the fits view's progress lines read now."""
    lines = cell.get_by_text(PROGRESS_LINE).all_inner_texts()
    found = {}
    for line in lines:
        match = PROGRESS.search(line)
        if match:
            number = int(match["iteration"].replace(",", "")), int(match["goal"].replace(",", ""))
            found[match["label"].strip()] = (match["status"], *number)
    return found


def _wait_for(page, cell, predicate, what, timeout_s=120):
    deadline = time.monotonic() + timeout_s
    while True:
        progress = _progress(cell)
        if set(progress) == set(LABELS) and predicate(progress):
            return progress
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: the fits view reads {progress}")
        page.wait_for_timeout(200)


def _press(cell, button):
    cell.get_by_role("button", name=button, exact=True).click()


def _standing_still(page, cell, after):
    """The progress once the page has caught up with what the workers did before they paused or
    stopped; fails if it still moves two seconds later."""
    # settled: the same for three seconds (on a loaded machine the page catches up in steps)
    settled, same, deadline = _progress(cell), 0, time.monotonic() + 60
    while same < 3 and time.monotonic() < deadline:
        page.wait_for_timeout(1000)
        now = _progress(cell)
        same = same + 1 if now == settled else 0
        settled = now
    page.wait_for_timeout(3000)
    assert _progress(cell) == settled, f"the counter moves after {after}"
    return settled


def test_the_tour_runs_in_jupyterlab_and_its_fits_view_is_live(jupyterlab, artifacts_dir):
    from playwright.sync_api import sync_playwright

    base, token, folder, timings = jupyterlab
    started = time.perf_counter()
    console_errors, outside = [], []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": 1400, "height": 1000})
            # nothing leaves the machine: a request to anywhere but the local JupyterLab fails the test
            context.route(
                re.compile(r"^https?://(?!127\.0\.0\.1[:/])"),
                lambda route: (outside.append(route.request.url), route.abort()),
            )
            page = context.new_page()
            page.on("console", lambda message: message.type == "error" and console_errors.append(message.text))
            page.on("pageerror", lambda error: console_errors.append(f"page error: {error}"))
            page.goto(f"{base}/lab/tree/tour.ipynb?token={token}")
            page.wait_for_function(KERNEL_IDLE, timeout=TIMEOUT_MS)
            timings["lab_and_kernel_s"] = time.perf_counter() - started

            mark = time.perf_counter()
            page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
            page.wait_for_timeout(500)
            page.wait_for_function(ALL_CELLS_RAN, timeout=TIMEOUT_MS, polling=500)
            timings["run_all_cells_s"] = time.perf_counter() - mark
            cells = page.evaluate(CELL_OUTPUTS)
            errors = [o for cell in cells for o in cell["outputs"] if o["output_type"] == "error"]
            assert errors == [], [f"{e['ename']}: {e['evalue']}" for e in errors]
            stderr = [o["text"] for cell in cells for o in cell["outputs"] if o.get("name") == "stderr"]
            assert stderr == []
            enron = next(cell for cell in cells if "enron_source()" in cell["source"])
            assert "Skipped: no Enron corpus at" in json.dumps(enron["outputs"])

            fits_cell = page.locator(".jp-CodeCell").filter(has_text="FitsView(fits=fitting.fits)")
            assert fits_cell.count() == 1
            fits_cell.scroll_into_view_if_needed()
            # the cell above ran 400 iterations to the end; Start runs fresh chains of 10,000
            _wait_for(page, fits_cell, lambda p: all(v[:2] == ("done", 400) for v in p.values()), "after run")

            mark = time.perf_counter()
            _press(fits_cell, "Start")
            first = _wait_for(
                page,
                fits_cell,
                lambda p: any(v[0] == "running" and v[1] > 0 and v[2] == START_ITERATIONS for v in p.values()),
                "after Start",
            )
            timings["start_to_first_iterations_s"] = time.perf_counter() - mark
            moved = _wait_for(
                page,
                fits_cell,
                lambda p: sum(v[1] for v in p.values()) >= sum(v[1] for v in first.values()) + 30,
                "the counter moving",
            )
            page.wait_for_timeout(1500)  # let the traces draw a few points for the screenshot
            for target in (SCREENSHOT, artifacts_dir / "jupyter_tour.png"):
                page.screenshot(path=str(target))

            _press(fits_cell, "Pause")
            _wait_for(page, fits_cell, lambda p: all(v[0] in ("paused", "done") for v in p.values()), "after Pause")
            paused = _standing_still(page, fits_cell, "Pause")
            _press(fits_cell, "Resume")
            _wait_for(
                page,
                fits_cell,
                lambda p: sum(v[1] for v in p.values()) > sum(v[1] for v in paused.values()),
                "after Resume",
            )
            _press(fits_cell, "Stop")
            _wait_for(page, fits_cell, lambda p: all(v[0] in ("stopped", "done") for v in p.values()), "after Stop")
            stopped = _standing_still(page, fits_cell, "Stop")
            assert any(v[0] == "stopped" and v[1] < START_ITERATIONS for v in stopped.values()), stopped
            _press(fits_cell, "Reset")
            _wait_for(
                page, fits_cell, lambda p: all(v == ("idle", 0, START_ITERATIONS) for v in p.values()), "after Reset"
            )
            timings["browser_s"] = time.perf_counter() - started
        finally:
            browser.close()
    timings["counter"] = {"first": first, "moved": moved, "paused": paused, "stopped": stopped}
    (artifacts_dir / "jupyter_timing.json").write_text(json.dumps(timings, indent=1))
    print(json.dumps(timings))
    assert outside == []
    assert console_errors == []
