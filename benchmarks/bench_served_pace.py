"""A served preset at the library's pace (issue 56 item 1): seconds from Run to every chain done.

For each preset (default Figure 1 and Figure 3 (large alpha0)), in the same run:

1. library: ``lpviz.fit`` of the preset's chains (its data, model, methods, schedule, seed and chains
   per method), one thread per method, all at once; run before and after the others, the mean is
   the reference;
2. in-process: the dashboard's session objects (``Settings(preset=...)``, ``DataStore``, ``Fits``)
   from ``Fits.start()`` to every runner "done", drained every 200 ms as the app drains;
3. served (unless ``--no-browser``): ``python -m lpviz.dashboard.serve`` and Debian's chromium, the
   preset chosen in the sidebar, then from the click on "Run the fits" to every progress line
   reading "done", timed inside the page; with the server's CPU seconds (event loop, other threads)
   and the browser's over that time.

Each with its ratio to the library, and the machine's load average (``os.getloadavg()``) before
and after: on a shared 2-core machine the figures move with the load (the ratios less so).

    .venv/bin/python benchmarks/bench_served_pace.py [--presets "Figure 1,Figure 3 (large alpha0)"] [--no-browser]
    .venv/bin/python benchmarks/bench_served_pace.py --tiny --no-browser   # the test suite's: seconds

``--tiny``: the same presets with a few hundred iterations (no timing asserted anywhere).
"""

import argparse
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import lpviz  # noqa: E402
from lpviz import methods  # noqa: E402
from lpviz.dashboard.session.datastore import DataStore  # noqa: E402
from lpviz.dashboard.session.fits import Fits, warm_up_kernels  # noqa: E402
from lpviz.dashboard.session.settings import Settings, preset_values  # noqa: E402

sys.path.insert(0, str(REPO / "benchmarks"))
from bench_app import CHROMIUM, CHROMIUM_ARGS  # noqa: E402  (the served benchmarks' one chromium)

PRESETS = ("Figure 1", "Figure 3 (large alpha0)")
TINY = {"n_iter": 400, "burn_in": 100}  # --tiny: every preset's schedule (thin stays the preset's)
DRAIN_SECONDS = 0.2  # the app's periodic drain (lpviz.dashboard.session.fits.DRAIN_PERIOD_MS)
PRESET_CHOICE = "select:has(option:text-is('(settings of your own)'))"
# progress lines in the page: "<label> - <status>, iteration i / goal"
PROGRESS_JS = r"""() => {
  const statuses = [];
  for (const doc of window.Bokeh.documents) for (const m of doc.all_models) {
    if (typeof m.text !== "string") continue;
    const found = /(\w+), iteration [\d,]+ \/ [\d,]+/.exec(m.text);
    if (!found) continue;
    const view = window.Bokeh.index.find_one(m);
    if (view && view.el && view.el.isConnected) statuses.push(found[1]);
  }
  return statuses; }"""


def load():
    return os.getloadavg()[0]


def session(name, overrides):
    fits = Fits(DataStore(Settings(preset=name, **overrides), background=False))
    if fits.data.error:
        raise SystemExit(f"{name}: {fits.data.error}")
    return fits


def library_seconds(fits):
    """``lpviz.fit`` of every chosen method's chains at once (a thread per method; its chains in
    threads of their own, as ``lpviz.fit(..., chains=C)`` runs them): wall-clock seconds."""
    problem, settings = fits.problem(), fits.settings
    failures = []

    def one(runner):
        try:
            method = methods.create(runner.method, **runner.options)
            lpviz.fit(
                problem.release,
                model=problem.model,
                method=method,
                n_components=problem.n_components,
                n_iter=settings.n_iter,
                burn_in=settings.burn_in,
                thin=settings.thin,
                truth=problem.truth if method.uses_truth else None,
                random_state=problem.seed,
                chains=problem.chains,
            )
        except Exception as error:  # reported below, in the main thread
            failures.append(error)

    threads = [threading.Thread(target=one, args=(runner,)) for runner in fits.active.values()]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]
    return time.perf_counter() - start


def in_process_seconds(fits, timeout=1800):
    """``Fits.start()`` to every chosen runner "done", drained as the app drains."""
    start = time.perf_counter()
    fits.start()
    active = list(fits.active.values())
    while any(runner.status != "done" for runner in active):
        if any(runner.status in ("error", "stopped") for runner in active):
            raise SystemExit({runner.method: (runner.status, runner.error) for runner in active})
        if time.perf_counter() - start > timeout:
            raise TimeoutError({runner.method: (runner.status, runner.iteration) for runner in active})
        time.sleep(DRAIN_SECONDS)
        fits.drain()
    seconds = time.perf_counter() - start
    for runner in active:
        runner.join(timeout=30)
    fits.drain()
    return seconds


def thread_cpu_seconds(pid):
    """CPU seconds of ``pid``'s main thread (the event loop) and of all its other threads, those that
    have ended included (the process's total less the main thread's)."""
    ticks = os.sysconf("SC_CLK_TCK")

    def seconds(path):
        stat = Path(path).read_text()
        fields = stat[stat.rindex(")") + 2 :].split()
        return (int(fields[11]) + int(fields[12])) / ticks

    loop = seconds(f"/proc/{pid}/task/{pid}/stat")
    return {"event loop": loop, "other threads": seconds(f"/proc/{pid}/stat") - loop}


def browser_cpu_seconds():
    """``{pid: CPU seconds}`` of every chromium process on the machine (the browser shares the cores)."""
    ticks = os.sysconf("SC_CLK_TCK")
    seconds = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if "chrom" in stat[stat.index("(") + 1 : stat.rindex(")")].lower():
            fields = stat[stat.rindex(")") + 2 :].split()
            seconds[entry.name] = (int(fields[11]) + int(fields[12])) / ticks
    return seconds


def browser_cpu_since(before):
    """The browser's CPU seconds since ``before`` (:func:`browser_cpu_seconds`), of the processes alive now."""
    return sum(now - before.get(pid, 0.0) for pid, now in browser_cpu_seconds().items())


class Served:
    """The dashboard served by ``python -m lpviz.dashboard.serve`` on a free port, and chromium."""

    def __init__(self):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.process = subprocess.Popen(
            [sys.executable, "-m", "lpviz.dashboard.serve", "--port", str(self.port)],
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.url = f"http://127.0.0.1:{self.port}/app"
        deadline = time.monotonic() + 180
        while True:
            try:  # a first render under load takes seconds: a long timeout (see tests/browser_harness.py)
                urllib.request.urlopen(self.url, timeout=60).close()
                break
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.close()
                    raise SystemExit(f"the server did not answer on {self.url}") from None
                time.sleep(0.5)
        from playwright.sync_api import sync_playwright

        self._playwright = sync_playwright().start()
        self.browser = self._playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)

    def run(self, name, overrides, n_methods):
        """Seconds from the click on "Run the fits" to every progress line "done" (timed in the page),
        with the CPU seconds of the server's threads and of the browser over that time."""
        context = self.browser.new_context(viewport={"width": 1500, "height": 1000})
        page = context.new_page()
        page.set_default_timeout(600_000)
        try:
            page.goto(self.url)
            page.wait_for_function("() => window.Bokeh && window.Bokeh.documents.length > 0")
            page.get_by_text("Noise changed").first.wait_for()
            page.locator(PRESET_CHOICE).first.select_option(value=name)
            values = preset_values(name)
            if overrides:
                page.get_by_text("Fit settings").first.click()
                for label, key in (("Burn in", "burn_in"), ("N iter", "n_iter")):  # burn-in first: it must fit
                    field = page.get_by_label(label, exact=True)
                    field.fill(str(overrides[key]))
                    field.press("Enter")
                values = {**values, **overrides}
            # the Fits tab (where Run the fits goes) drawn, its progress lines on the preset's schedule
            page.locator(".bk-tab").get_by_text("Fits", exact=True).click()
            goal = f"idle, iteration 0 / {values['n_iter']:,}"
            page.get_by_text(goal).first.wait_for()
            page.wait_for_function(f"() => ({PROGRESS_JS})().length === {n_methods}")
            page.wait_for_timeout(3000)  # the session's kernel warm-up, and the preset's data built
            button = page.get_by_role("button", name="Run the fits").element_handle()
            cpu, browser = thread_cpu_seconds(self.process.pid), browser_cpu_seconds()
            seconds = page.evaluate(
                f"""async (button) => {{
                const statuses = {PROGRESS_JS};
                const start = performance.now();
                button.click();
                while (true) {{
                    await new Promise(resolve => setTimeout(resolve, 50));
                    const now = statuses();
                    if (now.some(s => s === "error")) throw new Error("a chain ended in an error: " + now);
                    if (now.length === {n_methods} && now.every(s => s === "done")) break;
                }}
                return (performance.now() - start) / 1000;
            }}""",
                button,
            )
            after = thread_cpu_seconds(self.process.pid)
            used = {key: after[key] - cpu[key] for key in after}
            used["browser"] = browser_cpu_since(browser)
            return seconds, used
        finally:
            context.close()

    def close(self):
        if getattr(self, "browser", None) is not None:
            self.browser.close()
            self._playwright.stop()
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--presets", default=",".join(PRESETS), help="comma-separated preset names")
    parser.add_argument("--no-browser", action="store_true", help="leave the served run out")
    parser.add_argument("--tiny", action="store_true", help=f"schedules of {TINY['n_iter']} iterations (tests)")
    args = parser.parse_args()
    names = [name.strip() for name in args.presets.split(",") if name.strip()]
    overrides = dict(TINY) if args.tiny else {}
    browser = not args.no_browser and Path(CHROMIUM).exists()

    start = time.perf_counter()
    warm_up_kernels()
    print(f"kernel warm-up: {time.perf_counter() - start:.2f} s; cores {os.cpu_count()}; load {load():.2f}")
    served = Served() if browser else None
    results = []
    try:
        for name in names:
            fits = session(name, overrides)
            try:
                problem, settings = fits.problem(), fits.settings
                shape = " x ".join(f"{n:,}" for n in problem.release.shape)
                n_methods = len(fits.active)
                print(
                    f"\n== {name}: {shape}, K={problem.n_components}, {settings.n_iter:,} iterations "
                    f"(burn-in {settings.burn_in:,}, thin {settings.thin}), {problem.chains} chain(s) x "
                    f"{n_methods} methods"
                )
                before = load()
                library = [library_seconds(fits)]
                inside = in_process_seconds(fits)
                servedrun = served.run(name, overrides, n_methods) if served else None
                library.append(library_seconds(fits))
                after = load()
            finally:
                fits.close()
            reference = sum(library) / len(library)
            print(
                f"   library (lpviz.fit, same chains at once): {library[0]:.2f} s, after the others {library[1]:.2f} s"
            )
            print(f"   in-process session to done:               {inside:.2f} s  ({inside / reference:.2f}x)")
            if servedrun is not None:
                seconds, cpu = servedrun
                print(f"   served, Run the fits -> all done:         {seconds:.2f} s  ({seconds / reference:.2f}x)")
                print(
                    "   CPU seconds meanwhile: server event loop {event loop:.1f}, server other threads "
                    "{other threads:.1f}, browser {browser:.1f}".format(**cpu)
                )
            print(f"   load average: {before:.2f} before, {after:.2f} after")
            results.append((name, reference, inside, servedrun[0] if servedrun else None, before, after))
    finally:
        if served is not None:
            served.close()

    print("\n== summary (seconds; ratio to the library)")
    print(f"   {'preset':<26} {'library':>8} {'in-process':>16} {'served':>16} {'load':>12}")
    for name, reference, inside, seconds, before, after in results:
        shown = f"{seconds:8.2f} ({seconds / reference:.2f}x)" if seconds is not None else f"{'-':>16}"
        print(
            f"   {name:<26} {reference:8.2f} {inside:8.2f} ({inside / reference:.2f}x) {shown} "
            f"{before:5.2f}-{after:5.2f}"
        )


if __name__ == "__main__":
    main()
