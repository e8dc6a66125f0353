"""MkDocs hook: ``<!-- lpviz --help -->`` or ``<!-- lpviz fit --help -->`` in a page
becomes that command's help text, from the parser the CLI itself builds, so the
CLI reference can never drift from the code."""

import contextlib
import io
import os
import re

MARKER = re.compile(r"<!-- lpviz(?P<command>(?: [a-z0-9-]+)?) --help -->")


def _help(command):
    from lpviz.cli import build_parser

    os.environ["COLUMNS"] = "100"  # argparse wraps to the terminal; the page has a fixed width
    out = io.StringIO()
    args = [command, "--help"] if command else ["--help"]
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        if command == "serve":  # its options are parsed by the server itself (lpviz.cli.serve)
            from lpviz.dashboard.serve import parse_args

            parse_args(["--help"])
        else:
            build_parser().parse_args(args)
    text = out.getvalue().strip()
    if not text.startswith("usage:"):
        raise ValueError(f"lpviz {command} --help printed no usage (no such command?)")
    return "```text\n" + text + "\n```"


def on_page_markdown(markdown, **kwargs):
    return MARKER.sub(lambda match: _help(match["command"].strip()), markdown)
