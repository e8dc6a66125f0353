"""Figure 1 of Schein et al. (ICML 2019): block structure recovery, private vs naive.

A synthetic network of V=20 actors and C=5 communities (:func:`lpviz.datasets.make_blocks`),
noised at epsilon in {2.5, 1, 0.75} with N the empirical mean count; the
block model fitted by the private method, the naive one (truncated noised
counts) and the non-private one (true counts); 8,500 iterations, every 25th
saved after 1,000. The paper's claims are qualitative (the figure has no
numbers): the naive fit "overfits the noise, predicting high values even
for sparse parts of the matrix"; the private fit "recovers the latent
structure, even for high levels of privacy".

The paper's prior for the true factors, Gamma(0.01, rate 0.5), draws empty
networks (see :func:`~lpviz.datasets.make_blocks`); the true factors here are
Gamma(0.1, rate 0.1), which gives Figure-1-like block structure.
"""

from itertools import pairwise

import numpy as np

from lpviz import methods
from lpviz.reproduce import report as rp
from lpviz.reproduce.base import Experiment, Setting, chain_grid
from lpviz.reproduce.chains import build_release

EPSILONS = (2.5, 1.0, 0.75)
METHODS = ("private", "naive", "nonprivate")
SPARSE_RATE = 0.01  # a cell whose true rate is below this is "sparse": almost surely 0 in every draw

_COMMON = {
    "model": "blocks",
    "n_components": 5,
    "method_options": {},
    "diagnostics": {"cells": 20},
    "keep": {"mu_hat": True},
    "score_cells": {"sparse": {"true_rate_below": SPARSE_RATE}},
}


class Figure1(Experiment):
    name = "fig1"
    title = "Figure 1: block structure recovery (synthetic network)"
    paper = (
        "Schein, Wu, Schofield, Zhou, Wallach. Locally Private Bayesian Inference for Count Models. "
        "ICML 2019, Figure 1 (section 5.2, synthetic data)."
    )
    presets = {
        "tiny": {"n_iter": 60, "burn_in": 20, "thin": 4, "chains": 2, "copies": 1, "epsilons": EPSILONS},
        "quick": {"n_iter": 2000, "burn_in": 500, "thin": 10, "chains": 4, "copies": 1, "epsilons": EPSILONS},
        "paper": {"n_iter": 8500, "burn_in": 1000, "thin": 25, "chains": 4, "copies": 1, "epsilons": EPSILONS},
    }
    paper_sizes = True
    label_keys = ("setting", "epsilon")

    data_spec = {"source": "synthetic-blocks", "n_actors": 20, "n_communities": 5, "a0": 0.1, "b0": 0.1}

    def tasks(self, preset, chains=None, seed=0, sampler=None):
        settings = self.settings(preset)
        grid = [
            Setting(f"epsilon={eps:g}", {"epsilon": eps}, {"epsilon": eps, "N": "mean"}, noise_keys=("epsilon",))
            for eps in settings["epsilons"]
        ]
        common = {**_COMMON, "n_iter": settings["n_iter"], "burn_in": settings["burn_in"], "thin": settings["thin"]}
        return chain_grid(
            self.name,
            data=self.data_spec,
            settings=grid,
            methods=METHODS,
            copies=settings["copies"],
            chains=chains or settings["chains"],
            seed=seed,
            common=common,
            sampler=sampler,
        )

    def report(self, results, rows, out_dir, settings):
        metrics = ["rate_mae", "mae", "sparse_rate_mae"]
        stats = rp.group_stats(rows, ["setting", "epsilon", "method"], metrics)
        files = [rp.write_csv(out_dir / "summary.csv", stats)]
        epsilons = sorted({row["epsilon"] for row in rows if row.get("epsilon") is not None}, reverse=True)

        def value(metric, method, eps=None):
            where = {"method": method} if eps is None else {"method": method, "epsilon": eps}
            return rp.lookup(stats, metric, **where)

        def series(metric, method):
            return ", ".join(f"{value(metric, method, e):.3g}" for e in epsilons)

        eps_text = ", ".join(f"{e:g}" for e in epsilons)
        sparse_checks = [
            value("sparse_rate_mae", "naive", e) > value("sparse_rate_mae", "private", e) for e in epsilons
        ]
        rate_checks = [value("rate_mae", "private", e) < value("rate_mae", "naive", e) for e in epsilons]
        naive_rates = [value("rate_mae", "naive", e) for e in epsilons]
        monotone = [b > a for a, b in pairwise(naive_rates)]
        cells = next(record["extra_scores"].get("sparse_cells") for record, _ in results)
        claims = [
            rp.Claim(
                "The naive fit overfits the noise: high rates even in the sparse parts of the matrix",
                "qualitative (figure): naive mu_hat shows the noise; private mu_hat stays sparse",
                f"mean rate on the {cells} sparse cells (true rate < {SPARSE_RATE}) at epsilon {eps_text}: "
                f"naive {series('sparse_rate_mae', 'naive')}; private {series('sparse_rate_mae', 'private')};"
                f" non-private {value('sparse_rate_mae', 'nonprivate'):.3g}",
                rp.verdict_of(sparse_checks),
                "naive's mean |mu_hat - mu*| over the sparse cells above private's at every epsilon",
                methods=("private", "naive"),
            ),
            rp.Claim(
                "The private fit recovers the latent structure, even at high privacy",
                "qualitative (figure): private mu_hat matches mu* at every noise level",
                f"MAE of mu_hat vs the true rates mu* at epsilon {eps_text}: private "
                f"{series('rate_mae', 'private')}; naive {series('rate_mae', 'naive')}; non-private "
                f"{value('rate_mae', 'nonprivate'):.3g}",
                rp.verdict_of(rate_checks),
                "private's MAE vs the true rates below naive's at every epsilon",
                methods=("private", "naive"),
            ),
            rp.Claim(
                "As privacy increases, the naive fit gets worse",
                "qualitative (figure, left to right: epsilon 2.5, 1, 0.75)",
                f"naive MAE vs mu*: {series('rate_mae', 'naive')}",
                rp.verdict_of(monotone),
                "naive's MAE vs the true rates grows as epsilon falls",
                methods=("naive",),
            ),
        ]
        files += rp.metric_panels(
            stats,
            x="epsilon",
            x_label="epsilon (N = mean count)",
            reverse_x=True,
            metrics=[
                ("rate_mae", "MAE vs true rates"),
                ("sparse_rate_mae", "mean rate on sparse cells"),
                ("mae", "MAE vs true counts"),
            ],
            methods=METHODS,
            constant_methods=("nonprivate",),
            path_png=out_dir / "fig1_errors.png",
            path_html=out_dir / "fig1_errors.html",
            title="Figure 1: reconstruction error vs privacy",
        )
        files += self._heatmaps(results, out_dir, epsilons)
        table = rp.markdown_table(
            stats, ["setting", "method", "tasks", "rate_mae_mean", "rate_mae_sd", "sparse_rate_mae_mean", "mae_mean"]
        )
        sections = [
            (
                "Numbers",
                "Mean (sd) over chains of score() on each fit; `rate_mae` against the true rates, "
                "`sparse_rate_mae` on the cells whose true rate is below "
                f"{SPARSE_RATE} (scored as a cell subset by lpviz.metrics.score), `mae` against the true "
                "counts.\n\n" + table,
            ),
            (
                "Data",
                "make_blocks(20 actors, 5 communities, Gamma(0.1, rate 0.1) factors): the paper's "
                "Gamma(0.01, rate 0.5) draws empty networks (lpviz.datasets.make_blocks explains). Noise "
                "alpha = exp(-epsilon/N), N = the empirical mean count. Private method: the registry's "
                "default sampler (the paper's Bessel route).",
            ),
        ]
        return claims, sections, files

    def _heatmaps(self, results, out_dir, epsilons):
        means, truth_panels, observed = {}, None, {}
        for record, arrays in results:
            params = record["params"]
            key = (params["labels"]["setting"], params["method"])
            means.setdefault(key, []).append(arrays["mu_hat"])
            noise_level = params["labels"].get("epsilon")  # None: the fit of the true counts, no noise setting
            if (
                params["labels"].get("copy") == 0
                and params["labels"].get("chain") == 0
                and noise_level is not None
                and noise_level not in observed
            ):  # one release per setting
                data, release, truth = build_release(params)
                observed[params["labels"]["epsilon"]] = release.Y_obs
                truth_panels = (truth.mu, truth.Y)
        pooled = {key: np.mean(values, axis=0) for key, values in means.items()}
        rows = []
        for (setting, method), matrix in pooled.items():
            for (i, j), value in np.ndenumerate(matrix):
                rows.append({"setting": setting, "method": method, "row": i, "col": j, "mu_hat": float(value)})
        truth_rows = [
            {
                "setting": "truth",
                "method": "",
                "row": i,
                "col": j,
                "mu_hat": float(truth_panels[0][i, j]),
                "count": int(truth_panels[1][i, j]),
            }
            for i, j in np.ndindex(truth_panels[0].shape)
        ]
        files = [rp.write_csv(out_dir / "fig1_cells.csv", truth_rows + rows)]
        nonprivate = next(m for (s, meth), m in pooled.items() if methods.get(meth).uses_truth)
        panels = [
            ("true rates mu*", truth_panels[0], "rates"),
            ("true counts Y", truth_panels[1], "counts"),
            ("non-private mu_hat", nonprivate, "rates"),
        ]
        for eps in epsilons:
            setting = f"epsilon={eps:g}"
            panels += [
                (f"noised Y_obs, epsilon={eps:g}", observed[eps], "counts"),
                (f"naive mu_hat, epsilon={eps:g}", pooled[(setting, "naive")], "rates"),
                (f"private mu_hat, epsilon={eps:g}", pooled[(setting, "private")], "rates"),
            ]
        files += rp.heatmaps(
            panels,
            path_png=out_dir / "fig1.png",
            path_html=out_dir / "fig1.html",
            n_columns=3,
            sqrt_scale=True,
            title="Figure 1: block structure\nrows: truth; per epsilon: noised data, naive, "
            "private (mu_hat pooled over chains)",
        )
        return files
