"""What the geometric mechanism does, driven by the session's epsilon and N.

Left: the two-sided geometric law of the noise beside Skellam laws with
exponentially distributed rates; their mixture *is* the geometric law
(Theorem 2 of Schein et al. 2019), computed here by Gauss-Laguerre
quadrature and drawn over it. Right: what an adversary sees for a true
count y and for y + N, and the log of their ratio, which never leaves
[-epsilon, epsilon] (Theorem 1).
"""

import holoviews as hv
import holoviews.plotting.bokeh  # noqa: F401  (styles below are bokeh options, also outside a notebook)
import numpy as np
import panel as pn
import param

from lpviz import privacy
from lpviz.dashboard.session.datastore import DataStore
from lpviz.dashboard.views.plots import side_by_side

# Quadrature nodes per rate: the mixture matches the geometric pmf to ~1e-5 (alpha = 0.9)
# or better, fast enough to follow an epsilon slider.
_QUADRATURE_NODES = 40
# Exponential quantiles of the illustrative Skellam components (lambda+, lambda-).
_COMPONENT_QUANTILES = ((0.5, 0.5), (0.9, 0.2), (0.2, 0.9), (0.97, 0.6))
_COMPONENT_COLORS = ("#8c8c8c", "#d62728", "#1f77b4", "#9467bd")
# Legends stand under their plots, outside the data: inside, at the top right, the Skellam legend covered
# two curves' peaks and at a phone's width the geometric one covered the law's peak (issue 37 LOW). Under
# the plot, in columns narrow enough for a plot at a phone's width (about 300 px of frame).
LEGEND_BELOW = dict(legend_position="bottom")
# Plots with a legend under them: room for it and for the data.
LEGEND_PLOT_HEIGHT = 380


def privacy_unit(kind, source=""):
    """``{"rows", "row", "cell", "units"}``: what the privacy guarantee's rows are (plural, for "any two
    ..."), what one row and one cell are and what its counts count, for data of ``kind`` from ``source``
    (a documents x words source of Enron's is emails x words)."""
    from lpviz.release import KIND_UNITS, KINDS

    doc = "email" if str(source).startswith("enron") else "document"
    units = KIND_UNITS.get(kind, KIND_UNITS[KINDS[0]])
    return {key: text.format(doc=doc) for key, text in units.items()}


def _three_digits(value):
    """A number the tab shows: three significant digits (a median row's epsilon read 0.280424 and its
    title was cut), in scientific notation when small (an alpha is never '0.0000')."""
    return f"{float(value):.3g}"


def noise_support(alpha, mass=0.999, lower=5, upper=400):
    """Half-width T with P(|tau| <= T) >= ``mass`` under 2Geo(alpha), clipped to [lower, upper]."""
    # P(|tau| > T) = 2 alpha^(T+1) / (1 + alpha)
    tail = np.log((1.0 - mass) * (1.0 + alpha) / 2.0) / np.log(alpha) - 1.0
    return int(np.clip(np.ceil(tail), lower, upper))


def skellam_mixture_pmf(tau, alpha, nodes=_QUADRATURE_NODES):
    """P(tau) when tau ~ Skellam(l+, l-) with l+, l- ~ Exp(mean alpha / (1 - alpha)).

    Integrates the Skellam pmf against both exponential densities with
    Gauss-Laguerre quadrature: E[f(l)] = sum_i w_i f(scale * x_i).
    """
    x, w = np.polynomial.laguerre.laggauss(nodes)
    scale = alpha / (1.0 - alpha)
    lam = scale * x
    tau = np.asarray(tau)
    log_skellam = privacy.skellam_logpmf(tau[..., None, None], lam[:, None], lam[None, :])
    return np.einsum("...ij,i,j->...", np.exp(log_skellam), w, w)


def component_rates(alpha):
    """(lambda+, lambda-) pairs at fixed quantiles of Exp(mean alpha / (1 - alpha))."""
    scale = alpha / (1.0 - alpha)
    return [(-scale * np.log1p(-qp), -scale * np.log1p(-qm)) for qp, qm in _COMPONENT_QUANTILES]


def adversary_view(y, N, alpha, half_width):
    """Noised values and their log-probabilities given true counts y and y + N."""
    y_tilde = np.arange(y - half_width, y + N + half_width + 1)
    log_p_y = privacy.geometric_logpmf(y_tilde - y, alpha)
    log_p_yN = privacy.geometric_logpmf(y_tilde - y - N, alpha)
    return y_tilde, np.asarray(log_p_y, float), np.asarray(log_p_yN, float)


class PrivacyView(pn.viewable.Viewer):
    """The geometric mechanism explained with the session's epsilon and N.

    Parameters
    ----------
    data : DataStore
        Its settings supply ``epsilon`` and ``N``; its release, for
        heterogeneous noise, the per-row ``alpha``.
    y : int
        The true count the adversary compares with ``y + N``.
    """

    data = param.ClassSelector(class_=DataStore, doc="The session's data (settings and release).")
    y = param.Integer(
        default=3,
        bounds=(0, None),
        softbounds=(0, 50),
        doc="True count y whose neighbour y + N the adversary must tell apart.",
    )

    # -- the numbers shown (tested against lpviz.privacy) ---------------------
    @property
    def row_alphas(self):
        """The release's per-row alphas when its noise is heterogeneous (else None)."""
        release = self.data.release
        alpha = None if release is None else np.asarray(release.alpha, float)
        return alpha if alpha is not None and alpha.ndim == 1 and alpha.size else None

    @property
    def epsilon(self):
        """The settings' epsilon; with per-row noise, the median row's (epsilon = -N log alpha)."""
        rows = self.row_alphas
        if rows is not None:
            return float(privacy.epsilon_from(float(np.median(rows)), self.N))
        return float(self.data.settings.epsilon)

    @property
    def N(self):
        return float(self.data.settings.N)

    @property
    def distance(self):
        """How far apart the adversary's two true counts are: N, as a whole count (>= 1)."""
        return max(1, int(np.floor(self.N)))

    @property
    def log_ratio_bound(self):
        """The largest |log-ratio| the mechanism allows at that distance: epsilon for whole N."""
        return self.distance * self.epsilon / self.N

    @property
    def alpha(self):
        """The alpha the plots show: exp(-epsilon / N) of the settings, or with per-row noise the
        median row's alpha (the release's own noise, not a scalar setting it does not use)."""
        rows = self.row_alphas
        if rows is not None:
            return float(np.median(rows))
        return float(privacy.alpha_from(self.epsilon, self.N))

    def noise_frame(self):
        """``(tau, geometric pmf, Skellam-mixture pmf)`` over the shown support."""
        alpha = self.alpha
        half = noise_support(alpha)
        tau = np.arange(-half, half + 1)
        geometric = np.exp(np.asarray(privacy.geometric_logpmf(tau, alpha), float))
        return tau, geometric, skellam_mixture_pmf(tau, alpha)

    def adversary_frame(self):
        """``(y_tilde, log P(y_tilde | y), log P(y_tilde | y + N))``."""
        alpha = self.alpha
        return adversary_view(self.y, self.distance, alpha, noise_support(alpha, mass=0.99, upper=60))

    # -- plots -----------------------------------------------------------------
    @param.depends("data.settings.epsilon", "data.settings.N", "data.release")
    def skellam_plot(self):
        alpha = self.alpha
        half = noise_support(alpha)
        tau = np.arange(-half, half + 1)
        curves = []
        for (lam_plus, lam_minus), color in zip(component_rates(alpha), _COMPONENT_COLORS, strict=True):
            p = np.exp(np.asarray(privacy.skellam_logpmf(tau, lam_plus, lam_minus), float))
            label = f"({_three_digits(lam_plus)}, {_three_digits(lam_minus)})"
            curves.append(
                hv.Curve((tau, p), "tau", "P(tau)", label=label).opts(
                    color=color, interpolation="steps-mid", line_width=2, tools=["hover"]
                )
            )
        return hv.Overlay(curves).opts(
            title="Skellam(lambda+, lambda-), fixed rates",  # the legend: each law's (lambda+, lambda-)
            legend_cols=2,
            responsive=True,
            min_height=LEGEND_PLOT_HEIGHT,
            **LEGEND_BELOW,
        )

    @param.depends("data.settings.epsilon", "data.settings.N", "data.release")
    def geometric_plot(self):
        tau, geometric, mixture = self.noise_frame()
        bars = hv.Spikes((tau, geometric), "tau", "P(tau)", label="2Geo(alpha)").opts(
            color="#4c72b0", line_width=5, tools=["hover"]
        )
        gap = np.abs(mixture - geometric).max()
        mix = hv.Scatter((tau, mixture), "tau", "P(tau)", label=f"Skellam mixture (gap {gap:.0e})").opts(
            color="#ff7f0e", size=6, tools=["hover"]
        )
        return (bars * mix).opts(
            title=f"2Geo(alpha = {_three_digits(self.alpha)}) = mixed Skellams",
            legend_cols=1,
            responsive=True,
            min_height=LEGEND_PLOT_HEIGHT,
            **LEGEND_BELOW,
        )

    @param.depends("data.settings.epsilon", "data.settings.N", "data.release", "y")
    def adversary_plot(self):
        y_tilde, log_p_y, log_p_yN = self.adversary_frame()
        y, N = self.y, self.distance
        p_y = hv.Curve((y_tilde, np.exp(log_p_y)), "noised count", "probability", label=f"true count y = {y}").opts(
            color="#1f77b4", interpolation="steps-mid", line_width=2, tools=["hover"]
        )
        p_yN = hv.Curve(
            (y_tilde, np.exp(log_p_yN)), "noised count", "probability", label=f"true count y + N = {y + N}"
        ).opts(color="#d62728", interpolation="steps-mid", line_width=2, tools=["hover"])
        return (p_y * p_yN).opts(
            title="What an adversary sees: y or y + N",
            legend_cols=1,
            responsive=True,
            min_height=LEGEND_PLOT_HEIGHT,
            **LEGEND_BELOW,
        )

    @param.depends("data.settings.epsilon", "data.settings.N", "data.release", "y")
    def log_ratio_plot(self):
        y_tilde, log_p_y, log_p_yN = self.adversary_frame()
        bound = self.log_ratio_bound
        ratio = hv.Curve((y_tilde, log_p_y - log_p_yN), "noised count", "log P(. | y) - log P(. | y + N)").opts(
            color="black", interpolation="steps-mid", line_width=2, tools=["hover"]
        )
        bounds = hv.HLine(bound).opts(color="#d62728", line_dash="dashed", line_width=2) * hv.HLine(-bound).opts(
            color="#d62728", line_dash="dashed", line_width=2
        )
        # short enough for a phone's width (the odds, e^epsilon, are in the summary above)
        if self.distance == self.N:
            title = f"|log-ratio| <= epsilon = {_three_digits(bound)}"
        else:
            title = f"|log-ratio| <= {self.distance} epsilon/N = {_three_digits(bound)}"
        return (ratio * bounds).opts(
            title=title, ylim=(-1.3 * bound, 1.3 * bound), responsive=True, min_height=LEGEND_PLOT_HEIGHT
        )

    @param.depends("data.settings.epsilon", "data.settings.N", "data.release", "data.settings.source")
    def summary(self):
        eps, N, alpha = self.epsilon, self.N, self.alpha
        text = (
            f"**{'the median row: ' if self.row_alphas is not None else ''}epsilon = {eps:.3g}, N = {N:g}: "
            f"epsilon/N = {eps / N:.3g}, "
            f"alpha = exp(-epsilon/N) = {_three_digits(alpha)}.** The noise is discrete Laplace with "
            f"scale N/epsilon = {N / eps:.3g}; any two true counts at most N apart give "
            f"noised counts whose probabilities differ by a factor of at most "
            f"e^epsilon = {np.exp(eps):.3g}."
        )
        release = self.data.release
        if release is not None:
            unit = privacy_unit(release.kind, self.data.settings.source)
            text += (
                f" Here a cell is {unit['cell']} and a row {unit['row']}: the noise is drawn for every cell, "
                f"and any two rows whose counts differ by at most N {unit['units']} in total are "
                f"e^epsilon-indistinguishable."
            )
        row_alpha = np.asarray(release.alpha if release is not None else alpha, float)
        if row_alpha.ndim == 1 and row_alpha.size:
            row_eps = np.asarray(privacy.epsilon_from(row_alpha, N), float)
            text += (
                f"\n\n*Heterogeneous noise: each row has its own alpha "
                f"(median {_three_digits(np.median(row_alpha))}, range {_three_digits(row_alpha.min())}-"
                f"{_three_digits(row_alpha.max())}), so each row's own epsilon ranges "
                f"{row_eps.min():.3g}-{row_eps.max():.3g} for N = {N:g}. "
                f"The plots show the median row's alpha = {_three_digits(alpha)}.*"
            )
        return pn.pane.Markdown(text, sizing_mode="stretch_width")

    def figures(self):
        """Current figures as static HoloViews objects, for export."""
        return {
            "privacy_skellam": self.skellam_plot(),
            "privacy_geometric": self.geometric_plot(),
            "privacy_adversary": self.adversary_plot(),
            "privacy_log_ratio": self.log_ratio_plot(),
        }

    def __panel__(self):
        return pn.Column(
            self.summary,
            side_by_side(self.skellam_plot, self.geometric_plot),
            pn.widgets.IntSlider.from_param(self.param.y, width=300),
            side_by_side(self.adversary_plot, self.log_ratio_plot),
            sizing_mode="stretch_width",
        )
