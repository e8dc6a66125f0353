"""Issue 58 item 5, uploads through ``lpviz serve`` tried as an attacker would: a file larger than
the server's ``--max-upload``. BokehJS sent it whole in one websocket message, Tornado closed the
page's connection at the limit, and the page said only "The connection to the server was lost ...
(its fits were stopped)", its session never pulled again. Now the page does not send it, the data
card says the file's size, the limit and what to do, and the session goes on: a file within the
limit loads after it, on the same connection."""

import re

import pytest

from tests.browser_harness import Page, served

pytestmark = pytest.mark.browser

LIMIT = 200_000


@pytest.fixture(scope="module")
def small_limit_server(tmp_path_factory):
    with served(tmp_path_factory, "--max-upload", str(LIMIT)) as running:
        yield running


def test_an_upload_beyond_the_servers_limit_is_refused_in_words_and_the_page_lives_on(
    browser, small_limit_server, tmp_path
):
    page = Page(browser, small_limit_server.url)
    try:
        page.choose("upload")
        page.page.get_by_text("no file uploaded yet").first.wait_for()
        big = tmp_path / "big.csv"
        big.write_text("1,2,3,4,5,6,7,8,9,0\n" * 30_000)  # 600,000 bytes: beyond the 200,000-byte messages
        page.page.locator("input[type=file]").set_input_files(str(big))
        said = page.page.get_by_text(
            re.compile(r"big\.csv was not uploaded: it is 585\.9 KiB, and this server takes files up to 98\.5 KiB")
        )
        said.first.wait_for()
        assert page.page.get_by_text("--max-upload BYTES").count() >= 1
        small = tmp_path / "small.csv"
        small.write_text("".join(",".join(str((i + j) % 4) for j in range(12)) + "\n" for i in range(20)))
        page.page.locator("input[type=file]").set_input_files(str(small))
        page.page.get_by_text(re.compile(r"small\.csv: 20 x 12")).first.wait_for()
        assert not page.page.get_by_text("The connection to the server was lost").is_visible()
        assert "WebSocket connection closed" not in small_limit_server.log_tail(200)
        assert not page.errors, page.errors
    finally:
        page.close()
