"""End to end on the paper's synthetic data: at high noise the private chain beats the naive one.

Fixed seeds and short runs keep these fast; the paper-scale runs (its
iteration counts, more seeds) are behind --runslow.
"""

import numpy as np
import pytest

from lpviz.datasets import make_blocks, make_topics
from lpviz.engine import fit
from lpviz.metrics import aligned_topic_distance, mae, score


def _fit(data, method, n_components, n_iter, seed, **kw):
    """Fit the generator's release (the truth beside it, for the non-private method) and score it."""
    release, truth = data.release(), data.truth()
    posterior = fit(
        release, method=method, truth=truth, n_components=n_components, n_iter=n_iter, random_state=seed, **kw
    )
    return posterior, score(posterior, release, truth)


def _fit_topics(data, method, n_iter, seed, **kw):
    return _fit(data, method, 3, n_iter, seed, **kw)


def _fit_blocks(data, method, n_iter, seed, **kw):
    return _fit(data, method, 5, n_iter, seed, **kw)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_figure3_private_beats_naive_at_high_noise(seed):
    data = make_topics(alpha0=0.8, random_state=seed)  # the "large alpha0" panel
    private, private_scores = _fit_topics(data, "private", 300, seed, thin=5)
    naive, naive_scores = _fit_topics(data, "naive", 300, seed, thin=5)
    private_mae, naive_mae = private_scores["mae"], naive_scores["mae"]
    assert private_mae == pytest.approx(mae(private.mu_hat, data.Y), rel=1e-12)  # every cell is observed
    # measured at seeds 0-4: private 2.2-2.5, naive 3.7-6.0
    assert private_mae < 0.8 * naive_mae, (private_mae, naive_mae)
    # topics of the highest-joint sample, aligned to the truth (Hungarian)
    private_error, naive_error = private_scores["topic_distance"], naive_scores["topic_distance"]
    assert private_error == aligned_topic_distance(private.best["phi"], data.factors["phi"])
    assert private_error < naive_error, (private_error, naive_error)


def test_figure3_low_noise_both_methods_recover_the_data():
    data = make_topics(alpha0=0.2, random_state=0)
    private = _fit_topics(data, "private", 200, 0, thin=5)[1]["mae"]
    naive = _fit_topics(data, "naive", 200, 0, thin=5)[1]["mae"]
    reference = _fit_topics(data, "nonprivate", 200, 0, thin=5)[1]["mae"]
    # with little noise the three fits are close: the gap only opens as the noise grows
    assert private < 1.3 * reference
    assert naive < 1.5 * reference


def test_figure1_private_beats_naive_at_high_noise():
    data = make_blocks(epsilon=0.75, random_state=0)  # the paper's highest privacy level
    private, private_scores = _fit_blocks(data, "private", 1000, 0, thin=5)
    naive, naive_scores = _fit_blocks(data, "naive", 1000, 0, thin=5)
    mask = ~np.eye(20, dtype=bool)  # no self loops: score off-diagonal cells
    private_mae, naive_mae = private_scores["mae"], naive_scores["mae"]
    assert private_mae == pytest.approx(mae(private.mu_hat, data.Y, mask=mask), rel=1e-12)
    # measured: private 7.5, naive 13.8
    assert private_mae < 0.8 * naive_mae, (private_mae, naive_mae)
    # the naive fit "predicts high values even for sparse parts of the matrix"
    sparse = mask & (data.mu < 0.1)
    assert naive.mu_hat[sparse].mean() > 2 * private.mu_hat[sparse].mean()


# Seed 2 draws a heavy-tailed network (one cell of 6,604, N = 108, alpha = 0.993,
# noise sd ~200): measured at paper scale, private 89.92 vs naive 89.90 -- a tie,
# with the private log joint still rising at 2,000 iterations (slow mixing).
HEAVY_TAILED = pytest.mark.xfail(reason="seed 2: private and naive tie at N=108, alpha=0.993", strict=False)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, pytest.param(2, marks=HEAVY_TAILED), 3, 4])
def test_figure1_paper_scale(seed):
    # the paper: 8,500 iterations, every 25th saved after 1,000; eps = 0.75
    data = make_blocks(epsilon=0.75, random_state=seed)
    private = _fit_blocks(data, "private", 8500, seed, burn_in=1000, thin=25)[1]
    naive = _fit_blocks(data, "naive", 8500, seed, burn_in=1000, thin=25)[1]
    assert private["mae"] < naive["mae"]


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(5))
def test_figure3_paper_scale(seed):
    # the paper: 6,000 iterations, every 25th saved after 1,000
    data = make_topics(alpha0=0.8, random_state=seed)
    private = _fit_topics(data, "private", 6000, seed, burn_in=1000, thin=25)[1]
    naive = _fit_topics(data, "naive", 6000, seed, burn_in=1000, thin=25)[1]
    assert private["mae"] < naive["mae"]
    assert private["topic_distance"] < naive["topic_distance"]
