"""Chain runners and the fits view, without a browser: real chains in worker threads.

Every number the runners stream is checked against the library run on its own
(the same seed gives the same chain): the app computes nothing itself.
"""

import inspect
import re
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import holoviews as hv
import numpy as np
import panel as pn
import pytest

from lpviz import methods
from lpviz.dashboard.session.datastore import DataStore
from lpviz.dashboard.session.fits import TRACE_COLUMNS, TRACE_SCORES, Fits, Lockstep, follow_results, score_frame
from lpviz.dashboard.session.runner import MAX_CHAINS, empty_trace
from lpviz.dashboard.session.settings import Settings
from lpviz.dashboard.views.fits_view import FitsView
from lpviz.engine import run
from lpviz.methods.fixed import FixedCountsMethod
from lpviz.metrics import score
from lpviz.reproduce.report import flat_scores
from tests._checks import flat_numbers

TIMEOUT = 120  # seconds; generous for a loaded 2-core CI machine and a cold numba cache


def drain_until(fits, condition, timeout=TIMEOUT, errors_expected=False):
    deadline = time.monotonic() + timeout
    while not condition():
        failed = [r.error for r in fits.runners.values() if r.status == "error"]
        if time.monotonic() > deadline or (failed and not errors_expected):
            pytest.fail(
                f"timed out; runners: { {m: (r.status, r.iteration, r.error) for m, r in fits.runners.items()} }"
            )
        time.sleep(0.02)
        fits.drain()


def make_fits(**settings):
    fits = Fits(DataStore(Settings(noise_seed=7, **settings)), buffer_length=10_000)
    fits.settings.param.update(n_iter=120, burn_in=40, thin=10)
    return fits


@contextmanager
def closing_fits(**schedule):
    """:func:`make_fits` with ``schedule`` (n_iter, burn_in, thin), closed and its workers joined after."""
    fits = make_fits()
    fits.settings.param.update(**schedule)
    try:
        yield fits
    finally:
        fits.close()
        for runner in fits.runners.values():
            runner.join(timeout=30)


@pytest.fixture
def fits():
    with closing_fits() as fits:
        yield fits


def library_run(fits, name, n_iter):
    """The same chain as the runner's, run by the library alone; returns (last state, posterior)."""
    problem, settings = fits.problem(), fits.settings
    method = methods.create(name, **settings.options_for(methods.get(name)))
    chain_run = run(
        problem.release,
        model=problem.model,
        method=method,
        n_components=problem.n_components,
        n_iter=n_iter,
        burn_in=settings.burn_in,
        thin=settings.thin,
        truth=problem.truth if method.uses_truth else None,
        random_state=problem.seed,
        chains=problem.chains,
    )
    if problem.chains == 1:
        return list(chain_run)[-1], chain_run.posterior
    last = [state for chain, state in chain_run if chain == 0][-1]  # chain 0: the seed's own chain
    return last, chain_run.posterior


def test_a_run_streams_every_iteration_and_every_number_is_the_librarys(fits):
    fits.start()
    assert all(r.status == "running" for r in fits.runners.values())
    drain_until(fits, lambda: all(r.status == "done" for r in fits.runners.values()))
    release, truth = fits.data.release, fits.data.truth
    for name, runner in fits.runners.items():
        trace = runner.trace()
        assert list(trace.columns) == list(TRACE_COLUMNS)
        np.testing.assert_array_equal(trace["iteration"], np.arange(1, 121))
        assert runner.iteration == 120 and np.isfinite(trace["log_joint"]).all()
        # the posterior-mean MAE starts with the first saved sample (iteration 50)
        assert trace["mean_rate_mae"][trace["iteration"] < 50].isna().all()
        assert trace["mean_rate_mae"][trace["iteration"] >= 50].notna().all()
        assert trace["heldout_mae"].isna().all() and trace["mean_heldout_mae"].isna().all()  # nothing held out

        state, posterior = library_run(fits, name, 120)
        expected, own = score(posterior, release, truth), score(state, release, truth, topics=False)
        result = runner.result
        timing = {"seconds", "iterations_per_second"}  # wall-clock: the app shares the cores
        # NPMI, UMass, topic error too; health and baselines flattened (approx compares flat mappings)
        assert flat_numbers(flat_scores(result["score"]), timing) == pytest.approx(
            flat_numbers(flat_scores(expected), timing), nan_ok=True
        )
        last = trace.iloc[-1]
        for key in TRACE_SCORES:
            assert last[key] == pytest.approx(own[key], nan_ok=True) if own[key] is not None else np.isnan(last[key])
            assert last[f"mean_{key}"] == pytest.approx(np.nan if expected[key] is None else expected[key], nan_ok=True)
        assert last["log_joint"] == pytest.approx(state.log_joint)
        # the session's default runs two chains: the second's traces beside the first's, the others empty
        assert fits.settings.chains == 2 and posterior.n_chains == 2
        np.testing.assert_array_equal(trace["log_joint_1"], posterior.chains[1].log_joint)
        np.testing.assert_array_equal(trace["log_marginal_1"], posterior.chains[1].log_marginal)
        assert trace[[f"log_joint_{c}" for c in range(2, MAX_CHAINS)]].isna().all().all()
        assert result["samples_saved"] == 16 and result["iteration"] == 120
        np.testing.assert_allclose(result["mu_hat"], posterior.mu_hat)
        np.testing.assert_allclose(result["mu"], state.mu)
        assert set(result["best"]) == {"theta", "phi"} and result["best"]["phi"].shape == (3, 15)
        assert result["best_log_joint"] == pytest.approx(posterior.best_log_joint)
    table = score_frame(fits.active.values())
    assert list(table["method"]) == [methods.get(name).label for name in fits.runners]
    assert table["MAE"].tolist() == pytest.approx([r.result["score"]["mae"] for r in fits.runners.values()])


def test_the_bessel_draws_a_view_reads_are_the_workers_copy(fits):
    fits.settings.param.update(n_iter=30, burn_in=10, thin=5)
    fits.settings.method_options.sampler = "bessel"  # the collapsed default has no Bessel variables
    fits.configure()
    runner = fits.runners["private"]
    runner.start()
    drain_until(fits, lambda: runner.status == "done")
    draws = runner.result["bessel_draws"]
    assert draws is not None and draws.shape == fits.data.release.shape and draws.sum() > 0
    assert fits.runners["naive"].result is None  # never started
    for name in ("naive", "nonprivate"):
        fits.runners[name].start()
    drain_until(fits, lambda: all(r.status == "done" for r in fits.runners.values()))
    assert fits.runners["naive"].result["bessel_draws"] is None  # methods without Bessel draws have none
    # a second snapshot of the same chain is another array: the worker copied each one
    assert draws is not fits.runners["private"].result["bessel_draws"] or runner.result["iteration"] == 30


def test_pause_is_acknowledged_after_the_last_rows_and_resume_continues(fits):
    fits.settings.param.update(n_iter=100_000, burn_in=10)
    fits.start()
    drain_until(fits, lambda: all(r.iteration >= 5 for r in fits.runners.values()))
    fits.pause()
    assert all(r.status == "pausing" for r in fits.runners.values())
    drain_until(fits, lambda: all(r.status == "paused" for r in fits.runners.values()))
    # "paused" arrives after the worker handed over every row up to where it stopped
    paused_at = {m: len(r.buffer.data) for m, r in fits.runners.items()}
    for _name, runner in fits.runners.items():
        last_traced = runner.trace()["iteration"].iloc[-1]
        assert runner.iteration - runner.stride < last_traced <= runner.iteration  # every row is in
        assert runner.result["iteration"] == runner.iteration and runner.iterations_per_second == 0
    time.sleep(0.3)
    fits.drain()
    assert {m: len(r.buffer.data) for m, r in fits.runners.items()} == paused_at
    fits.resume()
    drain_until(fits, lambda: all(len(r.buffer.data) > paused_at[m] + 5 for m, r in fits.runners.items()))
    assert all(r.status == "running" for r in fits.runners.values())
    drain_until(fits, lambda: all(r.iterations_per_second > 0 for r in fits.runners.values()))
    fits.stop()  # "stopping" until the worker has left (the status says what the worker does)
    assert all(r.status in ("stopping", "stopped") for r in fits.runners.values())
    for runner in fits.runners.values():
        assert runner.join(timeout=30)
        kept = runner.iteration
        fits.drain()
        assert runner.status == "stopped" and runner.iteration >= kept


def test_stop_ends_a_long_iteration_within_a_second():
    fits = make_fits(source="synthetic-topics", n_docs=3000, n_words=1500, n_components=40)
    runner = fits.runners["private"]
    fits.settings.n_iter = 10_000
    runner.start()
    drain_until(fits, lambda: runner.iteration >= 1)
    started = time.monotonic()
    fits.stop()
    assert runner.join(timeout=5)
    assert time.monotonic() - started < 1.0
    fits.drain()
    assert runner.status == "stopped" and runner.error == ""


def test_reset_clears_traces_and_results_and_ignores_late_rows(fits):
    fits.settings.n_iter = 100_000
    fits.start()
    drain_until(fits, lambda: all(len(r.buffer.data) > 3 for r in fits.runners.values()))
    fits.reset()
    for runner in fits.runners.values():
        runner.join(timeout=30)
    fits.drain()  # whatever the stopped workers queued is dropped
    for runner in fits.runners.values():
        assert runner.status == "idle" and runner.iteration == 0 and runner.result is None
        assert len(runner.buffer.data) == 0


def test_changing_the_noise_asks_first_then_resets_running_chains_onto_the_new_release(fits):
    fits.settings.n_iter = 100_000
    fits.start()
    drain_until(fits, lambda: all(r.iteration > 0 for r in fits.runners.values()))
    release = fits.data.release
    fits.settings.epsilon = 3.0  # would discard the running fits: held back with a question
    assert fits.settings.epsilon == 1.0 and fits.data.release is release
    assert fits.settings.pending == {"epsilon": 3.0} and "running fits" in fits.settings.question
    assert all(r.status == "running" for r in fits.runners.values())
    fits.settings.cancel()
    assert fits.settings.pending == {} and fits.settings.epsilon == 1.0 and fits.data.release is release
    fits.settings.source = "synthetic-blocks"
    assert fits.settings.source == "synthetic-topics" and fits.settings.pending == {"source": "synthetic-blocks"}
    fits.settings.cancel()
    fits.settings.epsilon = 3.0
    fits.settings.confirm()
    assert fits.settings.pending == {} and fits.settings.question == ""
    assert all(r.status in ("stopping", "idle") and len(r.buffer.data) == 0 for r in fits.runners.values())
    drain_until(fits, lambda: not fits.moving)  # "idle" once the old workers have left
    assert all(r.status == "idle" and len(r.buffer.data) == 0 for r in fits.runners.values())
    assert fits.runners["private"].problem.release is fits.data.release
    assert fits.data.release.alpha == pytest.approx(np.exp(-3.0))


def _build_held(monkeypatch):
    """Served-style data builds (in a thread) that wait for the returned event."""
    import lpviz.dashboard.session.datastore

    held = threading.Event()
    derive = lpviz.dashboard.session.datastore.derive
    monkeypatch.setattr(lpviz.dashboard.session.datastore, "derive", lambda *args: held.wait(30) and derive(*args))
    return held


def _settle(fits, timeout=TIMEOUT):
    deadline = time.monotonic() + timeout
    while fits.data.loading and time.monotonic() < deadline:
        time.sleep(0.02)
        fits.data.poll()
    assert not fits.data.loading


def test_a_start_while_new_data_are_built_runs_on_the_new_data(monkeypatch):
    # A Start clicked just after choosing a preset used to start the chains on the old data,
    # which the new data reset to idle when they arrived: the click was lost.
    fits = Fits(DataStore(Settings(noise_seed=7), background=True), buffer_length=10_000)
    try:
        _settle(fits)
        fits.settings.param.update(n_iter=100_000, burn_in=40, thin=10)
        held = _build_held(monkeypatch)
        fits.settings.n_docs = 120
        assert fits.data.loading and fits.data.release.shape == (90, 15)
        fits.start()
        assert all(r.status == "idle" for r in fits.runners.values())  # nothing runs on the old data
        held.set()
        _settle(fits)
        assert fits.data.release.shape == (120, 15)
        drain_until(fits, lambda: all(r.iteration > 0 for r in fits.runners.values()))
        assert all(r.problem.release is fits.data.release for r in fits.runners.values())
        fits.stop()
        drain_until(fits, lambda: not fits.moving)

        # a Stop (or Reset) meanwhile takes the Start back
        held = _build_held(monkeypatch)
        fits.settings.n_docs = 150
        fits.start()
        fits.stop()
        held.set()
        _settle(fits)
        fits.drain()
        assert fits.data.release.shape == (150, 15)
        assert all(r.status == "idle" for r in fits.runners.values())
    finally:
        fits.close()


def test_buffers_are_bounded_and_span_the_whole_run(fits):
    runner = fits.runners["naive"]
    runner.buffer.length = 25  # keep this test short
    fits.settings.param.update(n_iter=80, burn_in=10)
    assert runner.stride == 4  # 80 iterations into 25 rows
    runner.start()
    drain_until(fits, lambda: runner.status == "done")
    np.testing.assert_array_equal(runner.trace()["iteration"], [1, *range(4, 81, 4)])
    assert runner.result["iteration"] == 80


def test_trace_every_thins_the_stream_and_large_data_trace_fewer_states(fits):
    fits.settings.param.update(trace_every=10, n_iter=60)
    fits.runners["nonprivate"].start()
    drain_until(fits, lambda: fits.runners["nonprivate"].status == "done")
    np.testing.assert_array_equal(fits.runners["nonprivate"].trace()["iteration"], [1, 10, 20, 30, 40, 50, 60])
    big = make_fits(n_docs=1000, n_words=400)  # 400,000 cells: every 4th state is scored at most
    assert big.runners["naive"].stride == 4


def test_heldout_mae_is_traced_on_a_network_without_its_self_loops():
    fits = make_fits(source="synthetic-blocks")
    fits.settings.param.update(holdout="top actors", holdout_actors=2, n_iter=60, burn_in=20, thin=10)
    runner = fits.runners["private"]
    runner.start()
    drain_until(fits, lambda: runner.status == "done")
    release, truth = fits.data.release, fits.data.truth
    trace, result = runner.trace(), runner.result
    held = release.heldout_cells
    assert held is not None and not held.diagonal().any()  # a self loop is no held-out cell
    expected = np.abs(result["mu_hat"] - truth.mu)[held].mean()
    assert trace["mean_heldout_rate_mae"].iloc[-1] == pytest.approx(expected)
    assert result["score"]["heldout_rate_mae"] == pytest.approx(expected)
    observed = ~held & ~np.eye(*held.shape, dtype=bool)
    assert result["score"]["mae"] == pytest.approx(np.abs(result["mu_hat"] - truth.Y)[observed].mean())
    assert set(result["best"]) == {"theta", "pi"}


def test_a_chain_error_is_shown_not_swallowed(fits):
    runner = fits.runners["private"]
    runner.options = {"sampler": "no-such-sampler"}
    runner.start()
    drain_until(fits, lambda: runner.status == "error", errors_expected=True)
    assert "sampler" in runner.error and "no-such-sampler" in runner.error


def test_a_view_that_fails_to_redraw_stops_no_run(fits, caplog):
    """A view follows the runners through a watcher of their status: its failure is logged, and every
    runner's status and iteration still arrive (one failing heatmap left two chains reading "idle")."""

    def broken_view(runner):
        raise AttributeError("a view's redraw failed")

    follow_results(fits, broken_view, 0.0)
    fits.settings.param.update(n_iter=20, burn_in=5, thin=5)
    with caplog.at_level("ERROR", logger="lpviz.app"):
        fits.start()
        drain_until(fits, lambda: all(r.status == "done" for r in fits.runners.values()))
    assert all(r.iteration == 20 for r in fits.runners.values())
    assert "failed to redraw" in caplog.text and "a view's redraw failed" in caplog.text


def test_a_click_reaches_every_runner_when_a_watcher_of_one_fails(fits):
    """Stop (and Start, Pause, Resume, Reset) move every runner even if a watcher of the first
    fails: the error is raised after the others have moved, and no chain is left running."""
    fits.settings.n_iter = 100_000
    fits.start()
    drain_until(fits, lambda: all(r.iteration >= 2 for r in fits.runners.values()))
    first = next(iter(fits.runners.values()))

    def failing_watcher(event):
        raise RuntimeError("a watcher of the first runner failed")

    watcher = first.param.watch(failing_watcher, ["status"])
    with pytest.raises(RuntimeError, match="watcher of the first runner"):
        fits.stop()
    assert all(r.status in ("stopping", "stopped") for r in fits.runners.values())
    first.param.unwatch(watcher)
    for runner in fits.runners.values():
        assert runner.join(timeout=30)
    fits.drain()
    assert all(r.status == "stopped" for r in fits.runners.values())


def test_the_periodic_drain_outlives_a_failed_drain_in_a_notebook(caplog):
    """In Jupyter, Panel repeats a periodic callback in an asyncio task that an exception ends for
    good; lpviz.dashboard.serving.throttle.Periodic logs the failure and the next drain runs as planned."""
    import asyncio

    from bokeh.document import Document
    from panel.io.state import set_curdoc

    from lpviz.dashboard.serving.throttle import Periodic

    calls = []

    def drain():
        calls.append(time.monotonic())
        if len(calls) == 1:
            raise RuntimeError("the first drain failed")

    async def notebook():
        periodic = Periodic(drain, 10)
        periodic.start()
        assert periodic.running
        await asyncio.sleep(0.5)
        periodic.stop()

    document = Document()  # a notebook's: no server session
    with set_curdoc(document), caplog.at_level("ERROR", logger="lpviz.app"):
        assert document.session_context is None
        asyncio.run(notebook())
    assert len(calls) >= 5, calls
    assert "the first drain failed" in caplog.text and "periodic update failed" in caplog.text


def test_two_sessions_do_not_share_runs():
    first, second = make_fits(), make_fits()
    first.settings.param.update(n_iter=30, burn_in=10)
    first.runners["naive"].start()
    drain_until(first, lambda: first.runners["naive"].status == "done")
    second.drain()
    assert len(first.runners["naive"].buffer.data) == 30
    assert len(second.runners["naive"].buffer.data) == 0 and second.runners["naive"].status == "idle"
    assert first.runners["naive"].buffer is not second.runners["naive"].buffer
    assert first.runners["naive"].pace is not second.runners["naive"].pace


def _image(plot):
    """The image a live rate heatmap (lpviz.dashboard.views.live_rates) draws."""
    (renderer,) = plot.renderers
    return np.asarray(renderer.data_source.data["image"][0])


def _curves(pane):
    """The trace lines of a live trace plot (lpviz.dashboard.views.live_traces), one per (runner, column), by name."""
    from bokeh.models import GlyphRenderer, Line

    return [r.name for r in pane.object.select({"type": GlyphRenderer}) if isinstance(r.glyph, Line)]


def test_fits_view_plots_the_buffers_and_draws_the_rates(fits):
    view = FitsView(fits=fits)
    mae_pane, joint_pane = view.traces()[0].objects
    n_methods = len(fits.runners)
    assert len(_curves(mae_pane)) == 2 * n_methods  # sample and posterior-mean MAE per method
    # one log-joint line per chain (two by default), each method's chains in the method's colour
    assert fits.settings.chains == 2 and len(_curves(joint_pane)) == 2 * n_methods
    for runner in fits.runners.values():
        lines = [r for r in joint_pane.object.renderers if r.name.startswith(runner.label + ":")]
        assert [r.glyph.y for r in lines] == ["log_joint", "log_joint_1"]
        assert {r.glyph.line_color for r in lines} == {runner.color}
    fits.settings.chains = 3
    assert len(_curves(view.traces()[0].objects[1])) == 3 * n_methods
    fits.settings.chains = 1
    assert len(_curves(view.traces()[0].objects[1])) == n_methods
    mae_pane, joint_pane = view.traces()[0].objects
    assert "true rates" in mae_pane.object.title.text
    # iterations are whole: no ticks between them (an empty plot's 0..1 read "0 0 0 1 1 1")
    assert all(plot.object.xaxis[0].ticker.min_interval == 1 for plot in (mae_pane, joint_pane))
    # each buffer's new rows reach its lines, and only the new ones (streamed, not redrawn)
    runner = fits.runners["naive"]
    (source,) = {r.data_source for r in mae_pane.object.renderers if r.name.startswith(runner.label)}
    rows = empty_trace().reindex(range(3)).assign(iteration=[10.0, 20.0, 30.0], rate_mae=[3.0, 2.0, 1.0])
    runner.buffer.send(rows)
    assert list(source.data["iteration"]) == [10.0, 20.0, 30.0] and list(source.data["rate_mae"]) == [3, 2, 1]
    plot = mae_pane.object  # the axes span the rows drawn (set, not left to Bokeh: no console warning)
    assert (plot.x_range.start, plot.x_range.end) == (10.0, 30.0) and plot.y_range.start < 1 < 3 < plot.y_range.end
    runner.buffer.send(rows.assign(iteration=[40.0, 50.0, 60.0]))
    assert list(source.data["iteration"]) == [10.0, 20.0, 30.0, 40.0, 50.0, 60.0]
    runner.buffer.clear()  # a reset: the lines empty
    assert len(source.data["iteration"]) == 0
    followers = len(runner.buffer.subscribers)
    view.traces(), view.traces()  # plots replaced stop following the buffers
    assert len(runner.buffer.subscribers) == followers
    rates = view.rates()
    fits.settings.param.update(n_iter=30, burn_in=10, thin=5)
    fits.runners["nonprivate"].start()
    drain_until(fits, lambda: fits.runners["nonprivate"].status == "done")
    plot = view._live_rates.figures["nonprivate"]
    np.testing.assert_allclose(_image(plot), fits.runners["nonprivate"].result["mu_hat"])
    assert plot.title.text.endswith("mean of 4 samples")
    assert len(rates.objects) == 1 + n_methods  # truth + each method
    # each heatmap carries its own title (the truth's, then one per method)
    titles = sorted(pane.object.title.text for pane in rates.objects)
    expected = ["truth (true rates)", f"{fits.runners['nonprivate'].label}\nmean of 4 samples"] + [
        f"{fits.runners[name].label}\nnot started" for name in ("private", "naive")
    ]
    assert titles == sorted(expected)
    assert view.scores["method"].tolist() == [fits.runners["nonprivate"].label]
    fits.settings.holdout = "random cells"
    assert len(_curves(view.traces()[0].objects[0])) == 3 * n_methods  # plus held-out MAE
    fits.settings.methods = ["private"]  # the chosen methods only
    assert len(_curves(view.traces()[0].objects[1])) == 1


def test_rate_heatmaps_are_throttled_while_running_and_exact_when_paused(fits, monkeypatch):
    import lpviz.dashboard.views.fits_view

    monkeypatch.setattr(lpviz.dashboard.views.fits_view, "VIEW_SECONDS", 1000.0)  # no redraw while running here
    view = FitsView(fits=fits)
    view.rates()
    runner = fits.runners["naive"]
    plot = view._live_rates.figures["naive"]
    fits.settings.param.update(n_iter=1_000_000, burn_in=10, thin=5)
    runner.start()
    drain_until(fits, lambda: runner.result is not None and runner.result["samples_saved"] > 2)
    assert plot.title.text.endswith("not started")  # Start streams trace rows first; the heatmap follows later
    runner.pause()
    drain_until(fits, lambda: runner.status == "paused")
    np.testing.assert_allclose(_image(plot), runner.result["mu_hat"])
    fits.stop()


def _watch_rates(view):
    """The Bokeh document the rate heatmaps are shown in, and the list of its change events (what a
    served page is sent) from now on."""
    from bokeh.document import Document

    document = Document()
    document.add_root(view.rates().get_root(document))
    events = []
    document.on_change(events.append)
    return events


def _sent(events, live):
    """``{heatmap key: {what was sent}}`` of document ``events`` touching the heatmaps of ``live``."""
    owners = {}
    for key, plot in live.figures.items():
        (renderer,) = plot.renderers
        for model in (plot, plot.title, renderer.data_source, renderer.glyph.color_mapper):
            owners[model.id] = (key, type(model).__name__)
    sent = {}
    for event in events:
        model = getattr(event, "model", None)
        if model is None or model.id not in owners:
            continue
        key, kind = owners[model.id]
        what = f"{kind}.{event.attr}" + (f"{event.cols}" if getattr(event, "cols", None) else "")
        sent.setdefault(key, set()).add(what)
    return sent


def test_a_result_updates_the_rate_heatmaps_in_place_sending_only_its_image_and_title(fits):
    view = FitsView(fits=fits)
    events = _watch_rates(view)
    live = view._live_rates
    figures = dict(live.figures)
    panes = list(live.panel.objects)
    before = {key: (_image(plot).copy(), plot.title.text) for key, plot in figures.items()}
    runner = fits.runners["nonprivate"]
    fits.settings.param.update(n_iter=30, burn_in=10, thin=5)
    runner.start()
    drain_until(fits, lambda: runner.status == "done")
    # the same figures (and panes) drawn anew: nothing replaced, no model added
    assert view._live_rates is live and live.figures == figures and list(live.panel.objects) == panes
    assert all(live.figures[key] is plot for key, plot in figures.items())
    plot = figures["nonprivate"]
    np.testing.assert_allclose(_image(plot), runner.result["mu_hat"])
    assert not np.allclose(_image(plot), before["nonprivate"][0])
    assert plot.title.text == f"{runner.label}\nmean of 8 samples of 2 chains" != before["nonprivate"][1]
    # sent: the fit's image column (never its extent) and title; the others' heatmaps untouched
    assert _sent(events, live) == {"nonprivate": {"ColumnDataSource.data['image']", "Title.text"}}
    for key in (None, "private", "naive"):
        np.testing.assert_array_equal(_image(figures[key]), before[key][0])
        assert figures[key].title.text == before[key][1]


def test_a_rate_heatmap_whose_fit_did_not_change_is_not_sent_again(fits):
    view = FitsView(fits=fits)
    events = _watch_rates(view)
    live = view._live_rates
    fits.settings.param.update(n_iter=30, burn_in=10, thin=5)
    fits.runners["nonprivate"].start()
    drain_until(fits, lambda: fits.runners["nonprivate"].status == "done")
    events.clear()
    view._on_result(fits.runners["private"])  # a result of another fit: its heatmap alone is drawn
    assert set(_sent(events, live)) == {"private"}
    events.clear()
    view._on_result(fits.runners["nonprivate"])  # its own, unchanged: the image again, the same title not
    assert _sent(events, live) == {"nonprivate": {"ColumnDataSource.data['image']"}}


def test_a_data_methods_or_scale_switch_draws_new_rate_heatmaps(fits):
    from bokeh.models import LogColorMapper

    view = FitsView(fits=fits)
    view.__panel__()
    shown = []  # every set of heatmaps shown so far
    for change in (
        {},
        {"n_docs": 60},  # a data switch (a new release)
        {"source": "synthetic-blocks"},  # another kind of data (its default scale: by rank)
        {"colour_scale": "log"},
        {"methods": ["private", "naive"]},
    ):
        fits.settings.param.update(**change)
        live = view._live_rates
        assert view._rates_box.objects == [live.panel]  # the box shows the newest heatmaps
        assert [pane.object for pane in live.panel.objects] == list(live.figures.values())
        for old in shown:  # new figures, no model shared with a replaced one
            assert not {id(plot) for plot in live.figures.values()} & {id(plot) for plot in old.figures.values()}
            assert live.figures[None].x_range is not old.figures[None].x_range
        shown.append(live)
        shape = fits.data.release.shape
        assert all(_image(plot).shape == shape for plot in live.figures.values())
    assert list(live.figures) == [None, "private", "naive"] and shape == (20, 20)
    assert live.figures[None].xaxis[0].axis_label == "recipient"
    assert isinstance(live.figures[None].renderers[0].glyph.color_mapper, LogColorMapper)
    assert all(plot.title.text.endswith("not started") for key, plot in live.figures.items() if key)
    stale = {key: _image(plot).copy() for key, plot in shown[0].figures.items()}
    view._on_result(fits.runners["private"])  # a replaced set is never drawn again
    assert all(np.array_equal(_image(shown[0].figures[key]), image) for key, image in stale.items())


@pytest.mark.parametrize(
    ("source", "size"),
    [
        ("synthetic-topics", {"n_docs": 400, "n_words": 700}),  # drawn every 2nd row and 3rd column
        ("synthetic-blocks", {"size": 320}),  # every 2nd sender and recipient
        ("synthetic-tensor", {"size": 12, "n_months": 4}),  # summed over the months
    ],
)
def test_the_live_rate_heatmaps_draw_what_the_exported_count_images_draw(source, size):
    """On topics, networks and tensors, in each colour scale: the live figures draw the cells, colour
    mapping, axes and titles of the export's :func:`~dashboard.views.plots.count_image` heatmaps of the same fits."""
    from tests.test_live_rates import SCALES, assert_same_drawing, drawing

    fits = make_fits(source=source)
    try:
        fits.settings.param.update(**size)
        fits.settings.param.update(n_iter=12, burn_in=4, thin=4, methods=["private", "nonprivate"])
        view = FitsView(fits=fits)
        view.__panel__()
        fits.runners["nonprivate"].start()
        drain_until(fits, lambda: fits.runners["nonprivate"].status == "done")
        for scale in SCALES:
            fits.settings.colour_scale = scale
            live = view._live_rates
            exported = [hv.render(image, backend="bokeh") for image in view.figures()["fits_rates"]]
            assert len(exported) == len(live.figures) == 3
            for plot, export in zip(live.figures.values(), exported, strict=True):
                ours, theirs = drawing(plot), drawing(export)
                assert ours.pop("min_width") == 300 and theirs.pop("min_width") == 220  # the live ones: RATE_MIN_WIDTH
                assert_same_drawing(ours, theirs)
            assert "mean of 4 samples of 2 chains" in live.figures["nonprivate"].title.text
            assert _image(live.figures["nonprivate"]).any()
    finally:
        fits.close()


def test_a_drain_triggers_the_buffers_together_through_the_public_api(fits):
    triggers = []
    for runner in fits.runners.values():
        runner.buffer.add_subscriber(lambda runner=runner, **contents: triggers.append((runner.method, set(contents))))
    fits.settings.param.update(n_iter=40, burn_in=10)
    fits.start()
    drain_until(fits, lambda: all(r.status == "done" for r in fits.runners.values()))
    assert all(len(r.buffer.data) == 40 for r in fits.runners.values())
    assert {name for name, _ in triggers} == set(fits.runners)
    # each buffer's data under its own name: one trigger carries every method's rows
    assert any(len(contents) > 1 for _, contents in triggers)
    assert fits.drain() == 0  # nothing queued: nothing redrawn
    import lpviz.dashboard.session.fits
    import lpviz.dashboard.session.runner
    import lpviz.dashboard.views.fits_view

    source = (
        inspect.getsource(lpviz.dashboard.session.fits)
        + inspect.getsource(lpviz.dashboard.views.fits_view)
        + inspect.getsource(lpviz.dashboard.session.runner)
    )
    assert "_on_trigger" not in source and "_subscribers" not in source


def test_lockstep_keeps_a_fast_chain_within_slack_of_a_slow_one():
    from lpviz.dashboard.session.fits import Control

    pace, control = Lockstep(slack=5), Control()
    counts, gaps = {"fast": 0, "slow": 0}, []
    both_joined = threading.Barrier(2)

    def work(name, seconds_per_step):
        token = object()
        pace.join(token)
        both_joined.wait(timeout=30)
        for _ in range(40):
            pace.wait(token, control)
            gaps.append(pace.gap(token))  # how far ahead this worker starts its iteration
            time.sleep(seconds_per_step)
            pace.advance(token)
            counts[name] += 1
        pace.leave(token)

    threads = [threading.Thread(target=work, args=("fast", 0.0)), threading.Thread(target=work, args=("slow", 0.003))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert counts == {"fast": 40, "slow": 40}
    assert max(gaps) <= 5  # no iteration starts more than the slack ahead of the slowest chain
    assert max(gaps) >= 3  # and the fast chain did run ahead: the bound was what held it

    # a chain joining later starts level with the slowest one running, so it holds nobody back
    ahead, late = object(), object()
    pace.join(ahead)
    for _ in range(100):
        pace.advance(ahead)
    pace.join(late)
    started = time.monotonic()
    pace.wait(ahead, control)
    assert time.monotonic() - started < 0.5
    pace.leave(ahead), pace.leave(late)


def test_a_sessions_runners_share_one_lockstep(fits):
    assert len({id(runner.pace) for runner in fits.runners.values()}) == 1
    assert fits.runners["private"].pace is not None


# ---- the registry drives the app ------------------------------------------------------


class PriorOnly(FixedCountsMethod):
    """A toy method registered by this test alone: it fits no counts (the chain samples the prior)."""

    name = "prior-only"
    label = "prior only (toy)"
    color = "#9467bd"
    description = "Fits nothing: the chain draws from the prior."

    def counts(self, counts):
        return np.zeros(np.shape(counts), dtype=np.int64)


@pytest.fixture
def toy_method():
    methods.register(PriorOnly)
    yield PriorOnly
    methods.METHODS.pop(PriorOnly.name)


def test_a_method_registered_elsewhere_appears_everywhere_in_the_app(toy_method):
    from lpviz.dashboard.views.controls_view import ControlsView

    fits = make_fits()
    assert "prior-only" in fits.settings.param.methods.objects and "prior-only" in fits.settings.methods
    runner = fits.runners["prior-only"]
    assert runner.label == "prior only (toy)" and runner.color == "#9467bd"
    controls = ControlsView(data=fits.data).fit_controls()
    controls.collapsed = False  # its widgets are made when it first opens
    boxes = [w for w in controls.select(pn.widgets.CheckBoxGroup)][0]
    assert "prior only (toy)" in boxes.options
    view = FitsView(fits=fits)
    assert any(name.startswith("prior only (toy)") for name in _curves(view.traces()[0].objects[1]))
    fits.settings.methods = ["prior-only"]
    fits.start()
    drain_until(fits, lambda: runner.status == "done")
    assert runner.result["score"]["mae"] > 0 and all(
        r.status == "idle" for n, r in fits.runners.items() if n != "prior-only"
    )
    assert view.scores["method"].tolist() == ["prior only (toy)"]


def test_the_app_has_no_switch_on_model_or_method_names():
    from lpviz.models import MODELS

    names = set(methods.METHODS) | set(MODELS)
    app_dir = Path(__file__).resolve().parents[1] / "app"
    for path in app_dir.glob("*.py"):
        text = path.read_text()
        for name in names:
            assert f'== "{name}"' not in text and f"== '{name}'" not in text, (path.name, name)
            assert f'"{name}":' not in text and f'["{name}"]' not in text, (path.name, name)


def test_resume_after_the_end_continues_the_same_chain(fits):
    fits.settings.param.update(n_iter=40, burn_in=10, thin=5)
    runner = fits.runners["naive"]
    runner.start()
    drain_until(fits, lambda: runner.status == "done")
    first = runner.result
    assert runner.iteration == 40 and first["samples_saved"] == 2 * 6  # two chains
    fits.resume()
    assert runner.status == "running" and runner.target == 80
    drain_until(fits, lambda: runner.status == "done")
    trace = runner.trace()
    np.testing.assert_array_equal(trace["iteration"], np.arange(1, 81))  # one trace, no restart
    assert runner.iteration == 80 and runner.result["samples_saved"] == 2 * 14  # the same posterior goes on
    state, posterior = library_run(fits, "naive", 80)  # = two chains of 80 iterations
    assert trace["log_joint"].iloc[-1] == pytest.approx(state.log_joint)
    np.testing.assert_array_equal(trace["log_joint_1"], posterior.chains[1].log_joint)
    np.testing.assert_allclose(runner.result["mu_hat"], posterior.mu_hat)


def test_resume_after_a_pause_leaves_a_run_that_ended_meanwhile_done(fits):
    """Resume answers the Pause: the paused runs go on, a run that had ended stays as it is (it was
    extended by a whole run as well, so a class clicking Pause and Resume near the end never saw it end)."""
    done, paused = fits.runners["naive"], fits.runners["private"]
    fits.settings.param.update(n_iter=40, burn_in=10, thin=5)
    done.start()
    drain_until(fits, lambda: done.status == "done")
    fits.settings.param.update(n_iter=100_000)
    paused.start()
    drain_until(fits, lambda: paused.iteration >= 5)
    fits.pause()
    drain_until(fits, lambda: paused.status == "paused")
    fits.resume()
    assert paused.status == "running"
    assert done.status == "done" and done.target == 40 and done.iteration == 40
    fits.resume()  # nothing paused any more: Resume extends the ended run by the settings' run, as before
    assert done.status == "running" and done.target == 40 + 100_000
    fits.stop()


def test_a_drain_walks_the_model_graph_only_when_a_change_asks_for_it():
    """Bokeh's freeze() walks every model when it ends; a drain that only sets numbers
    must not, and one that adds a model must still register it (once)."""
    from bokeh.document import Document
    from bokeh.models import ColumnDataSource, Div, Row

    from lpviz.dashboard.session.fits import _recompute_once

    document = Document()
    row = Row(children=[Div(text="a")])
    document.add_root(row)
    walks = []
    recompute = document.models.recompute
    document.models.recompute = lambda: (walks.append(1), recompute())[1]
    try:
        with _recompute_once(document):
            row.children[0].text = "b"  # a number or text: no reference changes
            ColumnDataSource(data={"x": [1]})  # not attached: nothing to register
        assert walks == []
        added = Div(text="c")
        with _recompute_once(document):
            with document.models.freeze():  # HoloViews freezes around every plot refresh
                row.children = [*row.children, added]
            with _recompute_once(document):  # nested: the outer one walks
                row.children = [*row.children, Div(text="d")]
            assert walks == []
        assert walks == [1]
        assert document.get_model_by_id(added.id) is added
        assert "invalidate" not in vars(document.models)  # the context put back what it found
        with _recompute_once(document):
            row.children = row.children[:1]
        assert walks == [1, 1] and document.get_model_by_id(added.id) is None
    finally:
        del document.models.recompute


def test_vi_fits_every_method_with_cavi_and_every_number_is_the_librarys():
    """inference="vi" (the Table 1 preset): every runner runs a CAVI fit to convergence, traces
    its ELBO (no log joint: no sample), and scores the fit exactly as lpviz.fit does."""
    from lpviz.engine import fit

    fits = Fits(
        DataStore(Settings(preset="Table 1 (VI paper, reduced)", n_docs=60, n_words=40, n_components=4, noise_seed=7)),
        buffer_length=10_000,
    )
    try:
        assert fits.settings.inference == "vi" and fits.settings.burn_in == 0
        fits.start()
        drain_until(fits, lambda: all(r.status == "done" for r in fits.active.values()))
        problem = fits.problem()
        for name, runner in fits.active.items():
            assert runner.label.endswith(", VI")
            trace = runner.trace()
            assert trace["log_joint"].isna().all() and np.isfinite(trace["elbo"]).all()
            assert np.all(np.diff(trace["elbo"]) >= -1e-6 * np.abs(trace["elbo"][1:]))  # CAVI climbs
            method = methods.create(name, **fits.settings.options_for(methods.get(name)))
            posterior = fit(
                problem.release,
                model=problem.model,
                method=method,
                n_components=4,
                n_iter=fits.settings.n_iter,
                inference="vi",
                random_state=problem.seed,
                truth=problem.truth if method.uses_truth else None,
            )
            assert runner.iteration == len(posterior.elbo) < fits.settings.n_iter  # converged, as alone
            # a CAVI fit has no samples: its rates are q's mean, at the iteration it stopped
            values, title = FitsView._rate_frame(runner, problem.release.shape)
            assert title == f"variational mean at iteration {runner.iteration:,}" and "sample" not in title
            np.testing.assert_array_equal(values, runner.result["mu_hat"])
            expected = score(posterior, problem.release, problem.truth)
            assert runner.result["score"].keys() == expected.keys()
            shown_flat = flat_scores(runner.result["score"])  # health and baselines flattened
            for key, value in flat_scores(expected).items():
                if "second" in key:  # wall-clock times differ between two runs
                    continue
                shown = shown_flat[key]
                exact = value is None or isinstance(value, (str, bool))  # a health word, a flag
                assert shown == value if exact else shown == pytest.approx(value, rel=1e-9, nan_ok=True), key
        fits.settings.preset = "Figure 3 (large alpha0)"  # every other preset fits with MCMC again
        assert fits.settings.inference == "mcmc" and not fits.runners["private"].label.endswith(", VI")
    finally:
        fits.close()


def test_a_run_whose_saved_samples_would_not_fit_is_refused_at_start_with_the_thinning_that_fits(fits, monkeypatch):
    from lpviz.budget import MemoryBudgetError

    # sessions of 64 MiB: the 90 x 15 data and its chains fit, every one of 100,000 samples does not
    monkeypatch.setenv("LPVIZ_MEMORY_LIMIT", "256MiB")
    monkeypatch.setenv("LPVIZ_APP_SESSIONS", "4")
    fits.settings.param.update(n_iter=100_000, burn_in=0, thin=1)
    with pytest.raises(
        MemoryBudgetError,
        match=r"100,000 iterations saving 100,000 samples .* "
        r"Save fewer samples: thin = [\d,]+ or more fits",
    ) as refused:
        fits.start()
    assert all(runner.status == "idle" for runner in fits.runners.values())  # nothing started
    thin = int(re.search(r"thin = ([\d,]+)", str(refused.value)).group(1).replace(",", ""))
    assert thin > 1
    fits.settings.param.update(thin=thin)  # the thinning it names fits
    fits.start()
    assert all(runner.status == "running" for runner in fits.active.values())
    fits.stop()
    # 20 million iterations: their traces alone are too much, whatever the thinning
    fits.reset()
    fits.settings.param.update(n_iter=20_000_000)
    with pytest.raises(MemoryBudgetError, match=r"Run fewer iterations: .* at most about [\d,]+ fit at thin"):
        fits.start()


def test_the_memory_check_at_start_counts_every_chain_of_every_method(fits, monkeypatch):
    """Each chain holds its own latent counts and saved samples: two chains per method need twice
    one chain's memory, and a session whose share fits one chain per method but not two is refused."""
    from lpviz.budget import MemoryBudgetError
    from lpviz.dashboard.session.memory import session_bytes

    fits.settings.param.update(n_iter=10, burn_in=0, thin=10, chains=1)  # a short run: the chains decide
    problem, run = fits.problem(), (10, 0, 10)
    names = list(fits.active)
    shape, model, K = problem.release.shape, problem.model, problem.n_components
    one_with_its_run = session_bytes(shape, model, K, names, run)
    two_alone = session_bytes(shape, model, K, names * 2)
    assert one_with_its_run < two_alone
    monkeypatch.setenv("LPVIZ_APP_SESSIONS", "1")
    monkeypatch.setenv("LPVIZ_MEMORY_LIMIT", str((one_with_its_run + two_alone) // 2))
    fits.settings.chains = 2
    with pytest.raises(MemoryBudgetError, match=rf"with {2 * len(names)} chains.*Fit fewer methods, chains"):
        fits.start()
    assert all(runner.status == "idle" for runner in fits.runners.values())  # nothing started
    fits.settings.chains = 1  # one chain per method fits the same share
    fits.start()
    assert all(runner.status == "running" for runner in fits.active.values())
    fits.stop()


def test_resume_after_the_end_checks_the_longer_run(fits, monkeypatch):
    from lpviz.budget import MemoryBudgetError

    fits.settings.param.update(n_iter=120, burn_in=0, thin=1)
    fits.start()
    drain_until(fits, lambda: all(r.status == "done" for r in fits.active.values()))
    monkeypatch.setenv("LPVIZ_MEMORY_LIMIT", "256MiB")
    fits.settings.param.update(n_iter=20_000_000)  # Resume would run 20 million more
    with pytest.raises(MemoryBudgetError, match=r"20,000,120 iterations"):
        fits.resume()
    assert all(runner.status == "done" for runner in fits.active.values())


def test_the_watchdog_says_when_no_chain_moves_and_stop_still_ends_the_run(fits, monkeypatch):
    """Issue 37 (HIGH 1): a run that stops moving is reported in words on its progress lines, and
    Stop ends it whatever the workers wait in (here: every place at the process's turnstile taken)."""
    from lpviz.dashboard.session import runner as runner_module
    from lpviz.dashboard.views.fits_view import FitsView

    turns = runner_module.turnstile()
    fits.settings.n_iter = 100_000
    fits.start()
    drain_until(fits, lambda: all(r.iteration >= 1 for r in fits.active.values()))
    with turns._condition:
        taken = turns.places
        turns._inside += taken  # nobody gets a turn: every chain waits in line
    try:
        reached = {name: r.reached for name, r in fits.active.items()}
        time.sleep(0.5)  # the turns running when the places were taken end within TURN_SECONDS
        fits.drain()
        now = time.monotonic()
        fits.watch_progress(now)
        assert all(r.note == "" for r in fits.runners.values())  # quiet for no time yet
        fits.watch_progress(now + runner_module.STALL_SECONDS + 1)
        assert all(r.iteration >= reached[name] for name, r in fits.active.items())
        for r in fits.active.values():
            assert r.status == "running" and r.note.startswith("no chain has moved for "), r.note
            assert "Stop or Reset ends the run" in r.note
        view = FitsView(fits=fits)
        lines = [row.objects[1].object for row in view.progress().objects]
        assert all("no chain has moved" in line for line in lines)
        fits.stop()
        for r in fits.active.values():
            assert r.join(timeout=5), r.method
        drain_until(fits, lambda: all(r.status == "stopped" for r in fits.active.values()))
        fits.watch_progress()
        assert all(r.note == "" for r in fits.runners.values())
    finally:
        with turns._condition:
            turns._inside -= taken
            turns._condition.notify_all()


def test_a_worker_that_leaves_without_a_word_is_settled_and_says_so(fits, monkeypatch):
    """Issue 37 (HIGH 1, the watchdog): a worker that ends before its run does and posts nothing (no
    "done", no "error") leaves no line "running" for ever: its runner reads stopped and says in words
    that the worker left without reporting why; the next run starts as usual."""
    from lpviz.dashboard.session.runner import LocalPlace

    silent = []

    def launch_silent(place, runner, *args):
        worker = threading.Thread(target=lambda: None, daemon=True)  # leaves at once, posts nothing
        worker.start()
        silent.append(worker)
        return worker

    with monkeypatch.context() as patched:
        patched.setattr(LocalPlace, "launch", launch_silent)
        fits.settings.n_iter = 100_000
        fits.start()
        assert len(silent) == len(fits.active)
        for worker in silent:
            worker.join(timeout=5)
        drain_until(fits, lambda: all(r.status != "running" for r in fits.active.values()))
    for r in fits.active.values():
        assert r.status == "stopped", r.status
        assert "left before its run ended" in r.error and "without reporting why" in r.error, r.error
    view = FitsView(fits=fits)
    lines = [row.objects[1].object for row in view.progress().objects]
    assert all("stopped" in line and "without reporting why" in line for line in lines), lines
    fits.settings.n_iter = 60
    fits.start()  # a real worker again: the run ends as usual, the old words gone
    drain_until(fits, lambda: all(r.status == "done" for r in fits.active.values()))
    assert all(r.error == "" for r in fits.active.values())


def test_a_page_back_after_its_chains_were_stopped_unseen_hears_their_statuses(fits, monkeypatch):
    """Issue 37 (HIGH 1): a page whose connection dropped for longer than LOST_CONNECTION_SECONDS has its
    chains stopped without events (nobody watches); when it reconnects, the statuses are sent again
    (the page read "running, iteration 380 / 400" for ever, and its Stop reached a stopped run)."""
    fits.settings.n_iter = 100_000
    fits.start()
    drain_until(fits, lambda: all(r.iteration >= 1 for r in fits.active.values()))
    monkeypatch.setattr(fits, "connection", lambda: "lost")
    fits.drain()  # lost: halted without events
    for r in fits.active.values():
        assert r.join(timeout=5)
    fits.drain()  # the workers have left: settled without events
    assert all(r.status == "stopped" for r in fits.active.values())
    seen = []
    for r in fits.runners.values():
        r.param.watch(lambda event: seen.append((event.obj.method, event.new)), ["status"])
    monkeypatch.setattr(fits, "connection", lambda: "present")  # the page is back
    fits.drain()
    assert {method for method, _ in seen} >= set(fits.active)  # every status line is sent again
    assert all(r.status == "stopped" for r in fits.active.values())


def test_the_seconds_and_speeds_say_what_they_count(fits):
    """Issue 37 (MEDIUM 7): the progress line read "179 it/s" beside the scoreboard's "1,029 it/s", and
    Figure 1's "seconds 56.91" for a run of about 5 minutes, with nothing saying the table counts the
    chains' computing time only (lpviz.metrics.score's seconds: the posterior's, without the waits)."""
    from lpviz.dashboard.views.fits_view import board_frame, scoreboard_html
    from lpviz.metrics import SCORE_LABELS

    fits.settings.n_iter = 100_000
    view = FitsView(fits=fits)
    fits.start()
    runner = fits.runners["private"]
    drain_until(fits, lambda: runner.iterations_per_second > 0)
    line = view.progress().objects[list(fits.active).index("private")].objects[1].object
    assert re.search(r"[\d,.]+ it/s \(wall clock\)", line), line
    drain_until(fits, lambda: all((r.result or {}).get("score") for r in fits.active.values()))
    fits.pause()
    drain_until(fits, lambda: not fits.moving)
    html = scoreboard_html(board_frame(list(fits.active.values())))
    assert f"{SCORE_LABELS['seconds']}<br><small>(computing only)</small>" in html
    assert f"{SCORE_LABELS['iterations_per_second']}<br><small>(per second computing)</small>" in html
