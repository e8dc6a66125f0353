"""How fast SIGTERM (and Ctrl-C) ends ``lpviz fit`` mid-sweep, for every sampler (issue 38); with
``--page``, how fast Stop and Reset answer on the served dashboard at every point of a run (issue 37).

    .venv/bin/python benchmarks/bench_stop.py [--rows 64] [--cols 400] [--signal TERM] [--src TREE]
    .venv/bin/python benchmarks/bench_stop.py --page [--reference TREE] [--repeats 1]
    .venv/bin/python benchmarks/bench_stop.py --tiny     # 8 x 50 cells, the signal 0.2 s in, 3 samplers: seconds

``--page``: ``python -m lpviz.dashboard.serve`` of this checkout (and of ``--reference``, e.g. an export of main, in
the same run: the plain reference) and one chromium page on it (Playwright, as tests/test_browser_runs.py
drives it). Figure 4 (reduced size) is run and stopped at its start (iteration 1), in the middle
(iteration 200 of 400), in its last iterations (the slowest chain at 375; the others, 20 ahead at
most, at their end) and during its end-of-run work (every chain at 400, one still "running": its
final snapshot's score); after each Stop, Reset. Then Reset alone, clicked while the chains run (at
the first three points): the seconds until every line reads idle, and until the trace plots are
empty too (the status answers first; the traces and results are cleared after it). A latency is the
page's own time from the click until every progress line reads stopped (or done) / idle. The load
average beside each row says how busy the shared machine was.

For each sampler (private collapsed, private Bessel, private VI, naive, non-private) a fit runs in
a fresh process on two data sets of the same shape: the worst case lpviz accepts (every count at
``lpviz.release.MAX_COUNT`` = 10**12, noise level alpha = 0.999999, where one cell costs
milliseconds and one sweep tens of seconds), and a plain reference (Poisson(5) counts noised at
alpha = 0.5). The signal goes out a moment after the first sweep has started; the table gives
the seconds from the signal to the process's exit, its exit code and last line, and the seconds
of the first sweep when it finished before the signal. ``--src`` runs the lpviz of another
checkout (e.g. main, for a before figure; kernels there had no stop inside a sweep).

Timings are wall-clock on a shared machine: other work on it shows up as noise.
"""

import argparse
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]

SAMPLERS = {
    "private collapsed": ["--already-noised", "--sampler", "collapsed"],
    "private bessel": ["--already-noised", "--sampler", "bessel"],
    "private vi": ["--already-noised", "--inference", "vi"],
    "naive": ["--already-noised", "--method", "naive"],
    "nonprivate": ["--method", "nonprivate", "--seed", "0"],
}

# The child: lpviz's CLI, with a line on stderr as the first sweep starts and one as it ends.
_CHILD = r"""
import sys, time
sys.path.insert(0, sys.argv[1])
from lpviz import engine, vi

def marked(advance):
    def wrapper(self):
        first = not getattr(self, "_bench_marked", False)
        if first:
            self._bench_marked = True
            start = time.perf_counter()
            print("@@sweep", flush=True, file=sys.stderr)
        result = advance(self)
        if first:
            print(f"@@swept {time.perf_counter() - start:.3f}", flush=True, file=sys.stderr)
        return result
    return wrapper

engine.Chain._advance = marked(engine.Chain._advance)
vi.VariationalFit._advance = marked(vi.VariationalFit._advance)
from lpviz.cli import main
sys.exit(main(sys.argv[2:]))
"""


def _files(folder, rows, cols, count=None):
    sys.path.insert(0, str(REPO))
    from lpviz.release import MAX_COUNT, Release

    worst = np.full((rows, cols), MAX_COUNT if count is None else count, dtype=np.int64)
    plain = np.random.default_rng(0).poisson(5.0, size=(rows, cols))
    if count is None:
        Release(Y_obs=worst, alpha=0.999999).save(folder / "worst-release.npz", overwrite=True)
    else:  # a count beyond the bound, as an older lpviz accepted it (written without the check)
        fields = {"format": np.asarray("lpviz-release-1"), "alpha": np.asarray(0.999999)}
        np.savez(folder / "worst-release.npz", Y_obs=worst, **fields)
    np.savez(folder / "worst-counts.npz", Y=worst - 10**8)  # room for the noise the CLI adds
    Release(Y_obs=plain, alpha=0.5).save(folder / "plain-release.npz", overwrite=True)
    np.savez(folder / "plain-counts.npz", Y=plain)
    return {
        "worst": (folder / "worst-release.npz", folder / "worst-counts.npz", "0.999999"),
        "plain": (folder / "plain-release.npz", folder / "plain-counts.npz", "0.5"),
    }


def measure(src, sampler, release, counts, alpha, folder, signal_number, wait, timeout):
    data = counts if sampler == "nonprivate" else release
    extra = ["--alpha", alpha] if sampler == "nonprivate" else []
    command = [sys.executable, "-c", _CHILD, str(src), "fit", "--data", str(data), *SAMPLERS[sampler], *extra]
    command += ["--components", "3", "--iterations", "100000", "--no-progress"]
    command += ["--output", str(folder / f"out-{sampler.replace(' ', '-')}-{time.monotonic_ns()}")]
    child = subprocess.Popen(
        command,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    lines, first_sweep = [], None
    for line in child.stderr:
        lines.append(line)
        if line.startswith("@@sweep"):
            break
    else:
        child.wait()
        return {"latency": None, "code": child.returncode, "last": (lines or ["?"])[-1].strip()[:80], "sweep": None}
    time.sleep(wait)
    sent = time.perf_counter()
    child.send_signal(signal_number)
    try:
        _, rest = child.communicate(timeout=timeout)
        latency = time.perf_counter() - sent
    except subprocess.TimeoutExpired:
        child.kill()
        _, rest = child.communicate()
        latency = None
    rest_lines = [line for line in rest.splitlines() if line.strip()]
    for line in rest_lines:
        if line.startswith("@@swept ") and first_sweep is None:
            first_sweep = float(line.split()[1])
    last = next((line for line in reversed(rest_lines) if not line.startswith("@@")), "")
    return {"latency": latency, "code": child.returncode, "last": last.strip()[:80], "sweep": first_sweep}


FIGURE4 = "Figure 4 (reduced size for the browser)"
# the page's clicks: (label, condition the page waits for before Stop) with {lines} the progress lines
PAGE_POINTS = (
    ("start (iteration 1)", "l.every(x => x && (x[1] >= 1 || x[0] === 'done'))"),
    ("middle (iteration 200)", "l.every(x => x && (x[1] >= 200 || x[0] === 'done'))"),
    ("last iterations (slowest at 375)", "l.every(x => x && (x[1] >= 375 || x[0] === 'done'))"),
    ("end-of-run work (all at 400)", "l.every(x => x && x[1] >= 400) && l.some(x => x[0] === 'running')"),
)


def _page_latencies(src, repeats):
    """Serve ``src``'s dashboard, run Figure 4 in one chromium page and time Stop and Reset at
    every point of :data:`PAGE_POINTS`; yields ``(point, stop seconds, reset seconds, lines at the click)``."""
    import os
    import socket
    import urllib.request

    sys.path.insert(0, str(REPO))
    from playwright.sync_api import sync_playwright

    from benchmarks.bench_page_lag import (
        LINES,  # the benchmarks own the reading of the progress lines (tests import it)
    )
    from tests.browser_harness import CHROMIUM, CHROMIUM_ARGS, COUNT_TRACE_POINTS, N_METHODS

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "lpviz.dashboard.serve", "--port", str(port)],
        cwd=src,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"http://localhost:{port}/app"
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                with urllib.request.urlopen(url, timeout=60) as response:
                    if response.status == 200:
                        break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError(f"the dashboard of {src} did not answer on {url}") from None
                time.sleep(0.5)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_context(viewport={"width": 1500, "height": 1000}).new_page()
            page.set_default_timeout(300_000)
            page.goto(url)
            page.wait_for_function("() => window.Bokeh && window.Bokeh.documents.length > 0")
            page.get_by_text("Noise changed").first.wait_for()
            page.locator(".bk-tab").get_by_text("Fits", exact=True).click()
            page.locator("select:has(option:text-is('(settings of your own)'))").first.select_option(value=FIGURE4)
            page.wait_for_function(
                f"() => {{ const l = ({LINES})(); return l.length === {N_METHODS} && "
                "l.every(x => x && x[0] === 'idle' && x[2] === 400); }"
            )

            def timed(button, done):
                handle = page.get_by_role("button", name=button, exact=True).element_handle()
                return page.evaluate(
                    f"""async (button) => {{
                    const done = () => {{ const l = ({LINES})(); return {done}; }};
                    const start = performance.now();
                    button.click();
                    while (!done()) {{
                        if (performance.now() - start > 120000) return null;
                        await new Promise(resolve => setTimeout(resolve, 5));
                    }}
                    return (performance.now() - start) / 1000;
                }}""",
                    handle,
                )

            def timed_reset():
                """Reset clicked while the chains run: seconds until every line reads idle, and until
                the trace plots are empty too (the page's own clock)."""
                handle = page.get_by_role("button", name="Reset", exact=True).element_handle()
                return page.evaluate(
                    f"""async (button) => {{
                    const idle = () => ({LINES})().every(x => x && x[0] === 'idle');
                    const empty = () => ({COUNT_TRACE_POINTS})() === 0;
                    const start = performance.now();
                    let status = null, cleared = null;
                    button.click();
                    while (status === null || cleared === null) {{
                        const now = performance.now() - start;
                        if (now > 120000 || (status !== null && now > 1000 * status + 10000)) break;
                        if (status === null && idle()) status = now / 1000;
                        if (cleared === null && empty()) cleared = now / 1000;
                        await new Promise(resolve => setTimeout(resolve, 5));
                    }}
                    return [status, cleared];
                }}""",
                    handle,
                )

            # a warm-up run, not timed: the first chains of a process load (or compile) their kernels
            page.get_by_role("button", name="Run the fits").click()
            page.wait_for_function(f"() => {{ const l = ({LINES})(); return {PAGE_POINTS[0][1]}; }}", polling=5)
            timed("Stop", "l.every(x => x && (x[0] === 'stopped' || x[0] === 'done'))")
            timed("Reset", "l.every(x => x && x[0] === 'idle')")
            for _ in range(repeats):
                for point, ready in PAGE_POINTS:
                    page.get_by_role("button", name="Run the fits").click()
                    page.wait_for_function(f"() => {{ const l = ({LINES})(); return {ready}; }}", polling=5)
                    at = page.evaluate(LINES)
                    stop = timed("Stop", "l.every(x => x && (x[0] === 'stopped' || x[0] === 'done'))")
                    reset = timed("Reset", "l.every(x => x && x[0] === 'idle')")
                    yield point, stop, reset, at, os.getloadavg()[0]
                for point, ready in PAGE_POINTS[:3]:  # Reset without a Stop first, while the chains run
                    page.get_by_role("button", name="Run the fits").click()
                    page.wait_for_function(f"() => {{ const l = ({LINES})(); return {ready}; }}", polling=5)
                    at = page.evaluate(LINES)
                    status, cleared = timed_reset()
                    yield f"{point}, Reset while running", status, cleared, at, os.getloadavg()[0]
            browser.close()
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(30)


def page_main(args):
    trees = [("this checkout", REPO)] + ([("reference", Path(args.reference))] if args.reference else [])
    print(
        f"Stop and Reset on the served dashboard, Figure 4 (reduced size), one chromium page; seconds from the "
        f"click until every progress line reads stopped (or done) / idle, timed in the page; {args.repeats} "
        "run(s) of each point per tree; shared 2-core machine: noisy (load average beside each row)"
    )
    print(
        "Rows 'Reset while running': Reset clicked with the chains running (no Stop first); the columns then "
        "hold the seconds until every line reads idle, and until the trace plots are empty too"
    )
    print("| tree | point | Stop (s) | Reset (s) | iterations at the click | load |\n|---|---|---|---|---|---|")
    for name, src in trees:
        for point, stop, reset, at, load in _page_latencies(src, args.repeats):
            shown = [f"{'-' if s is None else f'{s:.2f}'}" for s in (stop, reset)]
            iterations = ", ".join(f"{x[1]} {x[0]}" for x in at if x)
            print(f"| {name} ({src}) | {point} | {shown[0]} | {shown[1]} | {iterations} | {load:.1f} |", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--page", action="store_true", help="Stop and Reset on the served dashboard (issue 37)")
    parser.add_argument("--reference", default=None, help="with --page: another checkout served the same way")
    parser.add_argument("--repeats", type=int, default=1, help="with --page: runs of every point per checkout")
    parser.add_argument("--rows", type=int, default=64)
    parser.add_argument("--cols", type=int, default=400)
    parser.add_argument("--signal", choices=("TERM", "INT"), default="TERM")
    parser.add_argument("--wait", type=float, default=1.5, help="seconds from the first sweep's start to the signal")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for the exit before killing it")
    parser.add_argument("--src", default=str(REPO), help="the lpviz checkout to run")
    parser.add_argument("--samplers", nargs="*", default=list(SAMPLERS))
    parser.add_argument(
        "--count", type=int, default=None, help="the worst case's count (default MAX_COUNT; e.g. 2**53 - 1 for main)"
    )
    parser.add_argument("--data", nargs="*", default=["plain", "worst"], choices=("plain", "worst"))
    parser.add_argument(
        "--tiny", action="store_true", help="8 x 50 cells, the signal 0.2 s in, 3 samplers (the test suite's)"
    )
    args = parser.parse_args()
    if args.tiny:  # one sampler of each kind of kernel: a private chain, CAVI, the non-private chain
        args.rows, args.cols, args.wait = 8, 50, 0.2
        if args.samplers == list(SAMPLERS):
            args.samplers = ["private collapsed", "private vi", "nonprivate"]
    if args.page:
        page_main(args)
        return
    signal_number = signal.SIGTERM if args.signal == "TERM" else signal.SIGINT
    with tempfile.TemporaryDirectory(prefix="lpviz-stop-") as tmp:
        folder = Path(tmp)
        files = _files(folder, args.rows, args.cols, args.count)
        print(
            f"SIG{args.signal} {args.wait:g} s into the first sweep of `lpviz fit` ({args.rows} x {args.cols} cells, "
            f"K = 3; lpviz from {args.src}); shared machine: noisy"
        )
        print("| sampler | data | seconds to exit | exit | last line | first sweep (s) |\n|---|---|---|---|---|---|")
        for sampler in args.samplers:
            for name in args.data:
                release, counts, alpha = files[name]
                result = measure(
                    args.src, sampler, release, counts, alpha, folder, signal_number, args.wait, args.timeout
                )
                latency = f"> {args.timeout:g} (killed)"
                if result["latency"] is not None:
                    latency = f"{result['latency']:.2f}"
                sweep = f"{result['sweep']:.2f}" if result["sweep"] is not None else "not finished"
                count = "10**12" if args.count is None else f"{args.count:,}"
                label = "plain (Poisson(5), alpha 0.5)" if name == "plain" else f"worst ({count}, alpha 0.999999)"
                row = f"| {sampler} | {label} | {latency} | {result['code']} | {result['last']} | {sweep} |"
                print(row, flush=True)


if __name__ == "__main__":
    main()
