"""The sidebar: every setting as a widget made from its parameter, and the data's status.

Widgets are ``Widget.from_param`` of :class:`~lpviz.dashboard.session.settings.Settings`; which
size widgets appear follows the source (:data:`~lpviz.dashboard.session.settings.SOURCES`), the
method list and option selectors follow the registries.
"""

import logging
import math

import numpy as np
import panel as pn
import param

from lpviz.dashboard.serving.uploads import too_large
from lpviz.dashboard.session.datastore import DataStore
from lpviz.dashboard.session.presets import PRESETS
from lpviz.dashboard.session.settings import NOISE_PARAMETERS, SOURCES
from lpviz.dashboard.views.privacy_view import privacy_unit

# The widget each setting is shown with (IntInput for the other integers).
_FLOAT_INPUTS = ("N", "concentration", "holdout_fraction")
SHOWN_DECIMALS = "0[.][0000]"  # numbro (Bokeh's number format): up to four decimals, none when whole
_HOLDOUT_PARAMETERS = {"random cells": ("holdout_fraction",), "top actors": ("holdout_actors",)}
log = logging.getLogger(__name__)
# Where a held-back change's question is shown: in the card of the field last changed (shown only at the
# top of the sidebar, the question of a field typed in the Privacy card was out of view, issue 57 MEDIUM 5)
QUESTION_CARDS = {
    "privacy": frozenset(NOISE_PARAMETERS),
    "fit": frozenset({"inference", "n_iter", "burn_in", "thin", "trace_every", "chain_seed", "chains", "methods"}),
}


def question_place(pending):
    """The card whose question box shows the ``pending`` changes: that of the last one changed, else "top"."""
    last = next(reversed(pending), None)
    return next((card for card, names in QUESTION_CARDS.items() if last in names), "top")


def widget(settings, parameter_name, **options):
    """The widget of one setting.

    Typed fields carry no bounds of their own: whatever is typed reaches the
    settings, which apply it or refuse it, and a refusal is shown with its
    reason (the app's exception handler) while the field goes back to the
    value in force. Nothing is clamped or dropped silently in the browser.
    """
    name, parameter = parameter_name, settings.param[parameter_name]
    if name == "epsilon":
        return pn.widgets.EditableFloatSlider.from_param(
            parameter, step=0.05, fixed_start=None, fixed_end=None, **options
        )
    if name == "alpha0":
        return pn.widgets.FloatSlider.from_param(parameter, step=0.01, **options)
    if name == "path":
        return pn.widgets.TextInput.from_param(parameter, **{"label": "Enron file", **options})
    if name in _FLOAT_INPUTS:
        # at most four decimals shown (Figure 1's N, the data's mean count, read 15.628947368421052);
        # the value in force keeps its precision
        return pn.widgets.FloatInput.from_param(parameter, start=None, end=None, format=SHOWN_DECIMALS, **options)
    return pn.widgets.IntInput.from_param(parameter, start=None, end=None, **options)


def guarantee(release, source=""):
    """The privacy guarantee of ``release`` in words, with its numbers ('' without a release).

    Limited-precision local privacy: two rows whose counts differ by at most N in
    total (L1) give noised rows whose probabilities differ by at most a factor e^eps.
    """
    if release is None:
        return ""
    unit = privacy_unit(release.kind, source)  # what a row is for the data's kind (issue 57 MEDIUM 10)
    rows, units = unit["rows"], unit["units"]
    if np.ndim(release.alpha) > 0:  # one alpha per row: a guarantee per row
        ratio = -np.log(release.alpha_per_row)
        return (
            f"Each row has its own noise: any two {rows} that differ by at most N {units} are "
            f"e^(N x {ratio.min():.3g}) to e^(N x {ratio.max():.3g})-indistinguishable "
            "(eps/N = ln(1/alpha) of the row)."
        )
    if release.epsilon is None or release.N is None:
        ratio = -math.log(float(release.alpha))
        return (
            f"Any two {rows} that differ by at most N {units} are e^(N x {ratio:.3g})-indistinguishable "
            f"(eps/N = ln(1/alpha) = {ratio:.3g})."
        )
    units = units[:-1] if release.N == 1 else units
    return (
        f"Any two {rows} that differ by at most N = {release.N:g} {units} are e^eps = "
        f"e^{release.epsilon:g} = {math.exp(release.epsilon):,.3g}-indistinguishable: no one who sees the "
        f"noised counts can tell which of the two it was by more than that factor."
    )


OWN_DATA_HELP = """**Your own data** (choose a file with the upload button; nothing leaves this server session):

- **Edge list** `.csv`/`.tsv`/`.txt` (optionally `.gz`): lines `source,target[,count]`, a header line such as
  `source,target,count` optional; gives a sender x recipient network (a missing count means 1, repeated
  pairs add up, self loops are dropped).
- **Dense table** `.csv`: documents x words, a header line of words, optionally a first column of
  document names.
- **NumPy archive** `.npz`: the counts in key `Y` (dense), or CSR arrays `Y_data`, `Y_indices`, `Y_indptr`,
  `Y_shape`; optional `vocab` or `col_labels`, `row_labels`, `model`. An `.npz` that `lpviz privatize`
  wrote (key `Y_obs`, with its `epsilon` and `N` or `alpha`) is read as a **release**: its noise is kept as is.
- **Matrix Market** `.mtx`; **UCI bag-of-words** `docword.NAME.txt` (with `vocab.NAME.txt`).

Counts must be non-negative whole numbers (a noised table with negative counts must come as the
release `.npz`, which says how much noise it carries)."""

# A small example of the simplest format, offered for download beside the help.
EXAMPLE_EDGES = "source,target,count\nann,bob,3\nbob,cy,2\ncy,ann,1\nann,cy,4\ndee,ann,2\nbob,dee,5\n"


def own_data_help():
    """The "your own data" panel: every accepted format with its required keys, and an example file."""
    from io import BytesIO

    example = pn.widgets.FileDownload(
        BytesIO(EXAMPLE_EDGES.encode()),
        filename="example_edges.csv",
        label="Download an example (edge list)",
        color="light",
        sizing_mode="stretch_width",
    )
    return pn.Column(
        pn.pane.Markdown(OWN_DATA_HELP, sizing_mode="stretch_width", name="own-data-help"),
        example,
        sizing_mode="stretch_width",
    )


def seed_words(noise_seed):
    """Whether the numbers on screen are the class's (the presets' fixed noise seed) or a fresh draw."""
    from lpviz.dashboard.session.presets import CLASS_SEED

    if noise_seed == CLASS_SEED:
        return f"Class seed {CLASS_SEED}: every student running a preset sees this same release and the same numbers."
    return (
        f"**A new noise draw** (seed {noise_seed}): your release and numbers differ from the class's "
        f"(the presets use seed {CLASS_SEED}; choose a preset again to go back to it)."
    )


def preset_text(settings):
    """What to look at in the preset in force ('' for settings of one's own)."""
    return PRESETS[settings.preset].text if settings.preset else ""


def receive_upload(data, upload):
    """Read the file ``upload`` (a FileInput) holds into ``data``, and say what became of it: its data,
    or why not, always (issue 57 HIGH 3). Every exception is shown in the data's error box (a type the
    reader did not expect went to the app's handler: a toast and a line at INFO, not in the server's
    log); an empty file is read too (Panel gives it as value None), so its message replaces the
    previous file's. Then the widget forgets the file, here and in the page: the widget kept the last
    file's bytes, and a file with the same bytes (the same file chosen again, once the widget had been
    drawn anew by a switch of the data source) was no change of its value, so nothing was read and the
    page kept "no file uploaded yet" without a word.

    A file is read once its name has come: served, the page sends value, name and type in one
    change; in a notebook each comes alone, the value first (a file read on its value alone was read
    as "upload.txt", and its name, after the clear, as an empty file; issue 58 item 5)."""
    contents, filename = upload.value, upload.filename
    if not filename:
        return  # the widget cleared (below), or in a notebook the value has come and its name will follow
    name = filename if isinstance(filename, str) and filename else "upload.txt"
    try:
        refused = too_large(name, upload.mime_type)
        if refused is not None:  # the page did not send it: beyond the server's message limit
            data.error = refused
            return
        data.load_upload(contents or b"", name)
    except (ValueError, TypeError, OSError) as exc:
        data.error = str(exc)
    except Exception as exc:  # noqa: BLE001  (an upload always says what became of it)
        log.exception("reading the upload %r failed", name)
        data.error = f"{name} could not be read: {type(exc).__name__}: {exc}"
    finally:
        with param.parameterized.discard_events(upload):
            upload.param.update(value=None, filename=None, mime_type=None)
        upload.clear()  # the page's input too: choosing the same file again is a change there


# The Model select while another data set is built: its models follow the data's kind
PENDING_MODEL = "(the new data's models, once it is built)"


class ControlsView(pn.viewable.Viewer):
    """Data, privacy and fit settings of one session, with the data's status."""

    data = param.ClassSelector(class_=DataStore)

    @property
    def settings(self):
        return self.data.settings

    def data_controls(self):
        settings = self.settings
        source = pn.widgets.Select.from_param(
            settings.param.source, label="Data", options={spec.label: name for name, spec in SOURCES.items()}
        )
        upload = pn.widgets.FileInput(accept=".csv,.tsv,.txt,.npz,.mtx,.gz,.edges")
        download = pn.widgets.Button(label="Download Enron", color="light")
        download.on_click(lambda event: self.data.fetch_enron())

        def on_upload(*_):
            receive_upload(self.data, upload)

        # the name too: Panel reads an empty file as value None, which is no change after a clear
        upload.param.watch(on_upload, ["value", "filename"])

        @param.depends(settings.param.source)
        def size_widgets(source):
            spec = SOURCES[source]
            names = [name for name in spec.parameters if name != "path"]
            if "n_components" not in names:
                names.append("n_components")
            column = pn.Column(*[widget(settings, name) for name in names], sizing_mode="stretch_width")
            if spec.takes_path:
                column.insert(0, widget(settings, "path"))
                column.append(download)
            if not spec.spec:
                column.insert(0, upload)
                column.insert(1, own_data_help())
            return column

        status = self.status()
        model = self.model_selector()
        defaults = pn.widgets.Button(
            label="Reset to this data set's defaults", color="light", sizing_mode="stretch_width"
        )
        defaults.on_click(settings.reset_to_defaults)
        scale = pn.widgets.RadioButtonGroup.from_param(settings.param.colour_scale, sizing_mode="stretch_width")
        return pn.Card(
            source,
            size_widgets,
            model,
            defaults,
            status,
            pn.pane.Markdown("Colour scale of the rates", margin=(5, 10, 0, 10)),
            scale,
            title="Data",
            collapsible=False,
            sizing_mode="stretch_width",
        )

    def model_selector(self):
        """The models that fit the data's kind (:func:`lpviz.models.fitting`, the registry's: a new model
        shows up here), the default first; choosing one sets ``settings.model``. Made once, its
        options follow the data."""
        from lpviz import models

        select = pn.widgets.Select(label="Model", sizing_mode="stretch_width")

        def options_for(release):
            if release is None:
                return {"(the data's default)": ""}
            names = models.fitting(release.kind)
            return {f"{models.get(names[0]).label} (default)": "", **{models.get(n).label: n for n in names[1:]}}

        def follow_data(*_):
            data = self.data
            if data.loading and data.built_with.get("source", self.settings.source) != self.settings.source:
                # another data set on its way: its kind and so its models are not known yet, and the old
                # data's ("block model" for a tensor) stood seconds in the sidebar (issue 57 MEDIUM 14)
                select.param.update(options={PENDING_MODEL: ""}, value="", disabled=True)
                return
            select.param.update(options=options_for(data.release), disabled=False)
            chosen = self.settings.model
            select.value = chosen if chosen in select.options.values() else ""

        def choose(event):
            if event.new != self.settings.model and not select.disabled:
                self.settings.model = event.new

        follow_data()
        self.data.param.watch(follow_data, ["release", "model", "loading"])
        self.settings.param.watch(follow_data, ["model"])
        select.param.watch(choose, "value")
        return select

    def status(self):
        """The data's state: an error with its reason, or what is loaded (with a spinner while building).
        Made once and updated in place (no component is re-created while work is handed over)."""
        data = self.data
        has_error = pn.bind(bool, data.param.error)
        no_error = pn.bind(lambda error: not error, data.param.error)
        alert = pn.pane.Alert(data.param.error, alert_type="danger", visible=has_error, sizing_mode="stretch_width")
        spinner = pn.indicators.LoadingSpinner(value=data.param.loading, visible=data.param.loading, size=20)
        message = pn.pane.Markdown(data.param.message, margin=(0, 5), visible=no_error)
        return pn.Column(alert, pn.Row(spinner, message, sizing_mode="stretch_width"), sizing_mode="stretch_width")

    def preset_controls(self):
        """The paper's experiments, one choice each, and what to look at in the chosen one."""
        settings = self.settings
        choice = pn.widgets.Select.from_param(
            settings.param.preset,
            label="The paper's experiments",
            options={"(settings of your own)": "", **{name: name for name in PRESETS}},
        )
        # The text of the preset whose settings are in force, never of a preset merely chosen: it changes
        # when the preset's settings are declared (``applied``), in the same message to the page as the
        # settings' widgets (Settings.declare holds the document). Bound to the choice itself, it reached
        # the page up to seconds before them, above the previous data set's settings (issue 37).
        text = pn.pane.Markdown(preset_text(settings), sizing_mode="stretch_width", name="preset-text")

        def follow(*_):
            text.object = preset_text(settings)

        def leave(event):
            if not event.new:  # a setting changed by hand: the settings are one's own, the text goes
                follow()

        settings.param.watch(follow, ["applied"])
        settings.param.watch(leave, ["preset"])
        return pn.Card(choice, text, title="Presets", collapsible=False, sizing_mode="stretch_width")

    def privacy_controls(self):
        settings = self.settings
        redraw = pn.widgets.Button(label="New noise draw", color="primary", css_classes=["new-noise-draw"])
        redraw.on_click(settings.redraw_noise)

        # The release's texts only for the data chosen: after a switch to "a file you upload" the data
        # before stayed in force until a file came, and its alpha, guarantee and "Class seed 2019" were
        # shown for the upload (issue 37); an uploaded release draws no noise, so no seed applies to it.
        def current(release):
            return release if self.data.built_with.get("source") == settings.source else None

        def seed_note_text(noise_seed, release, source):
            release = current(release)
            return "" if release is None or self.data.truth is None else seed_words(noise_seed)

        seed_note = pn.pane.Markdown(
            pn.bind(seed_note_text, settings.param.noise_seed, self.data.param.release, settings.param.source),
            sizing_mode="stretch_width",
            name="seed-note",
        )

        @param.depends(settings.param.heterogeneous)
        def noise_widgets(heterogeneous):
            if heterogeneous:
                return pn.Column(
                    *[widget(settings, name) for name in ("alpha0", "concentration")], sizing_mode="stretch_width"
                )
            # typed values under the slider: the settings apply 0.01 to 100 and refuse others with the reason.
            # Each takes the sidebar's width: side by side, the typed field's label (177 px in a 130 px field)
            # ran past the 340 px sidebar and was cut at every window width (issue 37)
            typed = pn.widgets.FloatInput.from_param(
                settings.param.epsilon,
                start=None,
                end=None,
                step=0.1,
                label="epsilon (type 0.01 to 100)",
                sizing_mode="stretch_width",
            )
            return pn.Column(
                widget(settings, "epsilon", sizing_mode="stretch_width"),
                typed,
                widget(settings, "N"),
                sizing_mode="stretch_width",
            )

        @param.depends(settings.param.holdout)
        def holdout_widgets(holdout):
            return pn.Column(
                *[widget(settings, name) for name in _HOLDOUT_PARAMETERS.get(holdout, ())], sizing_mode="stretch_width"
            )

        summary = pn.bind(
            lambda release, source: pn.pane.Markdown(self.data.noise_summary if current(release) else ""),
            self.data.param.release,
            settings.param.source,
        )
        promise = pn.pane.Markdown(
            pn.bind(
                lambda release, source: guarantee(current(release), source),
                self.data.param.release,
                settings.param.source,
            ),
            sizing_mode="stretch_width",
            name="guarantee",
        )
        # while a new release is on its way (noised again, or built and noised: seconds on a busy server)
        # the card says so: its numbers are the release's, and after "Discard them and apply" the fits
        # went at once while the old epsilon's numbers stayed for 5-7 s, as if nothing had applied
        # (issue 57 MEDIUM 6)
        applying = pn.pane.Markdown(
            pn.bind(
                lambda loading, message: f"*The numbers below are the release's, which is being replaced: {message}*"
                if loading
                else "",
                self.data.param.loading,
                self.data.param.message,
            ),
            sizing_mode="stretch_width",
            css_classes=["privacy-applying"],
        )
        return pn.Card(
            self.question("privacy"),
            applying,
            pn.widgets.Checkbox.from_param(settings.param.heterogeneous, label="heterogeneous noise"),
            noise_widgets,
            summary,
            promise,
            pn.widgets.Select.from_param(settings.param.holdout, label="Held-out cells"),
            holdout_widgets,
            widget(settings, "noise_seed", label="Noise seed (simulation)"),
            redraw,
            seed_note,
            title="Privacy",
            collapsible=False,
            sizing_mode="stretch_width",
        )

    def fit_controls(self):
        """The "Fit settings" card, collapsed: its widgets (about a third of the sidebar's models) are
        made the first time it opens, not at every page open (issue 41)."""
        card = pn.Card(title="Fit settings", collapsed=True, sizing_mode="stretch_width")

        def fill(*_):
            if not card.collapsed and not card.objects:
                card.objects = self._fit_widgets()

        card.param.watch(fill, "collapsed")
        return card

    def _fit_widgets(self):
        settings = self.settings
        from lpviz.methods import METHODS

        methods = pn.widgets.CheckBoxGroup.from_param(
            settings.param.methods, options={METHODS[name].label: name for name in settings.param.methods.objects}
        )
        options = [
            pn.widgets.Select.from_param(settings.method_options.param[name])
            for name in list(settings.method_options.param)[1:]
        ]
        from lpviz.dashboard.session.settings import INFERENCE_LABELS

        inference = pn.widgets.RadioButtonGroup.from_param(
            settings.param.inference,
            options={label: name for name, label in INFERENCE_LABELS.items()},
            sizing_mode="stretch_width",
        )
        return [
            self.question("fit"),
            inference,
            *[widget(settings, name) for name in ("n_iter", "burn_in", "thin", "trace_every", "chain_seed", "chains")],
            pn.pane.Markdown("Methods", margin=(5, 10, 0, 10)),
            methods,
            *options,
        ]

    def question(self, place="top"):
        """Changes held back because they would discard running fits, with a yes and a no, shown in
        the box of ``place`` (:func:`question_place`: the card of the field changed, or the top of
        the sidebar); one box at a time holds the question, the others are hidden and empty.

        The buttons are made once and shown or hidden: buttons re-created for every question
        could be clicked in the browser just as the server replaced them, and that click was lost.
        """
        settings = self.settings
        here = lambda: bool(settings.question) and question_place(settings.pending) == place  # noqa: E731
        alert = pn.pane.Alert(settings.question if here() else " ", alert_type="warning", sizing_mode="stretch_width")
        yes = pn.widgets.Button(label="Discard them and apply", button_type="danger")
        yes.on_click(settings.confirm)
        no = pn.widgets.Button(label="Keep the fits", button_type="light")
        no.on_click(settings.cancel)
        box = pn.Column(
            alert, pn.Row(yes, no), visible=here(), sizing_mode="stretch_width", css_classes=[f"question-{place}"]
        )

        def show(*_):
            shown = here()
            alert.object = settings.question if shown else " "
            box.visible = shown

        settings.param.watch(show, ["question", "pending"])
        return box

    def __panel__(self):
        return pn.Column(
            self.question(),
            self.preset_controls(),
            self.data_controls(),
            self.privacy_controls(),
            self.fit_controls(),
            sizing_mode="stretch_width",
        )
