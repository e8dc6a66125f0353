"""Issue 37, the Blocks tab served in Debian's chromium: Figure 1's actors ordered by their community
with lines between the blocks (MEDIUM 10), and uploaded actors in natural order, actor2 before actor10
(LOW "uploaded actors sorted as text").

The heatmaps are numeric images named by fixed ticks, so what the page shows is read from its Bokeh
documents: each shown figure's axis ticks and the names over them (``major_label_overrides``), its
images and its line segments (the block boundaries).
"""

import json

import numpy as np
import pytest

from tests.test_browser_sidebar import choose_preset

pytestmark = pytest.mark.browser

# Every figure shown (not one of a hidden tab): its title, its axes' names by tick, its images (shape and
# values) and its line segments.
BLOCK_FIGURES = """() => {
  const plain = (value) => value instanceof Map ? Object.fromEntries(value) : value;
  const figures = [];
  for (const doc of window.Bokeh.documents)
    for (const model of doc.all_models) {
      if (model.type !== "Figure" && model.constructor.name !== "Figure") continue;
      const view = window.Bokeh.index.find_one(model);
      if (!view || !view.el || !view.el.isConnected || !view.el.checkVisibility()) continue;
      const axis = (side) => {
        const found = (model[side] || []).find(a => a.ticker && a.ticker.ticks);
        if (!found) return null;
        const names = plain(found.major_label_overrides) || {};
        return {label: found.axis_label, names: [...found.ticker.ticks].map(tick => names[String(tick)] ?? null)};
      };
      const images = [], segments = [];
      for (const renderer of model.renderers || []) {
        if (!renderer.glyph || !renderer.data_source) continue;
        const data = plain(renderer.data_source.data);
        if (data.image) for (const image of data.image) images.push({shape: [...image.shape], values: [...image]});
        const type = renderer.glyph.type || renderer.glyph.constructor.name;
        if (type === "Segment" && renderer.visible)
          for (let i = 0; i < data.x0.length; i++) segments.push([data.x0[i], data.y0[i], data.x1[i], data.y1[i]]);
      }
      figures.push({title: model.title ? model.title.text : "", x: axis("below"), y: axis("left"), images, segments});
    }
  return figures;
}"""


def block_figures(page, start):
    """The shown figures whose titles start with ``start``, once each has its images."""
    page.wait_until(
        f"(start) => ({BLOCK_FIGURES})().some(f => f.title.startsWith(start) && f.images.length > 0)", start
    )
    return [figure for figure in page.evaluate(BLOCK_FIGURES) if figure["title"].startswith(start)]


def figure1_truth():
    """Figure 1's true memberships (each actor's share in each community), as the server draws them."""
    from lpviz.dashboard.session.datastore import DataStore
    from lpviz.dashboard.session.settings import Settings

    theta = np.asarray(DataStore(Settings(preset="Figure 1")).truth.factors["theta"], dtype=float)
    return theta / theta.sum(axis=1, keepdims=True)


def figure1_order():
    """What the Blocks views should show for Figure 1: the true memberships, the actors grouped by main
    community with the strongest members first, and the positions where the community changes."""
    shares = figure1_truth()
    main = shares.argmax(axis=1)
    order = sorted(range(len(shares)), key=lambda actor: (main[actor], -shares[actor, main[actor]]))
    changes = [k for k in range(1, len(order)) if main[order[k]] != main[order[k - 1]]]
    return shares, order, changes


def test_figure1_blocks_are_ordered_by_community_with_lines_between_them(page):
    """Issue 37 MEDIUM 10: the Blocks tab of Figure 1 drew the actors in their index order, and no
    block boundaries, though the preset asks students to compare blocks."""
    choose_preset(page, "Figure 1")
    page.page.get_by_text("20 actors in 5 communities").first.wait_for()
    page.tab("Blocks")
    page.page.get_by_text("Actors ordered by their main community in the true memberships").first.wait_for()

    # what the page should show, from the true memberships: actors grouped by main community (1..5), the
    # strongest members first, and a line wherever the community changes
    shares, order, changes = figure1_order()
    n, communities = shares.shape
    names = [f"actor {actor}" for actor in order]
    assert len(changes) == len(set(shares.argmax(axis=1))) - 1 >= 2  # blocks to compare, not a trivial order
    assert names != sorted(names, key=lambda name: int(name.split()[1]))  # the index order differs

    (rates,) = block_figures(page, "truth (true rates)")
    assert rates["y"]["names"] == names and rates["x"]["names"] == names  # senders and recipients alike
    (image,) = rates["images"]
    assert image["shape"] == [n, n]
    # the lines between blocks, half a cell before each change, across the whole heatmap, both ways
    rows = sorted(y0 + 0.5 for x0, y0, x1, y1 in rates["segments"] if y0 == y1)
    cols = sorted(x0 + 0.5 for x0, y0, x1, y1 in rates["segments"] if x0 == x1)
    assert rows == changes and cols == changes
    assert all({min(x0, x1), max(x0, x1)} == {-0.5, n - 0.5} for x0, y0, x1, y1 in rates["segments"] if y0 == y1)

    (members,) = block_figures(page, "truth\nmemberships")
    assert members["y"]["names"] == names
    (image,) = members["images"]
    drawn = np.asarray(image["values"]).reshape(image["shape"])  # row k: the actor drawn k-th
    np.testing.assert_allclose(drawn, shares[order], rtol=1e-9)
    assert sorted(y0 + 0.5 for x0, y0, x1, y1 in members["segments"]) == changes  # rows only
    assert all({x0, x1} == {-0.5, communities - 0.5} for x0, y0, x1, y1 in members["segments"])
    assert page.errors == []


def test_uploaded_actors_come_in_natural_order(page, tmp_path):
    """Issue 37 LOW: uploaded actors were sorted as text (actor0, actor10, actor11, actor12, actor2...)."""
    actors = [f"actor{i}" for i in range(13)]
    edges = ["source,target,count"]
    edges += [f"{actors[i]},{actors[(i + 1) % 13]},{i + 1}" for i in range(13)]  # a ring: every actor sends
    edges += [f"{actors[(i + 5) % 13]},{actors[i]},2" for i in range(13)]
    path = tmp_path / "ring_edges.csv"
    path.write_text("\n".join(edges) + "\n")
    page.choose("upload")
    page.page.get_by_text("no file uploaded yet").first.wait_for()
    page.page.locator("input[type=file]").set_input_files(str(path))
    page.page.get_by_text("ring_edges.csv: 13 x 13").first.wait_for()
    page.tab("Blocks")
    # before any fit the actors are drawn in the data's order: the loader's
    (rates,) = [
        figure for figure in block_figures(page, "") if figure["y"] and figure["y"]["label"].startswith("sender")
    ]
    assert rates["y"]["names"] == actors and rates["x"]["names"] == actors
    assert page.errors == []


@pytest.mark.parametrize(
    "viewport", [{"width": 1500, "height": 1000}, {"width": 412, "height": 915}], ids=["desktop", "phone"]
)
def test_after_a_fit_the_blocks_views_are_whole_ordered_and_bounded(browser, server, viewport):
    """Issue 37 (MEDIUM 10 and 12) after a fit, at a desktop's and a phone's width (412 px): Figure 1's Blocks
    tab with every method's fitted rates and memberships beside the truth: nothing cut (a plot wider than
    the page would have to scroll in a box of its own), no title cut, every panel's actors in the true
    community order, the block lines on each. Before: at 412 px the rate heatmaps (a grid of 2 x 240 px)
    and the memberships (4 x 160 px) ran 232 px past the page's edge, the titles cut; on a desktop the
    memberships' titles were cut."""
    from tests.browser_harness import LABELS, Page
    from tests.test_browser_phone import PHONE, tab_whole
    from tests.test_browser_privacy import PRIVACY_FIGURES
    from tests.test_browser_trust import choose_preset as choose_folded_preset
    from tests.test_browser_trust import toggle_sidebar

    page = Page(browser, server.url, viewport=viewport)
    folded = viewport == PHONE  # the sidebar, open on a desktop
    try:
        choose_folded_preset(page, "Figure 1")
        page.page.get_by_text("20 actors in 5 communities").first.wait_for(state="attached")  # the folded sidebar
        # a short fit (the preset runs 30,000 iterations): 1,200 after a burn-in of 100, every 25th saved
        if folded:
            toggle_sidebar(page, shown=True)
        page.page.get_by_text("Fit settings").first.click()
        page.fill("Burn in", 100)
        page.fill("N iter", 1200)
        if folded:
            toggle_sidebar(page, shown=False)
        page.tab("Fits")
        page.page.get_by_text("/ 1,200").first.wait_for()
        page.click("Start")
        page.statuses("done")

        page.tab("Blocks")
        shares, order, changes = figure1_order()
        n, communities = shares.shape
        names = [f"actor {actor}" for actor in order]
        for label in LABELS.values():
            (rates,) = block_figures(page, f"{label}: posterior mean")
            assert rates["y"]["names"] == names and rates["x"]["names"] == names, label
            assert sorted(y0 + 0.5 for x0, y0, x1, y1 in rates["segments"] if y0 == y1) == changes, label
            assert sorted(x0 + 0.5 for x0, y0, x1, y1 in rates["segments"] if x0 == x1) == changes, label
            (members,) = block_figures(page, f"{label}\nmemberships")
            assert members["y"]["names"] == names, label
            assert members["images"][0]["shape"] == [n, communities], label
            assert sorted(y0 + 0.5 for x0, y0, x1, y1 in members["segments"]) == changes, label
        page.page.wait_for_timeout(2500)  # laid out at the page's width
        # the titles, drawn in the canvases (no page element to find cut): each line within its plot
        figures = page.evaluate(PRIVACY_FIGURES)
        assert len(figures) == 2 * (1 + len(LABELS)), [figure["title"] for figure in figures]
        for figure in figures:
            assert figure["title_right"] <= figure["plot"]["right"] + 1, figure
            assert figure["plot"]["right"] <= viewport["width"], figure
        if not folded:  # the tab alone (the sidebar's own widgets are tests/test_browser_sidebar.py's)
            toggle_sidebar(page, shown=False)
            page.page.wait_for_timeout(2500)
        problems = tab_whole(page)
        assert problems == [], f"the Blocks tab after a fit: {json.dumps(problems, indent=1)}"
        assert page.errors == []
    finally:
        page.close()
