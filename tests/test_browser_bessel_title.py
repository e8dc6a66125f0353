"""Issue 57 LOW 24 on the served dashboard: the Bessel tab's map of |mean - mode| over the grid had its
title cut at the plot's edge ("max 0.96" of "max 0.969 <= 1") wherever the map stands at its narrowest
beside the bound's plot (a 1366 px laptop, a 1000 px window: 300-318 px for a 381 px title). The title
must end inside its plot at every width, from a wide desktop to a phone."""

import pytest

from tests.test_browser_trust import PHONE, heatmap_titles_fit

pytestmark = pytest.mark.browser


WIDTHS = (1920, 1366, 1000, PHONE["width"])


def test_the_gap_maps_title_is_whole_at_every_width(page):
    page.tab("Bessel")
    for width in WIDTHS:
        page.page.set_viewport_size({"width": width, "height": PHONE["height"]})
        titles = heatmap_titles_fit(page, count=1)
        assert "<= 1" in titles[0]["text"] and "max 0.9" in titles[0]["text"], (width, titles)
    assert page.errors == []
