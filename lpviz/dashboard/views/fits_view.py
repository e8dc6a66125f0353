"""Run the chains and watch them: controls, progress, scores, live traces and rates.

The traces are Bokeh lines over each runner's bounded ``hv.streams.Buffer``
(:mod:`lpviz.dashboard.views.live_traces`): new rows are streamed to the browser
(``ColumnDataSource.stream``) rather than the plot being redrawn. The score
table is each runner's :func:`lpviz.metrics.score` of its posterior (the
numbers the Topics and Blocks tabs and the CLI show), drawn as a scoreboard with
the best value of each score column marked. The rate heatmaps are Bokeh figures
updated in place (:mod:`lpviz.dashboard.views.live_rates`) from the runners' snapshots, as often as the
view throttle allows while running and at once when a run pauses, stops or ends.
"""

import html
from functools import partial

import holoviews as hv
import numpy as np
import pandas as pd
import panel as pn
import param

from lpviz.dashboard.serving.throttle import VIEW_SECONDS
from lpviz.dashboard.session.fits import SCORE_KEYS, Fits, follow_results, score_frame
from lpviz.dashboard.session.traces import CHAIN_TRACES
from lpviz.dashboard.views.compare_view import CompareView, compare_html
from lpviz.dashboard.views.live_rates import LiveRates
from lpviz.dashboard.views.live_traces import LiveTraces, chain_of, line_style
from lpviz.dashboard.views.plots import (
    RATE_CMAP,
    SCROLL_SIDEWAYS_CSS,
    colour_limit,
    count_image,
    display_slice,
    table_cell,
    truth_reference,
)
from lpviz.diagnostics import DISAGREE_SDS
from lpviz.metrics import ESS_MIN, RHAT_MIXED

# The scoreboard: every score that applies, then how far and how fast each fit ran.
SCOREBOARD_KEYS = (
    *(key for key in SCORE_KEYS if key not in ("best_log_joint", "samples")),
    "rhat",
    "ess",
    "iterations",
    "samples",
    "seconds",
    "iterations_per_second",
)
LOWER_IS_BETTER = ("mae", "heldout_mae", "rate_mae", "heldout_rate_mae", "topic_distance")
HIGHER_IS_BETTER = ("npmi", "umass", "ess")
CLOSEST_TO_ONE = ("rhat",)
# Under a column's header: what the number is, where the label alone would mislead.
HEADER_NOTES = {
    "rhat": "split, 1 chain",
    "ess": "bulk",
    # the chain's own compute time (Posterior.seconds): not the waits for its turn and for the others, so
    # the it/s here exceeds the progress line's wall-clock rate (a 5-minute Figure 1 run read "56.91 s")
    "seconds": "computing only",
    "iterations_per_second": "per second computing",
}
# The one threshold of each check (lpviz.metrics: what score() flags), stated in every note (issue 57).
MIXED_CHECKS = (
    f"A fit is flagged not mixed when its R-hat is above {RHAT_MIXED:g} or its ESS below {ESS_MIN:g}: "
    "either alone (an R-hat near 1 with too few effective draws has not mixed either)."
)
CONVERGENCE_NOTE = (
    "R-hat: each method runs one chain, so this is the split R-hat (ArviZ: the chain's halves "
    "compared as two chains) of its log marginal likelihood (the log joint for chains without one) "
    "after burn-in (at most 2,000 evenly spaced iterations); near 1 when the halves agree, higher while "
    "the chain still drifts. ESS: the effective number of independent draws among those. " + MIXED_CHECKS
)
# With several chains per method (Settings.chains): R-hat compares the chains with each other.
CHAINS_CONVERGENCE_NOTE = (
    "R-hat: each method runs {chains} chains from different seeds; this is the rank-normalised split "
    "R-hat across them (ArviZ) of their log marginal likelihood (the log joint for chains without one) "
    "after burn-in; near 1 when the chains agree, higher while they drift or sit in different modes "
    "(a chain in another mode is named under the table: 'chains disagree'). ESS: the effective number of "
    "independent draws of all the chains together. " + MIXED_CHECKS
)
# The exported rate heatmaps (the truth, each method) two to a row: four to a row left a title ~230 px
# on a 1500 px page (the live ones wrap: two to a row, one on a phone, lpviz.dashboard.views.live_rates)
RATE_COLUMNS = 2
RATE_MIN_WIDTH = 300  # at phone width too: a VI method's name beside the axis names, in the title's font
CHAINS_NOTE = (
    " Log joint: one line per chain (chain 0, the single chain of the seed, in the legend; the faint "
    "ones: chains 1 and on; the MAE is chain 0's, the "
    "posterior mean pools every chain); a chain that stays apart from the others sits in another mode."
)
# One colour per chain in the plots of one method's chains: tab10's, less the methods' own red, blue and
# green (lpviz.methods), so a chain is never taken for a method
CHAIN_COLORS = ("#9467bd", "#ff7f0e", "#17becf", "#8c564b")
CHAIN_PLOTS_NOTE = (
    "**Each method's chains alone, after burn-in (iteration {burn_in:,}):** the trace each fit's health is "
    "judged on, on its own axis. Chains that keep to different levels sit in different modes: the scoreboard "
    "flags a chain more than {sds:g} within-chain standard deviations below its method's best as 'chains "
    "disagree'."
)
BEST_MARK = "\u2605"  # a star beside the best value of a column


HEALTH_COLUMN = "health"
BASELINE_SUFFIX = ": best constant"  # the column beside each MAE: the best constant rate's MAE
# An ensemble's stacked fit beside its pooled one (lpviz.stacking: its chains weighted by how well each
# predicts the cells no fit used), after the MAE it stands beside and that MAE's best constant: in the
# final score only (diagnostics=True), None in a running chain's snapshot, so never a stale value. Shown
# in the stacking pane (stacking_box), not the scoreboard: a column more there widened and heightened
# it at a run's end, and the page was laid out again.
STACKED_COLUMNS = {"stacked_mae": "mae", "stacked_heldout_mae": "heldout_mae"}
STACKED_LABELS = {"stacked_mae": "stacked MAE", "stacked_heldout_mae": "stacked held-out MAE"}
STACKED_NOTE = "chains weighted by stacking"


def health_words(scores):
    """A fit's health from :func:`lpviz.metrics.score` in a few words ("healthy", "not mixed: run
    longer", "collapsed", ...); "" before it has a sample."""
    health = scores.get("health")
    if not health:
        return ""
    if health["healthy"]:
        return "healthy"
    words = {"not mixed": "not mixed: run longer", "collapsed": "collapsed", "non-finite": "non-finite rates"}
    return "; ".join(words.get(flag, flag) for flag in health["flags"])


def _scored(runners):
    return [(runner.label, runner.result["score"]) for runner in runners if (runner.result or {}).get("score")]


def baseline_frame(runners, keys):
    """:func:`~lpviz.dashboard.session.fits.score_frame` of the runners' ``keys``, with the best constant rate's MAE
    (``score()``'s baselines, nothing recomputed) in a column beside each MAE: no MAE without its
    reference, on any tab."""
    from lpviz.metrics import MAE_KEYS, SCORE_LABELS

    frame = score_frame(runners, keys)
    if frame.empty:
        return frame
    scored = _scored(runners)
    for key in MAE_KEYS:
        column = SCORE_LABELS[key]
        if column in frame:
            values = [(scores.get("baselines") or {}).get(f"best_constant_{key}") for _, scores in scored]
            frame.insert(frame.columns.get_loc(column) + 1, column + BASELINE_SUFFIX, values)
    return frame


def board_frame(runners):
    """The scoreboard: :func:`~lpviz.dashboard.session.fits.score_frame` of the runners, the best constant's MAE beside
    each MAE column and each fit's health in words (all from its :func:`lpviz.metrics.score`).
    ``frame.attrs["rankable"]``: ``{column: [method, ...]}``, the fits that may be starred in it
    (healthy; for an MAE, also beating its baselines: :func:`lpviz.metrics.rankable`);
    ``frame.attrs["reasons"]``: ``{method: [reason, ...]}`` of the flagged fits."""
    from lpviz.metrics import MAE_KEYS, SCORE_LABELS, rankable

    frame = baseline_frame(runners, SCOREBOARD_KEYS)
    if frame.empty:
        return frame
    scored = _scored(runners)
    frame.insert(1, HEALTH_COLUMN, [health_words(scores) for _, scores in scored])
    healthy = [label for label, scores in scored if (scores.get("health") or {}).get("healthy")]
    allowed = {column: list(healthy) for column in frame.columns}
    for key in MAE_KEYS:
        if SCORE_LABELS[key] in frame:
            allowed[SCORE_LABELS[key]] = [label for label, scores in scored if rankable(scores, key)[0]]
    frame.attrs["rankable"] = allowed
    # the chains each MCMC fit ran (score's n_chains): the scoreboard's R-hat is across them
    frame.attrs["chains"] = max([scores.get("n_chains") or 1 for _, scores in scored], default=1)
    frame.attrs["reasons"] = {
        label: (scores.get("health") or {}).get("reasons") or []
        for label, scores in scored
        if not (scores.get("health") or {}).get("healthy", True)
    }
    frame.attrs["stacking"] = stacking_frame(scored)
    frame.attrs["constants"] = {
        SCORE_LABELS[key]: (scores.get("baselines") or {}).get(
            "best_constant_rate" if "rate" in key else "best_constant"
        )
        for key in MAE_KEYS
        for _, scores in scored[:1]
    }
    # said in the stacking pane at the fits' end (a line coming and going under the scoreboard as the
    # live MAEs cross their constants would lay the page out again)
    frame.attrs["stacking"].attrs["above_constant"] = above_constant_note(frame)
    return frame


def above_constant_note(frame):
    """A sentence when every fit's MAE in a column of a :func:`board_frame` is above the best
    constant's beside it (true on sparse counts, where the MAE-optimal constant is the median count,
    often 0, which no rate model predicts: issue 57 LOW 27), saying so and what to compare instead;
    "" otherwise."""
    columns = []
    for column in frame.columns:
        baseline = column + BASELINE_SUFFIX
        if baseline not in frame or column.endswith(BASELINE_SUFFIX):
            continue
        pairs = frame[[column, baseline]].dropna()
        if len(pairs) and (pairs[column].astype(float) > pairs[baseline].astype(float)).all():
            columns.append(column)
    if not columns:
        return ""
    constants = frame.attrs.get("constants", {})
    named = "; ".join(
        f"{column} (the best constant {constants[column]:.3g})" if constants.get(column) is not None else column
        for column in columns
    )
    return (
        f"Every fit's {named} is above the best constant's. The constant that minimises the absolute "
        "error is the median, often 0 on sparse counts, which no rate model predicts: under MAE it beats "
        "every fit there, and none is starred. Compare the methods with each other"
        + (", and on the held-out noised cells (below)." if "held-out MAE" in frame else ".")
    )


def stacked_of(scores):
    """Whether ``scores`` (one fit's :func:`lpviz.metrics.score`) are an ensemble's of >= 2 chains
    scored with its stacking (the final score): what the stacked MAEs and the modes line read."""
    return (scores.get("n_chains") or 1) >= 2 and scores.get("stacking_weights") is not None


def modes_text(scores):
    """The ensemble's modes and stacking weights in words (``score``'s ``modes["text"]``), or ""
    (one chain, or a live snapshot: its diagnostics are the trace's, no stacking)."""
    if not stacked_of(scores):
        return ""
    return str((scores.get("modes") or {}).get("text") or "")


def stacking_frame(scored):
    """The stacking pane's table of the ensembles stacked (``scored``: ``[(method, score), ...]``): per
    fit its health in words, each MAE of :data:`STACKED_COLUMNS`, that MAE's best constant and the
    stacked MAE, all from its :func:`lpviz.metrics.score`; empty without a stacked fit.
    ``attrs["modes"]``: ``{method: modes text}``."""
    from lpviz.metrics import SCORE_LABELS

    stacked = [(label, scores) for label, scores in scored if stacked_of(scores)]
    columns = {"method": [label for label, _ in stacked], HEALTH_COLUMN: [health_words(s) for _, s in stacked]}
    for key, beside in STACKED_COLUMNS.items():
        values = [scores.get(key) for _, scores in stacked]
        if all(value is None for value in values):
            continue
        column = SCORE_LABELS[beside]
        columns[column] = [scores.get(beside) for _, scores in stacked]
        columns[column + BASELINE_SUFFIX] = [
            (scores.get("baselines") or {}).get(f"best_constant_{beside}") for _, scores in stacked
        ]
        columns[STACKED_LABELS[key]] = values
    frame = pd.DataFrame(columns) if stacked else pd.DataFrame()
    frame.attrs["modes"] = {label: text for label, scores in stacked if (text := modes_text(scores))}
    return frame


def best_cells(frame):
    """``{column: [method, ...]}``: the methods with the best value of each score column of a
    :func:`board_frame` (lowest error, highest coherence; ties all marked), among the fits that may
    be ranked in that column (``frame.attrs["rankable"]``; a frame without it: every fit)."""
    from lpviz.metrics import SCORE_LABELS

    allowed = frame.attrs.get("rankable")
    best = {}
    for keys, pick in ((LOWER_IS_BETTER, "min"), (HIGHER_IS_BETTER, "max"), (CLOSEST_TO_ONE, "one")):
        for column in (SCORE_LABELS[key] for key in keys):
            if column not in frame:
                continue
            rows = frame if allowed is None else frame[frame["method"].isin(allowed.get(column, []))]
            if rows[column].notna().any():
                values = rows[column].astype(float)
                if pick == "one":
                    values = (values - 1).abs()
                optimum = values.max() if pick == "max" else values.min()
                best[column] = list(rows.loc[values == optimum, "method"])
    return best


# Room kept for the scoreboard, with or without scores, and for the claim's verdict: a pane that grows
# or shrinks (the first scores; a fit flagged "has not mixed" at one pause and not at the next; the
# verdict's second line at the end) resizes the page, and BokehJS then lays the whole page out again
# (0.4-0.6 s of a 4x throttled page, a click meanwhile waiting for it). Three fits' table with its flags
# and notes take up to about 28em on a desktop (a topic model's, whose columns have more notes).
SCOREBOARD_MIN_HEIGHT = "30em"
VERDICT_MIN_HEIGHT = "2lh"
NO_SCORES_YET = "<p><i>The scores of each fit appear here once it has some.</i></p>"


def scoreboard_box(frame):
    """:func:`scoreboard_html` in a box that keeps its height while the scores come and change."""
    html = scoreboard_html(frame) or NO_SCORES_YET
    return f"<div class='scoreboard-box' style='min-height: {SCOREBOARD_MIN_HEIGHT}'>{html}</div>"


def scoreboard_html(frame):
    """The score table as HTML, the best value of each column in bold with a star (never a flagged
    fit's), each flagged fit's reasons in words below."""
    if frame.empty:
        return ""
    from lpviz.metrics import SCORE_LABELS

    best = best_cells(frame)
    chains = frame.attrs.get("chains", 1)
    notes = {SCORE_LABELS[key]: note for key, note in HEADER_NOTES.items()}
    if chains > 1:
        notes[SCORE_LABELS["rhat"]] = f"across {chains} chains"
    convergence = CHAINS_CONVERGENCE_NOTE.format(chains=chains) if chains > 1 else CONVERGENCE_NOTE
    head = "".join(
        f"<th>{column}<br><small>({notes[column]})</small></th>" if column in notes else f"<th>{column}</th>"
        for column in frame.columns
    )
    rows = []
    for _, row in frame.iterrows():
        cells = []
        for column in frame.columns:
            text = table_cell(row[column])
            if row["method"] in best.get(column, ()):
                text = f"<b>{text} {BEST_MARK}</b>"
            elif column == HEALTH_COLUMN and text not in ("", "healthy"):
                text = f"<b style='color:#b2182b'>{text}</b>"
            cells.append(f"<td>{text}</td>")
        rows.append(f"<tr>{''.join(cells)}</tr>")
    flagged = "".join(
        f"<li><b>{method}</b>: {'; '.join(reasons)}. Never starred or ranked.</li>"
        for method, reasons in frame.attrs.get("reasons", {}).items()
    )
    return (
        f"<table class='scoreboard'><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
        + (f"<ul class='flagged-fits'>{flagged}</ul>" if flagged else "")
        + f"<p>{BEST_MARK} the best of each column among the healthy fits (lowest error, highest coherence, "
        f"R-hat nearest 1, largest ESS); an MAE is starred only when it beats the trivial baselines (the best "
        f"constant rate, shown beside it, and the row x column means fit).</p>"
        + (f"<p><small>{convergence}</small></p>" if SCORE_LABELS["rhat"] in frame else "")
    )


# The stacking pane's height, the same from the page's first paint to a run's end: the modes, the stacked
# MAEs and the comparison come at the end in place of the line saying so, inside this box (which scrolls
# when they are taller), so the page is never laid out again for them (tests/test_browser_paint.py; with
# them under the scoreboard the page grew 105 px at a run's end and was laid out again).
STACKING_HEIGHT = "24em"
STACKING_TITLE = "<h4 class='stacking-title'>Stacking and the comparison of methods</h4>"
STACKING_WAITING = (
    "<p class='stacking-waiting'><i>Stacking and the comparison of methods appear once every fit has run to "
    "its end: each ensemble's modes and stacking weights, its stacked MAE beside the pooled one and the best "
    "constant's, and the methods ranked on the held-out noised cells.</i></p>"
)
ENDED_STATUSES = ("done", "stopped", "error")


def stacking_html(frame, outcome):
    """The stacking pane's content once the fits have ended: ``frame`` a :func:`stacking_frame` (each
    ensemble's MAEs, each beside its best constant, and the stacked MAE; the modes in words under it),
    then :func:`~lpviz.dashboard.views.compare_view.compare_html` of ``outcome``."""
    note = frame.attrs.get("above_constant")
    parts = [f"<p class='above-constant'>{html.escape(note)}</p>"] if note else []
    if frame.empty:
        parts.append(
            "<p class='stacking-none'>No fit has chains stacked: stacking weighs an ensemble's chains (2 or "
            "more in the Fit settings) by the final score of a fit run to its end.</p>"
        )
    else:
        head = "".join(
            f"<th>{column}<br><small>({STACKED_NOTE})</small></th>"
            if column in STACKED_LABELS.values()
            else f"<th>{column}</th>"
            for column in frame.columns
        )
        rows = []
        for _, row in frame.iterrows():
            cells = []
            for column in frame.columns:
                text = html.escape(table_cell(row[column]))
                if column == HEALTH_COLUMN and text not in ("", "healthy"):
                    text = f"<b style='color:#b2182b'>{text}</b>"
                cells.append(f"<td>{text}</td>")
            rows.append(f"<tr>{''.join(cells)}</tr>")
        parts.append(
            f"<table class='stacking-table'><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
        )
        parts.append(modes_html(frame.attrs.get("modes") or {}))
    parts.append(compare_html(outcome))
    return "".join(parts)


def modes_html(modes):
    """One line per ensemble, ``{method: modes text}``: its chains' modes and stacking weights."""
    if not modes:
        return ""
    lines = "".join(
        f"<li data-method='{html.escape(method, quote=True)}'><b>{html.escape(method)}</b>: {html.escape(text)}.</li>"
        for method, text in modes.items()
    )
    return (
        "<p class='chain-modes-title'>Modes and stacking weights (the chains weighted by how well each predicts "
        f"the cells no fit used; the stacked MAE is their weighted mean's):</p><ul class='chain-modes'>{lines}</ul>"
    )


def stacking_box(ended, frame, outcome):
    """The stacking pane: :data:`STACKING_WAITING` until every fit has ended (``ended``), then
    :func:`stacking_html`, in a box of :data:`STACKING_HEIGHT` whatever it holds (it scrolls)."""
    inner = stacking_html(frame, outcome) if ended else STACKING_WAITING
    return f"<div class='stacking-box' style='height: {STACKING_HEIGHT}; overflow: auto'>{STACKING_TITLE}{inner}</div>"


def rate_title(runner, state):
    """A method's rate heatmap title: the method on one line, the state of its fit on the next (on
    one line, "private (models the noise), VI: mean of 400 samples" ran past a quarter of the page
    and was cut off at the plot's edge)."""
    return f"{runner.label}\n{state}"


def mae_key(truth):
    """The score traced: MAE against the true rates of a simulation, else against the true counts."""
    return "rate_mae" if truth is not None and truth.mu is not None else "mae"


def preset_verdict(fits):
    """The :class:`~dashboard.session.presets.Verdict` of the session's preset claim on its finished fits (None without
    a preset claim); "not checked yet" while any of its fits runs, "not checked" (and why) when one
    was stopped short of its goal (:func:`lpviz.dashboard.session.presets.unfinished`). What the Fits tab shows and the
    exported summary records."""
    from lpviz.dashboard.session.presets import PRESETS, Verdict, check, unfinished

    preset = PRESETS.get(fits.settings.preset)
    if preset is None or preset.claim is None:
        return None
    runners = fits.runners
    involved = [runners[m] for m in preset.claim.methods if m in runners]
    if len(involved) < len(preset.claim.methods) or any(m not in fits.active for m in preset.claim.methods):
        return Verdict(None, "the methods it compares are not all chosen in the fit settings")
    short = unfinished(involved)
    if short is not None:
        return short
    return check(preset.claim, {runner.method: (runner.result or {}).get("score") or {} for runner in involved})


class FitsView(pn.viewable.Viewer):
    """Start, pause, resume, stop and reset the chains; see them converge."""

    fits = param.ClassSelector(class_=Fits)
    scores = param.DataFrame(default=pd.DataFrame(), doc="the score table shown")
    verdict = param.Parameter(default=None, doc="the preset's claim checked on the finished fits (a Verdict)")
    stacking = param.String(default=stacking_box(False, pd.DataFrame(), None), doc="the stacking pane's HTML")

    def __init__(self, **params):
        super().__init__(**params)
        self._live_rates = (
            None  # the rate heatmaps shown (lpviz.dashboard.views.live_rates), new per data, methods and scale
        )
        self._rate_states = {}  # method -> the state its heatmap shows (the title's second line)
        self._live_traces = []  # the trace plots shown (lpviz.dashboard.views.live_traces), detached when replaced
        # hidden (another tab shown), the traces' rows, the rate heatmaps and the scoreboard wait
        # until shown; the session's drain asks the same whether the trace plots are shown
        self.on_screen = self.fits.traces_on_screen
        # one throttle for all the rate heatmaps: each redraw sends whole images
        follow_results(
            self.fits, lambda runner: self.on_screen.run("rates", partial(self._on_result, runner)), VIEW_SECONDS
        )
        follow_results(self.fits, lambda runner: self.on_screen.run("scores", self._update_scores), VIEW_SECONDS)
        # the methods on the held-out noised cells, once every fit has run to its end (lpviz.compare)
        self.compare = CompareView(fits=self.fits)
        self.compare.param.watch(lambda *_: self._update_stacking(), ["outcome"])
        for runner in self.fits.runners.values():
            runner.param.watch(lambda *_: self._update_stacking(), ["status"])
        self.fits.settings.param.watch(lambda *_: self._update_stacking(), ["methods"])
        self._update_scores()
        # The rate heatmaps of each (data generation, methods, scale) are new figures in a new pane in
        # this box, never the old ones updated for other data: Panel's in-place update re-used the old
        # Bokeh figures, and after a data switch all four were seen titled "truth (true counts)" over
        # stale axes. Only a new result of the same data updates the figures in place.
        self._rates_box = pn.Column(sizing_mode="stretch_width", name="rates-box")
        settings = self.fits.settings
        self.fits.data.param.watch(lambda *_: self._follow_rates(), ["release"])
        settings.param.watch(
            lambda *events: settings.still(events) and self._follow_rates(), ["methods", "colour_scale"]
        )

    def _follow_rates(self):
        self.on_screen.run("rates-box", self._redraw_rates)

    def _redraw_rates(self):
        self._rates_box.objects = [self.rates()]

    # ---- controls ---------------------------------------------------------------------
    def controls(self):
        buttons = []
        for name, kind, action in (
            ("Start", "success", self.fits.start),
            ("Pause", "warning", self.fits.pause),
            ("Resume", "primary", self.fits.resume),
            ("Stop", "danger", self.fits.stop),
            ("Reset", "light", self.fits.reset),
        ):
            button = pn.widgets.Button(label=name, color=kind, width=90)
            button.on_click(action)
            buttons.append(button)
        # wrapping: five buttons in a row are 450 px, wider than a phone's page (which then scrolled sideways)
        return pn.FlexBox(*buttons, sizing_mode="stretch_width")

    def progress_row(self, runner):
        goal = pn.bind(
            lambda status, target, n_iter: n_iter if status in ("idle", "unavailable") else target,
            runner.param.status,
            runner.param.target,
            runner.param.n_iter,
        )
        bar = pn.indicators.Progress(
            value=pn.bind(lambda i, g: min(i, g), runner.param.iteration, goal),
            max=goal,
            width=220,
            bar_color="primary",
        )

        def text(status, iteration, goal, rate, error, note):
            speed = f"{rate:,.1f}" if 0 < rate < 10 else f"{rate:,.0f}"
            # a finished chain's speed is in the scoreboard (its average): no "0 it/s" here
            # the wall-clock rate over the last second (the scoreboard's it/s counts computing time only)
            speed = f", {speed} it/s (wall clock)" if rate > 0 and status in ("running", "pausing") else ""
            line = f"**{runner.label}** - {status}, iteration {iteration:,} / {goal:,}{speed}"
            line += f" - {error}" if error else ""
            return line + (f" - *{note}*" if note else "")

        label = pn.pane.Markdown(
            pn.bind(
                text,
                runner.param.status,
                runner.param.iteration,
                goal,
                runner.param.iterations_per_second,
                runner.param.error,
                runner.param.note,
            ),
            margin=(0, 10),
            sizing_mode="stretch_width",
        )
        return pn.Row(bar, label, sizing_mode="stretch_width")

    @param.depends("fits.data.settings.methods", "fits.data.settings.inference")
    def progress(self):
        return pn.Column(
            *[self.progress_row(runner) for runner in self.fits.active.values()], sizing_mode="stretch_width"
        )

    def _update_scores(self):
        self.scores = board_frame(list(self.fits.active.values()))
        self.verdict = self.claim_verdict()
        self._update_stacking()

    def _update_stacking(self):
        """The stacking pane's content: the waiting line until every chosen fit has ended, then the
        final scores' stacking (:func:`stacking_html`) and the comparison."""
        runners = list(self.fits.active.values())
        ended = bool(runners) and all(runner.status in ENDED_STATUSES for runner in runners)
        frame = self.scores.attrs.get("stacking")
        self.stacking = stacking_box(ended, frame if frame is not None else pd.DataFrame(), self.compare.outcome)

    # ---- the preset's claim, checked ----------------------------------------------------
    def claim_verdict(self):
        """The :class:`~lpviz.dashboard.session.presets.Verdict` of the current preset's claim on the finished fits
        (None without a preset claim); "not checked yet" while any of its fits runs."""
        return preset_verdict(self.fits)

    def claim_html(self, verdict, preset_name, noise_seed):
        from lpviz.dashboard.session.presets import CLASS_SEED, PRESETS

        preset = PRESETS.get(preset_name)
        if preset is None or preset.claim is None or verdict is None:
            return ""
        colour = {True: "#1a7f37", False: "#b2182b", None: "#555"}[verdict.held]
        seed = (
            ""
            if noise_seed == CLASS_SEED
            else f" <i>A new noise draw (seed {noise_seed}, not the class seed {CLASS_SEED}): these numbers "
            "differ from the class's.</i>"
        )
        return (
            f"<div class='claim-verdict' data-held='{verdict.word}' style='min-height: {VERDICT_MIN_HEIGHT}'>"
            f"<b>The preset's claim:</b> {preset.claim.text} "
            f"<b style='color:{colour}'>{verdict.word.capitalize()}</b>: {verdict.text.rstrip('.')}.{seed}</div>"
        )

    def explanation_html(self, frame):
        """One line where a private fit beats the fit of the true counts (the paper's finding, not a bug)."""
        from lpviz.methods import METHODS
        from lpviz.metrics import SCORE_LABELS

        if frame.empty:
            return ""
        labels = {runner.label: METHODS[runner.method] for runner in self.fits.runners.values()}
        allowed = frame.attrs.get("rankable", {})
        for key in ("rate_mae", "mae"):
            column = SCORE_LABELS[key]
            if column not in frame:
                continue
            rows = frame[frame["method"].isin(allowed.get(column, []))].set_index("method")[column]
            private = [label for label in rows.index if label in labels and labels[label].needs_alpha]
            truth = [label for label in rows.index if label in labels and labels[label].uses_truth]
            if private and truth and rows[private].min() < rows[truth].min():
                return (
                    f"<p class='private-beats-truth'>Why can {private[0]} ({rows[private].min():.4g}) beat "
                    f"{truth[0]} ({rows[truth].min():.4g}) on {column}? The private model explains small counts "
                    "partly as noise and shrinks them: a regularisation the paper reports too (on Enron). "
                    "The fit of the true counts chases every count, noise of the Poisson draw included.</p>"
                )
        return ""

    # ---- traces ---------------------------------------------------------------------
    def trace_lines(self):
        """``(MAE plot, log-joint plot, key text)`` the Fits tab draws, each plot ``(lines, title, ylabel,
        legend place)`` with ``lines`` ``[(runner, trace column, line dash), ...]`` (no MAE plot without true
        counts), or None without data: what :meth:`trace_plots` shows and :meth:`figures` exports."""
        data = self.fits.data
        if data.release is None:
            return None
        runners = list(self.fits.active.values())
        column, title, ylabel = (
            ("elbo", "ELBO (each method's own model)", "ELBO")  # a CAVI fit has no sample to score
            if data.settings.inference == "vi"
            else ("log_joint", "Log joint (each method's own model)", "log joint")
        )
        # one line per chain: chain 0 (the single chain of the seed) named in the legend, the others fainter
        chains = range(1, data.settings.chains) if column in CHAIN_TRACES else ()
        joint = (
            [(runner, name, "solid") for runner in runners for name in (column, *(f"{column}_{c}" for c in chains))],
            title,
            ylabel,
            "top",
        )
        if data.truth is None:
            return (
                None,
                joint,
                (
                    "No MAE: this release came without its true counts. The log joint of each "
                    "chain shows its convergence." + CHAINS_NOTE * bool(chains)
                ),
            )
        key = mae_key(data.truth)
        held_out = data.release.heldout_cells is not None
        lines = []
        for runner in runners:
            lines.append((runner, key, "solid"))
            lines.append((runner, f"mean_{key}", "dashed"))
            if held_out:  # no held-out curve without held-out cells
                lines.append((runner, f"mean_heldout_{key}", "dotted"))
        reference = "true rates" if key == "rate_mae" else "true counts"
        mae = (lines, f"MAE against the {reference}", "MAE", "top")
        text = "Solid: the current sample. Dashed: the posterior mean over the saved samples" + (
            ". Dotted: the posterior mean on the held-out cells." if held_out else "."
        )
        text += CHAINS_NOTE * bool(chains)
        if data.settings.inference == "vi":
            text = (
                "VI: a CAVI fit keeps one q, no samples, so solid (the current q) and dashed (its mean rates "
                "E_q[mu]) coincide" + ("; dotted: on the held-out cells." if held_out else ".")
            )
        return mae, joint, text

    def chain_lines(self):
        """Per method of two or more MCMC chains, a plot of its chains alone after burn-in, ``(lines, title,
        ylabel, legend place)``, one colour per chain: the trace its health is judged on (the noised data's
        log likelihood for a method that models the noise, else the log joint; lpviz.diagnostics.trace_name).
        On Figure 1's network two private chains sit 30-40 apart with a within-chain sd of 5: a gap the
        log-joint plot, spanning the climb and every method's level (thousands), could not show (issue 57
        MEDIUM 8). [] for one chain or VI."""
        from lpviz.methods import METHODS

        data = self.fits.data
        if data.release is None or data.settings.inference == "vi" or data.settings.chains < 2:
            return []
        specs = []
        for runner in self.fits.active.values():
            column, name = (
                ("log_marginal", "log likelihood of the noised data")
                if METHODS[runner.method].needs_alpha
                else ("log_joint", "log joint")
            )
            lines = [(runner, column if c == 0 else f"{column}_{c}", "solid") for c in range(data.settings.chains)]
            specs.append((lines, f"{runner.method}: {name}, after burn-in", name, "top"))
        return specs

    def trace_plots(self):
        """``(MAE plot, log-joint plot, key text)`` of the active runners (:class:`LiveTraces` of
        :meth:`trace_lines`; no MAE plot without true counts), or None without data."""
        spec = self.trace_lines()
        if spec is None:
            return None
        mae, joint, text = spec

        def live(lines, title, ylabel, legend):
            return LiveTraces(lines, title=title, ylabel=ylabel, legend=legend)

        return (None if mae is None else live(*mae)), live(*joint), text

    @staticmethod
    def trace_figure(lines, title, ylabel, legend):
        """A trace plot of :meth:`trace_lines` as a static HoloViews overlay, for export: the tab's lines (its
        buffers' rows, as :class:`LiveTraces` draws them), title, axis names and legend."""
        curves = []
        for runner, column, dash in lines:
            trace = runner.trace()
            chain = chain_of(column)
            width, alpha = line_style(chain)
            curve = hv.Curve(
                (np.asarray(trace["iteration"], dtype=float), np.asarray(trace[column], dtype=float)),
                "iteration",
                ylabel,
                label=runner.label if chain == 0 else "",
            )
            curves.append(curve.opts(color=runner.color, line_dash=dash, line_width=width, alpha=alpha))
        return hv.Overlay(curves).opts(title=title, xlabel="iteration", ylabel=ylabel, legend_position=legend)

    @param.depends(
        "fits.data.release",
        "fits.data.settings.methods",
        "fits.data.settings.inference",
        "fits.data.settings.chains",
        "fits.data.settings.burn_in",  # where the chain plots' axes begin
    )
    def traces(self):
        for plot in self._live_traces:
            plot.detach()  # the plots replaced stop following the buffers
        self._live_traces = []
        plots = self.trace_plots()
        if plots is None:
            return pn.pane.Markdown("No data yet.")
        mae_plot, joint_plot, text = plots
        burn_in = self.fits.data.settings.burn_in
        chain_plots = [
            LiveTraces(lines, title=title, ylabel=ylabel, legend=legend, after=burn_in, chain_colors=CHAIN_COLORS)
            for lines, title, ylabel, legend in self.chain_lines()
        ]
        self._live_traces = [plot for plot in (mae_plot, joint_plot, *chain_plots) if plot is not None]
        panes = [pn.pane.Bokeh(joint_plot.figure, sizing_mode="stretch_width", name="joint-trace")]
        if mae_plot is not None:
            panes.insert(0, pn.pane.Bokeh(mae_plot.figure, sizing_mode="stretch_width", name="mae-trace"))
        shown = [
            pn.FlexBox(*panes, sizing_mode="stretch_width", name="trace-plots"),
            pn.pane.Markdown(text, margin=(0, 10)),
        ]
        if chain_plots:
            shown += [
                pn.pane.Markdown(
                    CHAIN_PLOTS_NOTE.format(burn_in=burn_in, sds=DISAGREE_SDS), margin=(0, 10), name="chain-plots-note"
                ),
                pn.FlexBox(
                    *(pn.pane.Bokeh(plot.figure, sizing_mode="stretch_width") for plot in chain_plots),
                    sizing_mode="stretch_width",
                    name="chain-plots",
                ),
            ]
        return pn.Column(*shown, sizing_mode="stretch_width")

    # ---- live rates -----------------------------------------------------------------
    def _reference(self):
        reference, title = truth_reference(self.fits.data.truth, self.fits.data.release)
        return reference, title, (0.0, colour_limit(reference)[0]), display_slice(reference.shape)

    @param.depends("fits.data.release", "fits.data.settings.methods", "fits.data.settings.colour_scale")
    def rates(self):
        """The rate heatmaps of the truth (keyed None) and each active method (by name): a
        :class:`~dashboard.views.live_rates.LiveRates`, new figures each call, updated in place by each new result."""
        data = self.fits.data
        if data.release is None:
            self._live_rates, self._rate_states = None, {}
            return pn.pane.Markdown("")
        reference, title, clim, strides = self._reference()
        frames = {None: (reference, title)}
        self._rate_states = {}
        for name, runner in self.fits.active.items():
            values, self._rate_states[name] = self._rate_frame(runner, reference.shape)
            frames[name] = (values, rate_title(runner, self._rate_states[name]))
        self._live_rates = LiveRates(
            frames,
            kind=data.release.kind,
            clim=clim,
            strides=strides,
            scale=data.settings.colour_scale,
            cmap=RATE_CMAP,
            label="rate",
            min_width=RATE_MIN_WIDTH,
        )
        return self._live_rates.panel

    @staticmethod
    def _rate_frame(runner, shape):
        result = runner.result
        if result is None:
            return np.zeros(shape), "not started"
        if runner.problem is not None and runner.problem.inference == "vi":
            # a CAVI fit keeps one q and no samples: "mean of 1 sample" said otherwise
            return result["mu_hat"], f"variational mean at iteration {result['iteration']:,}"
        if result["mu_hat"] is not None:
            saved, chains = result["samples_saved"], result.get("chains", 1)
            pooled = f" of {chains} chains" if chains > 1 else ""
            return result["mu_hat"], f"mean of {saved} sample{'' if saved == 1 else 's'}{pooled}"
        return result["mu"], f"burn-in, sample {result['iteration']}" + (
            " of chain 0" if result.get("chains", 1) > 1 else ""
        )

    def _on_result(self, runner):
        """Redraw the rate heatmaps whose runner has a new result (all of them when due); a heatmap
        whose runner is another and whose state did not change is not sent again."""
        if self.fits.data.release is None or self._live_rates is None:
            return
        for name, shown in self._rate_states.items():
            other = self.fits.runners[name]
            values, state = self._rate_frame(other, self.fits.data.release.shape)
            if other is runner or state != shown:
                self._rate_states[name] = state
                # a run that stopped moving is drawn at once (the spread is for streaming results)
                still = other.status not in ("running", "pausing")
                self._live_rates.update(name, values, rate_title(other, state), at_once=still)

    def figures(self):
        """The traces and rates as they are now, as static HoloViews objects, for export."""
        self.on_screen.catch_up()
        data = self.fits.data
        if data.release is None:
            return {}
        runners = list(self.fits.active.values())
        mae, joint, _ = self.trace_lines()
        figures = {"fits_log_joint_trace": self.trace_figure(*joint)}
        if mae is not None:
            figures["fits_mae_trace"] = self.trace_figure(*mae)
        reference, title, clim, strides = self._reference()
        kind, scale = data.release.kind, data.settings.colour_scale
        rates = [count_image(reference, kind, title, clim, strides=strides, cmap=RATE_CMAP, label="rate", scale=scale)]
        for runner in runners:
            values, subtitle = self._rate_frame(runner, reference.shape)
            rates.append(
                count_image(
                    values,
                    kind,
                    rate_title(runner, subtitle),
                    clim,
                    strides=strides,
                    cmap=RATE_CMAP,
                    label="rate",
                    scale=scale,
                )
            )
        return {**figures, "fits_rates": hv.Layout(rates).cols(RATE_COLUMNS)}

    def __panel__(self):
        self._redraw_rates()
        table = pn.pane.HTML(
            pn.bind(scoreboard_box, self.param.scores),
            # always visible and of one height (scoreboard_box): a pane made visible, or one that changes
            # size, relays the whole page out in BokehJS (every figure of the tab measured and repainted:
            # 2-3 s of a 4x throttled page at the first scores, at every Pause)
            sizing_mode="stretch_width",
            stylesheets=[SCROLL_SIDEWAYS_CSS],  # its own sideways scroll on a phone
            name="fit-scores",
        )
        settings = self.fits.settings
        claim = pn.pane.HTML(
            pn.bind(self.claim_html, self.param.verdict, settings.param.preset, settings.param.noise_seed),
            sizing_mode="stretch_width",
            name="claim-verdict",
        )
        explanation = pn.pane.HTML(
            pn.bind(self.explanation_html, self.param.scores), sizing_mode="stretch_width", name="private-beats-truth"
        )
        # of one height from the start (stacking_box): its content comes at a run's end inside it
        stacking = pn.pane.HTML(
            self.param.stacking, sizing_mode="stretch_width", stylesheets=[SCROLL_SIDEWAYS_CSS], name="stacking"
        )
        return pn.Column(
            self.controls(),
            self.progress,
            claim,
            table,
            explanation,
            stacking,
            self.traces,
            pn.pane.Markdown("### Rates: truth and each method's estimate"),
            self._rates_box,
            sizing_mode="stretch_width",
        )
