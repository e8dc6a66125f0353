"""True, noised and truncated counts side by side, each on its own symmetric colour scale.

Red is positive, blue negative (the noised counts go below zero), white is
zero. The noised counts are the session's release; the truth beside them is
what only the data owner (here: the simulation) knows.

What these charts draw is the same for every session of one data set (a class opens the preset at
its class seed: one release, one truth): it is computed once per data set and process
(:func:`shared_drawing`, plain read-only arrays) and each page makes its own cheap Bokeh figures from
it (Bokeh models belong to one document). The HoloViews layout (:meth:`NoiseView.heatmap_layout`)
stays the export's. A page open drew these charts through HoloViews in 0.2 s of the server's CPU,
a quarter of the open (issue 41).
"""

import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass

import holoviews as hv
import numpy as np
import panel as pn
import param

from lpviz.dashboard.serving.onscreen import OnScreen
from lpviz.dashboard.session.datastore import DataStore
from lpviz.dashboard.views.plots import (
    ACTOR_KINDS,
    HeatmapCells,
    axis_labels,
    bars_figure,
    colour_limit,
    count_figure,
    count_image,
    count_scale,
    display_slice,
    heatmap_cells,
    read_only,
    subsample_note,
)

HISTOGRAM_TITLE = "Noise drawn (two-sided geometric)"
HISTOGRAM_AXES = ("noise tau = noised - true", "cells")
HISTOGRAM_COLOUR = "#888888"
HISTOGRAM_HEIGHT = 220
# Data sets whose drawings a process keeps: a class works on one or two at a time; each drawing is
# at most three 300 x 300 images (the display's subsampling), ~2 MB.
SHARED_DRAWINGS = 8
# Three heatmaps to a row while each keeps its minimum width, fewer on a narrow page (a flex item's basis).
HEATMAP_FLEX = "1 1 30%"


@dataclass(frozen=True)
class NoiseDrawing:
    """What the Data & noise tab draws of one release and its truth, the same for every session that
    holds them: the heatmaps' cells (true counts when known, noised, truncated), the histogram of the
    noise drawn (``(edges, counts)``; None without the truth) and the summary's figures. Read-only."""

    kind: str
    heatmaps: tuple[HeatmapCells, ...]
    histogram: tuple | None
    negative: float  # share of the noised counts below zero
    changed: float | None  # share of the cells the noise changed (None without the truth)
    truth_scale: tuple | None  # colour_limit of the true counts: (limit, clipped)


def drawing_key(release, truth, labels):
    """The identity of what :func:`noise_drawing` draws: a digest of the counts, the held-out and
    structural-zero cells, the kind and the axis names (not of the objects holding them: every
    session derives its own release object from the same settings)."""
    digest = hashlib.blake2b(digest_size=20)
    digest.update(str(release.kind).encode())
    arrays = (release.Y_obs, None if truth is None else truth.Y, release.heldout_cells, release.structural_zeros)
    for array in arrays:
        if array is None:
            digest.update(b"-")
            continue
        array = np.ascontiguousarray(array)
        digest.update(f"{array.dtype.str}{array.shape}".encode())
        digest.update(array.data)
    for names in labels:
        digest.update(b"-" if names is None else "\x1f".join(map(str, names)).encode())
        digest.update(b"\x1e")
    return digest.hexdigest()


def noise_drawing(release, truth, labels=(None, None)):
    """The :class:`NoiseDrawing` of ``release`` and its ``truth`` (None: a release without it), the axes
    named by ``labels`` (``(rows, cols)``, None: numbered). Pure; :func:`shared_drawing` calls it once
    per data set."""
    from lpviz.privacy import truncate

    Y_obs = release.Y_obs
    Y_true = truth.Y if truth is not None else None
    options = dict(strides=display_slice(Y_obs.shape), labels=labels, heldout=release.heldout_cells)

    def cells(values, title):  # each heatmap's own scale, from the data it shows; white is zero
        clim, cmap = count_scale(values)
        return heatmap_cells(values, title, clim, cmap=cmap, **options)

    truncated = truncate(Y_obs)
    heatmaps = [cells(Y_obs, "Noised counts (released)"), cells(truncated, "Noised counts truncated at 0")]
    histogram = changed = truth_scale = None
    if Y_true is not None:
        heatmaps.insert(0, cells(Y_true, "True counts (private to the owner)"))
        histogram = noise_counts(release, truth)
        changed = float((Y_obs != Y_true).mean())
        truth_scale = colour_limit(Y_true)
    return NoiseDrawing(
        kind=release.kind,
        heatmaps=tuple(heatmaps),
        histogram=histogram,
        negative=float((Y_obs < 0).mean()),
        changed=changed,
        truth_scale=truth_scale,
    )


def noise_counts(release, truth):
    """``(edges, counts)``: how many cells got each noise value tau = noised - true (cells that do not
    exist were not noised)."""
    tau = release.Y_obs - truth.Y
    if release.structural_zeros is not None:
        tau = tau[~release.structural_zeros]
    tau = tau.ravel()
    low = int(tau.min())
    counts = np.bincount(tau - low)
    edges = np.arange(low, low + len(counts) + 1) - 0.5
    return read_only(edges.astype(np.float64)), read_only(counts)


_drawings: OrderedDict[str, NoiseDrawing] = OrderedDict()  # drawing_key -> its drawing, the newest last
_drawings_lock = threading.Lock()  # sessions are served from one loop, but a test or a notebook may use threads


def shared_drawing(release, truth, labels=(None, None)):
    """:func:`noise_drawing`, computed once per data set in this process and shared read-only by every
    session that draws it (the :data:`SHARED_DRAWINGS` newest kept)."""
    key = drawing_key(release, truth, labels)
    with _drawings_lock:
        drawing = _drawings.get(key)
        if drawing is not None:
            _drawings.move_to_end(key)
            return drawing
    drawing = noise_drawing(release, truth, labels)
    with _drawings_lock:
        _drawings[key] = drawing
        while len(_drawings) > SHARED_DRAWINGS:
            _drawings.popitem(last=False)
    return drawing


def histogram_figure(edges, counts):
    """The histogram of the noise drawn as a Bokeh figure (the export's is :meth:`NoiseView.noise_histogram_plot`)."""
    x_label, y_label = HISTOGRAM_AXES
    return bars_figure(
        edges[:-1],
        edges[1:],
        counts,
        title=HISTOGRAM_TITLE,
        x_label=x_label,
        y_label=y_label,
        colour=HISTOGRAM_COLOUR,
        height=HISTOGRAM_HEIGHT,
    )


class NoiseView(pn.viewable.Viewer):
    """The data a person has, the data the world sees, and the noised data truncated at 0."""

    data = param.ClassSelector(class_=DataStore)
    release = param.Parameter(default=None, doc="the release drawn: the session's, once this view is shown")

    def __init__(self, **params):
        super().__init__(**params)
        self._drawn = (None, None)  # ((release, truth, data), its NoiseDrawing): looked up once per release
        self.on_screen = OnScreen()  # hidden (another tab shown): new data are drawn when shown
        self.data.param.watch(lambda *_: self.on_screen.run("release", self._follow), ["release"])
        self._follow()

    def _follow(self):
        self.release = self.data.release

    def drawing(self):
        """The :class:`NoiseDrawing` of the session's release (None without one): the process's shared one
        (:func:`shared_drawing`), looked up once per release."""
        store = self.data
        release, truth = store.release, store.truth
        if release is None:
            return None
        held, drawing = self._drawn
        if held is None or any(a is not b for a, b in zip(held, (release, truth, store.data), strict=True)):
            # actors named on a network's axes (a corpus's document ids would only clutter them)
            labels = axis_labels(store) if release.kind in ACTOR_KINDS else (None, None)
            drawing = shared_drawing(release, truth, labels)
            self._drawn = ((release, truth, store.data), drawing)
        return drawing

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
                f"{data.noise_summary}. {self.drawing().negative:.0%} of the noised counts are negative.",
            ]
            note = subsample_note(Y_obs.shape, display_slice(Y_obs.shape))
            return pn.pane.Markdown("\n\n".join(lines + ([note] if note else [])), sizing_mode="stretch_width")
        Y_true = truth.Y
        drawing = self.drawing()
        negative, changed = drawing.negative, drawing.changed
        name = data.data.name or data.settings.source
        lines = [
            f"**{name}**: {' x '.join(f'{n:,}' for n in Y_true.shape)} ({data.model}), "
            f"{int(Y_true.sum()):,} counts, {_mean_per_cell(Y_true, release.structural_zeros)}.",
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
        limit, clipped = drawing.truth_scale
        lines.append(
            "Each heatmap has its own colour scale, from the counts it shows, white at zero: blue to red "
            "where counts can be negative (the noised counts), white to red where none are."
        )
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

        strides = display_slice(Y_obs.shape)
        kind = release.kind
        # actors named on a network's axes (a corpus's document ids would only clutter them)
        labels = axis_labels(self.data) if kind in ACTOR_KINDS else (None, None)
        # signed counts on a diverging scale whose white is zero: linear, with the tail clipped
        # (colour_limit); the rate colour scale applies to the rate heatmaps
        options = dict(strides=strides, labels=labels, heldout=release.heldout_cells)
        truncated = truncate(Y_obs)

        def image(values, title):  # each heatmap's own scale, from the data it shows (the page's, count_scale)
            clim, cmap = count_scale(values)
            return count_image(values, kind, title, clim, cmap=cmap, **options)

        images = [image(Y_obs, "Noised counts (released)"), image(truncated, "Noised counts truncated at 0")]
        if Y_true is not None:
            images.insert(0, image(Y_true, "True counts (private to the owner)"))
        return hv.Layout(images).cols(3).opts(shared_axes=True)

    def noise_histogram_plot(self):
        """The histogram of the noise drawn (None without data)."""
        release, truth = self.data.release, self.data.truth
        if release is None or truth is None:  # the noise drawn is known only beside the truth
            return None
        edges, counts = noise_counts(release, truth)
        histogram = hv.Histogram((edges, counts), kdims=[HISTOGRAM_AXES[0]], vdims=[HISTOGRAM_AXES[1]])
        return histogram.opts(
            title=HISTOGRAM_TITLE, tools=["hover"], responsive=True, height=HISTOGRAM_HEIGHT, color=HISTOGRAM_COLOUR
        )

    @param.depends("release")
    def heatmaps(self):
        """The heatmaps of :meth:`drawing` as this page's own Bokeh figures, on shared axes."""
        drawing = self.drawing()
        if drawing is None:
            return pn.pane.Markdown("")
        plots, ranges = [], {}
        for cells in drawing.heatmaps:
            plot = count_figure(cells, drawing.kind, **ranges)
            plot.styles = {"flex": HEATMAP_FLEX}  # the figure is the flex item (a Bokeh pane adds no element)
            ranges = dict(x_range=plot.x_range, y_range=plot.y_range)  # one zoom for the three
            plots.append(plot)
        return pn.FlexBox(
            *(pn.pane.Bokeh(plot, sizing_mode="stretch_width", min_width=plot.min_width) for plot in plots),
            sizing_mode="stretch_width",
            name="noise-heatmaps",
        )

    @param.depends("release")
    def noise_histogram(self):
        drawing = self.drawing()
        if drawing is None or drawing.histogram is None:
            return pn.pane.Markdown("")
        return pn.pane.Bokeh(histogram_figure(*drawing.histogram), sizing_mode="stretch_width")

    def figures(self):
        """Current figures as static HoloViews objects, for export."""
        self.on_screen.catch_up()
        if self.data.release is None:
            return {}
        figures = {"noise_heatmaps": self.heatmap_layout(), "noise_histogram": self.noise_histogram_plot()}
        return {name: figure for name, figure in figures.items() if figure is not None}

    def __panel__(self):
        return pn.Column(self.summary, self.heatmaps, self.noise_histogram, sizing_mode="stretch_width")


def _mean_per_cell(Y, structural_zeros):
    """The mean count over the cells that exist: a network's diagonal (no self loops) is not a cell,
    and Figure 1's N, the data's mean count, is this mean (15.63 beside an unexplained "mean 14.85
    per cell" over all cells, issue 57 LOW 22)."""
    if structural_zeros is None or not structural_zeros.any():
        return f"mean {Y.mean():.2f} per cell"
    cells = int(structural_zeros.size - structural_zeros.sum())
    return (
        f"mean {Y.sum() / cells:.2f} per cell over its {cells:,} cells "
        f"({int(structural_zeros.sum()):,} cells, such as self loops, cannot hold counts and are left out)"
    )
