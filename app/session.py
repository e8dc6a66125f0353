"""What one dashboard session opens on: its settings, data store and chains.

The factory lives here, above :mod:`app.settings`, :mod:`app.datastore` and
:mod:`app.fits`, which it assembles; :mod:`app.presets` holds the presets only,
so that the settings can read them without a circle back through the fits.
"""

from app.datastore import DataStore
from app.fits import Fits
from app.presets import DEFAULT_PRESET
from app.settings import Settings


def default_session(**settings):
    """A session's chains (:class:`~app.fits.Fits`, its data as ``.data``) opening on
    :data:`~app.presets.DEFAULT_PRESET`; ``settings`` given here win over the preset's."""
    return Fits(DataStore(Settings(preset=DEFAULT_PRESET, **settings)))
