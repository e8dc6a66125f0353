"""Speed of the Bessel sampler kernel ``lpviz.bessel.sample_nb``.

Prints ns per draw over the (nu, a) the private chains meet (mostly a < 10,
nu < 20) and far beyond, next to plain references timed in the same run:

- ``poisson``: numba's ``np.random.poisson`` at the same mean, the cost of a
  standard discrete draw;
- ``naive``: inversion from 0 by the pmf ratio, normaliser summed from 0;
- ``inversion`` / ``rejection``: each branch of ``sample_nb`` forced, to show
  where the switch (``_INVERSION_MAX_MODE``) belongs (at mode 0 ``sample_nb``
  takes neither: it inverts upward from 0 against bounds on the normaliser);
- ``stream``: ``sample_stream``, the same sampler on the xoshiro256** stream
  the chains use, where ``sample_nb`` draws from Numba's Mersenne Twister.

Run: ``.venv/bin/python benchmarks/bench_bessel.py`` (``--tiny``: every case and sampler, 1% of the
draws: seconds, for the test suite; its figures are noisy). The kernels here are cached (a run
compiles them once).
"""

import argparse
import time

import numpy as np
from numba import njit

from lpviz import bessel
from lpviz._random import new_state
from lpviz.bessel import _sample_inversion, _sample_rejection, mode_nb, sample_nb, sample_stream

N_DRAWS = 200_000


@njit(nogil=True, cache=True)
def _naive(nu, a):
    """Textbook inversion from m = 0 (no mode, no early stop of the sum)."""
    quarter_a2 = 0.25 * a * a
    total = 0.0
    term = 1.0
    m = 0.0
    while term > 1e-300 or m < 0.5 * a:  # terms overflow past a ~ 1400
        total += term
        term *= quarter_a2 / ((m + 1.0) * (m + nu + 1.0))
        m += 1.0
    u = np.random.random() * total
    term = 1.0
    m = 0.0
    cumulative = term
    while u >= cumulative:
        term *= quarter_a2 / ((m + 1.0) * (m + nu + 1.0))
        m += 1.0
        cumulative += term
    return int(m)


@njit(nogil=True, cache=True)
def _loop(which, nu, a, n, mean):
    np.random.seed(0)
    state = new_state(0, 0, 0)
    total = 0
    mode = mode_nb(nu, a)
    for _ in range(n):
        if which == 0:
            total += sample_nb(nu, a)
        elif which == 1:
            total += np.random.poisson(mean)
        elif which == 2:
            total += _naive(nu, a)
        elif which == 3:
            total += _sample_inversion(nu, a, mode, None)
        elif which == 4:
            total += _sample_rejection(nu, a, mode, None)
        else:
            total += sample_stream(nu, 0.25 * a * a, state)
    return total


def ns_per_draw(which, nu, a, n):
    mean = float(bessel.mean(nu, a))
    _loop(which, nu, a, 10, mean)  # compile
    start = time.perf_counter()
    _loop(which, nu, a, n, mean)
    return (time.perf_counter() - start) / n * 1e9


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tiny", action="store_true", help="1%% of the draws (the test suite's run)")
    args = parser.parse_args()
    draws = N_DRAWS // 100 if args.tiny else N_DRAWS
    cases = [
        (0.0, 0.5),
        (1.0, 1.0),
        (3.0, 2.5),
        (0.5, 4.0),
        (5.0, 8.0),
        (20.0, 10.0),
        (0.0, 16.0),
        (0.0, 32.0),
        (0.0, 64.0),
        (2.0, 128.0),
        (0.0, 256.0),
        (0.0, 512.0),
        (0.0, 1e4),
        (1e4, 1e4),
        (0.5, 1e6),
    ]
    names = ["sample_nb", "poisson", "naive", "inversion", "rejection", "stream"]
    print(f"{'nu':>8} {'a':>8} {'var':>9} " + " ".join(f"{name:>10}" for name in names) + "   (ns/draw)")
    for nu, a in cases:
        row = []
        for which, name in enumerate(names):
            if name == "naive" and a > 1000:
                row.append(float("nan"))  # its unscaled terms overflow
                continue
            n = draws if not (name in ("naive", "inversion") and a > 200) else max(1, draws // 100)
            row.append(ns_per_draw(which, nu, a, n))
        print(f"{nu:8g} {a:8g} {float(bessel.var(nu, a)):9.3g} " + " ".join(f"{t:10.0f}" for t in row))


if __name__ == "__main__":
    main()
