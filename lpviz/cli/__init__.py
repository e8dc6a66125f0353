"""The ``lpviz`` command line.

Each subcommand lives in its own module with a ``register(subparsers)``
function that adds its parser and sets ``func`` (called with the parsed
arguments, returns an exit code). Errors a user can fix are raised as
:class:`CLIError` and printed as one clear line with exit code 2.
"""

import argparse
import sys
from importlib import import_module

# modules under lpviz.cli, each registering its subcommands
_COMMAND_MODULES = ("privatize", "fit", "central", "demo", "data", "table1", "reproduce")


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
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except CLIError as error:
        print(f"lpviz {args.command}: error: {error}", file=sys.stderr)
        return 2
    except (ValueError, FileNotFoundError) as error:
        # library errors already name the problem and the fix
        print(f"lpviz {args.command}: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
