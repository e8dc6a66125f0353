"""The paper's experiments as one-click presets of the dashboard's settings.

A :class:`Preset` names an experiment of Schein et al. (ICML 2019), says in a
few words what to look at, and lists the :class:`~app.settings.Settings` it
sets. Choosing one sets ``Settings.preset``: the same path as any other change,
so it asks before discarding running fits. The sizes and schedules are the
paper's (DESIGN.md section 2) except where a text says they are reduced.
"""

from dataclasses import dataclass, field

# The noise seed every preset uses (a "new noise draw" replaces it, and the dashboard says so).
CLASS_SEED = 2019


@dataclass(frozen=True)
class Preset:
    """An experiment: its ``name``, what to look at (``text``), the settings it sets."""

    name: str
    text: str
    settings: dict = field(default_factory=dict)

    def __post_init__(self):
        # every preset says how it fits, so the Table 1 preset's VI does not outlive it; and it
        # noises with the class seed, so every student of a class sees the same release and numbers
        object.__setattr__(
            self, "settings", {"inference": "mcmc", "noise_seed": CLASS_SEED, "chain_seed": 0, **self.settings}
        )


def _figure3(alpha0, n_iter, burn_in, what):
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
    )


# The paper gives no alpha0 values: 0.2 and 0.8 as lpviz.reproduce.fig3.
FIGURE3_LARGE = _figure3(
    0.8,
    3000,
    1000,
    "Heavy noise. Press Start and watch the scoreboard on the Fits tab: the private method's MAE ends far "
    "below naive's, near the non-private fit's; the Topics tab shows naive's topics blurred. "
    "3,000 of the paper's 6,000 iterations (every 25th saved after 1,000), so the run ends within seconds.",
)
FIGURE3_SMALL = _figure3(
    0.2,
    6000,
    1000,
    "Little noise: all three methods come close to each other, naive included. Privacy costs little "
    "here; compare with the large alpha0. The paper's 6,000 iterations, every 25th saved after 1,000.",
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
        Preset(
            "Figure 1",
            "20 actors in 5 communities; N is the data's mean count, epsilon = 2.5 (alpha = exp(-eps/N)). "
            "The paper also shows epsilon = 1 and 0.75: type them in the Privacy card and compare the rate "
            "heatmaps on the Fits tab and the Blocks tab (the private fit keeps the blocks longer). "
            "The paper's 8,500 iterations, every 25th saved after 1,000.",
            dict(
                source="synthetic-blocks",
                size=20,
                n_components=5,
                seed=0,
                heterogeneous=False,
                epsilon=2.5,
                holdout="none",
                n_iter=8500,
                burn_in=1000,
                thin=25,
            ),
        ),
        Preset(
            "Figure 4 (reduced size for the browser)",
            "Enron emails x words at eps/N = 2 (also try 3 and 1). Reduced for the browser: 400 emails x "
            "800 words, K = 10, 400 iterations (every 10th saved after 150); the paper used 10,000 x 10,000, "
            "K = 50 and 7,500 iterations. Look at MAE and at the NPMI and UMass columns of the scoreboard.",
            _enron_browser(2.0),
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
            "epsilon or the sampling rate and watch its topics sharpen.",
            _enron_browser(1.0),
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
        ),
        Preset(
            "Figure 5",
            "Enron sender x recipient counts (actors with >= 100 emails), C = 5 communities (the paper also "
            "used 10 and 20), eps/N = 2. Every cell of the top senders and recipients is held out (the paper's "
            "50 of 161 actors, scaled to this network): compare the held-out MAE column of the scoreboard. "
            "1,000 iterations (every 10th saved after 400); the paper ran 7,500.",
            dict(
                source="enron-network",
                min_count=100,
                n_components=5,
                heterogeneous=False,
                epsilon=2.0,
                N=1.0,
                holdout="top actors",
                holdout_actors=FIGURE5_HELDOUT_ACTORS,
                n_iter=1000,
                burn_in=400,
                thin=10,
            ),
        ),
    )
}

# What the dashboard opens on: the paper's effect (private beats naive on MAE) within seconds.
DEFAULT_PRESET = FIGURE3_LARGE.name
