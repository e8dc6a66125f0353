"""``panel serve app/app.py``: the dashboard of this checkout's lpviz, as ``lpviz serve`` serves it.

The page is :mod:`lpviz.dashboard.app`; this file only hands Panel's script runner to it.
"""

from lpviz.dashboard.app import configure, serve_page

if __name__.startswith("bokeh"):
    configure()  # each session's Panel configuration (the import above configured the first)
    serve_page()
