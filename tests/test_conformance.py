"""The model contract, checked for every model in the registry.

Every test here is parametrised over :data:`lpviz.models.MODELS` (and over the
methods where it applies), so a model registered the documented way is run by
this suite with no test of its own: Geweke (2004) joint-distribution tests of
its chains under every method (the private method's collapsed sampler with
every row dense and every row on the sparse step, the Bessel route, naive,
non-private; per-row noise levels, one held-out cell, structural zeros), a
power check that the same test rejects a chain with a wrong prior, the sparse
step's Poisson law at the allowed cells only, held-out cells that never reach
a fit, the ELBO rising after warm-up, ``score`` and save/load round trips. The
contract itself: a class that lacks a hook or a declared capability's hooks is
refused at registration with a message naming them.

Data for a model come from the model (its first data kind gives a shape; its
factors' shapes and the Gamma(a0, b0) prior every factor entry has give the
truth), so nothing here names a model.
"""

import functools
import math

import numpy as np
import pytest
from scipy import stats

import lpviz
from lpviz import models
from lpviz.engine import Chain, _as_matrix
from lpviz.methods.base import Exclusions
from lpviz.release import Release, Truth
from lpviz.vi import MIN_ITERATIONS, VariationalFit

MODEL_NAMES = list(models.MODELS)
A0, B0 = 1.0, 1.0
K = 2
ALPHA = np.array([0.2, 0.35, 0.5, 0.3, 0.25, 0.4])
# Two-sided tail probability per test function about 2e-5 (as tests/test_geweke.py).
Z_CRITICAL = 4.25
# The tiny Geweke problems, one per data kind: a few cells, so tails stay tame.
TINY_SHAPES = {"documents": (3, 4), "network": (4, 4), "tensor": (3, 3, 2)}
# The small problems of the other tests.
SMALL_SHAPES = {"documents": (24, 16), "network": (16, 16), "tensor": (10, 10, 6)}


# ---------------------------------------------------------------------------
# Problems built from the model alone
# ---------------------------------------------------------------------------


def _model(name, a0=A0, b0=B0, n_components=K):
    return models.create(name, n_components, a0=a0, b0=b0)


def _shape(name, sizes):
    kind = models.get(name).kinds[0]
    return sizes[kind], kind


def _cells(model, shape, kind):
    """(held-out cells, cells that do not exist) of the tiny problem: one held-out cell in row 1;
    a network's or a dyadic tensor's self loops do not exist."""
    heldout = np.zeros(shape, dtype=bool)
    heldout[(1, 2) + (0,) * (len(shape) - 2)] = True
    zeros = model.structural_zeros(shape)
    if kind != "documents":  # the data's self loops (a network's and an email tensor's rule)
        loops = np.zeros(shape, dtype=bool)
        loops[np.arange(shape[0]), np.arange(shape[0])] = True
        zeros = loops if zeros is None else zeros | loops
    return heldout, zeros


def _simulated(name, sizes, seed, mean_count=2.0, n_components=3):
    """(release, truth) drawn from the model's own prior-like initial state, noised per row."""
    model = _model(name, a0=0.5, n_components=n_components)
    shape, kind = _shape(name, sizes)
    rng = np.random.default_rng(seed)
    heldout, zeros = _cells(model, shape, kind)
    heldout[3, :4] = True  # and a run of a row's cells
    mu = model.rates(model.factors(model.init_state(shape, mean_count, rng)))
    if zeros is not None:
        mu[zeros] = 0.0
    Y = rng.poisson(mu)
    alpha = rng.uniform(0.2, 0.6, shape[0])
    release = lpviz.privatize(Y, alpha=alpha, kind=kind, heldout=heldout, structural_zeros=zeros, random_state=seed + 1)
    return release, Truth(Y, mu=mu)


# ---------------------------------------------------------------------------
# The contract, at registration
# ---------------------------------------------------------------------------


@pytest.fixture
def registry():
    """The registry, restored after a test that registers toys."""
    before = dict(models.MODELS)
    yield models.MODELS
    models.MODELS.clear()
    models.MODELS.update(before)


def _partial(name, drop=(), **attributes):
    """A subclass of the registered model ``name`` without the hooks ``drop`` (abstract again)."""
    import abc

    base = models.get(name)
    namespace = {"name": f"toy-{name}", **attributes}
    for hook in drop:
        namespace[hook] = abc.abstractmethod(lambda self, *args: None)
    return abc.ABCMeta(f"Toy{base.__name__}", (base,), namespace)


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_every_registered_model_conforms(name):
    assert models.contract_problems(models.get(name)) == []
    model_class = models.get(name)
    assert model_class.kinds and set(model_class.default_for) <= set(model_class.kinds)
    assert name in models.fitting(model_class.kinds[0])


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_a_model_missing_hooks_is_refused_naming_them(name, registry):
    toy = _partial(name, drop=("poisson_allocate", "count_loglik"))
    with pytest.raises(TypeError, match=r"cannot register model Toy\w+: missing hooks: count_loglik, poisson_allocate"):
        models.register(toy)
    assert f"toy-{name}" not in registry


def test_declared_capabilities_need_their_hooks(registry):
    from lpviz.models.base import Model

    class Bare(Model):
        name = "bare"
        label = "bare"
        factor_names = ("rate",)
        kinds = ("documents",)
        inferences = ("mcmc", "vi")
        shows = ("profiles", "heatmaps")

    with pytest.raises(TypeError) as refused:
        models.register(Bare)
    message = str(refused.value)
    assert "missing hooks: allocate, count_loglik, factors, init_state, log_prior, low_rank" in message
    assert "declares inference 'vi' but lacks its hooks: vi_init, vi_factors" in message
    assert "shows 'profiles' but does not implement profiles(factors)" in message
    assert "shows 'heatmaps', which no view reads" in message

    class Misdeclared(Bare):
        kinds = ("images",)
        default_for = ("network",)

    message = "; ".join(models.contract_problems(Misdeclared))
    assert "kinds must name the data kinds it fits" in message and "default_for names kinds it does not fit" in message
    assert "bare" not in registry


def test_the_model_selector_lists_what_fits_a_kind():
    assert models.fitting("documents")[0] == models.default_for("documents")
    assert models.fitting("network")[0] == models.default_for("network")
    assert models.fitting("tensor") == ["tensor"]
    assert "tensor" not in models.fitting("documents") and "blocks" not in models.fitting("tensor")


# ---------------------------------------------------------------------------
# Geweke tests: every model, every method
# ---------------------------------------------------------------------------


def _test_functions(factors, y, mu, observed):
    """Label-invariant, bounded or log-scale statistics of states (rates of products of gamma
    variables are heavy-tailed: raw moments would need far longer chains), one row per state:
    ``factors`` is a dict of arrays with a leading axis of states, ``y`` and ``mu`` too."""
    obs_y, obs_mu = y[:, observed], mu[:, observed]
    damped = obs_mu / (1.0 + obs_mu)
    capped = np.minimum(obs_y, 3)
    columns = []
    for f in factors.values():
        flat = f.reshape(f.shape[0], -1)
        columns += [np.minimum(flat, 5.0).mean(axis=1), np.log(flat).mean(axis=1)]
    columns += [
        damped.mean(axis=1),
        (obs_y > 0).mean(axis=1),
        (obs_y > 1).mean(axis=1),
        capped.mean(axis=1),
        (capped * damped).mean(axis=1),
    ]
    return np.column_stack(columns)


def _stack(states):
    """(factors, y, mu) of a list of states, each stacked along a new first axis."""
    factors = {name: np.array([f[name] for f, _, _ in states]) for name in states[0][0]}
    return factors, np.array([y for _, y, _ in states]), np.array([mu for _, _, mu in states])


@functools.cache
def _marginal_conditional(name, n_draws, seed):
    """Draws of the test functions from the joint (factors from the prior, y ~ Pois(mu)); the
    same for every variant of a model, so computed once."""
    rng = np.random.default_rng(seed)
    model = _model(name)
    shape, kind = _shape(name, TINY_SHAPES)
    heldout, zeros = _cells(model, shape, kind)
    observed = ~heldout if zeros is None else ~heldout & ~zeros
    template = model.factors(model.init_state(shape, 1.0, np.random.default_rng(0)))
    factors = {name: rng.gamma(model.a0, 1.0 / B0, (n_draws,) + value.shape) for name, value in template.items()}
    mu = np.array([model.rates({name: f[n] for name, f in factors.items()}) for n in range(n_draws)])
    return _test_functions(factors, rng.poisson(mu), mu, observed)


class _Feeder:
    """Hands a chain new data before each step (the successive-conditional simulator)."""

    def __init__(self, chain, observed):
        self.chain = chain
        excluded = _as_matrix(~observed)
        self.exclusions = Exclusions(mask=excluded, rows=chain._prepared.excluded, n_observed=int(observed.sum()))

    def feed(self, counts, restart_latent):
        chain = self.chain
        alpha = chain._prepared.alpha
        chain._prepared = chain.method_instance.prepare(_as_matrix(counts), alpha, self.exclusions)
        if restart_latent:  # the collapsed sampler's row lists depend on the noised counts
            chain._latent = chain.method_instance.start(
                chain._prepared, chain.model_instance, chain._state, chain._work, None
            )


def _two_sided_geometric(rng, alpha, shape):
    p = np.broadcast_to((1.0 - alpha).reshape((-1,) + (1,) * (len(shape) - 1)), shape)
    return rng.geometric(p) - rng.geometric(p)


def _successive_conditional(name, variant, n_steps, seed, chain_b0=B0, burn=200):
    rng = np.random.default_rng(seed)
    model = _model(name, b0=chain_b0)
    shape, kind = _shape(name, TINY_SHAPES)
    heldout, zeros = _cells(model, shape, kind)
    observed = ~heldout if zeros is None else ~heldout & ~zeros
    alpha = ALPHA[: shape[0]]
    method, sampler = {
        "collapsed-dense": ("private", "collapsed"),
        "collapsed-sparse": ("private", "collapsed"),
        "bessel": ("private", "bessel"),
        "naive": ("naive", None),
        "nonprivate": ("nonprivate", None),
    }[variant]
    chain = Chain(
        np.zeros(shape, dtype=np.int64),
        model=model,
        method=method,
        sampler=sampler,
        n_components=K,
        alpha=alpha if method == "private" else None,
        mask=observed,
        random_state=seed,
    )
    feeder = _Feeder(chain, observed)
    y = np.zeros(shape, dtype=np.int64)
    states = []
    for step in range(burn + n_steps):
        if method == "private":
            if sampler == "bessel":  # the noise is Skellam given the chain's own noise rates
                lam_plus, lam_minus = (chain._latent[key].reshape(shape) for key in ("lambda_plus", "lambda_minus"))
                ytil = y + rng.poisson(lam_plus) - rng.poisson(lam_minus)
            else:
                ytil = y + _two_sided_geometric(rng, alpha, shape)
            ytil[~observed] = 999  # never read: held-out cells and self loops
            feeder.feed(ytil, restart_latent=sampler == "collapsed")
            if step == 0 and variant == "collapsed-sparse":
                assert chain._latent["use_row"].all()
            elif step == 0 and variant == "collapsed-dense":
                assert not chain._latent["use_row"].any()
            chain.step()
            y = chain.y_latent
        else:
            y = rng.poisson(model.rates(chain.factors))
            y[~observed] = 999  # never read
            feeder.feed(y, restart_latent=False)
            chain.step()
        if step >= burn:
            factors = chain.factors
            states.append((factors, y, model.rates(factors)))
    return _test_functions(*_stack(states), observed)


def _mean_variance(samples):
    """Variance of the mean of an autocorrelated series, per column: the variance over its
    effective sample size for the mean (ArviZ's, by autocorrelation; batch means of short
    batches understate it when a chain wanders slowly, as these tiny private chains can)."""
    from lpviz.diagnostics import ess

    return samples.var(axis=0, ddof=1) / ess(samples[None], method="mean")


def geweke_z(name, variant, n_mc, n_sc, seed, chain_b0=B0):
    mc = _marginal_conditional(name, n_mc, seed)
    sc = _successive_conditional(name, variant, n_sc, seed + 1, chain_b0=chain_b0)
    se = np.sqrt(mc.var(axis=0, ddof=1) / n_mc + _mean_variance(sc))
    return (mc.mean(axis=0) - sc.mean(axis=0)) / se


VARIANTS = ["collapsed-dense", "collapsed-sparse", "bessel", "naive", "nonprivate"]
# The default suite's run lengths (the slow suite runs every variant 60,000 steps). The Bessel
# route and the naive method reach the model through the same hooks as the collapsed dense
# loop and the non-private fit (rate_rows and allocate; the naive method's truncation is the
# identity on these non-negative data): they run in the slow suite only, and test_geweke.py
# runs the Bessel route on the matrix models by default.
DEFAULT_STEPS = {"collapsed-dense": 4000, "collapsed-sparse": 4000, "nonprivate": 2000}


def _use_variant(variant, monkeypatch):
    from lpviz.methods import private

    if variant.startswith("collapsed"):  # every row on the sparse step, or none
        monkeypatch.setattr(private, "SPARSE_MAX_SKIP_SHARE", 1.0 if variant == "collapsed-sparse" else -1.0)
        monkeypatch.setattr(private, "SPARSE_MIN_COLUMNS", 0)  # tiny data: the sparse step is off by default


@pytest.mark.parametrize("name", MODEL_NAMES)
@pytest.mark.parametrize("variant", list(DEFAULT_STEPS))
def test_chains_get_it_right(name, variant, monkeypatch):
    _use_variant(variant, monkeypatch)
    z = geweke_z(name, variant, n_mc=20_000, n_sc=DEFAULT_STEPS[variant], seed=61)
    assert np.all(np.abs(z) < Z_CRITICAL), f"Geweke z-scores {np.round(z, 2)}"


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_geweke_detects_a_wrong_prior_rate(name):
    """Power: the same test rejects a chain whose factors' prior rate is 1.6, not 1."""
    z = geweke_z(name, "nonprivate", n_mc=20_000, n_sc=1500, seed=61, chain_b0=1.6)
    assert np.max(np.abs(z)) > 2 * Z_CRITICAL, f"Geweke z-scores {np.round(z, 2)}"


@pytest.mark.slow
@pytest.mark.parametrize("name", MODEL_NAMES)
@pytest.mark.parametrize("variant", VARIANTS)
def test_chains_get_it_right_long(name, variant, monkeypatch):
    _use_variant(variant, monkeypatch)
    z = geweke_z(name, variant, n_mc=200_000, n_sc=60_000, seed=63)
    assert np.all(np.abs(z) < Z_CRITICAL), f"Geweke z-scores {np.round(z, 2)}"


# ---------------------------------------------------------------------------
# The sparse step: Poisson draws at the allowed cells only
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_the_sparse_step_draws_poisson_at_the_allowed_cells(name):
    """Tokens of ``poisson_allocate`` land only at observed cells with noised count <= 0 of the
    used rows, and their counts per cell are Poisson(scale_d mu_dv) (summed over repetitions:
    Poisson with the summed rate; a chi-square test per cell set, and a power check at 0.8x)."""
    release, _ = _simulated(name, SMALL_SHAPES, seed=71)
    chain = Chain(release, model=name, method="private", n_components=3, random_state=72)
    chain.step(3)
    model, state, work = chain.model_instance, chain._state, chain._work
    Y = chain._prepared.counts
    n_rows, n_cols = Y.shape
    use_row = np.zeros(n_rows, dtype=bool)
    use_row[::2] = True
    scale = chain._prepared.alpha.copy()
    rows = (use_row, Y, *chain._prepared.excluded, scale)
    excluded = np.zeros(Y.shape, dtype=bool)
    indptr, indices = chain._prepared.excluded
    excluded[np.repeat(np.arange(n_rows), np.diff(indptr)), indices] = True
    allowed = use_row[:, None] & (Y <= 0) & ~excluded
    repetitions = 300
    totals = np.zeros(Y.shape, dtype=np.int64)
    for iteration in range(repetitions):
        stats_ = model.new_stats(state, work)
        token_rows, token_cols = model.poisson_allocate(state, rows, stats_, work, 1000 + iteration)
        np.add.at(totals, (token_rows, token_cols), 1)
    assert totals[~allowed].sum() == 0, "tokens landed outside the allowed cells"
    expected = repetitions * scale[:, None] * model.rate_rows(state, np.arange(n_rows))
    for factor, accept in ((1.0, True), (0.8, False)):
        rates = expected[allowed] * factor
        busy = rates >= 5.0  # cells pooled by their expected count: a chi-square over busy cells
        statistic = float(np.sum((totals[allowed][busy] - rates[busy]) ** 2 / rates[busy]))
        quiet = float(totals[allowed][~busy].sum()), float(rates[~busy].sum())
        statistic += (quiet[0] - quiet[1]) ** 2 / max(quiet[1], 1e-12)
        pvalue = stats.chi2.sf(statistic, int(busy.sum()) + 1)
        assert (pvalue > 1e-3) == accept, (factor, pvalue)


# ---------------------------------------------------------------------------
# Held-out cells, ELBO, score, files
# ---------------------------------------------------------------------------

METHOD_NAMES = ["private", "naive", "nonprivate"]


@pytest.mark.parametrize("name", MODEL_NAMES)
@pytest.mark.parametrize("method", METHOD_NAMES)
def test_heldout_cells_never_reach_a_fit(name, method):
    release, truth = _simulated(name, SMALL_SHAPES, seed=81)
    held = release.heldout_cells
    assert held is not None and held.sum() >= 2
    changed_counts = np.array(release.Y_obs, dtype=np.int64)
    changed_counts[held] += 7
    changed_truth = np.array(truth.Y)
    changed_truth[held] += 7
    changed = Release(
        Y_obs=changed_counts,
        alpha=release.alpha,
        kind=release.kind,
        heldout=release.heldout,
        structural_zeros=release.structural_zeros,
    )
    fits = [
        lpviz.fit(r, model=name, method=method, truth=t, n_components=3, n_iter=12, thin=3, random_state=82)
        for r, t in ((release, truth), (changed, Truth(changed_truth)))
    ]
    np.testing.assert_array_equal(fits[0].mu_hat, fits[1].mu_hat)
    assert fits[0].mu_hat.shape == release.shape


@pytest.mark.parametrize("name", [n for n in MODEL_NAMES if "vi" in models.get(n).inferences])
@pytest.mark.parametrize("method", METHOD_NAMES)
def test_elbo_rises_after_warm_up(name, method):
    """Every CAVI step of the non-private and naive fits is a coordinate ascent step; the
    private fit's Bessel point mass is not, so it is checked from MIN_ITERATIONS on."""
    release, truth = _simulated(name, SMALL_SHAPES, seed=91)
    fit = VariationalFit(release, model=name, method=method, truth=truth, n_components=3, tol=0.0, random_state=92)
    elbo = np.array([state.elbo for state in fit.iterate(80)])
    steps = np.diff(elbo)
    start = 0 if method != "private" else MIN_ITERATIONS
    assert np.all(np.isfinite(elbo))
    assert np.all(steps[start:] >= -1e-9 * np.abs(elbo[1 + start :])), steps[start:].min()
    assert elbo[-1] > elbo[0]


def _fits(name):
    release, truth = _simulated(name, SMALL_SHAPES, seed=101)
    for method in METHOD_NAMES:
        for inference in models.get(name).inferences:
            options = dict(n_iter=30, thin=5) if inference == "mcmc" else dict(n_iter=30)
            posterior = lpviz.fit(
                release,
                model=name,
                method=method,
                truth=truth,
                n_components=3,
                inference=inference,
                random_state=102,
                **options,
            )
            yield release, truth, posterior


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_score_works_for_every_method_and_inference(name):
    for release, truth, posterior in _fits(name):
        result = lpviz.score(posterior, release, truth)
        assert posterior.mu_hat.shape == release.shape
        observed, held = release.observed_cells, release.heldout_cells
        mu = posterior.mu_hat
        assert result["mae"] == pytest.approx(np.abs(mu - truth.Y)[observed].mean(), rel=1e-9)
        assert result["heldout_mae"] == pytest.approx(np.abs(mu - truth.Y)[held].mean(), rel=1e-9)
        assert result["rate_mae"] == pytest.approx(np.abs(mu - truth.mu)[observed].mean(), rel=1e-9)
        assert result["iterations"] == posterior.iterations > 0
        state_scores = lpviz.score(_last_state(posterior), release, truth)
        assert math.isfinite(state_scores["mae"])


def _last_state(posterior):
    from lpviz.engine import ChainState

    return ChainState(
        iteration=posterior.iterations,
        factors=posterior.samples[-1],
        model=posterior.model,
        model_instance=posterior.model_instance,
    )


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_fits_and_releases_round_trip_through_files(name, tmp_path):
    release, truth = _simulated(name, SMALL_SHAPES, seed=111)
    release = Release(
        Y_obs=release.Y_obs,
        alpha=release.alpha,
        kind=release.kind,
        heldout=release.heldout,
        structural_zeros=release.structural_zeros,
        row_labels=[f"row {i}" for i in range(release.shape[0])],
        mode_labels=[[f"m{t}" for t in range(n)] for n in release.shape[2:]] or None,
        name="conformance",
    )
    loaded = Release.load(release.save(tmp_path / "release.npz"))
    assert (loaded.kind, loaded.shape, loaded.row_labels, loaded.mode_labels) == (
        release.kind,
        release.shape,
        release.row_labels,
        release.mode_labels,
    )
    np.testing.assert_array_equal(loaded.Y_obs, release.Y_obs)
    np.testing.assert_array_equal(loaded.heldout, release.heldout)
    for _, _, posterior in _fits(name):
        path = posterior.save(tmp_path / f"{posterior.method}-{posterior.inference}.npz", loaded)
        with np.load(path, allow_pickle=False) as saved:
            assert str(saved["model"]) == name and str(saved["method"]) == posterior.method
            np.testing.assert_array_equal(saved["mu_hat"], posterior.mu_hat)
            for factor, value in posterior.best.items():
                np.testing.assert_array_equal(saved[f"best_{factor}"], value)
            # anyone with the truth recomputes the score from the file
            observed = ~saved["structural_zeros"] & ~saved["heldout"] if "structural_zeros" in saved else None
            if observed is not None:
                assert lpviz.score(posterior, loaded, truth)["mae"] == pytest.approx(
                    np.abs(saved["mu_hat"] - truth.Y)[observed].mean(), rel=1e-12
                )
