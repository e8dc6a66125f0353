"""The Bessel distribution the private sampler draws from, made visible.

Pick ``nu`` and ``a`` and see the pmf with its mean and mode marked; a map of
``|mean - mode|`` over a grid of ``(nu, a)`` shows the bound of 1 that lets a
variational fit replace the Bessel variable by its mode; and, when a chain
whose method draws Bessel variables runs, a histogram of the draws of its last
sweep (a copy its worker made for the snapshot, never the sampler's own array).
Without such a chain (the default private sampler is the collapsed one, which
has no Bessel variables) the histogram shows the Bessel law on the session's
release: the draws a Bessel sampler's sweep makes at the current rates
(:func:`release_draws`), so the tab never shows an empty plot.
"""

import holoviews as hv
import holoviews.plotting.bokeh  # noqa: F401  (styles below are bokeh options, also outside a notebook)
import numpy as np
import panel as pn
import param

from lpviz import bessel
from lpviz.dashboard.serving.onscreen import OnScreen
from lpviz.dashboard.session.fits import Fits, follow_results
from lpviz.dashboard.views.plots import FLEX_ITEM, SIDE_MIN_WIDTH, side_by_side

# A pmf this small is invisible on the plot; it bounds the support shown.
_PMF_FLOOR = 1e-6
# The chain-draws histogram redraws at most this often while a chain runs.
DRAWS_SECONDS = 1.0
# Cells of a release drawn for the histogram without a Bessel chain (a random subset beyond it).
RELEASE_DRAWS_MAX_CELLS = 20_000


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


def release_draws(release, rates, max_cells=RELEASE_DRAWS_MAX_CELLS, seed=0):
    """One Bessel draw per observed cell of ``release`` (at most ``max_cells``, a random subset),
    as the Bessel sampler makes them at the rates ``rates`` (the release's shape): ``m ~
    Bessel(|noised count|, 2 sqrt((lambda+ + mu) lambda-))`` with ``lambda+``, ``lambda-`` drawn
    from their exponential prior of mean alpha / (1 - alpha) (each row's alpha), as in the sampler's
    first sweep. Seeded by ``seed``: the same release and rates give the same picture."""
    counts = np.asarray(release.Y_obs)
    rates = np.asarray(rates, dtype=float)
    if rates.shape != counts.shape:
        raise ValueError(f"rates of shape {rates.shape} do not fit the release's {counts.shape}")
    rng = np.random.default_rng(seed)
    cells = np.flatnonzero(release.observed_cells)
    if cells.size > max_cells:
        cells = np.sort(rng.choice(cells, size=max_cells, replace=False))
    row = np.unravel_index(cells, counts.shape)[0]
    alpha = release.alpha_per_row[row]
    prior_mean = alpha / (1.0 - alpha)
    lambda_plus = rng.exponential(1.0, cells.size) * prior_mean
    lambda_minus = rng.exponential(1.0, cells.size) * prior_mean
    mu = np.maximum(rates.ravel()[cells], 0.0)
    nu = np.abs(counts.ravel()[cells]).astype(float)
    return bessel.sample(nu, 2.0 * np.sqrt((lambda_plus + mu) * lambda_minus), random_state=rng)


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
        self._draws_title = "Bessel draws of the chain's last sweep"
        # hidden (another tab shown): the draws wait until shown (a sweep on the release for each new
        # result, every second, for a tab nobody looks at, cost the loop every session shares)
        self.on_screen = OnScreen()
        if self.fits is not None:
            follow_results(self.fits, lambda runner: self.on_screen.run("draws", self.refresh_draws), DRAWS_SECONDS)
            self.fits.data.param.watch(lambda *_: self.on_screen.run("draws", self.refresh_draws), ["release"])
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

    def release_rates(self):
        """``(rates, words)``: the rates the Bessel law is shown at without a Bessel chain, and what
        they are. A chosen chain's current rates when one has them (in the registry's order, those
        fitted to the release before one fitted to the true counts), else the release truncated at 0
        (the naive guess of the rates before any fit)."""
        from lpviz.methods import METHODS

        release = self.fits.data.release
        runners = sorted(self.fits.active.values(), key=lambda runner: METHODS[runner.method].uses_truth)
        for runner in runners:
            mu = (runner.result or {}).get("mu")
            if mu is not None and np.shape(mu) == release.shape:
                return mu, f"the chain {runner.label} at iteration {runner.result['iteration']:,}"
        return np.maximum(np.asarray(release.Y_obs), 0), "the release truncated at 0 (no fit has run yet)"

    def shown_draws(self):
        """``(draws, words)`` the histogram shows: the Bessel chain's last sweep, else
        :func:`release_draws` on the session's release; ``(None, why)`` without a release."""
        draws = self.chain_draws() if self.show_chain_draws else None
        if draws is not None and draws.size:
            runner = self.draws_runner()
            return draws, (
                f"{runner.label}, iteration {runner.result['iteration']}: {draws.size:,} draws, mean "
                f"{draws.mean():.2f}, max {int(draws.max())}, {np.mean(draws == 0):.0%} zeros."
            )
        release = None if self.fits is None else self.fits.data.release
        if release is None:
            return None, "*The Bessel draws appear once the data are built.*"
        rates, rates_words = self.release_rates()
        draws = release_draws(release, rates)
        sampler = getattr(self.fits.settings.method_options, "sampler", None)
        why = (
            f"The private method runs the {sampler} sampler, which draws the true counts directly and has no "
            "Bessel variables (choose Sampler = bessel in the fit controls and start the fits to see a chain's own)"
            if sampler is not None and sampler != "bessel"
            else "No chain draws Bessel variables yet (start the fits to see the private chain's own)"
        )
        return draws, (
            f"*{why}.* Here: the Bessel law on this release, one draw per observed cell ({draws.size:,}) as a "
            f"Bessel sampler's sweep makes it at the rates of {rates_words}, with lambda+ and lambda- from "
            f"their prior: mean {draws.mean():.2f}, max {int(draws.max())}, {np.mean(draws == 0):.0%} zeros."
        )

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
            # short: at its narrowest (300 px beside the bound's plot) "... over the grid: max 0.969 <= 1"
            # was cut after "max 0.96" (issue 57 LOW 24)
            title=f"|mean - mode|: max {gap.max():.3f} <= 1",
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
            title=self._draws_title,
        )

    # -- chain draws -----------------------------------------------------------
    def refresh_draws(self):
        """Push the draws :meth:`shown_draws` gives into the histogram (an empty one without data)."""
        draws, words = self.shown_draws() if self.fits is not None else (None, "")
        self._draws_note.object = words
        chain = draws is not None and self.draws_runner() is not None and self.show_chain_draws
        self._draws_title = "Bessel draws of the chain's last sweep" if chain else "Bessel draws on this release"
        self._draws_pipe.send(draws_histogram(draws) if draws is not None else (np.array([0.0, 1.0]), np.zeros(1)))

    @param.depends("show_chain_draws", watch=True)
    def _on_toggle_draws(self):
        self.refresh_draws()

    def draws_figure(self):
        """The Bessel-draws histogram as it is now (a static HoloViews object)."""
        return self.draws_plot(self._draws_pipe.data)

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
            side_by_side(self.gap_map, self.gap_bound_plot),
        ]
        if self.fits is not None:
            plots += [
                self._draws_note,
                pn.pane.HoloViews(
                    hv.DynamicMap(self.draws_plot, streams=[self._draws_pipe]), sizing_mode="stretch_width"
                ),
            ]
        # the controls beside the plots, above them on a phone (beside them, 320 px of a 412 px page left
        # the plots 80 px and the page cut them: issue 37)
        body = pn.Column(*plots, sizing_mode="stretch_width", min_width=SIDE_MIN_WIDTH, styles=FLEX_ITEM)
        return pn.FlexBox(controls, body, sizing_mode="stretch_width")
