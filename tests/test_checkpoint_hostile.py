"""Checkpoints of a chain over a cluster tried as a careless or hostile colleague on shared storage
would (issue 58): a part swapped in from another checkpoint, a missing or extra part, partitions that
do not tile, a deflate bomb in driver.npz or a part, a LATEST naming a path outside the folder, and
random byte damage. Each is refused in words naming the file (a ValueError, or FileNotFoundError for
what is missing), fast and in little memory; an untouched checkpoint resumes to the unbroken chain."""

import os
import shutil
import tempfile
import time
import tracemalloc
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lpviz
from lpviz import distributed
from lpviz.datasets import make_topics
from tests._distributed_checks import same_chain
from tests.hostile_files import bomb_member, small_member, write_members

pytest.importorskip("distributed")

CLUSTER_WORKERS = 2  # the conftest's client: 61 rows cut as rows-0-32 and rows-32-61
OPTIONS = dict(method="private", n_components=3, n_iter=8, burn_in=2, thin=2, random_state=5)
LATE = "iteration-000000006"
PARTS = ("rows-0-32.npz", "rows-32-61.npz")
MiB = 2**20


@pytest.fixture(scope="module")
def release():
    return make_topics(n_docs=61, n_words=40, random_state=3).release()


@pytest.fixture(scope="module")
def reference(release):
    return lpviz.fit(release, **OPTIONS)


@pytest.fixture(scope="module")
def checkpoints(client, release, tmp_path_factory):
    """Folders of checkpoints as the chains left them: ``early`` (iteration 3) and ``late`` and
    ``again`` (iteration 6: two runs of the same chain) of the chain of OPTIONS, ``other``
    (iteration 6) of another seed's chain."""
    root = tmp_path_factory.mktemp("checkpoints")
    for name, n_iter, seed in (("early", 4, 5), ("late", 7, 5), ("again", 7, 5), ("other", 7, 6)):
        folder = root / name
        folder.mkdir()
        options = dict(OPTIONS, n_iter=n_iter, random_state=seed)
        distributed.fit(release, scheduler=client, checkpoint=folder, checkpoint_every=3, **options)
    return root


def copy_of(checkpoints, tmp_path, name="late"):
    folder = tmp_path / name
    shutil.copytree(checkpoints / name, folder)
    return folder


def resume(client, release, folder):
    return distributed.fit(release, scheduler=client, checkpoint=folder, checkpoint_every=3, resume=True, **OPTIONS)


def refused(client, release, folder, error, match):
    """Resuming from ``folder`` raises ``error`` matching ``match``; returns the seconds it took."""
    started = time.perf_counter()
    with pytest.raises(error, match=match) as caught:
        resume(client, release, folder)
    assert "\n" not in str(caught.value) and len(str(caught.value)) < 800  # one line, in words
    return time.perf_counter() - started


def test_an_untouched_checkpoint_resumes_to_the_unbroken_chain(client, release, reference, checkpoints, tmp_path):
    assert (checkpoints / "late" / "LATEST").read_text() == LATE
    resumed = resume(client, release, copy_of(checkpoints, tmp_path))
    assert same_chain(resumed, reference) == []


@pytest.mark.parametrize(
    "source, match",
    [
        ("early", r"rows-0-32\.npz: is a part of the checkpoint of iteration 3, not of iteration 6 .*copied"),
        ("again", r"rows-0-32\.npz: belongs to another checkpoint \(its id"),
        ("other", r"rows-0-32\.npz: is a part of another chain \(chain seed"),
    ],
)
def test_a_part_of_another_checkpoint_is_refused_naming_it(client, release, checkpoints, tmp_path, source, match):
    """The issue's HIGH 1: a row part copied in from another checkpoint (of another iteration, of
    another run of the same chain at the same iteration, of another chain) resumed silently into a
    third chain. The part records its checkpoint's id, seed and iteration, and is refused."""
    folder = copy_of(checkpoints, tmp_path)
    name = (checkpoints / source / "LATEST").read_text()
    shutil.copy(checkpoints / source / name / PARTS[0], folder / LATE / PARTS[0])
    assert refused(client, release, folder, ValueError, match) < 5


def test_an_extra_or_missing_part_is_refused_naming_it(client, release, checkpoints, tmp_path):
    folder = copy_of(checkpoints, tmp_path)
    shutil.copy(folder / LATE / PARTS[0], folder / LATE / "rows-0-16.npz")
    refused(client, release, folder, ValueError, r"rows-0-16\.npz: is not a part of this checkpoint .*2 parts")
    os.remove(folder / LATE / "rows-0-16.npz")
    os.remove(folder / LATE / PARTS[1])
    refused(
        client, release, folder, FileNotFoundError, r"rows-32-61\.npz: the checkpoint's part of rows 32-61 is missing"
    )


def _rewrite_driver(path, **changes):
    """driver.npz with some members replaced (None: left out), as np.savez writes it."""
    with np.load(path) as archive:
        arrays = {key: archive[key] for key in archive.files}
    arrays.update(changes)
    np.savez(path, **{key: value for key, value in arrays.items() if value is not None})


def test_rows_that_do_not_tile_the_release_are_refused(client, release, checkpoints, tmp_path):
    folder = copy_of(checkpoints, tmp_path)
    driver = folder / LATE / "driver.npz"
    _rewrite_driver(driver, partitions=np.array([[0, 32], [33, 61]]))
    refused(
        client,
        release,
        folder,
        ValueError,
        r"driver\.npz: its partitions \(0-32, 33-61\) do not tile the release's 61 rows",
    )
    _rewrite_driver(driver, partitions=np.array([[0, 32]]))  # one part: the second is then an extra
    refused(client, release, folder, ValueError, r"do not tile|not a part of this checkpoint")


def test_a_checkpoint_without_its_id_is_refused_as_an_older_one(client, release, checkpoints, tmp_path):
    folder = copy_of(checkpoints, tmp_path)
    _rewrite_driver(folder / LATE / "driver.npz", checkpoint_id=None, format=None)
    refused(client, release, folder, ValueError, r"driver\.npz: was written by an older lpviz.*without resume=True")
    folder = copy_of(checkpoints, tmp_path / "b")
    _rewrite_driver(folder / LATE / "driver.npz", chain_seed=None)  # the raw KeyError: 'chain_seed'
    refused(client, release, folder, ValueError, r"driver\.npz: has no member 'chain_seed'")


def _members_of(path, replace):
    """The members of the .npz at ``path`` (deflated) with ``replace`` ({name: member}) swapped in."""
    with np.load(path) as archive:
        members = [small_member(f"{key}.npy", archive[key]) for key in archive.files if key not in replace]
    return members + list(replace.values())


def _peak_of(call):
    """(the exception ``call`` raised, seconds, the peak of memory traced while it ran)."""
    tracemalloc.start()
    started = time.perf_counter()
    try:
        call()
    except Exception as error:
        caught = error
    else:
        caught = None
    seconds = time.perf_counter() - started
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return caught, seconds, peak


@pytest.mark.parametrize(
    "file, member, shape",
    [
        ("driver.npz", "log_joint", (250_000_000,)),  # 2 GB of float64 zeros in about 2 MB
        ("driver.npz", "shared_samples_0", (2, 40, 3_200_000)),
        ("driver.npz", "chain_seed", (250_000_000,)),
        (PARTS[1], "theta", (29, 8_000_000)),
    ],
)
def test_a_deflate_bomb_is_refused_fast_in_little_memory(client, release, checkpoints, tmp_path, file, member, shape):
    """The issue's HIGH 2: a 2 MB driver.npz inflating to 2 GB grew the driver by 1.9-2.3 GB before a
    raw KeyError. Each member's header is checked against the shape the checkpoint holds there
    before a byte of it is inflated."""
    folder = copy_of(checkpoints, tmp_path)
    path = folder / LATE / file
    write_members(path, _members_of(path, {member: bomb_member(f"{member}.npy", shape, np.float64)}))
    assert path.stat().st_size < 4 * MiB
    error, seconds, peak = _peak_of(lambda: resume(client, release, folder))
    assert isinstance(error, ValueError), error
    assert str(error).startswith(str(path)) and f"member {member!r}" in str(error)
    assert "checkpoint" in str(error) and "resume=True" in str(error)
    assert seconds < 5 and peak < 200 * MiB, (seconds, peak)


def _write_latest(folder, text):
    (folder / "LATEST").write_bytes(text if isinstance(text, bytes) else text.encode())


@pytest.mark.parametrize(
    "latest, error, match",
    [
        ("../x/" + LATE, ValueError, r"LATEST: names '\.\./x/iteration-000000006', a path .*plain iteration-N"),
        ("..", ValueError, r"LATEST: names '\.\.', which leads out of the folder"),
        ("ABSOLUTE", ValueError, r"LATEST: names '/.*', an absolute path; LATEST must name a checkpoint inside"),
        ("nope", ValueError, r"LATEST: names 'nope', which is not a checkpoint's name;.*'iteration-000000006'"),
        (
            "iteration-000000099",
            FileNotFoundError,
            r"names the checkpoint 'iteration-000000099', but .* does not exist",
        ),
        (b"\xff\xfe", ValueError, r"LATEST: is not one short line of text"),
        ("iteration-1" * 100, ValueError, r"LATEST: is not one short line of text"),
    ],
)
def test_latest_must_name_a_checkpoint_inside_its_folder(client, release, checkpoints, tmp_path, latest, error, match):
    """The issue's MEDIUM 3: a LATEST naming ../elsewhere/x or an absolute path was followed; one
    naming a missing folder gave the raw errno text. Each is refused before the cluster is asked."""
    outside = copy_of(checkpoints, tmp_path / "x")  # a whole checkpoint, outside the folder resumed
    folder = copy_of(checkpoints, tmp_path)
    if latest == "ABSOLUTE":
        latest = str(outside / "late" / LATE)
    _write_latest(folder, latest)
    assert refused(client, release, folder, error, match) < 2


def test_a_checkpoint_that_is_a_link_out_of_the_folder_is_refused(client, release, checkpoints, tmp_path):
    outside = copy_of(checkpoints, tmp_path / "elsewhere")
    folder = copy_of(checkpoints, tmp_path)
    shutil.rmtree(folder / LATE)
    os.symlink(outside / LATE, folder / LATE)
    refused(client, release, folder, ValueError, r"is a symbolic link to .*, outside the checkpoint folder")
    os.remove(folder / LATE)
    shutil.copytree(outside / LATE, folder / LATE)
    os.remove(folder / LATE / "driver.npz")
    os.symlink(outside / LATE / "driver.npz", folder / LATE / "driver.npz")
    refused(client, release, folder, ValueError, r"driver\.npz' is a symbolic link to .*, outside its checkpoint")


def test_no_checkpoint_names_the_folder_and_what_to_do(client, release, tmp_path):
    refused(
        client, release, tmp_path, FileNotFoundError, r"no checkpoint in .* \(no LATEST file\).*run without resume=True"
    )


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_a_damaged_checkpoint_file_resumes_to_the_same_chain_or_is_refused_in_words(
    client, release, reference, checkpoints, data
):
    """Random bytes of driver.npz (or of a row part) changed, anywhere: the members, their headers,
    the zip's local headers and directory. The resume is the unbroken chain's bits, or a one-line
    ValueError naming the file; never another exception, never a third chain."""
    name = data.draw(st.sampled_from(["driver.npz", "driver.npz", PARTS[0]]), label="file")
    damaged = bytearray((checkpoints / "late" / LATE / name).read_bytes())
    places = data.draw(st.lists(st.integers(0, len(damaged) - 1), min_size=1, max_size=4), label="offsets")
    for place in places:
        damaged[place] = data.draw(st.integers(0, 255).filter(lambda b, old=damaged[place]: b != old), label="byte")
    with tempfile.TemporaryDirectory() as root:
        folder = shutil.copytree(checkpoints / "late", os.path.join(root, "late"))
        with open(os.path.join(folder, LATE, name), "wb") as handle:
            handle.write(damaged)
        try:
            resumed = resume(client, release, folder)
        except ValueError as error:
            assert name in str(error) and "\n" not in str(error), error
        else:
            assert same_chain(resumed, reference) == []


def test_components_beyond_what_the_data_hold_are_warned_before_the_fit_starts(client):
    """The issue's LOW 4: n_components=10**6 on 40 x 20 counts ran for minutes without a word."""
    small = make_topics(n_docs=40, n_words=20, random_state=0).release()
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the warning comes before anything of the fit is allocated
        with pytest.raises(UserWarning, match=r"n_components=1,000,000 is more than data of shape 40 x 20 can hold"):
            lpviz.fit(small, n_components=10**6, n_iter=2)
        with pytest.raises(UserWarning, match=r"n_components=1,000,000 is more than"):  # over a cluster too
            lpviz.fit(small, n_components=10**6, n_iter=2, scheduler=client)
    assert time.perf_counter() - started < 2
    with pytest.warns(UserWarning, match=r"at most min\(rows, columns\) = 20 components.*n_components <= 20"):
        lpviz.fit(small, n_components=21, n_iter=2, thin=1)
    sparse = np.zeros((50, 50), dtype=np.int64)
    sparse[0, :5] = 3
    with pytest.warns(UserWarning, match=r"more than the 5 positive cells of the 50 x 50 counts"):
        lpviz.fit(sparse, model="topics", method="nonprivate", n_components=6, n_iter=2, thin=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lpviz.fit(small, n_components=20, n_iter=2, thin=1)  # as many as the data hold: no word
