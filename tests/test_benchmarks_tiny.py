"""Every benchmark runs in its tiny mode and prints its figures (issue 56: benchmarks that cannot rot).

Each ``benchmarks/bench_*.py`` is run as a user runs it (``python benchmarks/bench_x.py --tiny``,
from the repository's root, in a process of its own) and must exit 0 and print the lines of its
tables: its own figures and the plain reference each is compared with. No timing is asserted (the
figures are the benchmarks' to print; here they are noise); a benchmark that stopped working, or
stopped printing a table or its reference, fails here.

Run elsewhere already: ``bench_stacking --tiny`` (tests/test_stacking.py), not again here; and
``bench_class``'s students and server (tests/test_class_load.py, tests/test_serve_procs.py) and
``bench_page_lag``'s reading of the progress lines (the browser tests), whose command lines and
reports are run here. Tiny runs of more than about 30 s are marked slow (``--runslow``): the
served ones (bench_app's section 3, bench_page_lag, bench_class).
"""

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BROWSER = [pytest.mark.browser, pytest.mark.skipif(not Path("/usr/bin/chromium").exists(), reason="no chromium")]


def run_benchmark(name, *args, timeout=300):
    """``python benchmarks/<name>.py *args`` from the repository's root; its stdout (exit 0 asserted)."""
    done = subprocess.run(
        [sys.executable, str(Path("benchmarks") / f"{name}.py"), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, f"{name} {' '.join(args)} exited {done.returncode}:\n{done.stderr[-3000:]}"
    return done.stdout


def assert_lines(output, *patterns):
    """Every pattern (a regular expression) found on some line of ``output``."""
    missing = [pattern for pattern in patterns if not re.search(pattern, output, re.MULTILINE)]
    assert not missing, f"missing {missing} in:\n{output[-4000:]}"


NUMBER = r"-?[\d,]+(?:\.\d+)?"
# (benchmark, arguments, lines its output must hold): one figure of each table and its reference
CASES = [
    pytest.param(
        "bench_bessel",
        ["--tiny"],
        [
            r"nu\s+a\s+var\s+sample_nb\s+poisson\s+naive\s+inversion\s+rejection\s+stream",
            rf"^\s+0\s+0\.5\s+{NUMBER}(\s+{NUMBER}){{6}}$",
            rf"^\s+0\.5\s+1e\+06\s+\S+\s+{NUMBER}\s+{NUMBER}\s+nan\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}$",
        ],
        id="bessel",
    ),
    pytest.param(
        "bench_collapsed",
        ["--tiny"],
        [
            r"^2,000 cells x 1 sweeps",
            *(rf"^{re.escape(regime)}\s+\d+%\s+{NUMBER} \(" for regime in ("fig3", "synthetic", "network a=e^-0.1")),
            rf"^  lam=1e\+06\s+{NUMBER}\s+{NUMBER}$",  # ours beside numba's np.random.poisson
            rf"^  mode~64\s+kink:\s+{NUMBER} /\s+{NUMBER}",
        ],
        id="collapsed",
    ),
    pytest.param(
        "bench_tensor",
        ["--tiny"],
        [
            r"^Recovery: make_tensor\(8 actors, 4 months, K=2\)",
            *(
                rf"^\s+1\s+{inference}\s+{method}\s+{NUMBER}"
                for inference in ("mcmc", "vi")
                for method in ("private", "naive", "nonprivate")
            ),
            rf"^\s+tensor:\s+{NUMBER} ms per iteration",
            rf"^\s+topics \(reference\):\s+{NUMBER} ms per iteration",
        ],
        id="tensor",
    ),
    pytest.param(
        "bench_topicmap",
        ["--tiny"],
        [
            rf"^Figure 3\s+topic_map \(one fit\)\s+{NUMBER}\s+{NUMBER}$",
            rf"^Figure 3\s+scipy JS \(reference\)\s+{NUMBER}",
            rf"^Figure 3\s+classical MDS\s+{NUMBER}",
            rf"^Figure 3\s+sklearn MDS \(reference\)\s+{NUMBER}",
        ],
        id="topicmap",
    ),
    pytest.param(
        "bench_distributed",
        ["--tiny"],
        [
            rf"^in one process \(\d+ kernel threads\): {NUMBER} s per iteration",
            *(
                rf"^{w} worker\(s\) x \d+ threads: {NUMBER} s per iteration \(best; median {NUMBER} s\).*same bits "
                "as one process: True$"
                for w in (1, 2)
            ),
            # the breakdown, 1 and 2 workers side by side, and the projection from its parts
            *(
                rf"^  {part}\s+{NUMBER}\s+{NUMBER}$"
                for part in (
                    r"iteration \(median\)",
                    r"  sweep, slowest worker's own",
                    r"  wait on the slowest.*",
                    r"  overhead.*",
                    "running-sum passes",
                    r"  per hop.*",
                    "phi's draw on the driver",
                    "  phi out",
                    "  counts back",
                )
            ),  # fmt: skip
            rf"^  16 workers: about {NUMBER} s per iteration \(speed-up {NUMBER}x, parallel efficiency \d+%",
            rf"^  64 workers: about {NUMBER} s per iteration \(speed-up {NUMBER}x, parallel efficiency \d+%",
        ],
        id="distributed",
    ),
    pytest.param(
        "bench_distributed_score",
        ["--tiny"],
        [
            rf"^in one process: score {NUMBER} s",
            *(rf"^W = {w}: sums on the workers: .*equal to one process: True$" for w in (1, 2)),
            r"^\s+rates pulled \(before\): .*equal: True$",
        ],
        id="distributed_score",
    ),
    pytest.param(
        "bench_distributed_vi",
        ["--tiny"],
        [
            rf"^one process: {NUMBER} s / iteration",
            *(rf"^{w} worker\(s\): {NUMBER} s / iteration .*same bits: yes$" for w in (1, 2)),
        ],
        id="distributed_vi",
    ),
    pytest.param(
        "bench_distributed_blocks",
        ["--tiny"],
        [
            r"^network 60 x 60, C = 3",
            rf"^in one process \(\d+ kernel threads\): {NUMBER} s per iteration",
            *(rf"^{w} worker\(s\) x \d+ threads: .*same bits as one process \(traces, mu_hat\): True$" for w in (1, 2)),
            rf"^in one process again, after: {NUMBER} s per iteration",
        ],
        id="distributed_blocks",
    ),
    pytest.param(
        "bench_chains",
        ["--tiny"],
        [
            r"single chain \(chain 0\)\s+every chain alone\s+chains=4",
            r"^MAE, mean\s+[\d.]+\s+[\d.]+\s+[\d.]+$",
            rf"^wall-clock per fit .*chains=4 {NUMBER} s .*one chain {NUMBER} s",
        ],
        id="chains",
    ),
    pytest.param(
        "bench_chains",
        ["--tiny", "--score"],
        [rf"^Figure 3's size 90 x 15, K=3: chains=1 full: {NUMBER} ms, .*chains=4 trace: {NUMBER} ms$"],
        id="chains_score",
    ),
    pytest.param(
        "bench_chains",
        ["--tiny", "--scaling"],
        [
            rf"^reference: a nogil loop {NUMBER} s on one thread, two of them {NUMBER} s",
            rf"^small 120 x 40, K=4, 50 it: chains=1: {NUMBER} s .*chains=4: {NUMBER} s",
        ],
        id="chains_scaling",
    ),
    pytest.param(
        "bench_central",
        ["--tiny"],
        [
            r"Park et al\. 2016 moments acct\.\s+2\.440",
            rf"dp-accounting RDP\s+{NUMBER}",
            rf"dp-accounting PLD\s+{NUMBER}",
            rf"^\s+1\s+20,000\s+20\s+0\.0500\s+{NUMBER}",
            rf"PrivateLDA, noise_multiplier=0, clip=None\s+{NUMBER}",
            rf"PrivateLDA, epsilon=1 \(PLD\), clip=0\.1, N=100\s+{NUMBER}",
            rf"scikit-learn online LDA \(reference\)\s+{NUMBER}",
        ],
        id="central",
    ),
    pytest.param(
        "bench_reproduce",
        ["--tiny"],
        [
            r"^fig1 \(tiny\): \d+ tasks",
            rf"^plain loop \(reference\)\s+{NUMBER}\s+\d+$",
            rf"^LocalCluster, 2 workers\s+{NUMBER}\s+\d+$",
            rf"^resume with all done\s+{NUMBER}\s+0$",
            r"results equal: True$",
        ],
        id="reproduce",
    ),
    pytest.param(
        "bench_vi",
        ["--tiny"],
        [
            rf"^lpviz private, Bessel mode\s+{NUMBER}\s+{NUMBER}",
            rf"^lpviz naive\s+{NUMBER}\s+{NUMBER}",
            rf"^plain numpy reference \(private, mode\)\s+{NUMBER}\s+{NUMBER}",
            r"^the reference agrees: rates to ",
            r"^  Bessel mode: \d+ iterations",
            r"^  Bessel mean: \d+ iterations",
        ],
        id="vi",
    ),
    pytest.param(
        "bench_vi",
        ["--tiny", "--mode-vs-mean"],
        [r"^  Figure 3 data, seed 0: mode ", r"^  Figure 3 data, mean over 1 seeds, mean: MAE vs counts"],
        id="vi_mode_vs_mean",
    ),
    pytest.param(
        "bench_loaders",
        ["--tiny"],
        [
            r"^2,000 x 1,000, [\d,]+ nonzeros",
            rf"^UCI docword   lpviz load_counts\s+{NUMBER} s",
            rf"^\s+np\.loadtxt \+ csr\s+{NUMBER} s",
            rf"^Matrix Market lpviz load_counts\s+{NUMBER} s",
            rf"^\s+scipy\.io\.mmread\s+{NUMBER} s",
        ],
        id="loaders",
    ),
    pytest.param(
        "bench_stop",
        ["--tiny"],
        [
            rf"^\| {sampler} \| {data} .*\| {NUMBER} \| -?\d+ \|"
            for sampler in ("private collapsed", "private vi", "nonprivate")  # --tiny's three
            for data in ("plain", "worst")
        ],
        id="stop",
    ),
    pytest.param(
        "bench_private_iteration",  # its --tiny is section 6 (Figure 3's size); --only: that section alone
        ["--tiny", "--only", "--repeats", "1"],
        [
            r"^6\. Figure 3's size: 90 x 15, K = 3",
            *(
                rf"^   {re.escape(label)}\s+{NUMBER}\s+-"
                for label in ("private (collapsed)", "private (bessel)", "naive", "nonprivate")
            ),
            r"^   target: private <= 0\.15 ms",
        ],
        id="private_iteration",
    ),
    pytest.param(
        "bench_page_open",
        ["--tiny"],
        [
            rf"^  dashboard\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}$",
            rf"^  reference: an empty page\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}$",
            rf"^  by part, each made and modelled alone: teaching {NUMBER}",
        ],
        id="page_open",
    ),
    pytest.param(
        "bench_app",  # sections 1 and 2; section 3 (served, in chromium) below
        ["--tiny", "--served-seconds", "0"],
        [
            r"^== figure3: 90 x 15, K=3, in-process",
            rf"^   Start -> first streamed row: cold {NUMBER} s, warm \(median of 3\) {NUMBER} s",
            r"bare, alone\s+bare, threads\s+app runners",
            *(rf"^   {method}\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}$" for method in ("private", "naive", "nonprivate")),
            rf"pause \(click -> every worker acknowledged, rows handed over\) {NUMBER} ms",
            rf"^   t=\s*{NUMBER} s  RSS\s+{NUMBER} MB",
            r"^   RSS slope over the second half: ",
        ],
        id="app",
    ),
    pytest.param(
        "bench_app",
        ["--tiny", "--served-only"],
        [
            rf"^   Start click -> first point in the browser: {NUMBER} s",
            rf"^   it/s shown by the page after the run: {NUMBER}, {NUMBER}, {NUMBER}; over the whole run",
            rf"^   Pause click -> last point in the browser: {NUMBER} s",
        ],
        id="app_served",  # 28-40 s: the server, chromium, the session's warm-up wait (5 s) and the run
        marks=[*BROWSER, pytest.mark.slow],
    ),
    pytest.param(
        "bench_served_pace",  # about 10 s: library and in-process runs of Figure 1 and Figure 3 (400 iterations)
        ["--tiny", "--no-browser"],
        [
            r"^== Figure 1: 20 x 20, K=5, 400 iterations",
            r"^== Figure 3 \(large alpha0\): 90 x 15, K=3, 400 iterations",
            rf"^   library \(lpviz\.fit, same chains at once\): {NUMBER} s, after the others {NUMBER} s",
            rf"^   in-process session to done:\s+{NUMBER} s  \({NUMBER}x\)",
            rf"^   load average: {NUMBER} before, {NUMBER} after",
            rf"^   Figure 1\s+{NUMBER}\s+{NUMBER} \({NUMBER}x\)\s+-",
        ],
        id="served_pace",
    ),
    pytest.param(
        "bench_page_lag",  # about 45 s: the server, chromium, Figure 1's data and the idle reference
        ["--tiny"],
        [r'^\{"label": "reference: idle page\(s\)".*"lag_p95_ms"', r'^\{"label": "run: 1 page\(s\), .*"click_ms": \['],
        id="page_lag",
        marks=[*BROWSER, pytest.mark.slow],
    ),
    pytest.param(
        "bench_class",  # about 35 s: a server, its sessions' release before and after the class
        ["--tiny"],
        [
            r"^N=2 \(this: .*baseline RSS",
            rf"^N= 2 chains on the server, round 1 .*first point s {NUMBER}",
            rf"it/s per session {NUMBER} / {NUMBER} / {NUMBER}, fairness {NUMBER}",
            r"^   the pages' last progress lines: ",
        ],
        id="class",
        marks=pytest.mark.slow,
    ),
]


@pytest.mark.parametrize(("name", "args", "patterns"), CASES)
def test_a_benchmark_runs_tiny_and_prints_its_figures(name, args, patterns):
    output = run_benchmark(name, *args)
    assert_lines(output, *patterns)
    assert "failed:" not in output, output[-3000:]  # bench_class reports a student's failure, not raises it


def test_bench_enron_runs_tiny_on_the_shared_tarball(enron_tarball):
    output = run_benchmark("bench_enron", "--tiny", "--source", str(enron_tarball))
    assert_lines(
        output,
        r"its first 2,000 files",
        rf"^topic matrix 200x200 \([\d,]+ nonzeros\):\s+{NUMBER} s",
        rf"^network \d+x\d+ \([\d,]+ emails\):\s+{NUMBER} s",
        rf"^cached reload of both, fresh process:\s+{NUMBER} s",
        rf"^reference, stdlib email parser .*: 200 messages in {NUMBER} s",
    )


def test_every_benchmark_is_run_here():
    """A new benchmark gets its tiny run above (or this fails)."""
    run = {case.values[0] for case in CASES} | {"bench_enron", "bench_stacking"}  # stacking: tests/test_stacking.py
    assert run == {path.stem for path in (REPO / "benchmarks").glob("bench_*.py")}
