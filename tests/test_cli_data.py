"""`lpviz fetch-enron` against a loopback server and `lpviz build-enron` on small maildirs the tests write."""

import hashlib
import io
import json
import re
import tarfile
import warnings

import numpy as np
import pytest
from test_download import server  # noqa: F401  (the loopback HTTP server fixture)
from test_loaders import _maildir

from lpviz.cli import main
from lpviz.datasets import load_counts


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


# ---------------------------------------------------------------- fetch-enron


def test_fetch_enron_downloads_and_prints_the_path(server, tmp_path, capsys):  # noqa: F811
    code, out, err = run(capsys, "fetch-enron", "--dest", tmp_path, "--url", server.url, "--no-progress")
    assert code == 0, err
    assert out.strip() == str(tmp_path / "enron.tar.gz")
    assert (tmp_path / "enron.tar.gz").read_bytes() == server.payload
    digest = hashlib.sha256(server.payload).hexdigest()
    assert f"sha256:{digest} (check it next time with --known-hash)" in err


def test_fetch_enron_known_hash(server, tmp_path, capsys):  # noqa: F811
    digest = hashlib.sha256(server.payload).hexdigest()
    code, out, err = run(
        capsys,
        "fetch-enron",
        "--dest",
        tmp_path,
        "--url",
        server.url,
        "--no-progress",
        "--known-hash",
        f"sha256:{digest}",
    )
    assert code == 0 and out.strip() == str(tmp_path / "enron.tar.gz") and err == ""
    code, out, err = run(
        capsys,
        "fetch-enron",
        "--dest",
        tmp_path / "other.tar.gz",
        "--url",
        server.url,
        "--no-progress",
        "--known-hash",
        "sha256:" + "0" * 64,
    )
    assert code == 2 and out == ""
    assert err.startswith("lpviz fetch-enron: error: download of") and "the file was deleted" in err
    assert not (tmp_path / "other.tar.gz").exists() and not (tmp_path / "other.tar.gz.part").exists()


def test_fetch_enron_errors_are_one_clear_line(server, tmp_path, capsys):  # noqa: F811
    server.cut_first = 10
    code, out, err = run(
        capsys, "fetch-enron", "--dest", tmp_path / "e.tar.gz", "--url", server.url, "--no-progress", "--retries", "0"
    )
    assert code == 2 and out == ""
    assert err.startswith("lpviz fetch-enron: error: download of") and "run again to resume" in err
    assert not (tmp_path / "e.tar.gz").exists()

    (tmp_path / "mine.tar.gz").write_bytes(b"x")
    code, _, err = run(
        capsys, "fetch-enron", "--dest", tmp_path / "mine.tar.gz", "--url", server.url, "--expected-size", 5
    )
    assert code == 2 and "does not overwrite" in err
    assert (tmp_path / "mine.tar.gz").read_bytes() == b"x"

    code, _, err = run(capsys, "fetch-enron", "--dest", tmp_path, "--url", server.url + "x", "--no-progress")
    assert code == 2 and "HTTP 404" in err
    code, _, err = run(capsys, "fetch-enron", "--retries", "-1")
    assert code == 2 and "--retries must be >= 0" in err


# ---------------------------------------------------------------- build-enron


@pytest.fixture
def maildir(tmp_path):
    return _maildir(tmp_path / "mail")


def test_build_enron_network_summary_output_and_cache(maildir, tmp_path, capsys):
    cache = tmp_path / "cache"
    output = tmp_path / "network.npz"
    code, out, err = run(
        capsys, "build-enron", "network", maildir, "--min-count", 1, "--cache-dir", cache, "--output", output, "--json"
    )
    assert code == 0, err
    summary = json.loads(out)
    assert summary["shape"] == [2, 2] and summary["total_count"] == 3 and summary["nonzero_cells"] == 2
    assert summary["cache"] == "built" and summary["report"]["n_read"] == 3
    assert summary["options"] == {"min_count": 1}
    saved = load_counts(output)
    assert saved.model == "blocks" and saved.row_labels == ["alice@enron.com", "bob@enron.com"]
    np.testing.assert_array_equal(saved.Y, [[0, 2], [1, 0]])

    code, out, err = run(capsys, "build-enron", "network", maildir, "--min-count", 1, "--cache-dir", cache)
    assert code == 0, err
    assert out.splitlines()[0] == ("enron network: 2 x 2 (senders x recipients), 2 nonzero cells, 3 counts")
    assert "read: 3 messages, 3 kept; skipped: none" in out
    assert "loaded from the cache" in out


def test_build_enron_topics_text_summary(maildir, tmp_path, capsys):
    output = tmp_path / "topics.npz"
    code, out, err = run(
        capsys,
        "build-enron",
        "topics",
        maildir,
        "--n-docs",
        2,
        "--n-words",
        50,
        "--min-tokens",
        1,
        "--max-df",
        1.0,
        "--seed",
        4,
        "--no-cache",
        "--output",
        output,
    )
    assert code == 0, err
    assert out.startswith("enron topics: 2 x ") and "(emails x words)" in out
    assert "built (no cache)" in out and f"saved to {output}" in out
    saved = load_counts(output)
    assert saved.model == "topics" and saved.shape[0] == 2 and saved.info["params"]["random_state"] == 4


@pytest.mark.parametrize(
    "argv, message",
    [
        (["network", "{maildir}", "--n-docs", "5"], "--n-docs only applies to the topics matrix, not network"),
        (["topics", "{maildir}", "--min-count", "5"], "--min-count only applies to the network matrix"),
        (["topics", "{tmp}/nowhere"], "nowhere: no such file or folder; .*lpviz fetch-enron"),
        (["topics", "{maildir}", "--output", "{tmp}/out.csv"], "give a file name ending in .npz"),
        (["topics", "{maildir}", "--output", "{tmp}/taken.npz"], "already exists; .*--force"),
        (["topics", "{maildir}", "--no-cache", "--cache-dir", "{tmp}"], "--no-cache and --cache-dir"),
        (["topics", "{maildir}", "--no-cache", "--max-df", "0"], "max_df must be a fraction in \\(0, 1\\]"),
        (["network", "{maildir}", "--no-cache", "--min-count", "1000"], "lower min_count"),
    ],
)
def test_build_enron_bad_arguments(maildir, tmp_path, capsys, argv, message):
    (tmp_path / "taken.npz").write_bytes(b"someone's file")
    argv = [a.format(maildir=maildir, tmp=tmp_path) for a in argv]
    code, out, err = run(capsys, "build-enron", *argv)
    assert code == 2 and out == ""
    assert err.startswith("lpviz build-enron: error: ")
    assert len(err.strip().splitlines()) == 1
    assert re.search(message, err), err
    assert (tmp_path / "taken.npz").read_bytes() == b"someone's file"


def test_build_enron_unknown_matrix_is_an_argparse_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["build-enron", "graph", "somewhere"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'graph'" in capsys.readouterr().err


def test_build_enron_reports_what_the_cache_did(maildir, tmp_path, capsys):
    cache = tmp_path / "cache"
    argv = ["build-enron", "network", maildir, "--min-count", 1, "--cache-dir", cache, "--json"]
    first = json.loads(run(capsys, *argv)[1])
    assert (first["cache"], first["corpus_cache"]) == ("built", "built")
    second = json.loads(run(capsys, *argv)[1])
    assert (second["cache"], second["corpus_cache"]) == ("hit", None)
    topics = json.loads(
        run(
            capsys,
            "build-enron",
            "topics",
            maildir,
            "--n-docs",
            2,
            "--min-tokens",
            1,
            "--max-df",
            1.0,
            "--cache-dir",
            cache,
            "--json",
        )[1]
    )
    assert (topics["cache"], topics["corpus_cache"]) == ("built", "hit")  # the corpus is shared
    for entry in cache.glob("enron-network-*.npz"):  # damage the network entry: rebuilt, and said so
        entry.write_bytes(b"garbage")
    with pytest.warns(RuntimeWarning, match="corrupt"):
        code, out, err = run(capsys, *argv[:-1])
    assert code == 0, err
    assert "rebuilt (the cached copy was damaged) and cached (from the cached corpus)" in out
    assert "loaded from the cache" not in out


def test_build_enron_with_an_unwritable_cache_folder_works_uncached(maildir, tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache folder would go")
    with pytest.warns(RuntimeWarning, match="cannot be written .*working without the cache"):
        code, out, err = run(
            capsys, "build-enron", "network", maildir, "--min-count", 1, "--cache-dir", blocker / "cache"
        )
    assert code == 0, err
    assert "built, not cached (the cache folder cannot be written)" in out


def _truncated_tarball(path, n=200):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for i in range(n):
            raw = (
                f"Message-ID: <{i}@x>\r\nFrom: a{i % 3}@enron.com\r\nTo: a{(i + 1) % 3}@enron.com\r\n\r\n"
                + f"message {i} "
                + "word " * 400
            ).encode()
            info = tarfile.TarInfo(f"maildir/a/sent/{i}.")
            info.size = len(raw)
            archive.addfile(info, io.BytesIO(raw))
    data = buffer.getvalue()
    path.write_bytes(data[: len(data) // 2])
    return path


def test_build_enron_truncated_archive_is_an_error_unless_allow_partial(tmp_path, capsys):
    source = _truncated_tarball(tmp_path / "cut.tar.gz")
    cache = tmp_path / "cache"
    code, out, err = run(capsys, "build-enron", "network", source, "--min-count", 1, "--cache-dir", cache)
    assert code == 2 and out == ""
    assert re.match(
        r"lpviz build-enron: error: .*cut.tar.gz: the archive is truncated or corrupt: it stops "
        r"after \d+ complete messages .*--allow-partial",
        err,
    ), err
    with pytest.warns(RuntimeWarning, match="truncated"):
        code, out, err = run(
            capsys, "build-enron", "network", source, "--min-count", 1, "--cache-dir", cache, "--allow-partial"
        )
    assert code == 0, err
    assert "PARTIAL: the archive stops after" in out and "built from partial input, not cached" in out
    assert not list(cache.glob("*.npz"))  # nothing partial is cached
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        summary = json.loads(
            run(
                capsys,
                "build-enron",
                "network",
                source,
                "--min-count",
                1,
                "--cache-dir",
                cache,
                "--allow-partial",
                "--json",
            )[1]
        )
    assert summary["partial"] and summary["cache"] == "partial" and summary["report"]["partial"]


def test_build_enron_output_into_a_missing_folder_is_refused_before_building(maildir, tmp_path, capsys):
    code, out, err = run(
        capsys, "build-enron", "network", maildir, "--no-cache", "--output", tmp_path / "missing" / "net.npz"
    )
    assert code == 2 and out == ""
    assert "the folder" in err and "missing does not exist" in err
    assert not (tmp_path / "missing").exists()
