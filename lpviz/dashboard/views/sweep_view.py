"""An epsilon sweep: MAE (held-out MAE, NPMI) against epsilon / N, one line per method.

Run builds a grid of fits of the session's data set with
:func:`lpviz.reproduce.sweep.sweep_tasks` (the session's sizes, model,
methods, held-out cells and seeds; only the noise level varies, each level
noised ``n_draws`` times: the curve is the mean over the draws, the band
their range) and runs it
with :class:`~lpviz.reproduce.sweep.SweepRun` on the runner of ``lpviz
reproduce``: on the server's Dask cluster (``python -m lpviz.dashboard.serve
--scheduler``) or on the local worker processes the server shares between
sessions; never on the event loop. Points are drained from the run's queue
every 200 ms on the event loop and drawn as they come; Cancel stops the run
(no fit starts afterwards; the ones running are discarded). Every number is
the fit's :func:`lpviz.metrics.score`; :meth:`SweepView.verdict` checks a
:class:`~lpviz.dashboard.session.presets.Claim` at every epsilon / N of the finished sweep.
"""

import io
import threading
import time

import holoviews as hv
import holoviews.plotting.bokeh  # noqa: F401  (styles below are bokeh options, also outside a server)
import pandas as pd
import panel as pn
import param

from lpviz.dashboard.serving.throttle import Periodic
from lpviz.dashboard.session.datastore import served
from lpviz.dashboard.session.fits import Fits
from lpviz.dashboard.session.presets import Verdict, check

DRAIN_PERIOD_MS = 200
ENDED = ("finished", "cancelled", "error")
STATES = ("idle", "starting", "running", *ENDED, "unavailable")


def _format_ratios(values):
    return ", ".join(f"{value:g}" for value in values)


def parse_ratios(text):
    """The typed epsilon / N values (separated by commas or spaces) as floats, or a ValueError
    saying how to write them."""
    from lpviz.reproduce.sweep import check_ratios

    parts = [part for part in text.replace(";", ",").replace(",", " ").split() if part]
    try:
        values = [float(part) for part in parts]
    except ValueError:
        raise ValueError(f"epsilon / N values {text!r}: write numbers separated by commas, e.g. 0.5, 1, 2") from None
    return check_ratios(values)


class SweepView(pn.viewable.Viewer):
    """MAE, held-out MAE and NPMI against epsilon / N, drawn as a background grid of short fits finishes."""

    fits = param.ClassSelector(class_=Fits)
    ratios = param.String(
        default="",
        label="epsilon / N values",
        doc="the noise levels of the sweep, separated by commas (default: 3 around the session's)",
    )
    # n_iter and n_draws start at lpviz.reproduce.sweep's DEFAULT_ITERATIONS and DEFAULT_DRAWS (set in
    # __init__: importing lpviz.reproduce with the app would slow every server's start)
    n_iter = param.Integer(
        default=10_000,
        bounds=(10, 100_000),
        label="Iterations per fit",
        doc="iterations of each fit (the first quarter burn-in)",
    )
    n_draws = param.Integer(
        default=3,
        bounds=(1, 20),
        label="Noise draws per point",
        doc="noise draws fitted at each epsilon / N: the curve is their mean, the band their range",
    )
    state: param.Selector = param.Selector(default="idle", objects=list(STATES))
    progress = param.String(default="")
    points = param.DataFrame(default=None, allow_None=True, doc="the finished fits, one row each")

    def __init__(self, scheduler=None, **params):
        """``scheduler``: where the grid runs (as :func:`lpviz.reproduce.grid.run_tasks` takes it);
        default the server's (:func:`lpviz.reproduce.sweep.default_scheduler`)."""
        from lpviz.reproduce.sweep import DEFAULT_DRAWS, DEFAULT_ITERATIONS

        super().__init__(**{"n_iter": DEFAULT_ITERATIONS, "n_draws": DEFAULT_DRAWS, **params})
        self.scheduler = scheduler
        self._run = None
        self._grid = []
        self._rows = []
        self._total = 0
        self._where = ""
        self._draining = Periodic(self.drain, DRAIN_PERIOD_MS)
        self._png = None
        self._png_thread = None
        self._png_generation = 0
        self._ratios_typed = False
        self._setting_ratios = False
        self.param.watch(self._typed, ["ratios"])
        self.fits.settings.param.watch(self._follow_noise_level, ["epsilon", "N"])
        self._follow_noise_level()
        self.run_button = pn.widgets.Button(label="Run sweep", color="primary", width=130)
        self.cancel_button = pn.widgets.Button(label="Cancel", color="warning", width=100, disabled=True)
        self.run_button.on_click(self.run)
        self.cancel_button.on_click(self.cancel)
        self.csv_download = pn.widgets.FileDownload(
            callback=self._csv, filename="epsilon_sweep.csv", label="Download CSV", disabled=True, width=160
        )
        self.png_download = pn.widgets.FileDownload(
            callback=self._png_file, filename="epsilon_sweep.png", label="Download PNG", disabled=True, width=160
        )
        self.plot = pn.pane.HoloViews(None, sizing_mode="stretch_width", min_height=330, linked_axes=False)
        # a plain HTML table: it needs no extra Panel extension in the template or the notebook
        self.table = pn.pane.DataFrame(
            pd.DataFrame(), index=False, float_format="{:.4g}".format, sizing_mode="stretch_width"
        )
        self.param.watch(self._update_widgets, ["state", "points"])
        if served():  # a closed page's sweep is cancelled with its session
            pn.state.on_session_destroyed(lambda session_context: self.cancel())

    # ---- the grid ---------------------------------------------------------------------
    def _typed(self, *_):
        if not self._setting_ratios:
            self._ratios_typed = True

    def _follow_noise_level(self, *_):
        """Until values are typed, the grid follows the session's epsilon / N (3 values around it)."""
        from lpviz.reproduce.sweep import default_ratios

        if self._ratios_typed:
            return
        settings = self.fits.settings
        self._setting_ratios = True
        try:
            self.ratios = _format_ratios(default_ratios(settings.epsilon / settings.N))
        finally:
            self._setting_ratios = False

    def unavailable_reason(self):
        """Why the session's data cannot be swept ('' when they can)."""
        data = self.fits.data
        if data.release is None:
            return "no data yet: choose a data set first"
        if data.truth is None:
            return (
                "this release came without its true counts: a sweep noises the true counts at other "
                "levels, which this release does not allow"
            )
        try:
            data.data_spec()
        except ValueError as exc:
            return str(exc)
        return ""

    def tasks(self):
        """The grid of the current settings (:func:`lpviz.reproduce.sweep.sweep_tasks`)."""
        from lpviz import methods as registry
        from lpviz.reproduce.sweep import sweep_tasks

        data, settings = self.fits.data, self.fits.settings
        holdout = None
        if settings.holdout != "none":
            holdout = {
                "rule": settings.holdout,
                "fraction": settings.holdout_fraction,
                "n_actors": settings.holdout_actors,
                "seed": settings.noise_seed,
            }
        methods = list(settings.methods)
        return sweep_tasks(
            data.data_spec(),
            parse_ratios(self.ratios),
            methods,
            n_components=settings.n_components,
            N=float(settings.N),
            noise_seed=settings.noise_seed,
            holdout=holdout,
            model=data.model,
            n_iter=self.n_iter,
            chain_seed=settings.chain_seed,
            method_options={m: settings.options_for(registry.get(m)) for m in methods},
            n_draws=self.n_draws,
        )

    # ---- control (event loop) -----------------------------------------------------------
    def run(self, *_):
        """Start the grid (cancelling a sweep still running); nothing heavy happens here."""
        from lpviz.dashboard.session.memory import session_limit
        from lpviz.reproduce.sweep import SweepRun

        self.cancel()
        reason = self.unavailable_reason()
        if reason:
            self.param.update(state="unavailable", progress=f"Cannot sweep: {reason}.")
            return
        try:
            tasks = self.tasks()
        except (ValueError, TypeError) as exc:
            self.param.update(state="unavailable", progress=f"Cannot sweep: {exc}")
            return
        self._rows, self._total, self._where = [], len(tasks), ""
        self._grid = sorted({t.params["labels"]["epsilon_over_N"] for t in tasks} - {None})
        self._png, self._png_generation = None, self._png_generation + 1
        # each worker holds one chain at a time: a session's share of the server bounds it
        self._run = SweepRun(tasks, scheduler=self.scheduler, memory_limit=session_limit()).start()
        self.param.update(
            points=self._frame(),
            state="starting",
            progress=f"Starting {len(tasks)} fits of {self.n_iter:,} iterations ({self._draws_words()}) ...",
        )
        self._draining.start()

    def cancel(self, *_):
        """Cancel the running sweep: no fit starts afterwards, running ones are discarded."""
        if self._run is not None and self.state in ("starting", "running"):
            self._run.cancel()
            self.progress = f"Cancelling ... ({len(self._rows)} of {self._total} fits done)"

    def drain(self):
        """Take the points the run finished since the last drain (event loop); returns how many."""
        run = self._run
        if run is None:
            self._draining.stop()
            return 0
        new, ended = [], None
        for kind, payload in run.take():
            if kind == "point":
                new.append(payload)
            elif kind == "where":
                self._where = payload
            elif kind in ENDED:
                ended = (kind, payload)
        self._rows += new
        seconds = time.monotonic() - run.started
        updates = {}
        if new:
            updates["points"] = self._frame()
        if ended is not None:
            kind, summary = ended
            updates.update(state=kind, progress=self._ended_text(kind, summary, seconds))
            self._draining.stop()
            self._render_png()
        elif self._where or new:
            updates.update(
                state="running",
                progress=f"Running {self._where or 'on the workers'}: {len(self._rows)} of {self._total} "
                f"fits done, {seconds:.0f} s.",
            )
        if updates:
            self.param.update(**updates)
        return len(new)

    def _ended_text(self, kind, summary, seconds):
        if kind == "error":
            return f"The sweep failed: {summary}"
        done = f"{summary['done']} of {self._total} fits done"
        if kind == "cancelled":
            return f"Sweep cancelled after {seconds:.0f} s: {done}, {summary['cancelled']} cancelled."
        failed = f"; {summary['failed']} failed: {'; '.join(summary['failures'][:3])}" if summary["failed"] else ""
        return f"Sweep finished in {seconds:.0f} s {self._where}: {done}{failed}."

    def _frame(self):
        from lpviz.reproduce.sweep import sweep_frame

        return sweep_frame(self._rows)

    def _draws_words(self):
        return "one noise draw per point" if self.n_draws == 1 else f"{self.n_draws} noise draws per point"

    # ---- what the sweep shows, checked ------------------------------------------------------
    def curves(self):
        """The finished points' curves (:func:`lpviz.reproduce.sweep.sweep_curves`): per method and
        epsilon / N the mean over the noise draws, their range and health."""
        from lpviz.reproduce.sweep import sweep_curves

        return sweep_curves(self.points if self.points is not None else self._frame())

    def verdict(self, claim):
        """The :class:`~dashboard.session.presets.Verdict` of ``claim`` at every epsilon / N of the finished sweep:
        each level's mean scores over its draws checked with :func:`lpviz.dashboard.session.presets.check` (a level
        with a flagged draw is a flagged fit: never counted). None while the sweep has not ended."""
        from lpviz.metrics import SCORE_LABELS
        from lpviz.reproduce.sweep import BASELINE_COLUMNS, RATIO_COLUMN

        if self.state != "finished":
            why = {"cancelled": "the sweep was cancelled", "error": "the sweep failed", "unavailable": self.progress}
            return Verdict(None, why.get(self.state, "checked when the sweep ends"))
        curves = self.curves()
        noised = curves[curves[RATIO_COLUMN].notna()]
        if noised.empty:
            return Verdict(None, "the sweep has no point to check")
        failed, waiting, shown = [], [], []
        for ratio, level in noised.groupby(RATIO_COLUMN, sort=True):
            scores = {}
            for _, row in level.iterrows():
                baselines = {column: row[column] for column in BASELINE_COLUMNS if pd.notna(row[column])}
                scores[row["method"]] = {
                    claim.key: None if pd.isna(row[claim.key]) else float(row[claim.key]),
                    "health": {
                        "healthy": bool(row["healthy"]),
                        "flags": [] if row["healthy"] else ["flagged"],
                        "reasons": [row["flags"]] if row["flags"] else [],
                    },
                    "baselines": baselines,
                }
            verdict = check(claim, scores)
            inside = self._inside_band(claim, level) if verdict.held else ""
            if verdict.held is None:  # a method's fits at this level failed or were not run
                waiting.append(f"at epsilon / N = {ratio:g}: {verdict.text}")
            elif not verdict.held:
                failed.append(f"at epsilon / N = {ratio:g}: {verdict.text}")
            elif inside:
                failed.append(f"at epsilon / N = {ratio:g}: {inside}")
            else:
                shown.append(f"{ratio:g}: {verdict.text.split(': ', 1)[-1]} ({self._bands(claim, level)})")
        label = SCORE_LABELS.get(claim.key, claim.key)
        if failed:
            return Verdict(False, "; ".join(failed))
        if waiting:
            return Verdict(None, "; ".join(waiting))
        draws = int(noised["draws"].min())
        return Verdict(True, f"{label} (mean of {draws} noise draws) at epsilon / N " + "; ".join(shown))

    @staticmethod
    def _bands(claim, level):
        """The range of ``claim``'s score over the noise draws of each method it names at one level."""
        low, high = f"{claim.key}_low", f"{claim.key}_high"
        rows = level.set_index("method")
        return ", ".join(
            f"{rows.loc[method, 'label']} draws {rows.loc[method, low]:.4g}-{rows.loc[method, high]:.4g}"
            for method in (*claim.better, *claim.worse)
            if method in rows.index
        )

    @classmethod
    def _inside_band(cls, claim, level):
        """Why ``claim``'s order at one level is inside the band of its noise draws ('' when it is not):
        a method claimed better must beat every draw of one claimed worse with every draw of its own (its
        largest score below the other's smallest). The means held at eps/N 2 by 0.3%, 1.152 against
        1.155, with draws 1.149-1.153 against 1.153-1.156 (issue 57 MEDIUM 11)."""
        low, high = f"{claim.key}_low", f"{claim.key}_high"
        if low not in level.columns or not claim.better or not claim.worse:
            return ""
        rows = level.set_index("method")
        for better in claim.better:
            for worse in claim.worse:
                if better in rows.index and worse in rows.index and not rows.loc[better, high] < rows.loc[worse, low]:
                    return (
                        f"the order is inside the band of its noise draws ({cls._bands(claim, level)}): "
                        "the draws overlap, so the difference is not held"
                    )
        return ""

    # ---- downloads ------------------------------------------------------------------------
    def csv_text(self):
        """The points as CSV: one row per finished fit."""
        frame = self.points if self.points is not None else self._frame()
        return frame.drop(columns=["task"]).to_csv(index=False)

    def _csv(self):
        return io.StringIO(self.csv_text())

    def _render_png(self):
        """Draw the PNG with matplotlib in a thread (a second of work, never on the event loop);
        the PNG download is offered once it is ready."""
        from lpviz.reproduce.sweep import sweep_png

        frame, generation = self._frame(), self._png_generation
        if frame.empty:
            return
        title = self._title()

        def work():
            png = sweep_png(frame, title=title)
            if generation == self._png_generation:
                self._png = png  # the download callback reads it; _offer_png_when_ready enables the button

        self._png_thread = threading.Thread(target=work, name="lpviz-sweep-png", daemon=True)
        self._png_thread.start()
        self._offer_png_when_ready()

    def _offer_png_when_ready(self):
        """Enable the PNG download once its thread is done (polled on the event loop)."""
        if pn.state.curdoc is None:
            return

        def poll():
            if self._png is not None:
                self.png_download.disabled = False
                callback.stop()

        callback = pn.state.add_periodic_callback(poll, period=DRAIN_PERIOD_MS, count=100)

    def png_bytes(self, timeout=60):
        """The PNG of the last sweep (waits for its thread; tests)."""
        if self._png_thread is not None:
            self._png_thread.join(timeout)
        return self._png

    def _png_file(self):
        return io.BytesIO(self._png or b"")

    # ---- view -----------------------------------------------------------------------------
    def _title(self):
        settings = self.fits.settings
        seeds = (
            f"noise seed {settings.noise_seed}"
            if self.n_draws == 1
            else f"noise seeds {settings.noise_seed}-{settings.noise_seed + self.n_draws - 1}"
        )
        return (
            f"{settings.source_spec.label}, K = {settings.n_components}, {self.n_iter:,} iterations per fit, "
            f"mean of {self.n_draws} noise draws ({seeds}, chain seed {settings.chain_seed})"
        )

    def _update_widgets(self, *_):
        running = self.state in ("starting", "running")
        self.run_button.disabled = running
        self.cancel_button.disabled = not running
        points = self.points if self.points is not None else pd.DataFrame()
        self.csv_download.disabled = points.empty
        if running or points.empty:
            self.png_download.disabled = True
        self.plot.object = self.figure(points, self._grid) if not points.empty else None
        self.table.object = self.table_frame(points)

    @staticmethod
    def table_frame(points):
        """The points with the score labels as headings (the scores that apply)."""
        from lpviz.metrics import SCORE_LABELS
        from lpviz.reproduce.sweep import SWEEP_SCORES

        if points.empty:
            return pd.DataFrame()
        shown = [key for key in SWEEP_SCORES if points[key].notna().any()]
        frame = points[["label", "epsilon_over_N", "draw", "alpha", *shown, "seconds"]].copy()
        frame.insert(len(frame.columns) - 1, "health", points["flags"].where(~points["healthy"], "healthy"))
        frame["alpha"] = frame["alpha"].map(lambda value: f"{value:.4g}")  # a text column: "" for a truth fit
        frame = frame.astype({"epsilon_over_N": object, "draw": object})
        truth_fit = frame["epsilon_over_N"].isna()
        frame.loc[truth_fit, "epsilon_over_N"] = "(true counts)"
        frame.loc[truth_fit, "alpha"] = ""
        frame.loc[truth_fit, "draw"] = ""
        return frame.rename(
            columns={"label": "method", "epsilon_over_N": "epsilon / N", **{key: SCORE_LABELS[key] for key in shown}}
        )

    @staticmethod
    def figure(points, grid=()):
        """One plot per score of :func:`~lpviz.reproduce.sweep.plotted_scores` against epsilon / N
        (log axis, spanning the ``grid`` of the run from the start, so points fill it in): per noised
        method a line and points through the mean over the noise draws, a band over their range, a
        dashed line for a fit of the true counts."""
        from lpviz import methods as registry
        from lpviz.metrics import SCORE_LABELS
        from lpviz.reproduce.sweep import RATIO_COLUMN, plotted_scores, sweep_curves

        ratio = hv.Dimension(RATIO_COLUMN, label="epsilon / N")
        noised = points[points[RATIO_COLUMN].notna()]
        curves = sweep_curves(points)
        values = [*grid, *noised[RATIO_COLUMN]]
        span = [min(values), max(values)] if values else [0.1, 10.0]
        if span[0] == span[1]:
            span = [span[0] / 1.5, span[0] * 1.5]
        xlim = (span[0] / 1.25, span[1] * 1.25)
        plots = []
        for key in plotted_scores(points):
            score = hv.Dimension(key, label=SCORE_LABELS[key])
            layers = []
            for method, rows in curves.groupby("method", sort=False):
                method_class = registry.get(method)
                rows = rows[rows[key].notna()]
                if rows.empty:
                    continue
                style = dict(color=method_class.color)
                marked = rows[rows[RATIO_COLUMN].notna()]
                if len(marked):
                    if (marked["draws"] > 1).any():  # the range of the noise draws around their mean
                        layers.append(
                            hv.Area(marked, ratio, [f"{key}_low", f"{key}_high"], label=method_class.label).opts(
                                alpha=0.2, line_alpha=0, **style
                            )
                        )
                    layers.append(hv.Curve(marked, ratio, score, label=method_class.label).opts(**style))
                    layers.append(
                        hv.Scatter(marked, ratio, [score, "draws", "flags"], label=method_class.label).opts(
                            size=8, tools=["hover"], **style
                        )
                    )
                for value in rows.loc[rows[RATIO_COLUMN].isna(), key]:
                    flat = pd.DataFrame({RATIO_COLUMN: span, key: [value, value]})
                    layers.append(
                        hv.Curve(flat, ratio, score, label=method_class.label).opts(line_dash="dashed", **style)
                    )
            # the legend once (the first plot), where the curves are lowest (they fall as epsilon / N grows)
            plots.append(
                hv.Overlay(layers).opts(
                    title=SCORE_LABELS[key],
                    # the band's dimensions (key_low, key_high) come first and would name the axis
                    ylabel=SCORE_LABELS[key],
                    logx=True,
                    responsive=True,
                    xlim=xlim,
                    padding=(0, 0.08),
                    min_height=300,
                    legend_position="top_right",
                    show_legend=not plots,
                )
            )
        return hv.Layout(plots).cols(3).opts(shared_axes=False) if plots else None

    def __panel__(self):
        settings = self.fits.settings

        from lpviz.reproduce.sweep import DEFAULT_DRAWS, DEFAULT_ITERATIONS

        @pn.depends(
            settings.param.source, settings.param.heterogeneous, settings.param.methods, self.fits.data.param.release
        )
        def notes(*_):
            lines = [
                (
                    "Fits of the session's data set at each epsilon / N (the session's methods, sizes, "
                    "held-out cells and seeds; only the noise level changes). Each epsilon / N is noised "
                    f"*Noise draws per point* times (default {DEFAULT_DRAWS}: noise seeds the session's, +1, "
                    "+2, ...; its first draw at the session's own epsilon / N is its release): **each point "
                    "is the mean over these draws, the band their range**, and the table lists every fit. "
                    "A fit of the true counts does not see the noise: one fit, drawn as a dashed line. A "
                    "fit flagged unhealthy (not mixed, collapsed) says so in the table and is never "
                    f"counted. The default {DEFAULT_ITERATIONS:,} iterations per fit are what the chains "
                    "need to mix on the opening preset's data; fewer leave curves that can cross."
                )
            ]
            if settings.heterogeneous:
                lines.append("The session's noise is per row; the sweep noises every row alike, at each epsilon / N.")
            reason = self.unavailable_reason()
            if reason:
                lines.append(f"**Cannot sweep these data**: {reason}.")
            return pn.pane.Markdown("\n\n".join(lines), sizing_mode="stretch_width")

        # wraps on a phone (a Row of these was 1,070 px: a 412 px page cut the tab, issue 37)
        controls = pn.FlexBox(
            pn.widgets.TextInput.from_param(self.param.ratios, width=260),
            pn.widgets.IntInput.from_param(self.param.n_iter, width=140),
            pn.widgets.IntInput.from_param(self.param.n_draws, width=140),
            pn.Column(pn.Spacer(height=18), pn.Row(self.run_button, self.cancel_button)),
            pn.Column(pn.Spacer(height=18), pn.Row(self.csv_download, self.png_download)),
            sizing_mode="stretch_width",
        )
        progress = pn.pane.Markdown(self.param.progress, sizing_mode="stretch_width")
        return pn.Column(notes, controls, progress, self.plot, self.table, sizing_mode="stretch_width")
