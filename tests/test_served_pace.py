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


def test_a_costly_score_is_taken_at_most_its_share_of_the_chains_time(monkeypatch):
    """A snapshot's score costs its chain at most SNAPSHOT_SHARE of its computing time: after a score
    costing ``cost`` of the chain's CPU the next waits cost / share (at most SCORE_SECONDS_MAX), while
    the snapshots between keep their pace with the last score. The cost is charged to the chain's CPU
    clock (no busy wait): at 0.2 s a score the next is 10 s away, so a 5 s run scores twice (its first
    iteration, and the first due snapshot after it), where the old cap (2 s) scored three times or more."""
    import types

    import lpviz.metrics
    from lpviz.dashboard.session import chain
    from lpviz.dashboard.session.fits import Fits

    cost, charged, calls, lock, inner = 0.2, {}, [], threading.Lock(), threading.local()
    real_score, real_thread_time = lpviz.metrics.score, time.thread_time

    def costly_score(*args, **kwargs):
        if kwargs.get("diagnostics") == "trace" and not getattr(inner, "depth", 0):  # (not an ensemble's chains')
            with lock:
                name = threading.current_thread().name
                charged[name] = charged.get(name, 0.0) + cost
                calls.append(name)
        inner.depth = getattr(inner, "depth", 0) + 1
        try:
            return real_score(*args, **kwargs)
        finally:
            inner.depth -= 1

    def thread_time():
        return real_thread_time() + charged.get(threading.current_thread().name, 0.0)

    monkeypatch.setattr(lpviz.metrics, "score", costly_score)
    monkeypatch.setattr(chain, "time", types.SimpleNamespace(**{**vars(time), "thread_time": thread_time}))
    assert cost / chain.SNAPSHOT_SHARE >= chain.SCORE_SECONDS_MAX == 10.0
    fits = Fits(DataStore(Settings(preset="Figure 3 (large alpha0)", n_iter=100_000, burn_in=0), background=False))
    fits.start()
    try:
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            time.sleep(0.2)
            fits.drain()
        snapshots = {method: runner.result for method, runner in fits.active.items()}
    finally:
        fits.stop()
        for runner in fits.active.values():
            runner.join(timeout=30)
    names = {f"lpviz-{method}-chain" for method in fits.active}
    assert set(calls) <= names and len(names) == 3
    for name in names:
        assert 1 <= calls.count(name) <= 2, (name, calls.count(name))
    for method, result in snapshots.items():  # the views still have rates and the last score
        assert result and result["score"], method


def test_the_warm_up_loads_what_a_runs_final_score_needs():
    """A fresh process's first final score imported ArviZ (with matplotlib), xarray and SciPy's
    optimiser while every chain of the run waited (2-5 s): the session's warm-up does it first."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from lpviz.dashboard.session.warmup import warm_up_kernels\n"
        "before = {'arviz', 'xarray', 'scipy.optimize'} & set(sys.modules)\n"
        "warm_up_kernels()\n"
        "print(sorted(before), sorted({'arviz', 'xarray', 'scipy.optimize'} & set(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert out.stdout.split("\n")[0] == "[] ['arviz', 'scipy.optimize', 'xarray']", out.stdout + out.stderr
