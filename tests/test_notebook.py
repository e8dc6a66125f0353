"""notebooks/tour.ipynb runs top to bottom in a fresh kernel of this project's Python."""

import json
import sys
from pathlib import Path

import nbclient
import nbformat
import pytest

from lpviz.methods import METHODS

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "tour.ipynb"


@pytest.fixture
def venv_kernel(tmp_path, monkeypatch):
    """A kernelspec running this interpreter, so the tour uses the project's environment."""
    kernel_dir = tmp_path / "kernels" / "lpviz-test"
    kernel_dir.mkdir(parents=True)
    spec = {"argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "lpviz test", "language": "python"}
    (kernel_dir / "kernel.json").write_text(json.dumps(spec))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path))
    return "lpviz-test"


def _text(cell):
    parts = []
    for output in cell.get("outputs", []):
        parts.append(output.get("text", ""))
        parts.extend(str(value) for value in output.get("data", {}).values())
    return "\n".join(parts)


def test_tour_notebook_executes_and_shows_every_view(venv_kernel):
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    assert not any(cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code"), \
        "commit the tour without outputs"
    client = nbclient.NotebookClient(notebook, kernel_name=venv_kernel, timeout=600,
                                     resources={"metadata": {"path": str(NOTEBOOK.parent)}})
    client.execute()  # raises CellExecutionError on the first failing cell

    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    errors = [o for cell in code for o in cell.outputs if o.output_type == "error"]
    assert not errors
    by_source = {cell.source.strip().splitlines()[-1]: _text(cell) for cell in code}
    # Each view displays as a Panel object (a bundle with Panel's mime type), not as a repr.
    for view in ("ControlsView(data=data)", "NoiseView(data=data)", "PrivacyView(data=data)", "FitsView(fits=fits)",
                 "topics", "bessel_view", "blocks"):
        assert "application/vnd.holoviews_exec.v0+json" in json.dumps(
            [o.get("data", {}) for cell in code if cell.source.strip().splitlines()[-1] == view
             for o in cell.outputs]), view
    fitted = by_source["run_fits(fits)"]
    for method in METHODS:
        assert f"'{method}': ('done', 400)" in fitted
    assert "private" in by_source["topics.mean_scores()"] and "NPMI" in by_source["topics.mean_scores()"]
    assert "held-out MAE" in by_source["blocks.scores"]
    assert "simulation (noise seed" in by_source["ControlsView(data=data)"]
    assert "blocks.png" in by_source["[(path.name, path.stat().st_size) for path in written]"]
