"""Export: the current figures as PNG or HTML, the fit results as .npz and .json.

PNG goes through HoloViews' matplotlib backend, so no browser is needed;
HTML is the interactive Bokeh figure. Results hold what a person needs to
redo or check an analysis: the data as fitted (true and noised counts,
alpha, mask), each method's posterior-mean rates, best factors and trace.
The functions write files and never overwrite one unless told to; the
:class:`ExportView` hands the same bytes to the browser as downloads.
"""

import io
import json
import tempfile
from pathlib import Path

import holoviews as hv
import numpy as np
import panel as pn
import param

from app.results import METHODS, fit_results
from app.store import DataStore

FIGURE_FORMATS = {".png": "matplotlib", ".html": "bokeh"}
RESULT_FORMATS = (".npz", ".json")
# Bokeh option names the views use, as matplotlib spells them.
_MPL_NAMES = {"line_width": "linewidth", "line_dash": "linestyle", "size": "s",
              "text_color": "color", "text_font_size": "fontsize", "line_color": "edgecolor"}


def _matplotlib_styled(figure):
    """``figure`` with its Bokeh styling (titles, colours, scales) carried over to matplotlib."""
    import holoviews.plotting.mpl  # noqa: F401  (registers the renderer; the app stays on bokeh)

    mpl_options = hv.Store.options(backend="matplotlib")

    def carry(obj):
        spec = mpl_options[type(obj).__name__]
        allowed = set(spec["plot"].allowed_keywords) | set(spec["style"].allowed_keywords)
        options = {}
        for group in ("plot", "style"):
            for name, value in hv.Store.lookup_options("bokeh", obj, group).kwargs.items():
                name = _MPL_NAMES.get(name, name)
                if name in allowed and value is not None:
                    options[name] = value ** 2 if name == "s" else value  # bokeh: diameter, mpl: area
        options.pop("fontsize", None)  # bokeh's '9pt' strings are no matplotlib sizes
        if isinstance(obj, (hv.Overlay, hv.Element)) and "fig_inches" in allowed:
            options["fig_inches"] = 5
        return obj.opts(backend="matplotlib", clone=True, **options)

    styled = figure.map(carry, lambda obj: isinstance(obj, (hv.Element, hv.Overlay)))
    if isinstance(styled, hv.Layout):  # panels carry their own titles: no "A, B, C" sublabels
        styled = styled.opts(backend="matplotlib", sublabel_format="")
    return styled


def _check_target(path, formats, overwrite):
    path = Path(path)
    if path.suffix.lower() not in formats:
        raise ValueError(f"cannot write {path.name!r}: use one of {', '.join(formats)} as the file suffix")
    if path.exists() and not overwrite:
        raise FileExistsError(f"{path} exists: choose another name or pass overwrite=True to replace it")
    return path


def save_figure(figure, path, *, overwrite=False):
    """Write a HoloViews figure to ``path`` (.png via matplotlib, .html via Bokeh). Returns the path."""
    path = _check_target(path, FIGURE_FORMATS, overwrite)
    backend = FIGURE_FORMATS[path.suffix.lower()]
    if backend == "matplotlib":
        figure = _matplotlib_styled(figure)
    with tempfile.TemporaryDirectory() as tmp:  # write whole, then move: no half-written file
        scratch = Path(tmp) / f"figure{path.suffix.lower()}"
        hv.save(figure, scratch, backend=backend, **({"dpi": 110} if backend == "matplotlib" else {}))
        path.write_bytes(scratch.read_bytes())
    return path


def figure_bytes(figure, suffix):
    """The bytes of ``figure`` saved as ``suffix`` ('.png' or '.html')."""
    with tempfile.TemporaryDirectory() as tmp:
        return save_figure(figure, Path(tmp) / f"figure{suffix}").read_bytes()


def result_arrays(store):
    """Arrays of the data as fitted and of every method's results, keyed for ``np.savez``."""
    arrays = {"Y_true": store.Y_true, "Y_obs": store.Y_obs, "alpha": np.asarray(store.alpha, float)}
    if store.mask is not None:
        arrays["mask"] = np.asarray(store.mask, bool)
    truth = store.truth
    if truth is not None:
        arrays["mu_true"] = truth
    for method, result in fit_results(store).items():
        if result.get("mu_hat") is not None:
            arrays[f"{method}/mu_hat"] = result["mu_hat"]
        for name, value in result["best"].items():
            arrays[f"{method}/best_{name}"] = np.asarray(value)
        trace = store.runners[method].trace()
        for column in trace.columns:
            arrays[f"{method}/trace_{column}"] = trace[column].to_numpy()
    return arrays


def result_summary(store):
    """Settings and per-method figures as a JSON-ready dict."""
    problem = store.problem()
    settings = {name: getattr(store, name) for name in
                ("source", "epsilon", "N", "heterogeneous", "alpha0", "noise_seed", "holdout",
                 "n_components", "n_iter", "burn_in", "thin", "chain_seed")}
    summary = {"data": {"source": store.data.source or store.source, "model": store.model,
                        "shape": list(store.Y_true.shape), "mae_reference": problem.reference_name},
               "settings": settings, "methods": {}}
    results = fit_results(store)
    for method in METHODS:
        runner = store.runners[method]
        entry = {"status": runner.status, "iteration": int(runner.iteration)}
        if method in results:
            result = results[method]
            entry.update(samples_saved=int(result["samples_saved"]),
                         best_log_joint=float(result["best_log_joint"]))
            trace = runner.trace()
            if len(trace):
                last = trace.iloc[-1]
                entry.update({name: (None if np.isnan(last[name]) else float(last[name]))
                              for name in ("mae_mean", "heldout_mae")})
        summary["methods"][method] = entry
    return summary


def save_results(store, path, *, overwrite=False):
    """Write the fit results to ``path``: .npz (arrays) or .json (settings and figures)."""
    path = _check_target(path, RESULT_FORMATS, overwrite)
    if store.data is None:
        raise ValueError("no data loaded: choose a data source before exporting results")
    path.write_bytes(results_bytes(store, path.suffix.lower()))
    return path


def results_bytes(store, suffix):
    """The bytes :func:`save_results` writes for ``suffix`` ('.npz' or '.json')."""
    if suffix == ".npz":
        buffer = io.BytesIO()
        np.savez_compressed(buffer, **result_arrays(store))
        return buffer.getvalue()
    return json.dumps(result_summary(store), indent=2, default=str).encode()


class ExportView(pn.viewable.Viewer):
    """Download buttons for the figures of the given views and for the fit results.

    Parameters
    ----------
    store : DataStore
    views : list
        Views with a ``figures()`` method (name -> HoloViews object).
    """

    store = param.ClassSelector(class_=DataStore)
    views = param.List(default=[], doc="Views whose figures() can be exported.")
    figure = param.Selector(default=None, objects=[], doc="Figure to export.")

    def __init__(self, **params):
        super().__init__(**params)
        self.param.figure.objects = list(self.available_figures())
        self.figure = self.param.figure.objects[0] if self.param.figure.objects else None

    def available_figures(self):
        """``{name: view}`` of every exportable figure."""
        return {name: view for view in self.views for name in view.figures()}

    def current_figure(self):
        if self.figure is None:
            raise ValueError("no figure to export: add views with figures() to the export view")
        return self.available_figures()[self.figure].figures()[self.figure]

    def _download(self, label, filename, make_bytes):
        def callback():
            return io.BytesIO(make_bytes())
        return pn.widgets.FileDownload(callback=callback, filename=filename, label=label,
                                       embed=False, sizing_mode="stretch_width")

    def __panel__(self):
        png = self._download("Figure as PNG", "figure.png", lambda: figure_bytes(self.current_figure(), ".png"))
        html = self._download("Figure as HTML", "figure.html",
                              lambda: figure_bytes(self.current_figure(), ".html"))

        def name_files(name):
            png.filename, html.filename = f"lpviz_{name}.png", f"lpviz_{name}.html"
        self.param.watch(lambda event: name_files(event.new), "figure")
        if self.figure:
            name_files(self.figure)
        npz = self._download("Results (.npz)", "lpviz_results.npz", lambda: results_bytes(self.store, ".npz"))
        summary = self._download("Summary (.json)", "lpviz_summary.json",
                                 lambda: results_bytes(self.store, ".json"))
        return pn.Column(
            "### Export",
            pn.widgets.Select.from_param(self.param.figure, name="Figure"),
            pn.Row(png, html), pn.Row(npz, summary),
            pn.pane.Markdown("Results: true and noised counts, alpha, mask, and per method the "
                             "posterior-mean rates, the best sample's factors and the trace.",
                             sizing_mode="stretch_width"),
            sizing_mode="stretch_width",
        )
