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
    name = name.encode()
    zip64 = size >= 0xFFFFFFFF or len(data) >= 0xFFFFFFFF
    extra = struct.pack("<HHQQ", 1, 16, size, len(data)) if zip64 else b""
    sizes = (0xFFFFFFFF, 0xFFFFFFFF) if zip64 else (len(data), size)
    version = 45 if zip64 else 20
    local = struct.pack("<IHHHHHIIIHH", 0x04034B50, version, 0, method, 0, 0x21, crc, *sizes, len(name), len(extra))
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
        len(extra),
        0,
        0,
        0,
        0,
        0,
    )
    with open(path, "wb") as out:
        out.write(local + name + extra)
        out.write(data)
        offset = out.tell()
        out.write(central + name + extra)
        directory = out.tell() - offset
        out.write(struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 1, 1, directory, offset, 0))
    return path


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
