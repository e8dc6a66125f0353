"""run() and fit(): one chain or one variational fit, by the same call.

:func:`run` builds a :class:`~lpviz.engine.Chain` (``inference="mcmc"``,
optionally started from a CAVI fit with ``init="vi"``) or a
:class:`~lpviz.vi.VariationalFit` (``inference="vi"``) and returns the run
that drives it; :func:`fit` runs it to the end and returns the posterior.
This module sits above both :mod:`lpviz.engine` and :mod:`lpviz.vi` (which
builds on the engine), so neither needs the other at import; ``lpviz.run``,
``lpviz.fit`` and ``lpviz.engine.run``/``fit`` are these functions.
"""

import numpy as np

from lpviz import methods as method_registry
from lpviz import vi
from lpviz._dask_chains import DaskEnsembleRun
from lpviz._validate import warn_components
from lpviz.engine import INFERENCES, Chain, Run, _schedule
from lpviz.ensemble import DEFAULT_CHAINS, EnsembleRun, check_chains, spawn_seeds

__all__ = ["run", "fit", "warn_components"]


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
    chains=DEFAULT_CHAINS,
    restarts=1,
    scheduler=None,
    **options,
):
    """Run one chain (or ``chains`` of them) as an iterator of :class:`ChainState`, feeding a :class:`Posterior`.

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
    chains : int
        MCMC: run this many chains (default :data:`lpviz.ensemble.DEFAULT_CHAINS`)
        concurrently, with seeds spawned from ``random_state``: chain 0 is
        exactly the single chain of that seed (:func:`lpviz.ensemble.spawn_seeds`).
    restarts : int
        ``inference="vi"``: run this many CAVI initialisations concurrently
        (seeds spawned likewise; restart 0 is the single fit of that seed) and
        keep the one with the highest ELBO (:func:`lpviz.ensemble.best_restart`).
    scheduler : None, str or distributed.Client
        With ``chains > 1``: run each chain whole as one task on the workers of
        this Dask cluster (``lpviz._dask_chains``) instead of in this
        process's threads; the same chains, equal to the in-process ensemble
        of the same seed. (One chain over many workers is
        ``lpviz.fit(..., chains=1, scheduler=...)``: :mod:`lpviz.distributed`.)
        ``timeout`` among ``options``: seconds to reach the scheduler.
    **options
        The method's other options (its ``options``: e.g. the private
        method's ``sparse_step``, ``noise_split``), each for the inference it
        applies to (``Method.option_inference``).

    Returns
    -------
    Run
        Iterate it to advance the chain; ``run.posterior`` holds the result so
        far, ``run.chain`` the chain, ``run.stop()`` stops it from another thread.
        With ``chains > 1`` (or ``restarts > 1``) an
        :class:`lpviz.ensemble.EnsembleRun`: iterating it runs every chain in
        its own thread and yields ``(chain, state)``; its ``posterior`` is an
        :class:`lpviz.ensemble.EnsemblePosterior` (the best restart's
        :class:`~lpviz.vi.VariationalPosterior` for restarts). With a
        ``scheduler``, a ``lpviz._dask_chains.DaskEnsembleRun``: the same
        iteration (its states carry the traces, not the factors) and posterior.
    """
    if inference not in INFERENCES:
        raise ValueError(f"inference must be one of {', '.join(map(repr, INFERENCES))}; got {inference!r}")
    chains, restarts = check_chains(chains), check_chains(restarts, "restarts")
    warn_components(data, n_components)
    if inference == "vi" and chains > 1:
        raise ValueError("chains= runs MCMC chains; a variational fit has none: use restarts=R for R initialisations")
    if inference == "mcmc" and restarts > 1:
        raise ValueError("restarts= starts CAVI again (inference='vi'); MCMC runs several chains with chains=C")
    arguments = dict(
        data=data,
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
        parallel=parallel,
        inference=inference,
        init=init,
        bessel_point=bessel_point,
        tol=tol,
        **options,
    )
    if scheduler is not None:
        return _dask_run(scheduler, arguments, random_state, chains, restarts)
    count = max(chains, restarts)
    if count == 1:
        return _one_run(random_state=random_state, **arguments)
    seeds = spawn_seeds(random_state, count)
    first = _one_run(random_state=seeds[0], **arguments)
    _check_ensemble_memory(first, count)
    runs = [first] + [_one_run(random_state=seed, **arguments) for seed in seeds[1:]]
    return EnsembleRun(runs, restarts=inference == "vi")


def _dask_run(scheduler, arguments, random_state, chains, restarts):
    """Whole chains on the workers of a Dask cluster (``lpviz._dask_chains``)."""
    from lpviz import _dask_chains
    from lpviz.distributed import CONNECT_TIMEOUT
    from lpviz.models import default_for

    if arguments["inference"] != "mcmc" or restarts > 1 or chains == 1:
        raise ValueError(
            "lpviz.run(..., scheduler=) runs chains > 1 whole on the cluster's workers (MCMC, e.g. chains=4); "
            "one chain over the workers is lpviz.fit(..., chains=1, scheduler=), restarts run in one process"
        )
    arguments = dict(arguments)
    timeout = arguments.pop("timeout", CONNECT_TIMEOUT)
    _schedule(arguments["n_iter"], arguments["burn_in"], arguments["thin"])  # a bad schedule: refused here
    data, model = arguments.pop("data"), arguments["model"]
    if model is None:
        model = default_for(data.kind) if hasattr(data, "kind") else "topics"
    truth, mask = arguments.pop("truth"), arguments.pop("mask")
    return _dask_chains.prepare(
        scheduler, data, truth=truth, mask=mask, random_state=random_state, chains=chains, timeout=timeout,
        model_name=model, build=_one_run, **arguments,
    )  # fmt: skip


def _check_ensemble_memory(first, count):
    """Refuse C chains that would not fit in memory together, once the first one is built (its
    estimate is known), before the others allocate anything."""
    from lpviz.budget import check_memory
    from lpviz.engine import posterior_bytes

    chain = first.chain
    one = chain.memory_estimate()
    schedule = first.posterior
    if schedule.inference == "mcmc":  # a variational fit keeps one mean, counted in the chain's estimate
        one += posterior_bytes(chain.model_instance, chain.shape, first.n_iter, schedule.burn_in, schedule.thin)
    check_memory(
        count * one,
        f"{count} chains of the {chain.model} model on {' x '.join(f'{n:,}' for n in chain.shape)} counts",
        fix="Run fewer chains at once (chains=), or fit fewer rows or columns.",
    )


def _one_run(
    data,
    *,
    model,
    method,
    n_components,
    n_iter,
    burn_in,
    thin,
    truth,
    alpha,
    mask,
    sampler,
    a0,
    b0,
    random_state,
    parallel,
    inference,
    init,
    bessel_point,
    tol,
    **options,
):
    """One chain's run (or one variational fit's): :func:`run` with ``chains=1``."""
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
    chains=DEFAULT_CHAINS,
    restarts=1,
    scheduler=None,
    **options,
):
    """Run a chain (or a variational fit) to the end and return its :class:`Posterior`.

    Parameters are those of :func:`run`, plus ``callback``: called as
    ``callback(state)`` with the :class:`ChainState` after every iteration
    (e.g. to drive a progress bar; with several chains, in the caller's
    thread, ``state.chain`` saying which chain).

    With ``chains=C > 1`` the C chains run concurrently and the result is an
    :class:`lpviz.ensemble.EnsemblePosterior` (``.chains``, pooled ``mu_hat``,
    ``to_inference_data()``); with ``inference="vi", restarts=R > 1`` the
    best restart's :class:`~lpviz.vi.VariationalPosterior` with their spread
    (``restart_spread``). Ctrl-C stops every chain before it propagates.

    With ``scheduler`` (a Dask scheduler's address or a ``distributed.Client``):
    ``chains=1`` runs the one chain over its workers, its rows cut between them, bit for bit the
    chain of one process (:mod:`lpviz.distributed`; the result is a
    :class:`lpviz.distributed.DistributedPosterior`); ``chains > 1`` runs each chain whole as one
    task on a worker (``lpviz._dask_chains``) and returns the
    :class:`lpviz.ensemble.EnsemblePosterior` the in-process ensemble of the same seed returns.
    """
    if callback is not None and not callable(callback):
        raise TypeError(f"callback must be callable, got {callback!r}")
    # Only an explicit scheduler distributes a fit: LPVIZ_SCHEDULER is the CLI's (and the dashboard's),
    # and a reproduction's chain tasks already run on the workers it names.
    if scheduler is not None and chains == 1:
        from lpviz import distributed

        unsupported = dict(alpha=alpha, mask=mask, init=init)
        given = [key for key, value in unsupported.items() if value is not None]
        given += [f"{key}={value}" for key, value in dict(restarts=restarts).items() if value != 1]
        if given:
            raise ValueError(
                f"a fit over a cluster (scheduler=) takes a Release and runs one MCMC chain or one CAVI fit; drop "
                f"{', '.join(given)} or fit in one process (no scheduler)"
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
            inference=inference,
            tol=tol,
            bessel_point=bessel_point,
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
        chains=chains,
        restarts=restarts,
        scheduler=scheduler,
        **options,
    )
    if isinstance(chain_run, (EnsembleRun, DaskEnsembleRun)):
        states = iter(chain_run)
        try:
            for _, state in states:
                if callback is not None:
                    callback(state)
        finally:  # an error or Ctrl-C in the callback: stop every chain now, not when the traceback goes
            states.close()
        return chain_run.posterior
    for state in chain_run:
        if callback is not None:
            callback(state)
    return chain_run.posterior
