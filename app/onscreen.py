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


def on_screen(view):
    """The :class:`OnScreen` of ``view`` (None for a view that does not hold back hidden work)."""
    return getattr(view, "on_screen", None)


class ViewTabs(pn.Tabs):
    """``pn.Tabs(dynamic=True)`` of views, given as ``(title, view)``: only the active tab has Bokeh
    models, and each view's :class:`OnScreen` says whether its tab is the active one. A view catches
    up before its tab is drawn, so a tab shown after new data or results is drawn once, from the
    newest. (Building each tab's contents only when first shown, a ParamFunction(lazy=True) per tab,
    saved page builds but its tabs never appeared in chromium: not done. Nor non-dynamic tabs of
    empty Columns filled when first shown, which would also have spared a switch back to a tab the
    re-sending of its whole model graph, ~0.65 s of the loop a switch: the server filled the Column,
    but the served Fits tab stayed empty in chromium whenever the NoiseView was the first tab,
    with no error on either side; with a Markdown pane first it worked.)"""

    def __init__(self, *items, **params):
        self.views = [view for _, view in items]  # Panel builds each one's contents (__panel__) with the tabs
        super().__init__(*items, dynamic=True, **params)
        self._show_active()

    def _show_active(self):
        for index, view in enumerate(self.views):
            screen = on_screen(view)
            if screen is not None:
                screen.show(index == self.active)

    def _update_active(self, *events):
        # Panel's watcher on ``active`` (made with the tabs, so it runs before any added later)
        # draws the shown tab: the views catch up first
        self._show_active()
        super()._update_active(*events)
