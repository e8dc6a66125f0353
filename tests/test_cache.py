"""The cache: round trips, keys that follow source and parameters, corruption detected and rebuilt."""

import json
import os

import numpy as np
import pytest

from lpviz.datasets import build_enron_network, build_enron_topics, cache


def sample_arrays():
    return {
        "counts": np.arange(12, dtype=np.int64).reshape(3, 4),
        "mask": np.array([True, False, True]),
        "labels": ["caf\u00e9", "", "b\u00f6b\nnewline", "\U0001f600"],
    }


def entry_files(directory, key):
    return directory / f"{key}.npz", directory / f"{key}.json"


def test_round_trip_arrays_strings_and_meta(tmp_path):
    path = cache.save_arrays("unit-test", sample_arrays(), cache_dir=tmp_path, meta={"n": 3, "who": "me"})
    assert path == tmp_path / "unit-test.npz"
    arrays, meta = cache.load_arrays("unit-test", cache_dir=tmp_path)
    np.testing.assert_array_equal(arrays["counts"], sample_arrays()["counts"])
    np.testing.assert_array_equal(arrays["mask"], [True, False, True])
    assert arrays["labels"] == sample_arrays()["labels"]
    assert meta == {"n": 3, "who": "me"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["unit-test.json", "unit-test.npz"]  # no temp files


def test_missing_entry_and_disabled_cache(tmp_path):
    assert cache.load_arrays("absent", cache_dir=tmp_path) is None
    assert cache.save_arrays("off", sample_arrays(), cache_dir=False) is None
    assert cache.load_arrays("off", cache_dir=False) is None
    with pytest.raises(TypeError, match="cache_dir must be a path"):
        cache.save_arrays("x", sample_arrays(), cache_dir=3)
    with pytest.raises(TypeError, match="dtype object"):
        cache.save_arrays("x", {"bad": np.array([{}, []], dtype=object)}, cache_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []  # a failed save leaves nothing behind


def truncate(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def flip_a_byte(path):
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def drop_manifest(path):
    path.with_suffix(".json").unlink()


def garble_manifest(path):
    path.with_suffix(".json").write_text("{not json")


def other_format(path):
    manifest = path.with_suffix(".json")
    content = json.loads(manifest.read_text())
    content["format"] = -1
    manifest.write_text(json.dumps(content))


@pytest.mark.parametrize("damage", [truncate, flip_a_byte, drop_manifest, garble_manifest, other_format])
def test_damaged_entries_are_detected_removed_and_rebuilt(tmp_path, damage):
    cache.save_arrays("entry", sample_arrays(), cache_dir=tmp_path)
    damage(tmp_path / "entry.npz")
    with pytest.warns(RuntimeWarning, match="rebuilding"):
        assert cache.load_arrays("entry", cache_dir=tmp_path) is None
    assert list(tmp_path.iterdir()) == []
    calls = []

    def build():
        calls.append(1)
        return sample_arrays(), {"rebuilt": True}

    arrays, meta, status = cache.cached("entry", build, cache_dir=tmp_path)
    assert (status, calls, meta) == ("built", [1], {"rebuilt": True})  # load_arrays removed it: a miss
    arrays, meta, status = cache.cached("entry", build, cache_dir=tmp_path)
    assert (status, calls) == ("hit", [1]) and arrays["labels"] == sample_arrays()["labels"]
    damage(tmp_path / "entry.npz")
    with pytest.warns(RuntimeWarning, match="rebuilding"):
        arrays, meta, status = cache.cached("entry", build, cache_dir=tmp_path)
    assert (status, calls) == ("rebuilt", [1, 1])  # found damaged by cached itself: said so
    assert cache.cached("entry", build, cache_dir=tmp_path)[2] == "hit"


def test_keys_follow_kind_and_parameters():
    key = cache.cache_key("enron-topics", n_docs=10, fingerprint={"size": 1})
    assert key == cache.cache_key("enron-topics", fingerprint={"size": 1}, n_docs=10)
    assert key.startswith("enron-topics-")
    assert key != cache.cache_key("enron-topics", n_docs=11, fingerprint={"size": 1})
    assert key != cache.cache_key("enron-topics", n_docs=10, fingerprint={"size": 2})
    assert key != cache.cache_key("enron-network", n_docs=10, fingerprint={"size": 1})
    with pytest.raises(ValueError, match="cache kind"):
        cache.cache_key("../etc")


def test_fingerprints_change_with_the_source(tmp_path):
    file = tmp_path / "a.tar.gz"
    file.write_bytes(b"one")
    before = cache.source_fingerprint(file)
    file.write_bytes(b"two")
    os.utime(file, ns=(before["mtime_ns"], before["mtime_ns"]))  # same size and time: the head hash differs
    assert cache.source_fingerprint(file) != before
    folder = tmp_path / "maildir"
    (folder / "u" / "sent").mkdir(parents=True)
    (folder / "u" / "sent" / "1.").write_bytes(b"x")
    before = cache.source_fingerprint(folder)
    assert before["n_files"] == 1
    (folder / "u" / "sent" / "2.").write_bytes(b"y")
    assert cache.source_fingerprint(folder) != before
    with pytest.raises(FileNotFoundError):
        cache.source_fingerprint(tmp_path / "missing")


def test_default_directory_honours_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("LPVIZ_DATA_DIR", str(tmp_path / "mine"))
    assert cache.default_cache_dir() == tmp_path / "mine"
    assert cache.resolve_cache_dir(None) == tmp_path / "mine"
    assert cache.resolve_cache_dir(False) is None
    monkeypatch.delenv("LPVIZ_DATA_DIR")
    assert cache.default_cache_dir().name in {"data", "lpviz"}


# --- the builders use the cache ---------------------------------------------------------------

EMAIL = (
    "Message-ID: <{i}@x>\r\nFrom: {sender}@x.com\r\nTo: {recipient}@x.com\r\n"
    "Content-Type: text/plain; charset=us-ascii\r\n\r\n{body}\n"
)


def write_maildir(root, n=6):
    for i in range(n):
        path = root / "maildir" / f"user{i % 2}" / "sent" / f"{i}."
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            EMAIL.format(
                i=i,
                sender=f"user{i % 2}",
                recipient=f"user{(i + 1) % 3}",
                body=f"pipeline turbine gas word{'x' * i} " * 3,
            )
        )
    return root / "maildir"


def test_builders_reuse_rebuild_after_corruption_and_follow_source_changes(tmp_path):
    source = write_maildir(tmp_path / "src")
    store = tmp_path / "cache"
    first = build_enron_network(source, min_count=1, cache_dir=store)
    topics = build_enron_topics(source, n_docs=4, n_words=5, min_tokens=1, max_df=1.0, cache_dir=store)
    kinds = sorted(p.name.split("-")[1] for p in store.glob("*.npz"))
    assert kinds == ["corpus", "network", "topics"]  # one parsed corpus shared by both builders

    again = build_enron_network(source, min_count=1, cache_dir=store)
    np.testing.assert_array_equal(again.Y, first.Y)
    assert again.row_labels == first.row_labels and again.info == first.info
    again_topics = build_enron_topics(source, n_docs=4, n_words=5, min_tokens=1, max_df=1.0, cache_dir=store)
    assert (again_topics.Y != topics.Y).nnz == 0 and again_topics.col_labels == topics.col_labels

    for path in store.glob("*.npz"):
        flip_a_byte(path)
    with pytest.warns(RuntimeWarning, match="corrupt"):
        rebuilt = build_enron_network(source, min_count=1, cache_dir=store)
    np.testing.assert_array_equal(rebuilt.Y, first.Y)

    (source / "user0" / "sent" / "9.").write_text(EMAIL.format(i=9, sender="user0", recipient="user1", body="late"))
    changed = build_enron_network(source, min_count=1, cache_dir=store)
    assert changed.Y.sum() == first.Y.sum() + 1
