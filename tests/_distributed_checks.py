"""Checks shared by the tests of fits over a Dask cluster (test_distributed, test_distributed_vi)."""

import numpy as np

import lpviz
from lpviz.metrics import score
from lpviz.release import Truth


def check_excluded_cells(client, release, Y, options, workers, differences):
    """A release with held-out cells (and structural zeros) fitted over ``workers`` workers (each
    count in turn) gives the one-process fit (``differences(ours, theirs) == []``: the same bits)
    and its score: the same MAE and held-out MAE, to the bit. ``Y``: the true counts; the
    non-private method fits them."""
    if options["method"] == "nonprivate":
        options = dict(options, truth=Truth(Y))
    reference = lpviz.fit(release, **options)
    expected = score(reference, release, Truth(Y))
    assert np.isfinite(expected["heldout_mae"])
    for n_workers in workers:
        posterior = lpviz.fit(release, scheduler=client, workers=n_workers, **options)
        assert differences(posterior, reference) == [], f"{options} on {n_workers} workers"
        scores = score(posterior, release, Truth(Y))
        assert (scores["mae"], scores["heldout_mae"]) == (expected["mae"], expected["heldout_mae"])
