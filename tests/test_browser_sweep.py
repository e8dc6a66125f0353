"""The epsilon sweep in a real browser: points drawn as the fits finish, CSV download, Cancel.

The grid runs on the server's shared local Dask cluster (worker processes the
server starts at the first sweep). Points are counted in the page's Bokeh
documents: the scatter sources of the sweep plots (their epsilon_over_N and draws columns),
one point per noise level and method: the mean over its noise draws.
"""

import pandas as pd
import pytest

from tests.browser_harness import TIMEOUT_MS, Page

pytestmark = pytest.mark.browser


# Points drawn per sweep plot (MAE, NPMI, ...): the largest count over the plots (each shows every point
# that has its score). Scatter sources carry epsilon_over_N and the hover columns draws and flags.
COUNT_SWEEP_POINTS = """
() => {
  let most = 0;
  for (const doc of window.Bokeh.documents)
    for (const model of doc.all_models) {
      if (model.type !== "Figure" && model.constructor.name !== "Figure") continue;
      let points = 0;
      for (const renderer of model.renderers || []) {
        const source = renderer.data_source;
        if (!source) continue;
        const data = source.data instanceof Map ? Object.fromEntries(source.data) : source.data;
        if (data && data.epsilon_over_N !== undefined && data.draws !== undefined) points += data.draws.length;
      }
      most = Math.max(most, points);
    }
  return most;
}
"""


@pytest.fixture
def page(browser, server):  # noqa: F811
    page = Page(browser, server.url)
    page.tab("Epsilon sweep")
    page.page.get_by_role("button", name="Run sweep").wait_for()
    yield page
    page.close()


def points(page):
    return page.evaluate(COUNT_SWEEP_POINTS)


def test_a_sweep_draws_its_points_as_they_finish_and_downloads_one_csv_row_per_point(page, artifacts_dir):
    page.fill("epsilon / N values", "0.25, 0.5, 1, 2, 4")
    page.fill("Iterations per fit", 300)
    page.fill("Noise draws per point", 1)
    page.click("Run sweep")
    page.page.get_by_text("Sweep finished").first.wait_for(timeout=TIMEOUT_MS)
    # 5 values x (private, naive) noised fits; the fit of the true counts is a dashed line, not a point
    page.wait_until(f"() => ({COUNT_SWEEP_POINTS})() === 10")
    page.page.get_by_text("11 of 11 fits done").first.wait_for()
    with page.page.expect_download() as download:
        page.click("Download CSV")
    rows = pd.read_csv(download.value.path())
    assert len(rows) == 11 and rows["mae"].notna().all()
    assert sorted(rows["epsilon_over_N"].dropna().unique()) == [0.25, 0.5, 1.0, 2.0, 4.0]
    with page.page.expect_download() as download:
        page.click("Download PNG")
    with open(download.value.path(), "rb") as handle:
        assert handle.read(4) == b"\x89PNG"
    page.shot(artifacts_dir, "epsilon-sweep")
    assert page.errors == []


def test_a_sweep_draws_at_least_three_points_and_can_be_cancelled(page, artifacts_dir):
    page.fill("Iterations per fit", 4000)  # fits of a few seconds each: time to cancel mid-grid
    # the default grid: 3 values x 3 noise draws x (private, naive) + the fit of the true counts
    page.click("Run sweep")
    page.wait_until(f"() => ({COUNT_SWEEP_POINTS})() >= 3")
    page.click("Cancel")
    page.page.get_by_text("Sweep cancelled").first.wait_for(timeout=TIMEOUT_MS)
    drawn = points(page)
    text = page.page.get_by_text("Sweep cancelled").first.inner_text()
    done = int(text.split(": ", 1)[1].split(" of ")[0])
    assert 3 <= drawn <= done < 19, text  # a point (a mean) needs a fit; fewer than all 3 x 3 x 2 + 1 fits
    page.page.wait_for_timeout(2000)
    assert points(page) == drawn  # nothing arrives after the cancel
    assert page.page.get_by_role("button", name="Run sweep").is_enabled()
    page.shot(artifacts_dir, "epsilon-sweep-cancelled")
    assert page.errors == []
