"""A page's first data set, when small and generated, is built at once even when served (issue 56 item 4).

Built in a thread, a served page was drawn without its data and its views again when they arrived:
half of a page open's server CPU when a class opens the dashboard together. The data are the same
as a thread's build of the same settings (the noise is the settings' seed's), and anything else (a
larger data set, a file's, any later change) is still built in a thread.
"""

import time

import numpy as np
import pytest

from lpviz.dashboard.session import datastore
from lpviz.dashboard.session.datastore import OPENING_INLINE_CELLS, DataStore
from lpviz.dashboard.session.presets import DEFAULT_PRESET
from lpviz.dashboard.session.settings import Settings


def settle(store, timeout=60):
    deadline = time.monotonic() + timeout
    while store.loading or store.release is None:
        assert time.monotonic() < deadline, store.message
        store.poll()
        time.sleep(0.01)


def test_a_small_first_data_set_is_there_at_once_and_the_same_as_a_threads():
    at_once = DataStore(Settings(preset=DEFAULT_PRESET), background=True, small_first_at_once=True)
    assert not at_once.loading and at_once.release is not None and not at_once.error
    assert at_once.release.shape == (90, 15) and "(topics)" in at_once.message
    threaded = DataStore(Settings(preset=DEFAULT_PRESET), background=True)
    assert threaded.loading and threaded.release is None  # without the flag: as before
    settle(threaded)
    # the preset's class seed: the very same noise, whichever way it was built
    np.testing.assert_array_equal(at_once.release.Y_obs, threaded.release.Y_obs)
    np.testing.assert_array_equal(at_once.truth.Y, threaded.truth.Y)
    assert at_once.built_with == threaded.built_with
    assert at_once.release is not threaded.release  # nothing shared between sessions


def test_a_random_noise_seed_is_still_the_sessions_own():
    first = DataStore(Settings(noise_seed=None), background=True, small_first_at_once=True)
    second = DataStore(Settings(noise_seed=None), background=True, small_first_at_once=True)
    assert first.settings.noise_seed != second.settings.noise_seed
    assert not np.array_equal(first.release.Y_obs, second.release.Y_obs)


def test_a_larger_first_data_set_and_every_later_change_are_built_in_a_thread():
    large = DataStore(Settings(n_docs=OPENING_INLINE_CELLS // 15 + 1), background=True, small_first_at_once=True)
    assert large.loading and large.release is None
    settle(large)
    small = DataStore(Settings(noise_seed=1), background=True, small_first_at_once=True)
    assert small.release is not None
    small.settings.n_docs = 100  # a change after the opening: in a thread, as before
    assert small.loading and small.release.shape == (90, 15)
    settle(small)
    assert small.release.shape == (100, 15)


def test_a_file_data_set_is_never_read_on_the_event_loop(tmp_path, monkeypatch):
    monkeypatch.setenv("LPVIZ_APP_DATA_FOLDERS", str(tmp_path))
    (tmp_path / "emails.tar.gz").write_bytes(b"not a tarball")
    settings = Settings(source="enron-topics", path=str(tmp_path / "emails.tar.gz"), n_docs=20, n_words=20)
    store = DataStore(settings, background=True, small_first_at_once=True)
    assert store.loading  # known to be small, but read from a file: in a thread
    deadline = time.monotonic() + 60
    while store.loading:
        assert time.monotonic() < deadline
        store.poll()
        time.sleep(0.01)
    assert "emails.tar.gz" in store.error


def test_a_served_pages_session_opens_with_its_data(monkeypatch):
    from lpviz.dashboard.session.default import default_session

    monkeypatch.setattr(datastore, "served", lambda: True)  # as in a session of a Bokeh server
    fits = default_session()
    try:
        assert fits.data._background and not fits.data.loading
        assert fits.data.release is not None and fits.data.release.shape == (90, 15)
    finally:
        fits.close()


@pytest.mark.parametrize("preset", ["Figure 1", "Table 1 (VI paper, reduced)"])
def test_other_presets_small_data_open_at_once_too(preset):
    store = DataStore(Settings(preset=preset), background=True, small_first_at_once=True)
    assert not store.loading and store.release is not None and not store.error


def test_the_header_spinner_updates_its_text_alone():
    """The spinner is a root of the page's template: Panel's update of a pane set every property of its
    model, the template's tags and style sheets replaced at the first, and BokehJS laid the root out
    again. With the data there as a page opens, that first update came at the first Start."""
    import panel as pn
    import param
    from bokeh.document import Document

    from lpviz.dashboard.serving.paint import SPINNER_CSS, BusySpinner, busy_spinner

    class Busy(param.Parameterized):
        busy = param.Boolean(default=False)

    state = Busy()
    spinner = BusySpinner(pn.bind(busy_spinner, state.param.busy), width=24, height=24, stylesheets=[SPINNER_CSS])
    doc = Document()
    pn.state.curdoc = doc
    try:
        pn.template.BootstrapTemplate(title="spinner", header=[spinner]).server_doc(doc)
        (model,) = {id(m): m for m, _ in spinner._models.values()}.values()
        tags, sheets = list(model.tags), list(model.stylesheets)
        assert "header" in tags
        state.busy = True
        assert "spin" in model.text
        assert model.tags == tags and model.stylesheets == sheets
        state.busy = False
        assert "spin" not in model.text
    finally:
        pn.state.curdoc = None
