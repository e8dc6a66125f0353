"""Central DP topic models (VIPS): accounting, the noise it takes, and fit speed.

Prints three things:

1. **Accountants, the paper's setting.** Park et al. (2016) ran private
   online LDA on 400,000 Wikipedia documents for one epoch with batches of
   S = 20,000 (q = 0.05, T = 20 steps) and noise multiplier 1.24, and reported
   epsilon = 2.44 from their 2016 moments accountant. The same mechanism
   accounted today by dp-accounting: RDP and PLD, at the paper's delta.

2. **What it would take** to reach epsilon in {0.5, 1, 2, 4} at delta = 1e-5
   on a 400,000-document corpus in one epoch, for several batch sizes: the
   calibrated noise multiplier (PLD, and RDP beside it), the steps, the
   per-entry noise standard deviation ``sigma * Delta`` (``Delta = a N``
   with the paper's ``a = 0.1``, ``N = 500`` tokens per document) against
   the typical entry of the batch statistic (``S N / (K V)`` with the
   paper's K = 50 topics and V = 8,000 words, before clipping), and the
   same ratio for the final topics ``lambda_T`` (the M-step averages the T
   noisy statistics with weights ``rho_t prod_{s>t} (1 - rho_s)``, so the
   noise in ``lambda_T`` relative to its signal is ``sigma Delta / mean *
   sqrt(sum w_t^2) / sum w_t``). The paper's published run (S = 20,000,
   sigma = 1.24) is the reference row: a setting whose final-topic ratio is
   at most the paper's is in (or beyond) the perplexity regime of its
   Figure 2.

3. **Fit speed**: seconds per step and total fit time of
   :class:`lpviz.central.PrivateLDA` (non-private, and private at
   epsilon = 1) against scikit-learn's ``LatentDirichletAllocation
   (learning_method="online")`` -- the plain reference -- on the same
   synthetic Enron-sized corpus (10,000 documents x 10,000 words, K = 50,
   about 110 tokens per document), one epoch each, plus the
   Hungarian-aligned distance of each fit to the true topics. ``--enron``
   also times the fits on the real Enron topic matrix. One epoch of Poisson
   sampling leaves about ``exp(-1)`` = 37% of the documents unseen (each
   step takes each document with probability q, T = 1/q times), where
   scikit-learn's sequential pass sees each once: so after one epoch the
   non-private PrivateLDA trails scikit-learn's distance somewhat.

    python benchmarks/bench_central.py            # everything: minutes (20 PLD calibrations, scikit-learn fits)
    python benchmarks/bench_central.py --quick    # RDP only in (2), a smaller corpus in (3)
    python benchmarks/bench_central.py --enron ../shared/data/enron_sent_subset.tar.gz
    python benchmarks/bench_central.py --tiny     # seconds: one row of (2) by RDP, a 1,000 x 300 corpus, K = 5 in (3)
"""

import argparse
import math
import time

import numpy as np
import scipy.sparse as sp

from lpviz import accounting
from lpviz.central import PrivateLDA
from lpviz.metrics import aligned_topic_distance

PAPER = dict(
    n_docs=400_000,
    batch_size=20_000,
    noise_multiplier=1.24,
    delta=1e-4,
    epsilon=2.44,
    n_topics=50,
    n_words=8_000,
    doc_length=500,
    clip=0.1,
)


# ---------------------------------------------------------------------------
# 1. accountants
# ---------------------------------------------------------------------------


def accountant_comparison():
    q = PAPER["batch_size"] / PAPER["n_docs"]
    steps = math.ceil(PAPER["n_docs"] / PAPER["batch_size"])
    sigma, delta = PAPER["noise_multiplier"], PAPER["delta"]
    print(f"1. The paper's Wikipedia run: q = {q}, sigma = {sigma}, T = {steps} steps, delta = {delta:g}")
    print(f"   {'accountant':<34} {'epsilon':>8} {'seconds':>8}")
    print(f"   {'Park et al. 2016 moments acct.':<34} {PAPER['epsilon']:>8.3f} {'-':>8}")
    for name in ("rdp", "pld"):
        started = time.perf_counter()
        value = accounting.epsilon(q, sigma, steps, delta, accountant=name)
        print(f"   {'dp-accounting ' + name.upper():<34} {value:>8.3f} {time.perf_counter() - started:>8.2f}")
    for name in ("rdp", "pld"):
        needed = accounting.noise_multiplier(PAPER["epsilon"], delta, q, steps, accountant=name)
        print(f"   noise multiplier for epsilon = 2.44 with {name.upper()}: {needed:.3f} (the paper used {sigma})")
    print()


# ---------------------------------------------------------------------------
# 2. what it would take
# ---------------------------------------------------------------------------


def lambda_noise_factor(steps, learning_offset=10.0, learning_decay=0.7):
    """sqrt(sum w_t^2) / sum w_t for the M-step weights w_t = rho_t prod_{s>t} (1 - rho_s)."""
    rho = (learning_offset + np.arange(1, steps + 1)) ** -learning_decay
    keep_after = np.append(np.cumprod((1 - rho)[::-1])[::-1][1:], 1.0)
    weights = rho * keep_after
    return math.sqrt(np.sum(weights**2)) / np.sum(weights)


def requirement_table(batch_sizes, epsilons, accountants, n_docs=400_000, delta=1e-5):
    sensitivity = PAPER["clip"] * PAPER["doc_length"]
    cells = PAPER["n_topics"] * PAPER["n_words"]

    def ratios(batch_size, sigma):
        mean_entry = batch_size * PAPER["doc_length"] / cells
        per_step = sigma * sensitivity / mean_entry
        return per_step, per_step * lambda_noise_factor(math.ceil(n_docs / batch_size))

    paper_step, paper_final = ratios(PAPER["batch_size"], PAPER["noise_multiplier"])
    print(
        f"2. What it takes: D = {n_docs:,} documents, one epoch, delta = {delta:g}; "
        f"Delta = a N = {PAPER['clip']} x {PAPER['doc_length']} = {sensitivity:g}; "
        f"K = {PAPER['n_topics']}, V = {PAPER['n_words']:,}"
    )
    print("   noise/mean = per-entry noise std over the mean entry of the batch statistic (S N / (K V));")
    print("   final = the same for the topics lambda_T after the M-step's averaging over T steps")
    print(f"   paper's run (S = 20,000, sigma = 1.24, T = 20): noise/mean {paper_step:.2f}, final {paper_final:.3f}")
    header = f"   {'epsilon':>7} {'S':>8} {'T':>5} {'q':>7}"
    for name in accountants:
        header += f" {'sigma ' + name.upper():>10}"
    main = accountants[0].upper()
    header += f" {'noise std':>10} {'mean entry':>10} {'noise/mean':>10} {'final':>7} {'vs paper':>8}   ({main})"
    print(header)
    for epsilon in epsilons:
        for batch_size in batch_sizes:
            q = batch_size / n_docs
            steps = math.ceil(n_docs / batch_size)
            sigmas = [accounting.noise_multiplier(epsilon, delta, q, steps, accountant=name) for name in accountants]
            per_step, final = ratios(batch_size, sigmas[0])
            mean_entry = batch_size * PAPER["doc_length"] / cells
            row = f"   {epsilon:>7g} {batch_size:>8,} {steps:>5} {q:>7.4f}"
            row += "".join(f" {sigma:>10.3f}" for sigma in sigmas)
            row += (
                f" {sigmas[0] * sensitivity:>10.1f} {mean_entry:>10.2f} {per_step:>10.2f} {final:>7.3f}"
                f" {final / paper_final:>7.2f}x"
            )
            print(row, flush=True)
    print("   vs paper <= 1x: the final topics are at most as noisy, relative to their signal, as in the")
    print("   paper's published run (its Figure 2 perplexity regime); larger batches buy that with fewer steps.")
    print()


# ---------------------------------------------------------------------------
# 3. fit speed against scikit-learn
# ---------------------------------------------------------------------------


def synthetic_corpus(n_docs, n_words, n_topics, mean_length, seed=0):
    """LDA documents with log-normal lengths (mean ``mean_length``) and sparse Dirichlet(0.01) topics."""
    rng = np.random.default_rng(seed)
    topics = rng.dirichlet(np.full(n_words, 0.01), n_topics)
    theta = rng.dirichlet(np.full(n_topics, 0.1), n_docs)
    lengths = np.maximum(1, np.round(rng.lognormal(np.log(mean_length) - 0.32, 0.8, n_docs))).astype(np.int64)
    doc_of_token = np.repeat(np.arange(n_docs), lengths)
    # inverse-CDF draws for all tokens at once: offset row d's CDF by d so one
    # searchsorted over the flattened cumulative sums serves every row
    topic_cdf = (np.cumsum(theta, axis=1) + np.arange(n_docs)[:, None]).ravel()
    topic = np.searchsorted(topic_cdf, doc_of_token + rng.random(len(doc_of_token))) - doc_of_token * n_topics
    topic = np.minimum(topic, n_topics - 1)
    word_cdf = (np.cumsum(topics, axis=1) + np.arange(n_topics)[:, None]).ravel()
    word = np.searchsorted(word_cdf, topic + rng.random(len(topic))) - topic * n_words
    word = np.minimum(word, n_words - 1)
    X = sp.csr_matrix((np.ones(len(word)), (doc_of_token, word)), shape=(n_docs, n_words))
    X.sum_duplicates()
    return X, topics


def time_fits(X, n_topics, batch_size, topics=None, label="", repeats=1):
    from sklearn.decomposition import LatentDirichletAllocation

    n_docs = X.shape[0]
    steps = math.ceil(n_docs / batch_size)
    print(
        f"   {label}: {n_docs:,} x {X.shape[1]:,}, {X.nnz:,} nonzeros, {X.sum() / n_docs:.0f} tokens/document, "
        f"K = {n_topics}, batch {batch_size}, one epoch ({steps} steps)"
    )
    print(f"   {'fit':<44} {'total s':>8} {'s/step':>8} {'accounting s':>12} {'distance':>8}")
    # compile (or load) the serial and the parallel E-step outside the timings
    PrivateLDA(n_topics, noise_multiplier=0, batch_size=10, random_state=0).fit(X[:20])
    PrivateLDA(n_topics, noise_multiplier=0, batch_size=1000, random_state=0).fit(X[:1000])
    runs = [
        ("PrivateLDA, noise_multiplier=0, clip=None", dict(noise_multiplier=0, clip=None)),
        ("PrivateLDA, epsilon=1 (PLD), clip=0.1, N=100", dict(epsilon=1.0, doc_length=100)),
    ]
    for name, params in runs:
        totals, loops = [], []
        for _ in range(repeats):  # best of the repeats (the machine may be shared)
            started = time.perf_counter()
            model = PrivateLDA(n_topics, batch_size=batch_size, random_state=0, **params).fit(X)
            totals.append(time.perf_counter() - started)
            loops.append(model.trace_.seconds.sum())
        total, step_seconds = min(totals), min(loops)
        distance = "" if topics is None else f"{aligned_topic_distance(model.components_, topics):8.3f}"
        print(
            f"   {name:<44} {total:>8.2f} {step_seconds / model.n_steps_:>8.4f} {total - step_seconds:>12.2f} "
            f"{distance}",
            flush=True,
        )
    totals = []
    for _ in range(repeats):
        started = time.perf_counter()
        reference = LatentDirichletAllocation(
            n_topics, learning_method="online", batch_size=batch_size, max_iter=1, total_samples=n_docs, random_state=0
        ).fit(X)
        totals.append(time.perf_counter() - started)
    total = min(totals)
    distance = "" if topics is None else f"{aligned_topic_distance(reference.components_, topics):8.3f}"
    print(
        f"   {'scikit-learn online LDA (reference)':<44} {total:>8.2f} {total / steps:>8.4f} {'-':>12} {distance}",
        flush=True,
    )


def speed(quick, enron, repeats, tiny=False):
    print(f"3. Fit speed, one epoch each, best of {repeats} run(s) (total includes the accounting and calibration of")
    print("   the private fit; s/step is the fit loop alone; distance = Hungarian-aligned TV distance to the")
    print("   true topics, after one epoch)")
    n_docs, n_words = (1_000, 300) if tiny else (3_000, 3_000) if quick else (10_000, 10_000)
    n_topics = 5 if tiny else 50
    X, topics = synthetic_corpus(n_docs, n_words, n_topics, 110)
    for batch_size in (128,) if tiny else (128, 1000):
        time_fits(X, n_topics, batch_size, topics, label="synthetic", repeats=repeats)
    if enron:
        from lpviz.datasets.enron import build_enron_topics

        data = build_enron_topics(enron)
        time_fits(sp.csr_matrix(data.Y), 50, 1000, label="Enron topic matrix", repeats=repeats)
    print()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="RDP only in the table, a smaller corpus for speed")
    parser.add_argument("--enron", metavar="TARBALL", help="also time the fits on the Enron topic matrix")
    parser.add_argument("--repeats", type=int, default=1, help="time each fit this many times, keep the best")
    parser.add_argument("--tiny", action="store_true", help="every section at its smallest, seconds (the test suite's)")
    args = parser.parse_args()
    accountant_comparison()
    requirement_table(
        batch_sizes=(20_000,) if args.tiny else (5_000, 10_000, 20_000, 50_000, 100_000),
        epsilons=(1,) if args.tiny else (0.5, 1, 2, 4),
        accountants=("rdp",) if args.quick or args.tiny else ("pld", "rdp"),
    )
    speed(args.quick, args.enron, args.repeats, args.tiny)


if __name__ == "__main__":
    main()
