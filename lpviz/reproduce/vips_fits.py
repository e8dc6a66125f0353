"""The fits of the VIPS comparison and the task that runs one (:func:`vips_task`).

Central fits run :class:`lpviz.central.PrivateLDA` on the training documents;
local fits noise them with the geometric mechanism and run :func:`lpviz.run`
(through :func:`lpviz.reproduce.chains.fit_and_summarise`). Every fit is
scored on the same held-out documents by document completion
(:mod:`lpviz.reproduce.vips_perplexity`).
"""

import functools
import math
import os
import socket
import time

import numpy as np

from lpviz.reproduce.vips_corpus import split_corpus
from lpviz.reproduce.vips_perplexity import completion_perplexity

# key: (label, colour, family, options); central fits run PrivateLDA, local fits lpviz.run
FITS = {
    "central": ("central DP: private SVI (VIPS)", "#d62728", "central", {}),
    "private-mcmc": ("local: private MCMC", "#1f77b4", "local", {"method": "private", "inference": "mcmc"}),
    "private-vi": ("local: private VI", "#17becf", "local", {"method": "private", "inference": "vi"}),
    "naive-mcmc": ("local: naive MCMC", "#ff7f0e", "local", {"method": "naive", "inference": "mcmc"}),
    "svi": ("non-private SVI (online LDA)", "#e377c2", "central", {"noise_multiplier": 0.0, "clip": None}),
    "nonprivate-mcmc": ("non-private MCMC", "#2ca02c", "local", {"method": "nonprivate", "inference": "mcmc"}),
}
PER_EPSILON = ("central", "private-mcmc", "private-vi", "naive-mcmc")
NON_PRIVATE = ("svi", "nonprivate-mcmc")
DEFAULT_SAMPLER = "collapsed"


def _record_common(started, clock, prepared, sampled, seconds):
    from lpviz._parallel import n_threads
    from lpviz.reproduce.chains import _peak_memory_gb

    seconds = np.asarray(seconds, dtype=float)
    return {
        "seconds_total": time.perf_counter() - clock,
        "seconds_data": prepared,
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


def _local_fit(params, corpus, started, clock):
    from lpviz.reproduce.chains import fit_and_summarise

    options = FITS[params["method"]][3]
    noise = params["noise"]
    release = corpus.train.privatize(
        epsilon=float(noise["epsilon"]), N=noise["N"], random_state=noise["seed"], public_labels=True
    )
    prepared = time.perf_counter() - clock
    posterior, result = fit_and_summarise(
        {**params, "method": options["method"], "inference": options["inference"]},
        release,
        corpus.truth,
        started=started,
        clock=clock,
        prepared=prepared,
    )
    return posterior.model_instance.topics(posterior.best), result


@functools.lru_cache(maxsize=64)
def _noise_multiplier(epsilon, delta, sampling_rate, steps, accountant):
    """What ``PrivateLDA(epsilon=...)`` calibrates, kept per process: every chain and dataset with the
    same budget, batch and corpus size shares one search (a PLD search takes seconds)."""
    from lpviz import accounting

    return accounting.noise_multiplier(epsilon, delta, sampling_rate, steps, accountant)


def _central_fit(params, corpus, started, clock):
    from lpviz.central import PrivateLDA
    from lpviz.central import posterior as central_posterior
    from lpviz.metrics import score

    prepared = time.perf_counter() - clock
    settings, options = params["central"], FITS[params["method"]][3]
    X = corpus.train.Y
    if "noise_multiplier" in options:
        sigma = options["noise_multiplier"]
    else:  # PrivateLDA(epsilon=...)'s calibration for its planned steps, shared within the process
        n_docs = X.shape[0]
        sigma = _noise_multiplier(
            float(params["labels"]["epsilon"]),
            settings["delta"],
            settings["batch_size"] / n_docs,
            settings["n_epochs"] * math.ceil(n_docs / settings["batch_size"]),
            settings["accountant"],
        )
    model = PrivateLDA(
        params["n_components"],
        noise_multiplier=sigma,
        delta=settings["delta"],
        batch_size=settings["batch_size"],
        n_epochs=settings["n_epochs"],
        clip=options.get("clip", settings["clip"]),
        doc_length=settings["doc_length"],
        accountant=settings["accountant"],
        random_state=params["chain_seed"],
    ).fit(X)
    step_seconds = model.trace_["seconds"].to_numpy()
    sampled = time.perf_counter() - clock - prepared
    fit = central_posterior(model, X)
    scores = score(fit, None, corpus.truth)
    scores.update(iterations=int(model.n_steps_), samples=1, seconds=round(float(step_seconds.sum()), 3))
    private = model.noise_multiplier_ > 0
    batches = model.trace_["n_documents"].to_numpy()
    extra = {
        "epsilon_spent": float(model.epsilon_) if private else None,
        "delta": model.delta_,
        "noise_multiplier": model.noise_multiplier_,
        "noise_std": model.noise_std_,
        "sampling_rate": model.sampling_rate_,
        "clipped_share": float(model.trace_["n_clipped"].sum() / max(batches.sum(), 1)),
        "lda_bound_perplexity": model.perplexity(corpus.heldout_counts),
    }
    nan = np.full(step_seconds.size, np.nan)
    arrays = {
        "log_joint": nan,
        "log_marginal": nan,
        "iteration_seconds": step_seconds,
        "epsilon_by_step": model.trace_["epsilon"].to_numpy(dtype=float),
        "batch_sizes": batches,
    }
    record = {
        "scores": scores,
        "extra_scores": extra,
        "shape": list(X.shape),
        "n_saved": 1,
        "alpha_mean": None,
        "epsilon": params["labels"]["epsilon"],
        "N": None,
        "heldout_cells": 0,
    }
    record.update(_record_common(started, clock, prepared, sampled, step_seconds))
    return model.components_, {"record": record, "arrays": arrays}


_FAMILIES = {"central": _central_fit, "local": _local_fit}


def vips_task(params):
    """One fit of the comparison: a pure function of its JSON ``params`` (every seed among them).

    ``params``: ``method`` (a key of :data:`FITS`), ``labels``
    (``dataset``, ``setting``, ``epsilon``, ``chain``), ``data`` and
    ``split`` (:func:`split_corpus`), ``n_components``, ``chain_seed``,
    ``fold_in`` (options of :func:`completion_perplexity`); local fits:
    ``noise`` (``epsilon``, ``N``, ``seed``), ``n_iter``/``burn_in``/``thin``
    (MCMC) or ``n_iter``/``tol`` (VI), ``method_options``; central fits:
    ``central`` (``batch_size``, ``n_epochs``, ``clip``, ``doc_length``,
    ``delta``, ``accountant``). Returns ``{"record", "arrays"}`` like
    :func:`lpviz.reproduce.chains.chain_task`, with ``extra_scores``
    ``perplexity`` (document completion) and the held-out sizes.
    """
    from lpviz.reproduce.chains import task_started

    started, clock = task_started()
    corpus = split_corpus(params["data"], params["split"])
    label, _, family, _ = FITS[params["method"]]
    topics, result = _FAMILIES[family](params, corpus, started, clock)
    record = result["record"]
    record["extra_scores"].update(
        perplexity=completion_perplexity(topics, corpus.fold_in, corpus.evaluate, **params.get("fold_in", {})),
        heldout_documents=int(corpus.heldout.size),
        evaluated_tokens=int(corpus.evaluate.sum()),
    )
    record.update(method_label=label, family=family, seconds_total=time.perf_counter() - clock)
    return result
