"""``lpviz fit``: fit a model to (noised) counts with every method the registry has.

Data come from ``--data SPEC`` (see :func:`lpviz.datasets.load_data`): true
counts are noised here with ``--epsilon/--N`` or ``--alpha`` (a seeded
simulation: whoever runs this holds the truth); with ``--already-noised``
SPEC is a release written by ``lpviz privatize``. The synthetic specs carry
their own noised copy, used when no privacy level is given; they take the
generator's options (``synthetic-topics:n_docs=500,n_words=100``).
``synthetic-topics-blockwise`` noises its rows itself (no privacy level) and
with ``--scheduler`` goes to :func:`lpviz.fit` as is: each worker builds its
own rows, and a generator of more than ``SCORE_DENSE_MAX_CELLS`` cells is
scored from the fit's rates alone (the summary says which numbers that leaves
out). With the true
counts at hand (everything but an already-noised release) the summary reports
the numbers of :func:`lpviz.metrics.score` against them.

``--output DIR`` writes ``release.npz`` (what the methods saw), ``truth.npz``
(the true counts, when known: named so), one ``METHOD.npz`` per method in the
fit schema (:meth:`lpviz.engine.Posterior.save`) and ``summary.json``, all or
nothing: into a hidden folder beside DIR, moved into place at the end
(:func:`lpviz._files.atomic_folder`), so a full disk, Ctrl-C or SIGTERM
leaves nothing under DIR. Labels go into them only with ``--labels public``.

``--chains C`` runs C chains per method by ``lpviz.fit(..., chains=C)``
(the first with the seed a single chain gets; default the library's,
:data:`lpviz.ensemble.DEFAULT_CHAINS`) and reports what
:func:`lpviz.metrics.score` says of the ensemble: each chain's numbers, the
pooled ones, cross-chain R-hat and ESS and chains that disagree;
``--save-idata FILE`` writes them as ArviZ InferenceData (netCDF). This
module parses, calls the library and prints: nothing here computes a chain,
a diagnostic or a score.
"""

import json
import math
import os
from pathlib import Path

import numpy as np

from lpviz._files import atomic_write

from . import CLIError
from ._common import (  # noqa: F401 -- check_run_lengths, progress_bar, format_table, save_json: lpviz demo's
    add_privacy_arguments,
    check_run_lengths,
    format_table,
    privacy_level,
    progress_bar,
    read_release,
    refuse_overwrite,
    resolve_noise_seed,
    resolve_seed,
    save_json,
    save_truth,
)

# Columns of the printed table: (score key, header, format).
# every MAE beside its baselines (lpviz.metrics.score's "baselines": the best constant and the
# independence fit of the same release), then the fit's health
TABLE_COLUMNS = [
    ("mae", "MAE", "{:.4g}"),
    ("best_constant_mae", "const", "{:.4g}"),
    ("independence_mae", "indep", "{:.4g}"),
    ("heldout_mae", "held-out MAE", "{:.4g}"),
    ("best_constant_heldout_mae", "const", "{:.4g}"),
    ("independence_heldout_mae", "indep", "{:.4g}"),
    ("rate_mae", "MAE vs rates", "{:.4g}"),
    ("best_constant_rate_mae", "const", "{:.4g}"),
    ("independence_rate_mae", "indep", "{:.4g}"),
    ("npmi", "NPMI", "{:.3f}"),
    ("best_log_joint", "best log joint", "{:.6g}"),
    ("log_marginal", "log marginal", "{:.6g}"),
    ("elbo", "ELBO", "{:.6g}"),
    ("mass_ratio", "mass ratio", "{:.3f}"),
    ("health", "health", "{}"),
    ("seconds", "seconds", "{:.1f}"),
]


def table_row(result):
    """A score() dict flattened for :func:`score_table`: its baselines beside its MAEs, its mass
    ratio, and its health in words ("ok", or its flags)."""
    row = {key: value for key, value in result.items() if key not in ("health", "baselines")}
    row.update({key: value for key, value in (result.get("baselines") or {}).items() if key.endswith("mae")})
    health = result.get("health")
    if health is not None:
        row["mass_ratio"] = health["mass_ratio"]
        row["health"] = ", ".join(health["flags"]) or "ok"
    return row


def method_options():
    """{option: choices} over every registered method (e.g. the private method's sampler)."""
    from ..methods import METHODS

    options = {}
    for method_class in METHODS.values():
        for option, choices in method_class.options.items():
            options.setdefault(option, [])
            options[option] += [c for c in choices if c not in options[option]]
    return options


def register(subparsers):
    from ..methods import METHODS
    from ..models import MODELS

    parser = subparsers.add_parser(
        "fit",
        help="fit a topic, block or tensor model (" + ", ".join(METHODS) + ")",
        description="Fit Poisson factorization to counts noised with the geometric mechanism, with each "
        "method: " + "; ".join(f"{name}: {m.description}" for name, m in METHODS.items()),
    )
    parser.add_argument(
        "--data",
        required=True,
        metavar="SPEC",
        help="a counts file (.npz, .csv, .mtx, edge list, UCI), enron-topics:PATH, "
        "enron-network:PATH, enron-tensor:PATH, synthetic-topics, synthetic-blocks, synthetic-tensor or "
        "synthetic-topics-blockwise (built on the workers with --scheduler); a generator takes options "
        "after a colon, e.g. synthetic-topics-blockwise:n_docs=200000,n_words=2000,n_topics=50",
    )
    parser.add_argument(
        "--model",
        choices=list(MODELS),
        default=None,
        help="; ".join(f"{name}: {m.label}" for name, m in MODELS.items()) + " (default: what the data are)",
    )
    parser.add_argument(
        "--method",
        choices=list(METHODS) + ["all"],
        default="private",
        help="how the noise is treated; 'all' runs every method side by side (default private)",
    )
    for option, choices in method_options().items():
        parser.add_argument(
            f"--{option}",
            choices=choices,
            default=None,
            help=f"{option} of the methods that have one (default {choices[0]})",
        )
    add_privacy_arguments(parser)
    parser.add_argument(
        "--already-noised", action="store_true", help="SPEC is a release from `lpviz privatize` (noised counts + alpha)"
    )
    parser.add_argument(
        "--components",
        type=int,
        default=None,
        help="topics K or communities C (default: the truth's for synthetic data)",
    )
    parser.add_argument(
        "--holdout",
        choices=("none", "random", "top-actors"),
        default="none",
        help="cells left out of the fit and scored apart (held-out MAE): 'top-actors' is "
        "Figure 5's design, every cell involving the top --holdout-actors senders or "
        "recipients; 'random' a random --holdout-fraction of cells",
    )
    parser.add_argument(
        "--holdout-actors",
        type=int,
        default=50,
        metavar="N",
        help="with --holdout top-actors: how many top rows/columns (default 50, the paper's)",
    )
    parser.add_argument(
        "--holdout-fraction",
        type=float,
        default=0.1,
        metavar="F",
        help="with --holdout random: the share of cells held out (default 0.1)",
    )
    parser.add_argument(
        "--inference",
        choices=("mcmc", "vi"),
        default="mcmc",
        help="mcmc: Gibbs chains (the ICML paper); vi: coordinate-ascent variational inference "
        "(the VI paper), --iterations at most, until the ELBO's relative change is below --tol",
    )
    parser.add_argument(
        "--tol",
        type=float,
        default=None,
        help="with --inference vi or --init vi: stop once the ELBO changes by less than this "
        "fraction (default 1e-5, lpviz.vi.DEFAULT_TOL)",
    )
    parser.add_argument(
        "--init",
        choices=("random", "vi"),
        default="random",
        help="with --inference mcmc: start the chains at random (default) or from a variational fit",
    )
    parser.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help="use the Dask cluster at ADDRESS (e.g. tcp://host:8786; default LPVIZ_SCHEDULER): with "
        "--chains 1 the chain's rows split over its workers, with --chains C > 1 each chain runs whole "
        "on a worker; the same chains, bit for bit (docs/guides/distributed.md)",
    )
    parser.add_argument("--iterations", type=int, default=1000, help="iterations (default 1000)")
    parser.add_argument("--burn-in", type=int, default=None, help="iterations before saving (default 1/6)")
    parser.add_argument("--thin", type=int, default=25, help="save every THIN-th iteration (default 25)")
    parser.add_argument(
        "--seed",
        type=int,
        default=None,
        help="seed of the chains and of --holdout random (default: a fresh one); recorded in "
        "summary.json, and never the noise's: it cannot rebuild the noised counts",
    )
    parser.add_argument(
        "--noise-seed",
        type=int,
        default=None,
        metavar="S",
        help="seed of the noise simulated here and of a synthetic data set (a replayable "
        "simulation; default: fresh from the operating system's entropy). Whoever has it "
        "rebuilds the true counts from the release: it is written nowhere unless --keep-noise-seed",
    )
    parser.add_argument(
        "--keep-noise-seed",
        action="store_true",
        help="record the noise seed in summary.json and --save-idata's attributes; it reveals the "
        "noise, so whoever has those files and the release rebuilds the true counts exactly",
    )
    parser.add_argument(
        "--chains",
        type=int,
        default=None,
        metavar="C",
        help="chains per method, run concurrently (default: the library's, lpviz.ensemble.DEFAULT_CHAINS); "
        "with C > 1 the summary adds each chain's scores, cross-chain R-hat and ESS of the marginal log "
        "likelihood (or log joint), rates at 20 cells and aligned topics, and names a chain in another "
        "mode; scores are the pooled posterior's and METHOD.npz holds every chain",
    )
    parser.add_argument(
        "--save-idata",
        type=Path,
        default=None,
        metavar="FILE",
        help="write the chains as ArviZ InferenceData (netCDF, e.g. fit.nc); with several methods "
        "one file each, the method's name before the suffix (fit.private.nc)",
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=None,
        metavar="DIR",
        help="write release.npz, truth.npz (if known), METHOD.npz per method and summary.json",
    )
    parser.add_argument(
        "--labels",
        choices=("none", "public"),
        default="none",
        help="'public' writes the data's row/column labels into the files of --output (release.npz, "
        "METHOD.npz); only when they are public anyway: labels chosen from the true data (the most "
        "frequent words, the busiest senders) reveal it (default none)",
    )
    parser.add_argument("--force", action="store_true", help="replace result files that exist in DIR")
    parser.add_argument("--json", action="store_true", help="print a machine-readable summary")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.set_defaults(func=run)


# ---------------------------------------------------------------------------
# Shared with `lpviz demo`
# ---------------------------------------------------------------------------


def run_method(
    release,
    truth,
    *,
    model,
    method,
    n_components,
    iterations,
    burn_in,
    thin,
    seed,
    progress,
    chains=None,
    source=None,
    **options,
):
    """:func:`lpviz.fit` of ``chains`` chains (default the library's) with a progress bar (log joint
    and log marginal, or the ELBO, in its postfix); returns the posterior and its
    :func:`lpviz.metrics.score` (an ensemble's, with each chain's, for several chains).

    Without a release (a run of the non-private method alone) the chain fits
    the true counts as a matrix, with ``mask`` among ``options``. ``source``: what
    :func:`lpviz.fit` gets instead (a generator whose rows the workers build, e.g.
    :class:`~lpviz.datasets.BlockwiseTopics`); ``release`` and ``truth`` then only score it (either
    may be None).
    """
    from ..driver import fit
    from ..ensemble import DEFAULT_CHAINS
    from ..metrics import score

    chains = DEFAULT_CHAINS if chains is None else chains
    if source is not None:  # the workers build the rows (and the truth, for the non-private fit)
        data, with_truth = source, None
    else:
        data, with_truth = (release, truth) if release is not None else (truth.Y, None)
    scheduler = options.pop("scheduler", None) or os.environ.get("LPVIZ_SCHEDULER") or None
    if scheduler is not None and chains == 1:  # one chain over a Dask cluster's workers (lpviz.distributed)
        posterior = fit(
            data, model=model, method=method, n_components=n_components, n_iter=iterations, burn_in=burn_in,
            thin=thin, truth=with_truth, random_state=seed, scheduler=scheduler, **options,
        )  # fmt: skip
        return posterior, score(posterior, release, truth)
    with progress_bar(iterations * chains, str(method), progress) as bar:

        def advance(state):
            bar.update(1)
            if state.chain == 0 and (state.iteration % 25 == 0 or state.iteration == iterations):
                postfix = {
                    name: f"{value:.6g}"
                    for name, value in (
                        ("log joint", state.log_joint),
                        ("log marginal", state.log_marginal),
                        ("ELBO", getattr(state, "elbo", np.nan)),
                    )
                    if not np.isnan(value)
                }
                bar.set_postfix(postfix, refresh=False)

        posterior = fit(
            data,
            model=model,
            method=method,
            n_components=n_components,
            n_iter=iterations,
            burn_in=burn_in,
            thin=thin,
            truth=with_truth,
            random_state=seed,
            chains=chains,
            callback=advance,
            scheduler=scheduler,  # chains > 1: each chain whole on a worker (lpviz._dask_chains)
            **options,
        )
    return posterior, score(posterior, release, truth)


def score_table(rows):
    """The table of the columns that have a value in some row (rows: score() dicts with a "method")."""
    rows = [table_row(row) for row in rows]
    columns = [("method", "method", "{}")] + [
        c for c in TABLE_COLUMNS if any(row.get(c[0]) is not None for row in rows)
    ]
    return format_table(rows, columns)


# ---------------------------------------------------------------------------
# lpviz fit
# ---------------------------------------------------------------------------


def _load(args, noise_seed):
    """``(release or None, truth or None, data kind, K of the truth or None)``.

    Everything random about the data (a synthetic set, with its own noised copy, and the noise
    simulated here) comes from ``noise_seed``, which is independent of the chains' seed."""
    from dataclasses import replace

    from ..datasets import SyntheticData, load_data
    from ..datasets.loaders import describe_lines

    if args.already_noised:
        release = read_release(args.data)
        if privacy_level(args, required=False) is not None:
            raise CLIError(f"{args.data} records the noise it was released with (alpha); drop --epsilon/--N/--alpha")
        return release, None, release.kind, None

    # the synthetic generators take the noise seed (they noise their own copy); files do not
    options = {"random_state": noise_seed} if args.data.startswith("synthetic-") else {}
    try:
        data = load_data(args.data, **options)
    except ValueError as error:  # a spec's options (lpviz.datasets.loaders.parse_spec_options) or sizes
        raise CLIError(str(error)) from None
    if getattr(data, "builds_rows", False):
        return _load_generator(args, data)
    # every model's factors have the components last
    components = int(next(iter(data.factors.values())).shape[-1]) if isinstance(data, SyntheticData) else None
    level = privacy_level(args, required=False)
    public = args.labels == "public"
    if level is not None:
        epsilon, N, alpha = level
        noise = dict(alpha=alpha) if epsilon is None else dict(epsilon=epsilon, N=N)
        # noised here, by whoever holds the truth: a simulation; labels only when declared public
        # a stream of its own: a synthetic set drew its truth from noise_seed itself
        noise_stream = np.random.default_rng(np.random.SeedSequence(noise_seed).spawn(1)[0])
        release = data.privatize(
            **noise, random_state=noise_stream, public_labels=public, allow_no_noise=args.allow_no_noise
        )
    elif isinstance(data, SyntheticData):  # the generator's own noised copy
        release = data.release()
        if not public:
            release = replace(release, row_labels=None, col_labels=None)
    else:
        release = None
    lines = describe_lines(data.info)
    if lines and not args.json:
        print(f"read {args.data}: {lines}")
    return release, data.truth(), data.kind, components


# With --scheduler, a generator of at most this many cells is also built on this machine to score
# the fit against (its release and truth: a few dense copies, 8 MB each at this size), so the
# summary has the numbers of the same fit in one process; a larger one is scored from the workers'
# rates alone and never exists here as a whole.
SCORE_DENSE_MAX_CELLS = 1 << 20


def _load_generator(args, gen):
    """:func:`_load` of a generator that builds its rows where they are needed
    (``synthetic-topics-blockwise``): the generator itself goes to :func:`lpviz.fit` over a cluster;
    in one process (or small enough to score against) its release and truth are built here."""
    if privacy_level(args, required=False) is not None:
        raise CLIError(
            f"{args.data.partition(':')[0]} noises its rows itself, each with its own alpha ~ Beta around alpha0 "
            f"(here {gen.alpha0:g}), seeded by --noise-seed: drop --epsilon/--N/--alpha and set the level in the "
            "spec, e.g. synthetic-topics-blockwise:alpha0=0.5"
        )
    args.generator = gen if _scheduler(args) else None
    if args.generator is not None:
        refused = [
            (args.chains > 1, "--chains C > 1 runs each chain whole on a worker, from a release built here"),
            (args.holdout != "none", "--holdout holds out cells of a release built here"),
            (args.output is not None, "--output writes the whole release and fit from here"),
            (args.save_idata is not None, "--save-idata writes the whole fit from here"),
        ]
        for refuse, why in refused:
            if refuse:
                raise CLIError(
                    f"{why}; a blockwise generator over a cluster never exists whole on this machine: drop it, "
                    "or drop --scheduler to fit in one process"
                )
        if math.prod(gen.shape) > SCORE_DENSE_MAX_CELLS:  # scored from the workers' rates alone
            return None, None, gen.kind, gen.n_topics
    try:  # memory checked before anything is built (lpviz.budget)
        return gen.release(), gen.truth(), gen.kind, gen.n_topics
    except ValueError as error:
        raise CLIError(str(error)) from None


def _scheduler(args):
    return args.scheduler or os.environ.get("LPVIZ_SCHEDULER") or None


def _holdout(args, release, truth, model, holdout_seed):
    """The held-out cells of ``--holdout`` (True = held out), or None."""
    from ..datasets import holdout_mask

    how = {"none": "none", "random": "random cells", "top-actors": "top actors"}[args.holdout]
    reference = truth.Y if truth is not None else release.Y_obs
    try:
        mask = holdout_mask(
            reference,
            model,
            how,
            fraction=args.holdout_fraction,
            n_actors=args.holdout_actors,
            random_state=np.random.default_rng(holdout_seed),
        )
    except ValueError as error:
        raise CLIError(f"--holdout {args.holdout}: {error}") from None
    return None if mask is None else ~mask


def run(args):
    from .. import methods as method_registry
    from .. import models as model_registry

    variational = args.inference == "vi"
    if variational:
        if args.iterations < 1:
            raise CLIError(f"--iterations must be >= 1, got {args.iterations}")
        if args.burn_in is not None:
            raise CLIError("--inference vi has no burn-in: drop --burn-in (--iterations is the most it runs)")
        if args.init != "random":
            raise CLIError("--init vi starts MCMC chains from a variational fit; use it with --inference mcmc")
    else:
        check_run_lengths(args.iterations, args.burn_in, args.thin)
        if args.tol is not None and args.init != "vi":
            raise CLIError("--tol sets when a variational fit stops: use it with --inference vi or --init vi")
    if args.tol is not None and not (args.tol >= 0):
        raise CLIError(f"--tol must be >= 0, got {args.tol}")
    if args.components is not None and args.components < 1:
        raise CLIError(f"--components must be >= 1, got {args.components}")
    from ..ensemble import DEFAULT_CHAINS

    args.chains = DEFAULT_CHAINS if args.chains is None else args.chains
    if args.chains < 1:
        raise CLIError(f"--chains must be >= 1, got {args.chains}")
    if variational and args.chains > 1:
        raise CLIError("--chains runs MCMC chains; --inference vi makes one variational fit: drop --chains")
    seed = resolve_seed(args.seed)
    noise_seed = resolve_noise_seed(args.noise_seed)
    if args.already_noised and (args.noise_seed is not None or args.keep_noise_seed):
        raise CLIError("an already-noised release is not noised here: drop --noise-seed/--keep-noise-seed")
    names = list(method_registry.METHODS) if args.method == "all" else [args.method]
    if args.already_noised:
        needs_truth = [n for n in names if method_registry.get(n).uses_truth]
        if needs_truth and args.method != "all":
            raise CLIError(f"--method {args.method} needs the true counts; an already-noised release has none")
        names = [n for n in names if n not in needs_truth]
    if args.output is not None:
        _check_output_folder(args.output, [f"{m}.npz" for m in names], args.force)
    idata_paths = _idata_paths(args.save_idata, names)
    for path in idata_paths.values():
        if not path.parent.is_dir():
            raise CLIError(f"folder {path.parent} does not exist; create it first (or fix --save-idata)")
        refuse_overwrite(path, args.force)
    options = {option: getattr(args, option) for option in method_options() if getattr(args, option) is not None}
    inference = {"inference": args.inference}
    if args.tol is not None:
        inference["tol"] = args.tol
    if args.init != "random":
        inference["init"] = args.init

    # the first of the three streams once seeded the noise: now unused, so a seed keeps its chains
    _, chain_seed, holdout_seed = np.random.SeedSequence(seed).spawn(3)
    args.generator = None  # a generator lpviz.fit gets as is (_load_generator)
    release, truth, kind, components = _load(args, noise_seed)
    generator = args.generator
    model = args.model or model_registry.default_for(kind)
    n_components = args.components or components
    if n_components is None:
        raise CLIError("give the number of topics/communities with --components K")
    if release is None and generator is None and any(not method_registry.get(n).uses_truth for n in names):
        raise CLIError(
            "the "
            + ", ".join(n for n in names if not method_registry.get(n).uses_truth)
            + " fit(s) need noised counts: give --epsilon E [--N N] or --alpha A to noise the data "
            "here, or --method nonprivate"
        )
    heldout = None if args.holdout == "none" else _holdout(args, release, truth, model, holdout_seed)
    if release is not None and heldout is not None:
        try:
            release = release.with_heldout(heldout)
        except ValueError as error:
            raise CLIError(f"--holdout {args.holdout}: {error}") from None

    posteriors, scores, chain_scores, diagnostics = {}, {}, {}, {}
    for name in names:
        method_options_here = {k: v for k, v in options.items() if k in method_registry.get(name).options}
        if release is None and generator is None:
            method_options_here["mask"] = None if heldout is None else ~heldout
        try:  # chain 0 has the seed a single chain gets; the others' are spawned from it (lpviz.ensemble)
            posterior, result = run_method(
                release,
                truth,
                model=model,
                method=name,
                n_components=n_components,
                iterations=args.iterations,
                burn_in=args.burn_in,
                thin=args.thin,
                seed=np.random.default_rng(_fresh(chain_seed)),
                progress=True if args.json or args.no_progress else None,
                chains=args.chains,
                scheduler=args.scheduler,
                source=generator,
                **inference,
                **method_options_here,
            )
        except ValueError as error:
            raise CLIError(str(error)) from None
        if posterior.inference == "vi":
            result["converged"] = posterior.converged
        posteriors[name] = posterior
        if args.chains > 1:
            chain_scores[name] = result.pop("chains")
            diagnostics[name] = result.pop("convergence")
        scores[name] = result

    held_cells = posteriors[names[0]].heldout  # every method's chain held out the same cells
    alpha = None if release is None else release.alpha
    alpha_summary = (
        None
        if alpha is None
        else (
            float(alpha)
            if np.ndim(alpha) == 0
            else {
                "per_row": True,
                "mean": float(np.mean(alpha)),
                "min": float(np.min(alpha)),
                "max": float(np.max(alpha)),
            }
        )
    )
    if generator is not None and release is None:  # never built here: its noise as generated
        alpha_summary = {"per_row": True, "beta_mean": generator.alpha0, "concentration": generator.concentration}
    shape = generator.shape if generator is not None else release.shape if release is not None else truth.Y.shape
    summary = {
        "data": args.data,
        "labels_written": args.labels,
        "shape": list(shape),
        "kind": kind,
        "model": model,
        "n_components": n_components,
        "epsilon": None if release is None else release.epsilon,
        "N": None if release is None else release.N,
        "alpha": alpha_summary,
        "simulated": (not generator.exact) if generator is not None else None if release is None else release.simulated,
        "already_noised": bool(args.already_noised),
        "holdout": args.holdout,
        # the held-out cells that exist, which held-out MAE averages over (a network's diagonal is not one)
        "heldout_cells": 0 if held_cells is None else int(held_cells.sum()),
        "iterations": args.iterations,
        "inference": args.inference,
        "init": args.init,
        "tol": args.tol,
        "burn_in": None if variational else (args.iterations // 6 if args.burn_in is None else args.burn_in),
        "thin": None if variational else args.thin,
        "seed": seed,  # the chains' (and --holdout random's): it cannot regenerate the noise
        "options": options,
        "labels": {name: posteriors[name].method_label for name in names},
        "methods": scores,
    }
    simulated_here = not args.already_noised and (release is not None or args.data.startswith("synthetic-"))
    if args.keep_noise_seed and simulated_here:
        summary["noise_seed"] = noise_seed  # asked for: whoever has it and the release rebuilds the truth
    if generator is not None and truth is None:
        summary["not_scored"] = (
            f"the {shape[0]:,} x {shape[1]:,} release and its true counts were built on the workers only (more than "
            f"{SCORE_DENSE_MAX_CELLS:,} cells), so the fit is scored from its rates alone: no MAE, topic scores, "
            "baselines or mass ratio"
        )
    if args.chains > 1:
        summary["chains"] = chain_scores
        summary["diagnostics"] = diagnostics
    for name, path in idata_paths.items():
        attrs = {"seed": seed, **({"noise_seed": str(noise_seed)} if "noise_seed" in summary else {})}
        try:
            idata = posteriors[name].to_inference_data(release, truth, attrs=attrs)
        except ValueError as error:
            raise CLIError(f"--save-idata: {error}") from None
        _save_idata(path, idata)
        summary.setdefault("idata", []).append(str(path))

    if args.output is not None:
        _write_output(args.output, release, truth, posteriors, summary, args.force)

    if args.json:
        print(json.dumps(summary))
    else:
        _print_summary(summary, names, release, generator)
    return 0


# ---------------------------------------------------------------------------
# --output
# ---------------------------------------------------------------------------


def _check_output_folder(output, method_files, force):
    """Before any work: --output must be a folder (or a new name in an existing one) whose result
    files (dangling symbolic links included) are replaced only with --force."""
    from lpviz._files import check_results_folder

    try:  # a name of its own (not . or /), in a folder that exists and can be written: before the fit
        check_results_folder(output)
    except ValueError as error:
        raise CLIError(str(error)) from None
    if output.is_dir():
        for name in [*method_files, "release.npz", "truth.npz", "summary.json"]:
            refuse_overwrite(output / name, force)


def _write_output(output, release, truth, posteriors, summary, force):
    """release.npz, truth.npz, METHOD.npz and summary.json, all or nothing (lpviz._files.atomic_folder)."""
    from lpviz._files import atomic_folder

    names = (["release.npz"] if release is not None else []) + (["truth.npz"] if truth is not None else [])
    names += [f"{name}.npz" for name in posteriors] + ["summary.json"]
    summary["files"] = [str(output / name) for name in names]
    with atomic_folder(output, replace_files=force) as folder:
        if release is not None:
            release.save(folder / "release.npz")
        if truth is not None:
            save_truth(folder / "truth.npz", truth, False)
        for name, posterior in posteriors.items():
            posterior.save(folder / f"{name}.npz", release)
        save_json(folder / "summary.json", summary, False)


# ---------------------------------------------------------------------------
# --chains, --save-idata
# ---------------------------------------------------------------------------


def _idata_paths(path, names):
    """{method: file} for --save-idata: the file itself for one method, else one per method."""
    if path is None:
        return {}
    if len(names) == 1:
        return {names[0]: path}
    return {name: path.with_name(f"{path.stem}.{name}{path.suffix or '.nc'}") for name in names}


def _fresh(seed_sequence):
    """A copy of ``seed_sequence`` that has spawned nothing yet: every method's chains get the same
    seeds (the library spawns chains 1.. from chain 0's sequence)."""
    return np.random.SeedSequence(seed_sequence.entropy, spawn_key=seed_sequence.spawn_key)


def _save_idata(path, idata):
    """netCDF via a temporary file beside ``path``, moved into place: never half a file."""

    atomic_write(path, lambda temporary: idata.to_netcdf(str(temporary)), by_name=True)


def _print_summary(summary, names, release, generator=None):
    rows, k = summary["shape"], summary["n_components"]
    if release is not None:
        noise = release.describe()
    elif generator is not None:
        noise = (
            f"per-row alpha ~ Beta around {generator.alpha0:g} (concentration {generator.concentration:g}), "
            f"drawn on the workers; {'release (exact noise)' if generator.exact else 'simulation'}"
        )
    else:
        noise = "no noise (the non-private fit only)"
    print(f"data: {summary['data']} ({' x '.join(map(str, rows))}, {summary['model']}, K={k}); noise: {noise}")
    held = f", {summary['heldout_cells']:,} cells held out ({summary['holdout']})" if summary["heldout_cells"] else ""
    if summary["inference"] == "vi":
        from ..vi import DEFAULT_TOL

        tol = summary["tol"] if summary["tol"] is not None else DEFAULT_TOL
        print(
            f"variational inference (CAVI): at most {summary['iterations']} iterations, tol {tol:g}, "
            f"seed {summary['seed']}{held}"
        )
    else:
        start = ", started from a variational fit" if summary["init"] == "vi" else ""
        print(
            f"{summary['iterations']} iterations, burn-in {summary['burn_in']}, thin {summary['thin']}{start}, "
            f"seed {summary['seed']}{held}"
        )
    if "chains" in summary:
        print(
            score_table(
                [
                    row
                    for name in names
                    for row in [
                        *({"method": f"{name} #{i + 1}", **result} for i, result in enumerate(summary["chains"][name])),
                        {"method": f"{name} pooled", **summary["methods"][name]},
                    ]
                ]
            )
        )
        print("convergence (R-hat above 1.01: the chains disagree, run longer):")
        print(
            format_table(
                [{"method": name, **row} for name in names for row in summary["diagnostics"][name]],
                [
                    ("method", "method", "{}"),
                    ("quantity", "quantity", "{}"),
                    ("rhat_max", "max R-hat", "{:.3f}"),
                    ("ess_bulk_min", "min bulk ESS", "{:.0f}"),
                    ("ess_tail_min", "min tail ESS", "{:.0f}"),
                ],
            )
        )
    else:
        print(score_table([{"method": name, **summary["methods"][name]} for name in names]))
    if "not_scored" not in summary:  # a fit scored from its rates alone has no baselines
        print(
            "const, indep: the MAE of the best constant rate and of the row x column means fit, both "
            "estimated from the release alone (lpviz.metrics.score's baselines)"
        )
    for name in names:
        for i, result in enumerate(summary.get("chains", {}).get(name) or [summary["methods"][name]]):
            health = result.get("health") or {}
            if health.get("flags"):
                chain = f" #{i + 1}" if "chains" in summary else ""
                print(f"{name}{chain}: {', '.join(health['flags'])}: {'; '.join(health['reasons'])}")
        pooled = (summary["methods"][name].get("health") or {}) if "chains" in summary else {}
        if pooled.get("flags"):  # the ensemble's own verdict: cross-chain R-hat, a chain in another mode
            print(f"{name} pooled: {', '.join(pooled['flags'])}: {'; '.join(pooled['reasons'])}")
    if summary["inference"] == "vi":
        for name in names:
            result = summary["methods"][name]
            state = "converged" if result.get("converged") else "stopped at the iteration limit"
            print(f"{name}: {result['iterations']} iterations, {state}")
    if "not_scored" in summary:
        print(f"not scored: {summary['not_scored']}")
    for path in summary.get("files", []) + summary.get("idata", []):
        print(f"wrote {path}")
