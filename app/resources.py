"""Panel's style sheets from this server, never from its CDN (the served dashboard works offline).

Panel 1.9 points a component's style sheets at its CDN and moves them to the server's copy when it
renders the component into a page (the document's ``dist_url``). A pane updated before its new model
is in a document (a Markdown or DataFrame pane redrawn by a view, ``model.document`` still None)
renders with no document, so its style sheets stay on the CDN and the browser fetches them from
there: failed requests offline, a third party contacted online. :func:`serve_stylesheets_locally`
gives those the server's copy too. Imported by ``app/app.py`` only: a notebook renders inline
(:mod:`app.notebook`).
"""

from bokeh.models import ImportedStyleSheet
from panel.io.resources import LOCAL_DIST, patch_stylesheet
from panel.io.state import state
from panel.reactive import Reactive


def serve_stylesheets_locally():
    """Patch Panel's property rendering so that style sheets rendered without a page's document
    point at the server's static files (``static/extensions/panel/``), like the page's own."""
    original = Reactive._get_properties
    if getattr(original, "_lpviz_local", False):
        return

    def _get_properties(self, doc):
        properties = original(self, doc)
        if "stylesheets" in properties and (doc is None or "dist_url" not in doc._template_variables):
            local = f"{state.rel_path}/{LOCAL_DIST}" if state.rel_path else LOCAL_DIST
            for sheet in properties["stylesheets"]:
                if isinstance(sheet, ImportedStyleSheet):
                    patch_stylesheet(sheet, local)
        return properties

    _get_properties._lpviz_local = True  # marks the patch as applied
    Reactive._get_properties = _get_properties  # see the module docstring
