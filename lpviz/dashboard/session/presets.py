"""The paper's experiments as one-click presets of the dashboard's settings.

A :class:`Preset` names an experiment of Schein et al. (ICML 2019), says in a
few words what to look at, and lists the :class:`~lpviz.dashboard.session.settings.Settings` it
sets. Choosing one sets ``Settings.preset``: the same path as any other change,
so it asks before discarding running fits. The sizes and schedules are the
paper's (DESIGN.md section 2) except where a text says they are reduced.
"""

from dataclasses import dataclass, field

from lpviz.dashboard.session.runner import DASHBOARD_CHAINS
from lpviz.metrics import ESS_MIN, RHAT_MIXED  # the one R-hat and ESS threshold every text states

# The noise seed every preset uses (a "new noise draw" replaces it, and the dashboard says so).
CLASS_SEED = 2019


@dataclass(frozen=True)
class Claim:
    """What a lesson says the scores show, as data, so that the dashboard checks it after the run
    (:func:`check`) and a test runs it (tests/test_presets.py).

    ``key`` is the :func:`lpviz.metrics.score` number compared (an error: lower is better).
    ``better``/``worse``: every method of ``better`` has a lower ``key`` than every one of
    ``worse``, and beats the trivial baselines (:func:`lpviz.metrics.rankable`). ``close``: the
    methods' ``key`` lie within ``tolerance`` (relative to the smallest) of each other. Every fit
    compared must be healthy: a flagged fit (collapsed, not mixed, ...) never counts.
    ``not_mixed``: a lesson about the diagnostics themselves: these chains are flagged "not mixed"
    (a reduced run that must not be read as a result); ``healthy``: beside them, these fits are not
    flagged at all (the lesson says the others did mix).
    """

    text: str
    key: str
    better: tuple = ()
    worse: tuple = ()
    close: tuple = ()
    tolerance: float = 0.15
    not_mixed: tuple = ()  # methods whose chains the lesson says have not mixed (flagged "not mixed")
    disagree: tuple = ()  # methods whose chains the lesson says sit in different modes ("chains disagree")
    healthy: tuple = ()  # with not_mixed: methods the lesson says are not flagged
    # (better, worse): a finding that survives the modes (issue 54): every chain of ``better`` has a
    # lower ``key`` than every chain of ``worse`` and than the best constant's, unmixed chains included
    # (a collapsed or non-finite fit never counts)
    every_chain: tuple = ()
    # with disagree: methods whose chains stacking weighs unequally (the largest weight at least
    # STACKED_SHARE_MIN times an equal share, 1 / chains), its weighted rates closer to the true
    # counts (MAE) than the chains' equal pool: stacking reads only the noised cells (lpviz.stacking),
    # the MAE the truth (issue 54)
    stacked: tuple = ()

    @property
    def methods(self):
        return (
            *self.better,
            *self.worse,
            *self.close,
            *self.not_mixed,
            *self.disagree,
            *self.healthy,
            *self.every_chain,
            *self.stacked,
        )


@dataclass(frozen=True)
class Verdict:
    """A claim checked: ``held`` True or False (None: not all its fits have numbers yet) and why.
    ``ended``: with ``held`` None, the run ended short of its goal and will never be checked
    ("not checked", no "yet": :func:`unfinished`)."""

    held: bool | None
    text: str
    ended: bool = False

    @property
    def word(self):
        if self.held is None and self.ended:
            return "not checked"
        return {True: "held", False: "did not hold", None: "not checked yet"}[self.held]


def unfinished(runners, waiting="checked when the run ends"):
    """The rule for every claim about fits (a preset's, a teaching step's): it is about the whole run,
    so it is checked only once every fit it compares has reached its goal iterations ("done").
    The :class:`Verdict` saying why not in words (``waiting`` while a fit still runs), or None when
    every fit reached its goal and the claim may be checked. A run stopped at 173 of 400 iterations
    showed "Held: 400 iterations are too few ..." (issue 57)."""
    short = [runner for runner in runners if runner.status in ("stopped", "error")]
    if short:
        runner = min(short, key=lambda runner: runner.iteration)
        how = "ended in an error" if runner.status == "error" else "was stopped"
        return Verdict(
            None,
            f"the run {how} at {runner.iteration:,} of {runner.target:,} iterations; the claim is about the full run",
            ended=True,
        )
    if any(runner.status != "done" for runner in runners):
        return Verdict(None, waiting)
    return None


def _label(method):
    from lpviz.methods import METHODS

    return METHODS[method].label if method in METHODS else method


def check(claim, scores):
    """The :class:`Verdict` of ``claim`` on ``scores`` (``{method: score() dict}`` of the finished fits)."""
    from lpviz.metrics import SCORE_LABELS, rankable

    key_label = SCORE_LABELS.get(claim.key, claim.key)
    if claim.disagree:
        return _check_disagree(claim, scores)
    if claim.every_chain:
        return _check_every_chain(claim, scores)
    if claim.not_mixed:
        health = {m: (scores.get(m) or {}).get("health") for m in (*claim.not_mixed, *claim.healthy)}
        if any(h is None for h in health.values()):
            return Verdict(None, "waiting for the chains' diagnostics")
        mixed = [m for m in claim.not_mixed if not health[m].get("not_mixed")]
        if mixed:
            return Verdict(False, f"{', '.join(map(_label, mixed))} did mix: this lesson no longer applies")
        flagged = [m for m in claim.healthy if not health[m].get("healthy")]
        if flagged:
            reasons = "; ".join(f"{_label(m)}: {', '.join(health[m].get('reasons') or [])}" for m in flagged)
            return Verdict(False, f"the lesson says these fits are healthy, but they are flagged ({reasons})")
        return Verdict(True, f"{', '.join(map(_label, claim.not_mixed))} flagged not mixed: nothing is ranked")
    missing = [m for m in claim.methods if (scores.get(m) or {}).get(claim.key) is None]
    if missing:
        return Verdict(None, f"waiting for the {key_label} of {', '.join(map(_label, missing))}")
    flagged = [(m, scores[m].get("health") or {}) for m in claim.methods]
    flagged = [(m, health) for m, health in flagged if not health.get("healthy")]
    if flagged:
        reasons = "; ".join(
            f"{_label(m)}: {', '.join(health.get('reasons') or ['no health numbers'])}" for m, health in flagged
        )
        advice = (
            " Run longer (more iterations) before reading the comparison."
            if any(health.get("not_mixed") for _, health in flagged)
            else ""
        )
        return Verdict(False, f"a flagged fit never counts ({reasons}).{advice}")
    value = {m: scores[m][claim.key] for m in claim.methods}
    shown = ", ".join(f"{_label(m)} {value[m]:.4g}" for m in claim.methods)
    for m in claim.better:
        ok, reasons = rankable(scores[m], claim.key)
        if not ok:
            return Verdict(False, f"{_label(m)} does not beat the trivial baselines: {'; '.join(reasons)}")
    if claim.better and not max(value[m] for m in claim.better) < min(value[m] for m in claim.worse):
        return Verdict(False, f"{key_label}: {shown}; the order is not the one claimed")
    if claim.close:
        values = [value[m] for m in claim.close]
        spread = (max(values) - min(values)) / min(values) if min(values) > 0 else float("inf")
        if spread > claim.tolerance:
            return Verdict(False, f"{key_label}: {shown}, {spread:.0%} apart (more than {claim.tolerance:.0%})")
        return Verdict(True, f"{key_label}: {shown}, within {spread:.0%} of each other")
    baseline = (scores[claim.better[0]].get("baselines") or {}).get(f"best_constant_{claim.key}")
    reference = f" (best constant {baseline:.4g})" if baseline is not None else ""
    return Verdict(True, f"{key_label}: {shown}{reference}")


def _check_every_chain(claim, scores):
    """A finding that survives the modes: every chain of ``claim.every_chain[0]`` has a lower ``key``
    than every chain of ``[1]`` and than the best constant's (its chains' own scores, ``chains``);
    unmixed chains count, a collapsed or non-finite fit does not; with ``not_mixed``, those methods
    are flagged not mixed too (the lesson says the chains have not met)."""
    from lpviz.metrics import SCORE_LABELS

    key_label = SCORE_LABELS.get(claim.key, claim.key)
    better, worse = claim.every_chain
    per_chain = {}
    for m in (better, worse):
        score = scores.get(m) or {}
        chains = score.get("chains") or ([score] if score else [])
        values = [chain.get(claim.key) for chain in chains]
        if not values or any(v is None for v in values) or score.get("health") is None:
            return Verdict(None, f"waiting for the {key_label} of every chain of {_label(m)}")
        flags = score["health"].get("flags") or []
        broken = [flag for flag in flags if flag in ("collapsed", "non-finite")]
        if broken:
            return Verdict(False, f"{_label(m)} is {' and '.join(broken)}: a broken fit never counts")
        per_chain[m] = values
    for m in claim.not_mixed:
        if not ((scores.get(m) or {}).get("health") or {}).get("not_mixed"):
            return Verdict(False, f"{_label(m)} did mix: this lesson no longer applies")
    low, high = min(per_chain[better]), max(per_chain[better])
    other_low, other_high = min(per_chain[worse]), max(per_chain[worse])
    shown = f"{_label(better)} {low:.4g}-{high:.4g}, {_label(worse)} {other_low:.4g}-{other_high:.4g}"
    if not high < other_low:
        return Verdict(False, f"{key_label} of the chains: {shown}; not every chain below every chain")
    constant = (scores[better].get("baselines") or {}).get(f"best_constant_{claim.key}")
    if constant is None or not high < constant:
        words = "no best constant to compare with" if constant is None else f"the best constant's {constant:.4g}"
        return Verdict(False, f"{key_label} of the chains: {shown}; {_label(better)} does not beat {words}")
    return Verdict(True, f"{key_label} of the chains: {shown} (best constant {constant:.4g}), unmixed chains included")


def _check_disagree(claim, scores):
    """A lesson about several chains: each method of ``claim.disagree`` is flagged "chains disagree",
    its cross-chain R-hat above :data:`~lpviz.metrics.RHAT_MIXED`, the odd chain named (counted from 0, as
    score's reasons count them)."""
    missing = [m for m in claim.disagree if (scores.get(m) or {}).get("health") is None]
    if missing:
        return Verdict(None, f"waiting for the chains of {', '.join(map(_label, missing))}")
    found = []
    for m in claim.disagree:
        score = scores[m]
        rhat, odd = score.get("rhat"), score.get("odd_chains") or []
        if score.get("n_chains", 1) < 2:
            return Verdict(False, f"{_label(m)} ran one chain: there is nothing to compare it with")
        if not (score["health"].get("chains_disagree") and odd and rhat is not None and rhat > RHAT_MIXED):
            return Verdict(False, f"the chains of {_label(m)} agree (R-hat {rhat:.3g}): this lesson no longer applies")
        found.append(f"{_label(m)}: chain {', '.join(str(i) for i in odd)} apart, R-hat {rhat:.3g}")
    for m in claim.stacked:
        held, words = _stacked(m, scores.get(m) or {})
        if not held:
            return Verdict(held, words)
        found.append(words)
    return Verdict(True, "; ".join(found))


# The largest stacking weight of a lesson's modes, over an equal share (1 / chains): unequal, not a
# coin's 0.5 / 0.5. One rule for any number of chains: 0.6 of two, 0.3 of four (issue 54: at four
# chains the lesson's weights were 0.54 / 0.13 / 0.00 / 0.33, which a two-chain 0.6 called equal).
STACKED_SHARE_MIN = 1.2


def stacked_weight_min(n_chains):
    """The largest weight that makes ``n_chains`` stacking weights unequal in a lesson's words."""
    return STACKED_SHARE_MIN / n_chains


def _stacked(method, score):
    """``(held, words)`` of the stacking half of a lesson about modes (:attr:`Claim.stacked`)."""
    weights, stacked, pooled = score.get("stacking_weights"), score.get("stacked_mae"), score.get("mae")
    if weights is None or stacked is None or pooled is None:
        return None, f"waiting for the stacking of {_label(method)}'s chains"
    shown = " / ".join(f"{w:.2f}" for w in weights)
    if max(weights) < stacked_weight_min(len(weights)):
        return False, f"stacking weighs {_label(method)}'s chains {shown}, about equally: this lesson no longer applies"
    if not stacked < pooled:
        return False, (
            f"{_label(method)}'s stacked rates (weights {shown}) are no closer to the true counts than the "
            f"pooled: MAE {stacked:.3g} vs {pooled:.3g}"
        )
    return True, f"stacking weights {shown}, MAE stacked {stacked:.3g} below pooled {pooled:.3g}"


@dataclass(frozen=True)
class Preset:
    """An experiment: its ``name``, what to look at (``text``), the settings it sets and the
    :class:`Claim` its text makes (None: it states no finding)."""

    name: str
    text: str
    settings: dict = field(default_factory=dict)
    claim: Claim | None = None

    def __post_init__(self):
        # every preset says how it fits, so the Table 1 preset's VI does not outlive it; and it
        # noises with the class seed, so every student of a class sees the same release and numbers.
        # The dashboard's chains per method (two: R-hat across them on every scoreboard) unless it says
        # otherwise; its claim is checked so (tests/test_presets_claims.py).
        object.__setattr__(
            self,
            "settings",
            {
                "inference": "mcmc",
                "noise_seed": CLASS_SEED,
                "chain_seed": 0,
                "chains": DASHBOARD_CHAINS,
                **self.settings,
            },
        )


def _figure3(alpha0, n_iter, burn_in, what, claim):
    return Preset(
        f"Figure 3 ({'small' if alpha0 < 0.5 else 'large'} alpha0)",
        f"90 documents x 15 words, 3 topics; each document noised with its own alpha_d ~ "
        f"Beta(10 x {alpha0:g}, 10 x {1 - alpha0:g}) (mean alpha0 = {alpha0:g}). {what}",
        dict(
            source="synthetic-topics",
            n_docs=90,
            n_words=15,
            n_components=3,
            seed=0,
            heterogeneous=True,
            alpha0=alpha0,
            concentration=10.0,
            holdout="none",
            n_iter=n_iter,
            burn_in=burn_in,
            thin=25,
        ),
        claim,
    )


# The dashboard's chains, like every preset (issue 56 item 1: served at the library's pace, 30,000
# iterations of two chains take about 30 s here, no longer minutes). Its chains have not met after them
# (four: R-hat 1.24, bulk ESS 12), so the lesson is a finding that survives the modes, as Figure 5's.
FIGURE1 = Preset(
    "Figure 1",
    "20 actors in 5 communities; N is the data's mean count, epsilon = 2.5 (alpha = exp(-eps/N)). "
    "The paper also shows epsilon = 1 and 0.75: type them in the Privacy card and compare the rate "
    "heatmaps on the Fits tab and the Blocks tab (the private fit keeps the blocks longer). "
    "30,000 iterations, every 25th saved after 6,000: the private chain's likelihood moves slowly, and "
    "after the paper's 8,500 (burn-in 1,000) one chain has not mixed (R-hat 1.47, ESS 3 at the class seed). "
    f"{DASHBOARD_CHAINS} chains per method: the Fits tab says whether they have met (under the traces each "
    "method's chains are drawn alone). Whether or not they have, the finding is read chain by chain: every "
    "private chain's MAE against the true rates is below every naive chain's, and below the best constant's.",
    dict(
        source="synthetic-blocks",
        size=20,
        n_components=5,
        seed=0,
        heterogeneous=False,
        epsilon=2.5,
        holdout="none",
        n_iter=30000,
        burn_in=6000,
        thin=25,
        chains=DASHBOARD_CHAINS,
    ),
    Claim(
        "every private chain's MAE against the true rates is below every naive chain's and below the best "
        "constant's: a finding that survives the modes, unmixed chains included.",
        "rate_mae",
        every_chain=("private", "naive"),
    ),
)

# Figure 1's N: the mean count of its drawn network (size 20, 5 communities, seed 0), the N its noise
# uses (Source.N_from_data). Stated in the texts below; tests/test_presets.py builds the data and checks it.
FIGURE1_N = 15.63


def _noise_words(epsilon, N):
    """The noise level a preset runs at, in the words the sidebar and the Privacy tab use."""
    import math

    return f"epsilon = {epsilon:g} with N = {N:g} (eps/N = {epsilon / N:.2g}, alpha = {math.exp(-epsilon / N):.3g})"


# Two chains of the block model on Figure 1's network at epsilon 1 (eps/N = 0.064: Figure 1's N is the
# data's mean count), short of the preset's 30,000 iterations: at this chain seed the private method's
# chain 1 sits in another mode for the whole run (measured: its rate MAE about 7 against chain 0's about
# 5, R-hat across them about 2). A lesson about the diagnostics: its claim is that the chains disagree,
# and nothing is ranked. The teaching mode's chains step loads it. Its text is written from its settings,
# so the noise level it states is the one in force (it said "eps/N = 1" at eps/N = 0.064: issue 57).
TWO_MODES_SEED = 8
_TWO_MODES_SETTINGS = {
    **FIGURE1.settings,
    "epsilon": 1.0,
    "n_iter": 1500,
    "burn_in": 250,
    "chains": 2,
    "chain_seed": TWO_MODES_SEED,
}
TWO_MODES = Preset(
    "Two chains, two modes",
    f"Figure 1's network (20 actors in 5 communities) at {_noise_words(_TWO_MODES_SETTINGS['epsilon'], FIGURE1_N)}: "
    f"N is the data's mean count, as in Figure 1. {_TWO_MODES_SETTINGS['chains']} chains per method, "
    f"{_TWO_MODES_SETTINGS['n_iter']:,} iterations (every {_TWO_MODES_SETTINGS['thin']}th saved after "
    f"{_TWO_MODES_SETTINGS['burn_in']:,}). Under the traces, the Fits tab draws each method's chains alone "
    "after burn-in: the private method's two chains settle at different levels of the noised data's likelihood "
    "and stay there. Each is a posterior mode of its "
    f"own; either alone would look settled. R-hat compares them: far above {RHAT_MIXED:g}, and the scoreboard "
    "flags the fit 'chains disagree', names the chain that sits apart and ranks nothing. One chain could never "
    "have told. The stacking pane under the scoreboard weighs the chains by how well each predicts the noised "
    "cells (it reads no truth): here it weighs the private chains unequally, and the stacked rates are closer "
    "to the true counts than the two chains pooled equally.",
    _TWO_MODES_SETTINGS,
    Claim(
        "the private fit's two chains sit in different modes: it is flagged 'chains disagree', the chain apart "
        f"named, with R-hat across them above {RHAT_MIXED:g}; stacking weighs them unequally (the larger weight at "
        f"least {STACKED_SHARE_MIN:g} times an equal share: "
        f"{stacked_weight_min(_TWO_MODES_SETTINGS['chains']):g}), and the stacked rates' MAE against the true "
        "counts is below the pooled.",
        "rhat",
        disagree=("private",),
        stacked=("private",),
    ),
)

# The paper gives no alpha0 values; lpviz.reproduce.fig3 uses 0.2 and 0.8. The dashboard's large one is
# 0.75: at 0.8 (class seed) the private fit keeps 46% of the data's estimated total and score() flags it
# collapsed, so its lesson would rest on a flagged fit; at 0.75 every fit is healthy and private's MAE is
# about half of naive's (measured: 1.57 against 3.04). 10,000 iterations, not the paper's 6,000: after
# 6,000 the private and naive chains' bulk ESS is 78 and 75 (< 100, flagged not mixed); after 10,000,
# 147 and 374.
FIGURE3_LARGE = _figure3(
    0.75,
    10000,
    1000,
    "Heavy noise. Press Run the fits (top of the sidebar; or Start on the Fits tab) and watch the "
    "scoreboard: the private method's MAE against the true rates ends at about half of naive's (every fit "
    "healthy, the best constant rate's MAE beside them); the non-private fit of the true counts is the "
    "reference both aim at (the scoreboard stars the best of each column: private may lead on topic scores). "
    "The Topics tab shows naive's topics blurred. 10,000 iterations, every 25th saved after 1,000 (the paper "
    f"ran 6,000; here the chains' ESS stays below {ESS_MIN:g} after 6,000 and the Fits tab would flag them not mixed).",
    Claim(
        "the private fit's MAE against the true rates is below naive's.",
        "rate_mae",
        better=("private",),
        worse=("naive",),
    ),
)
FIGURE3_SMALL = _figure3(
    0.2,
    6000,
    1000,
    "Little noise: all three methods come close to each other, naive included. Privacy costs little "
    "here; compare with the large alpha0. The paper's 6,000 iterations, every 25th saved after 1,000.",
    Claim(
        "all three MAEs against the true rates lie within 15% of each other.",
        "rate_mae",
        close=("private", "naive", "nonprivate"),
    ),
)


def _enron_browser(epsilon):
    """Enron emails x words at Figure 4's reduced browser size, noised at eps/N = ``epsilon``."""
    return dict(
        source="enron-topics",
        n_docs=400,
        n_words=800,
        n_components=10,
        seed=0,
        heterogeneous=False,
        epsilon=epsilon,
        N=1.0,
        holdout="none",
        n_iter=400,
        burn_in=150,
        thin=10,
    )


# lpviz.reproduce.fig5.heldout_actors(84): the shared Enron subset has 84 actors at min_count 100
# (importing lpviz.reproduce would cost the app's start a second and a half).
FIGURE5_HELDOUT_ACTORS = 26

PRESETS = {
    preset.name: preset
    for preset in (
        FIGURE3_LARGE,
        FIGURE3_SMALL,
        FIGURE1,
        TWO_MODES,
        Preset(
            "Figure 4 (reduced size for the browser)",
            "Enron emails x words at eps/N = 2 (also try 3 and 1). Reduced for the browser: 400 emails x "
            "800 words, K = 10, 400 iterations (every 10th saved after 150); the paper used 10,000 x 10,000, "
            "K = 50 and 7,500 iterations; two chains per method. Look at MAE and at the NPMI and UMass columns "
            "of the scoreboard: at this reduced run no method's chains have mixed (the R-hat across them above "
            f"{RHAT_MIXED:g}, or an ESS below {ESS_MIN:g}: the scoreboard shows both), so the Fits tab flags "
            "every fit 'not mixed: run longer' and stars none. Raise the iterations before reading the comparison.",
            _enron_browser(2.0),
            Claim(
                "400 iterations are too few on these data: every chain is flagged not mixed, and nothing is ranked.",
                "mae",
                not_mixed=("private", "naive", "nonprivate"),
            ),
        ),
        Preset(
            "Central vs local",
            "Central against local privacy on Enron emails x words (Figure 4's reduced browser size: 400 emails x "
            "800 words, K = 10, 400 iterations, every 10th saved after 150). Press Start on the Fits tab for the "
            "local fits at eps/N = 1, then Fit central model on the Central vs local tab: private online LDA "
            "(VIPS) at central epsilon 1, delta 1e-5. Compare the NPMI and UMass of the rows, and what each "
            "protects: central, (epsilon, delta)-DP per whole document with a trusted curator who sees the true "
            "counts; local, (N, epsilon) per document with nobody trusted. On 400 documents the noise a small "
            "central epsilon needs swamps the statistics (the paper had 400,000 documents): raise the central "
            "epsilon or the sampling rate and watch its topics sharpen. At 400 iterations the local chains have "
            "not mixed: the Fits tab says so, and ranks none of them.",
            _enron_browser(1.0),
            Claim(
                "400 iterations are too few on these data: every local chain is flagged not mixed.",
                "mae",
                not_mixed=("private", "naive", "nonprivate"),
            ),
        ),
        Preset(
            "Table 1 (VI paper, reduced)",
            "Variational inference for every method: private VI (lpviz's default CAVI variant, which does not "
            "collapse; the VI paper's own variant collapses on its Table 1 data) against naive VI and the "
            "non-private VI fit, at eps/N = 1 on synthetic topics. Each fit runs until its ELBO stops changing "
            "(relative change 1e-5; at most 300 iterations), in seconds instead of a chain's minutes: compare the "
            "MAE column with the best constant's beside it and with Figure 3's MCMC scoreboard, and see the ELBO "
            "trace on the Fits tab. The paper's table used 1,000 x 1,000 with K = 50 and Gamma(0.1, 1) factors "
            "(`lpviz reproduce table1`); this is the app's synthetic topic data at 300 documents x 100 words, "
            "K = 10 (about 0.5 counts per cell).",
            dict(
                source="synthetic-topics",
                n_docs=300,
                n_words=100,
                n_components=10,
                seed=0,
                heterogeneous=False,
                epsilon=1.0,
                N=1.0,
                holdout="none",
                inference="vi",
                n_iter=300,
                burn_in=0,
                thin=1,
            ),
            Claim(
                "private VI's MAE against the true rates is below naive VI's.",
                "rate_mae",
                better=("private",),
                worse=("naive",),
            ),
        ),
        Preset(
            "Figure 5",
            "Enron sender x recipient counts (actors with >= 100 emails), C = 5 communities (the paper also "
            "used 10 and 20), eps/N = 2, two chains per method. Every cell of the top senders and recipients "
            "is held out (the paper's 50 of 161 actors, scaled to this network): the scoreboard gives the MAE "
            "on the observed cells and on the held-out actors, each beside the best constant rate's. After "
            "2,500 iterations (every 10th saved after 500) the private method's two chains have not met: R-hat "
            f"across them stays above {RHAT_MIXED:g}, so the Fits tab flags it not mixed. On real data the chains "
            "of a block model sit in separate modes, and a finding must survive them: here every private "
            "chain's MAE is below every naive chain's and below the best constant's, whichever mode each chain "
            "is in. Set Chains to 1 and run again: the one chain's split R-hat passes and nothing warns, one "
            "chain hides the modes. The paper ran 7,500 iterations.",
            dict(
                source="enron-network",
                min_count=100,
                n_components=5,
                heterogeneous=False,
                epsilon=2.0,
                N=1.0,
                holdout="top actors",
                holdout_actors=FIGURE5_HELDOUT_ACTORS,
                n_iter=2500,
                burn_in=500,
                thin=10,
            ),
            Claim(
                "after 2,500 iterations the private method's two chains have not mixed (flagged), yet every "
                "private chain's MAE is below every naive chain's and below the best constant's: a finding "
                "that survives the modes.",
                "mae",
                not_mixed=("private",),
                every_chain=("private", "naive"),
            ),
        ),
    )
}

# What the dashboard opens on: the paper's effect (private beats naive on MAE) within seconds.
DEFAULT_PRESET = FIGURE3_LARGE.name
