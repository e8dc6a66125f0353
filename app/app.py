"""The lpviz dashboard: ``panel serve app/app.py`` (or ``make serve``).

Only assembles the template: every session gets its own
:class:`~app.store.DataStore` (data, noise, chains), shown in the sidebar,
and one view per tab.
"""

import importlib
import sys
from pathlib import Path

# `panel serve app/app.py` runs this file as a script with app/ on sys.path,
# where `import app` would find this very file: put the repository first.
REPO = Path(__file__).resolve().parents[1]
if sys.path[:1] != [str(REPO)]:
    sys.path.insert(0, str(REPO))
if not hasattr(sys.modules.get("app"), "__path__"):
    sys.modules.pop("app", None)

import panel as pn  # noqa: E402

from app.fits_view import FitsView  # noqa: E402
from app.noise_view import NoiseView  # noqa: E402
from app.store import DataStore  # noqa: E402

pn.extension(notifications=True, sizing_mode="stretch_width")

# The result and explanation views (tab title, module, class); a tab whose
# module is not there is left out rather than breaking the app.
OPTIONAL_TABS = (("Topics", "app.topics_view", "TopicsView"),
                 ("Blocks", "app.blocks_view", "BlocksView"),
                 ("Bessel", "app.bessel_view", "BesselView"),
                 ("Privacy", "app.privacy_view", "PrivacyView"))


def optional_tabs(store):
    tabs = []
    for title, module_name, class_name in OPTIONAL_TABS:
        try:
            view_class = getattr(importlib.import_module(module_name), class_name)
        except (ImportError, AttributeError):
            continue
        tabs.append((title, view_class(store=store)))
    return tabs


def create_app():
    store = DataStore()
    tabs = pn.Tabs(("Data & noise", NoiseView(store=store)), ("Fits", FitsView(store=store)),
                   *optional_tabs(store), dynamic=True, sizing_mode="stretch_width")
    # Bootstrap rather than Fast: the Fast theme always fetches a Google font,
    # which fails (with console errors) on machines without internet access.
    return pn.template.BootstrapTemplate(
        title="lpviz: locally private Bayesian inference for count data",
        sidebar=[store], main=[tabs], sidebar_width=340, header_background="#b2182b")


if __name__.startswith("bokeh"):
    create_app().servable()
