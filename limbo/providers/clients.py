"""SDK clients shared by the episodes of a run: one per provider, endpoint and key.

Building an SDK client costs about 23 ms of CPU (its TLS context loads the system's CA
certificates), and a client owns a connection pool: a client per episode pays that every
episode and opens a fresh connection for each. Inside :func:`shared_clients` — what a run's
executor wraps around its episodes — adapters take their client from the scope's pool instead,
keyed like the rate limiter (``provider|endpoint|sha256(key)[:12]``), and the pool closes them
all when the run ends. Outside a scope (one episode from Python, a test) an adapter makes its
own client and closes it in ``aclose``, as before.

The scope is a context variable, so the episodes' tasks, started inside it, inherit it; a
client is bound to the event loop it first ran on, which is the scope's.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from contextvars import ContextVar
from typing import Any

log = logging.getLogger("limbo.providers")


class ClientPool:
    """The clients of one run; closed together."""

    def __init__(self) -> None:
        self.clients: dict[str, Any] = {}
        self.made = 0

    def get(self, key: str, make: Callable[[], Any]) -> Any:
        client = self.clients.get(key)
        if client is None:
            client = self.clients[key] = make()
            self.made += 1
        return client

    async def aclose(self) -> None:
        clients, self.clients = list(self.clients.values()), {}
        for client in clients:
            try:
                await client.close()
            except Exception as exc:  # noqa: BLE001 - closing must not lose the run's records
                log.warning("closing a provider client failed: %s", type(exc).__name__)


_pool: ContextVar[ClientPool | None] = ContextVar("limbo_client_pool", default=None)


def current() -> ClientPool | None:
    """The pool of the run this code runs in, if any."""
    return _pool.get()


@contextlib.asynccontextmanager
async def shared_clients() -> AsyncIterator[ClientPool]:
    """Share provider clients between the episodes started inside; close them at the end."""
    pool = ClientPool()
    token = _pool.set(pool)
    try:
        yield pool
    finally:
        _pool.reset(token)
        await pool.aclose()


@contextlib.contextmanager
def bound(pool: ClientPool) -> Iterator[ClientPool]:
    """Share ``pool``'s clients with the episodes started inside, and leave them open: a pool
    that outlives one batch of episodes (a Ray worker process keeps one for all its batches,
    on the one event loop they all run on)."""
    token = _pool.set(pool)
    try:
        yield pool
    finally:
        _pool.reset(token)
