"""Serving the dashboard: pacing (:mod:`~lpviz.dashboard.serving.throttle`), the front that spreads
pages over server processes (:mod:`~lpviz.dashboard.serving.balancer`), the event-loop watch, and
every mend of Panel's or Bokeh's internals (:mod:`~lpviz.dashboard.serving.writes`,
:mod:`~lpviz.dashboard.serving.resources`, :mod:`~lpviz.dashboard.serving.paint`). Nothing here
imports a view or a session."""
