"""Central against local privacy for topic models: private online LDA (VIPS) beside the locally private fits.

Two answers to "a private topic model of a corpus" on the same documents:

- **central DP** (Park et al. 2016; Foulds, Park et al.: VIPS): a *trusted
  curator* holds the true documents and runs online LDA whose minibatch
  statistics get Gaussian noise (:class:`lpviz.central.PrivateLDA`):
  ``(epsilon, delta)``-DP for one whole document, the curator trusted;
- **local privacy** (Schein et al. 2019): every owner noises their own
  counts with the geometric mechanism before anyone sees them; the analyst
  fits the noised counts (private MCMC, private VI, or naive):
  ``(N, epsilon)``-LPLP, nobody trusted.

Each dataset -- the Enron documents of Figure 4
(:func:`lpviz.datasets.build_enron_topics`, a smaller slice at the quick
preset) and an LDA-like synthetic corpus with known topics
(:func:`lda_corpus`) -- is split once, by a seeded draw, into training
documents and held-out documents; every fit sees only the training
documents and is scored on the same held-out documents. Fits per epsilon in
:data:`EPSILONS`: central (``PrivateLDA(epsilon=...)``), local private MCMC
(the collapsed sampler by default), local private VI, naive MCMC at the
matching eps/N; once: non-private SVI (``PrivateLDA(noise_multiplier=0,
clip=None)``, plain online LDA) and non-private MCMC.

Measures (one task per fit and chain, :func:`vips_task`):

- **held-out perplexity, document completion** (:func:`completion_perplexity`):
  each held-out document's tokens are split at random into two halves
  (``Binomial(n_dv, 1/2)`` tokens of each word go to the first); the
  document's topic proportions are fitted to the first half with the fit's
  topics held fixed (:func:`fold_in`), and the second half is scored:
  ``exp(-sum log p(w | d) / tokens)`` with ``p(w | d) = sum_k theta_dk
  phi_kw``. The same protocol, the same halves and the same fold-in for every
  fit; ``phi`` are the fit's topics normalised to distributions: the saved
  sample with the highest log joint (MCMC; what score() shows), ``E_q``
  (VI), ``E[beta]`` = normalised ``lambda`` (online LDA). Online LDA's own
  per-word bound on the whole held-out documents (Park et al.'s measure,
  :meth:`PrivateLDA.perplexity`) is reported beside it for the central fits.
- NPMI and UMass coherence of the top-10 words against the training
  documents' true counts, MAE against the true counts (and rates),
  Hungarian-aligned topic distance on the synthetic corpus: all from
  :func:`lpviz.metrics.score` (the central fits through
  :func:`lpviz.central.posterior`).

Matching the budgets (:data:`MATCHING_RULE`): the two guarantees protect
different units, so no rule makes them equal. Here the local model's eps/N
equals the central epsilon with N = 1 word token: each model spends the same
epsilon on its own unit (a document centrally, one token locally). By group
privacy a local document of L tokens is then protected only at L x epsilon as
a whole, so the rule favours the local fits' accuracy and the central
model's guarantee; the report prints the whole-document local epsilon at the
median training document length.
"""

import functools
import json
import math
import os
import socket
import time
from dataclasses import dataclass
from itertools import pairwise

import numpy as np
import scipy.sparse as sp

from lpviz.reproduce.base import Experiment, sampler_options

__all__ = [
    "Vips",
    "vips_task",
    "lda_corpus",
    "fold_in",
    "completion_perplexity",
    "completion_halves",
    "accountant_claims",
    "EPSILONS",
    "FITS",
    "MATCHING_RULE",
]

EPSILONS = (0.5, 1.0, 2.0, 4.0)
DELTA = 1e-5
# fold-in: EM on each held-out document's topic proportions, stopped at this largest change or iteration count
FOLD_IN_MAX_ITER = 200
FOLD_IN_TOL = 1e-8
_TINY = 1e-300  # floor of a predicted word probability (a topic set that gives a word no mass at all)

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

GUARANTEES = {
    "central": "(epsilon, delta)-DP per document; the curator is trusted with the true documents",
    "local": "(N=1, epsilon)-LPLP per word token (eps/N = epsilon); nobody is trusted",
    "none": "none (the true documents)",
}
MATCHING_RULE = (
    "local eps/N = central epsilon, with N = 1 word token: each model spends the same epsilon on "
    "its own privacy unit (central: one whole document; local: one token). By group privacy a "
    "local document of L tokens is protected at L x epsilon as a whole, so at the same number the "
    "local guarantee is much weaker per document and needs no trusted curator."
)
CAPTION = (
    "central: (epsilon, delta={delta:g})-DP per document, curator trusted; local: (N=1, epsilon)-LPLP "
    "per token, nobody trusted"
)

# DESIGN.md 1d: the paper's Wikipedia run (Park et al. 2016) under dp-accounting 0.6.0
ACCOUNTANT_REFERENCE = {
    "sampling_rate": 0.05,
    "noise_multiplier": 1.24,
    "steps": 20,
    "delta": 1e-4,
    "rdp": 1.213,
    "pld": 0.932,
    "paper": 2.44,
}
ACCOUNTANT_TOLERANCE = 5e-4  # the reference numbers have three decimals


# ---------------------------------------------------------------------------
# Data: the synthetic corpus, the split, the held-out halves
# ---------------------------------------------------------------------------


def _check_int(name, value, minimum):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _check_positive(name, value):
    if (
        isinstance(value, (bool, np.bool_))
        or not isinstance(value, (int, float, np.number))
        or not np.isfinite(value)
        or value <= 0
    ):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


def lda_corpus(
    n_docs=1000,
    n_words=500,
    n_topics=10,
    *,
    doc_length=100.0,
    topic_concentration=0.1,
    doc_concentration=0.3,
    random_state=None,
):
    """An LDA-like corpus with known topics (the VIPS comparison's synthetic data).

    ``phi_k ~ Dirichlet(topic_concentration)`` over the words,
    ``pi_d ~ Dirichlet(doc_concentration)`` over the topics, a length
    ``L_d ~ Gamma(10, mean doc_length)``, and ``y_dv ~ Poisson(L_d sum_k
    pi_dk phi_kv)``: LDA with a Poisson document length (given its length a
    document's words are LDA's multinomial draw), written as the Poisson topic
    model with ``theta_dk = L_d pi_dk`` so that every fit's truth is the same.

    Returns
    -------
    SyntheticData
        ``model="topics"``, ``Y`` int64 (n_docs, n_words), ``mu``,
        ``factors={"theta": (D, K), "phi": (K, V) rows summing to 1}``; no
        noised copy (``Y_obs`` None: the experiment noises the training documents).
    """
    from lpviz.datasets import SyntheticData
    from lpviz.datasets.synthetic import _check_size

    n_topics = _check_int("n_topics", n_topics, 1)
    n_docs = _check_int("n_docs", n_docs, 2)
    n_words = _check_int("n_words", n_words, 2)
    doc_length = _check_positive("doc_length", doc_length)
    topic_concentration = _check_positive("topic_concentration", topic_concentration)
    doc_concentration = _check_positive("doc_concentration", doc_concentration)
    _check_size(n_docs, n_words)
    rng = np.random.default_rng(random_state)
    phi = rng.dirichlet(np.full(n_words, topic_concentration), n_topics)
    shares = rng.dirichlet(np.full(n_topics, doc_concentration), n_docs)
    lengths = rng.gamma(10.0, doc_length / 10.0, n_docs)
    theta = lengths[:, None] * shares
    mu = theta @ phi
    Y = rng.poisson(mu).astype(np.int64)
    return SyntheticData(
        Y=Y,
        row_labels=[f"doc {d}" for d in range(n_docs)],
        col_labels=[f"word {v}" for v in range(n_words)],
        model="topics",
        source="synthetic-lda",
        info={
            "doc_length": doc_length,
            "topic_concentration": topic_concentration,
            "doc_concentration": doc_concentration,
            "description": "LDA-like corpus with known topics (VIPS comparison)",
        },
        mu=mu,
        factors={"theta": theta, "phi": phi},
    )


def completion_halves(counts, random_state):
    """Split every document's tokens at random into two halves: ``(fold_in, evaluate)`` CSR matrices.

    Each of the ``n_dv`` tokens of word ``v`` goes to ``fold_in`` with
    probability 1/2 (``Binomial(n_dv, 1/2)``), the rest to ``evaluate``.
    """
    counts = sp.csr_matrix(counts, dtype=np.int64)
    rng = np.random.default_rng(random_state)
    first = counts.copy()
    first.data = rng.binomial(counts.data, 0.5).astype(np.int64)
    second = counts - first
    first.eliminate_zeros()
    second.eliminate_zeros()
    return first, second


@dataclass(frozen=True)
class Corpus:
    """A dataset split for the comparison: the training documents (``train``: CountData, ``truth``)
    and the held-out documents (``heldout``: their rows in the dataset; ``fold_in``/``evaluate``:
    the two halves of their tokens, CSR)."""

    train: object
    truth: object
    heldout: np.ndarray
    fold_in: sp.csr_matrix
    evaluate: sp.csr_matrix

    @property
    def heldout_counts(self):
        return self.fold_in + self.evaluate


@functools.lru_cache(maxsize=2)
def _cached_corpus(data_json, split_json):
    from lpviz.datasets import CountData
    from lpviz.release import Truth
    from lpviz.reproduce.chains import build_data

    data, split = build_data(json.loads(data_json)), json.loads(split_json)
    Y = sp.csr_matrix(data.Y, dtype=np.int64)
    n_docs = Y.shape[0]
    n_heldout = heldout_size(n_docs, split["heldout_fraction"])
    rng = np.random.default_rng(split["seed"])
    order = rng.permutation(n_docs)
    heldout, train = np.sort(order[:n_heldout]), np.sort(order[n_heldout:])
    fold, evaluate = completion_halves(Y[heldout], rng)
    Y_train = Y[train]
    train_data = CountData(
        Y=Y_train,
        row_labels=[data.row_labels[i] for i in train],
        col_labels=data.col_labels,
        model="topics",
        source=data.source,
        info={"rows": train},
    )
    mu, factors = getattr(data, "mu", None), getattr(data, "factors", None)
    if mu is not None and factors:
        truth = Truth(Y_train.toarray(), mu[train], {"theta": factors["theta"][train], "phi": factors["phi"]})
    else:
        truth = Truth(Y_train.toarray())
    return Corpus(train_data, truth, heldout, fold, evaluate)


def split_corpus(data_spec, split_spec):
    """The :class:`Corpus` of a data spec (:func:`lpviz.reproduce.chains.build_data`) and a split spec
    ``{"heldout_fraction": f, "seed": s}``; built once per process."""
    return _cached_corpus(json.dumps(data_spec, sort_keys=True), json.dumps(split_spec, sort_keys=True))


def heldout_size(n_docs, fraction):
    """Held-out documents of a corpus of ``n_docs``: ``round(fraction * n_docs)``, at least 1."""
    if not 0 < fraction < 1:
        raise ValueError(f"heldout_fraction must be in (0, 1), got {fraction!r}")
    return max(1, int(round(fraction * n_docs)))


# ---------------------------------------------------------------------------
# Document-completion perplexity
# ---------------------------------------------------------------------------


def _distributions(topics):
    topics = np.asarray(topics, dtype=np.float64)
    if topics.ndim != 2 or not np.all(np.isfinite(topics)) or topics.min(initial=0) < 0:
        raise ValueError("topics must be a finite non-negative (K, V) matrix")
    totals = topics.sum(axis=1, keepdims=True)
    if np.any(totals <= 0):
        raise ValueError("a topic has no mass: every topic needs a positive weight on some word")
    return topics / totals


def _rows_of(csr):
    return np.repeat(np.arange(csr.shape[0]), np.diff(csr.indptr))


def fold_in(topics, counts, *, pseudo_count=None, max_iter=FOLD_IN_MAX_ITER, tol=FOLD_IN_TOL):
    """Topic proportions of documents given fixed topics: EM with a symmetric pseudo-count.

    From uniform proportions, iterate for every document ``d``

        theta_dk <- (a + sum_v n_dv theta_dk phi_kv / sum_j theta_dj phi_jv) / (n_d + K a)

    (``phi`` = ``topics`` with rows normalised; ``a`` = ``pseudo_count``,
    default ``1/K``: one pseudo-token in all, as LDA's default document prior)
    until the largest change of any ``theta_dk`` is below ``tol`` or after
    ``max_iter`` sweeps. A document without tokens keeps uniform proportions.

    Parameters
    ----------
    topics : array (K, V), non-negative
    counts : array or sparse (D, V) of counts

    Returns
    -------
    ndarray (D, K), rows summing to 1
    """
    phi = _distributions(topics)
    X = sp.csr_matrix(counts, dtype=np.float64)
    n_topics = phi.shape[0]
    if X.shape[1] != phi.shape[1]:
        raise ValueError(f"counts have {X.shape[1]} words but topics {phi.shape[1]}: use the same vocabulary")
    a = 1.0 / n_topics if pseudo_count is None else float(pseudo_count)
    rows, cols = _rows_of(X), X.indices
    lengths = np.asarray(X.sum(axis=1)).ravel()
    phi_at = np.ascontiguousarray(phi[:, cols].T)  # (stored entries, K)
    theta = np.full((X.shape[0], n_topics), 1.0 / n_topics)
    for _ in range(max_iter):
        predicted = np.maximum(np.einsum("ik,ik->i", theta[rows], phi_at), _TINY)
        weights = sp.csr_matrix((X.data / predicted, cols, X.indptr), shape=X.shape)
        new = (a + theta * (weights @ phi.T)) / (lengths[:, None] + n_topics * a)
        change = float(np.abs(new - theta).max()) if new.size else 0.0
        theta = new
        if change < tol:
            break
    return theta


def completion_perplexity(
    topics, fold_in_counts, evaluate_counts, *, pseudo_count=None, max_iter=FOLD_IN_MAX_ITER, tol=FOLD_IN_TOL
):
    """Per-word held-out perplexity by document completion (see the module docstring).

    The held-out documents' proportions are fitted to ``fold_in_counts``
    (:func:`fold_in`) and ``evaluate_counts`` scored:
    ``exp(-sum_dv m_dv log sum_k theta_dk phi_kv / sum_dv m_dv)``.
    """
    phi = _distributions(topics)
    E = sp.csr_matrix(evaluate_counts, dtype=np.float64)
    total = E.data.sum()
    if total <= 0:
        raise ValueError("the evaluated halves hold no tokens: perplexity is per word, so it needs some")
    theta = fold_in(phi, fold_in_counts, pseudo_count=pseudo_count, max_iter=max_iter, tol=tol)
    rows = _rows_of(E)
    predicted = np.einsum("ik,ki->i", theta[rows], phi[:, E.indices])
    return float(np.exp(-(E.data * np.log(np.maximum(predicted, _TINY))).sum() / total))


# ---------------------------------------------------------------------------
# The task
# ---------------------------------------------------------------------------


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
    started, clock = time.time(), time.perf_counter()
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


# ---------------------------------------------------------------------------
# The accountant claim (DESIGN.md 1d)
# ---------------------------------------------------------------------------


def accountant_claims():
    """The paper's Wikipedia run under lpviz.accounting (dp-accounting) beside DESIGN.md 1d and the
    paper's own 2.44: two :class:`~lpviz.reproduce.report.Claim`."""
    from importlib.metadata import version

    from lpviz import accounting
    from lpviz.reproduce import report as rp

    ref = ACCOUNTANT_REFERENCE
    setting = (
        f"q={ref['sampling_rate']:g}, sigma={ref['noise_multiplier']:g}, {ref['steps']} steps, delta={ref['delta']:g}"
    )
    values = {
        name: accounting.epsilon(
            ref["sampling_rate"], ref["noise_multiplier"], ref["steps"], ref["delta"], accountant=name
        )
        for name in ("rdp", "pld")
    }
    measured = (
        f"lpviz.accounting (dp-accounting {version('dp-accounting')}): RDP {values['rdp']:.4f}, PLD {values['pld']:.4f}"
    )
    return [
        rp.Claim(
            f"The paper's Wikipedia run ({setting}) spends 1.213 (RDP) and 0.932 (PLD) under dp-accounting 0.6.0",
            "DESIGN.md 1d: RDP 1.213, PLD 0.932",
            measured,
            rp.verdict_of([abs(values[name] - ref[name]) <= ACCOUNTANT_TOLERANCE for name in ("rdp", "pld")]),
            f"both within {ACCOUNTANT_TOLERANCE:g} of the stated values (three decimals)",
        ),
        rp.Claim(
            "Park et al.: that run is (2.44, 1e-4)-DP",
            "epsilon = 2.44 (their 2016 moments accountant)",
            f"{measured}: the same noise buys a {ref['paper'] / values['rdp']:.2g}x (RDP) to "
            f"{ref['paper'] / values['pld']:.2g}x (PLD) smaller epsilon",
            rp.verdict_of([any(abs(values[name] - ref["paper"]) <= 0.01 for name in ("rdp", "pld"))]),
            "either modern accountant within 0.01 of 2.44 (the paper's bound was looser: not reproduced "
            "means its run is more private than it claimed)",
        ),
    ]


# ---------------------------------------------------------------------------
# The experiment
# ---------------------------------------------------------------------------


class Vips(Experiment):
    """Central DP (VIPS) against local privacy on the same training and held-out documents
    (see the module docstring): one task per dataset x fit x epsilon x chain."""

    name = "vips"
    title = "VIPS: central DP (private online LDA) vs local privacy, held-out perplexity and topics vs epsilon"
    paper = (
        "Park, Foulds, Chaudhuri, Welling. Private Topic Modeling (2016), Figure 1 and Table 1; Foulds, Park "
        "et al. VIPS (extended abstract); beside Schein et al. (ICML 2019) and Schofield et al. (private VI)."
    )
    requires = ("lpviz.central", "lpviz.accounting")
    _TINY = {
        "mcmc": {"n_iter": 40, "burn_in": 20, "thin": 4},
        "vi": {"n_iter": 40, "tol": 1e-4},
        "central": {"batch_size": 12, "n_epochs": 3, "accountant": "rdp"},
    }  # RDP: a faster calibration
    presets = {
        "tiny": {
            "datasets": {
                "synthetic": {"n_docs": 60, "n_words": 40, "n_topics": 3, "doc_length": 40.0, "K": 3},
                "enron": {"n_docs": 60, "n_words": 120, "K": 3},
            },
            "epsilons": (1.0, 4.0),
            "heldout_fraction": 0.2,
            "chains": 2,
            **_TINY,
        },
        "quick": {
            "datasets": {
                "synthetic": {"n_docs": 1000, "n_words": 500, "n_topics": 10, "doc_length": 100.0, "K": 10},
                "enron": {"n_docs": 1000, "n_words": 1000, "K": 10},
            },
            "epsilons": EPSILONS,
            "heldout_fraction": 0.2,
            "chains": 2,
            "mcmc": {"n_iter": 400, "burn_in": 150, "thin": 10},
            "vi": {"n_iter": 300, "tol": 1e-5},
            "central": {"batch_size": 200, "n_epochs": 5},
        },
        # Figure 4's Enron matrix and iterations; the synthetic corpus of the same number of documents
        "paper": {
            "datasets": {
                "synthetic": {"n_docs": 10_000, "n_words": 5_000, "n_topics": 50, "doc_length": 100.0, "K": 50},
                "enron": {"n_docs": 10_000, "n_words": 10_000, "K": 50},
            },
            "epsilons": EPSILONS,
            "heldout_fraction": 0.1,
            "chains": 1,
            "mcmc": {"n_iter": 7500, "burn_in": 2500, "thin": 100},
            "vi": {"n_iter": 500, "tol": 1e-5},
            "central": {"batch_size": 1000, "n_epochs": 10},
        },
    }
    # the central fits' fixed settings (PrivateLDA's defaults are the paper's clip and document length)
    central_defaults = {"clip": 0.1, "doc_length": 500, "delta": DELTA, "accountant": "pld"}
    fold_in_options = {"max_iter": FOLD_IN_MAX_ITER, "tol": FOLD_IN_TOL}
    group_keys = ("setting", "method")
    label_keys = ("setting", "dataset", "epsilon")
    task_function = staticmethod(vips_task)

    def _data_spec(self, dataset, spec, seed):
        from lpviz.reproduce.grid import seed_for

        if dataset == "enron":
            return {
                "source": "enron-topics",
                "n_docs": spec["n_docs"],
                "n_words": spec["n_words"],
                "seed": seed_for(seed, "data", dataset),
            }
        return {
            "source": "synthetic-lda",
            "n_docs": spec["n_docs"],
            "n_words": spec["n_words"],
            "n_topics": spec["n_topics"],
            "doc_length": spec["doc_length"],
            "seed": seed_for(seed, "data", dataset),
        }

    def tasks(self, preset, chains=None, seed=0, sampler=None):
        from lpviz.reproduce.grid import Task, seed_for

        settings = self.settings(preset)
        chains = chains or settings["chains"]
        tasks = []
        for dataset, spec in settings["datasets"].items():
            n_train = spec["n_docs"] - heldout_size(spec["n_docs"], settings["heldout_fraction"])
            common = {
                "data": self._data_spec(dataset, spec, seed),
                "model": "topics",
                "n_components": spec["K"],
                "split": {"heldout_fraction": settings["heldout_fraction"], "seed": seed_for(seed, "split", dataset)},
                "fold_in": dict(self.fold_in_options),
                "diagnostics": {"cells": 20, "columns": 100},
                "keep": {},
            }
            grid = [(eps, fit) for eps in settings["epsilons"] for fit in PER_EPSILON] + [
                (None, fit) for fit in NON_PRIVATE
            ]
            for eps, fit in grid:
                level = "non-private" if eps is None else f"eps={eps:g}"
                for chain in range(chains):
                    params = {
                        **common,
                        "method": fit,
                        "labels": {
                            "dataset": dataset,
                            "setting": f"{dataset} {level}",
                            "epsilon": eps,
                            "fit": fit,
                            "chain": chain,
                        },
                        "chain_seed": seed_for(seed, "chain", dataset, fit, level, chain),
                    }
                    params.update(self._fit_params(fit, eps, settings, n_train, seed, dataset, sampler))
                    tasks.append(Task(f"{dataset}--{fit}--{level}--chain{chain}", params))
        return tasks

    def _fit_params(self, fit, eps, settings, n_train, seed, dataset, sampler):
        from lpviz.reproduce.grid import seed_for

        family, options = FITS[fit][2], FITS[fit][3]
        if family == "central":
            central = {**self.central_defaults, **settings["central"]}
            central["steps_per_epoch"] = math.ceil(n_train / central["batch_size"])
            return {"central": central, "n_iter": central["n_epochs"] * central["steps_per_epoch"]}
        # the non-private MCMC fits the true counts; its release (at the grid's largest epsilon) only
        # says which cells exist
        level = max(settings["epsilons"]) if eps is None else eps
        out = {"noise": {"epsilon": level, "N": 1, "seed": seed_for(seed, "noise", dataset, level)}}
        if options["inference"] == "vi":
            out.update(n_iter=settings["vi"]["n_iter"], tol=settings["vi"]["tol"], method_options={})
        else:
            out.update(settings["mcmc"])
            out["method_options"] = sampler_options(options["method"], sampler or DEFAULT_SAMPLER)
        return out

    def probe_tasks(self, iterations, seed=0, sampler=None):
        """One short fit per dataset, fit and epsilon at the paper's sizes: MCMC and VI for
        ``iterations`` iterations, central fits for one epoch."""
        from lpviz.reproduce.grid import Task

        probes = []
        for task in super().probe_tasks(iterations, seed=seed, sampler=sampler):
            params = dict(task.params)
            if "central" in params:
                central = dict(params["central"], n_epochs=1)
                params.update(central=central, n_iter=central["steps_per_epoch"])
            elif params.get("tol") is not None:
                params["tol"] = 0.0  # every iteration runs: the probe measures their seconds
            probes.append(Task(task.id, params))
        return probes

    def prepare(self, settings, seed=0):
        # tasks read the data from the on-disk cache (Enron) or rebuild it cheaply (synthetic): build the
        # Enron matrix once here, not in every worker at once
        from lpviz.reproduce.chains import build_data

        for dataset, spec in settings["datasets"].items():
            if dataset == "enron":
                build_data(self._data_spec(dataset, spec, seed))

    # -- report ------------------------------------------------------------------------------------

    def report(self, results, rows, out_dir, settings):
        from lpviz.reproduce import report as rp

        metrics = [
            "perplexity",
            "npmi",
            "umass",
            "topic_distance",
            "mae",
            "rate_mae",
            "lda_bound_perplexity",
            "noise_multiplier",
            "epsilon_spent",
            "clipped_share",
            "seconds_total",
            "seconds_per_iteration",
            "iterations",
        ]
        stats = rp.group_stats(rows, ["dataset", "epsilon", "method"], metrics)
        order = {fit: i for i, fit in enumerate(FITS)}
        stats.sort(key=lambda s: (s["dataset"], order[s["method"]], -1 if s["epsilon"] is None else s["epsilon"]))
        lengths = self._median_lengths(results)
        for entry in stats:
            family = FITS[entry["method"]][2]
            kind = "none" if entry["method"] in NON_PRIVATE else family
            entry["fit"] = FITS[entry["method"]][0]
            entry["guarantee"] = GUARANTEES[kind]
            entry["local_document_epsilon"] = lengths[entry["dataset"]] * entry["epsilon"] if kind == "local" else None
        files = [rp.write_csv(out_dir / "vips.csv", stats)]
        caption = CAPTION.format(delta=settings.get("central", {}).get("delta", DELTA))
        files += rp.metric_panels(
            stats,
            x="epsilon",
            x_label="epsilon (central: per document; local: eps/N, N = 1 token)",
            metrics=[
                ("perplexity", "held-out perplexity"),
                ("npmi", "NPMI"),
                ("umass", "UMass coherence"),
                ("topic_distance", "topic distance (TV)"),
            ],
            methods=list(FITS),
            constant_methods=NON_PRIVATE,
            panel_key="dataset",
            styles={fit: (label, colour) for fit, (label, colour, _, _) in FITS.items()},
            path_png=out_dir / "vips.png",
            path_html=out_dir / "vips.html",
            title="Central vs local privacy: held-out perplexity (document completion), topic quality, topic "
            f"recovery\n{caption}",
        )
        claims = accountant_claims() + self._claims(stats)
        table = rp.markdown_table(
            stats,
            [
                "dataset",
                "fit",
                "epsilon",
                "perplexity_mean",
                "perplexity_sd",
                "npmi_mean",
                "umass_mean",
                "topic_distance_mean",
                "mae_mean",
                "seconds_total_mean",
                "seconds_per_iteration_mean",
                "iterations_mean",
                "tasks",
            ],
            [
                "dataset",
                "fit",
                "epsilon",
                "perplexity",
                "sd",
                "NPMI",
                "UMass",
                "topic dist.",
                "MAE",
                "s/fit",
                "s/iteration",
                "iterations",
                "fits",
            ],
        )
        sections = [
            (
                "Central vs local",
                f"*{caption}.* One row per dataset, fit and epsilon (central: the budget of the "
                "whole fit, delta as stated; local: eps/N with N = 1); mean over chains (sd of the perplexity). "
                "Held-out perplexity by document completion on the same held-out documents for every fit (lower is "
                "better); NPMI and UMass of the top-10 words against the training documents' true counts (higher "
                "is better); topic distance: mean total-variation distance to the true topics after Hungarian "
                "alignment (synthetic corpus; lower is better); MAE of the fitted rates against the training "
                "documents' true counts; s/fit: wall-clock of the task; s/iteration: per MCMC/VI iteration or "
                "online-LDA step. Every number is in `vips.csv` (its `guarantee` column says what each fit "
                "protects), every fit in `tasks.csv`.\n\n" + table,
            ),
            ("Privacy units, trust and how the budgets are matched", self._matching_text(lengths)),
            ("Held-out perplexity", self._perplexity_text(results)),
            ("Central DP settings", self._central_text(stats, settings)),
            ("Data", self._data_text(results, settings)),
            (
                "Fits without chains",
                "Variational and online-LDA fits have no chains to compare: the convergence "
                "diagnostics below cover the MCMC fits only (R-hat over the chains of each setting).",
            ),
        ]
        return claims, sections, files

    @staticmethod
    def _median_lengths(results):
        lengths = {}
        for record, _ in results:
            dataset = record["params"]["labels"]["dataset"]
            if dataset not in lengths:
                corpus = split_corpus(record["params"]["data"], record["params"]["split"])
                lengths[dataset] = float(np.median(np.asarray(corpus.truth.Y.sum(axis=1)).ravel()))
        return lengths

    @staticmethod
    def _claims(stats):
        from lpviz.reproduce import report as rp

        def values(dataset, fit, metric):
            return {
                s["epsilon"]: s[f"{metric}_mean"]
                for s in stats
                if s["dataset"] == dataset and s["method"] == fit and s[f"{metric}_mean"] is not None
            }

        datasets = sorted({s["dataset"] for s in stats})
        claims = []

        def text(dataset, fit, metric):
            return ", ".join(f"{v:.4g}" for _, v in sorted(values(dataset, fit, metric).items()))

        falls, coherent, beats, recovers = [], [], [], []
        lines = {"falls": [], "coherent": [], "beats": [], "recovers": []}
        for dataset in datasets:
            central = values(dataset, "central", "perplexity")
            eps = sorted(central)
            falls += [central[b] <= central[a] for a, b in pairwise(eps)]
            lines["falls"].append(f"{dataset}: {text(dataset, 'central', 'perplexity')}")
            svi_npmi = next(iter(values(dataset, "svi", "npmi").values()), None)
            central_npmi = values(dataset, "central", "npmi")
            if svi_npmi is not None:
                coherent += [svi_npmi > v for v in central_npmi.values()]
                lines["coherent"].append(
                    f"{dataset}: non-private {svi_npmi:.3g} vs private {text(dataset, 'central', 'npmi')}"
                )
            private, naive = values(dataset, "private-mcmc", "perplexity"), values(dataset, "naive-mcmc", "perplexity")
            beats += [private[e] < naive[e] for e in private if e in naive]
            lines["beats"].append(
                f"{dataset}: private {text(dataset, 'private-mcmc', 'perplexity')} vs naive "
                f"{text(dataset, 'naive-mcmc', 'perplexity')}"
            )
            private, naive = (
                values(dataset, "private-mcmc", "topic_distance"),
                values(dataset, "naive-mcmc", "topic_distance"),
            )
            if private and naive:
                recovers += [private[e] < naive[e] for e in private if e in naive]
                lines["recovers"].append(
                    f"{dataset}: private {text(dataset, 'private-mcmc', 'topic_distance')} "
                    f"vs naive {text(dataset, 'naive-mcmc', 'topic_distance')}"
                )
        levels = ", ".join(f"{e:g}" for e in sorted({s["epsilon"] for s in stats if s["epsilon"] is not None}))
        claims.append(
            rp.Claim(
                "Central DP: held-out perplexity falls as epsilon grows",
                "Park et al., Figure 1: the epsilon-perplexity trade-off",
                f"central perplexity at epsilon {levels}: " + "; ".join(lines["falls"]),
                rp.verdict_of(falls),
                "the central fit's mean perplexity does not rise from one epsilon to the next larger, on every dataset",
            )
        )
        claims.append(
            rp.Claim(
                "Non-private LDA gives more coherent topics than private LDA",
                "Park et al., Table 1 (topics at epsilon 2.44)",
                "NPMI: " + "; ".join(lines["coherent"]),
                rp.verdict_of(coherent),
                "non-private SVI's NPMI above the central fit's at every epsilon, every dataset",
            )
        )
        claims.append(
            rp.Claim(
                "Locally private MCMC predicts held-out documents better than the naive fit",
                "Schein et al. 2019 (private beats naive; here on held-out perplexity)",
                f"perplexity at eps/N {levels}: " + "; ".join(lines["beats"]),
                rp.verdict_of(beats),
                "private MCMC's mean perplexity below naive MCMC's at every eps/N, every dataset",
            )
        )
        if recovers:
            claims.append(
                rp.Claim(
                    "Locally private MCMC recovers the true topics better than the naive fit",
                    "Schein et al. 2019, Figure 3 (here on an LDA-like corpus)",
                    f"topic distance at eps/N {levels}: " + "; ".join(lines["recovers"]),
                    rp.verdict_of(recovers),
                    "private MCMC's mean aligned topic distance below naive MCMC's at every eps/N",
                )
            )
        return claims

    @staticmethod
    def _matching_text(lengths):
        whole = "; ".join(
            f"{dataset}: median training document {length:.0f} tokens, so eps/N = 1 protects a "
            f"whole document at about {length:.0f}"
            for dataset, length in sorted(lengths.items())
        )
        return (
            "Central DP (lpviz.central.PrivateLDA): a trusted curator holds the true documents; the released "
            "topics are (epsilon, delta)-DP for adding or removing one whole document (Poisson-subsampled "
            "Gaussian mechanism on per-document clipped statistics, composed by dp-accounting: see the "
            "central DP settings below). Local privacy (lpviz.privacy): every owner noises their own counts with the "
            "geometric mechanism, alpha = exp(-eps/N), before anyone sees them; the noised counts are "
            "(N, epsilon)-LPLP: counts within L1 distance N are epsilon-indistinguishable, and nobody (not "
            f"even the analyst) is trusted.\n\nMatching rule: {MATCHING_RULE} {whole}. The comparison "
            "therefore asks what each model delivers at the same nominal epsilon, not at the same protection."
        )

    @staticmethod
    def _perplexity_text(results):
        record = results[0][0]
        options = record["params"].get("fold_in", {})
        sizes = {}
        for rec, _ in results:
            sizes[rec["params"]["labels"]["dataset"]] = (
                rec["extra_scores"]["heldout_documents"],
                rec["extra_scores"]["evaluated_tokens"],
            )
        held = "; ".join(f"{d}: {n} held-out documents, {t} evaluated tokens" for d, (n, t) in sorted(sizes.items()))
        return (
            "Document completion, the same for every fit: a seeded draw holds out whole documents (never seen "
            "by any fit); each held-out document's tokens are split at random in two halves (Binomial(n_dv, "
            "1/2) tokens of each word to the first, one draw for all fits). With the fit's topics phi held "
            "fixed (normalised to distributions: the best saved sample of an MCMC fit, E_q of a VI fit, the "
            "normalised lambda of online LDA), the document's topic proportions theta_d are fitted to the "
            "first half by EM with a symmetric pseudo-count 1/K per topic (theta_dk <- (1/K + sum_v n_dv "
            "theta_dk phi_kv / sum_j theta_dj phi_jv) / (n_d + 1), from uniform, until no theta_dk moves by "
            f"{options.get('tol', FOLD_IN_TOL):g} or {options.get('max_iter', FOLD_IN_MAX_ITER)} sweeps), "
            "and the second half is scored: perplexity = exp(-sum_dv m_dv log sum_k theta_dk phi_kv / "
            f"sum_dv m_dv) (`lpviz.reproduce.vips.completion_perplexity`). {held}. Online LDA's own bound "
            "on the whole held-out documents (Park et al.'s measure) is `lda_bound_perplexity` in "
            "`vips.csv` for the central fits; it is not comparable with the Poisson fits."
        )

    @staticmethod
    def _central_text(stats, settings):
        central = {**Vips.central_defaults, **settings.get("central", {})}
        rows = [s for s in stats if s["method"] == "central"]
        parts = "; ".join(
            f"{s['dataset']} epsilon {s['epsilon']:g}: sigma {s['noise_multiplier_mean']:.3g}, "
            f"spent {s['epsilon_spent_mean']:.3g}, clipped {s['clipped_share_mean']:.0%} of documents"
            for s in rows
        )
        return (
            f"PrivateLDA: expected batch size {central['batch_size']}, {central['n_epochs']} epoch(s) of Poisson "
            f"minibatches, clip {central['clip']} of doc_length {central['doc_length']} (sensitivity Delta = "
            f"{central['clip'] * central['doc_length']:g}), delta {central['delta']:g}, the noise multiplier "
            f"calibrated to each epsilon by the {central['accountant'].upper()} accountant. Per fit: {parts}. "
            "Non-private SVI is the same online LDA with noise_multiplier=0 and no clipping. The paper ran "
            "400,000 documents with batches of 20,000; on a few thousand documents the noise a small epsilon "
            "needs swamps the statistics (`benchmarks/bench_central.py` computes what larger corpora need)."
        )

    @staticmethod
    def _data_text(results, settings):
        shapes = {}
        for record, _ in results:
            shapes[record["params"]["labels"]["dataset"]] = (record["shape"], record["params"]["n_components"])
        parts = []
        for dataset, (shape, K) in sorted(shapes.items()):
            spec = settings["datasets"][dataset]
            if dataset == "enron":
                source = (
                    f"Enron emails (build_enron_topics: {spec['n_docs']:,} emails with >= 50 tokens, the "
                    f"{spec['n_words']:,} most frequent words with document frequency < 0.3; $LPVIZ_ENRON or "
                    "the shared subset)"
                )
            else:
                source = (
                    f"lda_corpus: {spec['n_topics']} topics ~ Dirichlet(0.1) over {spec['n_words']} words, "
                    f"proportions ~ Dirichlet(0.3), lengths ~ Gamma(10, mean {spec['doc_length']:g}), "
                    "Poisson counts"
                )
            parts.append(f"- {dataset}: {source}; training matrix {shape[0]} x {shape[1]}, K = {K}")
        mcmc, vi = settings["mcmc"], settings["vi"]
        samplers = sorted(
            {
                record["params"]["method_options"]["sampler"]
                for record, _ in results
                if record["params"]["method"] == "private-mcmc"
            }
        )
        return (
            "\n".join(parts) + f"\n\nMCMC: {mcmc['n_iter']} iterations, every {mcmc['thin']}th saved after "
            f"{mcmc['burn_in']}; private MCMC with the {', '.join(samplers) or DEFAULT_SAMPLER} sampler "
            f"(`--sampler`); VI: at most {vi['n_iter']} iterations, relative ELBO "
            f"tolerance {vi['tol']:g}. Noise: one seeded noised copy of the training documents per "
            "epsilon, shared by the local fits at that epsilon."
        )
