"""Serve the dashboard with safe defaults: ``python -m app.serve`` (what ``make serve`` runs).

- Binds 127.0.0.1: only this machine can connect. Serving on a network is a
  choice made explicitly with ``--address 0.0.0.0 --allow-websocket-origin
  HOST:PORT`` (anyone who reaches the port can then use the dashboard and
  its CPU; there is no authentication: put it behind an authenticating proxy).
- A closed browser tab stops its chains within a second: a running session
  checks its connection at every drain (see :meth:`app.fits.Fits.drain`);
  Bokeh discards the session itself later, as usual.
- Uploads travel over the websocket: its largest message is set
  deliberately (``--max-upload``, default 64 MiB).
- Memory: each session may use the server's memory limit
  (``LPVIZ_MEMORY_LIMIT``, default 60% of the machine) divided by the
  sessions expected at once (``--sessions``, ``LPVIZ_APP_SESSIONS``, default 4).
- Epsilon sweeps run on the Dask cluster at ``--scheduler ADDRESS``
  (``LPVIZ_SCHEDULER``) when given, else on one LocalCluster of worker
  processes the server starts at the first sweep and shares between sessions
  (``LPVIZ_SWEEP_WORKERS`` workers, default half the cores).
- Server-side files are read only from ``--data-folder`` (repeatable;
  default the data cache folder and ``../shared/data``), downloads happen
  only with ``--allow-downloads``.

The same with ``panel serve``::

    LPVIZ_APP_SESSIONS=4 panel serve app/app.py --address 127.0.0.1 --port 5006 \\
        --allow-websocket-origin 127.0.0.1:5006 --allow-websocket-origin localhost:5006 \\
        --websocket-max-message-size 67108864
"""

import argparse
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LOCAL = ("127.0.0.1", "localhost", "::1")
DEFAULT_MAX_UPLOAD = 64 * 2**20


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m app.serve", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--port", type=int, default=5006)
    parser.add_argument(
        "--address",
        default="127.0.0.1",
        help="interface to listen on (default 127.0.0.1: this machine only; 0.0.0.0 serves the "
        "network, with --allow-websocket-origin for the name people use)",
    )
    parser.add_argument(
        "--allow-websocket-origin",
        action="append",
        default=[],
        metavar="HOST[:PORT]",
        help="extra host names browsers may connect from (needed with --address 0.0.0.0)",
    )
    parser.add_argument(
        "--sessions",
        type=int,
        default=None,
        help="sessions expected at once; each gets the memory limit divided by this (default 4)",
    )
    parser.add_argument(
        "--max-upload",
        type=int,
        default=DEFAULT_MAX_UPLOAD,
        metavar="BYTES",
        help="largest websocket message, so the largest upload (default 64 MiB)",
    )
    parser.add_argument(
        "--data-folder",
        action="append",
        default=[],
        type=Path,
        help="folder whose files sessions may read (repeatable)",
    )
    parser.add_argument("--allow-downloads", action="store_true", help="let sessions download the Enron data")
    parser.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help="Dask scheduler the epsilon sweeps run on (e.g. tcp://host:8786; default: a local "
        "cluster of worker processes, started at the first sweep)",
    )
    parser.add_argument("--show", action="store_true", help="open a browser")
    args = parser.parse_args(argv)
    if args.sessions is not None and args.sessions < 1:
        parser.error(f"--sessions must be >= 1, got {args.sessions}")
    if args.address not in LOCAL and not args.allow_websocket_origin:
        parser.error(
            f"--address {args.address} serves the network: also say which host name browsers use, "
            "e.g. --allow-websocket-origin myhost.example.org:5006"
        )
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.sessions is not None:
        os.environ["LPVIZ_APP_SESSIONS"] = str(args.sessions)
    if args.data_folder:
        os.environ["LPVIZ_APP_DATA_FOLDERS"] = os.pathsep.join(str(p) for p in args.data_folder)
    if args.allow_downloads:
        os.environ["LPVIZ_ALLOW_DOWNLOADS"] = "1"
    if args.scheduler:
        os.environ["LPVIZ_SCHEDULER"] = args.scheduler
    from panel.command import main as panel

    origins = [f"{host}:{args.port}" for host in ("127.0.0.1", "localhost")] + args.allow_websocket_origin
    where = "this machine only" if args.address in LOCAL else "THE NETWORK (no authentication)"
    print(f"lpviz dashboard: http://127.0.0.1:{args.port}/app  (listening on {args.address}: {where})", flush=True)
    # Panel's own command (its resources served locally, like `panel serve`), with these flags
    sys.argv = [
        "panel",
        "serve",
        str(REPO / "app" / "app.py"),
        "--port",
        str(args.port),
        "--address",
        args.address,
        "--websocket-max-message-size",
        str(args.max_upload),
        *[flag for origin in origins for flag in ("--allow-websocket-origin", origin)],
        *(["--show"] if args.show else []),
    ]
    panel()


if __name__ == "__main__":
    main()
