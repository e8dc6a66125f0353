"""The dashboard's result and explanation views, without a browser.

Each view is driven the way a person would (changing its parameters or the
store's) and what it would draw is checked against the library: Bessel marks
against lpviz.bessel, the noise laws against lpviz.privacy, topic tables
against lpviz.metrics, exported files read back.
"""

import holoviews as hv
import numpy as np
import panel as pn
import pytest

from app.store import DataStore
from lpviz import bessel, privacy


@pytest.fixture
def topics_store():
    return DataStore(background=False, source="synthetic-topics")


def run_fits(store, n_iter=60, burn_in=20, thin=10):
    """Run the store's three chains to the end in their threads and hand over the results."""
    store.n_iter, store.burn_in, store.thin = n_iter, burn_in, thin
    store.start()
    for runner in store.runners.values():
        assert runner.join(timeout=300), f"{runner.method} chain did not finish"
        runner.drain()
        assert runner.status == "done", (runner.method, runner.status, runner.error)
    return store


@pytest.fixture(scope="module")
def fitted_topics_store():
    return run_fits(DataStore(background=False, source="synthetic-topics"))


def _elements(overlay, kind):
    return [el for el in overlay.values() if isinstance(el, kind)] if isinstance(overlay, hv.Overlay) \
        else ([overlay] if isinstance(overlay, kind) else [])


# ---- Bessel view ----------------------------------------------------------------------

@pytest.mark.parametrize("nu, a", [(0.0, 0.05), (3.0, 8.0), (12.5, 40.0), (0.0, 90.0), (60.0, 2.0)])
def test_bessel_marks_follow_parameters_and_match_library(nu, a):
    from app.bessel_view import BesselView

    view = BesselView()
    view.param.update(nu=nu, a=a)
    marks = view.marks()
    assert marks["mean"] == pytest.approx(float(bessel.mean(nu, a)), rel=1e-12)
    assert marks["mode"] == int(bessel.mode(nu, a))

    m, p = view.pmf_frame()
    assert m[0] == 0 and np.all(np.diff(m) == 1)
    assert p.sum() == pytest.approx(1.0, abs=1e-5)  # the shown support holds the mass
    # The marks agree with the pmf drawn: its mean and its argmax.
    assert np.sum(m * p) / p.sum() == pytest.approx(marks["mean"], rel=1e-4, abs=1e-5)
    assert p[marks["mode"]] == pytest.approx(p.max(), rel=1e-12)  # ties (a = 90, nu = 0) allowed

    plot = view.pmf_plot()
    lines = sorted(float(line.data) for line in _elements(plot, hv.VLine))
    assert lines == pytest.approx(sorted([marks["mean"], marks["mode"]]))
    spikes = _elements(plot, hv.Spikes)[0]
    np.testing.assert_allclose(spikes.dimension_values(1), bessel.pmf(m, nu, a))


def test_bessel_gap_map_shows_bound_of_one_and_matches_library():
    from app.bessel_view import BesselView

    view = BesselView(map_nu_max=40.0, map_a_max=80.0, map_resolution=31)
    nu_grid, a_grid, gap = view.gap_grid()
    assert gap.shape == (31, 31)
    assert nu_grid.max() == 40.0 and a_grid.max() == 80.0 and a_grid.min() > 0
    assert 0.5 < gap.max() < 1.0  # close to the bound, never at it
    i, j = 17, 9
    expected = abs(float(bessel.mean(nu_grid[i], a_grid[j])) - int(bessel.mode(nu_grid[i], a_grid[j])))
    assert gap[i, j] == pytest.approx(expected)

    image = _elements(view.gap_map(), hv.Image)[0]
    # What is drawn at (a, nu) is the gap there.
    for i, j in [(0, 0), (0, 30), (30, 0), (17, 9), (25, 4)]:
        assert image[a_grid[j], nu_grid[i]] == pytest.approx(gap[i, j])
    curve = _elements(view.gap_bound_plot(), hv.Curve)[0]
    np.testing.assert_allclose(curve.dimension_values(1), gap.max(axis=0))
    assert float(_elements(view.gap_bound_plot(), hv.HLine)[0].data) == 1.0

    view.map_nu_max = 10.0  # the map follows its settings
    assert view.gap_grid()[0].max() == 10.0


def test_bessel_draws_histogram_counts_every_draw():
    from app.bessel_view import draws_histogram

    draws = np.array([0, 0, 1, 3, 3, 3, 7])
    edges, counts = draws_histogram(draws)
    assert counts.sum() == draws.size
    assert counts[0] == 2 and counts[3] == 3 and counts[7] == 1
    wide = np.arange(1000)
    edges, counts = draws_histogram(wide, max_bins=50)
    assert len(counts) <= 51 and counts.sum() == wide.size


# ---- privacy view ---------------------------------------------------------------------

@pytest.mark.parametrize("epsilon, N", [(1.0, 1), (0.25, 1), (3.0, 1), (2.0, 4)])
def test_skellam_mixture_is_the_geometric_law(epsilon, N):
    from app.privacy_view import skellam_mixture_pmf

    alpha = privacy.alpha_from(epsilon, N)
    tau = np.arange(-25, 26)
    geometric = np.exp(privacy.geometric_logpmf(tau, alpha))
    np.testing.assert_allclose(skellam_mixture_pmf(tau, alpha), geometric, atol=2e-5)
    # Power: the mixture at a slightly different alpha is told apart.
    assert np.abs(skellam_mixture_pmf(tau, alpha * 1.05) - geometric).max() > 5e-4


def test_privacy_view_follows_store_epsilon_and_N(topics_store):
    from app.privacy_view import PrivacyView

    view = PrivacyView(store=topics_store, y=4)
    topics_store.param.update(epsilon=2.0, N=1)
    assert view.alpha == pytest.approx(np.exp(-2.0))
    tau, geometric, mixture = view.noise_frame()
    np.testing.assert_allclose(geometric, np.exp(privacy.geometric_logpmf(tau, np.exp(-2.0))))
    np.testing.assert_allclose(mixture, geometric, atol=2e-5)

    topics_store.param.update(epsilon=1.5, N=3)
    assert view.alpha == pytest.approx(np.exp(-0.5))
    y_tilde, log_p_y, log_p_yN = view.adversary_frame()
    ratio = log_p_y - log_p_yN
    # Theorem 1: within +/- epsilon, and the bound is reached far from y.
    assert np.abs(ratio).max() == pytest.approx(1.5)
    assert ratio[0] == pytest.approx(1.5) and ratio[-1] == pytest.approx(-1.5)
    np.testing.assert_allclose(log_p_y, privacy.geometric_logpmf(y_tilde - 4, np.exp(-0.5)))
    np.testing.assert_allclose(log_p_yN, privacy.geometric_logpmf(y_tilde - 7, np.exp(-0.5)))
    bound_lines = sorted(float(h.data) for h in _elements(view.log_ratio_plot(), hv.HLine))
    assert bound_lines == pytest.approx([-1.5, 1.5])

    topics_store.heterogeneous = True
    text = view.summary().object
    row_alpha = np.asarray(topics_store.alpha)
    assert "Heterogeneous" in text and f"{row_alpha.min():.3f}" in text
    for name, figure in view.figures().items():
        assert isinstance(figure, hv.Overlay), name


def test_bessel_view_shows_the_private_chain_draws(fitted_topics_store):
    from app.bessel_view import BesselView

    view = BesselView(store=fitted_topics_store)
    draws = fitted_topics_store.runners["private"].chain.bessel_draws
    assert draws is not None and draws.size > 0
    edges, counts = view._draws_pipe.data
    assert counts.sum() == draws.size  # every draw of the last sweep is in the histogram
    assert edges[-1] > draws.max()
    histogram = view.draws_plot(view._draws_pipe.data)
    assert histogram.dimension_values("cells").sum() == draws.size
    view.show_chain_draws = False
    assert view._draws_pipe.data[1].sum() == 0


# ---- topics view ----------------------------------------------------------------------

def test_topics_table_matches_metrics_on_aligned_best_sample(fitted_topics_store):
    from app.topics_view import TopicsView
    from lpviz import metrics

    store = fitted_topics_store
    view = TopicsView(store=store)
    phi_true = store.data.factors["phi"]
    K = phi_true.shape[0]
    vocab = store.data.col_labels
    table = view.table
    assert list(table["method"].unique()) == ["truth", "private", "naive", "nonprivate"]
    for method in ("private", "naive", "nonprivate"):
        phi = store.runners[method].result["best"]["phi"]
        order = metrics.align_topics(phi, phi_true)
        expected = phi[order] / phi[order].sum(axis=1, keepdims=True)
        np.testing.assert_allclose(view.topics[method], expected)
        rows = table[table["method"] == method]
        assert len(rows) == K
        top = metrics.top_words(expected, n=10)
        assert rows["top words"].tolist() == [", ".join(words) for words in
                                              metrics.top_words(expected, n=10, vocab=vocab)]
        np.testing.assert_allclose(rows["NPMI"], metrics.npmi(top, store.Y_true, top_n=10))
        np.testing.assert_allclose(rows["coherence"], metrics.umass_coherence(top, store.Y_true, top_n=10))
        truth = phi_true / phi_true.sum(axis=1, keepdims=True)
        np.testing.assert_allclose(rows["L1 to truth"], np.abs(expected - truth).sum(axis=1))
        # Aligned means no other matching of topics is closer to the truth.
        assert rows["L1 to truth"].sum() <= np.abs(expected[::-1] - truth).sum() + 1e-12

    view.n_top = 4
    assert all(len(words.split(", ")) == 4 for words in view.table["top words"])
    heatmaps = view.heatmaps()
    assert len(heatmaps) == 4
    heatmap = heatmaps.values()[1]  # the private fit
    assert set(heatmap.dimension_values("topic")) == {str(k) for k in range(1, K + 1)}
    assert heatmap.dimension_values("P(term | topic)").max() <= 1.0


def test_topics_view_waits_for_samples_and_ignores_networks():
    from app.topics_view import TopicsView

    store = DataStore(background=False, source="synthetic-topics")
    view = TopicsView(store=store)
    assert set(view.table["method"]) == {"truth"}  # no fit yet: only the truth
    assert "Waiting for a saved sample" in view.status().object
    store.source = "synthetic-blocks"
    assert view.table.empty and view.topics == {}
    assert "Blocks" in view.status().object


# ---- blocks view ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def fitted_blocks_store():
    store = DataStore(background=False, source="synthetic-blocks")
    store.holdout = "top actors"
    return run_fits(store)


def test_blocks_view_orders_actors_and_scores_held_out_cells(fitted_blocks_store):
    from app.blocks_view import BlocksView, block_scores, memberships
    from lpviz import metrics

    store = fitted_blocks_store
    view = BlocksView(store=store)
    theta_true = store.data.factors["theta"]
    main = np.argmax(memberships(theta_true), axis=1)[view.order]
    assert sorted(view.order.tolist()) == list(range(store.Y_true.shape[0]))
    assert np.all(np.diff(main) >= 0)  # grouped by main community
    assert "true memberships" in view.order_source

    mask, reference = store.mask, store.truth
    exists = store.data.info.get("mask", np.ones(mask.shape, bool))
    held = ~mask & exists  # self loops are not part of the network, so not held out
    assert 0 < held.sum() < mask.size
    scores = view.scores.set_index("method")
    for method in ("private", "naive", "nonprivate"):
        mu_hat = store.runners[method].result["mu_hat"]
        row = scores.loc[{"private": "private (LPLP)", "naive": "naive (truncated)",
                          "nonprivate": "non-private"}[method]]
        assert row["MAE"] == pytest.approx(metrics.mae(mu_hat, reference, mask))
        assert row["held-out MAE"] == pytest.approx(np.abs(mu_hat - reference)[held].mean())
        theta = store.runners[method].result["best"]["theta"]
        shown = view.fits[method]["theta"]
        assert sorted(shown.sum(axis=0).round(9).tolist()) == sorted(theta.sum(axis=0).round(9).tolist())
        # Matched columns are never farther from the truth than the unmatched ones.
        truth = theta_true / theta_true.sum(axis=0)
        assert (np.abs(shown / shown.sum(axis=0) - truth).sum()
                <= np.abs(theta / theta.sum(axis=0) - truth).sum() + 1e-9)
    # The non-private fit sees the true counts: it beats the naive fit on observed cells.
    assert scores.loc["non-private", "MAE"] < scores.loc["naive (truncated)", "MAE"]

    rates = view.rate_heatmaps()
    assert len(rates) == 4  # truth + three fits
    shade = [el for el in rates.values()[1].values() if el.vdims[0].name == "held out"][0]
    shaded = np.isfinite(shade.dimension_values(2)).sum()
    assert shaded == held.sum()
    image = [el for el in rates.values()[1].values() if el.vdims[0].name == "rate"][0]
    expected = store.runners["private"].result["mu_hat"][np.ix_(view.order, view.order)]
    n = len(view.order)
    for row, col in [(0, 0), (0, n - 1), (n - 1, 0), (3, 11)]:  # drawn at (recipient, sender)
        assert image[col, row] == pytest.approx(expected[row, col])

    mu_hat = store.runners["private"].result["mu_hat"]
    assert np.isnan(block_scores(mu_hat, reference, None)[1])  # nothing held out, no held-out score
    store.holdout = "none"  # new noise settings reset the chains: nothing to show, nothing shaded
    assert view.fits == {} and view.scores.empty
    assert [type(el) for el in view.rate_heatmaps().values()] == [hv.Image]


# ---- export ---------------------------------------------------------------------------

def test_export_writes_readable_figures_and_results(fitted_topics_store, tmp_path):
    import json

    from app.bessel_view import BesselView
    from app.export import ExportView, results_bytes, save_figure, save_results
    from app.topics_view import TopicsView

    store = fitted_topics_store
    bessel_view, topics_view = BesselView(nu=2.0, a=5.0), TopicsView(store=store)

    png = save_figure(bessel_view.pmf_plot(), tmp_path / "pmf.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5_000
    html = save_figure(topics_view.heatmaps(), tmp_path / "topics.html")
    text = html.read_text()
    assert "<html" in text.lower() and "Bokeh" in text
    with pytest.raises(FileExistsError, match="overwrite=True"):
        save_figure(bessel_view.pmf_plot(), png)  # nothing a user made is overwritten silently
    assert save_figure(bessel_view.gap_map(), png, overwrite=True) == png
    with pytest.raises(ValueError, match=r"\.png"):
        save_figure(bessel_view.pmf_plot(), tmp_path / "pmf.jpeg")

    npz_path = save_results(store, tmp_path / "fit.npz")
    with np.load(npz_path) as saved:
        np.testing.assert_array_equal(saved["Y_obs"], store.Y_obs)
        np.testing.assert_array_equal(saved["Y_true"], store.Y_true)
        for method in ("private", "naive", "nonprivate"):
            result = store.runners[method].result
            np.testing.assert_allclose(saved[f"{method}/mu_hat"], result["mu_hat"])
            np.testing.assert_allclose(saved[f"{method}/best_phi"], result["best"]["phi"])
            np.testing.assert_array_equal(saved[f"{method}/trace_iteration"],
                                          store.runners[method].trace()["iteration"])
    summary = json.loads(save_results(store, tmp_path / "fit.json").read_text())
    assert summary["data"]["shape"] == list(store.Y_true.shape)
    assert summary["settings"]["epsilon"] == store.epsilon
    for method in ("private", "naive", "nonprivate"):
        entry = summary["methods"][method]
        assert entry["status"] == "done" and entry["iteration"] == store.n_iter
        assert entry["samples_saved"] == store.runners[method].result["samples_saved"]
    with pytest.raises(FileExistsError):
        save_results(store, npz_path)

    view = ExportView(store=store, views=[bessel_view, topics_view])
    assert "bessel_pmf" in view.param.figure.objects and "topics_heatmaps" in view.param.figure.objects
    view.figure = "topics_heatmaps"
    layout = view.__panel__()
    downloads = [w for w in layout.select(pn.widgets.FileDownload)]
    assert [d.filename for d in downloads[:2]] == ["lpviz_topics_heatmaps.png", "lpviz_topics_heatmaps.html"]
    assert downloads[0].callback().getvalue()[:4] == b"\x89PNG"
    assert downloads[2].callback().getvalue() == results_bytes(store, ".npz")


def test_data_and_fit_figures_export_as_they_are_shown(fitted_topics_store, tmp_path):
    from app.export import save_figure
    from app.fits_view import FitsView
    from app.noise_view import NoiseView

    store = fitted_topics_store
    noise, fits = NoiseView(store=store).figures(), FitsView(store=store).figures()
    assert set(noise) == {"noise_heatmaps", "noise_histogram"}
    assert set(fits) == {"fits_mae_trace", "fits_log_joint_trace", "fits_rates"}
    # the exported rates are each method's current posterior mean, not a placeholder
    for method, panel in zip(("private", "naive", "nonprivate"), list(fits["fits_rates"])[1:]):
        np.testing.assert_allclose(panel.dimension_values(2, flat=False),
                                   store.runners[method].result["mu_hat"], rtol=1e-12)
    # the exported noised panel is the released matrix
    np.testing.assert_array_equal(list(noise["noise_heatmaps"])[1].dimension_values(2, flat=False), store.Y_obs)
    for name, figure in {**noise, **fits}.items():
        png = save_figure(figure, tmp_path / f"{name}.png")
        assert png.read_bytes()[:4] == b"\x89PNG" and png.stat().st_size > 5_000
