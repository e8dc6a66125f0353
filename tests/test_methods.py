"""The methods (lpviz.methods): the registry, what each method sees of the
data, and the private method's per-cell kernels against exact laws.

Per-cell steps of the Bessel route (Schein et al. 2019; DESIGN.md section 1):
(y, g+, g-) given the noised count, then the noise rates lambda+, lambda-;
each checked by chi-square or Kolmogorov-Smirnov against the exact law with a
power check, and the whole per-cell chain checked to keep p(y | ytil) exact
(and to drift with the paper's misprinted lambda rate).
"""

from itertools import pairwise

import numpy as np
import pytest
import scipy.sparse as sp
from _checks import P_ACCEPT, chi_square_pvalue
from numba import njit
from scipy import stats

from lpviz import methods
from lpviz._parallel import ROWS_PER_STREAM
from lpviz._random import new_state, seed_state, seed_stream
from lpviz.engine import Chain
from lpviz.methods import Exclusions, base, private
from lpviz.methods.naive import Naive
from lpviz.methods.nonprivate import NonPrivate
from lpviz.methods.private import Private, draw_noise_rates, gamma_integer_shape, sample_true_count
from lpviz.privacy import geometric_logpmf
from lpviz.release import smallest_int_dtype

# ---------------------------------------------------------------------------
# The registry
# ---------------------------------------------------------------------------


def test_registry_names_classes_labels_and_colours():
    assert list(methods.METHODS) == ["private", "naive", "nonprivate"]
    assert methods.get("private") is Private and methods.get("naive") is Naive
    assert methods.get("nonprivate") is NonPrivate
    for name, method_class in methods.METHODS.items():
        assert method_class.name == name
        assert method_class.label and method_class.description
        assert method_class.color.startswith("#") and len(method_class.color) == 7
    assert len({m.color for m in methods.METHODS.values()}) == len(methods.METHODS)
    # only the non-private method needs the truth; only the private one models the noise
    assert [m.uses_truth for m in methods.METHODS.values()] == [False, False, True]
    assert [m.needs_alpha for m in methods.METHODS.values()] == [True, False, False]
    with pytest.raises(ValueError, match="method must be one of 'private', 'naive', 'nonprivate'; got 'bayes'"):
        methods.get("bayes")
    with pytest.raises(TypeError, match="register\\(\\) takes a Method subclass with a name"):
        methods.register(methods.Method)


def test_create_checks_options_against_the_registry():
    method = methods.create("private")
    assert isinstance(method, Private) and method.settings == {
        "sampler": "collapsed",
        "sparse_step": "auto",
        "variant": "arithmetic",
        "bessel_point": "mode",
        "noise_split": "components",
    }
    assert methods.create("private", sampler=None).settings["sampler"] == "collapsed"  # None: the default
    assert methods.create(method) is method and methods.create(method, sampler=None) is method
    assert (
        repr(method)
        == (
            "Private(sampler='collapsed', sparse_step='auto', variant='arithmetic', bessel_point='mode', "
            "noise_split='components')"
        )
        and repr(Naive()) == "Naive()"
    )
    assert method.display_name == "private (models the noise)"  # default options are not repeated
    assert methods.create("private", sampler="bessel").display_name == "private (models the noise), bessel sampler"
    with pytest.raises(ValueError, match="sampler must be one of 'collapsed', 'bessel'; got 'gibbs'"):
        methods.create("private", sampler="gibbs")
    with pytest.raises(
        ValueError, match="sampler='bessel' applies to methods with that option \\(private\\), not to method='naive'"
    ):
        methods.create("naive", sampler="bessel")
    with pytest.raises(ValueError, match="options go to the method's constructor"):
        methods.create(method, sampler="bessel")
    with pytest.raises(ValueError, match="method='naive' has no option 'sampler'"):
        Naive(sampler="bessel")
    with pytest.raises(ValueError, match="has no option 'speed'; its options: sampler"):
        Private(speed=1)


# ---------------------------------------------------------------------------
# What each method sees
# ---------------------------------------------------------------------------

Y_OBS = np.array([[3, -2, 0, 1], [-1, 4, 2, -5], [0, 0, 7, 1]])


def exclusions(mask):
    rows = base.excluded_rows(mask)
    return Exclusions(mask=mask, rows=rows, n_observed=int((~mask).sum()))


def test_naive_fits_the_truncated_counts_of_observed_cells():
    excluded = np.zeros(Y_OBS.shape, dtype=bool)
    excluded[1, 1] = excluded[2, 2] = True
    prepared = Naive().prepare(Y_OBS, None, exclusions(excluded))
    indptr, indices, values = prepared.counts
    fitted = sp.csr_matrix((values, indices, indptr), shape=Y_OBS.shape).toarray()
    np.testing.assert_array_equal(fitted, np.where(excluded, 0, np.maximum(Y_OBS, 0)))
    assert values.min() > 0  # zeros are not stored
    assert prepared.alpha is None
    assert prepared.mean_count == pytest.approx((3 + 1 + 2 + 1) / 10)
    np.testing.assert_array_equal(prepared.excluded[0], [0, 0, 1, 2])


def test_nonprivate_fits_the_true_counts_and_refuses_noised_ones():
    Y = np.abs(Y_OBS)
    prepared = NonPrivate().prepare(Y, None, exclusions(np.zeros(Y.shape, dtype=bool)))
    indptr, indices, values = prepared.counts
    np.testing.assert_array_equal(sp.csr_matrix((values, indices, indptr), shape=Y.shape).toarray(), Y)
    assert prepared.mean_count == pytest.approx(Y.sum() / Y.size)
    for negative in (Y_OBS, sp.csr_matrix(Y_OBS)):
        with pytest.raises(ValueError, match="needs the true \\(non-negative\\) counts; use method='private'"):
            NonPrivate().prepare(negative, None, exclusions(np.zeros(Y.shape, dtype=bool)))


def test_private_keeps_the_noised_counts_in_the_smallest_integer_type():
    excluded = np.zeros(Y_OBS.shape, dtype=bool)
    excluded[2, 2] = True
    alpha = np.array([0.1, 0.5, 0.9])
    prepared = Private().prepare(Y_OBS, alpha, exclusions(excluded))
    np.testing.assert_array_equal(prepared.counts, Y_OBS)
    assert prepared.counts.dtype == np.int8 and prepared.counts.flags.c_contiguous
    assert prepared.alpha is alpha
    # the noised counts' own mean (the noise has mean 0), negative ones included; the held-out 7 is not counted
    assert prepared.mean_count == pytest.approx((3 - 2 + 0 + 1 - 1 + 4 + 2 - 5 + 0 + 0 + 1) / 11)
    assert smallest_int_dtype(np.array([-129, 5])) == np.int16
    assert smallest_int_dtype(np.array([-128, 5])) == np.int16  # abs(-128) does not fit int8
    assert smallest_int_dtype(np.array([0, 2**31])) == np.int64
    assert smallest_int_dtype(np.array([], dtype=np.int64)) == np.int8


def test_positive_csr_and_fixed_counts_csr_match_scipy():
    rng = np.random.default_rng(1)
    Y = rng.integers(-3, 4, (17, 9))
    indptr, indices, values = private.positive_csr(Y, 5, 13)
    expected = sp.csr_matrix(np.maximum(Y[5:13], 0))
    np.testing.assert_array_equal(indptr, expected.indptr)
    np.testing.assert_array_equal(indices, expected.indices)
    np.testing.assert_array_equal(values, expected.data)
    excluded = rng.random(Y.shape) < 0.3
    indptr, indices, values = base.fixed_counts_csr(np.abs(Y), excluded)
    fitted = sp.csr_matrix((values, indices, indptr), shape=Y.shape).toarray()
    np.testing.assert_array_equal(fitted, np.where(excluded, 0, np.abs(Y)))
    assert values.min() > 0 and indptr.dtype == indices.dtype == values.dtype == np.int64


def test_row_blocks_cover_the_rows_aligned_to_stream_blocks():
    for n_rows, n_cols in [(5, 3), (1000, 50_000), (100_003, 700)]:
        bounds = private.row_blocks(n_rows, n_cols)
        assert bounds[0][0] == 0 and bounds[-1][1] == n_rows
        assert all(a[1] == b[0] for a, b in pairwise(bounds))
        assert all(start % ROWS_PER_STREAM == 0 for start, _ in bounds)
        assert all(
            (stop - start) * n_cols <= max(private.BLOCK_CELLS, ROWS_PER_STREAM * n_cols) for start, stop in bounds
        )


@pytest.mark.parametrize("model", ["topics", "blocks"])
@pytest.mark.parametrize("rows", ["dense", "sparse"])
def test_the_private_sweep_by_row_blocks_gives_the_same_chain(model, rows, monkeypatch):
    # large matrices get their rates a block of rows at a time (pipelined on the pool): the chain
    # must not notice, whether its rows draw every cell or take the sparse step
    rng = np.random.default_rng(2)
    mean = 2.0 if rows == "dense" else 0.2
    Y_obs = rng.poisson(mean, (50, 50)) - rng.poisson(mean / 2, (50, 50))
    assert private.Private().start(
        private.Private().prepare(Y_obs, np.full(50, 0.4), exclusions(np.zeros(Y_obs.shape, dtype=bool))),
        None,
        None,
        None,
        None,
    )["use_row"].all() == (rows == "sparse")
    whole = Chain(Y_obs, model=model, method="private", n_components=3, alpha=0.4, random_state=3)
    whole.step(3)
    monkeypatch.setattr(private, "BLOCK_CELLS", 16 * 50)  # blocks of 16 rows
    assert len(private.row_blocks(50, 50)) == 4
    blocked = Chain(Y_obs, model=model, method="private", n_components=3, alpha=0.4, random_state=3, parallel=True)
    blocked.step(3)
    assert blocked.log_joint == whole.log_joint
    np.testing.assert_array_equal(blocked.y_latent, whole.y_latent)
    np.testing.assert_array_equal(blocked.factors["theta"], whole.factors["theta"])


def test_private_start_draws_noise_rates_from_their_exponential_prior():
    alpha = np.repeat([0.2, 0.7], 20_000)
    prepared = Private().prepare(
        np.zeros((alpha.size, 2), dtype=np.int64), alpha, exclusions(np.zeros((alpha.size, 2), dtype=bool))
    )
    latent = Private(sampler="bessel").start(prepared, None, None, None, np.random.default_rng(4))
    np.testing.assert_array_equal(latent["posterior_scale"], alpha)  # lambda's posterior scale is alpha
    for value in (0.2, 0.7):
        rows = alpha == value
        mean = value / (1 - value)  # Exp with MEAN alpha / (1 - alpha)
        for name in ("lambda_plus", "lambda_minus"):
            draws = latent[name][rows].ravel()
            assert stats.kstest(draws, stats.expon(scale=mean).cdf).pvalue > P_ACCEPT
            assert stats.kstest(draws, stats.expon(scale=1.05 * mean).cdf).pvalue < P_ACCEPT


# ---------------------------------------------------------------------------
# Steps 1-3: (y, g+, g-) | ytil, mu, lambda+, lambda-
# ---------------------------------------------------------------------------


def exact_true_count_joint(ytil, mu, lam_plus, lam_minus, size=80):
    """p(y, g+ | ytil) ∝ Pois(y; mu) Pois(g+; lambda+) Pois(y + g+ - ytil; lambda-)."""
    y, g_plus = np.meshgrid(np.arange(size), np.arange(size), indexing="ij")
    g_minus = y + g_plus - ytil
    log_p = np.where(
        g_minus >= 0,
        stats.poisson.logpmf(y, mu)
        + stats.poisson.logpmf(g_plus, lam_plus)
        + stats.poisson.logpmf(np.maximum(g_minus, 0), lam_minus),
        -np.inf,
    )
    p = np.exp(log_p - log_p.max())
    return p / p.sum()


def draw_true_counts(ytil, mu, lam_plus, lam_minus, n, seed):
    seed_stream(seed, 0, 0)  # Numba's generator: large binomials and gammas
    state = new_state(seed, 0, 0)  # the per-cell draws; advanced in place
    return np.array([sample_true_count(ytil, mu, lam_plus, lam_minus, state) for _ in range(n)])


CELLS = [  # ytil, mu, lambda+, lambda-
    (-3, 1.5, 0.4, 0.7),
    (0, 0.3, 0.5, 0.5),
    (4, 2.0, 0.3, 1.2),
    (2, 9.0, 2.0, 0.6),
    (30, 25.0, 0.5, 0.5),  # y+ above the small-binomial threshold
]


@pytest.mark.parametrize("cell", CELLS)
def test_true_count_conditional_matches_enumeration(cell):
    ytil, mu, lam_plus, lam_minus = cell
    draws = draw_true_counts(ytil, mu, lam_plus, lam_minus, 20_000, seed=7)
    y, g_plus, g_minus, m = draws.T
    assert np.all(y + g_plus - g_minus == ytil)
    assert np.all(m == np.minimum(y + g_plus, g_minus))
    size = 80
    table = np.zeros((size, size))
    np.add.at(table, (y, g_plus), 1)
    exact = exact_true_count_joint(ytil, mu, lam_plus, lam_minus, size)
    assert chi_square_pvalue(table, exact) > P_ACCEPT
    # power: the same test rejects a 20% wrong rate mu
    wrong = exact_true_count_joint(ytil, 1.2 * mu, lam_plus, lam_minus, size)
    assert chi_square_pvalue(table, wrong) < P_ACCEPT


def test_true_count_is_zero_when_the_rate_is_zero():
    draws = draw_true_counts(5, 0.0, 0.5, 0.5, 500, seed=3)
    assert np.all(draws[:, 0] == 0)
    assert np.all(draws[:, 1] - draws[:, 2] == 5)


# ---------------------------------------------------------------------------
# Step 4 and the whole per-cell chain: stationary at p(y | ytil, mu)
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("g", [0, 3, 40])
def test_noise_rate_draw_is_gamma_with_scale_alpha(g):
    alpha = 0.3
    seed_stream(5, g, 0)  # shapes above the small-shape threshold use np.random.gamma
    state = new_state(5, g, 0)
    draws = np.array([draw_noise_rates(g, 2 * g, alpha, state) for _ in range(5_000)])
    for column, shape in ((0, 1 + g), (1, 1 + 2 * g)):
        assert stats.kstest(draws[:, column], stats.gamma(shape, scale=alpha).cdf).pvalue > P_ACCEPT
        assert stats.kstest(draws[:, column], stats.gamma(shape, scale=1.1 * alpha).cdf).pvalue < P_ACCEPT


@pytest.mark.parametrize("g_plus, g_minus", [(0, 0), (1, 0), (0, 1), (2, 1)])
def test_noise_rate_pair_is_two_independent_gammas(g_plus, g_minus):
    # Small g draw both rates from one log (a Gamma total split by a Beta):
    # each must be Gamma(1 + g*) and the two independent, so their sum is
    # Gamma(2 + g+ + g-) and their ranks uncorrelated.
    alpha = 0.3
    state = new_state(7, g_plus, g_minus)
    draws = np.array([draw_noise_rates(g_plus, g_minus, alpha, state) for _ in range(5_000)])
    for column, shape in ((0, 1 + g_plus), (1, 1 + g_minus)):
        assert stats.kstest(draws[:, column], stats.gamma(shape, scale=alpha).cdf).pvalue > P_ACCEPT
    total = stats.gamma(2 + g_plus + g_minus, scale=alpha).cdf
    assert stats.kstest(draws.sum(axis=1), total).pvalue > P_ACCEPT
    assert stats.spearmanr(draws[:, 0], draws[:, 1]).pvalue > P_ACCEPT
    # Power: a dependent pair with these marginals (lambda- a copy of lambda+
    # when the shapes match, or any fixed function) fails the sum test.
    assert stats.kstest(2 * draws[:, 0], total).pvalue < P_ACCEPT


@pytest.mark.parametrize("shape", [1, 5, 12, 13, 60])
def test_gamma_of_integer_shape_both_constructions(shape):
    # up to 12: -log of a product of uniforms; above: Numba's generator
    seed_stream(9, shape, 0)
    state = new_state(9, shape, 0)
    draws = np.array([gamma_integer_shape(shape, 0.7, state) for _ in range(5_000)])
    assert stats.kstest(draws, stats.gamma(shape, scale=0.7).cdf).pvalue > P_ACCEPT
    assert stats.kstest(draws, stats.gamma(shape, scale=0.7 * (1 + 0.3 / np.sqrt(shape))).cdf).pvalue < P_ACCEPT


@njit
def _cell_chains(ytil, mu, alpha, posterior_scale, y_start, g_plus, g_minus, n_steps, seed):
    """Independent per-cell Gibbs chains (steps 1-4); the y of the last step."""
    out = np.empty(y_start.shape[0], dtype=np.int64)
    state = np.empty(4, dtype=np.uint64)
    for c in range(y_start.shape[0]):
        seed_stream(seed, 0, c)
        seed_state(state, seed, 0, c)
        lam_p = gamma_integer_shape(1 + g_plus[c], alpha, state)
        lam_m = gamma_integer_shape(1 + g_minus[c], alpha, state)
        y = y_start[c]
        for _ in range(n_steps):
            y, gp, gm, m = sample_true_count(ytil, mu, lam_p, lam_m, state)
            lam_p, lam_m = draw_noise_rates(gp, gm, posterior_scale, state)
        out[c] = y
    return out


def _stationary_starts(ytil, mu, alpha, n, rng):
    """Exact draws of (y, g+, g-) given ytil by rejection from the generative model."""
    ys, gps, gms = [], [], []
    while sum(map(len, ys)) < n:
        lam = rng.exponential(alpha / (1 - alpha), (2, 4 * n))
        y = rng.poisson(mu, 4 * n)
        g_plus, g_minus = rng.poisson(lam)
        keep = y + g_plus - g_minus == ytil
        ys.append(y[keep]), gps.append(g_plus[keep]), gms.append(g_minus[keep])
    return (np.concatenate(ys)[:n], np.concatenate(gps)[:n], np.concatenate(gms)[:n])


@pytest.mark.parametrize("ytil,mu", [(3, 1.0), (-2, 2.5)])
def test_cell_chain_keeps_the_exact_posterior_of_y(ytil, mu):
    """Started at exact draws of p(y, g, lambda | ytil), 15 sweeps of steps 1-4
    must leave y distributed as p(y | ytil) ∝ Pois(y; mu) Geom2(ytil - y; alpha).
    The paper's lambda rate alpha/(1-alpha) + 1 drifts away and is rejected."""
    alpha, n = 0.3, 20_000
    rng = np.random.default_rng(1)
    y0, g_plus, g_minus = _stationary_starts(ytil, mu, alpha, n, rng)
    support = np.arange(60)
    exact = np.exp(stats.poisson.logpmf(support, mu) + geometric_logpmf(ytil - support, alpha))
    y = _cell_chains(ytil, mu, alpha, alpha, y0, g_plus, g_minus, 15, 9)
    assert chi_square_pvalue(np.bincount(y, minlength=60)[:60], exact) > P_ACCEPT
    wrong_scale = 1.0 / (alpha / (1 - alpha) + 1)
    y_wrong = _cell_chains(ytil, mu, alpha, wrong_scale, y0, g_plus, g_minus, 15, 9)
    assert chi_square_pvalue(np.bincount(y_wrong, minlength=60)[:60], exact) < P_ACCEPT


def _held_bytes(counts):
    """Bytes of the counts a method's ``prepare`` keeps: a dense array, or a CSR triple."""
    return counts.nbytes if isinstance(counts, np.ndarray) else sum(part.nbytes for part in counts)


def test_count_bytes_cover_what_prepare_keeps():
    """The memory estimate's counts (Method.count_bytes, lpviz.engine.chain_bytes) are never below
    what prepare keeps, and not far above it where the method knows its layout: the private method
    keeps the counts dense in the narrowest integer dtype (int8 at eps/N = 1 here), never wider
    than the release's own, so its estimate from the release's itemsize is the bytes kept, exactly
    when the release is already narrow; the fixed-count methods keep an int64 CSR of the positive
    cells, 16 bytes a positive cell and the row pointers: estimated from their positive cells
    (Method.positive_cells, counted a block at a time), the bytes kept exactly; without the count,
    the generic 8 bytes a cell."""
    from lpviz.datasets import make_topics
    from lpviz.engine import count_itemsize

    data = make_topics(n_docs=2000, n_words=300, n_topics=4, random_state=3)
    release = data.release()
    shape = release.Y_obs.shape
    none = Exclusions(mask=None, rows=base.excluded_rows(np.zeros(shape, dtype=bool)), n_observed=shape[0] * shape[1])
    for stored in (np.int64, np.int16, smallest_int_dtype(release.Y_obs)):
        Y_obs = release.Y_obs.astype(stored)
        kept = Private().prepare(Y_obs, release.alpha, none).counts
        estimate = Private().count_bytes(shape, count_itemsize(Y_obs))
        assert kept.nbytes <= estimate <= 8 * kept.nbytes
        if stored == smallest_int_dtype(release.Y_obs):
            assert estimate == kept.nbytes
    assert Private().count_bytes(shape, None) == 8 * shape[0] * shape[1]  # not known: the widest
    naive = _held_bytes(Naive().prepare(release.Y_obs, release.alpha, none).counts)
    positive = Naive().positive_cells(release.Y_obs)
    assert positive == np.count_nonzero(release.Y_obs > 0)
    assert Naive().count_bytes(shape, count_itemsize(release.Y_obs), positive) == naive
    assert Naive().count_bytes(shape, count_itemsize(release.Y_obs)) == 8 * shape[0] * shape[1]  # not counted
    true = _held_bytes(NonPrivate().prepare(data.Y, None, none).counts)
    assert NonPrivate().count_bytes(shape, count_itemsize(data.Y), NonPrivate().positive_cells(data.Y)) == true
    sparse = sp.csr_matrix(data.Y)  # a sparse matrix: counted from its stored values
    assert NonPrivate().count_bytes(shape, None, NonPrivate().positive_cells(sparse)) == true
    assert Private().positive_cells(release.Y_obs) is None  # the private method keeps every cell


def test_chain_estimate_counts_the_narrow_counts():
    """A private chain's estimate on an int8 release is 7 bytes a cell below the int64 one's (the
    counts as prepare keeps them), and the prepared counts of that chain are int8."""
    from lpviz.datasets import make_topics

    release = make_topics(n_docs=600, n_words=200, n_topics=3, random_state=1).release()
    narrow = np.clip(release.Y_obs, -127, 127).astype(np.int8)
    chains = [Chain(Y, model="topics", alpha=release.alpha, n_components=3, random_state=0)
              for Y in (narrow, narrow.astype(np.int64))]  # fmt: skip
    assert chains[0]._prepared.counts.dtype == np.int8
    assert chains[1].memory_estimate() - chains[0].memory_estimate() == 7 * narrow.size


def test_an_in_process_chain_of_a_fixed_count_method_counts_its_positive_cells(monkeypatch):
    """The naive and non-private chains keep a CSR of the positive cells (16 bytes each): the
    in-process memory check counts them, as a cluster's workers do (they were charged the generic
    8 bytes a cell, so a sparse release that fits was refused), and counts the matrix they fit (the
    non-private chain's: the true counts, not the release)."""
    from lpviz.budget import ENV_VAR, MemoryBudgetError
    from lpviz.datasets import make_topics
    from lpviz.engine import chain_bytes, count_itemsize

    data = make_topics(n_docs=1500, n_words=400, n_topics=3, alpha0=0.1, doc_length=5.0, random_state=4)
    release = data.release()
    for method, fitted, truth in (("naive", release.Y_obs, None), ("nonprivate", data.Y, data.truth())):
        chain = Chain(release, method=method, n_components=3, truth=truth, random_state=0)
        positive = methods.create(method).positive_cells(fitted)
        assert 0 < positive < fitted.size // 2
        parts = (chain.model_instance, chain.method_instance, fitted.shape, count_itemsize(fitted))
        expected = chain_bytes(*parts, positive)
        assert chain.memory_estimate() == expected
        generic = chain_bytes(*parts)
        assert expected < generic  # the 8 bytes a cell charged before
        # a limit between the two: the chain is made now; one byte below what it keeps, refused in words
        monkeypatch.setenv(ENV_VAR, str(expected))
        Chain(release, method=method, n_components=3, truth=truth, random_state=0)
        monkeypatch.setenv(ENV_VAR, str(expected - 1))
        with pytest.raises(MemoryBudgetError, match=f"a {method} chain of the topics model"):
            Chain(release, method=method, n_components=3, truth=truth, random_state=0)
        monkeypatch.delenv(ENV_VAR)
