"""The topic map's computations (lpviz.topicmap) against scipy and against configurations known exactly."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy.linalg import orthogonal_procrustes
from scipy.spatial.distance import jensenshannon, pdist, squareform

from lpviz import topicmap


def random_topics(rng, n_topics=5, n_words=30, concentration=0.3):
    return rng.dirichlet(np.full(n_words, concentration), size=n_topics)


# ---- Jensen-Shannon distances ----------------------------------------------------------


def test_js_distances_match_scipy_base_2_and_are_a_bounded_symmetric_metric():
    rng = np.random.default_rng(0)
    topics = random_topics(rng, 6, 40) * rng.uniform(0.5, 20, size=(6, 1))  # any scale: rows are normalised
    topics[0, :10] = 0.0  # words a topic never uses
    distances = topicmap.jensen_shannon_distances(topics)
    p = topics / topics.sum(axis=1, keepdims=True)
    expected = np.array([[jensenshannon(p[i], p[j], base=2) for j in range(6)] for i in range(6)])
    np.fill_diagonal(expected, 0.0)
    np.testing.assert_allclose(distances, expected, atol=1e-10)
    assert np.array_equal(distances, distances.T)
    assert np.all(np.diag(distances) == 0) and np.all(distances[~np.eye(6, dtype=bool)] > 0)
    assert distances.max() <= 1.0
    # a metric: d(i, k) <= d(i, j) + d(j, k) for every triple (i, j, k)
    assert np.all(distances[:, None, :] <= distances[:, :, None] + distances[None, :, :] + 1e-12)


def _hand_written_js_distances(p):
    """lpviz's JS distances before they came from scipy's pdist (issue 24): the reference they must equal."""
    log_p = np.log2(np.where(p > 0, p, 1.0))
    divergence = np.zeros((len(p), len(p)))
    for i in range(len(p)):
        others = p[i + 1 :]
        midpoints = (p[i] + others) / 2
        log_m = np.log2(np.where(midpoints > 0, midpoints, 1.0))
        kl_i = np.sum(p[i] * (log_p[i] - log_m), axis=1)
        kl_j = np.sum(others * (log_p[i + 1 :] - log_m), axis=1)
        divergence[i, i + 1 :] = (kl_i + kl_j) / 2
    distances = np.sqrt(np.clip(divergence + divergence.T, 0.0, 1.0))
    np.fill_diagonal(distances, 0.0)
    return distances


@pytest.mark.parametrize("n_topics, n_words, zero_share", [(2, 3, 0.3), (8, 50, 0.5), (30, 2000, 0.9)])
def test_js_distances_equal_the_earlier_hand_written_ones_with_zero_probability_words(n_topics, n_words, zero_share):
    rng = np.random.default_rng(n_words)
    topics = rng.gamma(0.1, 1.0, (n_topics, n_words)) * (rng.random((n_topics, n_words)) >= zero_share)
    topics[:, 0] = 1.0  # every topic keeps some mass
    topics[1, 1:] = 0.0  # one topic on a single word: most words have probability 0 in it
    p = topics / topics.sum(axis=1, keepdims=True)
    assert (p == 0).mean() > zero_share / 2  # the zero-probability words the two must agree on
    np.testing.assert_allclose(topicmap.jensen_shannon_distances(topics), _hand_written_js_distances(p), atol=1e-12)


def test_js_distance_is_one_for_disjoint_topics_and_zero_for_equal_ones():
    topics = np.array([[1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 3.0, 1.0], [2.0, 2.0, 0.0, 0.0]])
    distances = topicmap.jensen_shannon_distances(topics)
    assert distances[0, 1] == pytest.approx(1.0) and distances[1, 2] == pytest.approx(1.0)
    assert distances[0, 2] == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize(
    "topics, match",
    [
        (np.array([[1.0, -1.0]]), "non-negative"),
        (np.array([[1.0, np.nan]]), "non-negative"),
        (np.array([[1.0, 1.0], [0.0, 0.0]]), r"topics \[1\] have all-zero weights"),
        (np.ones(3), "2-D"),
    ],
)
def test_bad_topics_are_refused_by_name(topics, match):
    with pytest.raises(ValueError, match=match):
        topicmap.jensen_shannon_distances(topics)


# ---- classical MDS ----------------------------------------------------------------------


@pytest.mark.parametrize("n_points, seed", [(3, 0), (8, 1), (25, 2)])
def test_mds_recovers_a_planar_configuration_up_to_rotation_and_reflection(n_points, seed):
    rng = np.random.default_rng(seed)
    configuration = rng.normal(size=(n_points, 2)) * [3.0, 1.0]
    distances = squareform(pdist(configuration))
    coordinates = topicmap.classical_mds(distances)
    assert coordinates.shape == (n_points, 2)
    np.testing.assert_allclose(squareform(pdist(coordinates)), distances, atol=1e-9)
    # Procrustes: centred, the two differ by an orthogonal map only
    centred = configuration - configuration.mean(axis=0)
    rotation, _ = orthogonal_procrustes(coordinates, centred)
    np.testing.assert_allclose(coordinates @ rotation, centred, atol=1e-9)
    np.testing.assert_allclose(coordinates.mean(axis=0), 0.0, atol=1e-9)


def test_mds_signs_are_fixed_and_a_second_axis_of_a_line_is_zero():
    rng = np.random.default_rng(3)
    distances = squareform(pdist(rng.normal(size=(6, 2))))
    first = topicmap.classical_mds(distances)
    # the largest-magnitude coordinate of each axis is positive, and relabelling the points moves them only
    assert np.all(first[np.argmax(np.abs(first), axis=0), [0, 1]] > 0)
    order = rng.permutation(6)
    np.testing.assert_allclose(topicmap.classical_mds(distances[np.ix_(order, order)]), first[order], atol=1e-9)
    line = topicmap.classical_mds(squareform(pdist(np.array([[0.0], [1.0], [3.0]]))))
    np.testing.assert_allclose(line[:, 1], 0.0, atol=1e-7)
    np.testing.assert_allclose(line[:, 0], np.array([-4 / 3, -1 / 3, 5 / 3]) * np.sign(line[2, 0]), atol=1e-9)
    assert topicmap.classical_mds(np.zeros((1, 1))).tolist() == [[0.0, 0.0]]


@pytest.mark.parametrize(
    "distances, match",
    [
        (np.ones((2, 3)), "square"),
        (np.array([[0.0, 1.0], [2.0, 0.0]]), "symmetric"),
        (np.array([[0.0, -1.0], [-1.0, 0.0]]), "non-negative"),
    ],
)
def test_mds_refuses_what_is_no_distance_matrix(distances, match):
    with pytest.raises(ValueError, match=match):
        topicmap.classical_mds(distances)


# ---- sizes and relevance ------------------------------------------------------------------


def test_sizes_and_word_frequency_are_the_expected_token_shares():
    theta = np.array([[1.0, 0.0], [2.0, 1.0], [1.0, 3.0]])  # column sums 4 and 4
    phi = np.array([[1.0, 1.0, 0.0], [0.0, 1.0, 3.0]])  # row sums 2 and 4
    sizes = topicmap.topic_sizes(theta, phi)
    np.testing.assert_allclose(sizes, [8 / 24, 16 / 24])
    # the same as the expected counts theta @ phi: topic mass on words, then marginals
    mu = theta @ phi
    np.testing.assert_allclose(topicmap.word_frequency(theta, phi), mu.sum(axis=0) / mu.sum())
    np.testing.assert_allclose(topicmap.expected_word_counts(theta, phi).sum(axis=0), mu.sum(axis=0))
    with pytest.raises(ValueError, match="same fit"):
        topicmap.topic_sizes(theta, phi.T)


def test_relevance_ranks_by_probability_at_lambda_1_and_by_lift_at_0():
    # word 0 is common everywhere; word 2 is rare overall but concentrated in topic 0
    phi = np.array([[0.6, 0.1, 0.3, 0.0], [0.7, 0.3, 0.0, 0.0], [0.6, 0.0, 0.0, 0.4]])
    p = np.array([0.6, 0.15, 0.05, 0.2])
    top_1 = topicmap.top_words_by_relevance(phi, p, lambda_=1.0, n=4)
    np.testing.assert_array_equal(top_1, np.argsort(-phi, axis=1, kind="stable"))
    top_0 = topicmap.top_words_by_relevance(phi, p, lambda_=0.0, n=4)
    with np.errstate(divide="ignore"):
        lift = np.where(phi > 0, phi / p, 0.0)
    np.testing.assert_array_equal(top_0, np.argsort(-lift, axis=1, kind="stable"))
    assert top_1[0, 0] == 0 and top_0[0, 0] == 2  # the order changes with lambda
    scores = topicmap.relevance(phi, p, 0.6)
    np.testing.assert_allclose(scores[0, 2], 0.6 * np.log(0.3) + 0.4 * np.log(0.3 / 0.05))
    assert scores[0, 3] == -np.inf  # a word the topic never uses is least relevant
    assert topicmap.top_words_by_relevance(phi, p, 0.6, n=2).shape == (3, 2)


@pytest.mark.parametrize("lambda_", [-0.1, 1.5, "0.5", True, np.nan])
def test_relevance_refuses_lambda_outside_0_1(lambda_):
    with pytest.raises(ValueError, match="lambda_"):
        topicmap.relevance(np.ones((2, 3)), np.ones(3), lambda_)


def test_relevance_refuses_word_frequency_that_misses_a_used_word():
    with pytest.raises(ValueError, match="p_w must cover"):
        topicmap.relevance(np.ones((2, 3)), np.array([1.0, 1.0, 0.0]))
    with pytest.raises(ValueError, match="one entry per word"):
        topicmap.relevance(np.ones((2, 3)), np.ones(4))


positive = st.floats(min_value=1e-6, max_value=1e3, allow_nan=False, allow_infinity=False)


@settings(max_examples=60, deadline=None)
@given(
    theta=arrays(np.float64, st.tuples(st.integers(1, 8), st.integers(1, 6)), elements=positive),
    n_words=st.integers(1, 12),
    data=st.data(),
)
def test_any_fit_has_sizes_summing_to_one_and_valid_distances(theta, n_words, data):
    phi = data.draw(arrays(np.float64, (theta.shape[1], n_words), elements=positive))
    result = topicmap.topic_map(theta, phi)
    assert result.sizes.sum() == pytest.approx(1.0) and np.all(result.sizes >= 0)
    assert result.word_frequency.sum() == pytest.approx(1.0)
    d = result.distances
    assert np.array_equal(d, d.T) and np.all(np.diag(d) == 0) and np.all((d >= 0) & (d <= 1))
    assert result.coordinates.shape == (theta.shape[1], 2) and np.all(np.isfinite(result.coordinates))
    ranked = result.top_words(0, lambda_=data.draw(st.floats(0, 1)), n=n_words)
    assert sorted(ranked.tolist()) == list(range(n_words))  # every word once


# ---- alignment ----------------------------------------------------------------------------


def test_alignment_recovers_known_permutations_and_partners_go_through_the_reference():
    rng = np.random.default_rng(4)
    reference = random_topics(rng, 6, 50, concentration=0.1)
    shuffles = {"naive": rng.permutation(6), "nonprivate": rng.permutation(6)}
    # each method: the reference's topics shuffled, rescaled and slightly perturbed
    topics = {
        "private": reference,
        **{
            name: reference[order] * rng.uniform(0.9, 1.1, size=reference.shape) * 7.0
            for name, order in shuffles.items()
        },
    }
    alignment = topicmap.align_to_reference(topics, "private")
    np.testing.assert_array_equal(alignment["private"], np.arange(6))
    position = {"private": np.arange(6), **{name: np.argsort(order) for name, order in shuffles.items()}}
    for name in shuffles:
        np.testing.assert_array_equal(alignment[name], position[name])  # topic j of the reference sits there
    for k in range(6):
        partners = topicmap.aligned_partners(alignment, "private", k)
        assert partners == {name: int(position[name][k]) for name in topics}
        # from any method, its partners lead back to the same topics
        assert topicmap.aligned_partners(alignment, "naive", partners["naive"]) == partners
    # a method with more topics than the reference: its extra topic has no partner
    wider = {"private": reference[:4], "naive": topics["naive"]}
    alignment = topicmap.align_to_reference(wider, "private")
    extra = min(set(range(6)) - set(alignment["naive"].tolist()))
    assert topicmap.aligned_partners(alignment, "naive", extra) == {"naive": extra}
    with pytest.raises(ValueError, match="topic must be"):
        topicmap.aligned_partners(alignment, "naive", -1)
    with pytest.raises(ValueError, match="not one of"):
        topicmap.align_to_reference(topics, "truth")
    with pytest.raises(ValueError, match="fewer than"):  # lpviz.metrics' own refusal
        topicmap.align_to_reference(wider, "naive")
