"""The `lpviz privatize`, `fit` and `demo` commands: results, files, refusals, errors."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from lpviz.cli import main
from lpviz.cli.privatize import read_release
from lpviz.privacy import alpha_from, privatize

COUNTS = np.random.default_rng(0).poisson(3.0, size=(12, 8))


@pytest.fixture
def counts_file(tmp_path):
    path = tmp_path / "counts.npz"
    np.savez(path, Y=COUNTS)
    return path


def run_json(capsys, argv):
    assert main(argv + ["--json"]) == 0
    return json.loads(capsys.readouterr().out)


def fails_with(capsys, argv, message):
    assert main(argv) == 2
    error = capsys.readouterr().err
    assert message in error, error
    assert error.count("\n") == 1  # one clear line, no traceback


# ---------------------------------------------------------------- privatize

def test_privatize_writes_a_release_that_matches_the_library(tmp_path, counts_file, capsys):
    output = tmp_path / "noised.npz"
    summary = run_json(capsys, ["privatize", str(counts_file), str(output), "--epsilon", "2", "--N", "4",
                                "--seed", "7"])
    assert summary["alpha"] == pytest.approx(np.exp(-0.5))
    assert summary["shape"] == [12, 8]
    release = read_release(output)
    expected = privatize(COUNTS, alpha=alpha_from(2.0, 4.0), random_state=7)
    np.testing.assert_array_equal(release["Y_obs"], expected)
    assert release["alpha"] == pytest.approx(np.exp(-0.5))
    assert (release["epsilon"], release["N"]) == (2.0, 4.0)
    assert summary["negative_fraction"] == pytest.approx(np.mean(expected < 0))


def test_privatize_csv_output_and_human_summary(tmp_path, counts_file, capsys):
    output = tmp_path / "noised.csv"
    assert main(["privatize", str(counts_file), str(output), "--alpha", "0.5", "--seed", "1"]) == 0
    assert f"wrote {output}: 12 x 8 noised counts (alpha=0.5)" in capsys.readouterr().out
    table = np.loadtxt(output, delimiter=",", skiprows=1, dtype=str)[:, 1:].astype(int)
    np.testing.assert_array_equal(table, privatize(COUNTS, alpha=0.5, random_state=1))


def test_privatize_never_overwrites_without_force(tmp_path, counts_file, capsys):
    output = tmp_path / "noised.npz"
    output.write_bytes(b"precious")
    fails_with(capsys, ["privatize", str(counts_file), str(output), "--epsilon", "1"],
               "already exists; choose another name or pass --force")
    assert output.read_bytes() == b"precious"
    assert main(["privatize", str(counts_file), str(output), "--epsilon", "1", "--force"]) == 0
    assert read_release(output)["Y_obs"].shape == (12, 8)


@pytest.mark.parametrize("extra, message", [
    ([], "give the privacy level: --epsilon E [--N N] or --alpha A"),
    (["--epsilon", "0"], "--epsilon must be > 0"),
    (["--epsilon", "-1"], "--epsilon must be > 0"),
    (["--epsilon", "1", "--alpha", "0.5"], "not both"),
    (["--alpha", "1.5"], "--alpha must lie strictly between 0 and 1"),
    (["--N", "3"], "--N goes with --epsilon"),
    (["--epsilon", "1", "--N", "0.5"], "--N must be >= 1"),
    (["--epsilon", "1", "--exact", "--seed", "1"], "cannot be seeded"),
    (["--epsilon", "1", "--seed", "-1"], "--seed must be >= 0"),
])
def test_privatize_rejects_bad_privacy_arguments(tmp_path, counts_file, capsys, extra, message):
    output = tmp_path / "out.npz"
    fails_with(capsys, ["privatize", str(counts_file), str(output)] + extra, message)
    assert not output.exists()


def test_privatize_rejects_bad_files(tmp_path, counts_file, capsys):
    fails_with(capsys, ["privatize", str(tmp_path / "missing.npz"), str(tmp_path / "o.npz"), "--epsilon", "1"],
               "missing.npz")
    fails_with(capsys, ["privatize", str(counts_file), str(tmp_path / "o.txt"), "--epsilon", "1"],
               "must end in .npz")
    negative = tmp_path / "negative.npz"
    np.savez(negative, Y=np.array([[1, -2], [3, 4]]))
    fails_with(capsys, ["privatize", str(negative), str(tmp_path / "o.npz"), "--epsilon", "1"], "negative")


# ---------------------------------------------------------------- fit

def test_fit_all_methods_on_synthetic_topics(tmp_path, capsys):
    out = tmp_path / "fit"
    argv = ["fit", "--data", "synthetic-topics", "--method", "all", "--iterations", "40", "--thin", "5",
            "--seed", "3", "--output", str(out)]
    summary = run_json(capsys, argv)
    assert summary["shape"] == [90, 15] and summary["n_components"] == 3
    assert summary["alpha"]["per_row"] and 0 < summary["alpha"]["mean"] < 1
    assert set(summary["methods"]) == {"private", "naive", "nonprivate"}
    for scores in summary["methods"].values():
        assert scores["mae"] > 0 and scores["saved_samples"] == 6  # burn-in 40 // 6 = 6: saved 11, 16, ..., 36
    saved = np.load(out / "private.npz")
    assert saved["mu_hat"].shape == (90, 15) and saved["log_joint"].shape == (40,)
    assert saved["best_phi"].shape == (3, 15) and saved["best_theta"].shape == (90, 3)
    assert json.loads((out / "summary.json").read_text())["methods"] == summary["methods"]
    # the same seed gives the same fit; existing results are not replaced without --force
    fails_with(capsys, argv, "already exists")
    again = run_json(capsys, argv + ["--force"])
    assert again["methods"]["private"]["mae"] == summary["methods"]["private"]["mae"]


def test_fit_noises_true_counts_here_and_prints_a_table(counts_file, capsys):
    assert main(["fit", "--data", str(counts_file), "--components", "2", "--method", "all", "--epsilon", "1",
                 "--iterations", "30", "--thin", "5", "--seed", "0", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "noise: epsilon=1, N=1, alpha=0.3679" in out
    lines = out.splitlines()
    assert lines[2].split() == ["method", "MAE", "best", "log", "joint", "seconds"]
    assert [line.split()[0] for line in lines[3:6]] == ["private", "naive", "nonprivate"]


def test_fit_reads_an_already_noised_release(tmp_path, counts_file, capsys):
    release = tmp_path / "noised.npz"
    assert main(["privatize", str(counts_file), str(release), "--alpha", "0.4", "--seed", "2"]) == 0
    capsys.readouterr()
    summary = run_json(capsys, ["fit", "--data", str(release), "--already-noised", "--components", "2",
                                "--method", "all", "--iterations", "20", "--thin", "5", "--seed", "0"])
    assert summary["alpha"] == pytest.approx(0.4)
    assert set(summary["methods"]) == {"private", "naive"}  # no truth, so no non-private fit and no MAE
    assert "mae" not in summary["methods"]["private"]
    fails_with(capsys, ["fit", "--data", str(release), "--already-noised", "--components", "2",
                        "--method", "nonprivate"], "needs the true counts")
    fails_with(capsys, ["fit", "--data", str(release), "--already-noised", "--components", "2",
                        "--epsilon", "1"], "drop --epsilon/--N/--alpha")
    fails_with(capsys, ["fit", "--data", str(counts_file), "--already-noised", "--components", "2"],
               "no noised counts 'Y_obs'")
    table = tmp_path / "noised.csv"
    assert main(["privatize", str(counts_file), str(table), "--alpha", "0.4", "--seed", "2"]) == 0
    capsys.readouterr()
    fails_with(capsys, ["fit", "--data", str(table), "--already-noised", "--components", "2", "--alpha", "0.4"],
               "noised.csv: not an .npz release (a .csv from `lpviz privatize` is a plain table")


def test_fit_blocks_scores_off_diagonal_cells(capsys):
    summary = run_json(capsys, ["fit", "--data", "synthetic-blocks", "--method", "nonprivate",
                                "--iterations", "30", "--thin", "5", "--seed", "1"])
    assert summary["model"] == "blocks" and summary["n_components"] == 5 and summary["shape"] == [20, 20]
    assert summary["N"] > 0 and summary["alpha"] == pytest.approx(np.exp(-1.0 / summary["N"]))


def test_fit_holds_out_top_actors_and_scores_them_apart(tmp_path, capsys):
    summary = run_json(capsys, ["fit", "--data", "synthetic-blocks", "--method", "all", "--holdout",
                                "top-actors", "--holdout-actors", "2", "--iterations", "60", "--thin", "5",
                                "--seed", "1", "--output", str(tmp_path / "run")])
    assert summary["holdout"] == "top-actors"
    for method in ("private", "naive", "nonprivate"):
        scores = summary["methods"][method]
        assert scores["heldout_mae"] > 0 and scores["mae"] > 0
    # the held-out cells are exactly those of the library's mask (the diagonal is never scored)
    from lpviz.datasets import holdout_mask, make_blocks
    from lpviz.metrics import heldout_mae

    data = make_blocks(random_state=1)
    held = holdout_mask(data.Y, "blocks", "top actors", n_actors=2)
    with np.load(tmp_path / "run" / "nonprivate.npz") as saved:
        observed = held | np.eye(20, dtype=bool)  # scored held-out cells: off the diagonal only
        assert summary["methods"]["nonprivate"]["heldout_mae"] == pytest.approx(
            heldout_mae(saved["mu_hat"], data.Y, observed))


@pytest.mark.parametrize("extra, message", [
    (["--holdout", "top-actors", "--holdout-actors", "40"], "--holdout top-actors: holding out the top 40"),
    (["--holdout", "random", "--holdout-fraction", "2"], "--holdout random: fraction"),
    (["--iterations", "0"], "--iterations must be >= 1"),
    (["--iterations", "10", "--burn-in", "10"], "no sample would be saved"),
    (["--thin", "0"], "--thin must be >= 1"),
    (["--seed", "-1"], "--seed must be >= 0"),
    (["--components", "0"], "--components must be >= 1"),
])
def test_fit_rejects_bad_run_lengths(capsys, extra, message):
    fails_with(capsys, ["fit", "--data", "synthetic-topics"] + extra, message)


def test_fit_needs_components_and_noise_for_plain_files(counts_file, capsys):
    fails_with(capsys, ["fit", "--data", str(counts_file), "--epsilon", "1"], "--components K")
    fails_with(capsys, ["fit", "--data", str(counts_file), "--components", "2"],
               "give --epsilon E [--N N] or --alpha A")
    fails_with(capsys, ["fit", "--data", "no-such-file.npz", "--components", "2"], "no-such-file.npz")


def test_unknown_choices_exit_with_usage(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--data", "synthetic-topics", "--method", "bayes"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'bayes'" in capsys.readouterr().err


# ---------------------------------------------------------------- demo

def test_demo_writes_table_picture_and_summary(tmp_path, capsys):
    out = tmp_path / "demo"
    assert main(["demo", "--iterations", "30", "--output", str(out), "--seed", "1", "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert [line.split()[0] for line in text.splitlines()[2:5]] == ["private", "naive", "nonprivate"]
    figure = (out / "figure3.png").read_bytes()
    assert figure[:8] == b"\x89PNG\r\n\x1a\n" and len(figure) > 20_000
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["methods"]) == {"private", "naive", "nonprivate"}
    assert all(0 <= s["topic_distance"] <= 1 for s in summary["methods"].values())
    fails_with(capsys, ["demo", "--iterations", "30", "--output", str(out)], "already exists")
    assert (out / "figure3.png").read_bytes() == figure
    fails_with(capsys, ["demo", "--alpha0", "1"], "--alpha0 must lie strictly between 0 and 1")


# ---------------------------------------------------------------- the installed entry point

def test_installed_entry_point(tmp_path, counts_file):
    lpviz = Path(sys.executable).with_name("lpviz")
    assert lpviz.exists(), "the `lpviz` console script is not installed next to this Python"
    output = tmp_path / "noised.npz"
    done = subprocess.run([str(lpviz), "privatize", str(counts_file), str(output), "--epsilon", "1",
                           "--seed", "0", "--json"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["output"] == str(output)
    refused = subprocess.run([str(lpviz), "privatize", str(counts_file), str(output), "--epsilon", "1"],
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2
    assert refused.stderr.strip().startswith("lpviz privatize: error:") and "--force" in refused.stderr
