"""The xoshiro256** streams of lpviz._random: the reference output, uniformity
(with a power check), independence of neighbouring streams, determinism."""

import numpy as np
from numba import njit
from scipy import stats

from lpviz._random import new_state, next_u64, seed_state, seed_stream, uniform

P_ACCEPT = 1e-3  # a correct generator passes at this level (fixed seeds)
P_POWER = 1e-6  # the same test must reject a slightly wrong one this hard


@njit
def _words(state, n):
    out = np.empty(n, dtype=np.uint64)
    for i in range(n):
        out[i] = next_u64(state)
    return out


@njit
def _uniforms(state, n):
    out = np.empty(n)
    for i in range(n):
        out[i] = uniform(state)
    return out


@njit
def _numpy_uniforms(n):
    out = np.empty(n)
    for i in range(n):
        out[i] = uniform(None)
    return out


def _xoshiro_reference(state, n):
    """xoshiro256** in pure Python integers (Blackman & Vigna's C code)."""
    mask = (1 << 64) - 1
    s = [int(x) for x in state]

    def rotl(x, k):
        return ((x << k) | (x >> (64 - k))) & mask

    out = []
    for _ in range(n):
        out.append(rotl(s[1] * 5 & mask, 7) * 9 & mask)
        t = s[1] << 17 & mask
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = rotl(s[3], 45)
    return out


def test_next_u64_is_xoshiro256starstar():
    start = np.array([1, 2, 3, 4], dtype=np.uint64)
    expected = _xoshiro_reference(start, 1000)
    assert [int(x) for x in _words(start.copy(), 1000)] == expected
    # the first output of state (1, 2, 3, 4), from the reference C code
    assert expected[0] == 11520


def test_seeding_is_deterministic_and_keyed():
    first = new_state(7, 3, 11)
    np.testing.assert_array_equal(first, new_state(7, 3, 11))
    for other in (new_state(8, 3, 11), new_state(7, 4, 11), new_state(7, 3, 12)):
        assert not np.array_equal(first, other)
    state = np.zeros(4, dtype=np.uint64)
    seed_state(state, 7, 3, 11)
    np.testing.assert_array_equal(state, first)
    assert np.all(first != 0)


def _uniformity_pvalue(u, bins=1000):
    counts = np.bincount(np.minimum((u * bins).astype(np.int64), bins - 1), minlength=bins)
    return stats.chisquare(counts).pvalue


def test_uniforms_are_uniform_and_the_test_has_power():
    u = _uniforms(new_state(2019, 0, 0), 2_000_000)
    assert u.min() >= 0.0 and u.max() < 1.0
    assert _uniformity_pvalue(u) > P_ACCEPT
    assert stats.kstest(u, "uniform").pvalue > P_ACCEPT
    # power: the same tests reject a 0.5% tilt in the density
    tilted = u**1.005
    assert _uniformity_pvalue(tilted) < P_POWER or stats.kstest(tilted, "uniform").pvalue < P_POWER
    # multiples of 2^-53: the top 53 bits of the word
    assert np.all(u * 2.0**53 == np.floor(u * 2.0**53))


def test_low_bits_and_pairs_are_uniform():
    words = _words(new_state(5, 0, 0), 1_000_000)
    low = (words & np.uint64(0xFF)).astype(np.int64)
    assert stats.chisquare(np.bincount(low, minlength=256)).pvalue > P_ACCEPT
    # successive uniforms are independent: a 32 x 32 grid of pairs
    u = _uniforms(new_state(5, 1, 0), 2_000_000)
    cells = np.minimum((u[0::2] * 32).astype(np.int64), 31) * 32 + np.minimum((u[1::2] * 32).astype(np.int64), 31)
    assert stats.chisquare(np.bincount(cells, minlength=1024)).pvalue > P_ACCEPT


def test_neighbouring_streams_are_uncorrelated():
    # the sweeps seed one stream per block: consecutive units, same iteration
    n = 200_000
    a = _uniforms(new_state(42, 9, 100), n)
    b = _uniforms(new_state(42, 9, 101), n)
    c = _uniforms(new_state(42, 10, 100), n)
    for x, y in ((a, b), (a, c)):
        r = np.corrcoef(x, y)[0, 1]
        assert abs(r) < 4.0 / np.sqrt(n)  # ~4 standard errors
        assert stats.ks_2samp(x, y).pvalue > P_ACCEPT


def test_uniform_of_none_draws_from_numbas_seeded_generator():
    seed_stream(3, 1, 4)
    first = _numpy_uniforms(100)
    seed_stream(3, 1, 4)
    np.testing.assert_array_equal(first, _numpy_uniforms(100))
    assert 0.0 <= first.min() and first.max() < 1.0
