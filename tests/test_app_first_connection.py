"""A served session is kept from the moment Bokeh creates it until its page first connects.

Bokeh's unused-session check may run in the same turn of the event loop as the session's creation
(it was queued before); a session blocked only on the next tick could be discarded before its
page's websocket came (CI: a page that never drew its data, ``--unused-session-lifetime 1``).
Here the check runs straight after the creation, before the loop turns once.
"""

import asyncio

from bokeh.application import Application
from bokeh.application.handlers.function import FunctionHandler
from bokeh.server.contexts import ApplicationContext
from tornado.ioloop import IOLoop

from lpviz.dashboard import served as app_module


def _context():
    return ApplicationContext(Application(FunctionHandler(app_module.keep_until_connected)), io_loop=IOLoop.current())


def test_a_session_checked_for_use_in_its_creating_turn_is_kept():
    async def scenario():
        context = _context()
        session = await context.create_session_if_needed("created-and-checked")
        await context._cleanup_sessions(0)  # the check that was queued before the creation
        return session.destroyed, [s.id for s in context.sessions]

    destroyed, kept = asyncio.run(scenario())
    assert not destroyed
    assert kept == ["created-and-checked"]


def test_a_session_is_released_once_its_page_connected_and_left(monkeypatch):
    monkeypatch.setattr(app_module, "FIRST_CONNECTION_CHECK_MS", 20)

    async def scenario():
        context = _context()
        session = await context.create_session_if_needed("connected-then-left")
        page = object()
        session.subscribe(page)
        await asyncio.sleep(0.2)  # the watch sees the connection and lets the session go
        blocked_while_connected = session.expiration_blocked
        session.unsubscribe(page)
        await context._cleanup_sessions(0)
        return blocked_while_connected, session.destroyed

    blocked_while_connected, destroyed = asyncio.run(scenario())
    assert not blocked_while_connected
    assert destroyed


def test_a_page_that_never_connects_is_let_go_after_the_first_connection_wait(monkeypatch):
    monkeypatch.setattr(app_module, "FIRST_CONNECTION_SECONDS", 0.1)
    monkeypatch.setattr(app_module, "FIRST_CONNECTION_CHECK_MS", 20)

    async def scenario():
        context = _context()
        session = await context.create_session_if_needed("never-connected")
        await context._cleanup_sessions(0)
        kept_at_first = not session.destroyed
        await asyncio.sleep(0.4)
        await context._cleanup_sessions(0)
        return kept_at_first, session.destroyed

    kept_at_first, destroyed = asyncio.run(scenario())
    assert kept_at_first
    assert destroyed
