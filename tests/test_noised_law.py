"""The law of a noised count given its rate (DESIGN.md 1f): closed form against brute force and draws."""

import numpy as np
import pytest
from scipy import stats
from scipy.special import logsumexp

from lpviz.privacy import geometric_logpmf, noised_logpmf
from tests._checks import P_ACCEPT, chi_square_pvalue


def brute_force_logpmf(y_noised, mu, alpha, n_terms=3000):
    """log sum_y Pois(y; mu) 2Geo(ytil - y; alpha), summed term by term in logs."""
    y = np.arange(n_terms)
    return float(logsumexp(stats.poisson.logpmf(y, mu) + geometric_logpmf(y_noised - y, alpha)))


@pytest.mark.parametrize("y_noised", [-3, 0, 2, 5, 40])
@pytest.mark.parametrize("alpha", [0.1, 0.3, 0.5, 0.7, 0.9])
def test_closed_form_equals_the_brute_force_sum(y_noised, alpha):
    for mu in [1e-4, 1e-2, 0.5, 3.0, 10.0, 30.0]:
        want = brute_force_logpmf(y_noised, mu, alpha)
        got = noised_logpmf(y_noised, mu, alpha)
        assert got == pytest.approx(want, rel=1e-13, abs=1e-13), (y_noised, mu, alpha)


def test_far_tails_stay_finite_and_exact():
    # the first term is exp(mu/alpha) times a tiny CDF: in plain floats it overflows or loses every digit
    for y_noised, mu, alpha in [(-200, 50.0, 0.5), (400, 2.0, 0.9), (3000, 2500.0, 0.99), (0, 700.0, 0.2)]:
        got = noised_logpmf(y_noised, mu, alpha)
        assert np.isfinite(got)
        assert got == pytest.approx(brute_force_logpmf(y_noised, mu, alpha, n_terms=8000), rel=1e-12)


def test_zero_rate_is_the_noise_alone_and_tiny_alpha_is_poisson():
    taus = np.arange(-5, 6)
    np.testing.assert_allclose(noised_logpmf(taus, 0.0, 0.4), geometric_logpmf(taus, 0.4), rtol=1e-14)
    ks = np.arange(0, 12)
    np.testing.assert_allclose(noised_logpmf(ks, 2.5, 1e-300), stats.poisson.logpmf(ks, 2.5), rtol=1e-14)
    assert noised_logpmf(-1, 2.5, 1e-300) < -600  # a negative noised count needs the noise: mass ~ alpha


@pytest.mark.parametrize(("mu", "alpha"), [(0.3, 0.2), (5.0, 0.9), (40.0, 0.6)])
def test_sums_to_one(mu, alpha):
    support = np.arange(-2000, 2000)
    assert np.exp(logsumexp(noised_logpmf(support, mu, alpha))) == pytest.approx(1.0, abs=1e-12)


def test_broadcasts_per_row_alpha_against_a_matrix():
    rng = np.random.default_rng(0)
    y = rng.integers(-4, 9, size=(3, 5))
    mu = rng.gamma(2.0, 1.0, size=(3, 5))
    alpha = np.array([[0.2], [0.5], [0.8]])
    got = noised_logpmf(y, mu, alpha)
    assert got.shape == (3, 5)
    for i in range(3):
        for j in range(5):
            assert got[i, j] == noised_logpmf(int(y[i, j]), mu[i, j], float(alpha[i, 0]))


def draws(mu, alpha, n, seed):
    """Noised counts drawn the mechanism's way: Poisson plus a difference of two geometrics."""
    rng = np.random.default_rng(seed)
    tau = rng.geometric(1 - alpha, n) - rng.geometric(1 - alpha, n)
    return rng.poisson(mu, n) + tau


# the wrong alpha is a few percent off; where the Poisson's variance dwarfs the noise's (mu = 12,
# alpha = 0.3: 12 against 0.9) the draws can tell a little less
@pytest.mark.parametrize(("mu", "alpha", "wrong"), [(3.0, 0.6, 0.61), (0.2, 0.85, 0.87), (12.0, 0.3, 0.35)])
def test_draws_fit_the_law_and_a_slightly_wrong_alpha_fails(mu, alpha, wrong):
    sample = draws(mu, alpha, 200_000, seed=int(mu * 100))
    support = np.arange(sample.min() - 50, sample.max() + 51)
    observed = np.bincount(sample - support[0], minlength=support.size)
    # tail bins: the chi-square pools every cell expecting fewer than 5 draws, both tails included
    assert chi_square_pvalue(observed, np.exp(noised_logpmf(support, mu, alpha))) > P_ACCEPT
    assert chi_square_pvalue(observed, np.exp(noised_logpmf(support, mu, wrong))) < P_ACCEPT


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ((1.5, 1.0, 0.5), "whole numbers"),
        ((1, -1.0, 0.5), "finite and >= 0"),
        ((1, np.nan, 0.5), "finite and >= 0"),
        ((1, 1.0, 1.0), "strictly between 0 and 1"),
        ((1, 1.0, 0.0), "strictly between 0 and 1"),
        (([1, 2], [1.0, 2.0, 3.0], 0.5), "broadcast"),
    ],
)
def test_bad_input_is_refused_in_words(args, words):
    with pytest.raises(ValueError, match=words):
        noised_logpmf(*args)
