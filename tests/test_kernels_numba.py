"""A Numba behaviour the kernels must not rely on (numba 0.68.1, the version pinned).

An array unpacked from a tuple argument, written after a draw from :func:`lpviz._random.uniform`
(an ``@overload(inline="always")``), loses those writes when they are the array's last use in
straight-line code: the call returns and the array is unchanged. The same writes land inside a
loop, with the arrays passed as separate arguments, when the array is read again, or when the
draw is the plain ``@njit(inline="always")`` function underneath. The first test shows the bug is
present (strict xfail: when Numba fixes it the test passes and fails the suite, and this note can
go); the second the forms that keep the stores; the last that the kernels which unpack their
statistics from tuples keep every store (each draws in loops).
"""

import numpy as np
import pytest
from numba import njit
from test_tensor import csr, make_work

from lpviz._random import _xoshiro_uniform, seed_state, uniform
from lpviz.models import topics


@njit(nogil=True)
def _unpacked_last_use(stats, state):
    first, second = stats
    k = int(uniform(state) * first.shape[0])
    first[k] += 1
    second[k] += 1


@njit(nogil=True)
def _unpacked_in_loop(stats, state, n):
    first, second = stats
    for _ in range(n):
        k = int(uniform(state) * first.shape[0])
        first[k] += 1
        second[k] += 1


@njit(nogil=True)
def _separate_arguments(first, second, state):
    k = int(uniform(state) * first.shape[0])
    first[k] += 1
    second[k] += 1


@njit(nogil=True)
def _unpacked_read_again(stats, state):
    first, second = stats
    k = int(uniform(state) * first.shape[0])
    first[k] += 1
    second[k] += 1
    return first[k] + second[k]


@njit(nogil=True)
def _unpacked_plain_inline(stats, state):
    first, second = stats
    k = int(_xoshiro_uniform(state) * first.shape[0])
    first[k] += 1
    second[k] += 1


def _state():
    state = np.empty(4, dtype=np.uint64)
    seed_state(state, 1, 0, 0)
    return state


def _calls(kernel, n=100):
    """Totals of the two arrays after ``n`` calls of ``kernel`` (one store each per call)."""
    first, second, state = np.zeros(5, dtype=np.int64), np.zeros(5, dtype=np.int64), _state()
    for _ in range(n):
        kernel((first, second), state)
    return int(first.sum()), int(second.sum())


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="numba 0.68.1 drops stores to tuple-unpacked arrays after an inlined uniform overload (last use)",
)
def test_stores_after_an_inlined_uniform_overload_land():
    assert _calls(_unpacked_last_use) == (100, 100)


def test_the_forms_the_kernels_use_keep_their_stores():
    assert _calls(lambda stats, state: _unpacked_in_loop(stats, state, 1)) == (100, 100)
    assert _calls(lambda stats, state: _separate_arguments(*stats, state)) == (100, 100)
    assert _calls(_unpacked_read_again) == (100, 100)
    assert _calls(_unpacked_plain_inline) == (100, 100)
    # the draws moved the stream: the loop's stores are the draws', not a constant cell
    first, second, state = np.zeros(5, dtype=np.int64), np.zeros(5, dtype=np.int64), _state()
    _unpacked_in_loop((first, second), state, 1000)
    assert np.array_equal(first, second) and np.count_nonzero(first) == 5 and first.sum() == 1000


@pytest.mark.parametrize("tokens", [1, 3, 30, 200])
def test_topic_allocation_keeps_every_token(tokens):
    """n_dk and n_kv, unpacked from the stats tuple, get every token: one token per cell (the walk
    at K = 20), few (by rejection), tens (cumulative weights) and hundreds (binomial splits)."""
    n_topics, shape = 20, (40, 30)
    model = topics.TopicModel(n_topics)
    rng = np.random.default_rng(tokens)
    state = model.init_state(shape, 1.0, rng)
    Y = tokens * (rng.random(shape) < 0.5)
    work = make_work(shape, seed=2)
    stats = model.new_stats(state, work)
    model.allocate(state, csr(Y), stats, work, 3)
    n_dk, n_kv = stats[0], stats[1].sum(axis=0)
    np.testing.assert_array_equal(n_dk.sum(axis=1), Y.sum(axis=1))
    np.testing.assert_array_equal(n_kv.sum(axis=0), Y.sum(axis=0))


def test_topic_thinning_keeps_every_token():
    """The sparse step's tokens (rows, columns returned) are each counted once in n_dk and n_kv."""
    n_topics, shape = 5, (48, 40)
    model = topics.TopicModel(n_topics)
    rng = np.random.default_rng(7)
    state = model.init_state(shape, 3.0, rng)
    Y = rng.integers(-2, 3, shape)
    work = make_work(shape, seed=3)
    stats = model.new_stats(state, work)
    excluded = (np.zeros(shape[0] + 1, dtype=np.int64), np.zeros(0, dtype=np.int64))
    rows = (np.ones(shape[0], dtype=np.bool_), Y, *excluded, np.full(shape[0], 2.0))
    token_rows, token_cols = model.poisson_allocate(state, rows, stats, work, 4)
    assert token_rows.size > 100
    assert np.all(Y[token_rows, token_cols] <= 0)
    np.testing.assert_array_equal(stats[0].sum(axis=1), np.bincount(token_rows, minlength=shape[0]))
    np.testing.assert_array_equal(stats[1].sum(axis=0).sum(axis=0), np.bincount(token_cols, minlength=shape[1]))
