"""A stdio upstream's process: started in a session of its own, spoken to through a
:class:`~limbo.proxy.channel.Channel` — its stdin the channel's writer, its stdout a pipe the
channel reads itself (:meth:`~limbo.proxy.channel.Channel.read`) — and stopped once the proxy
is done with it: stdin closed, then a kill if it has not exited in :data:`STOP_TIMEOUT_S`.

Why a pipe of the proxy's own for stdout rather than asyncio's subprocess pipes: each answer is
then read into the channel's one buffer in the callback that found it readable, with no reading
task between (asyncio's pipe transport also allocates 256 KiB for every read, which the C
library maps and unmaps each time). The process's own session keeps it out of the signals a
terminal or an agent's MCP client sends the proxy's process group (:mod:`limbo.proxy.upstream`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
from collections.abc import Sequence

from limbo.proxy.channel import Channel

STOP_TIMEOUT_S = 5.0
"""How long a stdio upstream may take to exit once its stdin is closed."""


class UpstreamProcess:
    """The process of a stdio upstream, and the pipe its channel reads."""

    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        self.transport: asyncio.SubprocessTransport | None = None
        self._exit = _Exit()
        self._stdout = -1

    async def start(self, argv: Sequence[str]) -> None:
        """Start ``argv`` with the proxy's environment (``OSError``: it could not be)."""
        exit_ = self._exit
        reading, written = os.pipe()
        try:
            self.transport, _ = await asyncio.get_running_loop().subprocess_exec(
                lambda: exit_, *argv, stdin=subprocess.PIPE, stdout=written, stderr=None,
                env=dict(os.environ), start_new_session=True)
        except BaseException:
            os.close(reading)
            raise
        finally:
            os.close(written)
        self._stdout = reading
        self.channel.writer = self.transport.get_pipe_transport(0)
        self.channel.read(reading)

    async def stop(self, serving: asyncio.Future[None] | None) -> None:
        """Close its stdin, wait for it to exit (kill it past :data:`STOP_TIMEOUT_S`), then for
        ``serving`` (the channel's reading) to end."""
        self.channel.close()
        if self.transport is not None and self.transport.get_returncode() is None:
            try:
                await asyncio.wait_for(self._exit.exited.wait(), STOP_TIMEOUT_S)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    self.transport.kill()
                await self._exit.exited.wait()
        if serving is not None:
            await asyncio.gather(serving, return_exceptions=True)
        if self.transport is not None:
            self.transport.close()
        if self._stdout >= 0:
            os.close(self._stdout)
            self._stdout = -1


class _Exit(asyncio.SubprocessProtocol):
    """Tells when the process has exited."""

    def __init__(self) -> None:
        self.exited = asyncio.Event()

    def process_exited(self) -> None:
        self.exited.set()
