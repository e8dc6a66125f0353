"""The epsilon sweep view in-process: points arrive in its data, plot and table; CSV and PNG; cancel;
data that workers cannot rebuild are refused with the reason."""

import io
import time

import holoviews as hv
import numpy as np
import pandas as pd
import pytest

from app.datastore import DataStore
from app.fits import Fits
from app.settings import Settings
from app.sweep_view import SweepView, parse_ratios
from lpviz.reproduce.chains import build_release

SMALL = dict(
    source="synthetic-topics",
    n_docs=30,
    n_words=10,
    n_components=2,
    seed=1,
    heterogeneous=False,
    epsilon=1.0,
    N=1.0,
    noise_seed=7,
    chain_seed=2,
)


def make_view(**settings):
    fits = Fits(DataStore(Settings(**{**SMALL, **settings})))
    return SweepView(fits=fits, scheduler="serial")


def drain_until_ended(view, timeout=120, stop_after_points=None):
    deadline = time.monotonic() + timeout
    arrivals = []
    while view.state not in ("finished", "cancelled", "error", "unavailable"):
        assert time.monotonic() < deadline, view.progress
        if view.drain():
            arrivals.append(len(view.points))
            if stop_after_points is not None and len(view.points) >= stop_after_points:
                view.cancel()
        time.sleep(0.01)
    return arrivals


def scatter_points(figure):
    """Points drawn per plot of the view's figure (the scatter layers)."""
    return [sum(len(layer) for layer in overlay if isinstance(layer, hv.Scatter)) for overlay in figure]


def test_points_arrive_in_the_views_data_plot_and_table_and_the_csv_has_one_row_per_point():
    view = make_view(holdout="random cells", holdout_fraction=0.2)
    assert view.ratios == "0.125, 0.25, 0.5, 1, 2, 4"  # six around the session's epsilon / N
    view.ratios = "0.5, 1, 2"
    view.n_iter = 60
    view.run()
    assert view.state == "starting" and view.cancel_button.disabled is False and view.run_button.disabled
    arrivals = drain_until_ended(view)
    assert view.state == "finished", view.progress
    assert view.progress.startswith("Sweep finished") and "7 of 7 fits done" in view.progress
    assert arrivals[-1] == 7 and len(arrivals) >= 2  # more than one delivery: they streamed in
    points = view.points
    assert list(points["method"]) == ["private"] * 3 + ["naive"] * 3 + ["nonprivate"]
    assert list(points["epsilon_over_N"].iloc[:3]) == [0.5, 1.0, 2.0] and np.isnan(points["epsilon_over_N"].iloc[6])
    assert points["heldout_mae"].notna().all() and points["npmi"].notna().all()
    # one plot per score (MAE, held-out MAE, NPMI), each with the six noised points
    figure = view.plot.object
    assert [overlay.label or overlay.opts.get().kwargs["title"] for overlay in figure] == [
        "MAE",
        "held-out MAE",
        "NPMI",
    ]
    assert scatter_points(figure) == [6, 6, 6]
    assert len(view.table.object) == 7 and "held-out MAE" in view.table.object.columns
    csv = pd.read_csv(io.StringIO(view.csv_download.callback().getvalue()))
    assert len(csv) == 7 and list(csv["method"]) == list(points["method"])
    np.testing.assert_allclose(csv["mae"], points["mae"])
    assert view.csv_download.disabled is False and view.cancel_button.disabled and not view.run_button.disabled
    assert view.png_bytes()[:4] == b"\x89PNG"


def test_the_point_at_the_sessions_noise_level_is_the_sessions_release():
    view = make_view(holdout="random cells", holdout_fraction=0.2)
    view.ratios = "0.5, 1, 2"
    tasks = {task.id: task for task in view.tasks()}
    _, release, truth = build_release(tasks["eps_over_N=1--private"].params)
    session = view.fits.data
    np.testing.assert_array_equal(release.Y_obs, session.release.Y_obs)
    np.testing.assert_array_equal(release.heldout, session.release.heldout)
    np.testing.assert_array_equal(truth.Y, session.truth.Y)
    assert tasks["eps_over_N=1--private"].params["model"] == session.model


def test_cancel_stops_the_sweep_with_fewer_points_and_says_so():
    view = make_view()
    view.n_iter = 200
    view.run()
    drain_until_ended(view, stop_after_points=1)
    assert view.state == "cancelled" and "cancelled" in view.progress
    assert 1 <= len(view.points) < 13
    assert f"{len(view.points)} of 13 fits done" in view.progress
    # the plots span the whole grid (0.125 to 4), not only the points that came in
    xlim = hv.Store.lookup_options("bokeh", view.plot.object[0], "plot").kwargs["xlim"]
    assert xlim[0] < 0.125 and xlim[1] > 4
    assert len(pd.read_csv(io.StringIO(view.csv_text()))) == len(view.points)


def test_typed_values_are_checked_and_the_grid_follows_the_session_until_values_are_typed():
    view = make_view()
    view.fits.settings.epsilon = 2.0
    assert view.ratios == "0.25, 0.5, 1, 2, 4, 8"
    view.ratios = "1 3; 0.2"
    assert parse_ratios(view.ratios) == [0.2, 1.0, 3.0]
    view.fits.settings.epsilon = 0.5
    assert view.ratios == "1 3; 0.2"  # typed values stay
    view.ratios = "1, two"
    view.run()
    assert view.state == "unavailable" and "write numbers separated by commas" in view.progress
    view.ratios = "0, 1"
    view.run()
    assert view.state == "unavailable" and "positive" in view.progress


def test_an_upload_cannot_be_swept_and_the_view_says_why():
    view = make_view()
    view.fits.data.load_upload(b"source,target,count\nann,bob,3\nbob,cy,2\ncy,ann,1\nann,cy,4\n", "mail.csv")
    assert view.fits.data.release is not None
    assert "uploaded file" in view.unavailable_reason()
    view.run()
    assert view.state == "unavailable" and "uploaded file lives only in this session" in view.progress
    assert view.points is None and view.cancel_button.disabled


@pytest.mark.parametrize("source", ["synthetic-blocks"])
def test_a_network_sweeps_without_npmi(source):
    view = make_view(source=source, size=12, n_components=2, heterogeneous=False)
    view.ratios = "1, 2"
    view.n_iter = 40
    view.run()
    drain_until_ended(view)
    assert view.state == "finished", view.progress
    assert len(view.points) == 5 and view.points["npmi"].isna().all()
    assert len(view.plot.object) == 1  # MAE only
