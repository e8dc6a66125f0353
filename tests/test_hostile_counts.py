"""Issue 38, round 2 of hostile inputs: counts the samplers can handle (one bound on every count,
true or noised, held after repeated entries are added up, exactly), every long kernel stopping on
SIGTERM and Ctrl-C, and the low items on inputs (masked arrays, generators, quoted CSV fields,
symmetric non-square Matrix Market files, any scipy sparse format, huge seeds and limits, a zip
that hides its members)."""

import os
import signal
import struct
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import lpviz
from lpviz._files import MAX_MEMBERS, open_archive
from lpviz.datasets import load_counts
from lpviz.privacy import privatize
from lpviz.release import MAX_COUNT, Release, summed_counts

REPO = Path(__file__).resolve().parents[1]
FIT = dict(model="topics", method="naive", n_components=2, n_iter=3, burn_in=0, thin=1, random_state=0)


# ---------------------------------------------------------------- the bound, where counts enter


def test_a_release_holds_counts_up_to_the_bound_and_refuses_one_beyond_naming_the_cell():
    Release(Y_obs=np.array([[MAX_COUNT, 1], [-MAX_COUNT, 1]]), alpha=0.5)  # the bound itself is fine
    with pytest.raises(ValueError, match=r"Y_obs, cell \(0, 0\): a count of 36,028,797,018,963,968, beyond .*10\*\*12"):
        Release(Y_obs=np.array([[2**55, 1], [0, 1]]), alpha=0.5)  # the issue's hang
    with pytest.raises(ValueError, match=r"cell \(1, 0\): a count of -1,000,000,000,001"):
        Release(Y_obs=np.array([[0, 1], [-MAX_COUNT - 1, 1]]), alpha=0.5)
    with pytest.raises(ValueError, match=r"cell \(0, 1\).*beyond"):
        Release(Y_obs=np.array([[0, 2**64 - 1]], dtype=np.uint64).reshape(1, 2), alpha=0.5)


def test_release_load_refuses_a_file_whose_noised_count_is_beyond_the_bound(tmp_path):
    path = tmp_path / "big.npz"
    np.savez(path, format=np.asarray("lpviz-release-1"), Y_obs=np.array([[2**55, 1], [0, 1]]), alpha=np.asarray(0.5))
    with pytest.raises(ValueError, match=r"big\.npz: not a valid release: Y_obs, cell \(0, 0\).*beyond"):
        Release.load(path)


def test_the_dashboard_upload_refuses_the_same_release(tmp_path):
    from lpviz.dashboard.session.datastore import DataStore
    from lpviz.dashboard.session.settings import Settings

    path = tmp_path / "big.npz"
    np.savez(path, format=np.asarray("lpviz-release-1"), Y_obs=np.array([[2**55, 1], [0, 1]]), alpha=np.asarray(0.5))
    store = DataStore(Settings(), background=False)
    with pytest.raises(ValueError, match=r"cell \(0, 0\).*beyond the largest count lpviz fits"):
        store.load_upload(path.read_bytes(), "big.npz")


def test_fit_refuses_an_array_beyond_the_bound_and_adds_sparse_duplicates_exactly():
    with pytest.raises(ValueError, match=r"Y_obs, cell \(0, 1\): a count of 9,007,199,254,740,993"):
        lpviz.fit(np.array([[1, 2**53 + 1], [1, 1]]), **FIT)
    # each entry within the bound, their sum not: refused, never wrapped
    three = sp.coo_matrix((np.full(3, 4 * 10**11), (np.zeros(3, int), np.ones(3, int))), shape=(2, 2))
    with pytest.raises(ValueError, match=r"Y_obs, cell \(0, 1\): its repeated entries add up to more than 10\*\*12"):
        lpviz.fit(three, **FIT)
    # any scipy sparse format: a dok_matrix fits like its dense twin
    dense = np.array([[3, 1], [1, 2]])
    from_dok = lpviz.fit(sp.dok_matrix(dense), **FIT).rate_rows(0, 2)
    assert np.array_equal(from_dok, lpviz.fit(dense, **FIT).rate_rows(0, 2))


def test_a_masked_array_is_refused_by_fit_and_privatize_rather_than_its_mask_ignored():
    masked = np.ma.masked_array([[1, 2], [3, 4]], mask=[[0, 1], [0, 0]])
    with pytest.raises(TypeError, match=r"masked array.*filled\(0\).*mask=~np\.ma\.getmaskarray"):
        lpviz.fit(masked, **FIT)
    with pytest.raises(TypeError, match=r"masked array: privatize would noise and release the values under its mask"):
        privatize(masked, epsilon=1)


def test_privatize_bounds_true_counts_and_refuses_noise_that_takes_a_count_past_the_bound():
    with pytest.raises(ValueError, match=r"^Y, cell \(0, 0\): a count of 1,000,000,000,001"):
        privatize(np.array([[MAX_COUNT + 1, 0]]).reshape(1, 2), epsilon=1)
    # alpha near 1: the noise's scale is ~1e5, so a count at the bound almost surely leaves it
    with pytest.raises(ValueError, match=r"the noise took a count past \|count\| <= 1,000,000,000,000"):
        privatize(np.full((4, 4), MAX_COUNT), alpha=0.99999, random_state=0)


def test_privatize_reads_a_generator_of_labels_and_any_sparse_format():
    release = privatize(np.ones((2, 3), int), epsilon=1, random_state=0, row_labels=(x for x in "ab"))
    assert release.row_labels == ("a", "b")
    dok = sp.dok_matrix((3, 3), dtype=np.int64)
    dok[0, 1], dok[2, 0] = 5, 7
    from_dok = privatize(dok, epsilon=1, random_state=3)
    assert np.array_equal(from_dok.Y_obs, privatize(dok.toarray(), epsilon=1, random_state=3).Y_obs)
    # a COO with repeated entries is added up (5 + 6 = 11 in cell (0, 1)) before the noise
    coo = sp.coo_matrix(([5, 6], ([0, 0], [1, 1])), shape=(2, 2))
    assert np.array_equal(privatize(coo, alpha=1e-13, allow_no_noise=True, random_state=0).Y_obs, [[0, 11], [0, 0]])


# ---------------------------------------------------------------- loaders: summed after duplicates


def test_an_edge_list_whose_repeated_pairs_add_up_past_the_bound_is_refused_naming_the_pair(tmp_path):
    path = tmp_path / "edges.csv"
    path.write_text("a,b,400000000000\nb,c,1\na,b,400000000000\nc,a,2\na,b,400000000000\nb,a,1\n")
    with pytest.raises(ValueError, match=r"edges\.csv, the pair 'a' -> 'b': its repeated entries add up to more"):
        load_counts(path)
    path.write_text("a,b,500000000000\nb,c,1\na,b,500000000000\n")  # exactly the bound: kept, exactly
    assert load_counts(path).Y[0, 1] == MAX_COUNT


def test_the_issue_s_edge_list_of_counts_each_below_2_53_is_refused_per_line(tmp_path):
    path = tmp_path / "edges.csv"
    path.write_text("a,b,9007199254740990\nb,c,1\na,b,9007199254740990\nc,a,2\na,b,9007199254740990\nb,a,1\n")
    with pytest.raises(ValueError, match=r"edges\.csv, line 1: a count of 9,007,199,254,740,990, beyond"):
        load_counts(path)


def test_repeated_entries_of_mtx_uci_and_csr_npz_files_are_added_exactly_and_bounded(tmp_path):
    mtx = tmp_path / "m.mtx"
    mtx.write_text(
        "%%MatrixMarket matrix coordinate integer general\n2 2 3\n1 2 600000000000\n2 1 1\n1 2 600000000000\n"
    )
    with pytest.raises(ValueError, match=r"m\.mtx, row 1, column 2 \(1-based\): its repeated entries add up"):
        load_counts(mtx)
    folder = tmp_path / "uci"
    folder.mkdir()
    (folder / "docword.x.txt").write_text("2\n2\n3\n1 1 700000000000\n2 2 1\n1 1 700000000000\n")
    (folder / "vocab.x.txt").write_text("w1\nw2\n")
    with pytest.raises(ValueError, match=r"row 1, column 1 \(1-based\): its repeated entries add up"):
        load_counts(folder)
    npz = tmp_path / "csr.npz"
    np.savez(
        npz,
        Y_data=np.array([MAX_COUNT, MAX_COUNT, 1]),
        Y_indices=np.array([1, 1, 0]),
        Y_indptr=np.array([0, 2, 3]),
        Y_shape=np.array([2, 2]),
    )
    with pytest.raises(ValueError, match=r"cell \(0, 1\) of Y \(its repeated entries\): its repeated entries add up"):
        load_counts(npz)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, MAX_COUNT), min_size=1, max_size=40), st.integers(0, 3))
def test_summed_counts_adds_exactly_and_refuses_exactly_past_the_bound(values, cells):
    """Whatever the entries (each within the bound), a cell's sum is the exact integer sum, and
    it is refused exactly when that sum passes the bound: no wrap, no rounding either way."""
    rows = np.zeros(len(values), dtype=np.int64)
    cols = np.arange(len(values)) % (cells + 1)
    coo = sp.coo_matrix((np.array(values, dtype=np.int64), (rows, cols)), shape=(1, cells + 1))
    sums = [sum(v for v, c in zip(values, cols, strict=True) if c == col) for col in range(cells + 1)]
    if max(sums) > MAX_COUNT:
        with pytest.raises(ValueError, match="repeated entries add up"):
            summed_counts(coo, "Y")
    else:
        assert summed_counts(coo, "Y").toarray()[0].tolist() == sums


_NAME = st.text(alphabet=st.sampled_from('ab, "x'), min_size=1, max_size=6).filter(
    lambda name: name.strip() and name.strip() == name
)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(_NAME, _NAME, st.integers(1, 9)), min_size=1, max_size=8))
def test_edge_list_names_with_separators_and_quotes_are_read_as_csv_quotes_them(tmp_path_factory, edges):
    """Names written by the csv module (commas and quotes inside quoted fields) come back as written."""
    import csv

    edges = [edge for edge in edges if edge[0] != edge[1]]
    if not edges:
        return
    path = tmp_path_factory.mktemp("q") / "edges.csv"
    with open(path, "w", newline="") as handle:
        csv.writer(handle).writerows(edges)
    data = load_counts(path, kind="edges", header=False)
    index = {label: i for i, label in enumerate(data.row_labels)}
    expected = {}
    for source, target, count in edges:
        expected[(source, target)] = expected.get((source, target), 0) + count
    Y = data.Y.toarray() if sp.issparse(data.Y) else data.Y
    assert {(s, t): int(Y[index[s], index[t]]) for s, t in expected} == expected
    assert int(Y.sum()) == sum(expected.values())


def test_a_quoted_csv_field_with_a_comma_is_one_field(tmp_path):
    path = tmp_path / "edges.csv"
    path.write_text('"Smith, J",b,3\nb,c,2\n"Smith, J",c,1\n')
    data = load_counts(path)
    assert data.row_labels == ["Smith, J", "b", "c"]
    assert data.Y.tolist() == [[0, 3, 1], [0, 0, 2], [0, 0, 0]]


def test_a_symmetric_matrix_market_file_must_be_square(tmp_path):
    path = tmp_path / "s.mtx"
    path.write_text("%%MatrixMarket matrix coordinate integer symmetric\n2 3 2\n1 2 5\n2 3 1\n")
    with pytest.raises(ValueError, match=r"s\.mtx, line 2: a symmetric matrix must be square, .* 2 x 3"):
        load_counts(path)
    path.write_text("%%MatrixMarket matrix coordinate integer symmetric\n2 2 2\n2 1 5\n2 2 1\n")
    assert load_counts(path).Y.toarray().tolist() == [[0, 5], [5, 1]]  # a square one is mirrored


# ---------------------------------------------------------------- seeds, limits, archives


def _cli(*arguments, env=None):
    return subprocess.run(
        [sys.executable, "-m", "lpviz", *arguments],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env={**os.environ, **(env or {})},
    )


def test_a_seed_of_23_digits_is_one_clear_line(tmp_path):
    counts = tmp_path / "edges.csv"
    counts.write_text("a,b,3\nb,c,1\n")
    result = _cli("privatize", str(counts), str(tmp_path / "out.npz"), "--epsilon", "1", "--seed", "1" * 23)
    assert result.returncode == 2, result.stderr
    assert "--seed must be a whole number from 0 to 2**63 - 1, got 11111111111111111111111" in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "out.npz").exists()


def test_a_memory_limit_of_5000_digits_is_one_clear_line(tmp_path):
    counts = tmp_path / "edges.csv"
    counts.write_text("a,b,3\nb,c,1\n")
    result = _cli(
        "privatize", str(counts), str(tmp_path / "out.npz"), "--epsilon", "1", env={"LPVIZ_MEMORY_LIMIT": "9" * 5000}
    )
    assert result.returncode == 2, result.stderr
    assert "LPVIZ_MEMORY_LIMIT='99999" in result.stderr and "larger than any memory" in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr) < 400


def test_a_zip_that_claims_10_members_but_holds_more_than_the_cap_is_refused(tmp_path):
    path = tmp_path / "many.npz"
    with zipfile.ZipFile(path, "w") as archive:
        for i in range(MAX_MEMBERS + 100):
            archive.writestr(f"m{i}.npy", b"")
    data = bytearray(path.read_bytes())
    end = data.rfind(b"PK\x05\x06")
    data[end + 8 : end + 12] = struct.pack("<HH", 10, 10)  # the end record's two entry counts
    path.write_bytes(bytes(data))
    with zipfile.ZipFile(path) as archive:  # what zipfile itself makes of it: every member
        assert len(archive.infolist()) == MAX_MEMBERS + 100
    refused = rf"many\.npz: the zip directory holds more than {MAX_MEMBERS:,} members though its end record claims 10"
    with pytest.raises(ValueError, match=refused):
        open_archive(path, what="archive", fix="fix")
    with zipfile.ZipFile(tmp_path / "few.npz", "w") as archive:  # an honest one still opens
        archive.writestr("a.npy", b"")
    with open_archive(tmp_path / "few.npz", what="archive", fix="fix") as archive:
        assert archive.keys() == ["a"]


# ---------------------------------------------------------------- every long kernel stops on request

# Worst-case allowed data: every count at the bound and the widest noise, where one cell costs
# milliseconds (a sweep of these 64 x 400 cells takes tens of seconds): only a stop checked
# inside the sweep ends such a fit quickly.
_SAMPLERS = {
    "private-collapsed": ["--already-noised", "--sampler", "collapsed"],
    "private-bessel": ["--already-noised", "--sampler", "bessel"],
    "private-vi": ["--already-noised", "--inference", "vi", "--tol", "0"],  # tol 0: still running at the signal
    "naive": ["--already-noised", "--method", "naive"],
    "nonprivate": ["--method", "nonprivate", "--alpha", "0.999999", "--seed", "0"],
}
# Generous: the test only guards against a hang; bench_stop.py measures the latency.
_EXIT_WITHIN = 30.0


def _worst_case_files(folder):
    Y = np.full((64, 400), MAX_COUNT, dtype=np.int64)
    Release(Y_obs=Y, alpha=0.999999).save(folder / "release.npz", overwrite=True)
    np.savez(folder / "counts.npz", Y=Y - 10**8)  # room for the noise the CLI adds (its scale is ~1e6)
    return folder / "release.npz", folder / "counts.npz"


def _start_fit(folder, sampler, release, counts):
    data = counts if sampler == "nonprivate" else release
    command = [sys.executable, "-m", "lpviz", "fit", "--data", str(data), *_SAMPLERS[sampler]]
    command += ["--components", "3", "--iterations", "100000", "--no-progress", "--output", str(folder / sampler)]
    return subprocess.Popen(
        command,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # a background shell ignores it
    )


def _wait_until_iterating(child):
    """The chain warns about the counts as it is made, just before its first sweep; a moment later
    the first sweep is under way (it lasts far longer)."""
    lines = []
    watchdog = threading.Timer(180.0, child.kill)  # never a hung test, whatever goes wrong
    watchdog.daemon = True
    watchdog.start()
    for line in child.stderr:
        lines.append(line)
        if "counts up to " in line:
            time.sleep(1.5)
            return lines
    raise AssertionError(f"the fit ended before iterating: {''.join(lines)}")


def test_cavi_refuses_worst_case_counts_its_exact_sums_cannot_hold(tmp_path):
    """CAVI sums its allocations in fixed point (exact in any order, so the same on any number of
    workers): expected counts of one column beyond 2**40 are refused in words, with the fix."""
    release, counts = _worst_case_files(tmp_path)
    child = _start_fit(tmp_path, "private-vi", release, counts)
    try:
        _, rest = child.communicate(timeout=180)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 2, rest
    assert "beyond the 1.1e+12 the variational fit's exact sums hold" in rest and "inference='mcmc'" in rest
    assert "Traceback" not in rest
    assert not (tmp_path / "private-vi").exists()


@pytest.mark.parametrize("sampler", [name for name in _SAMPLERS if name != "private-vi"])
def test_sigterm_ends_a_fit_of_worst_case_counts_with_a_clear_message(tmp_path, sampler):
    release, counts = _worst_case_files(tmp_path)
    child = _start_fit(tmp_path, sampler, release, counts)
    try:
        _wait_until_iterating(child)
        assert child.poll() is None, "the fit ended on its own: the data are not a worst case"
        child.send_signal(signal.SIGTERM)
        _, rest = child.communicate(timeout=_EXIT_WITHIN)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 143, rest
    assert rest.strip().splitlines()[-1] == "terminated"
    assert "Traceback" not in rest and "SystemError" not in rest
    assert not (tmp_path / sampler).exists()  # nothing half-written left


def test_ctrl_c_ends_the_cli_fit_and_a_library_fit_alike(tmp_path):
    release, counts = _worst_case_files(tmp_path)
    child = _start_fit(tmp_path, "private-collapsed", release, counts)
    try:
        _wait_until_iterating(child)
        child.send_signal(signal.SIGINT)
        _, rest = child.communicate(timeout=_EXIT_WITHIN)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 130 and rest.strip().splitlines()[-1] == "interrupted", rest
    # the library in the main thread of `python -c`: KeyboardInterrupt, not a SystemError or a hang
    code = (
        "import sys, lpviz; from lpviz.release import Release; "
        f"r = Release.load({str(release)!r}); print('start', file=sys.stderr, flush=True); "
        "lpviz.fit(r, n_components=3, n_iter=100000)"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=REPO,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        _wait_until_iterating(child)
        child.send_signal(signal.SIGINT)
        _, rest = child.communicate(timeout=_EXIT_WITHIN)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    # Python ends on an uncaught KeyboardInterrupt by the signal itself (exit status -SIGINT)
    assert child.returncode == -signal.SIGINT and rest.strip().splitlines()[-1] == "KeyboardInterrupt", rest
    assert "SystemError" not in rest
