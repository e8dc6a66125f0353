"""The topics each method found: top words, NPMI, coherence and a term x topic heatmap.

Topics come from the saved sample with the highest log joint of each chain
(labels switch between samples, so a posterior mean of topics means
nothing). When the data are synthetic they are aligned to the true topics
with the Hungarian algorithm, and the truth is listed beside them. Scores use
the true (non-private) counts as reference corpus, as in the paper.
"""

import holoviews as hv
import holoviews.plotting.bokeh  # noqa: F401  (styles below are bokeh options, also outside a notebook)
import numpy as np
import pandas as pd
import panel as pn
import param

from app.results import METHOD_LABELS, METHODS, fit_results, watch_fits
from app.store import DataStore
from lpviz import metrics

TABLE_COLUMNS = ("method", "topic", "top words", "NPMI", "coherence", "L1 to truth")
_REFRESH_SECONDS = 2.0  # scores over a large vocabulary are not free; redraw at most this often


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
    """Per-topic NPMI and UMass coherence; NaN where a score is undefined."""
    npmi = metrics.npmi(top, Y_ref, top_n=n_top)
    coherence = np.full(len(top), np.nan)
    for k in range(len(top)):  # one topic with a word absent from the reference must not blank the rest
        try:
            coherence[k] = metrics.umass_coherence(top[k:k + 1], Y_ref, top_n=n_top)[0]
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
        distance[:len(truth)] = np.abs(topics[:len(truth)] - truth).sum(axis=1)
    words = metrics.top_words(topics, n=n_top, vocab=list(vocab)) if vocab is not None else top.tolist()
    table = pd.DataFrame({
        "method": method,
        "topic": np.arange(1, len(topics) + 1),
        "top words": [", ".join(map(str, row)) for row in words],
        "NPMI": npmi,
        "coherence": coherence,
        "L1 to truth": distance,
    }, columns=list(TABLE_COLUMNS))
    return topics, table


def term_topic_frame(topics, vocab, n_words):
    """Long table (term, topic, P) over the union of each topic's top ``n_words`` terms."""
    top = metrics.top_words(topics, n=min(n_words, topics.shape[1]))
    terms = list(dict.fromkeys(top.ravel().tolist()))  # topic by topic, first appearance kept
    labels = [str(vocab[v]) if vocab is not None else str(v) for v in terms]
    k_idx, t_idx = np.meshgrid(np.arange(len(topics)), np.arange(len(terms)), indexing="ij")
    return pd.DataFrame({
        "topic": (k_idx.ravel() + 1).astype(str),
        "term": np.asarray(labels, dtype=object)[t_idx.ravel()],
        "P(term | topic)": topics[:, terms][k_idx.ravel(), t_idx.ravel()] if len(terms) else [],
    })


class TopicsView(pn.viewable.Viewer):
    """Per method: the best saved sample's topics, their scores and a term x topic heatmap.

    Parameters
    ----------
    store : DataStore
        Supplies the data (vocabulary, truth, reference counts) and the
        chain runners whose results are shown.
    n_top : int
        Top words listed and scored per topic.
    n_heatmap_words : int
        Top words per topic that make up the heatmap's terms.
    """

    store = param.ClassSelector(class_=DataStore)
    n_top = param.Integer(default=10, bounds=(2, 30), doc="Top words listed and scored per topic.")
    n_heatmap_words = param.Integer(default=5, bounds=(1, 20), doc="Top words per topic in the heatmap.")
    topics = param.Dict(default={}, doc="method -> aligned P(word | topic), rows in display order.")
    table = param.DataFrame(default=pd.DataFrame(columns=list(TABLE_COLUMNS)),
                            doc="One row per method and topic: top words and scores.")

    def __init__(self, store=None, **params):
        super().__init__(store=store, **params)
        watch_fits(self.store, self.refresh, min_interval=_REFRESH_SECONDS)
        self.refresh()

    @param.depends("n_top", "store.data", watch=True)
    def refresh(self):
        """Recompute topics and scores from the runners' current results."""
        store = self.store
        if store.data is None or store.model != "topics":
            self.param.update(topics={}, table=self.param.table.default)
            return
        vocab = store.data.col_labels or None
        phi_true = (getattr(store.data, "factors", None) or {}).get("phi")
        Y_ref = store.Y_true
        topics, tables = {}, []
        if phi_true is not None:
            topics["truth"], table = summarize_topics(phi_true, Y_ref, vocab=vocab, n_top=self.n_top,
                                                      method="truth")
            tables.append(table.assign(**{"L1 to truth": 0.0}))
        for method, result in fit_results(store).items():
            phi = result["best"]["phi"]
            aligned_to = phi_true if phi_true is not None and len(phi) >= len(phi_true) else None
            topics[method], table = summarize_topics(phi, Y_ref, vocab=vocab, n_top=self.n_top,
                                                     phi_true=aligned_to, method=method)
            tables.append(table)
        table = pd.concat(tables, ignore_index=True) if tables else self.param.table.default
        self.param.update(topics=topics, table=table)

    def mean_scores(self):
        """Mean NPMI, coherence and L1 to truth per method (the paper's Figure 4 numbers)."""
        if self.table.empty:
            return self.table[["method", "NPMI", "coherence", "L1 to truth"]]
        return (self.table.groupby("method", sort=False)[["NPMI", "coherence", "L1 to truth"]]
                .mean().reset_index())

    @param.depends("topics", "n_heatmap_words")
    def heatmaps(self):
        if not self.topics:
            return hv.Overlay([hv.Text(0.5, 0.5, "No topics yet")])
        vocab = self.store.data.col_labels or None
        plots = []
        for method in ("truth", *METHODS):
            if method not in self.topics:
                continue
            frame = term_topic_frame(self.topics[method], vocab, self.n_heatmap_words)
            plots.append(hv.HeatMap(frame, ["topic", "term"], "P(term | topic)").opts(
                title=METHOD_LABELS.get(method, method), cmap="Blues", colorbar=True,
                tools=["hover"], invert_yaxis=True, min_height=320, responsive=True,
                xlabel="topic", ylabel="term"))
        return hv.Layout(plots).cols(len(plots))

    @param.depends("topics")
    def status(self):
        store = self.store
        if store.data is None:
            return pn.pane.Markdown("No data yet.")
        if store.model != "topics":
            return pn.pane.Markdown("The current data are a network: see the **Blocks** tab. "
                                    "Choose a topics source (synthetic topics, Enron topics or a "
                                    "documents x words file) to see topics here.")
        waiting = [METHOD_LABELS[m] for m in METHODS if m not in self.topics]
        truth = ("Topics are aligned to the true topics (Hungarian algorithm); "
                 if "truth" in self.topics else "")
        text = (f"{truth}scores use the true counts as reference corpus, top {self.n_top} words. "
                "Each method shows the saved sample with the highest log joint.")
        if waiting:
            text += (f"\n\n*Waiting for a saved sample (after burn-in {store.burn_in}) from: "
                     f"{', '.join(waiting)}. Start the fits in the Fits tab.*")
        return pn.pane.Markdown(text, sizing_mode="stretch_width")

    def figures(self):
        """Current figures as static HoloViews objects, for export."""
        return {"topics_heatmaps": self.heatmaps()}

    def __panel__(self):
        # A plain HTML table: needs no extra Panel extension in the template or the notebook.
        table = pn.pane.DataFrame(self.param.table, index=False, float_format="{:.3f}".format,
                                  sizing_mode="stretch_width")
        means = pn.bind(lambda _: pn.pane.DataFrame(self.mean_scores(), index=False, float_format="{:.3f}".format),
                        self.param.table)
        return pn.Column(
            self.status,
            pn.Row(pn.widgets.IntSlider.from_param(self.param.n_top, width=250),
                   pn.widgets.IntSlider.from_param(self.param.n_heatmap_words, width=250)),
            means, table,
            pn.pane.HoloViews(self.heatmaps, sizing_mode="stretch_width"),
            sizing_mode="stretch_width",
        )
