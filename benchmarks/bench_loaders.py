"""Speed and memory of the generic loaders against plain references, on files written here.

    .venv/bin/python benchmarks/bench_loaders.py [--nnz 3710420]
    .venv/bin/python benchmarks/bench_loaders.py --hostile [--src TREE] [--address-limit 8G]
    .venv/bin/python benchmarks/bench_loaders.py --tiny     # the loads and references at 2,000 x 1,000, 20,000 nonzeros

``--hostile-io`` runs issue 20's cases (archives that hide or fake their sizes,
damaged ones, FIFOs, long paths, permissions, a read-only and a full disk, a
dangling symbolic link, edge lists, noise levels, labels), each through the
CLI or the dashboard's upload handler in its own process under
``LPVIZ_MEMORY_LIMIT`` (default 600M), and prints a Markdown table: the
outcome, the exit code, the process's peak RSS and what was left behind.
``--src /path/to/other/checkout`` measures another version the same way.

``--hostile`` runs every hostile-input case of issue 9 (memory bombs,
truncations, bad bytes), each in its own process with its address space
capped (so a loader without bounds meets MemoryError, not the OOM killer),
and prints what the user gets, the time, the peak traced memory and the peak
RSS. ``--src`` points at another checkout's ``lpviz`` to measure it the same
way (how the "before" column of the issue's table was made).

The default size is the UCI Enron bag-of-words (39,861 emails, 28,102 words,
3,710,420 nonzeros). Loads a UCI docword file and the same counts as Matrix
Market, each with lpviz's checks (line-numbered errors), beside
``np.loadtxt`` + ``scipy.sparse`` and ``scipy.io.mmread`` with no checks.
Prints seconds and peak traced memory; lpviz should stay within a small
factor of the references.
"""

import argparse
import gzip
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np
import scipy.io
import scipy.sparse as sp

REPO = Path(__file__).resolve().parents[1]
ENRON_SUBSET = REPO.parent / "shared" / "data" / "enron_sent_subset.tar.gz"
# this checkout's lpviz (or, with --src, another one's), not whatever is installed
sys.path.insert(0, sys.argv[sys.argv.index("--src") + 1] if "--src" in sys.argv else str(REPO))
sys.path.insert(1, str(REPO / "tests"))

from lpviz.datasets import load_counts  # noqa: E402


def measure(function):
    """Best of two timed runs, then one run under tracemalloc (which slows it) for the peak."""
    seconds = []
    for _ in range(2):
        start = time.perf_counter()
        result = function()
        seconds.append(time.perf_counter() - start)
    tracemalloc.start()
    function()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return result, min(seconds), peak / 2**20


def write_files(folder, n_docs, n_words, nnz, seed=0):
    rng = np.random.default_rng(seed)
    cells = np.unique(rng.integers(0, n_docs * n_words, size=nnz))
    docs, words = np.divmod(cells, n_words)
    counts = rng.geometric(0.4, size=cells.size)
    table = np.column_stack([docs + 1, words + 1, counts])
    docword = folder / "docword.bench.txt"
    with open(docword, "w") as handle:
        handle.write(f"{n_docs}\n{n_words}\n{cells.size}\n")
        np.savetxt(handle, table, fmt="%d")
    (folder / "vocab.bench.txt").write_text("".join(f"w{j}\n" for j in range(n_words)))
    matrix = sp.csr_matrix((counts, (docs, words)), shape=(n_docs, n_words))
    scipy.io.mmwrite(folder / "bench.mtx", matrix, field="integer")
    return docword, folder / "bench.mtx", matrix


def reference_uci(path):
    n_docs, n_words = (int(x) for x in path.read_text().split("\n", 2)[:2])
    table = np.loadtxt(path, skiprows=3, dtype=np.int64)
    return sp.csr_matrix((table[:, 2], (table[:, 0] - 1, table[:, 1] - 1)), shape=(n_docs, n_words))


# ---------------------------------------------------------------- hostile input


def _write(path, text):
    path.write_text(text)
    return path


def _build_hostile(folder):
    """name -> (what it is, path). The builders write small files that declare or expand to a lot."""
    import hostile_files

    folder.mkdir(parents=True, exist_ok=True)
    built = {}

    def add(name, what, path):
        built[name] = (what, path)

    add(
        "mtx-1e12",
        "85-byte .mtx declaring 1e12 x 1e12",
        _write(
            folder / "huge.mtx",
            "%%MatrixMarket matrix coordinate integer general\n1000000000000 1000000000000 1\n1 1 1\n",
        ),
    )
    add(
        "mtx-50k-array",
        ".mtx array header 50,000 x 50,000 (dense)",
        _write(folder / "dense50k.mtx", "%%MatrixMarket matrix array integer general\n50000 50000\n1\n"),
    )
    add(
        "mtx-50k-dense",
        ".mtx 50,000 x 50,000, 1 entry, then .dense()",
        _write(folder / "coord50k.mtx", "%%MatrixMarket matrix coordinate integer general\n50000 50000 1\n1 1 1\n"),
    )
    (folder / "vocab.huge.txt").write_text("a\n")
    add(
        "uci-1e12",
        "UCI docword declaring 1e12 documents",
        _write(folder / "docword.huge.txt", "1000000000000\n1\n1\n1 1 1\n"),
    )
    add("npz-ones", ".npz of ones 21,000 x 21,000 float64 (3.5 GB inside)", hostile_files.npz_bomb(folder / "ones.npz"))
    add(
        "npz-liar",
        ".npz whose Y header declares 1e12 x 1e12",
        hostile_files.npy_header_only_npz(folder / "liar.npz", (10**12, 10**12)),
    )
    add(
        "edges-30k",
        "edge list with 30,000 actors, then .dense()",
        _write(folder / "ring.csv", "".join(f"{i},{(i + 1) % 30000}\n" for i in range(30000))),
    )
    add(
        "edges-longname",
        "edge list, 50,000 lines, one 200,000-character name",
        _write(folder / "longname.csv", "".join(f"x{i},y{i}\n" for i in range(50000)) + "A" * 200000 + ",b\n"),
    )
    add(
        "csv-gzip-bomb",
        ".csv.gz of 10 GB of 'a,b,1' lines",
        hostile_files.gzip_bomb(folder / "bomb.csv.gz", total=10 * 10**9),
    )
    add(
        "tar-1.5g",
        "tar.gz with a 1.5 GB message among 4 emails",
        hostile_files.tar_bomb(folder / "bomb.tar.gz", member_bytes=1_500_000_000),
    )
    whole = gzip.compress("".join(f"a{i},b{i},1\n" for i in range(200000)).encode())
    (folder / "cut.csv.gz").write_bytes(whole[: len(whole) // 2])
    add("csv-gz-truncated", ".csv.gz cut in half", folder / "cut.csv.gz")
    add("csv-latin1-deep", ".csv with a Latin-1 byte on line 5,000", folder / "latin.csv")
    (folder / "latin.csv").write_bytes(
        "".join(f"a{i},b{i},1\n" for i in range(4999)).encode() + "jos\xe9,ana,1\n".encode("latin-1")
    )
    if ENRON_SUBSET.is_file():
        data = ENRON_SUBSET.read_bytes()
        (folder / "enron_half.tar.gz").write_bytes(data[: len(data) // 2])
        add("tar-truncated", "the shared Enron subset cut in half, build-enron network", folder / "enron_half.tar.gz")
    return built


def _hostile_action(name, path):
    """What a user would do with the file (the same calls exist before and after issue 9)."""
    if name.endswith("-dense"):
        return lambda: load_counts(path).dense()
    if name == "tar-1.5g":
        from lpviz.datasets import read_emails

        def read():
            emails, report = read_emails(path)
            n = sum(1 for _ in emails)
            return f"{n} emails kept; {report}"

        return read
    if name == "tar-truncated":
        from lpviz.datasets import build_enron_network

        def build():
            cache = path.parent / "cache"
            data = build_enron_network(path, cache_dir=cache)
            entries = sorted(p.name.split("-")[1] for p in cache.glob("*.npz"))
            return (
                f"{data.shape[0]} actors from {data.info['report']['n_read']:,} messages; cached: "
                f"{', '.join(entries) or 'nothing'}"
            )

        return build
    return lambda: load_counts(path)


def _run_case(name, folder):
    """In the child process: run one case, print outcome | seconds | traced peak | RSS peak.

    Timed without tracemalloc (which slows allocation-heavy code several times), then run
    again under tracemalloc for the peak when the first run took under a minute.
    """
    import warnings

    built = _build_hostile_paths(folder)

    def attempt():
        action = _hostile_action(name, built[name])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            start = time.perf_counter()
            try:
                outcome = f"ok: {_describe(action())}"
            except BaseException as error:  # noqa: BLE001  (the point is to see what escapes)
                outcome = f"{type(error).__name__}: {error}"
            seconds = time.perf_counter() - start
        if caught:
            outcome += f" [warning: {caught[0].message}]"
        return outcome, seconds

    outcome, seconds = attempt()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    peak = -1
    if seconds < 60:
        _clear_cache(folder)
        tracemalloc.start()
        attempt()
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    print(f"{outcome.replace(chr(10), ' ')}\t{seconds:.2f}\t{peak}\t{rss}")


def _clear_cache(folder):
    for path in (folder / "cache").glob("*") if (folder / "cache").is_dir() else ():
        path.unlink()


def _build_hostile_paths(folder):
    names = {
        "mtx-1e12": "huge.mtx",
        "mtx-50k-array": "dense50k.mtx",
        "mtx-50k-dense": "coord50k.mtx",
        "uci-1e12": "docword.huge.txt",
        "npz-ones": "ones.npz",
        "npz-liar": "liar.npz",
        "edges-30k": "ring.csv",
        "edges-30k-dense": "ring.csv",
        "edges-longname": "longname.csv",
        "csv-gzip-bomb": "bomb.csv.gz",
        "tar-1.5g": "bomb.tar.gz",
        "csv-gz-truncated": "cut.csv.gz",
        "csv-latin1-deep": "latin.csv",
        "tar-truncated": "enron_half.tar.gz",
    }
    return {name: folder / file for name, file in names.items()}


def _describe(result):
    if hasattr(result, "shape") and hasattr(result, "model"):
        kind = "sparse" if hasattr(result.Y, "nnz") else "dense"
        return f"CountData {result.shape[0]:,} x {result.shape[1]:,} ({kind})"
    if hasattr(result, "shape"):
        return f"array {result.shape}"
    return str(result)


def _parse_size(text):
    units = {"k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
    text = text.strip().lower().rstrip("ib")
    return int(float(text[:-1]) * units[text[-1]]) if text[-1] in units else int(text)


def hostile(args):
    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="lpviz-hostile-"))
    start = time.perf_counter()
    built = _build_hostile(folder)
    cases = dict(built)
    cases["edges-30k-dense"] = ("the same, then .dense()", built["edges-30k"][1])
    del cases["edges-30k"]
    if args.cases:
        cases = {name: cases[name] for name in args.cases}
    print(
        f"files written to {folder} in {time.perf_counter() - start:.1f} s; lpviz from "
        f"{args.src or REPO}; address space capped at {args.address_limit}; "
        f"LPVIZ_MEMORY_LIMIT={os.environ.get('LPVIZ_MEMORY_LIMIT', '(unset: 60% of RAM)')}"
    )
    limit = _parse_size(args.address_limit)

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    for name, (what, path) in cases.items():
        _clear_cache(folder)
        command = [sys.executable, __file__, "--run-case", name, "--dir", str(folder)]
        if args.src:
            command += ["--src", args.src]
        try:
            child = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout, preexec_fn=cap)
            fields = child.stdout.strip().rsplit("\t", 3)
            if child.returncode != 0 or len(fields) != 4:
                tail = (child.stderr.strip().splitlines() or ["?"])[-1]
                print(f"\n{name}: {what} ({path.stat().st_size:,} bytes)\n  died with code {child.returncode}: {tail}")
                continue
            outcome, seconds, peak, rss = fields
            traced = f"traced peak {int(peak) / 2**20:.1f} MiB" if int(peak) >= 0 else "not traced (slow)"
            print(
                f"\n{name}: {what} ({path.stat().st_size:,} bytes)\n  {outcome[:600]}\n"
                f"  {float(seconds):.2f} s, {traced}, max RSS {int(rss) / 2**20:.0f} MiB"
            )
        except subprocess.TimeoutExpired:
            print(f"\n{name}: {what}\n  still running after {args.timeout} s: killed")


# ---------------------------------------------------------------- issue 20: every file, every failure


def _mount_tmpfs(folder, size, read_only=False):
    """A small tmpfs at ``folder`` (root only): a real full disk, a real read-only file system."""
    folder.mkdir(parents=True, exist_ok=True)
    options = f"size={size}" + (",ro" if read_only else "")
    subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)], check=True)
    return lambda: subprocess.run(["umount", str(folder)], check=False)


def _listing(folder):
    """What a folder holds, hidden entries included, for the table."""
    if not os.path.lexists(folder):
        return "absent"
    if not folder.is_dir():
        return "a file"
    names = sorted(os.listdir(folder))
    return ", ".join(names) if names else "empty"


def io_cases(folder):
    """name -> (what it is, setup). ``setup()`` writes the files and returns ``(arguments, options, observe)``:
    the lpviz arguments (or the upload's ``[path, name]`` with ``options["mode"] = "upload"``), options for
    :func:`hostile_files.run_measured`, and ``observe()`` describing what was left behind (or None)."""
    import hostile_files as h

    cases = {}

    def case(name, what):
        def register(setup):
            cases[name] = (what, setup)
            return setup

        return register

    counts = folder / "counts.csv"
    counts.write_text("alice,bob,3\nbob,carol,1\ncarol,alice,2\nalice,carol,4\n")
    fit = ["--components", "2", "--iterations", "12", "--thin", "2", "--burn-in", "2", "--no-progress"]

    def fit_release(path):
        return ["fit", "--data", str(path), "--already-noised", *fit], {}, None

    @case("shadowed-Y", "counts .npz: a 2 x 2 'Y.npy' beside a raw 'Y' of 12,000 x 12,000 int64 (1.1 GB), privatize")
    def _():
        path = h.shadowed_counts(folder / "shadowed.npz")
        return ["privatize", str(path), str(folder / "shadowed-out.npz"), "--epsilon", "1", "--force"], {}, None

    @case("release-bomb", "release, Y_obs 12,000 x 12,000 int64 zeros (1.1 GB in 1.1 MB), fit --already-noised")
    def _():
        return fit_release(h.release_bomb(folder / "bomb.npz"))

    @case("release-bomb-upload", "the same release uploaded to the dashboard (its upload handler)")
    def _():
        return [h.release_bomb(folder / "bomb.npz"), "bomb.npz"], {"mode": "upload"}, None

    @case("duplicate-Y_obs", "release with two members 'Y_obs.npy' (2 x 2, then 12,000 x 12,000)")
    def _():
        return fit_release(h.duplicate_release(folder / "twice.npz"))

    @case("raw-member", "release whose 'Y_obs' is a raw member of 1 GiB zeros (no .npy header)")
    def _():
        return fit_release(h.raw_member_release(folder / "raw.npz"))

    @case("lying-sizes", "release whose Y_obs header and zip directory claim 1.1 GB from 75 bytes")
    def _():
        return fit_release(h.lying_sizes_release(folder / "liar.npz"))

    @case("corrupt-release", "release with 16 bytes of Y_obs's deflate stream flipped")
    def _():
        return fit_release(h.corrupt_release(folder / "corrupt.npz"))

    @case("truncated-release", "a 300 x 300 release cut in half")
    def _():
        Y_obs = np.arange(90000).reshape(300, 300) % 97 - 40
        data = h.write_members(folder / "whole.npz", h.release_members(Y_obs)).read_bytes()
        (folder / "half.npz").write_bytes(data[: len(data) // 2])
        return fit_release(folder / "half.npz")

    @case("fifo", "a FIFO named edges.csv as the input of privatize")
    def _():
        fifo = folder / "edges.csv"
        if not fifo.exists():
            os.mkfifo(fifo)
        return ["privatize", str(fifo), str(folder / "fifo-out.npz"), "--epsilon", "1"], {"timeout": 30}, None

    @case("long-path", "an input path of 5,000 characters")
    def _():
        return ["privatize", str(folder / ("a" * 5000)), str(folder / "long-out.npz"), "--epsilon", "1"], {}, None

    @case("permission", "an input the user may not read (mode 000; root runs without its override)")
    def _():
        secret = folder / "secret.csv"
        secret.write_text(counts.read_text())
        secret.chmod(0)
        options = {"prefix": h.without_permissions()}
        return ["privatize", str(secret), str(folder / "secret-out.npz"), "--epsilon", "1"], options, None

    @case("read-only-output", "privatize into a folder on a read-only file system (tmpfs, ro)")
    def _():
        target = folder / "ro"
        undo = _mount_tmpfs(target, "1m", read_only=True)
        return (
            ["privatize", str(counts), str(target / "out.npz"), "--epsilon", "1"],
            {"cleanup": undo},
            lambda: f"left in ro/: {_listing(target)}",
        )

    @case("full-disk", "fit --method all --output DIR of 200 x 200 counts on a 512 KiB file system (tmpfs)")
    def _():
        disk = folder / "small"
        undo = _mount_tmpfs(disk, "512k")
        data = folder / "topics200.npz"
        np.savez(data, Y=np.random.default_rng(0).poisson(3.0, size=(200, 200)))
        arguments = ["fit", "--data", str(data), "--method", "all", "--epsilon", "1", "--seed", "1", *fit]
        return (
            [*arguments, "--output", str(disk / "run")],
            {"cleanup": undo},
            lambda: f"left on the disk: {_listing(disk)}; in run/: {_listing(disk / 'run')}",
        )

    @case("dangling-symlink", "privatize OUTPUT where OUTPUT is a symbolic link to nothing, no --force")
    def _():
        link = folder / "link.npz"
        if os.path.lexists(link):
            link.unlink()
        link.symlink_to(folder / "nowhere" / "target.npz")
        return (
            ["privatize", str(counts), str(link), "--epsilon", "1"],
            {},
            lambda: f"OUTPUT afterwards: {'still the link' if link.is_symlink() else 'replaced by a file'}",
        )

    for label, first in (("nan", "x,y,nan"), ("hex", "x,y,0x10")):

        @case(f"edges-first-{label}", f"edge list whose first line is '{first}', then 'a,c,1', 'b,c,2'")
        def _(first=first, label=label):
            path = folder / f"first-{label}.csv"
            path.write_text(f"{first}\na,c,1\nb,c,2\n")
            out = folder / f"first-{label}.npz"
            return (
                ["privatize", str(path), str(out), "--epsilon", "1", "--force"],
                {},
                lambda: f"edges kept: {_edges(out)}",
            )

    @case("self-loops-only", "edge list of self loops only (a,a,3 ...), fit --epsilon 1")
    def _():
        path = folder / "loops.csv"
        path.write_text("a,a,3\nb,b,5\nc,c,1\n")
        return ["fit", "--data", str(path), "--epsilon", "1", "--seed", "0", *fit], {}, None

    @case("alpha-near-1", "privatize --alpha 0.9999999999999999")
    def _():
        out = folder / "alpha1.npz"
        return ["privatize", str(counts), str(out), "--alpha", "0.9999999999999999", "--force"], {}, None

    @case("alpha-1e-320", "privatize --alpha 1e-320")
    def _():
        return ["privatize", str(counts), str(folder / "alpha0.npz"), "--alpha", "1e-320", "--force"], {}, None

    @case("contradicting-release", "release recording epsilon = 1, N = 1 (alpha 0.368) but alpha = 0.5")
    def _():
        path = h.write_members(
            folder / "contradicts.npz", h.release_members(np.ones((3, 3), int), 0.5, epsilon=1.0, N=1.0)
        )
        return fit_release(path)

    @case("byte-labels", "counts .npz with its vocabulary as bytes, privatize --labels public to .csv")
    def _():
        path = folder / "bytes.npz"
        np.savez(path, Y=np.array([[1, 2], [3, 4]]), vocab=np.array([b"x0", b"x1"]))
        out = folder / "bytes.csv"
        return (
            ["privatize", str(path), str(out), "--epsilon", "1", "--labels", "public", "--force"],
            {},
            lambda: f"header line: {out.read_text().splitlines()[0] if out.exists() else '-'}",
        )

    @case("fit-output-labels", "fit --output on an edge list of named actors (no --labels given)")
    def _():
        out = folder / "named-run"
        shutil.rmtree(out, ignore_errors=True)
        arguments = ["fit", "--data", str(counts), "--epsilon", "1", "--seed", "0", *fit, "--output", str(out)]
        return arguments, {}, lambda: f"release.npz labels: {_members(out / 'release.npz', 'row_labels')}"

    @case("source-key-name", "counts .npz whose own 'source' key says /home/alice/private/enron-ceo.csv")
    def _():
        path = folder / "counts.npz"
        np.savez(path, Y=np.array([[1, 2], [3, 4]]), source=np.array("/home/alice/private/enron-ceo.csv"))
        out = folder / "named.npz"
        return (
            ["privatize", str(path), str(out), "--epsilon", "1", "--force"],
            {},
            lambda: f"release name: {_members(out, 'name')}",
        )

    # ---- issue 38: counts the samplers can handle, and the low items on inputs
    def big_release(path):
        big = np.array([[2**55, 1], [0, 1]])
        np.savez(path, format=np.asarray("lpviz-release-1"), Y_obs=big, alpha=np.asarray(0.5))
        return path

    @case("noised-2**55", "release Y_obs [[2**55, 1], [0, 1]], alpha 0.5, fit --already-noised (default sampler)")
    def _():
        return ["fit", "--data", str(big_release(folder / "big.npz")), "--already-noised", *fit], {"timeout": 45}, None

    @case("noised-2**55-upload", "the same release uploaded to the dashboard")
    def _():
        return [big_release(folder / "big.npz"), "big.npz"], {"mode": "upload"}, None

    @case("summed-past-2**53", "edge list of 6 lines, three 'a,b,9007199254740990' (sum 2.7e16), fit --epsilon 1")
    def _():
        path = folder / "summed.csv"
        path.write_text("a,b,9007199254740990\nb,c,1\na,b,9007199254740990\nc,a,2\na,b,9007199254740990\nb,a,1\n")
        return ["fit", "--data", str(path), "--epsilon", "1", "--seed", "0", *fit], {"timeout": 45}, None

    @case("summed-past-2**63", "edge list, 1,100 lines 'a,b,9007199254740000' (sum 9.9e18 > 2**63), privatize")
    def _():
        path = folder / "wrap.csv"
        path.write_text("a,b,9007199254740000\n" * 1100 + "b,a,1\n")
        return ["privatize", str(path), str(folder / "wrap-out.npz"), "--epsilon", "1", "--force"], {}, None

    @case("summed-past-bound", "edge list, three 'a,b,400000000000' (each within 10**12, sum 1.2e12), privatize")
    def _():
        path = folder / "sum.csv"
        path.write_text("a,b,400000000000\nb,a,1\na,b,400000000000\na,b,400000000000\n")
        return ["privatize", str(path), str(folder / "sum-out.npz"), "--epsilon", "1", "--force"], {}, None

    @case("csr-wrap", "CSR .npz, cell (0, 1) stored 1,100 times as 2**53 - 1 (sums past 2**63), privatize")
    def _():
        path = folder / "csr.npz"
        n = 1100
        np.savez(
            path,
            Y_data=np.full(n + 1, 2**53 - 1, dtype=np.int64),
            Y_indices=np.r_[np.ones(n, dtype=np.int64), 0],
            Y_indptr=np.array([0, n, n + 1]),
            Y_shape=np.array([2, 2]),
        )
        return ["privatize", str(path), str(folder / "csr-out.npz"), "--epsilon", "1", "--force"], {}, None

    @case("quoted-comma", 'edge list whose first name is "Smith, J" (quoted), privatize')
    def _():
        path = folder / "quoted.csv"
        path.write_text('"Smith, J",b,3\nb,c,2\n"Smith, J",c,1\n')
        out = folder / "quoted-out.npz"
        return ["privatize", str(path), str(out), "--epsilon", "1", "--force"], {}, lambda: _shape(out)

    @case("symmetric-2x3", "'symmetric' Matrix Market file declaring 2 x 3, privatize")
    def _():
        path = folder / "sym.mtx"
        path.write_text("%%MatrixMarket matrix coordinate integer symmetric\n2 3 2\n1 2 5\n2 2 1\n")
        out = folder / "sym-out.npz"
        return ["privatize", str(path), str(out), "--epsilon", "1", "--force"], {}, lambda: _shape(out)

    @case("seed-23-digits", "privatize --simulate --seed 11111111111111111111111")
    def _():
        out = folder / "seed-out.npz"
        arguments = ["privatize", str(counts), str(out), "--epsilon", "1", "--simulate", "--seed", "1" * 23, "--force"]
        return arguments, {}, None

    @case("limit-5000-digits", "privatize with LPVIZ_MEMORY_LIMIT of 5,000 nines")
    def _():
        out = folder / "limit-out.npz"
        return ["privatize", str(counts), str(out), "--epsilon", "1", "--force"], {"env": {"9" * 5000}}, None

    @case("zip-250000-members", "counts .npz whose end record claims 10 members, directory holds 250,000, privatize")
    def _():
        path = folder / "members.npz"
        if not path.exists():
            import zipfile

            with zipfile.ZipFile(path, "w") as archive:
                archive.writestr("Y.npy", _npy_bytes(np.array([[1, 2], [3, 4]])))
                for i in range(250_000):  # short names: the directory stays under its 16 MiB cap
                    archive.writestr(f"{i}", b"")
            data = bytearray(path.read_bytes())
            end = data.rfind(b"PK\x05\x06")
            data[end + 8 : end + 12] = (10).to_bytes(2, "little") * 2
            record = data.rfind(b"PK\x06\x06")  # the zip64 record (250,000 > 65,535 members) claims 10 too
            data[record + 24 : record + 40] = (10).to_bytes(8, "little") * 2
            path.write_bytes(bytes(data))
        return ["privatize", str(path), str(folder / "members-out.npz"), "--epsilon", "1", "--force"], {}, None

    library = "import numpy as np, scipy.sparse as sp; from lpviz.privacy import privatize; "

    @case("masked-array", "privatize(np.ma.masked_array([[1, 2], [3, 4]], mask=[[0, 1], [0, 0]]), epsilon=1)")
    def _():
        code = library + "r = privatize(np.ma.masked_array([[1, 2], [3, 4]], mask=[[0, 1], [0, 0]]), epsilon=1)"
        return [code + "; print('released', r.Y_obs.tolist())"], {"mode": "python"}, None

    @case("labels-generator", "privatize(np.ones((2, 3)), ..., row_labels=(x for x in 'ab'))")
    def _():
        code = library + "r = privatize(np.ones((2, 3), int), epsilon=1, row_labels=(x for x in 'ab'))"
        return [code + "; print('row_labels', r.row_labels)"], {"mode": "python"}, None

    @case("dok-matrix", "privatize(scipy.sparse.dok_matrix of 3 x 3, epsilon=1)")
    def _():
        code = library + "d = sp.dok_matrix((3, 3), dtype=np.int64); d[0, 1] = 5; r = privatize(d, epsilon=1)"
        return [code + "; print('released', r.shape)"], {"mode": "python"}, None

    return cases


def _npy_bytes(array):
    import io

    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def _shape(path):
    if not path.exists():
        return "no file"
    with np.load(path) as archive:
        return "Y_obs " + " x ".join(map(str, archive["Y_obs"].shape))


def _edges(path):
    if not path.exists():
        return "no file"
    with np.load(path) as archive:
        n = archive["Y_obs"].shape[0]
        return f"{n} actors" + (" (x and y went with line 1)" if n == 3 else "")


def _members(path, key):
    if not path.exists():
        return "no file"
    with np.load(path) as archive:
        return repr(archive[key].tolist()) if key in archive.files else "none"


def hostile_io(args):
    import hostile_files

    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="lpviz-hostile-io-"))
    folder.mkdir(parents=True, exist_ok=True)
    cases = io_cases(folder)
    if args.cases:
        cases = {name: cases[name] for name in args.cases}
    src = Path(args.src or REPO)
    limit = os.environ.get("LPVIZ_MEMORY_LIMIT", "600M")
    print(f"lpviz from {src}; LPVIZ_MEMORY_LIMIT={limit}; address space capped at {args.address_limit}")
    print("| case | what | outcome | exit | seconds | peak RSS | left behind |\n|---|---|---|---|---|---|---|")
    for name, (what, setup) in cases.items():
        try:
            arguments, options, observe = setup()
        except (OSError, subprocess.CalledProcessError) as error:
            print(f"| {name} | {what} | not run: {error} | | | | |")
            continue
        cleanup = options.pop("cleanup", None)
        env = {"LPVIZ_MEMORY_LIMIT": limit}
        if "env" in options:  # a case's own memory limit
            env["LPVIZ_MEMORY_LIMIT"] = next(iter(options.pop("env")))
        try:
            result = hostile_files.run_measured(
                arguments,
                src=src,
                env=env,
                address_limit=_parse_size(args.address_limit),
                timeout=options.pop("timeout", args.timeout),
                cwd=str(folder),
                **options,
            )
            left = observe() if observe else ""
        finally:
            if cleanup:
                cleanup()
        peak = f"{result['peak'] / 2**20:.0f} MiB" if result["peak"] > 0 else "-"
        outcome = result["outcome"].replace("|", "/").replace(str(folder), "DIR")[:400]
        seconds = result.get("seconds", float("nan"))
        seconds = f"{seconds:.2f}" if seconds == seconds else "-" if result["code"] is not None else "killed"
        print(f"| {name} | {what} | {outcome} | {result['code']} | {seconds} | {peak} | {left} |", flush=True)


def _memory_of(pid):
    """(VmRSS, VmHWM) of a process, in MiB."""
    values = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(("VmRSS:", "VmHWM:")):
                values[line.split(":")[0]] = int(line.split()[1]) / 1024
    return values["VmRSS"], values["VmHWM"]


def served_upload(args):
    """Upload a release bomb to a served dashboard (``python -m lpviz.dashboard.serve``) through Debian's chromium,
    as a user would, and print the server's memory before and after and what the session shows; then
    check that a second session still opens."""
    import socket

    import hostile_files
    from playwright.sync_api import sync_playwright

    from lpviz.dashboard.session.settings import SOURCES

    src = Path(args.src or REPO)
    folder = Path(tempfile.mkdtemp(prefix="lpviz-served-upload-"))
    bomb = hostile_files.release_bomb(folder / "bomb.npz", shape=(args.bomb_side, args.bomb_side))
    port = 5800 + os.getpid() % 100
    limit = os.environ.get("LPVIZ_MEMORY_LIMIT", "600M")
    env = {**os.environ, "LPVIZ_MEMORY_LIMIT": limit, "PYTHONPATH": str(src)}
    log = open(folder / "server.log", "w")
    server = subprocess.Popen(
        [sys.executable, "-m", "lpviz.dashboard.serve", "--port", str(port)], cwd=src, env=env, stdout=log, stderr=log
    )
    url = f"http://127.0.0.1:{port}/app"
    try:
        for _ in range(480):  # the port answers; fetching the page here would build (and abandon) sessions
            try:
                socket.create_connection(("127.0.0.1", port), timeout=5).close()
                break
            except OSError:
                time.sleep(0.5)
        label = SOURCES["upload"].label
        print(
            f"lpviz from {src}; LPVIZ_MEMORY_LIMIT={limit}; bomb {bomb.name}: {bomb.stat().st_size:,} bytes, "
            f"Y_obs {args.bomb_side:,} x {args.bomb_side:,} int64"
        )
        with sync_playwright() as playwright:
            arguments = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run"]
            arguments += ["--disable-background-networking", "--disable-component-update", "--disable-sync"]
            browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=arguments)
            page = browser.new_context().new_page()
            page.set_default_timeout(300_000)
            opened = time.perf_counter()
            page.goto(url, timeout=900_000)
            page.wait_for_function("() => window.Bokeh && window.Bokeh.documents.length > 0", timeout=900_000)
            page.get_by_text("Noise changed").first.wait_for(timeout=900_000)
            print(f"the first session drew its first view in {time.perf_counter() - opened:.0f} s", flush=True)
            time.sleep(3)
            before = _memory_of(server.pid)
            print(f"server before the upload: RSS {before[0]:.0f} MiB (peak so far {before[1]:.0f} MiB)", flush=True)
            page.locator(f"select:has(option:text-is('{label}'))").first.select_option(label=label)
            start = time.perf_counter()
            page.locator("input[type=file]").set_input_files(str(bomb))
            page.get_by_text(re.compile(r"bomb\.npz")).first.wait_for()
            seconds = time.perf_counter() - start
            time.sleep(2)
            message = page.get_by_text(re.compile(r"bomb\.npz")).first.inner_text()
            after = _memory_of(server.pid)
            print(f"the session shows after {seconds:.1f} s: {' '.join(message.split())[:400]}")
            print(
                f"server after the upload: RSS {after[0]:.0f} MiB, peak {after[1]:.0f} MiB "
                f"(+{after[1] - before[0]:.0f} MiB over the RSS before)"
            )
            other = browser.new_context().new_page()
            opened = time.perf_counter()
            other.goto(url, timeout=900_000)
            other.get_by_text("Noise changed").first.wait_for(timeout=900_000)
            print(
                f"a second session opened and drew its first view in {time.perf_counter() - opened:.0f} s; "
                f"server alive: {server.poll() is None}; its RSS now {_memory_of(server.pid)[0]:.0f} MiB"
            )
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=60)
        log.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=39861)
    parser.add_argument("--words", type=int, default=28102)
    parser.add_argument("--nnz", type=int, default=3710420)
    parser.add_argument("--hostile", action="store_true", help="run the hostile-input cases instead")
    parser.add_argument(
        "--hostile-io",
        action="store_true",
        help="run issue 20's cases (archives, files, outputs, parameters, labels) through the CLI and the "
        "dashboard's upload handler, each in its own process; root mounts small tmpfs for a full disk",
    )
    parser.add_argument("--cases", nargs="*", help="only these hostile cases")
    parser.add_argument(
        "--served-upload",
        action="store_true",
        help="upload a release bomb to a served dashboard in chromium; print the server's memory",
    )
    parser.add_argument("--bomb-side", type=int, default=12000, help="rows = columns of the release bomb")
    parser.add_argument("--src", default=None, help="folder holding the lpviz package to measure")
    parser.add_argument("--keep", default=None, help="write the hostile files here (and keep them)")
    parser.add_argument("--address-limit", default="8G", help="address space of each case's process")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds before a case is killed")
    parser.add_argument("--run-case", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--dir", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--tiny", action="store_true", help="2,000 x 1,000, 20,000 nonzeros (the test suite's run)")
    args = parser.parse_args()
    if args.tiny:
        args.docs, args.words, args.nnz = 2_000, 1_000, 20_000
    if args.run_case:
        _run_case(args.run_case, Path(args.dir))
        return
    if args.hostile_io:
        hostile_io(args)
        return
    if args.served_upload:
        served_upload(args)
        return
    if args.hostile:
        hostile(args)
        return
    with tempfile.TemporaryDirectory() as tmp:
        docword, mtx, truth = write_files(Path(tmp), args.docs, args.words, args.nnz)
        print(
            f"{truth.shape[0]:,} x {truth.shape[1]:,}, {truth.nnz:,} nonzeros "
            f"(docword {docword.stat().st_size / 2**20:.0f} MB)"
        )
        rows = [
            ("UCI docword   lpviz load_counts", lambda: load_counts(docword).Y),
            ("              np.loadtxt + csr ", lambda: reference_uci(docword)),
            ("Matrix Market lpviz load_counts", lambda: load_counts(mtx).Y),
            ("              scipy.io.mmread  ", lambda: sp.csr_matrix(scipy.io.mmread(mtx))),
        ]
        for label, function in rows:
            Y, seconds, peak = measure(function)
            assert (Y != truth).nnz == 0, label
            print(f"{label}  {seconds:7.2f} s   peak {peak:7.0f} MiB")


if __name__ == "__main__":
    main()
