"""Issue 15 (teaching): convergence on the scoreboard, network views, teaching mode; in-process."""

import re

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
    assert chain_convergence(posterior_with_trace(np.arange(7.0))) == {"rhat": None, "ess": None,
                                                                      "trace_name": "log_joint"}
    assert chain_convergence(posterior_with_trace(np.ones(100)))["rhat"] is None


def test_score_reports_split_rhat_and_ess_of_a_real_chain():
    from lpviz.engine import run
    from lpviz.release import Release

    Y = np.random.default_rng(0).poisson(2.0, size=(12, 10))
    chain_run = run(Release(Y_obs=Y, alpha=0.5, kind="documents"), model="topics", method="naive",
                    n_components=2, n_iter=300, burn_in=100, thin=10, random_state=0)
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

    from app.fits_view import BEST_MARK, CONVERGENCE_NOTE, SCOREBOARD_KEYS, scoreboard_html

    assert "rhat" in SCOREBOARD_KEYS and "ess" in SCOREBOARD_KEYS
    frame = pd.DataFrame({"method": ["a", "b", "c"], "MAE": [1.0, 2.0, 3.0], "R-hat": [1.3, 0.995, 1.002],
                          "ESS": [10.0, 50.0, 40.0]})
    html = scoreboard_html(frame)
    assert "R-hat<br><small>(split, 1 chain)</small>" in html and CONVERGENCE_NOTE in html
    rows = {cells[0]: cells for cells in (re.findall(r"<td>(.*?)</td>", row) for row in re.findall(r"<tr>(<td>.*?)</tr>", html))}
    assert BEST_MARK in rows["c"][2] and BEST_MARK not in rows["b"][2] and BEST_MARK not in rows["a"][2]
    assert BEST_MARK in rows["b"][3]  # the largest ESS
    assert CONVERGENCE_NOTE not in scoreboard_html(frame.drop(columns=["R-hat", "ESS"]))
