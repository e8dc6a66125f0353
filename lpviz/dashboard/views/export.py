"""Export: the current figures as PNG or HTML, the release, the fits with the truth, a summary.

Everything the dashboard makes is a simulation (it noises data it holds the
truth of, with a seed it shows), and every file says so in its name and
contents. Two kinds of data export:

- the **release** alone (``lpviz_release_simulated.npz``, the
  :class:`~lpviz.release.Release` schema): the noised counts, the noise level,
  held-out cells and structural zeros; no truth and no noise seed (with the
  seed anyone subtracts the noise: the file says ``simulated`` instead), and
  labels only under the library's one rule: those a release holds, which it
  does only when they were declared public (an uploaded release's own);
- the **simulation with the truth** (``lpviz_simulation_with_truth.npz``):
  the true counts (and rates), the release, and each method's posterior-mean
  rates, best factors and trace, as the fits saw them.

PNG goes through HoloViews' matplotlib backend, so no browser is needed;
HTML is the interactive Bokeh figure with its resources inline (it opens
without a network). The functions write files and never overwrite one unless
told to; the :class:`ExportView` hands the same bytes to the browser.
"""

import io
import json
import os
import tempfile
import threading
from pathlib import Path

import holoviews as hv
import numpy as np
import panel as pn
import param

from lpviz.dashboard.serving.onscreen import OnScreen
from lpviz.dashboard.session.fits import Fits
from lpviz.dashboard.views.live_traces import chain_of
from lpviz.dashboard.views.plots import axis_labels

FIGURE_FORMATS = {".png": "matplotlib", ".html": "bokeh"}
RELEASE_FILE = "lpviz_release_simulated.npz"
TRUTH_FILE = "lpviz_simulation_with_truth.npz"
SUMMARY_FILE = "lpviz_simulation_summary.json"
COMPARISON_FILE = "lpviz_methods_compared.csv"
SIMULATION_FORMAT = "lpviz-simulation-1"
RESULT_FORMATS = (".npz", ".json")
PNG_DPI = 110
PNG_NOTE = (
    "*Figure as PNG* draws the figure with matplotlib when you click: a second or two, a few more for large "
    "heatmaps; the download starts when it is drawn."
)
# A PNG is a 16:9 slide (13.33 x 7.5 inches, PowerPoint's and Google Slides' widescreen page).
SLIDE_INCHES = (13.333, 7.5)
# Heatmaps with more rows or columns than this carry no number per cell (unreadable, "8.0963e-13").
MAX_LABELLED_CELLS = 10
# A title shrinks to this size (points) to stay on one line before it is cut with an ellipsis.
MIN_TITLE_POINTS = 7
# Bokeh option names the views use, as matplotlib spells them.
_MPL_NAMES = {
    "line_width": "linewidth",
    "line_dash": "linestyle",
    "size": "s",
    "text_color": "color",
    "text_font_size": "fontsize",
    "line_color": "edgecolor",
}


def _matplotlib_styled(figure):
    """``figure`` with its Bokeh styling (titles, colours, scales) carried over to matplotlib."""
    import holoviews.plotting.mpl  # noqa: F401  (registers the renderer; the app stays on bokeh)

    mpl_options = hv.Store.options(backend="matplotlib")

    def carry(obj):
        if isinstance(obj, hv.HeatMap):
            obj = _heatmap_as_image(obj)
        spec = mpl_options[type(obj).__name__]
        allowed = set(spec["plot"].allowed_keywords) | set(spec["style"].allowed_keywords)
        options = {}
        for group in ("plot", "style"):
            for name, value in hv.Store.lookup_options("bokeh", obj, group).kwargs.items():
                name = _MPL_NAMES.get(name, name)
                if name in allowed and value is not None:
                    options[name] = value**2 if name == "s" else value  # bokeh: diameter, mpl: area
        options.pop("fontsize", None)  # bokeh's '9pt' strings are no matplotlib sizes
        if options.get("cnorm") == "eq_hist":
            # HoloViews' matplotlib histogram equalisation maps values to colours non-monotonically
            # along its colour bar (ticks 20, 40, 60, 80 were drawn at 246, 273, 191, 246 px: unordered,
            # on top of each other): a PNG uses the linear scale, with the same colour limits
            options["cnorm"] = "linear"
        if isinstance(obj, (hv.Overlay, hv.Element)) and "fig_inches" in allowed:
            options["fig_inches"] = 5
        return obj.opts(backend="matplotlib", clone=True, **options)

    styled = figure.map(carry, lambda obj: isinstance(obj, (hv.Element, hv.Overlay)))
    if isinstance(styled, hv.Layout):  # panels carry their own titles: no "A, B, C" sublabels
        # and their own axes: a panel of 14 terms drew a blank row under the others' 15
        styled = styled.opts(backend="matplotlib", sublabel_format="", shared_axes=False)
    return styled


def _heatmap_as_image(heatmap):
    """A categorical heatmap as the image the tab draws: columns and rows in the order of its dimensions'
    ``values`` (else of first appearance), the first row at the top, every row and column named.

    HoloViews' matplotlib HeatMap sorts categories as text and, with ``invert_yaxis``, labelled the
    rows of the topics PNG "word 0 ... word 14" over rows drawn in another order; it also wrote a
    number in every cell. Here no number is written (a heatmap is read by colour; the tab's hover
    gives the numbers)."""
    xdim, ydim = heatmap.kdims[:2]
    vdim = heatmap.vdims[0]
    frame = heatmap.dframe()

    def order(dim):
        return list(dim.values) if dim.values else list(dict.fromkeys(frame[dim.name]))

    xs, ys = order(xdim), order(ydim)
    matrix = frame.pivot_table(index=ydim.name, columns=xdim.name, values=vdim.name, aggfunc="first")
    matrix = matrix.reindex(index=ys, columns=xs).to_numpy(dtype=float)
    image = hv.Image(
        matrix, bounds=(-0.5, -0.5, len(xs) - 0.5, len(ys) - 0.5), kdims=[xdim.name, ydim.name], vdims=[vdim]
    )
    bokeh = {
        **hv.Store.lookup_options("bokeh", heatmap, "plot").kwargs,
        **hv.Store.lookup_options("bokeh", heatmap, "style").kwargs,
    }
    return image.opts(
        backend="matplotlib",
        title=bokeh.get("title", ""),
        cmap=bokeh.get("cmap", "Blues"),
        colorbar=bool(bokeh.get("colorbar", True)),
        xlabel=bokeh.get("xlabel") or xdim.name,
        ylabel=bokeh.get("ylabel") or ydim.name,
        xticks=[(j, str(x)) for j, x in enumerate(xs)],
        yticks=[(len(ys) - 1 - i, str(y)) for i, y in enumerate(ys)],
        aspect="auto",
    )


def heatmap_labels(ax):
    """``(column labels left to right, row labels top to bottom, matrix as drawn top row first)`` of a
    drawn heatmap panel (an image, or a mesh of cells as HoloViews' own matplotlib HeatMap draws it):
    what a reader of the PNG sees, for tests. Read where they are drawn on the page (an inverted axis, as
    a heatmap whose first row is at the top has, puts its largest value at the bottom)."""
    from matplotlib.collections import QuadMesh

    def shown_x(x):
        return ax.transData.transform((x, 0.0))[0]

    def shown_y(y):
        return ax.transData.transform((0.0, y))[1]

    if ax.get_images():
        image = ax.get_images()[0]
        matrix = np.asarray(image.get_array(), dtype=float)
        left, right, bottom, top = image.get_extent()
        # the array's first row lies at the extent's top with origin "upper", at its bottom with "lower"
        first, last = (top, bottom) if image.origin == "upper" else (bottom, top)
        if shown_y(first) < shown_y(last):  # the first row drawn lower on the page than the last
            matrix = matrix[::-1]
        if shown_x(left) > shown_x(right):
            matrix = matrix[:, ::-1]
    else:
        mesh = next(item for item in ax.collections if isinstance(item, QuadMesh))
        corners = mesh.get_coordinates()  # (rows + 1, columns + 1, 2): x, y of each cell's corners
        matrix = np.ma.filled(np.ma.asarray(mesh.get_array(), dtype=float), np.nan).reshape(
            corners.shape[0] - 1, corners.shape[1] - 1
        )
        rows_y = [-shown_y(y) for y in corners[:-1, 0, 1]]
        columns_x = [shown_x(x) for x in corners[0, :-1, 0]]
        matrix = matrix[np.argsort(rows_y, kind="stable")]  # top row first
        matrix = matrix[:, np.argsort(columns_x, kind="stable")]
    xs = [t.get_text() for t in sorted(ax.get_xticklabels(), key=lambda t: shown_x(t.get_position()[0]))]
    ys = [t.get_text() for t in sorted(ax.get_yticklabels(), key=lambda t: -shown_y(t.get_position()[1]))]
    return xs, ys, matrix


def _texts(fig):
    """``[(axes index, text artist), ...]``: every visible title, axis label and tick label drawn
    (ticks outside their axis's limits are not drawn)."""
    texts = []
    for index, ax in enumerate(fig.axes):
        if not (ax.get_visible() and ax.axison):  # an axes drawn without its axes (a layout's frame)
            texts.append((index, ax.title))
            continue
        items = [ax.title, ax.xaxis.label, ax.yaxis.label]
        for axis, limits in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
            low, high = sorted(limits)
            span = (high - low) * 1e-9
            for tick in axis.get_major_ticks():
                if low - span <= tick.get_loc() <= high + span:
                    items += [tick.label1, tick.label2]
        texts += [(index, item) for item in items if item.get_visible() and item.get_text()]
    return texts


def overlapping_texts(fig, *, across_axes_only=False, boxes=False):
    """Pairs of texts of a drawn matplotlib figure whose boxes overlap, as ``(text, text)`` (their
    boxes with ``boxes=True``): a tick label over another, a colour bar's label over the next
    panel's, a title over a title."""
    renderer = fig.canvas.get_renderer()
    drawn = [(index, item.get_text(), item.get_window_extent(renderer)) for index, item in _texts(fig)]
    return [
        (box_a, box_b) if boxes else (a, b)
        for i, (ax_a, a, box_a) in enumerate(drawn)
        for ax_b, b, box_b in drawn[i + 1 :]
        if (ax_a != ax_b or not across_axes_only) and box_a.overlaps(box_b)
    ]


def colour_bars(fig):
    """The colour bars of a matplotlib figure (each axes a colour bar draws in knows it)."""
    return [ax._colorbar for ax in fig.axes if getattr(ax, "_colorbar", None) is not None]


def _shown_label(tick):
    """The label a tick shows (a colour bar's are on the right: its second label)."""
    return tick.label1 if tick.label1.get_visible() else tick.label2


def _thin_ticks(axis, renderer):
    """Keep an axis's tick labels in order and apart: a label whose box would overlap the last one
    kept is dropped (the named axes of a small heatmap, a colour bar's ticks)."""
    low, high = sorted(axis.get_view_interval())
    ticks = [(tick.get_loc(), _shown_label(tick)) for tick in axis.get_major_ticks()]
    ticks = sorted((value, label) for value, label in ticks if low <= value <= high)
    if not ticks or not any(label.get_text() for _, label in ticks):
        return
    kept, last = [], None
    for value, label in ticks:
        box = label.get_window_extent(renderer)
        if last is None or not box.overlaps(last):
            kept.append((value, label.get_text()))
            last = box
    if len(kept) < len(ticks):
        axis.set_ticks([value for value, _ in kept], labels=[text for _, text in kept])


def _tidy_ticks(fig):
    """Readable texts everywhere: every title on one line inside its panel (its lines joined, its font
    shrunk to fit, cut with an ellipsis below :data:`MIN_TITLE_POINTS`), the titles of one figure in
    one size (the smallest any of them needed: panels side by side read as one row), and on every
    axis (colour bars included) a tick label over its neighbour is dropped."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    titled = []
    for ax in fig.axes:
        title, width = ax.title, ax.get_window_extent(renderer).width
        if not title.get_text() or width <= 0:
            continue
        # a slide's titles are one line each (wrapped, the noise and rate PNGs' ran over 3-4 lines)
        title.set_text(": ".join(line.strip() for line in title.get_text().split("\n") if line.strip()))
        while title.get_window_extent(renderer).width > 0.98 * width and title.get_fontsize() > MIN_TITLE_POINTS:
            title.set_fontsize(title.get_fontsize() - 0.5)
        titled.append((title, width))
    size = min((title.get_fontsize() for title, _ in titled), default=None)
    for title, width in titled:
        title.set_fontsize(size)
        text = title.get_text()
        while title.get_window_extent(renderer).width > 0.98 * width and len(text) > 12:
            text = text[:-2]
            title.set_text(text.rstrip() + "\u2026")
    fig.canvas.draw()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            _thin_ticks(axis, renderer)


def _legend_every_labelled_element(plot):
    """Give an overlay's legend an entry for every element with a label, as the tab's legend has:
    HoloViews' matplotlib Spikes leave their lines unlabelled (the geometric noise law's "2Geo"
    bars had no entry in the PNG while the tab showed one), and its Bars get no legend at all (the topic
    map's "overall" and "in the topic" had none)."""
    from matplotlib.container import BarContainer

    axes, barred = set(), set()
    for element_plot in plot.traverse(lambda p: p, [lambda p: "artist" in getattr(p, "handles", {})]):
        artist, frame = element_plot.handles["artist"], element_plot.current_frame
        label = getattr(frame, "label", "")
        panel = getattr(artist, "axes", None)
        if isinstance(artist, list) and len(artist) == 1 and isinstance(artist[0], BarContainer):
            artist = artist[0]  # one series of bars (a container: its panel is its bars')
            panel = artist.patches[0].axes if artist.patches else None
            if label and panel is not None:
                barred.add(panel)
        if not hasattr(artist, "get_label") or panel is None:  # a list of artists (Labels' texts): no entry
            continue
        if label and str(artist.get_label()).startswith("_"):
            artist.set_label(label)
            axes.add(panel)
    for ax in axes:
        legend = ax.get_legend()
        if legend is None:
            if ax in barred:  # beneath the bars and their axis's name, never over them, as the tab's
                handles, labels = ax.get_legend_handles_labels()
                ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncols=len(labels), frameon=False)
            continue
        handles, labels = ax.get_legend_handles_labels()
        ax.legend(handles, labels, loc=legend._loc, ncols=legend._ncols, frameon=legend.get_frame_on())


def _data_aspects(plot):
    """``{axes: data aspect}`` of the panels whose element asks for one (``data_aspect=1``: a unit across is
    as long as a unit up, as the topic map's circles drawn as polygons need to be round)."""
    found = plot.traverse(lambda p: p, [lambda p: getattr(p, "data_aspect", None) and "axis" in p.handles])
    return {p.handles["axis"]: float(p.data_aspect) for p in found}


def matplotlib_figure(figure, max_attempts=5):
    """The matplotlib figure a PNG export of the HoloViews ``figure`` draws: styled as on screen,
    every axis's and colour bar's ticks ordered and apart, the panels of a layout fewer to a row
    while a title would be cut to fit its panel, and spread until no text of one panel (or its colour
    bar) lies over another's (a colour bar's label was drawn over the next panel's axis names)."""
    styled = _matplotlib_styled(figure)
    renderer = hv.renderer("matplotlib")
    hspace, vspace = 0.5, 0.3  # HoloViews' own defaults, in axes widths and heights
    for _ in range(max_attempts):
        if isinstance(styled, hv.Layout):
            styled = styled.opts(backend="matplotlib", hspace=hspace, vspace=vspace)
        plot = renderer.get_plot(styled)
        fig = plot.state
        _legend_every_labelled_element(plot)
        fig.set_size_inches(*SLIDE_INCHES)  # the panels keep their places, in a 16:9 page
        bars = {bar.ax for bar in colour_bars(fig)}
        aspects = _data_aspects(plot)
        for ax in fig.axes:  # a panel fills its place (a 300 x 90 matrix drawn square-celled was a strip)
            if ax not in bars:
                ax.set_box_aspect(None)
                if ax in aspects:  # and keeps the scale it asks for (the topic map's circles stay round)
                    ax.set_aspect(aspects[ax], adjustable="datalim")
                else:
                    ax.set_aspect("auto")
        for bar in colour_bars(fig):  # each colour bar at the right edge of its panel, inside it
            parent = bar.mappable.axes
            if parent is None or not parent.get_images():
                continue
            box = parent.get_position()
            parent.set_position([box.x0, box.y0, box.width - 0.04, box.height])
            bar.ax.set_position([box.x0 + box.width - 0.03, box.y0, 0.01, box.height])
        _tidy_ticks(fig)
        fig.canvas.draw()
        columns = min(styled._max_cols, len(styled)) if isinstance(styled, hv.Layout) else 1
        if columns > 1 and any(ax.title.get_text().endswith("\u2026") for ax in fig.axes):
            # a title cut to fit its panel ("non-private (true data): m..." of four memberships in a row) no
            # longer says what the tab's does: one panel fewer to a row, in the same order, wider
            styled = styled.cols(columns - 1)
            continue
        overlaps = overlapping_texts(fig, across_axes_only=True, boxes=True)
        if not isinstance(styled, hv.Layout) or not overlaps:
            break
        # widen the gaps by the widest overlap (in units of a panel's width), and a little more
        panel = max(ax.get_window_extent().width for ax in fig.axes)
        widest = max(min(a.x1, b.x1) - max(a.x0, b.x0) for a, b in overlaps)
        tallest = max(min(a.y1, b.y1) - max(a.y0, b.y0) for a, b in overlaps)
        hspace += widest / panel + 0.1
        vspace += min(tallest, widest) / panel + 0.05
    return fig


def _check_target(path, formats, overwrite):
    path = Path(path)
    if path.suffix.lower() not in formats:
        raise ValueError(f"cannot write {path.name!r}: use one of {', '.join(formats)} as the file suffix")
    if os.path.lexists(path) and not overwrite:  # a dangling symbolic link is an existing file too
        raise FileExistsError(f"{path} exists: choose another name or pass overwrite=True to replace it")
    return path


def _write_new(path, payload, overwrite):
    """``payload`` into ``path`` whole (a temporary file beside it, then a rename: never half a
    file), and never over a file that appeared while the payload was made, unless ``overwrite``."""
    from lpviz._files import atomic_write

    try:
        return atomic_write(path, lambda handle: handle.write(payload), exclusive=not overwrite)
    except FileExistsError:
        raise FileExistsError(f"{path} exists: choose another name or pass overwrite=True to replace it") from None


_PNG_LOCK = threading.Lock()
_PNG_WARM = threading.Event()  # process-wide: matplotlib starts once per process


def warm_up_png():
    """Draw one tiny PNG once per process, so that a person's first export does not wait for what every
    first PNG pays: matplotlib's import, its font cache (built on a machine's first use: 3.1 s here
    against 1.3 s with the cache; 10.9 s seen in a served walk under load, issue 57 MEDIUM 16) and
    HoloViews' matplotlib renderer. A call during a warm-up waits for it; later calls return at once."""
    if _PNG_WARM.is_set():
        return
    with _PNG_LOCK:
        if _PNG_WARM.is_set():
            return
        try:
            import matplotlib.pyplot as plt

            fig = matplotlib_figure(hv.Curve([0.0, 1.0]).opts(title="warm-up"))
            fig.savefig(io.BytesIO(), format="png", dpi=PNG_DPI)
            plt.close(fig)
        finally:  # a warm-up only saves time: a failing one leaves the real export to report
            _PNG_WARM.set()


def start_png_warm_up():
    """:func:`warm_up_png` in a background thread (nothing when done)."""
    if not _PNG_WARM.is_set():
        threading.Thread(target=warm_up_png, name="lpviz-png-warm-up", daemon=True).start()


def save_figure(figure, path, *, overwrite=False):
    """Write a HoloViews figure to ``path`` (.png via matplotlib, .html via Bokeh). Returns the path."""
    path = _check_target(path, FIGURE_FORMATS, overwrite)
    backend = FIGURE_FORMATS[path.suffix.lower()]
    with tempfile.TemporaryDirectory() as tmp:  # write whole, then move: no half-written file
        scratch = Path(tmp) / f"figure{path.suffix.lower()}"
        if backend == "matplotlib":
            import matplotlib.pyplot as plt

            warm_up_png()
            fig = matplotlib_figure(figure)
            fig.savefig(scratch, dpi=PNG_DPI, bbox_inches="tight", pad_inches=0.15)  # the 16:9 page, trimmed
            plt.close(fig)
        else:
            # HoloViews puts a responsive figure in a stretch_width Row, and Panel warns that the figure's
            # own stretch_both wins: what a saved page wants, so the warning is noise to whoever saves
            with param.logging_level("ERROR"):
                hv.save(figure, scratch, backend=backend, resources="inline")  # offline HTML
        payload = scratch.read_bytes()
    return _write_new(path, payload, overwrite)


def figure_bytes(figure, suffix):
    """The bytes of ``figure`` saved as ``suffix`` ('.png' or '.html')."""
    with tempfile.TemporaryDirectory() as tmp:
        return save_figure(figure, Path(tmp) / f"figure{suffix}").read_bytes()


def _runners_with_results(fits):
    return [runner for runner in fits.active.values() if (runner.result or {}).get("best") is not None]


def release_bytes(fits):
    """The session's release alone (noised counts and what is public about them) in the
    :class:`~lpviz.release.Release` ``.npz`` schema: no truth, no noise seed, labels only when the
    release declares them public."""
    release = fits.data.release
    if release is None:
        raise ValueError("no data loaded: choose a data source before exporting the release")
    with tempfile.TemporaryDirectory() as tmp:
        return release.save(Path(tmp) / RELEASE_FILE, noise_seed=False).read_bytes()


def result_arrays(fits):
    """The simulation with its truth: true counts (and rates), the release, and every method's
    posterior-mean rates, best factors and trace, keyed for ``np.savez``."""
    data = fits.data
    release, truth = data.release, data.truth
    if truth is None:
        raise ValueError(
            "this release came without its true counts: there is no simulation with a truth to "
            "export; export the release and the summary"
        )
    arrays = {
        "format": np.asarray(SIMULATION_FORMAT),
        "simulated": np.asarray(release.simulated),
        "Y_true": truth.Y,
        "Y_obs": release.Y_obs,
        "alpha": np.asarray(release.alpha, float),
        "kind": np.asarray(release.kind),
        "model": np.asarray(data.model),
    }
    for key in ("heldout", "structural_zeros"):
        if getattr(release, key) is not None:
            arrays[key] = getattr(release, key)
    if truth.mu is not None:
        arrays["mu_true"] = truth.mu
    # the names on the dashboard's axes (the owner's file holds the truth, so the data set's own names too)
    for key, labels in zip(("row_labels", "col_labels"), axis_labels(data), strict=True):
        if labels is not None:
            arrays[key] = np.asarray([str(label) for label in labels])
    for runner in _runners_with_results(fits):
        result = runner.result
        if result.get("mu_hat") is not None:
            arrays[f"{runner.method}/mu_hat"] = result["mu_hat"]
        for name, value in result["best"].items():
            arrays[f"{runner.method}/best_{name}"] = np.asarray(value)
        trace = runner.trace()
        for column in trace.columns:
            # a row holds columns for every chain a session may run: those of chains this run did not
            # have (all NaN: a 2-chain export held chains 2 and 3, issue 57 LOW 18) are left out
            if chain_of(column) < result.get("chains", 1):
                arrays[f"{runner.method}/trace_{column}"] = trace[column].to_numpy()
    return arrays


def result_summary(fits):
    """Settings and each method's :func:`lpviz.metrics.score` as a JSON-ready dict."""
    data, settings = fits.data, fits.settings
    release = data.release
    names = (
        "source",
        "epsilon",
        "N",
        "heterogeneous",
        "alpha0",
        "concentration",
        "holdout",
        "holdout_fraction",
        "holdout_actors",
        "n_components",
        "n_iter",
        "burn_in",
        "thin",
        "chain_seed",
        "chains",
    )
    # no noise seed: with it and the release (exported apart) anyone rebuilds the true counts
    note = (
        "a simulation: the dashboard noised data it holds the truth of (its noise seed is shown in "
        "the dashboard, never written into a file)"
        if data.truth is not None
        else "an uploaded release (no truth): the fits saw only the noised counts"
    )
    summary = {
        "simulated": bool(release.simulated),
        "note": note,
        "data": {
            "source": data.data.name or settings.source,
            "model": data.model,
            "kind": release.kind,
            "shape": list(release.shape),
            "release": release.describe(noise_seed=False),  # no file holds the seed
        },
        "privacy": privacy_level(release),
        "preset": preset_record(fits),
        "settings": {
            name: getattr(settings, name)
            for name in names
            # per-row noise: the release's alphas are its level, not the sidebar's one-alpha epsilon and N
            if not (np.ndim(release.alpha) and name in ("epsilon", "N"))
        },
        "methods": {},
    }
    for name, runner in fits.active.items():
        entry = {
            "label": runner.label,
            "status": runner.status,
            "iteration": int(runner.iteration),
            "options": dict(runner.options),
        }
        result = runner.result or {}
        if result.get("best") is not None:
            entry.update(samples_saved=int(result["samples_saved"]), score=result["score"])
        summary["methods"][name] = entry
    return summary


def privacy_level(release):
    """The release's real noise level: one alpha (with its epsilon and N when known) or the range of its
    per-row alphas (a per-row release was recorded as "epsilon 1, N 1", the sidebar's one-alpha values)."""
    alpha = np.asarray(release.alpha, dtype=float)
    if alpha.ndim:
        return {
            "per_row_alpha": True,
            "alpha_min": float(alpha.min()),
            "alpha_mean": float(alpha.mean()),
            "alpha_max": float(alpha.max()),
            "rows": int(alpha.size),
            "describe": release.describe(noise_seed=False),
        }
    level = {"per_row_alpha": False, "alpha": float(alpha), "describe": release.describe(noise_seed=False)}
    if release.epsilon is not None and release.N is not None:
        level.update(epsilon=float(release.epsilon), N=float(release.N))
    return level


def preset_record(fits):
    """The preset the settings come from, its claim and the claim's verdict on the fits (None without a
    preset): the same verdict the Fits tab shows."""
    from lpviz.dashboard.session.presets import PRESETS
    from lpviz.dashboard.views.fits_view import preset_verdict

    preset = PRESETS.get(fits.settings.preset)
    if preset is None:
        return None
    verdict = preset_verdict(fits)
    return {
        "name": preset.name,
        "claim": preset.claim.text if preset.claim is not None else None,
        "verdict": verdict.word if verdict is not None else None,
        "why": verdict.text if verdict is not None else None,
    }


def save_results(fits, path, *, overwrite=False):
    """Write the simulation with the truth (.npz) or the summary (.json) to ``path``."""
    path = _check_target(path, RESULT_FORMATS, overwrite)
    if fits.data.release is None:
        raise ValueError("no data loaded: choose a data source before exporting results")
    return _write_new(path, results_bytes(fits, path.suffix.lower()), overwrite)


def save_release(fits, path, *, overwrite=False):
    """Write the release alone (.npz, no truth) to ``path``."""
    path = _check_target(path, (".npz",), overwrite)
    return _write_new(path, release_bytes(fits), overwrite)


def results_bytes(fits, suffix):
    """The bytes :func:`save_results` writes for ``suffix`` ('.npz' or '.json')."""
    if suffix == ".npz":
        buffer = io.BytesIO()
        np.savez_compressed(buffer, **result_arrays(fits))
        return buffer.getvalue()
    return json.dumps(result_summary(fits), indent=2, default=str).encode()


def comparison_bytes(fits, compared=None):
    """The methods compared on the held-out noised cells as CSV: :func:`lpviz.compare` of the session's
    finished fits, the table the Fits tab's stacking pane shows (one row per method and the best
    constant; the rankings that hold are in the pane's sentences), read from ``compared`` (the pane's
    :class:`~lpviz.dashboard.views.compare_view.CompareView`) when it holds this run's. Refused in
    words when there is nothing to compare: no data, no held-out cells, or fits that have not all run
    to their end."""
    from lpviz.dashboard.views.compare_view import compare_fits, finished_fits

    release = fits.data.release
    if release is None:
        raise ValueError("no data loaded: choose a data source and run the fits before exporting the comparison")
    if release.heldout_cells is None:
        raise ValueError(
            "this release has no held-out cells, and the methods are compared on them: choose a hold-out "
            "in the Data card and run the fits"
        )
    posteriors, why = finished_fits(list(fits.active.values()))
    if posteriors is None:
        raise ValueError(f"nothing to compare yet: {why or 'the fits have not all run to their end'}")
    table = compared.outcome_of(list(fits.active.values())) if compared is not None else None
    if table is None:
        table = compare_fits(posteriors, release, fits.data.truth)
    if isinstance(table, str):
        raise ValueError(table)
    return table.to_csv(index_label="method").encode()


class ExportView(pn.viewable.Viewer):
    """Download buttons for the figures of the given views, the release, the simulation and a summary.

    Parameters
    ----------
    fits : Fits
    views : list
        Views with a ``figures()`` method (name -> HoloViews object).
    """

    fits = param.ClassSelector(class_=Fits)
    views = param.List(default=[], doc="Views whose figures() can be exported.")
    figure: param.Selector = param.Selector(default=None, objects=[], doc="Figure to export.")

    def __init__(self, *, shown=True, **params):
        """``shown=False``: a tab that opens hidden (the dashboard's): its figures are listed when it is
        first shown. Listing makes every view's figures, about a ninth of a served session's build
        (py-spy: 0.6 of 5.4 s), for a tab few sessions open."""
        super().__init__(**params)
        self._chosen = False  # whether a person picked a figure (else the first one follows the data)
        self.on_screen = OnScreen(shown)  # listing makes every view's figures: only when this tab is shown
        self.on_screen.run("list", self._list_figures)
        self.on_screen.run("png", start_png_warm_up)  # while the person picks a figure
        self.fits.data.param.watch(lambda *events: self.on_screen.run("list", self._list_figures), ["release"])

    def _list_figures(self):
        """The figures the views have now (they change with the data: no truth, no noise histogram)."""
        names = list(self.available_figures())
        self.param.figure.objects = names
        if names and (not self._chosen or self.figure not in names):
            self.figure = names[0]
            self._chosen = False

    @param.depends("figure", watch=True)
    def _on_choice(self):
        self._chosen = self.figure != (self.param.figure.objects or [None])[0]

    def available_figures(self):
        """``{name: view}`` of every exportable figure."""
        return {name: view for view in self.views for name in view.figures()}

    def current_figure(self):
        if self.figure is None:
            raise ValueError("no figure to export: add views with figures() to the export view")
        return self.available_figures()[self.figure].figures()[self.figure]

    def _download(self, label, filename, make_bytes):
        def callback():
            return io.BytesIO(make_bytes())

        return pn.widgets.FileDownload(
            callback=callback, filename=filename, label=label, embed=False, sizing_mode="stretch_width"
        )

    def file_names(self):
        """File names that say what the files are: a simulation (the dashboard holds the truth) or
        an uploaded release."""
        release = self.fits.data.release
        simulated = release is None or release.simulated or self.fits.data.truth is not None
        prefix = "lpviz_simulation" if simulated else "lpviz_release"
        return {
            "figure": f"{prefix}_{self.figure}",
            "release": RELEASE_FILE if simulated else "lpviz_release.npz",
            "truth": TRUTH_FILE,
            "summary": SUMMARY_FILE if simulated else "lpviz_release_summary.json",
        }

    def __panel__(self):
        png = self._download("Figure as PNG", "figure.png", lambda: figure_bytes(self.current_figure(), ".png"))
        html = self._download("Figure as HTML", "figure.html", lambda: figure_bytes(self.current_figure(), ".html"))
        release = self._download("Release only: noised counts (.npz)", RELEASE_FILE, lambda: release_bytes(self.fits))
        truth = self._download("Simulation with the truth (.npz)", TRUTH_FILE, lambda: results_bytes(self.fits, ".npz"))
        summary = self._download("Summary (.json)", SUMMARY_FILE, lambda: results_bytes(self.fits, ".json"))
        # the stacking pane's comparison (the Fits view's), read rather than computed again
        from lpviz.dashboard.views.compare_view import CompareView

        compared = next((v.compare for v in self.views if isinstance(getattr(v, "compare", None), CompareView)), None)
        comparison = self._download(
            "Methods compared (.csv)", COMPARISON_FILE, lambda: comparison_bytes(self.fits, compared)
        )
        note = pn.pane.Markdown("", sizing_mode="stretch_width")

        def name_files(*_):
            names = self.file_names()
            png.filename, html.filename = f"{names['figure']}.png", f"{names['figure']}.html"
            release.filename, summary.filename = names["release"], names["summary"]
            truth.visible = self.fits.data.truth is not None  # no truth, no file with it
            release_now = self.fits.data.release
            comparison.visible = release_now is not None and release_now.heldout_cells is not None
            note.object = (
                "Everything here is a **simulation**: the dashboard noised data it holds the truth of, "
                "with the noise seed shown in the sidebar; file names say so."
                if truth.visible
                else "An **uploaded release**: the fits saw only its noised counts."
            )

        self.param.watch(name_files, "figure")
        self.fits.data.param.watch(name_files, ["release", "truth"])
        name_files()
        return pn.Column(
            "### Export",
            note,
            pn.widgets.Select.from_param(self.param.figure, label="Figure"),
            pn.FlexBox(png, html, sizing_mode="stretch_width"),  # wrap on a phone
            pn.pane.Markdown(PNG_NOTE, sizing_mode="stretch_width", styles={"font-size": "0.9em"}),
            pn.FlexBox(release, truth, sizing_mode="stretch_width"),
            summary,
            comparison,
            pn.pane.Markdown(
                "*Release only*: the noised counts, the noise level, held-out cells and structural "
                "zeros (the lpviz release schema) -- what an analyst would hold. *Simulation with the "
                "truth*: also the true counts (and rates) and each method's posterior-mean rates, best "
                "factors and trace. *Methods compared* (with held-out cells, once the fits have ended): "
                "the table of the Fits tab's stacking pane, `lpviz.compare` of the fits.",
                sizing_mode="stretch_width",
            ),
            sizing_mode="stretch_width",
        )
