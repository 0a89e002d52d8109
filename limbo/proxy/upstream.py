"""The connection to the team's own MCP server (the *upstream*).

Over stdio the proxy starts ``--upstream-cmd`` (split like a shell would, not run by one) with
the proxy's own environment — the server is the team's, configured as they run it — and speaks
to it through the lean JSON-RPC channel of :mod:`limbo.proxy.wire`. Over streamable HTTP it
connects to ``--upstream-url`` with the ``mcp`` SDK's client, sending each
``--upstream-header``; a URL whose host is not this machine (127.0.0.0/8, ``::1``,
``localhost``) is refused unless ``--allow-remote`` says the user means it: a fault proxy aimed
at a production server by a typo would duplicate real payments.

Either way a result is MCP's JSON, as the upstream sent it. Besides tool calls the proxy
relays the upstream's prompts and resources (:meth:`Upstream.relay`), unlogged: they are not
writes. A call that the upstream does not
answer within :data:`CALL_TIMEOUT_S`, or whose transport fails, raises :class:`UpstreamLost`:
whether a write took effect is then unknown, which is what reconciliation is for. A JSON-RPC
error answering a call is an answer (the call was refused), shown to the agent as a tool error.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import shlex
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION

from limbo import __version__
from limbo.base.errors import UsageError
from limbo.proxy.wire import (
    INTERNAL_ERROR,
    LINE_LIMIT,
    METHOD_NOT_FOUND,
    Channel,
    ChannelClosed,
    RpcError,
)

CALL_TIMEOUT_S = 120.0
"""How long the proxy waits for the upstream's answer to one call (wall seconds)."""
START_TIMEOUT_S = 60.0
"""How long a stdio upstream may take to answer the handshake."""
STOP_TIMEOUT_S = 5.0
"""How long a stdio upstream may take to exit once its stdin is closed."""
LOOPBACK_NAMES = ("localhost", "localhost.localdomain")


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
        """How the record and the manifest name the upstream (header values left out)."""
        if self.url is not None:
            names = ", ".join(sorted(self.headers))
            return f"http {self.url}" + (f" (headers: {names})" if names else "")
        return "stdio " + shlex.join(self.command)

    def secrets(self) -> list[str]:
        """Values never to write anywhere: every header value."""
        return [v for v in self.headers.values() if v]


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
        raise UsageError(f"--upstream-url {url[:200]!r} is not an http(s) URL with a host")
    if parts.username or parts.password:
        raise UsageError("--upstream-url must not carry credentials; send them with "
                         "--upstream-header 'Authorization: ...'")
    if not allow_remote and not is_loopback(parts.hostname):
        raise UsageError(f"--upstream-url points at {parts.hostname!r}, not this machine: the "
                         f"proxy injects faults into every call it forwards, so a remote "
                         f"upstream needs --allow-remote")


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine (a literal loopback address, or localhost)."""
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


RELAYED = ("tools/list", "prompts/list", "prompts/get", "resources/list",
           "resources/templates/list", "resources/read")
"""The requests :meth:`Upstream.relay` forwards as they are (tool calls go through
:meth:`Upstream.call`)."""


class Upstream:
    """One open connection to the upstream (use as an async context manager): its tools, its
    instructions and capabilities, :meth:`call`, which returns the ``tools/call`` result as
    MCP's JSON (``content``, ``structuredContent``, ``isError``), and :meth:`relay` for the
    other requests the proxy passes through."""

    instructions: str | None = None
    name: str | None = None
    capabilities: dict[str, Any]
    """What the upstream said it serves (``tools``, ``prompts``, ``resources``, ...)."""

    async def __aenter__(self) -> Upstream:
        raise NotImplementedError

    async def __aexit__(self, *exc: object) -> None:
        raise NotImplementedError

    async def call(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        """The upstream's result; :class:`UpstreamLost` when it gave none."""
        raise NotImplementedError

    async def relay(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """The upstream's answer to one of :data:`RELAYED` (MCP's JSON); :class:`RpcError` as
        the upstream refused it, or ``INTERNAL_ERROR`` when it gave no answer."""
        raise NotImplementedError

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


def connect(spec: UpstreamSpec) -> Upstream:
    """The connection ``spec`` asks for (not yet open)."""
    return HttpUpstream(spec) if spec.url is not None else StdioUpstream(spec)


class StdioUpstream(Upstream):
    """A server started by the proxy, spoken to over its stdin and stdout with the
    ``initialize`` handshake (the protocol era every stdio server speaks), through the lean
    JSON-RPC channel of :mod:`limbo.proxy.wire`. What the server asks of its client is
    answered as a client with no capabilities would: ``ping``, and an empty ``roots/list``;
    anything else (sampling, elicitation) is refused."""

    def __init__(self, spec: UpstreamSpec) -> None:
        self.spec = spec
        self.proc: asyncio.subprocess.Process | None = None
        self.channel: Channel | None = None
        self._reading: asyncio.Task[None] | None = None

    async def __aenter__(self) -> StdioUpstream:
        argv = self.spec.command
        try:
            self.proc = await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                env=dict(os.environ), limit=LINE_LIMIT)
        except OSError as exc:
            raise UsageError(f"--upstream-cmd: cannot start {argv[0]!r}: "
                             f"{exc.strerror or exc}") from None
        assert self.proc.stdout is not None
        self.channel = Channel(self.proc.stdout, self.proc.stdin, self._asked,
                               answer_garbage=False)
        self._reading = asyncio.ensure_future(self.channel.serve())
        try:
            init = await self.channel.request("initialize", {
                "protocolVersion": LATEST_HANDSHAKE_VERSION, "capabilities": {},
                "clientInfo": {"name": "limbo-proxy", "version": __version__}},
                timeout=START_TIMEOUT_S)
        except (RpcError, ChannelClosed, TimeoutError) as exc:
            await self.__aexit__()
            raise UsageError(f"cannot reach the upstream MCP server ({self.spec.describe()}): "
                             f"{_why(exc)}") from None
        if not isinstance(init, dict) or init.get("protocolVersion") not in \
                HANDSHAKE_PROTOCOL_VERSIONS:
            await self.__aexit__()
            raise UsageError(f"the upstream MCP server ({self.spec.describe()}) answered the "
                             f"initialize handshake with no protocol version the proxy speaks")
        self.instructions = init.get("instructions")
        self.name = (init.get("serverInfo") or {}).get("name")
        found = init.get("capabilities")
        self.capabilities = found if isinstance(found, dict) else {}
        self.channel.notify("notifications/initialized")
        return self

    async def _asked(self, message: dict[str, Any]) -> Any:
        method = message.get("method")
        if method == "ping":
            return {}
        if method == "roots/list":
            return {"roots": []}
        if "id" in message:
            raise RpcError(METHOD_NOT_FOUND, f"limbo proxy does not relay {method} requests")
        return None  # a notification (progress, log, list changed): not the ledger's business

    async def __aexit__(self, *exc: object) -> None:
        if self.channel is not None:
            self.channel.close()
        if self.proc is not None and self.proc.returncode is None:
            try:
                await asyncio.wait_for(self.proc.wait(), STOP_TIMEOUT_S)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    self.proc.kill()
                await self.proc.wait()
        if self._reading is not None:
            await asyncio.gather(self._reading, return_exceptions=True)

    async def relay(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert self.channel is not None
        try:
            result = await self.channel.request(method, params or None, timeout=CALL_TIMEOUT_S)
        except (ChannelClosed, TimeoutError) as exc:
            raise RpcError(INTERNAL_ERROR, f"the upstream MCP server did not answer: "
                                           f"{_why(exc)}") from None
        return result if isinstance(result, dict) else {}

    async def call(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        assert self.channel is not None
        try:
            result = await self.channel.request("tools/call", {"name": name, "arguments": args},
                                                timeout=CALL_TIMEOUT_S)
        except RpcError as exc:  # an answer: the call was refused
            return rpc_refusal(exc)
        except (ChannelClosed, TimeoutError) as exc:
            raise UpstreamLost(_why(exc)) from None
        return result if isinstance(result, dict) else {"content": [], "isError": True}


def rpc_refusal(exc: RpcError) -> dict[str, Any]:
    """A JSON-RPC error answering a call, as the tool error an agent is shown."""
    return {"content": [{"type": "text", "text": f"MCP error {exc.code}: {exc.message}"}],
            "isError": True}


class HttpUpstream(Upstream):
    """A server reached over streamable HTTP with the ``mcp`` SDK's client (which negotiates
    either protocol era). Its response cache is off: every read the proxy forwards, or
    reconciles with, reaches the upstream."""

    def __init__(self, spec: UpstreamSpec) -> None:
        self.spec = spec
        self._stack = contextlib.AsyncExitStack()
        self.client: Any = None

    async def __aenter__(self) -> HttpUpstream:
        import httpx2
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        assert self.spec.url is not None
        try:
            http = await self._stack.enter_async_context(httpx2.AsyncClient(
                headers=self.spec.headers, timeout=httpx2.Timeout(30.0, read=CALL_TIMEOUT_S)))
            self.client = await self._stack.enter_async_context(Client(
                streamable_http_client(self.spec.url, http_client=http), cache=None))
        except Exception as exc:  # noqa: BLE001 - whatever failed, the upstream is unreachable
            await self._stack.aclose()
            raise UsageError(f"cannot reach the upstream MCP server ({self.spec.describe()}): "
                             f"{_why(exc)}") from None
        self.instructions = self.client.instructions
        info = self.client.server_info
        self.name = info.name if info is not None else None
        found = self.client.server_capabilities
        self.capabilities = _json(found) if found is not None else {}
        return self

    async def __aexit__(self, *exc: object) -> None:
        with contextlib.suppress(Exception):
            await self._stack.aclose()

    async def relay(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        from mcp.shared.exceptions import MCPError

        try:
            return _json(await self._asked(method, params))
        except MCPError as exc:
            raise RpcError(exc.code, str(exc)) from None
        except Exception as exc:  # noqa: BLE001 - any other failure: no answer
            raise RpcError(INTERNAL_ERROR, f"the upstream MCP server did not answer: "
                                           f"{_why(exc)}") from None

    def _asked(self, method: str, params: dict[str, Any]) -> Any:
        """The SDK client's request for ``method`` (an awaitable)."""
        c = self.client
        if method == "prompts/get":
            return c.get_prompt(str(params.get("name")), params.get("arguments"))
        if method == "resources/read":
            return c.read_resource(str(params.get("uri")))
        listing = {"tools/list": c.list_tools, "prompts/list": c.list_prompts,
                   "resources/list": c.list_resources,
                   "resources/templates/list": c.list_resource_templates}[method]
        return listing(cursor=params.get("cursor"))

    async def call(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        from mcp.shared.exceptions import MCPError

        try:
            result = await self.client.call_tool(name, args, read_timeout_seconds=CALL_TIMEOUT_S)
        except MCPError as exc:
            return rpc_refusal(RpcError(exc.code, str(exc)))
        except Exception as exc:  # noqa: BLE001 - any other failure leaves the call unanswered
            raise UpstreamLost(_why(exc)) from None
        return _json(result)


def _json(model: Any) -> dict[str, Any]:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)  # type: ignore[no-any-return]


def _why(exc: BaseException) -> str:
    """One line for an exception (an exception group: its first leaf)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = " ".join(str(exc).split())[:300]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
