"""The Fits tab's rate heatmaps as Bokeh figures made once and updated in place.

As a HoloViews layout of DynamicMaps fed by ``hv.streams.Pipe``, every new result
rendered a new HoloViews element and re-sent whole Bokeh models from the served
event loop (which every session of the process shares). Here a figure per heatmap
is made once per (release, set of methods, colour scale); a new result replaces its
source's image column and, when they changed, its title and colour limits (Bokeh
sends only the properties that changed), a millisecond or so.

On a served page the heatmaps of one result go out one at a time, :data:`SPREAD_MS` apart: BokehJS
repaints every figure changed by a message in one animation frame, 300-500 ms a heatmap at 4x CPU
throttling, so three at once held the page for 1-2 s (a click waited that long); one at a time, the
page takes a click between two.

The drawing is :func:`lpviz.dashboard.views.plots.count_image`'s, the HoloViews heatmap the export
keeps: the same cells (:func:`~lpviz.dashboard.views.plots.drawn_cells`), colour norm and limits
(:func:`~lpviz.dashboard.views.plots.scale_options`), palette, axes and title (the tests compare
the two figure by figure).
"""

import numpy as np
import panel as pn
from bokeh.models import (
    BasicTicker,
    BinnedTicker,
    ColumnDataSource,
    EqHistColorMapper,
    HoverTool,
    LinearColorMapper,
    LogColorMapper,
    LogTicker,
    NoOverlap,
    Range1d,
)
from bokeh.models.annotations import ColorBar
from bokeh.plotting import figure
from holoviews.plotting.util import process_cmap

from lpviz.dashboard.views.plots import (
    AXES,
    HEATMAP_MIN_HEIGHT,
    HEATMAP_TITLE_SIZE,
    SUMMED_NOTE,
    drawn_cells,
    scale_options,
    value_label,
)

# The Bokeh colour mapper of each colour norm :func:`~views.plots.scale_options` names (as HoloViews maps them).
MAPPERS = {
    "linear": (LinearColorMapper, BasicTicker),
    "log": (LogColorMapper, LogTicker),
    "eq_hist": (EqHistColorMapper, BinnedTicker),
}
# The time between two heatmaps' updates sent to a served page (see the module's text).
SPREAD_MS = 300
# Beside each other while each is at least its minimum width (two to a row from ~650 px), one to a row
# on a phone: a flex item's basis; never three to a row (a title ~230 px wide on a 1500 px page).
FLEX_BASIS = "40%"


class LiveRates:
    """Heatmaps of rate matrices of one shape, side by side in :attr:`panel`, one per key of ``frames``
    (``{key: (values, title)}``, drawn now), on one colour ``scale`` with the limits ``clim`` and shared
    axes; ``kind``, ``strides``, ``cmap`` and ``label`` as in :func:`~lpviz.dashboard.views.plots.count_image`.

    :meth:`update` draws a new frame in a heatmap; :attr:`figures` are the Bokeh figures (by key).
    """

    def __init__(self, frames, *, kind, clim, strides, scale, cmap, label, min_width):
        self.clim, self.strides, self.scale = clim, strides, scale
        self._spanned = False  # the shared axes span the matrix (set by the first frame)
        self._palette = process_cmap(cmap, 256)
        self._axes = AXES.get(kind, ("row", "column"))
        self._min_width = min_width
        self._x_range, self._y_range = Range1d(0, 1), Range1d(1, 0)  # shared by the heatmaps, set by the first
        self.figures, self._sources, self._mappers = {}, {}, {}
        # served: updates waiting for their turn (key -> (values, title)), the newest of each
        doc = pn.state.curdoc
        self._doc = doc if doc is not None and doc.session_context is not None else None
        self._waiting, self._sending = {}, False
        for key, (values, title) in frames.items():
            self._add(key, value_label(title, label))  # a reference of counts: "count", not "rate"
            self._draw(key, values, title)
        self.panel = pn.FlexBox(
            *(
                pn.pane.Bokeh(plot, sizing_mode="stretch_width", min_width=min_width, name="rate-heatmap")
                for plot in self.figures.values()
            ),
            sizing_mode="stretch_width",
            name="rate-heatmaps",
        )

    def _add(self, key, label):
        options = scale_options(self.scale, self.clim)
        norm = options["cnorm"]
        mapper_class, ticker_class = MAPPERS[norm]
        mapper = mapper_class(palette=self._palette, nan_color="rgba(0, 0, 0, 0)")
        if norm == "eq_hist":  # as count_image's HoloViews heatmap: zeros at the palette's bottom
            mapper.rescale_discrete_levels = options["rescale_discrete_levels"]
        source = ColumnDataSource({"image": [], "x": [], "y": [], "dw": [], "dh": []})
        row_name, col_name = self._axes
        plot = figure(
            x_range=self._x_range,
            y_range=self._y_range,
            x_axis_label=col_name,
            y_axis_label=row_name,
            sizing_mode="stretch_width",
            height=HEATMAP_MIN_HEIGHT,
            min_width=self._min_width,
            tools="wheel_zoom,save,pan,box_zoom,reset",
            active_drag="pan",
            active_scroll="wheel_zoom",
            toolbar_location="above",
            output_backend="webgl",
            min_border=10,
            styles={"flex": f"1 1 {FLEX_BASIS}"},  # the figure is the flex item (the pane adds no element)
        )
        renderer = plot.image("image", x="x", y="y", dw="dw", dh="dh", source=source, color_mapper=mapper)
        tooltips = [(col_name, "$x"), (row_name, "$y"), (label, "@image")]
        plot.add_tools(HoverTool(renderers=[renderer], tooltips=tooltips))
        ticker = ticker_class(mapper=mapper) if ticker_class is BinnedTicker else ticker_class()
        plot.add_layout(
            ColorBar(
                color_mapper=mapper,
                ticker=ticker,
                title=label,
                location=(0, 0),
                label_standoff=8,
                major_label_policy=NoOverlap(),
                major_tick_line_color="black",
                bar_line_color="black",
            ),
            "right",
        )
        plot.title.text_font_size = HEATMAP_TITLE_SIZE
        plot.grid.grid_line_color = None
        self.figures[key], self._sources[key], self._mappers[key] = plot, source, mapper

    def update(self, key, values, title, *, at_once=False):
        """Draw ``values`` (a rate matrix, or tensor: summed over its further modes) titled ``title``
        in the heatmap of ``key``: its image replaced, title and colour limits set where they changed.
        On a served page: at once when no other heatmap's update went out in the last
        :data:`SPREAD_MS`, else after the ones waiting (a newer update of a waiting heatmap replaces it).
        ``at_once``: drawn now whatever waits (a run that stopped moving is shown as it is, with the
        scores and claim that come with it, not a heatmap left behind for a turn)."""
        if self._doc is None or at_once:
            self._waiting.pop(key, None)
            self._draw(key, values, title)
            return
        self._waiting[key] = (values, title)
        if not self._sending:
            self._send_next()

    @property
    def waiting(self):
        """The heatmaps whose update waits for its turn (served only)."""
        return list(self._waiting)

    def _send_next(self):
        if not self._waiting:
            self._sending = False
            return
        key = next(iter(self._waiting))
        values, title = self._waiting.pop(key)
        self._sending = True
        try:
            self._draw(key, values, title)
        finally:
            # the next one in a callback of its own (a message of its own), SPREAD_MS later
            self._doc.add_timeout_callback(self._send_next, SPREAD_MS)

    def _draw(self, key, values, title):
        summed = np.ndim(values) > 2
        shown, _, _, xlim, ylim = drawn_cells(values, self.strides)
        source, mapper, plot = self._sources[key], self._mappers[key], self.figures[key]
        if not self._spanned:  # the first frame: the axes span the matrix (every frame has its shape)
            self._spanned = True
            self._x_range.update(start=xlim[0], end=xlim[1], reset_start=xlim[0], reset_end=xlim[1])
            self._y_range.update(start=ylim[1], end=ylim[0], reset_start=ylim[1], reset_end=ylim[0])  # rows down
        if not source.data["image"]:
            source.data = {
                "image": [shown],
                "x": [xlim[0]],
                "y": [ylim[0]],
                "dw": [xlim[1] - xlim[0]],
                "dh": [ylim[1] - ylim[0]],
            }
        else:
            source.data["image"] = [shown]  # only the image is sent: the extent stays
        options = scale_options(self.scale, self.clim, shown)
        mapper.update(low=options["clim"][0], high=options["clim"][1])
        plot.title.text = f"{title}{SUMMED_NOTE}" if summed else title
