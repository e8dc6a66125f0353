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
from bokeh.models import ColumnDataSource, HoverTool, LinearAxis, NumeralTickFormatter, Range1d
from bokeh.plotting import figure

from app.live_rates import FLEX_BASIS
from app.runner import CHAIN_TRACES

# The narrowest a trace plot gets: its title ("Log joint (each method's own model)") and the legend's
# method names fit, and one fits the main column of a 412 px phone.
TRACE_MIN_WIDTH = 330


def chain_of(column):
    """Which chain a trace column follows: ``log_joint_2`` is chain 2's, ``log_joint`` chain 0's."""
    stem, _, suffix = column.rpartition("_")
    return int(suffix) if stem in CHAIN_TRACES and suffix.isdigit() else 0


# Traces of each method's own model: their levels are not comparable across methods (the private
# method's log joint holds the noise's terms), so each method gets a y axis of its own.
OWN_MODEL_TRACES = (*CHAIN_TRACES, "elbo")


def own_model(column):
    """Whether ``column`` (``log_joint``, ``log_joint_2``, ``elbo``, ...) traces a method's own model."""
    stem, _, suffix = column.rpartition("_")
    return (stem if stem in CHAIN_TRACES and suffix.isdigit() else column) in OWN_MODEL_TRACES


def line_style(chain):
    """``(line width, alpha)`` of chain ``chain``'s trace line, on the tab and in its PNG: chain 0's line
    carries the method's legend entry; its other chains share its colour, thinner and fainter."""
    return (1.5, 1.0) if chain == 0 else (1.0, 0.55)


class LiveTraces:
    """One plot of live trace lines: ``lines`` are ``(runner, column, line_dash)``.

    Subscribes to each runner's ``buffer``; every trigger of a buffer (a drain's one
    redraw) streams that runner's new rows. :meth:`detach` unsubscribes (the plot was
    replaced). ``figure`` is the Bokeh figure to show (``pn.pane.Bokeh``).

    The axes open on the iterations after burn-in once there are any (:meth:`_fit_ranges`; the
    toolbar's Reset shows every iteration), and a trace of each method's own model (log joint,
    ELBO) gives each method a y axis of its own, in its colour: on "Two chains, two modes" the
    private method's two chains, ~30 apart, were one flat line on an axis spanning the first
    iterations' climb and the three methods' levels, ~6,000 (issue 57 MEDIUM 8).
    """

    def __init__(self, lines, *, title, ylabel, legend, min_width=TRACE_MIN_WIDTH):
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
        # each method on a y range of its own (the first on the figure's own): its own model's levels
        methods = list(self._runners)
        separate = len(methods) > 1 and all(own_model(column) for _, column, _ in lines)
        self._range_names = {method: "default" for method in methods}
        if separate:
            first = self._runners[methods[0]]
            self.figure.yaxis[0].update(**self._axis_colour(first.color))  # its label stays the trace's
            for method in methods[1:]:
                runner = self._runners[method]
                self._range_names[method] = f"y_{method}"
                self.figure.extra_y_ranges[f"y_{method}"] = Range1d(0, 1)
                axis = LinearAxis(
                    y_range_name=f"y_{method}",
                    axis_label=runner.label,
                    formatter=NumeralTickFormatter(format="0,0.[000]"),
                    **self._axis_colour(runner.color),
                )
                self.figure.add_layout(axis, "right")
        hovers = []
        for runner, column, dash in lines:
            chain = chain_of(column)
            width, alpha = line_style(chain)
            style = dict(legend_label=runner.label) if chain == 0 else dict(line_alpha=alpha)
            line = self.figure.line(
                "iteration",
                column,
                source=self.sources[runner.method],
                color=runner.color,
                line_width=width,
                line_dash=dash,
                name=f"{runner.label}: {column}" if chain == 0 else f"{runner.label}: chain {chain}",
                y_range_name=self._range_names[runner.method],
                **style,
            )
            renderers.append(line)
            if separate:  # the line's own value ($y is the first method's axis)
                hovers.append(([line], f"@{{{column}}}{{0,0.[000]}}"))
        for hovered, value in hovers or [(renderers, "$y{0,0.[000]}")]:
            tooltips = [("", "$name"), ("iteration", "@iteration{0,0}"), (ylabel, value)]
            self.figure.add_tools(HoverTool(renderers=hovered, tooltips=tooltips))
        self._fit_ranges()
        self.figure.legend.location = legend
        self.figure.legend.label_text_font_size = "9pt"
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

    @staticmethod
    def _axis_colour(color):
        return dict(axis_label_text_color=color, major_label_text_color=color, axis_line_color=color)

    def _fit_ranges(self):
        """The axes span the rows drawn after burn-in once there are any, else every row drawn (0 to 1
        while there are none); each y range (one per method, or one for all) its methods' rows. Reset
        (the toolbar's) shows every row: the ranges' reset limits span them all."""
        after = any(
            np.any(np.asarray(source.data["iteration"], dtype=float) > self._runners[method].burn_in)
            for method, source in self.sources.items()
        )
        xs, x_all, ys, y_all = [], [], {}, {}
        for method, source in self.sources.items():
            x = np.asarray(source.data["iteration"], dtype=float)
            keep = x > self._runners[method].burn_in if after else np.ones(x.shape, dtype=bool)
            name = self._range_names[method]
            xs.append(x[keep])
            x_all.append(x)
            for column in self._columns[method][1:]:
                y = np.asarray(source.data[column], dtype=float)
                ys.setdefault(name, []).append(y[keep])
                y_all.setdefault(name, []).append(y)
        x_low, x_high = _span(xs, (0.0, 1.0))
        reset_low, reset_high = _span(x_all, (0.0, 1.0))
        self.figure.x_range.update(
            start=x_low,
            end=x_high if x_high > x_low else x_low + 1.0,
            reset_start=reset_low,
            reset_end=reset_high if reset_high > reset_low else reset_low + 1.0,
        )
        for name, values in ys.items():
            y_range = self.figure.y_range if name == "default" else self.figure.extra_y_ranges[name]
            low, high = _padded(*_span(values, (0.0, 1.0)))
            reset_low, reset_high = _padded(*_span(y_all[name], (0.0, 1.0)))
            y_range.update(start=low, end=high, reset_start=reset_low, reset_end=reset_high)

    def detach(self):
        """Stop following the buffers (the plot was replaced or its page closed)."""
        for runner in self._runners.values():
            # HoloViews streams have add_subscriber and clear-all, no removal of one subscriber
            runner.buffer._subscribers = [
                (precedence, subscriber)
                for precedence, subscriber in runner.buffer._subscribers
                if subscriber is not self._subscriber
            ]


def _span(arrays, empty):
    """``(min, max)`` of the finite values of ``arrays``, ``empty`` without any."""
    values = np.concatenate(arrays) if arrays else np.zeros(0)
    values = values[np.isfinite(values)]
    return (float(values.min()), float(values.max())) if values.size else empty


def _padded(low, high):
    """``(low, high)`` with 5% of their span (of their size when equal) either side."""
    pad = 0.05 * (high - low) or 0.05 * max(abs(high), 1.0)
    return low - pad, high + pad
