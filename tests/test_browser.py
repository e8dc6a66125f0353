"""The served dashboard in a real browser: Debian's chromium driven by Playwright.

``python -m lpviz.dashboard.serve`` (what ``make serve`` runs) listens on a free local
port for the module; each test opens its own page (its own session). What the
page shows is read from the Bokeh documents in the browser
(``window.Bokeh.documents``), so points are counted, not eyeballed.
Screenshots go to the artifacts directory, and the latencies a user feels
(Start -> first point, Pause -> every point in, Stop -> stopped) to
``artifacts/browser-latency.json`` (speed targets are the benchmark's,
benchmarks/bench_app.py; tests assert behaviour).
"""

import json
import re
import time

import pytest
from playwright.sync_api import expect

from tests.browser_harness import (
    COUNT_PLOTS,
    COUNT_TRACE_POINTS,
    FIGURES,
    IMAGE_CHECKSUMS,
    N_METHODS,
    SOURCE_LABELS,
    SPINNING,
    TIMEOUT_MS,
    Page,
    count_texts,
    record_latency,
)

pytestmark = pytest.mark.browser


def test_server_listens_on_this_machine_only(server):
    listening = []
    with open("/proc/net/tcp") as table:
        for line in table.readlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            if state == "0A" and int(local.split(":")[1], 16) == server.port:
                listening.append(local.split(":")[0])
    assert listening == ["0100007F"]  # 127.0.0.1, little-endian hex: no other interface


def test_page_loads_idle_with_the_noised_heatmaps_and_a_shown_noise_seed(page, artifacts_dir):
    assert len(page.evaluate(IMAGE_CHECKSUMS)) == 3  # true, noised, truncated
    # the app opens on the Figure 3 preset (per-row noise, large alpha0), saying what to look at
    page.page.get_by_text("Each row has its own noise").first.wait_for()
    page.page.get_by_text("watch the scoreboard").first.wait_for()
    page.page.get_by_text(re.compile(r"Simulated release: noise seed \d+")).first.wait_for()
    assert page.evaluate(SPINNING) is False  # nothing runs: no spinner
    page.shot(artifacts_dir, "data-and-noise")
    assert page.errors == []


def test_opening_the_app_and_pressing_start_shows_private_best_on_mae(page, artifacts_dir):
    page.tab("Fits")
    page.click("Start")
    page.statuses("done")
    board = page.page.locator("table.scoreboard")
    header = board.locator("th").all_inner_texts()
    column = header.index("MAE vs true rates")
    rows = {
        r.locator("td").nth(0).inner_text(): r.locator("td").nth(column).inner_text()
        for r in board.locator("tbody tr").all()
    }
    assert len(rows) == N_METHODS
    private = next(name for name in rows if name.startswith("private"))
    naive = next(name for name in rows if name.startswith("naive"))
    # the lesson of the preset: modelling the noise beats ignoring it (non-private, on the true data,
    # is the reference both aim at)
    assert float(rows[private].split()[0]) < float(rows[naive].split()[0])
    assert "\u2605" not in rows[naive]
    page.shot(artifacts_dir, "scoreboard")
    assert page.errors == []


def test_settings_are_applied_or_refused_with_the_reason(page, artifacts_dir):
    opening = page.evaluate(IMAGE_CHECKSUMS)
    page.one_alpha()
    page.page.get_by_text("eps/N = 1, alpha").first.wait_for()
    page.wait_until(
        """([script, before]) => eval(script)().filter(sum => !before.includes(sum)).length >= 2""",
        [IMAGE_CHECKSUMS, opening],
    )  # the noised heatmaps of the new release are in
    before = page.evaluate(IMAGE_CHECKSUMS)
    page.fill("N", 4)
    page.page.get_by_text("eps/N = 0.25").first.wait_for()
    # (replaced models may linger in the document for a while: look for new images, not a count)
    page.wait_until(
        """([script, before]) => eval(script)().filter(sum => !before.includes(sum)).length >= 2""",
        [IMAGE_CHECKSUMS, before],
    )
    changed = [sum for sum in page.evaluate(IMAGE_CHECKSUMS) if sum not in before]
    assert len(changed) == 2  # the noised and truncated heatmaps change; the true counts stay
    page.fill("N", 0.5)  # below the mechanism's N >= 1: refused, visibly, and not applied
    page.page.get_by_text("must be at least 1").first.wait_for()
    expect(page.page.get_by_label("N", exact=True)).to_have_value("4")
    page.page.get_by_text("eps/N = 0.25").first.wait_for()
    epsilon = page.page.locator(".slider-edit input").first  # the editable slider's own field
    epsilon.fill("12")  # beyond the slider's range: typed values are applied
    epsilon.press("Enter")
    page.page.get_by_text("alpha = exp(-eps/N) = 0.04979").first.wait_for()
    page.fill("N", 1)
    page.page.get_by_text("alpha = exp(-eps/N) = 6.144e-06").first.wait_for()  # significant digits, never 0.0000
    page.page.get_by_text("Fit settings").first.click()
    page.fill("Burn in", 11000)  # more than the 10,000 iterations: no sample would be saved
    page.page.get_by_text("no sample would be saved").first.wait_for()
    expect(page.page.get_by_label("Burn in", exact=True)).to_have_value("1000")
    page.fill("N docs", 50)
    page.page.get_by_text(re.compile(r"50 x 15 \(topics\)")).first.wait_for()
    page.click("Reset to this data set's defaults")
    page.page.get_by_text(re.compile(r"90 x 15 \(topics\)")).first.wait_for()
    page.shot(artifacts_dir, "settings-refused")
    assert page.errors == []


def test_each_data_set_brings_its_defaults_and_the_views_follow(page, enron_tarball, artifacts_dir):
    page.one_alpha()
    page.choose("synthetic-blocks")
    page.page.get_by_text("(blocks)").first.wait_for()
    n_blocks = float(page.page.get_by_label("N", exact=True).input_value())
    assert n_blocks > 1  # Figure 1: N is the mean count
    # the heatmaps were rebuilt for the 20 x 20 network: its images span 20 columns, not the topics' 15
    page.wait_until(f"() => ({FIGURES})().some(f => f.images.includes(400))")
    for figure in page.evaluate(FIGURES):
        if 400 in figure["images"]:
            assert (figure["start"], figure["end"]) == (-0.5, 19.5), figure
    page.tab("Topics")  # a network has no topics: explained, no empty plots
    page.page.get_by_text("which has no topics").first.wait_for()
    page.page.wait_for_timeout(1000)
    assert not [f for f in page.evaluate(FIGURES) if f["xlabel"] == "topic"]
    plots = page.evaluate(COUNT_PLOTS)
    page.tab("Blocks")
    page.wait_until(f"() => ({COUNT_PLOTS})() > {plots}")
    page.tab("Fits")  # the rate heatmaps of the 20 x 20 network: the truth and one per method
    page.wait_until(f"""() => ({FIGURES})().filter(f => f.images.includes(400)).length >= {1 + N_METHODS}""")
    titles = [figure["title"] for figure in page.evaluate(FIGURES) if 400 in figure["images"]]
    assert "truth (true rates)" in titles
    # (each heatmap's own title is checked in-process: test_app_fits.py; served, the method
    # heatmaps have been seen titled like the truth's on a loaded machine: a known open bug)
    page.choose("enron-network")
    page.page.get_by_text(re.compile(r"enron.*: \d+ x \d+ \(blocks\)", re.IGNORECASE)).first.wait_for()
    assert page.page.get_by_label("N", exact=True).input_value() == "1"  # not Figure 1's N carried over
    expect(page.page.locator(".bk-btn-group").get_by_text("quantile")).to_be_visible()
    page.tab("Blocks")
    page.page.wait_for_timeout(1000)
    page.shot(artifacts_dir, "enron-network")
    assert page.errors == []


def test_start_streams_pause_and_stop_act_at_once_and_sessions_are_apart(browser, page, server, artifacts_dir):
    page.long_runs()
    assert page.evaluate(COUNT_TRACE_POINTS) == 0
    other = Page(browser, server.url)  # a second session, left alone
    try:
        other.tab("Fits")
        other.page.get_by_text("Solid: the current sample").first.wait_for()
        first_point = page.timed("Start", f"() => ({COUNT_TRACE_POINTS})() > 0")
        record_latency("start_to_first_point_seconds", first_point)
        page.wait_until(f"() => ({SPINNING})() === true")  # something runs: the spinner says so
        # it/s from the first report on, never "0 it/s" while running
        page.page.get_by_text(re.compile(r"running, iteration [\d,]+ / 100,000, [1-9][\d,.]* it/s")).first.wait_for()
        # 100,000 iterations into 2,000-row buffers: a row every 50 iterations
        page.wait_until(f"() => ({COUNT_TRACE_POINTS})() >= 3 * 10")
        # no held-out cells, no held-out curve: per method the sample's and the posterior mean's MAE
        mae_curves = page.evaluate("""() => {
          let n = 0;
          for (const doc of window.Bokeh.documents) for (const m of doc.all_models)
            if (m.type === "Figure" && m.title && m.title.text.startsWith("MAE against")) n = Math.max(n,
              m.renderers.filter(r => r.glyph && r.glyph.type === "Line").length);
          return n; }""")
        assert mae_curves == 2 * N_METHODS
        # Pause: the page reads "paused" once every worker handed over its last rows, in the same message
        pause = page.timed("Pause", f"() => ({count_texts('paused, iteration')})() >= {N_METHODS}")
        record_latency("pause_to_every_point_in_seconds", pause)
        page.statuses("paused")
        paused = page.evaluate(COUNT_TRACE_POINTS)
        page.page.wait_for_timeout(1500)
        assert page.evaluate(COUNT_TRACE_POINTS) == paused
        page.wait_until(f"() => ({SPINNING})() === false")
        page.shot(artifacts_dir, "fits-paused")
        assert other.evaluate(COUNT_TRACE_POINTS) == 0  # sessions do not share chains
        page.click("Resume")
        page.wait_until(f"() => ({COUNT_TRACE_POINTS})() > {paused}")
        stop = page.timed("Stop", f"() => ({count_texts('stopped, iteration')})() >= {N_METHODS}")
        record_latency("stop_to_stopped_seconds", stop)
        page.statuses("stopped")
        # the chains are gone, not just hidden: running they keep both cores busy (about 2 CPU s/s);
        # the last redraws after Stop may take a second of the server's time on a loaded machine
        assert min(server.cpu_rate(1.0) for _ in range(4)) < 0.5
        assert page.errors == [] and other.errors == []
    finally:
        other.close()


def test_resume_after_the_end_runs_on_and_switching_data_asks_first(page, artifacts_dir):
    page.page.get_by_text("Fit settings").first.click()
    page.fill("Burn in", 100)
    page.fill("N iter", 300)
    page.tab("Fits")
    page.page.get_by_text("/ 300").first.wait_for()
    page.click("Start")
    page.statuses("done")
    page.click("Resume")  # after the end: as many iterations again, the same chains
    page.page.get_by_text("/ 600").first.wait_for()
    page.statuses("done")
    expect(page.page.get_by_text("done, iteration 600 / 600")).to_have_count(N_METHODS)
    page.fill("N iter", 100_000)
    page.click("Start")
    page.statuses("running")
    page.choose("synthetic-blocks")  # would discard the running fits: the page asks first
    page.page.get_by_text("discards the running fits").first.wait_for()
    page.shot(artifacts_dir, "switch-asks-first")
    # held back: the selector shows the data in force until the answer
    expect(page.source_select()).to_have_value(SOURCE_LABELS["synthetic-topics"])
    page.click("Keep the fits")
    page.statuses("running")
    # as a person would: the question goes, is asked again, and only then the yes. A click at
    # a button the server is hiding or showing at that moment can land on nothing.
    expect(page.page.get_by_text("discards the running fits").first).to_be_hidden(timeout=TIMEOUT_MS)
    page.choose("synthetic-blocks")
    page.page.get_by_text("discards the running fits").first.wait_for()
    page.click("Discard them and apply")
    page.page.get_by_text("(blocks)").first.wait_for()
    expect(page.page.get_by_text("idle, iteration 0")).to_have_count(N_METHODS)
    assert page.errors == []


@pytest.mark.parametrize("tab", ["Topics", "Bessel", "Privacy"])
def test_result_and_explanation_tabs_render(page, artifacts_dir, tab):
    plots_before = page.evaluate(COUNT_PLOTS)
    page.tab(tab)  # tabs render when first shown: new plots arrive in the document
    page.wait_until(f"() => ({COUNT_PLOTS})() > {plots_before}")
    page.page.wait_for_timeout(1000)
    page.shot(artifacts_dir, f"tab-{tab.lower()}")
    assert page.errors == []


def test_exports_are_labelled_and_open_offline(browser, page, artifacts_dir, tmp_path):
    page.tab("Export")
    page.page.get_by_text("Figure as PNG").first.wait_for()
    page.page.get_by_text("Everything here is a simulation").first.wait_for()
    # the PNG is drawn on the click: the page says so, and how long it takes (issue 57 MEDIUM 16)
    page.page.get_by_text("draws the figure with matplotlib when you click").first.wait_for()
    with page.page.expect_download() as download_info:
        page.page.get_by_text("Figure as PNG").first.click()
    download = download_info.value
    assert download.suggested_filename == "lpviz_simulation_noise_heatmaps.png"
    saved = tmp_path / download.suggested_filename
    download.save_as(saved)
    assert saved.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and saved.stat().st_size > 5_000
    names = {}
    for label in ("Figure as HTML", "Release only", "Simulation with the truth", "Summary"):
        with page.page.expect_download() as download_info:  # the button's text begins with its label
            page.page.get_by_text(re.compile(rf"^{re.escape(label)}")).first.click()
        names[label] = download_info.value.suggested_filename
        download_info.value.save_as(tmp_path / names[label])
    assert names == {
        "Figure as HTML": "lpviz_simulation_noise_heatmaps.html",
        "Release only": "lpviz_release_simulated.npz",
        "Simulation with the truth": "lpviz_simulation_with_truth.npz",
        "Summary": "lpviz_simulation_summary.json",
    }
    assert json.loads((tmp_path / names["Summary"]).read_text())["simulated"] is True
    page.shot(artifacts_dir, "tab-export")
    render_offline(browser, tmp_path / names["Figure as HTML"], artifacts_dir, "export-offline")
    assert page.errors == []


def render_offline(browser, html, artifacts_dir, name, figures=1):
    """Open ``html`` with every network request refused; it must render its Bokeh figures."""
    context = browser.new_context(viewport={"width": 1200, "height": 900}, offline=True)
    try:
        context.route(re.compile(r"^https?://"), lambda route: route.abort())
        page = context.new_page()
        errors = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(html.as_uri())
        page.wait_for_function(
            f"""() => window.Bokeh && window.Bokeh.documents.length > 0 &&
            window.Bokeh.documents.reduce((n, doc) => n + [...doc.all_models].filter(
                m => m.type === "Figure").length, 0) >= {figures}""",
            timeout=TIMEOUT_MS,
        )
        page.wait_for_timeout(500)
        page.screenshot(path=str(artifacts_dir / f"browser-{name}.png"), full_page=True)
        assert errors == []
    finally:
        context.close()


def test_uploads_say_what_they_are(page, tmp_path, artifacts_dir):
    from lpviz.datasets import make_blocks

    page.choose("upload")
    upload = page.page.locator("input[type=file]")
    noised_table = tmp_path / "noised.csv"
    noised_table.write_text("ann,bob,3\nbob,ann,-2\ncy,ann,4\n")
    upload.set_input_files(str(noised_table))
    page.page.get_by_text("looks like a noised release").first.wait_for()
    alert = page.page.get_by_text("looks like a noised release").first.inner_text()
    assert "noised.csv" in alert and "/tmp" not in alert and "epsilon and N" in alert
    release = make_blocks(n_actors=12, n_communities=3, random_state=3).privatize(epsilon=2.0)
    upload.set_input_files(str(release.save(tmp_path / "release.npz")))
    page.page.get_by_text("a release without its true counts").first.wait_for()
    page.page.get_by_text(re.compile(r"release.npz: 12 x 12 \(blocks\)")).first.wait_for()
    page.shot(artifacts_dir, "upload-release")
    assert page.errors == []


def test_a_huge_request_is_refused_in_its_session_while_another_streams(browser, page, server, artifacts_dir):
    page.long_runs()
    page.click("Start")
    page.wait_until(f"() => ({COUNT_TRACE_POINTS})() >= 3 * 5")
    greedy = Page(browser, server.url)
    try:
        greedy.fill("N docs", 50_000)  # 50,000 x 15 fits: built
        greedy.page.get_by_text(re.compile(r"50,000 x 15 \(topics\)")).first.wait_for()
        greedy.fill("N words", 50_000)  # 50,000 x 50,000 does not: refused before any allocation
        message = greedy.page.get_by_text("largest square that fits").first
        message.wait_for()
        assert "50,000 x 50,000" in message.inner_text() and "shared by" in message.inner_text()
        expect(greedy.page.get_by_label("N words", exact=True)).to_have_value("15")
        greedy.shot(artifacts_dir, "memory-refused")
        streamed = page.evaluate(COUNT_TRACE_POINTS)
        page.wait_until(f"() => ({COUNT_TRACE_POINTS})() > {streamed}")  # the first session never noticed
        assert page.errors == [] and greedy.errors == []
    finally:
        greedy.close()
        page.click("Stop")


def test_closing_the_tab_stops_its_chains_within_a_second(browser, server):
    page = Page(browser, server.url)
    page.long_runs()
    page.click("Start")
    page.statuses("running")
    # the chains keep the server busy: the busiest of three windows. How busy depends on what else
    # the machine runs (the other test worker, other jobs: 0.47 of a core at load 6-10), so the
    # precondition asks only for clearly more than the idle server's housekeeping
    running = max(server.cpu_rate(1.0) for _ in range(3))
    assert running > 0.3, running
    page.close()
    time.sleep(1.0)
    # the quietest of three windows: running chains fill every one, while the server's own
    # housekeeping (discarding earlier tests' closed sessions) comes and goes
    stopped = min(server.cpu_rate(1.5) for _ in range(3))
    assert stopped < min(0.25, running / 2), (running, stopped)


def test_each_preset_loads_and_its_first_points_arrive(page, artifacts_dir):
    """One page through every preset (a page costs 15 s to open on a loaded machine)."""
    from lpviz.dashboard.session.presets import PRESETS

    for name, preset in PRESETS.items():
        page.tab("Data & noise")
        page.page.locator(f"select:has(option:text-is('{name}'))").first.select_option(label=name)
        # its text says what to look at (the first sentence is enough to know it is this preset's)
        page.page.get_by_text(preset.text.split(".")[0], exact=False).first.wait_for()
        page.tab("Fits")
        page.statuses("idle")
        # the new data may still be building (the old traces still shown): the Start waits for them
        page.click("Start")
        expect(page.page.get_by_text(re.compile(r"(running|done), iteration"))).to_have_count(
            N_METHODS, timeout=TIMEOUT_MS
        )
        page.wait_until(f"() => ({COUNT_TRACE_POINTS})() >= {N_METHODS}")  # the new run's, the old ones cleared
        page.click("Stop")
        expect(page.page.get_by_text(re.compile(r"(stopped|done), iteration"))).to_have_count(
            N_METHODS, timeout=TIMEOUT_MS
        )
        page.shot(artifacts_dir, f"preset-{re.sub(r'[^a-z0-9]+', '-', name.lower()).strip('-')}")
    assert page.errors == []
