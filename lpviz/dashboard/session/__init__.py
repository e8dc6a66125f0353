"""What one dashboard page holds: its :class:`~lpviz.dashboard.session.settings.Settings`, the data
store derived from them (data set, release, truth), its fits and the runner that runs their chains
(in the server's threads or on Dask workers: :mod:`~lpviz.dashboard.session.remote`), the presets,
and the memory budget. No Panel view is imported here."""
