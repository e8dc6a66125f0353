"""The dashboard on sender x recipient x month data: the model selector, and the tensor tab.

Driven the way a person would (choosing a source, a model), what the views
would draw is checked against the library: the model selector lists what
:func:`lpviz.models.fitting` lists, the tensor tab's volumes are the fits'
factors, its components matched to the truth, and its scores are
:func:`lpviz.metrics.score`'s.
"""

import holoviews as hv
import numpy as np
import pytest

from lpviz import models
from lpviz.dashboard.session.datastore import DataStore
from lpviz.dashboard.session.fits import Fits
from lpviz.dashboard.session.settings import Settings
from lpviz.dashboard.views.controls_view import ControlsView
from lpviz.dashboard.views.fits_view import BASELINE_SUFFIX
from lpviz.engine import run
from lpviz.metrics import score


def make_fits(**settings):
    return Fits(DataStore(Settings(**{"noise_seed": 3, **settings})))


def run_fits(fits, n_iter=80, burn_in=30, thin=10):
    fits.settings.param.update(n_iter=n_iter, burn_in=burn_in, thin=thin)
    fits.start()
    for runner in fits.runners.values():
        assert runner.join(timeout=300), f"{runner.method} chain did not finish"
    fits.drain()
    for runner in fits.runners.values():
        assert runner.status == "done", (runner.method, runner.status, runner.error)
    return fits


@pytest.fixture(scope="module")
def fitted_tensor():
    return run_fits(make_fits(source="synthetic-tensor", size=16, n_months=12, n_components=3))


def test_a_tensor_source_picks_the_tensor_model_and_the_selector_lists_what_fits():
    fits = make_fits(source="synthetic-tensor", size=12, n_months=6, n_components=2)
    data = fits.data
    assert data.release.kind == "tensor" and data.release.shape == (12, 12, 6) and data.model == "tensor"
    selector = ControlsView(data=data).model_selector()
    assert list(selector.options.values()) == [""] and "tensor model" in next(iter(selector.options))
    data.settings.source = "synthetic-blocks"
    assert data.model == "blocks"
    assert list(selector.options.values()) == ["", *models.fitting("network")[1:]]
    data.settings.model = "topics"  # the topic model on a network: the Blocks tab gives way
    assert data.model == "topics" and selector.value == "topics"
    with pytest.raises(ValueError, match="model 'tensor' does not fit network data"):
        data.settings.model = "tensor"
    assert data.model == "topics"
    data.settings.source = "synthetic-topics"  # a new source: its own default model again
    assert data.model == "topics" and data.settings.model == ""


def test_the_tensor_tab_shows_matched_components_of_every_fit(fitted_tensor):
    from lpviz.dashboard.views.blocks_view import BlocksView
    from lpviz.dashboard.views.tensor_view import TensorView, component_volumes, signatures

    fits = fitted_tensor
    view = TensorView(fits=fits)
    assert view.applies and not BlocksView(fits=fits).applies
    truth = fits.data.truth
    assert list(view.panels) == ["truth", *[runner.label for runner in fits.runners.values()]]
    reference = signatures(models.create("tensor", 3), truth.factors)
    for runner in fits.runners.values():
        model, shown = view.panels[runner.label]
        best = runner.result["best"]
        # the same components, reordered
        assert sorted(shown["c"].sum(axis=0).round(9)) == sorted(best["c"].sum(axis=0).round(9))
        # matched: never farther from the truth's components than the fit's own order
        distance = np.abs(signatures(model, shown) - reference).sum()
        assert distance <= np.abs(signatures(model, best) - reference).sum() + 1e-9
        volumes, _ = component_volumes(model, shown)
        np.testing.assert_allclose(volumes.sum(axis=1), model.rates(shown).sum(axis=(0, 1)))
    # the profiles: one overlay per panel, months on the axis, one curve per component
    profiles = view.profile_plots()
    assert len(profiles) == len(view.panels)
    first = profiles.values()[0]
    assert len(first) == 3 and first.opts.get().kwargs["xticks"][0] == (0, "month 1")
    view.component = 2
    heatmaps = view.pair_heatmaps()
    assert len(heatmaps) == len(view.panels)
    truth_map = heatmaps.values()[0].dimension_values(2, flat=False)
    a, b, c = truth.factors["a"], truth.factors["b"], truth.factors["c"]
    expected = np.outer(a[:, 1], b[:, 1]) * c[:, 1].sum()
    np.testing.assert_allclose(np.sort(truth_map.ravel()), np.sort(expected.ravel()))
    # scores: what `lpviz fit` prints for the same chain (same problem, same seed)
    release = fits.data.release
    table = view.scores.set_index("method")
    settings, problem = fits.settings, fits.problem()
    for name, runner in fits.runners.items():
        chain_run = run(
            problem.release,
            model=problem.model,
            method=name,
            n_components=problem.n_components,
            n_iter=settings.n_iter,
            burn_in=settings.burn_in,
            thin=settings.thin,
            truth=problem.truth if runner.method_class.uses_truth else None,
            random_state=problem.seed,
            chains=problem.chains,  # the session's chains: the same ensemble
        )
        for _ in chain_run:
            pass
        expected = score(chain_run.posterior, release, truth)
        assert table.loc[runner.label, "MAE"] == pytest.approx(expected["mae"], rel=1e-12)
        assert table.loc[runner.label, "MAE vs true rates"] == pytest.approx(expected["rate_mae"], rel=1e-12)
        # every MAE with its reference beside it: the best constant rate's MAE, score()'s own baseline
        baselines = expected["baselines"]
        for column, key in (("MAE", "mae"), ("MAE vs true rates", "rate_mae")):
            beside = list(table.columns).index(column) + 1
            assert table.columns[beside] == column + BASELINE_SUFFIX
            assert table.loc[runner.label, column + BASELINE_SUFFIX] == baselines[f"best_constant_{key}"]


def test_noise_and_rate_heatmaps_of_a_tensor_are_summed_over_months(fitted_tensor):
    from lpviz.dashboard.views.noise_view import NoiseView

    layout = NoiseView(data=fitted_tensor.data).heatmap_layout()
    true_counts = layout.values()[0]
    image = true_counts if isinstance(true_counts, hv.Image) else true_counts.values()[0]
    np.testing.assert_array_equal(image.dimension_values(2, flat=False), fitted_tensor.data.truth.Y.sum(axis=2))
    assert "summed over months" in image.label
