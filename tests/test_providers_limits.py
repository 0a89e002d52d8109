"""Provider calls at scale: one SDK client per provider, endpoint and key shared by a run's
episodes and closed at its end; an adaptive limiter that backs off on 429 / Retry-After and
recovers slowly; and a whole ``limbo run`` at high ``--concurrency`` against a rate-limited
loopback endpoint (the real SDKs over real HTTP) that ends without a ``model_error``, its
progress line showing the calls in flight and the current limit.
"""

from __future__ import annotations

import asyncio
import collections.abc
import json
from pathlib import Path

import pytest
from support.paced import Pace, serve_in_thread

from limbo.episode.models import make_adapter
from limbo.providers import clients, limiter
from limbo.providers.limiter import AimdState, LocalLimiter, limiter_for, set_limiter_factory

SPECS = {"responses": "openai/paced?base_url={url}/v1",
         "chat": "openai/paced?api=chat&base_url={url}/v1",
         "messages": "anthropic/paced?base_url={url}"}


@pytest.fixture(autouse=True)
def _fresh_limiters(monkeypatch):
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    limiter.reset()
    yield
    set_limiter_factory(None)


# ------------------------------------------------------------------ the limiter's arithmetic


def test_refusals_bring_the_limit_down_to_what_the_provider_accepted() -> None:
    state = AimdState()
    for _ in range(40):
        state.started()
    for _ in range(24):  # the provider took 16 and refused the rest at once
        state.finished(429, None, now=0.0)
    assert state.view() == (16, 16)
    assert not state.may_start(0.0)
    state.finished(200, None, now=0.1)
    assert state.may_start(0.1)


def test_recovery_is_one_call_per_round_trip_and_only_when_the_limit_is_used() -> None:
    state = AimdState(limit=8, slow_start=False)
    for _ in range(8):
        state.started()
    for _ in range(8):  # one round trip at the limit: +1/limit per answer
        state.finished(200, None, now=0.0)
        state.started()
    assert state.view() == (8, 8) and 8.9 < state.limit < 9.1
    idle = AimdState(limit=8, slow_start=False)
    idle.started()
    for _ in range(20):  # far below the limit: no evidence that more would be accepted
        idle.finished(200, None, now=0.0)
        idle.started()
    assert idle.limit == 8


def test_slow_start_doubles_until_the_first_refusal() -> None:
    state = AimdState(limit=4)
    for _ in range(4):
        state.started()
    for _ in range(4):  # one round trip, each answer followed by the episode's next call
        state.finished(200, None, now=0.0)
        while state.may_start(0.0):
            state.started()
    assert state.view() == (8, 8)
    state.finished(429, None, now=0.0)  # the eighth was one too many
    assert not state.slow_start and state.view() == (7, 7)


def test_refused_at_the_floor_nobody_starts_until_retry_after() -> None:
    state = AimdState(limit=1, slow_start=False)
    state.started()
    state.finished(429, 2.5, now=10.0)
    assert state.view() == (0, 1)
    assert not state.may_start(12.0) and state.pause_left(12.0) == pytest.approx(0.5)
    assert state.may_start(12.5)
    state.started()
    state.finished(429, None, now=20.0)  # no Retry-After: a short default pause
    assert not state.may_start(20.0) and state.may_start(20.0 + limiter.FLOOR_PAUSE_S)


def test_transport_errors_and_other_statuses_only_free_their_slot() -> None:
    state = AimdState(limit=4, slow_start=False)
    for _ in range(4):
        state.started()
    for status in (None, 500, 400):
        state.finished(status, None, now=0.0)
    assert state.view() == (1, 4)
    state.finished(503, None, now=0.0)  # unavailable is an overload signal
    assert state.view() == (0, 1)


# ------------------------------------------------------------------ the shared limiter


def test_callers_wait_for_a_slot_in_order_and_a_cancelled_waiter_gives_its_slot_back() -> None:
    async def scenario() -> list[str]:
        lim = LocalLimiter(state=AimdState(limit=1, slow_start=False))
        order: list[str] = []
        await lim.acquire()

        async def call(name: str) -> None:
            await lim.acquire()
            order.append(name)
            await lim.release(200, None)

        first = asyncio.ensure_future(call("first"))
        doomed = asyncio.ensure_future(call("doomed"))
        last = asyncio.ensure_future(call("last"))
        await asyncio.sleep(0)
        assert await lim.snapshot() == (1, 1)
        doomed.cancel()
        await lim.release(200, None)
        await asyncio.gather(first, last)
        assert doomed.cancelled()
        assert (await lim.snapshot())[0] == 0
        return order

    assert asyncio.run(scenario()) == ["first", "last"]


def test_a_waiter_cancelled_just_after_it_was_handed_a_slot_does_not_keep_it() -> None:
    async def scenario() -> None:
        lim = LocalLimiter(state=AimdState(limit=1, slow_start=False))
        await lim.acquire()
        waiter = asyncio.ensure_future(lim.acquire())
        await asyncio.sleep(0)
        await lim.release(500, None)  # the slot goes to the waiter ...
        assert lim.peek() == (1, 1)
        waiter.cancel()  # ... which is cancelled before it could use it
        await asyncio.gather(waiter, return_exceptions=True)
        assert waiter.cancelled() and lim.peek() == (0, 1)
        await asyncio.wait_for(lim.acquire(), 5)  # and the slot is free for the next caller

    asyncio.run(scenario())


def test_a_pause_holds_every_caller_until_retry_after_has_passed() -> None:
    async def scenario() -> None:
        lim = LocalLimiter(state=AimdState(limit=1, slow_start=False))
        await lim.acquire()
        await lim.release(429, 0.05)  # refused at the floor: everybody waits 50 ms
        waiter = asyncio.ensure_future(lim.acquire())
        await asyncio.sleep(0)
        assert not waiter.done() and lim.peek() == (0, 1)
        await asyncio.wait_for(waiter, 5)
        assert lim.peek() == (1, 1)

    asyncio.run(scenario())


def test_a_run_that_ends_mid_pause_does_not_stall_the_next_one() -> None:
    lim = LocalLimiter(state=AimdState(limit=1, slow_start=False))

    async def refused_then_gone() -> None:
        await lim.acquire()
        await lim.release(429, 30.0)  # a long pause, and a caller waiting it out ...
        waiter = asyncio.ensure_future(lim.acquire())
        await asyncio.sleep(0)
        waiter.cancel()  # ... when the run stops (its loop closes with the wake-up armed)
        await asyncio.gather(waiter, return_exceptions=True)

    async def next_run() -> None:
        lim.state.paused_until = 0.0
        await lim.acquire()
        await lim.release(429, 0.05)
        await asyncio.wait_for(lim.acquire(), 5)  # woken by a timer on this run's loop

    asyncio.run(refused_then_gone())
    asyncio.run(next_run())
    assert lim.peek() == (1, 1)


def test_one_limiter_per_key_and_an_executor_may_substitute_its_own() -> None:
    key = limiter.limiter_key("openai", "http://127.0.0.1:1/v1", "sk-secret-value")
    assert "sk-secret-value" not in key and key.startswith("openai|http://127.0.0.1:1/v1|")
    assert limiter_for(key) is limiter_for(key)
    made: list[str] = []

    def factory(k: str) -> LocalLimiter:
        made.append(k)
        return LocalLimiter(k, AimdState(limit=3))

    set_limiter_factory(factory)
    assert asyncio.run(limiter_for(key).snapshot()) == (0, 3) and made == [key]
    set_limiter_factory(None)
    assert asyncio.run(limiter_for(key).snapshot()) == (0, limiter.START_LIMIT)


# ------------------------------------------------------------------ one client per run


@pytest.mark.parametrize("api", list(SPECS))
def test_episodes_of_a_run_share_one_client_which_closes_with_the_run(api, monkeypatch) -> None:
    monkeypatch.setenv("LIMBO_OTHER_KEY", "another-key-for-this-endpoint")

    async def scenario(url: str) -> tuple[object, object, list[object]]:
        async with clients.shared_clients() as pool:
            a, b = (make_adapter(SPECS[api].format(url=url)) for _ in range(2))
            other = make_adapter(SPECS[api].format(url=url) + "&api_key_env=LIMBO_OTHER_KEY")
            shared = [a.client(), b.client(), other.client()]
            assert shared[0] is shared[1] and shared[2] is not shared[0]
            await a.aclose()  # an episode ending does not close the run's client
            assert not shared[0].is_closed() and pool.made == 2
        return a, b, shared

    with serve_in_thread(Pace(latency_s=0)) as server:
        _, _, shared = asyncio.run(scenario(server.url))
    assert all(c.is_closed() for c in shared)


def test_every_client_verifies_tls_with_one_context_that_still_verifies(monkeypatch) -> None:
    """Clients of both providers (two keys, two clients) share the process's TLS context
    instead of loading the CA certificates each; it is the HTTP library's verifying default,
    not a context that trusts anything."""
    import ssl

    monkeypatch.setenv("LIMBO_OTHER_KEY", "another-key-for-this-endpoint")
    url = "http://127.0.0.1:9"
    made = [make_adapter(SPECS[api].format(url=url)) for api in SPECS]
    made.append(make_adapter(SPECS["chat"].format(url=url) + "&api_key_env=LIMBO_OTHER_KEY"))
    contexts = [a._make_client(a._key)._client._transport.ssl_context for a in made]
    context = contexts[0]
    assert all(c is context for c in contexts) and isinstance(context, ssl.SSLContext)
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert context.cert_store_stats()["x509_ca"] > 0  # a CA bundle is loaded


def test_provider_adapters_behind_the_gateway_share_the_runs_client(make_cell) -> None:
    """A production-harness episode serves its harness from a gateway started inside the
    episode; the provider adapter answering there takes the run's client too."""
    import openai

    from limbo.episode.briefing import context
    from limbo.gateway import Gateway
    from limbo.sim.world import World

    ctx = context(World.of(make_cell("charge_invoice")))

    async def scenario(url: str) -> tuple[int, list[str]]:
        async with clients.shared_clients() as pool:
            gw = Gateway()
            await gw.start()
            names = []
            for episode in ("e1", "e2"):
                gw.open(episode, make_adapter(SPECS["chat"].format(url=url)), ctx)
                harness = openai.AsyncOpenAI(api_key="none", base_url=gw.base_url(episode),
                                             max_retries=0)
                reply = await harness.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": "go"}],
                    tools=[{"type": "function", "function": {
                        "name": "wait", "parameters": {"type": "object"}}}])
                names.append(reply.choices[0].message.tool_calls[0].function.name)
                await harness.close()
            await gw.stop()
            return pool.made, names

    with serve_in_thread(Pace(latency_s=0)) as server:
        assert asyncio.run(scenario(server.url)) == (1, ["wait", "wait"])


def test_a_run_opens_connections_per_call_in_flight_not_per_episode(tmp_path, capsys) -> None:
    with serve_in_thread(Pace(latency_s=0.01)) as server:
        out = _limbo_run(tmp_path, SPECS["chat"].format(url=server.url), episodes=12,
                         concurrency=3)
        counts = server.counts
        assert counts.answered == 24
        # one client, its connections reused by every episode (a client per episode would
        # open at least 12); the extra one is the run's reachability check before it starts
        assert counts.connections <= 3 + 1
        _eventually(lambda: counts.open_connections == 0)  # closed when the run ended
    assert {r["outcome"]["termination"] for r in _records(out)} == {"finished"}


@pytest.mark.parametrize("api", list(SPECS))
def test_a_model_call_hands_control_to_the_event_loop_once(api, make_cell) -> None:
    """The episodes of a run share one event loop. A call that yields to it several times
    (the default httpx transport: about four) keeps the answers that arrive together in
    lockstep: each waits for every other one to be processed. Counted on a task of its own:
    every wait for something not yet done is one hand-over."""
    from limbo.episode.briefing import context
    from limbo.episode.models import Message
    from limbo.harnesses.toolcalls import tool_defs
    from limbo.sim.world import World

    world = World.of(make_cell("charge_invoice"))
    ctx, tools = context(world), tool_defs(world)
    waits: list[object] = []

    async def scenario(url: str) -> None:
        async with clients.shared_clients():
            adapter = make_adapter(SPECS[api].format(url=url) + "&max_attempts=1")
            messages = [Message(role="user", content="go")]
            await adapter.generate(messages, tools, ctx)  # opens the connection
            loop = asyncio.get_running_loop()
            loop.set_task_factory(lambda loop, coro, **kw: asyncio.Task(
                _Counted(coro, waits), loop=loop, **kw))
            for _ in range(10):
                await asyncio.ensure_future(adapter.generate(messages, tools, ctx))
            loop.set_task_factory(None)

    with serve_in_thread(Pace(latency_s=0.001)) as server:
        asyncio.run(scenario(server.url))
    assert len(waits) == 10, waits


class _Counted(collections.abc.Coroutine):  # type: ignore[type-arg]
    """A coroutine that notes each future it waits on."""

    def __init__(self, coro, waits: list[object]) -> None:
        self.coro, self.waits = coro, waits

    def send(self, value):
        out = self.coro.send(value)
        self.waits.append(out)
        return out

    def throw(self, *args):
        return self.coro.throw(*args)

    def close(self) -> None:
        self.coro.close()

    def __await__(self):
        return self.coro.__await__()


# ------------------------------------------------------------------ a rate-limited endpoint


@pytest.mark.parametrize("api", list(SPECS))
def test_a_wide_run_against_a_rate_limit_ends_without_model_errors(tmp_path, capsys, monkeypatch,
                                                                    api) -> None:
    from limbo.commands import run_output as run_command

    monkeypatch.setattr(run_command, "PROGRESS_EVERY_S", 0.0)
    pace = Pace(latency_s=0.05, max_in_flight=3, retry_after_s=0.1)
    with serve_in_thread(pace) as server:
        out = _limbo_run(tmp_path, SPECS[api].format(url=server.url), episodes=24,
                         concurrency=24, quiet=False)
        counts = server.counts
    records = _records(out)
    assert len(records) == 24
    assert [r["outcome"]["termination"] for r in records] == ["finished"] * 24
    assert counts.answered == 48 and counts.peak_in_flight <= 3
    assert 0 < counts.refused < 48  # the limit was hit, and the limiter stopped the stampede
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("[limbo]")]
    shown = [line.split("model calls ")[1] for line in lines if "model calls " in line]
    assert shown and all(" in flight / limit " in text for text in shown)
    limits = [int(text.rsplit(" ", 1)[1]) for text in shown]
    # The limit came down from 128 to what the endpoint accepts (3). Between refusals the
    # limiter probes one call above it (additive increase), so a line printed mid-probe shows 4:
    # which one each line catches depends on when episodes end, so either counts.
    assert min(limits) <= 4


def _limbo_run(tmp_path: Path, spec: str, episodes: int, concurrency: int,
               quiet: bool = True) -> Path:
    from limbo.cli import main

    out = tmp_path / "run"
    argv = ["run", "default", "--model", spec, "--limit", str(episodes), "--concurrency",
            str(concurrency), "--out", str(out), "--no-cache", *(["--quiet"] if quiet else [])]
    assert main(argv) == 0
    return out


def _records(out: Path) -> list[dict]:
    return [json.loads(line) for path in sorted(out.glob("episodes*.jsonl"))
            for line in path.read_text().splitlines()]


def _eventually(check, tries: int = 200) -> None:
    import time

    for _ in range(tries):
        if check():
            return
        time.sleep(0.01)
    assert check()
