"""Central against local privacy on the loaded data: private online LDA (VIPS) beside the session's fits.

Two answers to "a private topic model of these documents" side by side:

- **central DP** (:class:`lpviz.central.PrivateLDA`, Park et al. 2016 / VIPS):
  a trusted curator holds the true counts and runs stochastic variational LDA
  whose minibatch statistics get Gaussian noise; the topics are
  ``(epsilon, delta)``-DP for one whole document (accounted by
  :mod:`lpviz.accounting`, dp-accounting's RDP and PLD accountants);
- **local privacy** (the session's chains, :mod:`lpviz.dashboard.session.fits`): every owner
  noised their own counts before anyone saw them; ``(N, epsilon)``-limited-
  precision local privacy per document, nobody trusted.

The central fit needs the true counts (``fits.data.truth``): synthetic data
and raw Enron have them; an uploaded release does not, and the view says
why nothing can run. It runs in a worker thread (:meth:`CentralView.fit`),
reports its steps through :class:`PrivateLDA`'s ``callback`` (which is also
how Cancel stops it) and hands everything to the event loop through a queue
drained every 200 ms (:meth:`CentralView.drain`), as :mod:`lpviz.dashboard.session.fits` does.
Every number shown is :func:`lpviz.metrics.score`: of
:func:`lpviz.central.posterior` for the central fit, the runners' own for the
local fits. Topics are lined up with :func:`lpviz.metrics.align_topics`.
"""

import math
import queue
import threading

import numpy as np
import pandas as pd
import panel as pn
import param

from lpviz import metrics
from lpviz.dashboard.serving.throttle import VIEW_SECONDS, Periodic, messages
from lpviz.dashboard.session.datastore import served
from lpviz.dashboard.session.fits import Fits, follow_results, model_shows
from lpviz.dashboard.views.plots import table_cell

STATUSES = ("idle", "calibrating", "running", "scoring", "done", "cancelled", "error")
BUSY_STATUSES = ("calibrating", "running", "scoring")
DRAIN_PERIOD_MS = 200
CENTRAL_LABEL = "central DP: private online LDA (VIPS)"
CENTRAL_TRUST = "central: the curator sees the true counts and is trusted"
LOCAL_TRUST = "local: nobody is trusted (each owner noised their own counts)"
NONPRIVATE_TRUST = "none: fits the true counts (no privacy; the reference)"
MAE_NOT_DEFINED = (
    "n/a: only the topics are released; a document's rates need its topic proportions, which the "
    "curator computes from the true counts and the guarantee does not cover"
)
# the scores of lpviz.metrics.score shown per approach, in this order
SCORES = ("npmi", "umass", "topic_distance", "mae")
TABLE_COLUMNS = ("approach", "privacy unit and guarantee", "trust", *(metrics.SCORE_LABELS[key] for key in SCORES))
TOP_WORDS = 8
# Steps a dashboard fit may plan: each is a noisy release the accountant composes (the PLD
# composition of the epsilon after every step grows with their number), and the paper's runs
# had tens of steps.
MAX_STEPS = 10_000


class Cancelled(Exception):
    """Raised in the worker by PrivateLDA's callback when Cancel was pressed."""


def local_guarantee(release):
    """The local guarantee of ``release`` in words: its (N, epsilon) per document, or its per-row noise."""
    if np.ndim(release.alpha):
        per_row = -np.log(np.asarray(release.alpha))
        return (
            f"local: (N, epsilon)-limited-precision local privacy per document, each document at its own "
            f"eps/N = -ln alpha_d ({per_row.min():.3g} to {per_row.max():.3g})"
        )
    if release.epsilon is not None and release.N is not None:
        return (
            f"local: (N={release.N:g}, epsilon={release.epsilon:g})-limited-precision local privacy per "
            f"document (eps/N = {release.epsilon / release.N:.3g})"
        )
    return (
        f"local: (N, epsilon)-limited-precision local privacy per document, eps/N = -ln alpha = "
        f"{-math.log(release.alpha):.3g}"
    )


def central_guarantee(result):
    """The central guarantee of a finished fit in words: the epsilon spent under both accountants."""
    if result["noise_multiplier"] == 0:
        return "none: noise_multiplier = 0 (plain online LDA on the true counts)"
    return (
        f"central: (epsilon, delta)-DP per document; spent epsilon {result['epsilon_pld']:.3g} (PLD) / "
        f"{result['epsilon_rdp']:.3g} (RDP) at delta {result['delta']:g}"
    )


def fit_central(Y, truth, n_components, options, random_state, progress=None):
    """Fit :class:`lpviz.central.PrivateLDA` to the true counts ``Y`` and score it (runs in any thread).

    ``options``: PrivateLDA's parameters (``epsilon`` or ``noise_multiplier``,
    ``delta``, ``batch_size``, ...); ``progress``: its ``callback``. Returns a
    dict: ``score`` (:func:`lpviz.metrics.score` of
    :func:`lpviz.central.posterior`), ``phi`` (the K x V topics, rows summing to 1),
    ``epsilon_rdp``/``epsilon_pld`` (:func:`lpviz.central.epsilon_spent`),
    ``delta``, ``noise_multiplier``, ``sampling_rate``, ``batch_size``,
    ``n_steps``, ``clipped_share``, ``seconds`` (the steps' wall time).
    """
    from lpviz.central import PrivateLDA, epsilon_spent
    from lpviz.central import posterior as central_posterior

    model = PrivateLDA(n_components, random_state=random_state, **options).fit(Y, callback=progress)
    fit = central_posterior(model, Y)
    batches = model.trace_["n_documents"].to_numpy()
    return dict(
        score=metrics.score(fit, None, truth),
        phi=fit.model_instance.topics(fit.best),
        epsilon_rdp=epsilon_spent(model, "rdp"),
        epsilon_pld=epsilon_spent(model, "pld"),
        delta=model.delta_,
        noise_multiplier=model.noise_multiplier_,
        sampling_rate=model.sampling_rate_,
        batch_size=int(options["batch_size"]),
        n_steps=int(model.n_steps_),
        clipped_share=float(model.trace_["n_clipped"].sum() / max(batches.sum(), 1)),
        seconds=float(model.trace_["seconds"].sum()),
        n_components=int(n_components),
    )


class CentralView(pn.viewable.Viewer):
    """Fit the central-DP baseline on the session's true counts and compare it with the local fits.

    Parameters
    ----------
    fits : Fits
        The session: its data (true counts, vocabulary, release) and its local fits.
    """

    fits = param.ClassSelector(class_=Fits)
    budget: param.Selector = param.Selector(
        default="epsilon",
        objects=["epsilon", "noise_multiplier"],
        doc="calibrate the noise to epsilon, or fix the noise multiplier and report epsilon",
    )
    epsilon = param.Number(default=1.0, bounds=(0.01, 100), doc="central epsilon of the whole fit, per document")
    delta = param.Number(default=1e-5, bounds=(1e-12, 0.1), doc="delta of the guarantee")
    noise_multiplier = param.Number(
        default=1.0, bounds=(0, 1000), doc="noise std / sensitivity (0: no noise, plain online LDA on the true counts)"
    )
    sampling_rate = param.Number(
        default=0.1, bounds=(0.001, 1.0), doc="q: each document joins each minibatch with this probability"
    )
    n_epochs = param.Integer(default=5, bounds=(1, 1000), doc="expected passes over the documents")
    clip = param.Number(
        default=0.1,
        bounds=(0.001, 1.0),
        doc="each document's statistic is clipped to clip x doc_length (the sensitivity)",
    )
    doc_length = param.Number(
        default=500.0,
        bounds=(1, None),
        doc="N of the sensitivity bound: a public document length, not read from the data",
    )
    accountant: param.Selector = param.Selector(
        default="pld", objects=["pld", "rdp"], doc="accountant the noise is calibrated with"
    )

    status: param.Selector = param.Selector(default="idle", objects=list(STATUSES))
    step = param.Integer(default=0, bounds=(0, None))
    n_steps = param.Integer(default=0, bounds=(0, None))
    error = param.String(default="")
    result = param.Dict(default=None, allow_None=True, doc="the central fit's numbers (see fit_central)")
    table = param.DataFrame(
        default=pd.DataFrame(columns=list(TABLE_COLUMNS)),
        doc="one row per approach: its guarantee, trust model and lpviz.metrics.score numbers",
    )
    topic_words = param.DataFrame(default=pd.DataFrame(), doc="top words of the central and private topics, aligned")

    def __init__(self, **params):
        super().__init__(**params)
        self._queue = queue.SimpleQueue()
        self._generation = 0
        self._thread = None
        self._cancel = threading.Event()
        self._draining = Periodic(self.drain, DRAIN_PERIOD_MS)
        settings = self.fits.settings
        self._follow_session_level()
        settings.param.watch(lambda *events: self._follow_session_level(), ["epsilon", "N"])
        self.fits.data.param.watch(lambda *events: self.reset(), ["release", "truth", "model"])
        settings.param.watch(lambda *events: settings.still(events) and self.reset(), ["n_components"])
        follow_results(self.fits, lambda runner: self.refresh(), VIEW_SECONDS)
        self.param.watch(lambda *events: self.refresh(), ["result"])
        if served():
            pn.state.on_session_destroyed(lambda session_context: self.cancel())
        self.refresh()

    def _follow_session_level(self):
        """Central epsilon = the session's eps/N (N = 1 token: each model spends it on its own unit)."""
        settings = self.fits.settings
        level = settings.epsilon / settings.N
        self.epsilon = min(max(level, self.param.epsilon.bounds[0]), self.param.epsilon.bounds[1])

    # ---- what can run ---------------------------------------------------------------------
    @property
    def unavailable_reason(self):
        """Why the central model cannot run on the loaded data ('' when it can)."""
        data = self.fits.data
        if data.release is None:
            return "No data yet."
        if not model_shows(data.model, "topics"):
            return (
                f"The current data are fitted with the {data.model} model (a sender x recipient network). The "
                "central baseline, VIPS (private online LDA), is a topic model for documents x words: there "
                "is nothing to compare it with here. Choose a documents x words source (synthetic topics or "
                "Enron topics) to see central against local privacy."
            )
        if data.truth is None:
            return (
                "This release came without its true counts: it is already noised, and no true counts exist on "
                "this server. Central DP needs a trusted curator holding the true documents (the central "
                "model fits them and noises only its statistics), so the central model cannot run here. The "
                "local fits (Fits tab) need nothing but the release: that is the point of local privacy."
            )
        return ""

    def options(self):
        """PrivateLDA's parameters from the widgets and the data size (the batch size from the sampling rate)."""
        n_docs = self.fits.data.truth.Y.shape[0]
        batch_size = min(n_docs, max(1, round(self.sampling_rate * n_docs)))
        budget = {"epsilon": self.epsilon} if self.budget == "epsilon" else {"noise_multiplier": self.noise_multiplier}
        return dict(
            budget,
            delta=self.delta,
            batch_size=batch_size,
            n_epochs=self.n_epochs,
            clip=self.clip,
            doc_length=self.doc_length,
            accountant=self.accountant,
        )

    # ---- control (event loop) -------------------------------------------------------------
    @property
    def running(self):
        return self.status in BUSY_STATUSES

    def fit(self, *_):
        """Start the central fit in a worker thread (refused, with the reason, when it cannot run
        or would not fit this session's share of the server's memory)."""
        from lpviz.dashboard.session.memory import check_central

        if self.running:
            return
        reason = self.unavailable_reason
        if reason:
            self.param.update(status="error", error=reason)
            return
        data, settings = self.fits.data, self.fits.settings
        shape = data.truth.Y.shape
        options = self.options()
        steps = self.n_epochs * math.ceil(shape[0] / options["batch_size"])
        if steps > MAX_STEPS:
            self.param.update(
                status="error",
                error=(
                    f"{self.n_epochs:,} epochs of batches of {options['batch_size']:,} of {shape[0]:,} documents are "
                    f"{steps:,} steps; the dashboard runs at most {MAX_STEPS:,}: raise the sampling rate or lower the "
                    "epochs"
                ),
            )
            raise ValueError(self.error)
        try:
            check_central(
                shape,
                f"{shape[0]:,} x {shape[1]:,} true counts",
                data.model,
                settings.n_components,
                list(self.fits.active),
            )
        except ValueError as exc:
            self.param.update(status="error", error=str(exc))
            raise
        self._generation += 1
        self._cancel = threading.Event()
        args = (self._generation, data.truth, settings.n_components, options, settings.chain_seed, self._cancel)
        self._thread = threading.Thread(target=self._work, args=args, name="lpviz-central", daemon=True)
        self.param.update(status="calibrating", step=0, n_steps=0, error="", result=None)
        self._thread.start()
        self._draining.start()

    def cancel(self, *_):
        """Stop the central fit after its current step (or once its noise is calibrated)."""
        self._cancel.set()

    def reset(self):
        """Forget the central fit (new data): a running one is cancelled and whatever it sends ignored."""
        self._cancel.set()
        self._generation += 1
        self.param.update(status="idle", step=0, n_steps=0, error="", result=None)
        self.refresh()

    def join(self, timeout=None):
        """Wait for the worker thread (tests, session teardown)."""
        if self._thread is not None:
            self._thread.join(timeout)
            return not self._thread.is_alive()
        return True

    # ---- worker thread ----------------------------------------------------------------------
    def _work(self, generation, truth, n_components, options, seed, cancel):
        post = lambda kind, payload=None: self._queue.put((generation, kind, payload))  # noqa: E731

        def progress(step, n_steps):
            if cancel.is_set():
                raise Cancelled
            post("progress", (step, n_steps))

        try:
            post("result", fit_central(truth.Y, truth, n_components, options, seed, progress))
        except Cancelled:
            post("cancelled")
        except Exception as exc:  # shown in the view instead of dying silently in a thread
            post("error", f"{type(exc).__name__}: {exc}")

    # ---- event loop ---------------------------------------------------------------------------
    def drain(self):
        """Apply what the worker queued (progress, the result, the end); stops draining once it ended."""
        updates = {}
        for kind, payload in messages(self._queue, self._generation):
            if kind == "progress":
                step, n_steps = payload
                updates.update(step=step, n_steps=n_steps, status="scoring" if step == n_steps else "running")
            elif kind == "result":
                updates.update(result=payload, status="done", step=payload["n_steps"])
            elif kind == "cancelled":
                updates["status"] = "cancelled"
            elif kind == "error":
                updates.update(status="error", error=payload)
        if self.running and self._cancel.is_set() and not (self._thread and self._thread.is_alive()):
            updates.setdefault("status", "cancelled")
        if "n_steps" in updates:  # the bar's maximum before its value
            self.n_steps = updates.pop("n_steps")
        if updates:
            self.param.update(**updates)
        if not self.running:
            self._draining.stop()

    # ---- the comparison ---------------------------------------------------------------------
    def refresh(self):
        """Rebuild the table and the aligned top words from the central result and the runners' results."""
        if self.unavailable_reason:
            self.param.update(table=self.param.table.default, topic_words=self.param.topic_words.default)
            return
        release = self.fits.data.release
        rows = []
        if self.result is not None:
            row = {
                "approach": CENTRAL_LABEL,
                "privacy unit and guarantee": central_guarantee(self.result),
                "trust": CENTRAL_TRUST,
            }
            row.update({metrics.SCORE_LABELS[key]: self.result["score"].get(key) for key in SCORES})
            row[metrics.SCORE_LABELS["mae"]] = MAE_NOT_DEFINED
            rows.append(row)
        for runner in self.fits.runners.values():
            scores = (runner.result or {}).get("score")
            if not scores or scores.get("samples") == 0:  # a chain still in its burn-in has no topics to score
                continue
            own_truth = runner.method_class.uses_truth
            row = {
                "approach": f"local: {runner.label}" if not own_truth else runner.label,
                "privacy unit and guarantee": "none (the true counts)" if own_truth else local_guarantee(release),
                "trust": NONPRIVATE_TRUST if own_truth else LOCAL_TRUST,
            }
            row.update({metrics.SCORE_LABELS[key]: scores.get(key) for key in SCORES})
            rows.append(row)
        table = pd.DataFrame(rows, columns=list(TABLE_COLUMNS))
        if not table.empty and table[metrics.SCORE_LABELS["topic_distance"]].isna().all():
            table = table.drop(columns=metrics.SCORE_LABELS["topic_distance"])  # no true topics (Enron)
        self.param.update(table=table, topic_words=self._topic_words())

    def private_runner(self):
        """The local fit that models the noise (the private MCMC: its method needs the noise level), or None."""
        return next(
            (
                runner
                for runner in self.fits.runners.values()
                if runner.method_class.needs_alpha and not runner.method_class.uses_truth
            ),
            None,
        )

    def private_topics(self):
        """The private MCMC's topics (its best saved sample), or None before its first saved sample."""
        runner = self.private_runner()
        result = (runner.result or {}) if runner is not None else {}
        if not result.get("best"):
            return None
        return result["model"].topics(result["best"])

    def _topic_words(self):
        if self.result is None:
            return self.param.topic_words.default
        vocab = self.fits.data.data.col_labels or None
        vocab = list(vocab) if vocab is not None else None
        central = self.result["phi"]
        private = self.private_topics()
        n_top = min(TOP_WORDS, central.shape[1])

        def words(topics):
            return [", ".join(map(str, row)) for row in metrics.top_words(topics, n=n_top, vocab=vocab)]

        if private is None or private.shape[1] != central.shape[1] or len(central) < len(private):
            return pd.DataFrame({"topic": np.arange(1, len(central) + 1), "central DP": words(central)})
        order = metrics.align_topics(central, private)  # central[order] lines up with private, row by row
        label = f"local: {self.private_runner().label}"
        return pd.DataFrame(
            {
                "topic": np.arange(1, len(private) + 1),
                label: words(private),
                "central DP (aligned)": words(central[order]),
            }
        )

    # ---- display ------------------------------------------------------------------------------
    def figures(self):
        """No figures to export: this view is tables (the export view asks every view)."""
        return {}

    @param.depends("status", "step", "n_steps", "error", "result")
    def progress_text(self):
        if self.status == "idle":
            text = "Central model not fitted yet: press **Fit central model**."
        elif self.status == "calibrating":
            text = "Calibrating the noise to the budget (dp-accounting) ..."
        elif self.status in ("running", "scoring"):
            text = f"Central model: step {self.step:,} / {self.n_steps:,}" + (
                ", scoring ..." if self.status == "scoring" else ""
            )
        elif self.status == "done":
            result = self.result
            text = (
                f"Central model done: {result['n_steps']:,} steps of expected batch {result['batch_size']:,} "
                f"(sampling rate {result['sampling_rate']:.3g}), noise multiplier "
                f"{result['noise_multiplier']:.3g}, {result['clipped_share']:.0%} of the batched documents "
                f"clipped, {result['seconds']:.2f} s. {central_guarantee(result)}."
            )
        elif self.status == "cancelled":
            text = "Central fit cancelled."
        else:
            text = f"Central fit failed: {self.error}"
        return pn.pane.Markdown(text, sizing_mode="stretch_width", name="central-progress")

    @param.depends("fits.data.release", "fits.data.truth", "fits.data.model", "table")
    def explanation(self):
        reason = self.unavailable_reason
        if reason:
            return pn.pane.Markdown(reason, sizing_mode="stretch_width", name="central-explanation")
        return pn.pane.Markdown(
            "**Central DP** (this tab): a trusted curator holds the true counts and runs online LDA "
            "whose minibatch statistics get Gaussian noise; the topics are (epsilon, delta)-DP for one whole "
            "document. **Local privacy** (the Fits tab): every owner noised their own counts; the fits are "
            "(N, epsilon)-limited-precision locally private per document and nobody is trusted. The central "
            "epsilon starts at the session's eps/N (N = 1 token: each model spends the same number on its own "
            "unit), so at the same number the central guarantee covers a whole document, the local one N tokens. "
            "Scores: NPMI and UMass of the top-10 words against the true counts (higher is better), from "
            "lpviz.metrics.score for every row.",
            sizing_mode="stretch_width",
            name="central-explanation",
        )

    def controls(self):
        widgets = [
            pn.widgets.RadioButtonGroup.from_param(
                self.param.budget, options={"epsilon": "epsilon", "noise multiplier": "noise_multiplier"}, width=260
            ),
            pn.widgets.FloatInput.from_param(
                self.param.epsilon,
                name="central epsilon",
                step=0.1,
                width=130,
                visible=self.param.budget.rx() == "epsilon",
            ),
            pn.widgets.FloatInput.from_param(
                self.param.noise_multiplier,
                name="noise multiplier",
                step=0.1,
                width=130,
                visible=self.param.budget.rx() == "noise_multiplier",
            ),
            pn.widgets.FloatInput.from_param(self.param.delta, name="delta", width=110),
            pn.widgets.FloatInput.from_param(self.param.sampling_rate, name="sampling rate q", step=0.05, width=120),
            pn.widgets.IntInput.from_param(self.param.n_epochs, name="epochs", width=90),
            pn.widgets.FloatInput.from_param(self.param.clip, name="clip", step=0.05, width=90),
            pn.widgets.FloatInput.from_param(self.param.doc_length, name="doc length N", width=110),
            pn.widgets.Select.from_param(self.param.accountant, name="accountant", width=90),
        ]
        fit = pn.widgets.Button(
            label="Fit central model", color="success", width=150, disabled=self.param.status.rx().rx.in_(BUSY_STATUSES)
        )
        fit.on_click(self.fit)
        cancel = pn.widgets.Button(
            label="Cancel", color="danger", width=90, disabled=self.param.status.rx().rx.in_(BUSY_STATUSES).rx.not_()
        )
        cancel.on_click(self.cancel)
        bar = pn.indicators.Progress(
            value=self.param.step,
            max=pn.bind(lambda n: max(n, 1), self.param.n_steps),
            width=200,
            bar_color="primary",
            active=self.param.status.rx() == "calibrating",
            visible=self.param.status.rx().rx.in_(BUSY_STATUSES),
        )
        return pn.Column(
            pn.FlexBox(*widgets, sizing_mode="stretch_width"),
            pn.FlexBox(fit, cancel, bar, self.progress_text, sizing_mode="stretch_width"),  # wraps on a phone
            sizing_mode="stretch_width",
        )

    def __panel__(self):
        available = pn.bind(
            lambda *_: not self.unavailable_reason,
            self.fits.data.param.release,
            self.fits.data.param.truth,
            self.fits.data.param.model,
        )
        table = pn.pane.HTML(pn.bind(table_html, self.param.table), sizing_mode="stretch_width", name="central-table")
        words = pn.pane.DataFrame(
            self.param.topic_words, index=False, sizing_mode="stretch_width", name="central-topics"
        )
        body = pn.Column(
            self.controls(),
            table,
            pn.pane.Markdown("### Top words: central topics beside the private MCMC's (Hungarian-aligned)"),
            words,
            visible=available,
            sizing_mode="stretch_width",
        )
        return pn.Column(self.explanation, body, sizing_mode="stretch_width")


def table_html(frame):
    """The comparison table as HTML (every number as lpviz.metrics.score gave it, four digits)."""
    if frame.empty:
        return (
            "<p><i>No results yet: press <b>Fit central model</b> here and <b>Start</b> on the Fits tab; "
            "a local fit gets a row with its first saved sample.</i></p>"
        )
    head = "".join(f"<th>{column}</th>" for column in frame.columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{table_cell(value)}</td>" for value in row) + "</tr>"
        for row in frame.itertuples(index=False)
    )
    return f"<table class='central-vs-local'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
