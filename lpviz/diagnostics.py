"""Convergence diagnostics of several chains: R-hat and effective sample size via ArviZ.

Labels switch between chains (topic 3 of one chain is topic 7 of another),
so the quantities diagnosed are label-invariant:

- the marginal log likelihood ``log p(Y_obs | factors)`` traced by private
  chains (DESIGN.md 1b: it mixes far faster than the log joint), or the log
  joint for methods without one, per iteration after burn-in;
- the Poisson rates ``mu`` at a fixed set of cells, per saved sample;
- the topic-word distributions (rows of ``phi`` normalised to sum to one)
  after Hungarian alignment (:func:`lpviz.alignment.align_topics`): every saved
  sample to its own chain's best sample, then every chain to a reference
  chain by their mean topics, at a fixed set of word columns.

One chain is summarised by :func:`chain_summary` (small arrays: this is what
a reproduction task stores, so diagnostics never need the chains' full
samples in one process); :func:`combine` stacks chains into
``(chain, draw, ...)`` arrays with labels aligned; :func:`diagnose` gives
R-hat (rank-normalised split R-hat, Vehtari et al. 2021) and bulk and tail
ESS per element and :func:`summarize_diagnostics` one row per quantity.
The numbers come from ArviZ's array interface (``arviz_stats.base.array_stats``,
the same estimators as ``az.rhat``/``az.ess`` without building xarray
datasets; importing the whole of ``arviz`` costs seconds).
:func:`to_inference_data` exports the same arrays as an ArviZ
``InferenceData`` (``lpviz fit --chains C --save-idata FILE``).

A quantity that does not vary within any chain (a rate that is 0 in every
sample) has no R-hat or ESS: both are NaN.
"""

import math
import warnings

import numpy as np

from lpviz.alignment import align_topics

__all__ = [
    "rhat",
    "ess",
    "chain_convergence",
    "chain_summary",
    "combine",
    "diagnose",
    "summarize_diagnostics",
    "probe_cells",
    "probe_columns",
    "trace_name",
    "to_inference_data",
    "traced_elements",
    "fit_inference_data",
    "ensemble_convergence",
    "odd_chains",
    "RHAT_OK",
    "DISAGREE_SDS",
]

# A chain "still drifting" by the common rule of thumb (Gelman et al., BDA3).
RHAT_DRIFTING = 1.1
# R-hat below this counts as converged (Vehtari et al. 2021 recommend 1.01;
# 1.05 is the older, looser rule many papers used).
RHAT_OK = 1.01
# chain_convergence diagnoses at most this many iterations (every k-th of a longer trace): its cost
# (ArviZ ranks the draws) stays a few milliseconds however long the run, as a live app scores each
# saved sample.
MAX_CONVERGENCE_DRAWS = 2000
N_PROBE_CELLS = 20
N_PROBE_COLUMNS = 100
# A chain sits "in another mode" when its mean log likelihood after burn-in lies this many
# within-chain standard deviations below the best chain's. Chains of one mode differ by about
# sqrt(2 / ESS) of them (well under 1 for any ESS above 2); a chain stuck in a poorer mode of the
# 120 x 40 topic set of issue 39 sat 12.6 of them (215 log-likelihood units) below the best chain
# while the three others sat within 0.05 (benchmarks/bench_chains.py).
DISAGREE_SDS = 4.0


def _arviz():
    with warnings.catch_warnings():  # ArviZ 0.2x announces its refactor on import
        warnings.simplefilter("ignore", FutureWarning)
        import arviz

    return arviz


def _check_draws(draws, name="draws"):
    draws = np.asarray(draws, dtype=np.float64)
    if draws.ndim < 2:
        raise ValueError(
            f"{name} must be shaped (chain, draw, ...), got shape {draws.shape}; for one chain use draws[None, :]"
        )
    if draws.shape[1] < 4:
        raise ValueError(
            f"{name} has {draws.shape[1]} draws per chain; R-hat and ESS need at least 4 "
            "(split chains in halves): save more samples (lower thin or burn-in)"
        )
    if not np.all(np.isfinite(draws)):
        raise ValueError(f"{name} contains NaN or infinite values; diagnose finite traces only")
    return draws


def _array_stats():
    from arviz_stats.base import array_stats

    return array_stats


# az.ess's default for the tail method: the 5% and 95% quantiles
_TAIL_PROB = (0.05, 0.95)


def _per_element(name, draws, method):
    """ArviZ's ``rhat``/``ess`` on every element of (chain, draw, *shape); NaN where constant."""
    shape = draws.shape[2:]
    flat = draws.reshape(draws.shape[0], draws.shape[1], -1)
    stats = _array_stats()
    with np.errstate(divide="ignore", invalid="ignore"):  # constant elements: set to NaN below
        if name == "rhat":
            values = stats.rhat(flat, chain_axis=0, draw_axis=1, method=method)
        else:
            extra = {"prob": _TAIL_PROB} if method == "tail" else {}
            values = stats.ess(flat, chain_axis=0, draw_axis=1, method=method, **extra)
    values = np.array(values, dtype=np.float64).reshape(-1)
    constant = np.all(flat == flat[:1, :1, :], axis=(0, 1))
    values[constant] = math.nan
    values = values.reshape(shape)
    return float(values) if values.ndim == 0 else values


def rhat(draws, method="rank"):
    """R-hat of ``draws`` shaped ``(chain, draw, *shape)`` (ArviZ ``az.rhat``).

    ``method="rank"`` (default) is the rank-normalised split R-hat of
    Vehtari et al. (2021), the maximum of the bulk and folded versions;
    ``"split"`` the classic split R-hat; ``"identity"`` Gelman and Rubin's
    original (chains not split). Returns a float for ``(chain, draw)``
    input, else an array of ``shape``; NaN where the draws never vary.
    """
    return _per_element("rhat", _check_draws(draws), method)


def ess(draws, method="bulk"):
    """Effective sample size of ``draws`` shaped ``(chain, draw, *shape)`` (ArviZ ``az.ess``).

    ``method="bulk"`` (default; rank-normalised) or ``"tail"`` (the minimum
    of the ESS of the 5% and 95% quantiles), or any other ``az.ess`` method
    (``"mean"``: the classic autocorrelation-based ESS of the mean).
    """
    return _per_element("ess", _check_draws(draws), method)


def chain_convergence(posterior):
    """Split R-hat and bulk ESS of one chain's likelihood trace after burn-in.

    The trace is the marginal log likelihood where the chain traces it (the
    private chains; DESIGN.md 1b: it does not depend on the latent counts and
    mixes far faster than the log joint), else the log joint (see
    :func:`trace_name`). ArviZ's R-hat needs two chains, so the chain's first
    and second halves go in as two chains and are split again: the
    rank-normalised split R-hat of its four quarters, near 1 when the quarters
    agree and above :data:`RHAT_DRIFTING` while the trace still drifts. A trace
    longer than :data:`MAX_CONVERGENCE_DRAWS` is diagnosed at every k-th
    iteration (evenly spaced, the last one included), so both numbers
    describe those draws.

    Parameters
    ----------
    posterior : lpviz.engine.Posterior

    Returns
    -------
    dict
        ``rhat``, ``ess`` (bulk ESS of the draws diagnosed), ``draws``
        (how many) and ``trace_name``; ``rhat``/``ess`` are None when they do not apply: a
        variational fit (no chain), fewer than 8 iterations after burn-in, or
        a trace that never varies.
    """
    name = trace_name(posterior.log_marginal)
    result = {"rhat": None, "ess": None, "draws": 0, "trace_name": name}
    if posterior.inference != "mcmc":
        return result
    full = posterior.log_marginal if name == "log_marginal" else posterior.log_joint
    trace = np.asarray(full[posterior.burn_in :], dtype=np.float64)
    trace = trace[np.isfinite(trace)]
    stride = max(1, -(-trace.size // MAX_CONVERGENCE_DRAWS))
    trace = trace[::-1][::stride][::-1]  # every stride-th, ending at the last iteration
    result["draws"] = int(trace.size)
    half = trace.size // 2
    if half < 4 or np.all(trace == trace[0]):
        return result
    result["rhat"] = float(rhat(np.stack([trace[:half], trace[-half:]])))
    result["ess"] = float(ess(trace[None, :]))
    return result


# ---------------------------------------------------------------------------
# What to diagnose
# ---------------------------------------------------------------------------


def probe_cells(observed, n_cells=N_PROBE_CELLS, random_state=0):
    """``(rows, cols)`` of ``n_cells`` observed cells drawn at random (without replacement).

    ``observed`` is a boolean array (True = a cell the fit sees), e.g.
    ``release.observed_cells``; of order 3 or more, cells are addressed as the chains do
    (rows x the other modes flattened). Every chain of a setting must use the same cells.
    """
    observed = np.asarray(observed, dtype=bool)
    if observed.ndim < 2:
        raise ValueError(f"observed must be a boolean matrix, got shape {observed.shape}")
    observed = observed.reshape(observed.shape[0], -1)
    flat = np.flatnonzero(observed)
    if flat.size == 0:
        raise ValueError("no observed cell to probe")
    chosen = np.sort(np.random.default_rng(random_state).choice(flat, size=min(n_cells, flat.size), replace=False))
    rows, cols = np.unravel_index(chosen, observed.shape)
    return rows.astype(np.int64), cols.astype(np.int64)


def probe_columns(column_totals, n_columns=N_PROBE_COLUMNS):
    """The ``n_columns`` columns (words) with the largest totals, in column order (all if fewer)."""
    totals = np.asarray(column_totals, dtype=np.float64).ravel()
    if totals.size <= n_columns:
        return np.arange(totals.size, dtype=np.int64)
    return np.sort(np.argsort(-totals, kind="stable")[:n_columns]).astype(np.int64)


def trace_name(log_marginal):
    """``"log_marginal"`` when the chain traced it (private chains), else ``"log_joint"``."""
    return "log_joint" if np.all(np.isnan(np.asarray(log_marginal, dtype=float))) else "log_marginal"


def traced_elements(fit, release=None, truth=None):
    """``(cells, columns)`` the diagnostics of a fit trace (:func:`probe_cells`, seed 0, and
    :func:`probe_columns`): with a release, 20 of its observed cells and the 100 words with the
    largest noised totals; without one, the cells the fit did not hold out and the columns of the
    true counts (else of the fit's rates). The same for every chain and method of one data set."""
    if release is not None:
        observed, column_totals = release.observed_cells, np.asarray(release.Y_obs).sum(axis=0)
    else:
        observed = np.ones(fit.shape, dtype=bool) if fit.heldout is None else ~fit.heldout
        reference = truth.Y if truth is not None else fit.mu_hat
        column_totals = np.asarray(reference).sum(axis=0)
    return probe_cells(observed, random_state=0), probe_columns(column_totals)


def fit_inference_data(fit, chains, release=None, truth=None, *, cells=None, columns=None, attrs=None):
    """:func:`to_inference_data` of a fit's ``chains``, tracing by default what
    :func:`lpviz.metrics.score` diagnoses (:func:`traced_elements` of ``fit``)."""
    if cells is None or columns is None:
        probe_cells, probe_columns = traced_elements(fit, release, truth)
        cells = probe_cells if cells is None else cells
        columns = probe_columns if columns is None else columns
    return to_inference_data(chains, cells=cells, columns=columns, attrs=attrs)


def odd_chains(traces, threshold=DISAGREE_SDS):
    """Chains whose likelihood trace sits in a poorer mode than the best chain's.

    ``traces``: ``(chain, draw)`` after burn-in. Returns ``(odd, numbers)``:
    the indices of the chains whose mean lies more than ``threshold``
    within-chain standard deviations (the median over the chains of each
    chain's own) below the best chain's mean, and
    per chain ``{"mean", "gap", "sds"}`` (its mean, how far below the best
    chain's it lies, in units and in standard deviations).
    """
    traces = np.asarray(traces, dtype=np.float64)
    means = traces.mean(axis=1)
    # a typical chain's spread: the median of the chains' own, so that an odd chain still climbing out
    # of its mode (its spread several times the others') does not widen the yardstick it is judged by
    spread = float(np.median(traces.std(axis=1, ddof=1))) if traces.shape[1] > 1 else 0.0
    best = int(np.argmax(means))
    numbers = []
    for mean in means:
        gap = float(means[best] - mean)
        sds = gap / spread if spread > 0 else (math.inf if gap > 0 else 0.0)
        numbers.append({"mean": float(mean), "gap": gap, "sds": sds})
    odd = [i for i, n in enumerate(numbers) if n["sds"] > threshold]
    return odd, numbers


def ensemble_convergence(ensemble, release=None, truth=None, *, elements=True):
    """Cross-chain diagnostics of an :class:`lpviz.ensemble.EnsemblePosterior`.

    Rank-normalised split R-hat and bulk/tail ESS (:func:`diagnose`) of the
    likelihood trace, the rates at the probe cells and the aligned topics
    (:func:`traced_elements`), and the chains in another mode (:func:`odd_chains`).
    ``elements=False``: the likelihood trace alone (every number the health
    rests on, at a small part of the cost: ArviZ diagnoses each traced element
    on its own, about a millisecond each, and the topics are aligned per sample).

    Returns
    -------
    dict
        ``rhat``, ``ess``, ``ess_tail``: of the likelihood trace (None when
        the chains are too short or it never varies); ``trace_name``;
        ``summary``: :func:`summarize_diagnostics` rows (one per quantity);
        ``odd``: indices of the chains in a poorer mode; ``chains``: per
        chain ``{"mean", "gap", "sds", "rate_distance"}`` (its rates' mean
        absolute difference from the other chains' pooled rates over the
        fitted cells).
    """
    cells, columns = traced_elements(ensemble, release, truth) if elements else (None, None)
    summaries = [chain_summary(p, cells=cells, columns=columns, topics=elements) for p in ensemble.chains]
    quantities = combine(summaries)
    name = summaries[0]["trace_name"]
    result = {"rhat": None, "ess": None, "ess_tail": None, "trace_name": name, "summary": [], "odd": [], "chains": []}
    trace = quantities[name]
    # quantities too short (fewer than 4 draws per chain) or not finite have no R-hat: left out
    judged = {
        key: draws
        for key, draws in quantities.items()
        if key != "topic_permutations" and draws.shape[1] >= 4 and np.all(np.isfinite(draws))
    }
    result["summary"] = summarize_diagnostics(diagnose(judged)) if judged else []
    if name in judged:
        first = result["summary"][0]
        if math.isfinite(first["rhat_max"]):
            result.update(rhat=first["rhat_max"], ess=first["ess_bulk_min"], ess_tail=first["ess_tail_min"])
        result["odd"], result["chains"] = odd_chains(trace)
    else:
        result["chains"] = [{"mean": math.nan, "gap": math.nan, "sds": math.nan} for _ in ensemble.chains]
    observed = np.ones(ensemble.shape, dtype=bool)
    for excluded in (ensemble.heldout, ensemble.structural_zeros):
        if excluded is not None:
            observed &= ~excluded
    rates = [p.mu_hat for p in ensemble.chains]
    weights = np.array([p.n_saved for p in ensemble.chains], dtype=float)
    total = sum(w * r for w, r in zip(weights, rates, strict=True))
    for i, numbers in enumerate(result["chains"]):
        others = (total - weights[i] * rates[i]) / max(weights.sum() - weights[i], 1.0)
        numbers["rate_distance"] = float(np.mean(np.abs(rates[i] - others)[observed])) if len(rates) > 1 else 0.0
    return result


def _normalised_topics(model, factors):
    topics = model.topics(factors)
    if topics is None:
        return None
    topics = np.asarray(topics, dtype=np.float64)
    sums = topics.sum(axis=1, keepdims=True)
    return topics / np.where(sums > 0, sums, 1.0)


def _cell_rates(model, factors, cells):
    left, right = model.low_rank(factors)
    rows, cols = cells
    return np.einsum("ik,ik->i", left[rows], right[cols])


def chain_summary(posterior, cells=None, columns=None, topics=True):
    """What the diagnostics need of one chain, as small arrays.

    Parameters
    ----------
    posterior : lpviz.engine.Posterior
    cells : (rows, cols), optional
        Cells whose rates are traced (:func:`probe_cells`); the same for every chain.
    columns : int array, optional
        Word columns whose topic weights are traced (:func:`probe_columns`; default all).
    topics : bool
        Trace the aligned topics of models that have them (False: the trace and rates only).

    Returns
    -------
    dict
        ``trace`` (float, iterations after burn-in) and ``trace_name``
        (see :func:`trace_name`); ``rates`` (saved samples, cells) when
        ``cells`` is given; for models with topics ``topics`` (saved samples,
        K, columns), the normalised topics aligned to the chain's best sample,
        and ``topics_mean`` (K, V), their mean over the saved samples at every word.
    """
    if not posterior.samples:
        raise ValueError("the chain has no saved sample; run past burn_in + thin iterations")
    log_marginal = posterior.log_marginal
    name = trace_name(log_marginal)
    full = log_marginal if name == "log_marginal" else posterior.log_joint
    summary = {"trace": np.asarray(full[posterior.burn_in :], dtype=np.float64), "trace_name": name}
    model = posterior.model_instance
    if cells is not None:
        summary["rates"] = np.array([_cell_rates(model, factors, cells) for factors in posterior.samples])
    reference = _normalised_topics(model, posterior.best) if topics else None
    if reference is not None:
        columns = np.arange(reference.shape[1]) if columns is None else np.asarray(columns, dtype=np.int64)
        total = np.zeros_like(reference)
        traced = np.empty((len(posterior.samples), reference.shape[0], columns.size))
        for s, factors in enumerate(posterior.samples):
            topics = _normalised_topics(model, factors)
            topics = topics[align_topics(topics, reference)]
            total += topics
            traced[s] = topics[:, columns]
        summary["topics"] = traced
        summary["topics_mean"] = total / len(posterior.samples)
    return summary


def _stack(arrays, name):
    length = min(len(a) for a in arrays)
    if length != max(len(a) for a in arrays):
        warnings.warn(
            f"chains have different numbers of {name} draws; using the first {length} of each",
            RuntimeWarning,
            stacklevel=3,
        )
    return np.stack([np.asarray(a)[:length] for a in arrays])


def combine(summaries, reference=0):
    """Stack per-chain summaries (:func:`chain_summary`) into ``{quantity: (chain, draw, ...)}``.

    Topics of every chain are aligned to chain ``reference`` by matching the
    chains' mean topics (Hungarian algorithm); ``topic_permutations`` gives,
    per chain, the permutation applied.
    """
    summaries = list(summaries)
    if not summaries:
        raise ValueError("no chain to combine")
    names = {s["trace_name"] for s in summaries}
    if len(names) > 1:
        raise ValueError(
            f"chains trace different quantities ({', '.join(sorted(names))}); combine chains of one method"
        )
    quantities = {names.pop(): _stack([s["trace"] for s in summaries], "trace")}
    if all("rates" in s for s in summaries):
        quantities["rate"] = _stack([s["rates"] for s in summaries], "rate")
    if all("topics" in s for s in summaries):
        target = summaries[reference]["topics_mean"]
        permutations = [align_topics(s["topics_mean"], target) for s in summaries]
        quantities["topic_word"] = _stack(
            [s["topics"][:, p, :] for s, p in zip(summaries, permutations, strict=True)], "topic"
        )
        quantities["topic_permutations"] = np.array(permutations)
    return quantities


def diagnose(quantities):
    """R-hat and ESS of every element of every quantity.

    Parameters
    ----------
    quantities : dict
        ``{name: array (chain, draw, *shape)}`` (e.g. from :func:`combine`;
        entries that are not draws, like ``topic_permutations``, are skipped).

    Returns
    -------
    list of dict
        One per element: ``quantity``, ``element`` (index as text, "" for
        scalars), ``rhat``, ``ess_bulk``, ``ess_tail``, ``chains``, ``draws``.
    """
    rows = []
    for name, draws in quantities.items():
        if name == "topic_permutations":
            continue
        draws = _check_draws(draws, name)
        values = {"rhat": rhat(draws), "ess_bulk": ess(draws, "bulk"), "ess_tail": ess(draws, "tail")}
        shape = draws.shape[2:]
        for index in np.ndindex(*shape) if shape else [()]:
            rows.append(
                {
                    "quantity": name,
                    "element": ",".join(map(str, index)),
                    **{key: float(np.asarray(value)[index]) for key, value in values.items()},
                    "chains": draws.shape[0],
                    "draws": draws.shape[1],
                }
            )
    return rows


def summarize_diagnostics(rows, threshold=RHAT_OK):
    """One row per quantity: worst R-hat, median R-hat, least bulk/tail ESS, and the share of
    elements with R-hat above ``threshold`` (constant elements, whose R-hat is NaN, left out)."""
    out = []
    for name in dict.fromkeys(row["quantity"] for row in rows):
        these = [row for row in rows if row["quantity"] == name]
        rhats = np.array([row["rhat"] for row in these])
        finite = rhats[np.isfinite(rhats)]
        bulk = np.array([row["ess_bulk"] for row in these])
        tail = np.array([row["ess_tail"] for row in these])
        out.append(
            {
                "quantity": name,
                "elements": len(these),
                "chains": these[0]["chains"],
                "draws": these[0]["draws"],
                "rhat_max": float(finite.max()) if finite.size else math.nan,
                "rhat_median": float(np.median(finite)) if finite.size else math.nan,
                "share_rhat_above": float(np.mean(finite > threshold)) if finite.size else math.nan,
                "ess_bulk_min": float(np.nanmin(bulk)) if np.isfinite(bulk).any() else math.nan,
                "ess_tail_min": float(np.nanmin(tail)) if np.isfinite(tail).any() else math.nan,
            }
        )
    return out


# ---------------------------------------------------------------------------
# ArviZ export
# ---------------------------------------------------------------------------


def to_inference_data(posteriors, *, cells=None, columns=None, attrs=None):
    """Several chains of one method as an ArviZ ``InferenceData``.

    Groups: ``posterior`` with, per saved sample, ``rate`` (cell) at
    ``cells`` and, for models with topics, ``topic_word`` (topic, word) at
    ``columns`` (normalised, labels aligned across chains as in
    :func:`combine`); ``sample_stats`` with ``log_marginal`` (or ``log_joint``)
    and ``iteration_seconds`` per iteration after burn-in (its ``draw`` is the
    iteration, not the saved sample). Save with ``idata.to_netcdf(path)``.
    """
    az = _arviz()
    posteriors = list(posteriors)
    if not posteriors:
        raise ValueError("no chain to export")
    methods = {p.method for p in posteriors}
    if len(methods) > 1:
        raise ValueError(f"to_inference_data takes chains of one method, got {', '.join(sorted(methods))}")
    summaries = [chain_summary(p, cells=cells, columns=columns) for p in posteriors]
    quantities = combine(summaries)
    name = summaries[0]["trace_name"]
    posterior, dims, coords = {}, {}, {}
    if "rate" in quantities:
        posterior["rate"] = quantities["rate"]
        dims["rate"] = ["cell"]
        coords["cell"] = [f"{r},{c}" for r, c in zip(*cells, strict=True)]
    if "topic_word" in quantities:
        posterior["topic_word"] = quantities["topic_word"]
        dims["topic_word"] = ["topic", "word"]
        n_words = summaries[0]["topics_mean"].shape[1]
        coords["topic"] = np.arange(quantities["topic_word"].shape[2])
        coords["word"] = np.arange(n_words) if columns is None else np.asarray(columns)
    first = posteriors[0]
    sample_stats = {
        name: quantities[name],
        "iteration_seconds": _stack([p.iteration_seconds[p.burn_in :] for p in posteriors], "seconds"),
    }
    if name != "log_joint":  # private chains trace both: the log joint beside the marginal
        sample_stats["log_joint"] = _stack([p.log_joint[p.burn_in :] for p in posteriors], "trace")
    info = {
        "model": first.model,
        "method": first.method,
        "method_label": first.method_label,
        "n_components": first.n_components,
        "shape": list(first.shape),
        "burn_in": first.burn_in,
        "thin": first.thin,
        "trace": name,
        "created_by": "lpviz.diagnostics.to_inference_data",
    }
    info.update(attrs or {})
    info = {key: (str(value) if isinstance(value, (list, dict, tuple)) else value) for key, value in info.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        idata = az.from_dict(
            posterior=posterior or None, sample_stats=sample_stats, dims=dims, coords=coords, attrs=info
        )
    for group in idata.groups():  # also on each group: tools that open one group keep the provenance
        idata[group].attrs.update(info)
    return idata
