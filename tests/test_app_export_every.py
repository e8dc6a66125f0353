"""Every exported PNG is its tab's figure (issue 37, "What to build" 3): every figure the Export tab offers,
for every kind of data that offers it, read back from the matplotlib figure the PNG export draws and
saves (:func:`dashboard.views.export.matplotlib_figure`) and compared with what the tab shows, panel by panel in the
tab's order: titles, axis names, named ticks (rows top to bottom as drawn), heatmap values, every line's,
point's, bar's and segment's data, marker lines, texts and legend entries, with exact equality (the same
numbers, not close ones). And every export is a 16:9 slide with one-line titles, no text over another and
no number per cell on a heatmap larger than 10 x 10.

The tab's side is read from the Bokeh figures the tab shows: its own figures where it draws Bokeh itself
(Data & noise, the Fits tab's traces and rates, the topic heatmaps, the topic map), HoloViews' Bokeh
rendering of the objects its panes hold elsewhere (Blocks, Tensor, Bessel, Privacy).

The set of exports offered for each data set is the set compared here: an export added without its
comparison fails :func:`test_every_export_offered_is_compared`.

Each exported PNG is saved as ``artifacts/export-<name>.png`` (the first data set below that offers it;
``export-<name>-<data set>.png`` for the others): ``docs/screenshots/export-*.png`` are copied from there.
"""

import numpy as np
import pytest

from lpviz.dashboard.app import exported_views
from lpviz.dashboard.session.datastore import DataStore
from lpviz.dashboard.session.fits import Fits
from lpviz.dashboard.session.settings import Settings
from lpviz.dashboard.views.bessel_view import BesselView
from lpviz.dashboard.views.blocks_view import BlocksView
from lpviz.dashboard.views.export import (
    MAX_LABELLED_CELLS,
    PNG_DPI,
    SLIDE_INCHES,
    ExportView,
    colour_bars,
    heatmap_labels,
    matplotlib_figure,
)
from lpviz.dashboard.views.fits_view import FitsView
from lpviz.dashboard.views.noise_view import NoiseView
from lpviz.dashboard.views.privacy_view import PrivacyView
from lpviz.dashboard.views.tensor_view import TensorView
from lpviz.dashboard.views.topicmap_view import TopicMapView
from lpviz.dashboard.views.topics_view import TopicsView
from tests.test_app_views import run_fits

# Small data and short fits (one chain each): every export of each kind of data, in seconds. Then the
# topics again with what changes the fits' figures: two chains (a trace line per chain, "mean of n samples
# of 2 chains") and VI (the ELBO trace, one q), with a VI fit's settings (dashboard.session.presets, "Table 1 (VI paper,
# reduced)": no burn-in, no thinning).
DATA = {
    "topics": dict(source="synthetic-topics"),  # Figure 3's 90 documents x 15 words
    "network": dict(source="synthetic-blocks", size=12, n_components=3, holdout="top actors"),
    "tensor": dict(source="synthetic-tensor", size=8, n_months=6, n_components=2),
    "topics, two chains": dict(source="synthetic-topics", chains=2),
    "topics, VI": dict(source="synthetic-topics", inference="vi", burn_in=0, thin=1),
}
FIT = dict(n_iter=12, burn_in=4, thin=2)
# What the Export tab offers for each data set, in its order: the tests below compare each of them.
# (the noise and fit figures first, each data set's own tabs', then the Bessel and Privacy tabs')
NOISE_AND_FITS = ["noise_heatmaps", "noise_histogram", "fits_log_joint_trace", "fits_mae_trace", "fits_rates"]
BESSEL_AND_PRIVACY = [
    "bessel_pmf",
    "bessel_gap_map",
    "bessel_gap_bound",
    "privacy_skellam",
    "privacy_geometric",
    "privacy_adversary",
    "privacy_log_ratio",
]
OFFERED = {
    "topics": [*NOISE_AND_FITS, "topics_heatmaps", "topic_map", *BESSEL_AND_PRIVACY],
    "network": [*NOISE_AND_FITS, "blocks_rates", "blocks_memberships", *BESSEL_AND_PRIVACY],
    "tensor": [*NOISE_AND_FITS, "tensor_profiles", "tensor_pairs", *BESSEL_AND_PRIVACY],
}
OFFERED["topics, two chains"] = OFFERED["topics, VI"] = OFFERED["topics"]
# The figures drawn from the fits: all that two chains or VI change. The variants' other figures are the
# "topics" ones (the same release: the same data, noise and seed), compared there.
FROM_FITS = ("fits_log_joint_trace", "fits_mae_trace", "fits_rates", "topics_heatmaps", "topic_map")
VARIANTS = ("topics, two chains", "topics, VI")
EXPORTS = [
    (data, name) for data, names in OFFERED.items() for name in names if data not in VARIANTS or name in FROM_FITS
]


class Session:
    """A fitted session of one data set and the dashboard's views of it, as ``lpviz.dashboard.app`` makes them."""

    def __init__(self, settings):
        fit = {**FIT, **{name: settings[name] for name in FIT if name in settings}}
        settings = {name: value for name, value in settings.items() if name not in FIT}
        self.fits = run_fits(Fits(DataStore(Settings(**{"noise_seed": 3, "chains": 1, **settings}))), **fit)
        fits = self.fits
        # the dashboard's own views of the exported tabs (lpviz.dashboard.app), by their kind
        self.views = {type(view): view for view in exported_views(fits).values()}
        for view in self.views.values():
            view.__panel__()  # the tabs as shown: the views that draw their own figures make them here
        self.export = ExportView(fits=fits, views=list(self.views.values()))

    def figure(self, name):
        """The HoloViews figure the Export tab exports as ``name``."""
        self.export.figure = name
        return self.export.current_figure()


@pytest.fixture(scope="module")
def sessions():
    made = {}

    def session(data):
        if data not in made:
            made[data] = Session(DATA[data])
        return made[data]

    yield session
    for made_session in made.values():
        made_session.fits.close()


# ---- the tab's figures, as Bokeh draws them ----------------------------------------------------------------


def holoviews_figures(obj):
    """The Bokeh figures HoloViews draws of ``obj`` (a layout: one per panel, in its order)."""
    import holoviews as hv

    items = list(obj) if isinstance(obj, hv.Layout) else [obj]
    return [hv.renderer("bokeh").get_plot(item).state for item in items]


# the view of the other exports' tab, by the export's first word
TAB_OF_PREFIX = {"blocks": BlocksView, "tensor": TensorView, "bessel": BesselView, "privacy": PrivacyView}


def tab_figures(session, name):
    """The Bokeh figures the tab of export ``name`` shows, in the tab's order."""
    views = session.views
    if name.startswith("noise_"):
        view = views[NoiseView]
        if name == "noise_heatmaps":
            return [pane.object for pane in view.heatmaps()]
        return [view.noise_histogram().object]
    if name in ("fits_mae_trace", "fits_log_joint_trace"):
        mae, joint, _ = views[FitsView].trace_plots()
        return [(mae if name == "fits_mae_trace" else joint).figure]
    if name == "fits_rates":
        view = views[FitsView]
        view.rates()
        return list(view._live_rates.figures.values())
    if name == "topics_heatmaps":
        return [figure for figure, *_ in views[TopicsView]._live_heatmaps.figures.values()]
    if name == "topic_map":
        view = views[TopicMapView]
        panels = view.panels
        return [panels[method].map for method in view.maps] + [panels[method].bars for method in view.partners]
    view = views[TAB_OF_PREFIX[name.split("_")[0]]]
    shown = {
        "blocks_rates": lambda: view.rate_heatmaps(),
        "blocks_memberships": lambda: view.membership_heatmaps(),
        "tensor_profiles": lambda: view.profile_plots(),
        "tensor_pairs": lambda: view.pair_heatmaps(),
        "bessel_pmf": lambda: view.pmf_plot(),
        "bessel_gap_map": lambda: view.gap_map(),
        "bessel_gap_bound": lambda: view.gap_bound_plot(),
        "privacy_skellam": lambda: view.skellam_plot(),
        "privacy_geometric": lambda: view.geometric_plot(),
        "privacy_adversary": lambda: view.adversary_plot(),
        "privacy_log_ratio": lambda: view.log_ratio_plot(),
    }[name]
    return holoviews_figures(shown())


def floats(values):
    return np.asarray(values, dtype=float)


def column(source, spec):
    """A glyph's ``spec`` (a field of ``source`` or a value) as a float array."""
    if isinstance(spec, str):
        return floats(source.data[spec])
    if isinstance(spec, dict):
        return floats(source.data[spec["field"]]) if "field" in spec else floats([spec.get("value")])
    field = getattr(spec, "field", None)
    return floats(source.data[field]) if field is not None else floats([getattr(spec, "value", spec)])


def named_ticks(axis, flipped, along_y):
    """The names an axis's ticks show (None: plain numbers), in reading order: left to right, top to bottom."""
    from bokeh.models import FixedTicker

    overrides = dict(axis.major_label_overrides or {})
    if not overrides:
        return None
    positions = axis.ticker.ticks if isinstance(axis.ticker, FixedTicker) else sorted(overrides)
    positions = sorted(positions, reverse=along_y and not flipped)
    return [str(overrides.get(p, overrides.get(str(p), p))) for p in positions]


def bokeh_panel(plot):
    """What a reader of a Bokeh figure sees, as :func:`png_panel` reads a PNG's panel."""
    from bokeh.models import (
        Circle,
        FactorRange,
        HBar,
        Image,
        LabelSet,
        Line,
        Quad,
        Rect,
        Scatter,
        Segment,
        Span,
        Text,
        VBar,
    )

    panel = dict(
        # the PNG's one line: the tab's lines joined, as the export joins them
        title=": ".join(line.strip() for line in (plot.title.text or "").split("\n") if line.strip())
        if plot.title is not None
        else "",
        xlabel=plot.xaxis[0].axis_label or "",
        ylabel=plot.yaxis[0].axis_label or "",
        heatmap=None,
        lines=[],
        points=[],
        segments=[],
        bars=[],
        circles=[],
        spans=[],
        texts=[],
        legend=[],
    )
    flipped = plot.y_range.start is not None and plot.y_range.end is not None and plot.y_range.start > plot.y_range.end
    for renderer in plot.renderers:
        glyph, source = getattr(renderer, "glyph", None), getattr(renderer, "data_source", None)
        if glyph is None or not getattr(renderer, "visible", True):
            continue
        if isinstance(glyph, Image) and panel["heatmap"] is None:
            matrix = floats(source.data[glyph.image][0])
            matrix = matrix if flipped else matrix[::-1]
            columns = named_ticks(plot.xaxis[0], False, False)
            rows = named_ticks(plot.yaxis[0], flipped, True)
            panel["heatmap"] = (columns, rows, matrix)
        elif isinstance(glyph, Rect) and isinstance(plot.x_range, FactorRange):
            columns, rows = list(plot.x_range.factors), list(plot.y_range.factors)[::-1]
            data = source.data
            cells = {(x, y): v for x, y, v in zip(data["x"], data["y"], data["value"], strict=True)}
            matrix = floats([[cells.get((c, r), np.nan) for c in columns] for r in rows])
            panel["heatmap"] = (columns, rows, matrix)
        elif isinstance(glyph, Line):
            panel["lines"].append((column(source, glyph.x), column(source, glyph.y)))
        elif isinstance(glyph, Scatter):
            panel["points"].append((column(source, glyph.x), column(source, glyph.y)))
        elif isinstance(glyph, Segment):
            ends = [column(source, getattr(glyph, end)) for end in ("x0", "y0", "x1", "y1")]
            size = max(len(end) for end in ends)
            panel["segments"].append(np.column_stack([np.broadcast_to(end, (size,)) for end in ends]))
        elif isinstance(glyph, Quad):  # a histogram: each bar's left edge and height
            panel["bars"].append((list(column(source, glyph.left)), column(source, glyph.top)))
        elif isinstance(glyph, (HBar, VBar)):  # bars of named categories: names and lengths in reading order
            across = isinstance(glyph, HBar)
            places = source.data[glyph.y if across else glyph.x]
            lengths = dict(zip(places, column(source, glyph.right if across else glyph.top), strict=True))
            names = list(plot.y_range.factors)[::-1] if across else list(plot.x_range.factors)
            panel["bars"].append((names, floats([lengths[name] for name in names])))
        elif isinstance(glyph, Circle):
            panel["circles"].append((column(source, glyph.x), column(source, glyph.y), column(source, glyph.radius)))
        elif isinstance(glyph, Text):
            panel["texts"] += [str(text) for text in source.data[glyph.text]]
    for annotation in plot.center + plot.renderers:
        if isinstance(annotation, Span):
            panel["spans"].append(("v" if annotation.dimension == "height" else "h", float(annotation.location)))
        elif isinstance(annotation, LabelSet):
            panel["texts"] += [str(text) for text in annotation.source.data[annotation.text]]
    for legend in plot.legend:
        for item in legend.items:
            label = item.label
            text = label.get("value") if isinstance(label, dict) else getattr(label, "value", label)
            if text:
                panel["legend"].append(str(text))
    return panel


# ---- the PNG's panels, as matplotlib draws them -------------------------------------------------------------


def png_panels(fig):
    """Each panel (not a colour bar) of the exported figure, as a reader of the PNG sees it."""
    bars = {bar.ax for bar in colour_bars(fig)}
    return [png_panel(ax) for ax in fig.axes if ax not in bars and ax.get_visible() and ax.axison]


def png_panel(ax):
    from matplotlib.collections import LineCollection, PatchCollection, PathCollection, PolyCollection
    from matplotlib.patches import Rectangle

    panel = dict(
        title=ax.get_title(),
        xlabel=ax.get_xlabel(),
        ylabel=ax.get_ylabel(),
        heatmap=heatmap_labels(ax) if ax.get_images() else None,
        lines=[],
        points=[],
        segments=[],
        bars=[],
        circles=[],
        spans=[],
        texts=[text.get_text() for text in ax.texts],
        legend=[text.get_text() for text in ax.get_legend().get_texts()] if ax.get_legend() else [],
    )
    for line in ax.lines:
        if line.get_transform() == ax.get_xaxis_transform():
            panel["spans"].append(("v", float(line.get_xdata()[0])))
        elif line.get_transform() == ax.get_yaxis_transform():
            panel["spans"].append(("h", float(line.get_ydata()[0])))
        else:
            panel["lines"].append((floats(line.get_xdata()), floats(line.get_ydata())))
    for collection in ax.collections:
        if isinstance(collection, LineCollection):
            segments = collection.get_segments()
            panel["segments"].append(floats([[*s[0], *s[-1]] for s in segments]).reshape(-1, 4))
        elif isinstance(collection, PathCollection):
            offsets = floats(collection.get_offsets())
            panel["points"].append((offsets[:, 0], offsets[:, 1]))
        elif isinstance(collection, (PatchCollection, PolyCollection)):
            for path in collection.get_paths():
                vertices = path.vertices[:-1] if len(path.vertices) > 1 else path.vertices
                centre = vertices.mean(axis=0)
                radius = float(np.abs(vertices[:, 0] - centre[0]).max())
                panel["circles"].append((centre[0], centre[1], radius))
    for container in ax.containers:  # bars: a histogram's left edges and heights, or named bars in reading order
        bars = [patch for patch in container.patches if isinstance(patch, Rectangle)]
        names = {round(t.get_position()[1], 6): t.get_text() for t in ax.get_yticklabels()}
        horizontal = all(bar.get_x() == 0 for bar in bars) and all(
            round(bar.get_y() + bar.get_height() / 2, 6) in names for bar in bars
        )
        if horizontal:
            bars = sorted(bars, key=lambda bar: -ax.transData.transform((0, bar.get_y()))[1])
            shown = [names[round(bar.get_y() + bar.get_height() / 2, 6)] for bar in bars]
            panel["bars"].append((shown, floats([bar.get_width() for bar in bars])))
        else:
            panel["bars"].append(([float(bar.get_x()) for bar in bars], floats([bar.get_height() for bar in bars])))
    return panel


def assert_same_panel(png, tab, where):
    """The PNG's panel shows what the tab's does (exactly the same numbers)."""
    assert png["title"] == tab["title"], where
    assert "\n" not in png["title"], where
    assert (png["xlabel"], png["ylabel"]) == (tab["xlabel"], tab["ylabel"]), where
    if tab["heatmap"] is not None:
        assert png["heatmap"] is not None, where
        columns, rows, matrix = png["heatmap"]
        tab_columns, tab_rows, tab_matrix = tab["heatmap"]
        if tab_columns is not None:
            assert columns == tab_columns, where
        if tab_rows is not None:
            assert rows == tab_rows, where
        np.testing.assert_array_equal(matrix, tab_matrix, err_msg=where)
    assert len(png["lines"]) == len(tab["lines"]), where
    for (x, y), (tab_x, tab_y) in zip(png["lines"], tab["lines"], strict=True):
        np.testing.assert_array_equal(x, tab_x, err_msg=where)
        np.testing.assert_array_equal(y, tab_y, err_msg=where)
    assert len(png["points"]) == len(tab["points"]), where
    for (x, y), (tab_x, tab_y) in zip(png["points"], tab["points"], strict=True):
        np.testing.assert_array_equal(x, tab_x, err_msg=where)
        np.testing.assert_array_equal(y, tab_y, err_msg=where)
    assert [len(s) for s in png["segments"]] == [len(s) for s in tab["segments"]], where
    for segments, tab_segments in zip(png["segments"], tab["segments"], strict=True):
        np.testing.assert_array_equal(segments, tab_segments, err_msg=where)
    assert len(png["bars"]) == len(tab["bars"]), where
    for (places, lengths), (tab_places, tab_lengths) in zip(png["bars"], tab["bars"], strict=True):
        assert places == tab_places, where
        np.testing.assert_array_equal(lengths, tab_lengths, err_msg=where)
    assert sorted(png["spans"]) == sorted(tab["spans"]), where
    assert png["texts"] == tab["texts"], where
    assert png["legend"] == tab["legend"], where


# ---- the tests ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("data", list(OFFERED))
def test_every_export_offered_is_compared(sessions, data):
    """The exports offered for each data set are the ones compared here, in the Export tab's order."""
    assert list(sessions(data).export.available_figures()) == OFFERED[data]


def test_the_variants_are_what_they_say(sessions):
    """Two chains draw two log-joint lines per method (one named in the legend), and VI the ELBO: the
    comparisons of the variants' traces compare what the brief names, not a second one-chain MCMC fit."""
    methods = len(sessions("topics").fits.active)
    two = bokeh_panel(tab_figures(sessions("topics, two chains"), "fits_log_joint_trace")[0])
    assert (len(two["lines"]), len(two["legend"])) == (2 * methods, methods)
    vi = bokeh_panel(tab_figures(sessions("topics, VI"), "fits_log_joint_trace")[0])
    assert (vi["title"], vi["ylabel"], len(vi["lines"])) == ("ELBO (each method's own model)", "ELBO", methods)
    assert all(np.isfinite(y).all() and len(y) > 1 for _, y in vi["lines"])


def artifact_name(data, name):
    first = next(d for d, names in OFFERED.items() if name in names)
    stem = name.replace("_", "-")
    return f"export-{stem}.png" if data == first else f"export-{stem}-{data.replace(', ', '-').replace(' ', '-')}.png"


@pytest.mark.parametrize("data, name", EXPORTS)
def test_an_export_is_its_tabs_figure_on_a_16_9_slide(sessions, artifacts_dir, data, name):
    from lpviz.dashboard.views.export import overlapping_texts

    session = sessions(data)
    fig = matplotlib_figure(session.figure(name))
    # the PNG as the export saves it (save_figure), then drawn again on the figure's own page: a save at
    # another resolution leaves the texts placed for that one
    fig.savefig(artifacts_dir / artifact_name(data, name), dpi=PNG_DPI, bbox_inches="tight", pad_inches=0.15)
    fig.canvas.draw()
    # the tab's figures, panel by panel in its order
    png = png_panels(fig)
    tab = [bokeh_panel(plot) for plot in tab_figures(session, name)]
    assert [panel["title"] for panel in png] == [panel["title"] for panel in tab]
    for index, (png_one, tab_one) in enumerate(zip(png, tab, strict=True)):
        assert_same_panel(png_one, tab_one, f"{name} ({data}), panel {index}: {tab_one['title']!r}")
    # a slide: 16:9 at the slide's size, one-line titles, no text over another
    assert tuple(fig.get_size_inches()) == pytest.approx(SLIDE_INCHES)
    assert SLIDE_INCHES[0] / SLIDE_INCHES[1] == pytest.approx(16 / 9, rel=1e-3)
    assert all("\n" not in ax.get_title() for ax in fig.axes)
    assert not any(ax.get_title().endswith("\u2026") for ax in fig.axes), [ax.get_title() for ax in fig.axes]
    assert overlapping_texts(fig) == []
    # no number per cell on a heatmap larger than 10 x 10
    for ax in fig.axes:
        if ax.get_images() and max(ax.get_images()[0].get_array().shape) > MAX_LABELLED_CELLS:
            assert len(ax.texts) == 0, (name, [text.get_text() for text in ax.texts][:5])


def test_the_topic_maps_circles_are_round_in_the_png(sessions):
    """The topic map's circles are circles in the PNG, as on the tab (Bokeh draws a circle glyph round
    whatever the figure's shape): drawn as polygons in map units with ``data_aspect=1``, a panel stretched
    to fill its place on the slide drew them as ellipses (a width and height apart by a third). In display
    pixels each circle's width is its height, and each lies whole inside its panel, as on the tab."""
    from matplotlib.collections import PatchCollection, PolyCollection

    shapes = (PatchCollection, PolyCollection)
    fig = matplotlib_figure(sessions("topics").figure("topic_map"))
    fig.canvas.draw()
    maps = [ax for ax in fig.axes if any(isinstance(c, shapes) for c in ax.collections)]
    assert [ax.get_title() for ax in maps] == [runner.label for runner in sessions("topics").fits.active.values()]
    for ax in maps:
        box = ax.get_window_extent()
        for collection in ax.collections:
            for path in collection.get_paths() if isinstance(collection, shapes) else []:
                drawn = ax.transData.transform(path.vertices)
                width, height = np.ptp(drawn[:, 0]), np.ptp(drawn[:, 1])
                assert abs(width - height) <= 1.0, (ax.get_title(), width, height)
                assert box.x0 - 0.5 <= drawn[:, 0].min() and drawn[:, 0].max() <= box.x1 + 0.5, ax.get_title()
                assert box.y0 - 0.5 <= drawn[:, 1].min() and drawn[:, 1].max() <= box.y1 + 0.5, ax.get_title()
