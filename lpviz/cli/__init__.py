"""The ``lpviz`` command line.

Each subcommand lives in its own module with a ``register(subparsers)``
function that adds its parser and sets ``func`` (called with the parsed
arguments, returns an exit code). Errors a user can fix are raised as
:class:`CLIError` and printed as one clear line with exit code 2; so are the
library's errors (they name the file, the problem and the fix) and every
failure of the file system (a full disk, a read-only folder, a permission,
a path too long: :func:`lpviz._files.describe_os_error`). Ctrl-C and SIGTERM
unwind like an error, so half-written outputs are removed on the way out; they
stop a running kernel first (:func:`lpviz._parallel.watch_signals`), so a fit
ends within a second or two whatever its data.
"""

import argparse
import signal
import sys
from importlib import import_module

# modules under lpviz.cli, each registering its subcommands
_COMMAND_MODULES = ("privatize", "fit", "central", "demo", "data", "table1", "reproduce", "serve")


_MAX_SEED = 2**63 - 1


class CLIError(Exception):
    """A problem with the user's arguments or files: printed, exit code 2."""


def build_parser():
    parser = argparse.ArgumentParser(
        prog="lpviz",
        description="Locally private Bayesian inference for count data.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _COMMAND_MODULES:
        import_module(f"lpviz.cli.{name}").register(subparsers)
    return parser


def main(argv=None):
    from lpviz._files import Terminated, describe_os_error, is_one_line
    from lpviz._parallel import (
        check_signals,
        cli_signal_handlers,
        raise_interrupt_behind,
        stop_signal_received,
        watch_signals,
    )

    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2

    if getattr(args, "own_signals", False):  # a server: Ctrl-C and SIGTERM are its own (Tornado's, Panel's)
        return int(args.func(args) or 0)

    def fail(message):
        print(f"lpviz {args.command}: error: {' '.join(str(message).split())}", file=sys.stderr)
        return 2

    seed = getattr(args, "seed", None)
    if seed is not None and seed < 0:
        return fail(f"--seed must be >= 0, got {seed}; seeds are whole numbers from 0 to 2**63 - 1")
    if seed is not None and seed > _MAX_SEED:  # numpy's seeds, and the int64 a release stores
        shown = str(seed) if len(str(seed)) <= 30 else f"a {len(str(seed)):,}-digit number"
        return fail(f"--seed must be a whole number from 0 to 2**63 - 1, got {shown}; give a smaller seed")
    try:
        with cli_signal_handlers():  # a signal's exception a ctypes callback swallowed is raised again
            watch_signals()  # SIGTERM and Ctrl-C stop a kernel the main thread is inside
            try:
                code = int(args.func(args) or 0)
                check_signals()  # one that arrived during the last, unpolled steps
                return code
            except Exception as error:  # a signal's exception that Numba wrapped (a dispatch, a compile)
                raise_interrupt_behind(error)
                check_signals()
                received = stop_signal_received()  # or lost: the chain stopped with ChainStopped
                if received == signal.SIGTERM:
                    raise Terminated("terminated (SIGTERM)") from None
                if received == signal.SIGINT:
                    raise KeyboardInterrupt from None
                raise
    except CLIError as error:
        return fail(error)
    except ValueError as error:  # library errors already name the problem and the fix
        return fail(error)
    except OSError as error:  # the file system: one line naming the file, the problem and the fix
        return fail(error if is_one_line(error) else describe_os_error(error))
    except MemoryError:
        return fail(
            "ran out of memory; lower LPVIZ_MEMORY_LIMIT so that lpviz refuses such a request "
            "before it starts, or use a smaller data set"
        )
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Terminated:
        print("terminated", file=sys.stderr)
        return 143


if __name__ == "__main__":
    sys.exit(main())
