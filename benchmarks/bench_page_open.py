"""Server CPU of one page open of the dashboard, in-process, by part (issue 41, item 1).

A page open on the server is ``create_app()`` (the session's settings, data, chains and views), the
document's Bokeh models (``server_doc``: the template, the sidebar's controls, the shown tab) and its
first JSON (what the websocket sends). Measured in CPU seconds of this process (``time.process_time``),
so that the other work on a shared machine changes the figures less than wall time would; the median of
``--repeat`` opens after two warm-ups (the first open imports and compiles). The plain reference, in the
same run: an empty page of the same template (one Markdown pane), Panel's own floor.

    .venv/bin/python benchmarks/bench_page_open.py             # median of 7
    .venv/bin/python benchmarks/bench_page_open.py --repeat 15
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import panel as pn  # noqa: E402
from bokeh.document import Document  # noqa: E402


def timed(make):
    """CPU seconds of (making the page, its models, its JSON) for ``make()`` returning a template."""
    doc = Document()
    pn.state.curdoc = doc
    try:
        start = time.process_time()
        template = make()
        made = time.process_time()
        template.server_doc(doc)
        modelled = time.process_time()
        doc.to_json()
        return made - start, modelled - made, time.process_time() - modelled
    finally:
        pn.state.curdoc = None


def parts(create_app):
    """CPU seconds of the on-screen parts' models, each alone (the sidebar's two, the tabs)."""
    doc = Document()
    pn.state.curdoc = doc
    try:
        template = create_app()
        out = {}
        shown = {"teaching": template.sidebar[0], "controls": template.sidebar[1], "tabs": template.main[0]}
        for name, obj in shown.items():
            start = time.process_time()
            pn.panel(obj).get_root(doc)
            out[name] = time.process_time() - start
        return out
    finally:
        pn.state.curdoc = None


def empty_page():
    return pn.template.BootstrapTemplate(title="reference", main=[pn.pane.Markdown("an empty page")])


def median_of(runs, index):
    return statistics.median(run[index] for run in runs)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=7, help="opens measured (default 7)")
    args = parser.parse_args(argv)
    from app.app import create_app

    for make in (create_app, create_app, empty_page, empty_page):  # warm-ups: imports, compilation
        timed(make)
    pages = [timed(create_app) for _ in range(args.repeat)]
    reference = [timed(empty_page) for _ in range(args.repeat)]
    pieces = [parts(create_app) for _ in range(args.repeat)]
    print(f"one page open, server CPU s, median of {args.repeat} (CPU time: the machine may be shared)")
    print(f"{'':28s}{'create_app':>12s}{'models':>10s}{'json':>8s}{'total':>8s}")
    for label, runs in (("dashboard", pages), ("reference: an empty page", reference)):
        total = statistics.median(sum(run) for run in runs)
        print(f"{label:28s}{median_of(runs, 0):12.3f}{median_of(runs, 1):10.3f}{median_of(runs, 2):8.3f}{total:8.3f}")
    print(
        "the dashboard's on-screen parts' models, each alone: "
        + ", ".join(f"{name} {statistics.median(piece[name] for piece in pieces):.3f}" for name in pieces[0])
    )


if __name__ == "__main__":
    main()
