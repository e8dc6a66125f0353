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

The dashboard (``app/``) and the notebook are not in the wheel: they run from a
checkout (docs/getting-started.md says so, and a test here holds it).
"""

import ast
import json
import os
import site
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
VERSION = PYPROJECT["project"]["version"]
COMMANDS = ("privatize", "fit", "central", "demo", "fetch-enron", "build-enron", "table1", "reproduce")


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
        if "extra ==" not in line  # the test and docs extras are not what a user installs
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
    install = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", str(wheel)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]
    return venv


def _run_in(venv, args, cwd, timeout=900):
    """Run a program of the fresh environment from a folder outside the checkout, with a
    clean environment: no PYTHONPATH, no user site, caches in the folder."""
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(
        PYTHONNOUSERSITE="1",
        HOME=str(cwd),
        LPVIZ_DATA_DIR=str(cwd / "data"),
        NUMBA_CACHE_DIR=str(cwd / "numba-cache"),
    )
    return subprocess.run(
        [str(venv / "bin" / args[0]), *args[1:]], capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout
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


def test_the_app_runs_from_a_checkout_not_from_the_wheel(fresh_venv, tmp_path):
    """The documented decision: the wheel is the library and the CLI; `app` is not in it."""
    result = _run_in(fresh_venv, ["python", "-c", "import app"], tmp_path)
    assert result.returncode != 0 and "No module named 'app'" in result.stderr
    guide = " ".join((ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8").split())
    assert "The dashboard (`app/`) and the notebook are not part of the wheel: they run from a checkout" in guide


def test_installed_cli_helps_and_fits(fresh_venv, tmp_path):
    result = _run_in(fresh_venv, ["lpviz", "--help"], tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    for command in COMMANDS:
        assert command in result.stdout, f"lpviz --help does not list {command}"

    # a tiny fit: the naive method compiles the fewest kernels (the private ones add ~20 CPU-s)
    out = tmp_path / "fit"
    result = _run_in(
        fresh_venv,
        ["lpviz", "fit", "--data", "synthetic-topics", "--method", "naive", "--iterations", "4", "--burn-in", "1"]
        + ["--thin", "1", "--seed", "0", "--output", str(out), "--json", "--no-progress"],
        tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads(result.stdout)
    assert summary["shape"] == [90, 15] and summary["iterations"] == 4
    assert summary["methods"]["naive"]["mae"] > 0
    assert sorted(p.name for p in out.iterdir()) == ["naive.npz", "release.npz", "summary.json", "truth.npz"]
    # the fit file reads back in the fresh environment
    result = _run_in(
        fresh_venv,
        ["python", "-c", f"import numpy as np; a = np.load({str(out / 'naive.npz')!r}); print(a['format'])"],
        tmp_path,
    )
    assert result.returncode == 0 and result.stdout.strip() == "lpviz-fit-1", result.stderr[-3000:]
