"""The topic model's allocation of a cell's tokens by rejection from its word's alias table
(issue 25): the law of each token, the exact walk after the rejections, the tiled sweep.

Every row of a test matrix has the same theta and one positive cell at the same word, so one
sweep draws many independent cells of one law: their summed topic counts are multinomial.
"""

import numpy as np
import pytest
import scipy.sparse as sp
from _checks import P_ACCEPT, chi_square_pvalue
from scipy import stats
from test_tensor import make_work

from lpviz.models import topics

N_TOPICS = 20  # rejection from REJECTION_MIN_TOPICS = 16 on, for cells of up to 20 // 4 = 5 tokens
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
    """n_dk summed over ROWS rows, each with ``tokens`` tokens at ``word``; and n_dk itself."""
    model = topics.TopicModel(N_TOPICS)
    theta = np.tile(theta_row, (ROWS, 1))
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
@pytest.mark.parametrize("attempts", [0, 1, 8, 1000])
def test_one_token_by_rejection_has_the_exact_law(monkeypatch, kind, attempts):
    """0 attempts: every token walks; 1000: every token is accepted before the walk (at the
    peaked factors' ~0.1 acceptance the walk's share is 1e-46); 1 and 8 mix both."""
    monkeypatch.setattr(topics, "REJECTION_ATTEMPTS", attempts)
    theta, phiT = _factors(kind, np.random.default_rng(0))
    counts = sum(_allocate(theta, phiT, 1, iteration)[0] for iteration in range(8))
    p = theta * phiT[1]
    assert chi_square_pvalue(counts, p) > P_ACCEPT
    # power: the law of theta with its second most likely topic's weight 10% higher is rejected
    wrong = theta.copy()
    wrong[np.argsort(p)[-2]] *= 1.1
    assert chi_square_pvalue(counts, wrong * phiT[1]) < P_ACCEPT


@pytest.mark.parametrize("attempts", [0, 8])
def test_a_cell_of_few_tokens_is_multinomial(monkeypatch, attempts):
    """Five tokens (the most a cell draws by rejection at K = 20): the topics' totals, and within a
    cell the tokens of the second most likely topic, Binomial(5, p) over 0..5 (tokens independent)."""
    monkeypatch.setattr(topics, "REJECTION_ATTEMPTS", attempts)
    theta, phiT = _factors("peaked", np.random.default_rng(1))
    totals, n_dk = _allocate(theta, phiT, 5, 3)
    p = theta * phiT[1]
    p = p / p.sum()
    assert chi_square_pvalue(totals, p) > P_ACCEPT
    second = int(np.argsort(p)[-2])
    within = np.bincount(n_dk[:, second], minlength=6)
    assert chi_square_pvalue(within, stats.binom.pmf(np.arange(6), 5, p[second])) > P_ACCEPT
    assert chi_square_pvalue(within, stats.binom.pmf(np.arange(6), 5, p[second] * 1.05)) < P_ACCEPT


def test_rejection_and_the_walk_draw_differently_from_the_same_stream(monkeypatch):
    """The two paths are both run by the tests above: from one seed they give other draws."""
    theta, phiT = _factors("flat", np.random.default_rng(2))
    monkeypatch.setattr(topics, "REJECTION_ATTEMPTS", 0)
    walked = _allocate(theta, phiT, 1, 7)[1]
    monkeypatch.setattr(topics, "REJECTION_ATTEMPTS", 1000)
    rejected = _allocate(theta, phiT, 1, 7)[1]
    assert not np.array_equal(walked, rejected)


def test_a_word_of_zero_weights_is_uniform_as_the_walk_makes_it():
    """phi of the word underflowed to 0: no alias table to propose from, the walk's rule
    (every topic equally (im)plausible), not theta's law."""
    theta, phiT = _factors("peaked", np.random.default_rng(3))
    phiT[1] = 0.0
    counts = _allocate(theta, phiT, 1, 2)[0]
    assert chi_square_pvalue(counts, np.ones(N_TOPICS)) > P_ACCEPT


@pytest.mark.parametrize("n_words", [600, 5_000])
def test_tiled_allocation_does_not_depend_on_the_chunks(n_words):
    """5,000 words are three tiles at K = 20: each stream block keeps its draws across tiles."""
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
