"""The import graph of lpviz and the app has no cycles, and the modules split apart in issue 24
still answer every name they had (tests, notebooks and users import them from there)."""

import importlib
import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _tool():
    spec = importlib.util.spec_from_file_location("import_cycles", REPO / "tools" / "import_cycles.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("deferred", [False, True], ids=["module-level", "with deferred imports"])
def test_lpviz_and_the_app_import_without_cycles(deferred):
    tool = _tool()
    cycles = tool.elementary_cycles(tool.import_graph(["lpviz", "app"], deferred=deferred))
    assert cycles == [], "import cycles: " + "; ".join(" -> ".join([*c, c[0]]) for c in cycles)


def test_the_cycle_finder_sees_direct_deferred_and_package_cycles(tmp_path):
    """The check above can fail: a cycle through a function-level import, through ``from package
    import submodule`` and through a relative import are all found; TYPE_CHECKING imports are not,
    nor a module ``__getattr__`` serving a name that moved (an alias for old callers)."""
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    files = {
        "__init__.py": "",
        "a.py": "from pkg import b\n",
        "b.py": "def later():\n    from pkg.c import thing\n",
        "c.py": "from . import a\nthing = 1\n",
        "d.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import e\n",
        "e.py": "import pkg.d\n",
        "h.py": "def __getattr__(name):\n    from pkg.i import moved\n\n    return moved\n",
        "i.py": "from pkg import h\nmoved = 1\n",
        "sub/__init__.py": "",
        "sub/f.py": "from ..sub import g\n",
        "sub/g.py": "from pkg.sub.f import x\n",
    }
    for name, text in files.items():
        (package / name).write_text(text)
    tool = _tool()
    everything = tool.elementary_cycles(tool.import_graph(["pkg"], deferred=True, base=tmp_path))
    assert everything == [["pkg.sub.f", "pkg.sub.g"], ["pkg.a", "pkg.b", "pkg.c"]]
    at_import = tool.elementary_cycles(tool.import_graph(["pkg"], deferred=False, base=tmp_path))
    assert at_import == [["pkg.sub.f", "pkg.sub.g"]]
    assert tool.tangles(everything) == [["pkg.a", "pkg.b", "pkg.c"], ["pkg.sub.f", "pkg.sub.g"]]


# Every name the split modules had, and where it lives now (the same object either way).
MOVED = {
    "lpviz.dashboard.session.fits": {
        "lpviz.dashboard.session.runner": [
            "BUFFER_LENGTH",
            "STATUSES",
            "TRACE_COLUMNS",
            "TRACE_SCORES",
            "ChainRunner",
            "Control",
            "Lockstep",
            "Problem",
            "empty_trace",
            "warm_up_kernels",
        ],
        "lpviz.dashboard.session.recompute": [("_recompute_once", "recompute_once")],
    },
    "lpviz.dashboard.session.runner": {
        "lpviz.dashboard.session.control": ["WAKE_SECONDS", "Control", "Problem"],
        "lpviz.dashboard.session.turnstile": [
            "CHAIN_NICE_STEP",
            "CHAIN_THREADS_ENV",
            "TURN_SECONDS",
            "_TURNSTILE",
            "_TURNSTILE_LOCK",
            "Turnstile",
            "give_way",
            "giving_way",
            "turnstile",
        ],
        "lpviz.dashboard.session.chain": [
            "SLOW_FINAL_SCORE_ENV",
            "ChainGroup",
            "LocalPlace",
            "_last_saved",
            "_number",
            "_row",
            "_snapshot",
            "run_chain",
        ],
        "lpviz.dashboard.session.traces": [
            "CHAIN_TRACES",
            "MAX_CHAINS",
            "TRACE_COLUMNS",
            "TRACE_SCORES",
            "empty_trace",
        ],
        "lpviz.dashboard.session.lockstep": ["LOCKSTEP_SLACK", "Lockstep"],
        "lpviz.dashboard.session.warmup": ["_KERNELS_LOADED", "_KERNELS_LOCK", "warm_up_kernels"],
    },
    "lpviz.dashboard.session.default": {"lpviz.dashboard.session.default": ["default_session"]},
    "lpviz.datasets.enron": {
        "lpviz.datasets.enron.parser": ["Email", "MalformedEmail", "parse_email"],
        "lpviz.datasets.enron.readers": ["ReadReport", "read_emails"],
        "lpviz.datasets.enron.tokens": ["STOP_WORDS", "TOKENIZATION", "clean_body", "tokenize"],
        "lpviz.datasets.enron.corpus": ["EnronCorpus", "read_corpus"],
        "lpviz.datasets.enron.builders": ["build_enron_network", "build_enron_topics"],
    },
    "lpviz.engine": {"lpviz.driver": ["run", "fit"]},
    "lpviz.inference": {"lpviz.driver": ["run", "fit"]},
    "lpviz.metrics": {"lpviz.alignment": ["align_topics", "aligned_topic_distance"]},
    "lpviz.models.base": {"lpviz._validate": [("check_count", "check_int"), "check_positive"]},
    "lpviz.reproduce.table1": {
        "lpviz.reproduce.table1_runs": [
            "GROUPS",
            "PAPER",
            "PAPER_SECONDS_PER_ITERATION",
            "QUICK",
            "ROWS",
            "Schedule",
            "run_table1",
            "table1_data",
        ],
        "lpviz.reproduce.table1_plots": ["plot_table1"],
    },
    "lpviz.reproduce.vips": {
        "lpviz.datasets.synthetic": ["lda_corpus"],
        "lpviz.reproduce.vips_corpus": ["Corpus", "completion_halves", "heldout_size", "split_corpus"],
        "lpviz.reproduce.vips_perplexity": ["FOLD_IN_MAX_ITER", "FOLD_IN_TOL", "completion_perplexity", "fold_in"],
        "lpviz.reproduce.vips_fits": ["DEFAULT_SAMPLER", "FITS", "NON_PRIVATE", "PER_EPSILON", "vips_task"],
    },
}


@pytest.mark.parametrize("old", sorted(MOVED))
def test_moved_names_are_still_importable_from_where_they_were(old):
    module = importlib.import_module(old)
    for new, names in MOVED[old].items():
        home = importlib.import_module(new)
        for name in names:
            old_name, new_name = name if isinstance(name, tuple) else (name, name)
            assert getattr(module, old_name) is getattr(home, new_name), f"{old}.{old_name}"
    for name in getattr(module, "__all__", []):
        assert hasattr(module, name), f"{old}.__all__ names {name}, which it does not have"
