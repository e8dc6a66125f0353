"""fetch_enron against a loopback HTTP server serving a small tarball: never the real network."""

import gzip
import hashlib
import io
import os
import tarfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from lpviz.datasets.download import fetch_enron, file_hash


def _small_tarball():
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for n in range(40):
            text = (
                f"Message-ID: <{n}@test>\r\nFrom: a@enron.com\r\nTo: b@enron.com\r\n\r\n" + "word " * (50 + n)
            ).encode()
            info = tarfile.TarInfo(f"maildir/a/sent/{n}.")
            info.size = len(text)
            archive.addfile(info, io.BytesIO(text))
    # incompressible padding so the transfer spans several chunks
    return buffer.getvalue() + os.urandom(200_000)


class _Server:
    """What the handler serves and how it misbehaves; records every request's Range header."""

    def __init__(self, payload):
        self.payload = payload
        self.supports_range = True
        self.cut_first = 0  # this many responses stop halfway through the body
        self.send_length = True  # False: no Content-Length, the body ends when the connection closes
        self.ranges = []
        self.responses = 0


@pytest.fixture
def server():
    state = _Server(_small_tarball())

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's naming)
            if self.path != "/enron.tar.gz":
                self.send_error(404)
                return
            body, start = state.payload, 0
            requested = self.headers.get("Range")
            state.ranges.append(requested)
            if requested and state.supports_range:
                start = int(requested.split("=")[1].split("-")[0])
                if start >= len(body):
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{len(body)}")
                    self.end_headers()
                    return
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
            else:
                self.send_response(200)
            rest = body[start:]
            if state.send_length:
                self.send_header("Content-Length", str(len(rest)))
            self.end_headers()
            state.responses += 1
            if state.responses <= state.cut_first:
                rest = rest[: len(rest) // 2]  # then the connection closes (HTTP/1.0)
            self.wfile.write(rest)

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}/enron.tar.gz"
    yield state
    httpd.shutdown()
    httpd.server_close()
    thread.join()


def _fetch(server, dest, **options):
    options.setdefault("retry_wait", 0)
    return fetch_enron(dest, url=server.url, progress=False, timeout=10, chunk_size=16_384, **options)


def test_full_download_is_the_served_file_and_a_valid_tarball(server, tmp_path):
    path = _fetch(server, tmp_path / "enron.tar.gz")
    assert path == tmp_path / "enron.tar.gz"
    assert path.read_bytes() == server.payload
    assert not (tmp_path / "enron.tar.gz.part").exists()
    # the padding follows the gzip stream, which tarfile reads up to its end
    with gzip.open(path) as unzipped, tarfile.open(fileobj=unzipped, mode="r|") as archive:
        assert sum(1 for _ in archive) == 40


def test_folder_destination_takes_the_name_from_the_url(server, tmp_path):
    assert _fetch(server, tmp_path) == tmp_path / "enron.tar.gz"


def test_interrupted_transfer_resumes_with_a_range_request(server, tmp_path):
    server.cut_first = 1
    dest = tmp_path / "enron.tar.gz"
    with pytest.raises(ConnectionError, match="run again to resume"):
        _fetch(server, dest, retries=0)
    part = tmp_path / "enron.tar.gz.part"
    assert not dest.exists()
    half = part.stat().st_size
    assert 0 < half < len(server.payload)
    assert part.read_bytes() == server.payload[:half]

    path = _fetch(server, dest, retries=0)
    assert server.ranges == [None, f"bytes={half}-"]
    assert path.read_bytes() == server.payload
    assert not part.exists()


def test_retries_resume_within_one_call(server, tmp_path):
    server.cut_first = 2
    path = _fetch(server, tmp_path / "enron.tar.gz", retries=2)
    assert path.read_bytes() == server.payload
    assert server.ranges[0] is None and all(r.startswith("bytes=") for r in server.ranges[1:])
    assert len(server.ranges) == 3


def test_server_without_range_support_restarts_from_the_beginning(server, tmp_path):
    server.supports_range = False
    server.cut_first = 1
    path = _fetch(server, tmp_path / "enron.tar.gz", retries=1)
    assert server.ranges[1] is not None  # it asked to resume ...
    assert path.read_bytes() == server.payload  # ... got everything again, and did not append it twice


def test_truncated_transfer_is_never_moved_into_place(server, tmp_path):
    server.cut_first = 10  # every answer stops halfway
    dest = tmp_path / "enron.tar.gz"
    with pytest.raises(ConnectionError, match="interrupted"):
        _fetch(server, dest, retries=2)
    assert not dest.exists()
    assert (tmp_path / "enron.tar.gz.part").stat().st_size < len(server.payload)


def test_size_disagreeing_with_expected_size_fails_before_writing(server, tmp_path):
    dest = tmp_path / "enron.tar.gz"
    with pytest.raises(ValueError, match=f"{len(server.payload)} bytes but expected_size=999"):
        _fetch(server, dest, expected_size=999)
    assert not dest.exists() and not (tmp_path / "enron.tar.gz.part").exists()


@pytest.mark.parametrize("difference", [+10, -10])
def test_size_check_without_content_length_keeps_nothing_wrong(server, tmp_path, difference):
    # the server cannot announce a size: only expected_size can tell a short or long file
    server.send_length = False
    dest = tmp_path / "enron.tar.gz"
    with pytest.raises(
        ValueError,
        match=f"{len(server.payload)} bytes, expected {len(server.payload) + difference}: the file is truncated",
    ):
        _fetch(server, dest, expected_size=len(server.payload) + difference)
    assert not dest.exists() and not (tmp_path / "enron.tar.gz.part").exists()


def test_download_without_content_length_or_expected_size_is_accepted(server, tmp_path):
    server.send_length = False
    assert _fetch(server, tmp_path / "enron.tar.gz").read_bytes() == server.payload


def test_complete_part_file_is_finished_without_downloading_again(server, tmp_path):
    (tmp_path / "enron.tar.gz.part").write_bytes(server.payload)
    path = _fetch(server, tmp_path / "enron.tar.gz")
    assert server.ranges == [f"bytes={len(server.payload)}-"]
    assert path.read_bytes() == server.payload


def test_existing_file_is_returned_untouched_and_never_overwritten(server, tmp_path):
    dest = tmp_path / "enron.tar.gz"
    dest.write_bytes(b"mine")
    assert _fetch(server, dest) == dest  # complete by construction: no network
    assert server.ranges == []
    with pytest.raises(FileExistsError, match="does not overwrite"):
        _fetch(server, dest, expected_size=len(server.payload))
    assert dest.read_bytes() == b"mine"


def test_http_error_and_non_gzip_answers_are_clear(server, tmp_path):
    with pytest.raises(ConnectionError, match="HTTP 404"):
        fetch_enron(tmp_path / "x.tar.gz", url=server.url.replace("enron", "nothing"), progress=False)
    server.payload = b"<html>maintenance</html>"
    with pytest.raises(ValueError, match="did not return gzip data"):
        _fetch(server, tmp_path / "y.tar.gz")
    assert not (tmp_path / "y.tar.gz").exists()


def test_default_destination_is_the_data_cache_folder(server, tmp_path, monkeypatch):
    monkeypatch.setenv("LPVIZ_DATA_DIR", str(tmp_path / "cache"))
    path = _fetch(server, None)
    assert path == tmp_path / "cache" / "enron.tar.gz"
    assert path.read_bytes() == server.payload


# --- checksums ------------------------------------------------------------------------------


def test_known_hash_accepts_the_right_file_even_after_a_resume(server, tmp_path):
    digest = hashlib.sha256(server.payload).hexdigest()
    server.cut_first = 1  # the hash covers the bytes of both transfers
    path = _fetch(server, tmp_path / "enron.tar.gz", retries=1, known_hash=f"sha256:{digest}")
    assert path.read_bytes() == server.payload and len(server.ranges) == 2
    assert file_hash(path) == digest
    md5 = hashlib.md5(server.payload).hexdigest()
    assert _fetch(server, tmp_path / "md5.tar.gz", known_hash=f"md5:{md5.upper()}").exists()
    assert _fetch(server, tmp_path / "bare.tar.gz", known_hash=digest).exists()  # bare hex is SHA-256


def test_known_hash_mismatch_deletes_the_download_and_says_so(server, tmp_path):
    wrong = hashlib.sha256(b"another release").hexdigest()
    dest = tmp_path / "enron.tar.gz"
    with pytest.raises(
        ValueError,
        match=rf"has sha256 {hashlib.sha256(server.payload).hexdigest()}, not the "
        rf"known {wrong}: the file was deleted.*check the URL and the hash",
    ):
        _fetch(server, dest, known_hash=f"sha256:{wrong}")
    assert list(tmp_path.iterdir()) == []  # neither the file nor its .part is kept


def test_known_hash_checks_an_existing_file_without_touching_it(server, tmp_path):
    dest = tmp_path / "enron.tar.gz"
    dest.write_bytes(b"mine")
    with pytest.raises(FileExistsError, match="its sha256 is .*not the known .*does not overwrite"):
        _fetch(server, dest, known_hash="sha256:" + hashlib.sha256(server.payload).hexdigest())
    assert dest.read_bytes() == b"mine" and server.ranges == []
    assert _fetch(server, dest, known_hash="sha256:" + hashlib.sha256(b"mine").hexdigest()) == dest


@pytest.mark.parametrize(
    "known_hash, error, message",
    [
        ("sha256:abc", ValueError, "a sha256 checksum is 64 hex digits"),
        ("crc32:" + "0" * 8, ValueError, "unknown algorithm 'crc32'"),
        ("sha256:" + "g" * 64, ValueError, "64 hex digits"),
        (12, TypeError, "known_hash must be a string"),
    ],
)
def test_malformed_known_hash_is_refused_before_any_request(server, tmp_path, known_hash, error, message):
    with pytest.raises(error, match=message):
        _fetch(server, tmp_path / "enron.tar.gz", known_hash=known_hash)
    assert server.ranges == [] and list(tmp_path.iterdir()) == []


def test_destination_in_a_missing_folder_is_refused(server, tmp_path):
    # deliberately changed: the folder tree used to be created silently
    with pytest.raises(FileNotFoundError, match=r"the folder .*nowhere does not exist"):
        _fetch(server, tmp_path / "nowhere" / "enron.tar.gz")
    assert server.ranges == [] and not (tmp_path / "nowhere").exists()
