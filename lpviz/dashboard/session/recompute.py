"""One walk of Bokeh's model graph per batch of changes, and none when nothing asks for it.

Bokeh's ``doc.models.freeze()`` walks the whole model graph (every model of every
tab) each time it ends, and HoloViews freezes around every plot refresh: while
chains ran, these walks took half of the event loop's time, time the chains'
threads waited for the GIL. :func:`recompute_once` replaces the document's
``invalidate``/``recompute`` for the length of a block (a monkeypatch of
``doc.models``, put back on the way out) so that the graph is walked once at
the end, and only if something inside asked for it.
"""

from contextlib import contextmanager


@contextmanager
def recompute_once(doc):
    """Like Bokeh's ``doc.models.freeze()``, but the model graph is walked once at the end,
    and only if a change inside asked for it.

    ``freeze()`` always walks the graph (every model of every tab) when it ends, and
    HoloViews freezes around every plot refresh: while chains ran, these walks were half
    of the event loop's time, time the chains' threads waited for the GIL. A drain that
    streams trace rows and sets numbers changes no reference; a redraw that adds models
    calls ``invalidate`` (``Model.trigger`` does), and then the graph is walked once here.
    """
    models = doc.models
    if getattr(models, "_lpviz_recompute_once", False):  # inside one already: the outer one walks
        yield
        return
    own = vars(models)
    saved = {name: own[name] for name in ("invalidate", "recompute") if name in own}
    recompute = models.recompute
    asked = []
    models.invalidate = models.recompute = lambda: asked.append(True)  # Model.trigger calls invalidate
    models._lpviz_recompute_once = True
    try:
        yield
    finally:
        del models.invalidate, models.recompute, models._lpviz_recompute_once
        own.update(saved)
        if asked:
            recompute()
