"""A range-capable HTTP server on loopback for the remote and tutorial tests.

It serves the files of one directory with ``Range: bytes=a-b`` support and keep-alive, counts
every request and the bytes it sent, measures how many requests were in flight at once, and can
be told to misbehave for a path (``503`` a few times, ``404``, ``403``, cut a body short, be
slow, answer other bytes than asked, never answer, send a body without end, redirect to itself),
so tests see what a real server, a broken one and a flaky network do. ``PlainServer`` is the
standard library's ``http.server``, which ignores ranges. Only 127.0.0.1 is ever bound.
"""

from __future__ import annotations

import functools
import os
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

_RANGE = re.compile(r"bytes=(\d*)-(\d*)$")


@dataclass
class Request:
    method: str
    path: str
    range: tuple[int, int] | None  # [start, stop) as served
    status: int
    sent: int  # body bytes written


@dataclass
class Fault:
    """What the server does instead of answering a path, ``times`` times (``None``: always)."""

    status: int | None = None  # answer with this status and no body
    truncate: int | None = None  # send only this many bytes of the body (Content-Length stays whole)
    delay: float = 0.0  # seconds to wait before answering
    shift: int = 0  # serve the bytes this far after those asked (saying so in Content-Range)
    hang: bool = False  # accept the request and never answer (until the server stops)
    endless: bool = False  # answer 200 with a body without length or end (until the client hangs up)
    redirect: str | None = None  # answer 302 to this path (itself: a redirect loop)
    times: int | None = None


@dataclass
class RangeServer:
    root: Path
    #: The port to bind (0: any free one). Icechunk 1.x reads http references only on port 80.
    port: int = 0
    requests: list[Request] = field(default_factory=list)
    faults: dict[str, Fault] = field(default_factory=dict)
    #: Seconds every request waits before answering (to make concurrency observable).
    latency: float = 0.0
    #: The first answers wait until this many requests are in flight together, then it drops to 0
    #: (or after ``GATHER_WAIT`` seconds): a client that overlaps its requests reaches
    #: ``max_in_flight >= gather`` whatever the machine's load; one that sends a request at a time
    #: does not, and waits once.
    gather: int = 0
    #: Requests answered as they come before the gathering starts (those a client must have
    #: answered before it can ask for more, such as the first block that gives a file's size).
    gather_after: int = 0
    max_in_flight: int = 0
    _in_flight: int = 0
    _stopping: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _gathered: threading.Condition = field(init=False)

    GATHER_WAIT = 30.0

    def __post_init__(self) -> None:
        self._gathered = threading.Condition(self._lock)

    def url(self, name: str = "") -> str:
        return f"http://127.0.0.1:{self.port}/{name}"

    # -- bookkeeping ------------------------------------------------------------------------
    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self.max_in_flight = 0

    def sent_bytes(self, path: str | None = None) -> int:
        """Body bytes sent (for one path, e.g. ``"/x.tgm"``, or in all)."""
        with self._lock:
            return sum(r.sent for r in self.requests if path is None or r.path == path)

    def count(self, path: str | None = None, method: str | None = None) -> int:
        with self._lock:
            return sum(1 for r in self.requests
                       if (path is None or r.path == path) and (method is None or r.method == method))

    def ranges(self, path: str) -> list[tuple[int, int]]:
        """The byte ranges served for ``path`` (GETs with a body), in order."""
        with self._lock:
            return [r.range for r in self.requests if r.path == path and r.range and r.sent]

    def _take_fault(self, path: str) -> Fault | None:
        with self._lock:
            fault = self.faults.get(path)
            if fault is None:
                return None
            if fault.times is not None:
                fault.times -= 1
                if fault.times <= 0:
                    del self.faults[path]
            return fault

    def _enter(self, request: Request) -> None:
        # Recorded before anything is sent: a client that has its answer finds it counted.
        with self._lock:
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
            self.requests.append(request)
            self._gathered.notify_all()

    def _wait_for_company(self) -> None:
        with self._lock:
            self._gathered.wait_for(lambda: self._in_flight >= self.gather, self.GATHER_WAIT)
            self.gather = 0  # gathered once (or given up): the rest answer as they come

    def _leave(self) -> None:
        with self._lock:
            self._in_flight -= 1

    # -- lifecycle --------------------------------------------------------------------------
    def start(self) -> RangeServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive: clients reuse connections
            # Headers and body go out in separate writes: without this, Nagle's algorithm and
            # the client's delayed ACK hold every response back ~40 ms.
            disable_nagle_algorithm = True

            def log_message(self, *args):  # quiet
                pass

            def do_HEAD(self):
                self._answer(head=True)

            def do_GET(self):
                self._answer(head=False)

            def _answer(self, head: bool):
                record = Request(self.command, self.path.split("?")[0], None, 0, 0)
                server._enter(record)
                try:
                    self._serve(record, head)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                finally:
                    server._leave()

            def _status(self, record: Request, status: int) -> None:
                record.status = status
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def _endless(self, record: Request) -> None:
                record.status = 200
                self.send_response(200)
                self.send_header("Connection", "close")  # no Content-Length: the body ends when we close
                self.end_headers()
                self.close_connection = True
                block = bytes(64 * 1024)
                while not server._stopping.is_set():  # the client hanging up ends it (BrokenPipeError)
                    self.wfile.write(block)
                    record.sent += len(block)

            def _serve(self, record: Request, head: bool):
                if server.gather and len(server.requests) > server.gather_after:
                    server._wait_for_company()
                if server.latency:
                    time.sleep(server.latency)
                fault = server._take_fault(record.path)
                if fault and fault.delay:
                    time.sleep(fault.delay)
                if fault and fault.hang:
                    server._stopping.wait()
                    return
                if fault and fault.status:
                    return self._status(record, fault.status)
                if fault and fault.endless:
                    return self._endless(record)
                if fault and fault.redirect:
                    record.status = 302
                    self.send_response(302)
                    self.send_header("Location", fault.redirect)
                    self.send_header("Content-Length", "0")
                    return self.end_headers()
                target = (server.root / record.path.lstrip("/")).resolve()
                if server.root not in target.parents or not target.is_file():
                    return self._status(record, 404)
                size = target.stat().st_size
                start, stop, status = 0, size, 200
                spec = self.headers.get("Range")
                if spec:
                    m = _RANGE.match(spec.strip())
                    if not m or (not m.group(1) and not m.group(2)):
                        return self._status(record, 416)
                    if m.group(1):
                        start = int(m.group(1))
                        stop = min(size, int(m.group(2)) + 1) if m.group(2) else size
                    else:  # suffix range: the last N bytes
                        start = max(0, size - int(m.group(2)))
                    if start >= size or start >= stop:
                        return self._status(record, 416)
                    status = 206
                    if fault and fault.shift:
                        start, stop = min(start + fault.shift, size - 1), min(stop + fault.shift, size)
                    record.range = (start, stop)
                record.status = status
                self.send_response(status)
                self.send_header("Accept-Ranges", "bytes")
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(stop - start))
                if status == 206:
                    self.send_header("Content-Range", f"bytes {start}-{stop - 1}/{size}")
                self.end_headers()
                if head:
                    return
                with open(target, "rb") as f:
                    f.seek(start)
                    body = f.read(stop - start)
                if fault and fault.truncate is not None:
                    body = body[: fault.truncate]
                    self.close_connection = True  # the client sees a short body, then EOF
                record.sent = len(body)
                self.wfile.write(body)

        self.root = Path(os.path.realpath(self.root))
        class Server(ThreadingHTTPServer):
            # Clients open many connections at once (concurrent range requests): a short listen
            # queue would drop their SYNs and stall each for a second or more.
            request_queue_size = 256

        self._httpd = Server(("127.0.0.1", self.port), Handler)
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()


class PlainServer:
    """``python -m http.server`` on loopback (no range support: every GET is the whole file),
    counting its GETs."""

    def __init__(self, root: Path):
        self.gets = 0
        server = self

        class Handler(SimpleHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):
                server.gets += 1
                super().do_GET()

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=os.fspath(root)))
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
