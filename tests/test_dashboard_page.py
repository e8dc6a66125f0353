"""``Dashboard`` (lpviz/dashboard/page.py) and the served page's configuration, without a server (issue 55).

A wrong keyword argument is refused before the session is built (a session builds its data and views:
seconds); ``Dashboard().servable()`` in a session serves the template and configures Panel once, however
many times the session's script asks (``configure()`` at the import of ``lpviz.dashboard.app`` and again
in ``servable()``).
"""

import weakref

import panel as pn
import pytest
from bokeh.document import Document
from panel.io.state import set_curdoc

from lpviz.dashboard import page, served


class _SessionContext:
    """Stands for the session a Bokeh server gives a page's document."""


@pytest.fixture
def session_doc():
    """A document with a session, as the current one (what ``panel serve`` runs a page script in)."""
    doc, context = Document(), _SessionContext()
    doc._session_context = weakref.ref(context)
    with set_curdoc(doc):
        yield doc
    doc._session_context = None


def _no_session(**settings):
    raise AssertionError(f"a session was built ({settings}) before the arguments were checked")


@pytest.mark.parametrize("release", [42, "counts.npz", [[1, 2], [3, 4]]])
def test_a_release_of_the_wrong_type_is_refused_before_any_session_is_built(monkeypatch, release):
    monkeypatch.setattr(page, "default_session", _no_session)
    with pytest.raises(TypeError, match=rf"release= of type {type(release).__name__} cannot be shown"):
        page.Dashboard(release=release)


def test_the_other_wrong_arguments_are_refused_before_any_session_is_built(monkeypatch):
    monkeypatch.setattr(page, "default_session", _no_session)
    with pytest.raises(TypeError, match="unknown settings"):
        page.Dashboard(epsilom=1.0)
    with pytest.raises(TypeError, match="teaching must be True or False"):
        page.Dashboard(teaching="yes")


def test_configure_runs_once_per_session(monkeypatch, session_doc):
    reconnect, handler = pn.config.reconnect, pn.config.exception_handler
    calls = []
    monkeypatch.setattr(pn, "extension", lambda *args, **kwargs: calls.append("extension"))
    for name in ("serve_stylesheets_locally", "reuse_design_modifiers", "reuse_bokeh_defaults"):
        monkeypatch.setattr(served, name, lambda name=name: calls.append(name))
    served.configure()  # as the import of lpviz.dashboard.app in the session's script
    served.configure()  # as Dashboard().servable() then
    assert calls == ["extension", "serve_stylesheets_locally", "reuse_design_modifiers", "reuse_bokeh_defaults"]
    other, context = Document(), _SessionContext()
    other._session_context = weakref.ref(context)
    with set_curdoc(other):  # the next session configures itself again
        calls.clear()
        served.configure()
        assert calls[0] == "extension"
    with set_curdoc(Document()):  # the process's own configuration is not a session's
        assert (pn.config.reconnect, pn.config.exception_handler) == (reconnect, handler)


def test_servable_in_a_session_serves_the_template_configured_once(monkeypatch, session_doc):
    """``pn.state.served`` looks at its caller's module (a page script's is ``bokeh_app_...``), so asked
    from page.py it always said no: a ``Dashboard().servable()`` script got the notebook's column and
    no configuration. The session is the current document's."""
    calls = []
    monkeypatch.setattr(served, "configure", lambda: calls.append("configure"))
    monkeypatch.setattr(served, "serve_dashboard", lambda dashboard, doc=None: calls.append(("serve", dashboard)))
    board = object.__new__(page.Dashboard)  # no session needed to see where servable() goes
    assert page.Dashboard.servable(board) is board
    assert calls == ["configure", ("serve", board)]
    assert page._served()
    with set_curdoc(Document()):  # a document outside a server (a notebook's, a benchmark's)
        assert not page._served()
