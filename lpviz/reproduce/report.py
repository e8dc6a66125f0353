"""What every experiment's report shares: task tables, group statistics, diagnostics, plots, report.md.

Each experiment turns its stored task results into :class:`Claim` rows
(the paper's claim, lpviz's numbers beside it, a verdict) and figures; this
module writes them: CSV tables (every number), PNG (matplotlib) and
interactive HTML (Bokeh, resources inline so the file works offline), and
``report.md`` with the settings, seeds, versions, wall-clock per task,
convergence diagnostics and a scale section.
"""

import io
import json
import math
import platform
import subprocess
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from lpviz import diagnostics
from lpviz._files import atomic_write
from lpviz.reproduce.grid import format_duration, projected_seconds

__all__ = [
    "Claim",
    "REPRODUCED",
    "NOT_REPRODUCED",
    "PARTLY",
    "fit_problems",
    "trusted_verdict",
    "health_fields",
    "flagged_fits",
    "generally",
    "gate_on_health",
    "health_section",
    "flat_scores",
    "versions",
    "task_rows",
    "group_stats",
    "diagnostic_rows",
    "write_csv",
    "write_text",
    "metric_panels",
    "heatmaps",
    "write_report",
    "method_color",
    "method_label",
    "markdown_table",
    "scale_rows",
]

REPRODUCED = "reproduced"
NOT_REPRODUCED = "not reproduced"
PARTLY = "partly reproduced"
CLUSTER_WORKERS = 16


@dataclass
class Claim:
    """One claim of the paper: what the paper says, what lpviz measured, the verdict and how it was decided."""

    claim: str
    paper: str
    lpviz: str
    verdict: str
    rule: str = ""
    # the methods whose fits the claim compares: with any of them flagged (collapsed, not mixed,
    # non-finite), the claim is not counted as reproduced (:func:`gate_on_health`)
    methods: tuple = ()


def verdict_of(checks):
    """REPRODUCED when every check holds, NOT_REPRODUCED when none does, else PARTLY."""
    checks = [bool(c) for c in checks]
    if not checks:
        return "n/a"
    if all(checks):
        return REPRODUCED
    return NOT_REPRODUCED if not any(checks) else PARTLY


def generally(checks, share):
    """REPRODUCED when at least ``share`` of the checks hold, NOT_REPRODUCED when none does, else PARTLY
    (the paper's "generally")."""
    checks = [bool(c) for c in checks]
    if not checks:
        return "n/a"
    fraction = sum(checks) / len(checks)
    return REPRODUCED if fraction >= share else (PARTLY if fraction > 0 else NOT_REPRODUCED)


def fit_problems(fit, name=""):
    """What keeps a fit's number from counting towards a claim, in words (empty: nothing).

    ``fit``: a flat row with the fields of :func:`health_fields` (``flags``, ``mae`` and its
    ``best_constant_mae``, ``independence_mae``). A fit counts when it is healthy (no flags:
    not collapsed, finite, mixed) and its MAE beats both baselines (:func:`lpviz.metrics.rankable`).
    """
    label = f"{name}: " if name else ""
    problems = []
    flags = fit.get("flags")
    if flags is None:
        problems.append(f"{label}no health numbers")
    elif flags:
        mass = fit.get("mass_ratio")
        mass_text = f" (mass ratio {mass:.3f})" if mass is not None else ""
        problems.append(f"{label}{flags}{mass_text}")
    for baseline, words in (("best_constant_mae", "the best constant"), ("independence_mae", "the independence fit")):
        value, reference = fit.get("mae"), fit.get(baseline)
        if reference is None or value is None:
            problems.append(f"{label}no MAE or no {words}'s MAE to compare with")
        elif not value < reference:
            problems.append(f"{label}MAE {value:.3f} does not beat {words}'s {reference:.3f}")
    return problems


def trusted_verdict(checks, fits):
    """``(verdict, problems)``: :func:`verdict_of` the checks when every fit the claim rests on
    counts (:func:`fit_problems`; ``fits``: {name: row}), else NOT_REPRODUCED with the reasons:
    a collapsed, unmixed or non-finite fit, or one that does not beat the baselines, reproduces
    nothing."""
    problems = [problem for name, fit in fits.items() for problem in fit_problems(fit, name)]
    return (NOT_REPRODUCED if problems else verdict_of(checks)), problems


def flagged_fits(rows, methods=None):
    """``[(row, words)]`` for each task row whose :func:`lpviz.metrics.score` health flags are set
    (collapsed, not mixed, non-finite...) or missing, among the rows of ``methods`` (every row when None)."""
    flagged = []
    for row in rows:
        if methods is not None and row.get("method") not in methods:
            continue
        flags = row.get("health_flags")
        if flags is None or (isinstance(flags, float) and not np.isfinite(flags)):
            flagged.append((row, "no health numbers"))
        elif flags:
            flagged.append((row, str(flags)))
    return flagged


def _fit_name(row):
    where = ", ".join(str(row[key]) for key in ("setting",) if row.get(key) is not None)
    which = "".join(f" {key} {row[key]}" for key in ("copy", "chain") if row.get(key) is not None)
    return f"{row.get('method')} ({where}{which})"


def gate_on_health(claims, rows):
    """The claims with every verdict resting on a flagged fit turned into NOT_REPRODUCED, saying which
    fits and why: a collapsed, unmixed or non-finite fit reproduces nothing. A claim rests on the fits
    of its ``methods`` (all of their settings: a conservative rule, stated in the report)."""
    gated = []
    for claim in claims:
        flagged = flagged_fits(rows, claim.methods) if claim.methods else []
        if not flagged:
            gated.append(claim)
            continue
        shown = "; ".join(f"{_fit_name(row)}: {words}" for row, words in flagged[:3])
        more = f"; and {len(flagged) - 3} more" if len(flagged) > 3 else ""
        gated.append(
            replace(
                claim,
                lpviz=f"{claim.lpviz}. Not counted: {len(flagged)} of the fits compared are flagged ({shown}{more})",
                verdict=NOT_REPRODUCED,
                rule=(claim.rule + "; " if claim.rule else "")
                + "and only when every fit of "
                + ", ".join(claim.methods)
                + " is healthy (not collapsed, finite, mixed)",
            )
        )
    return gated


def health_section(rows):
    """The report's "Fit health" section: each flagged fit in words, or that every fit is healthy;
    None when the experiment's rows carry no health (fits not scored by score(), e.g. VIPS)."""
    if not any("health_flags" in row for row in rows):
        return None
    flagged = flagged_fits(rows)
    if not flagged:
        return (
            "Fit health",
            f"Every fit is healthy by score(): none collapsed, non-finite or unmixed ({len(rows)} fits).",
        )
    lines = [f"- {_fit_name(row)}: {words}" for row, words in flagged]
    return (
        "Fit health",
        f"{len(flagged)} of {len(rows)} fits are flagged by score() and count for no claim "
        "(not mixed: run longer; collapsed: the fit lost the data's mass):\n\n" + "\n".join(lines),
    )


def health_fields(scores, key="mae"):
    """The flat fields a report row carries from one :func:`lpviz.metrics.score` dict, for the MAE
    ``key`` it reports (e.g. ``"rate_mae"``): ``mass_ratio``, ``flags`` (the health words joined,
    "" when healthy), ``best_constant_mae`` and ``independence_mae`` (that MAE's baselines)."""
    health = scores.get("health") or {}
    baselines = scores.get("baselines") or {}
    return {
        "mass_ratio": health.get("mass_ratio"),
        "flags": ", ".join(health.get("flags") or []) if health else None,
        "best_constant_mae": baselines.get(f"best_constant_{key}"),
        "independence_mae": baselines.get(f"independence_{key}"),
    }


def flat_scores(scores):
    """A score() dict flattened for a CSV row: its numbers, ``mass_ratio``, ``health_flags`` (words
    joined), ``collapsed``, ``not_mixed`` and every baseline MAE (``best_constant_rate_mae``, ...)."""
    row = {key: value for key, value in scores.items() if key not in ("health", "baselines")}
    health = scores.get("health")
    if isinstance(health, dict):
        row.update(
            mass_ratio=health.get("mass_ratio"),
            health_flags=", ".join(health.get("flags") or []),
            collapsed=health.get("collapsed"),
            not_mixed=health.get("not_mixed"),
        )
    baselines = scores.get("baselines")
    if isinstance(baselines, dict):
        row.update({key: value for key, value in baselines.items() if key.endswith("mae")})
    return row


# ---------------------------------------------------------------------------
# Versions, tables
# ---------------------------------------------------------------------------


def _git_commit():
    root = Path(__file__).resolve().parents[2]
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10
        )
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def versions():
    """Versions of Python, lpviz (and its git commit) and the libraries the numbers depend on."""
    from importlib.metadata import PackageNotFoundError, version

    import lpviz

    result = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "lpviz": lpviz.__version__,
        "lpviz_commit": _git_commit(),
    }
    for package in ("numpy", "scipy", "numba", "dask", "distributed", "arviz", "matplotlib", "bokeh", "opendp"):
        try:
            result[package] = version(package)
        except PackageNotFoundError:
            result[package] = None
    return result


def method_label(name):
    from lpviz import methods

    try:
        return methods.get(name).label
    except ValueError:
        return name


def method_color(name):
    from lpviz import methods

    try:
        return methods.get(name).color
    except ValueError:
        return "#7f7f7f"


def task_rows(results, label_keys=()):
    """One flat row per task: labels, seeds, schedule, every score() number, timings."""
    rows = []
    for record, _ in results:
        params = record["params"]
        labels = params.get("labels", {})
        row = {"task": record["task_id"]}
        row.update({key: labels.get(key) for key in label_keys})
        row.update(
            method=params.get("method"),
            method_label=record.get("method_label"),
            copy=labels.get("copy"),
            chain=labels.get("chain"),
            n_components=params.get("n_components"),
            data_seed=(params.get("data") or {}).get("seed"),
            noise_seed=(params.get("noise") or {}).get("seed"),
            chain_seed=params.get("chain_seed"),
            n_iter=params.get("n_iter"),
            burn_in=params.get("burn_in"),
            thin=params.get("thin"),
            shape="x".join(map(str, record.get("shape", []))),
            alpha_mean=record.get("alpha_mean"),
            heldout_cells=record.get("heldout_cells"),
        )
        row.update(flat_scores(record.get("scores", {})))
        row.update(record.get("extra_scores", {}))
        for key in (
            "seconds_total",
            "seconds_data",
            "seconds_sampling",
            "seconds_per_iteration",
            "first_iteration_seconds",
            "peak_memory_gb",
            "host",
            "pid",
            "kernel_threads",
            "started",
            "finished",
        ):
            row[key] = record.get(key)
        rows.append(row)
    return rows


def _finite(values):
    return np.array([v for v in values if v is not None and np.isfinite(v)], dtype=float)


def group_stats(rows, keys, metrics):
    """Per group of ``keys``: mean, sd, min, max and n of each metric over the group's tasks."""
    groups = {}
    for row in rows:
        groups.setdefault(tuple(row.get(k) for k in keys), []).append(row)
    out = []
    for group, members in groups.items():
        entry = dict(zip(keys, group, strict=True))
        entry["tasks"] = len(members)
        for metric in metrics:
            values = _finite(m.get(metric) for m in members)
            entry[f"{metric}_mean"] = float(values.mean()) if values.size else None
            entry[f"{metric}_sd"] = float(values.std(ddof=1)) if values.size > 1 else (0.0 if values.size else None)
            entry[f"{metric}_min"] = float(values.min()) if values.size else None
            entry[f"{metric}_max"] = float(values.max()) if values.size else None
        out.append(entry)
    return out


def lookup(stats, metric, **where):
    """The ``METRIC_mean`` of the one group matching ``where`` (None if no such group)."""
    for entry in stats:
        if all(entry.get(k) == v for k, v in where.items()):
            return entry.get(f"{metric}_mean")
    return None


def diagnostic_rows(results, group_keys):
    """R-hat/ESS per group of chains (same setting, method and noised copy), one row per quantity."""
    groups = {}
    for record, arrays in results:
        if "trace" not in arrays:  # not a chain (e.g. a variational fit): nothing to diagnose
            continue
        labels = record["params"].get("labels", {})
        key = tuple(labels.get(k) if k != "method" else record["params"]["method"] for k in group_keys)
        groups.setdefault(key, []).append((record, arrays))
    out = []
    for key, members in groups.items():
        members.sort(key=lambda item: item[0]["params"].get("labels", {}).get("chain", 0))
        summaries = []
        for record, arrays in members:
            summary = {"trace": arrays["trace"], "trace_name": record["trace_name"]}
            if "rates" in arrays and arrays["rates"].size:
                summary["rates"] = arrays["rates"]
            if "topics" in arrays:
                summary["topics"], summary["topics_mean"] = arrays["topics"], arrays["topics_mean"]
            summaries.append(summary)
        try:
            quantities = diagnostics.combine(summaries)
            table = diagnostics.summarize_diagnostics(diagnostics.diagnose(quantities))
        except ValueError as error:  # too few draws: said in the table, not hidden
            table = [{"quantity": "-", "note": str(error)}]
        for row in table:
            out.append({**dict(zip(group_keys, key, strict=True)), **row})
    return out


def _iterations_run(row):
    """Iterations a task ran: score()'s ``iterations`` when the task reports it (a variational fit
    stops early), else its planned ``n_iter``."""
    value = row.get("iterations")
    if value is None or isinstance(value, bool) or not np.isfinite(value):
        return row["n_iter"]
    return value


def scale_rows(rows, paper_tasks, measured_at, local_workers, paper_seconds_per_iteration=None):
    """Wall-clock of this run's grid and of the paper's grid on this machine and on a 16-worker cluster.

    ``rows``: this run's task rows; ``paper_tasks``: ``[(group, n_iter), ...]``
    of the paper's grid, ``group`` = (method, size label); per-iteration
    seconds come from ``paper_seconds_per_iteration[group]`` (measured at the
    paper's size by a probe) when given, else from this run (same size only).
    """
    out = []
    measured = {}
    for row in rows:
        measured.setdefault(row["method"], []).append(row["seconds_per_iteration"])
    task_seconds = [row["seconds_per_iteration"] * _iterations_run(row) for row in rows]
    for workers in (local_workers, CLUSTER_WORKERS):
        out.append(
            {
                "grid": f"this run ({measured_at})",
                "tasks": len(rows),
                "workers": workers,
                "cpu_seconds": float(sum(task_seconds)),
                "wall_clock_seconds": projected_seconds(task_seconds, workers),
                "source": "measured seconds/iteration of each task x its iterations",
            }
        )
    if paper_tasks:
        seconds, source = [], "measured here (same sizes)"
        for group, n_iter in paper_tasks:
            if paper_seconds_per_iteration and group in paper_seconds_per_iteration:
                rate = paper_seconds_per_iteration[group]
                source = "probe at the paper's sizes"
            else:
                values = _finite(measured.get(group[0], []))
                rate = float(np.median(values)) if values.size else math.nan
            seconds.append(rate * n_iter)
        for workers in (local_workers, CLUSTER_WORKERS):
            out.append(
                {
                    "grid": "paper",
                    "tasks": len(paper_tasks),
                    "workers": workers,
                    "cpu_seconds": float(np.sum(seconds)),
                    "wall_clock_seconds": projected_seconds(seconds, workers),
                    "source": source,
                }
            )
    return out


# ---------------------------------------------------------------------------
# Files
# ---------------------------------------------------------------------------


def write_text(path, text):
    atomic_write(Path(path), lambda handle: handle.write(text.encode("utf-8")))
    return Path(path)


def write_csv(path, rows, columns=None):
    """Rows (dicts) as CSV, atomically; every number at full precision."""
    import pandas as pd

    frame = pd.DataFrame(list(rows), columns=columns)
    buffer = io.StringIO()
    frame.to_csv(buffer, index=False)
    return write_text(path, buffer.getvalue())


def _fmt(value, digits=4):
    if value is None:
        return "-"
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    if isinstance(value, (int, np.integer)):
        return f"{int(value):,}" if abs(int(value)) >= 10000 else str(int(value))
    if isinstance(value, (float, np.floating)):
        if not math.isfinite(value):
            return "-"
        return f"{value:.{digits}g}"
    return str(value)


def markdown_table(rows, columns, headers=None):
    """A markdown table of ``rows`` (dicts) over ``columns``."""
    headers = headers or columns
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        lines.append("| " + " | ".join(_fmt(row.get(c)).replace("|", "/") for c in columns) + " |")
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# Figures
# ---------------------------------------------------------------------------


def _save_png(figure, path):
    atomic_write(Path(path), lambda handle: figure.savefig(handle, format="png", dpi=110))
    return Path(path)


def _save_html(layout, path, title):
    from bokeh.embed import file_html
    from bokeh.resources import INLINE

    html = file_html(layout, INLINE, title)
    return write_text(path, html)


def metric_panels(
    stats,
    *,
    x,
    x_label,
    metrics,
    methods,
    path_png,
    path_html,
    title,
    constant_methods=(),
    reverse_x=False,
    panel_key=None,
    styles=None,
):
    """Line panels: one per metric (and per ``panel_key`` value), a line per method (mean, sd error bars).

    ``stats`` rows come from :func:`group_stats` (``METRIC_mean``/``METRIC_sd``);
    ``metrics`` is ``[(metric, label), ...]``; methods in ``constant_methods``
    (fitted once, not per x: the non-private fit) are drawn as a dashed
    horizontal line with a band of one sd. ``styles``: ``{method: (label, colour)}`` for methods
    that are not in the methods registry (default: the registry's label and colour).
    """
    from bokeh.layouts import gridplot
    from bokeh.models import ColumnDataSource, HoverTool, Label, Whisker
    from bokeh.plotting import figure as bokeh_figure
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    panels = (
        [None] if panel_key is None else sorted({row.get(panel_key) for row in stats if row.get(panel_key) is not None})
    )
    n_rows, n_cols = len(panels), len(metrics)
    figure = Figure(figsize=(4.2 * n_cols, 3.3 * n_rows), layout="constrained")
    FigureCanvasAgg(figure)
    xs_all = sorted({row[x] for row in stats if row.get(x) is not None}, reverse=reverse_x)
    bokeh_plots = []
    for r, panel in enumerate(panels):
        bokeh_row = []
        for c, (metric, label) in enumerate(metrics):
            axes = figure.add_subplot(n_rows, n_cols, r * n_cols + c + 1)
            plot = bokeh_figure(
                width=360,
                height=290,
                title=(f"{label}" if panel is None else f"{label}, {panel_key}={panel}"),
                x_axis_label=x_label,
                y_axis_label=label,
                tools="pan,wheel_zoom,box_zoom,reset,save",
            )
            if reverse_x:
                plot.x_range.flipped = True
            for method in methods:
                rows = [
                    row
                    for row in stats
                    if row["method"] == method
                    and (panel is None or row.get(panel_key) == panel)
                    and row.get(f"{metric}_mean") is not None
                ]
                if not rows:
                    continue
                name, color = (styles or {}).get(method) or (method_label(method), method_color(method))
                if method in constant_methods:
                    mean = float(np.mean([row[f"{metric}_mean"] for row in rows]))
                    sd = float(np.mean([row[f"{metric}_sd"] or 0.0 for row in rows]))
                    axes.axhline(mean, color=color, linestyle="--", label=name)
                    axes.axhspan(mean - sd, mean + sd, color=color, alpha=0.12)
                    if xs_all:
                        source = ColumnDataSource({"x": [min(xs_all), max(xs_all)], "y": [mean, mean], "sd": [sd, sd]})
                        plot.line(
                            "x", "y", source=source, color=color, line_dash="dashed", line_width=2, legend_label=name
                        )
                    continue
                rows = sorted(rows, key=lambda row: row[x], reverse=reverse_x)
                xs = [row[x] for row in rows]
                means = np.array([row[f"{metric}_mean"] for row in rows])
                sds = np.array([row[f"{metric}_sd"] or 0.0 for row in rows])
                axes.errorbar(xs, means, yerr=sds, color=color, marker="o", capsize=3, label=name)
                source = ColumnDataSource(
                    {
                        "x": xs,
                        "y": means,
                        "sd": sds,
                        "lower": means - sds,
                        "upper": means + sds,
                        "tasks": [row["tasks"] for row in rows],
                    }
                )
                plot.line("x", "y", source=source, color=color, line_width=2, legend_label=name)
                plot.scatter("x", "y", source=source, color=color, size=7, legend_label=name)
                plot.add_layout(Whisker(source=source, base="x", upper="upper", lower="lower", line_color=color))
            if reverse_x:
                axes.invert_xaxis()
            axes.set_xlabel(x_label)
            axes.set_title(label if panel is None else f"{label} ({panel_key}={panel})", fontsize=10)
            if r == 0 and c == 0:
                axes.legend(fontsize=8)
            plot.add_tools(HoverTool(tooltips=[("x", "@x"), ("mean", "@y{0.0000}"), ("sd", "@sd{0.0000}")]))
            if not plot.renderers:  # nothing measured here (e.g. topic recovery on real data)
                axes.text(0.5, 0.5, "not measured", ha="center", va="center", transform=axes.transAxes)
                plot.add_layout(Label(x=10, y=130, x_units="screen", y_units="screen", text="not measured"))
            else:
                plot.legend.label_text_font_size = "8pt"
                plot.legend.click_policy = "hide"
                plot.legend.location = "top_left"
                plot.legend.background_fill_alpha = 0.6
            bokeh_row.append(plot)
        bokeh_plots.append(bokeh_row)
    figure.suptitle(title)
    _save_png(figure, path_png)
    _save_html(gridplot(bokeh_plots), path_html, title)
    return [Path(path_png), Path(path_html)]


def heatmaps(panels, *, path_png, path_html, title, n_columns=None, sqrt_scale=False):
    """A grid of matrices: ``panels`` = ``[(title, matrix, kind), ...]``, kind "counts" (red positive,
    blue negative, centred on 0, one scale for every counts panel) or "rates" (one sequential scale for
    every rates panel) or "topics". ``sqrt_scale``: colours follow the signed square root of the values,
    so small rates (the sparse parts of a matrix) stay visible beside large ones."""
    from bokeh.layouts import gridplot
    from bokeh.models import LinearColorMapper
    from bokeh.palettes import RdBu11, Reds9
    from bokeh.plotting import figure as bokeh_figure
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.colors import FuncNorm, TwoSlopeNorm
    from matplotlib.figure import Figure

    def signed_sqrt(values):
        values = np.asarray(values, dtype=float)
        return np.sign(values) * np.sqrt(np.abs(values))

    def signed_square(values):
        values = np.asarray(values, dtype=float)
        return np.sign(values) * values**2

    n_columns = n_columns or min(4, len(panels))
    n_rows = -(-len(panels) // n_columns)
    scales = {}
    for _, matrix, kind in panels:
        top = float(np.nanmax(np.abs(matrix))) if np.size(matrix) else 1.0
        scales[kind] = max(scales.get(kind, 0.0), top, 1e-12)
    figure = Figure(figsize=(3.6 * n_columns, 3.3 * n_rows), layout="constrained")
    FigureCanvasAgg(figure)
    plots = []
    for i, (name, matrix, kind) in enumerate(panels):
        axes = figure.add_subplot(n_rows, n_columns, i + 1)
        top = scales[kind]
        low = -top if kind == "counts" else 0.0
        if sqrt_scale:
            norm = FuncNorm((signed_sqrt, signed_square), vmin=low, vmax=top)
            shown, low_shown, top_shown = signed_sqrt(matrix), float(signed_sqrt(low)), float(np.sqrt(top))
        else:
            norm = (
                TwoSlopeNorm(vmin=-top, vcenter=0.0, vmax=top)
                if kind == "counts"
                else FuncNorm((lambda v: v, lambda v: v), vmin=0.0, vmax=top)
            )
            shown, low_shown, top_shown = np.asarray(matrix, dtype=float), low, top
        cmap = "RdBu_r" if kind == "counts" else "Reds"
        image = axes.imshow(matrix, cmap=cmap, norm=norm, aspect="auto", interpolation="nearest")
        # RdBu11 runs blue -> red (negative blue, positive red); Reds9 dark -> light
        palette = list(RdBu11) if kind == "counts" else list(reversed(Reds9))
        mapper = LinearColorMapper(palette=palette, low=low_shown, high=top_shown)
        axes.set_title(name, fontsize=9)
        figure.colorbar(image, ax=axes, shrink=0.8)
        rows, cols = np.shape(matrix)
        plot = bokeh_figure(
            width=300,
            height=280,
            title=name,
            x_range=(0, cols),
            y_range=(rows, 0),
            tools="hover,pan,wheel_zoom,reset,save",
            tooltips=[
                ("row", "$y{0}"),
                ("column", "$x{0}"),
                ("signed sqrt of value" if sqrt_scale else "value", "@image{0.000}"),
            ],
        )
        plot.image(image=[shown], x=0, y=0, dw=cols, dh=rows, color_mapper=mapper)
        plots.append(plot)
    figure.suptitle(title + ("\n(colours: square-root scale)" if sqrt_scale else ""))
    _save_png(figure, path_png)
    grid = [plots[i : i + n_columns] for i in range(0, len(plots), n_columns)]
    _save_html(gridplot(grid), path_html, title)
    return [Path(path_png), Path(path_html)]


# ---------------------------------------------------------------------------
# report.md
# ---------------------------------------------------------------------------


def write_report(
    path,
    *,
    experiment,
    preset,
    settings,
    claims,
    sections,
    files,
    rows,
    diagnostics_rows,
    scale,
    run_info,
    version_info,
):
    """Compose report.md: claims and verdicts first, then the experiment's sections, files,
    diagnostics, timing, scale, settings and versions."""
    command = f"lpviz reproduce {experiment.name} --preset {preset}"
    for option in ("chains", "seed", "sampler"):
        value = run_info.get(option)
        if value is not None and not (option == "seed" and value == 0):
            command += f" --{option} {value}"
    lines = [
        f"# {experiment.title}",
        "",
        f"{experiment.paper}",
        "",
        f"Preset **{preset}**; {len(rows)} tasks (chains). Generated by `{command}`.",
        "",
    ]
    lines += [
        "## Claims",
        "",
        markdown_table(
            [c.__dict__ for c in claims],
            ["claim", "paper", "lpviz", "verdict"],
            ["claim", "the paper", "lpviz (this run)", "verdict"],
        ),
        "",
    ]
    rules = [c for c in claims if c.rule]
    if rules:
        lines += ["How each verdict is decided:", ""]
        lines += [f"- *{c.claim}*: {c.rule}" for c in rules] + [""]
    for heading, body in sections:
        lines += [f"## {heading}", "", body, ""]
    lines += ["## Files", ""]
    lines += [f"- `{Path(f).name}`" for f in files] + [""]
    lines += [
        "## Convergence diagnostics",
        "",
        "R-hat (rank-normalised split R-hat) and bulk/tail ESS over the chains of each setting, method and "
        "noised copy (ArviZ): the marginal log likelihood per iteration after burn-in (private chains; "
        "the log joint for the others), the rates at fixed cells and the topic-word weights after "
        f"Hungarian alignment, per saved sample. R-hat above {diagnostics.RHAT_OK} means the chains "
        "disagree: run longer. Every element is in `diagnostics.csv`.",
        "",
    ]
    if diagnostics_rows:
        keys = [
            k
            for k in diagnostics_rows[0]
            if k
            not in (
                "quantity",
                "elements",
                "chains",
                "draws",
                "rhat_max",
                "rhat_median",
                "share_rhat_above",
                "ess_bulk_min",
                "ess_tail_min",
                "note",
            )
        ]
        lines += [
            markdown_table(
                diagnostics_rows,
                keys + ["quantity", "chains", "draws", "rhat_max", "share_rhat_above", "ess_bulk_min", "ess_tail_min"],
            ),
            "",
        ]
    lines += ["## Wall-clock per task", "", "Invocations of this run (a resumed run keeps its finished tasks):", ""]
    for item in run_info.get("invocations", []):
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(item["started"]))
        threads = item.get("threads_per_worker") or "?"
        machine = (
            f" (machine: {item['cores']} cores, load average {item['load_average']:.1f} at start)"
            if item.get("load_average") is not None
            else ""
        )
        if not item["executed"] and not item.get("failed"):
            lines.append(
                f"- {when}: every task already done ({item['skipped']}); tables, figures and this report rewritten"
            )
            continue
        lines.append(
            f"- {when}: {item['scheduler']}, {item['workers']} worker(s) x {threads} kernel thread(s): "
            f"ran {item['executed']} task(s), found {item['skipped']} done, "
            f"{format_duration(item['seconds'])}{machine}"
        )
    lines += [
        "",
        "Per method (every task's seconds are in `tasks.csv`; seconds per iteration are wall-clock "
        "means after the first iteration):",
        "",
    ]
    timing = {}
    for row in rows:
        timing.setdefault(row["method"], []).append(row)
    timing_rows = []
    for method, members in timing.items():
        total = _finite(m["seconds_total"] for m in members)
        per_it = _finite(m["seconds_per_iteration"] for m in members)
        timing_rows.append(
            {
                "method": method,
                "tasks": len(members),
                "iterations": _iterations_run(members[0]),
                "median s/task": float(np.median(total)),
                "max s/task": float(total.max()),
                "ms/iteration (median over tasks)": 1000 * float(np.median(per_it)),
            }
        )
    lines += [
        markdown_table(
            timing_rows,
            ["method", "tasks", "iterations", "median s/task", "max s/task", "ms/iteration (median over tasks)"],
        ),
        "",
    ]
    lines += [
        "## Scale",
        "",
        "Wall-clock = per task, measured seconds per iteration x iterations; tasks packed on W workers "
        "(longest first, each worker one chain at a time, one kernel thread per worker: workers x "
        "threads = cores). The paper's grid uses per-iteration times measured at the paper's sizes: by "
        f"this run when its data have the paper's sizes, else by a probe (`lpviz reproduce "
        f"{experiment.name} --probe ITER`). Measured on a shared machine: the load average above says "
        "how shared.",
        "",
    ]
    scale_table = [
        {
            **row,
            "wall-clock": format_duration(row["wall_clock_seconds"]),
            "CPU time": format_duration(row["cpu_seconds"]),
        }
        for row in scale
    ]
    lines += [markdown_table(scale_table, ["grid", "tasks", "workers", "CPU time", "wall-clock", "source"]), ""]
    memory = _finite(row.get("peak_memory_gb") for row in rows)
    if memory.size:
        lines += [
            f"Peak resident memory of a worker process (over its tasks): {memory.max():.2f} GB; each worker "
            "of a cluster needs about that much.",
            "",
        ]
    lines += [
        "## Settings and seeds",
        "",
        "```json",
        json.dumps(settings, indent=2, default=str),
        "```",
        "",
        "Each task's data, noise and chain seeds are columns of `tasks.csv` (derived from the base seed "
        "and the task's labels: `lpviz.reproduce.grid.seed_for`).",
        "",
    ]
    lines += [
        "## Versions",
        "",
        markdown_table([{"package": k, "version": v} for k, v in version_info.items()], ["package", "version"]),
        "",
    ]
    return write_text(path, "\n".join(lines))
