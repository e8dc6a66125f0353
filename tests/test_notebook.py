"""notebooks/tour.ipynb runs top to bottom in a fresh kernel of this project's Python, and what it
shows renders in a browser with the network blocked (Panel's resources inline)."""

import html
import json
import re
import sys
from pathlib import Path

import nbclient
import nbformat
import pytest

from lpviz.methods import METHODS

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "tour.ipynb"
CHROMIUM = "/usr/bin/chromium"  # Debian's, as in test_browser.py
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]


def _text(cell):
    parts = []
    for output in cell.get("outputs", []):
        parts.append(output.get("text", ""))
        parts.extend(str(value) for value in output.get("data", {}).values())
    return "\n".join(parts)


@pytest.fixture(scope="module")
def executed_tour(tmp_path_factory):
    """The tour executed in a kernel running this interpreter (once for the module)."""
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    assert not any(cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code"), (
        "commit the tour without outputs"
    )
    kernels = tmp_path_factory.mktemp("jupyter")
    kernel_dir = kernels / "kernels" / "lpviz-test"
    kernel_dir.mkdir(parents=True)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "lpviz test",
        "language": "python",
    }
    (kernel_dir / "kernel.json").write_text(json.dumps(spec))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("JUPYTER_PATH", str(kernels))
        client = nbclient.NotebookClient(
            notebook, kernel_name="lpviz-test", timeout=600, resources={"metadata": {"path": str(NOTEBOOK.parent)}}
        )
        client.execute()  # raises CellExecutionError on the first failing cell
    return notebook


def test_tour_notebook_executes_and_shows_every_view(executed_tour):
    notebook = executed_tour

    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    errors = [o for cell in code for o in cell.outputs if o.output_type == "error"]
    assert not errors
    by_source = {cell.source.strip().splitlines()[-1]: _text(cell) for cell in code}
    # Each view displays as a Panel object (a bundle with Panel's mime type), not as a repr.
    for view in (
        "ControlsView(data=data)",
        "NoiseView(data=data)",
        "PrivacyView(data=data)",
        "FitsView(fits=fits)",
        "topics",
        "bessel_view",
        "blocks",
        "teaching",
    ):
        assert "application/vnd.holoviews_exec.v0+json" in json.dumps(
            [o.get("data", {}) for cell in code if cell.source.strip().splitlines()[-1] == view for o in cell.outputs]
        ), view
    fitted = by_source["run_fits(fits)"]
    for method in METHODS:
        assert f"'{method}': ('done', 400)" in fitted
    assert "private" in by_source["topics.mean_scores()"] and "NPMI" in by_source["topics.mean_scores()"]
    assert "held-out MAE" in by_source["blocks.scores"]
    assert "Step 1 of" in by_source["teaching"] and "The true counts" in by_source["teaching"]
    assert "simulation (noise seed" in by_source["ControlsView(data=data)"]
    assert "blocks.png" in by_source["[(path.name, path.stat().st_size) for path in written]"]


def notebook_page(notebook):
    """The executed notebook's outputs as one HTML page, in order, as a notebook front end shows them:
    JavaScript outputs run, HTML outputs are inserted, text is shown as text."""
    parts = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if "application/javascript" in data:
                parts.append(f"<script type='text/javascript'>{data['application/javascript']}</script>")
            elif "text/html" in data:
                parts.append(f"<div>{data['text/html']}</div>")
            elif "text/plain" in data or "text" in output:
                parts.append(f"<pre>{html.escape(data.get('text/plain', output.get('text', '')))}</pre>")
    return "<!DOCTYPE html><html><head><meta charset='utf-8'></head><body>" + "\n".join(parts) + "</body></html>"


def test_the_tour_renders_offline(executed_tour, tmp_path):
    from playwright.sync_api import sync_playwright

    page_path = tmp_path / "tour.html"
    page_path.write_text(notebook_page(executed_tour))
    requested = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(offline=True, viewport={"width": 1200, "height": 900})
            context.route(re.compile(r"^https?://"), lambda route: (requested.append(route.request.url), route.abort()))
            page = context.new_page()
            errors = []
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.goto(page_path.as_uri())
            # every view of the tour is a Bokeh document with its figures, drawn from inline resources
            page.wait_for_function(
                """() => window.Bokeh && window.Bokeh.documents.reduce((n, doc) =>
                n + [...doc.all_models].filter(m => m.type === "Figure").length, 0) >= 10""",
                timeout=120_000,
            )
            page.screenshot(path=str(tmp_path / "tour.png"))
        finally:
            browser.close()
    assert errors == []
    assert requested == []  # nothing was fetched from the network (a CDN resource would be)
