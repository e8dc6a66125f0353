"""The Central vs local tab in a real browser (Debian's chromium driven by Playwright).

The opening preset's synthetic topics (90 documents x 15 words): the local
fits started on the Fits tab, the central model fitted on its own tab, and
both kinds of row read from the comparison table of the page.
"""

import pytest
from playwright.sync_api import expect

from lpviz.dashboard.views.central_view import CENTRAL_LABEL
from tests.browser_harness import LABELS, TIMEOUT_MS

pytestmark = pytest.mark.browser


def table_rows(session):
    """The comparison table's rows as {approach: [cells]}."""
    rows = session.page.locator("table.central-vs-local tbody tr").all()
    return {row.locator("td").nth(0).inner_text(): row.locator("td").all_inner_texts() for row in rows}


def test_central_and_local_fits_side_by_side(page, artifacts_dir):
    page.tab("Central vs local")
    page.page.get_by_text("No results yet").first.wait_for()
    page.click("Fit central model")
    page.page.get_by_text("Central model done").first.wait_for()
    expect(page.page.locator("table.central-vs-local tbody tr")).to_have_count(1, timeout=TIMEOUT_MS)
    page.tab("Fits")
    page.click("Start")
    page.tab("Central vs local")  # a local fit gets its row with its first saved sample, while it runs
    local = [f"local: {LABELS['private']}", f"local: {LABELS['naive']}", LABELS["nonprivate"]]
    expect(page.page.locator("table.central-vs-local tbody tr")).to_have_count(1 + len(local), timeout=TIMEOUT_MS)
    rows = table_rows(page)
    assert set(rows) == {CENTRAL_LABEL, *local}
    header = page.page.locator("table.central-vs-local th").all_inner_texts()
    npmi, mae = header.index("NPMI"), header.index("MAE")
    assert "(epsilon, delta)-DP per document" in rows[CENTRAL_LABEL][1]
    assert "curator sees the true counts" in rows[CENTRAL_LABEL][2]
    assert rows[CENTRAL_LABEL][mae].startswith("n/a")
    assert "limited-precision local privacy per document" in rows[local[0]][1]
    assert "nobody is trusted" in rows[local[0]][2]
    for cells in rows.values():
        float(cells[npmi])  # every approach has its NPMI
    # the central topics beside the private MCMC's, aligned
    page.page.get_by_text("central DP (aligned)").first.wait_for()
    # (docs/screenshots/central_vs_local.png is a copy of this, from one run)
    page.page.screenshot(path=str(artifacts_dir / "browser-central_vs_local.png"), full_page=True)
    assert page.errors == []
