"""``lpviz fetch-enron`` and ``lpviz build-enron``: get the Enron release and build the paper's matrices."""

import argparse
import json
import sys
import time
from pathlib import Path

from . import CLIError

# Defaults of the paper (Schein et al. 2019, section 5), shown in --help; the
# topic-only and network-only options are checked against the matrix asked for.
_TOPIC_DEFAULTS = {"n_docs": 10000, "n_words": 10000, "min_tokens": 50, "max_df": 0.3, "seed": 0}
_NETWORK_DEFAULTS = {"min_count": 100}
# The two Enron matrices: their options (with the paper's defaults), what rows x columns are.
_MATRICES = {"topics": (_TOPIC_DEFAULTS, "emails x words"), "network": (_NETWORK_DEFAULTS, "senders x recipients")}


def _n_docs(text):
    """``--n-docs``: a number of emails, or ``all`` (every eligible email of the corpus given)."""
    if text == "all":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of emails; give an integer or 'all'") from None


def register(subparsers):
    from lpviz.datasets.download import DEFAULT_URL

    fetch = subparsers.add_parser(
        "fetch-enron",
        help="download the CMU Enron email tarball (resumable)",
        description="Download the CMU Enron release over HTTP with a progress bar. An interrupted "
        "download resumes from DEST.part; the file is moved into place only when its "
        "size (and --known-hash) checks out. An existing file is returned untouched.",
    )
    fetch.add_argument(
        "--dest",
        type=Path,
        default=None,
        help="file or existing folder (default: the data cache folder, LPVIZ_DATA_DIR)",
    )
    fetch.add_argument("--url", default=DEFAULT_URL, help="where to download from (default: %(default)s)")
    fetch.add_argument(
        "--expected-size", type=int, default=None, metavar="BYTES", help="refuse a file of any other size"
    )
    fetch.add_argument(
        "--known-hash",
        default=None,
        metavar="sha256:HEX",
        help="refuse (and delete) a download with any other checksum; without it the "
        "SHA-256 of the file is printed on stderr, to pin it next time",
    )
    fetch.add_argument("--retries", type=int, default=3, help="automatic resumes (default: %(default)s)")
    fetch.add_argument("--no-progress", action="store_true", help="no progress bar")
    fetch.set_defaults(func=_fetch_enron)

    build = subparsers.add_parser(
        "build-enron",
        help="build the paper's Enron topic or network count matrix",
        description="Read a maildir folder, the CMU .tar.gz or emails.csv and build the document x "
        "word matrix (topics) or the sender -> recipient matrix (network), cached for "
        "the next run. Prints a summary; --output saves the matrix as .npz.",
    )
    build.add_argument("matrix", choices=list(_MATRICES))
    build.add_argument("source", type=Path, help="maildir folder, .tar.gz/.tgz or emails.csv")
    topics = build.add_argument_group("topics options")
    topics.add_argument(
        "--n-docs",
        type=_n_docs,
        help=f"emails drawn, D, or 'all': every email with --min-tokens tokens (default {_TOPIC_DEFAULTS['n_docs']})",
    )
    topics.add_argument("--n-words", type=int, help=f"vocabulary size, V (default {_TOPIC_DEFAULTS['n_words']})")
    topics.add_argument(
        "--min-tokens", type=int, help=f"word tokens an email needs (default {_TOPIC_DEFAULTS['min_tokens']})"
    )
    topics.add_argument(
        "--max-df",
        type=float,
        help=f"drop words in at least this fraction of emails (default {_TOPIC_DEFAULTS['max_df']})",
    )
    topics.add_argument("--seed", type=int, help=f"seed of the draw of emails (default {_TOPIC_DEFAULTS['seed']})")
    network = build.add_argument_group("network options")
    network.add_argument(
        "--min-count", type=int, help=f"emails an actor sent or received (default {_NETWORK_DEFAULTS['min_count']})"
    )
    build.add_argument("--cache-dir", type=Path, default=None, help="cache folder (default: LPVIZ_DATA_DIR or data/)")
    build.add_argument("--no-cache", action="store_true", help="build without reading or writing the cache")
    build.add_argument(
        "--output",
        type=Path,
        default=None,
        metavar="FILE.npz",
        help="also save the matrix (reload with lpviz.datasets.load_counts or --data FILE.npz)",
    )
    build.add_argument("--force", action="store_true", help="replace an existing --output file")
    build.add_argument(
        "--allow-partial",
        action="store_true",
        help="use a truncated archive's messages before the break (else an error); nothing partial is cached",
    )
    build.add_argument("--json", action="store_true", help="print the summary as JSON")
    build.set_defaults(func=_build_enron)


def _fetch_enron(args):
    from lpviz.datasets.download import fetch_enron, file_hash

    if args.retries < 0:
        raise CLIError(f"--retries must be >= 0, got {args.retries}")
    try:
        path = fetch_enron(
            args.dest,
            url=args.url,
            expected_size=args.expected_size,
            known_hash=args.known_hash,
            progress=not args.no_progress,
            retries=args.retries,
        )
    except OSError as error:  # unreachable server, HTTP error, interrupted, existing file
        raise CLIError(str(error)) from None
    print(path)
    if args.known_hash is None:
        print(f"sha256:{file_hash(path)} (check it next time with --known-hash)", file=sys.stderr)
    return 0


def _build_enron(args):
    from lpviz.datasets.cache import resolve_cache_dir
    from lpviz.datasets.enron import build_enron_network, build_enron_topics

    defaults = _MATRICES[args.matrix][0]
    given = {
        name: getattr(args, name)
        for options, _ in _MATRICES.values()
        for name in options
        if getattr(args, name) is not None
    }
    misplaced = [f"--{name.replace('_', '-')}" for name in given if name not in defaults]
    if misplaced:
        other = next(
            matrix for matrix, (options, _) in _MATRICES.items() if misplaced[0][2:].replace("-", "_") in options
        )
        raise CLIError(f"{', '.join(misplaced)} only applies to the {other} matrix, not {args.matrix}")
    from lpviz._files import check_input_path, output_exists

    fix = "give a maildir folder, the CMU .tar.gz or emails.csv (download it with `lpviz fetch-enron`)"
    try:  # a FIFO, a device, NUL bytes or a path too long: one line, before anything reads it
        check_input_path(args.source, what="Enron source", fix=fix, folder_ok=True)
    except FileNotFoundError:
        raise CLIError(f"{args.source}: no such file or folder; {fix}") from None
    if args.output is not None:
        if args.output.suffix != ".npz":
            raise CLIError(f"--output {args.output}: give a file name ending in .npz")
        if output_exists(args.output) and not args.force:
            raise CLIError(f"--output {args.output} already exists; choose another name or pass --force to replace it")
        if not args.output.parent.is_dir():  # before the build, not after it
            raise CLIError(
                f"--output {args.output}: the folder {args.output.parent} does not exist; "
                "create it first or choose a path in an existing folder"
            )
    if args.no_cache and args.cache_dir is not None:
        raise CLIError("--no-cache and --cache-dir contradict each other; give one")
    cache_dir = False if args.no_cache else args.cache_dir
    cache_folder = resolve_cache_dir(cache_dir)
    statuses = {}

    def on_cache(entry, status):
        statuses[entry] = status

    start = time.perf_counter()
    common = {"cache_dir": cache_dir, "allow_partial": args.allow_partial, "on_cache": on_cache}
    options = {**defaults, **given}
    builders = {
        "topics": lambda: build_enron_topics(
            args.source,
            n_docs=options["n_docs"],
            n_words=options["n_words"],
            min_tokens=options["min_tokens"],
            max_df=options["max_df"],
            random_state=options["seed"],
            **common,
        ),
        "network": lambda: build_enron_network(args.source, min_count=options["min_count"], **common),
    }
    data = builders[args.matrix]()
    seconds = time.perf_counter() - start
    cache = statuses.get("matrix", "off")
    corpus_cache = statuses.get("corpus")

    if args.output is not None:
        from lpviz.datasets.loaders import save_counts

        save_counts(data, args.output, overwrite=args.force)
    summary = _summary(args, data, options, seconds, cache, corpus_cache, cache_folder)
    if args.json:
        print(json.dumps(summary, indent=2, default=str))
    else:
        _print_summary(summary)
    return 0


def _summary(args, data, options, seconds, cache, corpus_cache, cache_folder):
    Y = data.Y
    nnz = int(Y.nnz) if hasattr(Y, "nnz") else int((Y != 0).sum())
    report = data.info.get("report", {})
    return {
        "matrix": args.matrix,
        "source": str(args.source),
        "shape": list(data.shape),
        "nonzero_cells": nnz,
        "total_count": int(Y.sum()),
        "options": options,
        "report": report,
        "note": data.info.get("note", ""),
        "seconds": round(seconds, 3),
        "cache": cache,
        "corpus_cache": corpus_cache,
        "partial": bool(report.get("partial")),
        "cache_dir": str(cache_folder) if cache_folder is not None else None,
        "output": str(args.output) if args.output is not None else None,
    }


_CACHE_OUTCOMES = {  # lpviz.datasets.cache.STATUSES
    "hit": "loaded from the cache",
    "built": "built and cached",
    "rebuilt": "rebuilt (the cached copy was damaged) and cached",
    "uncached": "built, not cached (the cache folder cannot be written)",
    "partial": "built from partial input, not cached",
    "off": "built (no cache)",
}


def _print_summary(summary):
    rows, cols = summary["shape"]
    what = _MATRICES[summary["matrix"]][1]
    print(
        f"enron {summary['matrix']}: {rows:,} x {cols:,} ({what}), "
        f"{summary['nonzero_cells']:,} nonzero cells, {summary['total_count']:,} counts"
    )
    print("options: " + ", ".join(f"{key}={value}" for key, value in summary["options"].items()))
    report = summary["report"]
    if report:
        skipped = ", ".join(f"{reason}={n:,}" for reason, n in sorted(report.get("skipped", {}).items())) or "none"
        print(f"read: {report.get('n_read', 0):,} messages, {report.get('n_parsed', 0):,} kept; skipped: {skipped}")
        notes = ", ".join(f"{note}={n:,}" for note, n in sorted(report.get("notes", {}).items()))
        if notes:
            print(f"repaired: {notes}")
    if summary["note"]:
        print(f"note: {summary['note']}")
    if summary["partial"]:
        print(
            f"PARTIAL: {report.get('stopped', 'the input ended early')}; built from what came before "
            "(--allow-partial), not cached"
        )
    how = _CACHE_OUTCOMES[summary["cache"]]
    if summary["cache"] in ("built", "rebuilt") and summary["corpus_cache"] == "hit":
        how += " (from the cached corpus)"
    where = f" in {summary['cache_dir']}" if summary["cache"] not in ("off", "partial") else ""
    print(f"{how}{where}: {summary['seconds']:.2f} s")
    if summary["output"]:
        print(f"saved to {summary['output']}")
    sys.stdout.flush()
