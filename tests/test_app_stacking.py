"""The Fits tab's stacked fit, modes and method comparison (issue 54 item 5), without a browser.

The stacking pane (its height fixed from the start) shows an ensemble's stacked MAE beside its pooled
MAE and the best constant's, and the modes in words, only from the final score (diagnostics=True); a
live snapshot's (diagnostics="trace") has none, and nothing is shown then; the scoreboard keeps its
columns. The comparison is :func:`lpviz.compare` of the finished fits, the app computing nothing.
"""

import re
import time
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

import lpviz
from lpviz.dashboard.session.datastore import DataStore
from lpviz.dashboard.session.fits import Fits
from lpviz.dashboard.session.settings import Settings
from lpviz.dashboard.views import compare_view
from lpviz.dashboard.views.compare_view import CompareView, compare_fits, compare_html, finished_fits, run_key
from lpviz.dashboard.views.fits_view import (
    BASELINE_SUFFIX,
    STACKED_LABELS,
    STACKING_HEIGHT,
    STACKING_WAITING,
    board_frame,
    modes_text,
    scoreboard_html,
    stacking_box,
)
from lpviz.datasets import make_blocks

TIMEOUT = 120


@pytest.fixture(scope="module")
def tiny():
    """Two methods' 2-chain ensembles on a small network with held-out cells, and their scores."""
    network = make_blocks(n_actors=20, n_communities=2, epsilon=3.0, random_state=0)
    held = np.random.default_rng(0).random(network.Y_obs.shape) < 0.2
    release, truth = network.release(heldout=held), network.truth()
    fits = {
        name: lpviz.fit(release, model="blocks", method=name, n_components=2, n_iter=80, chains=2, random_state=1)
        for name in ("private", "naive")
    }
    final = {name: lpviz.score(fit, release, truth) for name, fit in fits.items()}
    live = {name: lpviz.score(fit, release, truth, diagnostics="trace") for name, fit in fits.items()}
    return SimpleNamespace(release=release, truth=truth, fits=fits, final=final, live=live)


def runners(scores):
    return [SimpleNamespace(label=name, result={"score": each}) for name, each in scores.items()]


def text_of(html):
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).replace("&#x27;", "'")


def test_the_final_score_puts_the_stacked_mae_beside_the_pooled_one_and_the_modes_in_the_pane(tiny):
    frame = board_frame(runners(tiny.final))
    # the scoreboard keeps its columns: the stacked MAEs are in the stacking pane
    assert not any(column.startswith("stacked") for column in frame.columns)
    stacking = frame.attrs["stacking"]
    columns = list(stacking.columns)
    at = columns.index("MAE")
    assert columns[at : at + 3] == ["MAE", "MAE" + BASELINE_SUFFIX, STACKED_LABELS["stacked_mae"]]
    held = columns.index("held-out MAE")
    assert columns[held : held + 3] == [
        "held-out MAE",
        "held-out MAE" + BASELINE_SUFFIX,
        STACKED_LABELS["stacked_heldout_mae"],
    ]
    for name, scores in tiny.final.items():
        row = stacking.set_index("method").loc[name]
        assert row["MAE"] == scores["mae"]
        assert row[STACKED_LABELS["stacked_mae"]] == scores["stacked_mae"]
        assert row[STACKED_LABELS["stacked_heldout_mae"]] == scores["stacked_heldout_mae"]
        assert row["MAE" + BASELINE_SUFFIX] == scores["baselines"]["best_constant_mae"]
        assert row["held-out MAE" + BASELINE_SUFFIX] == scores["baselines"]["best_constant_heldout_mae"]
        assert modes_text(scores) == scores["modes"]["text"] and "chains in" in scores["modes"]["text"]
    assert "chain-modes" not in scoreboard_html(frame)
    table = compare_fits(tiny.fits, tiny.release, tiny.truth)
    shown = stacking_box(True, stacking, table)
    for name, scores in tiny.final.items():
        assert f"<b>{name}</b>: {compare_view.html.escape(scores['modes']['text'])}.</li>" in shown
    assert "compare-table" in shown and "stacking-table" in shown


def test_the_pane_has_one_height_waiting_and_done(tiny):
    frame = board_frame(runners(tiny.final)).attrs["stacking"]
    waiting = stacking_box(False, frame, None)
    done = stacking_box(True, frame, compare_fits(tiny.fits, tiny.release, tiny.truth))
    box = f"<div class='stacking-box' style='height: {STACKING_HEIGHT}; overflow: auto'>"
    assert waiting.startswith(box) and done.startswith(box)
    assert STACKING_WAITING in waiting and "chain-modes" not in waiting
    assert "once every fit has run to its end" in STACKING_WAITING
    # a fit stopped short: the pane names it as why nothing is compared
    stopped = SimpleNamespace(label="naive", status="stopped", _carry={})
    done = SimpleNamespace(label="private", status="done", _carry={"chain_run": SimpleNamespace(posterior="P")})
    _, why = finished_fits([done, stopped])
    shown = stacking_box(True, frame, why)
    assert shown.startswith(box) and "Not compared: naive did not run to its end" in shown


def test_a_live_snapshot_shows_no_stacked_value_and_no_modes(tiny):
    assert all(scores["stacked_mae"] is None and scores["modes"] is None for scores in tiny.live.values())
    frame = board_frame(runners(tiny.live))
    assert frame.attrs["stacking"].empty
    assert frame.attrs["stacking"].attrs["modes"] == {}
    assert "chain-modes" not in stacking_box(True, frame.attrs["stacking"], None)
    # one fit finished, the other still running: only the finished one is shown, never a stale value
    mixed = board_frame(runners({"private": tiny.final["private"], "naive": tiny.live["naive"]})).attrs["stacking"]
    assert list(mixed["method"]) == ["private"]
    assert list(mixed.attrs["modes"]) == ["private"]


def test_one_chain_has_no_stacked_column():
    assert modes_text({"n_chains": 1, "stacking_weights": [1.0], "modes": {"text": "1 chain in 1 mode"}}) == ""


def test_the_comparison_shows_lpviz_compare_its_statements_and_its_rule(tiny):
    table = compare_fits(tiny.fits, tiny.release, tiny.truth)
    expected = lpviz.compare(tiny.fits, tiny.release, tiny.truth)
    pd.testing.assert_frame_equal(table, expected)
    shown = compare_html(table)
    assert shown.count("<tr>") == 1 + len(table)  # the header and one row per method and the constant
    text = text_of(shown)
    assert table.attrs["statements"], "the tiny design states nothing: pick one that does"
    for statement in table.attrs["statements"]:
        assert f"<li>{compare_view.html.escape(statement)}.</li>" in shown
    assert table.attrs["rule"] in text
    for method in table.index:
        assert method in text


def test_no_held_out_cells_say_why_nothing_is_compared(tiny):
    release = make_blocks(n_actors=20, n_communities=2, epsilon=3.0, random_state=0).release()
    fit = lpviz.fit(release, model="blocks", n_components=2, n_iter=40, burn_in=10, thin=5, chains=2, random_state=1)
    why = compare_fits({"private": fit}, release, None)
    assert isinstance(why, str) and "holds none out" in why
    assert "Not compared: " in compare_html(why)
    assert compare_html("") == ""
    assert "once every fit has run to its end" in compare_html(None)


def test_finished_fits_wait_for_every_runner_and_name_one_whose_chains_are_elsewhere():
    done = SimpleNamespace(label="a", status="done", _carry={"chain_run": SimpleNamespace(posterior="P")})
    running = SimpleNamespace(label="b", status="running", _carry={})
    remote = SimpleNamespace(label="c", status="done", _carry={"remote_chain": True})
    assert finished_fits([done]) == ({"a": "P"}, None)
    assert finished_fits([done, running]) == (None, None)
    fits, why = finished_fits([done, remote])
    assert fits is None and "c: its chains stay on the cluster" in why
    assert finished_fits([]) == (None, "no method is chosen")
    stopped = SimpleNamespace(label="d", status="stopped", _carry={})
    fits, why = finished_fits([done, stopped, running])
    assert fits is None and why.startswith("d did not run to its end")


def drain_until(fits, condition):
    deadline = time.monotonic() + TIMEOUT
    while not condition():
        assert time.monotonic() < deadline, {m: (r.status, r.error) for m, r in fits.runners.items()}
        assert not any(r.status == "error" for r in fits.runners.values()), [r.error for r in fits.runners.values()]
        time.sleep(0.02)
        fits.drain()


def test_the_view_compares_each_finished_run_once_and_forgets_it_at_reset(monkeypatch):
    calls = []
    real = compare_view.compare_fits
    monkeypatch.setattr(compare_view, "compare_fits", lambda *args: calls.append(args) or real(*args))
    settings = Settings(source="synthetic-blocks", noise_seed=7, holdout="top actors", holdout_actors=2)
    fits = Fits(DataStore(settings), buffer_length=10_000)
    try:
        settings.param.update(methods=["private", "naive"], chains=2, n_iter=60, burn_in=20, thin=10)
        view = CompareView(fits=fits)
        assert view.outcome is None  # held-out cells, nothing run: the waiting line
        for runner in fits.active.values():
            runner.start()
        drain_until(fits, lambda: all(r.status == "done" for r in fits.active.values()))
        table = view.outcome
        assert isinstance(table, pd.DataFrame), table
        posteriors = {r.label: r._carry["chain_run"].posterior for r in fits.active.values()}
        expected = lpviz.compare(posteriors, fits.data.release, fits.data.truth)
        pd.testing.assert_frame_equal(table, expected)
        assert table.attrs["statements"] == expected.attrs["statements"]
        view.refresh()  # the same run: not compared again
        assert len(calls) == 1
        key = run_key(list(fits.active.values()))
        fits.reset()
        drain_until(fits, lambda: all(r.status == "idle" for r in fits.active.values()))
        assert view.outcome is None and run_key(list(fits.active.values())) != key
    finally:
        fits.close()
        for runner in fits.runners.values():
            runner.join(timeout=30)


def test_the_comparison_exports_as_the_table_the_pane_shows_and_is_refused_in_words_before():
    """Issue 54 (left item): the compare table, exported from the Export tab as CSV, is
    lpviz.compare of the finished fits; before the run ends, or without held-out cells, the export
    says why in words."""
    import io

    from lpviz.dashboard.views.export import comparison_bytes

    settings = Settings(source="synthetic-blocks", noise_seed=7, holdout="top actors", holdout_actors=2)
    fits = Fits(DataStore(settings), buffer_length=10_000)
    try:
        settings.param.update(methods=["private", "naive"], chains=2, n_iter=60, burn_in=20, thin=10)
        with pytest.raises(ValueError, match="nothing to compare yet: the fits have not all run to their end"):
            comparison_bytes(fits)
        for runner in fits.active.values():
            runner.start()
        drain_until(fits, lambda: all(r.status == "done" for r in fits.active.values()))
        exported = pd.read_csv(io.BytesIO(comparison_bytes(fits)), index_col="method")
        posteriors = {r.label: r._carry["chain_run"].posterior for r in fits.active.values()}
        expected = lpviz.compare(posteriors, fits.data.release, fits.data.truth)
        assert list(exported.index) == list(expected.index) and list(exported.columns) == list(expected.columns)
        for column in ("rank", "elpd", "se", "weight", "mae", "best_constant_mae"):
            np.testing.assert_array_equal(exported[column].to_numpy(float), expected[column].to_numpy(float))
        # the stacking pane's comparison is read, not computed again, and it is the same table
        pane = CompareView(fits=fits)
        drain_until(fits, lambda: isinstance(pane.outcome, pd.DataFrame))
        calls = []
        original = compare_view.compare_fits
        compare_view.compare_fits = lambda *args: calls.append(args) or original(*args)
        try:
            assert comparison_bytes(fits, pane) == comparison_bytes(fits) and len(calls) == 1
        finally:
            compare_view.compare_fits = original
        settings.holdout = "none"
        with pytest.raises(ValueError, match="no held-out cells"):
            comparison_bytes(fits)
    finally:
        fits.close()
        for runner in fits.runners.values():
            runner.join(timeout=30)


def test_the_pane_says_when_every_fits_mae_is_above_the_best_constant_and_none_is_starred(tiny):
    """Every fit's MAE above its best constant (Figure 4, Central vs local, Figure 5's held-out cells:
    the median, 0, wins on sparse counts): the pane says so at the end, naming the constant, and no MAE
    is starred; where a fit beats it (the tiny network's fits do) nothing is said (issue 57 LOW 27)."""
    import copy

    from lpviz.dashboard.views.fits_view import BEST_MARK, above_constant_note

    final = board_frame(runners(tiny.final))
    assert above_constant_note(final) == "" and "above-constant" not in stacking_box(
        True, final.attrs["stacking"], None
    )
    assert all(s["mae"] < s["baselines"]["best_constant_mae"] for s in tiny.final.values())  # the power case holds
    sparse = copy.deepcopy(tiny.final)
    lowest = min(s["mae"] for s in sparse.values())
    for scores in sparse.values():  # a constant below every fit's MAE, as on sparse counts
        scores["baselines"]["best_constant_mae"] = lowest * 0.9
        scores["baselines"]["best_constant"] = 0.0
    frame = board_frame(runners(sparse))
    note = above_constant_note(frame)
    assert note.startswith("Every fit's MAE (the best constant 0) is above the best constant's.")
    assert "held-out MAE" not in note.split(".")[0]  # the held-out MAEs still beat theirs
    assert "on the held-out noised cells (below)" in note
    shown = stacking_box(True, frame.attrs["stacking"], None)
    assert f"<p class='above-constant'>{compare_view.html.escape(note)}</p>" in shown
    mae_column = list(frame.columns).index("MAE")
    for row in re.findall(r"<tr>(<td>.*?)</tr>", scoreboard_html(frame)):
        assert BEST_MARK not in re.findall(r"<td>(.*?)</td>", row)[mae_column]
    # each fit's own check agrees: none of them may be ranked on MAE
    assert not any(lpviz.metrics.rankable(scores, "mae")[0] for scores in sparse.values())
