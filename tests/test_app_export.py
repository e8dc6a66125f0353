"""Exported PNG figures are slide-clean: every colour bar's tick labels in order along the bar, no
text over another (tick labels, a colour bar's label, the next panel's names and title).

Read from the matplotlib figure the PNG export draws and saves (:func:`lpviz.dashboard.views.export.matplotlib_figure`,
what :func:`lpviz.dashboard.views.export.save_figure` writes): the texts' order and their boxes as drawn.
"""

import holoviews as hv
import numpy as np
import pytest

from lpviz.dashboard.session.datastore import DataStore
from lpviz.dashboard.session.fits import Fits
from lpviz.dashboard.session.settings import Settings
from lpviz.dashboard.views.export import (
    _matplotlib_styled,
    colour_bars,
    matplotlib_figure,
    overlapping_texts,
    save_figure,
)
from lpviz.dashboard.views.fits_view import FitsView
from lpviz.dashboard.views.noise_view import NoiseView


def tick_values_along(colour_bar):
    """The numbers a colour bar's tick labels show, in the order they stand along the bar."""
    renderer = colour_bar.ax.figure.canvas.get_renderer()
    axis = colour_bar.ax.yaxis if colour_bar.orientation == "vertical" else colour_bar.ax.xaxis
    low, high = sorted(axis.get_view_interval())
    shown = []
    for tick in axis.get_major_ticks():
        label = tick.label1 if tick.label1.get_visible() else tick.label2
        if label.get_text() and low <= tick.get_loc() <= high:
            box = label.get_window_extent(renderer)
            place = box.y0 if colour_bar.orientation == "vertical" else box.x0
            shown.append((place, float(label.get_text().replace("\u2212", "-"))))
    return [value for _, value in sorted(shown)]


@pytest.fixture(scope="module")
def figure5(enron_tarball):
    """The Figure 5 preset: actors named on the axes, heavy-tailed counts on a quantile scale."""
    fits = Fits(DataStore(Settings(preset="Figure 5", path=str(enron_tarball)), background=False))
    assert fits.data.error == ""
    yield fits
    fits.close()


@pytest.mark.parametrize("name", ["noise_heatmaps", "fits_rates"])
def test_exported_colour_bars_have_ordered_ticks_and_no_text_lies_over_another(figure5, name, tmp_path):
    views = {"noise_heatmaps": NoiseView(data=figure5.data), "fits_rates": FitsView(fits=figure5)}
    figure = views[name].figures()[name]
    fig = matplotlib_figure(figure)
    bars = colour_bars(fig)
    assert len(bars) == len(figure)  # one per heatmap
    for colour_bar in bars:
        values = tick_values_along(colour_bar)
        assert len(values) >= 3, values  # a readable scale, not one lone number
        assert values == sorted(values) and len(set(values)) == len(values), values
    assert overlapping_texts(fig) == []
    # what the export writes is that figure
    path = save_figure(figure, tmp_path / f"{name}.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_without_the_tidying_the_same_export_overlaps(figure5):
    """The check has power: HoloViews' own matplotlib layout of the same heatmaps puts a colour bar's
    ticks and label over the next panel's actor names (seen in exported slides)."""
    figure = NoiseView(data=figure5.data).figures()["noise_heatmaps"]
    fig = hv.renderer("matplotlib").get_plot(_matplotlib_styled(figure)).state
    fig.canvas.draw()
    assert overlapping_texts(fig, across_axes_only=True)


@pytest.mark.parametrize("scale", ["linear", "log", "quantile"])
def test_a_live_heatmap_keeps_its_colour_mapper_from_not_started_to_a_result(scale):
    """The export's linear colour bar is the PNG's alone: a served rate heatmap's first frame is a fit
    not started (all zeros) and keeps its Bokeh colour mapper; a colour norm chosen from the values
    (linear for one value, equalised after) failed in HoloViews' update, inside the runner's watcher,
    and the run's progress lines stopped (test_browser's preset walk)."""
    from lpviz.dashboard.views.plots import count_image

    clim = (0.0, 50.0)
    pipe = hv.streams.Pipe(data=np.zeros((30, 20)))
    heatmap = hv.DynamicMap(lambda data: count_image(data, "documents", "a fit", clim, scale=scale), streams=[pipe])
    plot = hv.renderer("bokeh").get_plot(heatmap)
    mapper = type(plot.handles["color_mapper"])
    rates = np.random.default_rng(0).gamma(0.3, 20.0, size=(30, 20))  # heavy-tailed, as rates are
    pipe.send(rates)
    assert type(plot.handles["color_mapper"]) is mapper
    assert plot.handles["color_mapper"].high == pytest.approx(clim[1])
    np.testing.assert_allclose(plot.handles["source"].data["image"][0], rates)


def test_long_method_titles_are_wrapped_inside_their_panels():
    """A VI method's two-line title ("private (models the noise), VI" over its fit's state) is wider
    than its panel: each line is wrapped to the panel's width, centred over it, clear of its axis's
    top tick (it reached over it before)."""
    fits = Fits(DataStore(Settings(preset="Table 1 (VI paper, reduced)"), background=False))
    try:
        fig = matplotlib_figure(FitsView(fits=fits).figures()["fits_rates"])
    finally:
        fits.close()
    renderer = fig.canvas.get_renderer()
    titled = [ax for ax in fig.axes if ax.title.get_text()]
    assert sum(", VI" in ax.title.get_text() for ax in titled) == 3
    for ax in titled:
        title, panel = ax.title.get_window_extent(renderer), ax.get_window_extent(renderer)
        assert panel.x0 <= title.x0 and title.x1 <= panel.x1, ax.title.get_text()
    assert overlapping_texts(fig) == []


def test_the_summary_records_the_releases_real_privacy_level_the_preset_its_claim_and_verdict():
    """Issue 37 (MEDIUM 11): a per-row-alpha release (alpha 0.386-0.979) was recorded as "epsilon 1, N 1",
    with no preset, claim or verdict."""
    import json

    from lpviz.dashboard.session.presets import PRESETS
    from lpviz.dashboard.views.export import results_bytes
    from lpviz.dashboard.views.fits_view import FitsView

    name = "Figure 3 (large alpha0)"
    fits = Fits(DataStore(Settings(preset=name), background=False))
    try:
        summary = json.loads(results_bytes(fits, ".json"))
        alpha = fits.data.release.alpha
        privacy = summary["privacy"]
        assert privacy["per_row_alpha"] is True and privacy["rows"] == len(alpha)
        assert privacy["alpha_min"] == pytest.approx(float(np.min(alpha)))
        assert privacy["alpha_max"] == pytest.approx(float(np.max(alpha)))
        assert privacy["alpha_min"] < privacy["alpha_max"]
        assert "epsilon" not in summary["settings"] and "N" not in summary["settings"]
        verdict = FitsView(fits=fits).claim_verdict()
        assert summary["preset"] == {
            "name": name,
            "claim": PRESETS[name].claim.text,
            "verdict": verdict.word,
            "why": verdict.text,
        }
        assert summary["preset"]["verdict"] == "not checked yet"  # nothing has run
        fits.settings.param.update(heterogeneous=False, epsilon=2.0, N=1.0)  # one alpha: its epsilon and N
        summary = json.loads(results_bytes(fits, ".json"))
        assert summary["privacy"]["per_row_alpha"] is False
        assert summary["privacy"]["epsilon"] == 2.0 and summary["privacy"]["N"] == 1.0
        assert summary["privacy"]["alpha"] == pytest.approx(np.exp(-2.0))
        assert summary["preset"] is None  # a setting changed by hand: the settings are one's own
    finally:
        fits.close()


def test_exports_are_offered_only_for_what_the_data_have():
    """Issue 37 (LOW): blocks and tensor exports were offered for topics data (an empty "No network" plot)."""
    from lpviz.dashboard.views.blocks_view import BlocksView
    from lpviz.dashboard.views.export import ExportView
    from lpviz.dashboard.views.tensor_view import TensorView
    from lpviz.dashboard.views.topics_view import TopicsView

    fits = Fits(DataStore(Settings(source="synthetic-topics"), background=False))
    try:
        views = [TopicsView(fits=fits), BlocksView(fits=fits), TensorView(fits=fits)]
        offered = set(ExportView(fits=fits, views=views).available_figures())
        assert "topics_heatmaps" in offered
        assert not any(name.startswith(("blocks_", "tensor_")) for name in offered), offered
        fits.settings.source = "synthetic-blocks"
        offered = set(ExportView(fits=fits, views=views).available_figures())
        assert {"blocks_rates", "blocks_memberships"} <= offered
        assert not any(name.startswith(("topics_", "tensor_")) for name in offered), offered
    finally:
        fits.close()


def test_exported_topic_heatmaps_are_the_tabs_rows_and_values_on_a_16_9_slide():
    """Issue 37 (HIGH 3, MEDIUM 11): the topics PNG drew rows in reversed order under labels sorted as text
    ("word 0 ... word 14"), a 14-row naive panel for 15 words, a number in every cell ("8.0963e-13"), on
    narrow strips with titles over several lines. Read back from the figure the PNG saves: each panel's
    row and column names, top to bottom, and its matrix are the Topics tab's (its heatmaps' frames)."""
    from lpviz.dashboard.views.export import SLIDE_INCHES, heatmap_labels
    from lpviz.dashboard.views.topics_view import TopicsView
    from tests.test_app_views import run_fits

    fits = run_fits(Fits(DataStore(Settings(source="synthetic-topics", noise_seed=3))))
    try:
        view = TopicsView(fits=fits)
        view.__panel__()  # the tab as shown: its heatmaps are made with its panel
        frames = view.heatmap_frames()
        fig = matplotlib_figure(view.figures()["topics_heatmaps"])
        # every titled panel, however drawn (an image, or HoloViews' own mesh of cells): its names and values
        panels = [ax for ax in fig.axes if ax.get_title()]
        assert [ax.get_title() for ax in panels] == list(frames)  # the tab's panels, in its order
        for ax in panels:
            frame = frames[ax.get_title()]
            terms = list(dict.fromkeys(frame["term"]))  # the tab's rows, top to bottom (its y factors reversed)
            topics = list(dict.fromkeys(frame["topic"]))
            live_plot = view._live_heatmaps.figures[ax.get_title()][0]
            assert list(live_plot.y_range.factors)[::-1] == terms
            columns, rows, matrix = heatmap_labels(ax)
            assert rows == terms and columns == topics
            expected = frame.pivot_table(index="term", columns="topic", values="P(term | topic)")
            np.testing.assert_allclose(matrix, expected.reindex(index=terms, columns=topics).to_numpy())
            assert len(ax.texts) == 0  # no number per cell on a 15-row heatmap
            assert "\n" not in ax.get_title()
        assert tuple(fig.get_size_inches()) == pytest.approx(SLIDE_INCHES)
        assert overlapping_texts(fig) == []
    finally:
        fits.close()


def test_the_export_tab_warms_the_png_drawing_when_first_shown_once_per_process():
    """Issue 57 MEDIUM 16: a served walk's first PNG took 10.9 s (later ones 0.6-3.1 s): matplotlib's
    import and font cache, paid on the click. The Export tab, when first shown, draws one tiny PNG in a
    background thread; hidden, it does not (most sessions never open it). In a fresh interpreter, so
    that nothing else started matplotlib first."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        """
        import sys, threading
        from lpviz.dashboard.session.datastore import DataStore
        from lpviz.dashboard.session.fits import Fits
        from lpviz.dashboard.session.settings import Settings
        from lpviz.dashboard.views import export
        fits = Fits(DataStore(Settings(source="synthetic-topics"), background=False))
        view = export.ExportView(fits=fits, views=[], shown=False)
        assert "matplotlib.pyplot" not in sys.modules, "matplotlib started before the tab was shown"
        assert not export._PNG_WARM.is_set()
        view.on_screen.show()
        names = [t.name for t in threading.enumerate()]
        assert "lpviz-png-warm-up" in names or export._PNG_WARM.is_set(), names
        assert export._PNG_WARM.wait(120), "the warm-up did not end"
        assert "matplotlib.pyplot" in sys.modules
        export.ExportView(fits=fits, views=[], shown=True)  # another session's tab: nothing more to do
        assert "lpviz-png-warm-up" not in [t.name for t in threading.enumerate()]
        fits.close()
        print("warmed")
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "warmed" in done.stdout, done.stderr[-3000:]
