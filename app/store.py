"""The data store: one session's data set, privacy settings, noised counts and chains.

Every view takes a :class:`DataStore` and reacts to its parameters
(Panel's ``structure_data_store`` pattern). The store owns the three
:class:`~app.runner.ChainRunner` objects and drains them on the event loop,
so two browser sessions never share state.
"""

import tempfile
import threading
from contextlib import ExitStack
from pathlib import Path

import numpy as np
import panel as pn
import param

from lpviz.datasets import HOLDOUTS, holdout_mask

from app.runner import BUFFER_LENGTH, METHODS, FitProblem, make_runners, trigger_buffers, warm_up_kernels

REPO = Path(__file__).resolve().parents[1]
DEFAULT_ENRON = REPO.parent / "shared" / "data" / "enron_sent_subset.tar.gz"
SOURCES = ("synthetic-topics", "synthetic-blocks", "enron-topics", "enron-network", "upload")
DRAIN_PERIOD_MS = 200
FIRST_ROWS_POLL_MS, FIRST_ROWS_POLLS = 20, 50  # right after Start
SLOW_SOURCES = ("enron-topics", "enron-network")  # built in a thread when served; the rest take milliseconds

# Switching source resets sizes to what suits it: Figure 3 and Figure 1 sizes
# for the synthetic sets, a dashboard-sized slice of Enron (the paper's
# 10,000 x 10,000 is a job for the CLI).
SOURCE_DEFAULTS = {
    "synthetic-topics": dict(n_docs=90, n_words=15, n_components=3),
    "synthetic-blocks": dict(size=20, n_components=5),
    "enron-topics": dict(n_docs=1000, n_words=1000, n_components=10),
    "enron-network": dict(min_count=100, n_components=5),
    "upload": dict(),
}
# Parameters that change the data set itself (the rest only change the noise).
DATA_PARAMS = {
    "synthetic-topics": ("n_docs", "n_words", "n_components", "seed"),
    "synthetic-blocks": ("size", "n_components", "seed"),
    "enron-topics": ("n_docs", "n_words", "seed", "path"),
    "enron-network": ("min_count", "path"),
    "upload": (),
}
NOISE_PARAMS = ("epsilon", "N", "heterogeneous", "alpha0", "concentration", "noise_seed",
                "holdout", "holdout_fraction", "holdout_actors")
FIT_PARAMS = ("n_iter", "burn_in", "thin", "trace_every")


def _served():
    """True inside a ``panel serve`` session (not Jupyter, not plain Python)."""
    doc = pn.state.curdoc
    return doc is not None and doc.session_context is not None


def build_data(source, *, n_docs=90, n_words=15, size=20, n_components=3, seed=0,
               path=None, min_count=100, upload=None):
    """Build the data set for ``source`` (runs in a worker thread when served)."""
    from lpviz import datasets

    if source == "synthetic-topics":
        return datasets.make_topics(n_docs=n_docs, n_words=n_words, n_topics=n_components,
                                    random_state=seed)
    if source == "synthetic-blocks":
        return datasets.make_blocks(n_actors=size, n_communities=n_components, random_state=seed)
    if source in ("enron-topics", "enron-network"):
        path = Path(path).expanduser() if path else DEFAULT_ENRON
        if not path.exists():
            raise ValueError(f"Enron data not found at {path}: give the path of "
                             "enron_sent_subset.tar.gz (or the CMU maildir tarball), "
                             "or press 'Download Enron'")
        if source == "enron-topics":
            return datasets.build_enron_topics(path, n_docs=n_docs, n_words=n_words, random_state=seed)
        return datasets.build_enron_network(path, min_count=min_count)
    if source == "upload":
        if upload is None:
            raise ValueError("no file uploaded yet: choose a file (edge list, .npz, .mtx, "
                             "UCI bag-of-words or dense CSV) with the upload button")
        return upload
    raise ValueError(f"unknown source {source!r}: choose one of {', '.join(SOURCES)}")




class DataStore(pn.viewable.Viewer):
    """One session's data, privacy settings, noised counts and chain runners.

    Read ``data`` (the :class:`~lpviz.datasets.CountData`, truth included
    when it is a :class:`~lpviz.datasets.SyntheticData`), ``Y_true``,
    ``Y_obs`` (noised), ``alpha`` (scalar or per row), ``mask`` (True =
    observed, None = all) and ``model``; ``runners`` maps each method to its
    :class:`~app.runner.ChainRunner`. Displaying the store shows its
    controls (data source, privacy, fit settings).
    """

    source = param.Selector(default="synthetic-topics", objects=list(SOURCES))
    path = param.String(default=str(DEFAULT_ENRON), doc="Enron tarball or maildir")
    n_docs = param.Integer(default=90, bounds=(2, 50_000), doc="documents (topics)")
    n_words = param.Integer(default=15, bounds=(2, 50_000), doc="vocabulary size (topics)")
    size = param.Integer(default=20, bounds=(2, 2_000), doc="actors (synthetic blocks)")
    min_count = param.Integer(default=100, bounds=(1, None), doc="keep actors with this many emails (Enron network)")
    n_components = param.Integer(default=3, bounds=(1, 500), doc="topics or communities")
    seed = param.Integer(default=0, bounds=(0, None), doc="seed of the data set")

    epsilon = param.Number(default=1.0, bounds=(0, None), inclusive_bounds=(False, True), softbounds=(0.05, 10))
    N = param.Number(default=1.0, bounds=(0, None), inclusive_bounds=(False, True), softbounds=(1, 50),
                     doc="precision: counts within N of each other are hard to tell apart")
    heterogeneous = param.Boolean(default=False, doc="one alpha per row, drawn from a Beta")
    alpha0 = param.Number(default=0.5, bounds=(0, 1), inclusive_bounds=(False, False),
                          doc="mean alpha of the heterogeneous noise")
    concentration = param.Number(default=10.0, bounds=(0, None), inclusive_bounds=(False, True))
    noise_seed = param.Integer(default=0, bounds=(0, None))
    holdout = param.Selector(default="none", objects=list(HOLDOUTS), doc="cells left out of the fit")
    holdout_fraction = param.Number(default=0.1, bounds=(0.01, 0.9))
    holdout_actors = param.Integer(default=3, bounds=(1, None))

    n_iter = param.Integer(default=6000, bounds=(1, None), doc="iterations per chain")
    burn_in = param.Integer(default=1000, bounds=(0, None))
    thin = param.Integer(default=25, bounds=(1, None))
    trace_every = param.Integer(default=1, bounds=(1, None), doc="stream every n-th iteration")
    chain_seed = param.Integer(default=0, bounds=(0, None))

    data = param.Parameter(default=None, doc="the current CountData / SyntheticData")
    Y_true = param.Parameter(default=None)
    Y_obs = param.Parameter(default=None)
    alpha = param.Parameter(default=None)
    mask = param.Parameter(default=None)
    model = param.Selector(default="topics", objects=["topics", "blocks"])
    loading = param.Boolean(default=False)
    error = param.String(default="")
    message = param.String(default="")

    def __init__(self, *, background=None, buffer_length=BUFFER_LENGTH, lockstep=True, **params):
        """``background``: build Enron data in a thread (default: only when served);
        ``lockstep``: keep the three running chains level (see :class:`~app.runner.Lockstep`)."""
        self._background = _served() if background is None else background
        self._applying_defaults = False
        self._source_switched = True
        self._upload = None
        self._build_generation = 0
        self._pending = []  # finished background builds, picked up by drain()
        self._pending_lock = threading.Lock()
        self._drain_callback = None
        self.runners = make_runners(buffer_length=buffer_length, lockstep=lockstep)
        super().__init__(**params)
        self._sync_fit_settings()
        self.param.watch(self._on_data_param, ["source", *sorted({p for ps in DATA_PARAMS.values() for p in ps})])
        self.param.watch(self._on_noise_param, list(NOISE_PARAMS))
        self.param.watch(lambda *events: self._sync_fit_settings(), list(FIT_PARAMS))
        self.param.watch(lambda *events: self._configure_runners(), ["chain_seed"])
        if _served():
            threading.Thread(target=warm_up_kernels, name="lpviz-warm-up", daemon=True).start()
            self.start_draining()
            pn.state.on_session_destroyed(self._on_session_destroyed)
        self.load()

    # ---- data ---------------------------------------------------------------------
    def load(self):
        """(Re)build the data set for the current source and noise it."""
        kwargs = dict(n_docs=self.n_docs, n_words=self.n_words, size=self.size,
                      n_components=self.n_components, seed=self.seed, path=self.path,
                      min_count=self.min_count, upload=self._upload)
        self._build_generation += 1
        generation = self._build_generation
        if not (self._background and self.source in SLOW_SOURCES):
            try:
                self._set_data(build_data(self.source, **kwargs))
            except Exception as exc:  # shown beside the controls; the previous data stay
                self.param.update(error=str(exc), loading=False)
            return
        self.param.update(loading=True, error="", message=f"building {self.source} ...")
        source = self.source

        def work():
            try:
                outcome = ("data", build_data(source, **kwargs))
            except Exception as exc:  # shown in the sidebar
                outcome = ("error", str(exc))
            with self._pending_lock:
                self._pending.append((generation, *outcome))

        threading.Thread(target=work, name="lpviz-data-build", daemon=True).start()

    def load_upload(self, contents, filename):
        """Read an uploaded file with :func:`lpviz.datasets.load_counts`."""
        from lpviz.datasets import load_counts

        if not contents:
            raise ValueError(f"the uploaded file {filename!r} is empty: choose a file with counts in it")
        suffix = "".join(Path(filename).suffixes) or ".txt"
        with tempfile.TemporaryDirectory() as tmp:
            tmp_path = Path(tmp) / f"upload{suffix}"
            tmp_path.write_bytes(contents)
            data = load_counts(tmp_path)
        data.source = filename  # not the temporary copy it was read from
        self._upload = data
        if self.source == "upload":
            self.load()
        else:
            self.source = "upload"

    def fetch_enron(self):
        """Download the Enron data (in a thread when served) and use it."""
        from lpviz.datasets import fetch_enron

        def work():
            try:
                outcome = ("path", str(fetch_enron()))
            except Exception as exc:
                outcome = ("error", f"download failed: {exc}")
            with self._pending_lock:
                self._pending.append((None, *outcome))

        self.param.update(loading=True, error="", message="downloading Enron ...")
        if self._background:
            threading.Thread(target=work, name="lpviz-enron-download", daemon=True).start()
        else:
            work()
            self._apply_pending()

    def _set_data(self, data):
        n_components = self.n_components
        factors = getattr(data, "factors", None) or {}
        if "phi" in factors:  # the truth fixes K (topics) or C (blocks)
            n_components = factors["phi"].shape[0]
        elif "pi" in factors:
            n_components = factors["pi"].shape[0]
        N = self.N
        if self._source_switched and "N" in data.info:  # Figure 1: N = the mean count
            N = float(data.info["N"])
        self._source_switched = False
        noised = self._noised(data, N)
        self.reset()  # results of the old data must not meet the new data in a view
        self._applying_defaults = True
        try:
            # one update, so every view reacting to any of these sees them all consistent
            self.param.update(data=data, model=data.model, n_components=n_components, N=N, **noised,
                              error="", loading=False,
                              message=f"{self.source if self.source != 'upload' else Path(data.source).name}: "
                                      f"{data.shape[0]:,} x {data.shape[1]:,}")
        finally:
            self._applying_defaults = False
        self._configure_runners()

    def _noised(self, data, N):
        """The noised release of ``data`` with the current privacy settings."""
        from lpviz.privacy import alpha_from, heterogeneous_alpha, privatize

        Y_true = data.dense()
        if self.heterogeneous:
            alpha = heterogeneous_alpha(Y_true.shape[0], self.alpha0, concentration=self.concentration,
                                        random_state=self.noise_seed)
        else:
            alpha = alpha_from(self.epsilon, N)
        Y_obs = privatize(Y_true, alpha=alpha, random_state=self.noise_seed)
        mask = holdout_mask(Y_true, data.model, self.holdout, fraction=self.holdout_fraction,
                            n_actors=self.holdout_actors, random_state=self.noise_seed)
        structural = data.info.get("mask")  # cells that do not exist (a network's self loops)
        if structural is not None:
            structural = np.asarray(structural, dtype=bool)
            Y_obs[~structural] = Y_true[~structural]  # nothing there to release
            mask = structural if mask is None else mask & structural
        return dict(Y_true=Y_true, Y_obs=Y_obs, alpha=alpha, mask=mask)

    def _noise(self):
        """Noise the current data again (privacy settings or noise seed changed)."""
        if self.data is None:
            return
        noised = self._noised(self.data, self.N)
        self.reset()
        self.param.update(**noised)
        self._configure_runners()

    def redraw_noise(self, *_):
        """Draw a fresh noised copy of the same data."""
        self.noise_seed += 1

    @property
    def truth(self):
        """The true rates when the data are synthetic, else None."""
        return getattr(self.data, "mu", None)

    @property
    def alpha_summary(self):
        """``eps/N`` and alpha in words, for the privacy panel."""
        if self.heterogeneous and self.alpha is not None:
            alpha = np.asarray(self.alpha)
            return (f"heterogeneous alpha per row: mean {alpha.mean():.3f}, "
                    f"range {alpha.min():.3f} - {alpha.max():.3f}")
        return f"eps/N = {self.epsilon / self.N:.3g}, alpha = exp(-eps/N) = {np.exp(-self.epsilon / self.N):.4f}"

    # ---- chains ---------------------------------------------------------------------
    def problem(self):
        """The :class:`FitProblem` for the current data and noise."""
        truth = self.truth
        return FitProblem(Y_obs=self.Y_obs, Y_true=self.Y_true, model=self.model,
                          n_components=self.n_components, alpha=self.alpha, mask=self.mask,
                          reference=self.Y_true if truth is None else truth,
                          reference_name="true counts" if truth is None else "true rates",
                          seed=self.chain_seed)

    def _configure_runners(self):
        problem = self.problem()
        for runner in self.runners.values():
            runner.configure(problem)

    def _sync_fit_settings(self):
        settings = {name: getattr(self, name) for name in FIT_PARAMS}
        for runner in self.runners.values():
            runner.param.update(**settings)

    def start(self, *_):
        """Start (or resume) all three chains."""
        self.start_draining()
        with self._batched():
            for runner in self.runners.values():
                runner.start()
        self._drain_first_rows_soon()

    def pause(self, *_):
        for runner in self.runners.values():
            runner.pause()

    def resume(self, *_):
        for runner in self.runners.values():
            runner.resume()

    def stop(self, *_):
        for runner in self.runners.values():
            runner.stop()

    def reset(self, *_):
        for runner in self.runners.values():
            runner.reset()

    @property
    def running(self):
        return any(r.status == "running" for r in self.runners.values())

    # ---- event loop -----------------------------------------------------------------
    def drain(self):
        """Deliver finished data builds and chain output; returns rows streamed."""
        self._apply_pending()
        if not any(runner.has_output for runner in self.runners.values()):
            return 0
        # One trigger for the three buffers, so each trace plot re-renders
        # once per drain, not once per method; the model graph is frozen only
        # then (leaving a freeze walks the whole document: a drain that only
        # moves progress counters would pay for it for nothing).
        with self._batched(freeze=False):
            streamed = [runner.drain(trigger=False) for runner in self.runners.values()]
            if any(streamed):
                with self._batched(hold=False):
                    trigger_buffers([runner.buffer for runner, rows in zip(self.runners.values(), streamed) if rows])
        return sum(streamed)

    @staticmethod
    def _batched(hold=True, freeze=True):
        """Hold the document's events and freeze its model graph: the browser
        gets one message and Bokeh recomputes the graph once (not once per
        HoloViews plot update, each of which walks the whole document)."""
        doc = pn.state.curdoc
        stack = ExitStack()
        if doc is not None:
            if hold:
                stack.enter_context(pn.io.hold())
            if freeze:
                stack.enter_context(doc.models.freeze())
        return stack

    def _drain_first_rows_soon(self):
        """Right after Start, drain every 20 ms until the first rows are out
        (for up to a second), instead of waiting for the next periodic drain."""
        if self._drain_callback is None or pn.state.curdoc is None:
            return

        def drain_first():
            if self.drain() or not self.running or callback.counter >= FIRST_ROWS_POLLS:
                callback.stop()

        callback = pn.state.add_periodic_callback(drain_first, period=FIRST_ROWS_POLL_MS,
                                                  count=FIRST_ROWS_POLLS)

    def start_draining(self):
        """Drain every 200 ms on this session's event loop (served or Jupyter)."""
        if self._drain_callback is None and pn.state.curdoc is not None:
            self._drain_callback = pn.state.add_periodic_callback(self.drain, period=DRAIN_PERIOD_MS)

    def close(self):
        """Stop the workers and the periodic drain (session end)."""
        for runner in self.runners.values():
            runner.stop()
        if self._drain_callback is not None:
            self._drain_callback.stop()
            self._drain_callback = None

    def _on_session_destroyed(self, session_context):
        self.close()

    def _apply_pending(self):
        with self._pending_lock:
            pending, self._pending = self._pending, []
        for generation, kind, payload in pending:
            if generation is not None and generation != self._build_generation:
                continue  # a newer build was asked for meanwhile
            if kind == "data":
                self._set_data(payload)
            elif kind == "path":
                self.param.update(loading=False, message=f"downloaded to {payload}")
                self.path = payload
            else:
                self.param.update(error=payload, loading=False, message="")

    # ---- reactions --------------------------------------------------------------------
    def _on_data_param(self, *events):
        if self._applying_defaults:
            return
        names = {event.name for event in events}
        if "source" in names:
            self._source_switched = True
            self._applying_defaults = True
            try:
                self.param.update(**SOURCE_DEFAULTS[self.source])
            finally:
                self._applying_defaults = False
        elif not names & set(DATA_PARAMS[self.source]):
            if "n_components" in names:  # same data, different model size
                self._configure_runners()
            return
        self.load()

    def _on_noise_param(self, *events):
        if not self._applying_defaults:  # _set_data noises new data itself
            self._noise()

    # ---- controls ---------------------------------------------------------------------
    def __panel__(self):
        return pn.Column(self.data_controls(), self.privacy_controls(), self.fit_controls(),
                         sizing_mode="stretch_width")

    def data_controls(self):
        source = pn.widgets.Select.from_param(self.param.source, name="Data")
        upload = pn.widgets.FileInput(accept=".csv,.tsv,.txt,.npz,.mtx,.gz,.edges")
        download = pn.widgets.Button(name="Download Enron", button_type="light")
        download.on_click(lambda event: self.fetch_enron())

        def on_upload(value):
            if value:
                try:
                    self.load_upload(value, upload.filename or "upload.txt")
                except (ValueError, TypeError, OSError) as exc:
                    self.error = str(exc)

        pn.bind(on_upload, upload.param.value, watch=True)

        @param.depends(self.param.source)
        def size_widgets(source):
            widgets = {
                "synthetic-topics": ["n_docs", "n_words", "n_components", "seed"],
                "synthetic-blocks": ["size", "n_components", "seed"],
                "enron-topics": ["n_docs", "n_words", "n_components", "seed"],
                "enron-network": ["min_count", "n_components"],
                "upload": ["n_components"],
            }[source]
            column = pn.Column(*[pn.widgets.IntInput.from_param(getattr(self.param, name)) for name in widgets],
                               sizing_mode="stretch_width")
            if source.startswith("enron"):
                column.insert(0, pn.widgets.TextInput.from_param(self.param.path, name="Enron file"))
                column.append(download)
            if source == "upload":
                column.insert(0, upload)
            return column

        status = pn.bind(self._status_pane, self.param.error, self.param.message, self.param.loading)
        return pn.Card(source, size_widgets, status, title="Data", collapsible=False,
                       sizing_mode="stretch_width")

    def _status_pane(self, error, message, loading):
        if error:
            return pn.pane.Alert(error, alert_type="danger", sizing_mode="stretch_width")
        return pn.Row(pn.indicators.LoadingSpinner(value=loading, size=20, visible=loading),
                      pn.pane.Markdown(message, margin=(0, 5)), sizing_mode="stretch_width")

    def privacy_controls(self):
        redraw = pn.widgets.Button(name="Redraw noise", button_type="primary")
        redraw.on_click(self.redraw_noise)

        @param.depends(self.param.heterogeneous)
        def noise_widgets(heterogeneous):
            if heterogeneous:
                return pn.Column(pn.widgets.FloatSlider.from_param(self.param.alpha0, step=0.01),
                                 pn.widgets.FloatInput.from_param(self.param.concentration),
                                 sizing_mode="stretch_width")
            return pn.Column(pn.widgets.FloatSlider.from_param(self.param.epsilon, step=0.05),
                             pn.widgets.FloatInput.from_param(self.param.N, step=1),
                             sizing_mode="stretch_width")

        summary = pn.bind(lambda *_: pn.pane.Markdown(self.alpha_summary),
                          self.param.epsilon, self.param.N, self.param.alpha)
        holdout = pn.widgets.Select.from_param(self.param.holdout, name="Held-out cells")
        return pn.Card(pn.widgets.Checkbox.from_param(self.param.heterogeneous, name="heterogeneous noise"),
                       noise_widgets, summary, holdout,
                       pn.widgets.IntInput.from_param(self.param.noise_seed), redraw,
                       title="Privacy", collapsible=False, sizing_mode="stretch_width")

    def fit_controls(self):
        return pn.Card(*[pn.widgets.IntInput.from_param(getattr(self.param, name))
                         for name in ("n_iter", "burn_in", "thin", "trace_every", "chain_seed")],
                       title="Fit settings", collapsed=True, sizing_mode="stretch_width")


__all__ = ["DataStore", "METHODS", "build_data"]
