"""How a served page draws: its plots one per task, a plot laid out alone when only its own parts
changed size, a busy indicator that never changes the page's layout, no style sheet written again
with the text it already has, and each message of the server drawn before the next is applied.

Measured in chromium at 4x CPU throttling (a cheap student laptop) during a Figure 1 run, BokehJS 3.9
(issue 37; the page's tasks profiled, its layouts and paints timed): a click on Pause or Resume that
came during one of the page's long tasks waited for its end (clicks of 0.5-1.1 s where most took
0.1-0.2 s). The long tasks were:

- Every plot that asked for a paint within one animation frame painted in that frame, together: the
  two trace plots and three rate heatmaps after a Pause were one task of 0.6-0.8 s (0.1-0.13 s each).
  Here each plot paints in a task of its own, one after another, so the page reads its messages and
  its clicks between them.
- A plot whose axis's tick labels got wider or narrower ("-98,765" to "-123,456"), or whose colour
  bar's did, laid out the whole page (BokehJS climbs to the layout root: every view measured, every
  figure of the tab painted again): 0.5-0.8 s. The plot's own box does not depend on those parts (its
  width is the page's, its height fixed), so only the plot is laid out again: what BokehJS does for a
  plot that is a layout root of its own. A plot sized by its frame (``frame_width``/``frame_height``)
  keeps BokehJS's way.
- A pane that changed height did the same (0.4-0.6 s): the scoreboard keeps its height and the
  claim's verdict two lines (lpviz/dashboard/views/fits_view.py); the header's busy spinner (Panel's ``LoadingSpinner``)
  changed its ``visible`` and ``css_classes`` at every Pause and Resume, each a layout of its root,
  0.08-0.1 s in the very message that answered the click: :func:`busy_spinner` is an HTML text that
  spins in CSS, and a text change lays nothing out.
- Every plot's paint took 0.1-0.15 s (a trace plot, a heatmap), two thirds of it in reading CSS
  values (``getComputedStyle``: a visual's colour, an axis's font size). Each of the plot's renderers
  (axis, grid, title, legend, colour bar, glyphs) wrote its position into a ``<style>`` of its own at
  every paint, the same text as before; a written ``<style>`` makes the page's styles stale, so the
  renderer's next read recalculated them, 15-20 ms a renderer. The same text is no longer written:
  0.04 s a trace plot, 0.02 s a heatmap, the paints of a whole run a quarter of what they were.

A click's answer could also wait for a message that came right behind it. The slowest Pauses (0.2-0.3
s at 4x) had their "pausing" applied in good time, but the trace rows held back while the chains ran
(30-150 KB) came 15-35 ms later, and the page applied them (a patch and a long task of 50-100 ms)
before it drew the frame with "pausing". A message that comes before the page has drawn the last one
now waits for that frame (in order; a lone message is applied at once; a hidden page, which draws no
frames, applies them at once, and a page not drawn for a second applies all that waits).

``PAINT_JS`` patches private BokehJS names (``PlotView.schedule_paint``,
``_invalidate_layout_if_needed``, the ``core/dom`` ``InlineStyleSheet._update``, ``ClientSession.handle``,
``ClientConnection._on_open``): a Bokeh upgrade must check them (tests/test_browser_paint.py does).
"""

import panel as pn

# Mends: Panel 1.9.4 / Bokeh 3.9.2 (BokehJS paints every plot due in one animation frame together
# (``schedule_paint``: a ``throttle`` over ``requestAnimationFrame``), lays out the page's root when a
# side panel changes size (``_invalidate_layout_if_needed``), rewrites a <style> with the text it has
# (``InlineStyleSheet._update``) and applies each message at once (``ClientSession.handle``); no upstream
# issue known). It may go once BokehJS changes these (then each goes that no longer needs it):
# tests/test_mends_upstream.py::test_bokehjs_still_has_what_paint_js_patches fails.

PAINT_JS = """
const {PlotView} = Bokeh.require("models/plots/plot_canvas");
if (!PlotView.prototype.__lpviz_paced) {
  PlotView.prototype.__lpviz_paced = true;
  // the plots waiting for a paint, in the order they asked, each with its callers' promises
  const waiting = new Map();
  let scheduled = false;
  const paint_next = () => {
    scheduled = false;
    const next = waiting.entries().next();
    if (next.done) return;
    const [view, resolvers] = next.value;
    waiting.delete(view);
    try {
      if (!view.is_destroyed && !view.is_paused) view.repaint();
    } finally {
      for (const resolve of resolvers) resolve();
      if (waiting.size > 0) schedule();
    }
  };
  // after the next frame (the page's own changes drawn first), in a task of its own
  const schedule = () => {
    if (!scheduled) {
      scheduled = true;
      requestAnimationFrame(() => setTimeout(paint_next, 0));
    }
  };
  PlotView.prototype.schedule_paint = function () {
    if (this.is_paused) return;
    this._await_ready(new Promise((resolve) => {
      const resolvers = waiting.get(this);
      if (resolvers === undefined) waiting.set(this, [resolve]);
      else resolvers.push(resolve);
      schedule();
    }));
  };
  // Every renderer's paint writes its position (a <style> of its own) again, the same text as a
  // rule; a written <style> makes the page's styles stale, and the renderer's next CSS read
  // (getComputedStyle) recalculates them: once per renderer, 15-20 ms each at 4x. The same text is
  // not written again.
  const {InlineStyleSheet} = Bokeh.require("core/dom");
  const update_style = InlineStyleSheet.prototype._update;
  InlineStyleSheet.prototype._update = function (css) {
    if (this.el.textContent !== css) update_style.call(this, css);
  };
  // A server message that comes before the page has drawn the one it applied last waits for that
  // frame: a progress line's "pausing" is drawn before the trace rows that follow it are applied (a
  // patch and its long task of 50-100 ms at 4x, which the frame waited for). Messages keep their
  // order; a lone message is applied at once. Hidden, the page draws no frames: nothing waits.
  const {ClientSession} = Bokeh.require("client/session");
  const handle = ClientSession.prototype.handle;
  const apply_next = (session) => {
    const message = session.__lpviz_waiting.shift();
    session.__lpviz_drawing = true;
    let done = false;
    const next = (all) => {
      if (done) return;
      done = true;
      session.__lpviz_drawing = false;
      // no frame for a second (a page the browser does not draw): everything waiting, at once, so
      // nothing waits longer than that however fast messages come
      while (all && session.__lpviz_waiting.length > 0) {
        try {
          handle.call(session, session.__lpviz_waiting.shift());
        } catch (error) {
          console.error(error);
        }
      }
      if (session.__lpviz_waiting.length > 0) apply_next(session);
    };
    try {
      handle.call(session, message);
    } finally {
      if (document.visibilityState === "hidden") next(true);
      else {
        requestAnimationFrame(() => setTimeout(() => next(false), 0));
        setTimeout(() => next(true), 1000);
      }
    }
  };
  ClientSession.prototype.handle = function (message) {
    if (this.__lpviz_waiting === undefined) this.__lpviz_waiting = [];
    this.__lpviz_waiting.push(message);
    if (!this.__lpviz_drawing) apply_next(this);
  };
  // a new socket's session is pulled whole from the server: what the old one left waiting is in it
  const {ClientConnection} = Bokeh.require("client/connection");
  const on_open = ClientConnection.prototype._on_open;
  ClientConnection.prototype._on_open = function (...args) {
    if (this.session != null) this.session.__lpviz_waiting = [];
    return on_open.apply(this, args);
  };
  const invalidate_layout_if_needed = PlotView.prototype._invalidate_layout_if_needed;
  PlotView.prototype._invalidate_layout_if_needed = function () {
    const {frame_width, frame_height} = this.model;
    if (this._needs_layout || this.is_layout_root || frame_width != null || frame_height != null)
      return invalidate_layout_if_needed.call(this);
    let changed = false;
    for (const panel of this.model.side_panels) {
      const view = this.renderer_views.get(panel);
      if (view != null && view.layout != null && view.layout.has_size_changed()) {
        this.invalidate_painters(view);
        changed = true;
      }
    }
    if (changed) {
      this.measure_layout();
      this.update_bbox();
      this._compute_layout();
      this.after_layout();
      this._layout_computed = true;
    }
  };
}
"""

# The header's busy indicator: a ring turning while something runs (classes "loader spin", as Panel's
# spinners, so a page's script can ask whether anything spins), an empty box of the same size otherwise.
SPINNER_CSS = """
.loader { width: 22px; height: 22px; box-sizing: border-box; border-radius: 50%; }
.loader.spin {
  border: 3px solid rgba(255, 255, 255, 0.35); border-top-color: #fff;
  animation: lpviz-spin 0.9s linear infinite;
}
@keyframes lpviz-spin { to { transform: rotate(360deg); } }
"""


def busy_spinner(busy):
    """The spinner's HTML: turning while ``busy``."""
    return "<div class='loader spin' title='running'></div>" if busy else "<div class='loader'></div>"


class BusySpinner(pn.pane.HTML):
    """The header's busy indicator (an HTML pane of :func:`busy_spinner`): an update sends its text alone.

    Panel's update of a pane sets every property of its model; for a pane that is a template's root its
    first update replaced the template's style sheets and tags, and BokehJS laid that root out again.
    It came when the page's data arrived from their thread, before anyone clicked; with the data there
    as the page opens, it came at the first Start (tests/test_browser_paint.py)."""

    def _update(self, ref, model):
        model.update(text=self._get_properties(model.document)["text"])
