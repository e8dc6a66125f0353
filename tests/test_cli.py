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
from lpviz.release import Release

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
    summary = run_json(
        capsys, ["privatize", str(counts_file), str(output), "--epsilon", "2", "--N", "4", "--simulate", "--seed", "7"]
    )
    assert summary["alpha"] == pytest.approx(np.exp(-0.5))
    assert summary["shape"] == [12, 8] and summary["simulated"] and summary["seed"] == 7
    release = read_release(output)
    expected = privatize(COUNTS, alpha=alpha_from(2.0, 4.0), random_state=7).Y_obs
    np.testing.assert_array_equal(release.Y_obs, expected)
    assert release.alpha == pytest.approx(np.exp(-0.5))
    assert (release.epsilon, release.N) == (2.0, 4.0)
    # the seed is printed, never written into the release (it undoes the noise) unless asked for
    assert release.simulated and release.noise_seed is None and release.kind == "documents"
    assert summary["negative_fraction"] == pytest.approx(np.mean(expected < 0))


def test_privatize_csv_output_and_human_summary(tmp_path, counts_file, capsys):
    output = tmp_path / "noised.csv"
    assert main(["privatize", str(counts_file), str(output), "--alpha", "0.5", "--simulate", "--seed", "1"]) == 0
    assert (
        f"wrote {output}: 12 x 8 noised counts (alpha=0.5), a SIMULATION with seed 1 (replayable: not private)"
        in capsys.readouterr().out
    )
    table = np.loadtxt(output, delimiter=",", skiprows=1, dtype=str)[:, 1:].astype(int)
    np.testing.assert_array_equal(table, privatize(COUNTS, alpha=0.5, random_state=1).Y_obs)


def test_privatize_never_overwrites_without_force(tmp_path, counts_file, capsys):
    output = tmp_path / "noised.npz"
    output.write_bytes(b"precious")
    fails_with(
        capsys,
        ["privatize", str(counts_file), str(output), "--epsilon", "1"],
        "already exists; choose another name or pass --force",
    )
    assert output.read_bytes() == b"precious"
    assert main(["privatize", str(counts_file), str(output), "--epsilon", "1", "--force"]) == 0
    assert read_release(output).Y_obs.shape == (12, 8)


def test_privatize_is_exact_unless_simulated(tmp_path, counts_file, capsys):
    first, second = tmp_path / "a.npz", tmp_path / "b.npz"
    for output in (first, second):
        summary = run_json(capsys, ["privatize", str(counts_file), str(output), "--epsilon", "1"])
        assert summary["simulated"] is False and summary["seed"] is None
    a, b = read_release(first), read_release(second)
    assert not a.simulated and a.noise_seed is None and a.epsilon == 1.0
    # OpenDP's secure generator: two releases of the same counts differ (96 cells, alpha = 0.37)
    assert not np.array_equal(a.Y_obs, b.Y_obs)
    assert main(["privatize", str(counts_file), str(tmp_path / "c.npz"), "--epsilon", "1"]) == 0
    assert "exact noise (OpenDP, secure generator)" in capsys.readouterr().out
    # --simulate without --seed: a fresh seed, reported (and recorded with --keep-noise-seed), so the
    # simulation can be replayed
    simulated = run_json(
        capsys,
        ["privatize", str(counts_file), str(tmp_path / "d.npz"), "--epsilon", "1", "--simulate", "--keep-noise-seed"],
    )
    replay = read_release(tmp_path / "d.npz")
    assert simulated["simulated"] and replay.simulated and replay.noise_seed == simulated["seed"]
    np.testing.assert_array_equal(replay.Y_obs, privatize(COUNTS, epsilon=1.0, random_state=simulated["seed"]).Y_obs)


def test_privatize_writes_labels_only_when_public(tmp_path, capsys):
    table = tmp_path / "counts.csv"
    table.write_text("doc,apple,pear\nalice,1,0\nbob,2,5\ncarol,0,3\n")
    default = tmp_path / "default.npz"
    assert main(["privatize", str(table), str(default), "--alpha", "0.5"]) == 0
    assert "warning" not in capsys.readouterr().err
    release = read_release(default)
    assert release.row_labels is None and release.col_labels is None
    public = tmp_path / "public.npz"
    assert main(["privatize", str(table), str(public), "--alpha", "0.5", "--labels", "public"]) == 0
    assert "warning: writing row/column labels into the release" in capsys.readouterr().err
    release = read_release(public)
    assert release.row_labels == ("alice", "bob", "carol") and release.col_labels == ("apple", "pear")
    # the .csv output follows the same rule
    assert main(["privatize", str(table), str(tmp_path / "plain.csv"), "--alpha", "0.5"]) == 0
    assert "alice" not in (tmp_path / "plain.csv").read_text()
    assert main(["privatize", str(table), str(tmp_path / "named.csv"), "--alpha", "0.5", "--labels", "public"]) == 0
    assert "alice" in (tmp_path / "named.csv").read_text()


def test_a_release_never_contains_the_input_path(tmp_path, capsys):
    folder = tmp_path / "secret-owner-folder"
    folder.mkdir()
    counts = folder / "mailbox-counts.npz"
    np.savez(counts, Y=COUNTS)
    for labels in ("none", "public"):
        output = tmp_path / f"release-{labels}.npz"
        assert main(["privatize", str(counts), str(output), "--alpha", "0.5", "--labels", labels]) == 0
        with np.load(output, allow_pickle=False) as archive:
            for key in archive.files:
                value = archive[key]
                if value.dtype.kind in "US":
                    assert not any("secret-owner-folder" in str(text) for text in np.ravel(value)), key
        assert read_release(output).name == "mailbox-counts.npz"  # the file's name at most, never its folder


@pytest.mark.parametrize(
    "extra, message",
    [
        ([], "give the privacy level: --epsilon E [--N N] or --alpha A"),
        (["--epsilon", "0"], "--epsilon must be > 0"),
        (["--epsilon", "-1"], "--epsilon must be > 0"),
        (["--epsilon", "1", "--alpha", "0.5"], "not both"),
        (["--alpha", "1.5"], "--alpha must lie strictly between 0 and 1"),
        (["--N", "3"], "--N goes with --epsilon"),
        (["--epsilon", "1", "--N", "0.5"], "--N must be >= 1"),
        (["--epsilon", "1", "--seed", "1"], "only for simulations; add --simulate"),
        (["--epsilon", "1", "--simulate", "--seed", "-1"], "--seed must be >= 0"),
        (["--epsilon", "40"], "or add --allow-no-noise if that is really meant"),
        (["--alpha", "1e-320"], "--alpha 1e-320 (epsilon/N = 737) noises a cell with probability 2e-320"),
        (["--epsilon", "1e6"], "underflows to 0"),
        # one rule for both ways: within 1e-12 of 1 the noise is practically infinite
        (["--alpha", "0.9999999999999999"], "--alpha 0.9999999999999999 is within 1e-12 of 1"),
        (["--epsilon", "1e-16"], "--epsilon 1e-16 --N 1: epsilon/N = 1e-16 is so small"),
    ],
)
def test_privatize_rejects_bad_privacy_arguments(tmp_path, counts_file, capsys, extra, message):
    output = tmp_path / "out.npz"
    fails_with(capsys, ["privatize", str(counts_file), str(output)] + extra, message)
    assert not output.exists()
    error = capsys.readouterr().err
    assert "allow_no_noise" not in error and "Traceback" not in error


def test_privatize_rejects_bad_files(tmp_path, counts_file, capsys):
    fails_with(
        capsys, ["privatize", str(tmp_path / "missing.npz"), str(tmp_path / "o.npz"), "--epsilon", "1"], "missing.npz"
    )
    fails_with(capsys, ["privatize", str(counts_file), str(tmp_path / "o.txt"), "--epsilon", "1"], "must end in .npz")
    negative = tmp_path / "negative.npz"
    np.savez(negative, Y=np.array([[1, -2], [3, 4]]))
    fails_with(capsys, ["privatize", str(negative), str(tmp_path / "o.npz"), "--epsilon", "1"], "negative")


# ---------------------------------------------------------------- fit


def test_fit_all_methods_on_synthetic_topics(tmp_path, capsys):
    out = tmp_path / "fit"
    argv = [
        "fit",
        "--data",
        "synthetic-topics",
        "--method",
        "all",
        "--iterations",
        "40",
        "--thin",
        "5",
        "--seed",
        "3",
        "--noise-seed",  # the synthetic data (and their noise) too: the same run again
        "3",
        "--output",
        str(out),
    ]
    summary = run_json(capsys, argv)
    assert summary["shape"] == [90, 15] and summary["n_components"] == 3
    assert summary["alpha"]["per_row"] and 0 < summary["alpha"]["mean"] < 1
    assert set(summary["methods"]) == {"private", "naive", "nonprivate"}
    for scores in summary["methods"].values():
        assert scores["mae"] > 0 and scores["samples"] == 6  # burn-in 40 // 6 = 6: saved 11, 16, ..., 36
        # every MAE beside its baselines, and the fit's health, in summary.json (lpviz.metrics.score's)
        assert scores["baselines"]["best_constant_mae"] > 0 and scores["baselines"]["independence_mae"] > 0
        assert isinstance(scores["health"]["flags"], list) and scores["health"]["mass_ratio"] > 0
    saved = np.load(out / "private.npz")
    assert saved["mu_hat"].shape == (90, 15) and saved["log_joint"].shape == (40,)
    assert saved["best_phi"].shape == (3, 15) and saved["best_theta"].shape == (90, 3)
    assert json.loads((out / "summary.json").read_text())["methods"] == summary["methods"]
    # the same seed gives the same fit; existing results are not replaced without --force
    fails_with(capsys, argv, "already exists")
    again = run_json(capsys, argv + ["--force"])
    assert again["methods"]["private"]["mae"] == summary["methods"]["private"]["mae"]


def test_fit_noises_true_counts_here_and_prints_a_table(counts_file, capsys):
    assert (
        main(
            [
                "fit",
                "--data",
                str(counts_file),
                "--components",
                "2",
                "--method",
                "all",
                "--epsilon",
                "1",
                "--iterations",
                "30",
                "--thin",
                "5",
                "--seed",
                "0",
                "--no-progress",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "noise: 12 x 8 documents, epsilon=1, N=1, alpha=0.3679; simulation" in out
    lines = out.splitlines()
    # the columns that apply: no held-out cells, no true rates for a counts file
    assert lines[2].split() == [
        *("method", "MAE", "const", "indep", "NPMI", "best", "log", "joint", "log", "marginal"),
        *("mass", "ratio", "health", "seconds"),
    ]
    assert [line.split()[0] for line in lines[3:6]] == ["private", "naive", "nonprivate"]


def test_fit_reads_an_already_noised_release(tmp_path, counts_file, capsys):
    release = tmp_path / "noised.npz"
    assert main(["privatize", str(counts_file), str(release), "--alpha", "0.4"]) == 0
    capsys.readouterr()
    summary = run_json(
        capsys,
        [
            "fit",
            "--data",
            str(release),
            "--already-noised",
            "--components",
            "2",
            "--method",
            "all",
            "--iterations",
            "20",
            "--thin",
            "5",
            "--seed",
            "0",
        ],
    )
    assert summary["alpha"] == pytest.approx(0.4) and summary["simulated"] is False
    assert set(summary["methods"]) == {"private", "naive"}  # no truth, so no non-private fit and no MAE
    assert all(summary["methods"]["private"][key] is None for key in ("mae", "heldout_mae", "npmi"))
    assert summary["methods"]["private"]["iterations"] == 20
    fails_with(
        capsys,
        ["fit", "--data", str(release), "--already-noised", "--components", "2", "--method", "nonprivate"],
        "needs the true counts",
    )
    fails_with(
        capsys,
        ["fit", "--data", str(release), "--already-noised", "--components", "2", "--epsilon", "1"],
        "drop --epsilon/--N/--alpha",
    )
    fails_with(
        capsys, ["fit", "--data", str(counts_file), "--already-noised", "--components", "2"], "no noised counts 'Y_obs'"
    )
    table = tmp_path / "noised.csv"
    assert main(["privatize", str(counts_file), str(table), "--alpha", "0.4"]) == 0
    capsys.readouterr()
    fails_with(
        capsys,
        ["fit", "--data", str(table), "--already-noised", "--components", "2", "--alpha", "0.4"],
        "noised.csv: not an .npz release (a .csv from `lpviz privatize` is a plain table",
    )


def test_fit_blocks_scores_off_diagonal_cells(capsys):
    summary = run_json(
        capsys,
        [
            "fit",
            "--data",
            "synthetic-blocks",
            "--method",
            "nonprivate",
            "--iterations",
            "30",
            "--thin",
            "5",
            "--seed",
            "1",
        ],
    )
    assert summary["model"] == "blocks" and summary["n_components"] == 5 and summary["shape"] == [20, 20]
    assert summary["N"] > 0 and summary["alpha"] == pytest.approx(np.exp(-1.0 / summary["N"]))


def test_fit_holds_out_top_actors_and_every_printed_number_can_be_recomputed(tmp_path, capsys):
    """On a synthetic network with held-out top actors, the summary's numbers equal
    lpviz.metrics.score on the same fit, and a brute-force recomputation from the
    files `lpviz fit --output DIR` writes (release.npz, truth.npz, METHOD.npz)."""
    from lpviz.datasets import holdout_mask, load_data
    from lpviz.engine import fit
    from lpviz.metrics import heldout_mae, score

    out = tmp_path / "run"
    argv = [
        "fit",
        "--data",
        "synthetic-blocks",
        "--method",
        "all",
        "--holdout",
        "top-actors",
        "--holdout-actors",
        "2",
        "--iterations",
        "60",
        "--thin",
        "5",
        "--seed",
        "1",
        "--noise-seed",  # the synthetic network: load_data(random_state=1) below
        "1",
        "--output",
        str(out),
    ]
    summary = run_json(capsys, argv)
    assert summary["holdout"] == "top-actors"
    for method in ("private", "naive", "nonprivate"):
        scores = summary["methods"][method]
        assert scores["heldout_mae"] > 0 and scores["mae"] > 0

    # 1. brute force from the files alone
    release = Release.load(out / "release.npz")
    with np.load(out / "truth.npz") as saved:
        Y, mu = saved["Y"], saved["mu"]
    exists = ~release.structural_zeros
    np.testing.assert_array_equal(release.structural_zeros, np.eye(20, dtype=bool))
    held = release.heldout & exists
    observed = ~release.heldout & exists
    assert summary["heldout_cells"] == held.sum()
    for method in ("private", "naive", "nonprivate"):
        with np.load(out / f"{method}.npz") as saved:
            mu_hat = saved["mu_hat"]
            # the fit file carries the same masks: it is enough on its own
            np.testing.assert_array_equal(saved["heldout"], held)
            np.testing.assert_array_equal(saved["structural_zeros"], release.structural_zeros)
            # labels only with --labels public (test_hostile checks that they come with it)
            assert "row_labels" not in saved.files and release.row_labels is None
        scores = summary["methods"][method]
        assert scores["heldout_mae"] == pytest.approx(np.abs(mu_hat - Y)[held].mean(), rel=1e-12)
        assert scores["mae"] == pytest.approx(np.abs(mu_hat - Y)[observed].mean(), rel=1e-12)
        assert scores["heldout_rate_mae"] == pytest.approx(np.abs(mu_hat - mu)[held].mean(), rel=1e-12)
        assert scores["rate_mae"] == pytest.approx(np.abs(mu_hat - mu)[observed].mean(), rel=1e-12)

    # 2. the held-out cells are exactly those of the library's mask, off the diagonal
    data = load_data("synthetic-blocks", random_state=1)
    np.testing.assert_array_equal(Y, data.Y)
    library_mask = holdout_mask(data.Y, "blocks", "top actors", n_actors=2)
    np.testing.assert_array_equal(release.heldout, ~library_mask)
    with np.load(out / "nonprivate.npz") as saved:
        assert summary["methods"]["nonprivate"]["heldout_mae"] == pytest.approx(
            heldout_mae(saved["mu_hat"], data.Y, library_mask | np.eye(20, dtype=bool)), rel=1e-12
        )

    # 3. the library's score of the same fit (the CLI seeds every chain from --seed's chain stream)
    chain_seed = np.random.SeedSequence(1).spawn(3)[1]
    truth = data.truth()
    for method in ("private", "nonprivate"):
        posterior = fit(
            release,
            method=method,
            truth=truth,
            n_components=5,
            n_iter=60,
            thin=5,
            random_state=np.random.default_rng(chain_seed),
        )
        with np.load(out / f"{method}.npz") as saved:
            np.testing.assert_array_equal(posterior.mu_hat, saved["mu_hat"])
        library = score(posterior, release, truth)
        for key in ("mae", "heldout_mae", "rate_mae", "heldout_rate_mae", "best_log_joint"):
            assert summary["methods"][method][key] == library[key], key


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--holdout", "top-actors", "--holdout-actors", "40"], "--holdout top-actors: holding out the top 40"),
        (["--holdout", "random", "--holdout-fraction", "2"], "--holdout random: fraction"),
        (["--iterations", "0"], "--iterations must be >= 1"),
        (["--iterations", "10", "--burn-in", "10"], "no sample would be saved"),
        (["--thin", "0"], "--thin must be >= 1"),
        (["--seed", "-1"], "--seed must be >= 0"),
        (["--components", "0"], "--components must be >= 1"),
    ],
)
def test_fit_rejects_bad_run_lengths(capsys, extra, message):
    fails_with(capsys, ["fit", "--data", "synthetic-topics"] + extra, message)


def test_fit_needs_components_and_noise_for_plain_files(counts_file, capsys):
    fails_with(capsys, ["fit", "--data", str(counts_file), "--epsilon", "1"], "--components K")
    fails_with(
        capsys, ["fit", "--data", str(counts_file), "--components", "2"], "give --epsilon E [--N N] or --alpha A"
    )
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
    done = subprocess.run(
        [
            str(lpviz),
            "privatize",
            str(counts_file),
            str(output),
            "--epsilon",
            "1",
            "--simulate",
            "--seed",
            "0",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["output"] == str(output)
    refused = subprocess.run(
        [str(lpviz), "privatize", str(counts_file), str(output), "--epsilon", "1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode == 2
    assert refused.stderr.strip().startswith("lpviz privatize: error:") and "--force" in refused.stderr


def test_privatize_accepts_a_matrix_without_counts(tmp_path, capsys):
    # nothing to fit in it, but a person with no emails still releases their (noised) zeros
    zeros = tmp_path / "zeros.npz"
    np.savez(zeros, Y=np.zeros((30, 40), dtype=np.int64))
    output = tmp_path / "noised.npz"
    summary = run_json(capsys, ["privatize", str(zeros), str(output), "--epsilon", "1"])
    assert summary["shape"] == [30, 40] and 0 < summary["negative_fraction"] < 0.5
    fails_with(capsys, ["fit", "--data", str(zeros), "--components", "2", "--epsilon", "1"], "no counts")


# ---------------------------------------------------------------- central


def test_central_reports_its_guarantee_and_scores_through_score(capsys):
    private = run_json(
        capsys,
        [
            "central",
            "--data",
            "synthetic-topics",
            "--epsilon",
            "2",
            "--seed",
            "1",
            "--batch-size",
            "20",
            "--epochs",
            "3",
        ],
    )
    assert private["epsilon"] <= 2.0 + 1e-9 and private["epsilon"] > 1.9 and private["delta"] == 1e-5
    assert private["privacy_unit"] == "one document" and private["steps"] == 3 * 5  # ceil(83 / 20) = 5
    assert private["heldout_documents"] > 0 and np.isfinite(private["heldout_perplexity"])
    assert set(private["scores"]) >= {"mae", "npmi", "umass", "topic_distance"}
    plain = run_json(
        capsys,
        [
            "central",
            "--data",
            "synthetic-topics",
            "--noise-multiplier",
            "0",
            "--seed",
            "1",
            "--batch-size",
            "20",
            "--epochs",
            "3",
        ],
    )
    assert plain["epsilon"] == float("inf")
    # the noise costs accuracy: non-private online LDA recovers the topics better
    assert plain["scores"]["topic_distance"] < private["scores"]["topic_distance"]
    fails_with(capsys, ["central", "--data", "synthetic-topics"], "exactly one")
    fails_with(capsys, ["central", "--data", "synthetic-blocks", "--epsilon", "1"], "is a network")
