"""The communities each method found in a network: rates, memberships, held-out error.

Actors are ordered by their main community (largest membership weight), then
by how strongly they belong to it, with one order for every panel so the same
cell is in the same place everywhere: the true memberships' order when the
data are simulated, else that of a fit of the true counts, else the first
fit's. Communities of every fit are matched to the reference ones (Hungarian
algorithm on the membership columns) so colours line up. Held-out cells are
shaded; the scores are each runner's :func:`lpviz.metrics.score` (the same
numbers the Fits tab and the CLI show; a network's self loops never count).
"""

import holoviews as hv
import numpy as np
import pandas as pd
import panel as pn
import param

from lpviz import metrics
from lpviz.dashboard.serving.onscreen import OnScreen
from lpviz.dashboard.serving.throttle import VIEW_SECONDS
from lpviz.dashboard.session.fits import Fits, follow_results, model_shows
from lpviz.dashboard.views.fits_view import baseline_frame
from lpviz.dashboard.views.plots import (
    FLEX_ITEM,
    HEATMAP_TITLE_SIZE,
    RATE_CMAP,
    SIDE_MIN_WIDTH,
    axis_labels,
    display_slice,
    heldout_overlay,
    label_options,
    matched_components_panel,
    matched_reference,
    scale_options,
    subsample_note,
    tick_labels,
    truth_reference,
    waiting_line,
)

SCORE_KEYS = ("mae", "heldout_mae", "rate_mae", "heldout_rate_mae", "samples")


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


def community_boundaries(theta, order):
    """Positions ``k`` in the actor ``order`` where the main community of ``theta`` changes (between
    the ``k-1``-th and ``k``-th actor drawn): where the block lines go."""
    main = np.argmax(memberships(theta), axis=1)[np.asarray(order)]
    return np.flatnonzero(np.diff(main) != 0) + 1


# How each colour scale is named on the rate heatmaps (the plot states what its colours mean).
SCALE_NAMES = {"linear": "linear colour", "log": "log colour", "quantile": "colour by rank (quantile)"}
# On the page each heatmap is a pane of its own in a FlexBox that wraps: the rates two to a row and the
# memberships all in one on a desktop, one to a row on a phone (412 px). HoloViews grids of 2 x 240 px and
# 4 x 160 px at least were cut at the phone's edge and made the main column scroll sideways (issue 37).
RATE_ITEM = {**FLEX_ITEM, "flex": "1 1 40%"}
MEMBERSHIP_ITEM = {**FLEX_ITEM, "flex": "1 1 20%"}
MEMBERSHIP_MIN_WIDTH = 220  # one to a row in a phone's 384 px, four to a row on a desktop


def heatmap_fonts(options):
    """``options`` with the heatmaps' 10pt titles (HoloViews' 12pt ran past a phone's plot) and any tick
    sizes they name."""
    return {**options, "fontsize": {"title": HEATMAP_TITLE_SIZE, **options.get("fontsize", {})}}


def wrapping_panes(layout, min_width, styles):
    """Each plot of a HoloViews ``layout`` in a pane of its own, in a FlexBox that wraps them."""
    return pn.FlexBox(
        *(
            pn.pane.HoloViews(plot, sizing_mode="stretch_width", min_width=min_width, styles=styles, linked_axes=False)
            for plot in layout
        ),
        sizing_mode="stretch_width",
    )


def community_order(theta, theta_ref):
    """Columns of ``theta`` matched to those of ``theta_ref`` (Hungarian), unmatched ones last."""
    theta = np.asarray(theta, dtype=float)
    if (
        theta_ref is None
        or theta.shape[1] < np.shape(theta_ref)[1]
        or np.any(theta.sum(axis=0) == 0)
        or np.any(np.asarray(theta_ref).sum(axis=0) == 0)
    ):
        return np.arange(theta.shape[1])
    matched = metrics.align_topics(theta.T, np.asarray(theta_ref, dtype=float).T)
    taken = set(matched.tolist())
    return np.concatenate([matched, [c for c in range(theta.shape[1]) if c not in taken]]).astype(np.int64)


class BlocksView(pn.viewable.Viewer):
    """Per method: posterior-mean rates and memberships, actors ordered by community.

    Parameters
    ----------
    fits : Fits
        Supplies the network (truth when simulated), the held-out cells and
        the runners whose results are shown.
    """

    fits = param.ClassSelector(class_=Fits)
    panels = param.Dict(default={}, doc="method label -> dict(mu_hat, theta): aligned results shown.")
    order = param.Array(default=None, doc="Actor order shared by every panel.")
    order_source = param.String(default="", doc="Whose memberships set the actor order.")
    boundaries = param.Array(default=None, doc="Positions in the order where the main community changes.")
    scores = param.DataFrame(default=pd.DataFrame(), doc="MAE and held-out MAE per method (lpviz.metrics.score).")

    def __init__(self, **params):
        super().__init__(**params)
        self.on_screen = OnScreen()  # hidden (another tab shown): new results wait until shown
        follow_results(self.fits, lambda runner: self._follow(), VIEW_SECONDS, needs_sample=True)
        self.refresh()

    @property
    def applies(self):
        """True when the session's model shows communities of actors (declared in its ``shows``)."""
        return self.fits.data.release is not None and model_shows(self.fits.data.model, "communities")

    @param.depends("fits.data.release", "fits.data.model", watch=True)
    def _follow(self):
        self.on_screen.run("refresh", self.refresh)

    def refresh(self):
        """Recompute orders, aligned memberships and scores from the runners' results."""
        data = self.fits.data
        if not self.applies:
            self.param.update(panels={}, order=None, order_source="", boundaries=None, scores=self.param.scores.default)
            return
        runners = [runner for runner in self.fits.active.values() if (runner.result or {}).get("best")]
        fitted = {runner.label: runner.result["model"].communities(runner.result["best"]) for runner in runners}
        theta_ref, source = matched_reference(self._truth_memberships(), runners, fitted, "the true memberships")
        panels = {}
        for runner in runners:
            theta = np.asarray(fitted[runner.label])
            panels[runner.label] = dict(
                mu_hat=runner.result["mu_hat"], theta=theta[:, community_order(theta, theta_ref)]
            )
        order = actor_order(theta_ref) if theta_ref is not None else np.arange(data.release.shape[0])
        boundaries = community_boundaries(theta_ref, order) if theta_ref is not None else np.zeros(0, np.int64)
        self.param.update(
            panels=panels,
            order=order,
            order_source=source,
            boundaries=boundaries,
            scores=baseline_frame(runners, SCORE_KEYS),
        )

    def _truth_memberships(self):
        from lpviz import models

        data = self.fits.data
        if data.truth is None or not data.truth.factors:
            return None
        return models.create(data.model, self.fits.settings.n_components).communities(data.truth.factors)

    # -- plots -----------------------------------------------------------------
    def _ticks(self, positions):
        """Axis ticks naming the actors drawn at ``positions`` (in the community order), or None."""
        rows, cols = axis_labels(self.fits.data)
        labels = rows if rows is not None else cols
        return tick_labels(labels, positions, order=self.order) if labels is not None else None

    def _block_lines(self, n, both=True):
        """The lines between communities (half a cell before each boundary) across the ``n`` columns drawn:
        one Segments element of group "Boundaries" (rows; columns too when ``both``), or None."""
        if self.boundaries is None or not len(self.boundaries):
            return None
        at = np.asarray(self.boundaries, dtype=float) - 0.5
        low, high = np.full_like(at, -0.5), np.full_like(at, n - 0.5)
        segments = [np.column_stack([low, at, high, at])]  # rows (y = boundary)
        if both:
            segments.append(np.column_stack([at, low, at, high]))
        return hv.Segments(np.vstack(segments), group="Boundaries").opts(color="black", line_width=1.5, alpha=0.8)

    def _rate_image(self, matrix, title, clim):
        n = matrix.shape[0]
        stride = display_slice(matrix.shape)[0]
        shown = np.asarray(matrix, float)[np.ix_(self.order, self.order)][::stride, ::stride]
        ticks = np.arange(0, n, stride)
        names = self._ticks(ticks)
        options = dict(
            title=title,
            cmap=RATE_CMAP,
            colorbar=True,
            tools=["hover"],
            invert_yaxis=True,
            responsive=True,
            min_height=280,
            min_width=240,
            **scale_options(self.fits.data.settings.colour_scale, clim, shown),
        )
        image = hv.Image((ticks, ticks, shown), kdims=["recipient (ordered)", "sender (ordered)"], vdims=["rate"]).opts(
            **heatmap_fonts({**options, **label_options(names, names)})
        )
        held = self.fits.data.release.heldout_cells
        if held is not None:
            image = image * heldout_overlay(
                held[np.ix_(self.order, self.order)][::stride, ::stride], ticks, ticks, image.kdims
            )
        lines = self._block_lines(n)
        return image if lines is None else image * lines

    @param.depends("panels", "order", "fits.data.settings.colour_scale")
    def rate_heatmaps(self):
        if self.order is None:
            return hv.Layout([hv.Text(0.5, 0.5, "No network")])
        reference, title = truth_reference(self.fits.data.truth, self.fits.data.release)
        panels = [(reference, title)]
        panels += [(shown["mu_hat"], f"{label}: posterior mean") for label, shown in self.panels.items()]
        top = max(float(np.max(matrix)) for matrix, _ in panels) or 1.0
        scale = SCALE_NAMES.get(self.fits.data.settings.colour_scale, self.fits.data.settings.colour_scale)
        # the scale on a line of its own: one line of a method's name and the scale was too wide for a phone
        return hv.Layout([self._rate_image(matrix, f"{title}\n{scale}", (0, top)) for matrix, title in panels]).cols(2)

    @param.depends("panels", "order", "fits.data.settings.colour_scale")
    def rate_panes(self):
        """The page's rate heatmaps: two to a row, one on a phone."""
        return wrapping_panes(self.rate_heatmaps(), SIDE_MIN_WIDTH, RATE_ITEM)

    @param.depends("panels", "order")
    def membership_panes(self):
        """The page's membership heatmaps: all in a row, one to a row on a phone."""
        return wrapping_panes(self.membership_heatmaps(), MEMBERSHIP_MIN_WIDTH, MEMBERSHIP_ITEM)

    @param.depends("panels", "order")
    def membership_heatmaps(self):
        if self.order is None:
            return hv.Layout([hv.Text(0.5, 0.5, "No network")])
        truth_theta = self._truth_memberships()
        panels = [("truth", truth_theta)] if truth_theta is not None else []
        panels += [(label, shown["theta"]) for label, shown in self.panels.items()]
        if not panels:  # no true memberships (real data) and no fit yet
            return hv.Layout(
                [
                    hv.Text(0.5, 0.5, "Memberships appear with the first saved sample of a fit").opts(
                        xaxis=None, yaxis=None, toolbar=None, height=120, responsive=True
                    )
                ]
            )
        plots = []
        for name, theta in panels:
            shares = memberships(theta)[self.order]
            n, C = shares.shape
            image = hv.Image(
                (np.arange(C), np.arange(n), shares), kdims=["community", "actor (ordered)"], vdims=["share"]
            ).opts(
                **heatmap_fonts(
                    {
                        "title": f"{name}\nmemberships",  # two lines: four in a desktop's row cut "...: memberships"
                        "cmap": "Blues",
                        "clim": (0, 1),
                        "colorbar": True,
                        "tools": ["hover"],
                        "invert_yaxis": True,
                        "responsive": True,
                        "min_height": 280,
                        "min_width": 160,
                        **label_options(self._ticks(np.arange(n))),
                        "xticks": [(c, str(c + 1)) for c in range(C)],
                    }
                )
            )
            lines = self._block_lines(C, both=False)  # rows only, across the C columns
            plots.append(image if lines is None else image * lines)
        return hv.Layout(plots).cols(max(1, len(plots)))

    @param.depends("panels", "order", "order_source", "scores", "fits.data.model")
    def status(self):
        data = self.fits.data
        if data.release is None:
            return pn.pane.Markdown("No data yet.")
        if not self.applies:
            return pn.pane.Markdown(
                f"The current data are fitted with the {data.model} model, which has no communities of actors "
                "(its results are in the **Topics** or **Tensor** tab). Choose a network source (synthetic "
                "network, Enron network or an edge list) and the block model to see communities here."
            )
        lines = []
        if self.order_source:
            lines.append(
                f"Actors ordered by their main community in {self.order_source}; "
                "communities of each fit matched to those."
            )
        lines.append(waiting_line(self.fits, self.panels))
        held = data.release.heldout_cells
        if held is not None:
            lines.append(
                f"Shaded: {int(held.sum()):,} held-out cells ({data.settings.holdout}); the fits never see "
                "them, the held-out MAE scores how well they are predicted."
            )
        note = subsample_note(data.release.shape, display_slice(data.release.shape))
        if note:
            lines.append(note)
        return pn.pane.Markdown("\n\n".join(filter(None, lines)), sizing_mode="stretch_width")

    def figures(self):
        """Current figures as static HoloViews objects, for export."""
        if not self.applies:  # no network: nothing of this tab to export (an empty "No network" plot)
            return {}
        self.on_screen.catch_up()
        return {"blocks_rates": self.rate_heatmaps(), "blocks_memberships": self.membership_heatmaps()}

    def __panel__(self):
        return matched_components_panel(
            self.status,
            self.param.scores,
            "block-scores",
            [self.rate_panes, self.membership_panes],
            pn.bind(lambda *_: self.applies, self.fits.data.param.release, self.fits.data.param.model),
        )
