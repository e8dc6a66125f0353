"""``kill -USR1`` on a served dashboard prints every thread's stack and every session's chains, and the server
goes on serving: what the served tests show when a run hangs (tests/browser_harness.py's report), and what a
teacher can send."""

import urllib.request

from lpviz.dashboard.serve import SESSIONS_END
from tests.browser_harness import served


def test_sigusr1_prints_every_threads_stack_and_the_server_goes_on(tmp_path_factory):
    with served(tmp_path_factory) as server:
        with urllib.request.urlopen(server.url, timeout=60) as response:  # a session, with its chains
            assert response.status == 200
        stacks = server.thread_stacks()
        assert "Current thread" in stacks or "Thread 0x" in stacks, stacks
        assert "(most recent call first)" in stacks and 'File "' in stacks  # Python frames, thread by thread
        # and the session's chains as the server holds them: status, undrained messages, the drain
        assert "sessions (kill -USR1):\nsession 0: state idle" in stacks, stacks
        # no fit yet: nothing drained, held or waiting to be written
        assert "last drain never, held None (0 events), write block False, 0 messages queued" in stacks, stacks
        assert "document lock free (0 writes)" in stacks, stacks
        assert stacks.rstrip().endswith(SESSIONS_END), stacks
        for method in ("private", "naive", "nonprivate"):
            assert f"  {method}: idle, iteration 0, reached 0, queued 0, alive False" in stacks, stacks
        with urllib.request.urlopen(server.url, timeout=60) as response:  # still serving
            assert response.status == 200
