"""What a person sets in the dashboard: data source and sizes, privacy, held-out cells, fits.

:class:`Settings` holds the values only (``param`` parameters, so every widget
is ``Widget.from_param``); :class:`~lpviz.dashboard.session.datastore.DataStore` derives the data
and the release from them and :class:`~lpviz.dashboard.session.fits.Fits` the chains. The list of
methods and their options (the private method's sampler, ...) are read from
the registries (:data:`lpviz.methods.METHODS`), so a newly registered method
shows up here without touching this file.

:data:`SOURCES` says, for each data source the dashboard offers, which
settings shape the data set, how they map onto :func:`lpviz.datasets.load_data`
and the source's own defaults (the paper's, where there is one).
"""

import os
from collections.abc import Callable
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import panel as pn
import param

from lpviz.dashboard.session.presets import PRESETS
from lpviz.dashboard.session.runner import DASHBOARD_CHAINS
from lpviz.dashboard.session.traces import MAX_CHAINS
from lpviz.datasets import HOLDOUTS

ENRON_ENV = "LPVIZ_ENRON"


def default_enron():
    """The Enron file the dashboard opens on: ``$LPVIZ_ENRON`` when set; in a checkout of lpviz the
    project's shared subset beside it (``../shared/data/enron_sent_subset.tar.gz``); else the CMU
    tarball in the data cache, where the dashboard's download and ``lpviz fetch-enron`` put it (an
    installed lpviz looks for nothing outside its own folders)."""
    from lpviz.datasets.cache import default_cache_dir
    from lpviz.datasets.download import DEFAULT_URL

    if os.environ.get(ENRON_ENV, "").strip():
        return Path(os.environ[ENRON_ENV].strip()).expanduser()
    checkout = Path(__file__).resolve().parents[3]
    shared = checkout.parent / "shared" / "data" / "enron_sent_subset.tar.gz"
    if (checkout / "pyproject.toml").is_file() and (checkout / "app" / "app.py").is_file() and shared.is_file():
        return shared
    return default_cache_dir() / Path(DEFAULT_URL).name


DEFAULT_ENRON = default_enron()


@dataclass(frozen=True)
class Source:
    """A data source: ``spec`` for :func:`lpviz.datasets.load_data` (``spec:PATH`` when
    ``takes_path``), the :class:`Settings` that shape it (``parameters``), how they become
    the loader's options, and the settings a switch to it applies (``defaults``)."""

    label: str
    spec: str = ""
    parameters: tuple = ()
    options: Callable = field(default=lambda settings: {})
    defaults: dict = field(default_factory=dict)
    takes_path: bool = False
    N_from_data: bool = False  # Figure 1: N is the data's mean count
    kind: str = ""  # the data kind (lpviz.release.KINDS) when known before the data are read
    shape: Callable = field(default=lambda settings: None)  # the data's shape when known before building


# One alpha for every row and nothing held out: per-row noise and held-out designs belong to an
# experiment (a preset), and carried over to another data set they would change what it is.
PLAIN_NOISE = dict(heterogeneous=False, holdout="none")

SOURCES = {
    "synthetic-topics": Source(
        "synthetic topics (Figure 3)",
        "synthetic-topics",
        ("n_docs", "n_words", "n_components", "seed"),
        lambda s: dict(n_docs=s.n_docs, n_words=s.n_words, n_topics=s.n_components, random_state=s.seed),
        dict(n_docs=90, n_words=15, n_components=3, epsilon=1.0, N=1.0, colour_scale="linear", **PLAIN_NOISE),
        kind="documents",
        shape=lambda s: (s.n_docs, s.n_words),
    ),
    "synthetic-blocks": Source(
        "synthetic network (Figure 1)",
        "synthetic-blocks",
        ("size", "n_components", "seed"),
        lambda s: dict(n_actors=s.size, n_communities=s.n_components, random_state=s.seed),
        dict(size=20, n_components=5, epsilon=1.0, colour_scale="quantile", **PLAIN_NOISE),
        N_from_data=True,
        kind="network",
        shape=lambda s: (s.size, s.size),
    ),
    "enron-topics": Source(
        "Enron emails x words (Figure 4)",
        "enron-topics",
        ("path", "n_docs", "n_words", "seed"),
        lambda s: dict(n_docs=s.n_docs, n_words=s.n_words, random_state=s.seed),
        dict(n_docs=1000, n_words=1000, n_components=10, epsilon=2.0, N=1.0, colour_scale="quantile", **PLAIN_NOISE),
        takes_path=True,
        kind="documents",
        shape=lambda s: (s.n_docs, s.n_words),
    ),
    "enron-network": Source(
        "Enron sender x recipient (Figure 5)",
        "enron-network",
        ("path", "min_count"),
        lambda s: dict(min_count=s.min_count),
        dict(min_count=100, n_components=5, epsilon=2.0, N=1.0, colour_scale="quantile", **PLAIN_NOISE),
        takes_path=True,
        kind="network",
    ),
    "synthetic-tensor": Source(
        "synthetic sender x recipient x month",
        "synthetic-tensor",
        ("size", "n_months", "n_components", "seed"),
        lambda s: dict(n_actors=s.size, n_times=s.n_months, n_components=s.n_components, random_state=s.seed),
        dict(size=30, n_months=24, n_components=4, epsilon=1.0, N=1.0, colour_scale="linear", **PLAIN_NOISE),
        kind="tensor",
        shape=lambda s: (s.size, s.size, s.n_months),
    ),
    "enron-tensor": Source(
        "Enron sender x recipient x month",
        "enron-tensor",
        ("path", "min_count"),
        lambda s: dict(min_count=s.min_count),
        dict(min_count=100, n_components=5, epsilon=2.0, N=1.0, colour_scale="quantile", **PLAIN_NOISE),
        takes_path=True,
        kind="tensor",
    ),
    "upload": Source("a file you upload", defaults=dict(epsilon=1.0, N=1.0, colour_scale="quantile", **PLAIN_NOISE)),
}
# Settings that only change the noise or the held-out cells (the data set stays).
NOISE_PARAMETERS = (
    "epsilon",
    "N",
    "heterogeneous",
    "alpha0",
    "concentration",
    "noise_seed",
    "holdout",
    "holdout_fraction",
    "holdout_actors",
)
# Settings of the chains.
# The engine's inferences (lpviz.engine.INFERENCES), as the dashboard names them.
INFERENCE_LABELS = {"mcmc": "MCMC (Gibbs chains)", "vi": "VI (CAVI; runs to convergence, no burn-in)"}
FIT_PARAMETERS = (
    "inference",
    "model",
    "n_components",
    "n_iter",
    "burn_in",
    "thin",
    "trace_every",
    "chain_seed",
    "chains",
    "methods",
)
# Settings whose change discards fits (a new data set, release or model).
DISCARDING_PARAMETERS = (
    "preset",
    "source",
    "path",
    "n_docs",
    "n_words",
    "size",
    "n_months",
    "min_count",
    "seed",
    *NOISE_PARAMETERS,
    "inference",
    "model",
    "n_components",
    "chain_seed",
    "chains",
)


def _question_words(pending, lost):
    """The question asked before ``pending`` changes apply: what they discard (``lost``), or, the fits
    having ended since, that applying them replaces the fits' results."""
    changes = ", ".join(f"{name} -> {value!r}" for name, value in pending.items())
    if lost:
        return f"Applying {changes} discards {lost}."
    return f"The fits have ended: applying {changes} replaces their results."


class ExplainedNumber(param.Number):
    """A number whose refusal (out of its bounds) says what the bounds are and why (``reason``)."""

    __slots__ = ["reason"]

    def __init__(self, default=0.0, *, reason="", **params):
        super().__init__(default=default, **params)
        self.reason = reason

    def _validate_bounds(self, val, bounds, inclusive_bounds):
        try:
            super()._validate_bounds(val, bounds, inclusive_bounds)
        except ValueError as exc:  # "... parameter 'Settings.N' must be at least 1, not 0.5."
            bound = str(exc).split("' ", 1)[-1].rstrip(".")
            raise ValueError(f"{self.name} {bound}: {self.reason}") from None


def held():
    """Hold the session's document (:func:`panel.io.hold`): the changes made inside reach its page in one
    message when the block ends. Nothing is held without a Bokeh document (plain Python, tests)."""
    from bokeh.document import Document

    doc = pn.state.curdoc
    return pn.io.hold(doc) if isinstance(doc, Document) else nullcontext()


def fresh_seed():
    """A random seed (shown, so a run can be repeated)."""
    return int(np.random.SeedSequence().entropy % 2**31)


def method_options_class():
    """A Parameterized class with one selector per option of the registered methods
    (choices and default from the registry: the first choice is the default)."""
    from lpviz.methods import METHODS

    choices, owners = {}, {}
    for name, method_class in METHODS.items():
        for option, values in method_class.options.items():
            choices.setdefault(option, [])
            choices[option] += [value for value in values if value not in choices[option]]
            owners.setdefault(option, []).append(name)
    parameters = {
        option: param.Selector(
            default=values[0], objects=list(values), doc=f"{option} of the {', '.join(owners[option])} method"
        )
        for option, values in choices.items()
    }
    return param.parameterized_class("MethodOptions", parameters)


def source_defaults(source):
    """What a switch to ``source`` sets: the model back to the data's default (models are per kind of
    data) and the source's own :attr:`Source.defaults`."""
    return {"model": "", **SOURCES[source].defaults}


def preset_values(name):
    """Every setting the preset ``name`` puts in force: its data source's defaults, then the
    preset's own settings over them (a preset's value is never overwritten by its source's)."""
    preset = PRESETS[name]
    return {**source_defaults(preset.settings["source"]), **preset.settings}


# Settings a preset or a data source declares: the ones a person's own choice is remembered for.
DECLARED_PARAMETERS = tuple(
    sorted(
        {"model"}
        | {name for source in SOURCES.values() for name in source.defaults}
        | {name for preset in PRESETS.values() for name in preset.settings}
    )
)


class Settings(param.Parameterized):
    """Every value a person sets in the dashboard (and nothing derived from them).

    One mechanism puts declared settings in force (:meth:`declare`): choosing a preset declares
    every one of :func:`preset_values`, whatever their previous values (equal ones included); a
    data source chosen by hand declares its defaults (:func:`source_defaults`) except the
    settings the person has set by hand since the last preset or reset. Either way ``applied``
    fires once afterwards, and the data store rebuilds once, from the settings in force.
    """

    preset: param.Selector = param.Selector(
        default="",
        objects=["", *PRESETS],
        doc="one of the paper's experiments (lpviz.dashboard.session.presets.PRESETS), '' for settings of your own",
    )
    source: param.Selector = param.Selector(default="synthetic-topics", objects=list(SOURCES), doc="data source")
    path = param.String(default=str(DEFAULT_ENRON), doc="Enron tarball, maildir or emails.csv")
    n_docs = param.Integer(default=90, bounds=(2, 50_000), doc="documents")
    n_words = param.Integer(default=15, bounds=(2, 50_000), doc="vocabulary size")
    size = param.Integer(default=20, bounds=(2, 2_000), doc="actors")
    n_months = param.Integer(default=24, bounds=(1, 600), doc="months")
    min_count = param.Integer(default=100, bounds=(1, None), doc="keep actors who sent or received this many emails")
    n_components = param.Integer(default=3, bounds=(1, 500), doc="topics or communities")
    seed = param.Integer(default=0, bounds=(0, None), doc="seed of the data set")

    epsilon = ExplainedNumber(
        default=1.0,
        bounds=(0.01, 100),
        softbounds=(0.05, 10),
        reason="epsilon goes from 0.01 (almost nothing but noise) to 100 (almost no noise)",
        doc="privacy level: smaller is more private (more noise)",
    )
    N = ExplainedNumber(
        default=1.0,
        bounds=(1, None),
        softbounds=(1, 50),
        reason="two different count vectors are at least 1 apart, so N < 1 protects nothing",
        doc="precision: counts within N of each other are hard to tell apart",
    )
    heterogeneous = param.Boolean(default=False, doc="one alpha per row, drawn from a Beta")
    alpha0 = param.Number(
        default=0.5, bounds=(0, 1), inclusive_bounds=(False, False), doc="mean alpha of the heterogeneous noise"
    )
    concentration = param.Number(
        default=10.0,
        bounds=(0, None),
        inclusive_bounds=(False, True),
        doc="concentration of the per-row alphas around alpha0",
    )
    noise_seed = param.Integer(
        default=None, allow_None=True, bounds=(0, None), doc="seed of the simulated noise (random unless given)"
    )
    holdout: param.Selector = param.Selector(default="none", objects=list(HOLDOUTS), doc="cells left out of the fits")
    holdout_fraction = param.Number(default=0.1, bounds=(0.01, 0.9), doc="share of cells held out")
    holdout_actors = param.Integer(default=3, bounds=(1, None), doc="top senders/recipients held out")

    model: param.Selector = param.Selector(
        default="",
        objects=[""],
        doc="the model fitted ('': the default model of the data's kind); the choices are the registered "
        "models that fit the data's kind (lpviz.models.fitting)",
    )
    inference: param.Selector = param.Selector(
        default="mcmc",
        objects=list(INFERENCE_LABELS),
        doc="how every method fits: Gibbs chains (MCMC) or coordinate-ascent VI (CAVI)",
    )
    n_iter = param.Integer(default=6000, bounds=(1, None), doc="iterations per chain")
    burn_in = param.Integer(default=1000, bounds=(0, None), doc="iterations before the first saved sample")
    thin = param.Integer(default=25, bounds=(1, None), doc="save every thin-th iteration after burn-in")
    trace_every = param.Integer(default=1, bounds=(1, None), doc="trace every n-th iteration")
    chain_seed = param.Integer(default=0, bounds=(0, None), doc="seed of the chains")
    chains = param.Integer(
        default=DASHBOARD_CHAINS,
        bounds=(1, MAX_CHAINS),
        doc="MCMC chains per method, compared with each other (R-hat across chains; a chain in another "
        "mode is named); chain 0 is the single chain of the seed",
    )
    methods = param.ListSelector(default=[], objects=[], doc="methods to run")
    method_options = param.ClassSelector(class_=param.Parameterized, doc="options of the methods")
    colour_scale: param.Selector = param.Selector(
        default="linear",
        objects=["linear", "log", "quantile"],
        doc="colour scale of the rate heatmaps (log or quantile for heavy-tailed counts)",
    )
    applied = param.Event(doc="fires once after a batch of declared settings is in force (the data are rebuilt)")
    pending = param.Dict(default={}, doc="changes held back because they would discard running fits")
    question = param.String(default="", doc="what confirming the pending changes would discard")

    def __init__(self, **params):
        """``preset``: start from that preset's settings (``params`` given beside it win)."""
        from lpviz.methods import METHODS

        if params.get("preset"):
            params = {**preset_values(params["preset"]), **params}
        else:
            params = {**source_defaults(params.get("source", "synthetic-topics")), **params}
        if params.get("noise_seed") is None:
            params["noise_seed"] = fresh_seed()
        from lpviz.models import MODELS

        self.param.model.objects = ["", *MODELS]
        super().__init__(**params)
        self.param.methods.objects = list(METHODS)
        if not self.methods:
            self.methods = list(METHODS)
        if self.method_options is None:
            self.method_options = method_options_class()()
        # What a change of data, noise or model would discard ("" for nothing): set by the
        # session's Fits. Changes that would discard something wait for confirm().
        self.discard_check = None
        self._unguarded = 0
        self._declaring = 0
        self._user_set = set()  # settings set by hand since the last preset or reset (a source switch keeps them)
        self._reverting = False
        self._refused = {}  # name -> refused value, until it is put back
        # before the guard: a refused noise level asks nothing and reaches nobody
        self.param.watch(self._check_noise_level, ["epsilon", "N"])
        self.param.watch(self._guard, list(DISCARDING_PARAMETERS))
        self.param.watch(self._apply_preset, "preset")
        self.param.watch(self._apply_source, "source")
        self.param.watch(self._note_user_set, list(DECLARED_PARAMETERS))
        # a new noise draw keeps the experiment (its text says the numbers are no longer the class's)
        self.param.watch(
            self._leave_preset,
            sorted({name for preset in PRESETS.values() for name in preset.settings} - {"noise_seed"}),
        )
        self.param.watch(self._check_schedule, ["n_iter", "burn_in", "thin"])

    # ---- changes that would discard running fits wait for a yes -----------------------
    @contextmanager
    def unguarded(self):
        """Apply changes without asking (a confirmed change, a data set's own defaults)."""
        self._unguarded += 1
        try:
            yield
        finally:
            self._unguarded -= 1

    def _guard(self, *events):
        if self._unguarded or self.discard_check is None:
            return
        lost = self.discard_check()
        if not lost:
            return
        # the last change last (its card shows the question beside the field)
        changed = {event.name: event.new for event in events}
        pending = {**{name: value for name, value in self.pending.items() if name not in changed}, **changed}
        self.refuse(events)
        self.param.update(pending=pending, question=_question_words(pending, lost))

    def refresh_question(self, *_):
        """The pending question in the words of now: once the fits it would discard have ended it says
        so (it said "discards the running fits" after they had ended, issue 57 MEDIUM 5)."""
        if self.pending and self.discard_check is not None:
            self.question = _question_words(self.pending, self.discard_check())

    def confirm(self, *_):
        """Apply the pending changes (discarding what they discard)."""
        pending = self.pending
        self.param.update(pending={}, question="")
        # A put-back still waiting for its tick (the yes can arrive first on a busy server)
        # must not undo the yes; a value it never put back is already set: announce it again.
        unchanged = [name for name, value in pending.items() if name in self._refused and getattr(self, name) == value]
        for name in pending:
            self._refused.pop(name, None)
        with self.unguarded():
            self.param.update(**{name: value for name, value in pending.items() if name not in unchanged})
            if unchanged:
                self.param.trigger(*unchanged)

    def cancel(self, *_):
        """Forget the pending changes."""
        self.param.update(pending={}, question="")

    def refuse(self, events):
        """Put the settings of ``events`` back: nothing reacts to them meanwhile (see :meth:`still`).

        In a served session the old values go back on the next tick of the event loop: set
        while the browser's change is being handled, they would not reach the widget, which
        would go on showing the refused value.
        """
        self._refused.update({event.name: event.new for event in events})

        def revert():
            # a yes that came first took its settings out of the refused ones: they stand
            events_left = [event for event in events if event.name in self._refused]
            self._reverting = True
            try:
                with self.unguarded():
                    self.param.update(
                        **{
                            event.name: event.old
                            for event in events_left
                            if getattr(self, event.name) is event.new or getattr(self, event.name) == event.new
                        }
                    )
            finally:
                self._reverting = False
                for event in events:
                    self._refused.pop(event.name, None)

        doc = pn.state.curdoc
        if doc is not None and doc.session_context is not None:
            pn.state.execute(revert, schedule=True)  # next tick, in this session's document
        else:
            revert()

    def still(self, events):
        """The events that change something: none while a change is put back, and only those
        whose new value is still the setting's value (a change refused or held back for a yes is not)."""
        if self._reverting:
            return []
        return [
            event
            for event in events
            if event.name not in self._refused
            and (getattr(self, event.name) is event.new or getattr(self, event.name) == event.new)
        ]

    def _check_schedule(self, *events):
        if self.burn_in + self.thin <= self.n_iter:
            return
        reason = (
            f"burn-in {self.burn_in:,} + thin {self.thin:,} exceeds {self.n_iter:,} iterations, so no sample "
            "would be saved: raise the iterations first (or lower the burn-in or thin)"
        )
        self.refuse(events)
        raise ValueError(f"{', '.join(event.name for event in events)} not changed: {reason}")

    @contextmanager
    def internal(self):
        """Changes made by the dashboard itself (declared values, the data's own N): not the
        person's own choices, and not reacted to one by one (``applied`` follows a declaration)."""
        self._declaring += 1
        try:
            with self.unguarded():
                yield
        finally:
            self._declaring -= 1

    @property
    def declaring(self):
        """True while declared settings are being put in force (the data store waits for ``applied``)."""
        return bool(self._declaring)

    def declare(self, values, *, keep=()):
        """Put ``values`` in force in one batch (except the names in ``keep``), then fire
        ``applied`` once: the one way a preset or a data source sets what it declares."""
        # Held: every widget, text and status this changes reaches a served page in one message, so the
        # page never shows a preset's text above another data set's settings
        with held():
            with self.internal():
                self.param.update(**{name: value for name, value in values.items() if name not in keep})
            self.param.trigger("applied")

    def _note_user_set(self, *events):
        if self._declaring or self._reverting:
            return
        self._user_set.update(event.name for event in self.still(events))

    def _apply_preset(self, *events):
        """Put every setting of the chosen preset in force (once its choice stands: asked first if it
        discards fits); the settings set by hand before are forgotten."""
        if self._declaring or not self.still(events) or not self.preset:
            return
        self._user_set.clear()
        self.declare(preset_values(self.preset))

    def _apply_source(self, *events):
        """A data source chosen by hand: its defaults, except for what the person set by hand."""
        if self._declaring or not self.still(events):
            return
        self.declare(source_defaults(self.source), keep=self._user_set - {"model"})

    def _leave_preset(self, *events):
        """A setting of the preset changed by hand: the settings are one's own now (its text no longer applies)."""
        if self._declaring or not self.preset or not self.still(events):
            return
        own = PRESETS[self.preset].settings
        if any(event.name in own and event.new != own[event.name] for event in events):
            with self.unguarded():
                self.preset = ""

    def _check_noise_level(self, *events):
        from lpviz.privacy import NEGLIGIBLE_ALPHA

        ratio, limit = self.epsilon / self.N, -np.log(NEGLIGIBLE_ALPHA)
        if ratio <= limit:
            return
        self.refuse(events)
        changes = ", ".join(f"{event.name} = {event.new:g}" for event in events)
        raise ValueError(
            f"{changes} refused: epsilon/N = {ratio:.3g} above {limit:.3g} noises a cell with probability "
            f"below {2 * NEGLIGIBLE_ALPHA:.0e}, so the release would be the true counts: raise N "
            "first (or lower epsilon)"
        )

    @property
    def source_spec(self):
        """The :class:`Source` of the current source."""
        return SOURCES[self.source]

    def reset_to_defaults(self, *_):
        """Back to the current source's defaults (asking first if that discards running fits); they
        count as the source's again, not as set by hand."""
        defaults = self.source_spec.defaults
        changed = {name: value for name, value in defaults.items() if getattr(self, name) != value}
        if changed:
            self.param.update(**changed)
        self._user_set -= set(defaults) - set(self.pending)

    def options_for(self, method_class):
        """The options of ``method_class`` as set here (``{option: value}``)."""
        return {
            option: getattr(self.method_options, option)
            for option in method_class.options
            if option in self.method_options.param
        }

    def redraw_noise(self, *_):
        """A fresh random noise seed: a new noised copy of the same data."""
        self.noise_seed = fresh_seed()
