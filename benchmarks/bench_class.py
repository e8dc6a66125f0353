"""A class on one server: N students open the dashboard, choose a preset, press Start, switch tabs, close.

Each student is a client of the served app over Bokeh's websocket protocol,
as a browser tab is: it loads the page (the server builds the session), pulls
the document, says it is ready, and then sends what a click sends (a
``button_click`` event, a tab's ``active`` or a selector's ``value``) and
reads what the server sends back (the progress lines' text, the trace plots'
rows). It renders nothing, so 12 students cost the client machine little (a
headless chromium page costs far more: ``--client chromium`` plays the same
class in Debian's chromium for comparison and prints both sides' CPU).

Per student: seconds until Start is clickable, seconds from Start to the first
trace point in the page, iterations per second while every student's chains
run; fairness = the slowest student's progress / the fastest's, taken when the
fastest has run ``--window`` seconds after the last Start (or finished); the
server's event-loop lag (p50, p95: measured inside the server, see
``lpviz.dashboard.serving.loopwatch.watch_event_loop``) and the share of the time its thread spent on
the CPU, its resident memory, threads and CPU seconds, and the client's CPU seconds.

Rounds (``--rounds``): the whole class opens and closes again; after each
round the server is given time to discard the closed sessions, and its
threads and memory are read, so a leak shows as growth from round to round.

Where the chains run: in the server's threads (the default), or on the
workers of a Dask cluster (``--scheduler ADDRESS``, passed to ``python -m
lpviz.dashboard.serve``; ``--local-cluster W`` starts a LocalCluster of W worker
processes, one Dask thread each, in a process of its own so that the
server's, the cluster's and the students' CPU are told apart). ``--compare``
plays each class size in-process first, then on the cluster, in the same run.

    .venv/bin/python benchmarks/bench_class.py                  # N = 4, 8, 12, in-process chains
    .venv/bin/python benchmarks/bench_class.py --sessions 4 --rounds 3 --client chromium
    .venv/bin/python benchmarks/bench_class.py --local-cluster 2 --compare   # both, side by side
    .venv/bin/python benchmarks/bench_class.py --opens 12 30 --procs 1 2 --num-procs 2  # page opens only
    .venv/bin/python benchmarks/bench_class.py --tiny           # a class of 2, 2,000 iterations, a 3 s window

Page opens (``--opens``): N pages opened at once, each the page, its websocket and its document, on a
server of 1 and of 2 processes (``lpviz.dashboard.serve --procs``) and on Panel's ``--num-procs`` (forked
processes sharing the socket): open p50/p95/max, the sessions each process holds (from its own log),
the RSS of all the server's processes. Each server opens a page per process first (the app's imports).
"""

import argparse
import asyncio
import collections
import contextlib
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# What the teacher asks the class to choose: not the page's opening preset, so choosing it is a real
# change (new data, new release), and 6,000 iterations, so the chains run through the measured window.
CLASS_PRESET = "Figure 3 (small alpha0)"
# Before each round the idle server's loop lag is read for this long: the reference the round's lag is
# compared with (the machine is shared: an idle server's loop is late too when other processes load it).
IDLE_SECONDS = 3.0
# The steady part of the window starts this long after the last student's last tab switch (the
# switch's own redraws done): the lag the running chains and their redraws alone cause.
STEADY_AFTER = 2.0
STATUS_LINE = re.compile(
    r"(?:strong&gt;|<strong>)(.+?)(?:&lt;|<)/strong(?:&gt;|>) - (\w+), iteration ([\d,]+) / ([\d,]+)"
)
TRACE_EVENTS = ("ColumnsStreamed", "ColumnDataChanged", "ColumnsPatched")
TICKS = os.sysconf("SC_CLK_TCK")


# ---- the server and what /proc says about it ------------------------------------------------------


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def process_cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def tree_cpu_seconds(processes):
    """CPU seconds of ``processes`` (psutil processes; one that has exited counts nothing)."""
    total = 0.0
    for process in processes:
        with contextlib.suppress(Exception):
            times = process.cpu_times()
            total += times.user + times.system
    return total


def process_status(pid):
    """Resident MB and OS threads of ``pid``."""
    rss, threads = float("nan"), 0
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) / 1024
            elif line.startswith("Threads:"):
                threads = int(line.split()[1])
    return rss, threads


def python_threads(log_path):
    """The server's Python threads by name, as its loop log last wrote them."""
    for line in reversed(read_lines(log_path)):
        if line.get("threads") is not None:
            return line["threads"]
    return {}


def read_lines(path):
    try:
        text = Path(path).read_text()
    except OSError:
        return []
    lines = []
    for line in text.splitlines():
        with contextlib.suppress(ValueError):
            lines.append(json.loads(line))
    return lines


def load_average():
    return os.getloadavg()[0]


class Server:
    """``python -m lpviz.dashboard.serve`` on a free port, with its event-loop log in a temporary file."""

    def __init__(self, extra_args=(), env=None, session_lifetime_ms=3000, num_procs=None, repo=REPO):
        """``num_procs``: Panel's own ``panel serve --num-procs`` instead (forked processes sharing
        the port, for the comparison with ``lpviz.dashboard.serve --procs``). ``repo``: the checkout whose app is
        served (``--against``: main, before a change)."""
        self.repo = Path(repo)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/app"
        self.folder = tempfile.TemporaryDirectory(prefix="lpviz-class-")
        self.loop_log = Path(self.folder.name) / "loop.jsonl"
        environment = {**os.environ, **(env or {}), "LPVIZ_LOOP_LOG": str(self.loop_log)}
        if self.repo != REPO:
            environment["PYTHONPATH"] = str(self.repo)
        if num_procs is None:
            command = [
                sys.executable,
                "-m",
                "lpviz.dashboard.serve",
                "--port",
                str(self.port),
                "--unused-session-lifetime",
                str(session_lifetime_ms),
                *extra_args,
            ]
        else:
            command = [
                sys.executable,
                "-m",
                "panel",
                "serve",
                str(self.repo / "app" / "app.py"),
                "--port",
                str(self.port),
                "--num-procs",
                str(num_procs),
                "--unused-session-lifetime",
                str(session_lifetime_ms),
                "--check-unused-sessions",
                str(session_lifetime_ms),
                *extra_args,
            ]
        self.output = open(Path(self.folder.name) / "server.log", "w")  # noqa: SIM115  (closed in close())
        self.process = subprocess.Popen(
            command,
            cwd=self.repo,
            env=environment,
            stdout=self.output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.pid = self.process.pid

    def wait_ready(self, timeout=300):
        """Until a page opens: its websocket connects and closes again, as a tab does (a page only
        fetched, never connected, is kept for ``lpviz.dashboard.served.FIRST_CONNECTION_SECONDS``, 120 s, and every
        wait for the sessions' release waited that long for it)."""
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited with code {self.process.returncode}:\n{self.log_text()}")
            try:
                asyncio.run(visit(self.url))
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the server did not answer within {timeout} s:\n{self.log_text()}") from None
                time.sleep(0.5)

    def log_text(self):
        self.output.flush()
        return (Path(self.folder.name) / "server.log").read_text()[-4000:]

    def cpu_seconds(self):
        """CPU seconds of every process of the server (with ``--procs``, the front and its processes)."""
        return tree_cpu_seconds(self.tree())

    def status(self):
        return process_status(self.pid)

    def loop_lags(self, since=0.0):
        """Event-loop lags (ms) the server recorded after monotonic time ``since``."""
        return [
            (line["t"], line["lag_ms"])
            for line in read_lines(self.loop_log)
            if line.get("t", 0) >= since and "lag_ms" in line
        ]

    def loop_busy(self, since, until):
        """The share of [since, until] the event loop's thread spent on the CPU (from the server's
        per-second CPU readings of that thread): the loop's load apart from the chains'."""
        readings = [
            (line["t"], line["loop_cpu"])
            for line in read_lines(self.loop_log)
            if "loop_cpu" in line and since <= line["t"] <= until
        ]
        if len(readings) < 2 or readings[-1][0] <= readings[0][0]:
            return float("nan")
        return (readings[-1][1] - readings[0][1]) / (readings[-1][0] - readings[0][0])

    def sessions(self):
        """Sessions the server holds, as its loop log last wrote it (all its processes)."""
        by_pid = self.sessions_by_pid()
        return sum(by_pid.values()) if by_pid else None

    def sessions_by_pid(self):
        """Each server process's sessions, as it last wrote them in the loop log (the processes
        that have had a session: a process starts its log at its first session)."""
        latest = {}
        for line in read_lines(self.loop_log):
            if line.get("sessions") is not None:
                latest[line.get("pid", self.pid)] = line["sessions"]
        return latest

    def tree(self):
        """The server's processes: the one started and its descendants (backends, Dask workers)."""
        import psutil

        with contextlib.suppress(psutil.Error):
            root = psutil.Process(self.pid)
            return [root, *root.children(recursive=True)]
        return []

    def tree_rss_mb(self):
        total = 0.0
        for process in self.tree():
            with contextlib.suppress(Exception):
                total += process.memory_info().rss / 2**20
        return total

    def procs(self):
        """``lpviz.dashboard.serve --procs``'s own account of its processes (``/lpviz-procs``), or None."""
        with contextlib.suppress(OSError, ValueError):
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/lpviz-procs", timeout=30) as response:
                return json.loads(response.read())
        return None

    def python_threads(self):
        return python_threads(self.loop_log)

    def close(self):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.pid, signal.SIGKILL)
            self.process.wait()
        self.output.close()
        self.folder.cleanup()


class ClusterProcess:
    """A LocalCluster of ``workers`` worker processes (one Dask thread each, as the tests' and the
    sweeps' clusters) started in a process of its own, until :meth:`close`."""

    SCRIPT = (
        "import sys\n"
        "from lpviz.reproduce.grid import local_cluster\n"
        "cluster = local_cluster(int(sys.argv[1]), threads=1)\n"
        "print(cluster.scheduler_address, flush=True)\n"
        "sys.stdin.read()\n"  # until the benchmark closes this pipe
        "cluster.close()\n"
    )

    def __init__(self, workers, timeout=300):
        self.workers = workers
        self.process = subprocess.Popen(
            [sys.executable, "-c", self.SCRIPT, str(workers)],
            cwd=REPO,  # the workers import the app from this checkout
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.pid = self.process.pid
        self.address = self.process.stdout.readline().strip()
        if not self.address.startswith("tcp://"):
            raise RuntimeError(f"the LocalCluster did not start (exit code {self.process.poll()})")

    def processes(self):
        import psutil

        root = psutil.Process(self.pid)
        return [root, *root.children(recursive=True)]

    def cpu_seconds(self):
        """CPU seconds of the scheduler and the workers (the whole process tree)."""
        return tree_cpu_seconds(self.processes())

    def rss_mb(self):
        total = 0.0
        for process in self.processes():
            with contextlib.suppress(Exception):
                total += process.memory_info().rss / 2**20
        return total

    def close(self):
        with contextlib.suppress(OSError):
            self.process.stdin.close()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.pid, signal.SIGKILL)
            self.process.wait()


# ---- a student: Bokeh's websocket protocol, no rendering --------------------------------------------


def _message_id():
    return os.urandom(8).hex()


def _frames(msgtype, content):
    return [json.dumps({"msgid": _message_id(), "msgtype": msgtype}), "{}", json.dumps(content)]


def _event(name, **values):
    """A UI event as bokehjs serializes it (a model reference is ``{"id": ...}``)."""
    return {"type": "event", "name": name, "values": {"type": "map", "entries": [[k, v] for k, v in values.items()]}}


def _has_rows(data):
    """Whether a data source's (serialized) columns hold an ``iteration`` column with rows."""
    if isinstance(data, dict) and data.get("type") == "map":
        data = dict((k, v) for k, v in data.get("entries", []) if isinstance(k, str))
    if not isinstance(data, dict) or "iteration" not in data:
        return False
    column = data["iteration"]
    if isinstance(column, dict):  # an ndarray: its shape
        return bool(column.get("shape", [0])[0])
    return bool(column)


@dataclass
class Progress:
    """What one student saw: times are monotonic seconds."""

    index: int
    requested: float = float("nan")  # the page was asked for
    opened: float = float("nan")  # the page's document is in
    clickable: float = float("nan")  # the Start button is in the page
    started: float = float("nan")  # Start clicked
    first_point: float = float("nan")  # the first trace row arrived
    closed: float = float("nan")
    switched: float = float("nan")  # the last tab switch sent
    samples: list = field(default_factory=list)  # (time, iteration of the slowest chain, statuses)
    error: str = ""

    def iteration_at(self, moment):
        """The progress the page showed at ``moment`` (the last sample before it)."""
        seen = [iteration for when, iteration, _ in self.samples if when <= moment]
        return seen[-1] if seen else 0


class Student:
    """One browser tab on the dashboard, over the websocket (what bokehjs sends and reads)."""

    def __init__(self, url, index):
        self.url, self.progress = url, Progress(index)
        self.models = {}  # id -> {"name": ..., "attributes": {...}}
        self.lines = {}  # method label -> (status, iteration): the last progress line the page got
        self.goals = {}  # method label -> the iterations its chain runs to, from the same line
        self.socket = None
        self._replies = {}
        self._reader = None

    # -- the document as far as a student needs it --
    def _index(self, node):
        stack = [node]
        while stack:
            item = stack.pop()
            if isinstance(item, dict):
                if item.get("type") == "object" and "id" in item:
                    entry = self.models.setdefault(item["id"], {"name": item.get("name", ""), "attributes": {}})
                    entry["attributes"].update(item.get("attributes", {}))
                    self._note_line(entry["attributes"].get("text"))
                if item.get("type") not in ("ndarray", "bytes"):  # arrays hold no models: not walked
                    stack.extend(value for value in item.values() if isinstance(value, (dict, list)))
            elif isinstance(item, list) and item and not isinstance(item[0], (int, float)):
                # a data column (numbers) holds no models: not walked
                stack.extend(value for value in item if isinstance(value, (dict, list)))

    def _apply(self, content, now):
        for event in content.get("events", []):
            self._index(event)
            kind = event.get("kind")
            if kind == "ModelChanged":
                model = self.models.setdefault(event["model"]["id"], {"name": "", "attributes": {}})
                model["attributes"][event["attr"]] = event["new"]
                if event["attr"] == "text":
                    self._note_line(event["new"])
            trace = kind in TRACE_EVENTS or (kind == "ModelChanged" and event.get("attr") == "data")
            if (
                trace
                and self.progress.started == self.progress.started
                and self.progress.first_point != self.progress.first_point
            ):
                if _has_rows(event.get("data", event.get("new"))):  # a trace plot's rows, after Start
                    self.progress.first_point = now
        self._sample(now)

    def _sample(self, now):
        lines = self.status_lines()
        if lines:
            iterations = [iteration for _, iteration in lines]
            self.progress.samples.append((now, min(iterations), tuple(status for status, _ in lines)))

    def _note_line(self, text):
        if isinstance(text, str) and ", iteration " in text:
            match = STATUS_LINE.search(text.replace("&nbsp;", " "))
            if match:  # keyed by the method: a tab rendered again makes new models with the same lines
                self.lines[match.group(1)] = (match.group(2), int(match.group(3).replace(",", "")))
                self.goals[match.group(1)] = int(match.group(4).replace(",", ""))

    def status_lines(self):
        """(status, iteration) of every method's progress line, as the page last showed it."""
        return list(self.lines.values())

    def find(self, name_end, **attributes):
        for model_id, model in self.models.items():
            if model["name"].endswith(name_end) and all(model["attributes"].get(k) == v for k, v in attributes.items()):
                return model_id
        return None

    def tab_index(self, title):
        tabs = self.find("Tabs")
        panels = self.models[tabs]["attributes"].get("tabs", [])
        titles = [self.models.get(panel["id"], {}).get("attributes", {}).get("title") for panel in panels]
        return tabs, titles.index(title)

    # -- talking to the server --
    async def _send(self, msgtype, content):
        for frame in _frames(msgtype, content):
            await self.socket.write_message(frame)

    async def send_events(self, *events):
        await self._send("PATCH-DOC", {"events": list(events)})

    async def click(self, label):
        button = self.find("Button", label=label)
        if button is None:
            raise LookupError(f"no button {label!r} in the page")
        await self.send_events(
            {"kind": "MessageSent", "msg_type": "bokeh_event", "msg_data": _event("button_click", model={"id": button})}
        )

    async def set(self, model_id, attribute, value):
        self.models[model_id]["attributes"][attribute] = value
        await self.send_events({"kind": "ModelChanged", "model": {"id": model_id}, "attr": attribute, "new": value})

    async def tab(self, title):
        tabs, index = self.tab_index(title)
        await self.set(tabs, "active", index)

    async def choose_preset(self, name):
        select = next(
            (
                model_id
                for model_id, model in self.models.items()
                if model["name"].endswith("Select") and name in json.dumps(model["attributes"].get("options", []))
            ),
            None,
        )
        if select is None:
            raise LookupError(f"no selector offers the preset {name!r}")
        if self.models[select]["attributes"].get("value") != name:
            await self.set(select, "value", name)

    async def open_card(self, title):
        """Expand the collapsed card whose header reads ``title``, as a click on it does; False when the
        page has no such card."""
        for model_id, model in list(self.models.items()):
            children = model["attributes"].get("children") or []
            if not model["name"].endswith("Card") or not children or not isinstance(children[0], dict):
                continue
            header = self.models.get(children[0].get("id"), {}).get("attributes", {})
            if title in json.dumps(header):
                if model["attributes"].get("collapsed", True):
                    await self.set(model_id, "collapsed", False)
                return True
        return False

    async def set_field(self, title, value, tries=10):
        """Type ``value`` into the number field titled ``title`` (a settings widget) until it stays: a
        preset chosen just before is put in force by the server a moment later, over a value typed now."""
        field = self.find("Spinner", title=title)
        if field is None and await self.open_card("Fit settings"):  # its widgets are made when it opens
            await self.wait_for(lambda: self.find("Spinner", title=title), 60.0, f"the number field {title!r}")
            field = self.find("Spinner", title=title)
        if field is None:
            raise LookupError(f"no number field {title!r} in the page")
        for _ in range(tries):
            await self.set(field, "value", value)
            await asyncio.sleep(1.0)
            if self.models[field]["attributes"].get("value") == value:
                return
        raise RuntimeError(f"{title} did not keep {value!r} after {tries} tries")

    async def open(self):
        from bokeh.protocol import Protocol
        from bokeh.protocol.receiver import Receiver
        from tornado.httpclient import AsyncHTTPClient, HTTPRequest
        from tornado.websocket import websocket_connect

        self.progress.requested = time.monotonic()
        response = await AsyncHTTPClient().fetch(self.url, request_timeout=600, connect_timeout=600)
        token = re.search(rb'"token":"([^"]+)"', response.body).group(1).decode()
        host = self.url.split("//", 1)[1].split("/", 1)[0]
        request = HTTPRequest(
            self.url.replace("http", "ws", 1) + "/ws", headers={"Origin": f"http://{host}"}, request_timeout=600
        )
        self.socket = await websocket_connect(request, subprotocols=["bokeh", token], max_message_size=2**28)
        self._receiver = Receiver(Protocol())
        self._reader = asyncio.ensure_future(self._read())
        await self._wait_reply("ACK")
        await self._send("PULL-DOC-REQ", {})
        doc = await self._wait_reply("PULL-DOC-REPLY")
        self._index(doc.content["doc"])
        self.progress.opened = time.monotonic()
        await self.send_events({"kind": "MessageSent", "msg_type": "bokeh_event", "msg_data": _event("document_ready")})

    async def _wait_reply(self, msgtype, timeout=600):
        deadline = time.monotonic() + timeout
        while msgtype not in self._replies:
            if self._reader.done():
                self._reader.result()
                raise ConnectionError(f"the connection closed before {msgtype}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {msgtype} within {timeout} s")
            await asyncio.sleep(0.01)
        return self._replies.pop(msgtype)

    async def _read(self):
        while True:
            fragment = await self.socket.read_message()
            if fragment is None:
                return
            message = await self._receiver.consume(fragment)
            if message is None:
                continue
            if message.msgtype == "PATCH-DOC":
                self._apply(message.content, time.monotonic())
            else:
                self._replies[message.msgtype] = message

    async def wait_for(self, condition, timeout, what):
        deadline = time.monotonic() + timeout
        while not condition():
            if self._reader.done():
                raise ConnectionError(f"the connection closed while waiting for {what}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"student {self.progress.index}: no {what} within {timeout} s")
            await asyncio.sleep(0.05)

    async def close(self, timeout=10.0):
        """Close the tab: the close handshake completes (the server sees the connection gone at
        once, as with a browser), not a socket left for the garbage collector."""
        protocol = getattr(self.socket, "protocol", None)
        if self.socket is not None:
            self.socket.close()
        if self._reader is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._reader, timeout)  # read_message() gives None once closed
            self._reader.cancel()
        if protocol is not None and not protocol.stream.closed():
            # a server too busy to answer the close in time: drop the connection as a closed tab
            # does (tornado's own abort timer would die with this event loop, leaving it open)
            protocol.stream.close()
        self.progress.closed = time.monotonic()


@dataclass
class Plan:
    """What every student does, with its timings (seconds)."""

    preset: str = CLASS_PRESET
    n_iter: int | None = None  # iterations per chain instead of the preset's (a cluster outruns 6,000)
    chains: int | None = None  # chains per method instead of the preset's (Settings.chains)
    window: float = 20.0  # fairness is taken this long after the last Start
    tabs: tuple = ("Topics", "Blocks", "Fits")  # switched through after the first point, before the window ends
    tab_seconds: float = 1.5
    timeout: float = 300.0


async def play_student(student, plan, everyone_started, measured):
    progress = student.progress
    try:
        await student.open()
        await student.choose_preset(plan.preset)
        await student.tab("Fits")
        await student.wait_for(lambda: student.find("Button", label="Start"), plan.timeout, "clickable Start")
        progress.clickable = time.monotonic()
        if plan.n_iter:
            await student.set_field("N iter", plan.n_iter)
        if plan.chains:
            await student.set_field("Chains", plan.chains)
        progress.started = time.monotonic()
        await student.click("Start")
        await student.wait_for(lambda: progress.first_point == progress.first_point, plan.timeout, "first trace point")
        if plan.n_iter and set(student.goals.values()) != {plan.n_iter}:
            raise RuntimeError(f"N iter {plan.n_iter:,} typed, but the chains run to {student.goals}")
        await everyone_started.wait()
        for title in plan.tabs:
            await asyncio.sleep(plan.tab_seconds)
            await student.tab(title)
            progress.switched = time.monotonic()
        await measured.wait()
    except Exception as exc:  # one student's failure is a figure, not the end of the class
        progress.error = f"{type(exc).__name__}: {exc}"
    finally:
        await student.close()


async def play_class(url, n, plan, stagger=0.25):
    """N students in one event loop; returns their :class:`Progress` and the window measured:
    from the moment every student's chains ran (its first trace point) for ``plan.window``
    seconds, or until the first student's run ended."""
    students = [Student(url, index) for index in range(n)]
    everyone_started, measured = asyncio.Event(), asyncio.Event()
    tasks = []
    for student in students:
        tasks.append(asyncio.ensure_future(play_student(student, plan, everyone_started, measured)))
        await asyncio.sleep(stagger)  # a class does not click within the same millisecond
    deadline = time.monotonic() + plan.timeout
    while not all(s.progress.first_point == s.progress.first_point or s.progress.error for s in students):
        if time.monotonic() > deadline:
            break
        await asyncio.sleep(0.05)
    begin = time.monotonic()
    everyone_started.set()
    end = begin + plan.window
    while time.monotonic() < end:
        if any("done" in statuses for s in students for _, _, statuses in s.progress.samples[-1:]):
            break
        await asyncio.sleep(0.05)
    moment = time.monotonic()
    measured.set()
    await asyncio.gather(*tasks)
    return [s.progress for s in students], begin, moment


async def open_pages(url, n):
    """``n`` pages opened at once (each: the page, its websocket, its document; what a class does
    when the teacher says "open the dashboard"); the students, their pages open, for the caller to
    :func:`close_pages`. A page that failed has ``progress.error`` set."""
    from tornado.httpclient import AsyncHTTPClient

    # every page asked for at once (tornado's client sends 10 at a time by default, and a page queued
    # longer than its connect timeout, 20 s, fails in the client: not what a class's browsers do)
    AsyncHTTPClient.configure(None, max_clients=max(10, n))
    students = [Student(url, index) for index in range(n)]

    async def one(student):
        try:
            await student.open()
        except Exception as error:  # noqa: BLE001 - one page's failure is a figure, not the end
            student.progress.error = f"{type(error).__name__}: {error}"

    await asyncio.gather(*(one(student) for student in students))
    return students


async def visit(url):
    """One page opened and closed (a :class:`Student` that does nothing)."""
    student = Student(url, -1)
    try:
        await student.open()
    finally:
        await student.close()


async def close_pages(students):
    await asyncio.gather(*(student.close() for student in students if student.socket is not None))


def page_opens(server, n, settle=3.0):
    """Open ``n`` pages at once on ``server``; their open seconds, the sessions per server process
    (from each process's loop log, after ``settle`` s), the server's RSS (all its processes) with the
    pages open, and the errors."""

    async def run():
        students = await open_pages(server.url, n)
        await asyncio.sleep(settle)  # each process writes its sessions every second
        by_pid = server.sessions_by_pid()
        rss = server.tree_rss_mb()
        await close_pages(students)
        return students, by_pid, rss

    students, by_pid, rss = asyncio.run(run())
    seconds = [s.progress.opened - s.progress.requested for s in students if not s.progress.error]
    return {
        "n": n,
        "open_s": seconds,
        "p50": percentile(seconds, 50),
        "p95": percentile(seconds, 95),
        "max": max(seconds) if seconds else float("nan"),
        "sessions_by_pid": by_pid,
        "rss_mb": rss,
        "errors": [s.progress.error for s in students if s.progress.error],
    }


# ---- figures -----------------------------------------------------------------------------------------


def percentile(values, q):
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def summarize(progresses, begin, moment):
    """Per student: iterations made inside the window [begin, moment] (every chain running), and
    fairness = the least of them / the most."""
    ok = [p for p in progresses if not p.error]
    made = [p.iteration_at(moment) - p.iteration_at(begin) for p in ok]
    seconds = max(moment - begin, 1e-9)
    return dict(
        sessions=len(progresses),
        failed=[f"{p.index}: {p.error}" for p in progresses if p.error],
        clickable=[p.clickable - p.opened for p in ok],
        opened=[p.opened - p.requested for p in ok],
        first_point=[p.first_point - p.started for p in ok],
        window=seconds,
        made=made,
        rates=[m / seconds for m in made],
        fairness=(min(made) / max(made)) if made and max(made) > 0 else float("nan"),
    )


def chain_progress(server, begin, moment):
    """What each session's chains made in [begin, moment] as the server itself logged it (the least
    iteration of its running methods, every second: ``session.fits.chain_progress``), for the sessions
    running at both ends; and the seconds between those two log lines. Unlike the pages' progress
    lines, this does not wait for the event loop to redraw a page."""
    by_pid = collections.defaultdict(list)  # each server process logs its own sessions
    for line in read_lines(server.loop_log):
        if "iterations" in line and begin <= line["t"] <= moment:
            by_pid[line.get("pid")].append((line["t"], line["iterations"]))
    made, seconds = [], []
    for lines in by_pid.values():
        if len(lines) < 2:
            continue
        (first_t, first), (last_t, last) = lines[0], lines[-1]
        made += [last[key] - first[key] for key in first if key in last]
        seconds.append(last_t - first_t)
    return made, (statistics.mean(seconds) if seconds else float("nan"))


def client_cpu_seconds(server_pid, cluster_pid=None):
    """CPU seconds of this process (the websocket students) and of its children (chromium), the
    server and the cluster (also children) and their own children excluded."""
    import psutil  # a dependency of distributed

    me = psutil.Process()
    server = set()
    for pid in (server_pid, cluster_pid):
        if pid is not None:
            server |= {pid} | {child.pid for child in psutil.Process(pid).children(recursive=True)}
    children = 0.0
    for child in me.children(recursive=True):
        if child.pid in server:
            continue
        with contextlib.suppress(psutil.Error):
            times = child.cpu_times()
            children += times.user + times.system
    return time.process_time(), children


def wait_for_release(server, baseline_threads, timeout):
    """Wait until the server holds no session and its chain threads are gone (or ``timeout``)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sessions = server.sessions()
        threads = server.python_threads()
        # the sessions' threads: the process's pool for the views ("lpviz-view-pool", two) is no session's
        chains = sum(
            count
            for name, count in threads.items()
            if name.startswith("lpviz-") and not name.startswith("lpviz-view-pool")
        )
        if sessions == 0 and chains == 0:
            break
        time.sleep(0.5)
    time.sleep(1.0)
    return server.status()


def play_round(server, n, plan, client, cluster=None):
    time.sleep(IDLE_SECONDS)
    idle_lags = [lag for _, lag in server.loop_lags(since=time.monotonic() - IDLE_SECONDS)]
    cluster_pid = cluster.pid if cluster is not None else None
    cpu_before, client_before = server.cpu_seconds(), client_cpu_seconds(server.pid, cluster_pid)
    opened_at = time.monotonic()
    cluster_before = cluster.cpu_seconds() if cluster is not None else 0.0
    if client == "chromium":
        progresses, begin, moment = chromium_class(server.url, n, plan)
    else:
        progresses, begin, moment = asyncio.run(play_class(server.url, n, plan))
    seconds = time.monotonic() - opened_at
    figures = summarize(progresses, begin, moment)
    made, made_seconds = chain_progress(server, begin, moment)
    figures.update(
        chain_made=made,
        chain_rates=[m / made_seconds for m in made] if made_seconds > 0 else [],
        chain_fairness=(min(made) / max(made)) if made and max(made) > 0 else float("nan"),
    )
    threads_running = server.status()[1]
    rss_running = server.tree_rss_mb()  # every process of the server
    running_lags = [lag for t, lag in server.loop_lags(since=begin) if t <= moment]
    # steady: every student on the Fits tab (after the last tab switch and STEADY_AFTER seconds more)
    switched = max((p.switched for p in progresses if p.switched == p.switched), default=begin)
    steady_lags = [lag for t, lag in server.loop_lags(since=switched + STEADY_AFTER) if t <= moment]
    all_lags = [lag for _, lag in server.loop_lags(since=opened_at)]
    client_after = client_cpu_seconds(server.pid, cluster_pid)
    figures.update(
        cluster_cpu=cluster.cpu_seconds() - cluster_before if cluster is not None else float("nan"),
        cluster_rss=cluster.rss_mb() if cluster is not None else float("nan"),
        idle_lag_p95=percentile(idle_lags, 95),
        lag_p50=percentile(running_lags, 50),
        lag_p95=percentile(running_lags, 95),
        lag_max=max(running_lags, default=float("nan")),
        lag_open_p95=percentile(all_lags, 95),
        lag_open_max=max(all_lags, default=float("nan")),
        steady_seconds=max(0.0, moment - switched - STEADY_AFTER),
        steady_lag_p50=percentile(steady_lags, 50),
        steady_lag_p95=percentile(steady_lags, 95),
        loop_busy=server.loop_busy(opened_at, time.monotonic()),
        loop_busy_steady=server.loop_busy(switched + STEADY_AFTER, moment),
        server_cpu=server.cpu_seconds() - cpu_before,
        seconds=seconds,
        client_cpu=client_after[0] - client_before[0] + client_after[1] - client_before[1],
        load=load_average(),
        rss_running=rss_running,
        threads_running=threads_running,
        python_threads_running=server.python_threads(),
        # what the pages said last, over every student's methods (an "error" would explain a short class)
        last_statuses=dict(
            collections.Counter(status for p in progresses for status in (p.samples[-1][2] if p.samples else ()))
        ),
    )
    return figures


# ---- the same class in chromium (for the client's cost) ------------------------------------------------


def chromium_class(url, n, plan):
    """The class in Debian's chromium: one page per student, driven in turn from one thread."""
    from playwright.sync_api import sync_playwright

    sys.path.insert(0, str(REPO / "tests"))
    from browser_harness import CHROMIUM, CHROMIUM_ARGS, COUNT_TRACE_POINTS

    progresses = [Progress(index) for index in range(n)]
    pages = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            for progress in progresses:
                context = browser.new_context(viewport={"width": 1500, "height": 1000})
                page = context.new_page()
                page.set_default_timeout(plan.timeout * 1000)
                try:
                    progress.requested = time.monotonic()
                    page.goto(url)
                    page.wait_for_function("() => window.Bokeh && window.Bokeh.documents.length > 0")
                    progress.opened = time.monotonic()
                    page.locator(".bk-tab").get_by_text("Fits", exact=True).click()
                    page.get_by_role("button", name="Start").wait_for()
                    progress.clickable = progress.started = time.monotonic()
                    page.get_by_role("button", name="Start").click()
                except Exception as exc:
                    progress.error = f"{type(exc).__name__}: {exc}"
                pages.append((context, page))
            for progress, (_, page) in zip(progresses, pages, strict=True):
                if progress.error:
                    continue
                try:
                    page.wait_for_function(f"() => ({COUNT_TRACE_POINTS})() > 0")
                    progress.first_point = time.monotonic()
                except Exception as exc:
                    progress.error = f"{type(exc).__name__}: {exc}"
            begin = max((p.first_point for p in progresses if not p.error), default=time.monotonic())
            for progress, (_, page) in zip(progresses, pages, strict=True):
                if not progress.error:
                    _chromium_sample(progress, page, begin)
            end = begin + plan.window
            while time.monotonic() < end:
                for progress, (_, page) in zip(progresses, pages, strict=True):
                    if not progress.error:
                        _chromium_sample(progress, page)
                if any("done" in s for p in progresses for _, _, s in p.samples[-1:]):
                    break
                time.sleep(0.5)
            moment = time.monotonic()
            for progress, (_, page) in zip(progresses, pages, strict=True):
                if not progress.error:
                    _chromium_sample(progress, page, moment)
        finally:
            for context, _ in pages:
                context.close()
            browser.close()
    for progress in progresses:
        progress.closed = time.monotonic()
    return progresses, begin, moment


def _chromium_sample(progress, page, when=None):
    texts = page.evaluate(
        """() => { const out = [];
        for (const doc of window.Bokeh.documents) for (const m of doc.all_models)
          if (typeof m.text === "string" && m.text.includes(", iteration ")) out.push(m.text);
        return out; }"""
    )
    lines = [STATUS_LINE.search(text.replace("&nbsp;", " ")) for text in texts]
    lines = [(m.group(2), int(m.group(3).replace(",", ""))) for m in lines if m]
    if lines:
        progress.samples.append((when or time.monotonic(), min(i for _, i in lines), tuple(s for s, _ in lines)))


# ---- the command -----------------------------------------------------------------------------------------


def report_round(n, round_index, figures, baseline):
    def fmt(values, digits=2):
        return (
            f"{min(values):.{digits}f} / {statistics.median(values):.{digits}f} / {max(values):.{digits}f}"
            if values
            else "-"
        )

    where = figures.get("chains", "server")
    print(
        f"N={n:2d} chains on the {where}, round {round_index} (load {figures['load']:.1f}): "
        f"page s {fmt(figures['opened'])} (p50/p95/max {percentile(figures['opened'], 50):.1f}/"
        f"{percentile(figures['opened'], 95):.1f}/{max(figures['opened'], default=float('nan')):.1f}), "
        f"Start clickable s {fmt(figures['clickable'])}, "
        f"first point s {fmt(figures['first_point'])} (min/median/max)\n"
        f"   over {figures['window']:.1f} s with every chain running: it/s per session {fmt(figures['rates'], 0)}, "
        f"fairness {figures['fairness']:.2f}, loop lag p50/p95/max {figures['lag_p50']:.0f}/{figures['lag_p95']:.0f}/"
        f"{figures['lag_max']:.0f} ms (idle server before the round: p95 {figures['idle_lag_p95']:.0f}) "
        f"(whole round p95/max {figures['lag_open_p95']:.0f}/{figures['lag_open_max']:.0f}; steady, everyone on "
        f"Fits for the last {figures['steady_seconds']:.0f} s: p50/p95 {figures['steady_lag_p50']:.0f}/"
        f"{figures['steady_lag_p95']:.0f}); the event loop's thread busy {figures['loop_busy']:.0%} of the round, "
        f"{figures['loop_busy_steady']:.0%} steady\n"
        f"   the chains' own progress ({len(figures['chain_made'])} sessions running, as the server logged it): "
        f"it/s per session {fmt(figures['chain_rates'], 0)}, fairness {figures['chain_fairness']:.2f}\n"
        f"   CPU seconds over the {figures['seconds']:.0f} s round: server {figures['server_cpu']:.1f}, "
        f"cluster {figures['cluster_cpu']:.1f} (its RSS {figures['cluster_rss']:.0f} MB), "
        f"client {figures['client_cpu']:.1f}; running: RSS {figures['rss_running']:.0f} MB, "
        f"{figures['threads_running']} threads; released: RSS {figures['rss_released']:.0f} MB "
        f"({figures['rss_released'] - baseline[0]:+.0f} on the baseline), {figures['threads_released']} threads "
        f"(baseline {baseline[1]}) {figures['python_threads_released']}, "
        f"{figures['sessions_released']} sessions held",
        flush=True,
    )
    print(f"   the pages' last progress lines: {figures['last_statuses']}", flush=True)
    if figures["failed"]:
        print("   failed:", "; ".join(figures["failed"]), flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, nargs="+", default=[4, 8, 12], help="class sizes (default 4 8 12)")
    parser.add_argument("--rounds", type=int, default=1, help="times each class opens and closes (default 1)")
    parser.add_argument("--window", type=float, default=20.0, help="seconds after the last Start (default 20)")
    parser.add_argument("--preset", default=CLASS_PRESET)
    parser.add_argument(
        "--n-iter",
        type=int,
        default=None,
        help="iterations per chain instead of the preset's, typed into N iter by each websocket student "
        "(a cluster's chains outrun the preset's 6,000 before a class of 8 has opened)",
    )
    parser.add_argument(
        "--chains",
        type=int,
        default=None,
        help="chains per method instead of the preset's, typed into Chains by each websocket student "
        "(the dashboard's choice of C: compare --chains 1 and 2 at the same class size)",
    )
    parser.add_argument("--client", choices=("websocket", "chromium"), default="websocket")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures to this file")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--scheduler", default=None, metavar="ADDRESS", help="run the chains on this Dask cluster")
    where.add_argument(
        "--local-cluster",
        type=int,
        default=None,
        metavar="W",
        help="run the chains on a LocalCluster of W worker processes started for the benchmark",
    )
    parser.add_argument(
        "--compare", action="store_true", help="play each class size with in-process chains first, then on the cluster"
    )
    parser.add_argument(
        "--opens",
        type=int,
        nargs="+",
        default=None,
        metavar="N",
        help="instead of a class's run: N pages opened at once (page open p50/p95/max, sessions per server "
        "process, RSS), on each of --procs, in the same run",
    )
    parser.add_argument(
        "--procs",
        type=int,
        nargs="+",
        default=None,
        help="server processes (dashboard.serve --procs), each in the same run: for --opens (default 1 2) and for "
        "the class (default 1)",
    )
    parser.add_argument(
        "--against",
        type=Path,
        default=None,
        metavar="PATH",
        help="also serve another checkout's app (main, before a change), each configuration on it first and "
        "then on this checkout, in the same run",
    )
    parser.add_argument(
        "--num-procs",
        type=int,
        default=None,
        metavar="P",
        help="with --opens, also Panel's own `panel serve --num-procs P` (one shared socket) for comparison",
    )
    parser.add_argument(
        "--tiny", action="store_true", help="a class of 2, 2,000 iterations, a 3 s window (the test suite's run)"
    )
    args = parser.parse_args(argv)
    if args.tiny:
        args.sessions, args.window, args.n_iter = [2], 3.0, args.n_iter or 2000
    if args.opens:
        return open_sizes(args.opens, args.procs or [1, 2], args.num_procs, args.json, against=args.against)
    if args.local_cluster is not None and args.local_cluster < 1:
        parser.error(f"--local-cluster needs at least one worker, got {args.local_cluster}")
    if args.compare and not (args.scheduler or args.local_cluster):
        parser.error("--compare needs a cluster: --scheduler ADDRESS or --local-cluster W")

    cluster = ClusterProcess(args.local_cluster) if args.local_cluster else None
    address = args.scheduler or (cluster.address if cluster is not None else None)
    modes = (["server"] if args.compare or not address else []) + (["cluster"] if address else [])
    try:
        results = []
        repos = ([("main", args.against.resolve())] if args.against else []) + [("this", REPO)]
        for n in args.sessions:
            for procs in args.procs or [1]:
                for label, repo in repos:
                    for mode in modes:
                        results += play_size(n, mode, address, cluster, args, procs=procs, repo=repo, label=label)
    finally:
        if cluster is not None:
            cluster.close()
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str))
    return results


def released_sessions(server, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and server.sessions():
        time.sleep(0.5)
    return server.sessions()


def open_sizes(sizes, procs_list, num_procs=None, json_path=None, against=None):
    """Pages opened at once, ``sizes`` of them, on one server per entry of ``procs_list`` (``lpviz.dashboard.serve
    --procs P``) and, with ``num_procs``, on ``panel serve --num-procs``: one after another in this
    run, so the other work on the machine loads every configuration alike (as far as it can). With
    ``against`` (another checkout), each ``--procs`` configuration is served from it first, then from
    this checkout."""
    repos = ([("main", Path(against).resolve())] if against else []) + [("this", REPO)]
    configurations = [
        (f"{name}: lpviz.dashboard.serve --procs {p}", dict(extra_args=["--procs", str(p)], repo=repo), p)
        for p in procs_list
        for name, repo in repos
    ]
    if num_procs:
        configurations.append((f"panel serve --num-procs {num_procs}", dict(num_procs=num_procs), num_procs))
    results = []
    for label, options, procs in configurations:
        server = Server(session_lifetime_ms=1000, **options)
        try:
            server.wait_ready()  # one page: a first session in one process
            page_opens(server, 2 * procs, settle=1.0)  # every process imports the app before it is measured
            released_sessions(server)
            idle_rss = server.tree_rss_mb()
            for n in sizes:
                load = load_average()
                figures = page_opens(server, n)
                released_sessions(server)
                spread = sorted(figures["sessions_by_pid"].values(), reverse=True)
                print(
                    f"{label}: {n} pages at once: open p50/p95/max {figures['p50']:.1f}/{figures['p95']:.1f}/"
                    f"{figures['max']:.1f} s; sessions per process {spread}; RSS {figures['rss_mb']:.0f} MB "
                    f"(idle {idle_rss:.0f}); errors {len(figures['errors'])}; load {load:.1f}",
                    flush=True,
                )
                results.append(dict(server=label, procs=procs, idle_rss_mb=idle_rss, load=load, **figures))
        finally:
            server.close()
    if json_path:
        json_path.write_text(json.dumps(results, indent=1, default=str))
    return results


def play_size(n, mode, address, cluster, args, procs=1, repo=REPO, label="this"):
    """The class of ``n`` students for ``args.rounds`` rounds on a server of its own (``procs``
    processes, the app of checkout ``repo``), with the chains in its threads (``mode`` "server") or on
    the cluster at ``address`` ("cluster")."""
    results = []
    extra = ["--scheduler", address, "--chains", mode] if mode == "cluster" else []
    server = Server(extra_args=extra + (["--procs", str(procs)] if procs != 1 else []), repo=repo)
    try:
        server.wait_ready()
        time.sleep(2.0)
        baseline = wait_for_release(server, None, timeout=60)  # the page load above made a session
        print(
            f"N={n} ({label}: {repo}, --procs {procs}): server pid {server.pid}, baseline RSS "
            f"{server.tree_rss_mb():.0f} MB (all its processes), {baseline[1]} threads, load {load_average():.1f}",
            flush=True,
        )
        plan = Plan(preset=args.preset, n_iter=args.n_iter, chains=args.chains, window=args.window)
        for round_index in range(1, args.rounds + 1):
            figures = play_round(server, n, plan, args.client, cluster)  # an idle cluster in-process: its CPU apart
            rss, threads = wait_for_release(server, baseline[1], timeout=90)
            figures.update(rss_released=rss, threads_released=threads, baseline=baseline, chains=mode)
            figures["python_threads_released"] = server.python_threads()
            figures["sessions_released"] = server.sessions()
            report_round(n, round_index, figures, baseline)
            results.append(dict(n=n, round=round_index, client=args.client, procs=procs, checkout=label, **figures))
    finally:
        server.close()
    return results


if __name__ == "__main__":
    main()
