"""``lpviz serve``: the dashboard on this machine, with the safe defaults of ``make serve``.

The options are :mod:`lpviz.dashboard.serve`'s (``--port``, ``--address``,
``--allow-websocket-origin``, ``--procs``, ``--sessions``, ``--scheduler``, ``--max-upload``, ...;
``lpviz serve --help`` lists them); it prints the address the dashboard listens on and serves until
Ctrl-C.
"""

import argparse


def register(subparsers):
    # The options are read by lpviz.dashboard.serve itself: importing it here (Panel, Bokeh) would
    # cost every other command seconds.
    parser = subparsers.add_parser(
        "serve",
        help="the dashboard in a browser (http://127.0.0.1:5006/app by default; lpviz serve --help)",
        add_help=False,
        prefix_chars="\0",  # every option, --help too, goes to the server's own parser
    )
    parser.add_argument("options", nargs=argparse.REMAINDER)
    parser.set_defaults(func=run, own_signals=True)


def run(args):
    from lpviz.dashboard import serve

    serve.main(args.options)
    return 0
