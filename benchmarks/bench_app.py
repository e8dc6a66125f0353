"""Dashboard speed and memory: the session objects exactly as the served app uses them.

Prints, for the Figure 3 data (90 x 15, K=3) and for Enron topics
(1000 emails x 1000 words, K=10, the dashboard's Enron default):

1. in-process: latency from Start to the first streamed trace row (drained
   every 10 ms, so the figure is the worker's; the app drains every 20 ms
   right after Start), iterations per second of each chain with all running
   against the plain reference of the same chain stepped alone in the main
   thread and of the bare chains in one thread each, pause latency (Pause to
   every worker's acknowledgement, all rows handed over) and stop latency
   (Stop to every worker gone);
2. resident memory over a long run with the bounded buffers (Figure 3);
3. the served app in Debian's chromium: Start click -> first point in the
   browser's plot data, it/s shown by the page, and Pause click -> the last
   point arriving in the browser (the count polled every 20 ms until it has
   not changed for 1.5 s), with the iterations run after the click.

``--app-dir DIR`` serves another checkout's ``lpviz/dashboard/app.py`` (with that
checkout's lpviz) for section 3; given more than once, each checkout is served
in turn in the same run and the it/s are printed side by side (e.g. this
checkout and the pre-engine app, commit 582240d, whose chain loop was its own:
``git worktree add /tmp/old 582240d``; it runs on this venv).

    .venv/bin/python benchmarks/bench_app.py [--seconds 15] [--memory-seconds 60] [--served-seconds 30]
    .venv/bin/python benchmarks/bench_app.py --tiny --served-seconds 0   # sections 1-2, Figure 3, 1 s runs

``--tiny``: Figure 3 alone, 1 s throughput runs, a 2 s memory run and a 4 s served run (the test
suite's; ``--served-seconds 0`` leaves the browser out).
"""

import argparse
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from lpviz.dashboard.session.datastore import DataStore  # noqa: E402
from lpviz.dashboard.session.fits import Fits, warm_up_kernels  # noqa: E402
from lpviz.dashboard.session.settings import DEFAULT_ENRON, Settings  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
N_ITER_LONG = 2_000_000
# Enron's factors are 160 KB a sample: 2,000,000 iterations would save more than a session may
# hold (the dashboard refuses them at Start), and a run here is a minute at most anyway.
N_ITER_LONG_ENRON = 50_000


def long_run(source):
    """Iterations of a run that does not end during a measurement."""
    return N_ITER_LONG if source == "synthetic-topics" else N_ITER_LONG_ENRON


TRACE_POINTS_JS = """
() => {
  let total = 0;
  for (const doc of window.Bokeh.documents)
    for (const model of doc.all_models) {
      if (model.type !== "ColumnDataSource" && model.constructor.name !== "ColumnDataSource") continue;
      const data = model.data instanceof Map ? Object.fromEntries(model.data) : model.data;
      if (data && data.iteration !== undefined) total += data.iteration.length;
    }
  return total;
}
"""
CASES = {
    "figure3": dict(source="synthetic-topics"),
    "enron": dict(source="enron-topics", path=str(DEFAULT_ENRON), n_docs=1000, n_words=1000, n_components=10),
}


def rss_mb(pid="self"):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def thread_cpu_seconds(pid):
    """CPU seconds of the event loop (the main thread) and of every other thread of ``pid``
    together (the chains' workers and the kernels' pool; Python does not name OS threads)."""
    ticks = os.sysconf("SC_CLK_TCK")
    seconds = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue
        name = "event loop" if task.name == str(pid) else "other threads"
        fields = stat[stat.rindex(")") + 2 :].split()
        seconds[name] = seconds.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / ticks
    return seconds


def browser_cpu_seconds():
    """CPU seconds of every chromium process on the machine (the browser competes with the
    server for the same cores here; a user's browser runs on the user's machine)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if "chrom" in stat[stat.index("(") + 1 : stat.rindex(")")].lower():
            fields = stat[stat.rindex(")") + 2 :].split()
            total += (int(fields[11]) + int(fields[12])) / ticks
    return total


def session(case):
    settings = Settings(noise_seed=0)
    data = DataStore(settings)
    settings.param.update(**CASES[case])  # the source's defaults first, then the case's sizes
    if data.error:
        raise SystemExit(f"{case}: {data.error}")
    return Fits(data)


def drain_until(fits, condition, period=0.01, timeout=600):
    start = time.perf_counter()
    while not condition():
        if time.perf_counter() - start > timeout:
            raise TimeoutError({n: (r.status, r.iteration, r.error) for n, r in fits.runners.items()})
        time.sleep(period)
        fits.drain()
    return time.perf_counter() - start


def first_row_seconds(fits):
    fits.settings.param.update(n_iter=long_run(fits.settings.source), burn_in=1000)
    start = time.perf_counter()
    fits.start()
    drain_until(fits, lambda: any(len(r.buffer.data) for r in fits.runners.values()))
    latency = time.perf_counter() - start
    fits.reset()
    return latency


def run_all(fits, seconds):
    """All chains for ``seconds``, drained like the app; (it/s per chain, pause latency, stop latency)."""
    fits.settings.param.update(n_iter=long_run(fits.settings.source), burn_in=100)
    fits.start()
    drain_until(fits, lambda: all(r.iteration > 0 for r in fits.runners.values()), period=0.2)
    begin = {m: r.iteration for m, r in fits.runners.items()}
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        time.sleep(0.2)
        fits.drain()
    elapsed = time.perf_counter() - start
    fits.drain()
    rates = {m: (r.iteration - begin[m]) / elapsed for m, r in fits.runners.items()}
    clicked = time.perf_counter()
    fits.pause()
    pause = drain_until(fits, lambda: all(r.status == "paused" for r in fits.runners.values()), period=0.005)
    fits.resume()
    time.sleep(1.0)
    stopped = time.perf_counter()
    fits.stop()
    for runner in fits.runners.values():
        runner.join(timeout=30)
    stop = time.perf_counter() - stopped
    del clicked
    fits.reset()
    return rates, pause, stop


def bare_chain_rate(problem, name, seconds, out=None, n_iter=N_ITER_LONG):
    """The same chain as the app's, stepped by the library alone (no runner, no scoring), for
    ``seconds`` or until its ``n_iter`` iterations end; iterations per second of those it ran.

    ``n_iter`` is the app's run (:func:`long_run`): a chain faster than ``n_iter / seconds`` ends
    before the time is up (Figure 3's naive and non-private chains run 50,000 iterations in 5 s),
    and the rate is then that of every iteration the run had."""
    from lpviz import methods
    from lpviz.engine import run

    method = methods.create(name)
    chain_run = iter(
        run(
            problem.release,
            model=problem.model,
            method=method,
            n_components=problem.n_components,
            n_iter=n_iter,
            burn_in=100,
            thin=25,
            truth=problem.truth if method.uses_truth else None,
            random_state=0,
        )
    )
    next(chain_run)  # the chain's build and first iteration (compilation, allocation) are not timed
    count, start = 0, time.perf_counter()
    for _ in chain_run:
        count += 1
        if time.perf_counter() - start >= seconds:
            break
    rate = count / (time.perf_counter() - start)
    if out is not None:
        out[name] = rate
    return rate


def bare_threads(problem, names, seconds, n_iter=N_ITER_LONG):
    rates = {}
    threads = [threading.Thread(target=bare_chain_rate, args=(problem, m, seconds, rates, n_iter)) for m in names]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return rates


def memory_run(fits, seconds, sample_every=5.0):
    fits.settings.param.update(n_iter=long_run(fits.settings.source), burn_in=1000)
    fits.start()
    samples, start, next_sample = [], time.perf_counter(), 0.0
    while (now := time.perf_counter() - start) < seconds:
        time.sleep(0.2)
        fits.drain()
        if now >= next_sample:
            samples.append(
                (
                    now,
                    rss_mb(),
                    sum(len(r.buffer.data) for r in fits.runners.values()),
                    sum(r.iteration for r in fits.runners.values()),
                )
            )
            next_sample += sample_every
    fits.reset()
    return np.array(samples)


def in_process(case, seconds):
    fits = session(case)
    problem = fits.problem()
    names = list(fits.runners)
    shape = problem.release.shape
    print(f"\n== {case}: {shape[0]:,} x {shape[1]:,}, K={problem.n_components}, in-process")
    cold = first_row_seconds(fits)
    warm = np.median([first_row_seconds(fits) for _ in range(3)])
    print(f"   Start -> first streamed row: cold {cold:.3f} s, warm (median of 3) {warm:.3f} s")
    n_iter = long_run(fits.settings.source)  # the app's run (run_all), so the bare chains save alike
    reference = {m: bare_chain_rate(problem, m, seconds / 2, n_iter=n_iter) for m in names}
    threaded = bare_threads(problem, names, seconds, n_iter)
    app, pause, stop = run_all(fits, seconds)
    print(f"   {'method':<11} {'bare, alone':>12} {'bare, threads':>14} {'app runners':>12}")
    for m in names:
        print(f"   {m:<11} {reference[m]:>12,.1f} {threaded[m]:>14,.1f} {app[m]:>12,.1f}")
    print(
        f"   slowest chain in the app: {min(app.values()):,.1f} it/s; pause (click -> every worker "
        f"acknowledged, rows handed over) {pause * 1000:.0f} ms; stop (click -> every worker gone) "
        f"{stop * 1000:.0f} ms"
    )
    fits.close()
    return fits


def served_run(case, seconds, app_dir):
    """Start the chains in the served app from chromium; (first point s, it/s, pause s, its after pause, RSS)."""
    from playwright.sync_api import sync_playwright

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = dict(os.environ, PYTHONPATH=str(app_dir))
    command = (
        [sys.executable, "-m", "lpviz.dashboard.serve", "--port", str(port)]
        if (app_dir / "app" / "serve.py").exists()
        else [
            sys.executable,
            "-m",
            "panel",
            "serve",
            str(app_dir / "app" / "app.py"),
            "--port",
            str(port),
            "--address",
            "127.0.0.1",
            "--allow-websocket-origin",
            f"127.0.0.1:{port}",
        ]
    )
    server = subprocess.Popen(
        command, cwd=app_dir, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}/app"
    try:
        for _ in range(480):
            try:
                # up to 60 s: under load a first render takes longer, and each abandoned request still builds a
                # session the server must finish before it answers the next (see tests/browser_harness.py)
                urllib.request.urlopen(url, timeout=60).close()
                break
            except OSError:
                time.sleep(0.5)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1500, "height": 1000})
            page.set_default_timeout(600_000)
            page.goto(url)
            page.get_by_text("Noise changed").first.wait_for()
            if CASES[case]["source"] != "synthetic-topics":
                # the data selector: the one offering an Enron source (the presets have their own)
                select = page.locator("select:has(option:has-text('Enron'))").last
                labels = select.locator("option").all_inner_texts()
                label = next(
                    (text for text in labels if "Enron" in text and ("words" in text or "topics" in text)), None
                )
                select.select_option(label=label) if label else select.select_option(CASES[case]["source"])
                page.get_by_text(re.compile(r"1,000 x 1,000")).first.wait_for()
            page.get_by_text("Fit settings").first.click()
            field = page.get_by_label("N iter", exact=True)
            field.fill(str(long_run(CASES[case]["source"])))
            field.press("Enter")
            page.locator(".bk-tab").get_by_text("Fits", exact=True).click()
            page.get_by_text(f"/ {long_run(CASES[case]['source']):,}").first.wait_for()
            page.wait_for_timeout(5000)  # the session's kernel warm-up
            # timed inside the page: from the click to the first point in the plot data
            button = page.get_by_role("button", name="Start").element_handle()
            latency = page.evaluate(
                f"""async (button) => {{
                const count = {TRACE_POINTS_JS};
                const start = performance.now();
                button.click();
                while (count() === 0) await new Promise(resolve => setTimeout(resolve, 5));
                return (performance.now() - start) / 1000;
            }}""",
                button,
            )

            def iterations(page=page):
                lines = page.get_by_text(re.compile(r"iteration [\d,]+ / ")).all_inner_texts()
                return [int(re.search(r"iteration ([\d,]+) /", line).group(1).replace(",", "")) for line in lines]

            samples, begin, cpu_before = [], time.perf_counter(), thread_cpu_seconds(server.pid)
            browser_before, first_iterations = browser_cpu_seconds(), iterations()
            while (now := time.perf_counter() - begin) < seconds:
                page.wait_for_timeout(2000)
                samples.append((now, rss_mb(server.pid), page.evaluate(TRACE_POINTS_JS)))
            cpu_after, wall = thread_cpu_seconds(server.pid), time.perf_counter() - begin
            cpu = {name: (cpu_after[name] - cpu_before.get(name, 0.0)) / wall for name in cpu_after}
            cpu["chromium (all its processes)"] = (browser_cpu_seconds() - browser_before) / wall
            lines = page.get_by_text(re.compile(r"iteration [\d,]+ / [\d,]+, [\d,.]+ it/s")).all_inner_texts()
            rates = [float(re.search(r"([\d,.]+) it/s", line).group(1).replace(",", "")) for line in lines]
            at_click = iterations()
            # the page's iteration counts over the whole run (its it/s reads the last second or so)
            averages = [
                (b - a) / (time.perf_counter() - begin) for a, b in zip(first_iterations, at_click, strict=True)
            ]
            pause = page.get_by_role("button", name="Pause").element_handle()
            pause_latency = page.evaluate(
                f"""async (button) => {{
                const count = {TRACE_POINTS_JS};
                const start = performance.now();
                button.click();
                let last = count(), changed = performance.now();
                while (performance.now() - changed < 1500) {{
                    await new Promise(resolve => setTimeout(resolve, 20));
                    const now = count();
                    if (now !== last) {{ last = now; changed = performance.now(); }}
                }}
                return (changed - start) / 1000;
            }}""",
                pause,
            )
            after = [b - a for a, b in zip(at_click, iterations(), strict=True)]
            browser.close()
        return latency, (rates, averages), pause_latency, after, np.array(samples), cpu
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=15.0, help="length of each throughput run")
    parser.add_argument("--memory-seconds", type=float, default=60.0, help="length of the memory run (0: skip)")
    parser.add_argument("--served-seconds", type=float, default=30.0, help="length of the served runs (0: skip)")
    parser.add_argument("--cases", default="figure3,enron", help="comma-separated: figure3, enron")
    parser.add_argument(
        "--app-dir",
        type=Path,
        action="append",
        default=None,
        help="checkout whose lpviz/dashboard/app.py is served (repeatable)",
    )
    parser.add_argument("--served-only", action="store_true", help="only section 3")
    parser.add_argument("--tiny", action="store_true", help="Figure 3 alone, runs of seconds (the test suite's)")
    args = parser.parse_args()
    if args.tiny:
        args.cases, args.seconds, args.memory_seconds = "figure3", 1.0, 2.0
        args.served_seconds = min(args.served_seconds, 4.0)
    cases = [case for case in args.cases.split(",") if case]

    if not args.served_only:
        start = time.perf_counter()
        warm_up_kernels()
        print(f"kernel warm-up a session runs when it opens: {time.perf_counter() - start:.2f} s")
        for case in cases:
            in_process(case, args.seconds)
        if args.memory_seconds > 0:
            print(f"\n== figure3: memory over a {args.memory_seconds:.0f} s run (buffers bounded at 2,000 rows)")
            fits = session("figure3")
            samples = memory_run(fits, args.memory_seconds, sample_every=min(5.0, args.memory_seconds / 6))
            for t, rss, rows, iterations in samples[:: max(1, len(samples) // 6)]:
                print(
                    f"   t={t:6.1f} s  RSS {rss:7.1f} MB  buffered rows {int(rows):>6,}  "
                    f"iterations {int(iterations):>9,}"
                )
            half = samples[len(samples) // 2 :]
            slope = np.polyfit(half[:, 0], half[:, 1], 1)[0] * 60 if len(half) > 2 else float("nan")
            print(f"   RSS slope over the second half: {slope:+.2f} MB/min")
            fits.close()

    if args.served_seconds <= 0 or not Path(CHROMIUM).exists():
        print("\nserved app: skipped (--served-seconds 0 or no /usr/bin/chromium; `make browser`)")
        return
    app_dirs = args.app_dir or [REPO]
    summary = []
    for case in cases:
        for app_dir in app_dirs:
            averages, cpu = served_case(case, args.served_seconds, app_dir)
            summary.append((case, app_dir, averages, cpu))
    if len(app_dirs) > 1:
        print(
            "\n== served, same session: it/s per chain over the whole run (the page's iteration counts), and "
            "iterations of all chains per CPU second of the server's threads (what a loaded machine leaves "
            "comparable: each server gets another share of the cores)"
        )
        for case, app_dir, averages, cpu in summary:
            server_cpu = sum(share for name, share in cpu.items() if not name.startswith("chromium"))
            print(
                f"   {case:<8} {str(app_dir):<40} it/s {', '.join(f'{r:,.0f}' for r in averages):<22} "
                f"server CPU {server_cpu:4.2f}   {sum(averages) / max(server_cpu, 1e-9):8,.0f} it per CPU-s"
            )


def served_case(case, seconds, app_dir):
    """Section 3 for one case and checkout; returns the it/s per chain over the whole run."""
    print(f"\n== {case}: served app ({app_dir}) in chromium, {seconds:.0f} s run")
    latency, rates, pause, after, samples, cpu = served_run(case, seconds, app_dir.resolve())
    print(f"   Start click -> first point in the browser: {latency:.2f} s")
    rates, averages = rates
    print(
        f"   it/s shown by the page after the run: {', '.join(f'{r:,.0f}' for r in rates)}; "
        f"over the whole run (the page's iteration counts): {', '.join(f'{r:,.0f}' for r in averages)}"
    )
    print(
        f"   Pause click -> last point in the browser: {pause:.2f} s; iterations run after the click: "
        f"{', '.join(f'{n:,}' for n in after)}"
    )
    print(
        f"   server RSS: {samples[0, 1]:.0f} -> {samples[-1, 1]:.0f} MB; points in the browser {int(samples[-1, 2]):,}"
    )
    print(
        "   CPU seconds per second of the run (server threads; the browser): "
        + ", ".join(f"{name} {share:.2f}" for name, share in sorted(cpu.items()) if share >= 0.01)
    )
    return averages, cpu


if __name__ == "__main__":
    main()
