"""The Central vs local tab without a browser: a real PrivateLDA fit in a worker thread beside real chains.

Every number the view shows is checked against the library run on its own
(the same options and seed give the same central fit; the local rows are
the runners' own lpviz.metrics.score).
"""

import math
import time

import numpy as np
import pytest

from lpviz import accounting
from lpviz.central import PrivateLDA
from lpviz.central import posterior as central_posterior
from lpviz.dashboard.session.datastore import DataStore
from lpviz.dashboard.session.fits import Fits
from lpviz.dashboard.session.settings import Settings
from lpviz.dashboard.views.central_view import CENTRAL_LABEL, MAE_NOT_DEFINED, CentralView, table_html
from lpviz.metrics import SCORE_LABELS, score

TIMEOUT = 120  # seconds; generous for a loaded 2-core machine and a cold numba cache


def drain_until(view, condition, timeout=TIMEOUT):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out: central status {view.status}, step {view.step}/{view.n_steps}, {view.error}")
        time.sleep(0.02)
        view.drain()
        view.fits.drain()


def make_view(**settings):
    fits = Fits(DataStore(Settings(noise_seed=7, **settings)), buffer_length=10_000)
    fits.settings.param.update(n_iter=120, burn_in=40, thin=10)
    return CentralView(fits=fits)


@pytest.fixture
def view():
    view = make_view()  # the opening preset's synthetic topics: 90 documents x 15 words, K = 3
    yield view
    view.cancel()
    view.fits.close()
    assert view.join(timeout=60)
    for runner in view.fits.runners.values():
        runner.join(timeout=30)


def central_row(view):
    rows = view.table[view.table["approach"] == CENTRAL_LABEL]
    assert len(rows) == 1
    return rows.iloc[0]


def test_the_central_fit_runs_in_a_thread_and_spends_at_most_the_epsilon_asked(view):
    assert view.unavailable_reason == "" and view.epsilon == 1.0  # the session's eps/N
    view.param.update(epsilon=2.0, delta=1e-5, sampling_rate=0.2, n_epochs=3)  # PLD, the default accountant
    view.fit()
    # nothing is visible until the event loop drains the worker's queue
    assert view.status == "calibrating" and view.result is None and view.table.empty
    drain_until(view, lambda: view.status == "done")
    result = view.result
    assert result["n_steps"] == 3 * math.ceil(90 / 18) == view.step and result["batch_size"] == 18
    assert result["epsilon_pld"] <= 2.0 and result["delta"] == 1e-5  # calibrated with PLD: within budget
    assert result["epsilon_rdp"] == accounting.epsilon(0.2, result["noise_multiplier"], 15, 1e-5, "rdp")
    assert result["epsilon_rdp"] > result["epsilon_pld"]  # RDP's bound is the looser one
    row = central_row(view)
    assert f"spent epsilon {result['epsilon_pld']:.3g} (PLD)" in row["privacy unit and guarantee"]
    assert "per document" in row["privacy unit and guarantee"] and "trusted" in row["trust"]
    assert row[SCORE_LABELS["mae"]] == MAE_NOT_DEFINED
    assert list(view.topic_words.columns) == ["topic", "central DP"]  # no private MCMC topics yet


def test_the_table_holds_the_librarys_scores_for_central_and_local_fits(view):
    view.param.update(accountant="rdp", sampling_rate=0.2, n_epochs=3)
    view.fit()
    view.fits.start()
    drain_until(view, lambda: view.status == "done" and not view.fits.running)
    view.refresh()  # the runners' last results (the view follows them at most every 2 s while running)
    # the same central fit by the library alone: the same options and seed
    truth = view.fits.data.truth
    model = PrivateLDA(
        view.fits.settings.n_components, random_state=view.fits.settings.chain_seed, **view.options()
    ).fit(truth.Y)
    expected = score(central_posterior(model, truth.Y), None, truth)
    row = central_row(view)
    for key in ("npmi", "umass", "topic_distance"):
        assert row[SCORE_LABELS[key]] == expected[key] and np.isfinite(expected[key])
    assert view.result["noise_multiplier"] == model.noise_multiplier_
    assert view.result["epsilon_rdp"] == model.epsilon_ <= view.epsilon
    # one row per local fit, with its runner's lpviz.metrics.score and its local guarantee
    local = view.table[view.table["approach"] != CENTRAL_LABEL]
    assert len(local) == len(view.fits.runners) == 3
    for runner in view.fits.runners.values():
        rows = local[local["approach"].str.endswith(runner.label)]
        assert len(rows) == 1
        for key in ("npmi", "umass", "topic_distance", "mae"):
            assert rows.iloc[0][SCORE_LABELS[key]] == runner.result["score"][key]
        expected_unit = (
            "none"
            if runner.method_class.uses_truth
            else "(N=1, epsilon=1)-limited-precision local privacy per document"
        )
        assert expected_unit in rows.iloc[0]["privacy unit and guarantee"]
    assert "nobody is trusted" in local[local["approach"].str.startswith("local:")]["trust"].iloc[0]
    # the top words: the central topics lined up with the private MCMC's by the Hungarian algorithm
    from lpviz import metrics

    private = view.private_topics()
    order = metrics.align_topics(view.result["phi"], private)
    vocab = list(view.fits.data.data.col_labels)
    words = view.topic_words
    assert list(words.columns) == ["topic", "local: private (models the noise)", "central DP (aligned)"]
    for k in range(len(private)):
        assert words.iloc[k, 1] == ", ".join(metrics.top_words(private, n=8, vocab=vocab)[k])
        assert words.iloc[k, 2] == ", ".join(metrics.top_words(view.result["phi"][order], n=8, vocab=vocab)[k])
    html = table_html(view.table)
    assert html.count("<tr>") == 1 + 4 and "n/a: only the topics are released" in html


def test_a_local_fit_gets_its_row_with_its_first_saved_sample_not_before(view):
    # a snapshot in the burn-in has a score without topics: a row then would show empty score cells
    view.fits.settings.param.update(n_iter=20_000, burn_in=19_000, thin=10)
    view.fits.start()
    drain_until(view, lambda: any(r.result and r.result.get("score") for r in view.fits.runners.values()))
    assert any(r.result["score"]["samples"] == 0 for r in view.fits.runners.values() if r.result)
    view.refresh()
    assert view.table.empty
    view.fits.stop()
    drain_until(view, lambda: not view.fits.running)


def test_cancel_stops_the_fit(view):
    # many steps with a fixed noise multiplier (no calibration): far longer than the test waits
    view.param.update(budget="noise_multiplier", noise_multiplier=1.0, sampling_rate=0.01, n_epochs=1000)
    with pytest.raises(ValueError, match="90,000 steps; the dashboard runs at most 10,000"):
        view.fit()  # too many steps: refused before any work
    assert view.status == "error" and view._thread is None
    view.param.update(sampling_rate=0.02, n_epochs=200)  # batches of 2: 45 steps an epoch, 9,000 in all
    view.fit()
    drain_until(view, lambda: view.status == "running" and view.step >= 2)
    view.cancel()
    drain_until(view, lambda: view.status == "cancelled")
    assert view.join(timeout=30)
    view.drain()
    assert view.status == "cancelled" and view.result is None and view.step < view.n_steps == 9_000
    assert central_row_count(view) == 0
    # and a new fit runs after it
    view.param.update(budget="epsilon", accountant="rdp", sampling_rate=0.2, n_epochs=1)
    view.fit()
    drain_until(view, lambda: view.status == "done")
    assert central_row_count(view) == 1


def central_row_count(view):
    return int((view.table["approach"] == CENTRAL_LABEL).sum()) if not view.table.empty else 0


def test_new_data_discard_the_central_fit(view):
    view.param.update(accountant="rdp", sampling_rate=0.2, n_epochs=1)
    view.fit()
    drain_until(view, lambda: view.status == "done")
    assert central_row_count(view) == 1
    view.fits.settings.seed = 3  # another data set
    drain_until(view, lambda: not view.fits.data.loading)
    assert view.status == "idle" and view.result is None and central_row_count(view) == 0


def shown_text(view):
    """The explanation the tab shows, and whether its controls and tables are visible."""
    _, body = view.__panel__().objects
    return view.explanation().object, body.visible


def test_network_data_get_the_explanation_and_nothing_else():
    view = make_view(source="synthetic-blocks")
    try:
        assert view.fits.data.model == "blocks"
        text, body_visible = shown_text(view)
        assert "topic model for documents x words" in text and body_visible is False
        view.fit()  # refused with the reason, nothing started
        assert view.status == "error" and "documents x words" in view.error and view._thread is None
        assert view.table.empty and view.topic_words.empty
        view.fits.settings.source = "synthetic-topics"  # documents again: the tab comes back
        text, body_visible = shown_text(view)
        assert "Central DP" in text and body_visible is True
    finally:
        view.fits.close()


def test_a_release_without_truth_says_the_central_model_cannot_run(tmp_path):
    from lpviz.datasets import make_topics

    release = make_topics(n_docs=30, n_words=12, n_topics=2, random_state=1).privatize(epsilon=2.0, N=1.0)
    view = make_view()
    try:
        view.fits.data.load_upload(release.save(tmp_path / "noised.npz").read_bytes(), "noised.npz")
        assert view.fits.data.truth is None and view.fits.data.model == "topics"
        text, body_visible = shown_text(view)
        assert "without its true counts" in text and "cannot run" in text and body_visible is False
        view.fit()
        assert view.status == "error" and "cannot run" in view.error and view._thread is None
        assert view.table.empty
    finally:
        view.fits.close()


def test_the_central_epsilon_follows_the_sessions_eps_over_n(view):
    view.fits.settings.param.update(epsilon=3.0, N=2.0)
    assert view.epsilon == 1.5
    view.epsilon = 4.0  # typed: stands until the session's level changes again
    assert view.epsilon == 4.0


def test_a_central_fit_too_large_for_the_session_is_refused(view, monkeypatch):
    from lpviz.budget import MemoryBudgetError
    from lpviz.dashboard.session.memory import central_bytes, check_session, expected_sessions, session_bytes

    shape, fits = (90, 15), view.fits
    chains = session_bytes(shape, "topics", 3, list(fits.active))
    # room for the session's data and chains, not for the central fit beside them
    monkeypatch.setenv("LPVIZ_MEMORY_LIMIT", str(expected_sessions() * (chains + central_bytes(shape, 3) // 2)))
    check_session(shape, "the data", "topics", 3, list(fits.active))  # the chains alone fit
    with pytest.raises(MemoryBudgetError, match="central fit"):
        view.fit()
    assert view.status == "error" and view._thread is None


def test_the_central_vs_local_preset_fits_the_central_model_on_enron(enron_tarball):
    from lpviz.dashboard.session.presets import PRESETS

    preset = PRESETS["Central vs local"]
    assert "delta 1e-5" in preset.text and "eps/N = 1" in preset.text and "trusted" in preset.text
    view = make_view(preset="Central vs local", path=str(enron_tarball))
    try:
        data = view.fits.data
        assert data.error == "" and data.model == "topics" and data.truth.Y.shape == (400, 800)
        assert view.epsilon == 1.0  # central epsilon = the preset's eps/N
        view.param.update(accountant="rdp", n_epochs=1)
        view.fit()
        drain_until(view, lambda: view.status == "done")
        row = central_row(view)
        assert np.isfinite(row[SCORE_LABELS["npmi"]]) and np.isfinite(row[SCORE_LABELS["umass"]])
        assert SCORE_LABELS["topic_distance"] not in view.table  # Enron has no true topics
        vocab = set(data.data.col_labels)
        assert len(view.topic_words) == 10
        assert all(word in vocab for words in view.topic_words["central DP"] for word in words.split(", "))
    finally:
        view.fits.close()
