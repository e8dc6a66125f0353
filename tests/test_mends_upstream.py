"""The upstream behaviour each mend of Panel or Bokeh works around is still there (issue 55 item 3).

Each mend (``lpviz/dashboard/serving/``, ``lpviz/dashboard/served.py``'s FRESH_RECEIVER_JS,
``lpviz/dashboard/in_jupyter.py``'s ``_patch_panel_stylesheets``) says in its docstring the Panel and
Bokeh versions it was written against (its "Mends:" line). Each test here runs Panel's or Bokeh's own
code, without the mend, and checks that it still does what the mend exists for; where that is only
feasible in a browser (the BokehJS patches), it checks that the installed BokehJS still has the code
the patch hooks (read from bokeh's static files). A test that fails means upstream changed: the mend
may no longer be needed (or no longer apply), and is to be revisited, then dropped if it is not.

What the mends change (that the page is the same with them) is tested elsewhere:
tests/test_app_resources.py, tests/test_app_writes.py, tests/test_browser_paint.py."""

import asyncio
import functools
import inspect
import os
import re
from pathlib import Path

import bokeh
import panel as pn
import param
import pytest
from bokeh.core.has_props import HasProps
from bokeh.core.property.bases import Property
from bokeh.document import Document
from bokeh.models import ImportedStyleSheet
from panel.io import document as panel_document
from panel.io.state import set_curdoc, state
from panel.reactive import Reactive
from panel.theme.base import Design
from test_app_resources import page_document
from test_app_writes import Connection, Socket, settle, write

import lpviz.dashboard.session.fits  # noqa: F401  (installs lpviz.dashboard.serving.writes, as the dashboard does)
from lpviz.dashboard.serving import writes
from lpviz.dashboard.serving.resources import (
    check_callbacks_once,
    reuse_bokeh_defaults,
    reuse_design_modifiers,
    serialize_patches_lazily,
    serve_stylesheets_locally,
)

BOKEHJS = Path(bokeh.__file__).parent / "server" / "static" / "js"


def upstream_changed(mend, detail=""):
    """The failure message of a guard: which mend to revisit."""
    return f"upstream changed: check whether {mend} is still needed; drop it if not" + (
        f" ({detail})" if detail else ""
    )


def panels_own(function, mend):
    """Panel's or Bokeh's function under ``mend``'s patch (the patch keeps it as ``__wrapped__``)."""
    original = inspect.unwrap(function)
    assert not any(name.startswith("_lpviz") for name in vars(original)), upstream_changed(mend, "no original")
    return original


# ---- Panel's write queue (lpviz.dashboard.serving.writes) ------------------------------------------------


def test_panels_write_queue_still_strands_a_late_message(monkeypatch):
    """Behavioural: tests/test_app_writes.py's order of events on Panel's own write queue, unguarded: the
    task of the earlier write lifts the block and the later message stays queued, with no task to
    write it (what writes.install mends)."""
    mend = "lpviz.dashboard.serving.writes.install"
    assert all(hasattr(panel_document, name) for name in writes._PANEL_NAMES), upstream_changed(mend, "names gone")
    assert getattr(panel_document._dispatch_msgs, "_lpviz_writes_every_queue", False), upstream_changed(mend)
    monkeypatch.setattr(panel_document, "_dispatch_msgs", panels_own(panel_document._dispatch_msgs, mend))
    monkeypatch.setitem(panel_document.extra_socket_handlers, Socket, write)
    doc, connection = Document(), Connection()
    socket = connection._socket

    async def scenario():
        panel_document.schedule_write_events(doc, [connection], ["pausing"])
        await asyncio.sleep(0)
        socket.in_flight[0].set_result(None)
        panel_document.schedule_write_events(doc, [connection], ["paused"])
        await settle(socket)
        return list(socket.written), [msg for msgs in panel_document._WRITE_MSGS.get(doc, {}).values() for msg in msgs]

    written, queued = asyncio.run(scenario())
    assert written == ["PATCH-DOC pausing"] and queued == ["PATCH-DOC paused"], upstream_changed(
        mend, (written, queued)
    )
    assert doc not in panel_document._WRITE_BLOCK, upstream_changed(mend, "the block stays up")


# ---- Panel's style sheets (serve_stylesheets_locally, in_jupyter._patch_panel_stylesheets) ---------------


def imported_urls(properties):
    return [str(sheet.url) for sheet in properties["stylesheets"] if isinstance(sheet, ImportedStyleSheet)]


def panels_own_stylesheets(monkeypatch, mend):
    """Panel's own ``Reactive._get_properties``, with Panel's own ``patch_stylesheet`` where it calls it."""
    import panel.reactive

    monkeypatch.setattr(panel.reactive, "patch_stylesheet", panels_own(panel.reactive.patch_stylesheet, mend))
    return panels_own(Reactive._get_properties, mend)


def test_panel_still_points_style_sheets_at_its_cdn(monkeypatch):
    """Behavioural: Panel's own ``Reactive._get_properties`` renders a pane without a page's document
    with its style sheets on Panel's CDN, and Panel's ``patch_stylesheet`` moves a local sheet to the
    CDN when given the CDN (what ``Reactive._update_model`` gives it without a page's document).
    Structural: ``Reactive._update_model`` still looks ``patch_stylesheet`` and ``CDN_DIST`` up as
    ``panel.reactive``'s globals (the name the mend replaces)."""
    import panel.io.resources as panel_resources

    mend = "lpviz.dashboard.serving.resources.serve_stylesheets_locally"
    serve_stylesheets_locally()
    assert not panel_resources.use_cdn(), "the test expects a server serving its own resources"
    original = panels_own_stylesheets(monkeypatch, mend)
    urls = imported_urls(original(pn.pane.Markdown("text"), None))
    assert urls and all(url.startswith(panel_resources.CDN_DIST) for url in urls), upstream_changed(mend, urls)
    sheet = ImportedStyleSheet(url=f"{panel_resources.LOCAL_DIST}css/loading.css")
    panel_resources.patch_stylesheet(sheet, panel_resources.CDN_DIST)
    assert sheet.url.startswith(panel_resources.CDN_DIST), upstream_changed(mend, sheet.url)
    names = Reactive._update_model.__code__.co_names
    assert "patch_stylesheet" in names and "CDN_DIST" in names, upstream_changed(mend, names)


def test_panel_still_renders_style_sheets_of_the_current_document(monkeypatch):
    """Behavioural: Panel's own ``Reactive._get_properties``, rendering a pane for one document while
    another is ``pn.state.curdoc`` (a notebook: a button pressed in one output redraws a view shown in
    another), gives it the current document's style sheet models ("Models must be owned by only a
    single document"), imports of Panel's CDN, not inline sheets (what _patch_panel_stylesheets mends)."""
    mend = "lpviz.dashboard.in_jupyter._patch_panel_stylesheets"  # a notebook's: not applied here (served tests follow)
    original = panels_own_stylesheets(monkeypatch, mend)
    current, other = Document(), Document()
    try:
        with set_curdoc(current):
            own = [
                s for s in original(pn.pane.Markdown("a"), current)["stylesheets"] if isinstance(s, ImportedStyleSheet)
            ]
            for_other = original(pn.pane.Markdown("b"), other)["stylesheets"]
        shared = [sheet for sheet in for_other if any(sheet is mine for mine in own)]
        assert shared, upstream_changed(mend, "no model of the current document's")
        assert all(str(sheet.url).startswith("https://") for sheet in shared), upstream_changed(
            mend, imported_urls({"stylesheets": shared})
        )
    finally:
        for doc in (current, other):
            state._stylesheets.pop(doc, None)


# ---- Panel's design lookups (reuse_design_modifiers) ------------------------------------------------------


def test_panel_still_looks_design_modifiers_up_at_every_update(monkeypatch):
    """Behavioural: Panel's own ``Reactive._update_properties`` asks the component's design for its
    parameters at an update that does not touch ``stylesheets``, and Panel's own
    ``Design._get_modifiers`` resolves the theme's CSS files on disk at every call (no cache)."""
    mend = "lpviz.dashboard.serving.resources.reuse_design_modifiers"
    reuse_design_modifiers()
    update_properties = panels_own(Reactive._update_properties, mend)
    pane = pn.pane.Markdown("text", design=pn.theme.Bootstrap)
    asked = []
    params = pane._design.params
    monkeypatch.setattr(pane._design, "params", lambda *args, **kwargs: asked.append(args) or params(*args, **kwargs))
    event = param.parameterized.Event(
        what="value", name="margin", obj=pane, cls=type(pane), old=None, new=7, type="changed"
    )
    doc = Document()
    with set_curdoc(doc):
        update_properties(pane, event, doc=doc)
    assert len(asked) == 1, upstream_changed(mend, f"design looked up {len(asked)} times for a margin")

    get_modifiers = panels_own(Design._get_modifiers.__func__, mend)
    looked = []
    isfile = os.path.isfile
    monkeypatch.setattr(os.path, "isfile", lambda path: looked.append(path) or isfile(path))
    theme, button = pn.theme.Bootstrap(theme="default").theme, pn.widgets.Button(label="Start")
    counts = []
    for _ in range(2):
        looked.clear()
        get_modifiers(pn.theme.Bootstrap, button, theme=theme, isolated=True)
        counts.append(len(looked))
    assert all(counts), upstream_changed(mend, f"files resolved per call: {counts}")


# ---- Bokeh's PATCH-DOC serialiser (serialize_patches_lazily) ---------------------------------------------


def test_bokehs_serializer_still_refs_every_synced_model(monkeypatch):
    """Behavioural: Bokeh's own ``Serializer``, made for a message to a page, builds the reference of
    every model the page has before it meets any. Structural: ``bokeh.protocol.messages.patch_doc``
    still makes its serialiser from its module global ``Serializer`` (the name the mend replaces)."""
    import importlib

    from bokeh.core.serialization import Serializer
    from bokeh.model import Model

    mend = "lpviz.dashboard.serving.resources.serialize_patches_lazily"
    patch_doc = importlib.import_module("bokeh.protocol.messages.patch_doc")  # the package exports the class
    serialize_patches_lazily()
    doc, _, _ = page_document()
    synced = doc.models.synced_references
    made = []
    ref = Model.ref
    monkeypatch.setattr(Model, "ref", property(lambda self: made.append(self) or ref.fget(self)))
    Serializer(references=synced)
    assert len(made) == len(synced) > 20, upstream_changed(mend, f"{len(made)} references of {len(synced)} made")
    names = patch_doc.patch_doc.create.__func__.__code__.co_names
    assert "Serializer" in names, upstream_changed(mend, names)


# ---- Bokeh's defaults (reuse_bokeh_defaults) -----------------------------------------------------------


def test_bokeh_still_works_defaults_out_at_every_read(monkeypatch):
    """Behavioural: Bokeh's own ``Property.themed_default`` walks the class's MRO
    (``HasProps._overridden_defaults``, a new dict each time) at every read of a default; its own
    ``HasProps.themed_values`` goes through ``HasProps.__getattr__`` for a model without a theme; a
    setting (``bokeh.settings``) reads the environment at every call."""
    from bokeh.models import Div
    from bokeh.settings import PrioritizedSetting, convert_bool
    from bokeh.settings import settings as bokeh_settings

    mend = "lpviz.dashboard.serving.resources.reuse_bokeh_defaults"
    reuse_bokeh_defaults()
    themed_default = panels_own(Property.themed_default, mend)
    overridden_defaults = panels_own(HasProps.__dict__["_overridden_defaults"].__func__, mend)
    walks = []
    monkeypatch.setattr(
        HasProps, "_overridden_defaults", classmethod(lambda cls: walks.append(cls) or overridden_defaults(cls))
    )
    prop = Div.lookup("text").property
    for _ in range(2):
        themed_default(prop, Div, "text", None)
    assert len(walks) == 2, upstream_changed(mend, f"{len(walks)} walks for two reads")
    first, second = overridden_defaults(Div), overridden_defaults(Div)
    assert first == second and first is not second, upstream_changed(mend, "the overridden defaults are kept")

    themed_values = panels_own(HasProps.themed_values, mend)
    missed = []
    getattr_ = HasProps.__getattr__
    monkeypatch.setattr(HasProps, "__getattr__", lambda self, name: missed.append(name) or getattr_(self, name))
    assert themed_values(Div()) is None and "__themed_values__" in missed, upstream_changed(mend, missed)

    for setting, env_var in (
        (bokeh_settings.simple_ids, "BOKEH_SIMPLE_IDS"),
        (bokeh_settings.serialize_include_defaults, "BOKEH_SERIALIZE_INCLUDE_DEFAULTS"),
    ):
        assert isinstance(setting, PrioritizedSetting) and setting._env_var == env_var, upstream_changed(mend, env_var)
    fresh = PrioritizedSetting("simple_ids", "BOKEH_SIMPLE_IDS", default=True, convert=convert_bool)
    read = []
    for value in ("no", "yes"):
        monkeypatch.setenv("BOKEH_SIMPLE_IDS", value)
        read.append(fresh())
    assert read == [False, True], upstream_changed(mend, f"a setting read {read}")


# ---- Bokeh's callback check (check_callbacks_once) -----------------------------------------------------


def test_bokeh_still_inspects_every_callbacks_signature(monkeypatch):
    """Behavioural: Bokeh's own ``_check_callback`` runs ``inspect.signature`` at every check, for the same
    shape of callback each time (a new partial of the same bound method, as Panel registers them)."""
    from bokeh.util import callback_manager

    mend = "lpviz.dashboard.serving.resources.check_callbacks_once"
    check_callbacks_once()
    check = panels_own(callback_manager._check_callback, mend)
    assert list(inspect.signature(check).parameters) == ["callback", "fargs", "what"], upstream_changed(mend)
    looked = []
    signature = callback_manager.signature
    monkeypatch.setattr(callback_manager, "signature", lambda fn: looked.append(fn) or signature(fn))

    class Listener:
        def changed(self, extra, attr, old, new):
            pass

    for listener in (Listener(), Listener(), Listener()):
        check(functools.partial(listener.changed, "x"), ("attr", "old", "new"))
    assert len(looked) == 3, upstream_changed(mend, f"{len(looked)} signatures for three checks")


# ---- BokehJS (PAINT_JS, FRESH_RECEIVER_JS): the installed bundle ----------------------------------------


@functools.cache
def bokehjs():
    return (BOKEHJS / "bokeh.js").read_text(encoding="utf-8")


def declarations(module):
    """The TypeScript declarations of a BokehJS module (``Bokeh.require(module)``)."""
    return (BOKEHJS / "lib" / f"{module}.d.ts").read_text(encoding="utf-8")


def block(source, header):
    """The text of the block (a module, a class, a method) that ``header`` opens in ``source``: to its
    matching brace."""
    start = source.index(header)
    depth = 0
    for at in range(source.index("{", start + len(header) - 1), len(source)):
        depth += {"{": 1, "}": -1}.get(source[at], 0)
        if depth == 0:
            return source[start : at + 1]
    raise ValueError(header)


def js_module(module, bundle="bokeh.js"):
    """A BokehJS module's code in an unminified bundle (``Bokeh.require(module)``)."""
    source = bokehjs() if bundle == "bokeh.js" else (BOKEHJS / bundle).read_text(encoding="utf-8")
    header = f"/* {module}.js */ function _("
    assert header in source, f"BokehJS's {bundle} has no module {module}"
    return block(source, header)


def js_method(module, class_name, method, bundle="bokeh.js"):
    """A method's code, looked up within its class within its module."""
    body = block(js_module(module, bundle), f"class {class_name} ")
    match = re.search(rf"\n {{8}}(?:async )?{re.escape(method)}\([^)]*\) {{", body)
    assert match, f"BokehJS's {module} {class_name} has no method {method}"
    return block(body, match[0])


def test_bokehjs_still_has_what_paint_js_patches():
    """Structural (BokehJS runs in a browser; tests/test_browser_paint.py runs the patch there): the
    installed BokehJS still has the modules and methods PAINT_JS replaces, doing what the patch works
    around: ``PlotView.schedule_paint`` paints through a ``throttle`` over ``requestAnimationFrame``
    (every plot due in a frame paints in it), ``_invalidate_layout_if_needed`` computes the layout from
    the root when a side panel changes size, ``InlineStyleSheet._update`` writes its text whatever the
    text was, ``ClientSession.handle`` applies each message at once, and ``ClientConnection._on_open``
    is there to hook."""
    mend = "lpviz.dashboard.serving.paint.PAINT_JS"
    plot = declarations("models/plots/plot_canvas")
    for declared in ("schedule_paint(): void;", "protected _invalidate_layout_if_needed(): void;", "repaint(): void;"):
        assert declared in plot, upstream_changed(mend, declared)
    assert "protected _update(css: string): void;" in block(declarations("core/dom"), "class InlineStyleSheet"), (
        upstream_changed(mend, "InlineStyleSheet._update")
    )
    assert "handle(message: Message<unknown>): void;" in declarations("client/session"), upstream_changed(mend)
    assert "protected _on_open(" in declarations("client/connection"), upstream_changed(mend, "_on_open")

    plots = "models/plots/plot_canvas"
    assert "this._await_ready(this.throttled_paint());" in js_method(plots, "PlotView", "schedule_paint"), (
        upstream_changed(mend, "schedule_paint")
    )
    assert "this.throttled_paint = (0, throttle_1.throttle)(" in js_module(plots), upstream_changed(mend, "throttle")
    assert "requestAnimationFrame(later)" in js_module("core/util/throttle"), upstream_changed(mend, "throttle")
    invalidate = js_method(plots, "PlotView", "_invalidate_layout_if_needed")
    for step in (
        "this.model.side_panels",
        "has_size_changed()",
        "this.invalidate_painters(view)",
        "this.compute_layout()",
    ):
        assert step in invalidate, upstream_changed(mend, step)
    for used in (
        "measure_layout",
        "update_bbox",
        "_compute_layout",
        "after_layout",
        "_layout_computed",
        "is_layout_root",
    ):
        assert re.search(rf"\b{used}\b", bokehjs()), upstream_changed(mend, used)
    update = js_method("core/dom", "InlineStyleSheet", "_update")
    assert "this.el.textContent = css;" in update and "!==" not in update, upstream_changed(mend, update)
    handle = js_method("client/session", "ClientSession", "handle")
    assert "this._handle_patch(message);" in handle and "requestAnimationFrame" not in handle, upstream_changed(mend)
    assert js_method("client/connection", "ClientConnection", "_on_open"), upstream_changed(mend, "_on_open")


def test_bokehjs_still_keeps_one_receiver_per_connection():
    """Structural (a socket dropped mid-message is only made in a browser): the installed BokehJS's
    ``ClientConnection`` makes its ``_receiver`` once (in its constructor, declared ``readonly``), its
    ``_on_open`` leaves it as it is, and its ``_on_message`` feeds every frame to it; ``Receiver`` is
    made without arguments (FRESH_RECEIVER_JS makes a new one at each open)."""
    mend = "lpviz.dashboard.served.FRESH_RECEIVER_JS"
    assert "protected readonly _receiver: Receiver;" in declarations("client/connection"), upstream_changed(mend)
    connection = ("client/connection", "ClientConnection")
    made = js_method(*connection, "constructor")
    assert "this._receiver = new receiver_1.Receiver();" in made, upstream_changed(mend, "constructor")
    assert "_receiver" not in js_method(*connection, "_on_open"), upstream_changed(mend, "_on_open makes a receiver")
    assert "this._receiver.consume(event.data);" in js_method(*connection, "_on_message"), upstream_changed(mend)
    assert js_method("protocol/receiver", "Receiver", "constructor").startswith("\n        constructor() {"), (
        upstream_changed(mend, "Receiver takes arguments")
    )


def test_bokehjs_file_input_still_sends_a_file_whole():
    """Structural (the browser side runs in tests/test_browser_upload_limit.py): the installed BokehJS's
    ``FileInputView`` reads each file whole as a data URL in ``load_files`` and sets it as the model's
    value (one message), with no look at its size; UPLOAD_LIMIT_JS wraps ``load_files``."""
    mend = "lpviz.dashboard.serving.uploads.UPLOAD_LIMIT_JS"
    view = ("models/widgets/file_input", "FileInputView")
    load = js_method(*view, "load_files", bundle="bokeh-widgets.js")
    assert "await this._read_file(file)" in load and ".size" not in load, upstream_changed(mend, "load_files")
    assert "this.model.setv({ value, filename, mime_type });" in load, upstream_changed(mend, "one setv")
    assert "readAsDataURL(file)" in js_method(*view, "_read_file", bundle="bokeh-widgets.js"), upstream_changed(mend)
    assert "await this.load_files(files)" in js_method(*view, "render", bundle="bokeh-widgets.js"), upstream_changed(
        mend, "render calls load_files"
    )


@pytest.mark.parametrize(
    "module",
    [
        "lpviz.dashboard.serving.uploads",
        "lpviz.dashboard.serving.writes",
        "lpviz.dashboard.serving.resources",
        "lpviz.dashboard.serving.paint",
        "lpviz.dashboard.served",
        "lpviz.dashboard.in_jupyter",
    ],
)
def test_each_mend_names_the_versions_it_mends(module):
    """Every module with a mend says which Panel and Bokeh versions it mends ("Mends: Panel x / Bokeh y
    (...)"), and which test here guards it."""
    import importlib

    text = Path(importlib.import_module(module).__file__).read_text(encoding="utf-8")
    lines = re.findall(r"Mends: Panel \d+\.\d+\.\d+ / Bokeh \d+\.\d+\.\d+ \(", text)
    assert lines, f"{module} has no Mends: line naming the Panel and Bokeh versions it mends"
    guards = set(re.findall(r"tests/test_mends_upstream\.py::(test_\w+)", text))
    assert len(guards) >= len(lines) and all(name in globals() for name in guards), (module, guards)
