"""run() and fit(): one chain or one variational fit, by the same call.

:func:`run` builds a :class:`~lpviz.engine.Chain` (``inference="mcmc"``,
optionally started from a CAVI fit with ``init="vi"``) or a
:class:`~lpviz.vi.VariationalFit` (``inference="vi"``) and returns the run
that drives it; :func:`fit` runs it to the end and returns the posterior.
This module sits above both :mod:`lpviz.engine` and :mod:`lpviz.vi` (which
builds on the engine), so neither needs the other at import; ``lpviz.run``,
``lpviz.fit`` and ``lpviz.engine.run``/``fit`` are these functions.
"""

import os

import numpy as np

from lpviz import methods as method_registry
from lpviz import vi
from lpviz.engine import INFERENCES, Chain, Run, _schedule

__all__ = ["run", "fit"]


def run(
    data,
    *,
    model=None,
    method="private",
    n_components,
    n_iter=1000,
    burn_in=None,
    thin=25,
    truth=None,
    alpha=None,
    mask=None,
    sampler=None,
    a0=0.1,
    b0=1.0,
    random_state=None,
    parallel=None,
    inference="mcmc",
    init=None,
    bessel_point=None,
    tol=None,
    **options,
):
    """Run one chain as an iterator of :class:`ChainState`, feeding a :class:`Posterior`.

    Parameters are those of :class:`Chain`, plus ``n_iter``, ``burn_in``
    (default ``n_iter // 6``, the paper's 1,000 of 6,000) and ``thin`` (save
    iterations ``burn_in + thin``, ``burn_in + 2 thin``, ...), and:

    inference : {"mcmc", "vi"}
        ``"vi"``: coordinate-ascent variational inference
        (:class:`lpviz.vi.VariationalFit`) for at most ``n_iter`` iterations,
        ending once the ELBO's relative change is at most ``tol``; no burn-in
        or thinning (``thin`` is ignored). It returns a
        :class:`lpviz.vi.VariationalRun` whose posterior is a
        :class:`lpviz.vi.VariationalPosterior` (``E_q`` of the rates).
    init : None, "vi", VariationalFit, Posterior or dict of factors
        MCMC only: start the chain from a variational fit's means; ``"vi"``
        runs one first on the same data (with ``bessel_point`` and ``tol``),
        and ``run.init`` is its posterior (its seconds are not in the chain's).
    bessel_point : {"mode", "mean"}, optional
        The private method's CAVI ``q(m)`` (``inference="vi"`` or ``init="vi"``).
    tol : float, optional
        CAVI's stopping tolerance (default :data:`lpviz.vi.DEFAULT_TOL`).
    **options
        The method's other options (its ``options``: e.g. the private
        method's ``sparse_step``, ``noise_split``), each for the inference it
        applies to (``Method.option_inference``).

    Returns
    -------
    Run
        Iterate it to advance the chain; ``run.posterior`` holds the result so
        far, ``run.chain`` the chain, ``run.stop()`` stops it from another thread.
    """
    if inference not in INFERENCES:
        raise ValueError(f"inference must be one of {', '.join(map(repr, INFERENCES))}; got {inference!r}")
    arguments = dict(
        model=model,
        method=method,
        n_components=n_components,
        truth=truth,
        alpha=alpha,
        mask=mask,
        a0=a0,
        b0=b0,
        parallel=parallel,
    )
    options = {
        key: value
        for key, value in dict(options, sampler=sampler, bessel_point=bessel_point).items()
        if value is not None
    }
    if inference == "vi":
        if burn_in is not None:
            raise ValueError("inference='vi' has no burn-in: drop burn_in (n_iter is the most iterations it runs)")
        if init is not None:
            raise ValueError("init starts a chain (inference='mcmc'); a variational fit starts from random q")
        return vi.variational_run(data, n_iter=n_iter, tol=tol, random_state=random_state, **arguments, **options)
    n_iter, burn_in, thin = _schedule(n_iter, burn_in, thin)
    chain_options, vi_options = vi.split_options(method, options)
    if init is None and (vi_options or tol is not None):
        raise ValueError(
            f"{', '.join(sorted(vi_options)) or 'tol'} set{'s' if len(vi_options) < 2 else ''} a "
            "variational fit: use with inference='vi' or init='vi'"
        )
    chain = Chain(
        data,
        model=model,
        method=method_registry.create(method, **chain_options),
        n_components=n_components,
        alpha=alpha,
        mask=mask,
        truth=truth,
        a0=a0,
        b0=b0,
        random_state=random_state,
        parallel=parallel,
    )
    chain_run = Run(chain, n_iter, burn_in, thin)
    if init is not None:
        vi_seed = int(np.random.SeedSequence(chain._chain_seed).generate_state(1, np.uint64)[0] >> np.uint64(1))
        chain_run.init = vi.warm_start(
            chain, init, data=data, n_iter=vi.DEFAULT_MAX_ITER, tol=tol, random_state=vi_seed, **arguments, **vi_options
        )
    return chain_run


def fit(
    data,
    *,
    model=None,
    method="private",
    n_components,
    n_iter=1000,
    burn_in=None,
    thin=25,
    alpha=None,
    mask=None,
    truth=None,
    sampler=None,
    a0=0.1,
    b0=1.0,
    random_state=None,
    parallel=None,
    callback=None,
    inference="mcmc",
    init=None,
    bessel_point=None,
    tol=None,
    scheduler=None,
    **options,
):
    """Run a chain (or a variational fit) to the end and return its :class:`Posterior`.

    Parameters are those of :func:`run`, plus ``callback``: called as
    ``callback(state)`` with the :class:`ChainState` after every iteration
    (e.g. to drive a progress bar), and ``scheduler``: a Dask scheduler's
    address or a ``distributed.Client`` (default ``LPVIZ_SCHEDULER``) to run
    the one chain over its workers, bit for bit the chain of one process
    (:mod:`lpviz.distributed`; the result is a
    :class:`lpviz.distributed.DistributedPosterior`).
    """
    if callback is not None and not callable(callback):
        raise TypeError(f"callback must be callable, got {callback!r}")
    scheduler = scheduler if scheduler is not None else (os.environ.get("LPVIZ_SCHEDULER") or None)
    if scheduler is not None:
        from lpviz import distributed

        unsupported = dict(alpha=alpha, mask=mask, init=init, bessel_point=bessel_point, tol=tol)
        given = [key for key, value in unsupported.items() if value is not None]
        if inference != "mcmc" or given:
            raise ValueError(
                f"a chain over a cluster (scheduler=) takes a Release and runs MCMC; drop "
                f"{', '.join(given) or 'inference'} or fit in one process (no scheduler)"
            )
        return distributed.fit(
            data,
            scheduler=scheduler,
            model=model,
            method=method,
            n_components=n_components,
            n_iter=n_iter,
            burn_in=burn_in,
            thin=thin,
            truth=truth,
            sampler=sampler,
            a0=a0,
            b0=b0,
            random_state=random_state,
            parallel=parallel,
            callback=callback,
            **options,
        )
    chain_run = run(
        data,
        model=model,
        method=method,
        n_components=n_components,
        n_iter=n_iter,
        burn_in=burn_in,
        thin=thin,
        truth=truth,
        alpha=alpha,
        mask=mask,
        sampler=sampler,
        a0=a0,
        b0=b0,
        random_state=random_state,
        parallel=parallel,
        inference=inference,
        init=init,
        bessel_point=bessel_point,
        tol=tol,
        **options,
    )
    for state in chain_run:
        if callback is not None:
            callback(state)
    return chain_run.posterior
