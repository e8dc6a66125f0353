"""The VIPS curve (Park et al. 2016; Foulds et al.): central-DP private stochastic variational LDA,
held-out perplexity against epsilon, beside the locally private fits.

Not available until the central-DP baseline lands (``lpviz.central.PrivateLDA``
and ``lpviz.accounting``); the experiment is registered so ``lpviz reproduce
vips`` says so plainly.

Wiring it when ``lpviz.central`` is on the branch (the registry line is
already in :mod:`lpviz.reproduce`):

1. ``presets``: an epsilon grid (e.g. 0.5, 1, 2, 4, 8 and the non-private
   ``noise_multiplier=0``), K, ``batch_size``, ``n_epochs``, the Enron
   documents (``{"source": "enron-topics", ...}`` via
   :func:`lpviz.reproduce.chains.build_data`) split into training and
   held-out documents by a seeded draw; ``paper`` at the papers' sizes.
2. ``tasks()``: one task per (epsilon, seed); ``task_function`` a
   module-level function that fits ``PrivateLDA(K, epsilon=e,
   batch_size=..., n_epochs=..., random_state=seed)`` on the training rows and
   returns ``{"record": {"scores": {"perplexity": model.perplexity(X_heldout),
   "epsilon": model.epsilon_, "noise_multiplier": model.noise_multiplier_, ...},
   "seconds_total": ..., "seconds_per_iteration": seconds per step, ...},
   "arrays": {...}}``; the locally private side of the comparison is
   Figure 4's grid (same documents), whose NPMI/UMass come from score().
3. ``report()``: the curve epsilon -> held-out perplexity (``metric_panels``),
   the DESIGN.md 1d accounting check (dp-accounting gives 1.21 RDP / 0.93 PLD
   at delta=1e-4 for the paper's Wikipedia setting, the paper 2.44) as a
   Claim, and the note that central DP protects a whole document against a
   trusted curator while LPLP protects N tokens against everyone.
4. Set ``group_keys``/``label_keys`` to the task labels and override the
   convergence section (VI has no chains: no R-hat), then test the tiny
   preset end to end as for fig1.
"""

from lpviz.reproduce.base import Experiment


class Vips(Experiment):
    name = "vips"
    title = "VIPS: epsilon vs held-out perplexity of private stochastic variational LDA (central DP)"
    paper = ("Park, Foulds, Chaudhuri, Welling. Private Topic Modeling (2016); Foulds, Park et al. VIPS "
             "(extended abstract)")
    requires = ("lpviz.central", "lpviz.accounting")
    wired = False  # see the module docstring: set True once tasks() and report() are written
    presets = {"tiny": {}, "quick": {}, "paper": {}}

    def tasks(self, preset, chains=None, seed=0, sampler=None):
        self.check_available()
        raise NotImplementedError(
            "lpviz.central and lpviz.accounting are importable but vips is not wired yet: give Vips a tasks() "
            "with one task per (epsilon or noise_multiplier, seed) running PrivateLDA on the Enron documents and "
            "a report() plotting held-out perplexity against epsilon (lpviz/reproduce/vips.py)")
