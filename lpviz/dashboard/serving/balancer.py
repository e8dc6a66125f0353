"""Several dashboard processes behind one port, new sessions balanced across them (``lpviz.dashboard.serve --procs N``).

Why not Panel's ``--num-procs``: it forks processes that share one listening
socket and the kernel hands each accept to whichever process wakes first. A
session is a long-lived websocket, so nothing evens out later (measured:
``benchmarks/bench_class.py --opens 8 --num-procs 2``, see docs/dashboard.md,
"A class on one server").

Here a small front process listens on the public port and starts ``N``
backends (``python -m lpviz.dashboard.serve`` on private loopback ports, each with its
share of the memory limit). A page (``GET /app``, which creates the Bokeh
session) goes to the live backend with the fewest sessions, under a session
id the front chooses (Bokeh's ``Bokeh-Session-Id`` header), so the page's
websocket, whose token names that session, goes to the same backend; static
files are the same in every backend and go to the page's (a cookie) or any.
A session counts from its page until its websocket closes (a page whose
websocket never comes stops counting after :data:`PENDING_SECONDS`).

The backends die with the front: they are its children in its process group
(Ctrl-C reaches all), they are stopped when the front stops, and the kernel
sends them SIGTERM if the front is killed (``PR_SET_PDEATHSIG``). A backend
that exits is reported on the front's output and gets no new session.
``GET /lpviz-procs`` answers each backend's pid, port, liveness and sessions (JSON).
"""

import asyncio
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field

APP_PATH = "/app"
STATUS_PATH = "/lpviz-procs"
COOKIE = "lpviz-backend"
PENDING_SECONDS = 60.0  # a page's session counts this long while its websocket has not come
WATCH_SECONDS = 1.0
STOP_SECONDS = 10.0
HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "content-length"}
PR_SET_PDEATHSIG = 1


def default_procs(cores=None):
    """Processes a class server should start (``--procs``; the default is one, opt-in): half the
    cores, at most :data:`MAX_DEFAULT_PROCS`, at least one. A server process uses about one core
    (its Python runs one thread at a time: the event loop and its chains' Python); the other half
    is the sweeps' cluster's (its default workers, ``LPVIZ_SWEEP_WORKERS``) and the chains'
    compiled sweeps. On 2 cores: one process; measured there (loaded by other work) two processes
    did not open a class's pages reliably faster (docs/dashboard.md, "A class on one server")."""
    return max(1, min((cores or os.cpu_count() or 1) // 2, MAX_DEFAULT_PROCS))


MAX_DEFAULT_PROCS = 8


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _die_with_parent():
    """In the backend, before it runs: SIGTERM when the front exits, however it exits (Linux)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):  # not Linux: the front's own stop and its atexit remain
        pass


@dataclass
class Backend:
    index: int
    port: int
    process: subprocess.Popen
    sessions: set = field(default_factory=set)  # session ids with an open websocket
    pending: dict = field(default_factory=dict)  # session id -> when its page was served
    opened: int = 0
    alive: bool = True

    def load(self, now=None):
        now = time.monotonic() if now is None else now
        for session_id, since in list(self.pending.items()):
            if now - since > PENDING_SECONDS:
                del self.pending[session_id]
        return len(self.sessions) + len(self.pending)

    def describe(self):
        return {
            "index": self.index,
            "pid": self.process.pid,
            "port": self.port,
            "alive": self.alive,
            "sessions": len(self.sessions),
            "pending": len(self.pending),
            "opened": self.opened,
        }


class Pool:
    """The backends and which session lives where."""

    def __init__(self, backends):
        self.backends = backends
        self.where: dict[str, Backend] = {}

    def live(self):
        return [backend for backend in self.backends if backend.alive]

    def least_loaded(self):
        live = self.live()
        if not live:
            return None
        now = time.monotonic()
        return min(live, key=lambda backend: (backend.load(now), backend.opened, backend.index))

    def by_index(self, text):
        try:
            backend = self.backends[int(text)]
        except (TypeError, ValueError, IndexError):
            return None
        return backend if backend.alive else None

    def page(self, session_id):
        backend = self.least_loaded()
        if backend is not None:
            backend.pending[session_id] = time.monotonic()
            backend.opened += 1
            self.where[session_id] = backend
        return backend

    def connected(self, session_id):
        backend = self.where.get(session_id)
        if backend is None or not backend.alive:  # a client that made its own id (bokeh.client)
            backend = self.page(session_id)
        if backend is not None:
            backend.pending.pop(session_id, None)
            backend.sessions.add(session_id)
        return backend

    def closed(self, session_id):
        backend = self.where.pop(session_id, None)
        if backend is not None:
            backend.sessions.discard(session_id)
            backend.pending.pop(session_id, None)

    def watch(self):
        """Mark backends that exited; say so once each."""
        for backend in self.backends:
            if backend.alive and backend.process.poll() is not None:
                backend.alive = False
                left = len(self.live())
                print(
                    f"lpviz: server process {backend.index} (pid {backend.process.pid}) exited with code "
                    f"{backend.process.returncode}; its {len(backend.sessions)} sessions are lost, new sessions "
                    f"go to the {left} others",
                    file=sys.stderr,
                    flush=True,
                )


def start_backends(procs, backend_argv, memory_limit, front_port, ports=None):
    """Start ``procs`` ``python -m lpviz.dashboard.serve`` processes on free loopback ports with ``backend_argv``
    (its flags but the port), each allowed ``memory_limit // procs`` bytes."""
    env = {**os.environ, "LPVIZ_MEMORY_LIMIT": str(memory_limit // procs), "LPVIZ_FRONT_PORT": str(front_port)}
    backends = []
    for index in range(procs):
        port = ports[index] if ports else free_port()
        command = [sys.executable, "-m", "lpviz.dashboard.serve", "--procs", "1", "--port", str(port), *backend_argv]
        process = subprocess.Popen(command, env=env, preexec_fn=_die_with_parent)  # noqa: PLW1509
        backends.append(Backend(index, port, process))
    return backends


def wait_listening(backends, timeout=300.0):
    """Until every backend accepts connections (raises if one exits first)."""
    deadline = time.monotonic() + timeout
    waiting = list(backends)
    while waiting:
        backend = waiting[0]
        if backend.process.poll() is not None:
            raise RuntimeError(f"server process {backend.index} exited with code {backend.process.returncode}")
        try:
            socket.create_connection(("127.0.0.1", backend.port), timeout=1).close()
            waiting.pop(0)
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"server process {backend.index} did not listen within {timeout:.0f} s") from None
            time.sleep(0.2)


def stop_backends(backends, timeout=STOP_SECONDS):
    """SIGTERM every backend still running, then SIGKILL what has not exited within ``timeout``."""
    for backend in backends:
        if backend.process.poll() is None:
            backend.process.terminate()
    deadline = time.monotonic() + timeout
    for backend in backends:
        try:
            backend.process.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            backend.process.kill()
            backend.process.wait()


def _session_id_from_subprotocols(header):
    """The Bokeh session id in a websocket request's ``Sec-WebSocket-Protocol: bokeh, TOKEN``."""
    from bokeh.util.token import get_session_id

    parts = [part.strip() for part in (header or "").split(",")]
    if len(parts) != 2:
        return None
    try:
        return get_session_id(parts[1])
    except Exception:  # noqa: BLE001 - a malformed token: the backend refuses it in its own words
        return None


def make_application(pool, max_message_size):
    """The front's tornado application: status, websockets by session, everything else proxied."""
    from bokeh.util.token import generate_session_id
    from tornado import httpclient, web, websocket

    client = httpclient.AsyncHTTPClient(max_clients=256)

    class Status(web.RequestHandler):
        def get(self):
            self.set_header("Content-Type", "application/json")
            self.write(json.dumps({"front_pid": os.getpid(), "procs": [b.describe() for b in pool.backends]}))

    class Proxy(web.RequestHandler):
        SUPPORTED_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")

        async def _proxy(self):
            path = self.request.path
            headers = dict(self.request.headers)
            is_page = path.rstrip("/") == APP_PATH and self.request.method == "GET"
            if is_page:
                asked = self.get_argument("bokeh-session-id", None) or self.get_argument("bokeh-token", None)
                if asked is None:
                    session_id = generate_session_id()
                    headers["Bokeh-Session-Id"] = session_id
                elif self.get_argument("bokeh-token", None):
                    from bokeh.util.token import get_session_id

                    session_id = get_session_id(asked)
                else:
                    session_id = asked
                backend = pool.page(session_id)
            else:
                backend = pool.by_index(self.get_cookie(COOKIE)) or pool.least_loaded()
            if backend is None:
                self.set_status(503)
                self.finish("lpviz: no dashboard process is running (see the server's output)")
                return
            url = f"http://127.0.0.1:{backend.port}{self.request.uri}"
            body = self.request.body if self.request.method in ("POST", "PUT", "PATCH") else None
            request = httpclient.HTTPRequest(
                url,
                method=self.request.method,
                headers=headers,
                body=body,
                follow_redirects=False,
                decompress_response=False,
                request_timeout=600,
                allow_nonstandard_methods=True,
            )
            try:
                response = await client.fetch(request, raise_error=False)
            except OSError as error:
                pool.watch()
                self.set_status(502)
                self.finish(f"lpviz: server process {backend.index} did not answer ({error}); reload the page")
                return
            if response.code == 599:
                pool.watch()
                self.set_status(502)
                self.finish(f"lpviz: server process {backend.index} did not answer; reload the page")
                return
            self.set_status(response.code, response.reason)
            self._headers = response.headers.__class__()  # the backend's headers, not tornado's defaults
            for name, value in response.headers.get_all():
                if name.lower() not in HOP_HEADERS:
                    self.add_header(name, value)
            if is_page:
                self.set_cookie(COOKIE, str(backend.index), path="/", httponly=True, samesite="Lax")
            if response.body and self.request.method != "HEAD":
                self.write(response.body)
            self.finish()

        get = head = post = put = patch = delete = options = _proxy

    class Socket(websocket.WebSocketHandler):
        backend_socket = None
        session_id = None

        def check_origin(self, origin):  # the backend checks the origin against its allowed list
            return True

        def select_subprotocol(self, subprotocols):
            return subprotocols[0] if subprotocols else None

        async def open(self, *args, **kwargs):
            header = self.request.headers.get("Sec-WebSocket-Protocol")
            self.session_id = _session_id_from_subprotocols(header) or generate_session_id()
            backend = pool.connected(self.session_id)
            if backend is None:
                self.close(1013, "no dashboard process is running")
                return
            headers = {
                name: value
                for name, value in self.request.headers.items()
                if name.lower() not in HOP_HEADERS and not name.lower().startswith("sec-websocket")
            }
            request = httpclient.HTTPRequest(
                f"ws://127.0.0.1:{backend.port}{self.request.uri}", headers=headers, request_timeout=600
            )
            subprotocols = [part.strip() for part in header.split(",")] if header else None
            try:
                self.backend_socket = await websocket.websocket_connect(
                    request, subprotocols=subprotocols, max_message_size=max_message_size
                )
            except Exception as error:  # noqa: BLE001 - refused or gone: the page says so
                pool.closed(self.session_id)
                pool.watch()
                self.close(1011, f"server process {backend.index}: {error}"[:120])
                return
            asyncio.ensure_future(self._pump())

        async def _pump(self):
            """The backend's messages to the page, until either side closes."""
            backend_socket = self.backend_socket
            while True:
                message = await backend_socket.read_message()
                if message is None:
                    self.close(backend_socket.close_code, backend_socket.close_reason)
                    return
                try:
                    await self.write_message(message, binary=isinstance(message, bytes))
                except websocket.WebSocketClosedError:
                    backend_socket.close()
                    return

        async def on_message(self, message):
            if self.backend_socket is not None:
                try:
                    await self.backend_socket.write_message(message, binary=isinstance(message, bytes))
                except websocket.WebSocketClosedError:
                    self.close()

        def on_close(self):
            if self.session_id is not None:
                pool.closed(self.session_id)
            if self.backend_socket is not None:
                self.backend_socket.close()

    return web.Application(
        [(STATUS_PATH, Status), (APP_PATH + "/ws", Socket), (r"/.*", Proxy)],
        websocket_max_message_size=max_message_size,
    )


def serve(procs, backend_argv, port, address, max_message_size, memory_limit, show=False):
    """Run the front on ``address:port`` with ``procs`` backends until Ctrl-C or SIGTERM; stop them all."""
    import atexit

    from tornado.httpserver import HTTPServer
    from tornado.ioloop import IOLoop, PeriodicCallback

    backends = start_backends(procs, backend_argv, memory_limit, port)
    atexit.register(stop_backends, backends)
    pool = Pool(backends)
    try:
        wait_listening(backends)
    except (RuntimeError, KeyboardInterrupt) as error:
        stop_backends(backends)
        sys.exit(f"lpviz: {error}")
    loop = IOLoop.current()
    server = HTTPServer(make_application(pool, max_message_size), max_body_size=max_message_size, xheaders=False)
    server.listen(port, address)
    PeriodicCallback(pool.watch, WATCH_SECONDS * 1000).start()

    def stop(signum, frame):
        loop.add_callback_from_signal(loop.stop)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    pids = ", ".join(str(backend.process.pid) for backend in backends)
    print(f"lpviz: {procs} server processes (pids {pids}), new sessions to the least busy", flush=True)
    if show:
        import webbrowser

        webbrowser.open(f"http://127.0.0.1:{port}{APP_PATH}")
    try:
        loop.start()
    finally:
        server.stop()
        stop_backends(backends)
