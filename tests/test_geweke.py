"""Geweke (2004) "getting it right" tests for the private chains.

The marginal-conditional simulator draws (factors, lambda, y) from the prior
and the generative model, independently. The successive-conditional simulator
alternates: draw noised data ytil from the model given the chain's current
(factors, lambda) -- y ~ Pois(mu), g* ~ Pois(lambda*), ytil = y + g+ - g- --
then run one chain iteration on ytil. If every conditional the chain draws
from is right, both simulators have the same stationary distribution, so the
means of any test function agree within Monte Carlo error (batch means for
the autocorrelated chain). A power check runs the same test on a chain with
the ICML text's wrong lambda rate ``alpha/(1-alpha) + 1`` and must reject.

Sizes are tiny (topics 3 x 4 with K=2, blocks 4 actors with C=2) with a0=1 so
the tails are tame; one cell is held out (mask) to check that missing cells
are left out of every rate sum; rows have different alphas.
"""

import numpy as np
import pytest

from lpviz import models
from lpviz.engine import Chain

A0, B0 = 1.0, 1.0
TOPICS_SHAPE, K = (3, 4), 2
N_ACTORS, C = 4, 2
ALPHA = np.array([0.2, 0.35, 0.5, 0.3])
# Two-sided tail probability per test function is about 2e-5: with ~12
# functions the family-wise false rejection rate stays below 1e-3.
Z_CRITICAL = 4.25


def _mask(shape):
    mask = np.ones(shape, dtype=bool)
    mask[1, 2] = False  # one held-out cell
    return mask


def _test_functions(theta, other, lam_plus, lam_minus, y, mu, observed):
    """Statistics of one state; ``other`` is phi (topics) or pi (blocks)."""
    obs_y, obs_mu = y[observed], mu[observed]
    obs_lp, obs_lm = lam_plus[observed], lam_minus[observed]
    return np.array(
        [
            theta.mean(),
            (theta**2).mean(),
            other.mean(),
            (other**2).mean(),
            obs_mu.sum(),
            obs_y.mean(),
            (obs_y**2).mean(),
            (obs_y * obs_mu).mean(),
            obs_lp.mean(),
            obs_lm.mean(),
            (obs_lp * obs_lm).mean(),
            (obs_lp * (obs_y > 0)).mean(),
        ]
    )


def _observed(model, mask):
    observed = mask.copy()
    if model == "blocks":
        np.fill_diagonal(observed, False)
    return observed


def _sizes(model):
    """(data shape, per-row alpha) of the tiny test problem."""
    shape = TOPICS_SHAPE if model == "topics" else (N_ACTORS, N_ACTORS)
    return shape, ALPHA[: shape[0]]


def _marginal_conditional(model, n_draws, rng, b0=B0):
    shape, alpha = _sizes(model)
    observed = _observed(model, _mask(shape))
    prior_mean = (alpha / (1 - alpha))[:, None]
    out = []
    for _ in range(n_draws):
        if model == "topics":
            theta = rng.gamma(A0, 1 / b0, (shape[0], K))
            other = rng.gamma(A0, 1 / b0, (K, shape[1]))
            mu = theta @ other
        else:
            theta = rng.gamma(A0, 1 / b0, (N_ACTORS, C))
            other = rng.gamma(A0, 1 / b0, (C, C))
            mu = models.rates("blocks", {"theta": theta, "pi": other})
        lam_plus = rng.exponential(1.0, shape) * prior_mean
        lam_minus = rng.exponential(1.0, shape) * prior_mean
        y = rng.poisson(mu)
        out.append(_test_functions(theta, other, lam_plus, lam_minus, y, mu, observed))
    return np.array(out)


def _successive_conditional(model, n_steps, rng, seed, wrong_lambda_rate=False, burn=200):
    shape, alpha = _sizes(model)
    mask = _mask(shape)
    observed = _observed(model, mask)
    chain = Chain(
        np.zeros(shape, dtype=np.int64),
        model=model,
        method="private",
        sampler="bessel",
        n_components=K,
        alpha=alpha,
        mask=mask,
        a0=A0,
        b0=B0,
        random_state=seed,
    )
    # the noised counts the sweep reads; int64 so any simulated ytil fits
    chain._prepared.counts = np.zeros(shape, dtype=np.int64)
    latent = chain._latent  # lambda_plus, lambda_minus, y, bessel, posterior_scale: updated in place
    if wrong_lambda_rate:
        # The ICML text's eq. 16 rate alpha/(1-alpha) + 1 instead of 1/alpha.
        latent["posterior_scale"][:] = 1.0 / (alpha / (1 - alpha) + 1.0)
    out = []
    for step in range(burn + n_steps):
        factors = chain.factors
        mu = models.rates(model, factors)
        y = rng.poisson(mu)
        ytil = y + rng.poisson(latent["lambda_plus"]) - rng.poisson(latent["lambda_minus"])
        ytil[~observed] = 999  # never read: held-out and diagonal cells
        chain._prepared.counts[...] = ytil
        chain.step()
        if step >= burn:
            factors = chain.factors
            other = factors["phi"] if model == "topics" else factors["pi"]
            out.append(
                _test_functions(
                    factors["theta"],
                    other,
                    latent["lambda_plus"],
                    latent["lambda_minus"],
                    chain.y_latent,
                    models.rates(model, factors),
                    observed,
                )
            )
    return np.array(out)


def _batch_means_variance(samples, n_batches=50):
    """Variance of the mean of an autocorrelated series, per column."""
    n = samples.shape[0] // n_batches * n_batches
    batches = samples[:n].reshape(n_batches, -1, samples.shape[1]).mean(axis=1)
    return batches.var(axis=0, ddof=1) / n_batches


def geweke_z(model, n_mc, n_sc, seed, wrong_lambda_rate=False):
    rng = np.random.default_rng(seed)
    mc = _marginal_conditional(model, n_mc, rng)
    sc = _successive_conditional(model, n_sc, rng, seed, wrong_lambda_rate)
    se = np.sqrt(mc.var(axis=0, ddof=1) / n_mc + _batch_means_variance(sc))
    return (mc.mean(axis=0) - sc.mean(axis=0)) / se


@pytest.mark.parametrize("model", ["topics", "blocks"])
def test_private_chain_gets_it_right(model):
    z = geweke_z(model, n_mc=20_000, n_sc=6_000, seed=11)
    assert np.all(np.abs(z) < Z_CRITICAL), f"Geweke z-scores {np.round(z, 2)}"


def test_geweke_detects_the_papers_lambda_rate():
    z = geweke_z("topics", n_mc=20_000, n_sc=3_000, seed=12, wrong_lambda_rate=True)
    assert np.max(np.abs(z)) > 2 * Z_CRITICAL, f"Geweke z-scores {np.round(z, 2)}"


@pytest.mark.slow
@pytest.mark.parametrize("model", ["topics", "blocks"])
def test_private_chain_gets_it_right_long(model):
    z = geweke_z(model, n_mc=200_000, n_sc=100_000, seed=21)
    assert np.all(np.abs(z) < Z_CRITICAL), f"Geweke z-scores {np.round(z, 2)}"


@pytest.mark.slow
def test_geweke_detects_the_papers_lambda_rate_blocks():
    z = geweke_z("blocks", n_mc=50_000, n_sc=10_000, seed=22, wrong_lambda_rate=True)
    assert np.max(np.abs(z)) > 2 * Z_CRITICAL, f"Geweke z-scores {np.round(z, 2)}"


# ---------------------------------------------------------------------------
# The collapsed sampler (lambda, the Bessel variable and the split integrated
# out): its state is (factors, y); data given the state are ytil = y + tau,
# tau ~ Geom2(alpha). The sparse variant draws the ytil <= 0 cells of a row by
# Poisson thinning per component; forcing every row sparse tests it alone.
# ---------------------------------------------------------------------------


def _collapsed_test_functions(theta, other, y, mu, observed):
    """Bounded or log-scale statistics: the block model's rates are products of three
    gamma variables, so moments such as E[y^2] are carried by rare huge rates that a
    chain of a few thousand steps visits too seldom for batch means to be honest."""
    obs_y, obs_mu = y[observed], mu[observed]
    damped = obs_mu / (1.0 + obs_mu)
    capped = np.minimum(obs_y, 3)
    return np.array(
        [
            theta.mean(),
            np.log(theta).mean(),
            other.mean(),
            np.log(other).mean(),
            damped.mean(),
            (obs_y > 0).mean(),
            (obs_y > 1).mean(),
            capped.mean(),
            (capped * damped).mean(),
        ]
    )


def _collapsed_marginal_conditional(model, n_draws, rng):
    shape, _ = _sizes(model)
    observed = _observed(model, _mask(shape))
    out = []
    for _ in range(n_draws):
        if model == "topics":
            theta, other = rng.gamma(A0, 1 / B0, (shape[0], K)), rng.gamma(A0, 1 / B0, (K, shape[1]))
            mu = theta @ other
        else:
            theta, other = rng.gamma(A0, 1 / B0, (N_ACTORS, C)), rng.gamma(A0, 1 / B0, (C, C))
            mu = models.rates("blocks", {"theta": theta, "pi": other})
        out.append(_collapsed_test_functions(theta, other, rng.poisson(mu), mu, observed))
    return np.array(out)


def _two_sided_geometric(rng, alpha, shape):
    p = np.broadcast_to((1.0 - alpha)[:, None], shape)
    return rng.geometric(p) - rng.geometric(p)


def _collapsed_successive_conditional(model, n_steps, rng, seed, sparse, wrong_alpha=False, burn=200):
    shape, alpha = _sizes(model)
    mask = _mask(shape)
    observed = _observed(model, mask)
    chain = Chain(
        np.zeros(shape, dtype=np.int64),
        model=model,
        method="private",
        sampler="collapsed",
        n_components=K,
        alpha=alpha,
        mask=mask,
        a0=A0,
        b0=B0,
        random_state=seed,
    )
    chain._prepared.counts = np.zeros(shape, dtype=np.int64)
    if wrong_alpha:  # the sampler believes in less noise than the data carry
        chain._prepared.alpha = alpha * 0.6
    y = np.zeros(shape, dtype=np.int64)
    out = []
    for step in range(burn + n_steps):
        ytil = y + _two_sided_geometric(rng, alpha, shape)
        ytil[~observed] = 999  # never read: held-out and diagonal cells
        chain._prepared.counts[...] = ytil
        # the sparse step's row lists depend on the noised counts: rebuild them
        chain._latent = chain.method_instance.start(
            chain._prepared, chain.model_instance, chain._state, chain._work, None
        )
        if sparse:
            assert chain._latent["use_row"].all()
        chain.step()
        y = chain.y_latent
        if step >= burn:
            factors = chain.factors
            other = factors["phi"] if model == "topics" else factors["pi"]
            out.append(_collapsed_test_functions(factors["theta"], other, y, models.rates(model, factors), observed))
    return np.array(out)


def collapsed_geweke_z(model, n_mc, n_sc, seed, sparse, wrong_alpha=False):
    rng = np.random.default_rng(seed)
    mc = _collapsed_marginal_conditional(model, n_mc, rng)
    sc = _collapsed_successive_conditional(model, n_sc, rng, seed, sparse, wrong_alpha)
    se = np.sqrt(mc.var(axis=0, ddof=1) / n_mc + _batch_means_variance(sc))
    return (mc.mean(axis=0) - sc.mean(axis=0)) / se


@pytest.fixture(params=["dense", "sparse"])
def step_kind(request, monkeypatch):
    from lpviz.methods import private

    # every row sparse, or none: each variant tested alone
    monkeypatch.setattr(private, "SPARSE_MAX_SKIP_SHARE", 1.0 if request.param == "sparse" else -1.0)
    monkeypatch.setattr(private, "SPARSE_MIN_COLUMNS", 0)  # the sparse step even on narrow rows
    return request.param


@pytest.mark.parametrize("model", ["topics", "blocks"])
def test_collapsed_chain_gets_it_right(model, step_kind):
    # the block model's rates are products of three gamma factors: its chain mixes slowly, and over
    # 10,000 steps batch means understated the variance of every (correlated) test function (z of
    # 3-5 at two seeds; 0.05-0.5 over 30,000 steps of the same chain)
    n_sc = 30_000 if model == "blocks" else 10_000
    z = collapsed_geweke_z(model, n_mc=20_000, n_sc=n_sc, seed=31, sparse=step_kind == "sparse")
    assert np.all(np.abs(z) < Z_CRITICAL), f"Geweke z-scores {np.round(z, 2)}"


def test_collapsed_geweke_detects_a_wrong_noise_level(step_kind):
    z = collapsed_geweke_z("topics", n_mc=20_000, n_sc=3_000, seed=32, sparse=step_kind == "sparse", wrong_alpha=True)
    assert np.max(np.abs(z)) > 2 * Z_CRITICAL, f"Geweke z-scores {np.round(z, 2)}"


# ---------------------------------------------------------------------------
# The Bessel route and the collapsed conditional target the same posterior
# ---------------------------------------------------------------------------


def _posterior_statistics(sampler, data, alpha, seed, n_iter=4000, burn=500):
    """Per iteration: the rates of a few cells, the total rate and the log marginal
    likelihood (label-invariant quantities)."""
    chain = Chain(
        data, model="topics", method="private", sampler=sampler, n_components=2, alpha=alpha, random_state=seed
    )
    rows = []
    for state in chain.iterate(n_iter):
        if state.iteration > burn:
            mu = state.mu
            rows.append([mu[0, 0], mu[3, 5], mu[7, 2], mu[11, 9], mu.sum(), state.log_marginal])
    return np.array(rows)


def test_bessel_and_collapsed_chains_have_the_same_posterior_means():
    rng = np.random.default_rng(51)
    theta, phi = rng.gamma(2.0, 2.0, (12, 2)), rng.gamma(0.5, 1.0, (2, 10))
    Y = rng.poisson(theta @ phi)
    alpha = 0.5
    Y_obs = Y + _two_sided_geometric(rng, np.full(12, alpha), Y.shape)
    bessel = _posterior_statistics("bessel", Y_obs, alpha, seed=52)
    collapsed = _posterior_statistics("collapsed", Y_obs, alpha, seed=53)
    wrong = _posterior_statistics("collapsed", Y_obs, alpha * 0.5, seed=54)

    def z(a, b):
        return (a.mean(axis=0) - b.mean(axis=0)) / np.sqrt(_batch_means_variance(a) + _batch_means_variance(b))

    agreement = z(bessel, collapsed)
    assert np.all(np.abs(agreement) < Z_CRITICAL), f"z-scores {np.round(agreement, 2)}"
    # power: a chain that assumes half the noise ends elsewhere
    assert np.max(np.abs(z(bessel, wrong))) > Z_CRITICAL, f"z-scores {np.round(z(bessel, wrong), 2)}"
