"""The Figure 3 and Figure 1 generators: structure, noise wiring, seeding, errors."""

import numpy as np
import pytest
from scipy import stats

from lpviz.datasets import SyntheticData, make_blocks, make_topics


def _geometric_variance(alpha):
    # two-sided geometric: Var(tau) = 2 alpha / (1 - alpha)^2
    return 2 * alpha / (1 - alpha) ** 2


def test_make_topics_has_the_papers_shape_and_structure():
    data = make_topics(random_state=0)
    assert isinstance(data, SyntheticData)
    assert data.model == "topics"
    assert data.Y.shape == data.Y_obs.shape == data.mu.shape == (90, 15)
    assert data.Y.dtype == np.int64
    # the noised counts as the release holds them: the smallest signed type covering their values
    assert data.Y_obs.dtype == np.int16 and np.abs(data.Y_obs).max() > np.iinfo(np.int8).max
    assert data.Y.min() >= 0 and data.Y_obs.min() < 0  # noise makes negative counts
    assert data.row_labels[0] == "doc 0" and data.col_labels[14] == "word 14"
    phi, theta = data.factors["phi"], data.factors["theta"]
    assert phi.shape == (3, 15) and theta.shape == (90, 3)
    np.testing.assert_allclose(phi.sum(axis=1), 1.0)
    np.testing.assert_allclose(data.mu, theta @ phi)
    # each topic puts the majority of its mass on five words of its own
    heavy = [set(np.flatnonzero(row > 1 / 15)) for row in phi]
    assert [len(words) for words in heavy] == [5, 5, 5]
    assert not (heavy[0] & heavy[1] or heavy[0] & heavy[2] or heavy[1] & heavy[2])
    assert all(row[list(words)].sum() > 0.5 for row, words in zip(phi, heavy, strict=True))
    # three groups of thirty documents, each document mostly on its group's topic
    groups = data.info["groups"]
    assert np.bincount(groups).tolist() == [30, 30, 30]
    shares = theta / theta.sum(axis=1, keepdims=True)
    assert np.all(shares[np.arange(90), groups] > 0.5)
    assert np.all(np.argmax(shares, axis=1) == groups)


def test_make_topics_alpha_is_per_document_around_alpha0():
    data = make_topics(n_docs=600, alpha0=0.3, concentration=10, random_state=1)
    assert data.alpha.shape == (600,)
    assert np.all((data.alpha > 0) & (data.alpha < 1))
    # Beta(3, 7): mean 0.3, sd sqrt(0.3 * 0.7 / 11) = 0.138; 600 draws
    assert stats.kstest(data.alpha, stats.beta(3, 7).cdf).pvalue > 0.01
    assert stats.kstest(data.alpha, stats.beta(3.6, 6.4).cdf).pvalue < 0.01  # power: alpha0=0.36


def test_make_topics_noise_uses_each_documents_own_alpha():
    data = make_topics(n_docs=3000, alpha0=0.5, concentration=4, random_state=2)
    tau = data.Y_obs - data.Y
    # mean of tau^2 / Var(tau | alpha_d) over 45,000 cells is 1 +- ~0.01
    ratio = np.mean(tau**2 / _geometric_variance(data.alpha)[:, None])
    assert ratio == pytest.approx(1.0, abs=0.05)
    # power: the same statistic with the alphas given to the wrong documents is far from 1
    shuffled = np.random.default_rng(0).permutation(data.alpha)
    assert abs(np.mean(tau**2 / _geometric_variance(shuffled)[:, None]) - 1) > 0.3


def test_make_topics_counts_are_poisson_around_mu():
    data = make_topics(n_docs=900, random_state=3)
    n_cells = data.Y.size
    dispersion = np.sum((data.Y - data.mu) ** 2 / data.mu)  # Pearson: chi2(n_cells) if Poisson
    assert 0.001 < stats.chi2(n_cells).sf(dispersion) < 0.999

    def total_z(rates):  # sum of Y is Poisson(sum of rates)
        return (data.Y.sum() - rates.sum()) / np.sqrt(rates.sum())

    assert abs(total_z(data.mu)) < 3.3
    assert abs(total_z(1.05 * data.mu)) > 3.3  # power: rates 5% too high are rejected


def test_generators_are_seeded():
    a, b, c = make_topics(random_state=5), make_topics(random_state=5), make_topics(random_state=6)
    np.testing.assert_array_equal(a.Y_obs, b.Y_obs)
    np.testing.assert_array_equal(a.alpha, b.alpha)
    assert not np.array_equal(a.Y_obs, c.Y_obs)
    x, y = make_blocks(random_state=5), make_blocks(random_state=5)
    np.testing.assert_array_equal(x.Y_obs, y.Y_obs)
    assert not np.array_equal(x.Y, make_blocks(random_state=6).Y)


def test_make_blocks_figure1_network():
    data = make_blocks(random_state=0, epsilon=1.0)
    assert data.model == "blocks"
    assert data.Y.shape == data.Y_obs.shape == (20, 20)
    assert data.factors["theta"].shape == (20, 5) and data.factors["pi"].shape == (5, 5)
    assert data.row_labels == data.col_labels == [f"actor {i}" for i in range(20)]
    # no self loops: the release marks the diagonal as cells that do not exist
    release = data.release()
    assert release.kind == "network" and release.simulated
    np.testing.assert_array_equal(release.structural_zeros, np.eye(20, dtype=bool))
    mask = release.observed_cells
    assert mask.dtype == bool and not mask.diagonal().any() and mask.sum() == 380
    np.testing.assert_array_equal(release.Y_obs, data.Y_obs)
    assert release.alpha == data.alpha and release.epsilon == 1.0 and release.N == pytest.approx(data.info["N"])
    assert not data.Y.diagonal().any() and not data.Y_obs.diagonal().any() and not data.mu.diagonal().any()
    theta, pi = data.factors["theta"], data.factors["pi"]
    np.testing.assert_allclose(data.mu[mask], (theta @ pi @ theta.T)[mask])
    # N is the mean off-diagonal count and alpha = exp(-epsilon / N)
    N = data.Y[mask].mean()
    assert data.info["N"] == pytest.approx(N)
    assert data.alpha == pytest.approx(np.exp(-1.0 / N))
    # sparse block structure: many near-empty cells, some heavy ones
    assert np.mean(data.mu[mask] < 0.01 * data.mu.max()) > 0.5


def test_synthetic_data_give_their_release_and_truth_apart():
    data = make_topics(random_state=8)
    release, truth = data.release(), data.truth()
    # the release: the generator's noised copy, flagged as a simulation; no truth in it
    np.testing.assert_array_equal(release.Y_obs, data.Y_obs)
    np.testing.assert_array_equal(release.alpha, data.alpha)
    assert release.kind == "documents" and release.simulated and release.structural_zeros is None
    assert not hasattr(release, "Y") and not hasattr(release, "mu")
    # the truth: counts, rates and factors
    np.testing.assert_array_equal(truth.Y, data.Y)
    np.testing.assert_array_equal(truth.mu, data.mu)
    assert set(truth.factors) == {"theta", "phi"}
    # noising the counts anew: labels only when declared public
    again = data.privatize(alpha=0.5, random_state=1)
    assert again.row_labels is None and again.col_labels is None and again.name == "synthetic-topics"
    labelled = data.privatize(alpha=0.5, random_state=1, public_labels=True)
    assert labelled.row_labels == tuple(data.row_labels) and labelled.col_labels == tuple(data.col_labels)
    np.testing.assert_array_equal(again.Y_obs, labelled.Y_obs)
    network = make_blocks(random_state=8).privatize(alpha=0.5, random_state=1)
    assert network.kind == "network" and not np.diag(network.Y_obs).any()


def test_make_blocks_noise_level_follows_epsilon():
    low, high = make_blocks(epsilon=2.5, random_state=4), make_blocks(epsilon=0.75, random_state=4)
    np.testing.assert_array_equal(low.Y, high.Y)  # same truth, more noise
    assert low.alpha < high.alpha
    big = make_blocks(n_actors=120, epsilon=2.0, random_state=7)
    tau = (big.Y_obs - big.Y)[big.release().observed_cells]
    # 14,280 cells: the mean of tau^2 / Var(tau) is 1 +- ~0.02
    assert np.mean(tau**2) / _geometric_variance(big.alpha) == pytest.approx(1.0, abs=0.1)
    assert abs(tau.mean()) < 5 * np.sqrt(_geometric_variance(big.alpha) / tau.size)


def test_make_blocks_literal_paper_prior_is_empty_and_says_so():
    # Gamma(0.01, rate 0.5) as printed in the paper draws (almost) no events
    with pytest.raises(ValueError, match="no events.*N = mean count = 0"):
        make_blocks(a0=0.01, b0=0.5, random_state=1)


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: make_topics(n_docs=2, n_topics=3), ValueError, "n_docs must be >= 3"),
        (lambda: make_topics(n_words=2.5), TypeError, "n_words must be an integer"),
        (lambda: make_topics(alpha0=1.5), ValueError, "alpha"),
        (lambda: make_topics(doc_length=0), ValueError, "doc_length must be a finite number > 0"),
        (lambda: make_topics(topic_purity=1.5), ValueError, "share of mass"),
        (lambda: make_blocks(epsilon=0), ValueError, "epsilon must be a finite number > 0"),
        (lambda: make_blocks(epsilon=-1.0), ValueError, "epsilon"),
        (lambda: make_blocks(n_actors=1), ValueError, "n_actors must be >= 2"),
        (lambda: make_blocks(a0=-0.1), ValueError, "a0"),
    ],
)
def test_generators_reject_bad_parameters(call, error, message):
    with pytest.raises(error, match=message):
        call()
