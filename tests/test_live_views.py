"""What the live views send per update, and how a lagging page slows them (issue 37, item 2).

Each view is attached to a Bokeh document and the document's change events are recorded: those
are what a served page receives. A second heatmap result of the same cells sends its values only
(no axis factors, no height: those relay the page out); a trace update streams only the rows that
are new. A page that reports a blocked main thread stretches its session's update periods
(:class:`~lpviz.dashboard.serving.throttle.Pace`), and a quiet page brings them back.
"""

import math

import holoviews as hv
import numpy as np
import pandas as pd
import param
import pytest
from bokeh.document import Document
from bokeh.document.events import ColumnDataChangedEvent, ColumnsStreamedEvent, ModelChangedEvent
from panel.custom import JSComponent, ReactiveESM

from lpviz.dashboard.serving.throttle import PACE_DOWN, PACE_MAX, PACE_TARGET_SHARE, PACE_UP, Pace, PageLag, Throttle
from lpviz.dashboard.views.live_heatmaps import LiveHeatmaps
from lpviz.dashboard.views.live_traces import LiveTraces


def topics_frame(terms, topics, seed):
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        [(topic, term, float(rng.random())) for topic in topics for term in terms],
        columns=["topic", "term", "P(term | topic)"],
    )


def attached(*models):
    document = Document()
    for model in models:
        document.add_root(model)
    events = []
    document.on_change(lambda event: events.append(event))
    return events


def test_a_heatmap_result_of_the_same_cells_sends_only_its_values():
    live = LiveHeatmaps("topic", "term", "P(term | topic)", row_pixels=14)
    terms, topics = [f"w{i}" for i in range(12)], ["topic 0", "topic 1", "topic 2"]
    live.update({"private": topics_frame(terms, topics, 0)})
    plot, source, _ = live.figures["private"]
    assert list(plot.y_range.factors) == terms[::-1] and list(plot.x_range.factors) == topics
    first_height = plot.height
    events = attached(plot)
    new = topics_frame(terms, topics, 1)
    live.update({"private": new})
    columns = [event.cols for event in events if isinstance(event, ColumnDataChangedEvent)]
    assert columns == [["value"]]  # not x and y again
    changed = {getattr(event, "attr", None) for event in events if isinstance(event, ModelChangedEvent)}
    assert changed <= {"low", "high"}  # no factors, no height, no title: nothing that relays the page out
    assert np.array_equal(source.data["value"], new["P(term | topic)"].to_numpy())
    assert plot.height == first_height
    events.clear()
    live.update({"private": new})  # the very same result: nothing but the values' column
    assert [type(event) for event in events] == [ColumnDataChangedEvent]


def test_a_heatmap_of_other_terms_sends_its_cells_factors_and_height():
    live = LiveHeatmaps("topic", "term", "P(term | topic)", row_pixels=14, min_height=100)
    topics = ["topic 0", "topic 1"]
    live.update({"fit": topics_frame([f"w{i}" for i in range(12)], topics, 0)})
    plot, source, _ = live.figures["fit"]
    events = attached(plot)
    terms = [f"v{i}" for i in range(30)]
    live.update({"fit": topics_frame(terms, topics, 2)})
    changed = {getattr(event, "attr", None) for event in events if isinstance(event, ModelChangedEvent)}
    assert {"factors", "height"} <= changed
    assert list(plot.y_range.factors) == terms[::-1]  # the first term at the top
    assert plot.height == 14 * 30 + 90
    assert list(source.data["y"])[:2] == ["v0", "v1"]
    # the x factors (the same topics) were not sent again
    assert not [e for e in events if isinstance(e, ModelChangedEvent) and e.model is plot.x_range]


class FakeRunner:
    """What LiveTraces reads of a runner: its name, label, colour and trace buffer."""

    def __init__(self, method, length=50):
        self.method, self.label, self.color = method, method, "#123456"
        self.burn_in = 0  # the traces open after it (issue 57 MEDIUM 8)
        self.buffer = hv.streams.Buffer(
            pd.DataFrame({"iteration": [], "log_joint": []}),
            length=length,
            index=False,
            rename={"data": f"trace_{method}"},
        )

    def add(self, start, stop):
        rows = pd.DataFrame({"iteration": np.arange(start, stop, dtype=float), "log_joint": -np.arange(start, stop)})
        self.buffer.send(rows)


def test_a_trace_update_streams_only_the_new_points():
    runner = FakeRunner("a")
    live = LiveTraces([(runner, "log_joint", "solid")], title="t", ylabel="log joint", legend="top_left")
    runner.add(0, 10)
    source = live.sources["a"]
    assert source.data["iteration"] == list(np.arange(10.0))
    events = attached(live.figure)
    runner.add(10, 14)
    streamed = [event for event in events if isinstance(event, ColumnsStreamedEvent)]
    assert len(streamed) == 1 and streamed[0].data["iteration"] == [10.0, 11.0, 12.0, 13.0]
    assert streamed[0].rollover == 50  # the browser keeps what the buffer keeps
    assert not [event for event in events if isinstance(event, ColumnDataChangedEvent)]  # nothing re-sent
    assert source.data["iteration"] == list(np.arange(14.0))
    live.detach()
    events.clear()
    runner.add(14, 20)  # a detached plot follows no more
    assert events == []


def test_a_blocked_page_stretches_its_sessions_periods_and_a_quiet_one_restores_them():
    pace = Pace()
    assert pace.factor == 1.0
    pace.report(1.0)  # blocked all the time: up, at most PACE_UP per report
    assert pace.factor == pytest.approx(min(PACE_UP, math.sqrt(1.0 / PACE_TARGET_SHARE)))
    for _ in range(20):
        pace.report(0.9)
    assert pace.factor == PACE_MAX  # bounded: a page that lags that much still moves
    pace.report(PACE_TARGET_SHARE)  # at the target: stays
    assert pace.factor == PACE_MAX
    pace.report(0.0)  # quiet: down, at most PACE_DOWN per report
    assert pace.factor == pytest.approx(PACE_MAX * PACE_DOWN)
    for _ in range(50):
        pace.report(0.0)
    assert pace.factor == 1.0  # never faster than planned
    pace.report(-3)  # a nonsense report is clipped, not trusted
    assert pace.factor == 1.0


def test_a_paced_throttle_waits_its_period_times_the_pace():
    now = [100.0]
    pace = Pace()
    throttle = Throttle(2.0, clock=lambda: now[0], pace=pace)
    plain = Throttle(2.0, clock=lambda: now[0])
    assert throttle.due() and plain.due()
    pace.factor = 4.0
    now[0] += 2.5
    assert plain.due() and not throttle.due()  # the lagging page's session waits 8 s, not 2
    now[0] += 5.6
    assert throttle.due()
    assert throttle.period == 8.0 and plain.period == 2.0
    throttle.defer()  # a deferral is one (stretched) period
    now[0] += 7.9
    assert not throttle.due()
    now[0] += 0.2
    assert throttle.due()


def test_the_page_lag_element_reports_to_its_pace():
    pace = Pace()
    element = PageLag(pace)
    element._handle_msg([0.8, 950])  # as the page's script sends it
    assert pace.blocked_share == 0.8 and pace.max_lag_ms == 950
    assert pace.factor == PACE_UP
    element._handle_msg([0.8, 950])  # the same figures again: a report still
    assert pace.factor == PACE_UP**2
    for nonsense in ("0.8 950", None, [0.8], ["a", 1]):  # ignored, not trusted
        element._handle_msg(nonsense)
    assert pace.factor == PACE_UP**2 and pace.blocked_share == 0.8


def test_the_page_lag_report_is_a_message_so_the_page_still_lets_go_of_dropped_figures():
    # BokehJS walks its document's models again (dropping the ones no longer shown) 30 s after the last
    # change of a property that may hold models, which a component's own properties are taken to: set
    # from the page every second, the report put that walk off for ever (the previous data's heatmaps
    # stayed in the page's document). A message (model.send_msg) changes no property.
    class Bare(JSComponent):
        _esm = "export function render() {}"

    class Reporting(Bare):  # a report as a property of its own (as it was): the check tells them apart
        report = param.String()

    model = PageLag(Pace()).get_root()
    assert "send_msg(" in model.esm
    plain = set(Bare().get_root().data.properties())
    assert set(model.data.properties()) == plain  # no property of its own for the page to set
    assert set(Reporting().get_root().data.properties()) != plain


def test_the_scoreboard_pane_is_never_hidden_so_new_scores_never_relay_the_tab_out():
    # a pane made visible makes BokehJS lay the whole tab out again (every figure measured and repainted:
    # 2-3 s of a 4x throttled page at the first scores and at every Pause); a new text only reflows

    from lpviz.dashboard.session.fits import Fits
    from lpviz.dashboard.views.fits_view import FitsView

    fits = Fits()
    try:
        view = FitsView(fits=fits)
        column = view.__panel__()
        (table,) = [obj for obj in column.objects if obj.name == "fit-scores"]
        assert view.scores.empty and table.visible
        model = table.get_root()
        assert model.visible and "table" not in model.text  # empty: no height, nothing shown
        view.scores = pd.DataFrame({"method": ["private"], "MAE": [0.5]})
        assert table.visible and model.visible and "scoreboard" in model.text  # (escaped HTML)
    finally:
        fits.close()


def test_the_page_lag_reporter_is_a_root_of_its_own_not_part_of_a_tab():
    # BokehJS loads a JSComponent's module before it draws the layout that holds it, while the layout's
    # other views already listen for changes: in the Fits tab, a patch meanwhile (a preset's iterations,
    # a progress bar's max) hit a bar not drawn yet ("Cannot set properties of undefined (setting
    # 'max')"), the rest of that patch was lost and the progress lines kept the old preset's goal (3 of 8
    # page opens in chromium; and so after a reconnection, when the page builds every view again). In the
    # template's header it is a root of its own, drawn with the page, and no tab waits for it.
    from lpviz.dashboard.app import create_app
    from lpviz.dashboard.views.fits_view import FitsView

    template = create_app()
    (view,) = [view for view in template.main[0].views if isinstance(view, FitsView)]
    try:
        assert view.__panel__().select(ReactiveESM) == []  # the Fits tab holds no module-loaded component
        for tab in template.main[0].views:
            panel = tab.__panel__() if hasattr(tab, "__panel__") else tab
            assert panel.select(ReactiveESM) == [], type(tab).__name__
        (reporter,) = [obj for obj in template.header.objects if isinstance(obj, PageLag)]
        assert reporter.pace is view.fits.pace  # the session's pace hears the page
    finally:
        view.fits.close()


def test_a_plot_after_burn_in_spans_the_rows_past_it_and_its_legend_stands_outside_the_frame():
    """Issue 57 MEDIUM 8 and LOW 25: a method's chains after burn-in are drawn on the range of the rows
    past it (the climb before it hid the chains' gap), and a legend "top" stands above the frame."""
    runner = FakeRunner("a", length=100)
    live = LiveTraces(
        [(runner, "log_joint", "solid")], title="t", ylabel="log joint", legend="top", after=5, chain_colors=("#000",)
    )
    runner.add(0, 4)  # nothing past the burn-in yet: every row spans the axes
    assert (live.figure.x_range.start, live.figure.x_range.end) == (0.0, 3.0)
    assert live.figure.y_range.start < -3 and live.figure.y_range.end > 0
    runner.add(4, 20)  # rows 6..19 are past it: log joint -6..-19, padded by 5% of 13
    assert (live.figure.x_range.start, live.figure.x_range.end) == (6.0, 19.0)
    assert (live.figure.y_range.start, live.figure.y_range.end) == pytest.approx((-19.65, -5.35))
    legend = live.figure.legend[0]
    assert legend in live.figure.above and legend not in live.figure.center
    assert [item.label.value for item in legend.items] == ["chain 0"]
    inside = LiveTraces([(runner, "log_joint", "solid")], title="t", ylabel="log joint", legend="top_left")
    assert inside.figure.legend[0] in inside.figure.center  # a place inside the frame stays inside
