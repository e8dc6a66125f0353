"""``lpviz reproduce table1``: the VI paper's Table 1 as a seeded, resumable task grid.

The table itself (the matrix, the schedule, the groups of rows and
:func:`run_table1`, which ``lpviz table1`` calls) is
:mod:`lpviz.reproduce.table1_runs`; its plots are
:mod:`lpviz.reproduce.table1_plots`. Here: :func:`table1_task` (one group of
rows for one chain, the grid's unit) and the :class:`Table1` experiment (the
grid, the summary over chains, the claims and the report). Every name of the
two other modules stays importable from here.
"""

from dataclasses import asdict

import numpy as np

from lpviz.reproduce.base import Experiment
from lpviz.reproduce.table1_plots import _plot_table1_html, plot_table1
from lpviz.reproduce.table1_runs import (
    GROUPS,
    NOISE_OVERESTIMATE,
    PAPER,
    PAPER_VI_ITERATIONS,
    QUICK,
    ROWS,
    Schedule,
    _run_groups,
    run_table1,
    table1_data,
    table1_settings,
)
from lpviz.reproduce.table1_runs import (
    PAPER_SECONDS_PER_ITERATION as PAPER_SECONDS_PER_ITERATION,  # re-exported: a table constant
)

__all__ = [
    "Schedule",
    "PAPER",
    "QUICK",
    "ROWS",
    "GROUPS",
    "table1_data",
    "run_table1",
    "plot_table1",
    "table1_settings",
]

# A row's MAE counts as the paper's when within this of it. The paper does not give the Gamma prior its
# matrix was drawn from (module docstring), so the rows cannot match to the digit; 0.05 is a quarter of
# the table's smallest MAE and still tells its levels apart (about 0.21, 0.40 and 0.47).
MAE_TOLERANCE = 0.05
# The paper's private VI number, and how far below the best constant's MAE a number must be to show learning
PAPER_PRIVATE_VI_MAE = 0.396
CONSTANT_MARGIN = 0.01
# A chain started from VI "reaches" the random start's MAE when at most this much above it
REACH_TOLERANCE = 0.01
# Private VI's iterations to converge count as the paper's 41-42 within this factor
VI_ITERATIONS_FACTOR = 2.0
# "this method offers a 5-10x speedup": VI's seconds at most 1/5 of the private chain's
PAPER_SPEEDUP = 5.0
# The paper's timed chain: "4000 iterations of burnin and 1000 to collect samples"
PAPER_MCMC_ITERATIONS = 5000
_TRACE_KINDS = {"mcmc": 0, "vi": 1}

# Iterations each group plans (a task's n_iter: what the scale section multiplies seconds per iteration by);
# VI to convergence plans the paper's 42 iterations.
_PLANNED = {
    "naive-mcmc": lambda s: s.naive_burn_in + s.samples,
    "private-mcmc": lambda s: max(s.private_burn_ins) + s.samples,
    "naive-vi": lambda s: max(s.naive_vi_iterations),
    "private-vi": lambda s: min(s.max_vi_iterations, PAPER_VI_ITERATIONS),
    "lpviz-vi": lambda s: 2 * s.max_vi_iterations,
    "vi-init": lambda s: min(s.max_vi_iterations, PAPER_VI_ITERATIONS) + max(s.vi_init_burn_ins) + s.samples,
}
# The MCMC run of a group whose chain the convergence diagnostics read
_CHAIN_OF_GROUP = {"naive-mcmc": "naive MCMC", "private-mcmc": "private MCMC", "vi-init": "private MCMC, VI init"}


def _number(value):
    """A ratio for a claim's text: three decimals, or "-" when it was not measured."""
    return "-" if value is None or not np.isfinite(value) else f"{value:.3f}"


def _schedule_from(spec):
    """A :class:`Schedule` from its JSON form (lists for tuples)."""
    return Schedule(**{key: tuple(value) if isinstance(value, list) else value for key, value in spec.items()})


def _plain(value):
    """JSON-safe: numpy scalars as Python numbers."""
    return value.item() if isinstance(value, np.generic) else value


def table1_task(params):
    """One group of Table 1's rows (:data:`GROUPS`) for one chain: a pure function of ``params``.

    ``params``: ``method`` (the group), ``data`` (``n_rows``, ``n_cols``,
    ``n_components``, ``epsilon``, ``seed``: :func:`table1_data`),
    ``schedule`` (a :class:`Schedule` as a dict), ``sampler``,
    ``bessel_point``, ``noise_split``, ``chain_seed`` (the runs' seed: the
    same data for every chain), ``diagnostics``. Runs
    :func:`run_table1`'s machinery for that one group and returns its rows
    (``record["rows"]``), the MAE of each row (``extra_scores``), every
    iteration's seconds and traces, the MAE traces for the plot and, for the
    groups with a chain, what the convergence diagnostics read.
    """
    import os
    import socket
    import time

    from lpviz import diagnostics
    from lpviz._parallel import n_threads
    from lpviz.reproduce.chains import _peak_memory_gb, task_started

    started, clock = task_started()
    group, data = params["method"], params["data"]
    rows, context = _run_groups(
        n_rows=data["n_rows"],
        n_cols=data["n_cols"],
        n_components=data["n_components"],
        epsilon=data["epsilon"],
        schedule=_schedule_from(params["schedule"]),
        groups=[group],
        sampler=params["sampler"],
        bessel_point=params["bessel_point"],
        noise_split=params["noise_split"],
        random_state=data["seed"],
        chain_seed=params["chain_seed"],
        callback=None,
    )
    runs = list(dict.fromkeys(run for run, *_ in context.iterations))
    seconds = np.array([item[2] for item in context.iterations], dtype=float)
    arrays = {
        "iteration_seconds": seconds,
        "log_joint": np.array([item[3] for item in context.iterations], dtype=float),
        "log_marginal": np.array([item[4] for item in context.iterations], dtype=float),
        "iteration_run": np.array([runs.index(item[0]) for item in context.iterations], dtype=np.int64),
    }
    trace_runs = list(dict.fromkeys(item["trace"] for item in context.traces))
    arrays.update(
        {
            "trace_run": np.array([trace_runs.index(item["trace"]) for item in context.traces], dtype=np.int64),
            "trace_kind": np.array([_TRACE_KINDS[item["kind"]] for item in context.traces], dtype=np.int64),
            "trace_seconds": np.array([item["seconds"] for item in context.traces], dtype=float),
            "trace_iteration": np.array([item["iteration"] for item in context.traces], dtype=np.int64),
            "trace_rate_mae": np.array([item["rate_mae"] for item in context.traces], dtype=float),
        }
    )
    record = {}
    chain_run = _CHAIN_OF_GROUP.get(group)
    if chain_run is not None:  # a chain: what the convergence diagnostics read
        posterior, release = context.posteriors[chain_run], context.release
        probe = params.get("diagnostics") or {}
        cells = diagnostics.probe_cells(
            release.observed_cells,
            probe.get("cells", diagnostics.N_PROBE_CELLS),
            random_state=probe.get("cells_seed", 0),
        )
        columns = diagnostics.probe_columns(
            np.asarray(release.Y_obs).sum(axis=0), probe.get("columns", diagnostics.N_PROBE_COLUMNS)
        )
        summary = diagnostics.chain_summary(posterior, cells=cells, columns=columns)
        arrays.update(
            {
                "trace": summary["trace"],
                "rates": summary["rates"],
                "topics": summary["topics"],
                "topics_mean": summary["topics_mean"],
                "cells_rows": cells[0],
                "cells_cols": cells[1],
                "columns": columns,
            }
        )
        record["trace_name"] = summary["trace_name"]
    sampled = float(seconds.sum())
    rows = [{key: _plain(value) for key, value in row.items()} for row in rows]
    record.update(
        {
            "rows": rows,
            "runs": runs,
            "trace_runs": trace_runs,
            "scores": {"iterations": int(seconds.size)},
            "extra_scores": {f"{row['row']}_mae": row["mae"] for row in rows},
            "method_label": rows[0]["method"],
            "shape": [data["n_rows"], data["n_cols"]],
            "n_saved": None,
            "alpha_mean": float(np.mean(context.release.alpha)),
            "epsilon": data["epsilon"],
            "N": 1,
            "heldout_cells": 0,
            "seconds_total": time.perf_counter() - clock,
            # building the matrix, loading the kernels and scoring: the rest of the task's time
            "seconds_data": time.perf_counter() - clock - sampled,
            "seconds_sampling": sampled,
            "seconds_per_iteration": float(np.mean(seconds[1:] if seconds.size > 1 else seconds)),
            "first_iteration_seconds": float(seconds[0]),
            "started": started,
            "finished": time.time(),
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "peak_memory_gb": _peak_memory_gb(),
            "kernel_threads": n_threads(),
        }
    )
    return {"record": record, "arrays": arrays}


def _summary(runs):
    """One row per table row: the paper's numbers beside lpviz's mean (sd) over chains."""
    out = []
    for key, (_, method, iterations, paper_mae, paper_seconds) in ROWS.items():
        members = [run for run in runs if run["row"] == key]
        if not members:
            continue
        maes = np.array([run["mae"] for run in members], dtype=float)
        seconds = np.array([run["seconds"] for run in members], dtype=float)

        def mean_of(field, members=members):
            values = [run.get(field) for run in members]
            values = [v for v in values if v is not None and np.isfinite(v)]
            return float(np.mean(values)) if values else None

        # a flag of any chain flags the row: one collapsed chain is enough to distrust its mean
        flags = [run.get("flags") for run in members]
        out.append(
            {
                "row": key,
                "method": method,
                "iterations": iterations,
                "paper_mae": paper_mae,
                "mae": float(maes.mean()),
                "mae_sd": float(maes.std(ddof=1)) if maes.size > 1 else 0.0,
                "mae_minus_paper": float(maes.mean() - paper_mae),
                "mass_ratio": mean_of("mass_ratio"),
                "flags": None if None in flags else ", ".join(sorted({w for f in flags for w in f.split(", ") if w})),
                "best_constant_mae": mean_of("best_constant_mae"),
                "independence_mae": mean_of("independence_mae"),
                "paper_seconds": paper_seconds,
                "seconds": float(seconds.mean()),
                "iterations_run": members[0]["iterations_run"],
                "chains": len(members),
            }
        )
    return out


class Table1(Experiment):
    """The VI paper's Table 1 as a task grid: every group of rows (:data:`GROUPS`) x chain.

    Each task runs one group of the table on the same noised matrix
    (:func:`table1_task`, :func:`run_table1`'s machinery; chains differ only in
    their runs' seeds). ``lpviz table1`` runs the same function in one process
    with knobs for exploring (other sizes, ``--groups``, ``--mcmc-scale``);
    this is the seeded, resumable grid with chains, verdicts and a report.
    """

    name = "table1"
    title = "Table 1 (variational paper): MCMC vs CAVI, MAE against the true rates"
    paper = (
        "Schofield, Wu, Schein, Wallach et al. Variational inference for locally private Poisson "
        "factorization, Table 1 and section 5 (schofield_variational_locally_private_pf.tex)."
    )
    requires = ("lpviz.vi",)
    presets = {
        "tiny": {
            "n_rows": 40,
            "n_cols": 30,
            "n_components": 3,
            "epsilon": 1.0,
            "schedule": asdict(QUICK),
            "chains": 2,
            "bessel_point": "mode",
            "noise_split": "components",
        },
        # the paper's matrix, every chain at a tenth of the paper's length (VI runs unchanged)
        "quick": {
            "n_rows": 1000,
            "n_cols": 1000,
            "n_components": 50,
            "epsilon": 1.0,
            "schedule": asdict(PAPER.scaled(0.1)),
            "chains": 2,
            "bessel_point": "mode",
            "noise_split": "components",
        },
        "paper": {
            "n_rows": 1000,
            "n_cols": 1000,
            "n_components": 50,
            "epsilon": 1.0,
            "schedule": asdict(PAPER),
            "chains": 1,
            "bessel_point": "mode",
            "noise_split": "components",
        },
    }
    group_keys = ("setting", "method")
    label_keys = ("setting",)
    task_function = staticmethod(table1_task)

    def has_paper_sizes(self, preset):
        return preset in ("quick", "paper")  # tiny's matrix is small; quick's is the paper's

    def tasks(self, preset, chains=None, seed=0, sampler=None):
        from lpviz.reproduce.grid import Task, seed_for

        settings = self.settings(preset)
        chains = chains or settings["chains"]
        schedule = _schedule_from(settings["schedule"])
        data = {
            "source": "table1",
            "n_rows": settings["n_rows"],
            "n_cols": settings["n_cols"],
            "n_components": settings["n_components"],
            "epsilon": settings["epsilon"],
            "seed": seed_for(seed, "data"),
        }
        tasks = []
        for group in GROUPS:
            for chain in range(chains):
                params = {
                    "labels": {"setting": group, "chain": chain},
                    "method": group,
                    "data": data,
                    "schedule": asdict(schedule),
                    "sampler": sampler or "bessel",
                    "bessel_point": settings["bessel_point"],
                    "noise_split": settings["noise_split"],
                    "n_components": settings["n_components"],
                    "n_iter": _PLANNED[group](schedule),
                    "chain_seed": seed_for(seed, "chain", group, chain),
                    "diagnostics": {"cells": 20, "columns": 100},
                }
                tasks.append(Task(f"{group}--chain{chain}", params))
        return tasks

    def probe_tasks(self, iterations, seed=0, sampler=None):
        """Each group for ``iterations`` iterations at the paper's size (one chain)."""
        from lpviz.reproduce.grid import Task

        if iterations < 3:
            raise ValueError(
                f"a table1 probe needs at least 3 iterations (the first carries one-off costs and "
                f"each chain saves a sample after two burn-ins), got {iterations}"
            )
        short = Schedule(
            naive_burn_in=iterations - 1,
            private_burn_ins=(iterations - 1, iterations - 2),
            vi_init_burn_ins=(iterations - 2, iterations - 1),
            samples=1,
            thin=1,
            naive_vi_iterations=(iterations - 1, iterations),
            max_vi_iterations=iterations,
            trace_every=1,
        )
        probes = []
        for task in self.tasks("paper", chains=1, seed=seed, sampler=sampler):
            params = dict(
                task.params,
                schedule=asdict(short),
                n_iter=_PLANNED[task.params["method"]](short),
                labels={**task.params["labels"], "probe": True},
            )
            probes.append(Task(f"probe-{task.id}", params))
        return probes

    def report(self, results, rows, out_dir, settings):
        import pandas as pd

        from lpviz.reproduce import report as rp

        runs = [
            {**row, "chain": record["params"]["labels"]["chain"]} for record, _ in results for row in record["rows"]
        ]
        summary = _summary(runs)
        by_row = {row["row"]: row for row in summary}
        traces = []
        for record, arrays in results:
            for i in range(arrays["trace_seconds"].size):
                traces.append(
                    {
                        "chain": record["params"]["labels"]["chain"],
                        "trace": record["trace_runs"][arrays["trace_run"][i]],
                        "kind": "vi" if arrays["trace_kind"][i] == _TRACE_KINDS["vi"] else "mcmc",
                        "seconds": float(arrays["trace_seconds"][i]),
                        "iteration": int(arrays["trace_iteration"][i]),
                        "rate_mae": float(arrays["trace_rate_mae"][i]),
                    }
                )
        files = [
            rp.write_csv(out_dir / "table1.csv", summary),
            rp.write_csv(out_dir / "table1_runs.csv", runs),
            rp.write_csv(out_dir / "table1_traces.csv", traces),
        ]
        first_chain = pd.DataFrame([t for t in traces if t["chain"] == min(t["chain"] for t in traces)])
        title = "VI paper, Table 1: MAE against time (markers: the table's rows, mean over chains)"
        files.append(plot_table1(pd.DataFrame(summary), first_chain, out_dir / "table1.png"))
        files.append(_plot_table1_html(summary, first_chain, out_dir / "table1.html", title))

        claims = [
            self._row_claim(by_row[key], first=i == 0) for i, key in enumerate(key for key in ROWS if key in by_row)
        ]
        claims += self._order_claims(by_row)
        claims += self._timing_claims(by_row, rows, runs)
        schedule = settings["schedule"]
        table = rp.markdown_table(
            summary,
            [
                "method",
                "iterations",
                "paper_mae",
                "mae",
                "mae_sd",
                "best_constant_mae",
                "independence_mae",
                "mass_ratio",
                "flags",
                "iterations_run",
                "seconds",
                "paper_seconds",
                "chains",
            ],
            [
                "method",
                "paper's iterations",
                "paper MAE",
                "lpviz MAE",
                "sd",
                "best constant",
                "independence",
                "mass ratio",
                "health",
                "lpviz iterations",
                "lpviz s",
                "paper s (derived)",
                "chains",
            ],
        )
        sections = [
            (
                "Table",
                "MAE of the posterior mean rates (VI: `E_q[mu]`) against the true rates over every cell "
                "(`lpviz.metrics.score(...)['rate_mae']`), mean and sd over chains, beside its baselines (the MAE "
                "of the best constant rate and of the row x column means fit, both estimated from the release "
                "alone) and the fit's health (mass ratio: the fitted rates' total over the noised counts' total; "
                "flags: collapsed, non-finite, not mixed; lpviz.metrics.score); lpviz s: wall-clock of the "
                "iterations (a VI-started chain's includes its VI fit); paper s: its iterations x its stated 0.8 s "
                "per MCMC and 2.8 s per VI iteration (it gives no times per row). Every chain's rows are in "
                "`table1_runs.csv`, the MAE traces in `table1_traces.csv`.\n\n" + table,
            ),
            (
                "Data",
                f"One {settings['n_rows']} x {settings['n_cols']} matrix, K = {settings['n_components']}: "
                "theta and phi iid Gamma(shape 0.1, rate 1) (the prior the models fit with; the paper says only "
                '"a Gamma prior"), Y ~ Poisson(theta phi), noised at eps/N = '
                f"{settings['epsilon']:g} (a seeded simulation). Every chain sees the same noised matrix; chains "
                "differ in their runs' seeds. MCMC posteriors average samples `thin` apart after burn-in (the "
                f"paper: 10 samples 100 apart). Schedule: naive MCMC {schedule['naive_burn_in']} + "
                f"{schedule['samples']}, private MCMC {tuple(schedule['private_burn_ins'])} + {schedule['samples']}, "
                f"VI-started chains {tuple(schedule['vi_init_burn_ins'])} + {schedule['samples']}, thin "
                f"{schedule['thin']}; naive VI {tuple(schedule['naive_vi_iterations'])} iterations; private VI to "
                "convergence (relative ELBO change below lpviz.vi.DEFAULT_TOL). Private chains: the "
                f"{results[0][0]['params']['sampler']} sampler; CAVI with "
                f"q(m) at the Bessel {settings['bessel_point']} ({settings['noise_split']} split).",
            ),
            (
                "Two commands, one implementation",
                "`lpviz table1` and `lpviz reproduce table1` both run "
                "`lpviz.reproduce.table1.run_table1`'s groups of rows. `lpviz table1` runs them in one process "
                "with knobs for exploring (`--size`, `--components`, `--groups`, `--mcmc-scale`, `--noise_split`) "
                "and prints the table; `lpviz reproduce table1` is the seeded grid of groups x chains on Dask "
                "(resumable), with diagnostics, verdicts and this report.",
            ),
        ]
        return claims, sections, files

    @staticmethod
    def _row_claim(row, first):
        from lpviz.reproduce import report as rp

        health = (
            f"; mass ratio {_number(row.get('mass_ratio'))}, {row['flags'] or 'healthy'}; best constant "
            f"{row['best_constant_mae']:.3f}, independence fit {row['independence_mae']:.3f}"
            if row.get("best_constant_mae") is not None and row.get("independence_mae") is not None
            else ""
        )
        if row["row"] == "private-vi-default":
            verdict, problems = rp.trusted_verdict([row["mae"] < row["paper_mae"]], {"lpviz default": row})
            return rp.Claim(
                "lpviz's default private VI (arithmetic): healthy, and beats the paper's private VI and the baselines",
                f"private VI MAE {row['paper_mae']:.3f} (the paper's variant)",
                f"MAE {row['mae']:.3f} (sd {row['mae_sd']:.3f} over {row['chains']} chain(s); "
                f"{row['iterations_run']} iterations){health}" + (f" [{'; '.join(problems)}]" if problems else ""),
                verdict,
                "lpviz's default private VI below the paper's private VI MAE, healthy and below both baselines",
            )
        verdict, problems = rp.trusted_verdict(
            [abs(row["mae"] - row["paper_mae"]) <= MAE_TOLERANCE], {row["method"]: row}
        )
        return rp.Claim(
            f"{row['method']}, {row['iterations']}: MAE {row['paper_mae']:.3f}",
            f"MAE {row['paper_mae']:.3f} ({row['iterations']} iterations)",
            f"MAE {row['mae']:.3f} (sd {row['mae_sd']:.3f} over {row['chains']} chain(s); "
            f"{row['iterations_run']} iterations){health}" + (f" [{'; '.join(problems)}]" if problems else ""),
            verdict,
            f"this and every row's claim: |lpviz MAE - paper MAE| <= {MAE_TOLERANCE} (the paper's "
            "prior for theta and phi is unknown: the rows cannot match to the digit), and the fit healthy "
            "(lpviz.metrics.score's health: not collapsed, finite, mixed) with an MAE below both baselines "
            "(the best constant and the independence fit, estimated from the release)"
            if first
            else "",
        )

    @staticmethod
    def _order_claims(by_row):
        from lpviz.reproduce import report as rp

        def mae(key):
            return by_row[key]["mae"] if key in by_row else None

        def gated(checks, winners, text):
            verdict, problems = rp.trusted_verdict(checks, {by_row[k]["method"]: by_row[k] for k in winners})
            return verdict, text + (f" [{'; '.join(problems)}]" if problems else "")

        claims = []
        naive, private = mae("naive-mcmc"), [mae("private-mcmc-3000"), mae("private-mcmc-2000")]
        if naive is not None and None not in private:
            verdict, text = gated(
                [m < naive for m in private],
                ["private-mcmc-3000", "private-mcmc-2000"],
                f"{private[0]:.3f} and {private[1]:.3f} vs {naive:.3f}",
            )
            claims.append(
                rp.Claim(
                    "Private MCMC beats naive MCMC",
                    "0.208 and 0.224 vs 0.396",
                    text,
                    verdict,
                    "both private MCMC rows' MAE below naive MCMC's, each private row healthy and below both baselines",
                )
            )
        naive_vi = [mae("naive-vi-42"), mae("naive-vi-100")]
        for key, who in (("private-vi", "Private VI"), ("private-vi-default", "Private VI (lpviz default)")):
            private_vi = mae(key)
            if private_vi is not None and None not in naive_vi:
                verdict, text = gated(
                    [private_vi < m for m in naive_vi],
                    [key],
                    f"{private_vi:.3f} vs {naive_vi[0]:.3f} and {naive_vi[1]:.3f}",
                )
                claims.append(
                    rp.Claim(
                        f"{who} beats naive VI",
                        "0.396 vs 0.492 and 0.465",
                        text,
                        verdict,
                        "the private VI row's MAE below both naive VI rows', healthy and below both baselines",
                    )
                )
        private_vi = mae("private-vi")
        if private_vi is not None and private[0] is not None:
            verdict, text = gated(
                [private[0] < private_vi], ["private-mcmc-3000"], f"{private[0]:.3f} vs {private_vi:.3f}"
            )
            claims.append(
                rp.Claim(
                    "Private MCMC is more accurate than private VI (the price of the mode and mean field)",
                    "0.208 vs 0.396",
                    text,
                    verdict,
                    "the longer private MCMC row's MAE below private VI's, healthy and below both baselines",
                )
            )
        claims += Table1._which_vi_claims(by_row)
        pairs = [("vi-init-1000", "private-mcmc-2000"), ("vi-init-2000", "private-mcmc-3000")]
        pairs = [(a, b) for a, b in pairs if a in by_row and b in by_row]
        if pairs:
            verdict, text = gated(
                [mae(a) <= mae(b) + REACH_TOLERANCE for a, b in pairs],
                [a for a, _ in pairs],
                "; ".join(
                    f"{mae(a):.3f} ({by_row[a]['iterations_run']}) vs {mae(b):.3f} ({by_row[b]['iterations_run']})"
                    for a, b in pairs
                ),
            )
            claims.append(
                rp.Claim(
                    "Started from the VI fit, private MCMC reaches a random start's MAE with 1000 fewer iterations",
                    "0.223 (1000 + 1000) vs 0.224 (2000 + 1000); 0.208 (2000 + 1000) vs 0.208 (3000 + 1000)",
                    text,
                    verdict,
                    f"each VI-started row's MAE at most {REACH_TOLERANCE} above the random start's row with 1000 "
                    "(scaled with the preset) more burn-in iterations, each VI-started row healthy and below "
                    "both baselines",
                )
            )
        return claims

    @staticmethod
    def _which_vi_claims(by_row):
        """Which private VI gives the paper's 0.396, that 0.396 is the best constant's MAE here, and the
        paper's overestimated-noise experiment."""
        from lpviz.reproduce import report as rp

        claims = []
        paper_vi = PAPER_PRIVATE_VI_MAE
        reference = by_row.get("private-vi") or by_row.get("private-vi-default")
        if reference is not None and reference.get("best_constant_mae") is not None:
            constant = reference["best_constant_mae"]
            rows = [by_row[k] for k in ("private-vi", "private-vi-default") if k in by_row]
            closest = min(rows, key=lambda row: abs(row["mae"] - paper_vi))
            measured = "; ".join(
                f"{row['method']}: {row['mae']:.3f} ({row['mae'] - paper_vi:+.3f} from 0.396; mass ratio "
                f"{_number(row['mass_ratio'])}, {row['flags'] or 'healthy'})"
                for row in rows
            )
            claims.append(
                rp.Claim(
                    "The paper's private VI (0.396) learns more than a constant rate",
                    "private VI MAE 0.396",
                    f"the best constant rate (the median rate, estimated from the release alone) scores {constant:.3f} "
                    f"on this generator: 0.396 is {paper_vi - constant:+.3f} from it. Closest to 0.396: "
                    f"{closest['method']}. {measured}",
                    rp.verdict_of([paper_vi < constant - CONSTANT_MARGIN]),
                    f"the paper's 0.396 at least {CONSTANT_MARGIN} below the best constant's MAE on lpviz's Table 1 "
                    "data (the generator reproduces the paper's naive rows)",
                )
            )
        over, plain = by_row.get("private-vi-overestimated"), by_row.get("private-vi")
        if over is not None and plain is not None:
            verdict, problems = rp.trusted_verdict([over["mae"] < plain["mae"]], {over["method"]: over})
            claims.append(
                rp.Claim(
                    "Fitting private VI with an overestimate of the noise improves it (the paper's section 5)",
                    '"if we perform inference with an overestimate of the private noise, we can produce much better '
                    'topics than the naive method" (Enron; no number)',
                    f"noise scale x{NOISE_OVERESTIMATE:g}: MAE {over['mae']:.3f} "
                    f"(mass ratio {_number(over['mass_ratio'])}, "
                    f"{over['flags'] or 'healthy'}) vs {plain['mae']:.3f} at the true noise"
                    + (f" [{'; '.join(problems)}]" if problems else ""),
                    verdict,
                    f"the paper's variant fitted at {NOISE_OVERESTIMATE:g}x the noise scale below its MAE at the true "
                    "noise, healthy and below both baselines (on the Table 1 data, not Enron)",
                )
            )
        return claims

    @staticmethod
    def _timing_claims(by_row, task_rows, runs):
        from lpviz.reproduce import report as rp

        def per_iteration(group):
            values = [row["seconds_per_iteration"] for row in task_rows if row["method"] == group]
            return float(np.median(values)) if values else None

        claims = []
        vi, mcmc, naive = per_iteration("private-vi"), per_iteration("private-mcmc"), per_iteration("naive-mcmc")
        threads = sorted({row.get("kernel_threads") for row in task_rows if row.get("kernel_threads")})
        if vi is not None and mcmc is not None:
            naive_text = f", naive MCMC {naive:.3g} s" if naive is not None else ""
            claims.append(
                rp.Claim(
                    "A VI iteration takes longer than an MCMC iteration (2.8 s vs 0.8 s, single-threaded)",
                    "private VI 2.8 s, private MCMC 0.8 s per iteration (VI/MCMC = 3.5)",
                    f"private VI {vi:.3g} s, private MCMC {mcmc:.3g} s{naive_text} per iteration (VI/MCMC = "
                    f"{vi / mcmc:.2g}; {', '.join(map(str, threads)) or '?'} kernel thread(s) per task, median over "
                    "chains, a shared machine)",
                    rp.verdict_of([vi > mcmc]),
                    "lpviz's private VI iteration slower than its private MCMC iteration",
                )
            )
        row = by_row.get("private-vi")
        if row is not None:
            iterations = float(np.mean([run["iterations_run"] for run in runs if run["row"] == "private-vi"]))
            low, high = PAPER_VI_ITERATIONS / VI_ITERATIONS_FACTOR, PAPER_VI_ITERATIONS * VI_ITERATIONS_FACTOR
            claims.append(
                rp.Claim(
                    "Private VI converges in 41-42 iterations",
                    "41-42 iterations (ten trials)",
                    f"{iterations:.3g} iterations (mean over chains)",
                    rp.verdict_of([low <= iterations <= high]),
                    f"lpviz's private VI converges within a factor {VI_ITERATIONS_FACTOR:g} of 42 "
                    f"iterations ({low:g} to {high:g})",
                )
            )
            if mcmc is not None:
                chain_seconds = mcmc * PAPER_MCMC_ITERATIONS
                speedup = chain_seconds / row["seconds"]
                claims.append(
                    rp.Claim(
                        "VI is 5-10x faster than MCMC end to end",
                        f"VI 42 x 2.8 s = {42 * 2.8:.0f} s vs MCMC (4000 burn-in + 1000) x 0.8 s = "
                        f"{PAPER_MCMC_ITERATIONS * 0.8:.0f} s per chain; on 32 cores 1 vs 5 minutes (16 vs 160 CPU "
                        'minutes): "a 5-10x speedup"',
                        f"private VI {row['seconds']:.3g} s vs private MCMC {PAPER_MCMC_ITERATIONS} x {mcmc:.3g} s = "
                        f"{chain_seconds:.3g} s: {speedup:.2g}x",
                        rp.verdict_of([speedup >= PAPER_SPEEDUP]),
                        f"private MCMC's measured seconds per iteration x the paper's {PAPER_MCMC_ITERATIONS} "
                        f"iterations at least {PAPER_SPEEDUP:g}x private VI's seconds to converge",
                    )
                )
        return claims
