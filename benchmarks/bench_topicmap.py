"""Speed and memory of the topic map's computations (``lpviz.topicmap``), what the Topic map tab
runs for each method whenever a new best sample arrives (in a worker thread when served).

Prints, for the app's sizes (Figure 3, the browser's Enron preset) and the paper's (Enron,
K = 50 topics over 10,000 words): seconds and peak memory of one fit's map
(:func:`lpviz.topicmap.topic_map`), of matching three methods' topics to a reference
(:func:`lpviz.topicmap.align_to_reference`, lpviz.metrics' Hungarian matching) and of one bar
ranking, next to plain references timed in the same run:

- ``scipy JS``: ``scipy.spatial.distance.pdist`` with ``jensenshannon`` (base 2), the same distances;
- ``sklearn MDS``: ``sklearn.manifold.MDS`` (SMACOF, metric) on the same distances, for scale
  (classical scaling is one eigendecomposition).

Run: ``.venv/bin/python benchmarks/bench_topicmap.py`` (``--tiny``: Figure 3's size only, one timed call
each: seconds, for the test suite)
"""

import argparse
import time
import tracemalloc

import numpy as np
from scipy.spatial.distance import jensenshannon, pdist, squareform

from lpviz import topicmap

SIZES = (("Figure 3", 90, 3, 15), ("Enron, browser preset", 400, 10, 800), ("Enron, paper", 10_000, 50, 10_000))


REPEAT = 3


def timed(function, repeat=None):
    """Best wall time of ``repeat`` calls and the peak traced memory of one, in MB."""
    best = np.inf
    for _ in range(REPEAT if repeat is None else min(repeat, REPEAT)):
        start = time.perf_counter()
        result = function()
        best = min(best, time.perf_counter() - start)
    tracemalloc.start()
    function()
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return best, peak, result


def bench(name, n_docs, n_topics, n_words, rng):
    """Print one size's rows."""
    from sklearn.manifold import MDS

    theta = rng.gamma(1.0, 1.0, (n_docs, n_topics))
    phis = [rng.gamma(0.1, 1.0, (n_topics, n_words)) for _ in range(3)]
    rows = []
    seconds, peak, topic_map = timed(lambda: topicmap.topic_map(theta, phis[0]))
    rows.append(("topic_map (one fit)", seconds, peak))
    topics = {f"method {i}": phi for i, phi in enumerate(phis)}
    seconds, peak, _ = timed(lambda: topicmap.align_to_reference(topics, "method 0"))
    rows.append(("align 3 methods", seconds, peak))
    seconds, peak, _ = timed(lambda: topic_map.top_words(0, 0.6, 15))
    rows.append(("bars of one topic", seconds, peak))
    seconds, peak, ours = timed(lambda: topicmap.jensen_shannon_distances(phis[0]))
    rows.append(("JS distances", seconds, peak))
    p = phis[0] / phis[0].sum(axis=1, keepdims=True)
    seconds, peak, reference = timed(lambda: squareform(pdist(p, lambda u, v: jensenshannon(u, v, base=2))), 1)
    rows.append(("  scipy JS (reference)", seconds, peak))
    assert np.allclose(ours, reference, atol=1e-9)
    seconds, peak, _ = timed(lambda: topicmap.classical_mds(ours))
    rows.append(("classical MDS", seconds, peak))
    seconds, peak, _ = timed(lambda: MDS(dissimilarity="precomputed", random_state=0, n_init=1).fit_transform(ours), 1)
    rows.append(("  sklearn MDS (reference)", seconds, peak))
    for what, seconds, peak in rows:
        print(f"{name:<24}{what:<26}{seconds:>10.4f}{peak:>10.1f}")


def main():
    global REPEAT
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tiny", action="store_true", help="Figure 3's size only (the test suite's run)")
    tiny = parser.parse_args().tiny
    REPEAT = 1 if tiny else REPEAT
    rng = np.random.default_rng(0)
    print(f"{'size':<24}{'what':<26}{'seconds':>10}{'peak MB':>10}")
    for size in SIZES[:1] if tiny else SIZES:
        bench(*size, rng)


if __name__ == "__main__":
    main()
