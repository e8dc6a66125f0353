"""The dashboard's views: one module per tab (``*_view.py``, ``export``, ``teaching``) and the plots
and live figures they share. Views read a session (:mod:`lpviz.dashboard.session`) and never change
the library's state themselves."""
