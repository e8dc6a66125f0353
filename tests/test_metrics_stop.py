"""Issue 37: lpviz.metrics.score's ``should_stop`` (a dashboard's Stop, Reset or closed session
during a large fit's final score) stops it between row blocks and changes no number otherwise."""

import numpy as np
import pytest

from lpviz import metrics
from lpviz.metrics import ScoreStopped, score


@pytest.fixture(scope="module")
def fitted():
    import lpviz
    from lpviz.datasets import make_topics

    data = make_topics(random_state=1)
    heldout = np.zeros(data.Y.shape, dtype=bool)
    heldout[::3, ::2] = True
    release, truth = data.release(), data.truth()
    one = lpviz.fit(release, n_components=3, n_iter=30, thin=5, random_state=2)
    two = lpviz.fit(release, n_components=3, n_iter=30, thin=5, random_state=2, chains=2)
    return release, truth, one, two


class Asked:
    """A should_stop that answers True from its ``at``-th question on (never, with at=None)."""

    def __init__(self, at=None):
        self.at, self.asked = at, 0

    def __call__(self):
        self.asked += 1
        return self.at is not None and self.asked >= self.at


@pytest.mark.parametrize("which", ["one chain", "two chains"])
def test_should_stop_changes_no_number_and_stops_at_every_point_it_is_asked(fitted, which, monkeypatch):
    release, truth, one, two = fitted
    fit = one if which == "one chain" else two
    monkeypatch.setattr(metrics, "_SCORE_BLOCK_CELLS", 1)  # a row a block: many points to stop at
    metrics._NOISED_CACHE.clear()
    metrics._BASELINE_CACHE.clear()
    whole = score(fit, release, truth)
    metrics._NOISED_CACHE.clear()
    metrics._BASELINE_CACHE.clear()
    never = Asked()
    assert score(fit, release, truth, should_stop=never) == whole
    # asked between row blocks of every pass (the rates, the noised counts, the baselines), not once
    assert never.asked > 3 * release.shape[0]
    for at in sorted({1, 2, release.shape[0], never.asked // 2, never.asked}):
        metrics._NOISED_CACHE.clear()
        metrics._BASELINE_CACHE.clear()
        asked = Asked(at)
        with pytest.raises(ScoreStopped):
            score(fit, release, truth, should_stop=asked)
        assert asked.asked == at  # it left at the first True
        # a stopped score leaves nothing behind: no half-made cache, no should_stop in this thread
        assert score(fit, release, truth) == whole
