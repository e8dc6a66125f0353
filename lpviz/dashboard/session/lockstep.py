"""The :class:`Lockstep` that keeps the running chains of one session level (within :data:`LOCKSTEP_SLACK`)."""

import threading

from lpviz.dashboard.session.control import WAKE_SECONDS

LOCKSTEP_SLACK = 20


class Lockstep:
    """Keeps the running chains of one session within ``slack`` iterations of each other.

    Chains share two or so cores; left alone, each gets the same CPU time, so
    the cheapest (non-private) runs twice as many iterations as the costliest
    (private) one. In lockstep a chain that is ahead waits, and its CPU time
    goes to the slowest: the traces stay comparable iteration by iteration
    and the slowest chain runs faster.

    Each worker :meth:`join` s (starting level with the slowest chain
    running, so a chain resumed or restarted later holds nobody back),
    :meth:`wait` s while it is :meth:`ahead`, :meth:`advance` s after each
    iteration, and :meth:`leave` s when it pauses or ends. Waiting sleeps on a
    condition that every leave and every advance of the slowest chain signals: no polling.
    """

    def __init__(self, slack=LOCKSTEP_SLACK):
        self.slack = slack
        self._counts = {}  # worker token -> iterations since it joined, offset to the slowest at joining
        self._condition = threading.Condition()

    def join(self, token):
        with self._condition:
            counts = list(self._counts.values())
            self._counts[token] = min(counts) if counts else 0

    def leave(self, token):
        with self._condition:
            self._counts.pop(token, None)
            self._condition.notify_all()

    def advance(self, token):
        with self._condition:
            count = self._counts[token]
            self._counts[token] = count + 1
            # only the slowest chain's step can let a waiting one go: waking every waiter at every
            # iteration of every chain cost more than Figure 1's iterations themselves
            if all(count <= other for key, other in self._counts.items() if key is not token):
                self._condition.notify_all()

    def gap(self, token):
        """How many iterations this worker is ahead of the slowest other one (0 alone)."""
        with self._condition:
            return self._gap(token)

    def _gap(self, token):
        own = self._counts.get(token)
        others = [count for key, count in self._counts.items() if key is not token]
        return 0 if own is None or not others else own - min(others)

    def ahead(self, token):
        return self.gap(token) > self.slack

    def wait(self, token, control):
        """Sleep while this worker is more than ``slack`` iterations ahead of another."""
        with self._condition:
            while self._gap(token) > self.slack and control.moving:
                self._condition.wait(WAKE_SECONDS)

    def wake(self):
        with self._condition:
            self._condition.notify_all()
