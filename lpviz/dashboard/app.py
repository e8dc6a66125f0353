"""The served page: the script ``lpviz serve`` hands to Panel (``panel serve`` runs it per session).

Only assembles: every session gets its own :class:`~lpviz.dashboard.page.Dashboard` (settings,
data store, fits, the controls in the sidebar and one view per tab), served into its document by
:mod:`lpviz.dashboard.served`; :func:`configure` sets Panel up for served pages.
"""

from lpviz.dashboard.page import Dashboard, exported_views
from lpviz.dashboard.served import (
    FIRST_CONNECTION_CHECK_MS,
    FIRST_CONNECTION_SECONDS,
    configure,
    keep_until_connected,
    serve_dashboard,
)

__all__ = [
    "FIRST_CONNECTION_CHECK_MS",
    "FIRST_CONNECTION_SECONDS",
    "Dashboard",
    "configure",
    "create_app",
    "exported_views",
    "keep_until_connected",
    "serve_page",
]

configure()


def create_app(dashboard=None):
    """The served page (a template) of ``dashboard``, default a new :class:`Dashboard`."""
    from lpviz.dashboard.served import page_template

    return page_template(dashboard if dashboard is not None else Dashboard())


def serve_page(doc=None, dashboard=None):
    """The page of one session: ``dashboard`` (default a new :class:`Dashboard`) served into ``doc``."""
    return serve_dashboard(dashboard if dashboard is not None else Dashboard(), doc)


if __name__.startswith("bokeh"):
    serve_page()
