"""The callback of a chain over a Dask cluster (lpviz.distributed): an iteration's score runs in the
next iteration's round (Partition.step), so its log joint and its callback come one sweep later; the
callback still sees, for every iteration t in order, what the one-process chain's callback sees for
t (the iteration number, the log joint and log marginal to the bit, the shared factors drawn at t),
once each, the last iteration's included, around checkpoints and after a resume too."""

import numpy as np
import pytest

import lpviz
from lpviz import distributed
from lpviz.datasets import make_tensor, make_topics
from tests._distributed_checks import same_chain, with_truth

pytest.importorskip("distributed")

CLUSTER_WORKERS = 3  # the conftest's client: a LocalCluster of 3 worker threads


@pytest.fixture(scope="module")
def data():
    # 61 rows: 8 stream blocks, the last partial; 40 words: the private method's sparse step is on
    return make_topics(n_docs=61, n_words=40, random_state=3)


def _recorder():
    """A callback and the list it fills: per call (iteration, log joint, log marginal, the factors)."""
    calls = []

    def callback(state):
        calls.append((state.iteration, state.log_joint, state.log_marginal, state.factors))

    return callback, calls


def _check_same_calls(ours, theirs, shared_names, n_iter, first=1):
    """``ours`` (over the cluster) against ``theirs`` (one process, the same seed): one call per
    iteration ``first..n_iter`` in order, the last included, with the same numbers to the bit
    (``float.hex``: NaN, the non-private chain's log marginal, equals NaN) and the same shared factors."""
    assert [call[0] for call in theirs] == list(range(first, n_iter + 1))  # the reference itself
    assert [call[0] for call in ours] == list(range(first, n_iter + 1))
    assert len(ours) == len(theirs) == n_iter - first + 1
    assert [(t, lj.hex(), lm.hex()) for t, lj, lm, _ in ours] == [(t, lj.hex(), lm.hex()) for t, lj, lm, _ in theirs]
    for (t, _, _, factors), (_, _, _, expected) in zip(ours, theirs, strict=True):
        assert sorted(factors) == sorted(shared_names), f"iteration {t}"  # theta stays on the workers
        for name in shared_names:
            assert np.array_equal(factors[name], expected[name]), f"{name} at iteration {t}"


def _traces_match_calls(posterior, calls):
    """The callback's numbers are the posterior's traces (same bits)."""
    start = len(posterior.log_joint) - len(calls)
    assert [lj.hex() for _, lj, _, _ in calls] == [float(x).hex() for x in posterior.log_joint[start:]]
    assert [lm.hex() for _, _, lm, _ in calls] == [float(x).hex() for x in posterior.log_marginal[start:]]


@pytest.mark.parametrize("method", ["private", "naive", "nonprivate"])
def test_each_iteration_is_called_back_once_with_the_one_process_values(client, data, method):
    options = with_truth(dict(method=method, n_components=3, n_iter=7, burn_in=2, thin=2, random_state=11), data.Y)
    release = data.release()
    callback, theirs = _recorder()
    reference = lpviz.fit(release, callback=callback, **options)
    for n_workers in (1, 2, 3):
        callback, ours = _recorder()
        posterior = lpviz.fit(release, scheduler=client, workers=n_workers, callback=callback, **options)
        assert isinstance(posterior, distributed.DistributedPosterior)
        assert len(posterior.partitions) == n_workers
        _check_same_calls(ours, theirs, ["phi"], options["n_iter"])
        _traces_match_calls(posterior, ours)
        assert same_chain(posterior, reference) == [], f"{method} on {n_workers} workers"


def test_a_one_iteration_chain_calls_back_its_only_iteration(client, data):
    """n_iter = 1: no next round scores it; the end's own score (_finish_iteration) delivers it."""
    options = dict(method="private", n_components=3, n_iter=1, burn_in=0, thin=1, random_state=5)
    callback, theirs = _recorder()
    lpviz.fit(data.release(), callback=callback, **options)
    callback, ours = _recorder()
    lpviz.fit(data.release(), scheduler=client, workers=2, callback=callback, **options)
    _check_same_calls(ours, theirs, ["phi"], 1)


def test_the_tensor_chain_calls_back_the_one_process_values(client):
    """The tensor model: the recipients' and months' factors (b, c) are the driver's, seen as drawn at t."""
    data = make_tensor(n_actors=27, n_times=3, n_components=2, self_loops=True, random_state=4)
    options = dict(model="tensor", method="private", n_components=2, n_iter=6, burn_in=2, thin=2, random_state=13)
    callback, theirs = _recorder()
    lpviz.fit(data.release(), callback=callback, **options)
    for n_workers in (2, 3):
        callback, ours = _recorder()
        posterior = lpviz.fit(data.release(), scheduler=client, workers=n_workers, callback=callback, **options)
        _check_same_calls(ours, theirs, ["b", "c"], options["n_iter"])
        _traces_match_calls(posterior, ours)


@pytest.mark.parametrize("n_iter", [7, 6], ids=["last-not-checkpointed", "last-checkpointed"])
def test_checkpoints_neither_lose_nor_repeat_a_call(client, data, tmp_path, n_iter):
    """Before each checkpoint the pending score runs alone (_finish_iteration): the iterations
    around it are called back once each, in order, the last one too when it is itself checkpointed."""
    options = dict(method="private", n_components=3, n_iter=n_iter, burn_in=2, thin=2, random_state=11)
    callback, theirs = _recorder()
    lpviz.fit(data.release(), callback=callback, **options)
    callback, ours = _recorder()
    posterior = distributed.fit(
        data.release(), scheduler=client, workers=3, checkpoint=str(tmp_path), checkpoint_every=3,
        callback=callback, **options,
    )  # fmt: skip
    _check_same_calls(ours, theirs, ["phi"], n_iter)
    _traces_match_calls(posterior, ours)


def test_a_resumed_chain_calls_back_the_iterations_after_its_checkpoint(client, data, tmp_path):
    """Stopped after iteration 7 (its last checkpoint: 6), resumed to 10: the resumed run calls back
    7, 8, 9, 10, each with the unbroken chain's values."""
    options = dict(method="private", n_components=3, n_iter=10, burn_in=2, thin=2, random_state=11)
    callback, theirs = _recorder()
    reference = lpviz.fit(data.release(), callback=callback, **options)
    saving = dict(scheduler=client, workers=3, checkpoint=str(tmp_path), checkpoint_every=3)
    callback, first = _recorder()
    distributed.fit(data.release(), callback=callback, **saving, **dict(options, n_iter=7))
    _check_same_calls(first, theirs[:7], ["phi"], 7)
    callback, ours = _recorder()
    resumed = distributed.fit(data.release(), callback=callback, resume=True, **saving, **options)
    _check_same_calls(ours, theirs[6:], ["phi"], 10, first=7)
    _traces_match_calls(resumed, ours)
    assert same_chain(resumed, reference) == []
