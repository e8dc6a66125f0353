"""The Enron tensor: locally private Poisson tensor factorization, sender x recipient x month.

Not a figure of the papers but the claim the ICML paper makes in passing: its
method "applies to any Poisson factorization model", tensor factorization of
dyadic event counts among them (Schein et al. 2015). The data are the Enron
emails as sender x recipient x month counts
(:func:`lpviz.datasets.enron_tensor`: the network's actors, an email
counted once per distinct recipient in the month it was sent, no self loops),
noised at several epsilon/N; 10% of the cells (drawn at random, the same for
every fit) are held out of the fit. The tensor model (CP, K components) is
fitted by the private, naive and non-private chains. Measures: MAE on the
observed cells and held-out MAE against the true counts, each beside the best
constant (the median true count of those cells: an oracle no fit can beat by
predicting one number), and the fit's mass (the sum of its rates over the
observed cells over the sum of the true counts there): a fit below
:data:`COLLAPSED_MASS` has collapsed, and one whose chains disagree (split
R-hat of the likelihood trace or of the traced rates above :data:`MIXED_RHAT`)
has not mixed; both are flagged in words and never counted for a claim.
"""

import numpy as np

from lpviz import methods as method_registry
from lpviz.reproduce import report as rp
from lpviz.reproduce.base import Experiment, eps_by_components_grid
from lpviz.reproduce.chains import build_release, fit_and_summarise, task_started

EPS_OVER_N = (3.0, 2.0, 1.0, 0.5)
METHODS = ("private", "naive", "nonprivate")
HELDOUT_FRACTION = 0.1
# A fit whose rates over the observed cells sum to less than this share of the true counts has
# collapsed (it predicts ~0 where MAE against sparse counts rewards it): flagged, not ranked.
COLLAPSED_MASS = 0.5
# A group of chains whose likelihood trace or traced rates have a split R-hat above this has not mixed
# (1.1, the older and laxer of the usual thresholds; diagnostics.csv has every number).
MIXED_RHAT = 1.1
# "generally": in at least this share of the settings
GENERALLY = 2 / 3

_COMMON = {"model": "tensor", "method_options": {}, "diagnostics": {"cells": 20}, "keep": {}}


def tensor_task(params):
    """:func:`~lpviz.reproduce.chains.chain_task`, plus the fit's mass and the best constant's MAE on
    the observed and the held-out cells (in the record's ``extra_scores``)."""
    import time

    started, clock = task_started()
    _, release, truth = build_release(params)
    posterior, result = fit_and_summarise(
        params, release, truth, started=started, clock=clock, prepared=time.perf_counter() - clock
    )
    result["record"]["extra_scores"].update(baselines(posterior.mu_hat, release, truth))
    return result


def baselines(mu_hat, release, truth):
    """``mass``: sum of the rates over the observed cells / sum of the true counts there;
    ``constant_mae``, ``heldout_constant_mae``: MAE of the best constant (the median true count)."""
    observed, held = release.observed_cells, release.heldout_cells
    Y = np.asarray(truth.Y, dtype=np.float64)
    out = {"mass": float(mu_hat[observed].sum() / max(Y[observed].sum(), 1.0))}
    for prefix, cells in (("", observed), ("heldout_", held)):
        values = Y[cells] if cells is not None else None
        out[f"{prefix}constant_mae"] = None if values is None else float(np.abs(values - np.median(values)).mean())
    return out


def _rhat_text(rhat):
    return f"{rhat:.3g}" if np.isfinite(rhat) else "unknown: one chain or too few draws"


class TensorExperiment(Experiment):
    name = "tensor"
    title = "Enron sender x recipient x month: private, naive and non-private Poisson tensor factorization"
    paper = (
        "Schein, Wu, Schofield, Zhou, Wallach. Locally Private Bayesian Inference for Count Models. ICML 2019 "
        "(the method applies to any Poisson factorization); the model: Schein, Paisley, Blei, Wallach. "
        "Bayesian Poisson Tensor Factorization. KDD 2015."
    )
    presets = {
        "tiny": {
            "components": (3,),
            "n_iter": 30,
            "burn_in": 10,
            "thin": 4,
            "chains": 1,
            "copies": 1,
            "eps_over_N": (3.0, 1.0),
            "min_count": 400,
        },
        "quick": {
            "components": (5,),
            "n_iter": 3000,
            "burn_in": 1500,
            "thin": 10,
            "chains": 2,
            "copies": 1,
            "eps_over_N": EPS_OVER_N,
            "min_count": 100,
        },
        "paper": {
            "components": (5, 10),
            "n_iter": 10000,
            "burn_in": 5000,
            "thin": 25,
            "chains": 2,
            "copies": 3,
            "eps_over_N": EPS_OVER_N,
            "min_count": 100,
        },
    }
    label_keys = ("setting", "eps_over_N", "K")
    group_keys = ("setting", "method", "copy")
    task_function = staticmethod(tensor_task)

    def prepare(self, settings, seed=0):
        from lpviz.reproduce.chains import build_data

        build_data(self._data(settings))  # the corpus and the tensor into the cache, once

    def _data(self, settings):
        return {"source": "enron-tensor", "min_count": settings["min_count"], "seed": 0}

    def tasks(self, preset, chains=None, seed=0, sampler=None):
        settings = self.settings(preset)
        holdout = {"rule": "random cells", "fraction": HELDOUT_FRACTION, "seed": 0}
        return eps_by_components_grid(
            self.name,
            data=self._data(settings),
            key="K",
            components=settings["components"],
            settings=settings,
            methods=METHODS,
            holdout=holdout,
            common=_COMMON,
            copies=settings["copies"],
            chains=chains or settings["chains"],
            seed=seed,
            sampler=sampler,
        )

    def report(self, results, rows, out_dir, settings):
        metrics = ["mae", "heldout_mae", "mass", "constant_mae", "heldout_constant_mae"]
        worst_rhat = {}  # (setting, method) -> the largest R-hat over its copies' traces and rates
        for row in rp.diagnostic_rows(results, self.group_keys):
            if row.get("quantity") in ("log_marginal", "log_joint", "rate"):
                key = (row["setting"], row["method"])
                rhat = row.get("rhat_max")
                # no R-hat (a single chain, too few draws): mixing unknown, so not counted as mixed
                rhat = float(rhat) if rhat is not None and np.isfinite(rhat) else np.inf
                worst_rhat[key] = max(worst_rhat.get(key, 0.0), rhat)
        stats = rp.group_stats(rows, ["setting", "eps_over_N", "K", "method"], metrics)
        files = [rp.write_csv(out_dir / "summary.csv", stats)]
        levels = sorted({row["eps_over_N"] for row in rows if row.get("eps_over_N") is not None}, reverse=True)
        components = sorted({row["K"] for row in rows if row.get("K") is not None})
        pairs = [(e, k) for k in components for e in levels]

        def value(metric, method, level=None, K=None):
            where = {"method": method, "K": K}
            if level is not None:
                where["eps_over_N"] = level
            return rp.lookup(stats, metric, **where)

        def on_true_data(method):  # the registry says which methods fit the true counts (no noise level)
            return method_registry.get(method).uses_truth

        def setting_of(method, level, K):
            return f"true data, K={K}" if on_true_data(method) else f"eps/N={level:g}, K={K}"

        def mixed(method, level, K):
            rhat = worst_rhat.get((setting_of(method, level, K), method))
            return rhat is not None and rhat <= MIXED_RHAT

        def healthy(method, level, K):
            mass = value("mass", method, level, K)
            return mass is not None and mass >= COLLAPSED_MASS and mixed(method, level, K)

        def listing(metric, method):
            return "; ".join(
                f"K={k}: " + ", ".join(f"{value(metric, method, e, k):.3g}" for e in levels) for k in components
            )

        # the same truth and held-out cells in every setting: one best constant for each cell set
        constant = {
            "mae": value("constant_mae", "private", levels[0], components[0]),
            "heldout_mae": value("heldout_constant_mae", "private", levels[0], components[0]),
        }
        collapsed = [
            f"{method} at eps/N={e:g}, K={k} (mass {value('mass', method, e, k):.2f})"
            for method in METHODS
            if not on_true_data(method)
            for e, k in pairs
            if value("mass", method, e, k) < COLLAPSED_MASS
        ]
        unmixed = [
            f"{method} at {setting_of(method, e, k)} "
            f"(R-hat {_rhat_text(worst_rhat.get((setting_of(method, e, k), method), np.inf))})"
            for method in METHODS
            for e, k in ([(levels[0], k) for k in components] if on_true_data(method) else pairs)
            if not mixed(method, e, k)
        ]
        claims = []
        for metric, name in (("mae", "reconstruction error"), ("heldout_mae", "held-out error")):
            vs_naive = [
                healthy("private", e, k)
                and healthy("naive", e, k)
                and value(metric, "private", e, k) < value(metric, "naive", e, k)
                for e, k in pairs
            ]
            vs_constant = [
                healthy("private", e, k) and value(metric, "private", e, k) < constant[metric] for e, k in pairs
            ]
            claims.append(
                rp.Claim(
                    f"The private tensor fit has lower {name} than the naive one",
                    "any Poisson factorization: the private method beats ignoring the noise",
                    f"{metric} at eps/N {', '.join(f'{e:g}' for e in levels)}: private {listing(metric, 'private')} | "
                    f"naive {listing(metric, 'naive')} (lower, mixed and healthy in {sum(vs_naive)} of {len(pairs)})",
                    rp.generally(vs_naive, GENERALLY),
                    f"private below naive, both mixed and not collapsed, in at least {GENERALLY:.0%} of the "
                    "(eps/N, K) settings",
                    methods=("private", "naive"),
                )
            )
            claims.append(
                rp.Claim(
                    f"The private tensor fit's {name} beats the best constant",
                    "a fit that learns something predicts better than one number",
                    f"best constant (median true count) {constant[metric]:.3g}; private {listing(metric, 'private')} "
                    f"(below in {sum(vs_constant)} of {len(pairs)})",
                    rp.generally(vs_constant, GENERALLY),
                    f"private below the best constant, mixed and not collapsed, in at least {GENERALLY:.0%} of the "
                    "settings",
                    methods=("private",),
                )
            )
        files += rp.metric_panels(
            stats,
            x="eps_over_N",
            x_label="epsilon / N",
            reverse_x=True,
            panel_key="K",
            metrics=[("mae", "MAE (observed cells)"), ("heldout_mae", "held-out MAE")],
            methods=METHODS,
            constant_methods=("nonprivate",),
            path_png=out_dir / "tensor.png",
            path_html=out_dir / "tensor.html",
            title="Enron sender x recipient x month",
        )
        first = results[0][0]
        table = rp.markdown_table(
            stats,
            ["setting", "method", "tasks", "mae_mean", "mae_sd", "heldout_mae_mean", "heldout_mae_sd", "mass_mean"],
        )
        health = (
            f"Collapsed fits (mass below {COLLAPSED_MASS:g}; not counted as beating anything): " + "; ".join(collapsed)
            if collapsed
            else f"No fit collapsed (every mass at least {COLLAPSED_MASS:g})."
        )
        health += (
            f"\n\nNot mixed (split R-hat above {MIXED_RHAT:g}; not counted for any claim, run longer): "
            + "; ".join(unmixed)
            if unmixed
            else f"\n\nEvery group of chains mixed (split R-hat at most {MIXED_RHAT:g})."
        )
        sections = [
            (
                "Numbers",
                "Mean (sd) over noised copies and chains of score(): MAE of the posterior mean rates against "
                "the true counts on the observed and on the held-out cells; mass: the fit's rates summed over "
                "the observed cells over the true counts there. Best constant (the median true count): "
                f"MAE {constant['mae']:.4g} on the observed cells, {constant['heldout_mae']:.4g} held out.\n\n"
                + table
                + "\n\n"
                + health,
            ),
            (
                "Data",
                f"Enron sender x recipient x month counts {first['shape']} (enron_tensor, "
                f"min_count={settings['min_count']}); held out: a random {HELDOUT_FRACTION:.0%} of the cells "
                f"({first['heldout_cells']} cells). Corpus: $LPVIZ_ENRON or the shared subset of the CMU release.",
            ),
        ]
        return claims, sections, files
