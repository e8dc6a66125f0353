"""Run the three chains and watch them: controls, progress, live traces and rates.

The traces are ``hv.DynamicMap`` curves over each runner's bounded
``hv.streams.Buffer``, so new rows are streamed to the browser (Bokeh
``ColumnDataSource.stream``) rather than the plot being redrawn. The
posterior-mean heatmaps are fed through ``hv.streams.Pipe`` when a runner's
result snapshot changes, at most every ``RATE_REDRAW_SECONDS`` while it runs
(each redraw re-sends whole images) and at once when it pauses, stops or ends.
"""

import time


import holoviews as hv
import holoviews.plotting.bokeh  # noqa: F401  (the backend .opts() needs, also outside a server)
import numpy as np
import panel as pn
import param

from app.noise_view import colour_limit, count_image, display_slice
from app.runner import METHODS
from app.store import DataStore

METHOD_COLORS = {"private": "#d62728", "naive": "#1f77b4", "nonprivate": "#2ca02c"}
METHOD_LABELS = {"private": "private (models the noise)", "naive": "naive (truncated data)",
                 "nonprivate": "non-private (true data)"}
RATE_CMAP = "Reds"
RATE_REDRAW_SECONDS = 2.0
FIRST_RATES_SECONDS = 1.0


def trace_curve(buffer, column, method, *, line_dash="solid"):
    """A live curve of one trace column of one runner."""
    # Styled once; each redraw clones it around the buffer's data (keeping its
    # options), which costs half of building and styling a new curve per drain.
    styled = hv.Curve(buffer.data, "iteration", column, label=METHOD_LABELS[method]).opts(
        color=METHOD_COLORS[method], line_width=1.5, line_dash=line_dash, tools=["hover"])

    def curve(data):
        return styled.clone(data)

    return hv.DynamicMap(curve, streams=[buffer])


class FitsView(pn.viewable.Viewer):
    """Start, pause, resume, stop and reset the chains; see them converge."""

    store = param.ClassSelector(class_=DataStore)

    def __init__(self, store=None, **params):
        super().__init__(store=store, **params)
        self._rate_pipes = {}
        self._rates_sent = {}  # method -> (time, result) of the last heatmap redraw
        for runner in self.store.runners.values():
            runner.param.watch(self._on_result, ["result", "status"])

    # ---- controls -----------------------------------------------------------------
    def controls(self):
        buttons = []
        for name, kind, action in (("Start", "success", self.store.start), ("Pause", "warning", self.store.pause),
                                   ("Resume", "primary", self.store.resume), ("Stop", "danger", self.store.stop),
                                   ("Reset", "light", self.store.reset)):
            button = pn.widgets.Button(name=name, button_type=kind, width=90)
            button.on_click(action)
            buttons.append(button)
        return pn.Row(*buttons)

    def progress(self, method):
        runner = self.store.runners[method]
        bar = pn.indicators.Progress(value=pn.bind(min, runner.param.iteration, runner.param.n_iter),
                                     max=runner.param.n_iter, width=220, bar_color="primary")

        def text(status, iteration, n_iter, rate, error):
            line = f"**{METHOD_LABELS[method]}** - {status}, iteration {iteration:,} / {n_iter:,}, " \
                   f"{rate:,.0f} it/s"
            return line + (f" - {error}" if error else "")

        label = pn.pane.Markdown(pn.bind(text, runner.param.status, runner.param.iteration, runner.param.n_iter,
                                         runner.param.iterations_per_second, runner.param.error),
                                 margin=(0, 10), sizing_mode="stretch_width")
        return pn.Row(bar, label, sizing_mode="stretch_width")

    # ---- traces -------------------------------------------------------------------
    @param.depends("store.mask", "store.data")
    def traces(self):
        store = self.store
        reference = "true rates" if store.truth is not None else "true counts"
        mae_curves = []
        for method in METHODS:
            buffer = store.runners[method].buffer
            mae_curves.append(trace_curve(buffer, "mae", method))
            mae_curves.append(trace_curve(buffer, "mae_mean", method, line_dash="dashed"))
            if store.mask is not None:
                mae_curves.append(trace_curve(buffer, "heldout_mae", method, line_dash="dotted"))
        mae_plot = hv.Overlay(mae_curves).collate().opts(
            title=f"MAE against the {reference}",
            responsive=True, height=300, legend_position="top_right", show_legend=True, ylabel="MAE")
        joint_plot = hv.Overlay([trace_curve(store.runners[m].buffer, "log_joint", m)
                                 for m in METHODS]).collate().opts(
            title="Log joint (each method's own model)", responsive=True, height=300,
            legend_position="bottom_right", ylabel="log joint")
        key = ("Solid: the current sample. Dashed: the posterior mean over the saved samples"
               + (". Dotted: the posterior mean on the held-out cells." if store.mask is not None else "."))
        return pn.Column(pn.Row(pn.pane.HoloViews(mae_plot, sizing_mode="stretch_width", name="mae-trace"),
                                pn.pane.HoloViews(joint_plot, sizing_mode="stretch_width", name="joint-trace"),
                                sizing_mode="stretch_width"),
                         pn.pane.Markdown(key, margin=(0, 10)), sizing_mode="stretch_width")

    # ---- live rates -----------------------------------------------------------------
    @param.depends("store.Y_obs")
    def rates(self):
        store = self.store
        if store.Y_true is None:
            return pn.pane.Markdown("")
        reference = store.truth if store.truth is not None else store.Y_true
        clim = (0.0, colour_limit(reference)[0])
        strides = display_slice(reference.shape)
        panels = [count_image(reference, store.model, "Truth" if store.truth is not None else "True counts",
                              clim, strides=strides, cmap=RATE_CMAP, label="rate")]
        self._rate_pipes, self._rates_sent = {}, {}
        for method in METHODS:
            runner = store.runners[method]
            pipe = hv.streams.Pipe(data=self._rate_frame(runner.result, reference.shape))
            self._rate_pipes[method] = pipe
            self._rates_sent[method] = (-np.inf, runner.result)

            def image(data, method=method):
                values, title = data
                return count_image(values, store.model, f"{method}: {title}", clim, strides=strides,
                                   cmap=RATE_CMAP, label="rate")

            panels.append(hv.DynamicMap(image, streams=[pipe]))
        layout = hv.Layout(panels).cols(4).opts(shared_axes=True)
        return pn.pane.HoloViews(layout, sizing_mode="stretch_width", min_height=320, name="rate-heatmaps")

    @staticmethod
    def _rate_frame(result, shape):
        if result is None:
            return np.zeros(shape), "not started"
        if result["mu_hat"] is not None:
            return result["mu_hat"], f"mean of {result['samples_saved']} samples"
        return result["mu"], f"burn-in, sample {result['iteration']}"

    def _on_result(self, *events):
        runner = events[0].obj
        pipe = self._rate_pipes.get(runner.method)
        if pipe is None or self.store.Y_true is None:
            return
        now = time.monotonic()
        last_time, last_result = self._rates_sent.get(runner.method, (-np.inf, None))
        if any(event.name == "status" and event.new == "running" for event in events):
            # A run starts or resumes: its first trace points go out first,
            # the heatmaps' first redraw comes FIRST_RATES_SECONDS later.
            self._rates_sent[runner.method] = (max(last_time, now - RATE_REDRAW_SECONDS + FIRST_RATES_SECONDS),
                                               last_result)
            return
        if runner.result is last_result:
            return
        if runner.status == "running" and now - last_time < RATE_REDRAW_SECONDS:
            return  # the next snapshot (or the end of the run) redraws it
        self._rates_sent[runner.method] = (now, runner.result)
        pipe.send(self._rate_frame(runner.result, self.store.Y_true.shape))

    def figures(self):
        """The traces and rates as they are now, as static HoloViews objects, for export."""
        store = self.store
        if store.Y_true is None:
            return {}
        traces = {method: store.runners[method].trace() for method in METHODS}
        mae = hv.Overlay([hv.Curve(traces[m], "iteration", "mae", label=METHOD_LABELS[m]).opts(
            color=METHOD_COLORS[m]) for m in METHODS]).opts(title="MAE of the current sample", ylabel="MAE")
        joint = hv.Overlay([hv.Curve(traces[m], "iteration", "log_joint", label=METHOD_LABELS[m]).opts(
            color=METHOD_COLORS[m]) for m in METHODS]).opts(title="Log joint", ylabel="log joint")
        reference = store.truth if store.truth is not None else store.Y_true
        clim = (0.0, colour_limit(reference)[0])
        strides = display_slice(reference.shape)
        rates = [count_image(reference, store.model, "Truth" if store.truth is not None else "True counts",
                             clim, strides=strides, cmap=RATE_CMAP, label="rate")]
        for method in METHODS:
            values, title = self._rate_frame(store.runners[method].result, reference.shape)
            rates.append(count_image(values, store.model, f"{method}: {title}", clim, strides=strides,
                                     cmap=RATE_CMAP, label="rate"))
        return {"fits_mae_trace": mae, "fits_log_joint_trace": joint,
                "fits_rates": hv.Layout(rates).cols(4)}

    def __panel__(self):
        return pn.Column(
            self.controls(),
            *[self.progress(method) for method in METHODS],
            self.traces,
            pn.pane.Markdown("### Rates: truth and each method's estimate"),
            self.rates,
            sizing_mode="stretch_width")
