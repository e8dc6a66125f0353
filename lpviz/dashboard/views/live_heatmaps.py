"""Categorical heatmaps (a long table of x, y and value) drawn as Bokeh figures updated in place.

The Topics tab redrew its term x topic heatmaps as a new HoloViews layout for every
new result: Bokeh models built, serialized and sent again, 1-2.4 s of a served
session's event loop per redraw (py-spy, a class of 4: 90% of the loop while the
tab was shown). Here a figure per heatmap is made once per set of names; a new
result of the same terms and topics sends only its value column (and colour limits
and title where they changed); other terms or topics send the new cells with their
axis factors and height. A change of factors or height relays the page out (BokehJS
measures the figure again): never for a result that keeps them.
"""

import numpy as np
import panel as pn
from bokeh.models import ColumnDataSource, FactorRange, HoverTool, LinearColorMapper
from bokeh.models.annotations import ColorBar
from bokeh.palettes import Blues256
from bokeh.plotting import figure

# Side by side while each is at least MIN_WIDTH wide, one to a row on a phone: a Row of four made the
# Topics tab 500+ px wide at 412 px, and the page cut the last heatmap (issue 37). The figure is the
# flex item of the FlexBox (its pane adds no element).
MIN_WIDTH = 220


class LiveHeatmaps:
    """Heatmaps of long tables with columns ``x``, ``y`` and ``value``, side by side in :attr:`panel`.

    :meth:`update` takes ``{title: frame}``: the first y value is drawn at the top;
    each figure is ``row_pixels`` per y value high (at least ``min_height``).
    """

    def __init__(self, x, y, value, *, row_pixels, min_height=320, empty="No topics yet"):
        self.x, self.y, self.value = x, y, value
        self.row_pixels, self.min_height, self.empty = row_pixels, min_height, empty
        self.panel = pn.FlexBox(pn.pane.Markdown(empty), sizing_mode="stretch_width", name="live-heatmaps")
        self.figures = {}  # title -> (figure, source, colour mapper)

    def _figure(self):
        mapper = LinearColorMapper(palette=tuple(reversed(Blues256)), low=0.0, high=1.0)
        source = ColumnDataSource({"x": [], "y": [], "value": []})
        plot = figure(
            x_range=FactorRange(),
            y_range=FactorRange(),
            sizing_mode="stretch_width",
            height=self.min_height,
            min_width=MIN_WIDTH,
            styles={"flex": "1 1 0"},
            tools="pan,wheel_zoom,box_zoom,reset,save",
            x_axis_label=self.x,
            y_axis_label=self.y,
        )
        plot.rect("x", "y", 1, 1, source=source, fill_color={"field": "value", "transform": mapper}, line_color=None)
        plot.add_tools(HoverTool(tooltips=[(self.x, "@x"), (self.y, "@y"), (self.value, "@value{0.0000}")]))
        plot.add_layout(ColorBar(color_mapper=mapper, width=10), "right")
        plot.yaxis.major_label_text_font_size = "8pt"
        plot.grid.visible = False
        plot.axis.axis_line_color = None
        return plot, source, mapper

    def update(self, frames):
        """Draw ``{title: frame}`` (an empty dict: the empty message)."""
        if not frames:
            self.figures = {}
            self.panel.objects = [pn.pane.Markdown(self.empty)]
            return
        if list(frames) != list(self.figures):  # other heatmaps: new figures, once
            self.figures = {title: self._figure() for title in frames}
            self.panel.objects = [
                pn.pane.Bokeh(plot, sizing_mode="stretch_width", min_width=MIN_WIDTH)
                for plot, _, _ in self.figures.values()
            ]
        for title, frame in frames.items():
            plot, source, mapper = self.figures[title]
            xs = [str(v) for v in frame[self.x]]
            ys = [str(v) for v in frame[self.y]]
            values = np.asarray(frame[self.value], dtype=float)
            low, high = (float(values.min()), float(values.max())) if len(values) else (0.0, 1.0)
            if plot.title.text != str(title):
                plot.title.text = str(title)
            mapper.update(low=low, high=high if high > low else low + 1e-12)  # Bokeh sends only a change
            if list(source.data["x"]) == xs and list(source.data["y"]) == ys:
                source.data["value"] = values  # the same cells: only their values are sent
                continue
            column_factors = list(dict.fromkeys(xs))
            row_factors = list(dict.fromkeys(ys))[::-1]  # the first term at the top
            if list(plot.x_range.factors) != column_factors:
                plot.x_range.factors = column_factors
            if list(plot.y_range.factors) != row_factors:
                plot.y_range.factors = row_factors
            height = max(self.min_height, self.row_pixels * len(row_factors) + 90)
            if plot.height != height:
                plot.height = height
            source.data = {"x": xs, "y": ys, "value": values}
