"""The paced endpoint of :mod:`support.paced` on the standard library's ``http.server``: a
thread per connection (``ThreadingHTTPServer``), HTTP/1.1 keep-alive, each answer after
``latency_s`` slept in its thread.

It is the server a user meets when a local model server is written the plain way, and the one
``benchmarks/bench_providers.py`` measures our client against beside the lean asyncio one: on a
shared machine the server's own CPU per request (parsing the head in Python, a thread switch
per read) competes with the client's, so the client's share shows more than against the lean
server. The same two-turn agent, the same ``/stats``, the same cap and ``429`` beyond it.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from support.bad_server import POLL_S
from support.paced import Counts, Pace, _api, answer


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: a client reuses its connections
    wbufsize = -1
    """An answer leaves in one write (``handle_one_request`` flushes it), as a production
    server sends it. Unbuffered (the standard library's default), the head and the body were two
    small writes: with Nagle's algorithm on, the body waited for the client's delayed ACK of the
    head, 40 ms on Linux, and every call of the benchmark carried 40 ms that no client can
    avoid and no provider has (from the answer's end at the server to the client holding it:
    45-47 ms median, against 4-5 ms sent whole)."""
    server: PlainServer

    def do_GET(self) -> None:
        if self.path == "/stats":
            with self.server.lock:
                self._send(200, {}, json.dumps(self.server.counts.__dict__).encode())
        else:
            self._send(404, {}, b'{"error": {"message": "no such route"}}')

    def do_POST(self) -> None:
        payload = self.rfile.read(int(self.headers.get("content-length") or 0))
        api = _api(self.path)
        if api is None:
            self._send(404, {}, b'{"error": {"message": "no such route"}}')
            return
        status, headers, data = self.server.reply(api, payload)
        self._send(status, headers, data)

    def _send(self, status: int, headers: dict[str, str], data: bytes) -> None:
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: a line per request on stderr would cost more than the answer."""


class PlainServer(ThreadingHTTPServer):
    """The endpoint on ``127.0.0.1`` (an ephemeral port); :func:`serve` runs it."""

    daemon_threads = True
    request_queue_size = 1024

    def __init__(self, pace: Pace) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.pace, self.counts, self.lock = pace, Counts(), threading.Lock()
        self.port = self.server_address[1]

    def reply(self, api: str, payload: bytes) -> tuple[int, dict[str, str], bytes]:
        import time

        c, cap = self.counts, self.pace.max_in_flight
        with self.lock:
            if cap is not None and c.in_flight >= cap:
                c.refused += 1
                return 429, {"retry-after": f"{self.pace.retry_after_s:g}"}, json.dumps(
                    {"type": "error", "error": {"type": "rate_limit_error",
                                                "code": "rate_limit_exceeded",
                                                "message": "too many requests in flight"}}).encode()
            c.in_flight += 1
            c.peak_in_flight = max(c.peak_in_flight, c.in_flight)
        try:
            time.sleep(self.pace.latency_s)  # wall-clock-ok: a provider's latency
        finally:
            with self.lock:
                c.in_flight -= 1
                c.answered += 1
                n = c.answered
                c.by_path[api] = c.by_path.get(api, 0) + 1
        return 200, {}, json.dumps(answer(api, json.loads(payload or b"{}"), n)).encode()


@contextlib.contextmanager
def serve(pace: Pace) -> Iterator[PlainServer]:
    """A :class:`PlainServer` answering in a background thread until the block ends."""
    server = PlainServer(pace)
    thread = threading.Thread(target=server.serve_forever, args=(POLL_S,), name="limbo-plain",
                              daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
