"""The documentation: the site builds with warnings as errors (what `make docs` runs), the
strictness is real, the API reference covers the package's public names, and every
```python example in the docs and the README runs."""

import importlib.util
import logging
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import lpviz

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
# the reference pages each promise an entry for these objects (issue 24's list)
REFERENCE = {
    "api/engine": ["lpviz.driver.fit", "lpviz.driver.run", "lpviz.engine.Chain", "lpviz.engine.Posterior"],
    "api/privacy": ["lpviz.privacy.privatize", "lpviz.privacy.alpha_from"],
    "api/release": ["lpviz.release.Release", "lpviz.release.Truth"],
    "api/metrics": ["lpviz.metrics.score", "lpviz.metrics.mae"],
    "api/models": ["lpviz.models.register", "lpviz.models.base.Model", "lpviz.models.topics.TopicModel"],
    "api/methods": ["lpviz.methods.register", "lpviz.methods.base.Method", "lpviz.methods.private"],
    "api/central": ["lpviz.central.PrivateLDA"],
    "api/accounting": ["lpviz.accounting.epsilon", "lpviz.accounting.noise_multiplier"],
    "api/datasets": ["lpviz.datasets.make_topics", "lpviz.datasets.load_counts", "lpviz.datasets.build_enron_topics"],
    "api/vi": ["lpviz.vi.VariationalFit"],
}


def _mkdocs_build(config, site_dir):
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config)]
        + ["--site-dir", str(site_dir)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=900,
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    site_dir = tmp_path_factory.mktemp("site")
    result = _mkdocs_build(ROOT / "mkdocs.yml", site_dir)
    assert result.returncode == 0, result.stderr[-5000:]
    return site_dir


def _page(site, name):
    return (site / name / "index.html").read_text(encoding="utf-8")


def _shows(html, picture):
    return re.search(rf'<img [^>]*src="[^"]*\b{re.escape(picture)}"', html) is not None


def test_reference_pages_document_the_public_api(site):
    for page, objects in REFERENCE.items():
        html = _page(site, page)
        for path in objects:
            assert f'id="{path}"' in html, f"{page} has no entry for {path}"


def test_sphinx_roles_in_docstrings_become_links(site):
    html = _page(site, "api/engine")
    # lpviz.driver's docstring says :class:`~lpviz.engine.Chain`; engine's says :class:`ChainState`
    assert 'href="#lpviz.engine.Chain"' in html and 'href="#lpviz.engine.ChainState"' in html
    assert ":class:" not in html and ":func:" not in html


def test_cli_reference_is_the_parsers_help(site):
    from lpviz.cli import build_parser

    html = _page(site, "cli")
    commands = build_parser()._subparsers._group_actions[0].choices  # argparse keeps them only here
    for command in commands:
        assert f"usage: lpviz {command}" in html, f"the CLI page lacks lpviz {command} --help"


def test_every_screenshot_is_on_the_site(site):
    screenshots = _page(site, "screenshots")
    pictures = sorted(p.name for p in (DOCS / "screenshots").glob("*.png"))
    assert pictures
    for picture in pictures:
        assert _shows(screenshots, picture), f"the screenshots page does not show {picture}"
        assert (site / "screenshots" / picture).is_file()


def test_reports_are_the_ones_lpviz_wrote(site):
    """Every experiment has a row; every report page is a report `lpviz reproduce` wrote (it
    starts with the experiment's title and names its command), with its figures."""
    from lpviz.reproduce import EXPERIMENTS

    index = _page(site, "reproduce")
    reports = {path.stem: path for path in (DOCS / "reproduce").glob("*.md") if path.stem != "index"}
    assert reports, "no reproduce report in docs/reproduce"
    for name in EXPERIMENTS:
        assert f"<code>{name}</code>" in index, f"the reproduce page has no row for {name}"
        assert (f'href="{name}/"' in index) == (name in reports)
    for name, path in reports.items():
        assert name in EXPERIMENTS, f"{path.name} is not a registered experiment's report"
        text = path.read_text(encoding="utf-8")
        assert text.startswith(f"# {EXPERIMENTS[name].title}\n"), f"{path.name} is not {name}'s report"
        assert f"lpviz reproduce {name} --preset" in text and "## Claims" in text
        page = _page(site, f"reproduce/{name}")
        for figure in (DOCS / "reproduce" / name).glob("*.png"):
            assert _shows(page, figure.name), f"reproduce/{name} does not show {figure.name}"


def test_the_build_is_strict(tmp_path):
    """The same configuration refuses a page with a broken link or a missing anchor."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n\n[a link](#no-such-heading)\n")
    config = tmp_path / "mkdocs.yml"
    config.write_text(
        textwrap.dedent(
            f"""\
            INHERIT: {ROOT / "mkdocs.yml"}
            docs_dir: {docs}
            nav:
              - index.md
            hooks: []
            """
        )
    )
    result = _mkdocs_build(config, tmp_path / "site")
    assert result.returncode != 0
    assert "no-such-heading" in result.stderr


def _roles_extension():
    spec = importlib.util.spec_from_file_location("sphinx_roles", DOCS / "_griffe" / "sphinx_roles.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_docstring_naming_a_missing_object_is_a_build_warning(caplog):
    import griffe

    roles = _roles_extension()
    package = griffe.load("lpviz", search_paths=[ROOT], resolve_aliases=False)
    engine = package["engine"]
    engine.docstring = griffe.Docstring(
        ":class:`Chain`, :class:`~lpviz.release.Release`, :func:`lpviz.fit`, :func:`numpy.mean`, "
        ":func:`lpviz.engine.no_such_function`",
        parent=engine,
    )
    with caplog.at_level(logging.WARNING, logger=roles.logger.name):
        roles.SphinxRoles()._rewrite(package, engine, seen=set())
    text = engine.docstring.value
    assert "[`Chain`][lpviz.engine.Chain]" in text  # resolved in the module's scope
    assert "[`Release`][lpviz.release.Release]" in text
    assert f"[`lpviz.fit()`][{lpviz._ATTRIBUTES['fit']}.fit]" in text  # the package's lazy attribute
    assert "`numpy.mean()`" in text and "[`numpy.mean()`]" not in text  # outside lpviz: plain code
    assert "`lpviz.engine.no_such_function()`" in text
    assert [r.getMessage() for r in caplog.records] == [
        "lpviz.engine: docstring names lpviz.engine.no_such_function, which does not exist"
    ]


def test_api_overview_lists_every_top_level_name():
    overview = (DOCS / "api" / "index.md").read_text(encoding="utf-8")
    for name in lpviz._ATTRIBUTES:
        assert f"[`lpviz.{name}`]" in overview, f"docs/api/index.md does not list lpviz.{name}"


def _python_blocks(path):
    return re.findall(r"^```python\n(.*?)^```", path.read_text(encoding="utf-8"), flags=re.S | re.M)


def test_every_python_example_runs(tmp_path):
    """Each page's ```python blocks run in order in one namespace, in a scratch folder; all
    pages in one process, so imports and compiled kernels are shared."""
    pages = sorted(DOCS.rglob("*.md")) + [ROOT / "README.md"]
    examples = {str(page.relative_to(ROOT)): _python_blocks(page) for page in pages}
    examples = {page: blocks for page, blocks in examples.items() if blocks}
    assert {"README.md", "docs/library.md", "docs/guides/mcmc.md", "docs/guides/central.md"} <= set(examples)
    script = "\n".join(
        [
            "import contextlib, io, sys",
            f"examples = {examples!r}",
            "for page, blocks in examples.items():",
            "    namespace = {'__name__': '__main__'}",
            "    for number, block in enumerate(blocks, 1):",
            "        with contextlib.redirect_stdout(io.StringIO()):",
            "            exec(compile(block, f'{page} block {number}', 'exec'), namespace)",
            "    print('ran', page, file=sys.stderr)",
        ]
    )
    env = dict(os.environ, LPVIZ_DATA_DIR=str(tmp_path / "data"))
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=1800
    )
    assert result.returncode == 0, result.stderr[-5000:]
    assert sum(line.startswith("ran ") for line in result.stderr.splitlines()) == len(examples)
