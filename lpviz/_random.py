"""Reproducible random streams for parallel Numba kernels.

Numba keeps one Mersenne Twister per thread. A kernel that reseeds that
generator at the start of each unit of work (a row, a block) with a seed
derived from (chain seed, iteration, unit) draws the same numbers whatever
thread runs the unit, so a chain is identical for any thread count.
"""

import numpy as np
from numba import njit

_MASK64 = np.uint64(0xFFFFFFFFFFFFFFFF)


@njit(nogil=True, cache=True)
def splitmix64(x):
    """One step of SplitMix64: a well-mixed 64-bit hash of ``x``."""
    x = (x + np.uint64(0x9E3779B97F4A7C15)) & np.uint64(0xFFFFFFFFFFFFFFFF)
    x = ((x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)) & np.uint64(0xFFFFFFFFFFFFFFFF)
    x = ((x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)) & np.uint64(0xFFFFFFFFFFFFFFFF)
    return x ^ (x >> np.uint64(31))


@njit(nogil=True, cache=True)
def stream_seed(chain_seed, iteration, unit):
    """32-bit seed for the thread-local generator of one unit of work."""
    h = splitmix64(np.uint64(chain_seed))
    h = splitmix64(h ^ np.uint64(iteration))
    h = splitmix64(h ^ np.uint64(unit))
    return np.uint32(h & np.uint64(0xFFFFFFFF))


@njit(nogil=True, cache=True)
def seed_stream(chain_seed, iteration, unit):
    """Reseed this thread's Numba generator for one unit of work."""
    np.random.seed(stream_seed(chain_seed, iteration, unit))


def chain_seed_from(random_state):
    """A 63-bit integer seed from ``random_state`` (None, int or Generator)."""
    rng = np.random.default_rng(random_state)
    return int(rng.integers(0, 2**63 - 1))
