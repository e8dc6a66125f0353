"""Server CPU of one page open of the dashboard, in-process, by part (issue 41, item 1).

A page open on the server is ``create_app()`` (the session's settings, data, chains and views), the
document's Bokeh models (``server_doc``: the template, the sidebar's controls, the shown tab; as
``lpviz.dashboard.app.serve_page`` adds them, under one freeze of the document where the app has it) and its
first JSON (what the websocket sends). Measured in CPU seconds of this process (``time.process_time``),
so that the other work on a shared machine changes the figures less than wall time would; the median of
``--repeat`` opens after two warm-ups (the first open imports and compiles). The plain reference, in the
same run: an empty page of the same template (one Markdown pane), Panel's own floor.

The split by part: each on-screen part made and its Bokeh models made alone, in a document of its own
(the sidebar's teaching panel and controls, the shown Data & noise tab and, of it, its charts), and
what is left of the open (the session, the hidden tabs' views, the template, Panel's steps over the
whole page, the JSON).

As served: a served session's data store builds its data in a thread (where the checkout does so), and
their arrival redraws the page's views (``DataStore.poll``, what the session's periodic drain does); its
CPU (the thread's build and the redraw), waited for before the JSON, is in the total and printed on a
line of its own. A checkout that builds a small opening data set at once has none (issue 56 item 4).

``--against PATH`` measures another checkout of the repository (main, before a change) with this same
script in the same run, one after the other, and prints both side by side.

    .venv/bin/python benchmarks/bench_page_open.py                         # median of 7
    .venv/bin/python benchmarks/bench_page_open.py --repeat 15
    .venv/bin/python benchmarks/bench_page_open.py --against /work/main    # before and after
    .venv/bin/python benchmarks/bench_page_open.py --tiny                  # one open measured (the test suite's)
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
COLUMNS = ("create_app", "models", "json", "total", "gc, mean")
PARTS = ("teaching", "controls", "Data & noise tab", "its charts")


class GcClock:
    """CPU seconds Python's cyclic garbage collector has spent since installed (``gc.callbacks``)."""

    def __init__(self):
        import gc

        self.spent, self._start = 0.0, None
        gc.callbacks.append(self)

    def __call__(self, phase, info):
        if phase == "start":
            self._start = time.process_time()
        elif self._start is not None:
            self.spent += time.process_time() - self._start
            self._start = None


GC = GcClock()


def as_served():
    """A served session's data store (its builds in a thread): ``DataStore``'s default ``background``."""
    from unittest import mock

    import lpviz.dashboard.session.datastore as datastore

    return mock.patch.object(datastore, "served", lambda: True)


def data_arrival(template, timeout=60.0):
    """Wait for the session's data from their thread and apply them as its drain does (the views
    redrawn); nothing when they were there at once. For a template of the dashboard only."""
    views = getattr(template.main[0], "views", None) if len(template.main) else None
    data = getattr(views[0], "data", None) if views else None
    if data is None:
        return
    deadline = time.monotonic() + timeout
    while data.loading and time.monotonic() < deadline:
        time.sleep(0.001)
        data.poll()


def timed(make, freeze):
    """CPU seconds of (making the page, its models, its data's arrival, its JSON; of all, the garbage
    collector's) for ``make()`` returning a template, as served (:func:`as_served`); the models added
    under one freeze of the document when ``freeze`` (as ``lpviz.dashboard.app.serve_page`` does)."""
    import panel as pn
    from bokeh.document import Document

    doc = Document()
    pn.state.curdoc = doc
    try:
        collecting = GC.spent
        start = time.process_time()
        with as_served():
            template = make()
        made = time.process_time()
        if freeze:
            with doc.models.freeze():
                template.server_doc(doc)
        else:
            template.server_doc(doc)
        modelled = time.process_time()
        data_arrival(template)
        arrived = time.process_time()
        doc.to_json()
        done = time.process_time()
        return made - start, modelled - made, done - arrived, arrived - modelled, GC.spent - collecting
    finally:
        pn.state.curdoc = None


def parts(create_app):
    """CPU seconds of the on-screen parts, each made and modelled alone in a document of its own: the
    sidebar's teaching panel (models) and controls, the shown Data & noise tab and, of it, its charts."""
    import panel as pn
    from bokeh.document import Document

    from lpviz.dashboard.views.controls_view import ControlsView
    from lpviz.dashboard.views.noise_view import NoiseView

    doc = Document()
    pn.state.curdoc = doc
    try:
        template = create_app()
        data = template.main[0].views[0].data  # the session's DataStore

        def charts():
            noise = NoiseView(data=data)
            return pn.Column(noise.heatmaps(), noise.noise_histogram())

        shown = {
            "teaching": lambda: template.sidebar[0],
            "controls": lambda: ControlsView(data=data),
            "Data & noise tab": lambda: NoiseView(data=data),
            "its charts": charts,
        }
        out = {}
        for name, make in shown.items():
            part = Document()
            start = time.process_time()
            pn.panel(make()).get_root(part)
            out[name] = time.process_time() - start
        return out
    finally:
        pn.state.curdoc = None


def empty_page():
    import panel as pn

    return pn.template.BootstrapTemplate(title="reference", main=[pn.pane.Markdown("an empty page")])


def measure(repeat, warm_up=True):
    """``{"dashboard": [create_app, models, json, total, gc], "reference": [...], "parts": {...}}``,
    medians. With ``warm_up``, the server's warm-up first where the checkout has one
    (``dashboard.serve.warm_up``: the imports, then ``gc.freeze``), as ``python -m dashboard.serve`` does."""
    import lpviz.dashboard.app as dashboard
    import lpviz.dashboard.serve

    warmed = warm_up and hasattr(lpviz.dashboard.serve, "warm_up")
    if warmed:
        lpviz.dashboard.serve.warm_up()
    create_app = dashboard.create_app
    freeze = hasattr(dashboard, "serve_page")  # the app adds its models under one freeze
    for make in (create_app, create_app, empty_page, empty_page):  # warm-ups: imports, compilation
        timed(make, freeze)
    pages = [timed(create_app, freeze) for _ in range(repeat)]
    reference = [timed(empty_page, freeze) for _ in range(repeat)]
    pieces = [parts(create_app) for _ in range(repeat)]

    def medians(runs):
        return [statistics.median(run[i] for run in runs) for i in range(3)] + [
            statistics.median(sum(run[:4]) for run in runs),  # with the data's arrival
            statistics.mean(run[4] for run in runs),  # the mean: a full collection is rare and long
            statistics.median(run[3] for run in runs),  # the data's arrival (not a column)
        ]

    return {
        "dashboard": medians(pages),
        "reference": medians(reference),
        "parts": {name: statistics.median(piece[name] for piece in pieces) for name in PARTS},
        "freeze": freeze,
        "warmed": warmed,
    }


def report(label, result):
    warmed = "imports then gc.freeze (lpviz.dashboard.serve.warm_up)" if result.get("warmed") else "no gc.freeze"
    print(f"{label}: one page open, server CPU s, median (the garbage collector's: mean); {warmed}")
    print(f"  {'':28s}" + "".join(f"{column:>12s}" for column in COLUMNS))
    for name, title in (("dashboard", "dashboard"), ("reference", "reference: an empty page")):
        print(f"  {title:28s}" + "".join(f"{value:12.3f}" for value in result[name][: len(COLUMNS)]))
    split = result["parts"]
    shown = sum(split[name] for name in PARTS[:3])
    print(
        "  by part, each made and modelled alone: "
        + ", ".join(f"{name} {split[name]:.3f}" for name in PARTS)
        + "; the rest (the session, the hidden tabs' views, the template, Panel's steps over the page, "
        + f"the data's arrival, the JSON) {result['dashboard'][3] - shown:.3f}"
    )
    print(
        "  of the total, the data's arrival from their thread (its build, the views drawn again): "
        f"{result['dashboard'][5]:.3f}"
    )


def run_in(repo, repeat, warm_up=True):
    """:func:`measure` in a process of its own with ``repo`` first on its path."""
    env = {**os.environ, "PYTHONPATH": str(repo)}
    out = subprocess.run(
        [sys.executable, __file__, "--repeat", str(repeat), "--json", "--repo", str(repo)]
        + ([] if warm_up else ["--no-warm-up"]),
        cwd=repo,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=7, help="opens measured (default 7)")
    parser.add_argument("--against", type=Path, help="another checkout of the repository, measured in the same run")
    parser.add_argument("--repo", type=Path, default=HERE, help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--no-warm-up", action="store_true", help="without the server's warm-up (no gc.freeze after the imports)"
    )
    parser.add_argument(
        "--gc-both",
        action="store_true",
        help="this checkout also without its warm-up, in the same run (what gc.freeze gains)",
    )
    parser.add_argument("--tiny", action="store_true", help="one open measured (the test suite's run)")
    args = parser.parse_args(argv)
    if args.tiny:
        args.repeat = 1
    if args.against is not None or args.gc_both:
        print(f"CPU time of this process; the machine may be shared (load average {os.getloadavg()[0]:.1f})")
        runs = [("before", args.against.resolve(), True)] if args.against is not None else []
        if args.gc_both:
            runs.append(("after, without gc.freeze", HERE, False))
        runs.append(("after", HERE, not args.no_warm_up))
        for label, repo, warm_up in runs:
            report(f"{label} ({repo})", run_in(repo, args.repeat, warm_up))
        return
    sys.path.insert(0, str(args.repo))
    result = measure(args.repeat, warm_up=not args.no_warm_up)
    if args.json:
        print(json.dumps(result))
    else:
        print("CPU time of this process; the machine may be shared")
        report(str(args.repo), result)


if __name__ == "__main__":
    main()
