"""Ctrl-C and SIGTERM are never lost, even when they land while Numba compiles a kernel.

The race, made deterministic: a signal's handler runs at the next bytecode of the main thread;
while Numba compiles (or loads a cached kernel), that bytecode can be inside llvmlite's ctypes
callback (``ExecutionEngine._raw_object_cache_notify``), where ctypes reports the handler's
exception as "Exception ignored" and the compile carries on. Before the CLI remembered the
signal (``lpviz._parallel.check_signals``), the fit or grid then ran to its end (exit 0). Here the
child sends itself the signal from inside that very callback, at a compile in the middle of the run.
"""

import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from lpviz.release import Release

REPO = Path(__file__).resolve().parents[1]

# Run in the child: `python -c HOOK SIGNAL WHERE lpviz-arguments...`. WHERE is "fit" (the signal
# lands at the second iteration's callback, in the main thread) or "grid" (at the first result
# written). Prints "swallowed" once the compile returned: proof the handler's exception was lost there.
HOOK = r"""
import os, signal, sys
import numba
from numba.core.registry import cpu_target

number, where = getattr(signal, sys.argv[1]), sys.argv[2]

def signal_inside_a_compile():
    engine = cpu_target.target_context.codegen()._engine._ee
    notify = engine._object_cache_notify
    def hooked(module, buffer):  # called by llvmlite's ctypes callback as the object is compiled
        engine._object_cache_notify = notify
        os.kill(os.getpid(), number)  # the handler runs at the next bytecode: in this callback
        notify(module, buffer)
    engine._object_cache_notify = hooked
    numba.njit(lambda x: x + 1)(1)  # a fresh kernel, compiled now
    print("swallowed", file=sys.stderr, flush=True)

if where in ("fit", "library"):
    import lpviz.driver as driver
    fit = driver.fit
    def hooked_fit(*args, callback=None, **kwargs):
        seen = []
        def each(state):
            seen.append(state)
            if len(seen) == 2:
                signal_inside_a_compile()
            if callback is not None:
                callback(state)
        return fit(*args, callback=each, **kwargs)
    driver.fit = hooked_fit
else:
    from lpviz.reproduce.grid import ResultStore
    write = ResultStore.write
    written = []
    def hooked_write(self, task, result):
        write(self, task, result)
        written.append(task)
        if len(written) == 1:
            signal_inside_a_compile()
    ResultStore.write = hooked_write

if where == "library":  # lpviz.fit in plain Python: no CLI handlers, Python's own KeyboardInterrupt
    from lpviz.release import Release
    driver.fit(Release.load(sys.argv[3]), n_components=3, n_iter=5000, chains=int(sys.argv[4]))
    sys.exit(0)
from lpviz.cli import main
sys.exit(main(sys.argv[3:]))
"""

_EXPECTED = {"SIGINT": (130, "interrupted"), "SIGTERM": (143, "terminated")}


def _run(name, where, *arguments):
    return subprocess.run(
        [sys.executable, "-c", HOOK, name, where, *arguments],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,  # a hang guard only: an interrupted run ends in seconds
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # a background shell ignores it
    )


def _assert_one_line(result, name):
    code, line = _EXPECTED[name]
    assert "swallowed" in result.stderr, f"the signal did not land inside the compile:\n{result.stderr}"
    assert result.returncode == code, result.stderr
    assert result.stderr.strip().splitlines()[-1] == line, result.stderr
    assert "Exception ignored" not in result.stderr and "Traceback" not in result.stderr, result.stderr


# chains 1: the chain steps in the main thread (checked per iteration and per kernel call);
# chains 2: the main thread waits on the chains' threads (checked as it waits).
@pytest.mark.parametrize(("name", "chains"), [("SIGINT", "1"), ("SIGTERM", "2")])
def test_a_signal_swallowed_inside_a_compile_still_ends_the_cli_fit(tmp_path, name, chains):
    counts = np.random.default_rng(0).integers(-3, 10, size=(30, 20))
    Release(Y_obs=counts, alpha=0.5).save(tmp_path / "release.npz", overwrite=True)
    output = tmp_path / "fit"
    # 5000 iterations: a minute or more if the signal were lost; seconds once it is raised again
    arguments = ["fit", "--data", str(tmp_path / "release.npz"), "--already-noised", "--components", "3"]
    arguments += ["--iterations", "5000", "--chains", chains, "--no-progress", "--output", str(output)]
    result = _run(name, "fit", *arguments)
    _assert_one_line(result, name)
    assert not output.exists()  # nothing half-written left


# The library outside the CLI: Python's default SIGINT handler, whose KeyboardInterrupt the compile
# swallowed; the fit raises it again at its next poll and Python ends on it (status -SIGINT).
@pytest.mark.parametrize("chains", ["1", "2"])
def test_a_ctrl_c_swallowed_inside_a_compile_still_ends_a_library_fit(tmp_path, chains):
    counts = np.random.default_rng(0).integers(-3, 10, size=(30, 20))
    Release(Y_obs=counts, alpha=0.5).save(tmp_path / "release.npz", overwrite=True)
    result = _run("SIGINT", "library", str(tmp_path / "release.npz"), chains)
    assert "swallowed" in result.stderr, f"the signal did not land inside the compile:\n{result.stderr}"
    assert result.returncode == -signal.SIGINT, result.stderr  # not 0: 5000 iterations run to their end
    assert result.stderr.strip().splitlines()[-1] == "KeyboardInterrupt", result.stderr
    assert "SystemError" not in result.stderr and "ChainStopped" not in result.stderr, result.stderr


# --workers 1: the grid on lpviz's own LocalCluster (the client waits on its futures);
# --serial: the tasks in this process, one after another.
@pytest.mark.parametrize(("name", "where"), [("SIGINT", "--workers=1"), ("SIGTERM", "--serial")])
def test_a_signal_swallowed_inside_a_compile_still_ends_reproduce(tmp_path, name, where):
    output = tmp_path / "runs"
    arguments = ["reproduce", "fig1", "--preset", "quick", where, "--output", str(output), "--no-progress"]
    result = _run(name, "grid", *arguments)
    _assert_one_line(result, name)
    tasks = sorted((output / "fig1" / "tasks").glob("*.npz"))
    assert tasks and len(tasks) < 4, tasks  # it stopped at the next task, not at the end of the grid
