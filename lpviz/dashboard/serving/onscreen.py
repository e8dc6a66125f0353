"""Work for what is on screen only: a hidden tab's views wait, and catch up once when shown.

The event loop of a served dashboard is shared by every session of the process
(a class of 12 on one server). A view on a hidden tab that redraws for every new
result still costs that loop (Panel keeps a tab's Bokeh models alive after it was
shown once, and updates them while hidden), for nobody. :class:`OnScreen` holds
such work while its view is hidden (the latest of each kind) and runs it once when
the view is shown; :class:`ViewTabs` tells each view whether its tab is the active
one.
"""

import panel as pn
from panel.io.document import unlocked


class OnScreen:
    """Whether a view is shown; work asked of a hidden view waits and runs once when it is shown.

    ``run(kind, work)`` calls ``work()`` at once while shown; while hidden it keeps ``work``
    (a newer one of the same ``kind`` replaces it), and :meth:`show` runs what waits, in the
    order it was first asked for. A view that nothing hides (a notebook, a test) is shown.
    """

    def __init__(self, shown=True):
        self.shown = bool(shown)
        self._waiting = {}

    @property
    def stale(self):
        """Work waits for the view to be shown."""
        return bool(self._waiting)

    def run(self, kind, work):
        if self.shown:
            self._waiting.pop(kind, None)  # done now: what waited of this kind is older
            work()
        else:
            self._waiting[kind] = work

    def show(self, shown=True):
        """The view is shown (or hidden): when shown, what waited runs now."""
        self.shown = bool(shown)
        if self.shown:
            self.catch_up()

    def catch_up(self):
        """Run what waits now, shown or not (an export wants the figures as they would be shown)."""
        while self._waiting:  # one at a time: a work may drop another (see drop)
            kind = next(iter(self._waiting))
            self._waiting.pop(kind)()

    def drop(self, kind):
        """Forget the waiting work of ``kind`` (a newer work makes it pointless)."""
        self._waiting.pop(kind, None)

    def __repr__(self):
        return f"OnScreen({'shown' if self.shown else 'hidden'}, waiting: {list(self._waiting)})"


def in_document(change):
    """Call ``change`` (which changes Bokeh models of the page) where a served session allows it.

    Panel handles a change from the browser (a tab chosen) in a coroutine that does not hold
    the document's lock, and Bokeh refuses a model changed there. As Panel does for its own
    models: at once inside ``unlocked()`` where Panel may dispatch, else on the next tick of the
    event loop, which holds the lock. Outside a server (a notebook, a test): at once.
    """
    doc = pn.state.curdoc
    if doc is None or doc.session_context is None:
        change()
    elif pn.state._unblocked(doc):
        with unlocked():
            change()
    else:
        doc.add_next_tick_callback(change)


def on_screen(view):
    """The :class:`OnScreen` of ``view`` (None for a view that does not hold back hidden work)."""
    return getattr(view, "on_screen", None)


# Panel hides a tab that is not shown with visibility: hidden, in the same grid cell as the shown one, so
# the tallest tab built so far would set the height of every tab, and its figures would still be laid out.
HIDDEN_TAB_CSS = ':host > [aria-hidden="true"] { display: none !important; }'


class ViewTabs(pn.Tabs):
    """Tabs of views, given as ``(title, view)``: each tab is built when first shown and then kept,
    and each view's :class:`OnScreen` says whether its tab is the active one. A view catches up
    before its tab is first drawn, so that tab is drawn once, from the newest.

    The tab active at the start holds its view; every other tab starts as an empty Column that its
    view fills when the tab is first shown, so a page opens without the hidden tabs' contents. A
    switch back to a built tab only changes which one is shown. (Panel's ``dynamic`` tabs put a
    placeholder in every hidden tab and sent the shown tab's whole model graph again at every
    switch: ~0.65 s of the server's event loop, two thirds of it serialising, py-spy.)

    Two things this depends on, each found by a browser test that failed without it:

    - the first tab's view is the tab itself, not inside a Column of its own: wrapped so, BokehJS
      never reported the NoiseView's document idle, Panel never took the session as connected,
      and it held every later update from the server;
    - a built tab's views catch up under the document's lock (:func:`in_document`): Panel handles
      the browser's tab change outside it, and Bokeh refuses model changes there.
    """

    def __init__(self, *items, **params):
        self.views = [view for _, view in items]
        active = params.get("active", 0)
        self._slots = [
            None if index == active else pn.Column(sizing_mode="stretch_width") for index in range(len(items))
        ]
        tabs = [(title, view if slot is None else slot) for (title, view), slot in zip(items, self._slots, strict=True)]
        params["stylesheets"] = [*params.get("stylesheets", []), HIDDEN_TAB_CSS]
        super().__init__(*tabs, **params)
        self._show_active()

    def _build(self, index):
        """Fill the tab's slot with its view (its contents are built now), once."""
        slot = self._slots[index] if 0 <= index < len(self._slots) else None
        if slot is not None and not slot.objects:
            slot.objects = [self.views[index]]

    @property
    def built(self):
        """Which tabs have been built (shown at least once), by index."""
        return [slot is None or bool(slot.objects) for slot in self._slots]

    def _show_active(self):
        for index, view in enumerate(self.views):
            screen = on_screen(view)
            if screen is not None:
                screen.show(index == self.active)

    def _update_active(self, *events):
        # Panel's watcher on ``active`` (made with the tabs, so it runs before any added later)
        if self.built[self.active]:
            # the tab's models are in the page: its views change them under the document's lock
            in_document(self._show_active)
        else:
            # nothing of it is in the page yet: the views catch up, then it is built from the newest
            self._show_active()
            self._build(self.active)
        super()._update_active(*events)
