"""From stored task results to DIR/NAME/: the CSV tables, the experiment's figures and report.md."""

import json
import os
from pathlib import Path

import numpy as np

from lpviz.reproduce import report as rp
from lpviz.reproduce.grid import ResultStore

__all__ = ["write_outputs", "write_probe", "read_probe"]

PROBE_FILE = "probe.csv"
RUN_FILE = "run.json"


def _traces(results):
    rows = []
    for record, arrays in results:
        log_joint, log_marginal = arrays["log_joint"], arrays["log_marginal"]
        seconds = arrays["iteration_seconds"]
        for i in range(len(log_joint)):
            rows.append(
                {
                    "task": record["task_id"],
                    "iteration": i + 1,
                    "log_joint": float(log_joint[i]),
                    "log_marginal": None if np.isnan(log_marginal[i]) else float(log_marginal[i]),
                    "seconds": float(seconds[i]),
                }
            )
    return rows


def read_probe(out_dir):
    """``({(method, setting): seconds per iteration}, how it was measured)`` from ``probe.csv``
    (``({}, None)`` when there is none)."""
    import pandas as pd

    path = Path(out_dir) / PROBE_FILE
    if not path.is_file():
        return {}, None
    frame = pd.read_csv(path)
    rates = {(row.method, row.setting): float(row.seconds_per_iteration) for row in frame.itertuples()}
    how = f"{int(frame['kernel_threads'].max())} kernel thread(s) per chain"
    if "peak_memory_gb" in frame and frame["peak_memory_gb"].notna().any():
        how += f", peak memory of a worker {frame['peak_memory_gb'].max():.1f} GB"
    return rates, how


def _paper_grid(experiment, chains):
    return [
        ((t.params["method"], t.params["labels"]["setting"]), t.params["n_iter"])
        for t in experiment.tasks("paper", chains=chains)
    ]


def write_outputs(experiment, out_dir, preset, settings, results, run_info):
    """Every file of DIR/NAME/ but the task results; returns the path of report.md."""
    out_dir = Path(out_dir)
    rows = rp.task_rows(results, experiment.label_keys)
    files = [rp.write_csv(out_dir / "tasks.csv", rows), rp.write_csv(out_dir / "traces.csv", _traces(results))]
    diagnostics_rows = rp.diagnostic_rows(results, experiment.group_keys)
    files.append(rp.write_csv(out_dir / "diagnostics.csv", diagnostics_rows))
    claims, sections, experiment_files = experiment.report(results, rows, out_dir, settings)
    claims = rp.gate_on_health(claims, rows)
    health = rp.health_section(rows)
    if health is not None:
        sections.append(health)
    files += experiment_files

    chains = settings.get("chains")
    paper_settings = experiment.settings("paper")
    probe, probe_how = read_probe(out_dir)
    if probe:
        sections.append(_probe_section(experiment, out_dir))
    if preset == "paper" or experiment.has_paper_sizes(preset):
        measured = {}
        for row in rows:
            measured.setdefault((row["method"], row["setting"]), []).append(row["seconds_per_iteration"])
        per_iteration = {key: float(np.median(values)) for key, values in measured.items()}
        source = "this run (the paper's data sizes)"
    else:
        per_iteration = probe
        source = f"probe at the paper's sizes ({probe_how})" if probe else None
    paper_grid = _paper_grid(experiment, paper_settings.get("chains"))
    local = [i for i in run_info.get("invocations", []) if i["scheduler"] == "LocalCluster" and i["executed"]]
    local_workers = local[-1]["workers"] if local else os.cpu_count()
    # a paper-preset run is the paper's grid: its own rows say it all
    scale = rp.scale_rows(
        rows,
        paper_grid if per_iteration and preset != "paper" else [],
        measured_at=f"preset {preset}",
        local_workers=local_workers or 1,
        paper_seconds_per_iteration=per_iteration,
    )
    for row in scale:
        if row["grid"] == "paper" and source:
            row["source"] = source
    if not per_iteration and preset != "paper":
        sections.append(
            (
                "Scale of the paper's grid",
                "No probe at the paper's sizes yet: run `lpviz reproduce "
                f"{experiment.name} --probe 5` to measure seconds per iteration there (one short chain "
                "per setting and method); the scale table then projects the paper's grid.",
            )
        )
    if (out_dir / PROBE_FILE).is_file():
        files.append(out_dir / PROBE_FILE)
    files.append(rp.write_csv(out_dir / "scale.csv", scale))
    settings_out = {
        "preset": preset,
        "settings": settings,
        "base_seed": run_info.get("seed"),
        "chains": run_info.get("chains") or chains,
    }
    return rp.write_report(
        out_dir / "report.md",
        experiment=experiment,
        preset=preset,
        settings=settings_out,
        claims=claims,
        sections=sections,
        files=files,
        rows=rows,
        diagnostics_rows=[r for r in diagnostics_rows],
        scale=scale,
        run_info=run_info,
        version_info=rp.versions(),
    )


def write_probe(experiment, out_dir, results, run_info):
    """probe.csv from the probe's tasks; the report, if its grid is complete, is rewritten with the projection."""
    out_dir = Path(out_dir)
    rows = []
    for record, _arrays in results:
        params = record["params"]
        rows.append(
            {
                "setting": params["labels"]["setting"],
                "method": params["method"],
                "method_label": record["method_label"],
                "shape": "x".join(map(str, record["shape"])),
                "n_components": params["n_components"],
                "iterations": params["n_iter"],
                "seconds_per_iteration": record["seconds_per_iteration"],
                "first_iteration_seconds": record["first_iteration_seconds"],
                "kernel_threads": record["kernel_threads"],
                "seconds_data": record["seconds_data"],
                "peak_memory_gb": record.get("peak_memory_gb"),
                "host": record["host"],
            }
        )
    path = rp.write_csv(out_dir / PROBE_FILE, rows)
    _write_probe_summary(experiment, out_dir, rows, run_info)
    manifest = out_dir / RUN_FILE
    if manifest.is_file():
        previous = json.loads(manifest.read_text())
        preset = previous["preset"]
        tasks = experiment.tasks(
            preset, chains=previous.get("chains"), seed=previous.get("seed", 0), sampler=previous.get("sampler")
        )
        store = ResultStore(out_dir)
        if all(store.path(t.id).is_file() for t in tasks):
            settings = {**experiment.settings(preset), "sampler": previous.get("sampler")}
            write_outputs(experiment, out_dir, preset, settings, store.read_all(tasks), previous)
    return path


def _write_probe_summary(experiment, out_dir, rows, run_info):
    """probe.md: the probe's seconds per iteration at the paper's sizes and the paper's grid projected
    from them on 2 and 16 workers (and this machine's cores), beside the run's load average."""
    rates = {(row["method"], row["setting"]): row["seconds_per_iteration"] for row in rows}
    grid = _paper_grid(experiment, experiment.settings("paper").get("chains"))
    seconds = [rates.get(group, np.nan) * n_iter for group, n_iter in grid]
    workers = sorted({2, os.cpu_count() or 1, rp.CLUSTER_WORKERS})
    projection = [
        {
            "workers": w,
            "tasks": len(grid),
            "CPU time": rp.format_duration(float(np.sum(seconds))),
            "wall-clock": rp.format_duration(rp.projected_seconds(seconds, w)),
        }
        for w in workers
    ]
    loads = [i.get("load_average") for i in run_info.get("invocations", []) if i.get("load_average") is not None]
    lines = [
        f"# {experiment.name}: probe at the paper's sizes",
        "",
        f"{run_info.get('probe_iterations')} iterations of one chain per setting and method (the first one, "
        "with its one-off costs, left out of seconds per iteration); sampler "
        f"{run_info.get('sampler') or 'default'}; load average at the start "
        f"{', '.join(f'{x:.1f}' for x in loads) or '-'} (a shared machine slows every number).",
        "",
        *_probe_table(rows),
        "## The paper's grid projected from the probe",
        "",
        "Per task: the probe's seconds per iteration of its (method, setting) x its iterations; tasks packed on "
        "W workers, longest first, one chain per worker at a time.",
        "",
        rp.markdown_table(projection, ["workers", "tasks", "CPU time", "wall-clock"]),
        "",
    ]
    return rp.write_text(Path(out_dir) / "probe.md", "\n".join(lines))


def _probe_table(rows):
    """The probe's seconds per iteration, first iteration and peak memory per (setting, method), and
    each method's time beside the first method's: lines of markdown."""
    return [
        rp.markdown_table(
            rows,
            ["setting", "method", "seconds_per_iteration", "first_iteration_seconds", "peak_memory_gb"],
            ["setting", "method", "s/iteration", "first iteration s", "peak GB"],
        ),
        "",
        *_method_ratios(rows),
    ]


def _probe_section(experiment, out_dir):
    """The report's section on the probe beside it (probe.csv): what one iteration of each method costs at
    the paper's sizes, the figures the paper grid's projection below rests on."""
    import pandas as pd

    rows = pd.read_csv(Path(out_dir) / PROBE_FILE).to_dict("records")
    return (
        "Probe at the paper's sizes",
        "Seconds per iteration of one short chain per setting and method at the paper's sizes "
        f"(`lpviz reproduce {experiment.name} --probe ITER`; its own summary: `probe.md`), the per-iteration "
        "figures of the paper grid's projection in the scale table:\n\n" + "\n".join(_probe_table(rows)),
    )


def _method_ratios(rows):
    """Lines comparing each method's seconds per iteration with the first method's, per setting."""
    by_setting = {}
    for row in rows:
        by_setting.setdefault(row["setting"], {})[row["method"]] = row["seconds_per_iteration"]
    lines = []
    for setting, methods in by_setting.items():
        if len(methods) < 2:
            continue
        (first, reference), *others = methods.items()
        lines.append(
            f"- {setting}: "
            + "; ".join(f"{name} / {first} = {value / reference:.2f}" for name, value in others if reference > 0)
        )
    return lines + [""] if lines else []
