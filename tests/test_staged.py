"""The staged provider failures of the test gateway (support/staged.py), seen on a raw socket:
a dropped connection is closed with no byte of an answer (not a ``500``), a cut body or stream
ends short of what it declared and the connection closes, a clean cut ends the stream properly,
and requests not staged pass through the relay untouched (keep-alive included)."""

from __future__ import annotations

import json
import socket

import pytest
from support.cells import cell_for
from support.scripted import scripted
from support.staged import Drop, HttpError, StagedThreadedGateway, StreamError, Truncate

from limbo.episode.briefing import context
from limbo.sim.world import World

BODY = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()


@pytest.fixture(scope="module")
def staged():
    with StagedThreadedGateway() as gw:
        yield gw


def _open(gw, tmp_path, name: str, plan: dict) -> None:
    gw.close(name)
    gw.open(name, scripted(tmp_path, ["Done."] * 4), context(World.of(cell_for("charge_invoice"))))
    gw.stage(name, plan)


def _request(name: str, stream: bool = False, last: bool = True) -> bytes:
    """A chat request; the last of a connection asks the server to close after answering."""
    body = json.loads(BODY) | {"stream": stream}
    data = json.dumps(body).encode()
    close = "connection: close\r\n" if last else ""
    return (f"POST /ep/{name}/v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\n{close}"
            f"content-type: application/json\r\ncontent-length: {len(data)}\r\n\r\n").encode() + data


def _exchange(gw, payloads: list[bytes]) -> bytes:
    """Send the requests on one connection; everything received until the server closes."""
    with socket.create_connection(("127.0.0.1", gw.port), timeout=10) as sock:
        sock.sendall(b"".join(payloads))
        got = b""
        while chunk := sock.recv(65536):
            got += chunk
    return got


def test_a_drop_closes_the_connection_without_a_byte(staged, tmp_path) -> None:
    _open(staged, tmp_path, "drop", {1: Drop()})
    assert _exchange(staged, [_request("drop")]) == b""
    assert staged.requests["drop"] == 1 and staged.sessions["drop"].requests == 0


def test_a_cut_body_is_shorter_than_its_content_length(staged, tmp_path) -> None:
    _open(staged, tmp_path, "cut", {1: Truncate()})
    got = _exchange(staged, [_request("cut")])
    head, _, body = got.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    declared = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length")))
    assert 0 < len(body) < declared
    assert staged.sessions["cut"].requests == 1


def test_a_cut_stream_stops_after_its_events_and_a_clean_cut_ends_properly(staged, tmp_path) -> None:
    _open(staged, tmp_path, "stream", {1: Truncate(events=1), 2: Truncate(events=1, clean=True)})
    torn = _exchange(staged, [_request("stream", stream=True)])
    assert torn.count(b"data: ") == 1 and b"[DONE]" not in torn and not torn.endswith(b"0\r\n\r\n")
    clean = _exchange(staged, [_request("stream", stream=True)])
    assert clean.count(b"data: ") == 1 and clean.endswith(b"0\r\n\r\n")


def test_errors_are_answered_and_what_is_not_staged_passes_through(staged, tmp_path) -> None:
    _open(staged, tmp_path, "mixed", {1: HttpError(429, retry_after_s=2), 2: StreamError("x")})
    got = _exchange(staged, [_request("mixed", last=False),
                             _request("mixed", stream=True, last=False), _request("mixed")])
    assert got.count(b"HTTP/1.1 ") == 3
    assert got.startswith(b"HTTP/1.1 429") and b"retry-after: 2" in got.lower()
    assert b'"code": "x"' in got and b'"Done."' in got
    assert staged.requests["mixed"] == 3 and staged.sessions["mixed"].requests == 1
