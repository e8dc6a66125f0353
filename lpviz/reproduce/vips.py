"""The VIPS curve (Park et al. 2016; Foulds et al.): central-DP private stochastic variational LDA,
held-out perplexity against epsilon, beside the locally private fits.

Not available until the central-DP baseline lands (``lpviz.central.PrivateLDA``
and ``lpviz.accounting``); the experiment is registered so ``lpviz reproduce
vips`` says so plainly.
"""

from lpviz.reproduce.base import Experiment


class Vips(Experiment):
    name = "vips"
    title = "VIPS: epsilon vs held-out perplexity of private stochastic variational LDA (central DP)"
    paper = ("Park, Foulds, Chaudhuri, Welling. Private Topic Modeling (2016); Foulds, Park et al. VIPS "
             "(extended abstract)")
    requires = ("lpviz.central", "lpviz.accounting")
    presets = {"tiny": {}, "quick": {}, "paper": {}}

    def tasks(self, preset, chains=None, seed=0, sampler=None):
        self.check_available()
        raise NotImplementedError(
            "lpviz.central and lpviz.accounting are importable but vips is not wired yet: give Vips a tasks() "
            "with one task per (epsilon or noise_multiplier, seed) running PrivateLDA on the Enron documents and "
            "a report() plotting held-out perplexity against epsilon (lpviz/reproduce/vips.py)")
