"""Issue 15 (teaching): convergence on the scoreboard, network views, teaching mode; in-process."""

import re

import holoviews as hv
import numpy as np
import pytest

from lpviz import models
from lpviz.diagnostics import RHAT_DRIFTING, chain_convergence
from lpviz.engine import Posterior
from lpviz.metrics import SCORE_LABELS, score


def posterior_with_trace(trace, burn_in=0):
    """A Posterior whose log-joint trace is ``trace`` (no saved sample: only the traces matter here)."""
    posterior = Posterior(models.create("topics", 2), "naive", (3, 3), burn_in=burn_in, thin=1)
    posterior._log_joint = list(trace)
    posterior._log_marginal = [np.nan] * len(trace)
    posterior._seconds = [0.001] * len(trace)
    return posterior


def ar1(n, rho, seed):
    rng = np.random.default_rng(seed)
    noise = rng.standard_normal(n)
    x = np.empty(n)
    x[0] = noise[0]
    for t in range(1, n):
        x[t] = rho * x[t - 1] + noise[t]
    return x


# ---------------------------------------------------------------------------
# A. Convergence on the scoreboard
# ---------------------------------------------------------------------------


def test_a_well_mixed_chain_has_split_rhat_near_one_and_a_drifting_one_above_the_threshold():
    mixed = chain_convergence(posterior_with_trace(-1000 + ar1(2000, 0.5, seed=1)))
    assert mixed["trace_name"] == "log_joint"
    assert abs(mixed["rhat"] - 1) < 0.01
    assert 300 < mixed["ess"] < 2000  # AR(1) with rho 0.5: about n (1 - rho) / (1 + rho) = 667
    drifting = chain_convergence(posterior_with_trace(-1000 + ar1(2000, 0.5, seed=1) + np.linspace(0, 8, 2000)))
    assert drifting["rhat"] > RHAT_DRIFTING
    assert drifting["ess"] < mixed["ess"]


def test_split_rhat_reads_the_trace_after_burn_in_only():
    # a burn-in that climbs, then a stationary chain: diagnosed after burn-in it has mixed
    trace = np.concatenate([np.linspace(-5000, -1000, 500), -1000 + ar1(1000, 0.3, seed=2)])
    assert chain_convergence(posterior_with_trace(trace, burn_in=500))["rhat"] < 1.02
    assert chain_convergence(posterior_with_trace(trace, burn_in=0))["rhat"] > RHAT_DRIFTING


def test_split_rhat_prefers_the_marginal_likelihood_trace_and_does_not_apply_to_too_short_or_constant_ones():
    posterior = posterior_with_trace(np.linspace(0, 10, 400))  # a log joint that drifts
    posterior._log_marginal = list(ar1(400, 0.2, seed=3))  # a marginal likelihood that mixes
    result = chain_convergence(posterior)
    assert result["trace_name"] == "log_marginal" and result["rhat"] < 1.05
    assert chain_convergence(posterior_with_trace(np.arange(7.0)))["rhat"] is None
    assert chain_convergence(posterior_with_trace(np.ones(100)))["rhat"] is None


def test_a_long_trace_is_diagnosed_on_evenly_spaced_draws_ending_at_the_last_iteration():
    from lpviz.diagnostics import MAX_CONVERGENCE_DRAWS

    n = 3 * MAX_CONVERGENCE_DRAWS + 1
    trace = -1000 + ar1(n, 0.5, seed=4)
    long = chain_convergence(posterior_with_trace(trace))
    assert long["draws"] == 1501 <= MAX_CONVERGENCE_DRAWS  # every 4th of 6001, ending at the last
    shown = posterior_with_trace(trace[::-1][::4][::-1])
    assert long["rhat"] == chain_convergence(shown)["rhat"] and long["ess"] == chain_convergence(shown)["ess"]
    drifting = chain_convergence(posterior_with_trace(trace + np.linspace(0, 8, n)))
    assert drifting["rhat"] > RHAT_DRIFTING


def test_score_reports_split_rhat_and_ess_of_a_real_chain():
    from lpviz.engine import run
    from lpviz.release import Release

    Y = np.random.default_rng(0).poisson(2.0, size=(12, 10))
    chain_run = run(
        Release(Y_obs=Y, alpha=0.5, kind="documents"),
        model="topics",
        method="naive",
        n_components=2,
        n_iter=300,
        burn_in=100,
        thin=10,
        random_state=0,
    )
    for _ in chain_run:
        pass
    posterior = chain_run.posterior
    numbers = score(posterior)
    direct = chain_convergence(posterior)
    assert numbers["rhat"] == direct["rhat"] and numbers["ess"] == direct["ess"]
    assert numbers["rhat"] < 1.1 and numbers["ess"] > 10  # a small problem mixes within 200 iterations
    assert SCORE_LABELS["rhat"] == "R-hat"


def test_the_scoreboard_shows_rhat_with_its_note_and_stars_the_one_nearest_one():
    import pandas as pd

    from lpviz.dashboard.views.fits_view import (
        BEST_MARK,
        CHAINS_CONVERGENCE_NOTE,
        CONVERGENCE_NOTE,
        SCOREBOARD_KEYS,
        scoreboard_html,
    )

    assert "rhat" in SCOREBOARD_KEYS and "ess" in SCOREBOARD_KEYS
    frame = pd.DataFrame(
        {"method": ["a", "b", "c"], "MAE": [1.0, 2.0, 3.0], "R-hat": [1.3, 0.995, 1.002], "ESS": [10.0, 50.0, 40.0]}
    )
    html = scoreboard_html(frame)
    assert "R-hat<br><small>(split, 1 chain)</small>" in html and CONVERGENCE_NOTE in html
    rows = {
        cells[0]: cells
        for cells in (re.findall(r"<td>(.*?)</td>", row) for row in re.findall(r"<tr>(<td>.*?)</tr>", html))
    }
    assert BEST_MARK in rows["c"][2] and BEST_MARK not in rows["b"][2] and BEST_MARK not in rows["a"][2]
    assert BEST_MARK in rows["b"][3]  # the largest ESS
    assert CONVERGENCE_NOTE not in scoreboard_html(frame.drop(columns=["R-hat", "ESS"]))
    frame.attrs["chains"] = 2  # several chains per method: R-hat across them, said so
    html = scoreboard_html(frame)
    assert "R-hat<br><small>(across 2 chains)</small>" in html and CHAINS_CONVERGENCE_NOTE.format(chains=2) in html
    assert CONVERGENCE_NOTE not in html


# ---------------------------------------------------------------------------
# B. Network views: names on the axes, community order, held-out cells on the Data tab
# ---------------------------------------------------------------------------


def network_store(holdout="none"):
    from lpviz.dashboard.session.datastore import DataStore
    from lpviz.dashboard.session.settings import Settings

    store = DataStore(Settings(source="synthetic-blocks", noise_seed=3))
    store.settings.holdout = holdout
    return store


def rendered_axes(element):
    """``(x tick labels, y tick labels)`` of the Bokeh figure HoloViews draws for ``element``:
    ``{position: label}`` as the browser gets them."""
    figure = hv.render(element, backend="bokeh")
    return figure.xaxis[0].major_label_overrides, figure.yaxis[0].major_label_overrides


def heldout_shades(element):
    return [
        el
        for el in (element.values() if isinstance(element, hv.Overlay) else [element])
        if el.vdims and el.vdims[0].name == "held out"  # the block lines (Segments) have no value
    ]


def test_blocks_heatmaps_name_the_actors_in_the_community_order():
    from lpviz.dashboard.session.fits import Fits
    from lpviz.dashboard.views.blocks_view import BlocksView, memberships

    fits = Fits(network_store("top actors"))
    view = BlocksView(fits=fits)
    labels = fits.data.data.row_labels
    assert labels[:2] == ["actor 0", "actor 1"] and fits.data.release.row_labels is None  # the owner's labels
    order = view.order
    theta = fits.data.truth.factors["theta"]
    main = np.argmax(memberships(theta), axis=1)[order]
    assert np.all(np.diff(main) >= 0) and sorted(order.tolist()) == list(range(len(labels)))
    assert order.tolist() != sorted(order.tolist())  # a real reordering, so the names check means something
    truth_panel = view.rate_heatmaps().values()[0]
    x_names, y_names = rendered_axes(truth_panel)
    expected = {position: labels[actor] for position, actor in enumerate(order)}
    assert x_names == expected and y_names == expected
    member_panel = view.membership_heatmaps().values()[0]
    _, y_names = rendered_axes(member_panel)
    assert y_names == expected
    # the held-out actors' cells are shaded in the reordered picture
    shade = heldout_shades(truth_panel)[0]
    held = fits.data.release.heldout_cells[np.ix_(order, order)]
    np.testing.assert_array_equal(np.isfinite(shade.dimension_values(2, flat=False)), held)


def test_many_names_are_thinned_and_email_domains_dropped():
    from lpviz.dashboard.views.plots import MAX_TICKS, tick_labels

    labels = [f"person.{i}@enron.com" for i in range(84)]
    order = np.arange(84)[::-1]
    ticks = tick_labels(labels, np.arange(84), order=order)
    assert len(ticks) <= MAX_TICKS and ticks[0] == (0, "person.83") and ticks[1] == (5, "person.78")  # every 5th
    assert tick_labels(["a@x.org", "b@y.org"], [0, 1]) == [(0, "a@x.org"), (1, "b@y.org")]  # domains differ


def test_data_tab_names_the_axes_and_shades_held_out_cells_only_when_some_are_held_out():
    from lpviz.dashboard.views.noise_view import NoiseView

    store = network_store("none")
    view = NoiseView(data=store)
    layout = view.heatmap_layout()
    assert len(layout) == 3 and not any(heldout_shades(panel) for panel in layout.values())
    labels = store.data.row_labels
    x_names, y_names = rendered_axes(layout.values()[0])
    assert y_names == dict(enumerate(labels)) and x_names == dict(enumerate(store.data.col_labels))

    store.settings.holdout = "random cells"
    held = store.release.heldout_cells
    assert held is not None and held.any()
    layout = view.heatmap_layout()
    for panel in layout.values():  # truth, noised, truncated: each shows where the held-out cells are
        (shade,) = heldout_shades(panel)
        np.testing.assert_array_equal(np.isfinite(shade.dimension_values(2, flat=False)), held)
    assert "shaded grey" in view.summary().object


# ---------------------------------------------------------------------------
# C. Teaching mode
# ---------------------------------------------------------------------------


def dashboard_tabs(fits, *, sweep=False):
    """Tabs named as lpviz/dashboard/app.py names them (each a placeholder: only the selection matters here)."""
    import panel as pn

    names = [
        "Data & noise",
        "Fits",
        "Topics",
        "Blocks",
        "Bessel",
        "Privacy",
        *(["Epsilon sweep"] if sweep else []),
        "Export",
    ]
    return pn.Tabs(*[(name, pn.pane.Markdown(name)) for name in names])


@pytest.fixture
def topic_fits():
    from lpviz.dashboard.session.datastore import DataStore
    from lpviz.dashboard.session.fits import Fits
    from lpviz.dashboard.session.settings import Settings

    fits = Fits(DataStore(Settings(source="synthetic-topics", noise_seed=3)))
    fits.settings.param.update(n_iter=30, burn_in=10, thin=5)
    yield fits
    fits.close()
    for runner in fits.runners.values():
        runner.join(timeout=60)


@pytest.mark.parametrize("sweep", [False, True])
def test_each_step_selects_the_tab_it_names_and_next_back_stop_at_the_ends(topic_fits, sweep):
    from lpviz.dashboard.views.teaching import STEPS, Teaching

    tabs = dashboard_tabs(topic_fits, sweep=sweep)
    tabs.active = 5
    teaching = Teaching(fits=topic_fits, tabs=tabs)
    assert tabs.active == 5 and teaching.step == 0  # nothing moves until teaching mode is on
    assert 5 <= len(STEPS) <= 7
    teaching.on = True
    seen = []
    for index, step in enumerate(STEPS):
        assert teaching.step == index
        text = teaching._text().object
        assert f"Step {index + 1} of {len(STEPS)}: {step.title}" in text
        if step.tab in tabs._names:
            assert tabs._names[tabs.active] == step.tab
            assert "no *" not in text
        else:  # the sweep tab of another branch: said so, and the tab stays where it was
            assert step.tab == "Epsilon sweep" and not sweep
            assert "no *Epsilon sweep* tab" in text and tabs._names[tabs.active] == seen[-1]
        seen.append(tabs._names[tabs.active])
        assert teaching._back.disabled == (index == 0) and teaching._next.disabled == (index == len(STEPS) - 1)
        teaching.next()
    assert teaching.step == len(STEPS) - 1  # Next on the last step stays there
    for index in reversed(range(len(STEPS) - 1)):
        teaching.back()
        assert teaching.step == index
        assert tabs._names[tabs.active] == STEPS[index].tab or (STEPS[index].tab not in tabs._names and not sweep)
    teaching.back()
    assert teaching.step == 0
    assert [step.tab for step in STEPS][:6] == [
        "Data & noise",
        "Data & noise",
        "Data & noise",
        "Bessel",
        "Fits",
        "Epsilon sweep",
    ]


def test_the_scoreboard_step_starts_the_fits_once(topic_fits):
    from lpviz.dashboard.views.teaching import STEPS, Teaching

    teaching = Teaching(fits=topic_fits, tabs=dashboard_tabs(topic_fits))
    scoreboard = next(i for i, step in enumerate(STEPS) if step.starts_fits)
    assert all(runner.status == "idle" for runner in topic_fits.runners.values())
    teaching.on = True
    teaching.go(scoreboard - 1)
    assert all(runner.status == "idle" for runner in topic_fits.runners.values())  # not before its step
    teaching.next()
    assert all(runner.status == "running" for runner in topic_fits.active.values())
    assert "started for you" in teaching.note
    for runner in topic_fits.runners.values():
        assert runner.join(timeout=120)
    topic_fits.drain()
    assert all(runner.status == "done" for runner in topic_fits.active.values())
    teaching.back()
    teaching.next()  # back on the scoreboard: the finished fits stay, nothing restarts
    assert all(runner.status == "done" for runner in topic_fits.active.values())
    assert "started for you" not in teaching.note  # (these are not the opening preset's data: it says so)


def test_in_a_notebook_teaching_brings_the_views_its_steps_name(topic_fits):
    from lpviz.dashboard.views.teaching import STEPS, Teaching

    teaching = Teaching(fits=topic_fits)
    assert teaching.on and {"Data & noise", "Fits", "Bessel"} <= set(teaching.tabs._names)
    teaching.go(3)
    assert teaching.tabs._names[teaching.tabs.active] == "Bessel" == STEPS[3].tab
    assert teaching.__panel__().objects[-1] is teaching.tabs


def test_documents_keep_numbered_axes_on_the_data_tab():
    from lpviz.dashboard.session.datastore import DataStore
    from lpviz.dashboard.session.settings import Settings
    from lpviz.dashboard.views.noise_view import NoiseView

    store = DataStore(Settings(source="synthetic-topics", noise_seed=3))
    assert store.data.row_labels is not None  # it has labels, but they are no actors
    x_names, y_names = rendered_axes(NoiseView(data=store).heatmap_layout().values()[0])
    assert x_names == {} and y_names == {}


def test_the_fits_start_from_the_opening_screen(topic_fits):
    import panel as pn

    from lpviz.dashboard.views.teaching import Teaching

    tabs = pn.Tabs(("Data & noise", pn.pane.Markdown("data")), ("Fits", pn.pane.Markdown("fits")))
    teaching = Teaching(fits=topic_fits, tabs=tabs)
    run = [b for b in pn.panel(teaching).select(pn.widgets.Button) if b.label == "Run the fits"]
    assert len(run) == 1 and tabs.active == 0  # in the sidebar, beside the teaching toggle
    run[0].clicks += 1
    assert tabs.active == 1 and all(r.status != "idle" for r in topic_fits.active.values())
    topic_fits.stop()


# ---------------------------------------------------------------------------
# D. Every step lands on a view with data
# ---------------------------------------------------------------------------


def plotted_values(figure):
    """How many finite values each element of a HoloViews figure draws (its first value dimension),
    guides (lines at a value, text) left out; a histogram counts its cells."""
    counts = []
    for element in figure.traverse(lambda element: element, [hv.Element]):
        if isinstance(element, (hv.VLine, hv.HLine, hv.Text, hv.Labels)):
            continue
        values = np.asarray(element.dimension_values((element.vdims or element.kdims)[0]), dtype=float)
        counts.append(
            int(values[np.isfinite(values)].sum())
            if isinstance(element, hv.Histogram)
            else int(np.isfinite(values).sum())
        )
    return counts


def shown_figures(view):
    """The figures the view on a tab shows (each view's own accessor), by name."""
    from lpviz.dashboard.views.bessel_view import BesselView
    from lpviz.dashboard.views.sweep_view import SweepView

    if isinstance(view, SweepView):
        return {"sweep": view.plot.object} if view.plot.object is not None else {}
    figures = view.figures()
    if isinstance(view, BesselView):
        figures["bessel_draws"] = view.draws_figure()
    return figures


def test_every_teaching_step_lands_on_a_view_with_data(topic_fits):
    """Walk every step over the dashboard's real views: the view the step shows draws data (no plot
    of it empty), the scoreboard and sweep steps starting what they need."""
    from lpviz.dashboard.serving.onscreen import ViewTabs
    from lpviz.dashboard.views.bessel_view import BesselView
    from lpviz.dashboard.views.fits_view import FitsView
    from lpviz.dashboard.views.noise_view import NoiseView
    from lpviz.dashboard.views.privacy_view import PrivacyView
    from lpviz.dashboard.views.sweep_view import SweepView
    from lpviz.dashboard.views.teaching import STEPS, Teaching
    from tests.test_app_sweep import drain_until_ended

    assert topic_fits.settings.method_options.sampler == "collapsed"  # no chain draws Bessel variables
    sweep = SweepView(fits=topic_fits, scheduler="serial", n_iter=40)
    tabs = ViewTabs(
        ("Data & noise", NoiseView(data=topic_fits.data)),
        ("Fits", FitsView(fits=topic_fits)),
        ("Bessel", BesselView(fits=topic_fits)),
        ("Privacy", PrivacyView(data=topic_fits.data)),
        ("Epsilon sweep", sweep),
    )
    teaching = Teaching(fits=topic_fits, tabs=tabs)
    teaching.on = True
    for index, step in enumerate(STEPS):
        teaching.go(index)
        assert tabs._names[tabs.active] == step.tab
        view = teaching.view(step.tab)
        if step.starts_fits:
            # the chains step loads its own preset first (nothing to discard here: no question asked)
            assert ("loaded for you" if step.preset else "started for you") in teaching.note
            assert not step.preset or topic_fits.settings.preset == step.preset
            for runner in topic_fits.runners.values():
                assert runner.join(timeout=120)
            topic_fits.drain()
        if step.starts_sweep:
            assert "sweep has been started for you" in teaching.note and sweep.state == "starting"
            drain_until_ended(sweep, timeout=300)
            assert sweep.state == "finished", sweep.progress
            # a sweep that ran is shown again, not restarted
            finished = sweep.points
            teaching.back()
            teaching.next()
            assert sweep.state == "finished" and sweep.points is finished and "started for you" not in teaching.note
        if step.tab == "Bessel":  # its histogram: one draw per observed cell of the release, not a chain's
            cells = view.draws_figure().dimension_values("cells").sum()
            assert cells == topic_fits.data.release.observed_cells.sum()
        figures = shown_figures(view)
        assert figures, (step.title, "no figure")
        for name, figure in figures.items():
            counts = plotted_values(figure)
            assert counts and min(counts) > 0, (step.title, name, counts)


def test_the_bessel_law_on_a_release_follows_the_samplers_parametrisation():
    """release_draws: m ~ Bessel(|y~|, 2 sqrt((lambda+ + mu) lambda-)), lambda+- ~ Exp(mean alpha/(1-alpha)):
    the draws' mean matches that mixture's (by independent Monte Carlo), and not the one of a slightly
    wrong prior mean; held-out cells are left out; the same seed gives the same draws."""
    from lpviz import bessel
    from lpviz.dashboard.views.bessel_view import release_draws
    from lpviz.release import Release

    rng = np.random.default_rng(5)
    shape = (200, 100)
    counts = rng.integers(-6, 12, size=shape)
    alpha = np.linspace(0.3, 0.8, shape[0])
    heldout = rng.random(shape) < 0.1
    release = Release(counts, alpha, heldout=heldout)
    rates = rng.gamma(2.0, 1.5, size=shape)
    draws = release_draws(release, rates, seed=1)
    observed = release.observed_cells
    assert draws.size == observed.sum()
    np.testing.assert_array_equal(draws, release_draws(release, rates, seed=1))

    def mixture_mean(prior_scale, reps=4):
        nu = np.abs(counts[observed]).astype(float)
        mu = rates[observed]
        mean = np.broadcast_to(alpha[:, None], shape)[observed] / (1 - np.broadcast_to(alpha[:, None], shape)[observed])
        check = np.random.default_rng(99)
        values = []
        for _ in range(reps):
            plus = check.exponential(1.0, nu.size) * mean * prior_scale
            minus = check.exponential(1.0, nu.size) * mean * prior_scale
            values.append(np.mean(bessel.mean(nu, 2 * np.sqrt((plus + mu) * minus))))
        return float(np.mean(values))

    spread = np.std(draws) / np.sqrt(draws.size)  # the draws' own sampling error (the expectation's is smaller)
    assert abs(draws.mean() - mixture_mean(1.0)) < 4 * spread
    assert abs(draws.mean() - mixture_mean(1.3)) > 4 * spread  # power: a 30% larger prior mean is told apart
    subset = release_draws(release, rates, max_cells=500, seed=1)
    assert subset.size == 500
    with pytest.raises(ValueError, match="do not fit"):
        release_draws(release, rates[:, :10])


def test_teaching_steps_that_cannot_apply_to_uploaded_data_say_so():
    """Issue 37 (MEDIUM 9): with an uploaded count matrix, the scoreboard step waited for ever for true
    rates such data cannot have, and said "On the opening preset ..." whatever was loaded."""
    import io

    from lpviz.dashboard.session.datastore import DataStore
    from lpviz.dashboard.session.fits import Fits
    from lpviz.dashboard.session.settings import Settings
    from lpviz.dashboard.views.teaching import CANNOT_CHECK, STEPS, Teaching

    rng = np.random.default_rng(3)
    buffer = io.BytesIO()
    np.savez(buffer, Y=rng.poisson(2.0, size=(40, 25)))
    fits = Fits(DataStore(Settings(noise_seed=3), background=False))
    try:
        fits.data.load_upload(buffer.getvalue(), "counts.npz")
        assert fits.data.truth is not None and fits.data.truth.mu is None
        fits.settings.param.update(n_iter=60, burn_in=20, thin=10)
        teaching = Teaching(fits=fits)
        scoreboard = next(i for i, step in enumerate(STEPS) if step.starts_fits)
        teaching.on = True
        teaching.go(scoreboard)
        for runner in fits.active.values():
            assert runner.join(timeout=120)
        fits.drain()
        teaching._check_claim()
        assert teaching.verdict.held is None and teaching.verdict.text.startswith(CANNOT_CHECK)
        assert "no true rates" in teaching.verdict.text
        text = teaching._text().object
        assert f"**{CANNOT_CHECK}**" in text and "not checked yet" not in text
        assert "opening preset is about Figure 3 (large alpha0)" in teaching.note
    finally:
        fits.close()


def test_served_a_step_that_loads_a_preset_shows_itself_first_and_loads_on_the_next_tick(monkeypatch):
    """Issue 57 LOW 26: Next into the chains step loaded its preset inside the click, and the page kept
    the old step, no claim line, ~9 s (a sweep kept the server busy). Served, the step is shown at once
    saying its preset is being loaded, claim line included; the load runs on the next tick, then the
    step says it was loaded and its fits start."""
    import panel as pn

    from lpviz.dashboard.session.datastore import DataStore
    from lpviz.dashboard.session.fits import Fits
    from lpviz.dashboard.session.settings import Settings
    from lpviz.dashboard.views.teaching import LOADING, STEPS, Teaching

    index = next(i for i, step in enumerate(STEPS) if step.preset)
    name = STEPS[index].preset
    fits = Fits(DataStore(Settings(source="synthetic-topics", noise_seed=3)))
    try:
        teaching = Teaching(fits=fits)
        scheduled = []
        monkeypatch.setattr(Teaching, "_served", staticmethod(lambda: True))
        monkeypatch.setattr(pn.state, "execute", lambda work, schedule=False: scheduled.append(work))
        teaching.go(index)
        assert teaching.step == index and fits.settings.preset != name
        assert teaching.note.startswith(LOADING.format(name=name))
        assert teaching.verdict.held is None and teaching.verdict.text.endswith("which is being loaded")
        assert len(scheduled) == 1
        scheduled.pop()()
        assert fits.settings.preset == name
        assert "has been loaded for you" in teaching.note and LOADING.format(name=name) not in teaching.note
        assert any(runner.status != "idle" for runner in fits.active.values())  # its fits were started
        assert teaching.verdict.text != f"it is checked on the preset {name}, which is being loaded"
    finally:
        fits.close()
