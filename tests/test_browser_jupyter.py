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
import re
import shutil
import time
from pathlib import Path

import pytest

from lpviz.methods import METHODS
from tests.browser_harness import (
    ALL_CELLS_RAN,
    CELL_OUTPUTS,
    CHROMIUM,
    CHROMIUM_ARGS,
    kernel_idle,
)
from tests.browser_harness import JUPYTER_TIMEOUT_MS as TIMEOUT_MS
from tests.browser_harness import cell_progress as _progress
from tests.browser_harness import jupyterlab as running_jupyterlab

REPO = Path(__file__).resolve().parents[1]
NOTEBOOK = REPO / "notebooks" / "tour.ipynb"
SCREENSHOT = REPO / "docs" / "screenshots" / "jupyter_tour.png"
START_ITERATIONS = 10_000  # what Start runs in the tour's fits view
LABELS = [method.label for method in METHODS.values()]
KERNEL_IDLE = kernel_idle("lpviz")

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def jupyterlab(tmp_path_factory):
    """JupyterLab on a copy of the tour in a folder of its own: ``(base URL, token, folder, timings)``."""
    from lpviz.dashboard.in_jupyter import install_kernel

    root = tmp_path_factory.mktemp("jupyterlab")
    folder = root / "anywhere"
    folder.mkdir()
    shutil.copy(NOTEBOOK, folder / "tour.ipynb")
    install_kernel(prefix=root / "kernels")
    env = {"LPVIZ_ENRON": str(root / "no-enron-here.tar.gz")}
    with running_jupyterlab(root, folder, root / "kernels", env=env) as (base, token, seconds):
        yield base, token, folder, {"server_start_s": seconds}


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
