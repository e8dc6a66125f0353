"""Speed and memory of building the paper's two Enron matrices, against the stdlib email parser.

Builds the topic matrix (D = V = 10,000) and the network (min_count = 100)
from the shared 58,168-email tarball into a fresh cache directory, then
reloads both from the cache in a new process. Targets (issue 3): both builds
under 60 s together on a 2-core machine, cached reload under 1 s.

The plain reference reads the same tarball and parses every message with the
stdlib ``email`` package (headers, addresses and text payload only, no
tokenization): the parsing a straightforward implementation would do.

    .venv/bin/python benchmarks/bench_enron.py [--source PATH] [--reference-limit N] [--src TREE]

``--src`` measures the ``lpviz`` package of another checkout (default: this one's). ``--tiny``: the
same steps on the source's first 2,000 messages (a tarball written here), a 200 x 200 topic matrix,
the network's actors at min_count = 10 and 200 messages for the reference: seconds, for the test suite.
"""

import argparse
import email
import email.policy
import email.utils
import resource
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_SOURCE = REPO.parent / "shared" / "data" / "enron_sent_subset.tar.gz"
# this checkout's lpviz (or, with --src, another one's), not whatever is installed
SOURCE_TREE = sys.argv[sys.argv.index("--src") + 1] if "--src" in sys.argv else str(REPO)
sys.path.insert(0, SOURCE_TREE)

RELOAD = """
import sys, time
sys.path.insert(0, sys.argv[3])
from lpviz.datasets import build_enron_network, build_enron_topics
source, store, size, min_count = sys.argv[1], sys.argv[2], int(sys.argv[4]), int(sys.argv[5])
start = time.perf_counter()
topics = build_enron_topics(source, n_docs=size, n_words=size, cache_dir=store)
network = build_enron_network(source, min_count=min_count, cache_dir=store)
print(time.perf_counter() - start, topics.Y.nnz, network.Y.shape[0])
"""


def peak_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def stdlib_reference(source, limit):
    start = time.perf_counter()
    n = 0
    with tarfile.open(source, "r|gz") as archive:
        for member in archive:
            if not member.isfile():
                continue
            message = email.message_from_bytes(archive.extractfile(member).read(), policy=email.policy.compat32)
            email.utils.getaddresses(
                message.get_all("To", [])
                + message.get_all("Cc", [])
                + message.get_all("Bcc", [])
                + message.get_all("From", [])
            )
            for part in message.walk():
                if part.get_content_maintype() == "text":
                    part.get_payload(decode=True).decode(part.get_content_charset() or "cp1252", "replace")
            n += 1
            if limit and n >= limit:
                break
    return n, time.perf_counter() - start


TINY_MESSAGES = 2_000


def first_messages(source, folder, n=TINY_MESSAGES):
    """A tarball of the first ``n`` files of the tarball ``source``, written in ``folder``."""
    path = Path(folder) / "first-messages.tar.gz"
    kept = 0
    with tarfile.open(source, "r|gz") as archive, tarfile.open(path, "w:gz") as out:
        for member in archive:
            if member.isfile():
                out.addfile(member, archive.extractfile(member))
                kept += 1
                if kept >= n:
                    break
    return path


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", default=str(DEFAULT_SOURCE), help="tarball, maildir or emails.csv")
    parser.add_argument(
        "--reference-limit",
        type=int,
        default=20000,
        help="messages the stdlib reference parses (0: all); its rate is extrapolated",
    )
    parser.add_argument("--src", default=None, help="folder holding the lpviz package to measure")
    parser.add_argument("--tiny", action="store_true", help=f"the first {TINY_MESSAGES:,} messages, small matrices")
    args = parser.parse_args()
    source = Path(args.source)
    if not source.exists():
        sys.exit(f"{source} is missing: pass --source or run `lpviz fetch-enron`")
    size, min_count = (200, 10) if args.tiny else (10_000, 100)
    if args.tiny:
        args.reference_limit = 200

    from lpviz.datasets import build_enron_network, build_enron_topics, read_corpus

    with (
        tempfile.TemporaryDirectory(prefix="lpviz-bench-enron-") as store,
        tempfile.TemporaryDirectory(prefix="lpviz-bench-enron-source-") as small,
    ):
        measured = first_messages(source, small) if args.tiny else source  # the reference reads ``source``
        start = time.perf_counter()
        corpus = read_corpus(measured, cache_dir=store)
        parse_seconds = time.perf_counter() - start
        start = time.perf_counter()
        topics = build_enron_topics(measured, n_docs=size, n_words=size, cache_dir=store)
        topics_seconds = time.perf_counter() - start
        start = time.perf_counter()
        network = build_enron_network(measured, min_count=min_count, cache_dir=store)
        network_seconds = time.perf_counter() - start
        build_peak = peak_mib()
        reload = subprocess.run(
            [sys.executable, "-c", RELOAD, str(measured), store, SOURCE_TREE, str(size), str(min_count)],
            capture_output=True,
            text=True,
            check=True,
        )
        reload_seconds = float(reload.stdout.split()[0])
        cache_mib = sum(p.stat().st_size for p in Path(store).iterdir()) / 2**20

    n_messages = corpus.report["n_read"]
    total = parse_seconds + topics_seconds + network_seconds
    first = f"its first {TINY_MESSAGES:,} files, " if args.tiny else ""
    print(f"lpviz from {SOURCE_TREE}; source: {source} ({first}{n_messages} messages, {len(corpus)} kept)")
    print(
        f"read + parse + tokenize (once, cached): {parse_seconds:7.2f} s ({n_messages / parse_seconds:,.0f} messages/s)"
    )
    print(
        f"topic matrix {topics.shape[0]}x{topics.shape[1]} ({topics.Y.nnz:,} nonzeros): "
        f"{topics_seconds:7.2f} s from the parsed corpus"
    )
    print(
        f"network {network.Y.shape[0]}x{network.Y.shape[1]} ({int(network.Y.sum()):,} emails): "
        f"{network_seconds:7.2f} s from the parsed corpus"
    )
    print(f"both matrices from the tarball: {total:7.2f} s (target < 60 s{' at full size' if args.tiny else ''})")
    print(
        f"cached reload of both, fresh process: {reload_seconds:7.3f} s (target < 1 s); cache size {cache_mib:.0f} MiB"
    )
    print(f"peak memory of the build: {build_peak:,.0f} MiB")

    n_ref, ref_seconds = stdlib_reference(source, args.reference_limit)
    rate = n_ref / ref_seconds
    print(
        f"reference, stdlib email parser (headers, addresses, payload; no tokenization): "
        f"{n_ref} messages in {ref_seconds:.2f} s = {rate:,.0f} messages/s, "
        f"about {n_messages / rate:.1f} s for all {n_messages}"
    )
    print(
        f"lpviz reads, parses AND tokenizes {n_messages / parse_seconds / rate:.1f}x the rate the stdlib "
        "parser only parses"
    )


if __name__ == "__main__":
    main()
