"""The memory budget: limits from the environment or the machine, sizes, and the error users see."""

import re

import numpy as np
import pytest

from lpviz import budget
from lpviz.budget import MemoryBudgetError, check_memory, dense_bytes, format_bytes, largest_square_that_fits


@pytest.mark.parametrize(
    "text, expected",
    [
        ("1000", 1000),
        ("512M", 512 * 2**20),
        ("512m", 512 * 2**20),
        ("8G", 8 * 2**30),
        ("1.5GiB", 3 * 2**29),
        ("2GB", 2 * 10**9),
        ("500kB", 500_000),
        ("1 TiB", 2**40),
        (" 64 Mi ", 64 * 2**20),
        ("12b", 12),
    ],
)
def test_memory_limit_reads_the_environment(monkeypatch, text, expected):
    monkeypatch.setenv("LPVIZ_MEMORY_LIMIT", text)
    assert budget.memory_limit() == expected


@pytest.mark.parametrize("text", ["lots", "12 parsecs", "-5G", "0", "1e9", "G", "0.0001"])
def test_malformed_memory_limit_names_the_variable(monkeypatch, text):
    monkeypatch.setenv("LPVIZ_MEMORY_LIMIT", text)
    with pytest.raises(
        ValueError,
        match=rf"LPVIZ_MEMORY_LIMIT={re.escape(repr(text))} is not a memory "
        r"limit: .*512M, 8G, 1.5GiB.*unset it",
    ):
        budget.memory_limit()


def test_default_limit_is_a_fraction_of_the_machine(monkeypatch):
    monkeypatch.delenv("LPVIZ_MEMORY_LIMIT", raising=False)
    with open("/proc/meminfo") as handle:
        total = next(int(line.split()[1]) * 1024 for line in handle if line.startswith("MemTotal:"))
    physical = budget.physical_memory()
    assert 0 < physical <= total
    assert budget.memory_limit() == int(physical * 0.6)
    monkeypatch.setenv("LPVIZ_MEMORY_LIMIT", "")  # empty means unset
    assert budget.memory_limit() == int(physical * 0.6)


def test_physical_memory_falls_back_to_sysconf(monkeypatch):
    real_open = open

    def no_proc(path, *args, **kwargs):
        if str(path).startswith(("/proc/", "/sys/")):
            raise OSError("not here")
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr("builtins.open", no_proc)
    import os

    assert budget.physical_memory() == os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


@pytest.mark.parametrize(
    "n, text",
    [
        (0, "0 bytes"),
        (1023, "1023 bytes"),
        (1024, "1.0 KiB"),
        (50_000 * 50_000 * 8, "18.6 GiB"),
        (int(14.4 * 2**30), "14.4 GiB"),
        (10**12 * 10**12 * 8, "6938893.9 EiB"),
        (3 * 2**40, "3.0 TiB"),
        (8 * 10**12, "7.3 TiB"),
    ],
)
def test_format_bytes(n, text):
    assert format_bytes(n) == text


def test_dense_bytes_uses_python_integers():
    assert dense_bytes((50_000, 50_000), np.int64) == 20_000_000_000
    huge = dense_bytes((10**12, 10**12), "float64")
    assert huge == 8 * 10**24 and isinstance(huge, int)  # int64 arithmetic would have wrapped
    assert dense_bytes((np.int64(2**40), np.int64(2**40)), np.int8) == 2**80
    assert dense_bytes(7, np.int32) == 28 and dense_bytes((), np.float64) == 8
    assert dense_bytes((3, 0), np.int64) == 0
    with pytest.raises(ValueError, match="negative dimension"):
        dense_bytes((3, -1), np.int64)


def test_check_memory_message_names_sizes_limit_and_fix(monkeypatch):
    monkeypatch.setenv("LPVIZ_MEMORY_LIMIT", str(int(14.4 * 2**30)))
    check_memory(int(14.4 * 2**30), "exactly the limit")  # no error
    with pytest.raises(MemoryBudgetError) as error:
        check_memory(dense_bytes((50_000, 50_000), np.int64), "a 50,000 x 50,000 matrix", fix="Use a sparse format.")
    assert str(error.value) == (
        "a 50,000 x 50,000 matrix needs 18.6 GiB but the memory limit is 14.4 GiB "
        "(set LPVIZ_MEMORY_LIMIT to change it). Use a sparse format."
    )
    assert isinstance(error.value, ValueError)
    with pytest.raises(MemoryBudgetError, match=r"^x needs 2.0 KiB but the memory limit is 1.0 KiB\.$"):
        check_memory(2048, "x", limit=1024)  # a caller's own limit: the variable would not change it


def test_largest_square_that_fits(monkeypatch):
    assert largest_square_that_fits(8, limit=8 * 100) == 10
    assert largest_square_that_fits(8, limit=8 * 100 - 1) == 9
    n = largest_square_that_fits(8, limit=20_000_000_000)
    check_memory(dense_bytes((n, n), np.int64), "fits", limit=20_000_000_000)
    with pytest.raises(MemoryBudgetError):
        check_memory(dense_bytes((n + 1, n + 1), np.int64), "one more", limit=20_000_000_000)
    monkeypatch.setenv("LPVIZ_MEMORY_LIMIT", "1M")
    assert largest_square_that_fits(1) == 1024
    with pytest.raises(ValueError, match="positive"):
        largest_square_that_fits(0)


def test_a_container_limit_below_the_ram_is_what_counts(tmp_path, monkeypatch):
    limit_file = tmp_path / "memory.max"
    monkeypatch.setattr(budget, "_CGROUP_LIMITS", (str(tmp_path / "absent"), str(limit_file)))
    limit_file.write_text("1073741824\n")
    assert budget.physical_memory() == 2**30
    monkeypatch.delenv("LPVIZ_MEMORY_LIMIT", raising=False)
    assert budget.memory_limit() == int(2**30 * 0.6)
    for unlimited in ("max\n", "9223372036854771712\n", "0\n"):  # no limit, v1's "no limit", nonsense
        limit_file.write_text(unlimited)
        assert budget.physical_memory() > 2**30
