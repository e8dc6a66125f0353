"""Issue 58 item 5, uploads through ``Dashboard()`` in a JupyterLab cell, tried as an attacker would.

Before: a 20 MB file (beyond the 10 MiB messages Jupyter's server takes from the page) was sent
whole, the notebook's connection to its kernel dropped, and the file was lost without a word; and
a file within the limit was read as "upload.txt", then "is empty" replaced its message (in a
notebook the value and the name reach the kernel as two messages, and each was read as a file).
Now the page does not send the large file, the data card names its size, the limit and the
JupyterLab option that raises it, and a file after it loads once, under its own name.
"""

import re

import nbformat
import pytest

from tests.browser_harness import (
    ALL_CELLS_RAN,
    CELL_OUTPUTS,
    JUPYTER_TIMEOUT_MS,
    TEXTS_IN_PAGE,
    jupyterlab,
    kernel_idle,
)

pytestmark = pytest.mark.browser


def test_an_upload_in_a_notebook_is_refused_in_words_beyond_jupyters_limit_and_read_once_within_it(
    browser, tmp_path_factory
):
    from lpviz.dashboard.in_jupyter import install_kernel

    root = tmp_path_factory.mktemp("lab-upload")
    folder = root / "notebooks"
    folder.mkdir()
    install_kernel(prefix=root / "kernels")
    cell = nbformat.v4.new_code_cell("from lpviz.dashboard import Dashboard\nDashboard()")
    notebook = nbformat.v4.new_notebook(cells=[cell])
    notebook.metadata["kernelspec"] = {"name": "lpviz", "display_name": "lpviz", "language": "python"}
    nbformat.write(notebook, folder / "upload.ipynb")
    with jupyterlab(root, folder, root / "kernels") as (base, token, _):
        page = browser.new_page(viewport={"width": 1500, "height": 1000})
        errors = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        try:
            page.goto(f"{base}/lab/tree/upload.ipynb?token={token}")
            page.wait_for_function(kernel_idle("lpviz"), timeout=JUPYTER_TIMEOUT_MS)
            page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
            page.wait_for_timeout(500)
            page.wait_for_function(ALL_CELLS_RAN, timeout=JUPYTER_TIMEOUT_MS, polling=500)
            outputs = [o for cell in page.evaluate(CELL_OUTPUTS) for o in cell["outputs"]]
            assert [o for o in outputs if o["output_type"] == "error" or o.get("name") == "stderr"] == []
            page.locator("select:has(option:text-is('a file you upload'))").first.select_option(
                label="a file you upload"
            )
            page.get_by_text("no file uploaded yet").first.wait_for(timeout=JUPYTER_TIMEOUT_MS)
            chooser = page.locator("input[type=file]")

            big = root / "big.csv"
            big.write_text("1,2,3,4,5,6,7,8,9,0\n" * 1_000_000)  # 20,000,000 bytes
            chooser.set_input_files(str(big))
            said = page.get_by_text(
                re.compile(
                    r"big\.csv was not uploaded: it is 19\.1 MiB, and this notebook's server takes files up to 7\."
                )
            )
            said.first.wait_for(timeout=60_000)
            assert page.get_by_text("websocket_max_message_size").count() >= 1

            within = root / "within.csv"
            within.write_text("".join(f"{i % 7},{i % 3},1,0,2,0,1,3,0,{i % 5}\n" for i in range(150_000)))  # 3 MB
            chooser.set_input_files(str(within))
            page.get_by_text(re.compile(r"within\.csv: 150,000 x 10")).first.wait_for(timeout=JUPYTER_TIMEOUT_MS)
            page.wait_for_timeout(2000)  # a second reading (of the name alone) would come now
            texts = " ".join(page.evaluate(TEXTS_IN_PAGE))
            assert "is empty" not in texts and "upload.txt" not in texts, texts[:2000]
            status = "() => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.connectionStatus"
            assert page.evaluate(status) == "connected"
            assert errors == []
        finally:
            page.close()
