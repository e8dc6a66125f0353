"""The tensor model (Poisson CP factorization) and N-way releases.

The model's kernels against brute force: the allocation is multinomial over
components with weights ``a_ik b_jk c_tk``, each mode's factors are drawn from
their gamma conditional over the observed cells only, the log likelihood and
the rates match scipy and einsum, the CAVI moments match their closed forms,
and nothing depends on how rows are split into chunks. Releases of order 3:
the mechanism's law per cell with per-row (per-sender) noise levels, on both
samplers; kinds, masks and labels. And the claim a user reads: on synthetic
data with a known truth the private fit recovers the rates far better than the
naive one and than the best constant.
"""

import json

import numpy as np
import pytest
import scipy.sparse as sp
from _checks import P_ACCEPT, chi_square_pvalue
from scipy import stats

import lpviz
from lpviz import models
from lpviz._parallel import chunk_bounds, new_stop_flag
from lpviz.cli import main
from lpviz.datasets import load_data, make_tensor
from lpviz.engine import Chain, _lists
from lpviz.models import Work
from lpviz.models.tensor import TensorModel
from lpviz.release import Release, Truth

SHAPE = (5, 4, 3)


def make_work(shape, missing=None, seed=0, parallel=False):
    """The :class:`Work` a chain builds for data of ``shape`` (``missing``: True = left out)."""
    n_rows = shape[0]
    n_cols = int(np.prod(shape[1:]))
    flat = None if missing is None else missing.reshape(n_rows, n_cols)
    return Work(
        bounds=chunk_bounds(n_rows, n_rows * n_cols, parallel),
        column_bounds=chunk_bounds(n_cols, n_rows * n_cols, parallel),
        parallel=parallel,
        stop=new_stop_flag(),
        chain_seed=seed,
        missing_by_row=_lists(flat, n_rows),
        missing_by_column=_lists(None if flat is None else flat.T, n_cols),
    )


def csr(Y):
    matrix = sp.csr_matrix(np.asarray(Y).reshape(Y.shape[0], -1))
    matrix.eliminate_zeros()
    return matrix.indptr.astype(np.int64), matrix.indices.astype(np.int64), matrix.data.astype(np.int64)


def random_state(model, shape, seed):
    rng = np.random.default_rng(seed)
    return tuple(rng.gamma(1.0, 1.0, (n, model.n_components)) for n in shape)


# ---------------------------------------------------------------------------
# Rates and shapes
# ---------------------------------------------------------------------------


def test_rates_low_rank_and_row_rates_agree_with_einsum():
    model = TensorModel(3)
    state = random_state(model, SHAPE, 1)
    factors = model.factors(state)
    assert set(factors) == {"a", "b", "c"} and factors["c"].shape == (3, 3)
    mu = np.einsum("ik,jk,tk->ijt", *state)
    np.testing.assert_allclose(model.rates(factors), mu)
    left, right = model.low_rank(factors)
    np.testing.assert_allclose(left @ right.T, mu.reshape(5, 12))  # column j * T + t
    np.testing.assert_allclose(model.rate_rows(state, np.array([3, 1])), mu[[3, 1]].reshape(2, 12))
    np.testing.assert_array_equal(models.rates("tensor", factors), model.rates(factors))
    np.testing.assert_array_equal(model.profiles(factors), factors["c"])
    np.testing.assert_allclose(model.pair_maps(factors, 2), np.outer(factors["a"][:, 2], factors["b"][:, 2]))
    assert model.factor_bytes(SHAPE) == 8 * 3 * 12


@pytest.mark.parametrize("shape", [(4, 5), (2, 3, 4, 5)])
def test_the_tensor_model_fits_three_way_arrays_only(shape):
    with pytest.raises(ValueError, match="model='tensor' fits a three-way array"):
        TensorModel(2).check_shape(shape)
    with pytest.raises(ValueError, match="fits a matrix.*model='tensor'"):
        models.create("topics", 2).check_shape((3, 4, 5))


# ---------------------------------------------------------------------------
# Allocation, conditionals, likelihood
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("tokens, repeats", [(1, 4000), (3, 1500), (40, 400), (5000, 40)])
def test_allocation_is_multinomial_over_components(tokens, repeats):
    """Each regime of the multinomial (a walk, cumulative search, binomials) inside the sweep."""
    model = TensorModel(4)
    state = random_state(model, SHAPE, 2)
    Y = np.zeros(SHAPE, dtype=np.int64)
    Y[3, 1, 2] = tokens
    work = make_work(SHAPE, seed=3)
    n_a = np.zeros((5, 4), dtype=np.int64)
    for iteration in range(repeats):
        stats_ = model.new_stats(state, work)
        model.allocate(state, csr(Y), stats_, work, iteration)
        counts, n_b, n_c = stats_[0], stats_[1].sum(axis=0), stats_[2].sum(axis=0)
        np.testing.assert_array_equal(counts[3], n_b[1])
        np.testing.assert_array_equal(counts[3], n_c[2])
        assert n_b[[0, 2, 3]].sum() == 0 and n_c[[0, 1]].sum() == 0
        n_a += counts
    assert n_a.sum() == tokens * repeats and np.delete(n_a, 3, axis=0).sum() == 0
    weights = state[0][3] * state[1][1] * state[2][2]
    assert chi_square_pvalue(n_a[3], weights) > P_ACCEPT
    assert chi_square_pvalue(n_a[3], weights * np.array([1, 1, 1.15, 1])) < P_ACCEPT


def test_allocation_and_updates_do_not_depend_on_the_chunks():
    model = TensorModel(3)
    shape = (40, 30, 40)  # enough cells for several chunks
    rng = np.random.default_rng(4)
    Y = rng.poisson(0.3, shape)
    missing = rng.random(shape) < 0.05
    results = []
    for parallel in (False, True):
        work = make_work(shape, missing, seed=5, parallel=parallel)
        assert (len(work.bounds) > 1) == parallel
        state = random_state(model, shape, 6)
        stats_ = model.new_stats(state, work)
        model.allocate(state, csr(np.where(missing, 0, Y)), stats_, work, 1)
        model.update(state, stats_, work, 1)
        results.append((stats_[0], stats_[1].sum(axis=0), stats_[2].sum(axis=0), *state))
    for serial, parallel in zip(*results, strict=True):
        np.testing.assert_array_equal(serial, parallel)


def _observed_rate_sums(state, observed):
    """Brute force: per mode, index r and component k, the sum over the observed cells with that
    index of the other two modes' factors' product."""
    A, B, C = state
    return (
        np.einsum("ijt,jk,tk->ik", observed, B, C),
        np.einsum("ijt,ik,tk->jk", observed, A, C),
        np.einsum("ijt,ik,jk->tk", observed, A, B),
    )


@pytest.mark.parametrize("mode", [0, 1, 2])
def test_each_mode_is_drawn_from_its_gamma_conditional_over_observed_cells(mode):
    """``x_rk ~ Gamma(a0 + n_rk, b0 + sum over observed cells of the other modes' product)``,
    the modes drawn in order (a, then b given the new a, then c given both): checked on one
    entry, with the data's self loops and a held-out cell left out, each draw scaled by its
    own rate to Gamma(shape, 1); power: the rate that counts every cell."""
    model = TensorModel(2, a0=0.7, b0=1.3)
    shape = (4, 4, 3)
    missing = np.zeros(shape, dtype=bool)
    missing[np.arange(4), np.arange(4)] = True  # self loops
    missing[1, 2, 0] = True  # one held-out cell
    work = make_work(shape, missing, seed=7)
    start = random_state(model, shape, 8)
    stats_ = model.new_stats(start, work)
    stats_[0][1] = [3, 0]
    stats_[1][0, 2] = [1, 2]
    stats_[2][0, 0] = [0, 4]
    counts = (stats_[0], stats_[1].sum(axis=0), stats_[2].sum(axis=0))[mode]
    r = (1, 2, 0)[mode]
    right, wrong = [], []
    for iteration in range(3000):
        state = tuple(f.copy() for f in start)
        model.update(state, stats_, work, iteration)
        given = tuple(state[m] if m < mode else start[m] for m in range(3))  # the modes drawn before
        observed = _observed_rate_sums(given, ~missing)[mode][r, 1]
        every = _observed_rate_sums(given, np.ones(shape, dtype=bool))[mode][r, 1]
        right.append(state[mode][r, 1] * (model.b0 + observed))
        wrong.append(state[mode][r, 1] * (model.b0 + every))
    exact = stats.gamma(model.a0 + counts[r, 1]).cdf
    assert stats.kstest(right, exact).pvalue > P_ACCEPT
    assert stats.kstest(wrong, exact).pvalue < P_ACCEPT


def test_count_loglik_matches_scipy_over_observed_cells():
    model = TensorModel(3)
    rng = np.random.default_rng(9)
    state = random_state(model, SHAPE, 10)
    Y = rng.poisson(2.0, SHAPE)
    missing = rng.random(SHAPE) < 0.2
    work = make_work(SHAPE, missing)
    mu = np.einsum("ik,jk,tk->ijt", *state)
    expected = stats.poisson.logpmf(Y, mu)[~missing].sum()
    assert model.count_loglik(state, csr(np.where(missing, 0, Y)), work) == pytest.approx(expected, rel=1e-12)
    log_prior = sum(stats.gamma.logpdf(f, model.a0, scale=1 / model.b0).sum() for f in state)
    assert model.log_prior(state) == pytest.approx(log_prior, rel=1e-12)


def test_vi_moments_are_the_mean_field_moments_of_the_cell_rates():
    """E[mu], V[mu] and sum_k G[a] G[b] G[c] at every cell, against Monte Carlo draws of q."""
    model = TensorModel(2)
    release = lpviz.privatize(np.ones(SHAPE, dtype=np.int64), alpha=0.3, random_state=11)
    fit = lpviz.VariationalFit(release, model="tensor", method="naive", n_components=2, random_state=12)
    fit.step(2)
    q = fit.q
    mean, var, geo = model.vi_moments(q, 0, SHAPE[0], fit._work.bounds, fit._work)
    rng = np.random.default_rng(13)
    draws = [rng.gamma(f.gamma_shape, 1.0 / f.gamma_rate, (20_000,) + f.gamma_shape.shape) for f in q]
    mu = np.einsum("nik,njk,ntk->nijt", *draws).reshape(20_000, SHAPE[0], -1)
    np.testing.assert_allclose(mean, mu.mean(axis=0), rtol=0.05)
    np.testing.assert_allclose(var, mu.var(axis=0), rtol=0.15)
    geo_expected = np.einsum("ik,jk,tk->ijt", *(np.exp(f.elog) for f in q)).reshape(SHAPE[0], -1)
    np.testing.assert_allclose(geo, geo_expected, rtol=1e-12)


# ---------------------------------------------------------------------------
# N-way releases
# ---------------------------------------------------------------------------


def _geometric_pvalue(noise, alpha, support=40):
    values = np.arange(-support, support + 1)
    pmf = (1 - alpha) / (1 + alpha) * alpha ** np.abs(values)
    counts = np.bincount(np.clip(noise.ravel(), -support, support) + support, minlength=values.size)
    return chi_square_pvalue(counts, pmf)


@pytest.mark.parametrize("exact", [False, True])
def test_a_three_way_release_noises_each_cell_with_its_rows_level(exact):
    alpha = np.array([0.3, 0.7, 0.3, 0.7])
    Y = np.full((4, 60, 100), 2, dtype=np.int64)
    options = dict(exact=True) if exact else dict(random_state=14)
    release = lpviz.privatize(Y, alpha=alpha, **options)
    assert (release.kind, release.shape, release.simulated) == ("tensor", Y.shape, not exact)
    noise = release.Y_obs - Y
    for a in (0.3, 0.7):
        assert _geometric_pvalue(noise[alpha == a], a) > P_ACCEPT
        assert _geometric_pvalue(noise[alpha == a], a * 1.1) < P_ACCEPT


def test_tensor_releases_check_kind_masks_and_labels(tmp_path):
    Y = np.ones((3, 3, 4), dtype=np.int64)
    loops = np.zeros(Y.shape, dtype=bool)
    loops[np.arange(3), np.arange(3)] = True
    heldout = np.zeros(Y.shape, dtype=bool)
    heldout[0, 1, :2] = True
    release = lpviz.privatize(
        Y,
        epsilon=1.0,
        structural_zeros=loops,
        heldout=heldout,
        mode_labels=[["Jan", "Feb", "Mar", "Apr"]],
        random_state=15,
    )
    assert release.kind == "tensor" and np.all(release.Y_obs[loops] == 0)
    assert release.observed_cells.sum() == 36 - 12 - 2 and release.heldout_cells.sum() == 2
    assert release.describe().startswith("3 x 3 x 4 tensor")
    loaded = Release.load(release.save(tmp_path / "tensor.npz"))
    assert loaded.mode_labels == (("Jan", "Feb", "Mar", "Apr"),) and loaded.kind == "tensor"
    with pytest.raises(ValueError, match="mode_labels\\[0\\] has 3 labels"):
        lpviz.privatize(Y, epsilon=1.0, mode_labels=[["a", "b", "c"]], random_state=1)
    with pytest.raises(ValueError, match="mode_labels has 2 entries but the data have 1 modes"):
        lpviz.privatize(Y, epsilon=1.0, mode_labels=[None, None], random_state=1)
    with pytest.raises(ValueError, match="heldout has shape \\(3, 12\\) but Y_obs has shape \\(3, 3, 4\\)"):
        Release(Y_obs=Y, alpha=0.5, heldout=np.zeros((3, 12), dtype=bool))
    with pytest.raises(ValueError, match="kind='tensor' needs an array of order 3"):
        lpviz.privatize(Y[:, :, 0], epsilon=1.0, kind="tensor", random_state=1)


def test_a_chain_on_a_tensor_addresses_cells_as_a_matrix_and_answers_in_its_shape():
    data = make_tensor(n_actors=8, n_times=5, n_components=2, random_state=16)
    release, truth = data.release(), data.truth()
    chain = Chain(release, method="private", sampler="bessel", n_components=2, random_state=17)
    assert chain.model == "tensor" and chain._prepared.counts.shape == (8, 40)
    chain.step(3)
    assert chain.y_latent.shape == chain.bessel_draws.shape == (8, 8, 5)
    assert np.all(chain.y_latent[release.structural_zeros] == 0)
    posterior = lpviz.fit(release, method="nonprivate", truth=truth, n_components=2, n_iter=20, thin=5)
    assert posterior.mu_hat.shape == (8, 8, 5) and posterior.rate_rows(2, 4).shape == (2, 8, 5)
    # the diagnostics trace cells as the chains address them: row, column j * T + t
    from lpviz.diagnostics import chain_summary, probe_cells

    rows, cols = probe_cells(release.observed_cells, 6, random_state=1)
    assert np.all(release.observed_cells.reshape(8, 40)[rows, cols])
    traced = chain_summary(posterior, cells=(rows, cols))["rates"]
    expected = [posterior.model_instance.rates(sample).reshape(8, 40)[rows, cols] for sample in posterior.samples]
    np.testing.assert_allclose(traced, expected)
    with pytest.raises(ValueError, match="model='topics' fits a matrix"):
        Chain(release, model="topics", n_components=2)


# ---------------------------------------------------------------------------
# Synthetic data and what a user is told about them
# ---------------------------------------------------------------------------


def test_make_tensor_has_its_stated_truth():
    data = make_tensor(n_actors=20, n_times=12, n_components=3, epsilon=0.5, mean_count=0.8, random_state=18)
    zeros = data.info["structural_zeros"]
    assert data.Y.shape == data.Y_obs.shape == data.mu.shape == (20, 20, 12) and data.kind == "tensor"
    assert zeros.sum() == 20 * 12 and np.all(data.mu[zeros] == 0) and np.all(data.Y_obs[zeros] == 0)
    assert data.mu[~zeros].mean() == pytest.approx(0.8)
    np.testing.assert_allclose(np.einsum("ik,jk,tk->ijt", *data.factors.values())[~zeros], data.mu[~zeros])
    peaks = data.factors["c"].argmax(axis=0)
    assert np.all(np.diff(peaks) > 0), "each component peaks in its own months, in order"
    assert data.alpha == pytest.approx(np.exp(-0.5))
    assert data.release().mode_labels[0][0] == "month 1"
    options = dict(n_actors=20, n_times=12, n_components=3, epsilon=0.5, mean_count=0.8, random_state=18)
    np.testing.assert_array_equal(load_data("synthetic-tensor", **options).Y, data.Y)
    with pytest.raises(ValueError, match="n_actors must be >= 2"):
        make_tensor(n_actors=1)


def test_private_fit_recovers_the_rates_far_better_than_naive_and_the_best_constant():
    """Synthetic recovery (30 actors x 30 x 24 months, K = 4, eps/N = 1): the MAE of the
    posterior mean rates against the true rates, private vs naive vs non-private, beside the
    best constant (the median true rate)."""
    data = make_tensor(random_state=19)
    release, truth = data.release(), data.truth()
    observed = release.observed_cells
    best_constant = np.abs(truth.mu[observed] - np.median(truth.mu[observed])).mean()
    errors = {}
    for method in ("private", "naive", "nonprivate"):
        posterior = lpviz.fit(release, method=method, truth=truth, n_components=4, n_iter=300, thin=5, random_state=20)
        errors[method] = lpviz.score(posterior, release, truth)["rate_mae"]
    assert errors["nonprivate"] < errors["private"] < 0.5 * errors["naive"]
    assert errors["private"] < 0.5 * best_constant
    assert errors["naive"] < best_constant


def test_the_cli_fits_the_tensor_model(capsys):
    code = main(
        [
            "fit",
            "--data",
            "synthetic-tensor",
            "--model",
            "tensor",
            "--components",
            "4",
            "--method",
            "all",
            "--iterations",
            "60",
            "--thin",
            "5",
            "--seed",
            "3",
            "--noise-seed",  # the same synthetic tensor every run (the chains' seed alone does not fix it)
            "3",
            "--json",
        ]
    )
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["model"] == "tensor" and summary["kind"] == "tensor" and summary["shape"] == [30, 30, 24]
    assert set(summary["methods"]) == {"private", "naive", "nonprivate"}
    assert summary["methods"]["private"]["rate_mae"] < summary["methods"]["naive"]["rate_mae"]


def test_truth_of_order_three_is_checked():
    with pytest.raises(ValueError, match="true rates have shape"):
        Truth(np.ones((2, 2, 2), dtype=int), mu=np.ones((2, 4)))


def test_top_actors_of_a_tensor_are_held_out_in_both_roles_and_every_month():
    from lpviz.datasets import holdout_mask

    Y = np.zeros((6, 6, 4), dtype=np.int64)
    Y[2, 4, :] = 50  # actor 2 the busiest sender, actor 4 the busiest recipient
    mask = holdout_mask(Y, "tensor", "top actors", n_actors=1)
    held = ~mask
    for actor in (2, 4):
        assert held[actor].all() and held[:, actor].all()  # as sender and recipient, every month
    assert mask[0, 1].all() and held.sum() == 4 * (36 - 16)
    assert holdout_mask(Y, "tensor", "none") is None
    assert holdout_mask(Y, "tensor", "random cells", fraction=0.5, random_state=0).shape == Y.shape


# ---------------------------------------------------------------------------
# The Enron tensor
# ---------------------------------------------------------------------------


def _mail(sender, recipients, date, n):
    return (
        f"Message-ID: <{n}@test>\r\nDate: {date}\r\nFrom: {sender}\r\nTo: {', '.join(recipients)}\r\n"
        f"Subject: s{n}\r\n\r\nbody {n}\n"
    ).encode()


def test_enron_tensor_counts_each_recipient_in_the_month_sent(tmp_path):
    """A maildir with known dates: counts per (sender, recipient, month), months spanning the dated
    emails (empty ones kept), the network's actors, self loops as structural zeros."""
    from lpviz.datasets import build_enron_network, enron_tensor

    mails = [
        ("a@x.com", ["b@x.com", "c@x.com"], "Mon, 14 May 2001 16:39:00 -0700 (PDT)"),
        ("a@x.com", ["b@x.com"], "Tue, 15 May 2001 08:00:00 -0700"),
        ("b@x.com", ["a@x.com", "a@x.com", "b@x.com"], "Fri, 1 Jun 2001 00:10:00 +0000"),  # a once; not itself
        ("c@x.com", ["a@x.com"], "Wed, 1 Aug 2001 12:00:00 -0700"),  # July stays, empty
        ("c@x.com", ["b@x.com"], "not a date"),  # no month: left out, counted
    ]
    root = tmp_path / "maildir"
    for n, (sender, recipients, date) in enumerate(mails):
        path = root / "user" / "sent" / f"{n}."
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(_mail(sender, recipients, date, n))
    data = enron_tensor(root, min_count=1, cache_dir=False)
    assert data.model == "tensor" and data.kind == "tensor" and data.row_labels == ["a@x.com", "b@x.com", "c@x.com"]
    assert data.info["mode_labels"] == [["2001-05", "2001-06", "2001-07", "2001-08"]]
    expected = np.zeros((3, 3, 4), dtype=np.int64)
    expected[0, 1, 0], expected[0, 2, 0], expected[1, 0, 1], expected[2, 0, 3] = 2, 1, 1, 1
    np.testing.assert_array_equal(data.Y, expected)
    assert data.info["n_emails_undated"] == 1 and data.info["n_emails_outside_months"] == 0
    zeros = data.info["structural_zeros"]
    assert zeros.sum() == 3 * 4 and zeros[1, 1].all() and not zeros[0, 1].any()
    release = data.privatize(epsilon=1.0, random_state=0, public_labels=True)
    assert release.kind == "tensor" and np.all(release.Y_obs[zeros] == 0)
    assert release.mode_labels == (("2001-05", "2001-06", "2001-07", "2001-08"),)
    # the same actors as the network, whose counts are the tensor's summed over months (plus the undated)
    network = build_enron_network(root, min_count=1, cache_dir=False)
    assert network.row_labels == data.row_labels
    assert network.Y.sum() - data.Y.sum() == 1
    narrowed = enron_tensor(root, min_count=1, months=("2001-06", "2001-07"), cache_dir=False)
    assert narrowed.Y.shape == (3, 3, 2) and narrowed.info["n_emails_outside_months"] == 3
    with pytest.raises(ValueError, match="months must be .first, last."):
        enron_tensor(root, months="2001-06", cache_dir=False)
    with pytest.raises(ValueError, match="YYYY-MM"):
        enron_tensor(root, months=("2001-13", "2001-14"), cache_dir=False)
    with pytest.raises(ValueError, match="comes before the first"):
        enron_tensor(root, months=("2001-07", "2001-06"), cache_dir=False)
