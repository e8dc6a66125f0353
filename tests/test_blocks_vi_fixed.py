"""The block model's CAVI sums its receiver statistic in fixed point (lpviz.models.blocks), so
the fit is the same bits on any number of kernel threads or chunks, and is still a coordinate
ascent (its ELBO never falls)."""

import numpy as np
import pytest

from lpviz import _parallel
from lpviz.vi import VariationalFit
from tests.test_vi import block_problem


def fit_of(data, method, **options):
    Y, Y_obs, alpha, mask, _ = data
    fit = VariationalFit(
        Y if method == "nonprivate" else Y_obs,
        model="blocks",
        method=method,
        n_components=3,
        mask=mask,
        alpha=alpha if method == "private" else None,
        tol=0.0,
        random_state=4,
        **options,
    )
    return fit, np.array([state.elbo for state in fit.iterate(12)])


@pytest.mark.parametrize("method", ["nonprivate", "private"])
def test_block_cavi_is_the_same_bits_on_any_number_of_threads(method, monkeypatch):
    # 200 actors: 25 stream blocks, 4 chunks per thread
    data = block_problem(200, 3, seed=6)
    serial, serial_elbo = fit_of(data, method, parallel=False)
    assert serial._work.bounds == [(0, 25)]
    for threads in (1, 3):
        monkeypatch.setenv("LPVIZ_NUM_THREADS", str(threads))
        monkeypatch.setattr(_parallel, "_pool", None)  # a pool with that many workers
        fit, elbo = fit_of(data, method, parallel=True)
        _parallel._pool.shutdown()
        assert len(fit._work.bounds) == 4 * threads
        np.testing.assert_array_equal(elbo, serial_elbo)
        np.testing.assert_array_equal(fit.mu, serial.mu)
        for ours, theirs in zip(fit.q, serial.q, strict=True):
            np.testing.assert_array_equal(ours.gamma_shape, theirs.gamma_shape)
            np.testing.assert_array_equal(ours.gamma_rate, theirs.gamma_rate)


def test_block_cavi_with_fixed_point_sums_still_never_falls():
    data = block_problem(60, 3, seed=7)
    fit, elbo = fit_of(data, "nonprivate", parallel=True)
    assert len(fit._work.bounds) > 1  # the sums really come from several chunks
    steps = np.diff(elbo)
    assert np.all(steps >= -1e-9 * np.abs(elbo[1:])), steps.min()
    assert elbo[-1] > elbo[0] + 1.0


def test_block_cavi_refuses_counts_beyond_the_fixed_point_range():
    Y = np.zeros((12, 12))
    Y[:, 0] = 2.0**38  # actor 0 receives 11 * 2^38 > 2^40
    Y[0, 0] = 0.0
    with pytest.warns(UserWarning, match="far beyond"):  # the engine's warning on such counts
        fit = VariationalFit(Y, model="blocks", method="nonprivate", n_components=2, random_state=0)
    with pytest.raises(ValueError, match="beyond the .* exact sums hold; fit with inference='mcmc'"):
        fit.step(1)
