"""Generic loaders on small files the tests write: exact matrices, labels, and every malformed case."""

import gzip
import os

import numpy as np
import pandas as pd
import pytest
import scipy.io
import scipy.sparse as sp

from lpviz.datasets import CountData, SyntheticData, load_counts, load_data, loaders, save_counts


def write(path, text):
    path.write_text(text)
    return path


# ---------------------------------------------------------------- edge lists


def test_edge_list_with_header_sums_repeated_pairs_and_keeps_names(tmp_path):
    path = write(tmp_path / "mail.csv", "source,target,count\nalice,bob,3\nbob,alice,1\nalice,bob,2\ncarol,alice,0\n")
    data = load_counts(path)
    assert data.model == "blocks" and data.info["format"] == "edges"
    assert data.row_labels == data.col_labels == ["alice", "bob", "carol"]
    np.testing.assert_array_equal(data.Y, [[0, 5, 0], [1, 0, 0], [0, 0, 0]])
    assert isinstance(data.Y, np.ndarray) and data.Y.dtype == np.int64


def test_edge_list_without_header_or_counts_counts_each_line_once(tmp_path):
    path = write(tmp_path / "pairs.csv", "x,y\ny,x\nx,y\nz,x\n")
    data = load_counts(path)
    assert data.row_labels == ["x", "y", "z"]
    np.testing.assert_array_equal(data.Y, [[0, 2, 0], [1, 0, 0], [1, 0, 0]])


def test_snap_style_integer_ids_sort_numerically(tmp_path):
    path = write(tmp_path / "graph.txt", "# Directed graph\n# FromNodeId\tToNodeId\n10\t2\n2\t10\n2\t3\n\n")
    data = load_counts(path)
    assert data.row_labels == ["2", "3", "10"]
    np.testing.assert_array_equal(data.Y, [[0, 1, 1], [0, 0, 0], [1, 0, 0]])


def test_actor_names_sort_naturally(tmp_path):
    # actor2 before actor10 (numbers inside names compare as numbers, issue 37), not as text
    lines = "".join(f"actor{i},actor{(i + 1) % 12}\n" for i in (10, 2, 0, 11, 1))
    data = load_counts(write(tmp_path / "mail.csv", "source,target\n" + lines + "b2x,b10\nb10,a\n"))
    expected = ["a", "actor0", "actor1", "actor2", "actor3", "actor10", "actor11", "b2x", "b10"]
    assert data.row_labels == data.col_labels == expected
    actor = {name: k for k, name in enumerate(expected)}
    assert data.Y[actor["actor2"], actor["actor3"]] == 1 and data.Y[actor["actor10"], actor["actor11"]] == 1


@pytest.mark.parametrize(
    "name, text",
    [
        ("e.tsv", "from\tto\tweight\na b\tc\t2\nc\ta b\t1\n"),  # a tab file: names may hold spaces
        ("e.txt", "a_b c 2\nc a_b 1\n"),  # whitespace separated
    ],
)
def test_separators(tmp_path, name, text):
    data = load_counts(write(tmp_path / name, text))
    assert len(data.row_labels) == 2
    assert data.Y.sum() == 3 and data.Y[0, 1] == 2 and data.Y[1, 0] == 1


def test_gzipped_edge_list_and_explicit_header_flag(tmp_path):
    path = tmp_path / "e.csv.gz"
    path.write_bytes(gzip.compress(b"p1,p2\np1,p2\n"))
    # two names-only lines: no way to tell a header, so it is data unless told
    assert load_counts(path).Y.sum() == 2
    assert load_counts(path, header=True).Y.sum() == 1


def test_large_networks_stay_sparse(tmp_path, monkeypatch):
    monkeypatch.setattr(loaders, "DENSE_NETWORK_MAX_ACTORS", 2)
    data = load_counts(write(tmp_path / "e.csv", "a,b,1\nb,c,4\n"))
    assert sp.issparse(data.Y)
    np.testing.assert_array_equal(data.dense(), [[0, 1, 0], [0, 0, 4], [0, 0, 0]])


# ---------------------------------------------------------------- dense CSV


def test_dense_csv_written_by_pandas_round_trips(tmp_path):
    frame = pd.DataFrame(
        [[1, 0, 2, 0], [0, 3, 0, 1]], index=["d1", "d2"], columns=["apple", "banana", "cherry", "date"]
    )
    frame.to_csv(tmp_path / "dtm.csv")
    data = load_counts(tmp_path / "dtm.csv")
    assert data.model == "topics" and data.info["format"] == "dense-csv"
    assert data.row_labels == ["d1", "d2"] and data.col_labels == list(frame.columns)
    np.testing.assert_array_equal(data.Y, frame.to_numpy())


def test_dense_csv_without_labels_and_narrow_table_by_kind(tmp_path):
    data = load_counts(write(tmp_path / "m.csv", "1,0,2,0,0\n0,3,0,1,1.0\n"))
    np.testing.assert_array_equal(data.Y, [[1, 0, 2, 0, 0], [0, 3, 0, 1, 1]])
    assert data.row_labels == ["0", "1"]
    narrow = write(tmp_path / "narrow.csv", "1,0,2\n0,3,0\n")
    assert load_counts(narrow).model == "blocks"  # three numeric columns read as an edge list ...
    np.testing.assert_array_equal(load_counts(narrow, kind="dense-csv").Y, [[1, 0, 2], [0, 3, 0]])  # ... unless told


def test_vocab_option_names_the_columns(tmp_path):
    vocab = write(tmp_path / "words.txt", "alpha\nbeta\ngamma\n\n")
    data = load_counts(write(tmp_path / "m.csv", "1,0,2,5\n0,3,0,1\n"), vocab=["a", "b", "c", "d"])
    assert data.col_labels == ["a", "b", "c", "d"]
    with pytest.raises(ValueError, match="words.txt has 3 words but .*m.csv has 4 word columns"):
        load_counts(tmp_path / "m.csv", vocab=vocab)


# ---------------------------------------------------------------- npz


def test_npz_with_Y_and_vocab(tmp_path):
    np.savez(tmp_path / "c.npz", Y=np.array([[1, 0], [2, 3]]), vocab=np.array(["x", "y"]))
    data = load_counts(tmp_path / "c.npz")
    assert data.model == "topics" and data.col_labels == ["x", "y"] and data.row_labels == ["0", "1"]
    np.testing.assert_array_equal(data.Y, [[1, 0], [2, 3]])


def test_scipy_save_npz_file(tmp_path):
    sp.save_npz(tmp_path / "s.npz", sp.csr_matrix(np.array([[0, 4], [1, 0]])))
    np.testing.assert_array_equal(load_counts(tmp_path / "s.npz").dense(), [[0, 4], [1, 0]])


@pytest.mark.parametrize("sparse", [False, True])
def test_save_counts_round_trip_and_no_silent_overwrite(tmp_path, sparse):
    Y = np.array([[0, 2, 1], [3, 0, 0], [0, 0, 7]])
    original = CountData(
        Y=sp.csr_matrix(Y) if sparse else Y,
        row_labels=["a", "b", "c"],
        col_labels=["a", "b", "c"],
        model="blocks",
        source="here",
        info={"n": np.int64(3), "report": {"skipped": {"empty": 1}}},
    )
    path = save_counts(original, tmp_path / "net.npz")
    back = load_counts(path)
    assert sp.issparse(back.Y) == sparse
    np.testing.assert_array_equal(back.dense(), Y)
    assert (back.row_labels, back.col_labels, back.model) == (["a", "b", "c"], ["a", "b", "c"], "blocks")
    # the data set is named after the file read, never after a name or path stored inside it
    assert back.source == str(path) and back.name == "net.npz"
    assert back.info["n"] == 3 and back.info["report"] == {"skipped": {"empty": 1}}
    with pytest.raises(FileExistsError, match="overwrite=True"):
        save_counts(original, path)
    original.Y = original.Y * 2
    save_counts(original, path, overwrite=True)
    np.testing.assert_array_equal(load_counts(path).dense(), 2 * Y)
    assert [p.name for p in tmp_path.iterdir()] == ["net.npz"]  # no temporary left behind
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask  # the user's usual permissions, not 0600
    with pytest.raises(ValueError, match="ending in .npz"):
        save_counts(original, tmp_path / "net.csv")


# ---------------------------------------------------------------- Matrix Market


def test_matrix_market_files_written_by_scipy(tmp_path):
    Y = np.array([[4, 0, 0], [0, 0, 1], [2, 5, 0]])
    scipy.io.mmwrite(tmp_path / "coo.mtx", sp.coo_matrix(Y), field="integer")
    scipy.io.mmwrite(tmp_path / "real.mtx", sp.coo_matrix(Y.astype(float)))
    scipy.io.mmwrite(tmp_path / "array.mtx", Y, field="integer")  # column-major values
    for name in ("coo.mtx", "real.mtx", "array.mtx"):
        data = load_counts(tmp_path / name)
        assert data.model == "topics" and data.info["format"] == "mtx"
        np.testing.assert_array_equal(data.dense(), Y, err_msg=name)


def test_matrix_market_symmetric_pattern_mirrors_the_triangle(tmp_path):
    path = write(tmp_path / "s.mtx", "%%MatrixMarket matrix coordinate pattern symmetric\n% note\n3 3 2\n2 1\n3 3\n")
    np.testing.assert_array_equal(load_counts(path).dense(), [[0, 1, 0], [1, 0, 0], [0, 0, 1]])


# ---------------------------------------------------------------- UCI bag of words


def _uci(tmp_path, gz=False):
    text = "2\n3\n4\n1 1 2\n1 3 1\n2 2 5\n2 3 1\n"
    path = tmp_path / ("docword.kos.txt.gz" if gz else "docword.kos.txt")
    if gz:
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    write(tmp_path / "vocab.kos.txt", "apple\nbanana\ncherry\n")
    return path


@pytest.mark.parametrize("gz", [False, True])
def test_uci_bag_of_words_with_vocab_beside_it(tmp_path, gz):
    data = load_counts(_uci(tmp_path, gz))
    assert sp.issparse(data.Y) and data.info["format"] == "uci"
    np.testing.assert_array_equal(data.dense(), [[2, 0, 1], [0, 5, 1]])
    assert data.col_labels == ["apple", "banana", "cherry"] and data.row_labels == ["1", "2"]
    np.testing.assert_array_equal(load_counts(tmp_path).dense(), data.dense())  # the folder works too


def test_uci_without_vocab_says_where_it_looked(tmp_path):
    path = _uci(tmp_path)
    (tmp_path / "vocab.kos.txt").unlink()
    with pytest.raises(FileNotFoundError, match="vocab.kos.txt is missing.*pass vocab=PATH"):
        load_counts(path)
    assert load_counts(path, vocab=["a", "b", "c"]).col_labels == ["a", "b", "c"]


# ---------------------------------------------------------------- malformed input

BAD_TEXT_FILES = [
    ("neg.csv", "a,b,3\nb,a,-2\n", r"neg.csv, line 2: a negative count -2"),
    ("frac.csv", "a,b,3\n\nb,a,1.5\n", r"frac.csv, line 3: a fractional count 1.5.*whole numbers"),
    ("long.csv", "a,b,3\nb,a,1,7\nc,d,1\n", r"long.csv, line 2: 4 fields where an edge list has 3.*ragged"),
    ("short.csv", "a,b,3\nb,a,1\nc,d\n", r"short.csv, line 3: a missing or non-finite count.*ragged"),
    # guessed an edge list from line 1: said so, and (numbers on line 1) the first bad line read as a table
    ("guessed.csv", "a,b,3\nb,a,1\nc,d\n", r"read guessed.csv as an edge list .*first line; if it is a document"),
    (
        "numbers.csv",
        "1,2,3\n4,five,6\n7,8\n",
        r"numbers.csv, line 3: .* as an edge list .*read as a document x word table \(kind='dense-csv'\): "
        r"line 2: column 2 'five' is not a number",
    ),
    ("word.csv", "a,b,3\nb,a,x\n", r"word.csv, line 2: count 'x' is not a number"),
    ("blank.csv", "# nothing here\n\n", r"blank.csv: no data lines"),
    ("header.csv", "source,target,count\n", r"header.csv: only a header line, no edges"),
    ("zeros.csv", "a,b,0\n", r"zeros.csv: no counts .*total 0"),
    ("one.csv", "a\nb\n", r"one.csv, line 1: a single column.*separator"),
    ("dense_short.csv", "w1,w2,w3,w4\n1,2,3,4\n1,2,3\n", r"dense_short.csv, line 3, column 4: a missing"),
    ("dense_neg.csv", "w1,w2,w3,w4\n1,2,3,4\n1,2,-3,0\n", r"dense_neg.csv, line 3, column 3: a negative count"),
    ("dense_word.csv", "w1,w2,w3,w4\n1,2,3,4\n1,2,oops,0\n", r"dense_word.csv, line 3: column 3 'oops' is not"),
    (
        "docword.range.txt",
        "2\n3\n2\n1 1 2\n3 2 1\n",
        r"docword.range.txt, line 5: row \(document\) id 3 is out "
        r"of range 1..2",
    ),
    ("docword.word.txt", "2\n3\n2\n1 1 2\n1 4 1\n", r"docword.word.txt, line 5: column \(word\) id 4 is out"),
    ("docword.zero.txt", "2\n3\n2\n0 1 2\n1 2 1\n", r"docword.zero.txt, line 4: row \(document\) id 0 .*1-based"),
    ("docword.trunc.txt", "2\n3\n3\n1 1 2\n1 2 1\n", r"declares 3 entries but the file has 2.*truncated"),
    ("docword.head.txt", "hello\n3\n3\n1 1 2\n", r"docword.head.txt, line 1: expected the three header lines"),
    ("docword.frac.txt", "2\n3\n2\n1 1 2.5\n1 2 1\n", r"docword.frac.txt, line 4: a fractional count 2.5"),
    ("docword.fracid.txt", "2\n3\n2\n1 1.5 2\n", r"line 4: column id is missing or not a whole number"),
    ("plain.mtx", "hello\n", r"plain.mtx, line 1: not a Matrix Market file"),
    (
        "complex.mtx",
        "%%MatrixMarket matrix coordinate complex general\n2 2 1\n1 1 1 1\n",
        r"complex matrix cannot hold counts",
    ),
    (
        "skew.mtx",
        "%%MatrixMarket matrix coordinate integer skew-symmetric\n2 2 1\n2 1 1\n",
        r"skew-symmetric matrices cannot hold counts",
    ),
    ("short.mtx", "%%MatrixMarket matrix array integer general\n2 2\n1\n2\n3\n", r"declares 2 x 2 = 4 values"),
    ("data.dat", "1,2\n", r"data.dat: cannot tell the format.*kind="),
]


@pytest.mark.parametrize("name, text, message", BAD_TEXT_FILES, ids=[case[0] for case in BAD_TEXT_FILES])
def test_malformed_text_files_name_file_line_and_fix(tmp_path, name, text, message):
    for vocab in ("range", "word", "zero", "trunc", "head", "frac", "fracid"):
        write(tmp_path / f"vocab.{vocab}.txt", "a\nb\nc\n")
    with pytest.raises(ValueError, match=message):
        load_counts(write(tmp_path / name, text))


def test_files_that_are_not_what_their_name_says(tmp_path):
    (tmp_path / "packed.csv").write_bytes(gzip.compress(b"a,b,1\n"))
    with pytest.raises(ValueError, match="gzip-compressed but its name does not end in .gz.*packed.csv.gz"):
        load_counts(tmp_path / "packed.csv")
    write(tmp_path / "plain.csv.gz", "a,b,1\n")
    with pytest.raises(ValueError, match="named .gz but not gzip-compressed"):
        load_counts(tmp_path / "plain.csv.gz")
    np.savez(tmp_path / "archive.npz", Y=np.ones((2, 2)))
    (tmp_path / "archive.npz").rename(tmp_path / "archive.csv")
    with pytest.raises(ValueError, match="zip archive .*npz"):
        load_counts(tmp_path / "archive.csv")
    (tmp_path / "binary.tsv").write_bytes(b"\x00\x01\x02binary")
    with pytest.raises(ValueError, match="binary content"):
        load_counts(tmp_path / "binary.tsv")
    (tmp_path / "latin.csv").write_bytes("jos\xe9,ana,1\n".encode("latin-1"))
    with pytest.raises(ValueError, match="not UTF-8.*save it as UTF-8"):
        load_counts(tmp_path / "latin.csv")
    write(tmp_path / "text.npz", "a,b,1\n")
    with pytest.raises(ValueError, match="text.npz: not an .npz archive"):
        load_counts(tmp_path / "text.npz")
    np.save(tmp_path / "single.npy", np.ones((2, 2)))
    (tmp_path / "single.npy").rename(tmp_path / "single.npz")
    with pytest.raises(ValueError, match="single .npy array"):
        load_counts(tmp_path / "single.npz")


@pytest.mark.parametrize(
    "arrays, message",
    [
        ({"X": np.ones((2, 2))}, r"no count matrix 'Y' in this .npz \(it holds: 'X'\)"),
        ({"Y": np.array([[1, -1]])}, r"cell \(0, 1\) of Y: a negative count -1"),
        ({"Y": np.array([[1, 0.5]])}, r"cell \(0, 1\) of Y: a fractional count 0.5"),
        ({"Y": np.array([1, 2])}, r"'Y' has shape \(2,\)"),
        ({"Y": np.array([["a"]])}, r"holds <U1 values, not numbers"),
        ({"Y": np.ones((2, 2), int), "vocab": np.array(["a", "b", "c"])}, r"'vocab' has 3 names for 2"),
        ({"Y": np.ones((2, 3), int), "model": np.array("blocks")}, r"needs a square sender x recipient matrix"),
        ({"Y": np.ones((2, 2), int), "vocab": np.array(["a", 1], dtype=object)}, r"pickled.*for safety"),
        ({"Y": np.zeros((2, 2), int)}, r"no counts"),
    ],
)
def test_malformed_npz(tmp_path, arrays, message):
    np.savez(tmp_path / "bad.npz", **arrays)
    with pytest.raises(ValueError, match=message):
        load_counts(tmp_path / "bad.npz")


def test_bad_arguments(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.csv: no such file"):
        load_counts(tmp_path / "missing.csv")
    with pytest.raises(ValueError, match="kind='xls' is not a format"):
        load_counts(write(tmp_path / "e.csv", "a,b\n"), kind="xls")
    with pytest.raises(ValueError, match="is a folder"):
        load_counts(tmp_path, kind="edges")
    with pytest.raises(ValueError, match="vocab= is for document-term"):
        load_counts(tmp_path / "e.csv", vocab=["x"])


# ---------------------------------------------------------------- load_data specs


def test_load_data_paths_and_kind_prefix(tmp_path):
    path = write(tmp_path / "narrow.csv", "1,0,2\n0,3,0\n")
    assert load_data(str(path)).model == "blocks"
    assert load_data(path).model == "blocks"
    np.testing.assert_array_equal(load_data(f"dense-csv:{path}").Y, [[1, 0, 2], [0, 3, 0]])
    assert load_data(f"edges:{path}", header=False).model == "blocks"


def test_load_data_bad_specs_say_what_is_accepted(tmp_path):
    with pytest.raises(FileNotFoundError, match="no data at 'nowhere.csv'.*enron-topics:PATH.*synthetic-blocks"):
        load_data("nowhere.csv")
    with pytest.raises(ValueError, match="needs a path: write enron-network:PATH"):
        load_data("enron-network:")
    with pytest.raises(ValueError, match="takes no path"):
        load_data("synthetic-topics:x")
    path = write(tmp_path / "e.csv", "a,b\n")
    with pytest.raises(TypeError, match="unknown option\\(s\\) n_docs; load_counts takes kind, header, vocab"):
        load_data(str(path), n_docs=5)
    with pytest.raises(TypeError, match="non-empty string or path"):
        load_data(3)


def test_load_data_synthetic_specs_pass_options_through():
    topics = load_data("synthetic-topics", n_docs=12, n_words=7, n_topics=2, random_state=3)
    assert isinstance(topics, SyntheticData) and topics.model == "topics" and topics.shape == (12, 7)
    again = load_data("synthetic-topics", n_docs=12, n_words=7, n_topics=2, random_state=3)
    np.testing.assert_array_equal(topics.Y, again.Y)
    blocks = load_data("synthetic-blocks", n_actors=8, n_communities=2, random_state=1)
    assert blocks.model == "blocks" and blocks.shape == (8, 8)


def _maildir(root):
    """Three messages a -> b, c; b -> a; a -> b (Bcc repeating Cc), enough words for topics."""
    messages = {
        ("alice", "1."): ("<1@x>", "alice@enron.com", "bob@enron.com", "carol@enron.com", "gas pipeline " * 30),
        ("bob", "1."): ("<2@x>", "bob@enron.com", "alice@enron.com", "", "power trading desk " * 20),
        ("alice", "2."): ("<3@x>", "alice@enron.com", "bob@enron.com", "", "gas storage contract " * 20),
    }
    for (user, name), (mid, sender, to, cc, body) in messages.items():
        folder = root / "maildir" / user / "sent"
        folder.mkdir(parents=True, exist_ok=True)
        headers = [
            f"Message-ID: {mid}",
            "Date: Mon, 14 May 2001 16:39:00 -0700 (PDT)",
            f"From: {sender}",
            f"To: {to}",
            "Subject: test",
        ]
        if cc:
            headers += [f"Cc: {cc}", f"Bcc: {cc}"]
        (folder / name).write_bytes(("\r\n".join(headers) + "\r\n\r\n" + body + "\n").encode())
    return root / "maildir"


def test_load_data_dispatches_to_the_enron_builders(tmp_path):
    source = _maildir(tmp_path)
    network = load_data(f"enron-network:{source}", min_count=1, cache_dir=False)
    assert network.model == "blocks"
    assert network.row_labels == ["alice@enron.com", "bob@enron.com"]  # carol never sent: not an actor
    np.testing.assert_array_equal(network.Y, [[0, 2], [1, 0]])
    topics = load_data(
        f"enron-topics:{source}", n_docs=2, n_words=50, min_tokens=1, max_df=1.0, random_state=0, cache_dir=False
    )
    assert topics.model == "topics" and topics.shape[0] == 2
    assert set(topics.col_labels) <= {"gas", "pipeline", "power", "trading", "desk", "storage", "contract"}
