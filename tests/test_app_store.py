"""The dashboard's data store and noise view, without a browser."""

import time

import holoviews as hv
import numpy as np
import pytest

from app.noise_view import NoiseView, colour_limit, display_slice
from app.store import DataStore
from lpviz.privacy import alpha_from, heterogeneous_alpha, privatize, truncate


@pytest.fixture
def store():
    return DataStore()


def test_default_is_figure3_synthetic_topics_noised_with_epsilon_and_N(store):
    assert store.source == "synthetic-topics" and store.model == "topics"
    assert store.Y_true.shape == (90, 15) and store.Y_obs.shape == (90, 15)
    assert store.Y_obs.dtype == np.int64
    assert store.n_components == 3
    assert store.alpha == pytest.approx(np.exp(-store.epsilon / store.N))
    expected = privatize(store.Y_true, alpha=store.alpha, random_state=store.noise_seed)
    np.testing.assert_array_equal(store.Y_obs, expected)
    assert (store.Y_obs < 0).any(), "the noised counts should go below zero somewhere"
    assert store.error == ""


def test_alpha_depends_only_on_epsilon_over_N(store):
    store.param.update(epsilon=2.0, N=4.0)
    assert store.alpha == pytest.approx(alpha_from(2.0, 4.0))
    first = store.Y_obs.copy()
    store.param.update(epsilon=1.0, N=2.0)
    assert store.alpha == pytest.approx(np.exp(-0.5))
    np.testing.assert_array_equal(store.Y_obs, first)  # same eps/N, same noise seed: same release
    assert "eps/N = 0.5" in store.alpha_summary


def test_smaller_epsilon_means_more_noise(store):
    store.epsilon = 5.0
    low_noise = np.abs(store.Y_obs - store.Y_true).mean()
    store.epsilon = 0.2
    high_noise = np.abs(store.Y_obs - store.Y_true).mean()
    assert high_noise > 3 * low_noise


def test_redraw_noise_changes_the_release_not_the_truth(store):
    Y_true, Y_obs = store.Y_true.copy(), store.Y_obs.copy()
    store.redraw_noise()
    np.testing.assert_array_equal(store.Y_true, Y_true)
    assert (store.Y_obs != Y_obs).any()
    assert store.runners["private"].problem.Y_obs is store.Y_obs


def test_heterogeneous_noise_gives_one_alpha_per_row(store):
    store.param.update(heterogeneous=True, alpha0=0.7, concentration=10)
    assert np.shape(store.alpha) == (90,)
    np.testing.assert_allclose(store.alpha, heterogeneous_alpha(90, 0.7, concentration=10,
                                                                random_state=store.noise_seed))
    np.testing.assert_array_equal(store.Y_obs, privatize(store.Y_true, alpha=store.alpha,
                                                         random_state=store.noise_seed))
    assert "heterogeneous" in store.alpha_summary


def test_synthetic_blocks_use_figure1_N_and_leave_self_loops_out(store):
    store.source = "synthetic-blocks"
    assert store.model == "blocks" and store.Y_true.shape == (20, 20)
    assert store.n_components == 5
    off_diagonal = ~np.eye(20, dtype=bool)
    assert store.N == pytest.approx(store.Y_true[off_diagonal].mean())
    assert not store.mask.diagonal().any() and store.mask[off_diagonal].all()
    np.testing.assert_array_equal(np.diag(store.Y_obs), 0)
    problem = store.runners["naive"].problem
    assert problem.model == "blocks" and problem.mask is store.mask
    assert problem.reference_name == "true rates" and problem.reference is store.data.mu


def test_sizes_and_seed_rebuild_the_data_and_reset_the_runners(store):
    store.param.update(n_docs=30, n_words=12)
    assert store.Y_true.shape == (30, 12)
    assert store.runners["private"].problem.Y_true.shape == (30, 12)
    before = store.Y_true.copy()
    store.seed = 5
    assert store.Y_true.shape == (30, 12) and (store.Y_true != before).any()




def test_store_holdout_reaches_the_chains(store):
    store.holdout = "random cells"
    assert store.mask.dtype == bool and 0 < (~store.mask).sum() < store.mask.size
    assert store.runners["nonprivate"].problem.mask is store.mask


@pytest.mark.parametrize("name, value", [("epsilon", 0.0), ("epsilon", -1.0), ("N", 0.0), ("alpha0", 1.0)])
def test_bad_privacy_settings_are_refused(store, name, value):
    with pytest.raises(ValueError):
        setattr(store, name, value)


def test_missing_enron_file_is_reported_and_keeps_the_data(store, tmp_path):
    shape = store.Y_true.shape
    missing = tmp_path / "nowhere.tar.gz"
    store.param.update(path=str(missing))
    store.source = "enron-network"
    assert str(missing) in store.error and "Download" in store.error
    assert store.Y_true.shape == shape and store.model == "topics"


def test_upload_an_edge_list(store):
    store.load_upload(b"source,target,count\nann,bob,3\nbob,cy,2\ncy,ann,1\nann,cy,4\n", "mail.csv")
    assert store.source == "upload" and store.error == ""
    assert store.model == "blocks" and store.Y_true.shape == (3, 3)
    assert store.Y_true.sum() == 10
    assert store.data.row_labels == ["ann", "bob", "cy"]


def test_empty_or_malformed_upload_says_what_is_wrong(store):
    with pytest.raises(ValueError, match="empty"):
        store.load_upload(b"", "counts.csv")
    with pytest.raises(ValueError, match="counts.csv|line"):
        store.load_upload(b"a,b,c,d\n1,2,-3,4\n5,6,7,8\n", "counts.csv")
    assert store.source == "synthetic-topics"


def test_background_build_reports_through_drain_and_the_newest_request_wins(tmp_path):
    store = DataStore(background=True)
    assert store.Y_obs.shape == (90, 15)  # synthetic data take milliseconds: built at once
    store.param.update(path=str(tmp_path / "first.tar.gz"))
    store.source = "enron-network"  # Enron is built in a thread: the UI stays responsive
    assert store.loading
    store.path = str(tmp_path / "second.tar.gz")
    deadline = time.monotonic() + 30
    while store.loading and time.monotonic() < deadline:
        time.sleep(0.05)
        store.drain()
    assert not store.loading
    assert "second.tar.gz" in store.error and "first.tar.gz" not in store.error
    assert store.Y_obs.shape == (90, 15)  # the last good data stay


def _images(pane):
    return list(pane.object.traverse(lambda element: element, [hv.Image]))


def test_noise_view_shows_true_noised_truncated_on_one_symmetric_scale(store):
    view = NoiseView(store=store)
    images = _images(view.heatmaps())
    assert len(images) == 3
    true_image, noised_image, truncated_image = images
    np.testing.assert_array_equal(true_image.dimension_values(2, flat=False).shape, (90, 15))
    # rows run down the page in the order of the matrix
    assert noised_image[3.0, 7.0] == store.Y_obs[7, 3]
    assert truncated_image[3.0, 7.0] == truncate(store.Y_obs)[7, 3]
    clims = {image.opts.get().kwargs["clim"] for image in images}
    assert len(clims) == 1
    low, high = clims.pop()
    values = np.abs(np.concatenate([store.Y_true.ravel(), store.Y_obs.ravel()]))
    assert low == -high
    assert np.mean(values <= high) >= 0.995 and high <= values.max()
    assert "RdBu" in images[1].opts.get().kwargs["cmap"]
    before = noised_image.dimension_values(2).copy()
    store.epsilon = 0.3
    after = _images(view.heatmaps())[1].dimension_values(2)
    assert (after != before).any()


def test_noise_view_subsamples_big_matrices_with_a_note(store):
    store.param.update(n_docs=700)
    view = NoiseView(store=store)
    assert display_slice(store.Y_true.shape) == (3, 1)
    image = _images(view.heatmaps())[0]
    assert image.dimension_values(2, flat=False).shape == (234, 15)
    assert "subsampled" in view.summary().object
    assert "subsampled" not in NoiseView(store=DataStore()).summary().object


def test_colour_scale_stops_at_a_high_quantile_for_heavy_tails():
    light = np.arange(10).reshape(2, 5)
    assert colour_limit(light, -light) == (9.0, False)  # nothing to clip: the scale reaches the maximum
    heavy = np.ones((40, 50), dtype=int)
    heavy[0, 0] = 700  # one busy pair
    limit, clipped = colour_limit(heavy)
    assert clipped and limit < 700
    assert colour_limit(np.zeros((3, 3))) == (1.0, False)  # all zero: still a usable scale
