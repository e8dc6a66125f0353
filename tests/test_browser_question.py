"""Issue 57 MEDIUM 5 on the served dashboard: a setting typed during a run is held back with its
question shown beside the field, in the card it was typed in (epsilon in the Privacy card, Chains in
the Fit settings), not only at the top of the sidebar out of view; and once the fits have ended the
question says so instead of "discards the running fits". Before: one question box at the top of the
sidebar, its words those of when it was asked."""

import pytest
from playwright.sync_api import expect

from tests.browser_harness import TIMEOUT_MS

pytestmark = pytest.mark.browser

TYPED_EPSILON = "epsilon (type 0.01 to 100)"


def inside(inner, outer):
    a, b = inner.bounding_box(), outer.bounding_box()
    return (
        a
        and b
        and b["x"] - 1 <= a["x"]
        and a["x"] + a["width"] <= b["x"] + b["width"] + 1
        and (b["y"] - 1 <= a["y"] and a["y"] + a["height"] <= b["y"] + b["height"] + 1)
    )


def test_a_question_stands_beside_the_field_typed_and_says_when_the_fits_have_ended(page, artifacts_dir):
    page.one_alpha()  # one alpha: epsilon and its typed field (the opening preset's noise is per row)
    page.page.get_by_text("Fit settings").first.click()
    page.fill("N iter", 1_000_000)
    page.tab("Fits")
    page.page.get_by_text("/ 1,000,000").first.wait_for()
    page.click("Start")
    page.statuses("running")
    page.fill(TYPED_EPSILON, 2)
    privacy = page.page.locator(".question-privacy").first
    expect(privacy).to_be_visible(timeout=TIMEOUT_MS)
    expect(privacy).to_contain_text("Applying epsilon -> 2 discards the running fits")
    expect(page.page.locator(".question-top").first).to_be_hidden()
    card = page.page.locator(".card", has=page.page.get_by_label(TYPED_EPSILON, exact=True)).last
    assert inside(privacy, card), (privacy.bounding_box(), card.bounding_box())
    page.shot(artifacts_dir, "question-beside-epsilon")
    # the fits end while the question waits: it says so
    page.click("Stop")
    page.statuses("stopped")
    expect(privacy).to_contain_text("The fits have ended: applying epsilon -> 2 replaces their results")
    expect(page.page.get_by_text("discards the running fits")).to_have_count(0)
    page.click("Discard them and apply")
    expect(privacy).to_be_hidden(timeout=TIMEOUT_MS)
    expect(page.page.get_by_label(TYPED_EPSILON, exact=True)).to_have_value("2", timeout=TIMEOUT_MS)
    # a Fit setting's question stands in the Fit settings card
    page.click("Start")
    page.statuses("running")
    page.fill("Chains", 3)
    fit = page.page.locator(".question-fit").first
    expect(fit).to_be_visible(timeout=TIMEOUT_MS)
    expect(fit).to_contain_text("Applying chains -> 3 discards the running fits")
    expect(privacy).to_be_hidden()
    page.click("Keep the fits")
    expect(fit).to_be_hidden(timeout=TIMEOUT_MS)
    assert page.errors == []
