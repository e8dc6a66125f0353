"""The Bessel distribution the private sampler draws from, made visible.

Pick ``nu`` and ``a`` and see the pmf with its mean and mode marked; a map of
``|mean - mode|`` over a grid of ``(nu, a)`` shows the bound of 1 that lets a
variational fit replace the Bessel variable by its mode; and, when a chain
whose method draws Bessel variables runs, a histogram of the draws of its last
sweep (a copy its worker made for the snapshot, never the sampler's own array).
"""

import holoviews as hv
import holoviews.plotting.bokeh  # noqa: F401  (styles below are bokeh options, also outside a notebook)
import numpy as np
import panel as pn
import param

from app.fits import Fits, follow_results
from lpviz import bessel

# A pmf this small is invisible on the plot; it bounds the support shown.
_PMF_FLOOR = 1e-6
# The chain-draws histogram redraws at most this often while a chain runs.
DRAWS_SECONDS = 1.0


def pmf_support(nu, a):
    """The values ``m = 0, 1, ...`` worth drawing: up to ~6 sd past the mean."""
    spread = np.sqrt(max(float(bessel.var(nu, a)), 0.0))
    m_max = int(np.ceil(float(bessel.mean(nu, a)) + 6.0 * spread + 3.0))
    m = np.arange(m_max + 1)
    keep = bessel.pmf(m, nu, a) >= _PMF_FLOOR
    keep[: int(bessel.mode(nu, a)) + 1] = True  # never crop the mode away
    return m[: np.flatnonzero(keep).max() + 1]


def mean_mode_gap(nu_grid, a_grid):
    """``|mean - mode|`` of Bessel(nu, a) on the grid, shape (len(nu_grid), len(a_grid))."""
    nu, a = np.meshgrid(np.asarray(nu_grid, float), np.asarray(a_grid, float), indexing="ij")
    return np.abs(np.asarray(bessel.mean(nu, a), float) - np.asarray(bessel.mode(nu, a), float))


def draws_histogram(draws, max_bins=60):
    """Edges and counts of integer Bessel draws, unit-wide bins up to ``max_bins``."""
    draws = np.asarray(draws).ravel()
    if draws.size == 0:
        return np.array([0.0, 1.0]), np.zeros(1)
    top = int(draws.max())
    width = max(1, int(np.ceil((top + 1) / max_bins)))
    edges = np.arange(0, top + width + 1, width) - 0.5
    counts, edges = np.histogram(draws, bins=edges)
    return edges, counts


class BesselView(pn.viewable.Viewer):
    """Bessel(nu, a): pmf with mean and mode, the |mean - mode| map, a chain's draws.

    Parameters
    ----------
    fits : Fits, optional
        The session's chains; the first one whose snapshots carry Bessel
        draws supplies the histogram. Without it the view shows the
        distribution only.
    """

    nu = param.Number(
        default=3.0,
        bounds=(0, None),
        softbounds=(0, 60),
        step=0.5,
        doc="Order nu >= 0 (in the sampler: |noised count|).",
    )
    a = param.Number(
        default=8.0,
        bounds=(1e-3, None),
        softbounds=(0.01, 120),
        step=0.5,
        doc="Argument a > 0 (in the sampler: 2 sqrt((lambda+ + mu) lambda-)).",
    )
    map_nu_max = param.Number(default=50.0, bounds=(1, 2000), doc="Largest nu on the map.")
    map_a_max = param.Number(default=100.0, bounds=(1, 5000), doc="Largest a on the map.")
    map_resolution = param.Integer(default=81, bounds=(11, 301), doc="Grid points per axis of the map.")
    show_chain_draws = param.Boolean(default=True, doc="Show the Bessel draws of a running chain.")
    fits = param.ClassSelector(class_=Fits, default=None, allow_None=True, doc="The session's chains (optional).")

    def __init__(self, **params):
        super().__init__(**params)
        self._draws_pipe = hv.streams.Pipe(data=(np.array([0.0, 1.0]), np.zeros(1)))
        self._draws_note = pn.pane.Markdown("", sizing_mode="stretch_width")
        if self.fits is not None:
            follow_results(self.fits, lambda runner: self.refresh_draws(), DRAWS_SECONDS)
        self.refresh_draws()

    # -- numbers the plots show (tested against lpviz.bessel) -----------------
    def marks(self):
        """Mean, mode and variance of Bessel(nu, a) as plain floats/ints."""
        return {
            "mean": float(bessel.mean(self.nu, self.a)),
            "mode": int(bessel.mode(self.nu, self.a)),
            "var": float(bessel.var(self.nu, self.a)),
        }

    def pmf_frame(self):
        """The pmf shown: ``(m, pmf)`` arrays."""
        m = pmf_support(self.nu, self.a)
        return m, np.asarray(bessel.pmf(m, self.nu, self.a), float)

    def gap_grid(self):
        """``(nu_grid, a_grid, |mean - mode|)`` for the map."""
        n = self.map_resolution
        nu_grid = np.linspace(0.0, self.map_nu_max, n)
        a_grid = np.linspace(self.map_a_max / n, self.map_a_max, n)  # a = 0 is outside the family
        return nu_grid, a_grid, mean_mode_gap(nu_grid, a_grid)

    def draws_runner(self):
        """The first chosen runner whose latest snapshot carries Bessel draws, or None."""
        if self.fits is None:
            return None
        for runner in self.fits.active.values():
            if (runner.result or {}).get("bessel_draws") is not None:
                return runner
        return None

    def chain_draws(self):
        """The Bessel draws of that chain's last snapshot sweep, or None."""
        runner = self.draws_runner()
        return None if runner is None else runner.result["bessel_draws"]

    # -- plots -----------------------------------------------------------------
    @param.depends("nu", "a")
    def pmf_plot(self):
        m, p = self.pmf_frame()
        marks = self.marks()
        peak = float(p.max())
        spikes = hv.Spikes((m, p), "m", "P(m)").opts(line_width=5, color="#4c72b0", tools=["hover"])
        mean_line = hv.VLine(marks["mean"]).opts(color="#d62728", line_dash="dashed", line_width=2)
        mode_line = hv.VLine(marks["mode"]).opts(color="#2ca02c", line_width=2)
        labels = hv.Labels(
            {
                "x": [marks["mean"], marks["mode"]],
                "y": [peak * 1.08, peak * 0.98],
                "text": [f"mean {marks['mean']:.2f}", f"mode {marks['mode']}"],
            },
            ["x", "y"],
            "text",
        ).opts(text_color="black", text_font_size="9pt", text_align="left", xoffset=0.3)
        gap = abs(marks["mean"] - marks["mode"])
        title = (
            f"Bessel(nu={self.nu:g}, a={self.a:g}): mean {marks['mean']:.3f}, "
            f"mode {marks['mode']}, |mean - mode| = {gap:.3f}"
        )
        return (spikes * mean_line * mode_line * labels).opts(
            title=title, responsive=True, min_height=300, ylim=(0, peak * 1.2)
        )

    @param.depends("nu", "a", "map_nu_max", "map_a_max", "map_resolution")
    def gap_map(self):
        nu_grid, a_grid, gap = self.gap_grid()
        image = hv.Image((a_grid, nu_grid, gap), kdims=["a", "nu"], vdims=["|mean - mode|"])
        image = image.opts(
            cmap="viridis",
            clim=(0, 1),
            colorbar=True,
            tools=["hover"],
            title=f"|mean - mode| over the grid: max {gap.max():.3f} <= 1",
            responsive=True,
            min_height=300,
        )
        here = hv.Points([(self.a, self.nu)], ["a", "nu"]).opts(color="red", marker="x", size=14, line_width=3)
        return image * here

    @param.depends("map_nu_max", "map_a_max", "map_resolution")
    def gap_bound_plot(self):
        """Largest gap over nu for each a, under the line at 1."""
        _, a_grid, gap = self.gap_grid()
        worst = hv.Curve((a_grid, gap.max(axis=0)), "a", "max over nu of |mean - mode|").opts(
            color="#4c72b0", line_width=2
        )
        bound = hv.HLine(1.0).opts(color="#d62728", line_dash="dashed", line_width=2)
        label = hv.Text(a_grid[len(a_grid) // 2], 1.04, "bound 1").opts(text_color="#d62728")
        return (worst * bound * label).opts(
            title="The gap never reaches 1", ylim=(0, 1.15), responsive=True, min_height=220
        )

    def draws_plot(self, data):
        edges, counts = data
        return hv.Histogram((edges, counts), kdims=["m (Bessel draw)"], vdims=["cells"]).opts(
            color="#8172b2",
            line_color=None,
            tools=["hover"],
            responsive=True,
            min_height=250,
            title="Bessel draws of the chain's last sweep",
        )

    # -- chain draws -----------------------------------------------------------
    def refresh_draws(self):
        """Push the current draws into the histogram."""
        draws = self.chain_draws() if self.show_chain_draws else None
        if draws is None or draws.size == 0:
            sampler = getattr(self.fits.settings.method_options, "sampler", None) if self.fits is not None else None
            if sampler is not None and sampler != "bessel":
                # the collapsed sampler draws the true counts directly: there are no Bessel variables
                self._draws_note.object = (
                    f"*The private method runs the {sampler} sampler, which has no Bessel "
                    "variables: choose Sampler = bessel in the fit controls and start the "
                    "fits to see the draws the Bessel sampler makes.*"
                )
            else:
                self._draws_note.object = (
                    "*Start the fits (Fits tab) to see the Bessel draws the private "
                    "sampler makes, one per observed cell per sweep.*"
                )
            self._draws_pipe.send((np.array([0.0, 1.0]), np.zeros(1)))
            return
        runner = self.draws_runner()
        self._draws_note.object = (
            f"{runner.label}, iteration {runner.result['iteration']}: {draws.size:,} draws, mean {draws.mean():.2f}, "
            f"max {int(draws.max())}, {np.mean(draws == 0):.0%} zeros."
        )
        self._draws_pipe.send(draws_histogram(draws))

    @param.depends("show_chain_draws", watch=True)
    def _on_toggle_draws(self):
        self.refresh_draws()

    def figures(self):
        """Current figures as static HoloViews objects, for export."""
        return {
            "bessel_pmf": self.pmf_plot(),
            "bessel_gap_map": self.gap_map(),
            "bessel_gap_bound": self.gap_bound_plot(),
        }

    def __panel__(self):
        controls = pn.Column(
            "### Bessel(nu, a)",
            pn.widgets.FloatSlider.from_param(self.param.nu),
            pn.widgets.FloatSlider.from_param(self.param.a),
            pn.pane.Markdown(
                "The private sampler draws one Bessel variable per observed cell: "
                "`m ~ Bessel(|noised count|, 2 sqrt((lambda+ + mu) lambda-))` is the smaller of "
                "the two latent Poisson counts whose difference is the noised count (Theorem 3). "
                "Its mean and mode are never more than 1 apart, which is why a variational fit "
                "may use the mode instead.",
                sizing_mode="stretch_width",
            ),
            pn.widgets.FloatInput.from_param(self.param.map_nu_max),
            pn.widgets.FloatInput.from_param(self.param.map_a_max),
            pn.widgets.Checkbox.from_param(self.param.show_chain_draws),
            width=320,
        )
        plots = [
            pn.pane.HoloViews(self.pmf_plot, sizing_mode="stretch_width"),
            pn.Row(
                pn.pane.HoloViews(self.gap_map, sizing_mode="stretch_width"),
                pn.pane.HoloViews(self.gap_bound_plot, sizing_mode="stretch_width"),
                sizing_mode="stretch_width",
            ),
        ]
        if self.fits is not None:
            plots += [
                self._draws_note,
                pn.pane.HoloViews(
                    hv.DynamicMap(self.draws_plot, streams=[self._draws_pipe]), sizing_mode="stretch_width"
                ),
            ]
        return pn.Row(controls, pn.Column(*plots, sizing_mode="stretch_width"), sizing_mode="stretch_width")
