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
"""
