"""The dashboard's views in Jupyter: the kernel that finds them, the extension, one session per section.

In a notebook (any folder, opened with the ``lpviz`` kernel)::

    from lpviz.dashboard import in_jupyter as notebook
    notebook.extension()                       # Panel, resources inline: no internet needed
    topics = notebook.session(source="synthetic-topics", epsilon=1.0, N=1)
    FitsView(fits=topics.fits)                 # live: Start, Pause, Resume, Stop, Reset

The whole dashboard in a cell is :class:`~lpviz.dashboard.page.Dashboard` (any kernel of an environment
where lpviz is installed). :func:`install_kernel` registers a kernel named ``lpviz`` for a checkout
(this interpreter, the checkout on ``PYTHONPATH``, so its files are the ones imported): ``make
notebook`` installs it into the virtual environment, ``python -m lpviz.dashboard.in_jupyter
--user`` into your own Jupyter.

Each output in a notebook is its own Bokeh document, unlike a served session
(one document). Panel 1.9 renders stylesheets from the *current* document's
cache and from its CDN: a Start pressed in one output that redraws a view shown
in another then fails with "Models must be owned by only a single document",
and a redraw after the first render asks the CDN for its CSS (offline:
failed requests). :func:`extension` makes every render take the stylesheets
of the document it renders into, inline. :func:`session` builds fresh
settings, data and chains, so each section of a notebook owns its own and a
later cell never changes what an earlier one shows.
"""

import argparse
import sys
import warnings
import weakref
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

KERNEL_NAME = "lpviz"
KERNEL_DISPLAY_NAME = "lpviz (this checkout)"
CHECKOUT = Path(__file__).resolve().parents[2]


def install_kernel(*, user=False, prefix=None):
    """Register the ``lpviz`` Jupyter kernel: this Python, with this checkout on ``PYTHONPATH`` so that
    a notebook in any folder imports the checkout's lpviz. Returns the kernelspec's folder.

    ``user``: into your own Jupyter data folder; ``prefix``: into ``PREFIX/share/jupyter``
    (``sys.prefix`` for the virtual environment's JupyterLab, as ``make notebook`` does)."""
    from ipykernel.kernelspec import install

    return install(
        user=user,
        prefix=None if user else str(prefix or sys.prefix),
        kernel_name=KERNEL_NAME,
        display_name=KERNEL_DISPLAY_NAME,
        env={"PYTHONPATH": str(CHECKOUT)},
    )


_INLINE_SHEETS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # document -> {url: InlineStyleSheet}


def _inline(sheet, cache):
    """An ImportedStyleSheet of Panel's CDN as the document's one InlineStyleSheet of the same file."""
    from bokeh.models import ImportedStyleSheet
    from panel.io.notebook import replace_inline_css

    if not isinstance(sheet, ImportedStyleSheet):
        return sheet
    url = str(sheet.url)
    if url not in cache:
        cache[url] = replace_inline_css(sheet)  # the sheet itself when it is not one of Panel's files
    return cache[url]


def _patch_panel_stylesheets():
    """Render each model's stylesheets for the document the model lives in, inline (see the module).

    Mends: Panel 1.9.4 / Bokeh 3.9.2 (``Reactive._get_properties`` takes the style sheet models of
    ``pn.state.curdoc``'s cache, not of the document it renders for, and renders them as imports of
    Panel's CDN; no upstream issue known). It may go once Panel renders for the given document, inline
    in a notebook: tests/test_mends_upstream.py::test_panel_still_renders_style_sheets_of_the_current_document
    then fails."""
    from panel.io.state import set_curdoc
    from panel.reactive import Reactive

    original = Reactive._get_properties
    if getattr(original, "_lpviz_notebook", False):
        return

    def _get_properties(self, doc):
        # Panel takes cached stylesheets from pn.state.curdoc (the output whose button was pressed)
        with set_curdoc(doc) if doc is not None else nullcontext():
            properties = original(self, doc)
        if doc is not None and "stylesheets" in properties:
            cache = _INLINE_SHEETS.setdefault(doc, {})
            properties["stylesheets"] = [_inline(sheet, cache) for sheet in properties["stylesheets"]]
        return properties

    _get_properties._lpviz_notebook = True  # marks the patch as applied
    _get_properties.__wrapped__ = original  # Panel's own (tests/test_mends_upstream.py runs it unpatched)
    Reactive._get_properties = _get_properties  # see the module docstring


def extension(*extensions, **config):
    """``pn.extension`` for lpviz's views in a notebook: resources inline (no internet needed, also
    for what is redrawn later) and views that can be shown in several outputs. Takes
    ``pn.extension``'s arguments."""
    import panel as pn

    from lpviz.dashboard.serving.resources import reuse_design_modifiers, serialize_patches_lazily

    _patch_panel_stylesheets()
    reuse_design_modifiers()
    serialize_patches_lazily()
    pn.extension(*extensions, inline=True, **config)
    problem = subshell_problem(_running_kernel())
    if problem:
        warnings.warn(problem, RuntimeWarning, stacklevel=2)


# JupyterLab >= 4.4 sends widget messages to a kernel subshell when the kernel has them (ipykernel >= 7):
# a click then runs on the subshell's thread while the main thread drains the chains, and the two
# threads' updates interleave on the view's comm. The browser drops what it cannot parse ("s is not
# iterable", "Expected binary fragment") and a view stops following its chains (a fit reading
# "running" after Pause). jupyterlab/jupyterlab#19719; the test extra pins ipykernel < 7.
SUBSHELL_FIX = (
    "install ipykernel < 7 in this kernel's environment (pip install 'ipykernel<7', as "
    "'make notebook' does), or set JupyterLab's Settings > Settings Editor > Kernel > "
    "'Kernel Comms over subshells' to 'disabled'"
)


def _running_kernel():
    """The IPython kernel this code runs in, or None (a script, a test)."""
    try:
        from ipykernel.kernelbase import Kernel
    except ImportError:
        return None
    return Kernel.instance() if Kernel.initialized() else None


def subshell_problem(kernel):
    """What is wrong with running lpviz's live views in ``kernel`` ('' if nothing): a kernel with
    subshells may run the views' clicks on another thread than their updates."""
    if kernel is None or not getattr(kernel, "_supports_kernel_subshells", False):
        return ""
    return (
        "this kernel has subshells (ipykernel >= 7): JupyterLab may run the views' buttons on a "
        "thread of their own, beside the chains' updates, and a view then stops following its "
        f"chains. To fix it, {SUBSHELL_FIX}."
    )


@dataclass(frozen=True)
class Session:
    """What one dashboard session holds: its data (settings, data set, release, truth) and its chains."""

    data: object
    fits: object

    @property
    def settings(self):
        return self.data.settings

    def run(self, n_iter=None, burn_in=None, thin=None):
        """Run the chosen methods' chains to the end here (blocking); ``{method: (status, iteration)}``.
        Views of this session show the results; their Start, Pause and Stop buttons steer the same chains."""
        schedule = {"n_iter": n_iter, "burn_in": burn_in, "thin": thin}
        self.settings.param.update(**{name: value for name, value in schedule.items() if value is not None})
        self.fits.start()
        for runner in self.fits.runners.values():
            runner.join()
        self.fits.drain()
        return {name: (runner.status, runner.iteration) for name, runner in self.fits.active.items()}


def session(**settings):
    """A fresh session: new :class:`~lpviz.dashboard.session.settings.Settings` (``settings`` are their parameters, e.g.
    ``source="synthetic-blocks"``, ``epsilon``, ``N``, ``holdout``), their data and their chains."""
    from lpviz.dashboard.session.datastore import DataStore
    from lpviz.dashboard.session.fits import Fits
    from lpviz.dashboard.session.settings import Settings

    data = DataStore(Settings(**settings))
    return Session(data=data, fits=Fits(data))


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m lpviz.dashboard.in_jupyter",
        description=f"Register the {KERNEL_NAME!r} Jupyter kernel: this Python with this checkout importable.",
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--user", action="store_true", help="into your own Jupyter data folder")
    where.add_argument("--prefix", help="into PREFIX/share/jupyter (default: this Python's sys.prefix)")
    args = parser.parse_args(argv)
    print(f"installed the {KERNEL_NAME!r} kernel in {install_kernel(user=args.user, prefix=args.prefix)}")


if __name__ == "__main__":
    main()
