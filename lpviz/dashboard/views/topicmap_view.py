"""The topic map: each method's topics side by side, in the spirit of LDAvis (Sievert & Shirley 2014).

One intertopic map per method: circles at the classical MDS coordinates of
the Jensen-Shannon distances between its topics, their area the topic's share
of the expected tokens. Under each map, the bars of the chosen topic's words,
ranked by relevance ``lambda log p(w|k) + (1 - lambda) log(p(w|k) / p(w))``:
grey the expected tokens of the word overall, red those the topic accounts
for. Clicking a circle chooses that topic; every other method shows its
topic matched to it (Hungarian algorithm, every method's topics matched
once to the first method's). The computations are
:mod:`lpviz.topicmap`'s, on each method's best saved sample (the one the
Topics tab shows, numbered as there); this view only draws them.
"""

from collections import Counter
from functools import partial

import holoviews as hv
import holoviews.plotting.bokeh  # the backend .opts() needs, also outside a server
import numpy as np
import pandas as pd
import panel as pn
import param
from bokeh.models import ColumnDataSource, FactorRange, HoverTool, Range1d, TapTool
from bokeh.models.annotations import LabelSet
from bokeh.plotting import figure

from lpviz import topicmap
from lpviz.dashboard.serving.onscreen import OnScreen
from lpviz.dashboard.serving.throttle import VIEW_SECONDS
from lpviz.dashboard.session.datastore import served
from lpviz.dashboard.session.fits import Fits, follow_results, model_shows
from lpviz.dashboard.views.plots import FLEX_ITEM
from lpviz.dashboard.views.topics_view import topic_order

CHOSEN_COLOUR = "#b2182b"  # the chosen topic and its partners (the header's red)
TOPIC_COLOUR = "#92c5de"
WORD_COLOUR = "#bdbdbd"  # a word's expected tokens overall
MAP_HEIGHT = 300
BAR_ROW_PIXELS = 18
# Circle radii in the map's units (Jensen-Shannon distances, at most 1 apart): area proportional to the
# topic's share of the tokens, on one scale for every method (LDAvis's convention).
RADIUS_SCALE = 0.25
NO_WORDS = " "  # the bars' one (blank) category while they show no words: an empty axis has no range


def word_labels(vocab, n_words):
    """A unique label per word: the vocabulary's (numbered where it repeats itself), else the index."""
    if vocab is None:
        return [f"word {v}" for v in range(n_words)]
    labels = [str(word) for word in vocab]
    repeated = {label for label, count in Counter(labels).items() if count > 1}
    return [f"{label} #{v}" if label in repeated else label for v, label in enumerate(labels)]


def ordered_map(model, factors, phi_true=None):
    """The :class:`~lpviz.topicmap.TopicMap` of one fit, topics numbered as on the Topics tab
    (matched to the true topics when known, else heaviest first)."""
    phi, theta = np.asarray(model.topics(factors)), np.asarray(model.memberships(factors))
    aligned_to = phi_true if phi_true is not None and len(phi) >= len(phi_true) else None
    order = topic_order(phi, aligned_to)
    return topicmap.topic_map(theta[:, order], phi[order])


def compute_maps(fits, phi_true):
    """Each fit's :class:`~lpviz.topicmap.TopicMap` and every method's topics matched to the first's.

    ``fits`` is ``[(method, model, best factors)]``; returns ``(maps, alignment)`` (see
    :func:`lpviz.topicmap.align_to_reference`). Runs in any thread.
    """
    maps = {name: ordered_map(model, factors, phi_true) for name, model, factors in fits}
    alignment = (
        topicmap.align_to_reference({name: m.distributions for name, m in maps.items()}, next(iter(maps)))
        if maps
        else {}
    )
    return maps, alignment


def map_frame(topic_map, highlighted):
    """Columns of one map's circles: position, radius (area ~ size), label, colour."""
    sizes = topic_map.sizes
    colours = [CHOSEN_COLOUR if k == highlighted else TOPIC_COLOUR for k in range(len(sizes))]
    return {
        "x": topic_map.coordinates[:, 0],
        "y": topic_map.coordinates[:, 1],
        "radius": RADIUS_SCALE * np.sqrt(sizes),
        "topic": [str(k + 1) for k in range(len(sizes))],
        "share": 100 * sizes,
        "colour": colours,
        "outline": [2.5 if k == highlighted else 1.0 for k in range(len(sizes))],
    }


def map_limits(frame, padding=0.1):
    """``(x_limits, y_limits)`` of a map's circles (each circle whole), padded, of one span in both
    directions (the map's distances read alike across and up)."""
    x, y, radius = (np.asarray(frame[key], dtype=float) for key in ("x", "y", "radius"))
    if x.size == 0:
        return (-1.0, 1.0), (-1.0, 1.0)
    lows, highs = np.array([(x - radius).min(), (y - radius).min()]), np.array([(x + radius).max(), (y + radius).max()])
    half = max(float((highs - lows).max()), 1e-9) * (1 + 2 * padding) / 2
    centre = (lows + highs) / 2
    return (centre[0] - half, centre[0] + half), (centre[1] - half, centre[1] + half)


def set_range(axis_range, limits):
    """Set a Range1d to ``limits``, its reset (the reset tool's target) with it."""
    start, end = (float(limit) for limit in limits)
    axis_range.update(start=start, end=end, reset_start=start, reset_end=end)


def bar_frame(topic_map, topic, labels, lambda_, n_words):
    """Columns of one topic's word bars, most relevant word first."""
    words = topic_map.top_words(topic, lambda_, n_words)
    totals = topic_map.word_counts.sum(axis=0)
    return {
        "word": [labels[v] for v in words],
        "word_index": words,
        "overall": totals[words],
        "in_topic": topic_map.word_counts[topic, words],
        "relevance": topicmap.relevance(topic_map.distributions[topic : topic + 1], topic_map.word_frequency, lambda_)[
            0, words
        ],
    }


def bars_title(topic_map, topic):
    """The title of a topic's bars (the tab's and the export's)."""
    return f"topic {topic + 1} ({100 * topic_map.sizes[topic]:.1f}% of tokens): top words"


class MethodPanel:
    """One method's Bokeh map and bars, made once and updated in place (no figure is rebuilt)."""

    def __init__(self, title, on_tap):
        self.map_source = ColumnDataSource(
            {key: [] for key in ("x", "y", "radius", "topic", "share", "colour", "outline")}
        )
        self.bar_source = ColumnDataSource(
            {key: [] for key in ("word", "word_index", "overall", "in_topic", "relevance")}
        )
        # Ranges set from the data drawn (Range1d), never left to BokehJS: a data range over an empty
        # source (a panel before its fit has topics) has no bounds, and every render of it warned
        # "could not set initial ranges" in the console (108 per visit of the tab).
        self.map = figure(
            title=title,
            height=MAP_HEIGHT,
            sizing_mode="stretch_width",
            x_range=Range1d(-1, 1),
            y_range=Range1d(-1, 1),
            tools="tap,pan,wheel_zoom,reset",
            toolbar_location="above",
            x_axis_label="PC1",
            y_axis_label="PC2",
        )
        circles = self.map.circle(
            "x",
            "y",
            radius="radius",
            source=self.map_source,
            fill_color="colour",
            fill_alpha=0.6,
            line_color="#2166ac",
            line_width="outline",
            nonselection_fill_alpha=0.6,
            nonselection_fill_color="colour",
            nonselection_line_alpha=1.0,
            selection_fill_alpha=0.6,
            selection_fill_color="colour",
        )
        self.map.add_layout(
            LabelSet(
                x="x",
                y="y",
                text="topic",
                source=self.map_source,
                text_align="center",
                text_baseline="middle",
                text_font_size="11pt",
            )
        )
        self.map.add_tools(
            HoverTool(renderers=[circles], tooltips=[("topic", "@topic"), ("share of tokens", "@share{0.0}%")])
        )
        self.map.select_one(TapTool).renderers = [circles]
        self.bars = figure(
            title="",
            height=MAP_HEIGHT,
            sizing_mode="stretch_width",
            x_range=Range1d(0, 1),
            y_range=FactorRange(factors=[NO_WORDS]),
            tools="",
            toolbar_location=None,
            x_axis_label="expected tokens",
        )
        self.bars.hbar(
            y="word", right="overall", height=0.8, source=self.bar_source, color=WORD_COLOUR, legend_label="overall"
        )
        self.bars.hbar(
            y="word",
            right="in_topic",
            height=0.8,
            source=self.bar_source,
            color=CHOSEN_COLOUR,
            legend_label="in the topic",
        )
        self.bars.add_tools(
            HoverTool(
                tooltips=[
                    ("word", "@word"),
                    ("overall", "@overall{0.0}"),
                    ("in the topic", "@in_topic{0.0}"),
                    ("relevance", "@relevance{0.000}"),
                ]
            )
        )
        legend = self.bars.legend[0]  # beneath the bars, never over them
        legend.orientation = "horizontal"
        self.bars.add_layout(legend, "below")
        self.bars.ygrid.grid_line_color = None
        self.map_source.selected.on_change("indices", lambda attr, old, new: new and on_tap(new[0]))
        self.pane = pn.Column(
            pn.pane.Bokeh(self.map, sizing_mode="stretch_width"),
            pn.pane.Bokeh(self.bars, sizing_mode="stretch_width"),
            visible=False,
            sizing_mode="stretch_width",
            min_width=260,
            styles=FLEX_ITEM,  # a row of them where they fit, one to a row on a phone
        )

    def show_map(self, topic_map, highlighted):
        frame = map_frame(topic_map, highlighted)
        x_limits, y_limits = map_limits(frame)
        set_range(self.map.x_range, x_limits)
        set_range(self.map.y_range, y_limits)
        self.map_source.data = frame

    def show_bars(self, topic_map, topic, labels, lambda_, n_words):
        frame = bar_frame(topic_map, topic, labels, lambda_, n_words)
        set_range(self.bars.x_range, (0, 1.05 * max(float(np.max(frame["overall"], initial=0.0)), 1e-9)))
        self.bars.y_range.factors = frame["word"][::-1] or [NO_WORDS]  # most relevant on top
        self.bars.height = max(MAP_HEIGHT, BAR_ROW_PIXELS * len(frame["word"]) + 90)
        self.bars.title.text = bars_title(topic_map, topic)
        self.bar_source.data = frame

    def clear_bars(self):
        self.bar_source.data = {key: [] for key in self.bar_source.data}
        self.bars.y_range.factors = [NO_WORDS]
        self.bars.title.text = "no matching topic"

    def clear_tap(self, keep=None):
        """Forget the browser's selection (so a later click on the same circle counts again),
        unless it is the circle ``keep``. (Clearing calls the tap callback with no index: ignored.)"""
        indices = list(self.map_source.selected.indices)
        if indices and indices != [keep]:
            self.map_source.selected.indices = []


class TopicMapView(pn.viewable.Viewer):
    """Each method's intertopic map and the chosen topic's words, ranked by relevance.

    Parameters
    ----------
    fits : Fits
        Supplies the data (vocabulary, truth) and the runners whose best samples are mapped.
    relevance_lambda : float
        lambda of the relevance ranking: 1 ranks words by P(word | topic), 0 by lift.
    n_words : int
        Words shown per topic.
    """

    fits = param.ClassSelector(class_=Fits)
    relevance_lambda = param.Number(
        default=topicmap.DEFAULT_LAMBDA,
        bounds=(0.0, 1.0),
        step=0.01,
        label="lambda (relevance)",
        doc="1 ranks words by P(word | topic), 0 by lift P(word | topic) / P(word).",
    )
    n_words = param.Integer(default=15, bounds=(5, 40), doc="Words shown per topic.")
    maps = param.Dict(default={}, doc="method -> its TopicMap (topics numbered as on the Topics tab).")
    chosen = param.Tuple(default=None, length=2, allow_None=True, doc="(method, topic index) clicked last.")
    partners = param.Dict(default={}, doc="method -> its topic matched to the chosen one (the one it shows).")
    error = param.String(default="", doc="Why the maps could not be computed, if they could not.")

    def __init__(self, *, background=None, **params):
        """``background``: a view never shown computes nothing (default: when served)."""
        super().__init__(**params)
        self._background = served() if background is None else background
        self._alignment = {}
        self._panels = None
        self._stale = False  # results came while nothing was shown (served): map them when shown
        self.on_screen = OnScreen()  # hidden (another tab shown): new results wait until shown
        follow_results(self.fits, self._follow, VIEW_SECONDS, needs_sample=True)
        self.fits.data.param.watch(self._follow, ["release", "model"])
        self.refresh()

    @property
    def applies(self):
        """True when the session's model has topics."""
        return model_shows(self.fits.data.model, "topics")

    def labels(self, n_words):
        data = self.fits.data.data
        vocab = data.col_labels if data is not None and data.col_labels else None
        return word_labels(vocab if vocab is not None and len(vocab) == n_words else None, n_words)

    def _follow(self, *_):
        self.on_screen.run("refresh", self.refresh)

    def refresh(self):
        """Recompute every method's map from the runners' current best samples (served: in the
        session's :class:`~lpviz.dashboard.serving.throttle.OffLoop`, applied on the event loop when computed). A served
        session whose tab was never shown computes nothing (while chains run, on a shared machine)."""
        if self._background and self._panels is None:
            self._stale = True
            return
        self.on_screen.drop("apply")  # an older result, waiting for the tab: this one replaces it
        # computed while the tab shows, the result may come after it is hidden: then it waits too
        self.fits.off_loop.submit(
            "topic map",
            partial(compute_maps, *self._inputs()),
            lambda outcome: self.on_screen.run("apply", partial(self._apply, outcome)),
        )

    def _inputs(self):
        """What the maps are computed from, read on the event loop: ``(fits, phi_true)``, with
        ``fits`` ``[(method, model, best factors)]`` (snapshots the workers no longer touch)."""
        data = self.fits.data
        if data.release is None or not self.applies:
            return [], None
        from lpviz import models

        truth = data.truth
        model = models.create(data.model, self.fits.settings.n_components)
        phi_true = model.topics(truth.factors) if truth is not None and truth.factors else None
        fits = [
            (name, runner.result["model"], runner.result["best"])
            for name, runner in self.fits.active.items()
            if (runner.result or {}).get("best")
        ]
        return fits, phi_true

    def _apply(self, outcome):
        if isinstance(outcome, Exception):
            self.param.update(error=str(outcome))
            return
        maps, alignment = outcome
        chosen = self.chosen
        if maps and (chosen is None or chosen[0] not in maps or chosen[1] >= len(maps[chosen[0]].sizes)):
            chosen = (next(iter(maps)), 0)
        self._alignment = alignment
        self.param.update(maps=maps, error="")
        if maps:
            self._set_choice(*chosen)
        else:
            self.param.update(chosen=None, partners={})
        self._draw()

    def choose(self, method, topic):
        """Choose ``topic`` of ``method``: it and its matched topics in the other methods are highlighted."""
        self._set_choice(method, topic)
        self._draw()

    def _set_choice(self, method, topic):
        topic = int(topic)
        if method not in self.maps:
            raise ValueError(f"{method!r} has no topic map yet; methods with one: {list(self.maps)}")
        self.param.update(chosen=(method, topic), partners=topicmap.aligned_partners(self._alignment, method, topic))

    @property
    def panels(self):
        """Each method's Bokeh map and bars, made when first needed (when the tab is first shown:
        six Bokeh figures cost a new session a third of a second)."""
        if self._panels is None:
            self._panels = {
                name: MethodPanel(runner.label, lambda topic, name=name: self.choose(name, topic))
                for name, runner in self.fits.runners.items()
            }
            if self._stale:
                self._stale = False
                self.refresh()
            self._draw()
        return self._panels

    def _draw(self):
        """Show the current maps, choice and bars in the panels (once they exist)."""
        if self._panels is None:
            return
        method, topic = self.chosen or (None, None)
        with pn.io.hold():
            for name, panel in self._panels.items():
                panel.pane.visible = name in self.maps
                if name not in self.maps:
                    continue
                panel.clear_tap(keep=topic if name == method else None)
                panel.show_map(self.maps[name], self.partners.get(name))
                if name not in self.partners:
                    panel.clear_bars()  # a topic the others have no match for
            self._draw_bars()

    @param.depends("relevance_lambda", "n_words", watch=True)
    def _draw_bars(self):
        if self._panels is None:
            return
        with pn.io.hold():
            for name, topic in self.partners.items():
                topic_map = self.maps[name]
                self._panels[name].show_bars(
                    topic_map, topic, self.labels(len(topic_map.word_frequency)), self.relevance_lambda, self.n_words
                )

    def bar_words(self, method):
        """The words ``method`` shows now, most relevant first."""
        return list(self.panels[method].bar_source.data["word"])

    @param.depends("maps", "chosen", "error")
    def status(self):
        data = self.fits.data
        if data.release is None:
            return pn.pane.Markdown("No data yet.")
        if not self.applies:
            return pn.pane.Markdown(
                f"The topic map is for topic models; the current data are fitted with the "
                f"{data.model} model: see the **Blocks** tab. Choose a documents x words source "
                "(synthetic topics, Enron topics or a documents x words file) to map topics."
            )
        text = (
            "Each circle is a topic of the method's best saved sample (numbered as on the Topics tab), placed "
            "by classical scaling of the Jensen-Shannon distances between topics; its area is the topic's "
            "share of the expected tokens. **Click a topic**: the other methods highlight their matching topic "
            "(Hungarian algorithm). Bars rank words by relevance, lambda log P(w|k) + (1 - lambda) log "
            "(P(w|k) / P(w)): lambda = 1 orders by probability in the topic, 0 by lift. Grey: a word's "
            "expected tokens overall, red: in the topic (from the fitted factors, not the private counts)."
        )
        if self.error:
            text += f"\n\n**The map could not be drawn:** {self.error}"
        waiting = [runner.label for name, runner in self.fits.active.items() if name not in self.maps]
        if waiting:
            text += (
                f"\n\n*Waiting for a saved sample (after burn-in {self.fits.settings.burn_in}) from: "
                f"{', '.join(waiting)}. Start the fits in the Fits tab.*"
            )
        return pn.pane.Markdown(text, sizing_mode="stretch_width")

    def figures(self):
        """The maps and the chosen topics' bars as static HoloViews objects, for export."""
        self.on_screen.catch_up()
        if not self.maps:
            return {}
        labels_of = {name: self.labels(len(m.word_frequency)) for name, m in self.maps.items()}
        plots = []
        for name, topic_map in self.maps.items():
            circles = map_frame(topic_map, self.partners.get(name))
            angles = np.linspace(0, 2 * np.pi, 65)
            shapes = {True: [], False: []}
            for x, y, radius, colour in zip(
                circles["x"], circles["y"], circles["radius"], circles["colour"], strict=True
            ):
                shapes[colour == CHOSEN_COLOUR].append(
                    {"x": x + radius * np.cos(angles), "y": y + radius * np.sin(angles)}
                )
            # circles as polygons in map units: the same picture in Bokeh (HTML) and matplotlib (PNG)
            plots.append(
                (
                    hv.Polygons(shapes[False]).opts(color=TOPIC_COLOUR, alpha=0.6, line_color="#2166ac")
                    * hv.Polygons(shapes[True]).opts(color=CHOSEN_COLOUR, alpha=0.6, line_color="#2166ac")
                    * hv.Labels(pd.DataFrame(circles), ["x", "y"], "topic").opts(text_color="black")
                ).opts(title=self.fits.runners[name].label, xlabel="PC1", ylabel="PC2", data_aspect=1)
            )
        for name, topic in self.partners.items():
            # each method's own word dimension: a layout shares axes of the same dimension, and would
            # give every method one merged word order
            word = f"{name} word"
            bars = (
                pd.DataFrame(bar_frame(self.maps[name], topic, labels_of[name], self.relevance_lambda, self.n_words))
                .iloc[::-1]
                .rename(columns={"word": word})
            )
            shown = {"invert_axes": True, "xlabel": "expected tokens", "ylabel": ""}
            plots.append(
                (
                    hv.Bars(bars, word, "overall", label="overall").opts(color=WORD_COLOUR, **shown)
                    * hv.Bars(bars, word, "in_topic", label="in the topic").opts(color=CHOSEN_COLOUR, **shown)
                ).opts(title=bars_title(self.maps[name], topic))  # under its method's map, as on the tab
            )
        return {"topic_map": hv.Layout(plots).cols(len(self.maps))}

    @param.depends()
    def _plots(self):
        return pn.FlexBox(*(panel.pane for panel in self.panels.values()), sizing_mode="stretch_width")

    def __panel__(self):
        # side by side where they fit, one above the other on a phone (a Row was 550 px wide: issue 37)
        controls = pn.FlexBox(
            pn.widgets.FloatSlider.from_param(self.param.relevance_lambda, width=300),
            pn.widgets.IntSlider.from_param(self.param.n_words, width=250),
            sizing_mode="stretch_width",
        )
        # the figures are made when the tab is first shown, not with the session
        plots = pn.param.ParamMethod(self._plots, lazy=True, sizing_mode="stretch_width")
        body = pn.Column(
            controls,
            plots,
            visible=pn.bind(lambda model: self.applies, self.fits.data.param.model),
            sizing_mode="stretch_width",
        )
        return pn.Column(self.status, body, sizing_mode="stretch_width")
