"""`lpviz fit --data synthetic-topics-blockwise:... [--scheduler ADDRESS]`: the generator's rows built on
the workers give the fit the same spec gives in one process, bit for bit; what it cannot do is refused."""

import json
import math
import re

import pytest

from lpviz.cli import fit as cli_fit
from lpviz.cli import main

SPEC = "synthetic-topics-blockwise:n_docs=3000,n_words=60,n_topics=3"
RUN = ["--iterations", "30", "--seed", "5", "--noise-seed", "7", "--json", "--no-progress"]


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _fit(capsys, *argv):
    code, out, err = run(capsys, "fit", *argv, *RUN)
    assert code == 0, err
    return json.loads(out)


def _without_seconds(value):
    """The summary with its timings left out (seconds, iterations per second)."""
    if isinstance(value, dict):
        return {k: _without_seconds(v) for k, v in value.items() if k not in ("seconds", "iterations_per_second")}
    if isinstance(value, list):
        return [_without_seconds(v) for v in value]
    return value


@pytest.mark.parametrize(
    ("method", "inference"), [("private", "mcmc"), ("naive", "mcmc"), ("nonprivate", "mcmc"), ("all", "vi")]
)
def test_the_cluster_fits_the_generator_as_one_process_does(client, capsys, monkeypatch, method, inference):
    import lpviz.driver
    from lpviz.datasets import BlockwiseTopics
    from lpviz.distributed import DistributedPosterior
    from lpviz.release import Release

    monkeypatch.delenv("LPVIZ_SCHEDULER", raising=False)
    fits, fit = [], lpviz.driver.fit

    def spy(data, **options):  # what lpviz.fit got, and what it gave
        posterior = fit(data, **options)
        fits.append((type(data), type(posterior)))
        return posterior

    monkeypatch.setattr(lpviz.driver, "fit", spy)
    here = _fit(capsys, "--data", SPEC, "--method", method, "--inference", inference)
    address = client.scheduler.address
    there = _fit(capsys, "--data", SPEC, "--method", method, "--inference", inference, "--scheduler", address)
    n = len(fits) // 2
    assert all(data is Release and posterior is not DistributedPosterior for data, posterior in fits[:n])
    assert all(data is BlockwiseTopics for data, _ in fits[n:])  # the workers built the rows
    if inference == "mcmc":
        assert fits[n:] == [(BlockwiseTopics, DistributedPosterior)]
    assert here["shape"] == [3000, 60] and here["n_components"] == 3 and here["alpha"]["per_row"]
    assert all(result["mae"] is not None for result in here["methods"].values())  # scored against the truth
    assert _without_seconds(there) == _without_seconds(here)


def test_a_large_generator_is_scored_from_the_rates_alone(client, capsys, monkeypatch):
    """Above SCORE_DENSE_MAX_CELLS the driver builds neither release nor truth: no MAE, and the summary says so."""
    monkeypatch.setattr(cli_fit, "SCORE_DENSE_MAX_CELLS", 1000)
    built = []
    monkeypatch.setattr(
        "lpviz.datasets.blockwise.BlockwiseTopics.release", lambda self: built.append("release")
    )  # fmt: skip
    monkeypatch.setattr("lpviz.datasets.blockwise.BlockwiseTopics.truth", lambda self: built.append("truth"))
    summary = _fit(capsys, "--data", SPEC, "--scheduler", client.scheduler.address)
    assert built == []
    result = summary["methods"]["private"]
    assert result["mae"] is None and result["baselines"] is None and result["npmi"] is None
    assert result["health"]["mass_ratio"] is None and result["log_joint"] is not None
    assert summary["alpha"] == {"per_row": True, "beta_mean": 0.8, "concentration": 10.0}
    assert "scored from its rates alone" in summary["not_scored"]
    assert math.isfinite(result["best_log_joint"])
    code, out, err = run(
        capsys, "fit", "--data", SPEC, "--scheduler", client.scheduler.address, "--iterations", "30", "--no-progress"
    )
    assert code == 0, err
    assert "per-row alpha ~ Beta around 0.8 (concentration 10), drawn on the workers; simulation" in out
    assert "not scored: the 3,000 x 60 release and its true counts were built on the workers only" in out
    assert "const, indep" not in out  # no baselines to explain


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--epsilon", "1"], "noises its rows itself, each with its own alpha ~ Beta around alpha0 \\(here 0.8\\)"),
        (["--alpha", "0.5"], "seeded by --noise-seed: drop --epsilon/--N/--alpha"),
        (["--chains", "2", "--scheduler", "tcp://127.0.0.1:1"], "--chains C > 1 runs each chain whole on a worker"),
        (["--holdout", "random", "--scheduler", "tcp://127.0.0.1:1"], "--holdout holds out cells"),
        (["--output", "out", "--scheduler", "tcp://127.0.0.1:1"], "--output writes the whole release"),
    ],
)
def test_what_a_generator_cannot_do_is_refused_in_words(capsys, tmp_path, extra, says):
    code, _, err = run(capsys, "fit", "--data", SPEC, *extra, "--iterations", "30", "--no-progress")
    assert code != 0
    assert len(err.strip().splitlines()) == 1
    assert re.search(says, err), err


def test_a_bad_spec_option_is_one_line(capsys):
    code, _, err = run(capsys, "fit", "--data", "synthetic-topics-blockwise:n_doc=5", "--iterations", "30")
    assert code != 0 and "has no option n_doc; it takes n_docs" in err
    code, _, err = run(capsys, "fit", "--data", "synthetic-topics-blockwise:random_state=5", "--iterations", "30")
    assert code != 0 and "random_state also given" in err
