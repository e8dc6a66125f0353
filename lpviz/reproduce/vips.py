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

import math
from itertools import pairwise

import numpy as np

from lpviz.reproduce.base import Experiment, sampler_options
from lpviz.reproduce.vips_corpus import Corpus as Corpus  # re-exported: the split corpus
from lpviz.reproduce.vips_corpus import completion_halves, heldout_size, split_corpus
from lpviz.reproduce.vips_fits import DEFAULT_SAMPLER, FITS, NON_PRIVATE, PER_EPSILON, vips_task
from lpviz.reproduce.vips_perplexity import FOLD_IN_MAX_ITER, FOLD_IN_TOL, completion_perplexity, fold_in

__all__ = [
    "Vips",
    "vips_task",
    "lda_corpus",  # noqa: F822 -- served by __getattr__ below (it lives in lpviz.datasets.synthetic)
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


def __getattr__(name):
    # lda_corpus, a data generator, lives in lpviz.datasets.synthetic; still importable from here,
    # on demand, so that importing the reproduction suite does not import every data set reader
    if name == "lda_corpus":
        from lpviz.datasets.synthetic import lda_corpus

        return lda_corpus
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
