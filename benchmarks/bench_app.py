"""Dashboard speed and memory: the store and runners exactly as the served app uses them.

Prints
1. latency from Start to the first streamed trace row (cold: the first chain
   of a process; warm: after the session's kernel warm-up), drained every
   10 ms so the figure is the worker's; the app drains every 200 ms, which
   adds at most that much;
2. iterations per second of each chain with all three running on the
   Figure 3 data (target >= 1,000 per chain), against the plain reference of
   one bare ``Chain.step()`` loop in the main thread, and of the three bare
   chains in three threads without the runner; the app keeps its chains in
   lockstep (the slowest gets the CPU the others would spend running ahead),
   the last column shows the runners without it;
3. resident memory over a long run with the app's bounded buffers
   (2,000 rows each), sampled every few seconds, with the slope of a line fitted
   to the second half (flat memory: about 0 MB/min);
4. the same in the served app, in Debian's chromium (skipped without it):
   click Start, time until the first point is in the browser's trace data,
   read each chain's it/s from the page, and sample the server's memory.

    .venv/bin/python benchmarks/bench_app.py [--seconds 20] [--memory-seconds 120] [--served-seconds 60]
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.fits_view import METHOD_LABELS  # noqa: E402
from app.runner import METHODS, warm_up_kernels  # noqa: E402
from app.store import DataStore  # noqa: E402


REPO = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
N_ITER_SERVED = 2_000_000  # about ten minutes of the slowest chain
TRACE_POINTS_JS = """
() => {
  let total = 0;
  for (const doc of window.Bokeh.documents)
    for (const model of doc.all_models) {
      if (model.type !== "ColumnDataSource" && model.constructor.name !== "ColumnDataSource") continue;
      const data = model.data instanceof Map ? Object.fromEntries(model.data) : model.data;
      if (data && data.mae !== undefined && data.iteration !== undefined) total += data.iteration.length;
    }
  return total;
}
"""


def rss_mb(pid="self"):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def first_point_seconds(store):
    start = time.perf_counter()
    store.start()
    while not any(len(r.buffer.data) for r in store.runners.values()):
        time.sleep(0.01)
        store.drain()
    latency = time.perf_counter() - start
    store.reset()
    return latency


def run_all(store, seconds, period=0.2):
    """All three chains for ``seconds``, drained like the app; iterations/s per chain."""
    store.param.update(n_iter=N_ITER_SERVED)
    store.start()
    while not all(r.iteration > 0 for r in store.runners.values()):
        time.sleep(period)
        store.drain()
    begin = {m: r.iteration for m, r in store.runners.items()}
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        time.sleep(period)
        store.drain()
    elapsed = time.perf_counter() - start
    rates = {m: (r.iteration - begin[m]) / elapsed for m, r in store.runners.items()}
    store.reset()
    return rates


def bare_chain_rate(problem, method, seconds, out=None):
    from lpviz.inference import Chain

    chain = Chain(problem.chain_input(method), model=problem.model, method=method,
                  n_components=problem.n_components, alpha=problem.alpha if method == "private" else None,
                  random_state=0)
    chain.step()
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        chain.step()
        count += 1
    rate = count / (time.perf_counter() - start)
    if out is not None:
        out[method] = rate
    return rate


def bare_three_threads(problem, seconds):
    rates = {}
    threads = [threading.Thread(target=bare_chain_rate, args=(problem, m, seconds, rates)) for m in METHODS]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return rates


def memory_run(store, seconds, sample_every=5.0):
    store.param.update(n_iter=N_ITER_SERVED)
    store.start()
    samples, start, next_sample = [], time.perf_counter(), 0.0
    while (now := time.perf_counter() - start) < seconds:
        time.sleep(0.2)
        store.drain()
        if now >= next_sample:
            samples.append((now, rss_mb(), sum(len(r.buffer.data) for r in store.runners.values()),
                            sum(r.iteration for r in store.runners.values())))
            next_sample += sample_every
    store.reset()
    return np.array(samples)


def served_run(seconds):
    """Start the three chains in the served app from chromium; latency, it/s, server memory."""
    from playwright.sync_api import sync_playwright

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "panel", "serve", str(REPO / "app" / "app.py"),
                               "--port", str(port), "--allow-websocket-origin", f"localhost:{port}"],
                              cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    url = f"http://localhost:{port}/app"
    try:
        for _ in range(240):
            try:
                urllib.request.urlopen(url, timeout=5).close()
                break
            except OSError:
                time.sleep(0.5)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1500, "height": 1000})
            page.set_default_timeout(120_000)
            page.goto(url)
            page.get_by_text("Noise changed").first.wait_for()
            page.get_by_text("Fit settings").first.click()
            field = page.get_by_label("N iter", exact=True)
            field.fill(str(N_ITER_SERVED))
            field.press("Enter")
            page.get_by_text("Fits", exact=True).first.click()
            page.get_by_text(f"/ {N_ITER_SERVED:,}").first.wait_for()
            page.wait_for_timeout(3000)  # the session's kernel warm-up
            # timed inside the page: from the click to the first point in the plot data
            button = page.get_by_role("button", name="Start").element_handle()
            latency = page.evaluate(f"""async (button) => {{
                const count = {TRACE_POINTS_JS};
                const start = performance.now();
                button.click();
                while (count() === 0) await new Promise(resolve => setTimeout(resolve, 5));
                return (performance.now() - start) / 1000;
            }}""", button)
            samples, begin = [], time.perf_counter()
            while (now := time.perf_counter() - begin) < seconds:
                page.wait_for_timeout(2000)
                samples.append((now, rss_mb(server.pid), page.evaluate(TRACE_POINTS_JS)))
            rates = {}
            for method in METHODS:
                line = page.get_by_text(re.compile(re.escape(METHOD_LABELS[method]) + ".*it/s")).first.inner_text()
                rates[method] = float(re.search(r"([\d,]+) it/s", line).group(1).replace(",", ""))
            browser.close()
        return latency, rates, np.array(samples)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=20.0, help="length of each throughput run")
    parser.add_argument("--memory-seconds", type=float, default=120.0, help="length of the memory run")
    parser.add_argument("--served-seconds", type=float, default=60.0,
                        help="length of the run in the served app (0: skip)")
    args = parser.parse_args()

    print("lpviz dashboard benchmark (Figure 3 data: 90 x 15, K=3, eps=1, N=1)")
    store = DataStore()
    cold = first_point_seconds(store)
    start = time.perf_counter()
    warm_up_kernels()
    warm_up = time.perf_counter() - start
    warm = np.median([first_point_seconds(store) for _ in range(5)])
    print("\n1. Start -> first streamed row")
    print(f"   cold (first chains of the process): {cold:.3f} s")
    print(f"   kernel warm-up a session runs when it opens: {warm_up:.3f} s")
    print(f"   warm (median of 5): {warm:.3f} s   target < 1 s "
          f"(+ up to 0.2 s until the app's next drain) -> {'OK' if warm + 0.2 < 1 else 'MISSED'}")

    print(f"\n2. Iterations per second per chain, {args.seconds:.0f} s each")
    problem = store.problem()
    reference = {m: bare_chain_rate(problem, m, args.seconds / 2) for m in METHODS}
    threaded = bare_three_threads(problem, args.seconds)
    app = run_all(store, args.seconds)
    free_store = DataStore(lockstep=False)
    free = run_all(free_store, args.seconds)
    free_store.close()
    print(f"   {'method':<11} {'bare, alone':>12} {'bare, 3 threads':>16} {'app, 3 runners':>15} "
          f"{'app, no lockstep':>17}")
    for m in METHODS:
        print(f"   {m:<11} {reference[m]:>12,.0f} {threaded[m]:>16,.0f} {app[m]:>15,.0f} {free[m]:>17,.0f}")
    slowest = min(app.values())
    print(f"   slowest chain in the app: {slowest:,.0f} it/s  target >= 1,000 -> "
          f"{'OK' if slowest >= 1000 else 'MISSED'}; runner overhead vs bare threads: "
          f"{100 * (1 - sum(app.values()) / sum(threaded.values())):+.0f}%")

    print(f"\n3. Memory over a {args.memory_seconds:.0f} s run (buffers bounded at 2,000 rows each)")
    samples = memory_run(store, args.memory_seconds)
    for t, rss, rows, iterations in samples[:: max(1, len(samples) // 8)]:
        print(f"   t={t:6.1f} s  RSS {rss:7.1f} MB  buffered rows {int(rows):>6,}  iterations {int(iterations):>9,}")
    second_half = samples[len(samples) // 2:]
    slope = np.polyfit(second_half[:, 0], second_half[:, 1], 1)[0] * 60 if len(second_half) > 2 else float("nan")
    print(f"   RSS slope over the second half: {slope:+.2f} MB/min "
          f"(bounded buffers full: {int(samples[-1, 2]):,} rows)")
    store.close()

    if args.served_seconds <= 0 or not Path(CHROMIUM).exists():
        print("\n4. Served app: skipped (--served-seconds 0 or no /usr/bin/chromium; `make browser`)")
        return
    print(f"\n4. Served app in chromium, {args.served_seconds:.0f} s run")
    latency, rates, samples = served_run(args.served_seconds)
    print(f"   Start click -> first point in the browser's trace data: {latency:.3f} s  target < 1 s -> "
          f"{'OK' if latency < 1 else 'MISSED'}")
    print("   it/s shown by the app after the run: "
          + ", ".join(f"{m} {r:,.0f}" for m, r in rates.items())
          + f"  target >= 1,000 each -> {'OK' if min(rates.values()) >= 1000 else 'MISSED'}")
    for t, rss, points in samples[:: max(1, len(samples) // 6)]:
        print(f"   t={t:6.1f} s  server RSS {rss:7.1f} MB  points in the browser {int(points):>7,}")
    half = samples[len(samples) // 2:]
    slope = np.polyfit(half[:, 0], half[:, 1], 1)[0] * 60 if len(half) > 2 else float("nan")
    print(f"   server RSS slope over the second half: {slope:+.2f} MB/min")


if __name__ == "__main__":
    main()
