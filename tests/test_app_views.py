"""The dashboard's result and explanation views, without a browser.

Each view is driven the way a person would (changing its parameters or the
session's) and what it would draw is checked against the library: Bessel marks
against lpviz.bessel, the noise laws against lpviz.privacy, topic tables
against lpviz.metrics, exported files read back.
"""

import re

import holoviews as hv
import numpy as np
import panel as pn
import pytest

from lpviz import bessel, methods, privacy
from lpviz.dashboard.session.datastore import DataStore
from lpviz.dashboard.session.fits import Fits
from lpviz.dashboard.session.settings import Settings
from lpviz.dashboard.views.fits_view import BASELINE_SUFFIX
from lpviz.engine import run
from lpviz.metrics import score
from lpviz.reproduce.report import flat_scores
from tests._checks import flat_numbers


def make_fits(**settings):
    return Fits(DataStore(Settings(**{"noise_seed": 3, **settings})))


def run_fits(fits, n_iter=60, burn_in=20, thin=10):
    """Run the session's chains to the end in their threads and hand over the results."""
    fits.settings.param.update(n_iter=n_iter, burn_in=burn_in, thin=thin)
    fits.start()
    for runner in fits.runners.values():
        assert runner.join(timeout=300), f"{runner.method} chain did not finish"
    fits.drain()
    for runner in fits.runners.values():
        assert runner.status == "done", (runner.method, runner.status, runner.error)
    return fits


@pytest.fixture(scope="module")
def fitted_topics():
    return run_fits(make_fits(source="synthetic-topics"))


LABELS = {name: method.label for name, method in methods.METHODS.items()}


def _elements(overlay, kind):
    return (
        [el for el in overlay.values() if isinstance(el, kind)]
        if isinstance(overlay, hv.Overlay)
        else ([overlay] if isinstance(overlay, kind) else [])
    )


# ---- Bessel view ----------------------------------------------------------------------


@pytest.mark.parametrize("nu, a", [(0.0, 0.05), (3.0, 8.0), (12.5, 40.0), (0.0, 90.0), (60.0, 2.0)])
def test_bessel_marks_follow_parameters_and_match_library(nu, a):
    from lpviz.dashboard.views.bessel_view import BesselView

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
    from lpviz.dashboard.views.bessel_view import BesselView

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
    from lpviz.dashboard.views.bessel_view import draws_histogram

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
    from lpviz.dashboard.views.privacy_view import skellam_mixture_pmf

    alpha = privacy.alpha_from(epsilon, N)
    tau = np.arange(-25, 26)
    geometric = np.exp(privacy.geometric_logpmf(tau, alpha))
    np.testing.assert_allclose(skellam_mixture_pmf(tau, alpha), geometric, atol=2e-5)
    # Power: the mixture at a slightly different alpha is told apart.
    assert np.abs(skellam_mixture_pmf(tau, alpha * 1.05) - geometric).max() > 5e-4


def test_privacy_view_follows_the_session_epsilon_and_N():
    from lpviz.dashboard.views.privacy_view import PrivacyView

    data = DataStore(Settings(noise_seed=3))
    view = PrivacyView(data=data, y=4)
    data.settings.param.update(epsilon=2.0, N=1)
    assert view.alpha == pytest.approx(np.exp(-2.0))
    tau, geometric, mixture = view.noise_frame()
    np.testing.assert_allclose(geometric, np.exp(privacy.geometric_logpmf(tau, np.exp(-2.0))))
    np.testing.assert_allclose(mixture, geometric, atol=2e-5)

    data.settings.param.update(epsilon=1.5, N=3)
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

    data.settings.param.update(epsilon=10.0, N=1)
    assert "4.54e-05" in view.summary().object  # alpha with significant digits, never 0.0000
    data.settings.heterogeneous = True
    text = view.summary().object
    row_alpha = np.asarray(data.release.alpha)
    assert "Heterogeneous" in text and f"{row_alpha.min():.3f}" in text
    # the plots follow the release's own per-row noise (its median row), not the unused scalar epsilon
    assert view.alpha == pytest.approx(np.median(row_alpha)) != pytest.approx(np.exp(-10.0))
    tau, geometric, _ = view.noise_frame()
    np.testing.assert_allclose(geometric, np.exp(privacy.geometric_logpmf(tau, np.median(row_alpha))))
    assert "median row's alpha" in text
    for name, figure in view.figures().items():
        assert isinstance(figure, hv.Overlay), name


def test_bessel_view_says_the_collapsed_sampler_has_no_bessel_draws(fitted_topics):
    from lpviz.dashboard.views.bessel_view import BesselView

    assert fitted_topics.settings.method_options.sampler == "collapsed"  # the default
    view = BesselView(fits=fitted_topics)
    assert view.draws_runner() is None
    assert "collapsed sampler" in view._draws_note.object and "Sampler = bessel" in view._draws_note.object
    # no empty plot: the Bessel law on the release, one draw per observed cell (tests/test_app_teaching.py)
    assert view._draws_pipe.data[1].sum() == fitted_topics.data.release.observed_cells.sum()


def test_bessel_view_shows_the_draws_of_the_chains_snapshot():
    from lpviz.dashboard.views.bessel_view import BesselView

    fits = make_fits(source="synthetic-topics")
    fits.settings.method_options.sampler = "bessel"
    fitted = run_fits(fits)
    view = BesselView(fits=fitted)
    runner = view.draws_runner()
    assert runner is fitted.runners["private"]  # the method that draws Bessel variables
    draws = runner.result["bessel_draws"]
    assert draws is not None and draws.size > 0
    edges, counts = view._draws_pipe.data
    assert counts.sum() == draws.size  # every draw of the last sweep is in the histogram
    assert edges[-1] > draws.max()
    histogram = view.draws_plot(view._draws_pipe.data)
    assert histogram.dimension_values("cells").sum() == draws.size
    assert histogram.opts.get().kwargs["title"] == "Bessel draws of the chain's last sweep"
    view.show_chain_draws = False  # the Bessel law on the release instead of the chain's draws
    assert "on this release" in view._draws_note.object
    assert view.draws_figure().opts.get().kwargs["title"] == "Bessel draws on this release"


# ---- topics view ----------------------------------------------------------------------


def test_topics_table_matches_metrics_on_aligned_best_sample(fitted_topics):
    from lpviz import metrics
    from lpviz.dashboard.views.topics_view import TopicsView

    fits = fitted_topics
    view = TopicsView(fits=fits)
    truth = fits.data.truth
    phi_true = truth.factors["phi"]
    K = phi_true.shape[0]
    vocab = fits.data.data.col_labels
    table = view.table
    assert list(table["method"].unique()) == ["truth", *LABELS.values()]
    for _name, runner in fits.runners.items():
        phi = runner.result["best"]["phi"]
        order = metrics.align_topics(phi, phi_true)
        expected = phi[order] / phi[order].sum(axis=1, keepdims=True)
        np.testing.assert_allclose(view.topics[runner.label], expected)
        rows = table[table["method"] == runner.label]
        assert len(rows) == K
        top = metrics.top_words(expected, n=10)
        assert rows["top words"].tolist() == [
            ", ".join(words) for words in metrics.top_words(expected, n=10, vocab=vocab)
        ]
        np.testing.assert_allclose(rows["NPMI"], metrics.npmi(top, truth.Y, top_n=10))
        np.testing.assert_allclose(rows["coherence"], metrics.umass_coherence(top, truth.Y, top_n=10))
        norm_truth = phi_true / phi_true.sum(axis=1, keepdims=True)
        np.testing.assert_allclose(rows["L1 to truth"], np.abs(expected - norm_truth).sum(axis=1))
        # Aligned means no other matching of topics is closer to the truth.
        assert rows["L1 to truth"].sum() <= np.abs(expected[::-1] - norm_truth).sum() + 1e-12
        # the per-method numbers are lpviz.metrics.score's, and the table's topics give the same NPMI
        scores = view.mean_scores().set_index("method").loc[runner.label]
        assert scores["NPMI"] == pytest.approx(runner.result["score"]["npmi"])
        assert scores["NPMI"] == pytest.approx(rows["NPMI"].mean())
        assert scores["topic error (TV)"] == pytest.approx(runner.result["score"]["topic_distance"])

    view.n_top = 4
    assert all(len(words.split(", ")) == 4 for words in view.table["top words"])
    heatmaps = view.heatmaps()
    assert len(heatmaps) == 1 + len(fits.runners)
    heatmap = heatmaps.values()[1]  # the first method's fit
    assert set(heatmap.dimension_values("topic")) == {str(k) for k in range(1, K + 1)}
    assert heatmap.dimension_values("P(term | topic)").max() <= 1.0
    # the page's heatmaps: the same frames, drawn in place (one figure per method, kept across updates);
    # made with the tab's panel, not at the page's open (a hidden tab's figures cost every open)
    assert view._live_heatmaps.figures == {}
    pn.panel(view)
    live = view._live_heatmaps
    assert list(live.figures) == list(view.topics)
    for title, frame in view.heatmap_frames().items():
        plot, source, mapper = live.figures[title]
        terms = list(dict.fromkeys(frame["term"]))
        assert plot.title.text == title and list(plot.y_range.factors) == terms[::-1]
        assert list(plot.x_range.factors) == [str(k) for k in range(1, K + 1)]
        np.testing.assert_allclose(source.data["value"], frame["P(term | topic)"])
        assert mapper.low == pytest.approx(frame["P(term | topic)"].min())
    figures = {title: plot for title, (plot, _, _) in live.figures.items()}
    view.n_heatmap_words = 2  # fewer terms: the same figures, shorter, their data replaced
    assert {title: plot for title, (plot, _, _) in live.figures.items()} == figures
    for title, frame in view.heatmap_frames().items():
        plot, source, _ = live.figures[title]
        assert len(source.data["y"]) == len(frame) and plot.height == max(320, 13 * frame["term"].nunique() + 90)
    view.topics = {}
    assert live.figures == {} and "No topics yet" in live.panel.objects[0].object


def test_topic_scores_on_own_data_equal_the_summary(tmp_path):
    """Issue 37 (HIGH 4): after fitting an uploaded 40 x 25 count matrix, the Topics tab showed NPMI and
    coherence NaN for every topic while the scoreboard (lpviz.metrics.score, with the uploaded counts as
    the reference corpus) showed numbers: own counts have true counts but no true topics."""
    import io

    from lpviz.dashboard.views.topics_view import TopicsView

    rng = np.random.default_rng(7)
    counts = rng.poisson(rng.gamma(0.5, 2.0, size=(40, 1)) * rng.gamma(0.5, 2.0, size=(1, 25)))
    buffer = io.BytesIO()
    np.savez(buffer, Y=counts)
    fits = make_fits(source="synthetic-topics", n_components=3)
    fits.data.load_upload(buffer.getvalue(), "counts.npz")
    assert fits.data.error == "" and fits.data.truth is not None and not fits.data.truth.factors
    assert fits.data.model == "topics" and fits.data.release.shape == (40, 25)
    run_fits(fits)
    view = TopicsView(fits=fits)
    table, scores = view.table, view.mean_scores().set_index("method")
    assert "truth" not in set(table["method"])  # no true topics to list
    for runner in fits.active.values():
        rows = table[table["method"] == runner.label]
        assert len(rows) == fits.settings.n_components and rows["NPMI"].notna().all()
        summary = runner.result["score"]
        assert summary["npmi"] is not None
        assert rows["NPMI"].mean() == pytest.approx(summary["npmi"])
        assert scores.loc[runner.label, "NPMI"] == pytest.approx(summary["npmi"])
        assert rows["coherence"].dropna().mean() == pytest.approx(summary["umass"])


def test_topics_view_waits_for_samples_and_explains_networks():
    from lpviz.dashboard.views.topics_view import TopicsView

    fits = make_fits(source="synthetic-topics")
    view = TopicsView(fits=fits)
    assert set(view.table["method"]) == {"truth"}  # no fit yet: only the truth
    assert "Waiting for a saved sample" in view.status().object
    fits.settings.source = "synthetic-blocks"
    assert view.table.empty and view.topics == {} and not view.applies
    assert "Blocks" in view.status().object


# ---- blocks view ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def fitted_blocks():
    fits = make_fits(source="synthetic-blocks")
    fits.settings.holdout = "top actors"
    return run_fits(fits)


def library_posterior(fits, name):
    settings, problem = fits.settings, fits.problem()
    chain_run = run(
        problem.release,
        model=problem.model,
        method=name,
        n_components=problem.n_components,
        n_iter=settings.n_iter,
        burn_in=settings.burn_in,
        thin=settings.thin,
        truth=problem.truth if methods.get(name).uses_truth else None,
        random_state=problem.seed,
        chains=problem.chains,  # the session's chains: the same ensemble
    )
    for _ in chain_run:
        pass
    return chain_run.posterior


def test_held_out_mae_is_the_same_in_the_fits_and_blocks_tabs_and_the_library(fitted_blocks):
    from lpviz.dashboard.views.blocks_view import BlocksView
    from lpviz.dashboard.views.fits_view import FitsView

    fits = fitted_blocks
    release, truth = fits.data.release, fits.data.truth
    fits_table = FitsView(fits=fits).scores.set_index("method")
    blocks_table = BlocksView(fits=fits).scores.set_index("method")
    held = release.heldout_cells
    assert held is not None and not held.diagonal().any()
    for name, runner in fits.runners.items():
        expected = score(library_posterior(fits, name), release, truth)  # what `lpviz fit` prints
        for column, key in (
            ("held-out MAE", "heldout_mae"),
            ("MAE", "mae"),
            ("held-out MAE vs true rates", "heldout_rate_mae"),
        ):
            assert fits_table.loc[runner.label, column] == blocks_table.loc[runner.label, column]
            beside = column + BASELINE_SUFFIX  # each MAE with the best constant rate's beside it, on both tabs
            assert fits_table.loc[runner.label, beside] == blocks_table.loc[runner.label, beside]
            assert blocks_table.loc[runner.label, beside] == expected["baselines"][f"best_constant_{key}"]
            assert fits_table.loc[runner.label, column] == pytest.approx(expected[key], rel=1e-12)
        # never over a self loop: the held-out cells are the held-out actors' cells off the diagonal
        mu_hat = runner.result["mu_hat"]
        assert expected["heldout_mae"] == pytest.approx(np.abs(mu_hat - truth.Y)[held].mean())


def test_blocks_view_orders_actors_and_shades_held_out_cells(fitted_blocks):
    from lpviz.dashboard.views.blocks_view import BlocksView, memberships

    fits = fitted_blocks
    view = BlocksView(fits=fits)
    truth, release = fits.data.truth, fits.data.release
    theta_true = truth.factors["theta"]
    main = np.argmax(memberships(theta_true), axis=1)[view.order]
    assert sorted(view.order.tolist()) == list(range(release.shape[0]))
    assert np.all(np.diff(main) >= 0)  # grouped by main community
    assert "true memberships" in view.order_source
    held = release.heldout_cells
    scores = view.scores.set_index("method")
    for _name, runner in fits.runners.items():
        theta = runner.result["best"]["theta"]
        shown = view.panels[runner.label]["theta"]
        assert sorted(shown.sum(axis=0).round(9).tolist()) == sorted(theta.sum(axis=0).round(9).tolist())
        # Matched columns are never farther from the truth than the unmatched ones.
        norm = theta_true / theta_true.sum(axis=0)
        assert np.abs(shown / shown.sum(axis=0) - norm).sum() <= np.abs(theta / theta.sum(axis=0) - norm).sum() + 1e-9
    # The fit of the true counts beats the one that ignores the noise on observed cells.
    assert scores.loc[LABELS["nonprivate"], "MAE"] < scores.loc[LABELS["naive"], "MAE"]

    rates = view.rate_heatmaps()
    assert len(rates) == 1 + len(fits.runners)  # truth + each fit
    first = rates.values()[1]
    shade = [el for el in first.values() if el.vdims and el.vdims[0].name == "held out"][0]
    assert np.isfinite(shade.dimension_values(2)).sum() == held.sum()
    image = [el for el in first.values() if el.vdims and el.vdims[0].name == "rate"][0]
    expected = next(iter(fits.runners.values())).result["mu_hat"][np.ix_(view.order, view.order)]
    n = len(view.order)
    for row, col in [(0, 0), (0, n - 1), (n - 1, 0), (3, 11)]:  # drawn at (recipient, sender)
        assert image[col, row] == pytest.approx(expected[row, col])


def test_blocks_view_draws_community_boundaries_on_a_scale_that_shows_the_blocks(fitted_blocks):
    # issue 37: Figure 1's 5 communities were invisible on the linear scale and no boundaries were drawn
    from lpviz.dashboard.views.blocks_view import BlocksView, memberships

    fits = fitted_blocks
    view = BlocksView(fits=fits)
    main = np.argmax(memberships(fits.data.truth.factors["theta"]), axis=1)[view.order]
    assert np.all(np.diff(main) >= 0)  # actors ordered by the truth's communities
    expected = [k for k in range(1, len(main)) if main[k] != main[k - 1]]
    assert len(expected) == len(set(main)) - 1 >= 1
    assert view.boundaries.tolist() == expected
    n = len(view.order)
    for overlay in view.rate_heatmaps().values():  # truth and every fit: lines between blocks, both ways
        lines = [el for el in overlay.values() if el.group == "Boundaries"]
        assert len(lines) == 1
        x0, y0, x1, y1 = (lines[0].dimension_values(d) for d in range(4))
        rows, cols = y0 == y1, x0 == x1
        assert sorted(y0[rows] + 0.5) == expected and sorted(x0[cols] + 0.5) == expected
        assert set(x0[rows]) == set(y0[cols]) == {-0.5} and set(x1[rows]) == set(y1[cols]) == {n - 0.5}
        image = [el for el in overlay.values() if el.vdims and el.vdims[0].name == "rate"][0]
        assert "quantile" in image.opts.get().kwargs["title"]  # the plot states its colour scale
    for overlay in view.membership_heatmaps().values():
        lines = [el for el in overlay.values() if el.group == "Boundaries"][0]
        assert sorted(lines.dimension_values(1) + 0.5) == expected  # rows only
    # the network's default scale shows the blocks: colour by rank, not a linear scale that three
    # busy actors dominate
    assert Settings(source="synthetic-blocks").colour_scale == Settings(preset="Figure 1").colour_scale == "quantile"
    image = [el for el in view.rate_heatmaps().values()[0].values() if el.vdims and el.vdims[0].name == "rate"][0]
    assert image.opts.get().kwargs["cnorm"] == "eq_hist"


def test_blocks_view_empties_on_new_noise_and_explains_documents():
    from lpviz.dashboard.views.blocks_view import BlocksView

    fits = run_fits(make_fits(source="synthetic-blocks"), n_iter=30, burn_in=10, thin=5)
    view = BlocksView(fits=fits)
    assert len(view.panels) == len(fits.runners)
    fits.settings.holdout = "random cells"  # new noise settings reset the chains: nothing to show
    assert view.panels == {} and view.scores.empty
    assert len(view.rate_heatmaps()) == 1  # the truth alone
    fits.settings.source = "synthetic-topics"
    assert not view.applies and "Topics" in view.status().object


# ---- export ---------------------------------------------------------------------------


def test_export_writes_readable_figures_the_release_and_the_simulation(fitted_topics, tmp_path):
    import json

    from lpviz.dashboard.views.bessel_view import BesselView
    from lpviz.dashboard.views.export import (
        COMPARISON_FILE,
        RELEASE_FILE,
        SUMMARY_FILE,
        TRUTH_FILE,
        ExportView,
        release_bytes,
        results_bytes,
        save_figure,
        save_release,
        save_results,
    )
    from lpviz.dashboard.views.topics_view import TopicsView
    from lpviz.release import Release

    fits = fitted_topics
    release, truth = fits.data.release, fits.data.truth
    bessel_view, topics_view = BesselView(nu=2.0, a=5.0), TopicsView(fits=fits)

    png = save_figure(bessel_view.pmf_plot(), tmp_path / "pmf.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5_000
    html = save_figure(topics_view.heatmaps(), tmp_path / "topics.html")
    text = html.read_text()
    assert "<html" in text.lower() and "Bokeh" in text
    # resources inline: no script or style sheet comes from the network (only icons may)
    external = re.findall(r'<(script|link)[^>]*(?:src|href)="(https?:[^"]+)"', text)
    assert all(url.endswith((".ico", ".png")) for _, url in external), external
    with pytest.raises(FileExistsError, match="overwrite=True"):
        save_figure(bessel_view.pmf_plot(), png)  # nothing a user made is overwritten silently
    assert save_figure(bessel_view.gap_map(), png, overwrite=True) == png
    with pytest.raises(ValueError, match=r"\.png"):
        save_figure(bessel_view.pmf_plot(), tmp_path / "pmf.jpeg")

    # the release alone: the library's schema, no truth, no labels, no seed (it would undo the noise),
    # flagged as a simulation
    saved_release = Release.load(save_release(fits, tmp_path / RELEASE_FILE))
    np.testing.assert_array_equal(saved_release.Y_obs, release.Y_obs)
    assert saved_release.simulated and saved_release.noise_seed is None and release.noise_seed is not None
    assert saved_release.row_labels is None and saved_release.col_labels is None
    with np.load(tmp_path / RELEASE_FILE) as archive:
        assert not {"Y_true", "Y", "mu_true"} & set(archive.files)

    npz_path = save_results(fits, tmp_path / TRUTH_FILE)
    with np.load(npz_path) as saved:
        # no noise seed in any exported file (issue 38): with it and the release anyone rebuilds the truth
        assert bool(saved["simulated"]) and "noise_seed" not in saved.files
        np.testing.assert_array_equal(saved["Y_obs"], release.Y_obs)
        np.testing.assert_array_equal(saved["Y_true"], truth.Y)
        np.testing.assert_allclose(saved["mu_true"], truth.mu)
        for name, runner in fits.runners.items():
            np.testing.assert_allclose(saved[f"{name}/mu_hat"], runner.result["mu_hat"])
            np.testing.assert_allclose(saved[f"{name}/best_phi"], runner.result["best"]["phi"])
            np.testing.assert_array_equal(saved[f"{name}/trace_iteration"], runner.trace()["iteration"])
    summary = json.loads(save_results(fits, tmp_path / SUMMARY_FILE).read_text())
    assert summary["simulated"] is True and "noise_seed" not in summary and "noise_seed" not in summary["settings"]
    assert summary["data"]["shape"] == list(release.shape)
    assert summary["settings"]["epsilon"] == fits.settings.epsilon
    for name, runner in fits.runners.items():
        entry = summary["methods"][name]
        assert entry["status"] == "done" and entry["iteration"] == fits.settings.n_iter
        # health and baselines flattened: approx compares flat mappings
        assert flat_numbers(flat_scores(entry["score"])) == pytest.approx(
            flat_numbers(flat_scores(runner.result["score"])), nan_ok=True
        )
    with pytest.raises(FileExistsError):
        save_results(fits, npz_path)

    view = ExportView(fits=fits, views=[bessel_view, topics_view])
    assert "bessel_pmf" in view.param.figure.objects and "topics_heatmaps" in view.param.figure.objects
    view.figure = "topics_heatmaps"
    layout = view.__panel__()
    downloads = list(layout.select(pn.widgets.FileDownload))
    assert [d.filename for d in downloads] == [
        "lpviz_simulation_topics_heatmaps.png",
        "lpviz_simulation_topics_heatmaps.html",
        RELEASE_FILE,
        TRUTH_FILE,
        SUMMARY_FILE,
        COMPARISON_FILE,
    ]
    # the comparison is of held-out noised cells: offered only with them
    assert downloads[5].visible == (fits.data.release.heldout_cells is not None)
    assert all("simulat" in d.filename for d in downloads[:5]) and "truth" in downloads[3].filename
    assert downloads[0].callback().getvalue()[:4] == b"\x89PNG"
    assert downloads[2].callback().getvalue() == release_bytes(fits)
    assert downloads[3].callback().getvalue() == results_bytes(fits, ".npz")


def test_data_and_fit_figures_export_as_they_are_shown(fitted_topics, tmp_path):
    from lpviz.dashboard.views.export import save_figure
    from lpviz.dashboard.views.fits_view import FitsView
    from lpviz.dashboard.views.noise_view import NoiseView

    fits = fitted_topics
    noise, shown = NoiseView(data=fits.data).figures(), FitsView(fits=fits).figures()
    assert set(noise) == {"noise_heatmaps", "noise_histogram"}
    assert set(shown) == {"fits_mae_trace", "fits_log_joint_trace", "fits_rates"}
    # the exported rates are each method's current posterior mean, not a placeholder
    for runner, panel in zip(fits.runners.values(), list(shown["fits_rates"])[1:], strict=True):
        np.testing.assert_allclose(panel.dimension_values(2, flat=False), runner.result["mu_hat"], rtol=1e-12)
    # the exported noised panel is the released matrix
    np.testing.assert_array_equal(
        list(noise["noise_heatmaps"])[1].dimension_values(2, flat=False), fits.data.release.Y_obs
    )
    for name, figure in {**noise, **shown}.items():
        png = save_figure(figure, tmp_path / f"{name}.png")
        assert png.read_bytes()[:4] == b"\x89PNG" and png.stat().st_size > 5_000


def test_an_uploaded_release_is_fitted_without_a_truth(tmp_path):
    from lpviz.dashboard.views.blocks_view import BlocksView
    from lpviz.dashboard.views.export import ExportView
    from lpviz.dashboard.views.fits_view import FitsView
    from lpviz.datasets import make_blocks

    release = make_blocks(n_actors=15, n_communities=3, random_state=4).privatize(epsilon=2.0)  # exact noise
    fits = make_fits()
    fits.data.load_upload(release.save(tmp_path / "noised.npz").read_bytes(), "noised.npz")
    truth_methods = [name for name, method in methods.METHODS.items() if method.uses_truth]
    assert all(fits.runners[name].status == "unavailable" for name in truth_methods)
    fits.settings.param.update(n_iter=30, burn_in=10, thin=5)
    fits.start()
    for _name, runner in fits.runners.items():
        assert runner.join(timeout=300)
    fits.drain()
    fitted = [runner for name, runner in fits.runners.items() if name not in truth_methods]
    assert fitted and all(runner.status == "done" for runner in fitted)
    for runner in fitted:
        # no truth, no MAE; two chains of 4 saved samples each
        assert runner.result["score"]["mae"] is None and runner.result["score"]["samples"] == 2 * 4
        assert runner.trace()["mae"].isna().all() and np.isfinite(runner.trace()["log_joint"]).all()
    view = FitsView(fits=fits)
    assert len(view.traces()[0].objects) == 1  # the log joint alone
    assert "MAE" not in view.scores.columns and "samples" in view.scores.columns
    blocks = BlocksView(fits=fits)
    assert set(blocks.panels) == {runner.label for runner in fitted} and "fit" in blocks.order_source
    assert len(blocks.rate_heatmaps()) == 1 + len(fitted)  # the noised counts beside each fit
    export = ExportView(fits=fits, views=[view])
    layout = export.__panel__()
    names = [d.filename for d in layout.select(pn.widgets.FileDownload) if d.visible]
    assert "lpviz_release.npz" in names and not any("truth" in name for name in names)


# ---- the default session and the scoreboard ---------------------------------------------


def test_the_app_opens_on_figure3_where_the_private_method_beats_naive_on_mae():
    """The default session, run to its end with its own schedule: the paper's effect is visible."""
    from lpviz.dashboard.session.default import default_session
    from lpviz.dashboard.session.presets import DEFAULT_PRESET, PRESETS
    from lpviz.dashboard.views.fits_view import FitsView

    fits = default_session(noise_seed=0)
    settings = fits.settings
    assert settings.preset == DEFAULT_PRESET and DEFAULT_PRESET.startswith("Figure 3")
    assert settings.heterogeneous and settings.alpha0 == PRESETS[DEFAULT_PRESET].settings["alpha0"]
    assert fits.data.release.shape == (90, 15) and np.ndim(fits.data.release.alpha) == 1  # per-row noise
    fits.start()
    for runner in fits.runners.values():
        assert runner.join(timeout=300), f"{runner.method} chain did not finish"
    fits.drain()
    results = {name: runner.result for name, runner in fits.runners.items()}
    assert all(result["iteration"] == settings.n_iter for result in results.values())
    release, truth = fits.data.release, fits.data.truth
    mae = {name: result["score"]["mae"] for name, result in results.items()}
    # the scoreboard's numbers are lpviz.metrics.score of each posterior
    private = score(library_posterior(fits, "private"), release, truth)
    assert mae["private"] == pytest.approx(private["mae"], rel=1e-12)
    board = FitsView(fits=fits).scores.set_index("method")
    assert board.loc[LABELS["private"], "MAE"] == mae["private"] and board.loc[LABELS["naive"], "MAE"] == mae["naive"]
    assert mae["private"] < mae["naive"], mae


def test_the_scoreboard_marks_the_best_of_each_column_from_score(fitted_topics):
    from lpviz.dashboard.views.fits_view import BEST_MARK, FitsView, scoreboard_html
    from lpviz.metrics import MAE_KEYS, SCORE_LABELS, rankable

    fits = fitted_topics
    release, truth = fits.data.release, fits.data.truth
    expected = {LABELS[name]: score(library_posterior(fits, name), release, truth) for name in fits.runners}
    view = FitsView(fits=fits)
    board = view.scores
    assert board["method"].tolist() == [LABELS[name] for name in fits.runners]  # one row per fit
    for key in ("mae", "rate_mae", "npmi", "umass", "iterations", "seconds", "iterations_per_second"):
        assert SCORE_LABELS[key] in board.columns, key
    assert (board[SCORE_LABELS["iterations"]] == fits.settings.n_iter).all()
    html = scoreboard_html(board)
    header = [re.sub(r"<br>.*", "", head) for head in re.findall(r"<th>(.*?)</th>", html)]  # without the notes
    marked = set()
    for row in re.findall(r"<tr>(<td>.*?)</tr>", html):
        cells = re.findall(r"<td>(.*?)</td>", row)
        marked |= {(cells[0], header[i]) for i, cell in enumerate(cells) if BEST_MARK in cell}
    optima = set()
    nearest_one = lambda values: min(values, key=lambda value: abs(value - 1))  # noqa: E731
    for key, pick in (
        ("mae", min),
        ("rate_mae", min),
        ("topic_distance", min),
        ("npmi", max),
        ("umass", max),
        ("rhat", nearest_one),
        ("ess", max),
    ):
        # only a healthy fit is starred, and an MAE only when it beats its baselines (lpviz.metrics.rankable)
        ranked = [
            label
            for label in expected
            if expected[label][key] is not None
            and (rankable(expected[label], key)[0] if key in MAE_KEYS else expected[label]["health"]["healthy"])
        ]
        if ranked:
            best = pick(expected[label][key] for label in ranked)
            optima |= {(label, SCORE_LABELS[key]) for label in ranked if expected[label][key] == best}
    assert marked == optima
    for label, numbers in expected.items():  # the health in words, the best constant beside each MAE
        row = board.set_index("method").loc[label]
        assert (row["health"] == "healthy") == numbers["health"]["healthy"]
        assert row["MAE: best constant"] == numbers["baselines"]["best_constant_mae"]
    for label, numbers in expected.items():  # the marked numbers are score()'s
        row = board.set_index("method").loc[label]
        assert row["MAE"] == pytest.approx(numbers["mae"], rel=1e-12)
        assert row["NPMI"] == pytest.approx(numbers["npmi"], rel=1e-12)
    assert scoreboard_html(board.iloc[:0]) == ""


def test_the_simulation_export_keeps_the_actor_names_shown_on_the_axes():
    from lpviz.dashboard.views.export import result_arrays

    fits = Fits(DataStore(Settings(noise_seed=3)))
    try:
        fits.data.load_upload(b"source,target,count\nann,bob,3\nbob,cy,2\ncy,ann,1\nann,cy,4\n", "mail.csv")
        assert fits.data.error == ""
        arrays = result_arrays(fits)
        assert arrays["row_labels"].tolist() == arrays["col_labels"].tolist() == ["ann", "bob", "cy"]
    finally:
        fits.close()


# Room for a plot's title at a phone's width (412 px): a 384 px plot whose frame starts 58 px in leaves
# 326 px; chromium draws Bokeh's 16 px bold titles at 7.6 px a character (tests/test_browser_privacy.py
# measures them), so 40 characters is 304 px.
TITLE_CHARACTERS = 40
OUTSIDE_THE_PLOT = ("right", "left", "bottom", "top")  # HoloViews' legend positions beside the axes


@pytest.mark.parametrize(
    "settings",
    [
        dict(preset="Figure 3 (large alpha0)"),  # per-row alphas: the median row's epsilon 0.280424...
        dict(epsilon=0.5, N=1),
        dict(epsilon=1.5, N=2.5),  # counts 2 apart, a bound of 2 epsilon / N
        dict(epsilon=10.0, N=1),  # a tiny alpha, 4.540e-05
    ],
)
def test_privacy_titles_fit_on_one_line_with_three_digits_and_legends_stand_outside_the_plots(settings):
    """Issue 37 (LOW): the Privacy tab's titles showed a per-row release's median epsilon with six digits
    and ran past the plot's edge (at a phone's width every title was cut), and legends stood over
    curves (the Skellam laws' top-right legend over two peaks, the geometric law's over its peak)."""
    from lpviz.dashboard.views.privacy_view import PrivacyView

    data = DataStore(Settings(noise_seed=3, heterogeneous=False), background=False)
    data.settings.param.update(**settings)
    view = PrivacyView(data=data, y=4)
    for name, figure in view.figures().items():
        options = hv.Store.lookup_options("bokeh", figure, "plot").kwargs
        title = options["title"]
        assert len(title) <= TITLE_CHARACTERS, (name, title)
        for number in re.findall(r"\d+\.\d+(?:e[-+]\d+)?|\d+e[-+]\d+", title):
            digits = number.split("e")[0].replace(".", "").lstrip("0")
            assert len(digits) <= 3, (name, title)
        if any(element.label for element in _elements(figure, hv.Element)):  # a legend is drawn
            assert options.get("legend_position") in OUTSIDE_THE_PLOT, (name, options.get("legend_position"))
    # the numbers are the settings': epsilon 0.5 reads 0.5, never 0.500000
    if "epsilon" in settings and settings["N"] == 1:
        title = hv.Store.lookup_options("bokeh", view.log_ratio_plot(), "plot").kwargs["title"]
        assert title.endswith(f"= {settings['epsilon']:g}"), title
    elif "preset" in settings:
        assert view.row_alphas is not None  # the per-row release
        summary = view.summary().object
        low, high = view.row_alphas.min(), view.row_alphas.max()
        assert f"range {low:.3g}-{high:.3g}" in summary, summary  # the per-row alpha range, 3 digits
