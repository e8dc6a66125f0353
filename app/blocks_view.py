"""The communities each method found in a network: rates, memberships, held-out error.

Actors are ordered by their main community (largest membership weight), then
by how strongly they belong to it, with one order for every panel so the same
cell is in the same place everywhere: the true memberships' order when the
data are synthetic, else the non-private fit's. Communities of every fit are
matched to the reference ones (Hungarian algorithm on the membership
columns) so colours line up. Held-out cells are shaded and scored apart.
"""

import holoviews as hv
import holoviews.plotting.bokeh  # noqa: F401  (styles below are bokeh options, also outside a notebook)
import numpy as np
import pandas as pd
import panel as pn
import param

from app.noise_view import display_slice, subsample_note
from app.results import METHOD_LABELS, METHODS, fit_results, watch_fits
from app.store import DataStore
from lpviz import metrics

SCORE_COLUMNS = ("method", "MAE", "held-out MAE", "samples")
_REFRESH_SECONDS = 1.0


def memberships(theta):
    """Rows of ``theta`` normalised to sum to one (an actor's share in each community)."""
    theta = np.asarray(theta, dtype=float)
    totals = theta.sum(axis=1, keepdims=True)
    return np.divide(theta, totals, out=np.zeros_like(theta), where=totals > 0)


def actor_order(theta):
    """Actors grouped by main community (in community order), strongest members first."""
    shares = memberships(theta)
    main = np.argmax(shares, axis=1)
    return np.lexsort((-shares[np.arange(len(shares)), main], main))


def community_order(theta, theta_ref):
    """Columns of ``theta`` matched to those of ``theta_ref`` (Hungarian), unmatched ones last."""
    theta = np.asarray(theta, dtype=float)
    if theta_ref is None or theta.shape[1] < np.shape(theta_ref)[1] or np.any(theta.sum(axis=0) == 0) \
            or np.any(np.asarray(theta_ref).sum(axis=0) == 0):
        return np.arange(theta.shape[1])
    matched = metrics.align_topics(theta.T, np.asarray(theta_ref, dtype=float).T)
    taken = set(matched.tolist())
    return np.concatenate([matched, [c for c in range(theta.shape[1]) if c not in taken]]).astype(np.int64)


def held_out_cells(mask, structural=None):
    """Cells left out of the fit to be predicted: not observed, yet part of the network.

    ``structural`` is False for cells that do not exist (a network's self
    loops); they are unobserved too but there is nothing to predict there.
    Returns None when nothing is held out.
    """
    if mask is None:
        return None
    held = ~np.asarray(mask, dtype=bool)
    if structural is not None:
        held &= np.asarray(structural, dtype=bool)
    return held if held.any() else None


def block_scores(mu_hat, reference, mask, structural=None):
    """MAE over the observed cells and, when cells are held out, over those only."""
    observed = metrics.mae(mu_hat, reference, mask)
    held = held_out_cells(mask, structural)
    return observed, np.nan if held is None else metrics.heldout_mae(mu_hat, reference, ~held)


class BlocksView(pn.viewable.Viewer):
    """Per method: posterior-mean rates and memberships, actors ordered by community.

    Parameters
    ----------
    store : DataStore
        Supplies the network (truth when synthetic), the held-out mask and
        the chain runners whose results are shown.
    """

    store = param.ClassSelector(class_=DataStore)
    fits = param.Dict(default={}, doc="method -> dict(mu_hat, theta): aligned results shown.")
    order = param.Array(default=None, doc="Actor order shared by every panel.")
    order_source = param.String(default="", doc="Whose memberships set the actor order.")
    scores = param.DataFrame(default=pd.DataFrame(columns=list(SCORE_COLUMNS)),
                             doc="MAE and held-out MAE per method.")

    def __init__(self, store=None, **params):
        super().__init__(store=store, **params)
        watch_fits(self.store, self.refresh, min_interval=_REFRESH_SECONDS)
        self.refresh()

    @param.depends("store.data", "store.mask", watch=True)
    def refresh(self):
        """Recompute orders, aligned memberships and scores from the runners' results."""
        store = self.store
        if store.data is None or store.model != "blocks":
            self.param.update(fits={}, order=None, order_source="", scores=self.param.scores.default)
            return
        results = fit_results(store)
        theta_true = (getattr(store.data, "factors", None) or {}).get("theta")
        if theta_true is not None:
            theta_ref, source = theta_true, "the true memberships"
        elif "nonprivate" in results:
            theta_ref, source = results["nonprivate"]["best"]["theta"], "the non-private fit"
        elif results:
            method = next(iter(results))
            theta_ref, source = results[method]["best"]["theta"], f"the {METHOD_LABELS[method]} fit"
        else:
            theta_ref, source = None, ""
        problem = store.problem()
        fits, rows = {}, []
        for method, result in results.items():
            theta = np.asarray(result["best"]["theta"])
            mu_hat = result["mu_hat"]
            fits[method] = dict(mu_hat=mu_hat, theta=theta[:, community_order(theta, theta_ref)])
            observed, held_out = block_scores(mu_hat, problem.reference, problem.mask,
                                              store.data.info.get("mask"))
            rows.append((METHOD_LABELS[method], observed, held_out, result["samples_saved"]))
        order = actor_order(theta_ref) if theta_ref is not None else np.arange(store.Y_true.shape[0])
        self.param.update(fits=fits, order=order, order_source=source,
                          scores=pd.DataFrame(rows, columns=list(SCORE_COLUMNS)))

    # -- plots -----------------------------------------------------------------
    def _rate_image(self, matrix, title, clim):
        n = matrix.shape[0]
        stride = display_slice(matrix.shape)[0]
        shown = np.asarray(matrix, float)[np.ix_(self.order, self.order)][::stride, ::stride]
        ticks = np.arange(0, n, stride)
        image = hv.Image((ticks, ticks, shown), kdims=["recipient (ordered)", "sender (ordered)"],
                         vdims=["rate"]).opts(
            title=title, cmap="Reds", clim=clim, colorbar=True, tools=["hover"], invert_yaxis=True,
            responsive=True, min_height=280, min_width=240)
        held = held_out_cells(self.store.mask, self.store.data.info.get("mask"))
        if held is None:
            return image
        held = np.where(held[np.ix_(self.order, self.order)], 1.0, np.nan)[::stride, ::stride]
        shade = hv.Image((ticks, ticks, held), kdims=image.kdims, vdims=["held out"]).opts(
            cmap=["#404040"], alpha=0.35, clipping_colors={"NaN": "transparent"})
        return image * shade

    @param.depends("fits", "order")
    def rate_heatmaps(self):
        store = self.store
        if self.order is None:
            return hv.Layout([hv.Text(0.5, 0.5, "No network")])
        problem = store.problem()
        panels = [("truth", problem.reference, f"truth ({problem.reference_name})")]
        panels += [(m, self.fits[m]["mu_hat"], f"{METHOD_LABELS[m]}: posterior mean")
                   for m in METHODS if m in self.fits]
        top = max(float(np.max(matrix)) for _, matrix, _ in panels) or 1.0
        return hv.Layout([self._rate_image(matrix, title, (0, top)) for _, matrix, title in panels]).cols(2)

    @param.depends("fits", "order")
    def membership_heatmaps(self):
        if self.order is None:
            return hv.Layout([hv.Text(0.5, 0.5, "No network")])
        theta_true = (getattr(self.store.data, "factors", None) or {}).get("theta")
        panels = [("truth", theta_true)] if theta_true is not None else []
        panels += [(m, self.fits[m]["theta"]) for m in METHODS if m in self.fits]
        plots = []
        for name, theta in panels:
            shares = memberships(theta)[self.order]
            n, C = shares.shape
            plots.append(hv.Image((np.arange(C), np.arange(n), shares),
                                  kdims=["community", "actor (ordered)"], vdims=["share"]).opts(
                title=f"{METHOD_LABELS.get(name, name)}: memberships", cmap="Blues", clim=(0, 1),
                colorbar=True, tools=["hover"], invert_yaxis=True, responsive=True, min_height=280,
                min_width=160, xticks=[(c, str(c + 1)) for c in range(C)]))
        return hv.Layout(plots).cols(max(1, len(plots)))

    @param.depends("fits", "order", "order_source", "scores")
    def status(self):
        store = self.store
        if store.data is None:
            return pn.pane.Markdown("No data yet.")
        if store.model != "blocks":
            return pn.pane.Markdown("The current data are documents x words: see the **Topics** tab. "
                                    "Choose a network source (synthetic blocks, Enron network or an "
                                    "edge list) to see communities here.")
        lines = []
        if self.order_source:
            lines.append(f"Actors ordered by their main community in {self.order_source}; "
                         "communities of each fit matched to those.")
        waiting = [METHOD_LABELS[m] for m in METHODS if m not in self.fits]
        if waiting:
            lines.append(f"*Waiting for a saved sample (after burn-in {store.burn_in}) from: "
                         f"{', '.join(waiting)}. Start the fits in the Fits tab.*")
        held = held_out_cells(store.mask, store.data.info.get("mask"))
        if held is not None:
            lines.append(f"Shaded: {int(held.sum()):,} held-out cells ({store.holdout}); the fits never see "
                         "them, the held-out MAE scores how well they are predicted.")
        note = subsample_note(store.Y_true.shape, display_slice(store.Y_true.shape))
        if note:
            lines.append(note)
        return pn.pane.Markdown("\n\n".join(lines), sizing_mode="stretch_width")

    def figures(self):
        """Current figures as static HoloViews objects, for export."""
        return {"blocks_rates": self.rate_heatmaps(), "blocks_memberships": self.membership_heatmaps()}

    def __panel__(self):
        scores = pn.pane.DataFrame(self.param.scores, index=False, float_format="{:.4f}".format,
                                   sizing_mode="stretch_width")
        return pn.Column(self.status, scores,
                         pn.pane.HoloViews(self.rate_heatmaps, sizing_mode="stretch_width"),
                         pn.pane.HoloViews(self.membership_heatmaps, sizing_mode="stretch_width"),
                         sizing_mode="stretch_width")
