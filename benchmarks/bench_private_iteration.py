"""Speed, memory and mixing of the private samplers, against plain references in the same run.

Sections (issue 10's targets are printed beside the figures):

1. One private iteration of the topic model at D = V = 1000, K = 50, eps/N = 1
   on dense synthetic counts: lpviz's default sampler against a single-thread
   Numba reference written the obvious way in this file (per cell: a dot
   product, the Bessel route's draws, a multinomial by sequential binomials);
   the naive and non-private iterations beside it; issue 56's target (<= 0.10 of the
   reference) and a roofline of the default sweep (bytes and operations per cell and per
   token, the machine's bandwidth and operation rates measured in the same run: see
   "A roofline of the private sweep" below).
2. The three private samplers -- ``bessel`` (the paper's route), ``collapsed``
   with the dense loop (``sparse_step="off"``) and ``collapsed`` with the
   sparse step -- at 1000 x 1000, K = 50, eps/N in {0.5, 1, 3}, on dense
   synthetic counts and on an Enron-like sparse matrix (1-2% non-zero cells,
   heavy-tailed): milliseconds per iteration and the peak resident memory of
   a process that holds just that chain.
3. (``--big``) 10,000 x 10,000 Enron-like, K = 50, eps/N = 1: chain start
   time (building the chain from the release), seconds per iteration, peak
   memory; collapsed sparse against Bessel.
4. A heavy-tailed network (150 actors, counts in the hundreds, C = 5): the
   private iteration against the non-private one.
5. (``--ess``) Effective sample size per second (ArviZ's ``ess``, bulk) of
   the marginal log likelihood and of rates at held-out cells, on the
   Figure 3 topics and the Figure 1 network: collapsed against Bessel.

6. (``--tiny``) Figure 3's size (90 x 15, K = 3, per-row alpha): CPU milliseconds per
   iteration of every method, where the engine's own Python dominates (issue 25: the
   private iteration <= 0.15 ms, from 0.244).
7. (``--naive``) The naive method at high noise: naive against private per iteration on
   Enron-like counts (2,000 x 10,000, K = 50, eps/N = 1, one kernel thread): issue 25's
   target is naive <= private (the Figure 4 paper probe, ``lpviz reproduce fig4 --preset
   paper --probe 3 --sampler collapsed``, measures the same at 10,000 x 10,000).

``--before COMMIT`` (or ``--before-dir CHECKOUT``, a checkout with its own ``.venv``) runs
sections 3, 6 and 7 also on that commit, in the same run, and prints the two side by side
with their ratio: the plain reference of what changed (a worktree and its venv are made
under /tmp on first use). Every chain configuration runs in its own process so its peak
RSS is its own. Wall-clock figures are the best of the repeats (the machine may be shared).

    python benchmarks/bench_private_iteration.py            # sections 1, 2, 4, 5
    python benchmarks/bench_private_iteration.py --big      # and the 10,000 x 10,000 section
    python benchmarks/bench_private_iteration.py --quick    # 1 and 2 at eps/N = 1 only
    python benchmarks/bench_private_iteration.py --tiny --naive --big --only --before 4c07f22
"""

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from numba import njit

from lpviz._random import seed_state, uniform
from lpviz.bessel import sample_nb
from lpviz.collapsed import _NEGLIGIBLE, _UNCONDITIONAL_TERMS
from lpviz.collapsed import _ratio as _term_ratio

EPSILON_OVER_N = 1.0
# Chains per sampler in the ESS section (seeds 0, 1, ...).
ESS_SEEDS = 4
# Section 6: (label, method, options) at Figure 3's size.
TINY_METHODS = (
    ("private (collapsed)", "private", {}),
    ("private (bessel)", "private", {"sampler": "bessel"}),
    ("naive", "naive", {}),
    ("nonprivate", "nonprivate", {}),
)
REPO = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------------------
# The plain reference: one private iteration, written the obvious way
# ---------------------------------------------------------------------------


@njit(nogil=True)
def reference_private_iteration(Y_obs, theta, phi, lambda_plus, lambda_minus, alpha, a0, b0, seed):
    """One private Gibbs iteration of the topic model (Bessel route); phi is (K, V)."""
    np.random.seed(seed)
    n_docs, n_topics = theta.shape
    n_words = phi.shape[1]
    n_dk = np.zeros((n_docs, n_topics), dtype=np.int64)
    n_kv = np.zeros((n_topics, n_words), dtype=np.int64)
    for d in range(n_docs):
        for v in range(n_words):
            mu = 0.0
            for k in range(n_topics):
                mu += theta[d, k] * phi[k, v]
            ytil = Y_obs[d, v]
            m = sample_nb(float(abs(ytil)), 2.0 * math.sqrt((lambda_plus[d, v] + mu) * lambda_minus[d, v]))
            if ytil <= 0:
                y_plus = m
                g_minus = m - ytil
            else:
                g_minus = m
                y_plus = m + ytil
            y = np.random.binomial(y_plus, mu / (mu + lambda_plus[d, v]))
            g_plus = y_plus - y
            lambda_plus[d, v] = np.random.gamma(1.0 + g_plus, alpha)
            lambda_minus[d, v] = np.random.gamma(1.0 + g_minus, alpha)
            remaining = y
            rest = mu
            for k in range(n_topics):
                if remaining == 0:
                    break
                weight = theta[d, k] * phi[k, v]
                if k == n_topics - 1:
                    tokens = remaining
                else:
                    tokens = np.random.binomial(remaining, min(1.0, weight / rest)) if rest > 0.0 else 0
                n_dk[d, k] += tokens
                n_kv[k, v] += tokens
                remaining -= tokens
                rest -= weight
    phi_sum = phi.sum(axis=1)
    for d in range(n_docs):
        for k in range(n_topics):
            theta[d, k] = np.random.gamma(a0 + n_dk[d, k], 1.0 / (b0 + phi_sum[k]))
    theta_sum = theta.sum(axis=0)
    for k in range(n_topics):
        for v in range(n_words):
            phi[k, v] = np.random.gamma(a0 + n_kv[k, v], 1.0 / (b0 + theta_sum[k]))


# ---------------------------------------------------------------------------
# A roofline of the private sweep (section 1)
# ---------------------------------------------------------------------------
#
# Counts of what one default private iteration does (from the chain's own state after a sweep:
# its noised counts, which rows take the sparse step, its rates and its drawn counts), times the
# machine's attainable rate of each kind of work, measured here by small loops:
#
#   memory  = bytes / copy bandwidth, bytes as the kernels' loops move them: per cell the noised
#             count (1 B) and the rate written by the product and read by the draws (16 B); per
#             positive drawn count its slot (16 B written), the compacted CSR (16 B read, 16 B
#             written), the allocation's and the log likelihood's reads (2 x 16 B) and the merge
#             of the thinned tokens (16 B read, 16 B written); per listed cell its column (4 B);
#             the factors and their counts, (D + V) K x 8 B, about five passes (positive cells:
#             those of the final counts, the thinned tokens' cells included: a slight excess).
#   compute = sum over kinds of count / rate, every rate a throughput of independent operations
#             (a bound: the draws' normaliser products and the allocation's walks are chains of
#             dependent operations, so the kernels run at their latency, not this rate):
#               divisions  : one per term of each ytil > 0 cell's normaliser (summed to 1e-17; the
#                            few cells drawn by rejection counted as if by inversion)
#               uniforms   : one per ytil > 0 cell, per zero cell of a dense row, per token the
#                            allocation walks for, per proposed thinning token; ~3 per gamma draw
#               exp / log  : one per dense-row zero cell (Poisson), K per sparse row (the topics'
#                            Poisson totals), one per positive cell (log likelihood), ~3 per gamma
#               flops      : 2K per cell (rates), 2K per positive cell twice (allocation's products,
#                            log likelihood's dot products)
#               walk steps : per allocated token, the expected position of its topic in its row's
#                            order of theta (an addition each)
#   roofline = max(memory, compute / kernel threads); the fraction printed is roofline / measured.


@njit(nogil=True, error_model="numpy")  # no zero-divisor test: the loop vectorises
def _rate_divisions(x, y, out, repeats):
    for _ in range(repeats):
        for i in range(x.shape[0]):
            out[i] = x[i] / y[i]


@njit(nogil=True)
def _rate_exp(x, out, repeats):
    for _ in range(repeats):
        for i in range(x.shape[0]):
            out[i] = math.exp(x[i])


@njit(nogil=True)
def _rate_uniforms(n):
    state = np.empty(4, dtype=np.uint64)
    seed_state(state, 1, 2, 3)
    total = 0.0
    for _ in range(n):
        total += uniform(state)
    return total


@njit(nogil=True, fastmath={"reassoc", "contract", "nsz", "arcp"})
def _rate_adds(x, repeats):
    total = 0.0
    for _ in range(repeats):
        for i in range(x.shape[0]):
            total += x[i]
    return total


def machine_rates(n=1 << 22):
    """Attainable rates on this machine (best of 5): copy bandwidth (bytes read + written per
    second, 256 MB arrays) and operations per second of each kind the roofline counts (loops
    over arrays in the L1 cache, independent operations; flops: the rates' own product, BLAS)."""

    def best(call):
        call()
        return min(_timed(call) for _ in range(5))

    rng = np.random.default_rng(0)
    big = rng.random(1 << 25)  # 256 MB: far beyond the caches
    copy = np.empty_like(big)
    small = 2048  # three arrays of 16 kB: in L1
    repeats = n // small
    x, y, out = rng.random(small) + 1.0, rng.random(small) + 1.0, np.empty(small)
    theta, phiT = rng.random((1000, 50)), rng.random((1000, 50))
    return {
        "bandwidth": 2 * big.nbytes / best(lambda: np.copyto(copy, big)),
        "divisions": small * repeats / best(lambda: _rate_divisions(x, y, out, repeats)),
        "uniforms": n / best(lambda: _rate_uniforms(n)),
        "exp / log": small * repeats / best(lambda: _rate_exp(x, out, repeats)),
        "flops": 2 * theta.size * phiT.shape[0] / best(lambda: theta @ phiT.T),
        "walk steps": small * repeats / best(lambda: _rate_adds(x, repeats)),
    }


@njit(nogil=True)
def _sweep_counts(Y, mu, alpha, theta, phiT, indptr, indices, values, use_row):
    """(normaliser terms of the ytil > 0 cells, tokens the allocation walks for, their expected
    walk steps)."""
    terms = 0.0
    for d in range(Y.shape[0]):
        for v in range(Y.shape[1]):
            if Y[d, v] <= 0:
                continue
            n, a, b = float(Y[d, v]), mu[d, v] / alpha, mu[d, v] * alpha
            m, term, total, ratio = 0.0, 1.0, 1.0, _term_ratio(0.0, n, a, b)
            while m < _UNCONDITIONAL_TERMS or not (ratio < 1.0 and term * ratio <= _NEGLIGIBLE * total * (1.0 - ratio)):
                term *= ratio
                m += 1.0
                total += term
                ratio = _term_ratio(m, n, a, b)
            terms += m + 1.0
    steps, walked = 0.0, 0
    weights = np.empty(theta.shape[1])
    for d in range(Y.shape[0]):
        order = np.argsort(-theta[d])
        for idx in range(indptr[d], indptr[d + 1]):
            v = indices[idx]
            if use_row[d] and Y[d, v] <= 0:  # a thinning token: placed by its topic, no walk
                continue
            total = 0.0
            for j in range(theta.shape[1]):
                weights[j] = theta[d, order[j]] * phiT[v, order[j]]
                total += weights[j]
            expected, running = 0.0, 0.0
            for j in range(theta.shape[1]):
                running += weights[j]
                expected += 1.0 - (running - weights[j]) / total  # P(the walk reaches step j)
            steps += values[idx] * expected
            walked += values[idx]
    return terms, walked, steps


def roofline(chain, rates):
    """The roofline of one default private iteration of ``chain`` (after a sweep): (milliseconds:
    roofline, memory, compute; per cell and per token figures)."""
    Y = np.asarray(chain._prepared.counts)
    alpha = float(np.asarray(chain._prepared.alpha)[0])
    theta, phiT = chain._state
    latent = chain._latent
    n_docs, n_words = Y.shape
    K = theta.shape[1]
    cells = n_docs * n_words
    mu = theta @ phiT.T
    use_row = latent["use_row"]
    indptr, indices, values = latent["y_counts"]
    positive = int(indices.size)
    tokens = int(values.sum())
    drawn = int((Y > 0).sum())
    dense_zero = int((Y[~use_row] <= 0).sum())
    sparse_rows = int(use_row.sum())
    proposed = alpha * float(mu[use_row].sum())
    gammas = (n_docs + n_words) * K
    terms, walked, steps = _sweep_counts(Y, mu, alpha, theta, phiT, indptr, indices, values, use_row)
    listed = int(latent["cells"][1].size)
    memory_bytes = cells * 17 + positive * (16 + 32 + 32 + 32) + listed * 4 + 5 * 8 * (n_docs + n_words) * K
    ops = {
        "divisions": terms,
        "uniforms": drawn + dense_zero + walked + proposed + 3 * gammas,
        "exp / log": dense_zero + K * sparse_rows + positive + 3 * gammas,
        "flops": 2 * K * (cells + 2 * positive),
        "walk steps": steps,
    }
    seconds = {kind: count / rates[kind] for kind, count in ops.items()}
    memory = memory_bytes / rates["bandwidth"]
    compute = sum(seconds.values())
    return {
        "roofline": max(memory, compute),
        "memory": memory,
        "compute": compute,
        "bytes_per_cell": memory_bytes / cells,
        "ops_per_cell": {kind: count / cells for kind, count in ops.items()},
        "per_token": {"uniforms": 1.0, "walk steps": steps / max(walked, 1)},
        "seconds": seconds,
        "tokens": tokens,
        "walked": walked,
        "thinned": tokens - walked,
        "proposed": proposed,
        "positive": positive,
    }


def print_roofline(chain, measured):
    from lpviz._parallel import n_threads

    rates = machine_rates()
    roof = roofline(chain, rates)
    cores = min(n_threads(), os.cpu_count() or 1)
    print(
        f"   machine: copy {rates['bandwidth'] / 1e9:.1f} GB/s, divisions {rates['divisions'] / 1e9:.2f} G/s, "
        f"uniforms {rates['uniforms'] / 1e9:.2f} G/s, exp {rates['exp / log'] / 1e9:.2f} G/s, "
        f"flops {rates['flops'] / 1e9:.1f} G/s, adds {rates['walk steps'] / 1e9:.2f} G/s"
    )
    per_cell = ", ".join(f"{kind} {count:.2f}" for kind, count in roof["ops_per_cell"].items())
    print(f"   per cell: {roof['bytes_per_cell']:.1f} bytes; {per_cell}")
    print(
        f"   per token ({roof['tokens']:,} tokens on {roof['positive']:,} positive cells; {roof['thinned']:,} "
        f"placed by the sparse step of {roof['proposed']:,.0f} proposed): allocated ones 1 uniform and "
        f"{roof['per_token']['walk steps']:.1f} walk steps each"
    )
    print("   compute by kind (ms): " + ", ".join(f"{kind} {sec * 1e3:.1f}" for kind, sec in roof["seconds"].items()))
    # the rates are one core's; the chain's kernels run on `cores` threads (memory is shared)
    compute = roof["compute"] / cores
    bound = max(roof["memory"], compute)
    print(
        f"   roofline: {bound * 1e3:.1f} ms (memory {roof['memory'] * 1e3:.1f} ms, compute "
        f"{compute * 1e3:.1f} ms on {cores} core{'s' if cores > 1 else ''}) vs measured {measured * 1e3:.1f} ms "
        f"(the iteration runs at {bound / measured:.2f} of the roofline's speed)"
    )


# ---------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------


def dense_counts(n_docs, n_words, n_topics, seed=0):
    """Topic-model counts with gamma(0.1) factors scaled to a mean rate of 0.5
    per cell (about a third of the cells non-zero)."""
    rng = np.random.default_rng(seed)
    scale = math.sqrt(50.0 / n_topics)
    mu = rng.gamma(0.1, scale, (n_docs, n_topics)) @ rng.gamma(0.1, scale, (n_topics, n_words))
    return rng.poisson(mu)


def enron_like_counts(n_docs, n_words, n_topics, seed=0, nonzero=0.015):
    """Sparse heavy-tailed counts like the Enron topic matrix: each document uses
    a few topics, each topic a few hundred words, Zipf-like word popularity;
    scaled so that about ``nonzero`` of the cells are non-zero."""
    rng = np.random.default_rng(seed)
    theta = rng.gamma(0.05, 1.0, (n_docs, n_topics)) * rng.lognormal(3.0, 0.8, (n_docs, 1))
    popularity = 1.0 / np.arange(1, n_words + 1) ** 0.8
    phi = rng.gamma(0.05, 1.0, (n_topics, n_words)) * popularity[rng.permutation(n_words)]
    phi /= phi.sum(axis=1, keepdims=True)
    rows = []
    for start in range(0, n_docs, 1000):  # by blocks: never a dense float matrix of the whole size
        rows.append(rng.poisson(theta[start : start + 1000] @ phi).astype(np.int32))
    Y = np.vstack(rows)
    share = np.mean(Y > 0)
    if share > nonzero * 1.5:  # thin the counts down to the asked share of non-zero cells
        Y = rng.binomial(Y, nonzero / share).astype(np.int32)
    return Y


def noised(Y, seed):
    import lpviz

    return lpviz.privatize(
        Y,
        epsilon=EPSILON_OVER_N if seed is None else None,
        N=1,
        alpha=None if seed is None else None,
        random_state=seed,
    )


# ---------------------------------------------------------------------------
# One configuration, in its own process
# ---------------------------------------------------------------------------


def peak_rss_mb():
    """This process's peak resident memory: VmHWM (getrusage's ru_maxrss survives exec, so a
    child started by a big parent would report the parent's peak)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def run_tiny(config):
    """CPU milliseconds per iteration of each method at Figure 3's size (best of the repeats)."""
    import lpviz
    from lpviz.datasets import make_topics
    from lpviz.engine import Chain

    data = make_topics(random_state=0)
    release, truth = data.release(), lpviz.Truth(data.Y)
    out = {}
    for label, method, options in TINY_METHODS:
        chain = Chain(release, method=method, n_components=3, truth=truth, random_state=0, **options)
        chain.step(100)  # kernels loaded, the chain settled
        best = math.inf
        for _ in range(config["repeats"]):
            start = time.process_time()
            chain.step(config["iterations"])
            best = min(best, (time.process_time() - start) / config["iterations"])
        out[label] = best * 1e3
    return out


def run_naive(config):
    """Seconds per iteration (CPU, one kernel thread) of naive and private on Enron-like counts."""
    import lpviz
    from lpviz.engine import Chain

    Y = enron_like_counts(config["rows"], config["cols"], config["K"])
    release = lpviz.privatize(Y, epsilon=config["eps"], N=1, random_state=1)
    del Y
    out = {}
    for method in ("private", "naive"):
        chain = Chain(release, method=method, n_components=config["K"], random_state=0)
        chain.step(2)
        best = math.inf
        for _ in range(config["repeats"]):
            start = time.process_time()
            chain.step()
            best = min(best, time.process_time() - start)
        out[method] = best
    return out


def run_one(config):
    """Time one chain configuration; returns a dict of figures (runs in a child process)."""
    if config.get("kind") == "tiny":
        return run_tiny(config)
    if config.get("kind") == "naive":
        return run_naive(config)
    import lpviz
    from lpviz.engine import Chain

    if "array" in config:  # a saved noised array passed with alpha=, as lpviz 0.1 took it
        counts = np.load(config["array"])
        rss_data = peak_rss_mb()
        start = time.perf_counter()
        chain = Chain(
            counts, model="topics", method="private", n_components=config["K"], alpha=math.exp(-config["eps"])
        )
        return _chain_figures(chain, config, start, rss_data)
    if "release" in config:  # a saved noised release, as a user would load one: no true counts in memory
        release = lpviz.Release(Y_obs=np.load(config["release"]), alpha=math.exp(-config["eps"]))
    else:
        data = {"dense": dense_counts, "enron": enron_like_counts}[config["data"]]
        Y = data(config["size"], config["size"], config["K"], seed=config.get("seed", 0))
        release = lpviz.privatize(Y, epsilon=config["eps"], N=1, random_state=1)
        del Y
    rss_data = peak_rss_mb()
    method = config["method"]
    options = {k: config[k] for k in ("sampler",) if k in config}
    start = time.perf_counter()
    chain = Chain(
        release, model="topics", method=method, n_components=config["K"], truth=None, random_state=0, **options
    )
    if "sparse_step" in config:
        chain.method_instance.settings["sparse_step"] = config["sparse_step"]
        chain._latent = chain.method_instance.start(
            chain._prepared, chain.model_instance, chain._state, chain._work, None
        )
    return _chain_figures(chain, config, start, rss_data)


def _chain_figures(chain, config, start, rss_data):
    """Start-up, first iteration, best of the repeats and peak memory of a chain built at ``start``."""
    start_seconds = time.perf_counter() - start
    rss_built = peak_rss_mb()
    first = time.perf_counter()
    chain.step()  # compiled kernels load; the first sweep settles
    first_seconds = time.perf_counter() - first
    best_wall, best_cpu = math.inf, math.inf
    for _ in range(config["repeats"]):
        wall, cpu = time.perf_counter(), time.process_time()
        chain.step()
        best_wall = min(best_wall, time.perf_counter() - wall)
        best_cpu = min(best_cpu, time.process_time() - cpu)
    latent = chain._latent or {}
    sparse_rows = float(np.mean(latent["use_row"])) if "use_row" in latent else 0.0
    # cells whose true count is drawn one by one: every cell of a dense row, the ytil > 0 cells of a sparse one
    visited = (
        int((~latent["use_row"]).sum()) * config["size"] + latent["cells"][1].size
        if "cells" in latent
        else config["size"] ** 2
    )
    return {
        "wall": best_wall,
        "cpu": best_cpu,
        "start": start_seconds,
        "first": first_seconds,
        "rss_built": rss_built,
        "rss": peak_rss_mb(),
        "rss_data": rss_data,
        "sparse_rows": sparse_rows,
        "visited_share": visited / (config["size"] ** 2),
    }


def in_child(config, checkout=None):
    """``run_one(config)`` in a fresh Python process (its own peak memory); with ``checkout``, in
    that checkout's venv and with its lpviz (this file's code, that commit's library)."""
    python, env = sys.executable, None
    if checkout is not None:
        python = str(Path(checkout) / ".venv" / "bin" / "python")
        env = dict(os.environ, PYTHONPATH=str(checkout))
    done = subprocess.run(
        [python, __file__, "--one", json.dumps(config)],
        capture_output=True,
        text=True,
        timeout=config.get("timeout", 3600),
        cwd=checkout,
        env=env,
    )
    if done.returncode != 0:
        raise RuntimeError(f"configuration {config} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------------------
# Sections
# ---------------------------------------------------------------------------


def section_headline(repeats):
    import lpviz
    from lpviz.engine import Chain

    print("\n1. One iteration at D = V = 1000, K = 50, eps/N = 1 (dense synthetic, mean count 0.5)")
    Y = dense_counts(1000, 1000, 50)
    release = lpviz.privatize(Y, epsilon=EPSILON_OVER_N, N=1, random_state=1)
    truth = lpviz.Truth(Y)
    rows = []
    default_chain = None
    for label, method, options in (
        ("private (collapsed, default)", "private", {}),
        ("private (bessel)", "private", {"sampler": "bessel"}),
        ("naive", "naive", {}),
        ("nonprivate", "nonprivate", {}),
    ):
        chain = Chain(release, method=method, n_components=50, truth=truth, random_state=0, **options)
        chain.step(2)
        best = min(_timed(chain.step) for _ in range(repeats))
        rows.append((label, best))
        default_chain = default_chain or chain
    rng = np.random.default_rng(0)
    theta, phi = rng.gamma(1.0, 0.1, (1000, 50)), rng.gamma(1.0, 0.1, (50, 1000))
    alpha = math.exp(-EPSILON_OVER_N)
    lp, lm = rng.exponential(alpha / (1 - alpha), Y.shape), rng.exponential(alpha / (1 - alpha), Y.shape)
    Y_obs = np.asarray(release.Y_obs, dtype=np.int64)
    reference_private_iteration(Y_obs, theta, phi, lp, lm, alpha, 0.1, 1.0, 0)
    reference = min(
        _timed(lambda: reference_private_iteration(Y_obs, theta, phi, lp, lm, alpha, 0.1, 1.0, 1))
        for _ in range(max(2, repeats // 2))
    )
    print(f"   {'':<34} {'ms/it':>8}")
    for label, seconds in rows:
        print(f"   {label:<34} {seconds * 1e3:8.1f}   {reference / seconds:5.1f}x the plain reference")
    print(f"   {'plain Numba reference (1 thread)':<34} {reference * 1e3:8.1f}")
    collapsed = rows[0][1]
    print(
        f"   target <= 35 ms per private iteration: {collapsed * 1e3:.1f} ms "
        f"({'met' if collapsed <= 0.035 else 'missed'}); <= 0.10 of the reference (issue 56): "
        f"{collapsed / reference:.3f} ({'met' if collapsed <= 0.10 * reference else 'missed'})"
    )
    print_roofline(default_chain, collapsed)


def _timed(call):
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def section_samplers(repeats, epsilons):
    print("\n2. The private samplers at 1000 x 1000, K = 50 (each chain in its own process)")
    print(
        f"   {'data':<7} {'eps/N':>5}  {'sampler':<18} {'ms/it':>8} {'cpu ms':>8} {'peak MB':>8} "
        f"{'sparse rows':>11} {'cells visited':>13}"
    )
    variants = [
        ("bessel", {"sampler": "bessel"}),
        ("collapsed dense", {"sampler": "collapsed", "sparse_step": "off"}),
        ("collapsed sparse", {"sampler": "collapsed", "sparse_step": "auto"}),
    ]
    for data in ("dense", "enron"):
        for eps in epsilons:
            for label, options in variants:
                figures = in_child(
                    {
                        "data": data,
                        "size": 1000,
                        "K": 50,
                        "eps": eps,
                        "method": "private",
                        "repeats": repeats,
                        **options,
                    }
                )
                visited = f"{figures['visited_share']:.0%}"
                print(
                    f"   {data:<7} {eps:>5g}  {label:<18} {figures['wall'] * 1e3:8.1f} "
                    f"{figures['cpu'] * 1e3:8.1f} {figures['rss']:8.0f} {figures['sparse_rows']:11.0%} "
                    f"{visited:>13}",
                    flush=True,
                )


def before_checkout(commit):
    """A worktree of ``commit`` with its own venv under /tmp (made once): the reference of --before."""
    sha = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", commit], capture_output=True, text=True, check=True
    ).stdout.strip()
    path = Path(f"/tmp/lpviz-before-{sha[:10]}")
    if not path.exists():
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(path), sha], check=True)
    if not (path / ".venv" / "bin" / "python").exists():
        subprocess.run(["make", "venv"], cwd=path, check=True)
    return path


def _pair(config, before):
    """``run_one(config)`` here and, with ``before``, in that checkout: (after, before or None)."""
    return in_child(config), (in_child(config, before) if before is not None else None)


def _ratio(after, before):
    return f"{after / before:6.2f}x" if before else ""


def section_tiny(repeats, before):
    print("\n6. Figure 3's size: 90 x 15, K = 3, per-row alpha (CPU ms per iteration, best of the repeats)")
    after, old = _pair({"kind": "tiny", "repeats": max(3, repeats), "iterations": 2000}, before)
    print(f"   {'method':<22} {'this checkout':>14} {'before':>10} {'ratio':>8}")
    for label, _, _ in TINY_METHODS:
        reference = old[label] if old else None
        shown = f"{reference:10.4f}" if reference else f"{'-':>10}"
        print(f"   {label:<22} {after[label]:14.4f} {shown} {_ratio(after[label], reference):>8}")
    private = after["private (collapsed)"]
    print(
        f"   target: private <= 0.15 ms on the lead's machine (0.244 before): {private:.4f} ms here"
        + (f", {private / old['private (collapsed)']:.2f}x the before in this run" if old else "")
    )


def section_naive(repeats, before):
    config = {"kind": "naive", "rows": 2000, "cols": 10_000, "K": 50, "eps": 1.0, "repeats": max(2, repeats // 2)}
    print(
        f"\n7. Naive at high noise: {config['rows']:,} x {config['cols']:,} Enron-like, K = {config['K']}, "
        f"eps/N = {config['eps']:g}, one kernel thread (CPU s per iteration)"
    )
    env = dict(os.environ, LPVIZ_NUM_THREADS="1")
    saved = os.environ.copy()
    os.environ.update(env)
    try:
        after, old = _pair(config, before)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    print(f"   {'':<20} {'private':>9} {'naive':>9} {'naive / private':>16}")
    for name, figures in (("this checkout", after), ("before", old)):
        if figures:
            print(
                f"   {name:<20} {figures['private']:9.3f} {figures['naive']:9.3f} "
                f"{figures['naive'] / figures['private']:16.2f}"
            )
    if old:
        print(
            f"   naive: {after['naive'] / old['naive']:.2f}x the before; "
            f"private: {after['private'] / old['private']:.2f}x"
        )
    print("   target: naive <= private per iteration (on the Figure 4 paper probe at eps/N = 1)")


def section_big(repeats, before=None, with_bessel=True):
    import tempfile

    import lpviz

    print("\n3. 10,000 x 10,000 Enron-like (0.55% non-zero true counts), K = 50, eps/N = 1")
    print(
        "   the noised counts are saved first (int16); each chain's process loads them as a user's would: as a "
        "Release, or as the array with alpha= (lpviz 0.1's way). Peak = VmHWM of that process; 'built' = the "
        "peak once the chain is constructed, before its first iteration"
    )
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "release.npy")
        Y = enron_like_counts(10_000, 10_000, 50)
        np.save(path, lpviz.privatize(Y, epsilon=1.0, N=1, random_state=1).Y_obs)
        del Y
        cases = [
            ("collapsed, Release", {"sampler": "collapsed", "release": path}, repeats),
            ("collapsed, int16 + alpha", {"array": path}, 1),
        ]
        if with_bessel:  # the paper's route: 4 dense latent arrays, minutes per run
            cases.append(("bessel, Release", {"sampler": "bessel", "release": path}, 2))
        for label, options, reps in cases:
            config = {"data": "enron", "size": 10_000, "K": 50, "eps": 1.0, "method": "private", "repeats": reps}
            config.update(timeout=7200, **options)
            runs = [("this checkout", in_child(config))]
            if before is not None:
                runs.append(("before", in_child(config, before)))
            for name, figures in runs:
                print(
                    f"   {label:<25} {name:<14} start {figures['start']:5.1f} s  first it {figures['first']:5.1f} s  "
                    f"{figures['wall']:6.2f} s/it ({figures['cpu']:5.2f} CPU-s)  peak built "
                    f"{figures['rss_built'] / 1024:5.2f} GB, overall {figures['rss'] / 1024:5.2f} GB "
                    f"(loaded counts alone {figures['rss_data'] / 1024:4.2f} GB)",
                    flush=True,
                )
    print(
        "   targets: <= 1.0 s per iteration; peak memory of the chain's process <= 1.5 GB including "
        "construction; start to first iteration <= 3 s (warm Numba cache)"
    )


def section_network(repeats):
    import lpviz
    from lpviz.engine import Chain

    print("\n4. A heavy-tailed network: 150 actors, counts in the hundreds, C = 5")
    rng = np.random.default_rng(3)
    theta = rng.gamma(0.3, 3.0, (150, 5))
    pi = rng.gamma(0.5, 4.0, (5, 5))
    mu = theta @ pi @ theta.T
    np.fill_diagonal(mu, 0)
    Y = rng.poisson(mu)
    release = lpviz.privatize(Y, epsilon=1.0, N=1, kind="network", random_state=4)
    truth = lpviz.Truth(Y)
    print(f"   counts: mean {Y.mean():.1f}, 99th percentile {np.percentile(Y, 99):.0f}, max {Y.max()}")
    times = {}
    for label, method, options in (
        ("nonprivate", "nonprivate", {}),
        ("private (collapsed)", "private", {}),
        ("private (bessel)", "private", {"sampler": "bessel"}),
    ):
        chain = Chain(release, method=method, n_components=5, truth=truth, random_state=0, **options)
        chain.step(3)
        times[label] = min(_timed(chain.step) for _ in range(repeats * 3))
        print(
            f"   {label:<22} {times[label] * 1e3:8.2f} ms/it   {times[label] / times['nonprivate']:5.1f}x non-private"
        )
    print(
        f"   target: private within 3x of non-private: "
        f"{'met' if times['private (collapsed)'] <= 3 * times['nonprivate'] else 'missed'}"
    )


def section_ess(n_iter):
    import arviz as az

    import lpviz
    from lpviz.datasets import holdout_mask, make_blocks, make_topics

    print(
        f"\n5. Effective samples per second ({ESS_SEEDS} chains of {n_iter:,} iterations per sampler, burn-in "
        f"{n_iter // 5:,}; ArviZ bulk ESS summed over the chains, per second of all of them)"
    )
    cases = []
    topics = make_topics(random_state=0)
    cases.append(("Figure 3 topics", topics, "topics", 3))
    blocks = make_blocks(random_state=0)
    cases.append(("Figure 1 network", blocks, "blocks", 5))
    for name, data, model, K in cases:
        mask = holdout_mask(data.Y, model, "random cells", fraction=0.1, random_state=1)
        release = data.release(heldout=~mask)
        heldout = release.heldout_cells
        rows = {}
        for sampler in ("bessel", "collapsed"):
            # one chain's ESS of a slowly mixing trace is a noisy number (tens of effective samples):
            # pooled over SEEDS chains, ESS summed over the chains, per second of all of them
            ess_marginal, ess_rates, seconds = 0.0, 0.0, 0.0
            for seed in range(ESS_SEEDS):
                chain_run = lpviz.run(
                    release,
                    method="private",
                    sampler=sampler,
                    n_components=K,
                    n_iter=n_iter,
                    burn_in=n_iter // 5,
                    thin=1,
                    random_state=seed,
                )
                marginal, rates = [], []
                for state in chain_run:
                    seconds += state.seconds
                    if state.iteration > n_iter // 5:
                        marginal.append(state.log_marginal)
                        rates.append(state.mu[heldout])
                ess_marginal += float(az.ess(np.asarray(marginal)[None, :]))
                ess_rates += float(np.median([float(az.ess(series[None, :])) for series in np.asarray(rates).T]))
            kept = n_iter - n_iter // 5
            rows[sampler] = (ess_marginal / seconds, ess_rates / seconds, seconds / (n_iter * ESS_SEEDS), kept)
        for sampler, (marginal_rate, rates_rate, per_iteration, _kept) in rows.items():
            print(
                f"   {name:<17} {sampler:<10} {per_iteration * 1e3:7.2f} ms/it   ESS/s log marginal "
                f"{marginal_rate:8.1f}   median ESS/s held-out rates {rates_rate:8.1f}"
            )
        gain = rows["collapsed"][0] / rows["bessel"][0], rows["collapsed"][1] / rows["bessel"][1]
        print(
            f"   {name:<17} collapsed / bessel: {gain[0]:.1f}x (log marginal), {gain[1]:.1f}x (held-out rates)"
            + ("   target >= 3x on Figure 3" if model == "topics" else "")
        )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="sections 1 and 2 at eps/N = 1 only")
    parser.add_argument("--big", action="store_true", help="also the 10,000 x 10,000 section (minutes, ~5 GB)")
    parser.add_argument("--ess-iterations", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--tiny", action="store_true", help="section 6: Figure 3's size, every method")
    parser.add_argument("--naive", action="store_true", help="section 7: naive against private at high noise")
    parser.add_argument("--only", action="store_true", help="only the sections asked for (--tiny, --naive, --big)")
    parser.add_argument("--before", default=None, help="a commit to run sections 3, 6, 7 on too (the reference)")
    parser.add_argument("--before-dir", type=Path, default=None, help="a checkout with .venv, instead of --before")
    parser.add_argument("--one", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one is not None:
        print(json.dumps(run_one(json.loads(args.one))))
        return
    before = args.before_dir or (before_checkout(args.before) if args.before else None)
    repeats = args.repeats or (3 if args.quick else 5)
    import numba

    from lpviz._parallel import n_threads

    print(
        f"kernel threads: {n_threads()}  numba threads: {numba.get_num_threads()}  cpus: {os.cpu_count()}  "
        f"load average: {', '.join(f'{x:.1f}' for x in os.getloadavg())}"
    )
    if before is not None:
        head = subprocess.run(["git", "-C", str(before), "log", "-1", "--oneline"], capture_output=True, text=True)
        print(f"before: {before} ({head.stdout.strip()})")
    if args.tiny:
        section_tiny(repeats, before)
    if args.naive:
        section_naive(repeats, before)
    if args.only:
        if args.big:
            section_big(max(2, repeats // 2), before, with_bessel=False)
        return
    section_headline(repeats)
    section_samplers(repeats, (1.0,) if args.quick else (0.5, 1.0, 3.0))
    if args.quick:
        return
    section_network(repeats)
    section_ess(args.ess_iterations)
    if args.big:
        section_big(max(2, repeats // 2), before)


if __name__ == "__main__":
    main()
