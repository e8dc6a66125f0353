"""notebooks/tour.ipynb runs top to bottom from a folder outside the checkout, in a fresh kernel of
the ``lpviz`` kernelspec (this interpreter with the checkout importable, as ``make notebook``
installs it), and what it shows renders in a browser with the network blocked (Panel's resources
inline). The views stay live across outputs: a fit started from one output redraws a view of the same
session shown in others (each output is its own Bokeh document), with nothing fetched from a CDN."""

import html
import json
import re
import shutil
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


def lpviz_kernel(folder):
    """The ``lpviz`` kernelspec installed under ``folder`` (what ``make notebook`` installs into the
    virtual environment): returns the JUPYTER_PATH entry that finds it."""
    from lpviz.dashboard.in_jupyter import KERNEL_NAME, install_kernel

    spec = Path(install_kernel(prefix=folder))
    assert spec.name == KERNEL_NAME and json.loads((spec / "kernel.json").read_text())["env"]["PYTHONPATH"]
    return folder / "share" / "jupyter"


@pytest.fixture(scope="module")
def executed_tour(tmp_path_factory):
    """The tour copied into a folder of its own and executed there with its kernel (once for the module)."""
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    assert not any(cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code"), (
        "commit the tour without outputs"
    )
    assert notebook.metadata["kernelspec"]["name"] == "lpviz"
    folder = tmp_path_factory.mktemp("anywhere")
    shutil.copy(NOTEBOOK, folder / "tour.ipynb")
    kernels = lpviz_kernel(tmp_path_factory.mktemp("jupyter"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("JUPYTER_PATH", str(kernels))
        patch.delenv("PYTHONPATH", raising=False)  # only the kernelspec makes the checkout importable
        client = nbclient.NotebookClient(notebook, timeout=600, resources={"metadata": {"path": str(folder)}})
        client.execute()  # raises CellExecutionError on the first failing cell
    return notebook


def test_tour_notebook_executes_and_shows_every_view(executed_tour):
    notebook = executed_tour

    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    errors = [o for cell in code for o in cell.outputs if o.output_type == "error"]
    assert not errors
    # nothing in red: no warning (param's, tqdm's, ...) printed by any cell
    assert [o.text for cell in code for o in cell.outputs if o.get("name") == "stderr"] == []
    by_source = {cell.source.strip().splitlines()[-1]: _text(cell) for cell in code}

    # Each view displays as a Panel object (a bundle with Panel's mime type), not as a repr.
    def shown(view):
        outputs = [
            o.get("data", {}) for cell in code if cell.source.strip().splitlines()[-1] == view for o in cell.outputs
        ]
        return "application/vnd.holoviews_exec.v0+json" in json.dumps(outputs)

    for view in (
        "ControlsView(data=topics.data)",
        "NoiseView(data=topics.data)",
        "PrivacyView(data=topics.data)",
        "FitsView(fits=fitting.fits)",
        "topics_view",
        "bessel_view",
        "blocks",
        "Teaching(fits=teaching.fits)",
    ):
        assert shown(view), view
    fitted = by_source["fitting.run(n_iter=400, burn_in=100, thin=10)"]
    for method in METHODS:
        assert f"'{method}': ('done', 400)" in fitted
    assert "private" in by_source["topics_view.mean_scores()"] and "NPMI" in by_source["topics_view.mean_scores()"]
    assert "held-out MAE" in by_source["blocks.scores"]
    assert "Step 1 of" in by_source["Teaching(fits=teaching.fits)"]
    assert "The true counts" in by_source["Teaching(fits=teaching.fits)"]
    assert "simulation (noise seed" in by_source["ControlsView(data=topics.data)"]
    assert "blocks.png" in by_source["[(path.name, path.stat().st_size) for path in written]"]
    # the Enron section: the corpus found the documented way ($LPVIZ_ENRON, else the shared subset)
    from lpviz.reproduce.chains import enron_source

    enron = by_source["enron_view"]
    if Path(enron_source()).exists():
        assert "84 x 84 network" in enron and shown("enron_view")
    else:
        assert "Skipped: no Enron corpus at" in enron


def test_each_section_owns_its_session(executed_tour):
    """A later section never changes an earlier one's data: each builds its own session."""
    sources = [cell.source for cell in executed_tour.cells if cell.cell_type == "code"]
    made = [
        line.split("=")[0].strip() for source in sources for line in source.splitlines() if "notebook.session(" in line
    ]
    assert len(made) == len(set(made)) >= 6, made
    assert not any(re.search(r"\.settings\.source\s*=", source) for source in sources)


def _rendered_twice(view):
    """``view`` rendered into two notebook outputs (two Bokeh documents), as two cells showing it do."""
    from panel.io.state import state

    before = set(state._views)
    view._repr_mimebundle_()
    view._repr_mimebundle_()
    return [state._views[ref][2] for ref in set(state._views) - before]


def test_views_stay_live_across_outputs(monkeypatch):
    """Start pressed in one output redraws the same session's views in the others: without
    notebook.extension() Panel takes the stylesheets of the output whose button was pressed and
    raises "Models must be owned by only a single document"; with it, every redraw works and every
    stylesheet is inline (nothing is fetched from Panel's CDN)."""
    from bokeh.models import ImportedStyleSheet
    from panel.io.state import set_curdoc
    from panel.reactive import Reactive

    from lpviz.dashboard import in_jupyter as notebook
    from lpviz.dashboard.views.fits_view import FitsView
    from lpviz.dashboard.views.topics_view import TopicsView

    # notebook.extension() patches Panel for this process: undone after the test
    monkeypatch.setattr(Reactive, "_get_properties", Reactive._get_properties)
    notebook.extension()
    session = notebook.session(source="synthetic-topics", epsilon=1.0, N=1, n_iter=30, burn_in=10, thin=2)
    docs = _rendered_twice(FitsView(fits=session.fits)) + _rendered_twice(TopicsView(fits=session.fits))
    assert len(set(map(id, docs))) == 4
    with set_curdoc(docs[0]):  # the button's output
        session.fits.start()
        for runner in session.fits.runners.values():
            assert runner.join(120)
        assert session.fits.drain() > 0
        statuses = {name: runner.status for name, runner in session.fits.runners.items()}
        session.fits.reset()
    assert set(statuses.values()) == {"done"}
    assert {runner.status for runner in session.fits.runners.values()} == {"idle"}
    # a cell (no current document) steers the same chains
    assert set(session.run().values()) == {("done", 30)}
    sheets = [model for doc in docs for model in doc.models if isinstance(model, ImportedStyleSheet)]
    assert [str(sheet.url) for sheet in sheets if "cdn" in str(sheet.url)] == []


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


def test_a_kernel_with_subshells_is_named_with_its_fix():
    """JupyterLab sends widget messages to kernel subshells when the kernel has them (ipykernel >= 7):
    the views' clicks then run on a thread beside their updates, which corrupts the page's updates.
    lpviz's kernel has none (the test extra pins ipykernel < 7); a kernel with them gets a warning
    that names the fix when the extension loads."""
    from types import SimpleNamespace

    import ipykernel
    from ipykernel.kernelbase import Kernel

    from lpviz.dashboard.in_jupyter import SUBSHELL_FIX, subshell_problem

    assert int(ipykernel.__version__.split(".")[0]) < 7
    assert not hasattr(Kernel, "_supports_kernel_subshells") or not Kernel._supports_kernel_subshells
    assert subshell_problem(None) == ""
    assert subshell_problem(SimpleNamespace(_supports_kernel_subshells=False)) == ""
    problem = subshell_problem(SimpleNamespace(_supports_kernel_subshells=True))
    assert "subshells" in problem and SUBSHELL_FIX in problem


def test_the_extension_warns_in_a_kernel_with_subshells(monkeypatch):
    from types import SimpleNamespace

    from lpviz.dashboard import in_jupyter as notebook

    monkeypatch.setattr(notebook, "_running_kernel", lambda: SimpleNamespace(_supports_kernel_subshells=True))
    with pytest.warns(RuntimeWarning, match="Kernel Comms over subshells"):
        notebook.extension()
    monkeypatch.setattr(notebook, "_running_kernel", lambda: None)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        notebook.extension()
