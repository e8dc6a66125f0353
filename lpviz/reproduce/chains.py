"""The task every MCMC experiment runs: build the data, noise them, run one chain, score it.

A grid's chains are its tasks (Dask places each on a worker); each task is
``lpviz.fit(..., chains=1)``, the call ``lpviz fit`` makes, and its chain is
chain 0 of ``lpviz.fit(..., chains=C)`` for the same seed.

:func:`chain_task` is a pure function of its JSON parameters (every seed is
among them), so a task gives the same numbers wherever it runs. Its pieces:

``data``
    ``{"source": "synthetic-blocks" | "synthetic-topics" | "synthetic-lda" | "enron-topics" |
    "enron-network", "seed": int, ...builder keywords}`` (:data:`DATA_SOURCES`), or
    ``{"source": "spec", "spec": str, "options": {...}}``: what
    :func:`lpviz.datasets.load_data` takes (the CLI's and the dashboard's data
    specs, e.g. ``"synthetic-topics"`` with ``{"n_docs": 90, ...}``).
``noise``
    ``{"epsilon": e, "N": n | "mean", "seed": int}`` (``"mean"``: the
    empirical mean count, Figure 1) or ``{"alpha": "generator", "seed": int}``
    (the synthetic generator's per-document ``alpha_d``, Figure 3).
``holdout``
    ``None`` or ``{"rule": "top actors", "n_actors": k}`` (Figure 5) or
    ``{"rule": "random cells", "fraction": f, "seed": s}``
    (:func:`lpviz.datasets.holdout_mask`).
``method``, ``method_options``, ``model``, ``n_components``, ``n_iter``, ``burn_in``, ``thin``, ``chain_seed``
    The chain (:func:`lpviz.run`).
``diagnostics``
    ``{"cells": n, "cells_seed": int, "columns": n}``: what the convergence
    diagnostics trace (:func:`lpviz.diagnostics.chain_summary`).
``keep``
    ``{"mu_hat": bool, "best": bool}``: small problems keep their posterior
    mean rates and best sample for the figures.
``score_cells``
    ``{name: {"true_rate_below": x}}``: also score the fit on those cells
    (e.g. Figure 1's sparse cells); reported as ``NAME_mae``, ``NAME_rate_mae``.

Every number comes from :func:`lpviz.metrics.score`.
"""

import functools
import json
import os
import socket
import time

import numpy as np

from lpviz import diagnostics
from lpviz._parallel import n_threads
from lpviz.driver import fit
from lpviz.metrics import score

__all__ = ["chain_task", "fit_and_summarise", "build_data", "build_release", "DATA_SOURCES", "enron_source"]

# Posterior mean rates are kept in the result up to this many cells.
KEEP_MU_HAT_MAX_CELLS = 250_000
ENRON_ENV = "LPVIZ_ENRON"


def enron_source():
    """The Enron corpus the Enron experiments read: ``$LPVIZ_ENRON``, else the shared subset
    (``../shared/data/enron_sent_subset.tar.gz`` beside the checkout)."""
    from pathlib import Path

    value = os.environ.get(ENRON_ENV)
    if value:
        return str(Path(value).expanduser())
    shared = Path(__file__).resolve().parents[3] / "shared" / "data" / "enron_sent_subset.tar.gz"
    return str(shared)


def _synthetic_blocks(spec):
    from lpviz.datasets import make_blocks

    # make_blocks draws theta, pi, Y first from its generator: the same seed gives
    # the same network for every epsilon; its own noised copy is not used here
    return make_blocks(
        spec["n_actors"], spec["n_communities"], epsilon=1.0, a0=spec["a0"], b0=spec["b0"], random_state=spec["seed"]
    )


def _synthetic_topics(spec):
    from lpviz.datasets import make_topics

    # Y is drawn before the per-document alphas: the same seed gives the same
    # documents for every alpha0
    return make_topics(
        spec["n_docs"], spec["n_words"], spec["n_topics"], alpha0=spec["alpha0"], random_state=spec["seed"]
    )


def _enron_topics(spec):
    from lpviz.datasets import build_enron_topics

    return build_enron_topics(
        spec.get("path") or enron_source(), n_docs=spec["n_docs"], n_words=spec["n_words"], random_state=spec["seed"]
    )


def _synthetic_lda(spec):
    from lpviz.datasets.synthetic import lda_corpus

    return lda_corpus(
        spec["n_docs"],
        spec["n_words"],
        spec["n_topics"],
        doc_length=spec.get("doc_length", 100.0),
        random_state=spec["seed"],
    )


def _enron_network(spec):
    from lpviz.datasets import build_enron_network

    return build_enron_network(spec.get("path") or enron_source(), min_count=spec.get("min_count", 100))


def _enron_tensor(spec):
    from lpviz.datasets import enron_tensor

    return enron_tensor(spec.get("path") or enron_source(), min_count=spec.get("min_count", 100))


def _load_data_spec(spec):
    from lpviz.datasets import load_data

    return load_data(spec["spec"], **spec.get("options", {}))


DATA_SOURCES = {
    "synthetic-blocks": _synthetic_blocks,
    "synthetic-topics": _synthetic_topics,
    "synthetic-lda": _synthetic_lda,
    "enron-topics": _enron_topics,
    "enron-network": _enron_network,
    "enron-tensor": _enron_tensor,
    "spec": _load_data_spec,
}


@functools.lru_cache(maxsize=2)
def _cached_data(spec_json):
    spec = json.loads(spec_json)
    try:
        builder = DATA_SOURCES[spec["source"]]
    except KeyError:
        raise ValueError(f"unknown data source {spec.get('source')!r}; one of {', '.join(DATA_SOURCES)}") from None
    return builder(spec)


def build_data(spec):
    """The (true) data set of a data spec; built once per process and spec."""
    return _cached_data(json.dumps(spec, sort_keys=True))


def build_release(params):
    """``(data, release, truth)`` of a task's ``data``/``noise``/``holdout`` parameters."""
    from lpviz.datasets import holdout_mask
    from lpviz.privacy import alpha_from

    data = build_data(params["data"])
    noise = params["noise"]
    heldout = None
    if params.get("holdout"):
        rule = params["holdout"]
        mask = holdout_mask(
            data.dense(),
            data.model,
            rule["rule"],
            n_actors=rule.get("n_actors", 50),
            fraction=rule.get("fraction", 0.1),
            random_state=rule.get("seed"),
        )
        heldout = None if mask is None else ~mask
    if "alpha" in noise:
        if noise["alpha"] != "generator":
            alpha = float(noise["alpha"])
        else:
            alpha = data.alpha
        release = data.privatize(alpha=alpha, heldout=heldout, random_state=noise["seed"], public_labels=True)
    else:
        epsilon, N = float(noise["epsilon"]), noise.get("N", 1)
        if N == "mean":  # Figure 1: N is the empirical mean count of the network
            N = float(data.info["N"])
        if N < 1:  # the mechanism's N is >= 1; only epsilon / N sets the noise
            release = data.privatize(
                alpha=alpha_from(epsilon / N), heldout=heldout, random_state=noise["seed"], public_labels=True
            )
        else:
            release = data.privatize(
                epsilon=epsilon, N=float(N), heldout=heldout, random_state=noise["seed"], public_labels=True
            )
    return data, release, data.truth()


def _scores_on(posterior, release, truth, rule):
    """score() of the posterior on a subset of cells: the subset goes in as the 'held-out' cells of a
    scoring release (the chain never saw it as held out; score only reads which cells to average over)."""
    if "true_rate_below" not in rule:
        raise ValueError(f"unknown score_cells rule {rule!r}; supported: true_rate_below")
    if truth.mu is None:
        raise ValueError("score_cells with true_rate_below needs simulated data (true rates)")
    if release.heldout is not None:
        raise ValueError("score_cells works on releases without held-out cells (it uses that slot)")
    cells = np.asarray(truth.mu) < float(rule["true_rate_below"])
    if release.structural_zeros is not None:
        cells &= ~release.structural_zeros
    if not cells.any():
        return {"mae": None, "rate_mae": None, "cells": 0}
    result = score(posterior, release.with_heldout(cells), truth)
    return {"mae": result["heldout_mae"], "rate_mae": result["heldout_rate_mae"], "cells": int(cells.sum())}


def task_started():
    """``(time.time(), time.perf_counter())`` at a task's start, and the process's peak resident memory
    reset to what it holds now (Linux), so :func:`_peak_memory_gb` at the task's end is this task's
    peak: read as the process's lifetime peak, a worker's (or a serial run's) later tasks reported the
    largest task before them (the Figure 4 probe read 4.1 GB growing to 10.5 GB over its seven tasks;
    the last one alone peaks at 4.3 GB)."""
    try:
        with open("/proc/self/clear_refs", "w") as clear_refs:
            clear_refs.write("5")  # 5: reset the peak RSS (proc(5)); it also resets ru_maxrss
    except OSError:  # not Linux, or not allowed: the lifetime peak, an upper bound
        pass
    return time.time(), time.perf_counter()


def _peak_memory_gb():
    """Peak resident memory of this process since :func:`task_started` (Linux; else since the
    process started, an upper bound for this task's), in GB; None if unknown."""
    try:
        import resource
    except ImportError:  # not on POSIX
        return None
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9  # ru_maxrss: KiB on Linux


def chain_task(params):
    """Run one chain of a grid; returns ``{"record": {...}, "arrays": {...}}`` (see the module docstring)."""
    started, clock = task_started()
    data, release, truth = build_release(params)
    _, result = fit_and_summarise(
        params, release, truth, started=started, clock=clock, prepared=time.perf_counter() - clock
    )
    return result


def fit_and_summarise(params, release, truth, *, started, clock, prepared):
    """Run the fit ``params`` describe on ``release`` and summarise it for the result store.

    The part of :func:`chain_task` after the data are built, for experiments
    that build their release another way (e.g. the VIPS comparison's training
    documents). ``params["inference"]`` (default ``"mcmc"``) may be ``"vi"``:
    a CAVI fit of at most ``n_iter`` iterations stopping at ``params["tol"]``
    (no burn-in, thinning or chain diagnostics). ``started``/``clock``: the
    task's start (``time.time()``, ``time.perf_counter()``); ``prepared``: the
    seconds it took to build the data.

    Returns
    -------
    (posterior, result)
        The :class:`~lpviz.engine.Posterior` and ``{"record": ..., "arrays": ...}``.
    """
    method = params["method"]
    from lpviz import methods as method_registry

    fits_truth = method_registry.get(method).uses_truth
    inference = params.get("inference", "mcmc")
    if inference == "vi":
        schedule = {"n_iter": params["n_iter"], "tol": params.get("tol")}
    else:
        schedule = {"n_iter": params["n_iter"], "burn_in": params["burn_in"], "thin": params["thin"]}
    stamps = [time.perf_counter()]
    posterior = fit(  # the library's one call for a fit, as `lpviz fit` makes it; one chain per task
        release,
        model=params.get("model"),
        method=method,
        n_components=params["n_components"],
        truth=truth if fits_truth else None,
        random_state=params["chain_seed"],
        inference=inference,
        chains=1,
        callback=lambda state: stamps.append(time.perf_counter()),
        **schedule,
        **params.get("method_options", {}),
    )
    sampled = time.perf_counter() - clock - prepared
    scores = score(posterior, release, truth)
    extra = {}
    for name, rule in (params.get("score_cells") or {}).items():
        for key, value in _scores_on(posterior, release, truth, rule).items():
            extra[f"{name}_{key}"] = value

    arrays = {
        "log_joint": posterior.log_joint,
        "log_marginal": posterior.log_marginal,
        "iteration_seconds": posterior.iteration_seconds,
        "saved_iterations": np.asarray(posterior.saved_iterations, dtype=np.int64),
    }
    record = {}
    if inference == "mcmc":  # a chain: what the convergence diagnostics read
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
                "cells_rows": cells[0],
                "cells_cols": cells[1],
                "columns": columns,
            }
        )
        if "topics" in summary:
            arrays["topics"], arrays["topics_mean"] = summary["topics"], summary["topics_mean"]
        record["trace_name"] = summary["trace_name"]
        if release.heldout_cells is not None and posterior.n_saved:
            # the chain's predictive density of each held-out noised cell (lpviz.stacking): the report
            # stacks a setting's chains on them and ranks its methods without the truth (lpviz.compare's rule)
            from lpviz.stacking import chain_stacking

            arrays["heldout_lpd"] = chain_stacking([posterior], release).pointwise[0]
    keep = params.get("keep") or {}
    n_cells = int(np.prod(release.shape))
    if keep.get("mu_hat") and n_cells <= KEEP_MU_HAT_MAX_CELLS:
        arrays["mu_hat"] = posterior.mu_hat
    if keep.get("best") and n_cells <= KEEP_MU_HAT_MAX_CELLS:
        arrays.update({f"best_{name}": value for name, value in posterior.best.items()})
    loop = np.diff(stamps)  # wall-clock of each iteration, bookkeeping included
    record.update(
        {
            "scores": scores,
            "extra_scores": extra,
            "method_label": posterior.method_label,
            "shape": list(release.shape),
            "n_saved": posterior.n_saved,
            "alpha_mean": float(np.mean(release.alpha)),
            "epsilon": release.epsilon,
            "N": release.N,
            "heldout_cells": 0 if release.heldout_cells is None else int(release.heldout_cells.sum()),
            "seconds_total": time.perf_counter() - clock,
            "seconds_data": prepared,
            "seconds_sampling": sampled,
            # mean wall-clock per iteration after the first (which carries one-off costs: allocation, first
            # kernel calls); the mean, not the median: rare slow iterations are part of the cost
            "seconds_per_iteration": float(np.mean(loop[1:] if loop.size > 1 else loop)),
            "first_iteration_seconds": float(loop[0]),
            "started": started,
            "finished": time.time(),
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "peak_memory_gb": _peak_memory_gb(),
            "kernel_threads": n_threads(),
        }
    )
    return posterior, {"record": record, "arrays": arrays}
