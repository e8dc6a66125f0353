"""The app's patches of Panel's and Bokeh's rendering (``lpviz/dashboard/serving/resources.py``) change what they spend,
never what they render: each patched lookup or message is compared with their own."""

import contextlib
import importlib
import json
import re
from types import SimpleNamespace

import numpy as np
import panel as pn
import param
import pytest
from bokeh.core.serialization import Buffer, Serializer
from bokeh.document import Document
from panel.io.server import set_curdoc
from panel.reactive import Reactive
from panel.theme.base import Design

from lpviz.dashboard.serving.resources import (
    SyncedModelsSerializer,
    check_callbacks_once,
    reuse_bokeh_defaults,
    reuse_design_modifiers,
    serialize_patches_lazily,
)

reuse_design_modifiers()

COMPONENTS = [
    lambda: pn.pane.Markdown("text"),
    lambda: pn.pane.HTML("<b>text</b>"),
    lambda: pn.widgets.Button(label="Start"),
    lambda: pn.widgets.Select(options=["a", "b"]),
    lambda: pn.widgets.FloatInput(value=1.0),
    lambda: pn.Column("a", "b"),
    lambda: pn.Card("a", title="card"),
    lambda: pn.Tabs(("a", "a"), ("b", "b")),
    lambda: pn.indicators.LoadingSpinner(value=True),
]
SERVED_CONTEXT = SimpleNamespace(request=SimpleNamespace(arguments={}, headers={}, cookies={}))
DESIGNS = [pn.theme.Bootstrap, pn.theme.Material, pn.theme.Native, Design]


def stylesheet_text(value):
    return [str(getattr(sheet, "url", sheet)) for sheet in value]


@pytest.mark.parametrize("served", [False, True], ids=["notebook", "served"])
@pytest.mark.parametrize("theme", ["default", "dark"])
@pytest.mark.parametrize("design", DESIGNS, ids=lambda design: design.__name__)
def test_the_reused_design_modifiers_equal_panels_own(design, theme, served, monkeypatch):
    doc = Document()
    if served:  # a served page's document has a session context (Panel then resolves other paths)
        monkeypatch.setattr(Document, "session_context", property(lambda self: SERVED_CONTEXT))
    original = Design._get_modifiers.__wrapped__
    with set_curdoc(doc):
        for make in COMPONENTS:
            viewable, theme_object = make(), design(theme=theme).theme
            for isolated in (True, False):
                expected = original(design, viewable, theme_object, isolated)
                first = Design._get_modifiers.__func__(design, viewable, theme_object, isolated)
                assert first == expected, (type(viewable).__name__, isolated)
                first[0].setdefault("stylesheets", []).append("changed by a caller")
                again = design._get_modifiers(viewable, theme=theme_object, isolated=isolated)
                assert again == expected, "a caller's change reached the next lookup"


def test_a_theme_with_a_style_sheet_of_its_own_gets_its_own_modifiers(tmp_path):
    """The reused modifiers are keyed on a theme's style sheets as set (not resolved at every lookup,
    issue 41): a theme given another sheet gets Panel's modifiers for that sheet, not the ones of the
    same theme class met before."""
    sheet = tmp_path / "own.css"
    sheet.write_text(".own { color: red }")
    original = Design._get_modifiers.__wrapped__
    with set_curdoc(Document()):
        viewable = pn.widgets.Button(label="Start")
        plain = pn.theme.Bootstrap(theme="default").theme
        own = pn.theme.Bootstrap(theme="default").theme
        own.css = str(sheet)
        for theme in (plain, own, plain):  # each after the other has been looked up
            expected = original(pn.theme.Bootstrap, viewable, theme, True)
            assert pn.theme.Bootstrap._get_modifiers(viewable, theme=theme, isolated=True) == expected
        own_sheets = stylesheet_text(original(pn.theme.Bootstrap, viewable, own, True)[0].get("stylesheets", []))
        plain_sheets = stylesheet_text(original(pn.theme.Bootstrap, viewable, plain, True)[0].get("stylesheets", []))
        assert own_sheets != plain_sheets  # the two themes' modifiers do differ: the key must tell them apart


def test_a_property_update_without_stylesheets_renders_what_panel_renders():
    doc = Document()
    template = pn.template.BootstrapTemplate()
    column = pn.Column(pn.pane.Markdown("text"), pn.widgets.Button(label="Start"), design=template.design)
    original = Reactive._update_properties.__wrapped__
    with set_curdoc(doc):
        doc.add_root(column.get_root(doc))
        for component, name, new in [(column[0], "margin", 7), (column[1], "label", "Stop"), (column, "width", 300)]:
            event = param.parameterized.Event(
                what="value", name=name, obj=component, cls=type(component), old=None, new=new, type="changed"
            )
            assert component._update_properties(event, doc=doc) == original(component, event, doc=doc)
        sheets = ["a.css"]
        event = param.parameterized.Event(
            what="value", name="stylesheets", obj=column[0], cls=type(column[0]), old=[], new=sheets, type="changed"
        )
        patched = column[0]._update_properties(event, doc=doc)["stylesheets"]
        assert stylesheet_text(patched) == stylesheet_text(original(column[0], event, doc=doc)["stylesheets"])
        assert len(patched) > 1 and stylesheet_text(patched)[-1] == "a.css"  # the design's sheets, then the own


def test_the_patch_is_applied_once():
    patched = Reactive._update_properties
    reuse_design_modifiers()
    assert Reactive._update_properties is patched


def page_document():
    """A document like a page's: layouts, a figure over a data source, widgets."""
    from bokeh.models import Button, Column, ColumnDataSource, Div
    from bokeh.plotting import figure

    doc = Document()
    source = ColumnDataSource(data={"iteration": np.arange(5), "mae": np.linspace(1.0, 2.0, 5)})
    plot = figure(width=300, height=200)
    plot.line("iteration", "mae", source=source)
    doc.add_root(Column(Div(text="<strong>Naive</strong> - idle"), Button(label="Start"), plot))
    doc.models.flush_synced()  # the page has them (as after its first pull)
    return doc, source, plot


def plain(value):
    """An encoded message with its binary buffers as their bytes (a buffer's id is new each time)."""
    if isinstance(value, Buffer):
        return bytes(value.data)
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    return value


def test_the_lazy_patch_serializer_writes_bokehs_own_messages():
    from bokeh.models import Div

    doc, source, plot = page_document()
    events = []
    doc.on_change(events.append)
    column = doc.roots[0]
    column.children[0].text = "<strong>Naive</strong> - running, iteration 5 / 6,000"
    source.stream({"iteration": np.arange(5, 9), "mae": np.linspace(2.0, 3.0, 4)})
    column.children = [*column.children, Div(text="new, with a synced neighbour"), column.children[1]]
    plot.title.text = "after"
    assert len(events) == 4
    synced = doc.models.synced_references
    assert len(synced) > 20
    own, lazy = Serializer(references=synced), SyncedModelsSerializer(references=synced)
    assert plain(lazy.encode(events)) == plain(own.encode(events))
    assert [bytes(buffer.data) for buffer in lazy.buffers] == [bytes(buffer.data) for buffer in own.buffers]
    for model in [*doc.models, column.children[-2]]:  # every synced model, and the new one
        assert lazy.has_ref(model) == own.has_ref(model) and lazy.get_ref(model) == own.get_ref(model)
    assert not lazy.has_ref([1, 2]) and lazy.get_ref({"a": 1}) is None  # values are not models


def test_patch_messages_use_the_lazy_serializer_once_applied():
    from bokeh.protocol import Protocol

    serialize_patches_lazily()
    serialize_patches_lazily()
    assert importlib.import_module("bokeh.protocol.messages.patch_doc").Serializer is SyncedModelsSerializer
    doc, source, _ = page_document()
    events = []
    doc.on_change(events.append)
    source.stream({"iteration": np.arange(5, 7), "mae": np.array([2.5, 2.6])})
    message = Protocol().create("PATCH-DOC", events)
    assert message.content["events"][0]["kind"] == "ColumnsStreamed"
    assert len(message.buffers) == 2  # the two columns as binary buffers, as Bokeh sends them


def test_a_style_sheet_updated_outside_a_page_stays_on_this_server():
    """Issue 37 MEDIUM 5: Panel re-points the style sheets of a model updated outside a page's document at its
    CDN (``Reactive._update_model`` passes the CDN as the place to serve from), even a local sheet's."""
    import panel.reactive
    from bokeh.models import ImportedStyleSheet
    from panel.io.resources import CDN_DIST, LOCAL_DIST

    from lpviz.dashboard.serving.resources import serve_stylesheets_locally

    serve_stylesheets_locally()
    for url in (f"{LOCAL_DIST}css/loading.css", f"{CDN_DIST}css/listpanel.css"):
        sheet = ImportedStyleSheet(url=url)
        panel.reactive.patch_stylesheet(sheet, CDN_DIST)  # what _update_model does without a document
        assert sheet.url.startswith(LOCAL_DIST) and "cdn" not in sheet.url, sheet.url


# ---- Bokeh's defaults, kept (reuse_bokeh_defaults, issue 41) -----------------------------------------


@contextlib.contextmanager
def bokehs_own_defaults():
    """Bokeh's own default lookups in force for the block, the app's patches (reuse_bokeh_defaults)
    after it."""
    from bokeh.core.has_props import HasProps
    from bokeh.core.property.bases import Property
    from bokeh.core.property.descriptors import PropertyDescriptor

    reuse_bokeh_defaults()
    patched = (
        HasProps.__dict__["_overridden_defaults"],
        HasProps.themed_values,
        Property.themed_default,
        PropertyDescriptor.has_unstable_default,
    )
    HasProps._overridden_defaults = classmethod(patched[0].__func__.__wrapped__)
    HasProps.themed_values = patched[1].__wrapped__
    Property.themed_default = patched[2].__wrapped__
    PropertyDescriptor.has_unstable_default = patched[3].__wrapped__
    try:
        yield
    finally:
        (
            HasProps._overridden_defaults,
            HasProps.themed_values,
            Property.themed_default,
            PropertyDescriptor.has_unstable_default,
        ) = patched


def comparable(value):
    """A property value with its models replaced by their type (two makings of a default model are
    two objects with their own ids)."""
    from bokeh.model import Model

    if isinstance(value, Model):
        return ("model", type(value).__name__)
    if isinstance(value, dict):
        return {key: comparable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(comparable(item) for item in value)
    return value


def bokeh_models():
    """Every Bokeh model class that can be made without arguments."""
    from bokeh.model import Model

    made = []
    for cls in sorted(Model.model_class_reverse_map.values(), key=lambda cls: cls.__qualified_model__):
        try:
            cls()
        except Exception:  # noqa: BLE001 - an abstract model, or one with required arguments
            continue
        made.append(cls)
    return made


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("themed", [False, True], ids=["plain", "themed"])
def test_the_reused_bokeh_defaults_equal_bokehs_own(themed):
    """Every property of every Bokeh model made with its defaults reads what Bokeh's own lookups give,
    with and without a theme, however often it is read; and a mutable default (a list, a dict) is each
    model's own: a change to one model's does not reach another's, nor the next model made."""
    from bokeh.core.property.wrappers import PropertyValueContainer
    from bokeh.themes import built_in_themes

    theme = built_in_themes["dark_minimal"] if themed else None
    classes = bokeh_models()
    assert len(classes) > 200  # Bokeh's models, not a handful

    def values(cls):
        model = cls()
        if theme is not None:
            theme.apply_to_model(model)
        # every property, those left unset (required, no default) as Undefined
        return model, model.query_properties_with_values(
            lambda descriptor: hasattr(descriptor, "get_value"),  # not the deprecated aliases
            include_defaults=True,
            include_undefined=True,
        )

    with bokehs_own_defaults():
        expected = {cls: comparable(values(cls)[1]) for cls in classes}
    shared = 0
    for cls in classes:
        first, first_values = values(cls)
        second, second_values = values(cls)
        assert comparable(first_values) == expected[cls], cls.__qualified_model__
        assert comparable(second_values) == expected[cls], cls.__qualified_model__
        for name, value in first_values.items():
            if isinstance(value, PropertyValueContainer) and len(value) == 0:
                shared += 1
                assert second_values[name] is not value, f"{cls.__qualified_model__}.{name} shared"
                # changed in place, under Bokeh's notifications (which would validate the item)
                if isinstance(value, list):
                    list.append(value, object())
                elif isinstance(value, dict):
                    dict.__setitem__(value, "changed", object())
                else:
                    set.add(value, object())
                assert len(getattr(second, name)) == 0 and len(getattr(cls(), name)) == 0
    assert shared > 500  # the empty lists and dicts were checked, not skipped


def normalised(document_json):
    """A document's JSON with its model ids numbered in the order met and Panel's numbered names
    (``Column00460``, ``main-140174506214928``) unnumbered: the same page made twice gives the same."""
    ids = {}

    def walk(value):
        if isinstance(value, dict):
            return {key: walk(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [walk(item) for item in value]
        if isinstance(value, str):  # an id, a reference ("__ref:p1196"), a name ("main-140174506214928")
            value = re.sub(r"\bp\d+\b", lambda match: ids.setdefault(match[0], f"id{len(ids)}"), value)
            return re.sub(r"([A-Za-z]+-?)\d{5,}", r"\1#", value)
        return value

    return walk(document_json)


def dashboard_json():
    import lpviz.dashboard.app as dashboard

    doc = Document()
    with set_curdoc(doc):
        template = dashboard.create_app()
        with doc.models.freeze():
            template.server_doc(doc)
        return normalised(doc.to_json(deferred=False))


def test_the_dashboard_page_is_the_same_with_the_reused_bokeh_defaults():
    """The whole page a session opens on (its document, as sent to the browser) is the same with Bokeh's
    defaults kept as with Bokeh's own lookups."""
    dashboard_json()  # the process's first page (Panel points a style sheet at its versioned URL after it)
    with bokehs_own_defaults():
        expected = dashboard_json()
    assert dashboard_json() == expected
    page = json.dumps(expected["roots"])
    assert page.count('"name": "Image"') == 3 and page.count('"type": "object"') > 200  # charts and all


def test_bokeh_defaults_patch_is_applied_once():
    from bokeh.core.property.bases import Property

    reuse_bokeh_defaults()
    patched = Property.themed_default
    reuse_bokeh_defaults()
    assert Property.themed_default is patched


def test_the_server_warm_up_collects_less_often():
    """``lpviz.dashboard.serve.warm_up`` freezes the imports and raises the collector's first threshold (issue 41)."""
    import gc

    import lpviz.dashboard.serve

    before = gc.get_threshold()
    try:
        lpviz.dashboard.serve.warm_up()
        assert gc.get_threshold() == lpviz.dashboard.serve.GC_THRESHOLDS
        assert lpviz.dashboard.serve.GC_THRESHOLDS[0] > before[0] and gc.get_freeze_count() > 100_000
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)


# ---- callbacks' signatures, checked once per shape (check_callbacks_once, issue 41) ----------------------


class Listener:
    def changed(self, attr, old, new):
        pass

    def bound_too(self, extra, attr, old, new):
        pass

    def too_few(self, attr, old):
        pass


def test_a_callbacks_signature_is_checked_once_per_shape(monkeypatch):
    """Bokeh checks each ``on_change`` callback's signature: checked once per shape of callback (the
    same code, the same arguments bound), and a wrong one refused every time, as Bokeh does."""
    import functools

    from bokeh.models import Div
    from bokeh.util import callback_manager

    check_callbacks_once()
    looked = []
    signature = callback_manager.signature
    monkeypatch.setattr(callback_manager, "signature", lambda fn: looked.append(fn) or signature(fn))
    listeners = [Listener() for _ in range(3)]
    for listener in listeners:  # a new bound method each time: one shape
        Div().on_change("text", listener.changed)
    for listener in listeners:  # a new partial each time, one argument bound: one more shape
        Div().on_change("text", functools.partial(listener.bound_too, "x"))
    assert len(looked) == 2
    for _ in range(2):  # a wrong signature is refused at every attempt
        with pytest.raises(ValueError, match="signature"):
            Div().on_change("text", listeners[0].too_few)
        with pytest.raises(ValueError, match="signature"):
            Div().on_change("text", functools.partial(listeners[0].changed, "x"))  # one bound too many

    def closure(value):
        return lambda attr, old, new: value

    for value in range(3):  # closures of one code: one shape, and not kept alive by the check
        Div().on_change("text", closure(value))
    assert len(looked) == 2 + 4 + 1

    class Called:
        def __call__(self, attr, old, new):
            pass

    Div().on_change("text", Called())
    Div().on_change("text", Called())  # a callable object's shape is not known: checked each time
    assert len(looked) == 2 + 4 + 1 + 2


def test_the_callback_check_patch_is_applied_once():
    from bokeh.util import callback_manager

    check_callbacks_once()
    patched = callback_manager._check_callback
    check_callbacks_once()
    assert callback_manager._check_callback is patched
