"""The topics each method found: top words, NPMI, coherence and a term x topic heatmap.

Topics come from the saved sample with the highest log joint of each chain
(labels switch between samples, so a posterior mean of topics means
nothing). When the data are simulated they are aligned to the true topics
with the Hungarian algorithm, and the truth is listed beside them. Scores use
the true (non-private) counts as reference corpus, as in the paper; the
per-method numbers are each runner's :func:`lpviz.metrics.score`, the same
the Fits tab and the CLI show.
"""

from functools import partial

import holoviews as hv
import numpy as np
import pandas as pd
import panel as pn
import param

from lpviz import metrics
from lpviz.dashboard.serving.onscreen import OnScreen
from lpviz.dashboard.serving.throttle import VIEW_SECONDS
from lpviz.dashboard.session.fits import Fits, follow_results, model_shows, score_frame
from lpviz.dashboard.views.live_heatmaps import LiveHeatmaps
from lpviz.dashboard.views.plots import SCROLL_SIDEWAYS_CSS, waiting_line

TABLE_COLUMNS = ("method", "topic", "top words", "NPMI", "coherence", "L1 to truth")
TRUTH = "truth"
TERM_ROW_PIXELS = 13


def normalized_topics(phi):
    """Rows of ``phi`` as distributions over words (P(word | topic))."""
    phi = np.asarray(phi, dtype=float)
    totals = phi.sum(axis=1, keepdims=True)
    return np.divide(phi, totals, out=np.zeros_like(phi), where=totals > 0)


def topic_order(phi, phi_true=None):
    """Order of the estimated topics: matched to the true ones first (Hungarian), then the rest.

    Without a truth, topics are ordered by their total weight, heaviest first.
    """
    if phi_true is None:
        return np.argsort(-np.asarray(phi).sum(axis=1), kind="stable")
    matched = metrics.align_topics(phi, phi_true)
    taken = set(matched.tolist())
    rest = [k for k in range(len(phi)) if k not in taken]
    return np.concatenate([matched, np.asarray(rest, dtype=np.int64)])


def _scores(top, Y_ref, n_top):
    """Per-topic NPMI and UMass coherence; NaN where a score is undefined (or without a reference corpus)."""
    coherence = np.full(len(top), np.nan)
    if Y_ref is None:
        return np.full(len(top), np.nan), coherence
    npmi = metrics.npmi(top, Y_ref, top_n=n_top)
    for k in range(len(top)):  # one topic with a word absent from the reference must not blank the rest
        try:
            coherence[k] = metrics.umass_coherence(top[k : k + 1], Y_ref, top_n=n_top)[0]
        except ValueError:
            pass
    return npmi, coherence


def summarize_topics(phi, Y_ref, *, vocab=None, n_top=10, phi_true=None, method=""):
    """Aligned topics of one fit and their table rows.

    Returns ``(topics, table)``: ``topics`` is P(word | topic) with rows in
    display order (aligned to ``phi_true`` when given); ``table`` has one
    row per topic with its top words, NPMI and UMass coherence against
    ``Y_ref`` and, with a truth, the L1 distance to its true topic.
    """
    n_top = min(n_top, np.shape(phi)[1])
    topics = normalized_topics(phi)[topic_order(phi, phi_true)]
    top = metrics.top_words(topics, n=n_top)
    npmi, coherence = _scores(top, Y_ref, n_top)
    distance = np.full(len(topics), np.nan)
    if phi_true is not None:
        truth = normalized_topics(phi_true)
        distance[: len(truth)] = np.abs(topics[: len(truth)] - truth).sum(axis=1)
    words = metrics.top_words(topics, n=n_top, vocab=list(vocab)) if vocab is not None else top.tolist()
    table = pd.DataFrame(
        {
            "method": method,
            "topic": np.arange(1, len(topics) + 1),
            "top words": [", ".join(map(str, row)) for row in words],
            "NPMI": npmi,
            "coherence": coherence,
            "L1 to truth": distance,
        },
        columns=list(TABLE_COLUMNS),
    )
    return topics, table


def term_topic_frame(topics, vocab, n_words):
    """Long table (term, topic, P) over the union of each topic's top ``n_words`` terms."""
    top = metrics.top_words(topics, n=min(n_words, topics.shape[1]))
    terms = list(dict.fromkeys(top.ravel().tolist()))  # topic by topic, first appearance kept
    labels = [str(vocab[v]) if vocab is not None else str(v) for v in terms]
    k_idx, t_idx = np.meshgrid(np.arange(len(topics)), np.arange(len(terms)), indexing="ij")
    return pd.DataFrame(
        {
            "topic": (k_idx.ravel() + 1).astype(str),
            "term": np.asarray(labels, dtype=object)[t_idx.ravel()],
            "P(term | topic)": topics[:, terms][k_idx.ravel(), t_idx.ravel()] if len(terms) else [],
        }
    )


def topic_tables(fits, model, truth, vocab, n_top):
    """``(topics, table)`` of :class:`TopicsView`: the truth's topics (when ``truth`` has factors) and
    each fit's aligned to them, with their table rows (:func:`summarize_topics`); ``fits`` is
    ``[(label, model, best factors)]``. Pure, so that a served session computes it off its event loop.

    The reference corpus is the true counts whenever there are any, as in :func:`lpviz.metrics.score`
    (own data uploaded as counts have true counts but no true topics: their scores were NaN here
    while the scoreboard, scored against those counts, showed numbers)."""
    phi_true = model.topics(truth.factors) if truth is not None and truth.factors else None
    reference = truth.Y if truth is not None else None
    topics, tables = {}, []
    if phi_true is not None:
        topics[TRUTH], table = summarize_topics(phi_true, reference, vocab=vocab, n_top=n_top, method=TRUTH)
        tables.append(table.assign(**{"L1 to truth": 0.0}))
    for label, fit_model, best in fits:
        phi = fit_model.topics(best)
        aligned_to = phi_true if phi_true is not None and len(phi) >= len(phi_true) else None
        topics[label], table = summarize_topics(
            phi, reference, vocab=vocab, n_top=n_top, phi_true=aligned_to, method=label
        )
        tables.append(table)
    table = pd.concat(tables, ignore_index=True) if tables else pd.DataFrame(columns=list(TABLE_COLUMNS))
    if phi_true is None:  # real data have no true topics: no column of blanks
        table = table.drop(columns=["L1 to truth"])
    return topics, table


class TopicsView(pn.viewable.Viewer):
    """Per method: the best saved sample's topics, their scores and a term x topic heatmap.

    Parameters
    ----------
    fits : Fits
        Supplies the data (vocabulary, truth) and the runners whose results are shown.
    n_top : int
        Top words listed and scored per topic.
    n_heatmap_words : int
        Top words per topic that make up the heatmap's terms.
    """

    fits = param.ClassSelector(class_=Fits)
    n_top = param.Integer(default=10, bounds=(2, 30), doc="Top words listed and scored per topic.")
    n_heatmap_words = param.Integer(default=5, bounds=(1, 20), doc="Top words per topic in the heatmap.")
    topics = param.Dict(default={}, doc="method label -> aligned P(word | topic), rows in display order.")
    table = param.DataFrame(
        default=pd.DataFrame(columns=list(TABLE_COLUMNS)), doc="One row per method and topic: top words and scores."
    )
    scores = param.DataFrame(default=pd.DataFrame(), doc="Each method's topic scores (lpviz.metrics.score).")

    def __init__(self, **params):
        super().__init__(**params)
        # drawn in place: a new result changes the figures' data, not the figures (lpviz.dashboard.views.live_heatmaps)
        self._live_heatmaps = LiveHeatmaps("topic", "term", "P(term | topic)", row_pixels=TERM_ROW_PIXELS)
        # the figures are made with the tab's panel, not with the view: a page opens on another tab, and
        # the truth's heatmap made at every open was ~0.1 s of its 1 s of server CPU (issue 41)
        self._panel_made = False
        self.on_screen = OnScreen()  # hidden (another tab shown): new results wait until shown
        follow_results(self.fits, lambda runner: self._follow(), VIEW_SECONDS, needs_sample=True)
        self.refresh()

    @property
    def applies(self):
        """True when the session's model has topics."""
        return model_shows(self.fits.data.model, "topics")

    @param.depends("n_top", "fits.data.release", watch=True)
    def _follow(self):
        self.on_screen.run("refresh", self.refresh)

    def refresh(self):
        """Recompute topics and scores from the runners' current results (served: in the session's
        :class:`~lpviz.dashboard.serving.throttle.OffLoop`, applied on the event loop when computed)."""
        self.on_screen.drop("apply")  # an older result, waiting for the tab: this one replaces it
        data = self.fits.data
        if data.release is None or not self.applies:
            self.param.update(topics={}, table=self.param.table.default, scores=self.param.scores.default)
            return
        from lpviz import models

        truth = data.truth
        runners = [runner for runner in self.fits.active.values() if (runner.result or {}).get("best")]
        compute = partial(
            topic_tables,
            fits=[(runner.label, runner.result["model"], runner.result["best"]) for runner in runners],
            model=models.create(data.model, self.fits.settings.n_components),
            truth=truth,
            vocab=data.data.col_labels or None,
            n_top=self.n_top,
        )
        scores = score_frame(runners, keys=("npmi", "umass", "topic_distance", "samples"))
        # computed while the tab shows, the result may come after it is hidden: then it waits too
        self.fits.off_loop.submit(
            "topics", compute, lambda outcome: self.on_screen.run("apply", partial(self._apply, scores, outcome))
        )

    def _apply(self, scores, outcome):
        if isinstance(outcome, Exception):
            raise outcome
        topics, table = outcome
        self.param.update(topics=topics, table=table, scores=scores)

    def mean_scores(self):
        """Each method's NPMI, UMass and topic error: its :func:`lpviz.metrics.score`."""
        return self.scores

    def heatmap_frames(self):
        """``{method label: long (topic, term, P) table}`` of the heatmaps, the terms each topic's top ones."""
        vocab = self.fits.data.data.col_labels or None
        return {name: term_topic_frame(topics, vocab, self.n_heatmap_words) for name, topics in self.topics.items()}

    @param.depends("topics", "n_heatmap_words", watch=True)
    def _draw_heatmaps(self):
        if not self._panel_made:
            return  # nothing shows them yet: __panel__ draws the newest
        with pn.io.hold():  # factors, data and colour limits reach the page in one message
            self._live_heatmaps.update(self.heatmap_frames())

    @param.depends("topics", "n_heatmap_words")
    def heatmaps(self):
        """The heatmaps as one HoloViews layout (the export's; the page shows the same frames in place)."""
        if not self.topics:
            return hv.Overlay([hv.Text(0.5, 0.5, "No topics yet")])
        plots = []
        for name, frame in self.heatmap_frames().items():
            n_terms = frame["term"].nunique()
            # the tab's order on both axes (topics 1..K; terms topic by topic, as listed), never sorted as
            # text: an exported PNG labelled rows "word 0 ... word 14" over rows drawn in another order
            topic = hv.Dimension("topic", values=list(dict.fromkeys(frame["topic"])))
            term = hv.Dimension("term", values=list(dict.fromkeys(frame["term"])))
            # one row of text per term (a fixed height made the labels of large vocabularies overlap)
            plots.append(
                hv.HeatMap(frame, [topic, term], "P(term | topic)").opts(
                    title=name,
                    cmap="Blues",
                    colorbar=True,
                    tools=["hover"],
                    invert_yaxis=True,
                    height=max(320, TERM_ROW_PIXELS * n_terms + 90),
                    responsive=True,
                    xlabel="topic",
                    ylabel="term",
                    fontsize={"yticks": "8pt"},
                )
            )
        return hv.Layout(plots).cols(len(plots))

    # the release too: a switch to data without topics leaves ``topics`` empty as it was (no event)
    @param.depends("topics", "fits.data.release")
    def status(self):
        data = self.fits.data
        if data.release is None:
            return pn.pane.Markdown("No data yet.")
        if not self.applies:
            return pn.pane.Markdown(
                f"The current data are fitted with the {data.model} model, which has no "
                "topics: see the **Blocks** tab. Choose a documents x words source "
                "(synthetic topics, Enron topics or a documents x words file) to see topics here."
            )
        truth = "Topics are aligned to the true topics (Hungarian algorithm); " if TRUTH in self.topics else ""
        corpus = (
            f"scores use the true counts as reference corpus, top {self.n_top} words. "
            if data.truth is not None
            else "no scores: this release came without its true counts. "
        )
        text = f"{truth}{corpus}Each method shows the saved sample with the highest log joint."
        waiting = waiting_line(self.fits, self.topics)
        if waiting:
            text += f"\n\n{waiting}"
        return pn.pane.Markdown(text, sizing_mode="stretch_width")

    def figures(self):
        """Current figures as static HoloViews objects, for export."""
        if self.fits.data.release is None or not self.applies:  # no topics: nothing of this tab to export
            return {}
        self.on_screen.catch_up()
        return {"topics_heatmaps": self.heatmaps()}

    def __panel__(self):
        self._panel_made = True
        self._draw_heatmaps()
        # Plain HTML tables: they need no extra Panel extension in the template or the notebook.
        scores = pn.pane.DataFrame(
            self.param.scores,
            index=False,
            float_format="{:.4g}".format,
            sizing_mode="stretch_width",
            stylesheets=[SCROLL_SIDEWAYS_CSS],
            name="topic-scores",
        )
        table = pn.pane.DataFrame(
            self.param.table,
            index=False,
            float_format="{:.3f}".format,
            sizing_mode="stretch_width",
            stylesheets=[SCROLL_SIDEWAYS_CSS],
        )
        # made once, shown only when the model has topics (the status explains otherwise)
        body = pn.Column(
            # side by side where they fit, one above the other on a phone (a Row of two made the tab
            # 500 px wide: a 412 px page cut it at the right)
            pn.FlexBox(
                pn.widgets.IntSlider.from_param(self.param.n_top, width=250),
                pn.widgets.IntSlider.from_param(self.param.n_heatmap_words, width=250),
                sizing_mode="stretch_width",
            ),
            scores,
            table,
            self._live_heatmaps.panel,
            visible=pn.bind(lambda model: self.applies, self.fits.data.param.model),
            sizing_mode="stretch_width",
        )
        return pn.Column(self.status, body, sizing_mode="stretch_width")
