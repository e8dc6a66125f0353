"""Chains that never meet: their predictive densities on cells no fit used, stacking, modes.

On real data the chains of a block or topic model sit in separate modes for good (DESIGN.md 1f):
more iterations do not help, and "not mixed" is true of every fit. What still holds is read off
the noised cells the analyst holds, never the truth (Yao, Vehtari & Gelman, "Stacking for
non-mixing Bayesian computations", JMLR 2022):

- each chain's **pointwise log predictive density** ``lpd_c(i) = log mean_s p(ytil_i | mu_s,
  alpha_i)`` under the noised law (:func:`lpviz.privacy.noised_logpmf`) at cells no fit used: the
  release's held-out cells when it has them, else the observed cells by PSIS-LOO (ArviZ; Pareto k
  checked and reported);
- **stacking weights** ``w`` on the simplex maximising ``sum_i log sum_c w_c exp(lpd_c(i))``
  (``arviz_stats.compare``'s stacking), shrunk :data:`STACKING_SHRINK` (1%) toward equal weights;
  the stacked rates are ``sum_c w_c mu_hat_c``;
- the stacked fit's own score, honestly: **cross-fitted** (the cells split in two halves, each
  half scored with the weights fitted on the other), beside the equal-weight pool's and each
  chain's, each an elpd with its standard error ``sqrt(n var(pointwise))``;
- **modes**: chains share a mode when their mean rates on those cells are closer than
  :data:`MODE_SPREAD` times a chain's own spread (its first half of draws against its second) and
  their likelihood traces sit within the "chains disagree" yardstick of each other.

:func:`chain_stacking` computes all of it for an ensemble; :class:`lpviz.ensemble.EnsemblePosterior`
gives it as ``stacking_weights(release)`` and ``stacked(release)``; :func:`lpviz.metrics.score`
reports it and :func:`lpviz.compare` ranks methods with it.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "MAX_DRAWS",
    "MAX_CELLS",
    "MAX_LOO_CELLS",
    "PARETO_K_MAX",
    "MODE_SPREAD",
    "STACKING_SHRINK",
    "Stacking",
    "StackingWeights",
    "StackedPosterior",
    "chain_stacking",
    "elpd_summary",
    "scored_cells",
    "rates_at_cells",
    "stack_pointwise",
    "stack_chains",
]

# Draws of a chain averaged into its predictive density: thinned evenly from the saved samples
# (the density's Monte Carlo error at 100 draws is far below the chains' differences).
MAX_DRAWS = 100
# Cells scored at most (a seeded, fixed subsample beyond): the weights and elpds rest on sums over
# cells, whose standard error is stated; 20,000 held-out cells keep the scoring at about a second.
MAX_CELLS = 20_000
# PSIS-LOO's Pareto fit costs ~0.2 ms a (chain, cell): its fallback scores fewer cells.
MAX_LOO_CELLS = 2_000
# PSIS-LOO's reliability: a cell whose Pareto k exceeds this has an unreliable estimate (Vehtari et al.).
PARETO_K_MAX = 0.7
# Two chains share a mode when their mean rates differ by at most this many times a chain's own
# spread (the distance between its first and second halves of draws).
MODE_SPREAD = 2.0
# The chains' stacking weights are shrunk this far toward equal weights, so none is exactly 0: a cell
# that one chain alone predicts keeps a density (unshrunk weights fitted on half the cells of a
# 30-actor network scored the other half 40 nats below the equal pool; shrunk 1%, 6 nats).
STACKING_SHRINK = 0.01
_SUBSAMPLE_SEED = 20190601  # fixed: the same cells for every chain, method and call


@dataclass(frozen=True)
class ScoredCells:
    """The cells a predictive density is scored on: ``kind`` ("heldout", "loo"), their
    matrix-view ``rows``/``cols``, noised counts ``y_noised``, per-cell ``alpha``, and how many
    there were before any subsample (``n_total``)."""

    kind: str
    rows: np.ndarray
    cols: np.ndarray
    y_noised: np.ndarray
    alpha: np.ndarray
    n_total: int

    @property
    def n(self):
        return int(self.rows.size)


def scored_cells(release, model=None, *, max_cells=MAX_CELLS):
    """The cells no fit used: the release's held-out cells (less structural zeros, the model's
    too) when it has them ("heldout"), else its observed cells for PSIS-LOO ("loo"); at most
    ``max_cells`` of them (:data:`MAX_LOO_CELLS` for "loo"), a fixed seeded subsample beyond."""
    shape = tuple(release.shape)
    heldout = release.heldout_cells
    kind, mask = ("heldout", heldout) if heldout is not None else ("loo", release.observed_cells)
    if kind == "loo":
        max_cells = min(max_cells, MAX_LOO_CELLS)
    zeros = model.structural_zeros(shape) if model is not None else None
    if zeros is not None:
        mask = mask & ~zeros
    matrix = mask.reshape(shape[0], -1)
    flat = np.flatnonzero(matrix)
    if flat.size == 0:
        raise ValueError("the release has no cell to score a predictive density on (every cell is a structural zero)")
    n_total = int(flat.size)
    if flat.size > max_cells:
        rng = np.random.default_rng(_SUBSAMPLE_SEED)
        flat = np.sort(rng.choice(flat, size=max_cells, replace=False))
    rows, cols = np.divmod(flat, matrix.shape[1])
    counts = release.Y_obs
    if hasattr(counts, "tocsr"):  # scipy.sparse: read the cells, never the dense matrix
        y = np.asarray(counts.tocsr()[rows, cols]).ravel()
    else:
        y = np.asarray(counts).reshape(shape[0], -1)[rows, cols]
    alpha = release.alpha_per_row[rows]
    return ScoredCells(kind, rows, cols, y.astype(np.float64), alpha.astype(np.float64), n_total)


def rates_at_cells(model, factors, cells):
    """The rates of one sample's factors at ``cells`` (no dense matrix: ``left[r] . right[c]``)."""
    left, right = model.low_rank(factors)
    left, right = np.asarray(left, dtype=np.float64), np.asarray(right, dtype=np.float64)
    return np.einsum("nk,nk->n", left[cells.rows], right[cells.cols])


def _log_mean_exp(values, axis):
    high = np.max(values, axis=axis, keepdims=True)
    high = np.where(np.isfinite(high), high, 0.0)
    with np.errstate(divide="ignore"):
        out = np.log(np.mean(np.exp(values - high), axis=axis)) + np.squeeze(high, axis=axis)
    return out


def _draw_indices(n_saved, max_draws):
    if n_saved <= max_draws:
        return np.arange(n_saved)
    return np.unique(np.linspace(0, n_saved - 1, max_draws).round().astype(int))


def _has_draws(chain):
    """Whether a chain holds its saved draws (a loaded fit keeps its best sample only; a variational
    fit's one 'sample' is its mean): else its point estimate ``mu_hat`` is scored."""
    return getattr(chain, "inference", "mcmc") == "mcmc" and chain.n_saved >= 2 and len(chain.samples) == chain.n_saved


@dataclass
class _ChainDensity:
    log_lik: np.ndarray | None  # (draws, cells): log p(ytil_i | mu_s), or None for a point estimate
    mean_rates: np.ndarray  # (cells,)
    spread: float  # mean |first half's mean rates - second half's|; nan for a point estimate


def _chain_density(chain, cells, max_draws):
    from lpviz.privacy import noised_logpmf

    model = chain.model_instance
    if _has_draws(chain):
        samples = chain.samples
        index = _draw_indices(len(samples), max_draws)
        rates = np.stack([rates_at_cells(model, samples[i], cells) for i in index])
        log_lik = noised_logpmf(cells.y_noised[None, :], np.maximum(rates, 0.0), cells.alpha[None, :])
        half = len(index) // 2
        spread = float(np.mean(np.abs(rates[:half].mean(axis=0) - rates[half:].mean(axis=0)))) if half else math.nan
        return _ChainDensity(np.atleast_2d(log_lik), rates.mean(axis=0), spread)
    mu_hat = chain.mu_hat
    if mu_hat is None:
        raise ValueError("a chain has no saved sample yet: run it past its burn-in before stacking")
    rates = np.asarray(mu_hat, dtype=np.float64).reshape(mu_hat.shape[0], -1)[cells.rows, cells.cols]
    return _ChainDensity(None, rates, math.nan)


def elpd_summary(pointwise):
    """``{"elpd", "se", "n"}`` of pointwise log densities: their sum and ``sqrt(n var)``."""
    values = np.asarray(pointwise, dtype=np.float64)
    n = values.size
    return {"elpd": float(values.sum()), "se": float(math.sqrt(n * np.var(values))) if n > 1 else math.nan, "n": n}


def _elpd_data(pointwise, kind="loo"):
    """An ``arviz_stats`` ELPDData holding precomputed pointwise densities (for its ``compare``)."""
    import xarray as xr
    from arviz_stats.utils import ELPDData

    summary = elpd_summary(pointwise)
    return ELPDData(
        kind=kind,
        elpd=summary["elpd"],
        se=summary["se"],
        p=math.nan,
        n_samples=1,
        n_data_points=summary["n"],
        scale="log",
        warning=False,
        good_k=PARETO_K_MAX,
        elpd_i=xr.DataArray(np.asarray(pointwise, dtype=np.float64), dims=["cell"]),
    )


def stack_pointwise(pointwise, names=None):
    """Stacking weights (simplex) of the candidates' pointwise log densities ``(candidates, cells)``,
    by ``arviz_stats.compare``'s stacking; returns ``(weights, table)`` with the table in
    ``names`` order (ArviZ's columns: rank, elpd, elpd_diff, weight, se, dse, ...)."""
    from arviz_stats import compare

    pointwise = np.asarray(pointwise, dtype=np.float64)
    names = [str(i) for i in range(pointwise.shape[0])] if names is None else list(names)
    if pointwise.shape[0] == 1:
        summary = elpd_summary(pointwise[0])
        import pandas as pd

        table = pd.DataFrame(
            {
                "rank": [0],
                "elpd": [summary["elpd"]],
                "elpd_diff": [0.0],
                "weight": [1.0],
                "se": [summary["se"]],
                "dse": [0.0],
            },
            index=names,
        )
        return np.ones(1), table
    # the weights are unchanged by a per-cell shift of every candidate's density, which keeps
    # ArviZ's exp() away from underflow on a cell all candidates find improbable
    shift = np.max(pointwise, axis=0, keepdims=True)
    shift = np.where(np.isfinite(shift), shift, 0.0)
    elpds = {name: _elpd_data(row) for name, row in zip(names, pointwise - shift, strict=True)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # its order-statistics note for > 11 candidates: not ours to show
        table = compare(elpds, method="stacking")
    table = table.loc[names].copy()
    for i, name in enumerate(names):  # the shift is common to all: back to the true elpds
        summary = elpd_summary(pointwise[i])
        table.loc[name, "elpd"], table.loc[name, "se"] = summary["elpd"], summary["se"]
    weights = np.clip(table["weight"].to_numpy(dtype=np.float64), 0.0, None)
    weights = weights / weights.sum()
    table["weight"] = weights
    return weights, table


def _chain_weights(pointwise):
    """Stacking weights of chains: :func:`stack_pointwise`'s, shrunk by STACKING_SHRINK toward equal."""
    weights, _ = stack_pointwise(pointwise)
    return (1.0 - STACKING_SHRINK) * weights + STACKING_SHRINK / len(weights)


def _cross_fitted(pointwise, seed=_SUBSAMPLE_SEED):
    """The stacked mixture's pointwise density, each cell with the weights fitted on the other half
    of the cells (two folds): an honest score of stacking, not the optimum it was fitted to."""
    n = pointwise.shape[1]
    fold = np.zeros(n, dtype=bool)
    fold[np.random.default_rng(seed).permutation(n)[: n // 2]] = True
    out = np.empty(n)
    for held in (fold, ~fold):
        if not held.any():
            continue
        train = ~held
        weights = _chain_weights(pointwise[:, train]) if train.any() else np.full(len(pointwise), 1 / len(pointwise))
        out[held] = _mixture(pointwise[:, held], weights)
    return out


def stack_chains(pointwise):
    """``(weights, stacked)`` of chains' pointwise log densities ``(chains, cells)``: their stacking
    weights (shrunk STACKING_SHRINK toward equal) and the stacked mixture's cross-fitted pointwise
    density (one chain: its own), what :class:`Stacking` holds, for densities computed elsewhere
    (a reproduce grid's chains, one a task)."""
    pointwise = np.atleast_2d(np.asarray(pointwise, dtype=np.float64))
    if len(pointwise) == 1:
        return np.ones(1), pointwise[0].copy()
    return _chain_weights(pointwise), _cross_fitted(pointwise)


def _mixture(pointwise, weights):
    """log sum_c w_c exp(lpd_c) per cell."""
    with np.errstate(divide="ignore"):
        logs = pointwise + np.log(np.asarray(weights, dtype=np.float64))[:, None]
    high = np.max(logs, axis=0)
    return high + np.log(np.sum(np.exp(logs - high), axis=0))


def _level_trace(chain):
    """The likelihood trace after burn-in the diagnostics judge (:func:`lpviz.diagnostics.trace_name`:
    the log marginal of a private chain, else the log joint); None when it has none."""
    from lpviz.diagnostics import trace_name

    marginal = np.asarray(getattr(chain, "log_marginal", []), dtype=np.float64)
    joint = np.asarray(getattr(chain, "log_joint", []), dtype=np.float64)
    trace = (marginal if marginal.size and trace_name(marginal) == "log_marginal" else joint)[chain.burn_in :]
    trace = trace[np.isfinite(trace)]
    return trace if trace.size >= 2 else None


def _modes(mean_rates, spreads, traces):
    """Chains grouped into modes: two chains share one when both what they predict and where their
    likelihood sits agree, i.e. their mean rates on the scored cells differ by at most MODE_SPREAD
    times the larger own spread (a point estimate's: 5% of the mean rate) and their likelihood
    traces' means by at most :data:`lpviz.diagnostics.DISAGREE_SDS` within-chain standard deviations
    (the median chain's, the yardstick of "chains disagree"); the groups are the connected components."""
    from lpviz.diagnostics import DISAGREE_SDS

    n = len(mean_rates)
    scale = float(np.mean(np.abs(np.stack(mean_rates)))) or 1.0
    own = [s if np.isfinite(s) else 0.05 * scale for s in spreads]
    known = [t for t in traces if t is not None]
    level_spread = float(np.median([np.std(t, ddof=1) for t in known])) if known else 0.0
    parent = list(range(n))

    def root(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def same_level(c, d):
        if traces[c] is None or traces[d] is None:
            return True  # no trace to tell them apart: their predictions decide
        gap = abs(float(traces[c].mean()) - float(traces[d].mean()))
        return gap <= DISAGREE_SDS * level_spread if level_spread > 0 else gap == 0

    for c in range(n):
        for d in range(c + 1, n):
            distance = float(np.mean(np.abs(mean_rates[c] - mean_rates[d])))
            if distance <= MODE_SPREAD * max(own[c], own[d], 1e-12 * scale) and same_level(c, d):
                parent[root(d)] = root(c)
    groups = {}
    for c in range(n):
        groups.setdefault(root(c), []).append(c)
    return sorted(groups.values(), key=lambda members: members[0])


@dataclass
class Stacking:
    """What stacking found for an ensemble on one release (see the module docstring).

    ``cells``: "heldout" (the release's held-out noised cells) or "loo" (PSIS-LOO over the observed
    cells) or "observed" (in-sample: chains without draws and nothing held out; optimistic);
    ``n_cells`` scored of ``n_cells_total``; ``n_draws`` per chain (0: point estimates);
    ``weights`` (C,); ``pointwise`` (C, n) (chains counted from 0 everywhere, as score's reasons
    count them); ``pooled`` and ``stacked`` (n,): the equal-weight pool's and the cross-fitted
    stacked mixture's pointwise densities; ``pareto_k`` (C, n) for "loo";
    ``modes``: lists of chain indices; ``mode_log_joint``: each mode's mean log joint after burn-in;
    ``seconds`` it took; ``notes``: sentences on what the numbers rest on.
    """

    cells: str
    n_cells: int
    n_cells_total: int
    n_draws: int
    weights: np.ndarray
    pointwise: np.ndarray
    pooled: np.ndarray
    stacked: np.ndarray
    pareto_k: np.ndarray | None
    modes: list
    mode_log_joint: list
    seconds: float
    notes: list = field(default_factory=list)

    @property
    def n_chains(self):
        return len(self.weights)

    def elpd(self):
        """``{"chains": [...], "pooled", "stacked"}``, each ``{"elpd", "se", "n"}``, and ``cells``."""
        return {
            "cells": self.cells,
            "n_cells": self.n_cells,
            "chains": [elpd_summary(row) for row in self.pointwise],
            "pooled": elpd_summary(self.pooled),
            "stacked": elpd_summary(self.stacked),
        }

    @property
    def pareto_k_high(self):
        """The share of (chain, cell) pairs whose Pareto k exceeds PARETO_K_MAX (None unless "loo")."""
        return None if self.pareto_k is None else float(np.mean(self.pareto_k > PARETO_K_MAX))

    def mode_weights(self):
        return [float(sum(self.weights[c] for c in members)) for members in self.modes]

    @property
    def text(self):
        """The modes in words: how many, their weights, the best-weighted mode's log joint."""
        n, m = self.n_chains, len(self.modes)
        order = sorted(range(m), key=lambda j: -self.mode_weights()[j])
        weights = " / ".join(f"{self.mode_weights()[j]:.2f}" for j in order)
        words = f"{n} chain{'s' if n != 1 else ''} in {m} mode{'s' if m != 1 else ''}; "
        words += f"stacking weight{'s' if m != 1 else ''} {weights}"
        best = order[0]
        joint = self.mode_log_joint[best]
        members = ", ".join(str(c) for c in self.modes[best])  # counted from 0, as score's reasons count them
        if joint is not None and math.isfinite(joint):
            chains = "chains" if len(self.modes[best]) > 1 else "chain"
            words += f"; the best-weighted mode ({chains} {members}) has log joint {joint:,.0f}"
            others = [self.mode_log_joint[j] for j in order[1:] if self.mode_log_joint[j] is not None]
            if others:
                words += (
                    f", the others {min(others):,.0f} to {max(others):,.0f}"
                    if len(others) > 1
                    else f", the other {others[0]:,.0f}"
                )
                if max(others) > joint:
                    words += " (stacking weighs what predicts the noised cells, not the highest joint)"
        where = {
            "heldout": "held-out noised cells",
            "loo": "observed noised cells by PSIS-LOO",
            "observed": "observed cells, in-sample",
        }
        return words + f" (on {self.n_cells:,} {where[self.cells]})"


def chain_stacking(chains, release, *, max_draws=MAX_DRAWS, max_cells=MAX_CELLS):
    """:class:`Stacking` of ``chains`` (posteriors of one model on ``release``'s shape) on the
    noised cells no fit used. Reads the release's noised counts and noise level only, never a truth."""
    start = time.perf_counter()
    chains = list(chains)
    model = chains[0].model_instance
    if tuple(release.shape) != tuple(chains[0].shape):
        raise ValueError(
            f"the release is {tuple(release.shape)} but the chains {tuple(chains[0].shape)}: "
            "stack on the release they were fitted on"
        )
    cells = scored_cells(release, model, max_cells=max_cells)
    densities = [_chain_density(chain, cells, max_draws) for chain in chains]
    draws = [d.log_lik.shape[0] for d in densities if d.log_lik is not None]
    notes = []
    pareto_k = None
    kind = cells.kind
    from lpviz.privacy import noised_logpmf

    if any(d.log_lik is None for d in densities):  # point estimates: the density at mu_hat
        rows = [
            noised_logpmf(cells.y_noised, np.maximum(d.mean_rates, 0.0), cells.alpha)
            if d.log_lik is None
            else _log_mean_exp(d.log_lik, axis=0)
            for d in densities
        ]
        pointwise = np.stack(rows)
        if kind == "loo":
            kind = "observed"
            notes.append(
                "a chain holds no draws (a loaded or variational fit): scored in-sample on the observed "
                "cells, optimistic; hold cells out for a fair score"
            )
    elif kind == "heldout":
        pointwise = np.stack([_log_mean_exp(d.log_lik, axis=0) for d in densities])
    else:
        from scipy.special import logsumexp

        from lpviz.diagnostics import _arviz

        az = _arviz()  # without ArviZ's daily notice of its refactor under a user's cell

        pointwise, ks = [], []
        for d in densities:
            log_lik = d.log_lik.T  # (cells, draws)
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")  # Pareto k is reported below, in words
                log_weights, k = az.psislw(-log_lik, reff=1.0)  # vectorised over cells (arviz-stats' loo loops)
            pointwise.append(logsumexp(log_weights + log_lik, axis=-1))
            ks.append(np.asarray(k, dtype=np.float64))
        pointwise, pareto_k = np.stack(pointwise), np.stack(ks)
        high = float(np.mean(pareto_k > PARETO_K_MAX))
        if high > 0:
            notes.append(
                f"PSIS-LOO is unreliable on {100 * high:.1f}% of (chain, cell) pairs "
                f"(Pareto k > {PARETO_K_MAX}); hold cells out for a sure score"
            )
    if cells.n < cells.n_total:
        notes.append(f"scored on a fixed subsample of {cells.n:,} of the {cells.n_total:,} cells")
    weights, stacked = stack_chains(pointwise)
    equal = np.full(len(chains), 1.0 / len(chains))
    modes = _modes([d.mean_rates for d in densities], [d.spread for d in densities], [_level_trace(c) for c in chains])
    mode_log_joint = []
    for members in modes:
        levels = []
        for c in members:
            trace = np.asarray(chains[c].log_joint, dtype=np.float64)[chains[c].burn_in :]
            trace = trace[np.isfinite(trace)]
            if trace.size:
                levels.append(float(trace.mean()))
        mode_log_joint.append(float(np.mean(levels)) if levels else None)
    return Stacking(
        cells=kind,
        n_cells=cells.n,
        n_cells_total=cells.n_total,
        n_draws=min(draws) if draws and len(draws) == len(chains) else 0,
        weights=weights,
        pointwise=pointwise,
        pooled=_mixture(pointwise, equal),
        stacked=stacked,
        pareto_k=pareto_k,
        modes=modes,
        mode_log_joint=mode_log_joint,
        seconds=time.perf_counter() - start,
        notes=notes,
    )


class StackingWeights(np.ndarray):
    """The chains' stacking weights (non-negative, summing to 1) with what they rest on:
    ``cells`` ("heldout", "loo" or "observed"), ``stacking`` (the :class:`Stacking`)."""

    cells: str | None
    stacking: Stacking | None

    def __new__(cls, stacking):
        out = np.asarray(stacking.weights, dtype=np.float64).copy().view(cls)
        out.cells, out.stacking = stacking.cells, stacking
        return out

    def __array_finalize__(self, obj):
        self.cells = getattr(obj, "cells", None)
        self.stacking = getattr(obj, "stacking", None)


class StackedPosterior:
    """The chains' mixture weighted by stacking: ``mu_hat = sum_c w_c mu_hat_c``, ``weights``.

    Scored as any posterior's rates (``rate_rows``); its draws are the chains' (``samples``: each
    chain's, in chain order, with ``sample_weights``), its health the ensemble's.
    """

    inference = "stacked"

    def __init__(self, ensemble, stacking):
        self.ensemble, self.stacking = ensemble, stacking
        self.weights = np.asarray(stacking.weights, dtype=np.float64)
        self.chains = ensemble.chains
        for name in (
            "model_instance",
            "model",
            "method",
            "n_components",
            "shape",
            "burn_in",
            "thin",
            "heldout",
            "structural_zeros",
            "row_labels",
            "col_labels",
        ):
            setattr(self, name, getattr(ensemble, name))
        self.method_label = f"{ensemble.method_label} (stacked)"
        self._mu_hat = None

    def rate_rows(self, start, stop):
        total = None
        for weight, chain in zip(self.weights, self.chains, strict=True):
            if weight <= 0:
                continue
            rows = chain.rate_rows(start, stop)
            total = weight * rows if total is None else total + weight * rows
        return total

    @property
    def mu_hat(self):
        if self._mu_hat is None:
            self._mu_hat = self.rate_rows(0, self.shape[0])
        return self._mu_hat

    @property
    def samples(self):
        return self.ensemble.samples

    @property
    def sample_weights(self):
        """Each saved sample's weight in the mixture: its chain's weight over the chain's samples."""
        return np.concatenate(
            [
                np.full(chain.n_saved, w / max(chain.n_saved, 1))
                for w, chain in zip(self.weights, self.chains, strict=True)
            ]
        )

    def __getattr__(self, name):
        # traces, best sample, diagnostics: the ensemble's (only the rates are re-weighted)
        if name.startswith("_") or name in ("ensemble", "stacking"):
            raise AttributeError(name)
        return getattr(self.ensemble, name)

    def __repr__(self):
        shown = " / ".join(f"{w:.2f}" for w in self.weights)
        where = f"{len(self.chains)} chains, weights {shown}, on {self.stacking.cells} cells"
        return f"StackedPosterior({self.model}/{self.method}, {where})"
