"""Issue 37 (HIGH 1, a run that never ends on screen): every message Panel queues for a page is written.

Panel writes a document's changes straight to the page's socket; a change made while an earlier write
is in flight is queued behind a write block and written by a task of its own. The earlier write's task
lifted the block once its writes were done without looking at the queue, so when it resumed before
the later task ran, that task found no block and left its message queued until the document's next
change: on a page whose fits had all paused, the last "paused" never came (the served
test_browser_lag read "pausing" for 10 minutes, about one run in 50 under load; kill -USR1 showed the
three chains paused and "write block False, 1 messages queued"). Here the same order of events is made
on Panel's own write queue, with a socket that records what it is given."""

import asyncio

from bokeh.document import Document
from panel.io import document as panel_document

import lpviz.dashboard.session.fits  # noqa: F401  (the served dashboard's modules: lpviz.dashboard.serving.writes installed as they are)


class Socket:
    """A page's socket: every message written, each write done when the test says so."""

    def __init__(self):
        self.written, self.in_flight = [], []


class Protocol:
    @staticmethod
    def create(kind, events):
        return f"{kind} {' '.join(events)}"


class Connection:
    def __init__(self):
        self._socket, self.protocol = Socket(), Protocol()


def write(connection, events=None, msg=None):
    """Panel's dispatch for this socket type: one write of ``msg`` (or of ``events``), in flight."""
    socket = connection._socket
    socket.written.append(msg if msg is not None else Protocol.create("PATCH-DOC", events))
    future = asyncio.get_running_loop().create_future()
    socket.in_flight.append(future)
    return [future]


async def settle(socket, turns=20):
    """Let the loop run, every write done as soon as it is made."""
    for _ in range(turns):
        for future in socket.in_flight:
            if not future.done():
                future.set_result(None)
        await asyncio.sleep(0)


def test_a_change_queued_while_an_earlier_write_finishes_is_written():
    doc, connection = Document(), Connection()
    socket = connection._socket
    panel_document.extra_socket_handlers[Socket] = write

    async def scenario():
        panel_document.schedule_write_events(doc, [connection], ["pausing"])
        await asyncio.sleep(0)  # its task writes "pausing" and waits for the write
        assert socket.written == ["PATCH-DOC pausing"]
        socket.in_flight[0].set_result(None)  # the write is done: its task resumes at the loop's next turn,
        panel_document.schedule_write_events(doc, [connection], ["paused"])  # after this change queued
        await settle(socket)
        return list(socket.written), dict(panel_document._WRITE_MSGS.get(doc, {}))

    try:
        written, queued = asyncio.run(scenario())
    finally:
        del panel_document.extra_socket_handlers[Socket]
    assert written == ["PATCH-DOC pausing", "PATCH-DOC paused"], (written, queued)  # before: "paused" stayed queued
    assert not any(queued.values()) and doc not in panel_document._WRITE_BLOCK


def test_messages_queued_behind_a_busy_socket_are_written_once_each_in_order():
    """The guard adds no write: messages that waited for a socket's lock go out once, in order."""
    doc, connection = Document(), Connection()
    socket = connection._socket
    panel_document.extra_socket_handlers[Socket] = write

    async def scenario():
        for number in range(5):  # each change queued while the one before is in flight
            panel_document.schedule_write_events(doc, [connection], [f"change-{number}"])
            await asyncio.sleep(0)
            if number % 2:
                await settle(socket, turns=1)
        await settle(socket)
        return list(socket.written)

    try:
        written = asyncio.run(scenario())
    finally:
        del panel_document.extra_socket_handlers[Socket]
    assert written == [f"PATCH-DOC change-{number}" for number in range(5)]
    assert not panel_document._WRITE_MSGS.get(doc) and doc not in panel_document._WRITE_BLOCK
