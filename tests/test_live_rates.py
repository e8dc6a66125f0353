"""The live rate heatmaps (lpviz.dashboard.views.live_rates) draw what the export's count_image draws, updated in place.

Each figure is compared with HoloViews' own rendering of :func:`lpviz.dashboard.views.plots.count_image` of the same
values: the cells (display strides, a tensor summed over its months), the extent and axes, the
colour mapper of each scale with its limits and palette, the colour bar, title and hover.
"""

from types import SimpleNamespace

import holoviews as hv
import numpy as np
import pytest
from bokeh.document import Document
from bokeh.document.events import ColumnDataChangedEvent, ModelChangedEvent

from lpviz.dashboard.views.live_rates import LiveRates
from lpviz.dashboard.views.plots import RATE_CMAP, count_image, display_slice

SCALES = ("linear", "log", "quantile")
CLIM = (0.0, 3.0)


def heavy_tailed(shape, seed=0):
    """Rates as fits give them: many near zero, some exactly zero, a heavy tail."""
    values = np.random.default_rng(seed).gamma(0.3, 1.0, size=shape)
    values[values < 0.02] = 0.0
    return values


def drawing(plot):
    """What a heatmap figure draws, as comparable values."""
    (renderer,) = plot.renderers
    data = renderer.data_source.data
    mapper = renderer.glyph.color_mapper
    (bar,) = plot.right
    (hover,) = [tool for tool in plot.tools if type(tool).__name__ == "HoverTool"]
    return dict(
        image=np.asarray(data["image"][0]),
        extent=[float(data[key][0]) for key in ("x", "y", "dw", "dh")],
        mapper=type(mapper).__name__,
        limits=(mapper.low, mapper.high),
        palette=list(mapper.palette),
        nan_color=mapper.nan_color,
        title=plot.title.text,
        title_size=plot.title.text_font_size,
        axes=(plot.xaxis[0].axis_label, plot.yaxis[0].axis_label),
        ranges=[plot.x_range.start, plot.x_range.end, plot.y_range.start, plot.y_range.end],
        hover=list(hover.tooltips),
        bar=(bar.title, type(bar.ticker).__name__),
        toolbar=plot.toolbar_location,
        min_width=plot.min_width,
    )


def assert_same_drawing(live, reference):
    for key in ("image", "extent", "limits", "ranges"):
        np.testing.assert_allclose(live.pop(key), reference.pop(key), rtol=1e-12, atol=1e-12, err_msg=key)
    assert live == reference


def count_image_drawing(values, kind, title, strides, scale):
    return drawing(
        hv.render(
            count_image(
                values, kind, title, CLIM, strides=strides, cmap=RATE_CMAP, label="rate", scale=scale, min_width=300
            ),
            backend="bokeh",
        )
    )


@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize(
    ("kind", "shape"),
    [("documents", (400, 800)), ("documents", (90, 15)), ("network", (620, 620)), ("tensor", (30, 30, 6))],
)
def test_each_heatmap_draws_what_count_image_draws(kind, shape, scale):
    strides = display_slice(shape)
    values = heavy_tailed(shape)
    live = LiveRates(
        {"a": (np.zeros(shape), "fit\nnot started")},
        kind=kind,
        clim=CLIM,
        strides=strides,
        scale=scale,
        cmap=RATE_CMAP,
        label="rate",
        min_width=300,
    )
    plot = live.figures["a"]
    assert_same_drawing(drawing(plot), count_image_drawing(np.zeros(shape), kind, "fit\nnot started", strides, scale))
    live.update("a", values, "fit\nmean of 4 samples")
    assert live.figures["a"] is plot  # drawn in place
    assert_same_drawing(drawing(plot), count_image_drawing(values, kind, "fit\nmean of 4 samples", strides, scale))


def test_the_power_of_the_comparison():
    """The comparison tells a wrong drawing apart: another stride, the rows flipped, another scale."""
    shape = (400, 800)
    values = heavy_tailed(shape)
    live = LiveRates(
        {"a": (values, "fit")},
        kind="documents",
        clim=CLIM,
        strides=display_slice(shape),
        scale="linear",
        cmap=RATE_CMAP,
        label="rate",
        min_width=300,
    )
    for wrong in (
        count_image_drawing(values, "documents", "fit", (2, 2), "linear"),
        count_image_drawing(values[::-1], "documents", "fit", display_slice(shape), "linear"),
        count_image_drawing(values, "documents", "fit", display_slice(shape), "quantile"),
        count_image_drawing(values, "network", "fit", display_slice(shape), "linear"),
    ):
        with pytest.raises(AssertionError):
            assert_same_drawing(drawing(live.figures["a"]), wrong)


def test_heatmaps_share_their_axes_and_an_update_sends_only_what_changed():
    shape = (90, 15)
    live = LiveRates(
        {key: (np.zeros(shape), f"{key}\nnot started") for key in (None, "a", "b")},
        kind="documents",
        clim=CLIM,
        strides=(1, 1),
        scale="log",
        cmap=RATE_CMAP,
        label="rate",
        min_width=300,
    )
    plots = list(live.figures.values())
    assert len({id(plot.x_range) for plot in plots}) == len({id(plot.y_range) for plot in plots}) == 1
    assert [pane.object for pane in live.panel.objects] == plots
    document = Document()
    for plot in plots:
        document.add_root(plot)
    events = []
    document.on_change(lambda event: events.append(event))
    values = heavy_tailed(shape)
    live.update("a", values, "a\nmean of 4 samples")
    changed = {(type(event).__name__, event.model.id, getattr(event, "attr", None)) for event in events}
    (source,) = {r.data_source for r in live.figures["a"].renderers}
    mapper = live.figures["a"].renderers[0].glyph.color_mapper
    # the image column alone (not the extent), the title, and the log scale's lower limit (from the values)
    assert [event.cols for event in events if isinstance(event, ColumnDataChangedEvent)] == [["image"]]
    assert changed == {
        ("ColumnDataChangedEvent", source.id, "data"),
        ("ModelChangedEvent", live.figures["a"].title.id, "text"),
        ("ModelChangedEvent", mapper.id, "low"),
    }
    events.clear()
    live.update("a", values, "a\nmean of 4 samples")  # the same title and limits: only the image again
    assert [type(event) for event in events] == [ColumnDataChangedEvent]
    assert not any(isinstance(event, ModelChangedEvent) for event in events)


class ServedDocument:
    """What LiveRates asks of a served page's document: a session, and timeout callbacks (recorded here,
    called by the test as the event loop would)."""

    session_context = SimpleNamespace(request=SimpleNamespace(arguments={}), id="served")

    def __init__(self):
        self.callbacks = []

    def add_timeout_callback(self, callback, milliseconds):
        self.callbacks.append((callback, milliseconds))


def test_a_served_page_gets_one_heatmap_at_a_time(monkeypatch):
    import panel as pn

    from lpviz.dashboard.views.live_rates import SPREAD_MS

    shape = (6, 5)
    document = ServedDocument()
    monkeypatch.setattr(pn.state, "curdoc", document)
    live = LiveRates(
        {key: (np.zeros(shape), f"{key}\nnot started") for key in ("a", "b", "c")},
        kind="documents",
        clim=CLIM,
        strides=(1, 1),
        scale="linear",
        cmap=RATE_CMAP,
        label="rate",
        min_width=300,
    )
    assert document.callbacks == []  # the first drawing is whole, at once

    def image(key):
        (source,) = {r.data_source for r in live.figures[key].renderers}
        return np.asarray(source.data["image"][0])

    ones, twos, threes = (np.full(shape, float(v)) for v in (1, 2, 3))
    live.update("a", ones, "a\nsample 1")
    live.update("b", ones, "b\nsample 1")
    live.update("c", ones, "c\nsample 1")
    live.update("b", twos, "b\nsample 2")  # newer, while b waits: replaces it
    assert np.array_equal(image("a"), ones)  # at once
    assert live.waiting == ["b", "c"] and not image("b").any() and not image("c").any()
    assert [ms for _, ms in document.callbacks] == [SPREAD_MS]
    document.callbacks.pop(0)[0]()  # SPREAD_MS later: the next one
    assert np.array_equal(image("b"), twos) and live.figures["b"].title.text == "b\nsample 2"
    assert live.waiting == ["c"] and not image("c").any()
    document.callbacks.pop(0)[0]()
    assert np.array_equal(image("c"), ones) and live.waiting == []
    document.callbacks.pop(0)[0]()  # nothing waits: the spread ends
    assert document.callbacks == []
    live.update("c", threes, "c\nsample 3")  # the next result goes out at once again
    assert np.array_equal(image("c"), threes)
    fours = np.full(shape, 4.0)
    live.update("a", fours, "a\nsample 4")  # waits for c's turn to pass
    assert live.waiting == ["a"] and not np.array_equal(image("a"), fours)
    live.update("a", fours, "a\ndone", at_once=True)  # a run that stopped moving: drawn now
    assert np.array_equal(image("a"), fours) and live.figures["a"].title.text == "a\ndone"
    assert live.waiting == []
