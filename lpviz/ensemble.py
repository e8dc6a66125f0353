"""Chains, plural: C chains of one fit run concurrently and returned as one posterior.

``lpviz.fit(..., chains=C)`` (and ``lpviz.run(..., chains=C)``) build C
chains whose seeds come from one ``random_state`` (:func:`spawn_seeds`: chain
0 gets ``random_state`` itself, so it is exactly the single chain of that
seed; the others get seeds spawned from it), drive them in C threads whose
kernels share the process's kernel pool (:mod:`lpviz._parallel`; the kernels
release the GIL, so the chains run on all cores) and return an
:class:`EnsemblePosterior`: ``.chains`` (each chain's
:class:`~lpviz.engine.Posterior`), ``mu_hat`` pooled over the chains,
``save``/``load`` with the chain dimension and :meth:`EnsemblePosterior.to_inference_data`
(ArviZ, dims ``chain, draw, ...``). :func:`lpviz.metrics.score` judges the
ensemble: cross-chain R-hat and ESS, and a ``chains disagree`` flag naming a
chain that sits in another mode.

The same machinery runs CAVI restarts (``inference="vi", restarts=R``):
R initialisations, the best kept by its ELBO (:func:`best_restart`).

Ctrl-C (KeyboardInterrupt) while the chains run stops every chain at its
next row (each chain's stop flag) and waits for their threads before it
propagates.
"""

import copy
import math
import queue
import re
import threading
import time

import numpy as np

from lpviz._parallel import check_signals

__all__ = [
    "DEFAULT_CHAINS",
    "EnsemblePosterior",
    "EnsembleRun",
    "spawn_seeds",
    "check_chains",
    "best_restart",
    "ENSEMBLE_FORMAT",
]

# The library's default number of chains (lpviz.fit, lpviz.run, `lpviz fit --chains`). One: see
# docs/guides/mcmc.md for the measurement (4 chains cost 2.0-2.6x one chain's wall-clock on 2 cores,
# about 1x on 16) and why the default stays one this release (a fit of one chain returns a Posterior,
# of several an EnsemblePosterior: every caller of fit() would change type). chains=4 is what the
# guide recommends whenever the answer matters.
DEFAULT_CHAINS = 1
ENSEMBLE_FORMAT = "lpviz-ensemble-1"
# States waiting for the caller at most, per chain: a slow consumer holds the chains back instead of
# piling up copies of their factors.
_QUEUE_PER_CHAIN = 16
# How often (seconds) a thread waiting on another looks at the stop request: Ctrl-C lands within it.
_POLL_SECONDS = 0.1


def check_chains(chains, name="chains"):
    """``chains`` as an int >= 1, or a one-line error naming the fix."""
    if isinstance(chains, bool) or not isinstance(chains, (int, np.integer)) or chains < 1:
        raise ValueError(f"{name} must be a whole number >= 1, got {chains!r}; e.g. {name}=4 ({name}=1: one)")
    return int(chains)


def spawn_seeds(random_state, n):
    """The ``random_state`` of each of ``n`` chains: chain 0's is ``random_state`` itself (as a
    Generator: the single chain of that seed), the others' are spawned from it
    (``Generator.spawn``: independent streams, the same for the same seed).

    A Generator given is used as it is: chain 0 draws its seed from it, as a single chain would.
    """
    rng = np.random.default_rng(random_state)
    if n == 1:
        return [rng]
    try:
        children = rng.spawn(n - 1)
    except TypeError:  # a bit generator without a seed sequence: spawn from chain 0's seed instead
        from lpviz._random import chain_seed_from

        entropy = chain_seed_from(copy.deepcopy(rng))  # a copy: chain 0 still draws what it would alone
        children = [np.random.default_rng(s) for s in np.random.SeedSequence(entropy).spawn(n - 1)]
    return [rng, *children]


# ---------------------------------------------------------------------------
# Running several chains at once
# ---------------------------------------------------------------------------


class EnsembleRun:
    """C runs (:class:`~lpviz.engine.Run`, or :class:`~lpviz.vi.VariationalRun` for restarts)
    driven together.

    Iterate it to run them all concurrently, each in its own thread: it yields
    ``(chain, state)`` as the chains produce states (``state.chain`` is the
    index too). ``runs``: the runs; ``posterior``: an :class:`EnsemblePosterior`
    of their posteriors (for restarts, :func:`best_restart`); ``seconds``: the
    wall-clock of the whole run; ``stop()`` stops every chain (thread-safe).
    """

    def __init__(self, runs, *, restarts=False):
        self.runs = list(runs)
        self.restarts = restarts
        self.seconds = None
        self._halt = threading.Event()

    @property
    def chains(self):
        return [run.chain for run in self.runs]

    @property
    def n_iter(self):
        return self.runs[0].n_iter

    @property
    def posterior(self):
        posteriors = [run.posterior for run in self.runs]
        if self.restarts:
            return best_restart(posteriors)
        return EnsemblePosterior(posteriors, seconds=self.seconds)

    def stop(self):
        """Stop every chain, even in the middle of an iteration (thread-safe)."""
        self._halt.set()
        for run in self.runs:
            run.stop()

    def __iter__(self):
        return self._drive()

    def _put(self, out, item):
        while not self._halt.is_set():
            try:
                out.put(item, timeout=_POLL_SECONDS)
                return True
            except queue.Full:
                continue
        return False

    def _work(self, index, run, out):
        try:
            for state in run:
                state.chain = index
                if not self._put(out, (index, state)):
                    return
            self._put(out, (index, None))
        except BaseException as error:  # handed to the caller's thread, which raises it
            if not self._halt.is_set():
                self._put(out, (index, error))

    def _drive(self):
        out = queue.Queue(maxsize=_QUEUE_PER_CHAIN * len(self.runs))
        threads = [
            threading.Thread(target=self._work, args=(i, run, out), name=f"lpviz-chain-{i}", daemon=True)
            for i, run in enumerate(self.runs)
        ]
        start = time.perf_counter()
        finished = False
        for thread in threads:
            thread.start()
        try:
            remaining = len(threads)
            while remaining:
                check_signals()  # a signal whose exception was swallowed (a compile) ends the wait
                try:  # a timeout, so Ctrl-C reaches this thread while it waits
                    index, item = out.get(timeout=_POLL_SECONDS)
                except queue.Empty:
                    continue
                if item is None:
                    remaining -= 1
                elif isinstance(item, BaseException):
                    raise item
                else:
                    yield index, item
            finished = True
        finally:
            if not finished:  # an error, Ctrl-C or a caller that stopped iterating: stop every chain
                self.stop()
            for thread in threads:
                thread.join()
            self.seconds = time.perf_counter() - start

    def __repr__(self):
        kind = "restarts" if self.restarts else "chains"
        return f"EnsembleRun({len(self.runs)} {kind}, n_iter={self.n_iter})"


def best_restart(posteriors):
    """The restart with the highest final ELBO (a :class:`~lpviz.vi.VariationalPosterior`), told
    how the restarts spread: ``restarts`` (all of them, in order), ``restart_index`` (the one
    kept), ``restart_elbos`` and ``restart_spread``: ``elbo_range`` (best - worst final ELBO) and
    ``rate_range``, the largest mean absolute difference between the kept fit's rates and
    another restart's over the cells it fitted (:func:`lpviz.metrics.score` adds the range of
    their MAEs against a truth)."""
    posteriors = list(posteriors)
    elbos = np.array([p.elbo[-1] if len(p.elbo) else -math.inf for p in posteriors], dtype=float)
    keep = int(np.nanargmax(np.where(np.isfinite(elbos), elbos, -np.inf)))
    best = posteriors[keep]
    observed = _observed_cells(best)
    rates = best.mu_hat
    distances = [float(np.mean(np.abs(p.mu_hat - rates)[observed])) for p in posteriors]
    finite = elbos[np.isfinite(elbos)]
    best.restarts = posteriors
    best.restart_index = keep
    best.restart_elbos = elbos.tolist()
    best.restart_spread = {
        "restarts": len(posteriors),
        "elbo_range": float(finite.max() - finite.min()) if finite.size else math.nan,
        "rate_range": max(distances),
    }
    return best


def _observed_cells(posterior):
    observed = np.ones(posterior.shape, dtype=bool)
    for cells in (posterior.heldout, posterior.structural_zeros):
        if cells is not None:
            observed &= ~cells
    return observed


# ---------------------------------------------------------------------------
# The posterior of an ensemble
# ---------------------------------------------------------------------------


def _stack(traces):
    length = min(len(trace) for trace in traces)
    return np.stack([np.asarray(trace, dtype=float)[:length] for trace in traces])


_ENSEMBLE_MEMBERS = ("format", "n_chains", "mu_hat")
_CHAIN_MEMBER = re.compile(r"chain(0|[1-9][0-9]{0,4})\.(.+)", re.DOTALL)


def _chain_difference(chain, first):
    """How ``chain`` differs from the ensemble's first chain in what every chain of one ensemble
    shares (the fit's kind, the data's shape, the schedule, the cells left out), or None."""
    for what in ("inference", "model", "method", "n_components", "burn_in", "thin", "shape"):
        ours, theirs = getattr(chain, what, None), getattr(first, what, None)
        if what == "shape":
            ours, theirs = tuple(ours), tuple(theirs)
        if ours != theirs:
            return f"{what} ({_shown_trait(ours)}) is not chain 0's ({_shown_trait(theirs)})"
    for what in ("heldout", "structural_zeros"):
        ours, theirs = getattr(chain, what, None), getattr(first, what, None)
        if (ours is None) != (theirs is None) or (ours is not None and not np.array_equal(ours, theirs)):
            counts = [0 if mask is None else int(np.count_nonzero(mask)) for mask in (ours, theirs)]
            return (
                f"{what.replace('_', ' ')} cells are not chain 0's ({counts[0]:,} cells against {counts[1]:,}, "
                "not all the same)"
            )
    return None


def _shown_trait(value):
    text = str(value)
    return text if len(text) <= 60 else text[:57] + "..."


class EnsemblePosterior:
    """The posterior of C chains of one fit (see the module docstring).

    ``chains``: each chain's :class:`~lpviz.engine.Posterior`, usable as a
    single chain's; ``n_chains``; ``mu_hat`` / ``rate_rows``: the posterior
    mean rates pooled over every saved sample of every chain; ``samples``,
    ``saved_iterations``: every chain's, in chain order; ``best``,
    ``best_log_joint``, ``best_iteration``, ``best_chain``: the saved sample
    with the highest log joint over all chains; ``log_joint``,
    ``log_marginal``, ``iteration_seconds``: traces shaped ``(chain,
    iteration)``; ``iterations``: per chain; ``seconds``: the wall-clock the
    chains took together (they run concurrently); ``model``, ``method``,
    ``shape``, ``burn_in``, ``thin``, ``heldout``, ``structural_zeros``: the
    chains' (the same for all).
    """

    inference = "mcmc"

    def __init__(self, chains, *, seconds=None):
        chains = list(chains)
        if not chains:
            raise ValueError("an ensemble needs at least one chain")
        first = chains[0]
        for other in chains[1:]:
            if (other.model, other.method, tuple(other.shape)) != (first.model, first.method, tuple(first.shape)):
                raise ValueError(
                    "the chains of an ensemble fit one model by one method to one data set; got "
                    f"{first.model}/{first.method} {first.shape} and {other.model}/{other.method} {other.shape}"
                )
        self.chains = chains
        self.model_instance = first.model_instance
        self.model, self.method, self.method_label = first.model, first.method, first.method_label
        self.n_components = first.n_components
        self.shape = tuple(first.shape)
        self.burn_in, self.thin = first.burn_in, first.thin
        self.heldout, self.structural_zeros = first.heldout, first.structural_zeros
        self.row_labels = getattr(first, "row_labels", None)
        self.col_labels = getattr(first, "col_labels", None)
        self.wall_seconds = seconds
        self._mu_hat = None

    @property
    def n_chains(self):
        return len(self.chains)

    @property
    def samples(self):
        return [sample for chain in self.chains for sample in chain.samples]

    @property
    def saved_iterations(self):
        return [iteration for chain in self.chains for iteration in chain.saved_iterations]

    @property
    def n_saved(self):
        return sum(chain.n_saved for chain in self.chains)

    @property
    def best_chain(self):
        """The index of the chain whose best sample is the ensemble's best (None before any)."""
        candidates = [(c.best_log_joint, -i) for i, c in enumerate(self.chains) if c.best is not None]
        return -max(candidates)[1] if candidates else None

    @property
    def best(self):
        index = self.best_chain
        return None if index is None else self.chains[index].best

    @property
    def best_log_joint(self):
        index = self.best_chain
        return -math.inf if index is None else self.chains[index].best_log_joint

    @property
    def best_iteration(self):
        index = self.best_chain
        return None if index is None else self.chains[index].best_iteration

    @property
    def log_joint(self):
        return _stack([chain.log_joint for chain in self.chains])

    @property
    def log_marginal(self):
        return _stack([chain.log_marginal for chain in self.chains])

    @property
    def iteration_seconds(self):
        return _stack([chain.iteration_seconds for chain in self.chains])

    @property
    def iterations(self):
        return min(chain.iterations for chain in self.chains)

    @property
    def seconds(self):
        """Wall-clock of the chains together (when driven here), else the slowest chain's."""
        if self.wall_seconds is not None:
            return float(self.wall_seconds)
        return max(chain.seconds for chain in self.chains)

    def rate_rows(self, start, stop):
        """Pooled posterior mean rates of rows [start, stop): every chain's saved samples weigh alike."""
        total, count = None, 0
        for chain in self.chains:
            rows = chain.rate_rows(start, stop)
            if rows is None:
                continue
            weighted = rows * chain.n_saved
            total = weighted if total is None else total + weighted
            count += chain.n_saved
        return None if total is None else total / count

    @property
    def mu_hat(self):
        """Posterior mean rates of every cell pooled over the chains (None before any saved sample)."""
        if self._mu_hat is None and self.n_saved:
            self._mu_hat = self.rate_rows(0, self.shape[0])
        return self._mu_hat

    # -- chains that never meet (lpviz.stacking) ----------------------------------
    def stacking(self, release, *, max_draws=None, max_cells=None):
        """:class:`lpviz.stacking.Stacking` of the chains on ``release``'s noised cells that no fit
        used (held out, else PSIS-LOO over the observed): weights, elpds, modes. Never reads a
        truth. Kept for the release until the chains save another sample."""
        from lpviz import stacking as stacking_module

        options = {
            "max_draws": stacking_module.MAX_DRAWS if max_draws is None else int(max_draws),
            "max_cells": stacking_module.MAX_CELLS if max_cells is None else int(max_cells),
        }
        key = (id(release), self.n_saved, options["max_draws"], options["max_cells"])
        cached = getattr(self, "_stacking", None)
        if cached is None or cached[0] != key or cached[1] is not release:
            if not self.n_saved or not all(chain.n_saved for chain in self.chains):
                raise ValueError("stacking needs a saved sample of every chain: run the chains past their burn-in")
            self._stacking = (key, release, stacking_module.chain_stacking(self.chains, release, **options))
        return self._stacking[2]

    def stacking_weights(self, release):
        """The chains' stacking weights (C numbers >= 0 summing to 1) maximising the log of their
        mixture's predictive density on ``release``'s held-out noised cells, else PSIS-LOO over its
        observed cells; ``.cells`` says which, ``.stacking`` holds the rest (Pareto k, modes, elpds)."""
        from lpviz.stacking import StackingWeights

        return StackingWeights(self.stacking(release))

    def stacked(self, release):
        """A posterior whose ``mu_hat`` is the chains' rates weighted by :meth:`stacking_weights`
        (``weights``): the ensemble's summary when the chains sit in separate modes."""
        from lpviz.stacking import StackedPosterior

        return StackedPosterior(self, self.stacking(release))

    # -- ArviZ ------------------------------------------------------------------
    def to_inference_data(self, release=None, truth=None, *, cells=None, columns=None, attrs=None):
        """The chains as an ArviZ ``InferenceData`` with dims ``chain, draw, ...``.

        ``posterior``: ``rate`` at probe cells and, for models with topics,
        ``topic_word`` (topics aligned across chains) at probe words, per saved
        sample; ``sample_stats``: ``log_marginal`` (private chains) and
        ``log_joint`` and ``iteration_seconds`` per iteration after burn-in.
        The probes are :func:`lpviz.diagnostics.traced_elements` of the
        release (or of the fit itself) unless ``cells``/``columns`` are given:
        the same as :func:`lpviz.metrics.score` diagnoses.
        """
        from lpviz.diagnostics import fit_inference_data

        return fit_inference_data(self, self.chains, release, truth, cells=cells, columns=columns, attrs=attrs)

    # -- files --------------------------------------------------------------------
    def save(self, path, release=None, *, overwrite=False):
        """Write the ensemble as one ``.npz``. One chain: the single-chain fit file
        (:meth:`lpviz.engine.Posterior.save`, unchanged). Several (docs/formats.md)::

            format      "lpviz-ensemble-1"
            n_chains    int
            mu_hat      float (D, V): rates pooled over the chains
            chainI.KEY  chain I's fit file, every key of the single-chain schema
        """
        from pathlib import Path

        from lpviz._files import atomic_write, output_exists, shown

        if self.n_chains == 1:
            return self.chains[0].save(path, release, overwrite=overwrite)
        path = Path(path)
        if output_exists(path) and not overwrite:
            raise FileExistsError(f"{shown(path)} already exists; choose another name or pass overwrite=True")
        if self.mu_hat is None:
            raise ValueError("the fit has no saved sample yet; run past burn_in + thin iterations first")
        arrays = {"format": np.asarray(ENSEMBLE_FORMAT), "n_chains": np.asarray(self.n_chains), "mu_hat": self.mu_hat}
        for index, chain in enumerate(self.chains):
            arrays.update({f"chain{index}.{key}": value for key, value in chain.fit_arrays(release).items()})
        atomic_write(path, lambda handle: np.savez_compressed(handle, **arrays))
        return path

    @classmethod
    def load(cls, path, *, limit=None):
        """Read an ensemble written by :meth:`save`; a single-chain fit file comes back as an
        ensemble of one chain. Read through the bounded reader, as :meth:`lpviz.engine.Posterior.load`.

        An ensemble file is one thing (issue 58): its members are ``format``, ``n_chains``,
        ``mu_hat`` and ``chainI.KEY`` for I below ``n_chains`` only, every chain holds the same
        members, each chain is checked as a single-chain fit, the chains fit one model (and number
        of components) by one method and one schedule to one data set with the same held-out cells,
        and ``mu_hat`` is their pooled rates. Anything else is a one-line ``ValueError`` naming the
        file, the chain and the problem."""
        import errno

        from lpviz._files import open_archive
        from lpviz.engine import _FIT_FIX, FIT_FORMAT, Posterior, _posterior_from_archive

        with open_archive(path, what="fit", fix=_FIT_FIX, limit=limit) as archive:
            try:
                kind = archive.read_text("format", max_chars=64) if "format" in archive else ""
                if kind == FIT_FORMAT:
                    return cls([_posterior_from_archive(Posterior, archive)])
                if kind != ENSEMBLE_FORMAT:
                    raise ValueError(
                        f"{archive.name}: not a fit ({FIT_FORMAT!r} or {ENSEMBLE_FORMAT!r}; it holds "
                        f"{archive.listing()}); {_FIT_FIX}"
                    )
                return cls._from_ensemble_archive(archive, _FIT_FIX, Posterior, _posterior_from_archive)
            except OSError as error:  # a damaged zip directory: an offset before the file's start
                if error.errno != errno.EINVAL:
                    raise
                raise ValueError(
                    f"{archive.name}: its zip directory points outside the file (the archive is damaged or "
                    f"forged); {_FIT_FIX}"
                ) from None

    @classmethod
    def _from_ensemble_archive(cls, archive, fix, posterior_class, posterior_from_archive):
        name = archive.name

        def refuse(problem):
            return ValueError(f"{name}: {problem}; {fix}")

        n_chains = int(archive.read_scalar("n_chains", kinds="iu")) if "n_chains" in archive else 0
        if not 1 <= n_chains <= 10_000:
            raise refuse(f"n_chains = {n_chains} is not a number of chains")
        members = [set() for _ in range(n_chains)]
        for key in archive.keys():
            if key in _ENSEMBLE_MEMBERS:
                continue
            found = _CHAIN_MEMBER.fullmatch(key)
            if found is None:
                raise refuse(f"member {key[:60]!r} is none of an ensemble's (format, n_chains, mu_hat, chainI.KEY)")
            index = int(found.group(1))
            if index >= n_chains:
                raise refuse(
                    f"it holds members of chain {index} ({key[:60]!r}), but n_chains = {n_chains}: the chain count "
                    "disagrees with the chains it holds"
                )
            members[index].add(found.group(2))
        for index, keys in enumerate(members):
            if not keys:
                raise refuse(f"n_chains = {n_chains}, but it holds no members of chain {index}")
            if keys != members[0]:
                differ = sorted(keys ^ members[0])[0]
                which = f"chain {index}" if differ in members[0] else "chain 0"
                raise refuse(
                    f"chain {index}'s members are not chain 0's ({which} lacks {differ[:40]!r}): the chains of one "
                    "ensemble file are written together"
                )
        if "mu_hat" not in archive:
            raise refuse("no pooled posterior mean rates 'mu_hat' in it")
        # every chain's arrays declared as chain 0's, from the headers, before any is inflated: a
        # chain (or the pooled rates) declaring other shapes is refused without reading it (a deflate
        # bomb in one chain inflated 7.2 GB in 100 s before its factors were found not to fit)
        views = [_ChainView(archive, i) for i in range(n_chains)]
        arrays = sorted(key for key in members[0] if key == "mu_hat" or key.startswith("best_"))
        for key in arrays:
            declared = views[0].header(key)
            for index, view in enumerate(views[1:], start=1):
                header = view.header(key)
                if (header.shape, header.dtype) != (declared.shape, declared.dtype):
                    raise refuse(
                        f"chain {index}'s {key!r} is {header.shape} of {header.dtype}, not chain 0's {declared.shape} "
                        f"of {declared.dtype}: the chains of an ensemble fit one model to one data set"
                    )
        if "mu_hat" in members[0] and archive.header("mu_hat").shape != views[0].header("mu_hat").shape:
            pooled = archive.header("mu_hat")
            raise refuse(
                f"the pooled rates 'mu_hat' are {pooled.shape} of {pooled.dtype}, not the chains' "
                f"{views[0].header('mu_hat').shape} floats"
            )
        chains = [posterior_from_archive(posterior_class, view) for view in views]
        first = chains[0]
        for index, chain in enumerate(chains[1:], start=1):
            difference = _chain_difference(chain, first)
            if difference is not None:
                raise refuse(
                    f"chain {index}'s {difference}: the chains of an ensemble fit one model by one method to one "
                    "data set"
                )
        ensemble = cls(chains)
        pooled = archive.header("mu_hat")
        if pooled.shape != ensemble.shape or pooled.dtype.kind != "f":
            raise refuse(
                f"the pooled rates 'mu_hat' are {pooled.shape} of {pooled.dtype}, not the chains' {ensemble.shape} "
                "floats"
            )
        archive.require(["mu_hat"], what=f"reading the pooled rates ({' x '.join(map(str, pooled.shape))})")
        saved = archive.read("mu_hat")
        mine = ensemble.mu_hat
        if mine is None or not np.allclose(saved, mine, rtol=1e-9, atol=0.0):
            raise refuse(
                "the pooled rates 'mu_hat' are not its chains' pooled rates (a chain or the rates were changed "
                "after it was written)"
            )
        return ensemble

    def __repr__(self):
        return (
            f"EnsemblePosterior(model={self.model!r}, method={self.method!r}, shape={self.shape}, "
            f"chains={self.n_chains}, iterations={self.iterations}, saved={self.n_saved})"
        )


class _ChainView:
    """One chain's members of an ensemble archive (``chainI.KEY``), seen as a single-chain fit archive."""

    def __init__(self, archive, index):
        self._archive, self._prefix = archive, f"chain{index}."
        self.name = f"{archive.name} (chain {index})"

    def _key(self, key):
        return self._prefix + key

    def __contains__(self, key):
        return self._key(key) in self._archive

    def keys(self):
        return [key[len(self._prefix) :] for key in self._archive.keys() if key.startswith(self._prefix)]

    def listing(self, limit=12):
        keys = self.keys()
        return ", ".join(keys[:limit]) + (f", ... ({len(keys)} in all)" if len(keys) > limit else "")

    def header(self, key):
        return self._archive.header(self._key(key))

    def read(self, key):
        return self._archive.read(self._key(key))

    def read_text(self, key, **options):
        return self._archive.read_text(self._key(key), **options)

    def read_scalar(self, key, **options):
        return self._archive.read_scalar(self._key(key), **options)

    def require(self, keys, **options):
        return self._archive.require([self._key(key) for key in keys], **options)
