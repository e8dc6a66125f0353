"""How a served page draws: its plots one per task, a plot laid out alone when only its own parts
changed size, a busy indicator that never changes the page's layout, and CSS values read once a task.

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
  claim's verdict two lines (app/fits_view.py); the header's busy spinner (Panel's ``LoadingSpinner``)
  changed its ``visible`` and ``css_classes`` at every Pause and Resume, each a layout of its root,
  0.08-0.1 s in the very message that answered the click: :func:`busy_spinner` is an HTML text that
  spins in CSS, and a text change lays nothing out.
- A plot's paint read its visuals' CSS values (``getComputedStyle``) 260 times, 98 of them different,
  a third to a half of the paint's time: each is read once a task.

``PAINT_JS`` patches private BokehJS names (``PlotView.schedule_paint``,
``_invalidate_layout_if_needed``, ``VisualProperties._get_css_value``): a Bokeh upgrade must check
them (tests/test_browser_paint.py does).
"""

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
  // A visual's every property read its element's computed style (260 reads, 98 different, in one
  // trace plot's paint: a third to a half of the paint's time); within one task they cannot change
  // unless the page's styles do, so each is read once a task.
  const {VisualProperties} = Bokeh.require("core/visuals/visual");
  const css_value = VisualProperties.prototype._get_css_value;
  let css_values = null;  // element -> name -> value, for this task
  VisualProperties.prototype._get_css_value = function (name) {
    if (css_values === null) {
      css_values = new Map();
      setTimeout(() => { css_values = null; }, 0);
    }
    let values = css_values.get(this.obj.el);
    if (values === undefined) css_values.set(this.obj.el, values = new Map());
    let value = values.get(name);
    if (value === undefined) values.set(name, value = css_value.call(this, name));
    return value;
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
