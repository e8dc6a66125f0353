"""The topic model's allocation of a cell's tokens (issue 25): the products of a cell in a buffer,
then a walk per token (a few tokens; in the row's order of theta), binary
search in cumulative weights, or binomial splits (many): the law of each token, the within-cell
multinomial, the tiled sweep.

Every row of a test matrix has the same theta and one positive cell at the same word, so one
sweep draws many independent cells of one law: their summed topic counts are multinomial.
"""

import numpy as np
import pytest
import scipy.sparse as sp
from _checks import P_ACCEPT, chi_square_pvalue
from numba import njit
from scipy import stats
from test_tensor import make_work

from lpviz._random import seed_state
from lpviz.models import topics
from lpviz.models._kernels import FEW_TOKENS, descending_orders, draw_weighted

N_TOPICS = 20
ROWS = 20_000


def _csr(Y):
    matrix = sp.csr_matrix(np.asarray(Y))
    matrix.eliminate_zeros()
    return matrix.indptr.astype(np.int64), matrix.indices.astype(np.int64), matrix.data.astype(np.int64)


def _factors(kind, rng):
    """theta (one row) and phiT (two words) of a peaked or a flat kind."""
    shape = 0.1 if kind == "peaked" else 5.0
    theta = rng.gamma(shape, 1.0, N_TOPICS) + 1e-3  # every topic possible: tail bins are tested
    phiT = rng.gamma(shape, 1.0, (2, N_TOPICS)) + 1e-3
    return theta, phiT


def _allocate(theta_row, phiT, tokens, iteration, seed=1, word=1):
    """n_dk summed over ROWS rows, each with ``tokens`` tokens at ``word``; and n_dk itself
    (``theta_row`` of shape (ROWS, K): each row its own)."""
    model = topics.TopicModel(N_TOPICS)
    theta = np.tile(theta_row, (ROWS, 1)) if np.ndim(theta_row) == 1 else theta_row
    Y = np.zeros((ROWS, phiT.shape[0]), dtype=np.int64)
    Y[:, word] = tokens
    work = make_work(Y.shape, seed=seed)
    stats_ = model.new_stats((theta, phiT), work)
    model.allocate((theta, phiT), _csr(Y), stats_, work, iteration)
    n_dk, n_kv_parts = stats_
    n_kv = n_kv_parts.sum(axis=0)
    assert n_dk.sum() == tokens * ROWS and np.array_equal(n_dk.sum(axis=0), n_kv[:, word])
    assert n_kv[:, 1 - word].sum() == 0
    return n_dk.sum(axis=0), n_dk


@pytest.mark.parametrize("kind", ["peaked", "flat"])
def test_one_token_has_the_exact_law(kind):
    theta, phiT = _factors(kind, np.random.default_rng(0))
    counts = sum(_allocate(theta, phiT, 1, iteration)[0] for iteration in range(8))
    p = theta * phiT[1]
    assert chi_square_pvalue(counts, p) > P_ACCEPT
    # power: the law of theta with its second most likely topic's weight 10% higher is rejected
    wrong = theta.copy()
    wrong[np.argsort(p)[-2]] *= 1.1
    assert chi_square_pvalue(counts, wrong * phiT[1]) < P_ACCEPT


def test_rows_walk_in_their_own_orders_with_the_same_law():
    """Half the rows have theta permuted, so their walks go in another order of topics: each
    half's tokens follow its own theta * phi, and a topic's weight 10% off is rejected in each."""
    rng = np.random.default_rng(5)
    theta, phiT = _factors("peaked", rng)
    permuted = theta[rng.permutation(N_TOPICS)]
    assert not np.array_equal(np.argsort(-theta), np.argsort(-permuted))
    rows = np.where((np.arange(ROWS) % 2 == 0)[:, None], theta, permuted)
    halves = np.zeros((2, N_TOPICS), dtype=np.int64)
    for iteration in range(8):
        n_dk = _allocate(rows, phiT, 1, iteration)[1]
        halves += n_dk[0::2].sum(axis=0), n_dk[1::2].sum(axis=0)
    for counts, row in zip(halves, (theta, permuted), strict=True):
        p = row * phiT[1]
        assert chi_square_pvalue(counts, p) > P_ACCEPT
        wrong = row.copy()
        share = p / p.sum()
        wrong[np.argmax(share * (1 - share))] *= 1.1  # the topic whose share the draws pin best
        assert chi_square_pvalue(counts, wrong * phiT[1]) < P_ACCEPT


@njit
def _draws_in_order(weights, order, n_draws, seed):
    state = np.empty(4, dtype=np.uint64)
    seed_state(state, seed, 0, 0)
    counts = np.zeros(weights.shape[0], dtype=np.int64)
    total = weights.sum()
    for _ in range(n_draws):
        counts[draw_weighted(weights, total, state, order)] += 1
    return counts


@pytest.mark.parametrize("n", [1, 3, 7, 8])
def test_a_walk_in_any_order_draws_each_weight_in_proportion_and_never_a_zero(n):
    """Zeros first, last, alone and side by side, in a random order."""
    rng = np.random.default_rng(n)
    weights = rng.gamma(0.5, 1.0, n) + 0.05
    weights[[i for i in (0, 3, 4, 6) if i < n - 1]] = 0.0
    order = rng.permutation(n).astype(np.int32)
    assert sorted(order) == list(range(n))
    counts = _draws_in_order(weights, order, 400_000, n)
    assert counts[weights == 0.0].sum() == 0
    if n == 1:
        assert counts[0] == 400_000
        return
    assert chi_square_pvalue(counts[weights > 0], weights[weights > 0]) > P_ACCEPT
    wrong = weights.copy()  # power: the weight whose share the draws pin best, 5% heavier, is rejected
    share = weights / weights.sum()
    wrong[np.argmax(share * (1 - share))] *= 1.05
    assert chi_square_pvalue(counts[weights > 0], wrong[weights > 0]) < P_ACCEPT


def test_descending_orders_sort_each_row():
    x = np.random.default_rng(6).random((5, 9))
    orders = descending_orders(x, 1, 4)
    assert orders.shape == (3, 9) and orders.dtype == np.int32
    for r in range(3):
        assert np.all(np.diff(x[r + 1][orders[r]]) <= 0)


@pytest.mark.parametrize(
    ("tokens", "off"),
    [(2, 1.05), (FEW_TOKENS, 1.05), (FEW_TOKENS + 1, 1.05), (40, 1.02), (300, 1.02)],
    ids=["walk-2", "walk-most", "search-fewest", "search", "binomials"],
)
def test_a_cell_is_multinomial_in_every_regime(tokens, off):
    """A walk per token (up to FEW_TOKENS), binary search in cumulative weights (up to 64), binomial
    splits beyond: the topics' totals, and within a cell the tokens of the second most likely
    topic, Binomial(tokens, p) over 0..tokens with the tails pooled (tokens independent); the
    same counts reject that topic's probability a few percent off."""
    theta, phiT = _factors("peaked", np.random.default_rng(1))
    totals, n_dk = _allocate(theta, phiT, tokens, 3)
    p = theta * phiT[1]
    p = p / p.sum()
    assert chi_square_pvalue(totals, p) > P_ACCEPT
    second = int(np.argsort(p)[-2])
    within = np.bincount(n_dk[:, second], minlength=tokens + 1)
    support = np.arange(tokens + 1)
    assert chi_square_pvalue(within, stats.binom.pmf(support, tokens, p[second])) > P_ACCEPT
    assert chi_square_pvalue(within, stats.binom.pmf(support, tokens, min(p[second] * off, 1.0))) < P_ACCEPT


def test_a_word_of_zero_weights_is_uniform_as_the_walk_makes_it():
    """phi of the word underflowed to 0: every topic equally (im)plausible, not theta's law."""
    theta, phiT = _factors("peaked", np.random.default_rng(3))
    phiT[1] = 0.0
    counts = _allocate(theta, phiT, 1, 2)[0]
    assert chi_square_pvalue(counts, np.ones(N_TOPICS)) > P_ACCEPT


@pytest.mark.parametrize("n_words", [600, 8_000])
def test_tiled_allocation_does_not_depend_on_the_chunks(n_words):
    """8,000 words are three tiles at K = 20: each stream block keeps its draws across tiles."""
    assert n_words > 2 * topics.words_per_tile(N_TOPICS) or n_words < topics.words_per_tile(N_TOPICS)
    rng = np.random.default_rng(4)
    model = topics.TopicModel(N_TOPICS)
    state = model.init_state((64, n_words), 1.0, rng)
    counts = _csr(rng.poisson(0.4, (64, n_words)) * (rng.random((64, n_words)) < 0.3))
    results = []
    for parallel in (False, True):
        work = make_work((64, n_words), seed=5, parallel=parallel)
        assert (len(work.bounds) > 1) == parallel
        stats_ = model.new_stats(state, work)
        model.allocate(state, counts, stats_, work, 9)
        results.append((stats_[0], stats_[1].sum(axis=0)))
    np.testing.assert_array_equal(results[0][0], results[1][0])
    np.testing.assert_array_equal(results[0][1], results[1][1])
    assert results[0][0].sum() == counts[2].sum()
