"""The chain loop itself: :func:`run_chain`, the body of every worker, local or on a Dask worker.

It runs one method's chains (a :class:`ChainGroup`) to a target, level with its session's
:class:`~lpviz.dashboard.session.lockstep.Lockstep` and taking turns at the process's
:class:`~lpviz.dashboard.session.turnstile.Turnstile`, and posts trace rows (:func:`_row`) and
result snapshots (:func:`_snapshot`) it copies itself. :class:`LocalPlace` runs workers as
threads of this process.
"""

import math
import os
import sys
import threading
import time

from lpviz.dashboard.serving.throttle import ROWS_SECONDS, SNAPSHOT_SECONDS, Throttle
from lpviz.dashboard.session.control import WAKE_SECONDS
from lpviz.dashboard.session.lockstep import Lockstep
from lpviz.dashboard.session.traces import CHAIN_TRACES, MAX_CHAINS, TRACE_SCORES
from lpviz.dashboard.session.turnstile import giving_way
from lpviz.dashboard.session.warmup import warm_up_kernels

# A snapshot's score (R-hat, ESS, each chain's scores: 10-60 ms on Figure 3's two chains, 50-130 ms on
# Figure 1's) takes at most this share of its chain's computing time: the next score waits cost / share
# if that is longer than SNAPSHOT_SECONDS, and at most SCORE_SECONDS_MAX. The snapshots between (the
# rates the views redraw from: copies, cheap) keep their SNAPSHOT_SECONDS and the last score. Capped at
# VIEW_SECONDS, as the snapshots were, Figure 1's scores took a third of its chains' CPU.
SNAPSHOT_SHARE = 0.02
SCORE_SECONDS_MAX = 10.0

# Tests only (tests/test_browser_stop_final.py): seconds every stop check of a run's final score waits
# (unless Stop, Reset or the session's end comes first): a final score as slow as Enron's under load,
# in a served app the test cannot patch. Unset (always, outside that test): no wait.
SLOW_FINAL_SCORE_ENV = "LPVIZ_TEST_SLOW_FINAL_SCORE"


def _number(value):
    return math.nan if value is None else float(value)


class LocalPlace:
    """Workers as daemon threads of this process (the default).

    A place launches a runner's worker (:meth:`launch` returns a handle with ``is_alive()`` and
    ``join(timeout)``), warms up what the workers need when a served session opens
    (:meth:`warm_up`) and lets go of what it holds when the session ends (:meth:`close`).
    """

    def warm_up(self):  # (compiling at a lower priority too: the page being built comes first)
        threading.Thread(target=giving_way(warm_up_kernels), name="lpviz-warm-up", daemon=True).start()

    def close(self):
        """Nothing to let go: the session's threads have left (:meth:`session.fits.Fits.close` joined them)."""

    def launch(self, runner, generation, problem, carry, target, control):
        thread = threading.Thread(
            target=giving_way(runner.work),
            name=f"lpviz-{runner.method}-chain",
            args=(generation, problem, carry, target, control),
            daemon=True,
        )
        thread.start()
        return thread


def run_chain(method_name, problem, carry, target, control, post, pace, turns):
    """Run one chain to ``target`` iterations: the body of every worker, local or on a Dask worker.

    ``post(kind, payload)`` hands over trace rows, result snapshots and the end
    ("paused", "done", "error"); ``carry`` holds what a continuation needs (the
    chain run, its state and scores) and is filled in when the run ends.
    """
    from lpviz import methods
    from lpviz.driver import run
    from lpviz.engine import ChainStopped
    from lpviz.metrics import ScoreStopped, TraceErrors, score

    pace, token = pace or Lockstep(), object()  # a private Lockstep never waits
    release, truth = problem.release, problem.truth
    schedule = carry["schedule"]
    stride = schedule["stride"]
    rows, state, chain_run = [], carry.get("state"), carry.get("chain_run")
    # the posterior's error numbers, for the trace rows, at every saved sample; its full score (topics,
    # R-hat: tens of milliseconds) only for the snapshots the views read, at most every SNAPSHOT_SECONDS
    row_score, row_scored_at = carry.get("row_score", {}), carry.get("row_scored_at", 0)
    posterior_score, scored_at = carry.get("posterior_score", {}), carry.get("scored_at", 0)
    rows_due, snapshot_due, score_due = Throttle(ROWS_SECONDS), Throttle(SNAPSHOT_SECONDS), Throttle(SNAPSHOT_SECONDS)
    row_scores = None  # made with the chain (its model's structural zeros)
    inside, turn_ends = False, 0.0
    control.wakers += [turns.wake, pace.wake]

    def stopped():  # every score here leaves between row blocks once Stop, Reset or the session's end asks
        return control.stopped

    slow, said = float(os.environ.get(SLOW_FINAL_SCORE_ENV) or 0), []

    def slowly_stopped():  # (tests only: SLOW_FINAL_SCORE_ENV) each check of the final score waits
        if not said:  # the test reads on the server's output that this chain is in its final score
            said.append(method_name)
            # one write: print() writes the line and its end apart, and two chains' lines came out as
            # "@@...: naive@@...: nonprivate" (the test then waited for a third chain for ever)
            sys.stderr.write(f"@@final score waits: {method_name}\n")
            sys.stderr.flush()
        control.stop_event.wait(slow)
        return control.stopped

    def flush():
        nonlocal rows
        if rows or state is not None:
            post("rows", (rows, state.iteration if state is not None else 0, time.perf_counter()))
            rows = []

    def snapshot(final=False, rescore=True):
        # while the chains run, their diagnostics are the likelihood trace's (all the scoreboard and the
        # health read; the probe cells and topics of several chains cost seconds on Enron); the end's all.
        # Not ``rescore``: the last score goes with the new rates (its cost share: SNAPSHOT_SHARE)
        nonlocal posterior_score, scored_at
        if state is not None:
            saved = (chain_run.last_saved, final)
            if saved != scored_at and (rescore or not posterior_score):  # without a truth: the fit's own numbers
                diagnostics = True if final else "trace"
                posterior_score = score(
                    chain_run.posterior,
                    release,
                    truth,
                    diagnostics=diagnostics,
                    should_stop=slowly_stopped if final and slow else stopped,
                )
                scored_at = saved
            post("result", _snapshot(state, chain_run, posterior_score))

    def give_turn():
        nonlocal inside
        if inside:
            turns.leave()
            inside = False

    try:
        if chain_run is None:
            method = methods.create(method_name, **schedule["options"])
            # a CAVI fit has no burn-in or thinning: its one "sample" is the current q
            plan = (
                dict(inference="vi")
                if problem.inference == "vi"
                else dict(burn_in=schedule["burn_in"], thin=schedule["thin"])
            )
            chain_run = ChainGroup(
                run(
                    release,
                    model=problem.model,
                    method=method,
                    n_components=problem.n_components,
                    n_iter=target,
                    truth=truth if method.uses_truth else None,
                    random_state=problem.seed,
                    chains=1 if problem.inference == "vi" else problem.chains,
                    **plan,
                )
            )
        chain_run.n_iter = target  # a finished run continues to the new target
        row_scores = TraceErrors(release, truth, chain_run.chain.model_instance)
        control.attach(chain_run)
        pace.join(token)
        while not control.stopped:
            if not control.run_event.is_set():  # pausing: hand everything over, then say so
                give_turn()
                flush()
                snapshot()
                pace.leave(token)  # a paused chain holds nobody back
                answered = None
                while not control.run_event.is_set():
                    if answered != control.pauses:  # each pause answered (pause, resume, pause while waiting)
                        answered = control.pauses
                        post("paused", answered)
                    control.run_event.wait(WAKE_SECONDS)
                pace.join(token)
                continue
            if pace.ahead(token):  # level with the session's slowest chain, holding no turn meanwhile
                give_turn()
                pace.wait(token, control)
                continue
            if not inside:
                if not turns.enter(control):
                    continue  # stopped or paused while in line
                inside, turn_ends = True, time.monotonic() + turns.turn_seconds
            try:
                state = next(chain_run)
            except StopIteration:
                break
            pace.advance(token)
            if state.iteration % stride == 0 or state.iteration == 1:
                saved = chain_run.last_saved
                if saved != row_scored_at:  # only for traced rows: a long run saves many samples per row
                    row_score = row_scores(chain_run.posterior, stopped)
                    row_scored_at = saved
                rows.append(_row(state, row_scores(state, stopped), row_score, chain_run.states[1:]))
            now = time.monotonic()
            if rows_due.due(now) or state.iteration == 1:
                flush()
            if (snapshot_due.due(now) or state.iteration == 1) and not control.stopped:
                rescore = score_due.due(now) or state.iteration == 1
                spent = time.thread_time()  # this chain's CPU: under load or other chains the wall time says more
                snapshot(rescore=rescore)  # (a Stop answers without this snapshot's score: the last one stays)
                cost = time.thread_time() - spent  # (the first one's loads the scores' modules: not counted)
                if rescore and state.iteration > 1 and cost > SNAPSHOT_SHARE * SNAPSHOT_SECONDS:
                    score_due.defer(min(cost / SNAPSHOT_SHARE, SCORE_SECONDS_MAX))
            if now >= turn_ends:
                give_turn()  # to the back of the line
        give_turn()
        pace.leave(token)  # a finished chain holds nobody back (nor joins a next run's lockstep)
        flush()
        # the chain has left: the runner need not wait for the rest (ChainRunner._leave)
        post("ending")
        if not control.stopped:
            # the final snapshot scores the whole posterior (topics, diagnostics: 4-12 s for Figure 4's two
            # chains under load): a Stop before it keeps the snapshot of half a second ago; a Stop or
            # Reset during it answers at once (the "ending" above) and the score leaves at its next row
            # block (ScoreStopped), so the worker (and a closing session joining it) waits for nothing
            snapshot(final=True)
            carry.update(
                chain_run=chain_run,
                state=state,
                posterior_score=posterior_score,
                scored_at=scored_at,
                row_score=row_score,
                row_scored_at=row_scored_at,
            )
            post("done")
    except (ChainStopped, ScoreStopped):  # Stop, Reset or the session closed: keep what was handed over
        flush()
    except Exception as exc:  # shown in the UI instead of dying silently in a thread
        post("error", f"{type(exc).__name__}: {exc}")
    finally:
        give_turn()
        pace.leave(token)
        control.wakers.clear()


def _row(state, own, posterior_score, others=()):
    """A trace row: chain 0's state and scores, the posterior's, and the other chains' traces."""
    others = list(others) + [None] * (MAX_CHAINS - 1 - len(others))
    return (
        state.iteration,
        _number(state.log_joint),
        _number(state.log_marginal),
        _number(getattr(state, "elbo", None)),
        *(_number(own.get(key)) for key in TRACE_SCORES),
        *(_number(posterior_score.get(key)) for key in TRACE_SCORES),
        *(math.nan if other is None else _number(getattr(other, trace)) for other in others for trace in CHAIN_TRACES),
    )


class ChainGroup:
    """The chains of one method, stepped in turn in the runner's worker: what the worker iterates.

    ``run(...)`` with ``chains=C`` gives an :class:`lpviz.ensemble.EnsembleRun` (C Runs); each
    ``next()`` advances every chain one iteration (chain 0 first: exactly the single chain of the
    seed) and returns chain 0's state, ``states`` holding every chain's. ``posterior``: the
    ensemble's (pooled rates; :func:`lpviz.metrics.score` judges the chains against each other),
    or the one chain's. One thread steps them: the session's turns and lockstep see one worker.
    """

    def __init__(self, chain_run):
        self.runs = list(getattr(chain_run, "runs", [chain_run]))
        self.states = []
        # the chains' computing time, summed as they go: Posterior.seconds sums every iteration's anew
        self._seconds = sum(run.posterior.seconds for run in self.runs) if len(self.runs) > 1 else 0.0

    @property
    def chain(self):
        return self.runs[0].chain

    @property
    def n_iter(self):
        return self.runs[0].n_iter

    @n_iter.setter
    def n_iter(self, value):
        for run in self.runs:
            run.n_iter = value

    @property
    def posterior(self):
        if len(self.runs) == 1:
            return self.runs[0].posterior
        from lpviz.ensemble import EnsemblePosterior

        # stepped in turn by one thread: the ensemble's computing time is the chains' sum
        return EnsemblePosterior([run.posterior for run in self.runs], seconds=self._seconds)

    @property
    def last_saved(self):
        """:func:`_last_saved` of :attr:`posterior`, without building it."""
        for run in reversed(self.runs):
            if run.posterior.saved_iterations:
                return run.posterior.saved_iterations[-1]
        return 0

    def stop(self):
        for run in self.runs:
            run.stop()

    def __iter__(self):
        return self

    def __next__(self):
        states = []
        for index, run in enumerate(self.runs):
            state = next(run)
            state.chain = index
            states.append(state)
            self._seconds += state.seconds
        self.states = states
        return states[0]


def _snapshot(state, chain_run, posterior_score):
    """What the views read, copied in the worker (nothing here is touched by the chain again)."""
    posterior = chain_run.posterior
    return dict(
        iteration=state.iteration,
        mu=state.mu.copy(),
        mu_hat=posterior.mu_hat,
        best=posterior.best,
        best_log_joint=posterior.best_log_joint if posterior.best else None,
        samples_saved=posterior.n_saved,
        score=dict(posterior_score),
        bessel_draws=getattr(chain_run.chain, "bessel_draws", None),
        model=chain_run.chain.model_instance,
        seconds=posterior.seconds,
        chains=len(chain_run.runs),
    )


def _last_saved(posterior):
    """The iteration of the posterior's last saved sample (0 before the first): what its scores
    depend on (a CAVI fit's one "sample", its q, changes every iteration)."""
    return posterior.saved_iterations[-1] if posterior.saved_iterations else 0
