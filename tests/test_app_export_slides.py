"""Issue 37 (MEDIUM 11): the exported noise and fit-rate PNGs were narrow strips with large blank gaps
and titles wrapped onto 3-4 lines ("Noised\\ncounts\\ntruncated at\\n0"), on a page of no slide's shape
(12 x 5.1 in, 8 x 11.9 in), and one title shrunk to fit beside larger ones. Read back from the
matplotlib figure the PNG export draws and saves (:func:`dashboard.views.export.matplotlib_figure`): its size, each
panel's box and title as drawn.
"""

import pytest

from lpviz.dashboard.session.datastore import DataStore
from lpviz.dashboard.session.fits import Fits
from lpviz.dashboard.session.settings import Settings
from lpviz.dashboard.views.export import matplotlib_figure
from lpviz.dashboard.views.fits_view import FitsView
from lpviz.dashboard.views.noise_view import NoiseView

# A widescreen slide's width (PowerPoint's and Google Slides' 16:9 page is 13.33 x 7.5 in).
WIDESCREEN_INCHES = 13.34
# The panels with their names, ticks and colour bars cover at least this share of the slide's width (a
# blank gap between two panels, or panels drawn as strips, leave less: 45-49% before, 80-82% now).
MIN_COVERED_WIDTH = 0.7
# A heatmap's own box at least this share of the slide's width (a 90 x 15 matrix drawn at its data's
# aspect was a strip of 6% before).
MIN_PANEL_WIDTH = 0.15


@pytest.fixture(scope="module")
def figure3():
    """The opening preset (Figure 3, large alpha0): a 90 x 15 matrix, taller than wide."""
    fits = Fits(DataStore(Settings(preset="Figure 3 (large alpha0)"), background=False))
    yield fits
    fits.close()


def covered_share(boxes, width):
    """The share of ``[0, width]`` covered by the union of the boxes' horizontal extents."""
    covered, end = 0.0, 0.0
    for x0, x1 in sorted((max(0.0, box.x0), min(width, box.x1)) for box in boxes):
        if x1 > end:
            covered += x1 - max(x0, end)
            end = x1
    return covered / width


@pytest.mark.parametrize("name", ["noise_heatmaps", "fits_rates"])
def test_exported_noise_and_rate_heatmaps_fill_a_16_9_slide_with_one_line_titles(figure3, name):
    views = {"noise_heatmaps": NoiseView(data=figure3.data), "fits_rates": FitsView(fits=figure3)}
    figure = views[name].figures()[name]
    fig = matplotlib_figure(figure)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    inches = fig.get_size_inches()
    assert inches[0] / inches[1] == pytest.approx(16 / 9, rel=0.01) and inches[0] <= WIDESCREEN_INCHES, inches
    width = inches[0] * fig.dpi
    panels = [ax for ax in fig.axes if ax.get_images()]
    assert len([ax for ax in panels if ax.get_title()]) == len(figure)  # one titled heatmap per panel
    for ax in panels:
        if not ax.get_title():  # a colour bar
            continue
        title = ax.title.get_text()
        assert "\n" not in title, title  # one line
        box, drawn = ax.get_window_extent(renderer), ax.title.get_window_extent(renderer)
        assert drawn.x0 >= 0 and drawn.x1 <= width, title  # whole on the slide
        assert box.width >= MIN_PANEL_WIDTH * width, (title, box.width, width)  # no strip
    share = covered_share([ax.get_tightbbox(renderer) for ax in fig.axes], width)
    assert share >= MIN_COVERED_WIDTH, share  # no large blank gaps
    # the panels' titles in one size (the noise PNG's first title was shrunk to 10 pt beside two of 12)
    sizes = {ax.title.get_text(): ax.title.get_fontsize() for ax in panels if ax.get_title()}
    assert len(set(sizes.values())) == 1, sizes


@pytest.mark.parametrize("name", ["privacy_skellam", "privacy_geometric", "privacy_adversary"])
def test_an_exported_legend_has_every_entry_of_the_tabs_legend(figure3, name):
    """The geometric noise law's PNG had no legend entry for its "2Geo" bars (HoloViews' matplotlib
    Spikes are drawn unlabelled) while the Privacy tab's legend showed one."""
    from lpviz.dashboard.views.privacy_view import PrivacyView

    figure = PrivacyView(data=figure3.data).figures()[name]
    on_the_tab = [element.label for element in figure if element.label]
    assert len(on_the_tab) >= 2  # an overlay whose legend the tab shows
    legend = matplotlib_figure(figure).axes[0].get_legend()
    assert [text.get_text() for text in legend.get_texts()] == on_the_tab
