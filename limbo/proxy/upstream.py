"""The connection to the team's own MCP server (the *upstream*), with the ``mcp`` SDK's client.

Over stdio the proxy starts ``--upstream-cmd`` (split like a shell would, not run by one) with
the proxy's own environment — the server is the team's, configured as they run it. Over
streamable HTTP it connects to ``--upstream-url``, sending each ``--upstream-header``; a URL
whose host is not this machine (127.0.0.0/8, ``::1``, ``localhost``) is refused unless
``--allow-remote`` says the user means it: a fault proxy aimed at a production server by a typo
would duplicate real payments.

The SDK's response cache is off: a read the proxy forwards, or reconciles with, must reach the
upstream every time. A call that the upstream does not answer within :data:`CALL_TIMEOUT_S`,
or whose transport fails, raises :class:`UpstreamLost`: whether a write took effect is then
unknown, which is what reconciliation is for.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import shlex
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from limbo.errors import UsageError

CALL_TIMEOUT_S = 120.0
"""How long the proxy waits for the upstream's answer to one call (wall seconds)."""
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


class Upstream:
    """One open connection to the upstream (use as an async context manager)."""

    def __init__(self, spec: UpstreamSpec) -> None:
        self.spec = spec
        self._stack = contextlib.AsyncExitStack()
        self.client: Any = None
        self.instructions: str | None = None

    async def __aenter__(self) -> Upstream:
        from mcp import Client, StdioServerParameters

        target: Any
        if self.spec.url is not None:
            target = await self._http_transport()
        else:
            argv = self.spec.command
            target = StdioServerParameters(command=argv[0], args=list(argv[1:]),
                                           env=dict(os.environ))
        try:
            self.client = await self._stack.enter_async_context(Client(target, cache=None))
        except BaseException as exc:
            await self._stack.aclose()
            if isinstance(exc, Exception):
                raise UsageError(f"cannot reach the upstream MCP server "
                                 f"({self.spec.describe()}): {_why(exc)}") from None
            raise
        self.instructions = self.client.instructions
        return self

    async def _http_transport(self) -> Any:
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        http = await self._stack.enter_async_context(httpx2.AsyncClient(
            headers=self.spec.headers, timeout=httpx2.Timeout(30.0, read=CALL_TIMEOUT_S)))
        assert self.spec.url is not None
        return streamable_http_client(self.spec.url, http_client=http)

    async def __aexit__(self, *exc: object) -> None:
        with contextlib.suppress(Exception):
            await self._stack.aclose()

    async def tools(self) -> list[Any]:
        """The upstream's tools (every page)."""
        found: list[Any] = []
        cursor = None
        while True:
            page = await self.client.list_tools(cursor=cursor)
            found += page.tools
            cursor = page.next_cursor
            if not cursor:
                return found

    async def call(self, name: str, args: dict[str, Any]) -> Any:
        """The upstream's ``CallToolResult``; :class:`UpstreamLost` when it gave none."""
        try:
            return await self.client.call_tool(name, args, read_timeout_seconds=CALL_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - any failure of the call leaves it unanswered
            raise UpstreamLost(_why(exc)) from None


def _why(exc: BaseException) -> str:
    """One line for an exception (an exception group: its first leaf)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = " ".join(str(exc).split())[:300]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
