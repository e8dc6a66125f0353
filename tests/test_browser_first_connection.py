"""A page whose websocket connects after the server's unused-session lifetime still draws (Debian's chromium).

Bokeh discards a session that has had no connection for ``--unused-session-lifetime``, counted
from its creation; a page connecting later got a new session whose document it never showed: the
sidebar and empty tabs, no data ever (a class opening at once queues the connections behind the
page builds). Here the lifetime is 1 ms, so every page connects "late".
"""

import pytest

from tests.browser_harness import COUNT_PLOTS, Page, served

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def late_server(tmp_path_factory):
    with served(tmp_path_factory, "--unused-session-lifetime", "1", "--check-unused-sessions", "50") as running:
        yield running


@pytest.mark.parametrize("opened", ["first page", "second page"])
def test_a_page_connecting_after_the_unused_session_lifetime_gets_its_data(browser, late_server, opened):
    page = Page(browser, late_server.url)
    try:
        # the Data & noise tab's charts come with the data, built after the page connected
        page.page.wait_for_function(f"() => ({COUNT_PLOTS})() > 0", timeout=60_000)
        page.page.get_by_text("Noise changed").first.wait_for(timeout=10_000)
        assert page.errors == []
    finally:
        page.close()
