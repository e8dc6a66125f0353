"""``lpviz central``: central-DP topic model (VIPS) on any documents x words data lpviz loads.

A trusted curator holds the true counts and fits private online LDA
(:class:`lpviz.central.PrivateLDA`): (epsilon, delta)-DP per document. The
local model (``lpviz fit``) trusts nobody and protects N tokens of a document.
The numbers come from :func:`lpviz.metrics.score` (against the true counts,
which the curator has) plus the held-out perplexity.
"""

import json
import sys

import numpy as np

from . import CLIError


def register(subparsers):
    parser = subparsers.add_parser(
        "central",
        help="central-DP topics (private online LDA, VIPS): the trusted-curator baseline",
        description=__doc__.splitlines()[0] + " Privacy unit: one document; trust: the curator sees the data.",
    )
    parser.add_argument(
        "--data",
        required=True,
        metavar="SPEC",
        help="documents x words counts (a file, enron-topics:PATH, synthetic-topics)",
    )
    parser.add_argument("--components", type=int, default=None, help="topics K (default: the truth's)")
    privacy = parser.add_argument_group("privacy ((epsilon, delta)-DP per document)")
    privacy.add_argument("--epsilon", type=float, default=None, help="privacy budget; calibrates the noise")
    privacy.add_argument("--delta", type=float, default=1e-5, help="delta (default 1e-5)")
    privacy.add_argument(
        "--noise-multiplier",
        type=float,
        default=None,
        help="sigma instead of --epsilon (0: non-private online LDA); epsilon is then reported",
    )
    privacy.add_argument("--accountant", choices=("pld", "rdp"), default="pld")
    parser.add_argument(
        "--batch-size",
        type=int,
        default=None,
        help="expected documents per step (default: a tenth of the documents, at least 1)",
    )
    parser.add_argument("--epochs", type=int, default=1, help="expected passes over the corpus (default 1)")
    parser.add_argument("--clip", type=float, default=0.1, help="clip fraction a of the sensitivity (default 0.1)")
    parser.add_argument(
        "--doc-length",
        type=float,
        default=500,
        help="N of the sensitivity bound Delta = clip * N (default 500; not from the data)",
    )
    parser.add_argument(
        "--heldout-fraction", type=float, default=0.1, help="share of documents held out for perplexity (default 0.1)"
    )
    parser.add_argument("--seed", type=int, default=None, help="seed of the batches, the noise and the held-out draw")
    parser.add_argument("--json", action="store_true", help="print a machine-readable summary")
    parser.set_defaults(func=run)


def run(args):
    from ..central import PrivateLDA, posterior
    from ..datasets import SyntheticData, load_data
    from ..metrics import score
    from .fit import resolve_seed

    if (args.epsilon is None) == (args.noise_multiplier is None):
        raise CLIError("give --epsilon E (the noise is calibrated) or --noise-multiplier S, exactly one")
    if not 0 < args.heldout_fraction < 1:
        raise CLIError(f"--heldout-fraction must lie strictly between 0 and 1, got {args.heldout_fraction:g}")
    seed = resolve_seed(args.seed)
    options = {"random_state": seed} if args.data.startswith("synthetic-") else {}
    data = load_data(args.data, **options)
    if data.kind != "documents":
        raise CLIError(f"{args.data} is a {data.kind}; the central baseline fits topic models of documents x words")
    components = args.components or (data.factors["theta"].shape[1] if isinstance(data, SyntheticData) else None)
    if components is None:
        raise CLIError("give the number of topics with --components K")
    Y = data.Y.tocsr() if hasattr(data.Y, "tocsr") else np.asarray(data.Y)
    rng = np.random.default_rng(seed)
    heldout = rng.random(Y.shape[0]) < args.heldout_fraction
    if heldout.all() or not heldout.any():
        raise CLIError("--heldout-fraction leaves no training or no held-out document; change it")
    train, test = Y[~heldout], Y[heldout]
    batch_size = args.batch_size or max(1, train.shape[0] // 10)
    try:
        model = PrivateLDA(
            components,
            epsilon=args.epsilon,
            noise_multiplier=args.noise_multiplier,
            delta=args.delta,
            batch_size=batch_size,
            n_epochs=args.epochs,
            clip=args.clip,
            doc_length=args.doc_length,
            accountant=args.accountant,
            random_state=seed,
        )
        model.fit(train)
    except ValueError as error:
        raise CLIError(str(error)) from None
    truth = data.truth()
    from ..release import Truth

    train_truth = Truth(
        truth.Y[~heldout],
        mu=None if truth.mu is None else truth.mu[~heldout],
        factors=None
        if not truth.factors
        else {"theta": truth.factors["theta"][~heldout], "phi": truth.factors.get("phi")},
    )
    scores = score(posterior(model, train), None, train_truth)
    summary = {
        "data": args.data,
        "shape": list(Y.shape),
        "n_components": components,
        "seed": seed,
        "trust": "a curator holds the true counts",
        "privacy_unit": "one document",
        "epsilon": model.epsilon_,
        "delta": model.delta_,
        "noise_multiplier": model.noise_multiplier_,
        "accountant": args.accountant,
        "steps": model.n_steps_,
        "batch_size": batch_size,
        "sampling_rate": model.sampling_rate_,
        "heldout_documents": int(heldout.sum()),
        "heldout_perplexity": model.perplexity(test),
        "seconds": float(model.trace_["seconds"].sum()),
        "scores": scores,
    }
    if args.json:
        print(json.dumps(summary, default=float))
        return 0
    print(
        f"data: {args.data} ({Y.shape[0]:,} documents x {Y.shape[1]:,} words, K={components}); "
        f"{int(heldout.sum()):,} documents held out"
    )
    print(
        f"central DP: ({model.epsilon_:.4g}, {model.delta_:g})-DP per document ({args.accountant.upper()} "
        f"accountant), noise multiplier {model.noise_multiplier_:.4g}, {model.n_steps_} steps of about "
        f"{batch_size} documents; the curator is trusted with the true counts"
    )
    shown = {
        "held-out perplexity": summary["heldout_perplexity"],
        "MAE": scores["mae"],
        "NPMI": scores["npmi"],
        "UMass": scores["umass"],
        "topic error (TV)": scores["topic_distance"],
        "seconds": summary["seconds"],
    }
    print("  ".join(f"{name} {value:.4g}" for name, value in shown.items() if value is not None))
    sys.stdout.flush()
    return 0
