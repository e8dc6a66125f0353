"""Hostile inputs, round 2 (issue 38): what lpviz writes, and the fit files it reads back.

- No seed that undoes the noise in any written file: every integer found in the files a
  writer leaves (summary.json, InferenceData attributes, .npz members) is tried as the seed of
  the noise, through every way lpviz derives the noise from a seed, and must not rebuild the
  release; with ``--keep-noise-seed`` the same search finds it (the search has power).
- Nothing of the user's overwritten: table1, reproduce and the dashboard's exports refuse
  existing files without --force / overwrite, before any work, and write atomically (a file
  that appears while the content is made is kept); ``fit --output .`` fails before the fit.
- Fit files checked like releases: each inconsistent edit of a fit file is a one-line error
  naming the file (Posterior.load); ``score`` refuses a release or truth of another shape and
  takes a count array as ``fit`` does.
- LOW: an ``info_json`` nested 100,000 deep; Ctrl-C reaching the reproduce workers.
"""

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import lpviz
from lpviz.cli import main
from lpviz.datasets import load_data
from lpviz.engine import Posterior
from lpviz.privacy import privatize
from lpviz.release import Release, Truth

TRUE_COUNTS = np.random.default_rng(0).poisson(3.0, size=(12, 8))
FIT = ["--iterations", "12", "--thin", "2", "--no-progress"]


def fails_with(capsys, argv, message):
    code = main([str(a) for a in argv])
    error = capsys.readouterr().err
    assert code == 2, error
    assert message in error, error
    assert error.count("\n") == 1, error  # one clear line, no traceback
    return error


@pytest.fixture
def counts_file(tmp_path):
    path = tmp_path / "counts.npz"
    np.savez(path, Y=TRUE_COUNTS)
    return path


# ---------------------------------------------------------------- no seed that undoes the noise


def integers_in(value):
    """Every integer in a JSON value, an attribute dict or an array (numbers written as text too)."""
    found = set()
    if isinstance(value, dict):
        for item in value.values():
            found |= integers_in(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            found |= integers_in(item)
    elif isinstance(value, (bool, np.bool_)):
        pass
    elif isinstance(value, (int, np.integer)):
        found.add(int(value))
    elif isinstance(value, (float, np.floating)) and np.isfinite(value) and float(value).is_integer():
        found.add(int(value))
    elif isinstance(value, (str, np.str_)):  # numbers in words too ("a simulation (noise seed 5)")
        found |= {int(digits) for digits in re.findall(r"\d+", str(value)[:100_000])}
    elif isinstance(value, np.ndarray) and value.size <= 16 and value.dtype.kind in "iufU":
        for item in value.ravel().tolist():
            found |= integers_in(item)
    return found


def integers_in_files(folder):
    """The integers of every file under ``folder``: JSON values, .npz scalars and short members,
    netCDF attributes (every group's)."""
    found = set()
    for path in sorted(Path(folder).rglob("*")):
        if path.suffix == ".json":
            found |= integers_in(json.loads(path.read_text()))
        elif path.suffix == ".npz":
            with np.load(path, allow_pickle=False) as archive:
                for key in archive.files:
                    found |= integers_in(archive[key])
        elif path.suffix == ".nc":
            import arviz

            idata = arviz.from_netcdf(str(path))
            for group in idata.groups():
                found |= integers_in(dict(idata[group].attrs))
    return found


def noise_rebuilders(Y, alpha, synthetic=None):
    """``{how: seed -> noised counts}``: every way lpviz turned a seed into noise (privatize's
    own seed, `lpviz fit`'s streams of the past and of now, a synthetic set's generator)."""

    def seeded(seed):
        return privatize(Y, alpha=alpha, random_state=seed).Y_obs

    def fit_before(seed):  # lpviz fit until issue 38: SeedSequence(--seed).spawn(3)[0]
        return privatize(Y, alpha=alpha, random_state=np.random.default_rng(np.random.SeedSequence(seed).spawn(3)[0]))

    def fit_now(seed):  # lpviz fit since issue 38: SeedSequence(noise seed).spawn(1)[0]
        return privatize(Y, alpha=alpha, random_state=np.random.default_rng(np.random.SeedSequence(seed).spawn(1)[0]))

    ways = {
        "privatize(seed)": seeded,
        "fit before": lambda seed: fit_before(seed).Y_obs,
        "fit now": lambda seed: fit_now(seed).Y_obs,
    }
    if synthetic is not None:
        ways["synthetic generator"] = lambda seed: load_data(synthetic, random_state=seed).Y_obs
    return ways


def rebuilt_by(integers, release, ways):
    """The (integer, way) pairs that rebuild ``release``'s noised counts."""
    hits = []
    for value in sorted(integers):
        if value < 0:
            continue
        for how, noised in ways.items():
            try:
                candidate = np.asarray(noised(value))
            except (ValueError, OverflowError):
                continue
            if candidate.shape == release.Y_obs.shape and np.array_equal(candidate, release.Y_obs):
                hits.append((value, how))
    return hits


def fit_writing_everything(tmp_path, data, extra=()):
    out = tmp_path / "out"
    argv = ["fit", "--data", data, "--method", "all", "--components", "2", *FIT, "--seed", "4242", "--output", out]
    argv += ["--save-idata", tmp_path / "out-idata" / "fit.nc", "--chains", "2", *extra]
    (tmp_path / "out-idata").mkdir()
    assert main([str(a) for a in argv]) == 0
    return out


def written_folders(tmp_path):
    return [tmp_path / "out", tmp_path / "out-idata"]


def test_fit_files_cannot_rebuild_the_noise_of_a_release_simulated_here(tmp_path, counts_file):
    # --seed 4242 was the noise's seed too, and summary.json and the idata attributes held it
    fit_writing_everything(tmp_path, counts_file, ["--epsilon", "1"])
    release = Release.load(tmp_path / "out" / "release.npz")
    integers = set().union(*(integers_in_files(folder) for folder in written_folders(tmp_path)))
    assert 4242 in integers  # the chains' seed is recorded
    assert rebuilt_by(integers, release, noise_rebuilders(TRUE_COUNTS, release.alpha)) == []


def test_keep_noise_seed_records_what_rebuilds_the_noise(tmp_path, counts_file, capsys):
    # the search above has power: with the seed kept, it finds it
    fit_writing_everything(tmp_path, counts_file, ["--epsilon", "1", "--keep-noise-seed"])
    release = Release.load(tmp_path / "out" / "release.npz")
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    integers = set().union(*(integers_in_files(folder) for folder in written_folders(tmp_path)))
    hits = rebuilt_by(integers, release, noise_rebuilders(TRUE_COUNTS, release.alpha))
    assert (summary["noise_seed"], "fit now") in hits
    # the chains' seed alone rebuilds nothing, and a given --noise-seed replays the noise
    assert rebuilt_by({summary["seed"]}, release, noise_rebuilders(TRUE_COUNTS, release.alpha)) == []
    again = tmp_path / "again"
    argv = ["fit", "--data", counts_file, "--epsilon", "1", "--components", "2", *FIT]
    argv += ["--noise-seed", summary["noise_seed"]]
    assert main([str(a) for a in [*argv, "--output", again]]) == 0
    np.testing.assert_array_equal(Release.load(again / "release.npz").Y_obs, release.Y_obs)
    fails_with(
        capsys,
        ["fit", "--data", tmp_path / "out" / "release.npz", "--already-noised", "--keep-noise-seed", *FIT],
        "not noised here",
    )


def test_fit_files_cannot_rebuild_a_synthetic_data_set(tmp_path):
    # the synthetic generator drew the truth and its noised copy from --seed: the summary's seed
    # rebuilt both
    fit_writing_everything(tmp_path, "synthetic-topics")
    release = Release.load(tmp_path / "out" / "release.npz")
    with np.load(tmp_path / "out" / "truth.npz") as saved:
        Y = saved["Y"]
    integers = set().union(*(integers_in_files(folder) for folder in written_folders(tmp_path)))
    ways = noise_rebuilders(Y, release.alpha, synthetic="synthetic-topics")
    assert rebuilt_by(integers, release, ways) == []


def test_privatize_simulate_leaves_the_seed_out_of_the_release(tmp_path, counts_file, capsys):
    output = tmp_path / "noised.npz"
    assert main(["privatize", str(counts_file), str(output), "--alpha", "0.5", "--simulate", "--seed", "77"]) == 0
    assert "seed 77" in capsys.readouterr().out  # printed to whoever ran it: the run can be replayed
    release = Release.load(output)
    assert release.simulated and release.noise_seed is None
    assert rebuilt_by(integers_in_files(tmp_path / "noised.npz"), release, noise_rebuilders(TRUE_COUNTS, 0.5)) == []
    # asked for: kept, and it rebuilds the noise (what the flag's help says)
    kept = tmp_path / "kept.npz"
    argv = ["privatize", counts_file, kept, "--alpha", "0.5", "--simulate", "--seed", "77", "--keep-noise-seed"]
    assert main([str(a) for a in argv]) == 0
    assert Release.load(kept).noise_seed == 77
    assert (77, "privatize(seed)") in rebuilt_by({77}, Release.load(kept), noise_rebuilders(TRUE_COUNTS, 0.5))
    fails_with(capsys, ["privatize", counts_file, tmp_path / "x.npz", "--alpha", "0.5", "--keep-noise-seed"], "drop")


def test_the_library_saves_a_simulated_release_without_its_seed(tmp_path):
    release = privatize(TRUE_COUNTS, alpha=0.5, random_state=991)
    assert release.noise_seed == 991  # in memory, for whoever simulated it
    path = release.save(tmp_path / "release.npz")
    assert Release.load(path).noise_seed is None
    assert rebuilt_by(integers_in_files(tmp_path), release, noise_rebuilders(TRUE_COUNTS, 0.5)) == []
    kept = release.save(tmp_path / "kept.npz", noise_seed=True)
    assert Release.load(kept).noise_seed == 991


def test_the_dashboard_exports_no_noise_seed(tmp_path):
    from lpviz.dashboard.session.datastore import DataStore
    from lpviz.dashboard.session.fits import Fits
    from lpviz.dashboard.session.settings import Settings
    from lpviz.dashboard.views.export import SUMMARY_FILE, TRUTH_FILE, save_release, save_results

    seed = 918_273
    fits = Fits(DataStore(Settings(noise_seed=seed), background=False))
    assert fits.data.release.noise_seed == seed
    save_results(fits, tmp_path / SUMMARY_FILE)
    save_results(fits, tmp_path / TRUTH_FILE)
    save_release(fits, tmp_path / "release.npz")
    assert seed not in integers_in_files(tmp_path)


# ---------------------------------------------------------------- nothing of the user's overwritten


def test_table1_refuses_the_users_files_before_running(tmp_path, capsys, monkeypatch):
    from lpviz.reproduce import table1 as table1_module

    def never(**_):
        raise AssertionError("the table ran before its output was checked")

    monkeypatch.setattr(table1_module, "run_table1", never)
    out = tmp_path / "mine"
    out.mkdir()
    (out / "table1.csv").write_text("my,own\n1,2\n")
    (out / "table1.png").write_bytes(b"my picture")
    fails_with(capsys, ["table1", "--quick", "--output", out], "table1.csv already exists; choose another --output or")
    assert (out / "table1.csv").read_text() == "my,own\n1,2\n" and (out / "table1.png").read_bytes() == b"my picture"
    # a table of other settings: refused before the run too (it used to run first)
    (out / "table1.csv").unlink()
    (out / "table1.png").unlink()
    (out / "table1.json").write_text(json.dumps({"n_rows": 5}))
    (out / "table1.csv").write_text("row\n")
    fails_with(capsys, ["table1", "--quick", "--output", out], "made with other settings")


def test_table1_writes_atomically_and_adds_parts(tmp_path, capsys, monkeypatch):
    from lpviz.reproduce import table1 as table1_module

    out = tmp_path / "t"
    argv = ["table1", "--quick", "--groups", "naive-vi", "--quiet", "--output", out]
    assert main([str(a) for a in argv]) == 0
    first = (out / "table1.csv").read_text()
    # an earlier part of the same table: this run's rows are added, no --force needed
    assert main([str(a) for a in argv[:3] + ["private-vi"] + argv[4:]]) == 0
    both = (out / "table1.csv").read_text()
    assert len(both.splitlines()) > len(first.splitlines())
    assert not [p.name for p in out.iterdir() if p.name.startswith(".")]  # no temporaries left
    capsys.readouterr()

    # a file that appears while the table runs is kept (the check before and the move in one step)
    real = table1_module.run_table1
    fresh = tmp_path / "fresh"

    def run_then_a_user_file_appears(**options):
        table = real(**options)
        (fresh / "table1.png").write_bytes(b"made meanwhile")
        return table

    monkeypatch.setattr(table1_module, "run_table1", run_then_a_user_file_appears)
    fresh.mkdir()
    code = main([str(a) for a in ["table1", "--quick", "--groups", "naive-vi", "--quiet", "--output", fresh]])
    error = capsys.readouterr().err
    assert code == 2 and "table1.png already exists" in error and error.count("\n") == 1, error
    assert (fresh / "table1.png").read_bytes() == b"made meanwhile"
    assert sorted(p.name for p in fresh.iterdir()) == ["table1.png"]  # all or nothing: no half table


@pytest.mark.parametrize("output", [".", "/", ".."])
def test_fit_output_without_a_folder_name_fails_before_the_fit(output, capsys, monkeypatch, tmp_path):
    from lpviz import driver

    def never(*args, **kwargs):
        raise AssertionError("the fit ran before --output was checked")

    monkeypatch.setattr(driver, "run", never)
    monkeypatch.chdir(tmp_path)
    fails_with(
        capsys,
        ["fit", "--data", "synthetic-topics", *FIT, "--output", output],
        f"--output {output} names no folder of its own",
    )


def test_reproduce_refuses_the_users_report_before_running(tmp_path, capsys, monkeypatch):
    from lpviz.reproduce import grid

    def never(*args, **kwargs):
        raise AssertionError("the grid ran before the folder was checked")

    monkeypatch.setattr(grid, "run_tasks", never)
    import lpviz.reproduce as reproduce_module

    monkeypatch.setattr(reproduce_module, "run_tasks", never)
    folder = tmp_path / "fig1"
    folder.mkdir()
    (folder / "report.md").write_text("my notes")
    fails_with(
        capsys,
        ["reproduce", "fig1", "--preset", "tiny", "--serial", "--output", tmp_path],
        "already holds report.md; pass --force to replace them",
    )
    assert (folder / "report.md").read_text() == "my notes"


def test_dashboard_exports_never_replace_a_file_that_appears_meanwhile(tmp_path, monkeypatch):
    import lpviz.dashboard.views.export as export

    class Data:
        release = object()

    class FakeFits:
        data = Data()

    target = tmp_path / "summary.json"

    def results_then_a_user_file(fits, suffix):
        target.write_text("the user's")
        return b'{"made": true}'

    monkeypatch.setattr(export, "results_bytes", results_then_a_user_file)
    with pytest.raises(FileExistsError, match="overwrite=True"):
        export.save_results(FakeFits(), target)
    assert target.read_text() == "the user's"
    # asked to replace: replaced whole
    assert export.save_results(FakeFits(), target, overwrite=True).read_bytes() == b'{"made": true}'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]  # no temporaries


def test_save_figure_writes_whole_and_keeps_a_file_made_meanwhile(tmp_path, monkeypatch):
    import holoviews as hv

    import lpviz.dashboard.views.export as export

    target = tmp_path / "figure.html"
    real_save = hv.save

    def save_then_a_user_file(figure, path, **options):
        real_save(figure, path, **options)
        target.write_text("the user's")

    monkeypatch.setattr(hv, "save", save_then_a_user_file)
    with pytest.raises(FileExistsError, match="overwrite=True"):
        export.save_figure(hv.Curve([1, 2, 3]), target)
    assert target.read_text() == "the user's"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["figure.html"]


# ---------------------------------------------------------------- fit files checked like releases


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """A topics fit (private, MCMC: 12 iterations, burn-in 2, thin 2) and its release, saved."""
    folder = tmp_path_factory.mktemp("fit")
    data = load_data("synthetic-topics", random_state=1)
    release = data.release()
    posterior = lpviz.fit(release, n_components=3, n_iter=12, thin=2, random_state=0)
    path = posterior.save(
        folder / "private.npz",
        Release(
            Y_obs=release.Y_obs,
            alpha=release.alpha,
            row_labels=[str(i) for i in range(release.shape[0])],
            col_labels=[str(i) for i in range(release.shape[1])],
        ),
    )
    with np.load(path) as saved:
        arrays = {key: saved[key] for key in saved.files}
    return arrays, release, data.truth()


def _nan_at_first(values):
    values = values.astype(float).copy()
    values.flat[0] = np.nan
    return values


# (name, edit of the arrays, words of the message)
FIT_EDITS = [
    ("row labels of the wrong length", lambda a: a.update(row_labels=a["row_labels"][:-1]), "'row_labels' must be 90"),
    ("column labels of the wrong length", lambda a: a.update(col_labels=a["col_labels"][:3]), "'col_labels' must"),
    ("numbers for labels", lambda a: a.update(row_labels=np.arange(90)), "labels (text)"),
    ("3-d mu_hat for topics", lambda a: a.update(mu_hat=np.ones((90, 15, 2))), "does not fit the model"),
    ("thin 0", lambda a: a.update(thin=np.asarray(0)), "thin >= 1"),
    ("negative burn-in", lambda a: a.update(burn_in=np.asarray(-5)), "burn_in >= 0"),
    ("negative saved iterations", lambda a: a.update(saved_iterations=-a["saved_iterations"]), "must increase"),
    ("saved iterations past the traces", lambda a: a.update(saved_iterations=a["saved_iterations"] + 100), "the 12"),
    ("saved iterations off the schedule", lambda a: a.update(saved_iterations=a["saved_iterations"] + 1), "every thin"),
    ("saved iterations not increasing", lambda a: a.update(saved_iterations=a["saved_iterations"][::-1]), "increase"),
    ("NaN rates", lambda a: a.update(mu_hat=_nan_at_first(a["mu_hat"])), "'mu_hat' holds nan at (0, 0)"),
    ("negative rates", lambda a: a.update(mu_hat=-a["mu_hat"]), "finite and >= 0"),
    ("unknown method", lambda a: a.update(method=np.asarray("bayes")), "method 'bayes' is none of"),
    ("unknown inference", lambda a: a.update(inference=np.asarray("magic")), "inference 'magic' is none of"),
    ("NaN in a factor", lambda a: a.update(best_theta=_nan_at_first(a["best_theta"])), "factor 'best_theta' holds nan"),
    ("best iteration not saved", lambda a: a.update(best_iteration=np.asarray(-3)), "best_iteration -3 is none of"),
    ("traces as text", lambda a: a.update(log_joint=np.asarray(["x"] * 12)), "must hold numbers"),
    # these four loaded and then crashed score with an IndexError or a KeyError
    ("a factor missing", lambda a: a.pop("best_phi"), "a topics model's factors are theta, phi"),
    ("a factor of other components", lambda a: a.update(best_phi=np.ones((4, 15))), "not those of 3 components"),
    ("a factor of other columns", lambda a: a.update(best_phi=np.ones((3, 9))), "not those of 3 components"),
    ("factors of more components than n_components", lambda a: a.update(n_components=np.asarray(2)), "not those of 2"),
]


@pytest.mark.parametrize("edit", FIT_EDITS, ids=[name for name, _, _ in FIT_EDITS])
def test_inconsistent_fit_files_are_refused_naming_the_file(edit, fitted, tmp_path):
    name, change, words = edit
    arrays, release, truth = fitted
    arrays = dict(arrays)
    change(arrays)
    path = tmp_path / "edited.npz"
    np.savez(path, **arrays)
    with pytest.raises(ValueError) as caught:
        Posterior.load(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: ") and words in message and "\n" not in message, message
    assert "a fit is written by `lpviz fit --output DIR`" in message


def test_a_consistent_fit_file_loads_and_scores_as_saved(fitted, tmp_path):
    arrays, release, truth = fitted
    path = tmp_path / "fit.npz"
    np.savez(path, **arrays)
    loaded = Posterior.load(path)
    np.testing.assert_array_equal(loaded.mu_hat, arrays["mu_hat"])
    assert loaded.saved_iterations == arrays["saved_iterations"].tolist() and loaded.thin == 2
    assert lpviz.score(loaded, release, truth)["mae"] == pytest.approx(
        np.abs(arrays["mu_hat"] - truth.Y).mean(), rel=1e-12
    )


@pytest.fixture(scope="module")
def twelve_by_ten():
    Y = np.random.default_rng(3).poisson(2.0, size=(12, 10))
    release = privatize(Y, alpha=0.3, random_state=1)
    return lpviz.fit(release, n_components=2, n_iter=10, thin=2, random_state=0), release, Truth(Y=Y)


def test_score_refuses_a_release_of_another_shape(twelve_by_ten):
    posterior, _, _ = twelve_by_ten
    other = privatize(np.ones((5, 10), dtype=int), alpha=0.3, random_state=2)
    with pytest.raises(ValueError, match=r"the release is 5 x 10 but the fit 12 x 10: score a fit against the release"):
        lpviz.score(posterior, other)


def test_score_refuses_a_truth_of_another_shape(twelve_by_ten):
    posterior, release, _ = twelve_by_ten
    with pytest.raises(ValueError, match=r"the true counts have shape \(5, 10\) but the release \(12, 10\): give"):
        lpviz.score(posterior, release, Truth(Y=np.ones((5, 10), dtype=int)))
    with pytest.raises(ValueError, match=r"the true counts have shape \(5, 10\) but the fit \(12, 10\): give"):
        lpviz.score(posterior, None, Truth(Y=np.ones((5, 10), dtype=int)))


def test_score_takes_a_count_array_as_fit_does(twelve_by_ten):
    posterior, release, truth = twelve_by_ten
    counts = np.asarray(release.Y_obs)
    expected = lpviz.score(posterior, release, truth)
    as_array = lpviz.score(posterior, counts, truth.Y, alpha=release.alpha)
    for key in ("mae", "best_log_joint"):
        assert as_array[key] == expected[key]
    assert as_array["health"]["mass_ratio"] == pytest.approx(expected["health"]["mass_ratio"])
    # a fit of the array itself, scored against the same array
    fitted = lpviz.fit(counts, model="topics", alpha=release.alpha, n_components=2, n_iter=10, thin=2, random_state=0)
    assert lpviz.score(fitted, counts, truth, alpha=release.alpha)["mae"] == expected["mae"]
    with pytest.raises(ValueError, match=r"the counts have shape 5 x 10 but the fit 12 x 10"):
        lpviz.score(posterior, counts[:5])
    with pytest.raises(ValueError, match="alpha= goes with a count array"):
        lpviz.score(posterior, release, alpha=0.3)


# ---------------------------------------------------------------- LOW


def test_an_info_json_nested_100000_deep_is_one_line(tmp_path):
    from lpviz.datasets import load_counts

    path = tmp_path / "deep.npz"
    np.savez(path, Y=TRUE_COUNTS, info_json=np.asarray("[" * 100_000 + "]" * 100_000))
    with pytest.raises(ValueError) as caught:
        load_counts(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: 'info_json' nests 100,000 levels deep (at most 64") and "\n" not in message
    # brackets inside strings are text, not nesting
    np.savez(path, Y=TRUE_COUNTS, info_json=np.asarray(json.dumps({"note": "[" * 1000})))
    assert load_counts(path).info["note"] == "[" * 1000


WORKER_SCRIPT = textwrap.dedent(
    """
    import os, signal, sys, time
    from lpviz.reproduce.grid import local_cluster
    from distributed import Client

    with local_cluster(1, 1) as cluster, Client(cluster) as client:
        (before,) = client.run(os.getpid).values()
        os.kill(before, signal.SIGINT)  # what Ctrl-C in a terminal sends every process of its group
        time.sleep(3)
        (after,) = client.run(os.getpid).values()
        print("same worker" if after == before else "worker restarted", flush=True)
    """
)


def test_ctrl_c_leaves_the_reproduce_workers_to_the_client():
    # a worker that took Ctrl-C printed a 30-line traceback before the client's "interrupted"
    root = Path(__file__).parents[1]
    done = subprocess.run([sys.executable, "-c", WORKER_SCRIPT], capture_output=True, text=True, timeout=120, cwd=root)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "same worker"
    assert "Traceback" not in done.stderr and "KeyboardInterrupt" not in done.stderr, done.stderr


def test_ctrl_c_during_reproduce_prints_one_line(tmp_path):
    """Ctrl-C in a terminal (SIGINT to the whole group) once the grid runs: "interrupted", exit 130."""
    output = tmp_path / "runs"
    command = [sys.executable, "-m", "lpviz", "reproduce", "fig1", "--preset", "quick", "--workers", "1"]
    process = subprocess.Popen(
        [*command, "--output", str(output), "--no-progress"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        cwd=Path(__file__).parents[1],
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # a background shell ignores it
    )
    try:
        tasks = output / "fig1" / "tasks"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and process.poll() is None:
            if tasks.is_dir() and any(p.suffix == ".npz" for p in tasks.iterdir()):
                break
            time.sleep(0.2)
        assert process.poll() is None, "the run ended before it could be interrupted"
        os.killpg(process.pid, signal.SIGINT)
        _, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr and stderr.splitlines()[-1] == "interrupted", stderr
