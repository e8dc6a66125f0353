"""Table 1 of the variational paper (Schofield et al.): MCMC vs CAVI on a 1000 x 1000 synthetic matrix.

The paper (DESIGN.md 1c): K=50, eps/N=1, MAE of the estimated Poisson rates
against the true rates: naive MCMC 0.396 (5000 burn-in + 1000), private MCMC
0.208 (3000+1000) and 0.224 (2000+1000), naive VI 0.492 (42 iterations) and
0.465 (100), private VI 0.396 (42, converged), private MCMC initialised from
the VI fit 0.223 (1000+1000) and 0.208 (2000+1000); 2.8 s per VI iteration,
0.8 s per MCMC iteration.

Not available until CAVI lands (``lpviz.vi``: ``inference="vi"``,
``init="vi"``); the experiment is registered so ``lpviz reproduce table1``
says so plainly instead of failing obscurely.

Wiring it when ``lpviz.vi`` is on the branch (nothing else changes: the
registry line is already in :mod:`lpviz.reproduce`):

1. ``presets``: ``paper`` = the rows above on the VI paper's 1000 x 1000
   synthetic matrix (K=50, eps/N=1); ``quick``/``tiny`` = the same rows on a
   smaller matrix with proportionally fewer iterations.
2. ``tasks()``: one :class:`~lpviz.reproduce.grid.Task` per (row, chain) with
   every seed from :func:`~lpviz.reproduce.grid.seed_for`; set
   ``task_function`` to a module-level function that runs the row (the VI
   branch's Table 1 function, or :func:`lpviz.engine.run` with
   ``inference``/``init``) and returns ``{"record": {"scores": score(...),
   "method_label": ..., "trace_name": ..., "shape": ..., "seconds_total": ...,
   "seconds_per_iteration": ..., ...}, "arrays": {"log_joint": ...,
   "log_marginal": ..., "iteration_seconds": ..., "trace": ...}}`` like
   :func:`lpviz.reproduce.chains.chain_task` (whose record keys the shared
   tables read), or extend ``chain_task`` with a pass-through of run options.
3. ``report()``: a :class:`~lpviz.reproduce.report.Claim` per row: the
   paper's MAE (``PAPER_ROWS``) beside ``score()["rate_mae"]`` (mean over
   chains), verdict by a stated tolerance; plus the paper's timing claim
   (2.8 s per VI iteration vs 0.8 s per MCMC iteration) against the measured
   seconds per iteration.
4. Remove the ``NotImplementedError`` and add the tiny preset to
   ``tests/test_reproduce.py`` (end to end, serial vs Dask equal).
"""

from lpviz.reproduce.base import Experiment

# The paper's rows: (label, method, inference, init, burn-in, saved/iterations, MAE vs true rates)
PAPER_ROWS = (
    ("naive MCMC", "naive", "mcmc", None, 5000, 1000, 0.396),
    ("private MCMC", "private", "mcmc", None, 3000, 1000, 0.208),
    ("private MCMC", "private", "mcmc", None, 2000, 1000, 0.224),
    ("naive VI", "naive", "vi", None, 0, 42, 0.492),
    ("naive VI", "naive", "vi", None, 0, 100, 0.465),
    ("private VI", "private", "vi", None, 0, 42, 0.396),
    ("private MCMC from VI", "private", "mcmc", "vi", 1000, 1000, 0.223),
    ("private MCMC from VI", "private", "mcmc", "vi", 2000, 1000, 0.208),
)


class Table1(Experiment):
    name = "table1"
    title = "Table 1 (variational paper): MCMC vs CAVI, MAE against the true rates"
    paper = ("Schofield et al., Variational inference for locally private Poisson factorization, Table 1 "
             "(schofield_variational_locally_private_pf.tex)")
    requires = ("lpviz.vi",)
    wired = False  # see the module docstring: set True once tasks() and report() are written
    presets = {"tiny": {}, "quick": {}, "paper": {"rows": PAPER_ROWS}}

    def tasks(self, preset, chains=None, seed=0, sampler=None):
        self.check_available()
        raise NotImplementedError(
            "lpviz.vi is importable but table1 is not wired yet: give Table1 a tasks() that runs one task per "
            "row of PAPER_ROWS (the VI branch's Table 1 experiment function as task_function) and a report() "
            "that puts each row's MAE beside the paper's (lpviz/reproduce/table1.py)")
