"""Live trace plots: Bokeh lines fed straight from the runners' trace buffers.

An overlay of HoloViews DynamicMaps over the buffers re-ran every curve's callback
and re-applied the overlay's options on every redraw: about 90 ms per buffer on a
2-core machine, the largest share of a served class's event loop (py-spy, 2
sessions on the Fits tab: 42% of the loop). Here a redraw streams only the rows
that are new since the last one into one ``ColumnDataSource`` per runner
(``ColumnDataSource.stream`` with the buffer's length as rollover: the browser
keeps what the buffer keeps), a millisecond or so. The buffers stay the data
(``runner.buffer``); this module only draws them.
"""

import weakref

import numpy as np
from bokeh.models import ColumnDataSource, HoverTool, NumeralTickFormatter, Range1d
from bokeh.plotting import figure

from lpviz.dashboard.session.traces import CHAIN_TRACES
from lpviz.dashboard.views.live_rates import FLEX_BASIS

# The narrowest a trace plot gets: its title ("Log joint (each method's own model)") and the legend's
# method names fit, and one fits the main column of a 412 px phone.
TRACE_MIN_WIDTH = 330
# Legend places outside the frame, as HoloViews names them (``legend_position``) -> Bokeh's side panels.
OUTSIDE = {"top": "above", "bottom": "below"}


def chain_of(column):
    """Which chain a trace column follows: ``log_joint_2`` is chain 2's, ``log_joint`` chain 0's."""
    stem, _, suffix = column.rpartition("_")
    return int(suffix) if stem in CHAIN_TRACES and suffix.isdigit() else 0


def line_style(chain):
    """``(line width, alpha)`` of chain ``chain``'s trace line, on the tab and in its PNG: chain 0's line
    carries the method's legend entry; its other chains share its colour, thinner and fainter."""
    return (1.5, 1.0) if chain == 0 else (1.0, 0.55)


class LiveTraces:
    """One plot of live trace lines: ``lines`` are ``(runner, column, line_dash)``.

    Subscribes to each runner's ``buffer``; every trigger of a buffer (a drain's one
    redraw) streams that runner's new rows. :meth:`detach` unsubscribes (the plot was
    replaced). ``figure`` is the Bokeh figure to show (``pn.pane.Bokeh``). ``after``: an iteration
    (the burn-in); once rows past it are drawn, the axes span those rows alone (the climb before it,
    thousands of units, would hide differences of tens between chains). ``chain_colors``: one colour
    per chain, each chain in the legend (a plot of one method's chains), instead of the method's colour.
    """

    def __init__(self, lines, *, title, ylabel, legend, min_width=TRACE_MIN_WIDTH, after=None, chain_colors=None):
        self.figure = figure(
            title=title,
            x_axis_label="iteration",
            y_axis_label=ylabel,
            height=300,
            sizing_mode="stretch_width",
            min_width=min_width,
            # beside each other on a desktop, one to a row on a phone (two at 412 px cut their titles
            # and legends): the figure is the flex item of the view's FlexBox
            styles={"flex": f"1 1 {FLEX_BASIS}"},
            tools="pan,wheel_zoom,box_zoom,reset,save",
            # set from the rows drawn (as HoloViews did): a range left to Bokeh warns "could not set
            # initial ranges" in the console while the lines are empty
            x_range=Range1d(0, 1),
            y_range=Range1d(0, 1),
        )
        # plain numbers with thousands separators ("-250,000"), not Bokeh's "-2.500e+5" for large ones
        self.figure.yaxis.formatter = NumeralTickFormatter(format="0,0.[000]")
        self.figure.xaxis.formatter = NumeralTickFormatter(format="0,0")
        self.figure.xaxis.ticker.min_interval = 1  # iterations: no ticks between them ("0 0 0 1 1 1" when empty)
        self._after = after
        self._runners = {}  # method -> runner
        self._columns = {}  # method -> the buffer columns drawn
        self.sources = {}  # method -> ColumnDataSource of those columns
        self._last = {}  # method -> the last iteration streamed
        renderers = []
        for runner, column, _ in lines:
            self._runners[runner.method] = runner
            self._columns.setdefault(runner.method, ["iteration"]).append(column)
        for method, runner in self._runners.items():
            self.sources[method] = ColumnDataSource(self._columns_of(method, runner.buffer.data))
            self._last[method] = self._last_iteration(runner.buffer.data)
        for runner, column, dash in lines:
            chain = chain_of(column)
            width, alpha = line_style(chain)
            style = dict(legend_label=runner.label) if chain == 0 else dict(line_alpha=alpha)
            color = runner.color
            if chain_colors is not None:
                width, color = 1.5, chain_colors[chain % len(chain_colors)]
                style = dict(legend_label=f"chain {chain}", line_alpha=0.85)
            renderers.append(
                self.figure.line(
                    "iteration",
                    column,
                    source=self.sources[runner.method],
                    color=color,
                    line_width=width,
                    line_dash=dash,
                    name=f"{runner.label}: {column}" if chain == 0 else f"{runner.label}: chain {chain}",
                    **style,
                )
            )
        self.figure.add_tools(
            HoverTool(
                renderers=renderers,
                tooltips=[("", "$name"), ("iteration", "@iteration{0,0}"), (ylabel, "$y{0,0.[000]}")],
            )
        )
        self._fit_ranges()
        key = self.figure.legend[0]
        if legend in OUTSIDE:
            # out of the lines' way: inside the frame a legend covered them (issue 57 LOW 25)
            self.figure.center = [renderer for renderer in self.figure.center if renderer is not key]
            self.figure.add_layout(key, OUTSIDE[legend])
            key.orientation = "horizontal" if chain_colors is not None else "vertical"
            key.padding, key.spacing, key.margin = 2, 0, 4
        else:
            key.location = legend
        key.label_text_font_size = "9pt"
        # a weak reference: a replaced plot that nobody detached cannot keep its figure alive
        own = weakref.ref(self)

        def on_rows(**contents):
            plot = own()
            if plot is not None:
                plot._stream(contents)

        self._subscriber = on_rows
        for runner in self._runners.values():
            runner.buffer.add_subscriber(on_rows)

    def _columns_of(self, method, data):
        # plain lists: a notebook's comm sent streamed numpy columns that BokehJS could not apply
        # ("s is not iterable" in apply_json_patch); a served page takes either
        return {column: np.asarray(data[column], dtype=float).tolist() for column in self._columns[method]}

    @staticmethod
    def _last_iteration(data):
        return float(data["iteration"].iloc[-1]) if len(data) else -np.inf

    def _stream(self, contents):
        for method, runner in self._runners.items():
            data = contents.get(f"trace_{method}")
            if data is None:
                continue  # another runner's buffer triggered
            source, last = self.sources[method], self._last[method]
            if len(data) and float(data["iteration"].iloc[0]) <= last < float(data["iteration"].iloc[-1]):
                new = data[data["iteration"] > last]
                source.stream(self._columns_of(method, new), rollover=runner.buffer.length or None)
            elif not len(data) or float(data["iteration"].iloc[-1]) != last:
                # cleared, restarted, or every kept row is new: the whole buffer at once
                source.data = self._columns_of(method, data)
            self._last[method] = self._last_iteration(data)
        self._fit_ranges()

    def _fit_ranges(self):
        """The axes span the rows drawn (0 to 1 while there are none); with ``after``, the rows past it
        once there are any."""
        xs, ys = [], []
        for method, source in self.sources.items():
            x = np.asarray(source.data["iteration"], dtype=float)
            xs.append(x)
            ys += [(x, np.asarray(source.data[column], dtype=float)) for column in self._columns[method][1:]]
        x = np.concatenate(xs)
        late = self._after is not None and bool(np.any(x > self._after))
        if late:
            x = x[x > self._after]
            y = np.concatenate([values[rows > self._after] for rows, values in ys])
        else:
            y = np.concatenate([values for _, values in ys]) if ys else x[:0]
        x, y = x[np.isfinite(x)], y[np.isfinite(y)]
        x_low, x_high = (float(x.min()), float(x.max())) if x.size else (0.0, 1.0)
        y_low, y_high = (float(y.min()), float(y.max())) if y.size else (0.0, 1.0)
        pad = 0.05 * (y_high - y_low) or 0.05 * max(abs(y_high), 1.0)
        self.figure.x_range.update(start=x_low, end=x_high if x_high > x_low else x_low + 1.0)
        self.figure.y_range.update(start=y_low - pad, end=y_high + pad)

    def detach(self):
        """Stop following the buffers (the plot was replaced or its page closed)."""
        for runner in self._runners.values():
            # HoloViews streams have add_subscriber and clear-all, no removal of one subscriber
            runner.buffer._subscribers = [
                (precedence, subscriber)
                for precedence, subscriber in runner.buffer._subscribers
                if subscriber is not self._subscriber
            ]
