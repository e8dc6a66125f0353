"""The methods compared on the held-out noised cells: :func:`lpviz.compare` of the finished fits.

A real analyst has no true counts: the methods are ranked by how well each predicts the release's
held-out noised cells (each ensemble by its chains' stacked mixture, ``lpviz.comparison``). Shown in
the Fits tab's stacking pane (:func:`lpviz.dashboard.views.fits_view.stacking_box`, under the
scoreboard) once every chosen method has run to its end, computed once per finished run in the
session's :class:`~lpviz.dashboard.serving.throttle.OffLoop` (a second or so on Figure 5's network),
with the rankings that hold (``table.attrs["statements"]``) in sentences and the rule under them.
Nothing is shown for data without held-out cells; while a fit runs, the pane says when it comes.
"""

import html

import pandas as pd
import param

from lpviz.dashboard.session.fits import Fits
from lpviz.dashboard.session.runner import REMOTE_CHAIN
from lpviz.dashboard.views.plots import table_cell

# The compare table's columns shown, in this order (those the table has), with their headers.
COMPARE_COLUMNS = {
    "rank": "rank",
    "elpd": "elpd",
    "se": "se",
    "elpd_diff": "elpd diff",
    "dse": "se of diff",
    "weight": "stacking weight",
    "mae": "MAE",
    "chain_mae_min": "chains' MAE min",
    "chain_mae_max": "chains' MAE max",
    "best_constant_mae": "MAE: best constant",
    "how": "scored by",
    "flags": "flags",
}
WAITING = (
    "<p class='compare-waiting'><i>The methods are compared on the held-out noised cells once every fit "
    "has run to its end.</i></p>"
)
HEADING = (
    "<h4>The methods compared on the held-out noised cells</h4><p><small>elpd: how well each method predicts "
    "the noised counts of the cells no fit saw, under the noise's law (what an analyst holds: no truth used; "
    "an ensemble by its stacked chains); the MAE columns, against the true counts, only in a simulation."
    "</small></p>"
)


def run_key(runners):
    """What identifies one finished run of ``runners``: each method, its run's generation and goal
    (a new run, an extension or a reset changes it); the comparison is made once per key."""
    return tuple((runner.method, runner._generation, runner.target) for runner in runners)


def finished_fits(runners):
    """``({label: posterior}, None)`` of runners that have all run to their end (an ensemble's
    :class:`~lpviz.ensemble.EnsemblePosterior` for several chains), or ``(None, why)`` in words."""
    if not runners:
        return None, "no method is chosen"
    short = [runner.label for runner in runners if runner.status in ("stopped", "error")]
    if short:
        return None, f"{', '.join(short)} did not run to its end (stopped or failed); run the fits again"
    if any(runner.status != "done" for runner in runners):
        return None, None  # running, paused or not started: the waiting line
    fits = {}
    for runner in runners:
        carry = runner._carry
        chain_run = carry.get("chain_run")
        if chain_run is None:
            why = "its chains stay on the cluster they ran on" if carry.get(REMOTE_CHAIN) else "its chains are gone"
            return None, f"{runner.label}: {why}"
        fits[runner.label] = chain_run.posterior
    return fits, None


def compare_fits(fits, release, truth):
    """:func:`lpviz.compare` of ``fits`` (``{label: posterior}``) on ``release``'s held-out cells, or
    the reason (a str) it gives none (its ValueError's words)."""
    import lpviz

    try:
        return lpviz.compare(fits, release, truth)
    except ValueError as error:
        return str(error)


def compare_html(outcome):
    """The comparison as HTML: ``outcome`` a :func:`lpviz.compare` table (its columns in
    :data:`COMPARE_COLUMNS`, each statement a bullet, the rule under them), a str (why nothing is
    compared), None (waiting) or "" (nothing to say: no held-out cells)."""
    if outcome is None:
        return HEADING + WAITING
    if isinstance(outcome, str):
        if not outcome:
            return ""
        return HEADING + f"<p class='compare-none'>Not compared: {html.escape(outcome)}</p>"
    table = outcome
    columns = [column for column in COMPARE_COLUMNS if column in table.columns]
    head = "<th>method</th>" + "".join(f"<th>{COMPARE_COLUMNS[column]}</th>" for column in columns)
    rows = []
    for method, row in table.iterrows():
        cells = "".join(f"<td>{html.escape(_cell(column, row[column]))}</td>" for column in columns)
        rows.append(f"<tr><td>{html.escape(str(method))}</td>{cells}</tr>")
    statements = table.attrs.get("statements") or []
    said = (
        "<ul class='compare-statements'>"
        + "".join(f"<li>{html.escape(statement)}.</li>" for statement in statements)
        + "</ul>"
        if statements
        else "<p class='compare-statements'>No ranking holds by the rule below.</p>"
    )
    cells = table.attrs.get("cells") or []
    scored = f" ({cells[0]:,} held-out cells scored)" if len(cells) == 1 else ""
    rule = table.attrs.get("rule", "")
    return (
        HEADING
        + f"<table class='compare-table'><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
        + said
        + f"<p class='compare-rule'><small>The rule{scored}: {html.escape(rule)}.</small></p>"
    )


def _cell(column, value):
    if column == "rank":
        return str(int(value))
    if isinstance(value, (bool,)) or column in ("how", "flags"):
        return "" if value is None else str(value)
    if isinstance(value, float) and column in ("elpd", "se", "elpd_diff", "dse"):
        return "" if pd.isna(value) else f"{value:,.1f}"
    return table_cell(value)


class CompareView(param.Parameterized):
    """:func:`lpviz.compare` of the session's finished fits on the held-out noised cells (``outcome``:
    what :func:`compare_html` shows, in the Fits tab's stacking pane)."""

    fits = param.ClassSelector(class_=Fits)
    outcome = param.Parameter(default="", doc="the compare table, why there is none (str), or None (waiting)")

    def __init__(self, **params):
        super().__init__(**params)
        self._key = None  # the run_key the outcome (or the computation in flight) is of
        for runner in self.fits.runners.values():
            runner.param.watch(lambda *_: self.refresh(), ["status"])
        self.fits.data.param.watch(lambda *_: self.refresh(), ["release"])
        self.fits.settings.param.watch(lambda *_: self.refresh(), ["methods"])
        self.refresh()

    def outcome_of(self, runners):
        """The comparison table of the run of ``runners`` when this view holds it (computed once per
        run: the Export tab's CSV reads it rather than comparing again), else None."""
        if self._key is None or self._key != run_key(runners) or not isinstance(self.outcome, pd.DataFrame):
            return None
        return self.outcome

    def refresh(self):
        """Compare the fits once their run has ended (once per run), else say what waits."""
        data = self.fits.data
        release = data.release
        if self.fits.closed or release is None or release.heldout_cells is None:
            self._key = None
            self.outcome = ""
            return
        runners = list(self.fits.active.values())
        key = run_key(runners)
        fits, why = finished_fits(runners)
        if fits is None:
            self._key = None
            self.outcome = why
            return
        if key == self._key:
            return  # this run is compared (or being compared)
        self._key = key
        truth = data.truth

        def compute():
            return compare_fits(fits, release, truth)

        def apply(outcome):
            if self._key != key or run_key(list(self.fits.active.values())) != key:
                return  # another run (or a reset) since: its own comparison comes
            self.outcome = str(outcome) if isinstance(outcome, Exception) else outcome

        self.fits.off_loop.submit("compare", compute, apply)
