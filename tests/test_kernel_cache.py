"""Numba's cache of lpviz's kernels follows their sources (lpviz._kernel_cache): a kernel's cached
machine code holds the kernels it calls from other files, which Numba does not check."""

import os
import subprocess
import sys
import textwrap

import pytest

from lpviz._kernel_cache import STAMP_NAME, drop_stale_kernels

KERNEL = "from numba import njit\n\n\n@njit(cache=True)\ndef f():\n    return {}\n"


def _write(path, text, bump=0):
    """Write ``text``; ``bump`` seconds later than the file's last time (a coarse clock stays honest)."""
    before = path.stat().st_mtime_ns if path.exists() else 0
    path.write_text(text)
    if bump:
        moved = max(path.stat().st_mtime_ns, before + bump * 1_000_000_000)
        os.utime(path, ns=(moved, moved))


def _tree(tmp_path):
    root = tmp_path / "pkg"
    (root / "sub" / "__pycache__").mkdir(parents=True)
    _write(root / "kernels.py", KERNEL.format(1))
    _write(root / "sub" / "plain.py", "VALUE = 1\n")
    return root


def _caches(root):
    (root / "sub" / "__pycache__" / "plain.f-5.py311.nbi").write_bytes(b"index")
    (root / "sub" / "__pycache__" / "plain.f-5.py311.1.nbc").write_bytes(b"code")
    return sorted(root.rglob("*.nb?"))


def test_caches_go_when_a_file_with_kernels_changes_and_stay_otherwise(tmp_path):
    root = _tree(tmp_path)
    assert drop_stale_kernels(root)  # no stamp yet: nothing is known about the caches
    assert (root / "__pycache__" / STAMP_NAME).exists()
    caches = _caches(root)
    assert not drop_stale_kernels(root) and all(c.exists() for c in caches)
    _write(root / "sub" / "plain.py", "VALUE = 2\n", bump=1)  # no kernels in it
    assert not drop_stale_kernels(root) and all(c.exists() for c in caches)
    _write(root / "kernels.py", KERNEL.format(2), bump=1)
    assert drop_stale_kernels(root) and not any(c.exists() for c in caches)
    caches = _caches(root)
    _write(root / "sub" / "new.py", KERNEL.format(3))  # a new file of kernels
    assert drop_stale_kernels(root) and not any(c.exists() for c in caches)
    caches = _caches(root)
    (root / "kernels.py").unlink()  # a file of kernels removed
    assert drop_stale_kernels(root) and not any(c.exists() for c in caches)
    caches = _caches(root)
    (root / "__pycache__" / STAMP_NAME).write_text("{not json")
    assert drop_stale_kernels(root) and not any(c.exists() for c in caches)
    assert not drop_stale_kernels(root)


def test_a_cached_caller_runs_the_callee_as_it_is_now(tmp_path):
    """A cached kernel that inlines another file's kernel: after the callee's file changes, Numba
    alone still runs the old callee (the power check); with the stamp check, the new one."""
    root = tmp_path / "pkg"
    root.mkdir()
    (root / "__init__.py").write_text("")
    _write(root / "callee.py", 'from numba import njit\n\n\n@njit(inline="always")\ndef f():\n    return 1\n')
    (root / "caller.py").write_text(
        "from numba import njit\n\nfrom pkg.callee import f\n\n\n@njit(cache=True)\ndef g():\n    return f()\n"
    )
    script = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        sys.path.insert(0, {str(tmp_path)!r})
        if sys.argv[1] == "checked":
            from lpviz._kernel_cache import drop_stale_kernels
            drop_stale_kernels(Path({str(root)!r}))
        from pkg.caller import g
        print(g())
        """
    )

    def run(mode):
        done = subprocess.run([sys.executable, "-c", script, mode], capture_output=True, text=True, check=True)
        return int(done.stdout.strip())

    assert run("checked") == 1  # compiles and caches g
    assert list(root.glob("__pycache__/caller.g-*.nbi"))
    _write(root / "callee.py", (root / "callee.py").read_text().replace("return 1", "return 2"), bump=1)
    assert run("numba alone") == 1  # the stale cache: what the check exists for
    assert run("checked") == 2
    assert run("numba alone") == 2  # the fresh cache


def test_importing_lpviz_checks_its_own_caches():
    """The check runs on ``import lpviz``: a stamp entry for a file that is gone (one without
    kernels, so nothing is dropped) is gone from the stamp after a fresh import."""
    import json

    import lpviz._kernel_cache as kernel_cache

    kernel_cache.drop_stale_kernels()
    stamp = kernel_cache.PACKAGE_ROOT / "__pycache__" / STAMP_NAME
    entries = json.loads(stamp.read_text())
    entries["zz_no_longer_here.py"] = [0, 0, False]
    partial = stamp.with_name(f"{STAMP_NAME}.test{os.getpid()}")  # other workers may be reading it
    partial.write_text(json.dumps(entries))
    os.replace(partial, stamp)
    subprocess.run([sys.executable, "-c", "import lpviz"], check=True)
    assert "zz_no_longer_here.py" not in json.loads(stamp.read_text())


def test_a_folder_that_cannot_be_written_is_not_looked_at(tmp_path, monkeypatch):
    """A read-only install: Numba keeps its caches elsewhere, so no file is read or written."""
    import lpviz._kernel_cache as kernel_cache

    root = _tree(tmp_path)
    caches = _caches(root)
    monkeypatch.setattr(kernel_cache.os, "access", lambda path, mode: False)
    monkeypatch.setattr(kernel_cache, "_defines_kernels", lambda path: pytest.fail(f"read {path}"))
    assert not drop_stale_kernels(root)
    assert all(c.exists() for c in caches) and not (root / "__pycache__" / STAMP_NAME).exists()
