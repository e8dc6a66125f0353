"""Helpers the CLI's commands share: privacy flags, output checks, releases, seeds, tables.

They were spread over ``privatize.py`` and ``fit.py`` (each command importing
the other's); every command now imports them from here.
"""

import json
import sys
from pathlib import Path

import numpy as np

from lpviz._files import atomic_write, check_path_text, output_exists, shown

from . import CLIError

__all__ = [
    "add_privacy_arguments",
    "privacy_level",
    "refuse_overwrite",
    "check_output_folder",
    "read_release",
    "check_run_lengths",
    "progress_bar",
    "format_table",
    "save_json",
    "save_truth",
    "resolve_seed",
    "resolve_noise_seed",
]


def add_privacy_arguments(parser):
    """--epsilon/--N or --alpha, shared by `privatize` and `fit`."""
    group = parser.add_argument_group("privacy level (alpha = exp(-epsilon/N))")
    group.add_argument("--epsilon", type=float, default=None, help="privacy budget epsilon > 0")
    group.add_argument(
        "--N", type=float, default=None, dest="N", help="l1 distance made indistinguishable (default 1; with --epsilon)"
    )
    group.add_argument("--alpha", type=float, default=None, help="noise level in (0, 1), instead of --epsilon")
    group.add_argument(
        "--allow-no-noise",
        action="store_true",
        help="allow a noise level so low (alpha < 1e-12, epsilon/N > 27.6) that practically no cell is noised",
    )


def privacy_level(args, required=True):
    """(epsilon, N, alpha) from the arguments, exactly one of epsilon/alpha set; None if absent."""
    if args.epsilon is not None and args.alpha is not None:
        raise CLIError("give --epsilon (with --N) or --alpha, not both: alpha = exp(-epsilon/N)")
    if args.N is not None and args.epsilon is None:
        raise CLIError("--N goes with --epsilon (alpha = exp(-epsilon/N)); add --epsilon")
    if args.epsilon is None and args.alpha is None:
        if required:
            raise CLIError("give the privacy level: --epsilon E [--N N] or --alpha A")
        return None
    from ..privacy import alpha_from, check_noise_level

    # one rule for both ways of giving the level (lpviz.privacy.check_noise_level), in the flags' words
    allow = "add --allow-no-noise"
    if args.alpha is not None:
        try:
            check_noise_level(args.alpha, allow_no_noise=args.allow_no_noise, allow=allow)
        except ValueError as error:
            text = _flag_words(error)
            for start in ("alpha = ", "alpha "):
                if text.startswith(start):
                    text = "--alpha " + text[len(start) :]
                    break
            raise CLIError(text) from None
        return None, None, float(args.alpha)
    N = 1.0 if args.N is None else args.N
    if not args.epsilon > 0:
        raise CLIError(f"--epsilon must be > 0 (smaller = more noise), got {args.epsilon:g}")
    if not N >= 1:
        raise CLIError(f"--N must be >= 1 (the l1 distance the mechanism hides), got {N:g}")
    try:
        alpha = alpha_from(args.epsilon, N)
        check_noise_level(alpha, allow_no_noise=args.allow_no_noise, allow=allow)
    except ValueError as error:
        raise CLIError(f"--epsilon {args.epsilon:g} --N {N:g}: {_flag_words(error)}") from None
    return float(args.epsilon), float(N), float(alpha)


def _flag_words(error):
    """A library message about the noise level in the CLI's words (its flags, not its arguments)."""
    text = str(error)
    for library, flag in (
        ("use alpha at most", "use --alpha at most"),
        ("epsilon/N of at least", "--epsilon/--N of at least"),
    ):
        text = text.replace(library, flag)
    return text


def refuse_overwrite(path, force):
    """An existing output (a dangling symbolic link included) is replaced only with --force."""
    if output_exists(path) and not force:
        what = "is a symbolic link to nothing" if Path(path).is_symlink() and not Path(path).exists() else "exists"
        raise CLIError(f"{shown(path)} already {what}; choose another name or pass --force to replace it")


def check_output_folder(path):
    """An output's folder must exist: a typo must not create a folder tree silently."""
    check_path_text(path)
    folder = Path(path).parent
    if not folder.is_dir():
        raise CLIError(f"folder {shown(folder)} does not exist; create it first (or fix the path)")


def read_release(path):
    """The :class:`~lpviz.release.Release` in ``path``, with CLI-friendly errors."""
    from ..release import Release

    try:
        return Release.load(path)
    except FileNotFoundError:
        raise CLIError(
            f"{shown(path)}: no such file; --already-noised reads a release written by `lpviz privatize`"
        ) from None
    except ValueError as error:
        message = str(error)
        if "no noised counts 'Y_obs'" in message:
            message += " (drop --already-noised to noise true counts here)"
        raise CLIError(message) from None


def check_run_lengths(iterations, burn_in, thin):
    if iterations < 1:
        raise CLIError(f"--iterations must be >= 1, got {iterations}")
    if thin < 1:
        raise CLIError(f"--thin must be >= 1, got {thin}")
    if burn_in is not None and burn_in < 0:
        raise CLIError(f"--burn-in must be >= 0, got {burn_in}")
    burn = iterations // 6 if burn_in is None else burn_in
    if burn + thin > iterations:
        raise CLIError(
            f"no sample would be saved: burn-in {burn} + thin {thin} > iterations {iterations}; "
            "raise --iterations or lower --burn-in/--thin"
        )


def progress_bar(total, description, disable):
    """A tqdm bar on stderr; ``disable=None`` hides it when stderr is not a terminal."""
    from tqdm import tqdm

    return tqdm(
        total=total, desc=description, unit="it", file=sys.stderr, disable=disable, leave=False, dynamic_ncols=True
    )


def format_table(rows, columns):
    """A plain text table: ``rows`` are dicts, ``columns`` (key, header, format) triples."""
    cells = [[header for _, header, _ in columns]]
    for row in rows:
        cells.append([("-" if row.get(key) is None else fmt.format(row[key])) for key, _, fmt in columns])
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    return "\n".join(
        "  ".join(text.ljust(width) for text, width in zip(line, widths, strict=True)).rstrip() for line in cells
    )


def save_json(path, summary, force):
    refuse_overwrite(path, force)
    atomic_write(path, lambda handle: handle.write(json.dumps(summary, indent=2).encode("utf-8")))


def save_truth(path, truth, force):
    """The true counts (and rates, for simulations), in a file whose name says so."""
    refuse_overwrite(path, force)
    arrays = {"Y": truth.Y}
    if truth.mu is not None:
        arrays["mu"] = truth.mu
    atomic_write(path, lambda handle: np.savez_compressed(handle, **arrays))


def resolve_seed(seed, flag="--seed"):
    """The given seed, or a fresh one (reported, so the run can be repeated)."""
    if seed is None:
        return int(np.random.SeedSequence().entropy % (2**32))
    if seed < 0:
        raise CLIError(f"{flag} must be >= 0, got {seed}")
    return seed


def resolve_noise_seed(noise_seed):
    """``--noise-seed``, or 128 bits of the operating system's entropy: never derived from the
    chains' seed (which summary.json records), so no written number regenerates the noise."""
    if noise_seed is None:
        return int(np.random.SeedSequence().entropy)
    if noise_seed < 0:
        raise CLIError(f"--noise-seed must be >= 0, got {noise_seed}")
    return noise_seed
