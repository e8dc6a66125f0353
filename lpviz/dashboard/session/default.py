"""What one dashboard session opens on: its settings, data store and chains.

The factory lives here, above :mod:`lpviz.dashboard.session.settings`, :mod:`lpviz.dashboard.session.datastore` and
:mod:`lpviz.dashboard.session.fits`, which it assembles; :mod:`lpviz.dashboard.session.presets` holds the presets only,
so that the settings can read them without a circle back through the fits.
"""

from lpviz.dashboard.session.datastore import DataStore
from lpviz.dashboard.session.fits import Fits
from lpviz.dashboard.session.presets import DEFAULT_PRESET
from lpviz.dashboard.session.settings import Settings


def default_session(**settings):
    """A session's chains (:class:`~lpviz.dashboard.session.fits.Fits`, its data as ``.data``) opening on
    :data:`~lpviz.dashboard.session.presets.DEFAULT_PRESET`; ``settings`` given here win over the preset's."""
    # a small data set built at once even when served: the page is drawn once, with its data
    return Fits(DataStore(Settings(**{"preset": DEFAULT_PRESET, **settings}), small_first_at_once=True))
