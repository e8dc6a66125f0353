"""Hostile input files for tests/test_hostile.py and benchmarks/bench_loaders.py --hostile.

Each builder writes a small file that declares or decompresses to something
huge. Compressed bombs are made without compressing gigabytes: a block
compressed with a full flush resets the deflate state, so the next identical
block compresses to identical bytes, which are repeated. The checksums are the
real ones, so every file is valid for any reader that gets that far.
"""

import io
import struct
import tarfile
import zlib

import numpy as np

BLOCK = 1 << 23  # 8 MiB of repeated content per deflate block


def _gf2_times(matrix, vector):
    total, row = 0, 0
    while vector:
        if vector & 1:
            total ^= matrix[row]
        vector >>= 1
        row += 1
    return total


def _gf2_square(matrix):
    return [_gf2_times(matrix, matrix[n]) for n in range(32)]


def crc32_combine(crc1, crc2, length2):
    """CRC-32 of A + B from crc(A), crc(B) and len(B) (zlib's crc32_combine, which Python lacks)."""
    if length2 <= 0:
        return crc1
    odd = [0xEDB88320] + [1 << (n - 1) for n in range(1, 32)]  # the operator for one zero bit
    even = _gf2_square(odd)
    odd = _gf2_square(even)
    while True:
        even = _gf2_square(odd)
        if length2 & 1:
            crc1 = _gf2_times(even, crc1)
        length2 >>= 1
        if not length2:
            break
        odd = _gf2_square(even)
        if length2 & 1:
            crc1 = _gf2_times(odd, crc1)
        length2 >>= 1
        if not length2:
            break
    return crc1 ^ crc2


def crc32_repeated(block, count):
    """CRC-32 of ``block * count`` in O(log count) combinations, without the bytes."""
    result, power, power_length = 0, zlib.crc32(block), len(block)
    while count:
        if count & 1:
            result = crc32_combine(result, power, power_length)
        power = crc32_combine(power, power, power_length)
        power_length *= 2
        count >>= 1
    return result


def _repeated_deflate(prefix, block, count, suffix=b"", level=6):
    """Raw deflate bytes of ``prefix + block * count + suffix``, their CRC-32 and length."""
    compressor = zlib.compressobj(level, zlib.DEFLATED, -15)
    parts = [compressor.compress(prefix) + compressor.flush(zlib.Z_FULL_FLUSH)]
    if count:
        first = compressor.compress(block) + compressor.flush(zlib.Z_FULL_FLUSH)
        again = compressor.compress(block) + compressor.flush(zlib.Z_FULL_FLUSH)
        assert again == first, "a full flush must reset the compressor"
        parts.append(first * count)
    parts.append(compressor.compress(suffix) + compressor.flush(zlib.Z_FINISH))
    crc = crc32_combine(zlib.crc32(prefix), crc32_repeated(block, count), count * len(block))
    crc = crc32_combine(crc, zlib.crc32(suffix), len(suffix))
    return b"".join(parts), crc, len(prefix) + count * len(block) + len(suffix)


def _gzip(path, data, crc, size):
    path.write_bytes(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff" + data + struct.pack("<II", crc, size & 0xFFFFFFFF))
    return path


def gzip_bomb(path, line=b"a,b,1\n", total=1 << 30):
    """A .gz of ``line`` repeated to about ``total`` bytes of text."""
    block = line * (BLOCK // len(line))
    return _gzip(path, *_repeated_deflate(b"", block, total // len(block)))


def npz_bomb(path, shape=(21000, 21000), dtype=np.float64, value=1):
    """An .npz whose ``Y`` is ``shape`` cells of ``value``, as np.savez_compressed writes it.

    The default is the issue's file: ones, 21,000 x 21,000 float64, 3.5 GB
    of data in about 4.6 MB (the old loader peaked at 10.6 GB on it).
    """
    dtype = np.dtype(dtype)
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": tuple(shape)}
    )
    cells = int(np.prod(shape, dtype=object))
    block = np.full(BLOCK // dtype.itemsize, value, dtype=dtype).tobytes()
    count, rest = divmod(cells * dtype.itemsize, len(block))
    data, crc, size = _repeated_deflate(header.getvalue(), block, count, block[:rest])
    _write_zip(path, "Y.npy", data, crc, size)
    return path


def npy_header_only_npz(path, shape, dtype=np.float64, name="Y.npy"):
    """An .npz whose member declares ``shape`` but holds no data at all (a lie in 100 bytes)."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False, "shape": tuple(shape)}
    )
    raw = header.getvalue()
    _write_zip(path, name, raw, zlib.crc32(raw), len(raw), method=0)
    return path


def _write_zip(path, name, data, crc, size, method=8):
    """One stored member (already deflated when ``method`` is 8), with zip64 sizes when needed."""
    return write_members(path, [(name, data, crc, size, method)])


def write_members(path, members):
    """A zip of ``(name, data, crc, size, method)`` members written as given (names may repeat; the
    sizes and CRC are whatever the caller says), with zip64 sizes when needed."""
    centrals = []
    with open(path, "wb") as out:
        for name, data, crc, size, method in members:
            name = name.encode()
            zip64 = size >= 0xFFFFFFFF or len(data) >= 0xFFFFFFFF
            sizes = (0xFFFFFFFF, 0xFFFFFFFF) if zip64 else (len(data), size)
            version = 45 if zip64 else 20
            offset = out.tell()
            local_extra = struct.pack("<HHQQ", 1, 16, size, len(data)) if zip64 else b""
            head = (0x04034B50, version, 0, method, 0, 0x21, crc, *sizes, len(name), len(local_extra))
            out.write(struct.pack("<IHHHHHIIIHH", *head) + name + local_extra)
            out.write(data)
            central_extra = struct.pack("<HHQQQ", 1, 24, size, len(data), offset) if zip64 else b""
            central = struct.pack(
                "<IHHHHHHIIIHHHHHII",
                0x02014B50,
                version,
                version,
                0,
                method,
                0,
                0x21,
                crc,
                *sizes,
                len(name),
                len(central_extra),
                0,
                0,
                0,
                0,
                0xFFFFFFFF if zip64 else offset,
            )
            centrals.append(central + name + central_extra)
        start = out.tell()
        out.write(b"".join(centrals))
        directory = out.tell() - start
        out.write(struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(centrals), len(centrals), directory, start, 0))
    return path


def npy_bytes(array):
    """The .npy file of ``array``, as np.save writes it."""
    buffer = io.BytesIO()
    np.save(buffer, np.asarray(array), allow_pickle=False)
    return buffer.getvalue()


def small_member(name, array, method=8):
    """A member holding ``array`` (deflated unless ``method`` is 0)."""
    raw = npy_bytes(array)
    data = raw if method == 0 else _deflate(raw)
    return (name, data, zlib.crc32(raw), len(raw), method)


def _deflate(raw):
    compressor = zlib.compressobj(6, zlib.DEFLATED, -15)
    return compressor.compress(raw) + compressor.flush()


def bomb_member(name, shape, dtype=np.int64, value=0, npy=True):
    """A member declaring ``shape`` x ``dtype`` cells of ``value`` (an .npy, or with ``npy=False`` the
    same bytes without the header: a raw member numpy reads whole), deflated without the bytes."""
    dtype = np.dtype(dtype)
    prefix = b""
    if npy:
        header = io.BytesIO()
        np.lib.format.write_array_header_1_0(
            header, {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": tuple(shape)}
        )
        prefix = header.getvalue()
    cells = int(np.prod(shape, dtype=object))
    block = np.full(BLOCK // dtype.itemsize, value, dtype=dtype).tobytes()
    count, rest = divmod(cells * dtype.itemsize, len(block))
    data, crc, size = _repeated_deflate(prefix, block, count, block[:rest])
    return (name, data, crc, size, 8)


def release_members(Y_obs=None, alpha=0.5, **extra):
    """The small members of a valid release (``Y_obs`` given as an array, or left out)."""
    members = [small_member("format.npy", np.asarray("lpviz-release-1"))]
    if Y_obs is not None:
        members.append(small_member("Y_obs.npy", Y_obs))
    members += [
        small_member("alpha.npy", np.asarray(alpha, dtype=np.float64)),
        small_member("epsilon.npy", np.asarray(extra.pop("epsilon", np.nan))),
        small_member("N.npy", np.asarray(extra.pop("N", np.nan))),
        small_member("kind.npy", np.asarray(extra.pop("kind", "documents"))),
        small_member("simulated.npy", np.asarray(False)),
        small_member("name.npy", np.asarray(extra.pop("name", "bomb"))),
    ]
    return members + [small_member(f"{key}.npy", value) for key, value in extra.items()]


def release_bomb(path, shape=(12000, 12000), dtype=np.int64):
    """A valid release whose Y_obs is ``shape`` zeros: 1.07 GiB at the default in about 1 MB
    (the issue's was 20,000 x 20,000: 3.0 GiB in 14 MB)."""
    return write_members(path, [bomb_member("Y_obs.npy", shape, dtype), *release_members()])


def shadowed_counts(path, shape=(12000, 12000), dtype=np.int64):
    """Counts whose checked ``Y.npy`` is 2 x 2 but whose raw member ``Y`` (what ``np.load(...)["Y"]``
    prefers) is ``shape`` ones: the issue's 21 MB file held 25,000 x 25,000."""
    return write_members(path, [small_member("Y.npy", np.ones((2, 2), np.int64)), bomb_member("Y", shape, dtype, 1)])


def duplicate_release(path, shape=(12000, 12000), dtype=np.int64):
    """A release with two members named ``Y_obs.npy``: a 2 x 2 one first, a ``shape`` one second."""
    small = small_member("Y_obs.npy", np.ones((2, 2), np.int64))
    return write_members(path, [small, bomb_member("Y_obs.npy", shape, dtype), *release_members()])


def raw_member_release(path, nbytes=1 << 30):
    """A release whose ``Y_obs`` is a raw member (no .npy header) of ``nbytes`` zeros: numpy reads such a
    member whole, as bytes, before anything can check it."""
    return write_members(path, [bomb_member("Y_obs", (nbytes,), np.uint8, npy=False), *release_members()])


def lying_sizes_release(path, shape=(12000, 12000)):
    """A release whose Y_obs header and zip directory declare ``shape`` int64 but whose data stop at once:
    the directory claims more than deflate could make of the bytes stored."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<i8", "fortran_order": False, "shape": tuple(shape)})
    raw = header.getvalue()
    data = _deflate(raw)
    size = len(raw) + 8 * shape[0] * shape[1]
    return write_members(path, [("Y_obs.npy", data, zlib.crc32(raw), size, 8), *release_members()])


def corrupt_release(path, shape=(300, 300), seed=0):
    """A valid release of random counts with bytes in the middle of Y_obs's compressed data flipped."""
    rng = np.random.default_rng(seed)
    Y = rng.integers(-50, 50, size=shape)
    name, data, crc, size, method = small_member("Y_obs.npy", Y)
    damaged = bytearray(data)
    for i in range(len(damaged) // 2, len(damaged) // 2 + 16):
        damaged[i] ^= 0x5A
    return write_members(path, [(name, bytes(damaged), crc, size, method), *release_members()])


def tar_bomb(path, member_bytes=1_500_000_000, others=3):
    """A .tar.gz with ``others`` ordinary emails, one message of ``member_bytes`` bytes, one more email."""

    def email(i, body):
        return f"Message-ID: <{i}@bomb>\r\nFrom: a@x.com\r\nTo: b@x.com\r\n\r\n".encode() + body

    def members(items):
        out = b""
        for name, raw in items:
            info = tarfile.TarInfo(name)
            info.size = len(raw)
            out += info.tobuf(format=tarfile.GNU_FORMAT) + raw + b"\0" * (-len(raw) % 512)
        return out

    before = members([(f"maildir/a/sent/{i}.", email(i, b"ordinary words here\n")) for i in range(others)])
    head = email("big", b"")
    info = tarfile.TarInfo("maildir/a/sent/big.")
    info.size = len(head) + member_bytes
    body = b"word " * (BLOCK // 5)
    count, rest = divmod(member_bytes, len(body))
    after = (
        body[:rest]
        + b"\0" * (-info.size % 512)
        + members([("maildir/a/sent/after.", email("after", b"after the bomb\n"))])
        + b"\0" * 1024
    )
    return _gzip(path, *_repeated_deflate(before + info.tobuf(format=tarfile.GNU_FORMAT) + head, body, count, after))


# ---------------------------------------------------------------- running a case in its own process

_CHILD = r"""
import os, sys, time
sys.path.insert(0, sys.argv[1])
mode, rest = sys.argv[2], sys.argv[3:]


def peak():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return -1


code = 0
start = time.perf_counter()
try:
    if mode == "cli":
        from lpviz.cli import main

        code = main(rest)
    elif mode == "python":  # a library call, as a script would make it
        exec(rest[0])
    else:  # the dashboard's upload handler, as the upload widget calls it
        from lpviz.dashboard.session.datastore import DataStore
        from lpviz.dashboard.session.settings import Settings

        store = DataStore(Settings(), background=False)
        with open(rest[0], "rb") as handle:
            contents = handle.read()
        try:
            store.load_upload(contents, rest[1])
            print("session:", store.error or store.message)
        except (ValueError, TypeError, OSError) as error:  # what the upload handler catches
            print("error box:", error)
except SystemExit as error:
    code = error.code
except BaseException as error:
    print(f"@@traceback {type(error).__name__}: {str(error)[:300]}", file=sys.stderr)
    code = 1
print(f"@@peak {peak()} {time.perf_counter() - start:.2f}", file=sys.stderr, flush=True)
os._exit(code if isinstance(code, int) else 1)
"""


def without_permissions():
    """A command prefix under which permissions hold even for root (who reads mode-000 files otherwise):
    the child runs without the capabilities that override them."""
    import os

    return ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--"] if os.geteuid() == 0 else []


def run_measured(arguments, *, src, mode="cli", env=None, timeout=120, prefix=(), cwd=None, address_limit=None):
    """Run ``lpviz ARGUMENTS`` (or, with ``mode="upload"``, the upload handler on ``[path, name]``) in a
    fresh process from the lpviz in ``src``. Returns a dict: ``code`` (exit code, None if killed), ``outcome``
    (the traceback, the error line, or the first line of output), ``stdout``, ``stderr``, ``peak``
    (VmHWM bytes: the child's own peak resident memory) and ``seconds``. ``prefix`` goes before the
    command (e.g. :func:`without_permissions`)."""
    import os
    import resource
    import subprocess
    import sys

    def limits():
        if address_limit:
            resource.setrlimit(resource.RLIMIT_AS, (address_limit, address_limit))

    environment = {**os.environ, **(env or {})}
    try:
        child = subprocess.run(
            [*prefix, sys.executable, "-c", _CHILD, str(src), mode, *map(str, arguments)],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=environment,
            cwd=cwd,
            preexec_fn=limits,
        )
    except subprocess.TimeoutExpired:
        return {"code": None, "outcome": f"hang: still running after {timeout:g} s, killed", "peak": -1}
    lines = child.stderr.splitlines()
    marker = [line for line in lines if line.startswith("@@peak ")]
    peak, seconds = (int(marker[-1].split()[1]), float(marker[-1].split()[2])) if marker else (-1, float("nan"))
    traceback = [line[len("@@traceback ") :] for line in lines if line.startswith("@@traceback ")]
    errors = [line for line in lines if "error:" in line and not line.startswith("@@")]
    other = [line for line in lines if line.strip() and not line.startswith("@@") and "Warning" not in line]
    if traceback:
        outcome = f"traceback: {traceback[0]}"
    elif errors:
        outcome = errors[0]
    elif child.stdout.strip():
        outcome = child.stdout.strip().splitlines()[0]
    else:
        outcome = other[0] if other else f"exit {child.returncode}, no output"
    return {
        "code": child.returncode,
        "outcome": outcome,
        "stdout": child.stdout,
        "stderr": child.stderr,
        "peak": peak,
        "seconds": seconds,
    }
