"""Reproducible random streams for parallel Numba kernels.

Numba keeps one Mersenne Twister per thread. A kernel that reseeds that
generator at the start of each unit of work (a row, a block) with a seed
derived from (chain seed, iteration, unit) draws the same numbers whatever
thread runs the unit, so a chain is identical for any thread count.

The per-cell hot paths draw instead from a small explicit xoshiro256** state
(:func:`seed_state`, :func:`uniform`) seeded the same way: about seven times
cheaper per uniform than the Mersenne Twister.
"""

import numpy as np
from numba import njit, types
from numba.extending import overload

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


# ---------------------------------------------------------------------------
# xoshiro256**: the per-cell generator of the sweeps
# ---------------------------------------------------------------------------
#
# Numba's Mersenne Twister costs ~7.5 ns per uniform; a sweep draws about six
# per cell. xoshiro256** (Blackman & Vigna 2018) costs ~1 ns, passes BigCrush,
# and its whole state is four uint64 words: a kernel keeps one small array per
# unit of work, seeded from (chain seed, iteration, unit) by SplitMix64 as the
# authors recommend, so draws stay independent of the thread that runs the unit.

_U64 = np.uint64
_TWO_TO_MINUS_53 = 1.0 / 9007199254740992.0


@njit(nogil=True, cache=True, inline="always")
def _rotl(x, k):
    return (x << _U64(k)) | (x >> _U64(64 - k))


@njit(nogil=True, cache=True, inline="always")
def next_u64(state):
    """The next 64-bit output of the xoshiro256** generator ``state`` (uint64[4])."""
    s0 = state[0]
    s1 = state[1]
    s2 = state[2]
    s3 = state[3]
    result = _rotl(s1 * _U64(5), 7) * _U64(9)
    t = s1 << _U64(17)
    s2 ^= s0
    s3 ^= s1
    s1 ^= s2
    s0 ^= s3
    s2 ^= t
    s3 = _rotl(s3, 45)
    state[0] = s0
    state[1] = s1
    state[2] = s2
    state[3] = s3
    return result


@njit(nogil=True, cache=True, inline="always")
def _xoshiro_uniform(state):
    # The top 53 bits: every multiple of 2^-53 in [0, 1) equally likely.
    return np.float64(next_u64(state) >> _U64(11)) * _TWO_TO_MINUS_53


def uniform(state):
    """A uniform double in [0, 1) from ``state``: an xoshiro256** state array,
    or ``None`` for Numba's thread-local ``np.random`` (seeded by
    :func:`seed_stream`). Callable from Numba code only."""
    raise NotImplementedError("lpviz._random.uniform is called from Numba kernels")


@overload(uniform, inline="always")
def _uniform_overload(state):
    if isinstance(state, (types.NoneType, types.Omitted)):

        def from_numpy(state):
            return np.random.random()

        return from_numpy

    def from_state(state):
        return _xoshiro_uniform(state)

    return from_state


@njit(nogil=True, cache=True)
def seed_state(state, chain_seed, iteration, unit):
    """Fill the xoshiro256** ``state`` (uint64[4]) for one unit of work.

    The key is the same SplitMix64 hash of (chain seed, iteration, unit) that
    :func:`stream_seed` truncates to 32 bits; SplitMix64 then expands it to
    the 256-bit state (never all zero in practice: it is a bijection of a
    counter).
    """
    h = splitmix64(np.uint64(chain_seed))
    h = splitmix64(h ^ np.uint64(iteration))
    h = splitmix64(h ^ np.uint64(unit))
    for i in range(4):
        h = (h + _U64(0x9E3779B97F4A7C15)) & _MASK64
        state[i] = splitmix64(h)


@njit(nogil=True, cache=True)
def new_state(chain_seed, iteration, unit):
    """A fresh xoshiro256** state for (chain seed, iteration, unit)."""
    state = np.empty(4, dtype=np.uint64)
    seed_state(state, chain_seed, iteration, unit)
    return state
