"""The lpviz dashboard: ``panel serve lpviz/dashboard/app.py`` (or ``make serve``).

Only assembles: every session gets its own :class:`~lpviz.dashboard.session.settings.Settings`,
:class:`~lpviz.dashboard.session.datastore.DataStore` (data, release, truth) and
:class:`~lpviz.dashboard.session.fits.Fits` (chains), the controls in the sidebar and one view
per tab.
"""

import logging
import time

import panel as pn
from bokeh.models import CustomJS

from lpviz.dashboard.serving.loopwatch import watch_event_loop
from lpviz.dashboard.serving.paint import PAINT_JS, SPINNER_CSS, busy_spinner
from lpviz.dashboard.serving.resources import (
    check_callbacks_once,
    reuse_bokeh_defaults,
    reuse_design_modifiers,
    serialize_patches_lazily,
    serve_stylesheets_locally,
)
from lpviz.dashboard.serving.throttle import PageLag
from lpviz.dashboard.session.default import default_session
from lpviz.dashboard.views.bessel_view import BesselView
from lpviz.dashboard.views.blocks_view import BlocksView
from lpviz.dashboard.views.central_view import CentralView
from lpviz.dashboard.views.controls_view import ControlsView
from lpviz.dashboard.views.export import ExportView
from lpviz.dashboard.views.fits_view import FitsView
from lpviz.dashboard.views.noise_view import NoiseView
from lpviz.dashboard.views.onscreen import ViewTabs
from lpviz.dashboard.views.privacy_view import PrivacyView
from lpviz.dashboard.views.sweep_view import SweepView
from lpviz.dashboard.views.teaching import Teaching
from lpviz.dashboard.views.tensor_view import TensorView
from lpviz.dashboard.views.topicmap_view import TopicMapView
from lpviz.dashboard.views.topics_view import TopicsView

pn.extension(notifications=True, sizing_mode="stretch_width")
# A page whose connection to the server drops (a websocket closed under load) kept showing "running,
# iteration 380 / 400" for ever while the server had stopped its chains, and its Stop and Reset reached
# nothing (issue 37): it reconnects by itself to the same session, which then sends the statuses as
# they are (lpviz.dashboard.session.fits.Fits.drain), and until then says so in words, with what to do.
pn.config.reconnect = True
DISCONNECTED = (
    "The connection to the server was lost: this page no longer hears from the fits and its buttons "
    "reach nothing. It reconnects by itself; if it does not, reload the page (its fits were stopped)."
)
pn.config.disconnect_notification = DISCONNECTED
# BokehJS (3.9) keeps one message receiver per connection across reconnections: a socket dropped in the
# middle of a message of several frames (a patch with binary buffers: heatmap values) left it mid-message,
# and the new socket's first frames were read as that message's tail ("First message was not an ACK",
# "buffer for id=... not found"); the page stayed connected but applied nothing and read "running" for
# ever. Each socket that opens starts with a fresh receiver.
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
serve_stylesheets_locally()
reuse_design_modifiers()
reuse_bokeh_defaults()
check_callbacks_once()
serialize_patches_lazily()
log = logging.getLogger("lpviz.app")


def show_refusal(exception):
    """A value the session refused (a setting out of range, a schedule that saves no sample, ...):
    say why in the page that asked, instead of dropping it silently."""
    log.info("refused: %s", exception)
    if pn.state.notifications is not None:
        pn.state.notifications.error(str(exception), duration=10_000)


pn.config.exception_handler = show_refusal

# Phone width: below this the sidebar starts collapsed (the header's toggle opens it over the main
# column) so the tabs get the whole width; a sidebar of 340 px beside them left 72 px at 412 px.
NARROW_PX = 800
NARROW_CSS = f"""
@media (max-width: {NARROW_PX}px) {{
  #content {{ position: relative; }}
  #sidebar.show, #sidebar.collapsing {{
    position: absolute; top: 0; left: 0; bottom: 0; z-index: 1050;
    width: min(var(--sidebar-width), 92vw); max-width: 92vw !important;
    background-color: var(--bs-body-bg); box-shadow: 4px 0 12px rgba(0, 0, 0, 0.25);
  }}
  #main {{ padding: 6px 4px 12px 4px; }}
  #header .title {{ font-size: 1.05em; overflow: hidden; text-overflow: ellipsis; }}
}}
"""
# The tab headers wrap onto further lines at phone width: in one scrolling row (Bokeh's) a 412 px phone
# showed 5 of the 11 with nothing saying the rest were there (issue 37). In the tabs' own shadow root.
NARROW_TABS_CSS = f"""
@media (max-width: {NARROW_PX}px) {{
  :host(.bk-above) .bk-headers-wrapper {{ flex-wrap: wrap; overflow-x: visible; }}
  :host(.bk-above) .bk-tab {{ padding: 4px 8px; }}
}}
"""
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


def exported_views(fits):
    """The views of the tabs whose figures the Export tab offers, by tab name, in the page's order
    (tests/test_app_export_every.py compares every export of theirs with its tab)."""
    data = fits.data
    return {
        "Data & noise": NoiseView(data=data),
        "Fits": FitsView(fits=fits),
        "Topics": TopicsView(fits=fits),
        "Topic map": TopicMapView(fits=fits),
        "Blocks": BlocksView(fits=fits),
        "Tensor": TensorView(fits=fits),
        "Bessel": BesselView(fits=fits),
        "Privacy": PrivacyView(data=data),
        "Central vs local": CentralView(fits=fits),
    }


def create_app():
    context = getattr(pn.state.curdoc, "session_context", None)
    watch_event_loop(getattr(context, "server_context", None))  # with $LPVIZ_LOOP_LOG only
    fits = default_session()
    data = fits.data
    views = exported_views(fits)
    export = ExportView(fits=fits, views=list(views.values()), shown=False)
    views["Epsilon sweep"] = SweepView(fits=fits)  # its own CSV/PNG downloads; not among the exported figures
    views["Export"] = export
    # each tab built when first shown; a hidden tab's views wait (lpviz/dashboard/views/onscreen.py)
    tabs = ViewTabs(*views.items(), sizing_mode="stretch_width", stylesheets=[NARROW_TABS_CSS])
    # Spins while a chain runs or data are being built, nothing else (Panel's own
    # indicator also spins for every periodic callback).
    # (lpviz.dashboard.serving.paint.busy_spinner: a text that spins, so a Pause's answer lays nothing out)
    spinner = pn.pane.HTML(
        pn.bind(busy_spinner, fits.param.busy), width=24, height=24, margin=(8, 10), stylesheets=[SPINNER_CSS]
    )
    # Bootstrap rather than Fast: the Fast theme always fetches a Google font,
    # which fails (with console errors) on machines without internet access.
    template = pn.template.BootstrapTemplate(
        title="lpviz: locally private Bayesian inference for count data",
        busy_indicator=None,
        # the page reports its lag (the session's updates slow down for it): a root of its own, drawn with
        # the page. Inside the Fits tab, BokehJS held the whole tab's views unrendered while it loaded
        # the reporter's module; a patch meanwhile (a preset's iterations: a progress bar's max) hit a
        # bar not drawn yet and the rest of that patch (the progress lines) was lost
        header=[spinner, PageLag(fits.pace)],
        sidebar=[Teaching(fits=fits, tabs=tabs), ControlsView(data=data)],
        main=[tabs],
        sidebar_width=340,
        header_background="#b2182b",
    )
    template.config.raw_css.append(NARROW_CSS)
    if pn.state.curdoc is not None:
        pn.state.curdoc.js_on_event("document_ready", CustomJS(code=NARROW_JS))
        pn.state.curdoc.js_on_event("document_ready", CustomJS(code=FRESH_RECEIVER_JS))
        pn.state.curdoc.js_on_event("document_ready", CustomJS(code=PAINT_JS))
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


def serve_page(doc=None):
    """The page of one session: :func:`create_app` served into ``doc`` (the session's document).

    Its Bokeh models are added under one freeze of the document: Panel adds a template's parts as a
    dozen roots, and Bokeh walked every model of the page again after each (a seventh of a page open's
    server CPU, issue 41); frozen, it walks them once, at the end."""
    doc = doc if doc is not None else pn.state.curdoc
    template = create_app()
    with doc.models.freeze():
        if doc.session_context is not None:
            keep_until_connected(doc)
            template.servable()  # served: Panel's own steps (its logging, the page's location)
        else:
            template.server_doc(doc)  # a document outside a server (benchmarks/bench_page_open.py)
    return template


if __name__.startswith("bokeh"):
    serve_page()
