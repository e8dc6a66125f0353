"""Issue 57 HIGH 3: in a long-lived page an upload loads, or says why, always. Uploads were seen
ignored without a word after a long lesson ("no file uploaded yet" stayed, nothing in the server log).

The history replayed: a preset's run to its end, Reset, Data = "a file you upload", then files. The
upload widget kept the last file's bytes, and Panel hands a file over as a change of the widget's
value: a file with the same bytes as the last one (the same file chosen again, once a switch of the
data source had drawn the widget anew) changed nothing, so nothing was read and the page kept "no file
uploaded yet" without a word. An empty file (Panel gives it as value None) was ignored the same way,
the previous file's message left in place (issue 57 MEDIUM 4)."""

import re

import pytest

from benchmarks.bench_page_lag import LINES  # the benchmarks' reading of the progress lines, shared
from tests.browser_harness import N_METHODS

pytestmark = pytest.mark.browser

PRESET = "Table 1 (VI paper, reduced)"  # three small VI fits: seconds to their end
NOT_YET = "no file uploaded yet"
RAGGED = "1,2,3\n4,five,6\n7,8\n"  # the walk's malformed CSV: refused, with its line


def every(status):
    return f"() => {{ const l = ({LINES})(); return l.length === {N_METHODS} && l.every(x => x[0] === '{status}'); }}"


def small_csv(path, rows=20, columns=12):
    lines = [",".join(str((i * 7 + j * 3) % 5) for j in range(columns)) for i in range(rows)]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_every_upload_after_a_preset_run_and_reset_loads_or_says_why(page, tmp_path):
    page.tab("Fits")
    page.page.locator("select:has(option:text-is('(settings of your own)'))").first.select_option(value=PRESET)
    page.wait_until(every("idle"))
    page.click("Run the fits")
    page.wait_until(every("done"))
    page.page.get_by_role("button", name="Reset", exact=True).click()
    page.wait_until(every("idle"))
    page.choose("upload")
    page.page.get_by_text(NOT_YET).first.wait_for()
    upload = page.page.locator("input[type=file]")
    ragged = tmp_path / "counts.csv"
    ragged.write_text(RAGGED)
    upload.set_input_files(str(ragged))
    said = page.page.get_by_text(re.compile(r"counts\.csv, line \d: a missing or non-finite count"))
    said.first.wait_for()
    # another data set, then back to uploads: the widget is drawn anew; the same file chosen again
    page.choose("synthetic-topics")
    page.page.get_by_text(re.compile(r"synthetic-topics: [\d,]+ x [\d,]+")).first.wait_for()
    page.choose("upload")
    page.page.get_by_text(NOT_YET).first.wait_for()
    upload = page.page.locator("input[type=file]")
    upload.set_input_files(str(ragged))
    said.first.wait_for(timeout=30_000)  # before: "no file uploaded yet" stayed, nothing said
    # an empty file says so (it was ignored, the ragged file's message left standing)
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    upload.set_input_files(str(empty))
    page.page.get_by_text("the uploaded file 'empty.csv' is empty").first.wait_for(timeout=30_000)
    # and a good file loads
    upload.set_input_files(str(small_csv(tmp_path / "good.csv")))
    page.page.get_by_text(re.compile(r"good\.csv: 20 x 12")).first.wait_for(timeout=60_000)
    assert page.errors == []
