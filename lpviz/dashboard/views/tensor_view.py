"""What a tensor fit found: each component's time profile and its sender x recipient map.

Shown when the session's model declares it can show them (``"profiles"`` and
``"pair_maps"`` in its ``shows``: the tensor model), never by the data's kind.
A component ``k`` of a CP fit ``mu_ijt = sum_k a_ik b_jk c_tk`` is a group of
senders (``a_k``) writing to a group of recipients (``b_k``) with a profile
over the months (``c_k``). Drawn, per fit and for the truth when the data are
simulated:

- the time profile of every component as the emails per month it carries,
  ``(sum_i a_ik)(sum_j b_jk) c_tk``, months on the axis;
- for the chosen component, the sender x recipient heatmap of the emails it
  carries over the whole period, ``a_ik b_jk sum_t c_tk``.

Components of every fit are matched to the reference ones (the truth's when
simulated, else the non-private fit's, else the first fit's) by the Hungarian
algorithm on their normalised (senders, recipients, months) profiles, so a
component has the same number and colour in every panel; actors are ordered
by their main sender component in the reference. Scores are each runner's
:func:`lpviz.metrics.score` (the numbers of the Fits tab and the CLI).
"""

import holoviews as hv
import numpy as np
import pandas as pd
import panel as pn
import param

from lpviz import metrics, models
from lpviz.dashboard.serving.throttle import VIEW_SECONDS
from lpviz.dashboard.session.fits import Fits, follow_results, model_shows
from lpviz.dashboard.views.fits_view import baseline_frame
from lpviz.dashboard.views.plots import (
    RATE_CMAP,
    label_options,
    matched_components_panel,
    matched_reference,
    tick_labels,
    waiting_line,
)

SCORE_KEYS = ("mae", "heldout_mae", "rate_mae", "heldout_rate_mae", "samples")
# A component's colour in every panel (Category10, repeated beyond ten).
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")


def shows_tensor(model_name):
    """Whether the model registered as ``model_name`` declares the views this tab draws."""
    return model_shows(model_name, "profiles") and model_shows(model_name, "pair_maps")


def component_volumes(model, factors):
    """``(profiles, totals)``: the emails per month each component carries (T, K) and the
    sender x recipient weight of each component summed over the months (K,) factor."""
    profiles = np.asarray(model.profiles(factors), dtype=float)
    pair_totals = np.array([model.pair_maps(factors, k).sum() for k in range(profiles.shape[1])])
    return profiles * pair_totals, profiles.sum(axis=0)


def signatures(model, factors):
    """Each component's normalised (first mode, second mode, last mode) profile, one row each:
    what matching compares (scale-free, so a fit and the truth compare whatever their scales)."""
    parts = []
    n_components = np.shape(model.profiles(factors))[1]
    for k in range(n_components):
        pair = model.pair_maps(factors, k)
        profile = np.asarray(model.profiles(factors), dtype=float)[:, k]
        pieces = [pair.sum(axis=1), pair.sum(axis=0), profile]
        parts.append(np.concatenate([p / p.sum() if p.sum() > 0 else p for p in pieces]))
    return np.array(parts)


def component_order(model, factors, reference):
    """The fit's components matched to the reference's (Hungarian on :func:`signatures`), unmatched last."""
    fitted = signatures(model, factors)
    if reference is None or fitted.shape[0] < reference.shape[0] or np.any(fitted.sum(axis=1) == 0):
        return np.arange(fitted.shape[0])
    matched = metrics.align_topics(fitted, reference)
    taken = set(matched.tolist())
    return np.concatenate([matched, [k for k in range(fitted.shape[0]) if k not in taken]]).astype(np.int64)


def _aligned(factors, order):
    return {name: np.asarray(value)[..., order] for name, value in factors.items()}


class TensorView(pn.viewable.Viewer):
    """Per method: the components' time profiles and one component's sender x recipient map.

    Parameters
    ----------
    fits : Fits
        Supplies the data (truth when simulated), the model and the runners whose results are shown.
    """

    fits = param.ClassSelector(class_=Fits)
    component = param.Integer(default=1, bounds=(1, None), doc="The component whose sender x recipient map is shown.")
    panels = param.Dict(default={}, doc="name -> aligned factors shown (the truth first when known).")
    order = param.Array(default=None, doc="Actor order shared by every heatmap.")
    reference = param.String(default="", doc="Whose components the others are matched to.")
    scores = param.DataFrame(default=pd.DataFrame(), doc="score() numbers per method.")

    def __init__(self, **params):
        super().__init__(**params)
        follow_results(self.fits, lambda runner: self.refresh(), VIEW_SECONDS, needs_sample=True)
        self.refresh()

    @property
    def applies(self):
        """True when the session's model shows time profiles and pair maps (the tensor model)."""
        return self.fits.data.release is not None and shows_tensor(self.fits.data.model)

    def _model(self):
        return models.create(self.fits.data.model, self.fits.settings.n_components)

    @param.depends("fits.data.release", "fits.data.model", watch=True)
    def refresh(self):
        """Match every fit's components to the reference and order the actors."""
        if not self.applies:
            self.param.update(panels={}, order=None, reference="", scores=self.param.scores.default)
            return
        data = self.fits.data
        runners = [runner for runner in self.fits.active.values() if (runner.result or {}).get("best")]
        fitted = {runner.label: (runner.result["model"], runner.result["best"]) for runner in runners}
        truth = data.truth.factors if data.truth is not None and data.truth.factors else None
        known = (self._model(), truth) if truth is not None else None
        reference, source = matched_reference(known, runners, fitted, "the true components")
        panels = {}
        if truth is not None:
            panels["truth"] = (self._model(), truth)
        for label, (model, factors) in fitted.items():
            order = component_order(model, factors, signatures(*reference) if reference else None)
            panels[label] = (model, _aligned(factors, order))
        order = None
        if reference is not None:
            model, factors = reference
            n_components = np.shape(model.profiles(factors))[1]
            senders = np.array([model.pair_maps(factors, k).sum(axis=1) for k in range(n_components)])
            shares = senders / np.maximum(senders.sum(axis=0, keepdims=True), 1e-300)
            main = np.argmax(shares, axis=0)
            order = np.lexsort((-shares[main, np.arange(shares.shape[1])], main))
        n_components = max((np.shape(model.profiles(f))[1] for model, f in panels.values()), default=1)
        self.param.component.bounds = (1, n_components)
        self.param.update(
            panels=panels,
            order=order,
            reference=source,
            scores=baseline_frame(runners, SCORE_KEYS),
            component=min(self.component, n_components),
        )

    # -- plots -----------------------------------------------------------------
    def _months(self, n_months):
        labels = self.fits.data.release.mode_labels if self.fits.data.release is not None else None
        if labels and labels[-1] is not None:
            return list(labels[-1])
        return [f"month {t + 1}" for t in range(n_months)]

    @param.depends("panels")
    def profile_plots(self):
        """One panel per fit (and the truth): each component's emails per month, months on the axis."""
        if not self.panels:
            return hv.Layout([self._placeholder("Time profiles appear with the first saved sample of a fit")])
        plots = []
        for name, (model, factors) in self.panels.items():
            volumes, _ = component_volumes(model, factors)
            months = self._months(volumes.shape[0])
            step = max(1, len(months) // 12)
            curves = [
                hv.Curve((np.arange(len(months)), volumes[:, k]), "month", "emails per month", label=f"{k + 1}").opts(
                    color=COLOURS[k % len(COLOURS)], tools=["hover"]
                )
                for k in range(volumes.shape[1])
            ]
            plots.append(
                hv.Overlay(curves).opts(
                    title=f"{name}: components over time",
                    xticks=[(t, months[t]) for t in range(0, len(months), step)],
                    xrotation=45,
                    legend_position="right",
                    responsive=True,
                    min_height=260,
                    min_width=320,
                )
            )
        return hv.Layout(plots).cols(2)

    @param.depends("panels", "order", "component")
    def pair_heatmaps(self):
        """The chosen component's sender x recipient emails over the whole period, per fit."""
        if not self.panels or self.order is None:
            return hv.Layout([self._placeholder("Heatmaps appear with the first saved sample of a fit")])
        k = self.component - 1
        maps = []
        for name, (model, factors) in self.panels.items():
            if k >= np.shape(model.profiles(factors))[1]:
                continue
            _, totals = component_volumes(model, factors)
            maps.append((name, np.asarray(model.pair_maps(factors, k), dtype=float) * totals[k]))
        top = max((float(matrix.max()) for _, matrix in maps), default=1.0) or 1.0
        labels = self.fits.data.release.row_labels
        n = len(self.order)
        ticks = tick_labels(labels, np.arange(n), order=self.order) if labels is not None else None
        images = []
        for name, matrix in maps:
            shown = matrix[np.ix_(self.order, self.order)] if matrix.shape[0] == matrix.shape[1] == n else matrix
            images.append(
                hv.Image(
                    (np.arange(shown.shape[1]), np.arange(shown.shape[0]), shown),
                    kdims=["recipient (ordered)", "sender (ordered)"],
                    vdims=["emails"],
                ).opts(
                    title=f"{name}: component {k + 1}",
                    cmap=RATE_CMAP,
                    clim=(0, top),
                    colorbar=True,
                    tools=["hover"],
                    invert_yaxis=True,
                    responsive=True,
                    min_height=280,
                    min_width=240,
                    **label_options(ticks, ticks),
                )
            )
        return hv.Layout(images).cols(2)

    @staticmethod
    def _placeholder(text):
        return hv.Text(0.5, 0.5, text).opts(xaxis=None, yaxis=None, toolbar=None, height=120, responsive=True)

    @param.depends("panels", "reference", "scores", "fits.data.model")
    def status(self):
        data = self.fits.data
        if data.release is None:
            return pn.pane.Markdown("No data yet.")
        if not self.applies:
            return pn.pane.Markdown(
                f"The current data are fitted with the {data.model} model, which has no components over time. "
                "Choose a sender x recipient x month source (synthetic tensor or Enron tensor) and the tensor "
                "model to see them here."
            )
        lines = []
        if self.reference:
            lines.append(f"Components matched to {self.reference}; actors ordered by their main sender component.")
        lines.append(waiting_line(self.fits, self.panels))
        return pn.pane.Markdown("\n\n".join(filter(None, lines)), sizing_mode="stretch_width")

    def figures(self):
        """Current figures as static HoloViews objects, for export."""
        if not self.applies:  # no tensor: nothing of this tab to export
            return {}
        return {"tensor_profiles": self.profile_plots(), "tensor_pairs": self.pair_heatmaps()}

    def __panel__(self):
        chooser = pn.widgets.IntSlider.from_param(self.param.component, name="component (heatmaps)", width=320)
        return matched_components_panel(
            self.status,
            self.param.scores,
            "tensor-scores",
            [
                pn.pane.HoloViews(self.profile_plots, sizing_mode="stretch_width"),
                chooser,
                pn.pane.HoloViews(self.pair_heatmaps, sizing_mode="stretch_width", linked_axes=False),
            ],
            pn.bind(lambda *_: self.applies, self.fits.data.param.model, self.fits.data.param.release),
        )
