"""The tensor model in a real browser (Debian's chromium driven by Playwright).

A person chooses the synthetic sender x recipient x month source: the data
card's model selector offers the tensor model, the fits run, and the Tensor
tab draws each component's emails per month (months on the axis) and a
component's sender x recipient map for the truth and every fit; the Blocks
tab says why it has nothing (the tensor model has no communities).
"""

import re

import pytest

from tests.browser_harness import FIGURES, N_METHODS, TIMEOUT_MS

pytestmark = pytest.mark.browser


def test_the_tensor_tab_draws_profiles_over_months_and_pair_maps(page, artifacts_dir):
    page.one_alpha()
    page.choose("synthetic-tensor")
    page.page.get_by_text(re.compile(r"synthetic-tensor: 30 x 30 x 24 \(tensor\)")).first.wait_for()
    model = page.page.locator("select:has(option:text-matches('tensor model'))").first
    assert "tensor model (Poisson CP factorization) (default)" in model.inner_text()
    page.page.get_by_text("Fit settings").first.click()
    page.fill("Burn in", 100)  # before the iterations: 300 would not leave the default burn-in a sample
    page.fill("Thin", 10)
    page.fill("N iter", 300)
    page.tab("Fits")
    page.click("Start")
    page.page.get_by_text("done, iteration").nth(N_METHODS - 1).wait_for(timeout=TIMEOUT_MS)
    page.tab("Blocks")
    page.page.get_by_text("which has no communities of actors").first.wait_for()
    page.tab("Tensor")
    page.page.get_by_text("Components matched to the true components").first.wait_for()
    panels = 1 + N_METHODS  # the truth and each fit
    page.wait_until(f"() => ({FIGURES})().filter(f => f.title.endsWith('components over time')).length === {panels}")
    page.wait_until(f"() => ({FIGURES})().filter(f => / component 1$/.test(f.title)).length === {panels}")
    titles = [figure["title"] for figure in page.evaluate(FIGURES)]
    assert "truth: components over time" in titles and "truth: component 1" in titles
    maps = [figure for figure in page.evaluate(FIGURES) if figure["title"].endswith("component 1")]
    assert all(figure["images"] == [30 * 30] for figure in maps)  # sender x recipient, every actor
    page.page.wait_for_timeout(1500)
    # (docs/screenshots/tensor_views.png is a copy of this, from one run)
    page.page.screenshot(path=str(artifacts_dir / "browser-tensor_views.png"), full_page=True)
    assert page.errors == []
