"""What an experiment is: presets, a task grid, a report.

An :class:`Experiment` subclass names itself, the modules it needs, its
presets (``tiny`` for tests, ``quick`` for minutes on a laptop, ``paper``
for the paper's sizes and iteration counts), builds its task grid and turns
the finished tasks into claims, tables and figures. MCMC experiments build
their grid with :func:`chain_grid`: settings x methods x noised copies x
chains, every seed derived from the base seed and the task's labels.
"""

import copy
import importlib.util

from lpviz.reproduce.chains import chain_task
from lpviz.reproduce.grid import Task, seed_for

__all__ = ["Experiment", "Setting", "NotAvailableError", "chain_grid"]

PRESETS = ("tiny", "quick", "paper")


class NotAvailableError(RuntimeError):
    """The experiment needs a module this installation does not have yet."""


class Experiment:
    """One figure or table of a paper as a task grid and a report.

    Subclasses set ``name`` (registry key and output folder), ``title``,
    ``paper`` (what it reproduces), ``requires`` (modules that must be
    importable), ``presets`` ({preset: settings dict}) and implement
    :meth:`tasks` and :meth:`report`; :meth:`prepare` warms caches in the
    driver before tasks are sent out.
    """

    name: str | None = None
    title = ""
    paper = ""
    requires: tuple[str, ...] = ()
    presets: dict[str, dict] = {}
    # labels that name a group of chains for the diagnostics, and columns of tasks.csv
    group_keys: tuple[str, ...] = ("setting", "method", "copy")
    label_keys: tuple[str, ...] = ("setting",)
    task_function = staticmethod(chain_task)
    # False for an experiment registered before its task grid is written (a stub)
    wired = True
    # True when every preset has the paper's data sizes (only iterations and chains differ), so a
    # run's seconds per iteration project the paper's grid without a probe
    paper_sizes = False

    def has_paper_sizes(self, preset):
        """True when ``preset``'s data have the paper's sizes (its seconds per iteration project the
        paper's grid without a probe); default: :attr:`paper_sizes` for every preset."""
        return self.paper_sizes

    def missing(self):
        """Modules in ``requires`` that cannot be imported (empty when the experiment can run)."""
        return [module for module in self.requires if importlib.util.find_spec(module) is None]

    def unavailable(self):
        """Why the experiment cannot run here (None when it can)."""
        missing = self.missing()
        if missing:
            return f"needs {', '.join(missing)}"
        if not self.wired:
            return f"{', '.join(self.requires)} present but the experiment is not wired yet"
        return None

    def check_available(self):
        missing = self.missing()
        if missing:
            raise NotAvailableError(
                f"{self.name} is not available yet: needs {', '.join(missing)} "
                f"({self.paper}); it lands with the branch that adds {missing[0]}"
            )

    def settings(self, preset):
        """A copy of the preset's settings."""
        if preset not in self.presets:
            raise ValueError(f"{self.name} has no preset {preset!r}; choose one of {', '.join(self.presets)}")
        return copy.deepcopy(self.presets[preset])

    def tasks(self, preset, chains=None, seed=0, sampler=None):
        """The grid of ``preset``: a list of :class:`~lpviz.reproduce.grid.Task`. ``sampler``: the
        private method's sampler (None: the registry's default, the paper's Bessel route)."""
        raise NotImplementedError

    def probe_tasks(self, iterations, seed=0, sampler=None):
        """One short chain per distinct (setting, method) of the paper's grid at the paper's sizes:
        their seconds per iteration project the paper's wall-clock."""
        if iterations < 2:
            raise ValueError(
                f"a probe needs at least 2 iterations (the first one carries one-off costs), got {iterations}"
            )
        seen, probes = set(), []
        for task in self.tasks("paper", chains=1, seed=seed, sampler=sampler):
            params = copy.deepcopy(task.params)
            key = (params["labels"]["setting"], params["method"])
            if key in seen:
                continue
            seen.add(key)
            params.update(n_iter=int(iterations), burn_in=int(iterations) - 1, thin=1, keep={})
            params["labels"]["probe"] = True
            probes.append(Task(f"probe-{task.id}", params))
        return probes

    def prepare(self, settings, seed=0):
        """Build what every task reads (e.g. the Enron matrix into the on-disk cache) once, in the driver."""

    def report(self, results, rows, out_dir, settings):
        """``(claims, sections, files)``: the paper's claims with verdicts, markdown sections
        ``[(heading, body)]`` and the files written (CSV, PNG, HTML)."""
        raise NotImplementedError

    def __repr__(self):
        return f"<experiment {self.name}: {self.title}>"


class Setting(dict):
    """One setting of a grid: ``label`` (text), ``values`` (the plotted/grouped labels, e.g.
    ``{"epsilon": 2.5}``), ``noise`` (noise spec without seed), ``noise_keys`` (which values
    only concern the noise), ``truth_key`` (settings with the same truth share one non-private
    fit), ``data`` (data spec overrides), ``params`` (task parameter overrides)."""

    def __init__(self, label, values, noise, *, noise_keys=(), truth_key="", data=None, params=None):
        super().__init__(
            label=label,
            values=dict(values),
            noise=dict(noise),
            noise_keys=tuple(noise_keys),
            truth_key=truth_key,
            data=dict(data or {}),
            params=dict(params or {}),
        )


def _uses_truth(method):
    from lpviz import methods

    return methods.get(method).uses_truth


def chain_grid(experiment, *, data, settings, methods, copies, chains, seed, common, sampler=None):
    """Tasks of settings x methods x noised copies x chains for :func:`~lpviz.reproduce.chains.chain_task`.

    A method that fits the true counts (non-private) runs once per distinct
    ``truth_key`` (its fit does not depend on the noise) and on copy 0 only.
    Seeds: data ``seed_for(seed, "data")`` (one data set for the grid),
    noise ``seed_for(seed, "noise", setting, copy)``, chain
    ``seed_for(seed, "chain", setting, method, copy, chain)``. ``sampler`` goes to the private
    method (None: its default).
    """
    if chains < 1 or copies < 1:
        raise ValueError(f"chains and copies must be >= 1, got chains={chains}, copies={copies}")
    tasks = []
    truth_done = set()
    for setting in settings:
        for method in methods:
            truth_fit = _uses_truth(method)
            if truth_fit:
                if setting["truth_key"] in truth_done:
                    continue
                truth_done.add(setting["truth_key"])
            label = (
                f"true data{', ' + setting['truth_key'] if setting['truth_key'] else ''}"
                if truth_fit
                else setting["label"]
            )
            values = {k: v for k, v in setting["values"].items() if not (truth_fit and k in setting["noise_keys"])}
            for copy_index in range(1 if truth_fit else copies):
                for chain in range(chains):
                    params = {
                        "experiment": experiment,
                        "data": {**data, **setting["data"], "seed": seed_for(seed, "data")},
                        "noise": {**setting["noise"], "seed": seed_for(seed, "noise", setting["label"], copy_index)},
                        "holdout": None,
                        "method": method,
                        "method_options": {},
                        **copy.deepcopy(common),
                        "chain_seed": seed_for(seed, "chain", label, method, copy_index, chain),
                        "diagnostics": {**common.get("diagnostics", {}), "cells_seed": seed_for(seed, "cells", label)},
                        "labels": {"setting": label, **values, "copy": copy_index, "chain": chain},
                    }
                    params.update(copy.deepcopy(setting["params"]))
                    params["method_options"] = sampler_options(method, sampler)
                    slug = "".join(ch if ch.isalnum() or ch in "=.-" else "_" for ch in label)
                    tasks.append(Task(f"{slug}--{method}--copy{copy_index}--chain{chain}", params))
    return tasks


def eps_by_components_grid(experiment, *, data, key, components, settings, methods, holdout, common, **grid):
    """Tasks of :func:`chain_grid` over eps/N levels x numbers of components on one fixed data set
    (real data, no randomness of its own: every task reads data seed 0).

    ``key``: the label of the component count (``"C"``, ``"K"``); ``settings``: the preset's
    (``eps_over_N``, ``n_iter``, ``burn_in``, ``thin``); ``holdout``: the held-out design every
    setting shares; ``grid``: ``copies``, ``chains``, ``seed``, ``sampler`` for :func:`chain_grid`.
    """
    levels = [
        Setting(
            f"eps/N={e:g}, {key}={n}",
            {"eps_over_N": e, key: n},
            {"epsilon": e, "N": 1},
            noise_keys=("eps_over_N",),
            truth_key=f"{key}={n}",
            params={"n_components": n, "holdout": holdout},
        )
        for n in components
        for e in settings["eps_over_N"]
    ]
    schedule = {name: settings[name] for name in ("n_iter", "burn_in", "thin")}
    tasks = chain_grid(experiment, data=data, settings=levels, methods=methods, common={**common, **schedule}, **grid)
    for task in tasks:
        task.params["data"]["seed"] = 0
    return tasks


def sampler_options(method, sampler):
    """``{"sampler": sampler}`` for a method that has a sampler option (the registry says which),
    ``{}`` otherwise or without a sampler."""
    from lpviz import methods

    return {"sampler": sampler} if sampler and "sampler" in methods.get(method).options else {}
