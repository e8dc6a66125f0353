"""End to end on the paper's synthetic data: at high noise the private chain beats the naive one.

Fixed seeds and short runs keep these fast; the paper-scale runs (its
iteration counts, more seeds) are behind --runslow.
"""

import pytest

from lpviz.datasets import make_blocks, make_topics
from lpviz.inference import fit
from lpviz.metrics import aligned_topic_distance, mae


def _fit_topics(data, method, n_iter, seed, **kw):
    counts = data.Y if method == "nonprivate" else data.Y_obs
    return fit(counts, model="topics", method=method, n_components=3, n_iter=n_iter,
               alpha=data.alpha if method == "private" else None, random_state=seed, **kw)


def _fit_blocks(data, method, n_iter, seed, **kw):
    counts = data.Y if method == "nonprivate" else data.Y_obs
    return fit(counts, model="blocks", method=method, n_components=5, n_iter=n_iter,
               alpha=data.alpha if method == "private" else None, mask=data.info["mask"],
               random_state=seed, **kw)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_figure3_private_beats_naive_at_high_noise(seed):
    data = make_topics(alpha0=0.8, random_state=seed)  # the "large alpha0" panel
    private = _fit_topics(data, "private", 300, seed, thin=5)
    naive = _fit_topics(data, "naive", 300, seed, thin=5)
    private_mae, naive_mae = mae(private.mu_hat, data.Y), mae(naive.mu_hat, data.Y)
    # measured at seeds 0-4: private 2.2-2.5, naive 3.7-6.0
    assert private_mae < 0.8 * naive_mae, (private_mae, naive_mae)
    # topics of the highest-joint sample, aligned to the truth (Hungarian)
    phi_true = data.factors["phi"]
    private_error = aligned_topic_distance(private.best["phi"], phi_true)
    naive_error = aligned_topic_distance(naive.best["phi"], phi_true)
    assert private_error < naive_error, (private_error, naive_error)


def test_figure3_low_noise_both_methods_recover_the_data():
    data = make_topics(alpha0=0.2, random_state=0)
    private = _fit_topics(data, "private", 200, 0, thin=5)
    naive = _fit_topics(data, "naive", 200, 0, thin=5)
    nonprivate = _fit_topics(data, "nonprivate", 200, 0, thin=5)
    reference = mae(nonprivate.mu_hat, data.Y)
    # with little noise the three fits are close: the gap only opens as the noise grows
    assert mae(private.mu_hat, data.Y) < 1.3 * reference
    assert mae(naive.mu_hat, data.Y) < 1.5 * reference


def test_figure1_private_beats_naive_at_high_noise():
    data = make_blocks(epsilon=0.75, random_state=0)  # the paper's highest privacy level
    private = _fit_blocks(data, "private", 1000, 0, thin=5)
    naive = _fit_blocks(data, "naive", 1000, 0, thin=5)
    mask = data.info["mask"]  # no self loops: score off-diagonal cells
    private_mae, naive_mae = mae(private.mu_hat, data.Y, mask=mask), mae(naive.mu_hat, data.Y, mask=mask)
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
    private = _fit_blocks(data, "private", 8500, seed, burn_in=1000, thin=25)
    naive = _fit_blocks(data, "naive", 8500, seed, burn_in=1000, thin=25)
    mask = data.info["mask"]
    assert mae(private.mu_hat, data.Y, mask=mask) < mae(naive.mu_hat, data.Y, mask=mask)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(5))
def test_figure3_paper_scale(seed):
    # the paper: 6,000 iterations, every 25th saved after 1,000
    data = make_topics(alpha0=0.8, random_state=seed)
    private = _fit_topics(data, "private", 6000, seed, burn_in=1000, thin=25)
    naive = _fit_topics(data, "naive", 6000, seed, burn_in=1000, thin=25)
    assert mae(private.mu_hat, data.Y) < mae(naive.mu_hat, data.Y)
    phi_true = data.factors["phi"]
    assert aligned_topic_distance(private.best["phi"], phi_true) < aligned_topic_distance(naive.best["phi"], phi_true)
