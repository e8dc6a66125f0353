"""Issue 56 item 1: the chain loop's per-row shortcuts give the numbers the library gives.

A trace row's error numbers come from ``lpviz.metrics.TraceErrors`` (cell masks built once per run), not from
``lpviz.metrics.score`` at every row: they must be score's bit for bit, for chain states and
posteriors, with held-out cells and a network's self loops; the ensemble's seconds and last saved
iteration come from ``ChainGroup`` without rebuilding the posterior; the lockstep wakes waiters only
when the slowest chain steps, and still keeps them level.
"""

import threading
import time

import pytest

import lpviz
from lpviz.dashboard.session.chain import ChainGroup, _last_saved
from lpviz.dashboard.session.control import Control
from lpviz.dashboard.session.datastore import DataStore
from lpviz.dashboard.session.lockstep import Lockstep
from lpviz.dashboard.session.settings import Settings
from lpviz.dashboard.session.traces import TRACE_SCORES
from lpviz.metrics import TraceErrors, score


def _data(**settings):
    data = DataStore(Settings(**settings), background=False)
    assert data.error == "", data.error
    return data


@pytest.mark.parametrize(
    "settings",
    [
        dict(preset="Figure 1", holdout="top actors", holdout_actors=2),
        dict(preset="Figure 3 (large alpha0)"),
        dict(preset="Figure 3 (large alpha0)", holdout="random cells"),
    ],
    ids=["blocks-heldout", "topics", "topics-heldout"],
)
@pytest.mark.parametrize("method", ["private", "naive"])
def test_row_scores_are_scores_bit_for_bit(settings, method):
    data = _data(**settings)
    release, truth = data.release, data.truth
    group = ChainGroup(
        lpviz.run(release, method=method, n_components=3, n_iter=60, burn_in=20, thin=5, random_state=1, chains=2)
    )
    rows = TraceErrors(release, truth, group.chain.model_instance)
    assert rows.fast
    assert rows(group.posterior) == {}  # no sample yet: score() has no error numbers either
    for state in group:
        if state.iteration % 20:
            continue
        for fit in (state, group.posterior, group.runs[1].posterior):
            expected = score(fit, release, truth, topics=False, diagnostics=False)
            got = rows(fit)
            for key in TRACE_SCORES:
                assert got.get(key) == expected[key], (key, got.get(key), expected[key])
    assert TraceErrors(release, None, group.chain.model_instance)(state) == {}  # no truth: no error numbers


def test_chain_group_keeps_the_posteriors_seconds_and_last_sample():
    release = _data(preset="Figure 3 (large alpha0)").release
    group = ChainGroup(lpviz.run(release, method="naive", n_components=3, n_iter=40, burn_in=10, thin=7, chains=2))
    assert group.last_saved == _last_saved(group.posterior) == 0
    for _ in group:
        assert group.last_saved == _last_saved(group.posterior)
    seconds = sum(run.posterior.seconds for run in group.runs)
    assert group.posterior.seconds == pytest.approx(seconds, rel=1e-9)


def test_the_lockstep_wakes_a_waiter_when_the_slowest_steps_and_not_otherwise():
    pace, control = Lockstep(slack=2), Control()
    slow, middle, fast = object(), object(), object()
    for token in (slow, middle, fast):
        pace.join(token)
    for _ in range(5):
        pace.advance(fast)
        pace.advance(middle)
    assert pace.ahead(fast)
    released = threading.Event()

    def wait():
        pace.wait(fast, control)
        released.set()

    waiter = threading.Thread(target=wait, daemon=True)
    waiter.start()
    for _ in range(3):
        pace.advance(slow)
    assert released.wait(timeout=0.2)  # woken at once, well before WAKE_SECONDS (0.25 s)
    waiter.join(timeout=5)
    started = time.monotonic()
    pace.wait(fast, control)  # level: no wait
    assert time.monotonic() - started < 0.1
