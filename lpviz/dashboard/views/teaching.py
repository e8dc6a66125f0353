"""Teaching mode: a guided walk through the dashboard's own views, one idea per step.

From the true counts, through the noise their owner adds and what the naive
fit does with the negative counts it leaves, to what the private sampler does
instead, the scoreboard and the epsilon sweep. Each step selects its tab in the
dashboard's ``pn.Tabs`` (by name) and does what it needs, so that it lands on
a view with data: the scoreboard step starts the fits when none ran, the sweep
step starts the default epsilon sweep when none ran (the Bessel tab shows the
Bessel law on the release even without a Bessel chain). A step whose tab this
dashboard lacks says so instead. In a notebook, ``Teaching(fits=fits)`` builds
the tabs it needs itself.
"""

from dataclasses import dataclass

import panel as pn
import param

from lpviz.dashboard.serving.onscreen import ViewTabs
from lpviz.dashboard.serving.throttle import VIEW_SECONDS
from lpviz.dashboard.session.fits import Fits, follow_results
from lpviz.dashboard.session.presets import DEFAULT_PRESET, TWO_MODES, Claim, Verdict, check, unfinished
from lpviz.metrics import ESS_MIN, RHAT_MIXED  # the one R-hat threshold every text states

# What a step that loads a preset says until the preset is loaded (served: on the next tick)
LOADING = "Loading the preset {name} ..."


@dataclass(frozen=True)
class Step:
    """One idea: its ``title``, the ``tab`` it shows, its ``text``, and the :class:`~dashboard.session.presets.Claim`
    the text makes about the fits (checked on screen after the run, and by a test)."""

    title: str
    tab: str
    text: str
    starts_fits: bool = False
    starts_sweep: bool = False
    claim: Claim | None = None
    preset: str = ""  # a preset the step loads (asked first, as any switch that discards fits)


CANNOT_CHECK = "cannot be checked on these data"
# A step's sentence about the opening preset's results, shown with a note when other data are loaded.
OPENING_PRESET_WORDS = "opening preset"

STEPS = (
    Step(
        "The true counts",
        "Data & noise",
        "A person holds counts: how often each word appears in each document, or how many e-mails each "
        "sender sent each recipient. The first heatmap shows these **true counts**. In this simulation we "
        "see them; in a real release only their owner does.",
    ),
    Step(
        "The noise a person adds",
        "Data & noise",
        "Before releasing anything, the owner adds independent noise τ to every count, drawn from the "
        "two-sided geometric law P(τ) = (1 − α)/(1 + α) · α^|τ| with α = exp(−ε/N) (or, with per-row noise, "
        "each row's own α). Counts that differ by at most N then look alike up to a factor e^ε. "
        "The second heatmap is the **release**, the histogram "
        "below it the noise drawn; a larger ε/N means less noise. The Privacy tab shows the guarantee.",
    ),
    Step(
        "What naive does with negative counts",
        "Data & noise",
        "Noise makes some released counts negative, which no Poisson count can be. The **naive** fit "
        "truncates them at 0 (third heatmap) and fits the result as if it were the true counts. A truncated "
        "count is never below the noised one, whose mean is the true count, so the naive data are biased "
        "upward, most of all where the true counts are small.",
    ),
    Step(
        "What the private sampler does (Bessel)",
        "Bessel",
        "The **private** fit treats the true counts as unknown and samples them with the model: given the "
        "released count ỹ and the current rate μ, a true count y ≥ 0 has probability ∝ Pois(y; μ) · α^|ỹ − y|. "
        "The paper gets there by writing the noise as a difference of two Poisson counts: per cell it draws "
        "a Bessel variable m ~ Bessel(|ỹ|, 2√((λ⁺ + μ) λ⁻)), then splits the positive part binomially into the "
        "true count and noise. This tab shows the Bessel law (its mean and mode are less than 1 apart) and, "
        "below, the Bessel draws of one sweep on this release: a Bessel chain's own when one runs, else "
        "the draws a Bessel sweep makes at the current rates. The default *collapsed* sampler draws y "
        "from the same conditional directly; choose the Bessel sampler in the fit settings to see a "
        "chain's draws here.",
    ),
    Step(
        "The scoreboard",
        "Fits",
        "Every method runs two chains from different seeds on the same release (*Chains* in the fit "
        "settings: up to four): **private** (models the noise), **naive** "
        "(truncated data) and **non-private** (the true counts: the ideal nobody outside has). The "
        "scoreboard gives each method's error (MAE of its posterior mean rates against the truth, lower is "
        "better), the best constant rate's error beside it (a fit must beat that to mean anything), each "
        "fit's health (a chain that has not mixed or a fit that collapsed is flagged and never starred) and "
        f"R-hat across each method's chains (near 1: they agree; above {RHAT_MIXED:g}, or with an ESS below "
        f"{ESS_MIN:g}, the fit is flagged not mixed). On the opening preset the private fit's "
        "error ends below the naive one's; the non-private fit stays the reference both aim at.",
        starts_fits=True,
        claim=Claim(
            "the private fit's MAE against the true rates ends below naive's.",
            "rate_mae",
            better=("private",),
            worse=("naive",),
        ),
    ),
    Step(
        "The epsilon sweep",
        "Epsilon sweep",
        "The same fits at several privacy levels ε: the smaller ε, the more noise. This step starts the "
        "sweep when none ran; see how each method's error changes with ε as its points arrive. Each point "
        "is the mean MAE against the true counts over 3 noise draws (the band their range) of fits of 10,000 "
        "iterations; the dashed "
        "line is the non-private fit. On the opening preset's data the table shows the private fit's MAE against "
        "the true counts below naive's at every ε/N of the default sweep, each of its draws below each of "
        "naive's: clearly at ε/N 0.5 and 1 (about 1.35 against 1.42, 1.19 against 1.21), barely at 2, "
        "where the draws' ranges meet (1.149-1.153 against 1.153-1.156): with little noise, truncating it "
        "costs little. Against the true rates (the table's rate MAE, the measure of step 5) naive is the "
        "lower at every ε/N. A difference inside the range of the draws would not count. Type other values "
        "of ε/N to see more or less noise; the table flags any fit that has not mixed, and a flagged fit "
        "never counts.",
        starts_sweep=True,
        claim=Claim(
            "at every ε/N of the sweep, every noise draw's private MAE against the true counts is below every "
            "draw's naive MAE.",
            "mae",
            better=("private",),
            worse=("naive",),
        ),
    ),
    Step(
        "Two chains, two modes",
        "Fits",
        "One chain can look settled in a poor place. This step loads the preset *Two chains, two modes*: "
        "Figure 1's network fitted by two chains per method from different seeds (the fit settings' *Chains*). "
        "Under the traces each method's chains are drawn alone after burn-in, one colour per chain: the private "
        "method's two settle at different levels of the noised data's likelihood and stay there: two posterior "
        "modes. R-hat compares the chains with each other, "
        f"so the scoreboard's R-hat (across the chains) lies far above {RHAT_MIXED:g}, the fit is flagged **chains "
        "disagree** with the chain that sits apart named under the table, and nothing is ranked. Either "
        "chain alone would have given its own answer with no warning of the other. What still holds: the "
        "stacking pane weighs the chains by how well each predicts the noised cells (no truth read); it "
        "weighs the private chains unequally, and its rates are closer to the true counts than the two "
        "chains pooled equally.",
        starts_fits=True,
        claim=TWO_MODES.claim,
        preset=TWO_MODES.name,
    ),
)


class Teaching(pn.viewable.Viewer):
    """A guided sequence of :data:`STEPS` over the dashboard's tabs: Back, Next, a toggle.

    Parameters
    ----------
    fits : Fits
        The session's chains (the scoreboard step starts them when none ran).
    tabs : pn.Tabs, optional
        The dashboard's tabs, selected by their names; without them (a notebook)
        the views the steps name are built here and shown below the steps.
    """

    fits = param.ClassSelector(class_=Fits)
    tabs = param.ClassSelector(class_=pn.Tabs, default=None)
    on = param.Boolean(default=False, doc="teaching mode: the steps shown and the tabs following them")
    step = param.Integer(default=0, bounds=(0, len(STEPS) - 1), doc="the step shown (0-based)")
    note = param.String(default="", doc="what the current step did, or why it could not")
    verdict = param.Parameter(default=None, doc="the current step's claim checked on the finished fits")

    def __init__(self, **params):
        standalone = params.get("tabs") is None
        super().__init__(**params)
        self._standalone = standalone
        self._back = pn.widgets.Button(label="Back", width=80, disabled=True)
        self._next = pn.widgets.Button(label="Next", color="primary", width=80)
        self._back.on_click(self.back)
        self._next.on_click(self.next)
        if standalone:
            self.tabs = self._own_tabs()
            self.on = True
        follow_results(self.fits, lambda runner: self._check_claim(), VIEW_SECONDS)
        # a step's preset loaded (at once, or once the switch is confirmed): its fits start
        self.fits.settings.param.watch(self._preset_loaded, ["preset"])
        self.param.watch(lambda *_: self._check_claim(), ["step"])
        for view in getattr(self.tabs, "views", []):  # a sweep's claim is checked when it ends
            if hasattr(view, "verdict") and "state" in view.param:
                view.param.watch(lambda *_: self._check_claim(), ["state"])

    def step_verdict(self):
        """The :class:`~lpviz.dashboard.session.presets.Verdict` of the current step's claim (None: it makes none)."""
        claim = self.current.claim
        if claim is None:
            return None
        if self.current.starts_sweep:
            sweep = self.view(self.current.tab)
            if sweep is None or not hasattr(sweep, "verdict"):
                return Verdict(None, "this dashboard has no epsilon sweep to check it on")
            return sweep.verdict(claim)
        if self.current.preset and self.fits.settings.preset != self.current.preset:
            state = "being loaded" if LOADING.format(name=self.current.preset) in self.note else "not loaded"
            return Verdict(None, f"it is checked on the preset {self.current.preset}, which is {state}")
        missing = self.cannot_check(claim)
        if missing:
            return Verdict(None, missing)
        runners = self.fits.runners
        if any(m not in self.fits.active for m in claim.methods):
            return Verdict(None, "the methods it compares are not all chosen in the fit settings")
        short = unfinished([runners[m] for m in claim.methods], "checked when the fits end")
        if short is not None:
            return short
        return check(claim, {m: (runners[m].result or {}).get("score") or {} for m in claim.methods})

    def cannot_check(self, claim):
        """Why ``claim`` cannot be checked on the session's data ('' when it can): an MAE against the
        true rates needs a simulation's rates, one against the true counts needs the counts (own data
        have counts but no rates; an uploaded release has neither). The step waited for them for ever."""
        truth = self.fits.data.truth
        needs_rates = claim.key.startswith(("rate_", "heldout_rate_"))
        if truth is not None and (truth.mu is not None or not needs_rates):
            return ""
        what = "true rates" if needs_rates else "true counts"
        return (
            f"{CANNOT_CHECK}: these data have no {what} ({'own counts' if truth is not None else 'a release'}, "
            f"not a simulation); choose the preset {DEFAULT_PRESET} to see it checked"
        )

    def _check_claim(self):
        self.verdict = self.step_verdict()

    def _own_tabs(self):
        from lpviz.dashboard.views.bessel_view import BesselView
        from lpviz.dashboard.views.fits_view import FitsView
        from lpviz.dashboard.views.noise_view import NoiseView
        from lpviz.dashboard.views.privacy_view import PrivacyView

        data = self.fits.data
        from lpviz.dashboard.views.sweep_view import SweepView

        return ViewTabs(
            ("Data & noise", NoiseView(data=data)),
            ("Fits", FitsView(fits=self.fits)),
            ("Bessel", BesselView(fits=self.fits)),
            ("Privacy", PrivacyView(data=data)),
            ("Epsilon sweep", SweepView(fits=self.fits)),
            sizing_mode="stretch_width",
        )

    # ---- navigation -------------------------------------------------------------------
    @property
    def tab_names(self):
        return list(self.tabs._names)  # Panel keeps the tab titles there (no public accessor in 1.9)

    @property
    def current(self):
        return STEPS[self.step]

    def view(self, name):
        """The view on the tab called ``name`` (tabs of :class:`~dashboard.serving.onscreen.ViewTabs`), else None."""
        views = getattr(self.tabs, "views", None)
        names = self.tab_names
        return views[names.index(name)] if views is not None and name in names else None

    def select(self, name):
        """Show the tab called ``name``; False when there is none."""
        names = self.tab_names
        if name not in names:
            return False
        self.tabs.active = names.index(name)
        return True

    def go(self, step):
        """Show step ``step`` (clipped to the first and last): select its tab, do what it needs."""
        step = min(max(int(step), 0), len(STEPS) - 1)
        current = STEPS[step]
        notes = []
        if not self.select(current.tab):
            notes.append(
                f"This dashboard has no *{current.tab}* tab yet: change ε in the sidebar and press "
                "Start on the Fits tab again to see the same effect by hand."
            )
        elif current.preset and self.fits.settings.preset != current.preset:
            notes.append(self._load_step_preset(step, loading=LOADING.format(name=current.preset)))
        elif current.starts_fits:
            notes.append(self._start_fits())
        elif current.starts_sweep:
            notes.append(self._start_sweep(self.view(current.tab)))
        if OPENING_PRESET_WORDS in current.text and self.fits.settings.preset != DEFAULT_PRESET:
            notes.append(
                f"What this step says of the {OPENING_PRESET_WORDS} is about {DEFAULT_PRESET}; the data loaded "
                "now are others, and may show something else."
            )
        self.param.update(step=step, note=" ".join(note for note in notes if note))
        self._back.disabled = step == 0
        self._next.disabled = step == len(STEPS) - 1

    def _load_step_preset(self, step, loading):
        """Load step ``step``'s preset (and start its fits when it needs no yes); returns what to say.

        Served, the load waits for the next tick, and meanwhile the step says ``loading``: the load
        rebuilds every tab for the preset's data, and done inside the Next click the page showed the
        old step, no claim line, for ~9 s while a sweep kept the server busy (issue 57 LOW 26)."""
        current = STEPS[step]

        def load(deferred=False):
            if deferred and (self.step != step or not self.on):
                return ""  # the teacher moved on before it was loaded
            note = self._load_preset(current.preset)
            if not self._waiting_for(current.preset) and current.starts_fits:
                self.fits.start()  # on the preset's data: once they are built, if they are being built
            return note

        if not self._served():
            return load()

        def later():
            note = load(deferred=True)
            if note:
                self.note = self.note.replace(loading, note)
            self._check_claim()

        pn.state.execute(later, schedule=True)
        return loading

    @staticmethod
    def _served():
        """Whether this runs in a served session (a document with a session), where work can wait a tick."""
        doc = pn.state.curdoc
        return doc is not None and doc.session_context is not None

    def _load_preset(self, name):
        """Choose the preset ``name``; a switch that would discard fits is asked first, in the sidebar."""
        settings = self.fits.settings
        settings.preset = name
        if not self._waiting_for(name):
            return f"The preset {name} has been loaded for you; its fits start when its data are built."
        return (
            f"This step loads the preset {name}: confirm the switch in the sidebar (it discards the fits "
            "shown now); its fits then start."
        )

    def _waiting_for(self, name):
        """Whether the switch to the preset ``name`` waits for a yes (it would discard fits)."""
        settings = self.fits.settings
        return settings.pending.get("preset") == name or settings.preset != name

    def _preset_loaded(self, event):
        current = self.current
        if self.on and current.preset and event.new == current.preset and current.starts_fits:
            if not self._waiting_for(current.preset):
                self.fits.start()

    def _start_fits(self):
        fits = self.fits
        if fits.data.release is None:
            return "The data are still being built: press Start once they are there."
        runners = fits.active.values()
        if any(runner.result is not None or runner.status in ("running", "pausing", "paused") for runner in runners):
            return ""
        fits.start()
        return "The fits have been started for you; the scoreboard fills in after burn-in."

    def _start_sweep(self, sweep):
        """Start ``sweep``'s grid (its default values unless typed) when it has no points and runs
        none; a sweep that ran, or runs, stays as it is."""
        if sweep is None or not hasattr(sweep, "run"):
            return ""
        if sweep.state in ("starting", "running") or (sweep.points is not None and not sweep.points.empty):
            return ""
        sweep.run()
        if sweep.state == "unavailable":
            return sweep.progress
        return "The epsilon sweep has been started for you: its points appear as its fits end."

    def next(self, *_):
        self.go(self.step + 1)

    def back(self, *_):
        self.go(self.step - 1)

    @param.depends("on", watch=True)
    def _turned(self):
        if self.on:
            self.go(self.step)

    # ---- view -------------------------------------------------------------------------
    @param.depends("step", "note", "verdict")
    def _text(self):
        step = self.current
        text = f"**Step {self.step + 1} of {len(STEPS)}: {step.title}** ({step.tab} tab)\n\n{step.text}"
        if self.note:
            text += f"\n\n*{self.note}*"
        if self.verdict is not None:
            cannot = self.verdict.held is None and self.verdict.text.startswith(CANNOT_CHECK)
            word, why = (
                (CANNOT_CHECK, self.verdict.text[len(CANNOT_CHECK) + 2 :])
                if cannot
                else (
                    self.verdict.word,
                    self.verdict.text,
                )
            )
            text += f"\n\n**This step's claim** ({step.claim.text}): **{word}**: {why}."
        return pn.pane.Markdown(text, sizing_mode="stretch_width", name="teaching-step")

    def __panel__(self):
        card = pn.Column(
            pn.Row(self._back, self._next),
            self._text,
            visible=self.param.on,
            sizing_mode="stretch_width",
            styles={"border-left": "4px solid #b2182b"},
        )
        if self._standalone:
            return pn.Column(card, self.tabs, sizing_mode="stretch_width")
        toggle = pn.widgets.Toggle.from_param(self.param.on, label="Teaching mode", color="light")
        run = pn.widgets.Button(label="Run the fits", color="success")
        run.on_click(self.run_fits)
        return pn.Column(pn.Row(run, toggle), card, sizing_mode="stretch_width")

    def run_fits(self, *_):
        """From the opening screen: show the Fits tab and start the chosen methods' fits there."""
        self.select("Fits")
        self.fits.start()
