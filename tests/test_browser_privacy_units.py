"""Issue 57 MEDIUM 10, served in Debian's chromium: the privacy wording for the synthetic sender x
recipient x month data spoke of documents and words (the sidebar's guarantee, written for topic data,
and the Privacy tab, which never said what its "true counts" are). Both say what a row and a cell are
for the data in force: documents and words for topic data, a sender's emails to every recipient in
every month for the tensor.
"""

import re

import pytest

from tests.browser_harness import TEXTS_IN_PAGE, Page

pytestmark = pytest.mark.browser

# The sidebar's guarantee and the Privacy tab's summary
PRIVACY_WORDS = ("indistinguishable", "alpha = exp(-epsilon/N)")


def privacy_texts(page):
    return [text for text in page.evaluate(TEXTS_IN_PAGE) if any(word in text for word in PRIVACY_WORDS)]


def test_the_privacy_wording_names_the_rows_and_cells_of_the_data_in_force(browser, server):
    page = Page(browser, server.url)
    try:
        page.tab("Privacy")
        page.wait_until(f"() => ({TEXTS_IN_PAGE})().some(t => t.includes('alpha = exp(-epsilon/N)'))")
        texts = privacy_texts(page)
        assert len(texts) == 2, texts  # the guarantee and the tab's summary
        # topic data: a row is a document, a cell its count of one word
        assert all("document" in text and "word" in text for text in texts), texts

        page.one_alpha()
        page.choose("synthetic-tensor")
        page.page.get_by_text(re.compile(r"synthetic-tensor: 30 x 30 x 24 \(tensor\)")).first.wait_for()
        page.wait_until(
            f"() => ({TEXTS_IN_PAGE})().filter(t => t.includes('month') && "
            "(t.includes('indistinguishable') || t.includes('alpha = exp(-epsilon/N)'))).length === 2"
        )
        texts = privacy_texts(page)
        assert len(texts) == 2, texts
        for text in texts:
            assert not re.search(r"document|word", text, re.IGNORECASE), text
            # a row: one sender's counts to every recipient in every month
            assert "sender" in text and "every recipient in every month" in text, text
        summary = next(text for text in texts if "alpha = exp(-epsilon/N)" in text)
        # a cell: one sender's emails to one recipient in one month
        assert "one recipient in one month" in summary, summary
        assert page.errors == []
    finally:
        page.close()
