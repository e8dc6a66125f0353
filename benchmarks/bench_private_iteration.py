"""Speed and memory of one Gibbs iteration, against a plain Numba reference.

Times one private iteration of the topic model at D = V = 1000, K = 50,
eps/N = 1 (alpha = exp(-1)) -- lpviz's :class:`lpviz.Chain` against a
single-threaded Numba kernel written the obvious way in this file (per cell:
a dot product for mu, ``np.random.binomial``, ``np.random.gamma``, the Bessel
draw from :func:`lpviz.bessel.sample_nb`, a multinomial allocation by
sequential binomials; phi stored (K, V)). Both run on the same data in the
same process, after a warm-up that compiles them. Also times the naive and
non-private iterations and how the private iteration grows with D*V and K.

Figures: wall-clock ms per iteration (best of the repeats: the machine may be
shared), CPU ms per iteration (all threads), ns per cell-iteration, and peak
resident memory. Target: <= 50 ms wall per private iteration at the headline
size on a 2-core machine.

    python benchmarks/bench_private_iteration.py            # full table
    python benchmarks/bench_private_iteration.py --quick    # smaller sizes, fewer repeats
"""

import argparse
import math
import os
import resource
import time

import numba
import numpy as np
from numba import njit

from lpviz import models
from lpviz._random import seed_state
from lpviz.bessel import sample_nb, sample_stream
from lpviz.inference import Chain
from lpviz.privacy import privatize

EPSILON_OVER_N = 1.0


# ---------------------------------------------------------------------------
# The plain reference: one private iteration, written the obvious way
# ---------------------------------------------------------------------------

@njit(nogil=True, cache=True)
def reference_private_iteration(Y_obs, theta, phi, lambda_plus, lambda_minus, alpha, a0, b0, seed):
    """One private Gibbs iteration of the topic model; phi is (K, V)."""
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


@njit(nogil=True, cache=True)
def bessel_draws_only(Y_obs, mu, lambda_plus, lambda_minus, seed):
    """Just the per-cell Bessel draws of a private sweep (one thread): the floor.

    The chain's call: :func:`sample_stream` on a xoshiro256** stream."""
    state = np.empty(4, dtype=np.uint64)
    seed_state(state, seed, 0, 0)
    total = 0
    for d in range(Y_obs.shape[0]):
        for v in range(Y_obs.shape[1]):
            total += sample_stream(float(abs(Y_obs[d, v])),
                                   (lambda_plus[d, v] + mu[d, v]) * lambda_minus[d, v], state)
    return total


# ---------------------------------------------------------------------------
# Timing helpers
# ---------------------------------------------------------------------------

def make_data(n_docs, n_words, n_topics, seed=0):
    """Counts from the topic model with gamma(0.1) factors scaled so the mean
    rate is 0.5 per cell for any K (about a third of the cells nonzero)."""
    rng = np.random.default_rng(seed)
    scale = math.sqrt(50.0 / n_topics)
    mu = rng.gamma(0.1, scale, (n_docs, n_topics)) @ rng.gamma(0.1, scale, (n_topics, n_words))
    Y = rng.poisson(mu)
    alpha = math.exp(-EPSILON_OVER_N)
    return Y, privatize(Y, alpha=alpha, random_state=seed + 1), alpha


def time_calls(run, repeats):
    """(best wall seconds, CPU seconds of that call) over ``repeats`` calls."""
    best = (math.inf, math.inf)
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        run()
        result = (time.perf_counter() - wall, time.process_time() - cpu)
        best = min(best, result)
    return best


def time_chain(Y, method, n_topics, alpha, repeats, keep=None):
    chain = Chain(Y, model="topics", method=method, n_components=n_topics, alpha=alpha, random_state=0)
    chain.step(2)  # compile and warm up
    if keep is not None:
        keep.append(chain)
    return time_calls(lambda: chain.step(), repeats)


def time_reference(Y_obs, n_topics, alpha, repeats):
    rng = np.random.default_rng(0)
    theta = rng.gamma(1.0, 0.1, (Y_obs.shape[0], n_topics))
    phi = rng.gamma(1.0, 0.1, (n_topics, Y_obs.shape[1]))
    lambda_plus = rng.exponential(alpha / (1 - alpha), Y_obs.shape)
    lambda_minus = rng.exponential(alpha / (1 - alpha), Y_obs.shape)
    state = [0]

    def run():
        state[0] += 1
        reference_private_iteration(Y_obs, theta, phi, lambda_plus, lambda_minus, alpha, 0.1, 1.0, state[0])

    run()  # compile
    return time_calls(run, repeats)


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def row(label, cells, wall, cpu, extra=""):
    print(f"{label:<38} {wall * 1e3:9.1f} {cpu * 1e3:9.1f} {wall * 1e9 / cells:9.1f}  {extra}")


def header(title):
    print(f"\n{title}")
    print(f"{'':<38} {'wall ms':>9} {'cpu ms':>9} {'ns/cell':>9}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="headline size only, fewer repeats")
    parser.add_argument("--repeats", type=int, default=None)
    args = parser.parse_args()
    repeats = args.repeats or (3 if args.quick else 7)

    print(f"threads: {numba.get_num_threads()}  cpus: {os.cpu_count()}  "
          f"load average: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    D = V = 1000
    K = 50
    Y, Y_obs, alpha = make_data(D, V, K)
    cells = D * V
    print(f"data: D = V = {D}, K = {K}, eps/N = {EPSILON_OVER_N} (alpha = {alpha:.3f}), "
          f"mean count {Y.mean():.2f}, {np.mean(Y > 0):.0%} nonzero")

    header("one iteration at D = V = 1000, K = 50")
    rss_before = peak_rss_mb()
    chains = []
    wall, cpu = time_chain(Y_obs, "private", K, alpha, repeats, keep=chains)
    row(f"lpviz private ({numba.get_num_threads()} threads)", cells, wall, cpu)
    private_wall = wall
    rss_private = peak_rss_mb()
    chain = chains.pop()
    bessel_args = (chain._Y, chain.mu, chain._lambda_plus, chain._lambda_minus)
    bessel_draws_only(*bessel_args, 0)  # compile
    bessel_wall, bessel_cpu = time_calls(lambda: bessel_draws_only(*bessel_args, 1), repeats)
    del chain, bessel_args
    ref_wall, ref_cpu = time_reference(Y_obs, K, alpha, repeats)
    row("plain Numba reference (1 thread)", cells, ref_wall, ref_cpu, f"lpviz is {ref_wall / private_wall:.1f}x faster")
    previous = numba.get_num_threads()
    numba.set_num_threads(1)
    wall1, cpu1 = time_chain(Y_obs, "private", K, alpha, repeats)
    numba.set_num_threads(previous)
    row("lpviz private (1 thread)", cells, wall1, cpu1, f"{ref_wall / wall1:.1f}x the reference")
    for method, data in (("naive", Y_obs), ("nonprivate", Y)):
        wall, cpu = time_chain(data, method, K, alpha, repeats)
        row(f"lpviz {method}", cells, wall, cpu)
    row("  of which: the Bessel draws alone (1 thread)", cells, bessel_wall, bessel_cpu,
        f"{bessel_cpu / cpu1:.0%} of a 1-thread private iteration")
    verdict = "meets" if private_wall <= 0.050 else "misses"
    print(f"target <= 50 ms per private iteration: {private_wall * 1e3:.1f} ms ({verdict} it)")

    state_bytes = cells * (8 + 8 + 8 + 8 + 8)  # Y_obs, lambda+, lambda-, latent y, Bessel draws
    print(f"\nmemory: private chain state {state_bytes / 2**20:.0f} MiB (5 arrays of D x V x 8 bytes); "
          f"peak RSS {rss_before:.0f} MiB before the private chain, {rss_private:.0f} MiB after, "
          f"{peak_rss_mb():.0f} MiB at the end")

    if args.quick:
        return
    header("private iteration vs D*V (K = 50)")
    for n in (250, 500, 1000):
        _, Y_obs_n, _ = make_data(n, n, K, seed=n)
        wall, cpu = time_chain(Y_obs_n, "private", K, alpha, repeats)
        row(f"D = V = {n} ({n * n:,} cells)", n * n, wall, cpu)
    header("private iteration vs K (D = V = 1000)")
    for k in (10, 25, 50, 100):
        _, Y_obs_k, _ = make_data(D, V, k, seed=k)
        wall, cpu = time_chain(Y_obs_k, "private", k, alpha, repeats)
        row(f"K = {k}", cells, wall, cpu)


if __name__ == "__main__":
    main()
