"""True, noised and truncated counts side by side on one colour scale.

Red is positive, blue negative (the noised counts go below zero), white is
zero; the scale is symmetric and shared by the three heatmaps so the eye can
compare them. The noised counts are the session's release; the truth beside
them is what only the data owner (here: the simulation) knows.
"""

import holoviews as hv
import numpy as np
import panel as pn
import param

from app.datastore import DataStore
from app.onscreen import OnScreen
from app.plots import ACTOR_KINDS, axis_labels, colour_limit, count_image, display_slice, subsample_note


class NoiseView(pn.viewable.Viewer):
    """The data a person has, the data the world sees, and the noised data truncated at 0."""

    data = param.ClassSelector(class_=DataStore)
    release = param.Parameter(default=None, doc="the release drawn: the session's, once this view is shown")

    def __init__(self, **params):
        super().__init__(**params)
        self.on_screen = OnScreen()  # hidden (another tab shown): new data are drawn when shown
        self.data.param.watch(lambda *_: self.on_screen.run("release", self._follow), ["release"])
        self._follow()

    def _follow(self):
        self.release = self.data.release

    @param.depends("release")
    def summary(self):
        data = self.data
        release, truth = data.release, data.truth
        if release is None:
            return pn.pane.Markdown("No data yet.")
        if truth is None:
            Y_obs = release.Y_obs
            lines = [
                f"**{release.name or 'an uploaded release'}**: {' x '.join(f'{n:,}' for n in Y_obs.shape)} "
                f"({data.model}), a release without its true counts: {release.describe()}.",
                f"{data.noise_summary}. {float((Y_obs < 0).mean()):.0%} of the noised counts are negative.",
            ]
            note = subsample_note(Y_obs.shape, display_slice(Y_obs.shape))
            return pn.pane.Markdown("\n\n".join(lines + ([note] if note else [])), sizing_mode="stretch_width")
        Y_true, Y_obs = truth.Y, release.Y_obs
        negative = float((Y_obs < 0).mean())
        changed = float((Y_obs != Y_true).mean())
        name = data.data.name or data.settings.source
        lines = [
            f"**{name}**: {' x '.join(f'{n:,}' for n in Y_true.shape)} ({data.model}), "
            f"{int(Y_true.sum()):,} counts, mean {Y_true.mean():.2f} per cell.",
            f"{data.noise_summary}. Noise changed {changed:.0%} of cells; {negative:.0%} are now negative "
            "(truncating them at 0, as a fit that ignores the noise does, biases small counts upward).",
            f"Simulated release: noise seed {release.noise_seed} (whoever knows the seed can undo the noise; "
            "a real release uses exact noise, `lpviz privatize` without --seed).",
        ]
        if release.heldout_cells is not None:
            lines.append(
                f"{int(release.heldout_cells.sum()):,} cells held out of the fits "
                f"({data.settings.holdout}), shaded grey on the heatmaps."
            )
        note = subsample_note(Y_true.shape, display_slice(Y_true.shape))
        if note:
            lines.append(note)
        limit, clipped = colour_limit(Y_true)
        lines.append("Each heatmap has its own colour scale, from the counts it shows (white is zero).")
        if clipped:
            lines.append(
                f"The true counts' colour scale stops at +/-{limit:,.0f} (99.5% of cells are inside; the largest "
                f"count is {int(Y_true.max()):,}); hover shows exact values."
            )
        return pn.pane.Markdown("\n\n".join(lines), sizing_mode="stretch_width")

    def heatmap_layout(self):
        """The three heatmaps as one HoloViews layout (None without data)."""
        from lpviz.privacy import truncate

        release, truth = self.data.release, self.data.truth
        if release is None:
            return None
        Y_obs = release.Y_obs
        Y_true = truth.Y if truth is not None else None

        def clim(values):  # each heatmap's own scale, from the data it shows; symmetric, so white is zero
            limit = colour_limit(values)[0]
            return (-limit, limit)

        strides = display_slice(Y_obs.shape)
        kind = release.kind
        # actors named on a network's axes (a corpus's document ids would only clutter them)
        labels = axis_labels(self.data) if kind in ACTOR_KINDS else (None, None)
        # signed counts on a diverging scale whose white is zero: linear, with the tail clipped
        # (colour_limit); the rate colour scale applies to the rate heatmaps
        options = dict(strides=strides, labels=labels, heldout=release.heldout_cells)
        truncated = truncate(Y_obs)
        images = [
            count_image(Y_obs, kind, "Noised counts (released)", clim(Y_obs), **options),
            count_image(truncated, kind, "Noised counts truncated at 0", clim(truncated), **options),
        ]
        if Y_true is not None:
            images.insert(0, count_image(Y_true, kind, "True counts (private to the owner)", clim(Y_true), **options))
        return hv.Layout(images).cols(3).opts(shared_axes=True)

    def noise_histogram_plot(self):
        """The histogram of the noise drawn (None without data)."""
        release, truth = self.data.release, self.data.truth
        if release is None or truth is None:  # the noise drawn is known only beside the truth
            return None
        tau = release.Y_obs - truth.Y
        if release.structural_zeros is not None:
            tau = tau[~release.structural_zeros]  # cells that do not exist were not noised
        tau = tau.ravel()
        low = int(tau.min())
        counts = np.bincount(tau - low)
        edges = np.arange(low, low + len(counts) + 1) - 0.5
        histogram = hv.Histogram((edges, counts), kdims=["noise tau = noised - true"], vdims=["cells"])
        return histogram.opts(
            title="Noise drawn (two-sided geometric)", tools=["hover"], responsive=True, height=220, color="#888888"
        )

    @param.depends("release")
    def heatmaps(self):
        layout = self.heatmap_layout()
        if layout is None:
            return pn.pane.Markdown("")
        return pn.pane.HoloViews(
            layout, sizing_mode="stretch_width", min_height=320, name="noise-heatmaps", linked_axes=False
        )

    @param.depends("release")
    def noise_histogram(self):
        histogram = self.noise_histogram_plot()
        if histogram is None:
            return pn.pane.Markdown("")
        return pn.pane.HoloViews(histogram, sizing_mode="stretch_width")

    def figures(self):
        """Current figures as static HoloViews objects, for export."""
        self.on_screen.catch_up()
        if self.data.release is None:
            return {}
        figures = {"noise_heatmaps": self.heatmap_layout(), "noise_histogram": self.noise_histogram_plot()}
        return {name: figure for name, figure in figures.items() if figure is not None}

    def __panel__(self):
        return pn.Column(self.summary, self.heatmaps, self.noise_histogram, sizing_mode="stretch_width")
