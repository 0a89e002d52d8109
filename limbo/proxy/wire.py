"""JSON-RPC 2.0 as the proxy speaks it, both ways: what a message may be (:func:`loads`), the
errors, and the rules an agent's request meets before it is read further.

Why the proxy relays JSON-RPC itself rather than through the ``mcp`` SDK's session: the SDK
validates every message into pydantic models, routes it through memory streams and task groups,
and (its stdio server) reads and writes in worker threads. That is right for an application,
and costs 2 to 5 ms per hop on a busy machine (measured: a proxy that only forwarded through the
SDK's server and client added that much to each call). The proxy is a relay: it parses each
message once with ``json``, answers or forwards it, and writes one line (stdio:
:mod:`limbo.proxy.channel`) or one body (HTTP: :mod:`limbo.proxy.http` and
:mod:`limbo.proxy.httplink`); over stdio an upstream's answer it passes on unchanged goes on
as the bytes it came in (:func:`relayed`). The messages are still MCP's: what the proxy says is
checked by the SDK's own client in the tests.

What no well-behaved peer sends is answered, never fatal: a message nested deeper than
:data:`MAX_DEPTH`, longer than :data:`LINE_LIMIT` or holding a lone surrogate (which no UTF-8
text can carry on) is refused like one that is not JSON, and the proxy reads on.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable
from typing import Any

Handler = Callable[[dict[str, Any]], Awaitable[Any]]
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
PARSE_ERROR = -32700
LINE_LIMIT = 64 * 1024 * 1024
"""Longest message read (a read listing thousands of records is far shorter)."""
OPEN_METHODS = frozenset({"initialize", "ping", "server/discover"})
"""What an agent may ask before ``initialize`` (nothing of these reaches the upstream)."""
MAX_DEPTH = 100
"""Deepest nesting of arrays and objects a message may have (MCP's deepest, a tool's JSON
schema, is a dozen levels): every part of the proxy that walks a message stays far from
Python's recursion limit."""
ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]|\xed[\xa0-\xbf]")
"""Where a lone surrogate may hide: a JSON escape of one, or one already decoded (in a text
read back from a message's string, encoded with ``surrogatepass``)."""
_ID = re.compile(rb'"id"\s*:\s*(-?\d{1,18})\s*[,}]')
_DECODER = json.JSONDecoder(parse_constant=str)
"""Made once (``json.loads`` with an option makes a decoder per call)."""


class BadMessage(ValueError):
    """A line that is no message the proxy takes; ``ident``: the request id it names, when it
    can be told (the answer to it is then an error, not silence)."""

    def __init__(self, why: str, ident: int | str | None = None) -> None:
        super().__init__(why)
        self.ident = ident


def loads(text: str | bytes) -> Any:
    """JSON as the proxy reads it from either side: ``NaN`` and the infinities, which JSON does
    not have (Python's ``json.dumps`` writes them), read as the strings that name them — so an
    answer carrying one still reaches the agent, and the journal, which writes strict JSON.
    :class:`BadMessage` (a ``ValueError``) for what is not JSON, nests deeper than
    :data:`MAX_DEPTH`, or holds a lone surrogate (which no UTF-8 text can carry on)."""
    raw = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    try:
        value = _DECODER.decode(text if isinstance(text, str) else _decoded(text))
    except RecursionError:
        raise BadMessage(f"nested deeper than {MAX_DEPTH} levels", peek_id(raw)) from None
    except UnicodeDecodeError:
        raise BadMessage("not UTF-8", peek_id(raw)) from None
    why = problem(raw, value)
    if why is not None:
        raise BadMessage(why, _ident(value))
    return value


def problem(raw: bytes, value: Any) -> str | None:
    """Why ``value``, read from ``raw``, is no message the proxy takes although it is JSON:
    nested too deep, or holding a lone surrogate (``None``: it is one)."""
    if raw.count(b"[") + raw.count(b"{") > MAX_DEPTH and _depth(value) > MAX_DEPTH:
        return f"nested deeper than {MAX_DEPTH} levels"
    if (b"\\u" in raw or b"\xed" in raw) and _SURROGATE.search(raw) and not _encodable(value):
        return "a string holds a lone UTF-16 surrogate"
    return None


def _decoded(raw: bytes) -> str:
    """``raw`` as text, as :func:`json.loads` decodes bytes (UTF-8, or the UTF-16 or UTF-32 its
    first bytes show)."""
    return raw.decode(json.detect_encoding(raw), "surrogatepass")


# -- an answer passed on as the bytes it came in --------------------------------------------
#
# The proxy reads every answer (the journal logs it, a fault may change it), but an answer it
# passes on unchanged need not be encoded anew for the agent: for a read listing thousands of
# records that costs more than the rest of the hop. An answer in the usual shape,
# {"jsonrpc": "2.0", "id": N, "result": {...}}, is read in one pass that also finds where its
# result's bytes lie; whatever is not in that shape, holds NaN or an infinity (which the proxy
# writes as strings), nests too deep or holds a lone surrogate is read by loads, as any line.

_HEAD = re.compile(r'\{\s*"jsonrpc"\s*:\s*"2\.0"\s*,\s*"id"\s*:\s*(\d{1,18})\s*,\s*"result"\s*:\s*')
_TAIL = re.compile(r"\s*\}\s*")


class Relayed(dict[str, Any]):
    """A result as the upstream sent it, and its bytes (:attr:`raw`). Never changed in place:
    where the proxy changes an answer (a stale read, a fault's failure or phantom) it builds a
    new one."""

    raw: bytes


def _no_constant(name: str) -> Any:
    raise ValueError(name)  # NaN or an infinity: the bytes are no JSON to pass on


_EXACT = json.JSONDecoder(parse_constant=_no_constant)


def relayed(line: bytes) -> tuple[int, Relayed] | None:
    """The id and result of an answer in the usual shape, its result's bytes kept; ``None``:
    read the line with :func:`~limbo.proxy.wire.loads`."""
    try:
        text = line.decode("utf-8")
        head = _HEAD.match(text)
        if head is None:
            return None
        result, end = _EXACT.raw_decode(text, head.end())
    except (ValueError, RecursionError):
        return None
    if not isinstance(result, dict) or not _TAIL.fullmatch(text, end):
        return None
    raw = line[head.end():end] if len(text) == len(line) else text[head.end():end].encode()
    if problem(raw, result) is not None:
        return None
    found = Relayed(result)
    found.raw = raw
    return int(head.group(1)), found


def peek_id(raw: bytes) -> int | None:
    """The numeric request id near the start of a line that could not be read whole."""
    found = _ID.search(raw[:512])
    return int(found.group(1)) if found else None


def _ident(value: Any) -> int | str | None:
    ident = value.get("id") if isinstance(value, dict) else None
    return ident if valid_id(ident) else None


def valid_id(ident: Any) -> bool:
    """Whether ``ident`` may be a JSON-RPC request id (a string or an integer)."""
    return isinstance(ident, str) or (isinstance(ident, int) and not isinstance(ident, bool))


def _depth(value: Any) -> int:
    """How deep ``value`` nests (iteratively: the value may be deeper than the stack)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, dict):
            node = node.values()
        elif not isinstance(node, list):
            continue
        deepest = max(deepest, level)
        if deepest > MAX_DEPTH:
            return deepest
        stack += [(child, level + 1) for child in node if isinstance(child, dict | list)]
    return deepest


def _encodable(value: Any) -> bool:
    try:
        ENCODE.encode(value).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def expire(future: asyncio.Future[Any], timeout: float) -> None:
    if not future.done():
        future.set_exception(TimeoutError(f"no answer in {timeout:g} s"))


class RpcError(Exception):
    """A JSON-RPC error: raised by a handler to answer with it, or by :meth:`Channel.request`
    when the other side answered with it."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message

    @classmethod
    def answered(cls, error: Any) -> RpcError:
        """The error an answer carries, whatever its shape: a code that is no integer is an
        internal error."""
        body = error if isinstance(error, dict) else {}
        code = body.get("code")
        return cls(code if isinstance(code, int) and not isinstance(code, bool)
                   else INTERNAL_ERROR, str(body.get("message", ""))[:2000])


class ChannelClosed(Exception):
    """The other side went away before answering."""


def refusal(message: Any) -> RpcError | None:
    """Why a request from the agent is refused before it is read further (``None``: it is
    not): a batch, or a request whose id is neither a string nor an integer."""
    if isinstance(message, list):
        return RpcError(INVALID_REQUEST, "batched messages are not served: send one message "
                                         "at a time")
    if not isinstance(message, dict) or ("id" in message and not valid_id(message["id"])):
        return RpcError(INVALID_REQUEST, "not a JSON-RPC request (an object whose id is a "
                                         "string or an integer)")
    return None


def cancelled_id(message: dict[str, Any]) -> Any:
    """The request a ``notifications/cancelled`` cancels (``None``: it is not one)."""
    if message.get("method") != "notifications/cancelled":
        return None
    params = message.get("params")
    return params.get("requestId") if isinstance(params, dict) else None


def error_line(ident: Any, exc: RpcError) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": ident, "error": {"code": exc.code, "message": exc.message}}
