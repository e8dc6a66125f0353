"""The dashboard's layers (issue 55): imports only go down, views -> session -> serving -> the library.

Above the three folders sit the modules that assemble or start a page (``app``, ``page``, ``serve``,
``in_jupyter``); nothing of the library imports the dashboard. Every import is read from the source
(including those inside functions), so a lazy import that climbs a layer is caught too.
"""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "lpviz"
DASHBOARD = PACKAGE / "dashboard"
RANKS = {"serving": 0, "session": 1, "views": 2}
TOP = 3  # lpviz/dashboard/*.py: app, page, served, serve, in_jupyter


def rank_of(module):
    """The layer of ``lpviz.dashboard....`` (``module`` dotted), or None for anything else."""
    parts = module.split(".")
    if parts[:2] != ["lpviz", "dashboard"]:
        return None
    if len(parts) == 2:
        return TOP
    return RANKS.get(parts[2], TOP)


def dotted(path):
    return ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")


def imports(path):
    """Every module ``path`` imports, as absolute dotted names (relative imports resolved)."""
    here = dotted(path).split(".")
    if path.name != "__init__.py":
        here = here[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = here[: len(here) - node.level + 1] if node.level else []
            module = ".".join([*base, *(node.module.split(".") if node.module else [])])
            found.append(module)
            found += [f"{module}.{alias.name}" for alias in node.names if rank_of(f"{module}.{alias.name}") is not None]
    return found


def test_the_dashboard_has_its_three_layers():
    for layer in RANKS:
        assert (DASHBOARD / layer / "__init__.py").is_file(), f"lpviz/dashboard/{layer} is not a package"
        assert len(list((DASHBOARD / layer).glob("*.py"))) > 2
    assert sorted(p.name for p in DASHBOARD.glob("*.py")) == [
        "__init__.py",
        "app.py",
        "in_jupyter.py",
        "page.py",
        "serve.py",
        "served.py",
    ]


@pytest.mark.parametrize("path", sorted(DASHBOARD.rglob("*.py")), ids=lambda p: dotted(p))
def test_imports_only_go_down(path):
    rank = rank_of(dotted(path))
    upward = [module for module in imports(path) if (rank_of(module) or -1) > rank]
    assert not upward, f"{dotted(path)} (layer {rank}) imports from a layer above it: {upward}"


def test_the_library_never_imports_the_dashboard():
    climbing = {
        dotted(path): [m for m in imports(path) if rank_of(m) is not None]
        for path in PACKAGE.rglob("*.py")
        if DASHBOARD not in path.parents and path.parent != DASHBOARD
    }
    # the CLI's serve command starts the dashboard (imported when it runs, not when the CLI starts)
    allowed = {"lpviz.cli.serve": ["lpviz.dashboard", "lpviz.dashboard.serve"]}
    assert {name: found for name, found in climbing.items() if found} == allowed


def test_a_climbing_import_is_caught(tmp_path):
    """The scan sees an import inside a function and a relative one (the test can fail)."""
    module = DASHBOARD / "serving" / "_probe_climb.py"
    module.write_text("def f():\n    from ..session import fits\n    import lpviz.dashboard.views.plots\n")
    try:
        found = imports(module)
    finally:
        module.unlink()
    assert "lpviz.dashboard.session.fits" in found and "lpviz.dashboard.views.plots" in found
    assert max(rank_of(m) or -1 for m in found) > RANKS["serving"]
