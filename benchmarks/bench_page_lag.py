"""How long a served page's main thread is blocked while the fits stream (issue 37, item 2).

Serves the dashboard (``python -m lpviz.dashboard.serve`` from ``--repo``, default this checkout: run it once on
another checkout, e.g. main's, for the figures before a change, on the same machine state), opens
``--pages`` pages in Debian's chromium (Playwright), chooses a preset on each (default "Figure 1",
30,000 iterations; ``--n-iter`` cuts them), throttles each page's CPU by ``--throttle`` (CDP
``Emulation.setCPUThrottlingRate``: 4 is a cheap student laptop), starts the fits and samples, until
every fit is done:

- ``setTimeout(0)`` lag: a page script schedules a ``setTimeout(0)`` every ~100 ms and records how
  late it runs (p50 / p95 / max, ms); and ``late``: how late the 100 ms timer that schedules it came,
  plus that lag (p95 / max): a block that starts before a sample is due shows there, not in the first;
- long tasks: the total and the longest of the page's tasks over 50 ms (PerformanceObserver
  ``longtask``);
- click latency: every ``--click-every`` seconds (first page only) Pause is clicked, timed from
  the mouse click (sent at the button's place; the browser's time of the event) until the first frame
  that shows a progress line reading "paus", then Resume likewise until every line reads "running"
  again (the visible effect, through the server); split into the input delay (the event's time to the
  page's click handler) and the rest (server, patch and the frame).

The plain reference, in the same run: the same page, idle (no fits), sampled for ``--idle`` seconds
at the same throttling (the floor of the page and this machine's other load).

    .venv/bin/python benchmarks/bench_page_lag.py --n-iter 6000              # one page, 4x throttled
    .venv/bin/python benchmarks/bench_page_lag.py --pages 6 --throttle 1 --n-iter 6000
    .venv/bin/python benchmarks/bench_page_lag.py --against /work/main --rounds 2 --n-iter 6000  # before, after

Besides: the run's wall time, the time its first page's chains spent paused by the clicks, the chains'
iterations per second of the rest, the server's CPU seconds on its event loop (the main thread) and
on its other threads (chains, view pool) over the run, and chromium's CPU in cores (idle and over the
run: CDP's throttling spins the page's main thread while it holds it back, so at 4x an idle page keeps
most of a core busy, a core this machine's server then lacks; a slow laptop has no such cost).
"""

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]

# Installed before the page's own scripts: the lag sampler and the long-task observer.
SAMPLER = """
(() => {
  const lag = window.__lag = {on: false, lags: [], late: [], longtasks: [], clicks: []};
  const tick = () => {
    const due = performance.now() + 100;
    setTimeout(() => {
      const fired = performance.now();
      setTimeout(() => {
        const now = performance.now();
        if (lag.on) { lag.lags.push(now - fired); lag.late.push(now - due); }
        tick();
      }, 0);
    }, 100);
  };
  tick();
  try {
    new PerformanceObserver(list => {
      if (lag.on) for (const entry of list.getEntries()) lag.longtasks.push(entry.duration);
    }).observe({type: "longtask", buffered: false});
  } catch (error) { lag.noLongtasks = String(error); }
  // when the page got each click (the browser's time of the event) and when it handled it
  document.addEventListener("click", event => lag.clicks.push([event.timeStamp, performance.now()]), true);
})();
"""

# [status, iteration, goal] of each progress line the page holds (what the server last sent).
LINES = """() => {
  const out = [];
  for (const doc of window.Bokeh.documents) for (const m of doc.all_models)
    if (typeof m.text === "string" && m.text.includes(", iteration")) {
      const plain = m.text.replace(/<[^>]*>/g, "").replace(/&lt;[^&]*&gt;/g, "");
      const x = plain.match(/- (\\w+), iteration ([\\d,]+) \\/ ([\\d,]+)/);
      if (x) out.push([x[1], Number(x[2].replace(/,/g, "")), Number(x[3].replace(/,/g, ""))]);
    }
  return out; }"""


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def serve(repo):
    port = free_port()
    python = repo / ".venv" / "bin" / "python"
    env = {**os.environ, "PYTHONPATH": str(repo)}
    log = open(f"/tmp/bench-page-lag-{port}.log", "w")
    process = subprocess.Popen(
        [str(python), "-m", "lpviz.dashboard.serve", "--port", str(port)],
        cwd=repo,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://localhost:{port}/app"
    deadline = time.monotonic() + 300
    while True:
        if process.poll() is not None:
            raise SystemExit(f"the server exited ({process.returncode}): see {log.name}")
        try:
            with urllib.request.urlopen(url, timeout=120) as response:
                if response.status == 200:
                    return process, url
        except OSError:
            if time.monotonic() > deadline:
                process.kill()
                raise SystemExit(f"the server did not answer on {url}") from None
            time.sleep(0.5)


def stat_fields(stat):
    """The fields of a ``/proc/.../stat`` file after the command's name (``state`` first)."""
    return Path(stat).read_text().rsplit(")", 1)[1].split()


def cpu_seconds(fields):
    """utime + stime of :func:`stat_fields`, in seconds."""
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def thread_cpu(pid):
    """``(the main thread's CPU seconds, all other threads')`` of process ``pid`` (the event loop runs on
    the main thread; the chains, the view pool and Tornado's helpers on the others: the process's
    total counts the threads that have ended too)."""
    main = cpu_seconds(stat_fields(f"/proc/{pid}/task/{pid}/stat"))
    return main, cpu_seconds(stat_fields(f"/proc/{pid}/stat")) - main


def browser_cpu(server_pid):
    """CPU seconds of this process's descendants outside the server's session: chromium's processes
    (and Playwright's driver). CDP's CPU throttling stops the page's main thread with a signal whose
    handler spins until it is resumed (chromium's ``DevToolsCPUThrottler``): a throttled page burns
    CPU even while idle, which on this machine the server shares."""
    parent, session, seconds = {}, {}, {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat_fields(stat)
        except OSError:  # ended meanwhile
            continue
        pid = int(stat.parent.name)
        parent[pid], session[pid], seconds[pid] = int(fields[1]), int(fields[3]), cpu_seconds(fields)

    def descends(pid):
        while pid in parent and pid > 1:
            pid = parent[pid]
            if pid == os.getpid():
                return True
        return False

    return sum(cpu for pid, cpu in seconds.items() if session[pid] != server_pid and descends(pid))


def percentile(values, q):
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def open_page(browser, url, throttle):
    context = browser.new_context(viewport={"width": 1500, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(120_000)
    page.add_init_script(SAMPLER)
    page.goto(url)
    page.wait_for_function("() => window.Bokeh && window.Bokeh.documents.length > 0")
    page.get_by_text("Noise changed").first.wait_for()
    if throttle != 1:
        cdp = context.new_cdp_session(page)
        cdp.send("Emulation.setCPUThrottlingRate", {"rate": throttle})
    return context, page


def choose(page, preset, n_iter):
    from lpviz.dashboard.session.presets import PRESETS

    goal = PRESETS[preset].settings["n_iter"]
    page.locator(".bk-tab").get_by_text("Fits", exact=True).click()
    page.locator("select:has(option:text-is('(settings of your own)'))").first.select_option(value=preset)
    idle = "() => {{ const l = ({})(); return l.length > 0 && l.every(x => x[0] === 'idle' && x[2] === {}); }}"
    page.wait_for_function(idle.format(LINES, goal))
    if n_iter:
        page.get_by_text("Fit settings").first.click()
        for label, value in (("Burn in", n_iter // 5), ("N iter", n_iter)):  # the burn-in first: it must fit
            field = page.get_by_label(label, exact=True)
            field.fill(str(value))
            field.press("Enter")
        page.wait_for_function(idle.format(LINES, n_iter))
    time.sleep(2)  # the preset's data drawn


def sample(page):
    return page.evaluate(
        "() => { const l = window.__lag; const out = {lags: l.lags, late: l.late, longtasks: l.longtasks}; "
        "l.lags = []; l.late = []; l.longtasks = []; return out; }"
    )


# Watches the progress lines for a click's effect: when a change of one makes ``predicate`` hold, the
# time of the next animation frame (the frame that shows it: a page busy in a long task shows it after
# that task, and the frame waits as long) is ``window.__effect``.
WATCH_EFFECT = """(predicate_source) => {
  const predicate = eval(predicate_source);
  window.__effect = null;
  let asked = false;
  window.__check_effect = () => {
    if (window.__effect !== null || asked || !predicate()) return;
    asked = true;
    requestAnimationFrame(() => { window.__effect = performance.now(); });
  };
  for (const doc of window.Bokeh.documents)
    for (const model of doc.all_models)
      if (typeof model.text === "string" && model.text.includes(", iteration") && !model.__lpviz_watched) {
        model.__lpviz_watched = true;
        model.properties.text.change.connect(() => window.__check_effect());
      }
}"""


# Resolves once the page has run no long task for 2 s (at most 30 s): a preset's views drawn. A page
# applies the server's messages one frame apart, so the last of a preset's may come after its
# progress lines read "idle".
QUIET = """() => new Promise((resolve) => {
  let last = performance.now();
  new PerformanceObserver(() => { last = performance.now(); }).observe({type: "longtask"});
  const given_up = last + 30000;
  const check = () => {
    const now = performance.now();
    if (now - last > 2000 || now > given_up) resolve();
    else setTimeout(check, 200);
  };
  check();
})"""


def timed_click(page, button, text_script, timeout_s=60):
    """``(seconds from the click (the browser's time of the event) until the first frame that shows
    text_script holding, the page's input delay, seconds from its click handler until that frame)``,
    or None when the run ended (every line "done") first or nothing came within ``timeout_s`` (counted
    apart). A plain mouse click at the button's place, as a user's: no waiting for the page to be still
    first (as Playwright's ``click``). The effect is timed in the page (``WATCH_EFFECT``): a poll of the
    page's state ran only when the page was free, later than the frame that showed the effect."""
    box = page.get_by_role("button", name=button, exact=True).bounding_box()
    page.evaluate(WATCH_EFFECT, text_script)
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    ended = f"({LINES})().every(x => x[0] === 'done')"
    try:
        page.wait_for_function(f"() => window.__effect !== null || {ended}", polling=10, timeout=timeout_s * 1000)
    except Exception:  # Playwright's TimeoutError: no effect
        return None
    effect = page.evaluate("() => window.__effect")
    if effect is None:
        return None
    event, handled = page.evaluate("() => window.__lag.clicks[window.__lag.clicks.length - 1]")
    return (effect - event) / 1000, (handled - event) / 1000, (effect - handled) / 1000


def figures(label, lags, late, longtasks, seconds, clicks=(), missed=0, run=None):
    out = {
        "label": label,
        **(run or {}),
        "seconds": round(seconds, 1),
        "lag_p50_ms": round(percentile(lags, 50), 1),
        "lag_p95_ms": round(percentile(lags, 95), 1),
        "lag_max_ms": round(max(lags, default=float("nan")), 1),
        "late_p95_ms": round(percentile(late, 95), 1),
        "late_max_ms": round(max(late, default=float("nan")), 1),
        "samples": len(lags),
        "longtask_total_ms": round(sum(longtasks)),
        "longtask_share": round(sum(longtasks) / 1000 / seconds, 3) if seconds else None,
        "longtask_max_ms": round(max(longtasks, default=0)),
    }
    if clicks:
        out["click_ms"] = [round(1000 * total) for total, _, _ in clicks]
        out["click_input_delay_ms"] = [round(1000 * delay) for _, delay, _ in clicks]
        out["click_server_and_patch_ms"] = [round(1000 * rest) for _, _, rest in clicks]
        out["click_p50_ms"] = round(1000 * percentile([total for total, _, _ in clicks], 50))
        out["click_max_ms"] = round(1000 * max(total for total, _, _ in clicks))
    if clicks or missed:
        out["clicks_without_effect"] = missed  # the run ended first, or nothing within a minute
    return out


def measure(repo, args):
    """The figures of one server of ``repo``: the idle reference, the run, and (several pages) its worst page."""
    from playwright.sync_api import sync_playwright

    commit = subprocess.run(["git", "-C", str(repo), "log", "-1", "--format=%h %s"], capture_output=True, text=True)
    print(f"serving {repo} ({commit.stdout.strip()[:70]}), load average {os.getloadavg()[0]:.1f}", flush=True)
    process, url = serve(repo)
    results = []
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            pages = [open_page(browser, url, args.throttle) for _ in range(args.pages)]
            for _, page in pages:
                choose(page, args.preset, args.n_iter)
            # the reference: the same pages, idle (once the preset's own drawing is over)
            for _, page in pages:
                page.evaluate(QUIET)
            for _, page in pages:
                page.evaluate("() => { window.__lag.on = true; }")
            browser_before = browser_cpu(process.pid)
            time.sleep(args.idle)
            idle = [sample(page) for _, page in pages]
            browser_idle = browser_cpu(process.pid) - browser_before
            results.append(
                figures(
                    "reference: idle page(s)",
                    [x for s in idle for x in s["lags"]],
                    [x for s in idle for x in s["late"]],
                    [x for s in idle for x in s["longtasks"]],
                    args.idle * len(pages),
                    run={"browser_cores": round(browser_idle / args.idle, 2)},
                )
            )
            load = os.getloadavg()[0]
            cpu_before, browser_before = thread_cpu(process.pid), browser_cpu(process.pid)
            started = time.monotonic()
            for _, page in pages:
                page.get_by_role("button", name="Start", exact=True).click()
            first = pages[0][1]
            clicks, collected = [], [{"lags": [], "late": [], "longtasks": []} for _ in pages]
            next_click = time.monotonic() + args.click_every
            paused_seconds = 0.0  # from each Pause click to its Resume's effect (the chains wait meanwhile)
            goal = 0
            while True:
                lines = [page.evaluate(f"({LINES})") for _, page in pages]
                goal = sum(x[2] for page_lines in lines for x in page_lines)
                if all(page_lines and all(x[0] == "done" for x in page_lines) for page_lines in lines):
                    break
                # Pause and Resume while every chain of the first page runs (a chain done meanwhile would be
                # extended by Resume: a run that never ends)
                if time.monotonic() >= next_click and lines[0] and all(x[0] == "running" for x in lines[0]):
                    clicked = time.monotonic()
                    paused = timed_click(first, "Pause", f"() => ({LINES})().some(x => x[0].startsWith('paus'))")
                    clicks.append(paused)
                    if paused is not None:
                        time.sleep(0.5)
                        resumed = f"() => ({LINES})().every(x => ['running', 'done'].includes(x[0]))"
                        clicks.append(timed_click(first, "Resume", resumed))
                    paused_seconds += time.monotonic() - clicked
                    next_click = time.monotonic() + args.click_every
                for (_, page), into in zip(pages, collected, strict=True):
                    part = sample(page)
                    for key in into:
                        into[key] += part[key]
                time.sleep(1.0)
            seconds = time.monotonic() - started
            cpu_after = thread_cpu(process.pid)
            run = {
                "repo": str(repo),
                "load_average": round(load, 1),
                "run_seconds": round(seconds, 1),
                "paused_seconds": round(paused_seconds, 1),
                # every chain's iterations over the time they were let run (the run less its pauses)
                "iterations_per_second": round(goal / max(seconds - paused_seconds, 1e-9), 1),
                "server_loop_cpu_s": round(cpu_after[0] - cpu_before[0], 1),
                "server_other_threads_cpu_s": round(cpu_after[1] - cpu_before[1], 1),
                # chromium's CPU over the run, in cores (see browser_cpu: at 4x, most of a core while idle)
                "browser_cores": round((browser_cpu(process.pid) - browser_before) / seconds, 2),
            }
            results.append(
                figures(
                    f"run: {args.pages} page(s), {args.preset}" + (f", {args.n_iter:,} it" if args.n_iter else ""),
                    [x for c in collected for x in c["lags"]],
                    [x for c in collected for x in c["late"]],
                    [x for c in collected for x in c["longtasks"]],
                    seconds * len(pages),
                    [click for click in clicks if click is not None],
                    missed=sum(click is None for click in clicks),
                    run=run,
                )
            )
            if args.pages > 1:
                for number, page_figures in enumerate(collected, start=1):
                    results.append(
                        figures(
                            f"run: page {number}",
                            page_figures["lags"],
                            page_figures["late"],
                            page_figures["longtasks"],
                            seconds,
                        )
                    )
            browser.close()
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)
    return results


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", type=Path, default=REPO, help="the checkout to serve (default: this one)")
    parser.add_argument(
        "--against", type=Path, help="another checkout (e.g. main's) served alternately with --repo, in the same run"
    )
    parser.add_argument("--rounds", type=int, default=1, help="how many times each checkout is measured (default 1)")
    parser.add_argument("--pages", type=int, default=1, help="pages open at once (default 1)")
    parser.add_argument("--throttle", type=float, default=4, help="CPU throttling rate of each page (default 4)")
    parser.add_argument("--preset", default="Figure 1")
    parser.add_argument("--n-iter", type=int, default=0, help="iterations instead of the preset's")
    parser.add_argument("--click-every", type=float, default=10.0, help="seconds between Pause/Resume clicks")
    parser.add_argument("--idle", type=float, default=10.0, help="seconds of the idle reference")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument(
        "--tiny", action="store_true", help="300 iterations, a click every 2 s, 2 s idle (the test suite's run)"
    )
    args = parser.parse_args(argv)
    if args.tiny:
        args.n_iter, args.click_every, args.idle = 300, 2.0, 2.0
    repos = [args.against.resolve(), args.repo.resolve()] if args.against else [args.repo.resolve()]
    results = []
    for _ in range(args.rounds):
        for repo in repos:  # interleaved: each checkout sees the machine's load of its turn
            rows = measure(repo, args)
            for row in rows:
                print(json.dumps(row), flush=True)
            results += rows
    print(f"throttle {args.throttle:g}x, {args.pages} page(s); the machine is shared: timings are noisy")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
