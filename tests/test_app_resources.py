"""The app's patches of Panel's rendering (``app/resources.py``) change what Panel spends, never
what it renders: each patched lookup is compared with Panel's own on the components the app uses."""

from types import SimpleNamespace

import panel as pn
import param
import pytest
from bokeh.document import Document
from panel.io.server import set_curdoc
from panel.reactive import Reactive
from panel.theme.base import Design

from app.resources import reuse_design_modifiers

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
