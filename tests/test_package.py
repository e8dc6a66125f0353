"""The package as a user gets it: build the sdist and the wheel, install the wheel
into a fresh virtual environment, and run the CLI and a small fit from there.

This catches what the editable install of the test environment hides: a module
or data file left out of the package, a dependency the code imports but the
package does not declare, an entry point that does not start. The fresh
environment does not reinstall lpviz's third-party dependencies (gigabytes): it
sees the test environment's site-packages through a ``.pth`` line, which adds
that folder to ``sys.path`` but does not run its ``.pth`` files, so the
editable lpviz of the test environment is not importable there; every test
checks that the lpviz it ran is the one inside the fresh environment. Whether
the installed lpviz declares every third-party package it imports is checked
separately, against the wheel's metadata.

The dashboard is in the wheel (``lpviz.dashboard``, issue 55): from an empty folder outside the
checkout, ``lpviz serve`` runs a preset to done in chromium, ``lpviz serve --procs 2`` serves the page
from both its processes, a two-line ``panel serve`` script serves the page's template, a notebook with
``Dashboard()`` runs in the fresh environment's own kernel (under nbclient, and live in JupyterLab in
chromium), and a Dask cluster of that environment's workers runs ``lpviz fit --scheduler``. No
top-level ``app`` is installed.
"""

import ast
import json
import os
import site
import subprocess
import sys
import tarfile
import time
import tomllib
import zipfile
from email.parser import Parser
from pathlib import Path

import numpy as np
import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
VERSION = PYPROJECT["project"]["version"]
COMMANDS = ("privatize", "fit", "central", "demo", "fetch-enron", "build-enron", "table1", "reproduce", "serve")


def _package_sources():
    """Every file of the lpviz package in this checkout (not caches), relative to the root."""
    return sorted(
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "lpviz").rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix not in (".pyc", ".nbi", ".nbc")
    )


@pytest.fixture(scope="module")
def dists(tmp_path_factory):
    """The sdist and the wheel built by `python -m build` (the wheel is built from the sdist)."""
    out = tmp_path_factory.mktemp("dist")
    # --no-isolation: the declared build backend is installed in the test environment (test extra),
    # so the build needs no network
    result = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    sdists = list(out.glob("lpviz-*.tar.gz"))
    wheels = list(out.glob("lpviz-*.whl"))
    assert len(sdists) == 1 and len(wheels) == 1, sorted(p.name for p in out.iterdir())
    return sdists[0], wheels[0]


def test_sdist_holds_what_a_source_build_needs(dists):
    sdist, _ = dists
    assert sdist.name == f"lpviz-{VERSION}.tar.gz"
    prefix = f"lpviz-{VERSION}/"
    with tarfile.open(sdist) as archive:
        names = {name[len(prefix) :] for name in archive.getnames() if name.startswith(prefix)}
    # pyproject.toml and the README it names as the long description; every file of the package
    missing = {"pyproject.toml", "README.md", *_package_sources()} - names
    assert not missing, f"the sdist lacks {sorted(missing)}"
    # nothing from a working tree: environments, caches, data, results, built docs
    stray = sorted(
        name
        for name in names
        if name.split("/")[0] in (".venv", "data", "results", "artifacts", "site", ".git") or "__pycache__" in name
    )
    assert not stray, f"the sdist carries working-tree files: {stray[:10]}"


def test_wheel_holds_the_package_and_its_entry_point(dists):
    _, wheel = dists
    assert wheel.name == f"lpviz-{VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        info = f"lpviz-{VERSION}.dist-info"
        entry_points = archive.read(f"{info}/entry_points.txt").decode()
        metadata = Parser().parsestr(archive.read(f"{info}/METADATA").decode())
    missing = set(_package_sources()) - names
    assert not missing, f"the wheel lacks {sorted(missing)}"
    top_level = {name.split("/")[0] for name in names}
    assert top_level == {"lpviz", info}, f"the wheel installs more than lpviz: {sorted(top_level)}"
    assert "lpviz = lpviz.cli:main" in entry_points
    assert metadata["Version"] == VERSION


def test_the_wheel_declares_every_package_lpviz_imports(dists):
    """A fresh environment with only the declared dependencies must be able to import lpviz:
    every third-party module imported anywhere in the package (lazy imports too) comes from a
    distribution the wheel requires."""
    from importlib.metadata import packages_distributions

    _, wheel = dists
    with zipfile.ZipFile(wheel) as archive:
        metadata = Parser().parsestr(archive.read(f"lpviz-{VERSION}.dist-info/METADATA").decode())
        sources = {name: archive.read(name).decode() for name in archive.namelist() if name.endswith(".py")}
    required = {
        canonicalize_name(Requirement(line).name)
        for line in metadata.get_all("Requires-Dist")
        # the test and docs extras are not what a user installs; the jupyter extra is what a notebook needs
        if "extra ==" not in line or 'extra == "jupyter"' in line
    }
    imported = set()
    for source in sources.values():
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported.add(node.module.split(".")[0])
    third_party = sorted(name for name in imported if name not in sys.stdlib_module_names and name != "lpviz")
    assert "numpy" in third_party and "numba" in third_party  # the scan sees the package's imports
    distributions = packages_distributions()
    undeclared = {
        module: distributions.get(module)
        for module in third_party
        if not {canonicalize_name(d) for d in distributions.get(module, [])} & required
    }
    assert not undeclared, f"lpviz imports modules from undeclared distributions: {undeclared}"


@pytest.fixture(scope="module")
def fresh_venv(dists, tmp_path_factory):
    """A new virtual environment with the wheel installed, seeing the test environment's
    third-party packages (not its editable lpviz) through a .pth line."""
    _, wheel = dists
    venv = tmp_path_factory.mktemp("fresh") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    Path(purelib, "_lpviz_test_dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    # --ignore-installed: the .pth shows pip the test environment's own (editable) lpviz of the same
    # version, which it took for this one already installed, and installed nothing
    install = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index"]
        + ["--ignore-installed", str(wheel)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]
    return venv


def _clean_env(cwd):
    """A user's environment in ``cwd``: no PYTHONPATH, no user site, caches in the folder."""
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(
        PYTHONNOUSERSITE="1",
        HOME=str(cwd),
        LPVIZ_DATA_DIR=str(cwd / "data"),
        NUMBA_CACHE_DIR=str(cwd / "numba-cache"),
    )
    return env


def _run_in(venv, args, cwd, timeout=900):
    """Run a program of the fresh environment from a folder outside the checkout, with a
    clean environment: no PYTHONPATH, no user site, caches in the folder."""
    return subprocess.run(
        [str(venv / "bin" / args[0]), *args[1:]],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=_clean_env(cwd),
        timeout=timeout,
    )


def test_installed_lpviz_is_the_wheel(fresh_venv, tmp_path):
    result = _run_in(
        fresh_venv,
        [
            "python",
            "-c",
            "import json, importlib.metadata as m, lpviz, lpviz.cli, lpviz.methods, lpviz.models; "
            "print(json.dumps([lpviz.__file__, lpviz.__version__, m.version('lpviz')]))",
        ],
        tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    file, version, metadata_version = json.loads(result.stdout)
    assert Path(file).resolve().is_relative_to(fresh_venv.resolve()), f"imported {file}, not the wheel's lpviz"
    assert version == metadata_version == VERSION


def test_the_wheel_carries_the_dashboard_and_no_app_module(fresh_venv, tmp_path):
    """``from lpviz.dashboard import Dashboard`` from the wheel; no top-level ``app`` shadows a user's own;
    the installed dashboard looks for no ``../shared`` (its Enron file is the data cache's)."""
    result = _run_in(fresh_venv, ["python", "-c", "import app"], tmp_path)
    assert result.returncode != 0 and "No module named 'app'" in result.stderr
    script = (
        "import json, lpviz.dashboard.page as page\n"
        "from lpviz.dashboard import Dashboard\n"
        "from lpviz.dashboard.session.settings import DEFAULT_ENRON\n"
        "board = Dashboard(source='synthetic-blocks', epsilon=2.0, teaching=True)\n"
        "print(json.dumps([page.__file__, type(board.__panel__()).__name__, board.fits.settings.source,\n"
        "                  board.fits.settings.epsilon, str(DEFAULT_ENRON)]))\n"
    )
    result = _run_in(fresh_venv, ["python", "-c", script], tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    file, shown, source, epsilon, enron = json.loads(result.stdout.strip().splitlines()[-1])
    assert Path(file).resolve().is_relative_to(fresh_venv.resolve()), f"imported {file}, not the wheel's"
    assert (shown, source, epsilon) == ("Column", "synthetic-blocks", 2.0)  # a notebook's layout, not a template
    assert Path(enron).parent == tmp_path / "data" and "shared" not in Path(enron).parts


def test_installed_lpviz_serve_runs_a_preset_to_done(fresh_venv, tmp_path_factory, browser):
    """``lpviz serve`` of the fresh environment, from an empty folder, in Debian's chromium: a preset
    from "Run the fits" to every chain done at its goal, its claim checked, no console error."""
    from lpviz.dashboard.session.presets import PRESETS
    from tests.browser_harness import Page, record_latency, served
    from tests.test_browser_runs import choose, every, verdict
    from tests.test_browser_trust import outside_requests

    folder = tmp_path_factory.mktemp("user")
    name = "Two chains, two modes"
    started = time.monotonic()
    with served(
        tmp_path_factory, command=[str(fresh_venv / "bin" / "lpviz"), "serve"], cwd=folder, env=_clean_env(folder)
    ) as server:
        assert "lpviz dashboard: http://127.0.0.1:" in server.log_tail()
        answered = time.monotonic() - started
        page = Page(browser, server.url)
        try:
            choose(page, name)
            page.click("Run the fits")
            every(page, "done", PRESETS[name].settings["n_iter"], timeout_ms=900_000)
            page.page.wait_for_function(
                "() => [...document.querySelectorAll('*')].length > 0"  # the page is alive after the run
            )
            done = time.monotonic() - started
            assert verdict(page) == ["held"]
            assert outside_requests(page) == [] and page.errors == []
        finally:
            page.close()
    record_latency("installed: lpviz serve answering (s)", answered)
    record_latency(f"installed: lpviz serve to {name} done (s)", done)


def test_a_two_line_panel_serve_script_serves_the_installed_dashboard(fresh_venv, tmp_path_factory, browser):
    """The served page, as ``lpviz serve`` gives it: its template (title, sidebar), not the notebook's column
    (``pn.state.served`` asked from lpviz's module said no to every session, issue 55)."""
    from lpviz.dashboard.page import TITLE
    from tests.browser_harness import Page, served

    folder = tmp_path_factory.mktemp("script")
    (folder / "lesson.py").write_text("from lpviz.dashboard import Dashboard\nDashboard().servable()\n")
    command = [str(fresh_venv / "bin" / "python"), "-m", "panel", "serve", "lesson.py"]
    with served(tmp_path_factory, command=command, cwd=folder, env=_clean_env(folder), app="lesson") as server:
        page = Page(browser, server.url)  # waits for the data tab's three images
        try:
            page.page.get_by_text("Run the fits").first.wait_for()
            assert page.page.title() == TITLE
            assert page.page.locator("#sidebar").count() == 1  # the Bootstrap template's
            assert page.errors == []
        finally:
            page.close()
        assert "Traceback" not in server.log_tail(400)


def test_a_notebook_with_the_dashboard_runs_in_the_installed_environments_kernel(fresh_venv, tmp_path, monkeypatch):
    """A notebook of ``Dashboard()`` cells, executed by the fresh environment's own Python as its kernel
    (registered in a folder of the test's, no kernel of the checkout's): the views render and a fit runs."""
    import nbformat
    from nbclient import NotebookClient

    prefix = tmp_path / "jupyter"
    result = _run_in(
        fresh_venv, ["python", "-m", "ipykernel", "install", "--prefix", str(prefix), "--name", "fresh"], tmp_path
    )
    assert result.returncode == 0, result.stderr[-3000:]
    monkeypatch.setenv("JUPYTER_PATH", str(prefix / "share" / "jupyter"))
    for key, value in _clean_env(tmp_path).items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    cells = [
        "import lpviz\nfrom lpviz.dashboard import Dashboard\nprint(lpviz.__file__)",
        "board = Dashboard(source='synthetic-topics', n_iter=40, burn_in=10, thin=5)\nboard",
        "from lpviz.dashboard.in_jupyter import Session\n"
        "done = Session(data=board.fits.data, fits=board.fits).run()\nprint(sorted(set(done.values())))",
    ]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in cells])
    NotebookClient(
        notebook, kernel_name="fresh", timeout=600, resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    printed = "".join(out.get("text", "") for out in notebook.cells[0].outputs if out.get("name") == "stdout").strip()
    warned = [out["text"] for cell in notebook.cells for out in cell.outputs if out.get("name") == "stderr"]
    assert warned == [], warned  # nothing in red under a cell
    assert Path(printed).resolve().is_relative_to(fresh_venv.resolve()), printed
    shown = {key for output in notebook.cells[1].outputs for key in output.get("data", {})}
    assert "application/vnd.holoviews_exec.v0+json" in shown, shown  # a live Panel view, not a repr
    ran = "".join(out.get("text", "") for out in notebook.cells[2].outputs if out.get("name") == "stdout")
    assert ran.strip() == "[('done', 40)]"


@pytest.fixture(scope="module")
def fresh_cluster(fresh_venv, tmp_path_factory):
    """A Dask LocalCluster started by the fresh environment's Python from an empty folder: its workers
    are that environment's processes, nothing of the checkout on their path. Its scheduler address."""
    folder = tmp_path_factory.mktemp("cluster")
    script = (
        "import sys\nfrom distributed import LocalCluster\n"
        "with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as c:\n"
        "    print(c.scheduler_address, flush=True)\n    sys.stdin.read()\n"
    )
    cluster = subprocess.Popen(
        [str(fresh_venv / "bin" / "python"), "-c", script],
        cwd=folder,
        env=_clean_env(folder),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        address = cluster.stdout.readline().strip()
        assert address.startswith("tcp://"), address
        yield address
    finally:
        cluster.stdin.close()
        cluster.wait(timeout=60)


def test_workers_of_the_wheel_run_lpviz_fit_on_a_cluster(fresh_venv, fresh_cluster, tmp_path):
    """``lpviz fit --scheduler`` on the fresh environment's workers: the same bits as the fit in one process."""
    fits = {}
    for where, extra in (("cluster", ["--scheduler", fresh_cluster]), ("here", [])):
        out = tmp_path / where
        command = ["lpviz", "fit", "--data", "synthetic-topics", "--method", "private", "--iterations", "6"]
        command += ["--burn-in", "2", "--thin", "2", "--seed", "3", "--noise-seed", "4", "--output", str(out)]
        command += ["--json", "--no-progress"]
        result = _run_in(fresh_venv, command + extra, tmp_path)
        assert result.returncode == 0, result.stderr[-3000:]
        fits[where] = (json.loads(result.stdout)["methods"]["private"]["mae"], np.load(out / "private.npz"))
    (mae_cluster, cluster_fit), (mae_here, here_fit) = fits["cluster"], fits["here"]
    assert mae_cluster == mae_here
    np.testing.assert_array_equal(cluster_fit["mu_hat"], here_fit["mu_hat"])


def test_workers_of_the_wheel_run_lpviz_reproduce(fresh_venv, fresh_cluster, tmp_path):
    out = tmp_path / "fig3"
    command = ["lpviz", "reproduce", "fig3", "--preset", "tiny", "--scheduler", fresh_cluster]
    result = _run_in(fresh_venv, [*command, "--output", str(out), "--no-progress"], tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert (out / "fig3" / "report.md").is_file()
    (invocation,) = json.loads((out / "fig3" / "run.json").read_text())["invocations"]
    assert (invocation["scheduler"], invocation["workers"], invocation["executed"]) == (
        f"Dask cluster at {fresh_cluster}",
        2,
        10,
    )


def test_installed_lpviz_serve_runs_its_chains_on_the_wheels_workers(
    fresh_venv, fresh_cluster, tmp_path_factory, browser
):
    """``lpviz serve --scheduler`` of the fresh environment: the session's chains run on its cluster's
    workers (the server says so) and a preset runs to done in chromium."""
    from lpviz.dashboard.session.presets import PRESETS
    from tests.browser_harness import Page, served
    from tests.test_browser_runs import choose, every, lines

    folder = tmp_path_factory.mktemp("class")
    name = "Table 1 (VI paper, reduced)"
    command = [str(fresh_venv / "bin" / "lpviz"), "serve", "--scheduler", fresh_cluster]
    with served(tmp_path_factory, command=command, cwd=folder, env=_clean_env(folder)) as server:
        assert "chains run on the Dask cluster at" in server.log_tail()
        page = Page(browser, server.url)
        try:
            choose(page, name)
            page.click("Run the fits")
            try:
                every(page, "done", timeout_ms=600_000)  # a variational fit ends at or before its goal
            except Exception as error:
                raise AssertionError(f"{lines(page)}\n{server.log_tail(80)}") from error
            assert page.errors == []
        finally:
            page.close()
        assert PRESETS[name].settings["inference"] == "vi"
        assert "Traceback" not in server.log_tail(400)


def test_installed_lpviz_serve_procs_2_serves_the_page_from_both_processes(fresh_venv, tmp_path_factory):
    """``lpviz serve --procs 2`` of the fresh environment, from an empty folder: the front answers with the
    page; its two server processes are the fresh environment's Python, each serves the page itself, and
    two pages asked from the front go one to each."""
    import urllib.request

    from tests.browser_harness import served

    folder = tmp_path_factory.mktemp("procs")
    env = {**_clean_env(folder), "LPVIZ_SWEEP_WORKERS": "1"}  # the shared sweep cluster, as small as it goes
    command = [str(fresh_venv / "bin" / "lpviz"), "serve"]
    with served(tmp_path_factory, "--procs", "2", command=command, cwd=folder, env=env) as server:  # a first page
        assert f"lpviz dashboard: http://127.0.0.1:{server.port}/app" in server.log_tail()
        assert "lpviz: 2 server processes (pids" in server.log_tail()
        with urllib.request.urlopen(server.url, timeout=300) as response:  # a second page, from the front
            assert response.status == 200 and b"bokeh" in response.read().lower()
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/lpviz-procs", timeout=60) as response:
            procs = json.loads(response.read())["procs"]
        assert [proc["alive"] for proc in procs] == [True, True], procs
        assert all(proc["opened"] >= 1 for proc in procs), procs  # the front's pages went to both
        for proc in procs:
            program = Path(f"/proc/{proc['pid']}/cmdline").read_bytes().split(b"\0")[0].decode()
            assert Path(program).parent == fresh_venv / "bin", program  # the fresh environment's Python
            with urllib.request.urlopen(f"http://127.0.0.1:{proc['port']}/app", timeout=300) as response:
                assert response.status == 200  # each process serves the page itself
        assert "Traceback" not in server.log_tail(400)


def test_a_dashboard_notebook_runs_live_in_jupyterlab_in_the_installed_kernel(fresh_venv, tmp_path_factory, browser):
    """JupyterLab (the test environment's) opens a notebook whose kernel is the fresh environment's own
    Python (a kernelspec in a folder of the test's): ``Dashboard()`` renders in the cell, the kernel's lpviz
    is the wheel's, and "Run the fits" in chromium starts chains whose statuses reach the page (the
    kernel's comms are live; iterations need the kernels compiled on a cold cache: a minute more).
    Nothing in red, no console error, no request leaving the machine."""
    import re

    import nbformat

    from tests.browser_harness import (
        ALL_CELLS_RAN,
        CELL_OUTPUTS,
        JUPYTER_TIMEOUT_MS,
        cell_progress,
        jupyterlab,
        kernel_idle,
        record_latency,
    )

    root = tmp_path_factory.mktemp("lab")
    folder = root / "anywhere"
    folder.mkdir()
    kernels = root / "kernels"
    result = _run_in(
        fresh_venv, ["python", "-m", "ipykernel", "install", "--prefix", str(kernels), "--name", "fresh"], folder
    )
    assert result.returncode == 0, result.stderr[-3000:]
    cells = ["import lpviz\nprint(lpviz.__file__)", "from lpviz.dashboard import Dashboard\nDashboard()"]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in cells])
    notebook.metadata["kernelspec"] = {"name": "fresh", "display_name": "fresh", "language": "python"}
    nbformat.write(notebook, folder / "lesson.ipynb")
    started = time.monotonic()
    console_errors, outside = [], []
    with jupyterlab(root, folder, kernels, env=_clean_env(folder)) as (base, token, _):
        context = browser.new_context(viewport={"width": 1500, "height": 1000})
        try:
            context.route(
                re.compile(r"^https?://(?!127\.0\.0\.1[:/])"),
                lambda route: (outside.append(route.request.url), route.abort()),
            )
            page = context.new_page()
            page.on("console", lambda message: message.type == "error" and console_errors.append(message.text))
            page.on("pageerror", lambda error: console_errors.append(f"page error: {error}"))
            page.goto(f"{base}/lab/tree/lesson.ipynb?token={token}")
            page.wait_for_function(kernel_idle("fresh"), timeout=JUPYTER_TIMEOUT_MS)
            page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
            page.wait_for_timeout(500)
            page.wait_for_function(ALL_CELLS_RAN, timeout=JUPYTER_TIMEOUT_MS, polling=500)
            shown = time.monotonic() - started
            outputs = [cell["outputs"] for cell in page.evaluate(CELL_OUTPUTS)]
            errors = [o for cell in outputs for o in cell if o["output_type"] == "error"]
            assert errors == [], [f"{e['ename']}: {e['evalue']}" for e in errors]
            assert [o["text"] for cell in outputs for o in cell if o.get("name") == "stderr"] == []
            printed = "".join(o.get("text", "") for o in outputs[0] if o.get("name") == "stdout").strip()
            assert Path(printed).resolve().is_relative_to(fresh_venv.resolve()), printed  # the kernel's lpviz
            assert any("application/vnd.holoviews_exec.v0+json" in o.get("data", {}) for o in outputs[1])

            cell = page.locator(".jp-CodeCell").filter(has_text="Dashboard()")
            run = cell.get_by_role("button", name="Run the fits")
            run.wait_for(timeout=JUPYTER_TIMEOUT_MS)  # the controls are drawn in the cell
            run.click()
            deadline = time.monotonic() + JUPYTER_TIMEOUT_MS / 1000
            # the click reached the kernel and the chains' statuses came back through its comms
            while not any(status in ("running", "done") for status, _, _ in cell_progress(cell).values()):
                assert time.monotonic() < deadline, f"no iteration reached the page: {cell_progress(cell)}"
                page.wait_for_timeout(500)
            ran = time.monotonic() - started
        finally:
            context.close()
    record_latency("installed: JupyterLab Dashboard() cell shown (s)", shown)
    record_latency("installed: JupyterLab Dashboard() running (s)", ran)
    assert outside == []
    assert console_errors == []
