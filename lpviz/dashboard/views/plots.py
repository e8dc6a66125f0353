"""Plot pieces several views share: count heatmaps, colour limits, display subsampling.

Each heatmap is one ``hv.Image`` (a raster, not a glyph per cell); matrices
larger than :data:`MAX_DISPLAY` a side are drawn with every k-th row/column
and a note says so (fits and metrics always use every cell).
"""

import functools
from dataclasses import dataclass

import holoviews as hv
import holoviews.plotting.bokeh  # noqa: F401  (the backend .opts() needs, also outside a server)
import numpy as np

MAX_DISPLAY = 300
MAX_TICKS = 20  # named ticks per axis at most: more would overlap on a heatmap a few hundred pixels high
NAMED_MIN_HEIGHT = 440  # a heatmap with names under it: room for the upright names and the cells
HELDOUT_SHADE = "#303030"
HEATMAP_TITLE_SIZE = "10pt"  # HoloViews' 12pt bold: a method's name and its fit's state ran past a heatmap
HEATMAP_MIN_HEIGHT = 260
SUMMED_NOTE = " (summed over months)"  # a tensor's heatmap: its first two modes, summed over the rest
HEATMAP_CMAP = "RdBu_r"  # diverging: blue < 0 < red
RATE_CMAP = "Reds"
NONNEGATIVE_CMAP = "Reds"  # counts that cannot be negative: white (zero) to red, as the diverging scale's upper half
# Row and column names of a matrix, by the release's kind (a tensor's first two modes, summed over the rest).
AXES = dict(documents=("document", "word"), network=("sender", "recipient"), tensor=("sender", "recipient"))
# A table pane that scrolls sideways inside its own box when it is wider than the page (a phone): the
# scoreboard's 15 columns are 820 px, and without it the page cut them after ESS (issue 37). In the
# pane's shadow root; a box that is not visible overflow also stops the table widening its column.
SCROLL_SIDEWAYS_CSS = ":host { overflow-x: auto; overflow-y: hidden; max-width: 100%; }"
# Two plots beside each other while each has SIDE_MIN_WIDTH px, one above the other on a phone (a Row
# of two halved them at 412 px and the page cut their legends: issue 37); FLEX_ITEM: a FlexBox's item
# that grows from nothing to share the row.
SIDE_MIN_WIDTH = 300
FLEX_ITEM = {"flex": "1 1 0"}
# The kinds whose rows and columns are actors (their axes are named by the actors).
ACTOR_KINDS = ("network", "tensor")


def shown_matrix(values, reduce=np.sum):
    """What a heatmap draws of an array of cells: the array itself for a matrix; for a tensor its first
    two modes (sender x recipient), the further modes (the months) reduced by ``reduce``."""
    values = np.asarray(values)
    return values if values.ndim <= 2 else reduce(values, axis=tuple(range(2, values.ndim)))


def display_slice(shape, max_display=MAX_DISPLAY):
    """Row and column strides that keep a heatmap at most ``max_display`` a side (of a tensor: its first
    two modes, the ones drawn)."""
    return tuple(max(1, int(np.ceil(n / max_display))) for n in tuple(shape)[:2])


def scale_options(scale, clim, values=None):
    """HoloViews options of a colour ``scale``: "linear"; "log" (rates: values at or below the
    lower limit show as its colour); "quantile" (histogram equalisation, for heavy tails).

    The colour norm follows the scale alone, never the values: a live heatmap keeps the Bokeh colour
    mapper of its first frame (a fit not started: all zeros), and HoloViews fails to update a linear
    mapper with an equalised one's options (the run's updates stopped with it)."""
    if scale == "log":
        low, high = clim
        if low <= 0:
            positive = np.asarray(values, dtype=np.float64) if values is not None else np.zeros(0)
            positive = positive[positive > 0]
            low = max(float(positive.min()) if positive.size else high * 1e-3, high * 1e-4)
        return dict(cnorm="log", clim=(low, max(high, low * 10)))
    if scale == "quantile":
        # Without rescaling: HoloViews' default (rescale_discrete_levels) starts data of few distinct
        # values, as small counts are, part-way up the palette, and sparse true counts' zeros (most
        # cells) were drawn salmon, a third up, so the truth looked like a flat sheet (issue 57 MEDIUM 9).
        return dict(cnorm="eq_hist", clim=clim, rescale_discrete_levels=False)
    return dict(cnorm="linear", clim=clim)


# The titles :func:`truth_reference` gives a reference of counts, not rates.
COUNT_REFERENCES = ("truth (true counts)", "noised counts (truncated at 0)")


def value_label(title, label):
    """What a heatmap titled ``title`` shows, for its colour bar and hover: ``label``, except "count"
    for a rate heatmap's reference of counts (:func:`truth_reference`): a colour bar titled "rate" stood
    under "true counts" (issue 57 MEDIUM 9)."""
    return "count" if label == "rate" and title in COUNT_REFERENCES else label


def axis_labels(store):
    """``(row_labels, col_labels)`` of a :class:`~lpviz.dashboard.session.datastore.DataStore`'s data to name axes with
    (None where there are none): the release's public labels, else, when the session holds the
    truth (a simulation run by the data's owner, who sees the true counts anyway), the data set's own
    (the Enron addresses)."""
    release = store.release
    if release is None:
        return None, None
    rows, cols = release.row_labels, release.col_labels
    data = store.data
    if store.truth is not None and data is not None and tuple(data.shape) == tuple(release.shape):
        rows = rows if rows is not None else getattr(data, "row_labels", None)
        cols = cols if cols is not None else getattr(data, "col_labels", None)
    return rows, cols


def short_labels(labels):
    """Labels without the e-mail domain they all share ("jeff.dasovich@enron.com" -> "jeff.dasovich")."""
    labels = [str(label) for label in labels]
    domains = {label.rpartition("@")[2] for label in labels if "@" in label}
    if len(domains) == 1 and all("@" in label for label in labels):
        return [label.rpartition("@")[0] for label in labels]
    return labels


def tick_labels(labels, positions, order=None, max_ticks=MAX_TICKS):
    """Axis ticks ``[(position, label), ...]`` naming the drawn ``positions`` (every k-th when there
    are more than ``max_ticks``): the one at position ``p`` is ``labels[order[p]]`` (the actor drawn
    there when rows are reordered; ``order`` None: ``labels[p]``)."""
    labels = short_labels(labels)
    positions = np.asarray(positions)
    step = max(1, int(np.ceil(len(positions) / max_ticks)))
    return [(int(p), labels[int(p) if order is None else int(order[p])]) for p in positions[::step]]


def label_options(row_ticks=None, col_ticks=None):
    """HoloViews options naming a heatmap's axes with ``tick_labels`` (column names turned upright, the
    heatmap made taller to leave its cells room beside the names)."""
    options = {}
    if col_ticks:
        options.update(xticks=col_ticks, xrotation=90)
    if row_ticks:
        options["yticks"] = row_ticks
    if options:
        options.update(fontsize={"xticks": "7pt", "yticks": "7pt"}, min_height=NAMED_MIN_HEIGHT)
    return options


def heldout_overlay(heldout, rows, cols, kdims):
    """The held-out cells of a heatmap drawn at ``rows`` x ``cols`` (the positions shown, after any
    reordering and subsampling: ``heldout`` is indexed like the drawn matrix), shaded dark grey over
    the colours; transparent elsewhere."""
    held = np.where(np.asarray(heldout, dtype=bool), 1.0, np.nan)
    return hv.Image((cols, rows, held), kdims=kdims, vdims=["held out"]).opts(
        cmap=[HELDOUT_SHADE], alpha=0.45, clipping_colors={"NaN": "transparent"}, colorbar=False
    )


def drawn_cells(Y, strides=(1, 1)):
    """What a heatmap of ``Y`` draws at ``strides``: ``(values, rows, cols, xlim, ylim)`` -- every k-th
    row and column of the matrix (a tensor: :func:`shown_matrix`), their positions, and the axes'
    limits (each cell centred on its position; None for an empty matrix)."""
    Y = shown_matrix(Y)
    row_step, col_step = strides[:2]
    shown = np.asarray(Y, dtype=np.float64)[::row_step, ::col_step]
    rows = np.arange(0, Y.shape[0], row_step)
    cols = np.arange(0, Y.shape[1], col_step)
    # the axes span this matrix and nothing else: set, not left to a range a previous plot of another
    # shape may have left behind (seen: a 300 x 100 matrix drawn over 0-800 words after a data switch)
    xlim = (float(cols[0]) - col_step / 2, float(cols[-1]) + col_step / 2) if len(cols) else None
    ylim = (float(rows[0]) - row_step / 2, float(rows[-1]) + row_step / 2) if len(rows) else None
    return shown, rows, cols, xlim, ylim


def count_image(
    Y,
    kind,
    title,
    clim,
    *,
    strides=(1, 1),
    cmap=HEATMAP_CMAP,
    label="count",
    scale="linear",
    labels=(None, None),
    heldout=None,
    min_width=220,
):
    """One heatmap of a count (or rate) matrix of a release of ``kind``, rows down, hover values.

    ``labels``: ``(row_labels, col_labels)`` naming the axes (either None: numbered);
    ``min_width``: the narrowest the plot gets, in pixels (a narrow window: its title must still fit);
    ``heldout``: a boolean array like ``Y`` whose True cells are shaded over the heatmap
    (then an overlay is returned). A tensor is drawn summed over its further modes (the
    months), a pair shaded when it is held out in every month.
    """
    label = value_label(title, label)
    if np.ndim(Y) > 2:
        title = f"{title}{SUMMED_NOTE}"
        heldout = None if heldout is None else shown_matrix(heldout, np.all)
    row_step, col_step = strides[:2]
    shown, rows, cols, xlim, ylim = drawn_cells(Y, strides)
    row_name, col_name = AXES.get(kind, ("row", "column"))
    # The title is the element's own label, not a plot option: options live in HoloViews' global
    # store under ids, and four heatmaps of one layout were seen all titled with the first one's
    # ("truth (true counts)") after data switches in the served app.
    image = hv.Image((cols, rows, shown), kdims=[col_name, row_name], vdims=[label], label=title)
    row_labels, col_labels = labels
    ticks = label_options(
        tick_labels(row_labels, rows) if row_labels is not None else None,
        tick_labels(col_labels, cols) if col_labels is not None else None,
    )
    options = dict(
        fontsize={"title": HEATMAP_TITLE_SIZE},
        xlim=xlim,
        ylim=ylim,
        cmap=cmap,
        colorbar=True,
        tools=["hover"],
        invert_yaxis=True,
        responsive=True,
        min_height=HEATMAP_MIN_HEIGHT,
        min_width=min_width,
        toolbar="above",
        framewise=True,
        **scale_options(scale, clim, shown),
    )
    fontsize = {**options["fontsize"], **ticks.get("fontsize", {})}
    image = image.opts(**{**options, **ticks, "fontsize": fontsize})
    if heldout is None or not np.any(heldout):
        return image
    return (image * heldout_overlay(np.asarray(heldout)[::row_step, ::col_step], rows, cols, image.kdims)).relabel(
        title
    )


def colour_limit(*matrices, quantile=99.5):
    """A symmetric colour limit shared by ``matrices``.

    Heavy-tailed counts (an e-mail network's busiest pair sends hundreds)
    would wash every other cell out to white, so the scale stops at a high
    quantile of the absolute values; hover still shows the exact value.
    Returns ``(limit, clipped)``.
    """
    values = np.concatenate([np.abs(np.asarray(shown_matrix(m), dtype=np.float64)).ravel() for m in matrices])
    top = float(values.max()) if values.size else 0.0
    limit = max(float(np.percentile(values, quantile)), 1.0)
    return (limit, True) if limit < top else (max(top, 1.0), False)


def count_scale(values):
    """``(clim, cmap)`` of a count heatmap, white at zero: a matrix with negative counts (noised) on the
    diverging scale symmetric about zero; one without (true counts, truncated at 0) on white to red from
    zero, so no half of its colour bar is spent on values it cannot hold (issue 57 LOW 20)."""
    limit = colour_limit(values)[0]
    if float(np.min(shown_matrix(values), initial=0)) >= 0:
        return (0.0, limit), NONNEGATIVE_CMAP
    return (-limit, limit), HEATMAP_CMAP


def ordinal(n):
    """1st, 2nd, 3rd, 4th, ..., 11th, 12th, 13th, ..., 21st."""
    n = int(n)
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def every(n, what):
    """'every row', 'every 2nd row', ..."""
    return f"every {what}" if n == 1 else f"every {ordinal(n)} {what}"


def subsample_note(shape, strides):
    if all(step == 1 for step in strides):
        return ""
    return (
        f"**Display subsampled:** {every(strides[0], 'row')} and {every(strides[1], 'column')} "
        f"of the {shape[0]:,} x {shape[1]:,} {'matrix' if len(shape) == 2 else 'heatmap'} is drawn; "
        "fits and metrics use all cells."
    )


def truth_reference(truth, release):
    """What fitted rates are drawn beside: ``(matrix, title)`` -- the true rates of a
    simulation, else the true counts, else (a release without its truth) the noised
    counts truncated at 0."""
    from lpviz.privacy import truncate

    if truth is None:
        return truncate(release.Y_obs), "noised counts (truncated at 0)"
    if truth.mu is not None:
        return truth.mu, "truth (true rates)"
    return truth.Y, "truth (true counts)"


def table_cell(value):
    """A number as the tables show it (four significant digits; blank for a missing one)."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return ""
    return f"{value:,.4g}" if isinstance(value, (float, np.floating)) else str(value)


# ---- a tab of matched components (Blocks, Tensor): one layout, one reference, one waiting line ----
def matched_reference(truth, runners, fitted, truth_source):
    """``(reference, source)``: what every fit's components are matched to -- ``truth`` (described by
    ``truth_source``) when known, else the first fit of the true counts (its method class
    ``uses_truth``), else the first fit; ``(None, "")`` with neither. ``fitted``: label -> the fit's
    components as the tab compares them."""
    of_truth = [runner.label for runner in runners if runner.method_class.uses_truth]
    if truth is not None:
        return truth, truth_source
    labels = [*of_truth, *(runner.label for runner in runners)]
    if labels:
        return fitted[labels[0]], f"the {labels[0]} fit"
    return None, ""


def waiting_line(fits, shown):
    """The line naming the active fits not yet in ``shown`` (nothing saved yet), or ""."""
    waiting = [runner.label for runner in fits.active.values() if runner.label not in shown]
    if not waiting:
        return ""
    return (
        f"*Waiting for a saved sample (after burn-in {fits.settings.burn_in}) from: "
        f"{', '.join(waiting)}. Start the fits in the Fits tab.*"
    )


def matched_components_panel(status, scores, name, plots, applies):
    """A matched-components tab: its ``status`` above, then (made once, shown only while ``applies``,
    a bound function: the status explains otherwise) the ``scores`` table (a DataFrame parameter,
    named ``name`` in the page) and the ``plots``."""
    import panel as pn

    table = pn.pane.DataFrame(
        scores,
        index=False,
        float_format="{:.4g}".format,
        sizing_mode="stretch_width",
        name=name,
        stylesheets=[SCROLL_SIDEWAYS_CSS],
    )
    body = pn.Column(table, *plots, visible=applies, sizing_mode="stretch_width")
    return pn.Column(status, body, sizing_mode="stretch_width")


# ---- a count heatmap as a plain Bokeh figure (the page's; count_image stays the export's) ----
@dataclass(frozen=True)
class HeatmapCells:
    """What :func:`count_image` draws of a matrix, computed once: ``values`` (the drawn cells,
    read-only), ``extent`` ``(x, y, dw, dh)``, ``xlim``/``ylim``, the symmetric colour limits
    ``clim``, the named ticks ``(x_ticks, y_ticks)`` (None: numbered) and the held-out shade
    (1.0 where held out, NaN elsewhere, like ``values``; None without held-out cells). Plain arrays
    and tuples: a served process shares one between the pages of every session that draws it."""

    title: str
    values: np.ndarray
    xlim: tuple
    ylim: tuple
    clim: tuple
    x_ticks: tuple | None = None
    y_ticks: tuple | None = None
    heldout: np.ndarray | None = None
    cmap: str = HEATMAP_CMAP

    @property
    def extent(self):
        return self.xlim[0], self.ylim[0], self.xlim[1] - self.xlim[0], self.ylim[1] - self.ylim[0]


def read_only(array):
    array = np.asarray(array)
    array.setflags(write=False)
    return array


def heatmap_cells(Y, title, clim, *, strides=(1, 1), labels=(None, None), heldout=None, cmap=HEATMAP_CMAP):
    """:class:`HeatmapCells` of ``Y`` as :func:`count_image` draws it (the same arguments)."""
    if np.ndim(Y) > 2:
        title = f"{title}{SUMMED_NOTE}"
        heldout = None if heldout is None else shown_matrix(heldout, np.all)
    row_step, col_step = strides[:2]
    shown, rows, cols, xlim, ylim = drawn_cells(Y, strides)
    row_labels, col_labels = labels
    shade = None
    if heldout is not None and np.any(heldout):
        shade = np.where(np.asarray(heldout, dtype=bool)[::row_step, ::col_step], 1.0, np.nan)
    return HeatmapCells(
        title=title,
        values=read_only(np.array(shown)),
        xlim=xlim,
        ylim=ylim,
        clim=tuple(float(c) for c in clim),
        x_ticks=tuple(tick_labels(col_labels, cols)) if col_labels is not None else None,
        y_ticks=tuple(tick_labels(row_labels, rows)) if row_labels is not None else None,
        heldout=None if shade is None else read_only(shade),
        cmap=cmap,
    )


@functools.lru_cache(maxsize=32)
def _palette(cmap):
    """The 256 colours of ``cmap``, a tuple shared by every figure of the process (4 ms each time,
    three times a page open: issue 41)."""
    from holoviews.plotting.util import process_cmap

    return tuple(process_cmap(cmap, 256))


def _plot(x_range, y_range, x_label, y_label, *, title, tools, renderers, **options):
    """A Bokeh figure with two linear axes, no grid, ``renderers``, and ``tools`` beside pan, zoom, save
    and reset above it. ``figure``'s own axes come with grids (hidden on a heatmap) and its glyph
    methods with two copies of each glyph that a heatmap never shows: a page open makes four of these
    figures, and every Bokeh model costs the server about a millisecond to make, add and send (issue 41).
    """
    from bokeh.models import LinearAxis
    from bokeh.plotting import figure

    plot = figure(
        x_range=x_range,
        y_range=y_range,
        x_axis_type=None,  # no axis and no grid: the axes are added below
        y_axis_type=None,
        title=title,
        tools="wheel_zoom,save,pan,box_zoom,reset",
        toolbar_location="above",
        min_border=5,
        **options,
    )
    plot.renderers.extend(renderers)
    plot.add_tools(*tools)
    plot.add_layout(LinearAxis(axis_label=x_label), "below")
    plot.add_layout(LinearAxis(axis_label=y_label), "left")
    return plot


def count_figure(cells, kind, *, x_range=None, y_range=None, cmap=None, label="count", min_width=220):
    """A Bokeh figure of :class:`HeatmapCells`, drawn as :func:`count_image` draws them through HoloViews
    (cells, extent, diverging linear scale and limits, palette, colour bar, named ticks, held-out shade,
    title, hover) at a fraction of its cost: a page open draws three (issue 41). ``x_range``/``y_range``:
    ranges shared with other heatmaps of the same extent (made here when None)."""
    from bokeh.models import (
        ColorBar,
        ColumnDataSource,
        FixedTicker,
        GlyphRenderer,
        HoverTool,
        Image,
        LinearColorMapper,
        Range1d,
    )

    row_name, col_name = AXES.get(kind, ("row", "column"))
    xlim, ylim = cells.xlim or (-0.5, 0.5), cells.ylim or (-0.5, 0.5)
    x_range = x_range if x_range is not None else Range1d(*xlim, reset_start=xlim[0], reset_end=xlim[1])
    # rows down the page: the range runs from the last row to the first
    y_range = y_range if y_range is not None else Range1d(ylim[1], ylim[0], reset_start=ylim[1], reset_end=ylim[0])
    named = cells.x_ticks is not None or cells.y_ticks is not None
    x, y, dw, dh = cells.extent if cells.xlim is not None else (0.0, 0.0, 0.0, 0.0)
    extent = {"x": [x], "y": [y], "dw": [dw], "dh": [dh]}
    mapper = LinearColorMapper(
        palette=_palette(cmap or cells.cmap), low=cells.clim[0], high=cells.clim[1], nan_color="rgba(0, 0, 0, 0)"
    )
    image = dict(image="image", x="x", y="y", dw="dw", dh="dh")
    renderers = [
        GlyphRenderer(
            data_source=ColumnDataSource({"image": [cells.values], **extent}), glyph=Image(**image, color_mapper=mapper)
        )
    ]
    if cells.heldout is not None:  # shaded dark grey over the colours, transparent elsewhere
        shade = LinearColorMapper(palette=(HELDOUT_SHADE,), nan_color="rgba(0, 0, 0, 0)")
        renderers.append(
            GlyphRenderer(
                data_source=ColumnDataSource({"image": [cells.heldout], **extent}),
                glyph=Image(**image, color_mapper=shade, global_alpha=0.45),
            )
        )
    hover = HoverTool(renderers=renderers[:1], tooltips=[(col_name, "$x"), (row_name, "$y"), (label, "@image")])
    plot = _plot(
        x_range,
        y_range,
        col_name,
        row_name,
        title=cells.title,
        tools=[hover],
        renderers=renderers,
        sizing_mode="stretch_width",
        height=NAMED_MIN_HEIGHT if named else HEATMAP_MIN_HEIGHT,
        min_width=min_width,
        output_backend="webgl",
    )
    plot.add_layout(ColorBar(color_mapper=mapper, title=label, location=(0, 0), label_standoff=8), "right")
    plot.title.text_font_size = HEATMAP_TITLE_SIZE
    for axis, ticks in ((plot.xaxis[0], cells.x_ticks), (plot.yaxis[0], cells.y_ticks)):
        if ticks is not None:
            axis.ticker = FixedTicker(ticks=[position for position, _ in ticks])
            axis.major_label_overrides = {position: name for position, name in ticks}
            axis.major_label_text_font_size = "7pt"
    if cells.x_ticks is not None:
        plot.xaxis[0].major_label_orientation = np.pi / 2
    return plot


def bars_figure(left, right, heights, *, title, x_label, y_label, colour, height):
    """Bars from ``left`` to ``right`` of ``heights`` (a histogram), hover naming each bar's middle and
    height, as a bare Bokeh plot (:func:`_plot`)."""
    from bokeh.models import ColumnDataSource, DataRange1d, GlyphRenderer, HoverTool, Quad

    source = ColumnDataSource({"left": left, "right": right, "middle": (left + right) / 2, "height": heights})
    bars = GlyphRenderer(
        data_source=source,
        glyph=Quad(left="left", right="right", top="height", bottom=0, fill_color=colour, line_color="black"),
    )
    hover = HoverTool(renderers=[bars], tooltips=[(x_label, "@middle"), (y_label, "@height")])
    return _plot(
        DataRange1d(),
        DataRange1d(start=0),
        x_label,
        y_label,
        title=title,
        tools=[hover],
        renderers=[bars],
        sizing_mode="stretch_width",
        height=height,
    )


def side_by_side(*plots):
    """HoloViews plots (or functions of them) in one row while each has :data:`SIDE_MIN_WIDTH` px, one
    to a row on a phone."""
    import panel as pn

    return pn.FlexBox(
        *(
            pn.pane.HoloViews(plot, sizing_mode="stretch_width", min_width=SIDE_MIN_WIDTH, styles=FLEX_ITEM)
            for plot in plots
        ),
        sizing_mode="stretch_width",
    )
