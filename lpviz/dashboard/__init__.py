"""The lpviz dashboard: thin Panel viewers over the lpviz library, in three layers.

- :mod:`lpviz.dashboard.views`: one module per tab and its plots (what a person sees).
- :mod:`lpviz.dashboard.session`: what one page holds: its settings, data store, fits and
  their runner, presets.
- :mod:`lpviz.dashboard.serving`: pacing, the server processes' balancer, and every mend of
  Panel's or Bokeh's internals (each names the upstream versions it mends).

Imports only go down: views -> session -> serving -> the library. Above them,
:mod:`lpviz.dashboard.app` assembles one page (``panel serve`` runs it as its script),
:mod:`lpviz.dashboard.serve` starts the server, :mod:`lpviz.dashboard.in_jupyter` shows the
views in a notebook.

``from lpviz.dashboard import Dashboard`` is the whole dashboard as one Panel object
(:class:`~lpviz.dashboard.page.Dashboard`): in a Jupyter cell, or ``Dashboard().servable()`` under
``panel serve``; ``lpviz serve`` serves it with safe defaults.
"""

import warnings

__all__ = ["Dashboard"]

# lpviz's downloads draw their progress with tqdm.auto, which in a kernel without ipywidgets
# warns in red at import and falls back to a text bar: the text bar is what we want.
warnings.filterwarnings("ignore", message="IProgress not found", module="tqdm")


def __getattr__(name):
    # Panel, Bokeh and HoloViews load only when the dashboard is asked for, not with lpviz.dashboard.serve's options
    if name == "Dashboard":
        from lpviz.dashboard.page import Dashboard

        return Dashboard
    raise AttributeError(f"module 'lpviz.dashboard' has no attribute {name!r}")
