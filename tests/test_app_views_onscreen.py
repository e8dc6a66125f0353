"""Only the shown tab's views redraw: the dashboard as ``lpviz/dashboard/app.py`` assembles it, in-process.

A served class shares one event loop; a hidden tab that redraws for new data or
new results costs every session for nobody (issue 22). Here the real page
(``create_app``) is rendered to Bokeh models and driven by switching its tabs,
with real chains: new data and new results rebuild only the shown tab, a tab
shown later rebuilds once from the newest data and results, and the trace rows
of a hidden Fits tab wait and arrive in one redraw, none lost.
"""

import collections
import queue
import threading
import time
from functools import partial

import pandas as pd
import pytest

import lpviz.dashboard.views.topics_view
from lpviz.dashboard.app import create_app
from lpviz.dashboard.serving.onscreen import OnScreen
from lpviz.dashboard.serving.throttle import OffLoop
from lpviz.dashboard.views.bessel_view import BesselView
from lpviz.dashboard.views.blocks_view import BlocksView
from lpviz.dashboard.views.fits_view import FitsView
from lpviz.dashboard.views.noise_view import NoiseView
from lpviz.dashboard.views.topicmap_view import TopicMapView
from lpviz.dashboard.views.topics_view import TopicsView

TIMEOUT = 300  # seconds: real chains on a shared 2-core machine


class Page:
    """The app's page rendered as a browser would get it (the shown tab's Bokeh models), its
    views by class, and how often each view rebuilt."""

    def __init__(self):
        self.template = create_app()
        self.tabs = self.template.main[0]
        self.titles = list(self.tabs._names)  # Panel keeps the tab titles there (no public accessor in 1.9)
        self.views = {type(view): view for view in self.tabs.views}
        self.root = self.tabs.get_root()
        self.fits = self.views[FitsView].fits
        self.builds = collections.Counter()
        for cls, method in (
            (TopicsView, "refresh"),
            (BlocksView, "refresh"),
            (TopicMapView, "refresh"),
            (NoiseView, "_follow"),
            (FitsView, "_redraw_rates"),
            (FitsView, "_update_scores"),
            (BesselView, "refresh_draws"),
        ):
            self._count(cls, method)

    def _count(self, cls, method):
        view = self.views[cls]
        original = getattr(view, method)

        def counted(*args, **kwargs):
            self.builds[cls.__name__, method] += 1
            return original(*args, **kwargs)

        setattr(view, method, counted)  # the views look their work up when they do it

    def show(self, title):
        self.tabs.active = self.titles.index(title)

    def built(self):
        built, self.builds = dict(self.builds), collections.Counter()
        return built

    def run(self, n_iter):
        fits = self.fits
        fits.settings.param.update(n_iter=n_iter, burn_in=10, thin=5)
        fits.start()
        deadline = time.monotonic() + TIMEOUT
        while fits.running or fits.moving:
            assert time.monotonic() < deadline, {m: (r.status, r.iteration) for m, r in fits.runners.items()}
            time.sleep(0.05)
            fits.drain()


def counted(function, calls):
    def call(*args, **kwargs):
        calls.append(args)
        return function(*args, **kwargs)

    return call


@pytest.fixture
def page():
    page = Page()
    yield page
    page.fits.close()


def test_hidden_tabs_wait_and_the_shown_tab_rebuilds_once(page, monkeypatch):
    fits = page.fits
    assert page.tabs.active == 0 and page.titles[0] == "Data & noise"
    on_screen = {cls.__name__: view.on_screen.shown for cls, view in page.views.items() if hasattr(view, "on_screen")}
    assert on_screen == {
        "NoiseView": True,
        "FitsView": False,
        "TopicsView": False,
        "TopicMapView": False,
        "BlocksView": False,
        "BesselView": False,
        "ExportView": False,
    }
    page.show("Fits")
    page.built()

    # new data (a new noise draw): only the shown Fits tab rebuilds
    fits.settings.noise_seed += 1
    release = fits.data.release
    assert page.built() == {("FitsView", "_redraw_rates"): 1}
    assert page.views[NoiseView].release is not release  # hidden: still the old draw
    assert page.views[TopicsView].on_screen.stale

    # new results: the shown Fits tab follows them, the hidden Topics tab does not
    page.run(40)
    built = page.built()
    assert built[("FitsView", "_update_scores")] >= 1
    assert not any(view == "TopicsView" for view, _ in built), built
    assert set(page.views[TopicsView].table["method"]) <= {"truth"}  # the table of before the run

    # shown: the Topics tab rebuilds once, from the newest data and results, before it is drawn
    # (drawn first and then patched, its heatmaps would be made twice)
    heatmaps = []
    monkeypatch.setattr(
        lpviz.dashboard.views.topics_view,
        "term_topic_frame",
        counted(lpviz.dashboard.views.topics_view.term_topic_frame, heatmaps),
    )
    page.show("Topics")
    assert page.built() == {("TopicsView", "refresh"): 1}
    topics = page.views[TopicsView]
    assert set(topics.table["method"]) >= {runner.label for runner in fits.active.values()}
    assert len(heatmaps) == len(topics.topics) == 1 + len(fits.active)  # one heatmap each: the truth's and each fit's
    page.show("Fits")
    page.show("Topics")
    assert page.built() == {}  # nothing new came: nothing rebuilds
    page.show("Data & noise")
    assert page.views[NoiseView].release is release
    assert page.built() == {("NoiseView", "_follow"): 1}
    page.show("Bessel")  # its draws waited through the new data and the whole run: drawn once now
    assert page.built() == {("BesselView", "refresh_draws"): 1}


def test_a_tab_is_built_when_first_shown_and_a_switch_back_sends_nothing_new(page):
    """The page opens with only the first tab's contents built; a tab is built when first shown, and
    stays: a switch back to it reuses its Bokeh models (Panel's dynamic tabs made new ones at every
    switch, and the server serialised the whole tab again: ~0.65 s of its loop a switch)."""
    from bokeh.models import Model

    assert page.tabs.built == [True] + [False] * (len(page.titles) - 1)
    assert page.tabs.objects[page.titles.index("Topics")].objects == []  # its view's contents not made
    page.show("Topics")
    topics = page.titles.index("Topics")
    assert page.tabs.built[topics] and len(page.tabs.objects[topics].objects) == 1
    panels = list(page.root.tabs)
    models = {model.id for panel in panels for model in panel.references()}
    page.show("Fits")
    page.show("Topics")
    assert page.root.active == topics
    assert list(page.root.tabs) == panels  # the same tab panels, children and all
    again = {model.id for panel in page.root.tabs for model in panel.references()}
    fits = page.titles.index("Fits")
    new = again - models
    fits_models = {model.id for model in page.root.tabs[fits].references()}
    assert new <= fits_models, "a switch back made new models outside the tab first shown"
    assert all(isinstance(model, Model) for model in page.root.tabs[topics].references())
    assert sum(page.tabs.built) == 1 + 2  # the first tab, Topics, Fits


def test_the_export_tab_lists_its_figures_when_first_shown(page, monkeypatch):
    """Listing makes every view's figures (0.6 of a served session's 5.4 s build): not while the page is
    built, once when the Export tab is shown, and from the newest data."""
    from lpviz.dashboard.views.export import ExportView

    export = page.views[ExportView]
    assert export.param.figure.objects == [] and export.figure is None
    listed = []
    monkeypatch.setattr(export, "available_figures", counted(export.available_figures, listed))
    page.fits.settings.noise_seed += 1  # new data while hidden: nothing listed yet
    assert listed == []
    page.show("Export")
    assert len(listed) == 1 and "noise_heatmaps" in export.param.figure.objects
    assert export.figure == export.param.figure.objects[0]


def test_trace_rows_of_a_hidden_fits_tab_wait_and_arrive_in_one_redraw(page):
    fits = page.fits
    page.show("Fits")
    page.show("Topics")  # the trace plots are hidden from now on
    assert not fits.traces_on_screen.shown
    triggers = []
    for runner in fits.runners.values():
        runner.buffer.add_subscriber(lambda runner=runner, **contents: triggers.append(runner.method))
    page.run(60)
    assert triggers == [] and all(len(runner.buffer.data) == 0 for runner in fits.runners.values())
    assert fits.traces_on_screen.stale
    page.show("Fits")
    assert sorted(triggers) == sorted(fits.runners)  # one redraw of every method's trace
    for runner in fits.active.values():
        iterations = runner.buffer.data["iteration"].tolist()
        assert iterations == sorted(set(iterations)) and iterations[-1] == 60, runner.method  # none lost


def test_work_waits_while_hidden_the_newest_of_each_kind():
    done = []
    screen = OnScreen()
    screen.run("a", lambda: done.append("a1"))
    assert done == ["a1"]  # shown: at once
    screen.show(False)
    screen.run("a", lambda: done.append("a2"))
    screen.run("b", lambda: done.append("b"))
    screen.run("a", lambda: done.append("a3"))  # replaces a2, keeps a's place
    assert done == ["a1"] and screen.stale
    screen.show()
    assert done == ["a1", "a3", "b"] and not screen.stale
    screen.show(False)
    screen.run("a", lambda: done.append("a4"))
    screen.catch_up()  # an export wants it now, hidden or not
    assert done[-1] == "a4" and not screen.shown and not screen.stale


class Loop:
    """A session's event loop as Bokeh's document offers it to threads (``add_next_tick_callback``):
    the callbacks wait until the test runs them, on its own thread."""

    def __init__(self):
        self.callbacks = queue.Queue()

    def add_next_tick_callback(self, callback):
        self.callbacks.put(callback)

    def run_one(self, timeout=TIMEOUT):
        self.callbacks.get(timeout=timeout)()


def test_view_computations_run_in_the_pool_one_per_session_and_apply_on_the_loop():
    loop, other_loop = Loop(), Loop()
    session, other = OffLoop(background=True, doc=loop), OffLoop(background=True, doc=other_loop)
    release = threading.Event()
    computed, applied = [], []

    def compute(name):
        computed.append((name, threading.current_thread().name))
        if name == "first":
            assert release.wait(TIMEOUT)
        return name

    def apply(outcome):
        applied.append((outcome, threading.current_thread().name))

    session.submit("topics", partial(compute, "first"), apply)
    session.submit("maps", partial(compute, "maps"), apply)
    session.submit("topics", partial(compute, "older"), apply)
    session.submit("topics", partial(compute, "newest"), apply)  # replaces "older", which is never computed
    other.submit("topics", partial(compute, "other session"), apply)  # not held up by the first session's
    other_loop.run_one()
    assert applied == [("other session", threading.current_thread().name)]  # applied on the loop's thread
    assert [name for name, _ in computed] == ["first", "other session"]  # one in flight per session
    release.set()
    for _ in range(3):
        loop.run_one()
    assert [name for name, _ in computed] == ["first", "other session", "maps", "newest"]
    assert all(thread.startswith("lpviz-view") for _, thread in computed)
    assert [outcome for outcome, _ in applied] == ["other session", "first", "maps", "newest"]
    assert session.idle and other.idle

    def fails():
        raise ValueError("no topics")

    session.submit("topics", fails, apply)
    loop.run_one()
    assert isinstance(applied[-1][0], ValueError)  # the view is told, not left waiting
    session.submit("topics", partial(compute, "after the end"), apply)
    session.close()
    loop.run_one()
    assert applied[-1][0] != "after the end"  # a closed session applies nothing


def test_a_served_topics_view_computes_off_the_loop():
    fits = Page().fits
    try:
        fits.settings.param.update(n_iter=30, burn_in=10, thin=5)
        fits.start()
        for runner in fits.active.values():
            assert runner.join(timeout=TIMEOUT)
        fits.drain()
        loop = Loop()
        fits.off_loop = OffLoop(background=True, doc=loop)
        view = TopicsView(fits=fits)  # its first refresh is submitted, not done
        assert view.topics == {}
        view.on_screen.show(False)  # the student went to another tab meanwhile
        loop.run_one()
        assert view.topics == {}  # computed, and waiting for the tab
        view.on_screen.show()
        reference = TopicsView(fits=fits)
        reference.fits.off_loop = OffLoop(background=False)
        reference.refresh()
        assert list(view.topics) == list(reference.topics) == ["truth", *(r.label for r in fits.active.values())]
        pd.testing.assert_frame_equal(view.table, reference.table)
    finally:
        fits.close()


def test_a_page_served_under_one_freeze_has_every_model_and_walks_them_once(monkeypatch):
    """``serve_page`` adds the page's models under one freeze of the document: the same models, each
    knowing its document, as Panel's ``server_doc`` alone adds, for fewer walks over the whole page
    (Bokeh walked every model again after each of the template's dozen roots, issue 41)."""
    import panel as pn
    from bokeh.document import Document
    from bokeh.document.models import DocumentModelManager

    from lpviz.dashboard.app import serve_page

    walks = collections.Counter()
    recompute = DocumentModelManager.recompute

    def counted(self):
        walks[self._document()] += 1
        return recompute(self)

    monkeypatch.setattr(DocumentModelManager, "recompute", counted)

    def served(frozen):
        document = Document()
        pn.state.curdoc = document
        try:
            serve_page(document) if frozen else create_app().server_doc(document)
        finally:
            pn.state.curdoc = None
        return document

    plain, frozen = served(False), served(True)
    assert len(frozen.roots) == len(plain.roots) > 5

    def kinds(document):
        return collections.Counter(type(model).__name__ for model in document.models)

    assert kinds(frozen) == kinds(plain)
    reachable = set().union(*(root.references() for root in frozen.roots))
    assert set(frozen.models) == reachable and all(model.document is frozen for model in reachable)
    assert walks[frozen] * 3 <= walks[plain], walks
