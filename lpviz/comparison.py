"""Comparing methods without the truth: every method's rates scored on the noised cells the analyst holds.

A real analyst has no non-private data, so the papers' MAE against the true counts exists only in
simulations. Every method predicts the release's held-out noised cells through the noised law
(:func:`lpviz.privacy.noised_logpmf`; naive's and non-private's rates too), which gives an expected
log predictive density (elpd) per method with a standard error from the per-cell terms, as ArviZ's
``compare`` does for models (DESIGN.md 1f). An ensemble is scored by its stacked mixture
(cross-fitted, :mod:`lpviz.stacking`), a chain by the mean of the noised law over its draws, a fit
without draws (variational, loaded) by its point estimate.

The ranking rule (:data:`RANK_SES`): a method is stated above another only where its elpd exceeds
the other's by more than ``RANK_SES`` standard errors of the difference on the same cells, and,
given several noised copies of the data, on every copy. With a truth (simulations) a ranking on MAE
is stated only where every chain of one method beats every chain of the other. "Not mixed" stays a
flag in words beside a method; it does not silence a ranking that survives the modes.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["RANK_SES", "RULE", "compare", "rank_pointwise"]

# A difference in elpd is stated when it exceeds this many standard errors of the difference: the
# paired per-cell differences' sd * sqrt(n) understates the error when cells are dependent (a row's
# cells share its factors), so the usual 2 would state too much.
RANK_SES = 4.0
BASELINE = "best constant"


def _as_list(value):
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _pointwise(fit, release, cells):
    """The fit's pointwise log density at ``cells`` and how it was had."""
    from lpviz.privacy import noised_logpmf
    from lpviz.stacking import chain_stacking

    if getattr(fit, "n_chains", None) is not None and hasattr(fit, "stacking"):  # an ensemble
        stacking = fit.stacking(release)
        modes = len(stacking.modes)
        how = f"stacked over {fit.n_chains} chains ({modes} mode{'s' if modes > 1 else ''})"
        how = how if fit.n_chains > 1 else "one chain's draws"
        return stacking.stacked, how, stacking
    if hasattr(fit, "model_instance") and hasattr(fit, "samples") and getattr(fit, "n_saved", 0):
        stacking = chain_stacking([fit], release)
        return stacking.pointwise[0], ("its draws" if stacking.n_draws else "its point estimate"), stacking
    mu_hat = getattr(fit, "mu_hat", None)
    if mu_hat is None:
        raise TypeError(f"compare needs fits with rates (mu_hat): got {type(fit).__name__}")
    mu = np.asarray(mu_hat, dtype=np.float64).reshape(mu_hat.shape[0], -1)[cells.rows, cells.cols]
    return noised_logpmf(cells.y_noised, np.maximum(mu, 0.0), cells.alpha), "its point estimate", None


def _baseline_pointwise(release, cells):
    """The best constant rate's density: the observed noised cells' mean (an unbiased estimate of the
    true mean count), the trivial reference every method must beat."""
    from lpviz.metrics import estimated_total
    from lpviz.privacy import noised_logpmf

    observed = release.observed_cells
    total, _ = estimated_total(release, observed)
    rate = max(float(total) / max(int(observed.sum()), 1), 1e-9)
    return noised_logpmf(cells.y_noised, np.full(cells.n, rate), cells.alpha)


# flags that silence a ranking (the fit's numbers mean nothing); "not mixed" and "chains disagree" do not
SILENCING_FLAGS = ("collapsed", "non-finite")


def _health(fit, release):
    """(the fit's health flags, their reasons in words) from :func:`lpviz.metrics.score`."""
    from lpviz.metrics import score

    if not hasattr(fit, "rate_rows"):  # rates alone (an estimate made elsewhere): no health to read
        return [], []
    health = score(fit, release, topics=False, diagnostics="trace").get("health") or {}
    return list(health.get("flags") or []), list(health.get("reasons") or [])


def _heldout_problem(fit, release):
    """Words when the fit did not hold out the release's held-out cells (it saw what it is scored on)."""
    held = getattr(fit, "heldout", None)
    scored = release.heldout_cells
    if held is None or np.any(scored & ~np.asarray(held, dtype=bool)):
        return "fitted without holding out the release's held-out cells: its score there is not out of sample"
    return None


def _mae_of_chains(fit, release, truth):
    """(the method's MAE: stacked for an ensemble, each chain's MAE, the best constant's)."""
    from lpviz.metrics import release_baselines, score

    if not hasattr(fit, "rate_rows"):  # rates alone
        mae = float(np.mean(np.abs(np.asarray(fit.mu_hat) - truth.Y)[release.observed_cells]))
        return mae, [mae], release_baselines(release, truth)["best_constant_mae"]
    chains = getattr(fit, "chains", None) or [fit]
    maes = [score(chain, release, truth, topics=False, diagnostics=False)["mae"] for chain in chains]
    summary = fit.stacked(release) if getattr(fit, "n_chains", None) is not None else fit
    own = score(summary, release, truth, topics=False, diagnostics=False)
    constant = (own.get("baselines") or {}).get("best_constant_mae")
    return own["mae"], maes, constant


def compare(fits, release, truth=None):
    """Rank methods by how well they predict the release's held-out noised cells, without the truth.

    Parameters
    ----------
    fits : dict of {name: fit}
        Posteriors, ensembles or variational fits of one model to one data set by several
        methods (e.g. ``{"private": ..., "naive": ..., "non-private": ...}``). Given several
        noised copies, each value is a list of fits, one per copy, in ``release``'s order.
    release : lpviz.release.Release, or a list of them (one per noised copy)
        The noised release with held-out cells: every fit is scored on those cells' noised
        counts under the noised law (the non-private fit too, though it saw the true counts
        elsewhere). Each fit must have held the same cells out.
    truth : lpviz.release.Truth or list, optional
        Simulations only: adds each method's MAE against the true counts (an ensemble's stacked
        rates), each chain's, and the best constant's.

    Returns
    -------
    pandas.DataFrame
        One row per method and a row for the best constant rate, sorted by elpd (best first), in
        the manner of ArviZ's ``compare``: ``rank``, ``elpd`` (summed over copies), ``se``,
        ``elpd_diff`` and ``dse`` (from the best, paired on the cells), ``weight`` (stacking
        weights across the methods), ``warning`` (True when a flag below applies), ``copies``
        (noised copies scored), ``how`` (stacked, draws, point estimate), ``flags`` (health in
        words: not mixed, collapsed, chains disagree; a fit that saw the cells); with a truth
        ``mae``, ``chain_mae_min``, ``chain_mae_max``, ``best_constant_mae``.
        ``attrs["statements"]``: the rankings that hold by the rules of :mod:`lpviz.compare`, in
        words with their numbers; ``attrs["rule"]``; ``attrs["cells"]``: cells scored per copy.
    """

    from lpviz.stacking import scored_cells

    if not isinstance(fits, dict) or not fits:
        raise TypeError("fits must be a dict {method name: fit (or a list of fits, one per noised copy)}")
    releases = _as_list(release)
    truths = _as_list(truth) if truth is not None else [None] * len(releases)
    if len(truths) != len(releases):
        raise ValueError(f"give one truth per release: {len(truths)} truths for {len(releases)} releases")
    per_copy = {name: _as_list(value) for name, value in fits.items()}
    for name, values in per_copy.items():
        if len(values) != len(releases):
            raise ValueError(
                f"{name!r} has {len(values)} fits for {len(releases)} releases: give one fit per noised copy"
            )
    if BASELINE in per_copy:
        raise ValueError(f"{BASELINE!r} names the trivial reference row; call the method something else")
    names = [*per_copy, BASELINE]
    pointwise = {name: [] for name in names}
    hows, flags, cells_per_copy, silenced = {}, {name: [] for name in names}, [], set()
    for copy, rel in enumerate(releases):
        if rel.heldout_cells is None:
            raise ValueError(
                "compare scores the release's held-out noised cells, and this release holds none out: "
                "refit on release.with_heldout(mask) (e.g. lpviz.datasets.holdout_mask) so every method "
                "is scored on cells it did not see"
            )
        first = per_copy[next(iter(per_copy))][copy]
        cells = scored_cells(rel, getattr(first, "model_instance", None))
        cells_per_copy.append(cells.n)
        for name in per_copy:
            fit = per_copy[name][copy]
            if tuple(getattr(fit, "shape", rel.shape)) != tuple(rel.shape):
                raise ValueError(f"{name!r} was fitted to shape {tuple(fit.shape)}, the release is {tuple(rel.shape)}")
            values, hows[name], _ = _pointwise(fit, rel, cells)
            if values.shape != (cells.n,):
                raise ValueError(f"{name!r} scored {values.size} cells, the others {cells.n}: fit one model to compare")
            pointwise[name].append(values)
            problem = _heldout_problem(fit, rel)
            names_of_flags, reasons = _health(fit, rel)
            if any(flag in SILENCING_FLAGS for flag in names_of_flags):
                silenced.add(name)
            for words in ([problem] if problem else []) + reasons:
                if words not in flags[name]:
                    flags[name].append(words)
        pointwise[BASELINE].append(_baseline_pointwise(rel, cells))
    hows[BASELINE] = "the observed noised cells' mean, one rate for every cell"

    table = rank_pointwise(pointwise, silenced=silenced)
    table["warning"] = [bool(flags[name]) for name in table.index]
    table["how"] = [hows[name] for name in table.index]
    table["flags"] = ["; ".join(flags[name]) for name in table.index]
    statements = table.attrs["statements"]
    if truth is not None:
        _add_mae(table, per_copy, releases, truths, statements, silenced)
    table.attrs["rule"] = RULE
    table.attrs["cells"] = cells_per_copy
    return table


RULE = (
    f"a method is stated above another where its elpd on the held-out noised cells exceeds the other's by "
    f"more than {RANK_SES:g} standard errors of the paired difference on every noised copy; with a truth, "
    "on MAE where every chain of one beats every chain of the other"
)


def rank_pointwise(pointwise, *, silenced=()):
    """The compare table of pointwise log densities already at hand: ``pointwise`` is
    ``{name: [per noised copy: (cells,) array]}``, every name's arrays on the same cells. Columns
    ``rank``, ``elpd``, ``se``, ``elpd_diff``, ``dse``, ``weight`` (stacking across the names),
    ``copies``; ``attrs["statements"]``: the rankings that hold by :data:`RANK_SES` on every copy
    (none involving a name in ``silenced``). :func:`compare` and the reproduce reports use it."""
    import pandas as pd

    from lpviz.stacking import stack_pointwise

    names = list(pointwise)
    everything = {name: np.concatenate(parts) for name, parts in pointwise.items()}
    weights, _ = stack_pointwise(np.stack([everything[name] for name in names]), names=names)
    elpd = {name: float(values.sum()) for name, values in everything.items()}
    order = sorted(names, key=lambda name: -elpd[name])
    best = order[0]
    rows = []
    for rank, name in enumerate(order):
        diff = everything[best] - everything[name]
        rows.append(
            {
                "rank": rank,
                "elpd": elpd[name],
                "se": _se(everything[name]),
                "elpd_diff": float(diff.sum()),
                "dse": _se(diff) if name != best else 0.0,
                "weight": float(weights[names.index(name)]),
                "copies": len(pointwise[name]),
            }
        )
    table = pd.DataFrame(rows, index=pd.Index(order, name="method"))
    table.attrs["statements"] = _elpd_statements([name for name in order if name not in silenced], pointwise, elpd)
    table.attrs["rule"] = RULE
    return table


def _se(values):
    values = np.asarray(values, dtype=np.float64)
    return float(math.sqrt(values.size * np.var(values))) if values.size > 1 else math.nan


def _elpd_statements(order, pointwise, elpd):
    """Each pair (a above b) that holds on every copy by more than RANK_SES standard errors."""
    statements = []
    for i, above in enumerate(order):
        for below in order[i + 1 :]:
            diffs = [a - b for a, b in zip(pointwise[above], pointwise[below], strict=True)]
            if all(d.sum() > RANK_SES * _se(d) for d in diffs):
                total = float(sum(d.sum() for d in diffs))
                dse = float(math.sqrt(sum(_se(d) ** 2 for d in diffs)))
                copies = f" on each of {len(diffs)} noised copies" if len(diffs) > 1 else ""
                statements.append(
                    f"{above} predicts the held-out noised cells better than {below}{copies}: elpd "
                    f"{elpd[above]:,.1f} vs {elpd[below]:,.1f}, difference {total:,.1f} (se {dse:,.1f})"
                )
    return statements


def _add_mae(table, per_copy, releases, truths, statements, silenced):
    """With a truth: each method's MAE (an ensemble's stacked rates), its chains' range and the best
    constant's; a statement wherever every chain of one method beats every chain of another."""
    summary, chains, constants = {}, {}, []
    for name in per_copy:
        summary[name], chains[name] = [], []
        for fit, rel, tru in zip(per_copy[name], releases, truths, strict=True):
            mae, each, constant = _mae_of_chains(fit, rel, tru)
            summary[name].append(mae)
            chains[name].append(each)
            constants.append(constant)
    known = [c for c in constants if c is not None]
    constant = float(np.mean(known)) if known else math.nan
    table["mae"] = [float(np.mean(summary[n])) if n in summary else constant for n in table.index]
    table["chain_mae_min"] = [min(min(c) for c in chains[n]) if n in chains else math.nan for n in table.index]
    table["chain_mae_max"] = [max(max(c) for c in chains[n]) if n in chains else math.nan for n in table.index]
    table["best_constant_mae"] = constant
    ranked = [name for name in per_copy if name not in silenced]
    for a in ranked:
        for b in ranked:
            pairs = zip(chains[a], chains[b], strict=True)
            if a != b and all(max(x) < min(y) for x, y in pairs):
                worst = max(max(c) for c in chains[a])
                versus = "below" if worst < constant else "yet not below"
                statements.append(
                    f"on MAE against the true counts every chain of {a} ({_span(chains[a])}) beats every "
                    f"chain of {b} ({_span(chains[b])}), {versus} the best constant's {constant:.3g}"
                )


def _span(chains):
    values = [value for copy in chains for value in copy]
    return f"{min(values):.3g}" if min(values) == max(values) else f"{min(values):.3g}-{max(values):.3g}"
