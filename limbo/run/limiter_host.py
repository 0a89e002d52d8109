"""The call limiter forked workers share: the run's :class:`~limbo.run.leases.SlotKeeper` on a
thread of the ``limbo run`` process, reached over a Unix socket.

The parent of forked workers runs no episode; its writer loop waits on the workers' pipes. The
keeper runs beside it on its own thread and event loop (:class:`LimiterHost`), serving each
worker's connection: one JSON line per call (``[id, method, args]``) and one per answer
(``[id, result]``). A worker reaches it through :class:`SocketHost`, which its
:class:`~limbo.run.leases.LeasedLimiter` uses exactly as a Ray worker's uses the actor. A
worker whose connection closes (it exited, it died) is forgotten: the slots it held go back.
The socket lives in a directory only this user can enter, removed with the host.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

from limbo.run.leases import Outcome, SlotKeeper

CALLS = frozenset({"lease", "settle", "snapshot"})
"""What a worker may ask of the keeper."""


class LimiterHost:
    """A :class:`SlotKeeper` served on a thread of this process, for its forked workers."""

    def __init__(self) -> None:
        self.keeper = SlotKeeper()
        self.dir = Path(tempfile.mkdtemp(prefix="limbo-limiter-"))
        self.path = str(self.dir / "socket")
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()
        self.thread = threading.Thread(target=self._serve, args=(ready,), daemon=True,
                                       name="limbo-limiter")
        self.thread.start()
        ready.wait()

    def _serve(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        server = self.loop.run_until_complete(asyncio.start_unix_server(self._client, self.path))
        ready.set()
        try:
            self.loop.run_forever()
        finally:  # a worker still connected (the host closes first) is let go, not dropped
            server.close()
            pending = asyncio.all_tasks(self.loop)
            for task in pending:
                task.cancel()
            self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self.loop.run_until_complete(server.wait_closed())
            self.loop.close()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        lessees: set[str] = set()
        tasks: set[asyncio.Task[None]] = set()
        try:
            while line := await reader.readline():
                call_id, method, args = json.loads(line)
                if method in ("lease", "settle"):
                    lessees.add(str(args[1]))
                task = asyncio.ensure_future(self._answer(writer, call_id, method, args))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
        except (ConnectionError, ValueError):
            pass  # a worker that died mid-line: forgotten below
        except asyncio.CancelledError:
            # The host is closing on a worker still connected. The handler ends as handlers
            # do: Python 3.11's stream server logs a handler task that ends cancelled as an
            # error, with a traceback on the run's stderr.
            pass
        finally:
            for task in list(tasks):
                task.cancel()
            for lessee in lessees:
                await self.keeper.forget(lessee)
            writer.close()

    async def _answer(self, writer: asyncio.StreamWriter, call_id: int, method: str,
                      args: list[Any]) -> None:
        if method not in CALLS:
            return
        result = await getattr(self.keeper, method)(*args)
        writer.write(json.dumps([call_id, result]).encode() + b"\n")

    def report(self) -> dict[str, dict[str, int]]:
        """The keeper's :meth:`~limbo.run.leases.SlotKeeper.report`, asked on its thread."""
        return asyncio.run_coroutine_threadsafe(self.keeper.report(), self.loop).result(10)

    def close(self) -> None:
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
        shutil.rmtree(self.dir, ignore_errors=True)


class SocketHost:
    """:class:`~limbo.run.leases.SlotHost` of a keeper on a :class:`LimiterHost`: one
    connection per worker process, opened on its event loop at the first call."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.writer: asyncio.StreamWriter | None = None
        self.waiting: dict[int, asyncio.Future[Any]] = {}
        self.next_id = 0
        self.reading: asyncio.Task[None] | None = None
        self.connecting = asyncio.Lock()
        """Held while the one connection opens: two first calls at once must not open two
        (the keeper forgets a lessee's slots when either of its connections closes)."""

    async def _call(self, method: str, *args: Any) -> Any:
        async with self.connecting:
            if self.writer is None:
                reader, self.writer = await asyncio.open_unix_connection(self.path)
                self.reading = asyncio.ensure_future(self._read(reader))
        self.next_id += 1
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.waiting[self.next_id] = future
        self.writer.write(json.dumps([self.next_id, method, list(args)]).encode() + b"\n")
        return await future

    async def _read(self, reader: asyncio.StreamReader) -> None:
        with contextlib.suppress(ConnectionError):
            while line := await reader.readline():
                call_id, result = json.loads(line)
                future = self.waiting.pop(call_id, None)
                if future is not None and not future.done():
                    future.set_result(result)
        gone = ConnectionError("the run's limiter host closed its connection")
        for future in self.waiting.values():
            if not future.done():
                future.set_exception(gone)
        self.waiting.clear()

    async def lease(self, key: str, lessee: str, want: int) -> int:
        return int(await self._call("lease", key, lessee, want))

    async def settle(self, key: str, lessee: str, kept: list[Outcome], back: list[Outcome],
                     idle: int) -> None:
        await self._call("settle", key, lessee, kept, back, idle)

    async def snapshot(self) -> tuple[int, int]:
        in_flight, limit = await self._call("snapshot")
        return int(in_flight), int(limit)
