import numpy as np
import pytest

from lpviz.datasets import holdout_mask


def test_top_actors_hides_their_rows_and_columns_in_both_roles():
    Y = np.zeros((6, 6), dtype=np.int64)
    Y[4, :] = 10  # actor 4 sends most
    Y[:, 1] = 7  # actor 1 receives most
    mask = holdout_mask(Y, "blocks", "top actors", n_actors=1)
    for actor in (4, 1):  # held out as sender and as recipient
        assert not mask[actor].any() and not mask[:, actor].any()
    others = [0, 2, 3, 5]
    assert mask[np.ix_(others, others)].all()


def test_top_actors_for_documents_hides_top_rows_and_top_columns_only():
    Y = np.ones((5, 4), dtype=np.int64)
    Y[3, :] = 9
    Y[:, 0] += 20
    mask = holdout_mask(Y, "topics", "top actors", n_actors=1)
    assert not mask[3].any() and not mask[:, 0].any()
    assert mask[np.ix_([0, 1, 2, 4], [1, 2, 3])].all()
    assert mask[:, 3].sum() == 4  # column 3 is not mirrored to row 3's role


def test_random_cells_hold_out_the_fraction_reproducibly():
    Y = np.ones((200, 100))
    mask = holdout_mask(Y, "topics", "random cells", fraction=0.2, random_state=1)
    assert abs((~mask).mean() - 0.2) < 0.01
    np.testing.assert_array_equal(mask, holdout_mask(Y, "topics", "random cells", fraction=0.2, random_state=1))
    assert not np.array_equal(mask, holdout_mask(Y, "topics", "random cells", fraction=0.2, random_state=2))


def test_none_and_bad_requests():
    Y = np.ones((4, 4))
    assert holdout_mask(Y, "topics", "none") is None
    with pytest.raises(ValueError, match="unknown holdout 'everything'"):
        holdout_mask(Y, "topics", "everything")
    with pytest.raises(ValueError, match="leaves no observed cell"):
        holdout_mask(Y, "blocks", "top actors", n_actors=4)
    with pytest.raises(ValueError, match="share of cells"):
        holdout_mask(Y, "topics", "random cells", fraction=1.5)
    with pytest.raises(ValueError, match="at least two modes"):
        holdout_mask(np.ones(4), "topics", "none")
