"""Variational inference for (locally private) Poisson factorization: CAVI.

The VI paper (Schofield et al., ``schofield_variational_locally_private_pf.tex``
sections 4-5; DESIGN.md 1c) fits a mean-field ``q``: a Gamma ``q`` over every
factor entry (Gopalan et al.'s Poisson factorization updates over the observed
cells) and, for the private method, per noised cell ``q(lambda+-) =
Gamma(E[g+-] + 1, rate 1/alpha)`` and ``q(m)`` a point mass at the mode of
``Bessel(|ytil|, 2 sqrt(G[lambda-] G[lambda+ + mu]))`` (``G[x] = exp E[log x]``;
``G[lambda+ + mu]`` by the delta method), or at its mean with
``bessel_point="mean"``. Every method (private, naive, non-private) and every
model with ``"vi"`` in its ``inferences`` runs this way; the methods and
models hold their own hooks (``vi_*``), this module drives them.

- :class:`VariationalFit` steps a CAVI fit like a :class:`~lpviz.engine.Chain`
  (``step``, ``iterate``, ``iteration``, ``factors`` = ``E_q[factors]``,
  ``stop``), plus ``elbo`` and ``converged``; it yields :class:`VariationalState`
  (a :class:`~lpviz.engine.ChainState` with the ELBO), so whatever consumes
  chain states consumes it.
- :func:`variational_run` drives one to convergence as a :class:`VariationalRun`
  feeding a :class:`VariationalPosterior` (a :class:`~lpviz.engine.Posterior`
  whose one "sample" is the current ``E_q[factors]``): scoring, views and fit
  files work unchanged. ``lpviz.run(..., inference="vi")`` returns one.
- :func:`warm_start` starts a chain from a CAVI fit
  (``lpviz.run(..., init="vi")``).
- :func:`iterate_bessel_points` / :func:`compare_bessel_points`: mode against
  mean CAVI on the same data from the same start, iteration by iteration:
  what the paper's mode costs.

The private method's local step comes in three variants (its option
``variant``; DESIGN.md 1b, 1c and the README's "Variational inference"):

- ``"arithmetic"`` (the default): no noise rates and no Bessel point. Each cell's
  ``q(y_dv) ∝ Pois(y; m_dv) alpha^|ytil_dv - y|`` is the exact conditional of the
  true count given its noised count (DESIGN.md 1b, :mod:`lpviz.collapsed`) at the
  factors' posterior-mean rate ``m_dv = sum_k E[theta_dk] E[phi_kv]``; its mean
  ``E[y]`` is allocated over the components in proportion to
  ``E[theta_dk] E[phi_kv]``; the factors' Gamma ``q`` are updated as in CAVI
  (shape ``a0 + n``, rate ``b0 + sum E[other]``). With ``E[theta] = (a0 + n) /
  (b0 + S)`` as the point estimate, this is exactly the ECM iteration (exact
  E-step, one conditional M-step per factor) for the factors' posterior mode under
  Gamma(``a0 + 1``, ``b0``) priors, so it never decreases ``log p(ytil | theta,
  phi) + log p(theta, phi)`` of that prior: a variational EM, not a mean-field
  optimum. Why: the exact mean-field optimum collapses (next item).
- ``"geometric"``: the same ``q(y)`` at ``W_dv = sum_k G[theta_dk] G[phi_kv]``
  (``G[x] = exp E[log x]``) and allocation in proportion to ``G`` products: the
  exact CAVI update of ``q(y, allocation)`` given the factors' ``q``, so the ELBO
  never decreases. On the VI paper's Table 1 data it converges to a collapse (the
  fitted rates keep ~2% of the data's mass): for small Gamma shapes
  ``G[theta] << E[theta]`` and the noise absorbs the counts. The mean-field
  objective itself prefers the collapse (its ELBO there is the highest reached).
- ``"paper"``: the VI paper's Bessel route above (``bessel_point``,
  ``noise_split``; giving either selects it). It collapses too.

Measured on the Table 1 generator (``lpviz.reproduce.table1.table1_data``):
see the README and ``benchmarks/bench_vi.py``.

The ELBO (:attr:`VariationalFit.elbo`) is ``E_q[log p(data, latents)] + H[q]``
of the current ``q`` with nothing dropped, so for the non-private and naive
methods it is a lower bound on ``log p(y)`` and for the private method with
the mode (an integer point mass, a valid ``q``) or the collapsed variants one on
``log p(ytil)``. The collapsed variants' cell terms are closed forms: at the plug-in
rate ``r`` (``W`` or ``m``), ``log p(ytil | r, alpha) + r - E[mu]`` (the
marginal of :func:`lpviz.collapsed.log_marginal`) and, for the arithmetic
weights, minus the allocations' KL divergence from the optimum, which sums to
``sum n (log E[x] - E[log x])`` over the factors' entries
(:func:`lpviz.models._variational.allocation_gap`). Only the geometric variant
is guaranteed to raise it every iteration. With ``bessel_point="mean"`` the point
mass sits at a non-integer, and the ELBO is the same formula continued through
``lgamma``: a surrogate, not a bound. The paper's ELBO drops the terms that do
not change; its value differs from this one by a constant.
"""

import math
import numbers
import time
from dataclasses import dataclass

from lpviz import methods as method_registry
from lpviz._parallel import check_signals
from lpviz.engine import Chain, ChainState, ChainStopped, Posterior, VariationalPosterior
from lpviz.models.base import check_count, matrix_shape

__all__ = [
    "VariationalFit",
    "VariationalState",
    "VariationalPosterior",
    "VariationalRun",
    "variational_run",
    "fit_variational",
    "warm_start",
    "iterate_bessel_points",
    "compare_bessel_points",
    "split_options",
    "DEFAULT_TOL",
]

# Relative ELBO change below which a fit has converged. At the paper's Table 1
# size this stops private CAVI after a few dozen iterations (the paper: 42).
DEFAULT_TOL = 1e-5
# The ELBO is not monotone in the first iterations (the point mass and the
# delta method are not CAVI optima; the paper: stable after ~5), so no fit is
# called converged before this many.
MIN_ITERATIONS = 5
DEFAULT_MAX_ITER = 1000


def check_tol(tol):
    if isinstance(tol, bool) or not isinstance(tol, numbers.Real) or not (math.isfinite(tol) and tol >= 0):
        raise ValueError(f"tol must be a finite number >= 0 (a relative ELBO change, e.g. 1e-5), got {tol!r}")
    return float(tol)


def vi_method(method, **options):
    """The method instance of a CAVI fit, with clear errors for options that do not apply to VI."""
    check_options(method, "vi", **options)
    instance = method_registry.create(method, **options)
    if "vi" not in instance.inferences:
        raise ValueError(f"method={instance.name!r} has no variational inference; use inference='mcmc'")
    return instance


def split_options(method, options):
    """``(chain options, variational options)`` of a method's options (``Method.option_inference``;
    options for both go to both)."""
    method_class = type(method) if isinstance(method, method_registry.Method) else method_registry.get(method)
    chain, variational = {}, {}
    for option, value in options.items():
        applies = method_class.option_inference.get(option)
        if applies in (None, "mcmc"):
            chain[option] = value
        if applies in (None, "vi"):
            variational[option] = value
    return chain, variational


def check_options(method, inference, **options):
    """Raise a ValueError for an option given (not None) that belongs to the other inference."""
    method_class = type(method) if isinstance(method, method_registry.Method) else method_registry.get(method)
    for option, value in options.items():
        applies = method_class.option_inference.get(option)
        if value is not None and applies is not None and applies != inference:
            raise ValueError(
                f"{option}={value!r} applies to inference={applies!r}, not to inference={inference!r}; "
                f"drop it or set inference={applies!r}"
            )


@dataclass(eq=False)
class VariationalState(ChainState):
    """A :class:`~lpviz.engine.ChainState` of a CAVI fit after one iteration.

    ``factors`` are ``E_q[factors]`` (``mu`` their rates); ``elbo`` the ELBO;
    ``elbo_change`` its relative change from the previous iteration;
    ``converged`` whether the fit has converged. ``log_joint`` and
    ``log_marginal`` are NaN: a variational fit has no sample to score.
    """

    elbo: float = math.nan
    elbo_change: float = math.nan
    converged: bool = False


class VariationalFit(Chain):
    """Coordinate-ascent variational inference for Poisson factorization of (noised) counts.

    Stepped like a :class:`~lpviz.engine.Chain` (it shares the chain's data
    handling: releases, masks, held-out cells, per-row alpha), each iteration
    one CAVI sweep: the method's local step (the private method: the Bessel
    point, the split of ``y+``, ``q(lambda+-)``) and the expected allocation
    of the expected true counts over the model's components, then the
    model's factor updates. No randomness after the initial ``q``.

    Parameters
    ----------
    data, model, method, n_components, alpha, mask, truth, a0, b0, random_state, parallel
        As for :class:`~lpviz.engine.Chain`. ``random_state`` seeds the
        initial ``q`` (the chains' random initial factors as its means).
    bessel_point : {"mode", "mean"}, optional
        The private method's ``q(m)`` in its ``variant="paper"`` (giving it
        selects that variant): a point mass at the Bessel mode (the paper's,
        default) or at the exact mean (:func:`lpviz.bessel.mean_nb`).
    tol : float
        :attr:`converged` once the ELBO's relative change is at most ``tol``
        (after :data:`MIN_ITERATIONS` iterations).
    **options
        The method's other variational options, e.g. the private method's
        ``variant`` ("arithmetic", the default; "geometric"; "paper": see the
        module docstring) and ``noise_split`` (:mod:`lpviz.methods.private`).
    """

    def __init__(
        self,
        data,
        *,
        model=None,
        method="private",
        n_components,
        alpha=None,
        mask=None,
        truth=None,
        bessel_point=None,
        tol=DEFAULT_TOL,
        a0=0.1,
        b0=1.0,
        random_state=None,
        parallel=None,
        **options,
    ):
        self.tol = check_tol(tol)
        method_instance = vi_method(method, bessel_point=bessel_point, **options)
        super().__init__(
            data,
            model=model,
            method=method_instance,
            n_components=n_components,
            alpha=alpha,
            mask=mask,
            truth=truth,
            a0=a0,
            b0=b0,
            random_state=random_state,
            parallel=parallel,
        )

    def _start(self, rng):
        model = self.model_instance
        if "vi" not in model.inferences:
            raise ValueError(f"model={model.name!r} has no variational inference; use inference='mcmc'")
        self._q = model.vi_init(self.shape, self._prepared.mean_count, rng)
        self._latent = self.method_instance.vi_start(self._prepared, model, self._q, self._work)
        self._elbo = math.nan
        self._elbo_change = math.nan

    # -- public API ---------------------------------------------------------------------
    @property
    def factors(self):
        """Copies of ``E_q`` of the factors (the dict a chain's ``factors`` is)."""
        return self.model_instance.vi_factors(self._q)

    @property
    def q(self):
        """The factors' variational distributions: a tuple of
        :class:`~lpviz.models._variational.GammaFactor` in the model's kernel
        orientation (the topic model keeps phi transposed). Read only."""
        return self._q

    @property
    def elbo(self):
        """The ELBO after the last iteration (NaN before the first); see the module docstring."""
        return self._elbo

    @property
    def elbo_change(self):
        """Relative change of the ELBO over the last iteration (NaN before the second)."""
        return self._elbo_change

    @property
    def converged(self):
        """True once the ELBO's relative change is at most ``tol`` (after :data:`MIN_ITERATIONS`)."""
        return self._iteration >= MIN_ITERATIONS and self._elbo_change <= self.tol

    @property
    def y_expected(self):
        """Dense copy of the expected true counts the last iteration allocated
        (the private method: ``E_q[y]`` given the noised counts; else the fitted counts)."""
        latent = self._latent or {}
        counts = latent.get("y_expected") or latent.get("counts")
        if counts is None:
            return None
        import scipy.sparse as sp

        indptr, indices, values = counts
        return sp.csr_matrix((values, indices, indptr), shape=matrix_shape(self.shape)).toarray().reshape(self.shape)

    def __repr__(self):
        return (
            f"VariationalFit(model={self.model!r}, method={self.method!r}, n_components={self.n_components}, "
            f"shape={self.shape}, iteration={self._iteration}, elbo={self._elbo:.6g})"
        )

    # -- internals ------------------------------------------------------------------------
    def _snapshot(self, seconds):
        return VariationalState(
            iteration=self._iteration,
            seconds=seconds,
            factors=self.factors,
            model=self.model,
            model_instance=self.model_instance,
            elbo=self._elbo,
            elbo_change=self._elbo_change,
            converged=self.converged,
        )

    def _advance(self):
        """One CAVI iteration; returns its wall-clock seconds."""
        if self._broken or self._work.stop[0]:
            self._broken = True
            raise ChainStopped("this fit was stopped in the middle of an iteration; start a new one")
        start = time.perf_counter()
        model, work = self.model_instance, self._work
        try:
            stats = model.vi_new_stats(self._q, work)
            cell_terms = self.method_instance.vi_sweep(self._prepared, self._latent, model, self._q, stats, work)
            if work.stop[0]:
                check_signals()  # stopped by a Ctrl-C whose exception a compile swallowed: raise it
                raise ChainStopped("stopped during the local step")
            factor_terms = model.vi_update(self._q, stats, work)
            if work.stop[0]:
                check_signals()  # stopped by a Ctrl-C whose exception a compile swallowed: raise it
                raise ChainStopped("stopped during the factor update")
        except BaseException:
            self._broken = True
            raise
        elbo = float(cell_terms + factor_terms)
        previous = self._elbo
        self._iteration += 1
        self._elbo = elbo
        self._elbo_change = abs(elbo - previous) / max(abs(elbo), 1e-300) if math.isfinite(previous) else math.nan
        return time.perf_counter() - start


class VariationalRun:
    """An iterator over the :class:`VariationalState` of each CAVI iteration, feeding
    :attr:`posterior`; it ends when the fit converges or after ``n_iter`` iterations.

    ``run.chain`` (also ``run.fit``) is the :class:`VariationalFit`, as
    :class:`~lpviz.engine.Run` names its chain; ``run.stop()`` stops it from
    another thread.
    """

    def __init__(self, fit, n_iter):
        self.chain = self.fit = fit
        self.n_iter = check_count("n_iter", n_iter, 1)
        self.posterior = VariationalPosterior(
            fit.model_instance,
            fit.method_instance,
            fit.shape,
            heldout=fit.heldout,
            structural_zeros=fit.structural_zeros,
        )

    def __iter__(self):
        return self

    def __next__(self):
        check_signals()  # a Ctrl-C or SIGTERM whose exception a compile swallowed ends the run here
        if self.fit.iteration >= self.n_iter or self.fit.converged:
            raise StopIteration
        state = self.fit.step()
        self.posterior.add(state)
        return state

    def stop(self):
        """Stop the fit, even in the middle of an iteration (thread-safe)."""
        self.fit.stop()

    def __repr__(self):
        return f"VariationalRun({self.fit!r}, n_iter={self.n_iter})"


def variational_run(
    data,
    *,
    model=None,
    method="private",
    n_components,
    n_iter=DEFAULT_MAX_ITER,
    tol=None,
    truth=None,
    alpha=None,
    mask=None,
    bessel_point=None,
    a0=0.1,
    b0=1.0,
    random_state=None,
    parallel=None,
    **options,
):
    """A CAVI fit as an iterator of :class:`VariationalState` feeding a :class:`VariationalPosterior`.

    ``n_iter`` is the maximum number of iterations; the run ends earlier
    when the ELBO's relative change falls to ``tol`` (default
    :data:`DEFAULT_TOL`). Other parameters: :class:`VariationalFit`.
    """
    fit = VariationalFit(
        data,
        model=model,
        method=method,
        n_components=n_components,
        alpha=alpha,
        mask=mask,
        truth=truth,
        bessel_point=bessel_point,
        tol=DEFAULT_TOL if tol is None else tol,
        a0=a0,
        b0=b0,
        random_state=random_state,
        parallel=parallel,
        **options,
    )
    return VariationalRun(fit, n_iter)


def fit_variational(data, *, callback=None, **arguments):
    """Run :func:`variational_run` to the end and return its :class:`VariationalPosterior`."""
    if callback is not None and not callable(callback):
        raise TypeError(f"callback must be callable, got {callback!r}")
    vi_run = variational_run(data, **arguments)
    for state in vi_run:
        if callback is not None:
            callback(state)
    return vi_run.posterior


def warm_start(chain, init, **vi_arguments):
    """Start ``chain`` (a :class:`~lpviz.engine.Chain`) from a variational fit.

    ``init``: ``"vi"`` (a CAVI fit of the chain's method is run to
    convergence first, with ``vi_arguments``: those of
    :func:`variational_run`, the chain's data among them), a
    :class:`VariationalFit`, a :class:`~lpviz.engine.Posterior` (its best
    saved factors: for a variational posterior, ``E_q``) or a factor dict.
    The chain's factors become ``E_q[factors]``; a private chain's noise
    rates (Bessel sampler) their ``q`` means when the fit is of the same
    method. Returns the :class:`VariationalPosterior` of the fit run here
    (None for the other kinds of ``init``).
    """
    posterior = fit = None
    if isinstance(init, str):
        if init != "vi":
            raise ValueError(f"init must be 'vi', a VariationalFit, a Posterior or a factor dict; got {init!r}")
        vi_run = variational_run(**vi_arguments)
        for _ in vi_run:
            pass
        fit, posterior = vi_run.fit, vi_run.posterior
        factors = fit.factors
    elif isinstance(init, VariationalFit):
        fit, factors = init, init.factors
    elif isinstance(init, Posterior):
        if init.best is None:
            raise ValueError("the init posterior has no saved sample yet")
        factors = init.best
    elif isinstance(init, dict):
        factors = init
    else:
        raise TypeError(f"init must be 'vi', a VariationalFit, a Posterior or a factor dict; got {type(init).__name__}")
    chain.set_factors(factors)
    if fit is not None and type(fit.method_instance) is type(chain.method_instance) and fit.shape == chain.shape:
        chain.method_instance.vi_warm_start(chain._prepared, chain._latent, fit._latent)
    return posterior


# ---------------------------------------------------------------------------
# What the mode costs: mode against mean CAVI, side by side
# ---------------------------------------------------------------------------

BESSEL_POINTS = ("mode", "mean")


def iterate_bessel_points(
    data,
    *,
    truth=None,
    model=None,
    n_components,
    n_iter=200,
    tol=None,
    alpha=None,
    mask=None,
    a0=0.1,
    b0=1.0,
    random_state=0,
    parallel=None,
):
    """Private CAVI with ``bessel_point="mode"`` and ``"mean"`` in lockstep from the
    same initial ``q``: yields one dict per fit and iteration, for live views.

    Each row: ``bessel_point``, ``iteration``, ``seconds`` (this
    iteration), ``elapsed`` (the fit's total), ``elbo``, ``converged``, and
    the numbers of :func:`lpviz.metrics.score` of the fit's posterior so far
    (``mae`` against the true counts and, for simulations, ``rate_mae``
    against the true rates; needs ``truth``, a :class:`~lpviz.release.Truth`).
    A fit that has converged stops; the other goes on. ``data``: a release or
    a noised count matrix with ``alpha`` (the private method's inputs).
    """
    from lpviz.metrics import score

    release = data if hasattr(data, "Y_obs") else None
    runs = {
        point: variational_run(
            data,
            model=model,
            method="private",
            n_components=n_components,
            n_iter=n_iter,
            tol=tol,
            alpha=alpha,
            mask=mask,
            bessel_point=point,
            a0=a0,
            b0=b0,
            random_state=random_state,
            parallel=parallel,
        )
        for point in BESSEL_POINTS
    }
    elapsed = dict.fromkeys(BESSEL_POINTS, 0.0)
    active = list(BESSEL_POINTS)
    while active:
        for point in list(active):
            try:
                state = next(runs[point])
            except StopIteration:
                active.remove(point)
                continue
            elapsed[point] += state.seconds
            row = {
                "bessel_point": point,
                "iteration": state.iteration,
                "seconds": state.seconds,
                "elapsed": elapsed[point],
                "elbo": state.elbo,
                "converged": state.converged,
            }
            if truth is not None:
                scores = score(runs[point].posterior, release, truth)
                row.update(mae=scores["mae"], rate_mae=scores["rate_mae"])
            yield row


def compare_bessel_points(data, **arguments):
    """:func:`iterate_bessel_points` run to the end, as a pandas DataFrame (one row per fit and iteration)."""
    import pandas as pd

    return pd.DataFrame(list(iterate_bessel_points(data, **arguments)))
