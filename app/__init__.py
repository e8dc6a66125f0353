"""The lpviz dashboard: Panel viewers over the lpviz library.

``app/store.py`` holds one session's data, noise and chain runners;
every other module is one view taking that store. ``app/app.py`` assembles
them into a template (``panel serve app/app.py``); the same views display in
Jupyter after ``pn.extension()``.
"""
