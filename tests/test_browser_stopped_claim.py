"""Issue 57 HIGH 2, on the served dashboard: a preset's claim is about its whole run, so a run stopped
before its goal gets no verdict. Figure 4 (reduced) stopped at 173 / 400 showed "Held: 400 iterations
are too few ..."; here Figure 3 (small alpha0) is stopped once its scoreboard has numbers (after its
burn-in, short of its 6,000 iterations): the claim's line says in words that it is not checked, at which
iteration of how many the run was stopped, and that the claim is about the full run; no "Held" and no
"Did not hold" (the one rule, lpviz.dashboard.session.presets.unfinished)."""

import re

import pytest

from benchmarks.bench_page_lag import LINES  # the benchmarks' reading of the progress lines, shared
from lpviz.dashboard.session.presets import PRESETS
from tests.browser_harness import N_METHODS, TIMEOUT_MS

pytestmark = pytest.mark.browser

PRESET = "Figure 3 (small alpha0)"
SCORED_FROM = 2000  # iterations: past the burn-in of 1,000 and some saved samples, so the fits have scores


def test_a_run_stopped_before_its_goal_is_not_checked_and_the_page_says_why(page):
    goal = PRESETS[PRESET].settings["n_iter"]
    page.tab("Fits")
    page.page.locator("select:has(option:text-is('(settings of your own)'))").first.select_option(value=PRESET)
    page.wait_until(
        f"() => {{ const l = ({LINES})(); return l.length === {N_METHODS} && "
        f"l.every(x => x[0] === 'idle' && x[2] === {goal}); }}"
    )
    page.click("Run the fits")
    page.wait_until(f"() => ({LINES})().every(x => x[0] === 'running' && x[1] >= {SCORED_FROM})")
    # Stop at once (on a quiet machine the fits reached their goal while the test waited for the
    # scoreboard), then the numbers they kept
    page.page.get_by_role("button", name="Stop", exact=True).click()
    page.wait_until(f"() => ({LINES})().every(x => x[0] === 'stopped' && x[1] < {goal})")
    page.page.locator("table.scoreboard").first.wait_for(timeout=TIMEOUT_MS)  # the fits have numbers
    lines = page.evaluate(LINES)
    verdict = page.page.locator(".claim-verdict[data-held='not checked']")
    verdict.wait_for(timeout=TIMEOUT_MS)
    text = verdict.inner_text()
    stopped_at = min(iteration for _, iteration, _ in lines)
    assert f"Not checked: the run was stopped at {stopped_at:,} of {goal:,} iterations" in text, (text, lines)
    assert "the claim is about the full run" in text
    assert not re.search(r"\bHeld\b|Did not hold", text), text
    assert page.errors == []
