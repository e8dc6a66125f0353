"""The lpviz dashboard: thin Panel viewers over the lpviz library.

``settings.py`` holds what a person sets (``param``); ``datastore.py`` derives
the data set, the release and the truth from it through the library;
``fits.py`` runs one chain per registered method in worker threads;
``throttle.py`` is the one pacing mechanism. Every other module is one view;
``app.py`` assembles them into a template (``panel serve app/app.py``); the
same views display in Jupyter after ``pn.extension()``.
"""
