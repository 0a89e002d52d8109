"""aiohttp's request writer started eagerly on Python 3.11 (limbo/providers/eager.py): the
bytes leave in the step that makes the request; a writer that must wait goes on as a task,
cancellable, its failure raised where the task would have raised it; other tasks are untouched.
"""

from __future__ import annotations

import asyncio
import sys

import pytest

from limbo.providers import eager

log: list[str] = []


async def writer(gate: asyncio.Future[None] | None = None, fail: bool = False) -> str:
    log.append("started")
    if fail:
        raise OSError("socket gone")
    if gate is not None:
        await gate
        log.append("resumed")
    return "written"


async def other() -> None:
    log.append("other started")


def _factory(loop: asyncio.AbstractEventLoop) -> None:
    loop.set_task_factory(eager._Factory(writer.__code__))  # type: ignore[arg-type]


def test_a_writer_that_needs_no_wait_is_done_when_created() -> None:
    async def main() -> None:
        _factory(asyncio.get_running_loop())
        log.clear()
        made = asyncio.create_task(writer())
        assert log == ["started"] and made.done() and made.result() == "written"
        late = asyncio.create_task(other())
        assert log == ["started"] and not late.done()  # any other task waits its turn
        await late
        assert log == ["started", "other started"]

    asyncio.run(main())


def test_a_writer_that_waits_goes_on_as_a_task_and_can_be_cancelled() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        _factory(loop)
        log.clear()
        gate: asyncio.Future[None] = loop.create_future()
        task = asyncio.create_task(writer(gate))
        assert log == ["started"] and not task.done()
        gate.set_result(None)
        assert await task == "written" and log == ["started", "resumed"]
        stuck = asyncio.create_task(writer(loop.create_future()))
        await asyncio.sleep(0)
        stuck.cancel()
        with pytest.raises(asyncio.CancelledError):
            await stuck
        failed = asyncio.create_task(writer(fail=True))
        with pytest.raises(OSError, match="socket gone"):
            await failed

    asyncio.run(main())


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="aiohttp starts it eagerly itself")
def test_a_provider_client_installs_it_on_its_loop_for_aiohttps_writer(monkeypatch) -> None:
    pytest.importorskip("aiohttp")
    from limbo.providers.openai import OpenAIAdapter

    assert eager._writer_code() is not None  # aiohttp's writer is still where we look
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-eager")

    async def main() -> object:
        adapter = OpenAIAdapter("m", base_url="http://127.0.0.1:9/v1", cache=None)
        adapter.client()
        factory = asyncio.get_running_loop().get_task_factory()
        await adapter.aclose()
        return factory

    assert isinstance(asyncio.run(main()), eager._Factory)
