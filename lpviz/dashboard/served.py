"""Serving one page: Panel's configuration for served pages, the page's scripts, and a session kept
until its page first connects. Used by the page script (:mod:`lpviz.dashboard.app`) and by
:meth:`lpviz.dashboard.page.Dashboard.servable`; it imports no page, so either may import it.
"""

import logging
import time
import weakref

import panel as pn
from bokeh.models import CustomJS

from lpviz.dashboard.serving.loopwatch import watch_event_loop
from lpviz.dashboard.serving.paint import PAINT_JS
from lpviz.dashboard.serving.resources import (
    check_callbacks_once,
    reuse_bokeh_defaults,
    reuse_design_modifiers,
    serialize_patches_lazily,
    serve_stylesheets_locally,
)
from lpviz.dashboard.serving.uploads import max_upload, upload_limit_js
from lpviz.dashboard.session.fits import chain_progress

# Phone width: below this the sidebar starts collapsed (the header's toggle opens it over the main
# column) so the tabs get the whole width; a sidebar of 340 px beside them left 72 px at 412 px.
NARROW_PX = 800

# Bootstrap's collapse keeps its state in the sidebar's "show" class: collapse it when the page opens
# narrow or is made narrow, open it again when it is made wide.
NARROW_JS = f"""
const narrow = window.matchMedia("(max-width: {NARROW_PX}px)");
const sidebar = document.getElementById("sidebar");
const toggle = document.getElementById("sidebar-toggle");
function fit_sidebar() {{
  if (!sidebar) return;
  sidebar.classList.toggle("show", !narrow.matches);
  if (toggle) toggle.setAttribute("aria-expanded", String(!narrow.matches));
}}
fit_sidebar();
narrow.addEventListener("change", fit_sidebar);
"""


# BokehJS (3.9) keeps one message receiver per connection across reconnections: a socket dropped in the
# middle of a message of several frames (a patch with binary buffers: heatmap values) left it mid-message,
# and the new socket's first frames were read as that message's tail ("First message was not an ACK",
# "buffer for id=... not found"); the page stayed connected but applied nothing and read "running" for
# ever. Each socket that opens starts with a fresh receiver.
# Mends: Panel 1.9.4 / Bokeh 3.9.2 (BokehJS's ``ClientConnection`` makes its ``_receiver`` once, in its
# constructor, and ``_on_open`` keeps it; no upstream issue known). It may go once BokehJS starts each
# socket with a new receiver: tests/test_mends_upstream.py::test_bokehjs_still_keeps_one_receiver_per_connection
# then fails.
FRESH_RECEIVER_JS = """
const {ClientConnection} = Bokeh.require("client/connection");
if (!ClientConnection.prototype.__lpviz_fresh_receiver) {
  const on_open = ClientConnection.prototype._on_open;
  ClientConnection.prototype._on_open = function (...args) {
    this._receiver = new this._receiver.constructor();
    return on_open.apply(this, args);
  };
  ClientConnection.prototype.__lpviz_fresh_receiver = true;
}
"""


log = logging.getLogger("lpviz.app")
# A page whose connection to the server drops (a websocket closed under load) kept showing "running,
# iteration 380 / 400" for ever while the server had stopped its chains, and its Stop and Reset reached
# nothing (issue 37): it reconnects by itself to the same session, which then sends the statuses as
# they are (lpviz.dashboard.session.fits.Fits.drain), and until then says so in words, with what to do.
DISCONNECTED = (
    "The connection to the server was lost: this page no longer hears from the fits and its buttons "
    "reach nothing. It reconnects by itself; if it does not, reload the page (its fits were stopped)."
)


def show_refusal(exception):
    """A value the session refused (a setting out of range, a schedule that saves no sample, ...):
    say why in the page that asked, instead of dropping it silently."""
    log.info("refused: %s", exception)
    if pn.state.notifications is not None:
        pn.state.notifications.error(str(exception), duration=10_000)


# The documents configure() has set up (a session's Panel configuration lives with its document), and
# whether it ran outside any session (the process's own configuration).
_CONFIGURED: "weakref.WeakSet[object]" = weakref.WeakSet()
_CONFIGURED_OUTSIDE = [False]


def configure():
    """Panel's configuration of a served page, and the mends of Panel and Bokeh it needs (see
    :mod:`lpviz.dashboard.serving.resources`): once per session that runs a page script, and once
    outside any (at the import of :mod:`lpviz.dashboard.app` by ``lpviz serve``'s warm-up).

    A second call for the same session (or outside one) does nothing: a script's first session that
    imports :mod:`lpviz.dashboard.app` and then calls ``Dashboard().servable()`` configured itself twice
    (issue 55)."""
    doc = pn.state.curdoc
    if doc is None or doc.session_context is None:
        if _CONFIGURED_OUTSIDE[0]:
            return
        _CONFIGURED_OUTSIDE[0] = True
    elif doc in _CONFIGURED:
        return
    else:
        _CONFIGURED.add(doc)
    pn.extension(notifications=True, sizing_mode="stretch_width")
    pn.config.reconnect = True
    pn.config.disconnect_notification = DISCONNECTED
    serve_stylesheets_locally()
    reuse_design_modifiers()
    reuse_bokeh_defaults()
    check_callbacks_once()
    serialize_patches_lazily()
    pn.config.exception_handler = show_refusal


def page_template(dashboard):
    """The served page of ``dashboard`` (a :class:`~lpviz.dashboard.page.Dashboard`): its template,
    with the page's scripts; the event-loop watch starts with the first page."""
    context = getattr(pn.state.curdoc, "session_context", None)
    watch_event_loop(getattr(context, "server_context", None), progress=chain_progress)  # with $LPVIZ_LOOP_LOG only
    template = dashboard.template()
    if pn.state.curdoc is not None:
        pn.state.curdoc.js_on_event("document_ready", CustomJS(code=NARROW_JS))
        pn.state.curdoc.js_on_event("document_ready", CustomJS(code=FRESH_RECEIVER_JS))
        pn.state.curdoc.js_on_event("document_ready", CustomJS(code=PAINT_JS))
        pn.state.curdoc.js_on_event("document_ready", CustomJS(code=upload_limit_js(max_upload())))
    return template


# How long a served session waits for its page to connect before Bokeh may discard it as unused.
FIRST_CONNECTION_SECONDS = 120
FIRST_CONNECTION_CHECK_MS = 500


def keep_until_connected(doc):
    """Keep ``doc``'s session until its page first connects (at most FIRST_CONNECTION_SECONDS).

    Bokeh discards a session with no connection after ``--unused-session-lifetime``, counted from
    its creation. A page whose websocket comes later (a class opening at once queues the
    connections behind the page builds) then gets a new session, whose document it never shows:
    a page that never draws its data. Its session stays until it has connected once; after
    that, the lifetime counts from the page's last disconnection, as before.

    The block is taken in the same step as Bokeh creates the session (when it hands the session to
    ``doc.session_context``): an unused-session check queued before the creation runs in the same
    turn of the event loop, so a block on the next tick could come after the session was gone."""
    context = doc.session_context
    watch = {"since": None, "session": None, "callback": None}

    def release():
        session, watch["session"] = watch["session"], None
        if session is not None:
            session.unblock_expiration()
        if watch["callback"] is not None:
            doc.remove_periodic_callback(watch["callback"])
            watch["callback"] = None

    def check():
        session = watch["session"]
        waited = time.monotonic() - watch["since"]
        if session is None or session.connection_count or waited > FIRST_CONNECTION_SECONDS:
            release()

    def block(session):
        session.block_expiration()
        watch.update(since=time.monotonic(), session=session)
        watch["callback"] = doc.add_periodic_callback(check, FIRST_CONNECTION_CHECK_MS)

    set_session = context._set_session  # Bokeh's one call with the new session, before any await

    def set_and_block(session):
        set_session(session)
        block(session)

    context._set_session = set_and_block


def serve_dashboard(dashboard, doc=None):
    """The page of one session: :func:`page_template` of ``dashboard`` served into ``doc`` (the
    session's document, default the current one).

    Its Bokeh models are added under one freeze of the document: Panel adds a template's parts as a
    dozen roots, and Bokeh walked every model of the page again after each (a seventh of a page open's
    server CPU, issue 41); frozen, it walks them once, at the end."""
    doc = doc if doc is not None else pn.state.curdoc
    template = page_template(dashboard)
    with doc.models.freeze():
        if doc.session_context is not None:
            keep_until_connected(doc)
            template.servable()  # served: Panel's own steps (its logging, the page's location)
        else:
            template.server_doc(doc)  # a document outside a server (benchmarks/bench_page_open.py)
    return template
