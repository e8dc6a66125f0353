"""One session's data: the data set, the release an analyst would hold, and the truth beside it.

Everything is derived through the library from the :class:`~lpviz.dashboard.session.settings.Settings`:
the data set with :func:`lpviz.datasets.load_data` (or
:func:`~lpviz.datasets.load_counts` for an upload), the held-out cells with
:func:`~lpviz.datasets.holdout_mask`, the release with
:meth:`CountData.privatize <lpviz.datasets.CountData.privatize>` (a seeded
simulation: the dashboard holds the truth), the truth with
:meth:`CountData.truth <lpviz.datasets.CountData.truth>`.

When served, data are built and noised in a worker thread; the result is
handed over on the event loop by :meth:`DataStore.poll` (the session's
drain calls it, and shows the time the work has taken so far), so no user
waits on another's build. Counts far beyond event counts are refused with
the reason (:func:`check_counts`).

Server-side paths are read only inside the allow-listed data folders
(:func:`allowed_folders`); the Enron download runs only when the server
allows it (``LPVIZ_ALLOW_DOWNLOADS=1``).
"""

import math
import os
import re
import tempfile
import threading
import time
from pathlib import Path, PurePath

import numpy as np
import panel as pn
import param
import scipy.sparse as sp

from lpviz.dashboard.session.memory import check_session
from lpviz.dashboard.session.settings import NOISE_PARAMETERS, SOURCES, Settings

ALLOW_DOWNLOADS_ENV = "LPVIZ_ALLOW_DOWNLOADS"
DATA_FOLDERS_ENV = "LPVIZ_APP_DATA_FOLDERS"
DATA_PARAMETERS = tuple(sorted({name for source in SOURCES.values() for name in source.parameters}))
# Counts far beyond event counts (see check_counts).
MAX_CELL_COUNT = 1_000_000
MAX_TOTAL_COUNT = 100_000_000
HELDOUT_PARAMETERS = {"holdout", "holdout_fraction", "holdout_actors"}
# A page's first data set, generated (no file read) and known before it is built to hold at most this
# many cells, is built and noised at once, on the event loop (the default's 90 x 15: 4 ms; 300 x 100:
# 6 ms), not in a thread: the page is then drawn once, with the data. Built in a thread, the page was
# drawn without them and its views again when they arrived: half of a served page open's server CPU
# (0.88 -> 0.41 s a page, 15 opened at once; a class of 30 opening together, issue 56).
OPENING_INLINE_CELLS = 50_000


def served():
    """True inside a ``panel serve`` session (not Jupyter, not plain Python)."""
    doc = pn.state.curdoc
    return doc is not None and doc.session_context is not None


def allowed_folders():
    """Folders whose files the dashboard may read on the server.

    ``LPVIZ_APP_DATA_FOLDERS`` (folders separated by ``os.pathsep``) when
    set, else the data cache folder and ``../shared/data`` beside the repository.
    """
    from lpviz.dashboard.session.settings import DEFAULT_ENRON
    from lpviz.datasets.cache import default_cache_dir

    text = os.environ.get(DATA_FOLDERS_ENV, "").strip()
    folders = (
        [Path(p) for p in text.split(os.pathsep) if p.strip()] if text else [default_cache_dir(), DEFAULT_ENRON.parent]
    )
    return [folder.expanduser().resolve() for folder in folders]


def checked_path(text):
    """``text`` as a path inside an allowed folder, or a ValueError saying where files may be
    (and what is wrong with a path that has a NUL byte, is too long, or names a FIFO or a device)."""
    from lpviz._files import check_input_path, check_path_text

    check_path_text(text)
    path = Path(text).expanduser().resolve()
    folders = allowed_folders()
    if not any(path == folder or folder in path.parents for folder in folders):
        raise ValueError(
            f"the dashboard reads data files only from {' or '.join(map(str, folders))} "
            f"(the server's allow-list, {DATA_FOLDERS_ENV}); put the file there or upload it"
        )
    fix = (
        "give the path of enron_sent_subset.tar.gz (or the CMU maildir tarball) in an allowed folder, or upload a file"
    )
    try:
        return check_input_path(path, what="data file", fix=fix, folder_ok=True)
    except FileNotFoundError:
        raise ValueError(f"no data at {path}: {fix}") from None
    except OSError as error:  # shown in the session's error box like any other refusal
        raise ValueError(str(error)) from None


def downloads_allowed():
    return os.environ.get(ALLOW_DOWNLOADS_ENV, "").strip() == "1"


def check_counts(Y, name):
    """Refuse counts far beyond what the models are for (every count is allocated each iteration)."""
    values = np.abs(Y.data if sp.issparse(Y) else np.asarray(Y))
    largest, total = (int(values.max()), int(values.sum())) if values.size else (0, 0)
    if largest > MAX_CELL_COUNT or total > MAX_TOTAL_COUNT:
        raise ValueError(
            f"{name or 'these data'}: a cell holds {largest:,} counts and all cells {total:,}; the dashboard "
            f"fits up to {MAX_CELL_COUNT:,} per cell and {MAX_TOTAL_COUNT:,} in all. Poisson factorization "
            "allocates every count to a component in every iteration, so counts like these would take minutes "
            "to hours per iteration: they are not event counts of the kind the models are for. Rescale or "
            "aggregate them (or fit them with `lpviz fit`, which warns)"
        )


def resolve_model(choice, kind):
    """The model a session fits to data of ``kind``: ``choice`` when it is a registered model that fits
    that kind (:func:`lpviz.models.fitting`), else the kind's default model."""
    from lpviz import models

    fitting = models.fitting(kind)
    return choice if choice in fitting else fitting[0]


def derive(data, plan):
    """The release, truth and model of ``data`` under ``plan`` (the privacy, held-out and fit settings).

    Runs in any thread. Checks the session's memory first (the dense truth,
    release and chains), then the counts. Returns a dict with ``data``,
    ``release``, ``truth``, ``model`` and ``N`` (the data's own N for Figure 1).
    """
    from lpviz.datasets import holdout_mask
    from lpviz.privacy import heterogeneous_alpha
    from lpviz.release import Release

    model = resolve_model(plan["model"], data.kind)
    check_session(
        data.shape,
        f"{data.name or 'the data'}: {' x '.join(f'{n:,}' for n in data.shape)} counts",
        model,
        plan["n_components"],
        plan["methods"],
        fix="Choose a smaller data set.",
    )
    if isinstance(data, Release):  # an uploaded release: its noise is what it is, no truth comes with it
        check_counts(data.Y_obs, data.name)
        observed = holdout_mask(
            data.Y_obs,
            data.kind,
            plan["holdout"],
            fraction=plan["holdout_fraction"],
            n_actors=plan["holdout_actors"],
            random_state=plan["noise_seed"],
        )
        release = data.with_heldout(None if observed is None else ~observed)
        return dict(data=data, release=release, truth=None, model=model, N=data.N or plan["N"])
    check_counts(data.Y, data.name)
    N = max(1.0, float(data.info["N"])) if plan["N_from_data"] and "N" in data.info else plan["N"]
    truth = data.truth()
    observed = holdout_mask(
        truth.Y,
        data.kind,
        plan["holdout"],
        fraction=plan["holdout_fraction"],
        n_actors=plan["holdout_actors"],
        random_state=plan["noise_seed"],
    )
    heldout = None if observed is None else ~observed
    if plan["heterogeneous"]:
        level = dict(
            alpha=heterogeneous_alpha(
                data.shape[0], plan["alpha0"], plan["concentration"], random_state=plan["noise_seed"]
            )
        )
    else:
        level = dict(epsilon=plan["epsilon"], N=N)
    # seeded: a simulation by whoever holds the truth (the release says so)
    release = data.privatize(**level, heldout=heldout, random_state=plan["noise_seed"])
    return dict(data=data, release=release, truth=truth, model=model, N=N)


_UPLOAD_SUFFIXES = re.compile(r"((?:\.[A-Za-z0-9]{1,8}){1,2})$")


def _upload_suffix(name):
    """The upload's suffixes (``.csv.gz``), what the readers go by; nothing else of a browser's file name."""
    match = _UPLOAD_SUFFIXES.search(name)
    return match.group(1).lower() if match else ".txt"


def _holds_release(path):
    """True for an .npz with noised counts ``Y_obs`` (a release); False for anything else, even unreadable."""
    from lpviz._files import open_archive

    try:
        with open_archive(path) as archive:
            return "Y_obs" in archive
    except (ValueError, OSError):
        return False  # load_counts names the problem


def _upload_message(error, tmp_path, tmp, name):
    """One line for the session: the user's file named, never the server's copy."""
    from lpviz._files import describe_os_error, is_one_line

    if isinstance(error, MemoryError):
        text = f"{name}: reading it ran out of memory on the server; upload a smaller file"
    elif isinstance(error, OSError) and not is_one_line(error):
        text = describe_os_error(error, name)
    elif isinstance(error, (ValueError, TypeError, OSError)):
        text = str(error)
    else:  # a reader's own failure: still the session's message, with what it was
        text = f"{name}: could not be read ({type(error).__name__}: {str(error)[:200]}); check the file"
    text = text.replace(str(tmp_path), name).replace(str(tmp), "")
    return " ".join(text.split())


class DataStore(param.Parameterized):
    """The data set, the release and the truth of one session, derived from its settings.

    Read ``data`` (:class:`~lpviz.datasets.CountData`), ``release``
    (:class:`~lpviz.release.Release`: the noised counts, alpha, held-out
    cells, structural zeros), ``truth`` (:class:`~lpviz.release.Truth`) and
    ``model`` (the registry name of the model for the data's kind).
    """

    settings = param.ClassSelector(class_=Settings, constant=True)
    data = param.Parameter(default=None, doc="the current CountData")
    release = param.Parameter(default=None, doc="what the analyst holds: a lpviz.release.Release")
    truth = param.Parameter(default=None, doc="the true counts (and rates when simulated): a lpviz.release.Truth")
    model = param.String(default="", doc="registry name of the model fitted to these data")
    loading = param.Boolean(default=False)
    error = param.String(default="")
    message = param.String(default="")

    def __init__(self, settings=None, *, background=None, small_first_at_once=False, **params):
        """``background``: build and noise in a thread (default: when served, so no session waits on another).
        ``small_first_at_once``: the first data set even so at once when small (a page's session, whose
        page is then drawn once, with its data: :data:`OPENING_INLINE_CELLS`)."""
        super().__init__(settings=settings if settings is not None else Settings(), **params)
        self._background = served() if background is None else background
        self._upload = None
        self._generation = 0
        self._pending = []  # finished background work, applied by poll() on the event loop
        self._pending_lock = threading.Lock()
        self._new_source = True
        self._started = None  # (time, what) of the work in a thread, for its progress
        self.built_with = {}  # the settings the data and release in force were made from
        self.settings.param.watch(self._on_settings, [*DATA_PARAMETERS, *NOISE_PARAMETERS])
        self.settings.param.watch(self._on_applied, ["applied"])
        self.settings.param.watch(self._on_model, ["model"])
        self.load(opening=small_first_at_once)

    # ---- building -------------------------------------------------------------------
    def _builder(self):
        """A function building the data set of the current settings (runs in any thread)."""
        from lpviz.datasets import load_data

        if not self.settings.source_spec.spec:  # an upload
            upload = self._upload
            if upload is None:
                raise ValueError(
                    "no file uploaded yet: choose a file (edge list, .npz, .mtx, UCI bag-of-words "
                    "or dense CSV) with the upload button"
                )
            return lambda: upload
        spec = self.data_spec()
        return lambda: load_data(spec["spec"], **spec["options"])

    def data_spec(self):
        """The current settings' data set as a spec another process rebuilds it from
        (:func:`lpviz.reproduce.chains.build_data`: ``{"source": "spec", "spec": ..., "options": ...}``,
        what :func:`lpviz.datasets.load_data` takes); a ValueError for an upload, which only this
        session holds."""
        settings, source = self.settings, self.settings.source_spec
        if not source.spec:
            raise ValueError(
                "an uploaded file lives only in this session: other processes cannot rebuild it. "
                "Choose a synthetic or Enron data set to run this on workers"
            )
        spec = f"{source.spec}:{checked_path(settings.path)}" if source.takes_path else source.spec
        return {"source": "spec", "spec": spec, "options": source.options(settings)}

    def _plan(self):
        """The settings the release is made from, read on the event loop (the work may run in a thread)."""
        settings = self.settings
        plan = {name: getattr(settings, name) for name in (*NOISE_PARAMETERS, "n_components", "model")}
        plan["methods"] = list(settings.methods)
        plan["N_from_data"] = self._new_source and settings.source_spec.N_from_data
        return plan

    def check_memory(self):
        """Refuse (MemoryBudgetError) a data set whose size is known before it is built and
        that would not fit this session's share of the server, with its chains."""
        settings, source = self.settings, self.settings.source_spec
        shape = source.shape(settings)
        if shape is not None:
            check_session(
                shape,
                f"{source.label}: {' x '.join(f'{n:,}' for n in shape)} counts",
                resolve_model(settings.model, source.kind),
                settings.n_components,
                settings.methods,
                fix="Choose fewer rows or columns.",
            )

    def load(self, events=(), opening=False):
        """(Re)build the data set for the current settings and noise it.

        A request refused before any work (too large for the session, a path
        outside the allowed folders) puts the changed ``events`` back, so the
        widgets show the settings in force beside the reason. ``opening``: the
        page's first data, built at once when small (:data:`OPENING_INLINE_CELLS`).
        """
        try:
            self.check_memory()  # before anything is allocated, on the event loop: refused at once
            build = self._builder()
        except (ValueError, TypeError, OSError) as exc:
            if events:
                self.settings.refuse(events)
            else:
                self._generation += 1  # a new source: whatever was on its way is outdated too
            self.param.update(error=str(exc), loading=False)
            return
        plan = self._plan()
        made_from = self._made_from(plan)
        what = f"building {self.settings.source_spec.label}"
        inline = opening and self._small_generated()
        self._run(lambda: {**derive(build(), plan), "built_with": made_from}, what, inline=inline)

    def _small_generated(self):
        """The settings' data set is generated (not read from a file, not an upload) and known to hold
        at most :data:`OPENING_INLINE_CELLS` cells before it is built."""
        settings, source = self.settings, self.settings.source_spec
        shape = source.shape(settings) if source.spec and not source.takes_path else None
        return shape is not None and math.prod(shape) <= OPENING_INLINE_CELLS

    def renoise(self):
        """Noise the current data again (privacy, held-out or noise-seed settings changed)."""
        if self.data is not None:
            data, plan = self.data, self._plan()
            made_from = {**self.built_with, **self._made_from(plan)}
            self._run(lambda: {**derive(data, plan), "built_with": made_from}, "noising the data at the new settings")

    def _made_from(self, plan):
        """The settings a build or noising reads (the source's data settings and ``plan``), as read."""
        settings = self.settings
        data_settings = {name: getattr(settings, name) for name in settings.source_spec.parameters}
        noise = {name: plan[name] for name in (*NOISE_PARAMETERS, "n_components", "model")}
        return {"source": settings.source, **data_settings, **noise}

    def _run(self, work, what, inline=False):
        """Do ``work`` (build and/or noise) at once, or in a thread when served and not ``inline``;
        :meth:`poll` applies the thread's."""
        self._generation += 1
        generation = self._generation
        if not self._background or inline:
            try:
                outcome = ("derived", work())
            except (ValueError, TypeError, OSError) as exc:  # shown beside the controls; the old data stay
                outcome = ("error", str(exc))
            self._apply(*outcome)
            return
        self._started = (time.monotonic(), what)
        self.param.update(loading=True, error="", message=f"{what} ...")

        def background():
            try:
                outcome = ("derived", work())
            except Exception as exc:  # any failure is shown in the session that asked
                outcome = ("error", str(exc))
            self._post(generation, *outcome)

        threading.Thread(target=background, name="lpviz-data", daemon=True).start()

    def load_upload(self, contents, filename):
        """Read an uploaded file (a release or counts) within this session's share of the server.

        Everything reading can raise comes back as one ValueError naming the
        user's file (never the server's copy), the problem and the fix: the
        upload handler shows it in the session's error box.
        """
        from lpviz._files import shown

        name = shown(PurePath(str(filename).replace("\\", "/")).name or "upload")
        if not contents:
            raise ValueError(f"the uploaded file {name!r} is empty: choose a file with counts in it")
        from lpviz.budget import check_memory, memory_budget
        from lpviz.dashboard.session.memory import session_limit

        limit = session_limit()
        # the text read into numbers takes a few times its size: refuse before parsing
        check_memory(
            4 * len(contents),
            f"reading the upload {name!r}",
            limit=limit,
            fix="Upload a smaller file (or a compressed one: .gz).",
        )
        with tempfile.TemporaryDirectory() as tmp:
            tmp_path = Path(tmp) / f"upload{_upload_suffix(name)}"
            try:
                tmp_path.write_bytes(contents)
                # every size check inside the readers answers to this session's share, not the server's
                with memory_budget(limit, "this session's share of the server"):
                    data = self._read_upload(tmp_path, name)
            except Exception as exc:  # noqa: BLE001  (anything a load raises becomes the session's message)
                raise ValueError(_upload_message(exc, tmp_path, tmp, name)) from None
        self.use_data(data)
        if self.settings.source != "upload":  # the switch waits for a yes (it would discard running fits)
            self.param.update(
                error="",
                message=f"{name} is read: it is shown once you answer the question at the top of the sidebar",
            )

    def use_data(self, data):
        """Show ``data`` of your own (a :class:`~lpviz.release.Release`, or true counts as
        :class:`~lpviz.datasets.CountData`) as the data source "a file you upload" does.

        A release is fitted as it is (its own noise level; no truth beside it); counts are noised by
        the session's settings. A TypeError names anything else."""
        from lpviz.datasets import CountData
        from lpviz.release import Release

        if not isinstance(data, Release | CountData):
            raise TypeError(
                f"data of type {type(data).__name__} cannot be shown: give a lpviz.Release (noised counts "
                "with their epsilon and N, as `lpviz privatize` writes) or lpviz.datasets.CountData "
                "(true counts, e.g. from lpviz.datasets.load_counts)"
            )
        self._upload = data
        if self.settings.source == "upload":
            self.load()
            return
        self.settings.source = "upload"

    @staticmethod
    def _read_upload(path, filename):
        """A release (an .npz `lpviz privatize` wrote: noised counts and their noise level) or counts."""
        from dataclasses import replace

        from lpviz.datasets import load_counts
        from lpviz.release import Release

        if path.suffix == ".npz" and _holds_release(path):
            # read like any release: its headers and its size checked before anything is decompressed
            return replace(Release.load(path), name=filename)
        try:
            data = load_counts(path)
        except ValueError as exc:
            # the reader's words for a negative count ("non-negative" in another refusal is not one)
            if "a negative count" in str(exc):
                raise ValueError(
                    f"{filename} has negative counts: this looks like a noised release. Upload the .npz that "
                    "`lpviz privatize` writes: it records the release's epsilon and N (or alpha), which fitting "
                    "it privately needs; a table alone does not say how much noise it carries "
                    # where, not the reader's own advice ("load the true counts here"): one instruction
                    f"({str(exc).split(': ', 1)[-1].split(';')[0].strip()})"
                ) from None
            raise
        data.source = filename
        return data

    def fetch_enron(self):
        """Download the Enron data into the data folder (only when the server allows downloads)."""
        from lpviz.datasets import fetch_enron

        if not downloads_allowed():
            self.error = (
                f"downloads are off on this server (set {ALLOW_DOWNLOADS_ENV}=1 where it runs to allow "
                "them); use the shared file or upload one"
            )
            return

        def work():
            try:
                outcome = ("path", str(fetch_enron(progress=False)))
            except Exception as exc:
                outcome = ("error", f"download failed: {exc}")
            self._post(None, *outcome)

        self._started = (time.monotonic(), "downloading Enron")
        self.param.update(loading=True, error="", message="downloading Enron ...")
        if self._background:
            threading.Thread(target=work, name="lpviz-enron-download", daemon=True).start()
        else:
            work()
            self.poll()

    def _post(self, generation, kind, payload):
        with self._pending_lock:
            self._pending.append((generation, kind, payload))

    def poll(self):
        """Apply finished background work (call on the event loop); True if anything changed."""
        with self._pending_lock:
            pending, self._pending = self._pending, []
        for generation, kind, payload in pending:
            if generation is not None and generation != self._generation:
                continue  # a newer build was asked for meanwhile
            self._apply(kind, payload)
        if self.loading and not pending and self._started is not None:
            started, what = self._started
            self.message = f"{what} ... {time.monotonic() - started:.0f} s"  # progress: it is still going
        return bool(pending)

    def _apply(self, kind, payload):
        self._started = None
        if kind == "derived":
            self._new_source = False
            release = payload["release"]
            made_from = payload["built_with"]
            if payload["truth"] is None and release.epsilon is not None:  # an uploaded release: its own level
                with self.settings.internal():
                    self.settings.param.update(epsilon=release.epsilon, heterogeneous=False)
                made_from.update(epsilon=release.epsilon, heterogeneous=False)
            if payload["N"] != self.settings.N:
                with self.settings.internal():  # Figure 1: N is the mean count of the drawn network
                    self.settings.N = payload["N"]
            self.built_with = {**made_from, "N": payload["N"]}
            data = payload["data"]
            name = data.name or self.settings.source
            # one update, so every view reacting to any of these sees them consistent
            self.param.update(
                data=data,
                release=payload["release"],
                truth=payload["truth"],
                model=payload["model"],
                error="",
                loading=False,
                message=f"{name}: {' x '.join(f'{n:,}' for n in data.shape)} ({payload['model']})",
            )
        elif kind == "path":
            self.param.update(loading=False, message=f"downloaded to {payload}")
            self.settings.path = payload
        else:
            self.param.update(error=payload, loading=False, message="")

    # ---- reactions -------------------------------------------------------------------
    def _on_settings(self, *events):
        events = self.settings.still(events)  # a change held back for a yes changes nothing yet
        if self.settings.declaring or not events:
            return  # declared settings: rebuilt once, on ``applied``
        names = {event.name for event in events}
        if names & set(self.settings.source_spec.parameters):
            self.load(events)
        elif names & set(NOISE_PARAMETERS) - HELDOUT_PARAMETERS and self.truth is None and self.release is not None:
            self.settings.refuse(events)
            self.error = (
                f"{self.release.name or 'this release'} was noised once, at "
                f"{self.noise_summary}: without the true counts its noise cannot be drawn again; "
                "only the held-out cells can change"
            )
        elif names & set(NOISE_PARAMETERS):
            self.renoise()

    def _on_applied(self, *_):
        """A preset or a data source put its settings in force: build the data once from them all."""
        self._new_source = True
        self.load()

    def _on_model(self, *events):
        """Another model for the same data: the release stays, the fits follow ``model``."""
        events = self.settings.still(events)
        if not events or self.release is None:
            return
        kind, choice = self.release.kind, self.settings.model
        from lpviz import models

        if choice and choice not in models.fitting(kind):
            self.settings.refuse(events)
            raise ValueError(
                f"model {choice!r} does not fit {kind} data; the models that do: {', '.join(models.fitting(kind))}"
            )
        self.model = resolve_model(choice, kind)

    # ---- summaries ---------------------------------------------------------------------
    @property
    def noise_summary(self):
        """The noise level in words (eps/N and alpha, or the per-row alphas)."""
        from lpviz.release import format_alpha

        release = self.release
        if release is None:
            return ""
        if release.epsilon is None and np.ndim(release.alpha) == 0:
            return f"alpha = {format_alpha(release.alpha)}"
        if release.epsilon is None:
            alpha = release.alpha_per_row
            return f"heterogeneous alpha per row: mean {alpha.mean():.3g}, range {alpha.min():.3g} - {alpha.max():.3g}"
        ratio = release.epsilon / release.N
        return f"eps/N = {ratio:.3g}, alpha = exp(-eps/N) = {format_alpha(release.alpha)}"
