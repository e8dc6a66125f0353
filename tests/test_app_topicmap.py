"""The Topic map tab without a browser: driven like a person would (a run, a click, the lambda
slider) and checked against lpviz.topicmap and lpviz.metrics."""

import holoviews as hv
import numpy as np
import pytest

import lpviz.dashboard.views.topicmap_view
from lpviz import metrics, topicmap
from lpviz.dashboard.views.topicmap_view import CHOSEN_COLOUR, TopicMapView, ordered_map
from tests.test_app_views import make_fits, run_fits


@pytest.fixture(scope="module")
def fitted():
    return run_fits(make_fits(source="synthetic-topics"))


def test_one_map_per_method_from_its_best_sample(fitted):
    view = TopicMapView(fits=fitted)
    assert set(view.maps) == set(fitted.active) and len(view.maps) >= 2
    truth = fitted.data.truth
    for name, runner in fitted.active.items():
        topic_map, panel = view.maps[name], view.panels[name]
        assert panel.pane.visible
        expected = ordered_map(
            runner.result["model"], runner.result["best"], runner.result["model"].topics(truth.factors)
        )
        np.testing.assert_allclose(topic_map.coordinates, expected.coordinates)
        # what is drawn: one circle per topic at its MDS coordinates, area proportional to its share
        data = panel.map_source.data
        assert data["topic"] == [str(k + 1) for k in range(fitted.settings.n_components)]
        np.testing.assert_allclose(np.c_[data["x"], data["y"]], topic_map.coordinates)
        areas = np.pi * np.asarray(data["radius"]) ** 2
        np.testing.assert_allclose(areas / areas.sum(), topic_map.sizes, rtol=1e-9)
        assert topic_map.sizes.sum() == pytest.approx(1.0)
        # topics are numbered as on the Topics tab: matched to the true topics
        phi = runner.result["model"].topics(runner.result["best"])
        order = metrics.align_topics(phi, runner.result["model"].topics(truth.factors))
        np.testing.assert_allclose(topic_map.distributions, phi[order] / phi[order].sum(axis=1, keepdims=True))
    assert "Click a topic" in view.status().object


def test_the_exported_figure_shows_each_method_its_own_word_order(fitted, tmp_path):
    from lpviz.dashboard.views.export import save_figure

    view = TopicMapView(fits=fitted)
    view.choose(list(view.maps)[-1], 2)
    figure = view.figures()["topic_map"]
    bars = {
        element.kdims[0].name: list(element.dimension_values(0))
        for element in figure.traverse(lambda element: element, [hv.Bars])
    }
    for name in view.maps:
        assert bars[f"{name} word"] == view.bar_words(name)[::-1]  # drawn bottom up: most relevant on top
    labels = [list(element.dimension_values("topic")) for element in figure.traverse(lambda e: e, [hv.Labels])]
    assert labels == [[str(k + 1) for k in range(fitted.settings.n_components)]] * len(view.maps)
    for suffix in (".png", ".html"):
        assert save_figure(figure, tmp_path / f"topic_map{suffix}").stat().st_size > 5_000


def test_the_bar_order_follows_lambda(fitted):
    view = TopicMapView(fits=fitted, n_words=15)
    name, topic = view.chosen
    topic_map = view.maps[name]
    labels = view.labels(len(topic_map.word_frequency))
    orders = {}
    for lambda_ in (1.0, 0.0, 0.6):
        view.relevance_lambda = lambda_
        orders[lambda_] = view.bar_words(name)
        expected = topicmap.top_words_by_relevance(
            topic_map.distributions[topic : topic + 1], topic_map.word_frequency, lambda_, 15
        )[0]
        assert orders[lambda_] == [labels[v] for v in expected]
        assert list(view.panels[name].bars.y_range.factors) == orders[lambda_][::-1]  # most relevant on top
    p = topic_map.distributions[topic]
    assert orders[1.0] == [labels[v] for v in np.argsort(-p, kind="stable")[:15]]  # by P(word | topic)
    lift = p / topic_map.word_frequency
    assert orders[0.0] == [labels[v] for v in np.argsort(-lift, kind="stable")[:15]]  # by lift
    assert orders[1.0] != orders[0.0]  # on these data the two rankings differ
    assert (
        view.panels[name].bar_source.data["in_topic"].tolist()
        == topic_map.word_counts[topic, [labels.index(w) for w in orders[0.6]]].tolist()
    )


def test_clicking_a_topic_highlights_its_matched_partner_in_every_method(fitted):
    view = TopicMapView(fits=fitted)
    names = list(view.maps)
    clicked, other = names[0], names[-1]
    distributions = {name: view.maps[name].distributions for name in names}
    for topic in range(fitted.settings.n_components):
        view.panels[clicked].map_source.selected.indices = [topic]  # what a tap in the browser sets
        assert view.chosen == (clicked, topic)
        for name in names:
            partner = view.partners[name]
            expected = (
                topic
                if name == clicked
                else int(metrics.align_topics(distributions[name], distributions[clicked])[topic])
            )
            assert partner == expected
            colours = view.panels[name].map_source.data["colour"]
            assert [k for k, colour in enumerate(colours) if colour == CHOSEN_COLOUR] == [partner]
            assert view.panels[name].bars.title.text.startswith(f"topic {partner + 1} ")
    # a click in another method: the first method follows, and its old tap is forgotten
    view.panels[other].map_source.selected.indices = [1]
    assert view.chosen == (other, 1)
    assert list(view.panels[clicked].map_source.selected.indices) == []
    assert view.partners[clicked] == int(metrics.align_topics(distributions[clicked], distributions[other])[1])
    view.panels[clicked].map_source.selected.indices = []  # a click beside the circles changes nothing
    assert view.chosen == (other, 1)
    with pytest.raises(ValueError, match="no topic map"):
        view.choose("truth", 0)


def test_network_data_get_a_sentence_and_no_maps():
    fits = make_fits(source="synthetic-blocks")
    view = TopicMapView(fits=fits)
    assert view.maps == {} and not any(panel.pane.visible for panel in view.panels.values())
    assert "topic map is for topic models" in view.status().object
    assert view.figures() == {}


def test_maps_wait_for_samples_and_empty_on_new_noise():
    fits = run_fits(make_fits(source="synthetic-topics", n_docs=30, n_words=12), n_iter=20, burn_in=10, thin=5)
    view = TopicMapView(fits=fits)
    assert view.maps and view.chosen is not None
    # the bars name words by the data's vocabulary
    vocabulary = [f"term{v}" for v in range(12)]
    fits.data.data.col_labels = vocabulary
    view.relevance_lambda = 1.0
    name, topic = view.chosen
    expected = np.argsort(-view.maps[name].distributions[topic], kind="stable")[: view.n_words]
    assert view.bar_words(name) == [vocabulary[v] for v in expected]
    fits.data.settings.noise_seed = 11  # a new release (built at once outside a server) resets the runners
    assert view.maps == {} and view.chosen is None
    assert "Waiting for a saved sample" in view.status().object


def test_served_views_map_in_the_view_pool_and_keep_the_newest_results(fitted, monkeypatch):
    import queue
    import threading

    from lpviz.dashboard.serving.throttle import OffLoop

    class Loop:  # the session's event loop as Bokeh's document offers it to threads
        def __init__(self):
            self.callbacks = queue.Queue()

        def add_next_tick_callback(self, callback):
            self.callbacks.put(callback)

    loop, threads = Loop(), []
    monkeypatch.setattr(fitted, "off_loop", OffLoop(background=True, doc=loop))
    original = lpviz.dashboard.views.topicmap_view.compute_maps

    def compute_maps(*inputs):
        threads.append(threading.current_thread().name)
        return original(*inputs)

    monkeypatch.setattr(lpviz.dashboard.views.topicmap_view, "compute_maps", compute_maps)
    view = TopicMapView(fits=fitted, background=True)
    assert view.maps == {} and view._stale  # served and never shown: nothing is computed
    assert view.panels  # the tab is shown: the first computation starts in the pool
    view.refresh()
    view.refresh()  # while a computation runs: waits, and only the newest inputs are computed
    while not (view.maps and fitted.off_loop.idle):
        loop.callbacks.get(timeout=60)()  # applied on the loop, here this thread
    assert len(threads) == 2 and all(name.startswith("lpviz-view") for name in threads)
    reference, _ = original(*view._inputs())  # computed on the spot
    assert list(view.maps) == list(reference)
    for name in view.maps:
        np.testing.assert_allclose(view.maps[name].coordinates, reference[name].coordinates)


def test_word_labels_are_the_vocabulary_made_unique():
    from lpviz.dashboard.views.topicmap_view import word_labels

    assert word_labels(None, 3) == ["word 0", "word 1", "word 2"]
    assert word_labels(["tax", "gas", "tax", "power"], 4) == ["tax #0", "gas", "tax #2", "power"]
