"""The Data & noise tab's charts: computed once per data set, drawn by each page as its own Bokeh figures.

Each page's figure is compared with HoloViews' own rendering of the export's layout
(:meth:`views.noise_view.NoiseView.heatmap_layout`, :func:`views.plots.count_image`) of the same data:
the cells, extent, colour mapper and limits, palette, title, axes, named ticks and held-out shade.
Sharing is checked by counting the computations and by the identity of the arrays two pages draw.
"""

import holoviews as hv
import numpy as np
import panel as pn
import pytest
from bokeh.document import Document

import lpviz.dashboard.views.noise_view as noise_view
from lpviz.dashboard.session.datastore import DataStore
from lpviz.dashboard.session.settings import Settings
from lpviz.dashboard.views.noise_view import NoiseView


def make_store(holdout="none", **settings):
    store = DataStore(Settings(**{"noise_seed": 11, **settings}))
    store.settings.holdout = holdout
    return store


@pytest.fixture(autouse=True)
def fresh_drawings(monkeypatch):
    """Each test starts with no drawing shared yet (the cache is the process's)."""
    monkeypatch.setattr(noise_view, "_drawings", type(noise_view._drawings)())


def counted_drawings(monkeypatch):
    calls = []
    original = noise_view.noise_drawing

    def counted(*args, **kwargs):
        calls.append(args)
        return original(*args, **kwargs)

    monkeypatch.setattr(noise_view, "noise_drawing", counted)
    return calls


def drawn(plot):
    """What a heatmap figure draws, as comparable values: its image, its held-out shade (or None)."""
    images = [renderer for renderer in plot.renderers if type(renderer.glyph).__name__ == "Image"]
    main, *shades = images
    data, mapper = main.data_source.data, main.glyph.color_mapper
    (bar,) = plot.right
    (hover,) = [tool for tool in plot.tools if type(tool).__name__ == "HoverTool"]
    x_axis, y_axis = plot.xaxis[0], plot.yaxis[0]
    return dict(
        image=np.asarray(data["image"][0], dtype=float),
        extent=[float(data[key][0]) for key in ("x", "y", "dw", "dh")],
        ranges=[plot.x_range.start, plot.x_range.end, plot.y_range.start, plot.y_range.end],
        limits=(mapper.low, mapper.high),
        mapper=type(mapper).__name__,
        palette=list(mapper.palette),
        title=plot.title.text,
        title_size=plot.title.text_font_size,
        axes=(x_axis.axis_label, y_axis.axis_label),
        ticks=(dict(x_axis.major_label_overrides), dict(y_axis.major_label_overrides)),
        tick_positions=(
            list(getattr(x_axis.ticker, "ticks", [])),
            list(getattr(y_axis.ticker, "ticks", [])),
        ),
        x_orientation=x_axis.major_label_orientation,
        hover=list(hover.tooltips),
        bar=bar.title,
        shade=None
        if not shades
        else (
            np.isfinite(np.asarray(shades[0].data_source.data["image"][0], dtype=float)),
            list(shades[0].glyph.color_mapper.palette),
            shades[0].glyph.global_alpha,
        ),
    )


def assert_same(page, export):
    for key in ("image", "extent", "ranges", "limits"):
        np.testing.assert_allclose(page.pop(key), export.pop(key), rtol=1e-12, atol=1e-12, err_msg=key)
    page_shade, export_shade = page.pop("shade"), export.pop("shade")
    assert (page_shade is None) == (export_shade is None)
    if page_shade is not None:
        np.testing.assert_array_equal(page_shade[0], export_shade[0])
        assert page_shade[1:] == export_shade[1:]
    assert page == export


def page_figures(view):
    return [pane.object for pane in view.heatmaps().objects]


def export_figures(view):
    layout = view.heatmap_layout()
    return [hv.render(panel, backend="bokeh") for panel in layout.values()]


CASES = {
    "topics": dict(),
    "big topics (subsampled)": dict(n_docs=700),
    "network, named, held out": dict(source="synthetic-blocks", holdout="random cells"),
    "tensor (summed over months)": dict(source="synthetic-tensor"),
}


@pytest.mark.parametrize("case", CASES)
def test_each_heatmap_on_the_page_draws_what_the_export_draws(case):
    view = NoiseView(data=make_store(**CASES[case]))
    page, export = page_figures(view), export_figures(view)
    assert len(page) == len(export) == 3
    for page_plot, export_plot in zip(page, export, strict=True):
        assert_same(drawn(page_plot), drawn(export_plot))
    assert len({id(plot.x_range) for plot in page}) == len({id(plot.y_range) for plot in page}) == 1  # one zoom


def test_the_comparison_tells_a_wrong_drawing_apart():
    """Its power: the noised counts against the truncated ones, or against another release's."""
    view = NoiseView(data=make_store())
    page, export = page_figures(view), export_figures(view)
    with pytest.raises(AssertionError):
        assert_same(drawn(page[1]), drawn(export[2]))
    other = export_figures(NoiseView(data=make_store(noise_seed=12)))
    with pytest.raises(AssertionError):
        assert_same(drawn(page[1]), drawn(other[1]))
    named = NoiseView(data=make_store(source="synthetic-blocks", holdout="random cells"))
    unshaded = drawn(page_figures(named)[0])
    unshaded["shade"] = None
    with pytest.raises(AssertionError):
        assert_same(unshaded, drawn(export_figures(named)[0]))


def test_a_release_without_its_truth_draws_two_heatmaps_and_no_histogram(tmp_path):
    from lpviz.datasets import make_blocks

    release = make_blocks(n_actors=12, n_communities=3, random_state=2).privatize(epsilon=2.0, N=1.0, random_state=5)
    store = make_store()
    store.load_upload(release.save(tmp_path / "noised.npz").read_bytes(), "noised.npz")
    view = NoiseView(data=store)
    page, export = page_figures(view), export_figures(view)
    assert len(page) == len(export) == 2
    for page_plot, export_plot in zip(page, export, strict=True):
        assert_same(drawn(page_plot), drawn(export_plot))
    assert isinstance(view.noise_histogram(), pn.pane.Markdown) and "noise_histogram" not in view.figures()


def test_the_histogram_counts_the_noise_drawn_as_the_export_does():
    store = make_store()
    view = NoiseView(data=store)
    plot = view.noise_histogram().object
    (bars,) = plot.renderers
    data = bars.data_source.data
    tau = (store.release.Y_obs - store.truth.Y).ravel()
    np.testing.assert_array_equal(data["middle"], np.arange(tau.min(), tau.max() + 1))
    np.testing.assert_array_equal(data["height"], [(tau == value).sum() for value in data["middle"]])
    exported = view.noise_histogram_plot()
    np.testing.assert_array_equal(exported.dimension_values(1), data["height"])
    assert plot.title.text == exported.opts.get().kwargs["title"]


def test_two_sessions_on_the_same_data_set_compute_the_noise_charts_once(monkeypatch):
    calls = counted_drawings(monkeypatch)
    first, second = NoiseView(data=make_store()), NoiseView(data=make_store())  # a class: one seed
    assert first.data.release is not second.data.release  # each session derived its own release
    pages = []
    for view in (first, second):
        document = Document()
        pn.panel(view).get_root(document)
        document.to_json()  # the page's first message: the shared arrays serialise
        pages.append(page_figures(view))
    assert len(calls) == 1
    # the same arrays drawn, read-only, in models of each page's own
    for mine, theirs in zip(*pages, strict=True):
        assert mine is not theirs and mine.renderers[0] is not theirs.renderers[0]
        image = mine.renderers[0].data_source.data["image"][0]
        assert image is theirs.renderers[0].data_source.data["image"][0]
        assert not image.flags.writeable
    assert first.drawing() is second.drawing()
    first.summary(), second.summary(), first.noise_histogram(), second.noise_histogram()
    assert len(calls) == 1  # the summary and the histogram read the same drawing

    other = NoiseView(data=make_store(noise_seed=12))  # another release of the same data: drawn anew
    page_figures(other)
    assert len(calls) == 2 and other.drawing() is not first.drawing()
    first.data.settings.noise_seed = 12  # a student draws the other noise: the drawing is shared again
    assert first.drawing() is other.drawing() and len(calls) == 2


def test_a_session_draws_its_own_data_when_they_change(monkeypatch):
    calls = counted_drawings(monkeypatch)
    view = NoiseView(data=make_store())
    before = view.drawing()
    view.drawing(), view.summary()
    assert len(calls) == 1  # looked up once per release
    view.data.settings.epsilon = 0.3
    after = view.drawing()
    assert len(calls) == 2 and after is not before
    np.testing.assert_array_equal(after.heatmaps[1].values, view.data.release.Y_obs)
    view.data.settings.holdout = "random cells"  # same noise, cells held out: another drawing
    shaded = view.drawing()
    assert shaded.heatmaps[0].heldout is not None and before.heatmaps[0].heldout is None


def test_the_shared_drawings_are_bounded(monkeypatch):
    monkeypatch.setattr(noise_view, "SHARED_DRAWINGS", 2)
    views = [NoiseView(data=make_store(noise_seed=seed)) for seed in (1, 2, 3)]
    for view in views:
        view.drawing()
    assert len(noise_view._drawings) == 2
    calls = counted_drawings(monkeypatch)
    NoiseView(data=make_store(noise_seed=3)).drawing()  # the newest are kept
    assert calls == []
    NoiseView(data=make_store(noise_seed=1)).drawing()  # the oldest was dropped
    assert len(calls) == 1


def test_the_key_tells_every_drawn_difference_apart():
    store = make_store()
    release, truth = store.release, store.truth
    key = noise_view.drawing_key(release, truth, (None, None))
    assert key == noise_view.drawing_key(make_store().release, make_store().truth, (None, None))
    assert key != noise_view.drawing_key(release, None, (None, None))
    assert key != noise_view.drawing_key(release, truth, (None, [f"w{i}" for i in range(15)]))
    assert key != noise_view.drawing_key(make_store(noise_seed=12).release, truth, (None, None))
    held = make_store(holdout="random cells")
    assert key != noise_view.drawing_key(held.release, held.truth, (None, None))


def test_a_networks_mean_count_is_over_its_cells_the_n_figure_1_uses():
    """A network's diagonal (self loops) is not a cell: the summary's mean is over the cells that
    exist, the mean Figure 1 takes for N (it said "mean 14.85 per cell" over all 400 cells beside
    N = 15.63, issue 57 LOW 22); a topic matrix keeps its plain mean per cell."""
    store = make_store()
    store.settings.preset = "Figure 1"
    release, truth = store.release, store.truth
    cells = int((~release.structural_zeros).sum())
    assert cells == 20 * 19 and truth.Y[release.structural_zeros].sum() == 0
    mean = truth.Y.sum() / cells
    assert f"{mean:.2f}" == f"{store.settings.N:.2f}" != f"{truth.Y.mean():.2f}"
    said = NoiseView(data=store).summary().object
    assert f"mean {mean:.2f} per cell over its 380 cells (20 cells, such as self loops, cannot hold counts" in said
    assert f"mean {truth.Y.mean():.2f}" not in said
    topics = make_store()
    assert f"mean {topics.truth.Y.mean():.2f} per cell." in NoiseView(data=topics).summary().object


@pytest.mark.parametrize("case", CASES)
def test_a_heatmap_without_negative_counts_spends_its_colour_bar_on_zero_and_up(case):
    """The true counts and the truncated ones cannot be negative: their scales run from 0 (white) to
    red; the noised counts' is symmetric about zero, blue to red. All three were -15..15 on Figure 1,
    the truncated map spending half its bar on negatives it cannot hold (issue 57 LOW 20)."""
    from lpviz.dashboard.views.plots import _palette

    view = NoiseView(data=make_store(**CASES[case]))
    truth, noised, truncated = (drawn(plot) for plot in page_figures(view))
    assert noised["limits"][0] == -noised["limits"][1] < 0 and noised["image"].min() < 0
    assert noised["palette"] == list(_palette("RdBu_r"))
    for shown in (truth, truncated):
        assert shown["limits"][0] == 0 < shown["limits"][1] and shown["image"].min() >= 0
        assert shown["palette"] == list(_palette("Reds")) and shown["palette"][0].lower() in ("#fff5f0", "#ffffff")
    assert "white to red where none are" in view.summary().object
