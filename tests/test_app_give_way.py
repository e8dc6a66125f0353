"""Issue 37: a served page's clicks are answered by the server's event loop, which shares the cores
with every session's chain threads. The chains' threads (and the kernels' warm-up) run at a lower
CPU priority than the thread that launched them, so the loop gets the CPU when it asks."""

import os
import sys
import threading
from types import SimpleNamespace

import pytest

from lpviz.dashboard.session.chain import LocalPlace
from lpviz.dashboard.session.turnstile import CHAIN_NICE_STEP

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a nice value per thread is Linux's")


def own_nice():
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


def test_a_chain_thread_runs_below_the_thread_that_launched_it_and_leaves_the_launcher_as_it_was():
    launcher = own_nice()
    seen = []
    runner = SimpleNamespace(method="private", work=lambda *args: seen.append((own_nice(), args)))
    thread = LocalPlace().launch(runner, 7, "problem", {}, 100, "control")
    thread.join(10)
    assert seen == [(min(19, launcher + CHAIN_NICE_STEP), (7, "problem", {}, 100, "control"))]
    assert own_nice() == launcher  # the server's own thread keeps its priority
    assert thread.name == "lpviz-private-chain"
