"""The connection to the team's own MCP server (the *upstream*).

Over stdio the proxy starts ``--upstream-cmd`` (split like a shell would, not run by one) with
the proxy's own environment — the server is the team's, configured as they run it — and speaks
to it through the lean JSON-RPC channel of :mod:`limbo.proxy.wire`. Over streamable HTTP it
posts to ``--upstream-url`` through the lean link of :mod:`limbo.proxy.http`, sending each
``--upstream-header``. Both speak the ``initialize`` handshake (the protocol era every MCP
server of this time serves, the SDKs' included). A URL whose host is not this machine (127.0.0.0/8, ``::1``,
``localhost``) is refused unless ``--allow-remote`` says the user means it: a fault proxy aimed
at a production server by a typo would duplicate real payments.

A stdio upstream runs in a session of its own: the signals a terminal or an agent's MCP
client sends the proxy's process group (the ``mcp`` SDK's client sends SIGTERM to the whole
group two seconds after it closes the pipe) do not stop it while the proxy still reconciles
and records; the proxy closes its stdin when done, and a server whose stdin closes exits.

Either way a result is MCP's JSON, as the upstream sent it. Besides tool calls the proxy
relays the upstream's prompts and resources (:meth:`Upstream.relay`), unlogged: they are not
writes. A call that the upstream does not answer within :data:`CALL_TIMEOUT_S` times the time
scale, or whose transport fails, raises :class:`UpstreamLost`: whether a write took effect is
then unknown, which is what reconciliation is for. A JSON-RPC error answering a call is an
answer (the call was refused), shown to the agent as a tool error; answering a read that
reconciliation sends (:meth:`Upstream.read`) it is no answer at all.

The URL's query values and the headers may carry credentials: :meth:`UpstreamSpec.describe`
masks them, and :meth:`UpstreamSpec.secrets` lists them for every written line's scrubber.
"""

from __future__ import annotations

import asyncio
import contextlib
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION

from limbo import __version__
from limbo.base.errors import UsageError
from limbo.base.secrets import MASK, MIN_LEN, variants
from limbo.proxy.channel import Channel
from limbo.proxy.http import is_loopback
from limbo.proxy.httplink import ANSWER_LIMIT, HttpLink
from limbo.proxy.redact import is_credential
from limbo.proxy.stdio import UpstreamProcess
from limbo.proxy.wire import INTERNAL_ERROR, METHOD_NOT_FOUND, ChannelClosed, RpcError

CALL_TIMEOUT_S = 120.0
"""How long the proxy waits for the upstream's answer to one call, in the sandbox's seconds:
the wall wait is this times ``--time-scale`` (four client timeouts)."""
START_TIMEOUT_S = 60.0
"""How long the upstream may take to answer the handshake, and each request before the agent
may call (the listings, the task's setup, the snapshot), whatever the time scale."""


class UpstreamLost(Exception):
    """The upstream did not answer a call (timeout, transport failure): its outcome is
    unknown."""


@dataclass(frozen=True)
class UpstreamSpec:
    """Where the upstream is: a command (stdio) or a URL (streamable HTTP) and its headers."""

    command: tuple[str, ...] = ()
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        """How the record and the manifest name the upstream (header values, credentials in
        the query string or the command line masked)."""
        if self.url is not None:
            names = ", ".join(sorted(self.headers))
            return f"http {_masked_url(self.url)}" + (f" (headers: {names})" if names else "")
        return "stdio " + shlex.join(_masked_argv(self.command))

    def secrets(self) -> list[str]:
        """Values never to write anywhere: every header value, every credential-named value of
        the URL's query string or of the command line."""
        found = [v for v in self.headers.values() if v]
        if self.url is not None:
            found += [v for k, v in parse_qsl(urlsplit(self.url).query) if is_credential(k)]
        return found + [v for a, b in zip(self.command, self.command[1:], strict=False)
                        if (v := _flag_value(a, b)) is not None]


def _masked_url(url: str) -> str:
    parts = urlsplit(url)
    query = "&".join(f"{k}={MASK if is_credential(k) else v}"
                     for k, v in parse_qsl(parts.query, keep_blank_values=True))
    return urlunsplit(parts._replace(query=query))


def _flag_value(flag: str, after: str) -> str | None:
    """The credential ``--api-key VALUE`` (or ``--api-key=VALUE``, given as ``flag``) gives."""
    name, eq, value = flag.partition("=")
    if name.startswith("-") and is_credential(name.lstrip("-")):
        return value if eq else after
    return None


def _masked_argv(argv: tuple[str, ...]) -> list[str]:
    out = list(argv)
    for i, arg in enumerate(argv):
        name, eq, value = arg.partition("=")
        if not (name.startswith("-") and is_credential(name.lstrip("-"))):
            continue
        if eq:
            out[i] = f"{name}={MASK}"
        elif i + 1 < len(out):
            out[i + 1] = MASK
    return out


def spec_of(command: str | None, url: str | None, headers: list[str],
            allow_remote: bool) -> UpstreamSpec:
    """The upstream of the command line; a :class:`UsageError` naming what to fix."""
    if (command is None) == (url is None):
        raise UsageError("give the upstream MCP server with exactly one of --upstream-cmd "
                         "\"CMD ARGS...\" (stdio) or --upstream-url URL (streamable HTTP)")
    parsed = dict(_header(h) for h in headers)
    if command is not None:
        if parsed:
            raise UsageError("--upstream-header is for --upstream-url (a stdio server gets the "
                             "proxy's environment instead)")
        try:
            argv = tuple(shlex.split(command))
        except ValueError as exc:
            raise UsageError(f"--upstream-cmd: {exc}") from None
        if not argv:
            raise UsageError("--upstream-cmd is empty: give the command that starts the server")
        return UpstreamSpec(command=argv)
    assert url is not None
    _check_url(url, allow_remote)
    return UpstreamSpec(url=url, headers=parsed)


def _header(text: str) -> tuple[str, str]:
    name, sep, value = text.partition(":")
    if not sep or not name.strip() or any(c in name for c in " \t\r\n") or "\n" in value \
            or "\r" in value:
        raise UsageError(f"--upstream-header must be NAME: VALUE on one line (got "
                         f"{name.strip()[:40]!r}...)")
    return name.strip(), value.strip()


def _check_url(url: str, allow_remote: bool) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"--upstream-url {_masked_url(url)[:200]!r} is not an http(s) URL "
                         f"with a host")
    if parts.username or parts.password:
        raise UsageError("--upstream-url must not carry credentials; send them with "
                         "--upstream-header 'Authorization: ...'")
    short = [k for k, v in parse_qsl(parts.query) if is_credential(k) and len(v) < MIN_LEN]
    if short:
        raise UsageError(f"--upstream-url carries {short[0]} in its query string, too short to "
                         f"be masked wherever it could be written; send it with "
                         f"--upstream-header instead")
    if not allow_remote and not is_loopback(parts.hostname):
        raise UsageError(f"--upstream-url points at {parts.hostname!r}, not this machine: the "
                         f"proxy injects faults into every call it forwards, so a remote "
                         f"upstream needs --allow-remote")


RELAYED = ("tools/list", "prompts/list", "prompts/get", "resources/list",
           "resources/templates/list", "resources/read")
"""The requests :meth:`Upstream.relay` forwards as they are (tool calls go through
:meth:`Upstream.call`)."""


class Link(Protocol):
    """A JSON-RPC connection to the upstream: :class:`~limbo.proxy.wire.Channel` (stdio) or
    :class:`~limbo.proxy.http.HttpLink`."""

    async def request(self, method: str, params: dict[str, Any] | None = None,
                      timeout: float | None = None) -> Any: ...

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None: ...


class Upstream:
    """One open connection to the upstream (use as an async context manager, opened by
    :func:`connect`): its tools, instructions and capabilities, :meth:`call`, which returns the
    ``tools/call`` result as MCP's JSON (``content``, ``structuredContent``, ``isError``), and
    :meth:`relay` for the other requests the proxy passes through. What the server asks of its
    client is answered as a client with no capabilities would (:meth:`asked`)."""

    instructions: str | None = None
    name: str | None = None
    version: str | None = None
    capabilities: dict[str, Any]
    """What the upstream said it serves (``tools``, ``prompts``, ``resources``, ...)."""
    link: Link

    def __init__(self, spec: UpstreamSpec, call_timeout: float = CALL_TIMEOUT_S) -> None:
        self.spec, self.call_timeout = spec, call_timeout

    @contextlib.contextmanager
    def waiting(self, seconds: float) -> Iterator[None]:
        """Wait up to ``seconds`` for each answer meanwhile (before the agent may call: a
        server's start-up is no fault's time, and the time scale is not its to shorten)."""
        before, self.call_timeout = self.call_timeout, max(self.call_timeout, seconds)
        try:
            yield
        finally:
            self.call_timeout = before

    async def __aenter__(self) -> Upstream:
        raise NotImplementedError

    async def __aexit__(self, *exc: object) -> None:
        raise NotImplementedError

    async def _handshake(self) -> None:
        """``initialize``, then ``notifications/initialized``; a :class:`UsageError` (the
        connection closed) when the server does not take it."""
        try:
            init = await self.link.request("initialize", {
                "protocolVersion": LATEST_HANDSHAKE_VERSION, "capabilities": {},
                "clientInfo": {"name": "limbo-proxy", "version": __version__}},
                timeout=START_TIMEOUT_S)
        except (RpcError, ChannelClosed, TimeoutError) as exc:
            await self.__aexit__()
            raise UsageError(f"cannot reach the upstream MCP server ({self.spec.describe()}): "
                             f"{self._why(exc)}") from None
        if not isinstance(init, dict) or init.get("protocolVersion") not in \
                HANDSHAKE_PROTOCOL_VERSIONS:
            await self.__aexit__()
            raise UsageError(f"the upstream MCP server ({self.spec.describe()}) answered the "
                             f"initialize handshake with no protocol version the proxy speaks")
        self.instructions = init.get("instructions")
        info = init.get("serverInfo")
        info = info if isinstance(info, dict) else {}
        self.name, self.version = _text(info.get("name")), _text(info.get("version"))
        found = init.get("capabilities")
        self.capabilities = found if isinstance(found, dict) else {}
        await self.link.notify("notifications/initialized")

    async def asked(self, message: dict[str, Any]) -> Any:
        """The answer to what the server asks: ``ping``, an empty ``roots/list``; any other
        request (sampling, elicitation) is refused."""
        method = message.get("method")
        if method == "ping":
            return {}
        if method == "roots/list":
            return {"roots": []}
        if "id" in message:
            raise RpcError(METHOD_NOT_FOUND, f"limbo proxy does not relay {method} requests")
        return None  # a notification (progress, log, list changed): not the ledger's business

    async def call(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        """The upstream's result; :class:`UpstreamLost` when it gave none."""
        try:
            result = await self.link.request("tools/call", {"name": name, "arguments": args},
                                             timeout=self.call_timeout)
        except RpcError as exc:  # an answer: the call was refused
            return rpc_refusal(exc)
        except (ChannelClosed, TimeoutError) as exc:
            raise UpstreamLost(self._why(exc)) from None
        return result if isinstance(result, dict) else {"content": [], "isError": True}

    async def read(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        """A read the proxy sends on its own (the snapshot, reconciliation): as :meth:`call`,
        but a JSON-RPC error is no answer either (a restarted server's refusal of a session it
        forgot says nothing of its state)."""
        try:
            result = await self.link.request("tools/call", {"name": name, "arguments": args},
                                             timeout=self.call_timeout)
        except (RpcError, ChannelClosed, TimeoutError) as exc:
            raise UpstreamLost(self._why(exc)) from None
        return result if isinstance(result, dict) else {"content": [], "isError": True}

    def _why(self, exc: BaseException) -> str:
        """One line for an exception, the upstream's secrets masked."""
        text = _why(exc)
        for secret in self.spec.secrets():
            for form in sorted(variants(secret) | {secret}, key=len, reverse=True):
                text = text.replace(form, MASK)
        return text

    async def relay(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """The upstream's answer to one of :data:`RELAYED` (MCP's JSON); :class:`RpcError` as
        the upstream refused it, or ``INTERNAL_ERROR`` when it gave no answer."""
        try:
            result = await self.link.request(method, params or None,
                                             timeout=self.call_timeout)
        except (ChannelClosed, TimeoutError) as exc:
            raise RpcError(INTERNAL_ERROR, f"the upstream MCP server did not answer: "
                                           f"{self._why(exc)}") from None
        return result if isinstance(result, dict) else {}

    async def listed(self, kind: str) -> list[dict[str, Any]]:
        """Every item of one kind (``tools``, ``prompts``) the upstream lists, all pages, as
        MCP's JSON; a :class:`UsageError` when it does not list them."""
        found: list[dict[str, Any]] = []
        cursor = None
        while True:
            try:
                page = await self.relay(f"{kind}/list", {"cursor": cursor} if cursor else {})
            except RpcError as exc:
                raise UsageError(f"the upstream MCP server did not list its {kind}: "
                                 f"{exc.message}") from None
            found += [i for i in page.get(kind) or () if isinstance(i, dict)]
            cursor = page.get("nextCursor")
            if not cursor:
                return found


def connect(spec: UpstreamSpec, call_timeout: float = CALL_TIMEOUT_S) -> Upstream:
    """The connection ``spec`` asks for (not yet open), waiting ``call_timeout`` wall seconds
    at most for an answer to one call."""
    return (HttpUpstream(spec, call_timeout) if spec.url is not None
            else StdioUpstream(spec, call_timeout))


class StdioUpstream(Upstream):
    """A server started by the proxy, spoken to over its stdin and stdout."""

    def __init__(self, spec: UpstreamSpec, call_timeout: float = CALL_TIMEOUT_S) -> None:
        super().__init__(spec, call_timeout)
        self.process: UpstreamProcess | None = None
        self._reading: asyncio.Task[None] | None = None

    async def __aenter__(self) -> StdioUpstream:
        argv = self.spec.command
        self.link = channel = Channel(None, self.asked, server=False, limit=ANSWER_LIMIT)
        self.process = UpstreamProcess(channel)
        try:
            await self.process.start(argv)
        except OSError as exc:
            raise UsageError(f"--upstream-cmd: cannot start {argv[0]!r}: "
                             f"{exc.strerror or exc}") from None
        self._reading = asyncio.ensure_future(channel.serve())
        await self._handshake()
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.process is not None:
            await self.process.stop(self._reading)


class HttpUpstream(Upstream):
    """A server reached over streamable HTTP, every read the proxy forwards or reconciles
    with reaching it (nothing cached)."""

    async def __aenter__(self) -> HttpUpstream:
        assert self.spec.url is not None
        self.link = self.http = HttpLink(self.spec.url, self.spec.headers, self.asked)
        await self._handshake()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.http.aclose()


def rpc_refusal(exc: RpcError) -> dict[str, Any]:
    """A JSON-RPC error answering a call, as the tool error an agent is shown."""
    return {"content": [{"type": "text", "text": f"MCP error {exc.code}: {exc.message}"}],
            "isError": True}


def _text(value: Any) -> str | None:
    return value[:200] if isinstance(value, str) else None


def _why(exc: BaseException) -> str:
    """One line for an exception (an exception group: its first leaf)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = " ".join(str(exc).split())[:300]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
