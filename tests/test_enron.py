"""Enron readers and the paper's two matrices: exact results on emails written here, rules on the real file."""

import csv
import email
import email.policy
import email.utils
import gzip
import io
import re
import tarfile
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from lpviz.datasets import CountData, build_enron_network, build_enron_topics, read_corpus, read_emails
from lpviz.datasets.enron import STOP_WORDS, EnronCorpus, MalformedEmail, clean_body, parse_email, tokenize

CRLF = "\r\n"


def message(headers, body, *, body_bytes=None):
    """RFC 822 bytes as the CMU files have them: CRLF headers, LF body."""
    head = CRLF.join(headers) + CRLF + CRLF
    return head.encode("ascii") + (body_bytes if body_bytes is not None else body.encode("ascii"))


STANDARD = ["Mime-Version: 1.0", "Content-Type: text/plain; charset=us-ascii", "Content-Transfer-Encoding: 7bit"]

EMAIL_A = message(
    [
        "Message-ID: <A@thyme>",
        "Date: Mon, 1 Jan 2001 10:00:00 -0800 (PST)",
        "From: Alice.Smith@Enron.com",
        "To: bob@enron.com, ",
        "\tcarol@enron.com",
        "Subject: budget",
        "Cc: dave@enron.com",
        *STANDARD,
        "Bcc: dave@enron.com",
        "X-From: Alice Smith",
        "X-To: Bob Jones <bob@enron.com>, Carol",
        "X-cc: ",
        "X-bcc: ",
    ],
    "Pipeline capacity pipeline capacity pipeline meeting.\n\n"
    " -----Original Message-----\nFrom: \tBob Jones\nSent:\tMonday, January 01, 2001 9:00 AM\n"
    "To:\tAlice Smith\nSubject:\tBudget review\n\nTurbine turbine.\n",
)
EMAIL_B = message(
    [
        "Message-ID: <B@thyme>",
        "Date: Tue, 2 Jan 2001 10:00:00 -0800 (PST)",
        'From: "Jones, Bob" <BOB@enron.com>',
        "To: alice.smith@enron.com, frank@other.org",
        "Subject: Re: budget",
        "Cc: carol@enron.com",
        *STANDARD,
        "Bcc: carol@enron.com",
    ],
    "Turbine budget. Contact me at bob@enron.com or http://enron.com/x.\n"
    "Bob Jones <bob@enron.com> on 01/02/2001 09:15:00 AM\n"
    "To: Alice Smith/HOU/ECT@ECT, Carol\n\tWhite/HOU/ECT@ECT\ncc: \nSubject: pipeline\n\n"
    "> Capacity question\n",
)
EMAIL_C = message(  # quoted-printable, Latin-1, the sender among its own recipients, a repeated address
    [
        "Message-ID: <C@thyme>",
        "From: carol@enron.com",
        "To: alice.smith@enron.com, carol@enron.com",
        "Cc: ALICE.SMITH@enron.com",
        "Subject: cafe",
        'Content-Type: text/plain; charset="iso-8859-1"',
        "Content-Transfer-Encoding: quoted-printable",
    ],
    "Caf=E9 turbine capa=\ncity.\n",
)
EMAIL_D = message(  # multipart: a text part and a base64 attachment
    [
        "Message-ID: <D@thyme>",
        "From: dave@enron.com",
        "To: alice.smith@enron.com, bob@enron.com,",
        " frank@other.org",
        "Subject: forecast",
        "Bcc: erin@enron.com",
        "Mime-Version: 1.0",
        'Content-Type: multipart/mixed; boundary="XYZ"',
    ],
    "This is a multi-part message.\n--XYZ\nContent-Type: text/plain; charset=us-ascii\n\n"
    "Turbine pipeline budget forecast.\n--XYZ\nContent-Type: application/octet-stream; name=a.bin\n"
    "Content-Transfer-Encoding: base64\nContent-Disposition: attachment; filename=a.bin\n\n"
    "UXVhcnRlcmx5IHJldmVudWUgd2F5IGFib3ZlIHBsYW4=\n--XYZ--\n",
)
EMAIL_E = message(  # no text part: used by the network, not by topics
    [
        "Message-ID: <E@thyme>",
        "From: erin@enron.com",
        "To: alice.smith@enron.com",
        "Subject: scan",
        "Content-Type: application/pdf",
        "Content-Transfer-Encoding: base64",
    ],
    "JVBERi0xLjQKJcfsj6IKNSAwIG9iago8PC9MZW5ndGggNiAwIFI+PgpzdHJlYW0K\n",
)
EMAIL_F_TEXT = "Don\u2019t forget the pipeline.\n"
EMAIL_F = message(  # a Windows charset with a byte that is not ASCII
    [
        "Message-ID: <F@thyme>",
        "From: alice.smith@enron.com",
        "To: bob@enron.com, frank@other.org",
        "Subject: reminder",
        "Content-Type: text/plain; charset=windows-1252",
    ],
    "",
    body_bytes=EMAIL_F_TEXT.encode("cp1252"),
)
EMAIL_I = message(["From: bob@enron.com", "To: dave@enron.com", "Subject: no id"], "Forecast.\n")
UNPARSEABLE = b"\x00\x01 this is not an email\n\njust bytes\n"

FILES = [  # (path below maildir/, raw bytes, text as emails.csv holds it)
    ("alice-s/sent/1.", EMAIL_A, EMAIL_A.decode("ascii")),
    ("alice-s/sent/2.", EMAIL_F, EMAIL_F.decode("cp1252")),
    ("alice-s/sent_items/1.", EMAIL_A, EMAIL_A.decode("ascii")),  # the same message in another folder
    ("bob-j/sent/1.", EMAIL_B, EMAIL_B.decode("ascii")),
    ("bob-j/sent/2.", EMAIL_I, EMAIL_I.decode("ascii")),
    ("carol-w/sent/1.", EMAIL_C, EMAIL_C.decode("ascii")),
    ("dave-d/sent/1.", EMAIL_D, EMAIL_D.decode("ascii")),
    ("erin-e/sent/1.", EMAIL_E, EMAIL_E.decode("ascii")),
    ("erin-e/sent/2.", UNPARSEABLE, UNPARSEABLE.decode("latin-1")),
    ("erin-e/sent/3.", b"", ""),
]
ACTORS = ["alice.smith@enron.com", "bob@enron.com", "carol@enron.com", "dave@enron.com", "erin@enron.com"]
NETWORK = np.array(
    [  # sender rows, recipient columns, in ACTORS order
        [0, 2, 1, 1, 0],  # alice: A -> bob, carol, dave (Bcc repeats Cc); F -> bob
        [1, 0, 1, 1, 0],  # bob: B -> alice, carol; I -> dave
        [1, 0, 0, 0, 0],  # carol: C -> alice once (repeated address, self left out)
        [1, 1, 0, 0, 1],  # dave: D -> alice, bob, and erin in Bcc only
        [1, 0, 0, 0, 0],  # erin: E -> alice (no text part, still an email)
    ]
)


def write_maildir(root):
    for name, raw, _ in FILES:
        path = root / "maildir" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(raw)
    return root / "maildir"


def write_tarball(path, files=FILES):
    with tarfile.open(path, "w:gz") as archive:
        for name, raw, _ in files:
            info = tarfile.TarInfo(f"maildir/{name}")
            info.size = len(raw)
            archive.addfile(info, io.BytesIO(raw))
    return path


def write_csv(path):
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["file", "message"])
        for name, _, text in FILES:
            writer.writerow([name, text])
    return path


@pytest.fixture(params=["maildir", "tarball", "csv"])
def source(request, tmp_path):
    if request.param == "maildir":
        return write_maildir(tmp_path)
    if request.param == "tarball":
        return write_tarball(tmp_path / "enron.tar.gz")
    return write_csv(tmp_path / "emails.csv")


# --- parsing real-world mail ---------------------------------------------------------------


def test_parse_folded_to_bcc_repeating_cc_and_names():
    parsed = parse_email(EMAIL_A, "a")
    assert parsed.message_id == "<A@thyme>"
    assert parsed.sender == "alice.smith@enron.com"
    assert parsed.recipients == ("bob@enron.com", "carol@enron.com", "dave@enron.com")
    assert parsed.names["alice.smith@enron.com"] == "Alice Smith"
    assert parsed.names["bob@enron.com"] == "Bob Jones"
    assert parsed.subject == "budget"
    assert parsed.text.startswith("Pipeline capacity") and "\r" not in parsed.text


def test_parse_display_names_quoted_printable_and_charsets():
    b = parse_email(EMAIL_B)
    assert b.sender == "bob@enron.com" and b.names["bob@enron.com"] == "Jones, Bob"
    assert b.recipients == ("alice.smith@enron.com", "frank@other.org", "carol@enron.com")
    c = parse_email(EMAIL_C)
    assert c.text == "Caf\u00e9 turbine capacity.\n"  # soft line break joined, Latin-1 decoded
    assert parse_email(EMAIL_C.decode("ascii")).text == c.text  # the same message as emails.csv holds it
    assert c.recipients == ("alice.smith@enron.com",)  # self and repeated address dropped
    f = parse_email(EMAIL_F)
    assert f.text == EMAIL_F_TEXT
    assert parse_email(EMAIL_F.decode("cp1252")).text == EMAIL_F_TEXT  # already-decoded str (emails.csv)
    odd = parse_email(
        message(
            ["From: x@y.com", "To: z@y.com", "Content-Type: text/plain; charset=klingon"],
            "",
            body_bytes=b"caf\xe9 ok\n",
        )
    )
    assert odd.text == "caf\u00e9 ok\n" and "unknown_charset" in odd.notes


def test_parse_multipart_keeps_text_parts_and_non_text_has_no_text():
    d = parse_email(EMAIL_D)
    assert d.text.strip() == "Turbine pipeline budget forecast."
    assert d.recipients == ("alice.smith@enron.com", "bob@enron.com", "frank@other.org", "erin@enron.com")
    e = parse_email(EMAIL_E)
    assert e.text is None and "non_text" in e.notes and e.recipients == ("alice.smith@enron.com",)


def test_parse_html_only_and_encoded_header_words():
    html = parse_email(
        message(
            [
                "From: =?iso-8859-1?Q?Ren=E9_Roy?= <rene@x.com>",
                "To: b@x.com",
                'Content-Type: multipart/alternative; boundary="b1"',
            ],
            "--b1\nContent-Type: text/html; charset=us-ascii\n\n<p>Gas <b>prices</b></p>\n--b1--\n",
        )
    )
    assert html.names["rene@x.com"] == "Ren\u00e9 Roy"
    assert tokenize(html.text) == ["gas", "prices"]
    bare_part = parse_email(
        (
            "From: J\u00fcrgen <j@x.com>\r\nTo: b@x.com\r\n"
            "Content-Type: multipart/mixed; boundary=b2\r\n\r\n"
            "preamble\n--b2\n\nNo part headers: plain text.\n--b2--\n"
        ).encode()
    )
    assert bare_part.text.strip() == "No part headers: plain text."
    assert bare_part.names["j@x.com"] == "J\u00fcrgen"


def test_parse_rejects_what_is_not_an_email():
    with pytest.raises(MalformedEmail) as info:
        parse_email(UNPARSEABLE, "bad")
    assert info.value.reason == "unparseable" and "bad" in str(info.value)
    with pytest.raises(MalformedEmail) as info:
        parse_email(b"  \n")
    assert info.value.reason == "empty"
    with pytest.raises(MalformedEmail):
        parse_email(b"Hello: there\n\nno known header at all\n")
    with pytest.raises(TypeError, match="bytes or str"):
        parse_email(12)
    mbox = parse_email(b"\nFrom alice@x.com Mon Jan  1 00:00:00 2001\nFrom: alice@x.com\nTo: b@x.com\n\nhi\n")
    assert (mbox.sender, mbox.recipients, mbox.text) == ("alice@x.com", ("b@x.com",), "hi\n")
    missing_id = parse_email(EMAIL_I)
    assert missing_id.message_id.startswith("<sha1:") and "no_message_id" in missing_id.notes


# --- tokenization ---------------------------------------------------------------------------


def test_tokenize_drops_quoted_headers_addresses_urls_and_stop_words():
    assert tokenize(parse_email(EMAIL_A).text) == [
        "pipeline",
        "capacity",
        "pipeline",
        "capacity",
        "pipeline",
        "meeting",
        "budget",
        "review",
        "turbine",
        "turbine",
    ]
    assert tokenize(parse_email(EMAIL_B).text) == ["turbine", "budget", "contact", "pipeline", "capacity", "question"]
    cleaned = clean_body(parse_email(EMAIL_B).text)
    assert "hou/ect" not in cleaned and "white" not in cleaned and "09:15" not in cleaned
    assert tokenize("Is it an ox? Extraordinarily" + "x" * 20) == []  # short, stop words, > 25 letters
    assert {"the", "and", "don", "would"} <= STOP_WORDS


# --- reading the three shapes ---------------------------------------------------------------


def test_read_emails_reports_skips_and_deduplicates(source):
    emails, report = read_emails(source)
    parsed = list(emails)
    assert sorted(m.message_id for m in parsed if not m.message_id.startswith("<sha1:")) == [
        "<A@thyme>",
        "<B@thyme>",
        "<C@thyme>",
        "<D@thyme>",
        "<E@thyme>",
        "<F@thyme>",
    ]
    assert len(parsed) == 7
    assert report.n_read == 10 and report.n_parsed == 7
    assert dict(report.skipped) == {"duplicate_message_id": 1, "unparseable": 1, "empty": 1}
    assert report.notes["non_text"] == 1 and report.notes["no_message_id"] == 1
    assert "erin-e/sent/2." in report.examples["unparseable"]
    assert "10 messages read" in str(report)


def test_three_shapes_give_the_same_corpus(tmp_path):
    assert repr(read_corpus(write_maildir(tmp_path / "r"), cache_dir=False)).startswith("EnronCorpus(7 emails")
    corpora = [
        read_corpus(write_maildir(tmp_path / "m"), cache_dir=False),
        read_corpus(write_tarball(tmp_path / "e.tgz"), cache_dir=False),
        read_corpus(write_csv(tmp_path / "emails.csv"), cache_dir=False),
    ]
    first = corpora[0]
    for other in corpora[1:]:
        assert other.message_ids == first.message_ids and other.types == first.types
        assert other.addresses == first.addresses and other.names == first.names
        assert (other.tokens != first.tokens).nnz == 0
        np.testing.assert_array_equal(other.n_tokens, first.n_tokens)
        np.testing.assert_array_equal(other.senders, first.senders)
        np.testing.assert_array_equal(other.recipient_indices, first.recipient_indices)


# --- the two matrices, exactly --------------------------------------------------------------


def test_network_exact_matrix(source):
    data = build_enron_network(source, min_count=1, cache_dir=False)
    assert isinstance(data, CountData) and data.model == "blocks"
    assert data.row_labels == ACTORS and data.col_labels == ACTORS
    assert data.Y.dtype == np.int64
    np.testing.assert_array_equal(data.Y, NETWORK)
    assert data.info["names"][:2] == ["Alice Smith", "Bob Jones"]  # a tie between names: alphabetical
    assert data.info["sent"] == [2, 2, 1, 1, 1]
    assert data.info["received"] == [4, 3, 2, 2, 1]
    assert data.info["report"]["skipped"]["duplicate_message_id"] == 1


def test_network_threshold_counts_sent_plus_received_and_needs_a_sent_email(source):
    # frank@other.org received 3 emails and sent none: never an actor, even at min_count=3.
    three = build_enron_network(source, min_count=3, cache_dir=False)
    assert three.row_labels == ACTORS[:4]
    np.testing.assert_array_equal(three.Y, NETWORK[:4, :4])
    four = build_enron_network(source, min_count=4, cache_dir=False)
    assert four.row_labels == ACTORS[:2]
    np.testing.assert_array_equal(four.Y, [[0, 2], [1, 0]])
    with pytest.raises(ValueError, match="lower min_count"):
        build_enron_network(source, min_count=7, cache_dir=False)
    # only alice passes min_count=6: a 1 x 1 matrix with no counts is an error, not an empty network
    with pytest.raises(ValueError, match=r"1 actor\(s\) passing min_count=6 sent no email.*lower min_count"):
        build_enron_network(source, min_count=6, cache_dir=False)


def test_topics_exact_matrix(source):
    data = build_enron_topics(source, n_docs=10, n_words=5, min_tokens=4, max_df=0.6, cache_dir=False)
    # Eligible (>= 4 words): A (10), B (9), D (4), F (5: don t forget the pipeline); C has 3, I has 1.
    # pipeline, turbine, budget are in >= 0.6 of the 4 documents: out.
    assert data.model == "topics" and sp.isspmatrix_csr(data.Y) and data.Y.dtype == np.int64
    assert data.row_labels == ["<A@thyme>", "<B@thyme>", "<D@thyme>", "<F@thyme>"]
    assert data.col_labels == ["capacity", "contact", "forecast", "forget", "meeting"]
    np.testing.assert_array_equal(data.dense(), [[2, 0, 0, 0, 1], [1, 1, 0, 0, 0], [0, 0, 1, 0, 0], [0, 0, 0, 1, 0]])
    assert data.info["n_eligible"] == 4 and "all are used" in data.info["note"]
    assert data.info["tokenization"]["word"] == "maximal run of ASCII letters a-z"
    assert data.info["params"]["max_df"] == 0.6


def test_topics_draw_is_seeded(tmp_path):
    corpus = read_corpus(write_maildir(tmp_path), cache_dir=False)
    draws = {
        seed: build_enron_topics(
            corpus, n_docs=3, n_words=50, min_tokens=1, max_df=1.0, random_state=seed, cache_dir=False
        ).row_labels
        for seed in range(8)
    }
    assert all(len(rows) == 3 and rows == sorted(rows) for rows in draws.values())
    again = build_enron_topics(corpus, n_docs=3, n_words=50, min_tokens=1, max_df=1.0, random_state=5, cache_dir=False)
    assert again.row_labels == draws[5]
    assert len({tuple(rows) for rows in draws.values()}) > 1  # 6 eligible, choose 3: seeds differ


# --- bad input --------------------------------------------------------------------------------


def test_bad_sources_get_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="fetch-enron"):
        read_emails(tmp_path / "nowhere.tar.gz")
    fake = tmp_path / "enron.tar.gz"
    fake.write_text("not gzip at all")
    with pytest.raises(ValueError, match="not gzip data"):
        read_emails(fake)
    gzipped_text = tmp_path / "emails.tar.gz"
    gzipped_text.write_bytes(gzip.compress(b"file,message\n" * 100))
    with pytest.raises(ValueError, match="not a readable tar archive"):
        list(read_emails(gzipped_text)[0])
    other = tmp_path / "notes.txt"
    other.write_text("hello")
    with pytest.raises(ValueError, match="emails.csv"):
        read_emails(other)
    no_column = tmp_path / "emails.csv"
    no_column.write_text("file,text\na,b\n")
    with pytest.raises(ValueError, match="no 'message' column"):
        list(read_emails(no_column)[0])
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no readable email"):
        read_corpus(tmp_path / "empty", cache_dir=False)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"n_docs": 0}, ValueError, "n_docs must be >= 1"),
        ({"n_words": 2.5}, TypeError, "n_words must be an integer"),
        ({"min_tokens": -1}, ValueError, "min_tokens must be >= 0"),
        ({"max_df": 0}, ValueError, r"max_df must be a fraction in \(0, 1\]"),
        ({"max_df": 1.5}, ValueError, "max_df"),
        ({"min_tokens": 1000}, ValueError, "lower min_tokens"),
        ({"max_df": 0.01, "min_tokens": 1}, ValueError, "raise max_df"),
        # one email: every word is in all of them, and max_df cannot go above 1
        ({"max_df": 1.0, "min_tokens": 1, "n_docs": 1}, ValueError, r"draw more emails \(n_docs\)"),
    ],
)
def test_topics_bad_parameters(tmp_path, kwargs, error, match):
    corpus = read_corpus(write_maildir(tmp_path), cache_dir=False)
    with pytest.raises(error, match=match):
        build_enron_topics(corpus, cache_dir=False, **kwargs)


def test_network_bad_parameters(tmp_path):
    corpus = read_corpus(write_maildir(tmp_path), cache_dir=False)
    with pytest.raises(ValueError, match="min_count must be >= 0"):
        build_enron_network(corpus, min_count=-1, cache_dir=False)
    with pytest.raises(TypeError, match="min_count must be an integer"):
        build_enron_network(corpus, min_count="100", cache_dir=False)


def test_truncated_tarball_is_an_error_unless_partial_input_is_allowed(tmp_path):
    # Deliberately changed: a truncated archive used to give a warning and a corpus that looked
    # complete (and was cached as such); it is now an error naming where it stops.
    many = [
        (
            f"user/sent/{i}.",
            message([f"Message-ID: <{i}@x>", "From: a@x.com", "To: b@x.com"], f"message number {i} " + "word " * 400),
            "",
        )
        for i in range(200)
    ]
    path = write_tarball(tmp_path / "full.tar.gz", many)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    emails, report = read_emails(path)
    with pytest.raises(ValueError) as error:
        list(emails)
    complete = int(re.search(r"after (\d+) complete messages", str(error.value)).group(1))
    assert 0 < complete < 200
    assert re.search(
        rf"full.tar.gz: the archive is truncated or corrupt: it stops after {complete} complete "
        rf"messages \(the last one maildir/user/sent/{complete - 1}\.\), [\d,]+ bytes into the "
        rf"unpacked archive; the file has {len(data) // 2:,} bytes .*lpviz fetch-enron.*"
        r"allow_partial=True \(--allow-partial\)",
        str(error.value),
    ), error.value
    with pytest.warns(RuntimeWarning, match="truncated or corrupt"):
        emails, report = read_emails(path, allow_partial=True)
        parsed = list(emails)
    assert len(parsed) == complete and report.skipped["archive_truncated"] == 1
    assert report.partial and "stops after" in report.stopped and "PARTIAL" in str(report)


# --- the shared real file ---------------------------------------------------------------------


@pytest.fixture(scope="session")
def real_cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("enron-cache")


@pytest.fixture(scope="session")
def real_corpus(enron_tarball, real_cache_dir):
    return read_corpus(enron_tarball, cache_dir=real_cache_dir)


def test_real_corpus_is_complete_and_deduplicated(real_corpus):
    assert isinstance(real_corpus, EnronCorpus)
    assert real_corpus.report["n_read"] == 58168
    assert len(real_corpus) == real_corpus.report["n_parsed"] == 58168 - sum(real_corpus.report["skipped"].values())
    assert len(set(real_corpus.message_ids)) == len(real_corpus)
    # The paper's eligibility: about 34,000 of the sent emails have >= 50 words (see the module docs).
    assert 30000 < int((real_corpus.n_tokens >= 50).sum()) < 38500


def test_real_addresses_match_the_stdlib_parser(enron_tarball):
    """Sender and To/Cc/Bcc union of the first 400 real messages, against the stdlib email package."""
    checked = 0
    with tarfile.open(enron_tarball, "r|gz") as archive:
        for member in archive:
            if not member.isfile():
                continue
            raw = archive.extractfile(member).read()
            reference = email.message_from_bytes(raw, policy=email.policy.compat32)
            sender = email.utils.parseaddr(reference["From"])[1].lower()
            expected = []
            for _, address in email.utils.getaddresses(
                reference.get_all("To", []) + reference.get_all("Cc", []) + reference.get_all("Bcc", [])
            ):
                address = address.lower()
                if "@" in address and address != sender and address not in expected:
                    expected.append(address)
            parsed = parse_email(raw, member.name)
            assert parsed.sender == sender, member.name
            assert list(parsed.recipients) == expected, member.name
            assert parsed.message_id == reference["Message-ID"]
            checked += 1
            if checked == 400:
                break
    assert checked == 400


def test_real_topics_follow_the_paper_rules(real_corpus):
    data = build_enron_topics(real_corpus, n_docs=3000, n_words=2000, random_state=1, cache_dir=False)
    assert data.shape == (3000, 2000) and len(set(data.row_labels)) == 3000
    rows = np.array([real_corpus.message_ids.index(m) for m in data.row_labels[:50]])
    assert (real_corpus.n_tokens[rows] >= 50).all()
    # Recount the drawn documents' words from the corpus: the vocabulary is the most frequent
    # types with document frequency < 0.3, and Y holds exactly their counts.
    id_of = {m: i for i, m in enumerate(real_corpus.message_ids)}
    drawn = real_corpus.tokens[[id_of[m] for m in data.row_labels]]
    doc_freq = (drawn > 0).sum(axis=0).A1
    freq = drawn.sum(axis=0).A1
    type_index = {t: j for j, t in enumerate(real_corpus.types)}
    kept = np.array([type_index[w] for w in data.col_labels])
    assert (doc_freq[kept] < 0.3 * 3000).all()
    left_out = np.setdiff1d(np.flatnonzero((doc_freq < 0.3 * 3000) & (freq > 0)), kept)
    assert freq[left_out].max() <= freq[kept].min()
    assert (np.diff(freq[kept]) <= 0).all()
    np.testing.assert_array_equal(data.dense(), drawn[:, kept].toarray())
    again = build_enron_topics(real_corpus, n_docs=3000, n_words=2000, random_state=1, cache_dir=False)
    assert again.row_labels == data.row_labels and (again.Y != data.Y).nnz == 0
    other = build_enron_topics(real_corpus, n_docs=3000, n_words=2000, random_state=2, cache_dir=False)
    assert other.row_labels != data.row_labels


def test_real_network_follows_the_paper_rules(real_corpus):
    data = build_enron_network(real_corpus, cache_dir=False)
    n = len(data.row_labels)
    assert data.Y.shape == (n, n) and data.row_labels == data.col_labels and 50 < n < 500
    assert np.diag(data.Y).sum() == 0
    # Recount from the corpus with plain Python, independently of the vectorised builder.
    sent, received, edges = {}, {}, {}
    for i, s in enumerate(real_corpus.senders.tolist()):
        recipients = real_corpus.recipient_indices[
            real_corpus.recipient_indptr[i] : real_corpus.recipient_indptr[i + 1]
        ].tolist()
        for r in recipients:
            received[r] = received.get(r, 0) + 1
        if s >= 0 and recipients:
            sent[s] = sent.get(s, 0) + 1
            for r in recipients:
                edges[s, r] = edges.get((s, r), 0) + 1
    kept = sorted(a for a in sent if sent[a] + received.get(a, 0) >= 100)
    assert data.row_labels == [real_corpus.addresses[a] for a in kept]
    assert data.info["sent"] == [sent[a] for a in kept]
    assert all(s >= 1 and s + r >= 100 for s, r in zip(data.info["sent"], data.info["received"], strict=True))
    position = {a: k for k, a in enumerate(kept)}
    expected = np.zeros((n, n), dtype=np.int64)
    for (s, r), count in edges.items():
        if s in position and r in position:
            expected[position[s], position[r]] = count
    np.testing.assert_array_equal(data.Y, expected)
    assert data.Y.sum() <= sum(edges.values())
    assert sum(bool(name) for name in data.info["names"]) > n // 2


def test_real_matrices_reload_from_the_cache_without_reading_again(
    real_corpus, real_cache_dir, enron_tarball, monkeypatch
):
    from lpviz.datasets.enron import builders, corpus

    network = build_enron_network(enron_tarball, cache_dir=real_cache_dir)
    topics = build_enron_topics(enron_tarball, n_docs=2000, n_words=2000, cache_dir=real_cache_dir)

    def no_work(*args, **kwargs):
        raise AssertionError("the cache should have answered")

    for module, name in ((corpus, "_parse_corpus"), (builders, "_build_network"), (builders, "_build_topics")):
        monkeypatch.setattr(module, name, no_work)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a cache entry found corrupt would warn
        network_again = build_enron_network(enron_tarball, cache_dir=real_cache_dir)
        topics_again = build_enron_topics(enron_tarball, n_docs=2000, n_words=2000, cache_dir=real_cache_dir)
    np.testing.assert_array_equal(network_again.Y, network.Y)
    assert network_again.info["names"] == network.info["names"]
    assert topics_again.row_labels == topics.row_labels and (topics_again.Y != topics.Y).nnz == 0


def test_enron_tensor_of_the_shared_subset_is_the_network_over_months(enron_tarball, real_corpus, real_cache_dir):
    from lpviz.datasets import enron_tensor, load_data

    data = enron_tensor(real_corpus, cache_dir=real_cache_dir)
    network = build_enron_network(real_corpus, cache_dir=real_cache_dir)
    months = data.info["mode_labels"][0]
    assert data.Y.shape == (84, 84, len(months)) and data.row_labels == network.row_labels
    assert months[0] >= "1998-10" and months[-1] <= "2002-07" and len(months) == len(set(months))
    outside = network.Y.sum() - data.Y.sum()
    assert 0 <= outside <= 0.01 * network.Y.sum()  # the span keeps all but the misdated tails
    assert np.all(data.Y.sum(axis=2) <= network.Y) and not data.Y[np.arange(84), np.arange(84)].any()
    again = load_data(f"enron-tensor:{enron_tarball}", cache_dir=real_cache_dir)  # from the cache
    np.testing.assert_array_equal(again.Y, data.Y)
    assert again.info["structural_zeros"].sum() == 84 * len(months)


def test_the_tensor_experiment_runs_and_its_verdicts_follow_its_rules(
    real_corpus, real_cache_dir, tmp_path, monkeypatch
):
    """`lpviz reproduce tensor` (tiny preset, in process) on the shared subset: every claim's verdict
    is what its rule says of the numbers in summary.csv, beside the best constant."""
    from lpviz.reproduce import reproduce
    from lpviz.reproduce.tensor import COLLAPSED_MASS, MIXED_RHAT

    monkeypatch.setenv("LPVIZ_DATA_DIR", str(real_cache_dir))  # the corpus parsed once for this module
    [report] = reproduce("tensor", "tiny", scheduler="serial", output=tmp_path)
    with open(tmp_path / "tensor" / "summary.csv") as handle:
        rows = list(csv.DictReader(handle))
    levels = sorted({float(row["eps_over_N"]) for row in rows if row["eps_over_N"]}, reverse=True)

    def mean(metric, method, level):
        return next(
            float(row[f"{metric}_mean"])
            for row in rows
            if row["method"] == method and (method == "nonprivate" or float(row["eps_over_N"]) == level)
        )

    worst = {}  # (setting, method) -> largest split R-hat of its traces and traced rates
    with open(tmp_path / "tensor" / "diagnostics.csv") as handle:
        for row in csv.DictReader(handle):
            if row["quantity"] in ("log_marginal", "log_joint", "rate"):
                key = (row["setting"], row["method"])
                worst[key] = max(worst.get(key, 0.0), float(row["rhat_max"]) if row["rhat_max"] else np.inf)

    def sound(method, level):
        mixed = worst.get((f"eps/N={level:g}, K=3", method), np.inf) <= MIXED_RHAT
        return mixed and mean("mass", method, level) >= COLLAPSED_MASS

    text = report.read_text()
    for metric, name in (("mae", "reconstruction error"), ("heldout_mae", "held-out error")):
        healthy = [sound("private", e) and sound("naive", e) for e in levels]
        below = [mean(metric, "private", e) < mean(metric, "naive", e) for e in levels]
        wins = sum(h and b for h, b in zip(healthy, below, strict=True))
        verdict = "reproduced" if wins / len(levels) >= 2 / 3 else ("partly reproduced" if wins else "not reproduced")
        line = next(line for line in text.splitlines() if f"lower {name} than the naive one" in line)
        assert line.rstrip(" |").endswith(verdict), line
        constant = mean(metric.replace("mae", "constant_mae"), "private", levels[0])
        assert f"best constant (median true count) {constant:.3g}" in text


def test_every_eligible_real_email_and_a_partitioned_release_for_the_cluster(real_corpus):
    """n_docs='all' takes every email with >= min_tokens tokens (no 10,000 draw; the default is
    unchanged), and blockwise_release's rows, noised on the workers of a cluster, give the chain of
    the same release built in one process."""
    import lpviz
    from lpviz.budget import MemoryBudgetError, memory_budget
    from lpviz.datasets import blockwise_release

    pytest.importorskip("distributed")
    from distributed import Client, LocalCluster

    eligible = int((real_corpus.has_text & (real_corpus.n_tokens >= 50)).sum())
    data = build_enron_topics(real_corpus, n_docs="all", n_words=200, cache_dir=False)
    assert eligible > 10000 and data.shape == (eligible, 200)
    assert "n_docs='all'" in data.info["note"]
    assert build_enron_topics(real_corpus, n_words=200, cache_dir=False).shape == (10000, 200)  # default: a draw
    refused = r"counts of [\d,]+ emails.*n_docs=N"
    with memory_budget(1_000_000, "a test's limit"), pytest.raises(MemoryBudgetError, match=refused):
        build_enron_topics(real_corpus, n_docs="all", n_words=200, cache_dir=False)
    with pytest.raises(ValueError, match="'all'"):
        build_enron_topics(real_corpus, n_docs="every", cache_dir=False)

    source = blockwise_release(data, epsilon=1.0, random_state=2)
    release = source.release()
    assert release.simulated and release.shape == data.shape
    noise = release.Y_obs.astype(np.int64) - data.dense()
    assert noise.std() > 0.5  # noised (alpha = exp(-1): the noise's sd is about 1.3)
    options = dict(method="private", n_components=3, n_iter=3, burn_in=1, thin=1, random_state=5)
    reference = lpviz.fit(release, **options)
    with (
        LocalCluster(n_workers=2, processes=False, threads_per_worker=1, dashboard_address=None) as cluster,
        Client(cluster) as client,
    ):
        posterior = lpviz.fit(source, scheduler=client, **options)
        assert len(posterior.partitions) == 2
        assert np.array_equal(posterior.log_joint, reference.log_joint)
        assert np.array_equal(posterior.mu_hat, reference.mu_hat)
