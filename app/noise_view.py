"""True, noised and truncated counts side by side on one colour scale.

Red is positive, blue negative (the noised counts go below zero), white is
zero; the scale is symmetric and shared by the three heatmaps so the eye can
compare them. Each heatmap is one ``hv.Image`` (a raster, not a glyph per
cell); matrices larger than :data:`MAX_DISPLAY` a side are shown with every
k-th row/column and a note saying so.
"""

from pathlib import Path

import holoviews as hv
import holoviews.plotting.bokeh  # noqa: F401  (the backend .opts() needs, also outside a server)
import numpy as np
import panel as pn
import param

from app.store import DataStore

MAX_DISPLAY = 300
HEATMAP_CMAP = "RdBu_r"  # diverging: blue < 0 < red


def display_slice(shape, max_display=MAX_DISPLAY):
    """Row and column strides that keep a matrix at most ``max_display`` a side."""
    return tuple(max(1, int(np.ceil(n / max_display))) for n in shape)


def axis_names(model):
    return ("sender", "recipient") if model == "blocks" else ("document", "word")


def count_image(Y, model, title, clim, *, strides=(1, 1), cmap=HEATMAP_CMAP, label="count"):
    """One heatmap of a count (or rate) matrix, rows down, hover values."""
    row_step, col_step = strides
    shown = np.asarray(Y, dtype=np.float64)[::row_step, ::col_step]
    rows = np.arange(0, Y.shape[0], row_step)
    cols = np.arange(0, Y.shape[1], col_step)
    row_name, col_name = axis_names(model)
    image = hv.Image((cols, rows, shown), kdims=[col_name, row_name], vdims=[label])
    return image.opts(title=title, cmap=cmap, clim=clim, colorbar=True, tools=["hover"],
                      invert_yaxis=True, responsive=True, min_height=260, min_width=220,
                      toolbar="above")


def colour_limit(*matrices, quantile=99.5):
    """A symmetric colour limit shared by ``matrices``.

    Heavy-tailed counts (an e-mail network's busiest pair sends hundreds)
    would wash every other cell out to white, so the scale stops at a high
    quantile of the absolute values; hover still shows the exact value.
    Returns ``(limit, clipped)``.
    """
    values = np.concatenate([np.abs(np.asarray(m, dtype=np.float64)).ravel() for m in matrices])
    top = float(values.max()) if values.size else 0.0
    limit = max(float(np.percentile(values, quantile)), 1.0)
    return (limit, True) if limit < top else (max(top, 1.0), False)


def subsample_note(shape, strides):
    if strides == (1, 1):
        return ""
    return (f"**Display subsampled:** every {strides[0]}-th row and {strides[1]}-th column "
            f"of the {shape[0]:,} x {shape[1]:,} matrix is drawn; fits and metrics use all cells.")


class NoiseView(pn.viewable.Viewer):
    """The data a person has, the data the world sees, and what the naive method uses."""

    store = param.ClassSelector(class_=DataStore)

    def __init__(self, store=None, **params):
        super().__init__(store=store, **params)

    @param.depends("store.Y_obs")
    def summary(self):
        store = self.store
        if store.Y_obs is None:
            return pn.pane.Markdown("No data yet.")
        Y_true, Y_obs = store.Y_true, store.Y_obs
        negative = float((Y_obs < 0).mean())
        changed = float((Y_obs != Y_true).mean())
        name = store.source if store.source != "upload" else Path(store.data.source or "upload").name
        lines = [
            f"**{name}**: {Y_true.shape[0]:,} x {Y_true.shape[1]:,} "
            f"({store.model}), {int(Y_true.sum()):,} counts, mean {Y_true.mean():.2f} per cell.",
            f"{store.alpha_summary}. Noise changed {changed:.0%} of cells; {negative:.0%} are now negative "
            f"and become 0 for the naive method.",
        ]
        note = subsample_note(Y_true.shape, display_slice(Y_true.shape))
        if note:
            lines.append(note)
        limit, clipped = colour_limit(Y_true, Y_obs)
        if clipped:
            lines.append(f"Colour scale stops at +/-{limit:,.0f} (99.5% of cells are inside; the largest "
                         f"count is {int(Y_true.max()):,}); hover shows exact values.")
        return pn.pane.Markdown("\n\n".join(lines), sizing_mode="stretch_width")

    def heatmap_layout(self):
        """The three heatmaps as one HoloViews layout (None without data)."""
        store = self.store
        if store.Y_obs is None:
            return None
        from lpviz.privacy import truncate

        Y_true, Y_obs = store.Y_true, store.Y_obs
        limit, _ = colour_limit(Y_true, Y_obs)
        clim = (-limit, limit)  # symmetric, so white is exactly zero
        strides = display_slice(Y_true.shape)
        images = [count_image(Y_true, store.model, "True counts (private to the owner)", clim, strides=strides),
                  count_image(Y_obs, store.model, "Noised counts (released)", clim, strides=strides),
                  count_image(truncate(Y_obs), store.model, "Truncated at 0 (naive method)", clim,
                              strides=strides)]
        return hv.Layout(images).cols(3).opts(shared_axes=True)

    def noise_histogram_plot(self):
        """The histogram of the noise drawn (None without data)."""
        store = self.store
        if store.Y_obs is None:
            return None
        tau = (store.Y_obs - store.Y_true).ravel()
        low = int(tau.min())
        counts = np.bincount(tau - low)
        edges = np.arange(low, low + len(counts) + 1) - 0.5
        histogram = hv.Histogram((edges, counts), kdims=["noise tau = noised - true"], vdims=["cells"])
        return histogram.opts(title="Noise drawn (two-sided geometric)", tools=["hover"],
                              responsive=True, height=220, color="#888888")

    @param.depends("store.Y_obs")
    def heatmaps(self):
        layout = self.heatmap_layout()
        if layout is None:
            return pn.pane.Markdown("")
        return pn.pane.HoloViews(layout, sizing_mode="stretch_width", min_height=320, name="noise-heatmaps")

    @param.depends("store.Y_obs")
    def noise_histogram(self):
        histogram = self.noise_histogram_plot()
        if histogram is None:
            return pn.pane.Markdown("")
        return pn.pane.HoloViews(histogram, sizing_mode="stretch_width")

    def figures(self):
        """Current figures as static HoloViews objects, for export."""
        if self.store.Y_obs is None:
            return {}
        return {"noise_heatmaps": self.heatmap_layout(), "noise_histogram": self.noise_histogram_plot()}

    def __panel__(self):
        return pn.Column(self.summary, self.heatmaps, self.noise_histogram, sizing_mode="stretch_width")
