"""Listening on loopback: the one way LIMBO opens a server socket (the gateway and the MCP
server, the report, the proxy), and the check of a port given on the command line."""

from __future__ import annotations

import socket

from limbo.base.errors import UsageError


def listening(port: int, flag: str | None = None, host: str = "127.0.0.1") -> socket.socket:
    """A non-blocking TCP socket listening on loopback (``::1`` for an IPv6 ``host``, else
    127.0.0.1) at ``port`` (0: any free one). Bound before anything is built, so that a busy
    port is said at once: a :class:`UsageError` naming ``flag``, the option that chose it."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on sockets that name it, and without it
    # a response's head and body wait ~40 ms for a delayed ACK between them.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("::1" if family == socket.AF_INET6 else "127.0.0.1", port))
    except OSError as exc:
        sock.close()
        where = f"{flag} {port}: cannot listen on {host}" if flag else \
            f"cannot listen on {host}:{port}"
        raise UsageError(f"{where} ({exc.strerror}); choose another port, or 0 for any free "
                         f"one") from None
    sock.listen(128)
    sock.setblocking(False)
    return sock


def check_port(port: int, flag: str) -> None:
    """Refuse a port that cannot be served before anything is written (a run directory, an
    upstream's state): out of range, or taken."""
    if not 0 <= port <= 65535:
        raise UsageError(f"{flag} {port}: choose 0 (any free port) to 65535")
    if port:
        listening(port, flag).close()
