"""Issue 54 item 5 on the served dashboard: Figure 5's network (its top actors held out), two chains per
method, reduced to 300 iterations in the Fit settings (the preset's 2,500 take minutes on a loaded
machine; 300 take seconds). Once every fit is done the Fits tab shows, in its stacking pane under the
scoreboard (of one height from the start, the waiting line replaced inside it), each ensemble's modes
and stacking weights in words and the stacked MAE beside the pooled one and the best constant's, and the
methods compared on the held-out noised cells with the rankings that hold and the rule; each the same
as :func:`lpviz.score` and :func:`lpviz.compare` give for the same fits, run here by the app's runners
in this process (the same settings and seeds give the same chains)."""

import re
import time

import numpy as np
import pandas as pd
import pytest
from playwright.sync_api import expect

import lpviz
from benchmarks.bench_page_lag import LINES  # the benchmarks' reading of the progress lines, shared
from lpviz.dashboard.session.datastore import DataStore
from lpviz.dashboard.session.fits import Fits
from lpviz.dashboard.session.settings import Settings
from lpviz.dashboard.views.export import COMPARISON_FILE
from tests.browser_harness import N_METHODS, TIMEOUT_MS

pytestmark = pytest.mark.browser

PRESET = "Figure 5"
SCHEDULE = dict(n_iter=300, burn_in=100)  # the preset's thin (10): 20 samples a chain


def expected():
    """``({label: modes text}, {label: stacked MAE}, compare statements, rule, compare table)`` of the same fits."""
    settings = Settings(preset=PRESET)
    settings.param.update(**SCHEDULE)
    fits = Fits(DataStore(settings), buffer_length=10_000)
    try:
        for runner in fits.active.values():
            runner.start()
        deadline = time.monotonic() + 600
        while not all(runner.status == "done" for runner in fits.active.values()):
            assert time.monotonic() < deadline, {m: (r.status, r.error) for m, r in fits.active.items()}
            time.sleep(0.05)
            fits.drain()
        release, truth = fits.data.release, fits.data.truth
        posteriors = {runner.label: runner._carry["chain_run"].posterior for runner in fits.active.values()}
        scores = {label: lpviz.score(posterior, release, truth) for label, posterior in posteriors.items()}
        table = lpviz.compare(posteriors, release, truth)
        return (
            {label: each["modes"]["text"] for label, each in scores.items()},
            {label: each["stacked_mae"] for label, each in scores.items()},
            table.attrs["statements"],
            table.attrs["rule"],
            table,
        )
    finally:
        fits.close()
        for runner in fits.runners.values():
            runner.join(timeout=30)


def test_the_modes_and_the_comparison_on_held_out_cells_show_after_the_run(page, artifacts_dir, tmp_path):
    page.tab("Fits")
    page.page.locator("select:has(option:text-is('(settings of your own)'))").first.select_option(value=PRESET)
    page.page.get_by_text("Fit settings").first.click()
    page.fill("Burn in", SCHEDULE["burn_in"])  # first: 300 iterations refuse the preset's burn-in of 500
    page.fill("N iter", SCHEDULE["n_iter"])
    goal = SCHEDULE["n_iter"]
    page.wait_until(
        f"() => {{ const l = ({LINES})(); return l.length === {N_METHODS} && "
        f"l.every(x => x[0] === 'idle' && x[2] === {goal}); }}"
    )
    # held-out cells and nothing run: the stacking pane says when its content comes, at its fixed height
    page.page.locator(".stacking-waiting").first.wait_for(timeout=TIMEOUT_MS)
    box = page.page.locator("div.stacking-box").first
    height = box.bounding_box()["height"]
    page.page.get_by_role("button", name="Start", exact=True).click()
    page.wait_until(f"() => ({LINES})().every(x => x[0] === 'done' && x[1] === {goal})")
    modes, stacked, statements, rule, table = expected()

    # every method's final score on the board (the scoreboard redraws at the view throttle's pace: the
    # last fit's final score may come a redraw after the first one's)
    shown_modes = page.page.locator("ul.chain-modes li")
    expect(shown_modes).to_have_count(N_METHODS, timeout=TIMEOUT_MS)
    lines = shown_modes.all_inner_texts()
    assert len(lines) == N_METHODS, lines
    for label, text in modes.items():
        assert f"{label}: {text}." in lines, (label, text, lines)
    board = page.page.locator("table.stacking-table").first
    headers = board.locator("th").all_inner_texts()
    assert any(header.startswith("stacked MAE") for header in headers), headers
    column = next(i for i, header in enumerate(headers) if header.startswith("stacked MAE"))
    assert headers[column - 1].startswith("MAE: best constant") and headers[column - 2] == "MAE", headers
    held = next(i for i, header in enumerate(headers) if header.startswith("stacked held-out MAE"))
    assert headers[held - 1].startswith("held-out MAE: best constant") and headers[held - 2] == "held-out MAE"
    for row in board.locator("tbody tr").all():
        cells = row.locator("td").all_inner_texts()
        assert cells[0] in stacked, cells
        assert float(cells[column].replace(",", "").rstrip(" \u2605")) == pytest.approx(stacked[cells[0]], rel=1e-3)

    page.page.locator("table.compare-table").first.wait_for(timeout=TIMEOUT_MS)
    said = page.page.locator("ul.compare-statements li").all_inner_texts()
    assert statements, "the reduced run states nothing: the test checks no sentence"
    assert said == [f"{statement}." for statement in statements]
    assert rule in page.page.locator(".compare-rule").first.inner_text()
    # the pane kept its height: its content came inside it (the page is not laid out again for it)
    assert box.bounding_box()["height"] == pytest.approx(height, abs=0.5)
    assert not page.page.locator("table.scoreboard th", has_text="stacked").count()
    page.shot(artifacts_dir, "stacking-and-compare")
    # the Export tab's CSV is that comparison (the pane's, read, not computed again)
    page.tab("Export")
    button = page.page.get_by_text(re.compile(r"^Methods compared \(\.csv\)")).first
    button.wait_for(timeout=TIMEOUT_MS)
    with page.page.expect_download() as download_info:
        button.click()
    download = download_info.value
    assert download.suggested_filename == COMPARISON_FILE
    download.save_as(tmp_path / COMPARISON_FILE)
    exported = pd.read_csv(tmp_path / COMPARISON_FILE, index_col="method")
    assert list(exported.index) == list(table.index) and list(exported.columns) == list(table.columns)
    for name in ("rank", "elpd", "se", "weight", "mae", "best_constant_mae"):
        np.testing.assert_allclose(exported[name].to_numpy(float), table[name].to_numpy(float), rtol=1e-12)
    assert page.errors == []
