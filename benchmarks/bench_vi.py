"""Speed of one CAVI iteration, and of a CAVI fit to convergence, against a plain numpy CAVI.

The data are the VI paper's Table 1 matrix (:func:`lpviz.reproduce.table1.table1_data`):
D = V = 1000, K = 50, eps/N = 1. Times one iteration of lpviz's
:class:`lpviz.vi.VariationalFit` (private with the Bessel mode and with the
mean, naive) against a reference private CAVI iteration written here the
plain numpy way (dense D x V arrays, BLAS products, scipy's special
functions, the Bessel mode from its closed form), started from the same q;
the reference also checks lpviz's numbers (rates and ELBO after one
iteration from the same state). Then the seconds a private fit takes to
converge (DEFAULT_TOL), and the ELBO / MAE of mode against mean.

Figures: wall-clock ms per iteration (best of the repeats: the machine may be
shared) and CPU ms (all threads). Target: <= 100 ms wall per private
iteration on 2 cores (the paper's implementation: 2.8 s).

With ``--mode-vs-mean`` it measures instead what the paper's Bessel mode
costs against the mean (:func:`lpviz.vi.compare_bessel_points`, both from
the same initial q, to convergence): on Figure 3's data
(:func:`lpviz.datasets.make_topics`, its own heterogeneous noise, several
seeds) and, with ``--enron D``, on a D x D slice of the Enron topic matrix
(the shared tarball) noised at eps/N = 1; MAE against the true rates
(synthetic) and the true counts, ELBO, iterations and seconds.

    python benchmarks/bench_vi.py            # the headline size
    python benchmarks/bench_vi.py --quick    # 400 x 400, fewer repeats
    python benchmarks/bench_vi.py --mode-vs-mean [--enron 2000]
    python benchmarks/bench_vi.py --tiny     # seconds: 60 x 60, K = 5, one repeat, at most 50 iterations
                                             # to converge (--mode-vs-mean --tiny: one seed)
"""

import argparse
import copy
import math
import os
import time

import numpy as np
from scipy.special import digamma, gammaln

from lpviz._parallel import n_threads
from lpviz.metrics import score
from lpviz.reproduce.table1 import table1_data
from lpviz.vi import DEFAULT_TOL, VariationalFit, variational_run

TARGET_SECONDS = 0.100


# ---------------------------------------------------------------------------
# The plain reference: one private CAVI iteration in numpy (topic model, no held-out cells)
# ---------------------------------------------------------------------------


def bessel_mode(nu, a):
    """floor((sqrt(a^2 + nu^2) - nu) / 2), then nudged so m (m + nu) <= a^2/4 < (m + 1)(m + 1 + nu)."""
    quarter = 0.25 * a * a
    m = np.floor(2.0 * quarter / (np.sqrt(a * a + nu * nu) + nu))
    m = np.where((m + 1) * (m + 1 + nu) <= quarter, m + 1, m)
    return np.where((m > 0) & (m * (m + nu) > quarter), m - 1, m)


def gamma_refresh(shape, rate, a0, b0):
    """Expectations of Gamma(shape, rate) and the entries' prior + entropy ELBO terms."""
    psi = digamma(shape)
    elog = psi - np.log(rate)
    terms = np.sum(
        a0 * np.log(b0)
        - gammaln(a0)
        + (a0 - 1) * elog
        - b0 * shape / rate
        + shape
        - np.log(rate)
        + gammaln(shape)
        + (1 - shape) * psi
    )
    return {"mean": shape / rate, "var": shape / rate**2, "geo": np.exp(elog), "elog": elog}, terms


def reference_iteration(Y_obs, alpha, state, a0=0.1, b0=1.0):
    """One private CAVI iteration (mode); ``state`` = (theta q, phi q, E[g+], E[g-]) dicts/arrays, updated."""
    theta, phi, g_plus, g_minus = state
    a = alpha
    # moments of mu (phi stored (V, K) like lpviz's)
    mean_mu = theta["mean"] @ phi["mean"].T
    var_mu = theta["var"] @ (phi["var"] + phi["mean"] ** 2).T + theta["mean"] ** 2 @ phi["var"].T
    weight = theta["geo"] @ phi["geo"].T
    # local step
    elog_plus = digamma(g_plus + 1) + np.log(a)
    geo_plus = np.exp(elog_plus)
    mean_x = a * (g_plus + 1) + mean_mu
    geo_x = mean_x * np.exp(-(a * a * (g_plus + 1) + var_mu) / (2 * mean_x**2))
    scale = 2 * np.sqrt(a * np.exp(digamma(g_minus + 1)) * geo_x)
    nu = np.abs(Y_obs).astype(float)
    m = bessel_mode(nu, scale)
    y_plus = np.where(Y_obs <= 0, m, m + Y_obs)
    new_g_minus = np.where(Y_obs <= 0, m - Y_obs, m)
    split = geo_plus + weight
    new_g_plus = y_plus * geo_plus / split
    expected_y = y_plus * weight / split
    cells = (
        y_plus * np.log(split)
        - gammaln(y_plus + 1)
        - new_g_plus * elog_plus
        + gammaln(new_g_plus + 1)
        + (new_g_plus + new_g_minus) * np.log(a)
        + 2 * np.log1p(-a)
    )
    # expected allocation, summed: n_dk = G[theta] ((E[y] / W) G[phi]), n_vk likewise
    ratio = np.divide(expected_y, weight, out=np.zeros_like(weight), where=weight > 0)
    n_dk = theta["geo"] * (ratio @ phi["geo"])
    n_vk = phi["geo"] * (ratio.T @ theta["geo"])
    # factor updates
    old = theta["elog"], phi["elog"]
    theta_new, theta_terms = gamma_refresh(a0 + n_dk, b0 + phi["mean"].sum(0), a0, b0)
    phi_new, phi_terms = gamma_refresh(a0 + n_vk, b0 + theta_new["mean"].sum(0), a0, b0)
    elbo = (
        cells.sum()
        + np.sum(n_dk * (theta_new["elog"] - old[0]))
        + np.sum(n_vk * (phi_new["elog"] - old[1]))
        - theta_new["mean"].sum(0) @ phi_new["mean"].sum(0)
        + theta_terms
        + phi_terms
    )
    return (theta_new, phi_new, new_g_plus, new_g_minus), elbo


def reference_state(fit):
    """The reference's copy of a lpviz fit's q."""
    theta, phiT = fit.q

    def as_dict(q):
        return {"mean": q.mean.copy(), "var": q.var.copy(), "geo": q.geo.copy(), "elog": q.elog.copy()}

    return (as_dict(theta), as_dict(phiT), fit._latent["g_plus"].copy(), fit._latent["g_minus"].copy())


# ---------------------------------------------------------------------------
# Timing
# ---------------------------------------------------------------------------


def time_calls(run, repeats):
    """(best wall seconds, CPU seconds of that call) over ``repeats`` calls."""
    best = (math.inf, math.inf)
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        run()
        best = min(best, (time.perf_counter() - wall, time.process_time() - cpu))
    return best


def row(label, wall, cpu, extra=""):
    print(f"{label:<44} {wall * 1e3:9.1f} {cpu * 1e3:9.1f}  {extra}")


def mode_against_mean(seeds, enron_size):
    """What the Bessel mode costs against the mean: Figure 3's data, and an Enron slice."""
    from pathlib import Path

    from lpviz.datasets import build_enron_topics, make_topics
    from lpviz.vi import compare_bessel_points

    def summary(table):
        last = table.groupby("bessel_point").tail(1).set_index("bessel_point")
        return {
            point: (
                last.loc[point, "mae"],
                last.loc[point, "rate_mae"] if "rate_mae" in last else np.nan,
                last.loc[point, "elbo"],
                int(last.loc[point, "iteration"]),
                last.loc[point, "elapsed"],
            )
            for point in ("mode", "mean")
        }

    print(
        "mode against mean, private CAVI to convergence from the same q "
        "(MAE vs counts, MAE vs rates, ELBO, iterations, seconds)"
    )
    rows = []
    for seed in range(seeds):
        data = make_topics(random_state=seed)
        result = summary(
            compare_bessel_points(data.release(), truth=data.truth(), n_components=3, n_iter=1000, random_state=seed)
        )
        rows.append(result)
        print(
            f"  Figure 3 data, seed {seed}: "
            + "; ".join(
                f"{point} {mae:.3f} / {rate:.3f}, ELBO {elbo:.1f}, {it} it, {sec:.2f} s"
                for point, (mae, rate, elbo, it, sec) in result.items()
            )
        )
    for point in ("mode", "mean"):
        values = np.array([row[point][:2] for row in rows])
        print(
            f"  Figure 3 data, mean over {seeds} seeds, {point}: MAE vs counts {values[:, 0].mean():.3f}, "
            f"vs rates {values[:, 1].mean():.3f}"
        )
    tarball = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "enron_sent_subset.tar.gz"
    if enron_size and tarball.is_file():
        from lpviz.privacy import privatize

        data = build_enron_topics(tarball, n_docs=enron_size, n_words=enron_size, random_state=0)
        truth = data.truth()
        release = privatize(truth.Y, epsilon=1.0, random_state=1)
        result = summary(compare_bessel_points(release, truth=truth, n_components=20, n_iter=300, random_state=0))
        print(
            f"  Enron {release.shape[0]} x {release.shape[1]}, K=20, eps/N=1: "
            + "; ".join(
                f"{point} MAE vs counts {mae:.4f}, ELBO {elbo:.1f}, {it} it, {sec:.1f} s"
                for point, (mae, _, elbo, it, sec) in result.items()
            )
        )
    elif enron_size:
        print(f"  (no Enron data at {tarball})")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="400 x 400, fewer repeats")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--mode-vs-mean", action="store_true", help="the Bessel mode against the mean instead")
    parser.add_argument("--seeds", type=int, default=5, help="Figure 3 data sets for --mode-vs-mean")
    parser.add_argument("--enron", type=int, default=0, metavar="D", help="with --mode-vs-mean: a D x D Enron slice")
    parser.add_argument("--tiny", action="store_true", help="the smallest sizes, seconds (the test suite's run)")
    args = parser.parse_args()
    if args.mode_vs_mean:
        mode_against_mean(1 if args.tiny else args.seeds, args.enron)
        return
    repeats = args.repeats or (1 if args.tiny else 3 if args.quick else 5)
    n = 60 if args.tiny else 400 if args.quick else 1000
    K = 5 if args.tiny else 50
    print(
        f"kernel threads: {n_threads()}  cpus: {os.cpu_count()}  "
        f"load average: {', '.join(f'{x:.1f}' for x in os.getloadavg())}"
    )
    release, truth = table1_data(n, n, K, random_state=0)
    alpha = float(release.alpha)
    print(
        f"data: D = V = {n}, K = {K}, eps/N = 1 (alpha = {alpha:.3f}), mean rate {truth.mu.mean():.2f}, "
        f"{np.mean(truth.Y > 0):.0%} of true counts nonzero"
    )

    print(f"\none CAVI iteration at D = V = {n}, K = {K}")
    print(f"{'':<44} {'wall ms':>9} {'cpu ms':>9}")
    fits = {}
    for label, method, point in (
        ("private, Bessel mode", "private", "mode"),
        ("private, Bessel mean", "private", "mean"),
        ("naive", "naive", None),
    ):
        fit = VariationalFit(release, method=method, bessel_point=point, n_components=K, tol=0.0, random_state=0)
        fit.step(3)  # load the kernels, leave the first iterations behind
        fits[label] = fit
        wall, cpu = time_calls(fit.step, repeats)
        row(f"lpviz {label}", wall, cpu)
        if label == "private, Bessel mode":
            lpviz_wall = wall

    # the reference is the VI paper's Bessel route: bessel_point selects it (variant="paper"); the
    # default variant, the collapsed conditional, keeps no q of the noise rates to start it from
    fit = VariationalFit(release, method="private", bessel_point="mode", n_components=K, random_state=0)
    fit.step(3)
    state = reference_state(fit)
    Y_obs = np.asarray(release.Y_obs)
    ref_wall, ref_cpu = time_calls(lambda: reference_iteration(Y_obs, alpha, copy.deepcopy(state)), repeats)
    row("plain numpy reference (private, mode)", ref_wall, ref_cpu, f"lpviz is {ref_wall / lpviz_wall:.1f}x faster")
    (theta, phi, _, _), ref_elbo = reference_iteration(Y_obs, alpha, state)
    fit.step()
    same = np.max(np.abs(fit.mu - theta["mean"] @ phi["mean"].T) / (theta["mean"] @ phi["mean"].T))
    print(f"the reference agrees: rates to {same:.1e} (relative), ELBO {fit.elbo:.6f} vs {ref_elbo:.6f}")
    verdict = "meets" if lpviz_wall <= TARGET_SECONDS else "misses"
    print(
        f"target <= {TARGET_SECONDS * 1e3:.0f} ms per private iteration: {lpviz_wall * 1e3:.1f} ms ({verdict} it); "
        "the paper's implementation: 2800 ms"
    )

    print(f"\nprivate CAVI to convergence (relative ELBO change <= {DEFAULT_TOL:g}), from a random q")
    for point in ("mode", "mean"):
        vi_run = variational_run(
            release,
            method="private",
            bessel_point=point,
            n_components=K,
            n_iter=50 if args.tiny else 1000,
            random_state=1,
        )
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in vi_run:
            pass
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        numbers = score(vi_run.posterior, release, truth)
        print(
            f"  Bessel {point}: {vi_run.fit.iteration} iterations, {wall:.1f} s wall ({cpu:.1f} s CPU), "
            f"ELBO {vi_run.fit.elbo:.1f}, MAE vs rates {numbers['rate_mae']:.3f}, vs counts {numbers['mae']:.3f}"
        )


if __name__ == "__main__":
    main()
