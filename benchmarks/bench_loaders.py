"""Speed and memory of the generic loaders against plain references, on files written here.

    .venv/bin/python benchmarks/bench_loaders.py [--nnz 3710420]

The default size is the UCI Enron bag-of-words (39,861 emails, 28,102 words,
3,710,420 nonzeros). Loads a UCI docword file and the same counts as Matrix
Market, each with lpviz's checks (line-numbered errors), beside
``np.loadtxt`` + ``scipy.sparse`` and ``scipy.io.mmread`` with no checks.
Prints seconds and peak traced memory; lpviz should stay within a small
factor of the references.
"""

import argparse
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np
import scipy.io
import scipy.sparse as sp

from lpviz.datasets import load_counts


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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=39861)
    parser.add_argument("--words", type=int, default=28102)
    parser.add_argument("--nnz", type=int, default=3710420)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        docword, mtx, truth = write_files(Path(tmp), args.docs, args.words, args.nnz)
        print(f"{truth.shape[0]:,} x {truth.shape[1]:,}, {truth.nnz:,} nonzeros "
              f"(docword {docword.stat().st_size / 2**20:.0f} MB)")
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
