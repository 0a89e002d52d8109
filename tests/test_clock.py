"""The sim floor's clock loops (limbo/sim/clock.py) take the events simpy's own ``env.run``
takes, in its order, and leave the clock where it leaves it."""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import pytest
import simpy
from simpy.events import URGENT

from limbo.sim.clock import run_process, run_until


def _world(log: list[tuple[float, str]]) -> tuple[simpy.Environment, simpy.Process]:
    """Processes that wake at equal times, urgent events exactly at the stop time (one
    scheduled before the stop, one after), and a process that ends at 2.5."""
    env = simpy.Environment()

    def ticker(name: str, step: float) -> Generator[simpy.Event, Any, None]:
        while True:
            yield env.timeout(step)
            log.append((env.now, name))

    def urgent(name: str, delay: float) -> None:
        event = env.event()
        event.callbacks.append(lambda _e: log.append((env.now, name)))
        event._ok, event._value = True, None
        env.schedule(event, URGENT, delay)

    def urgent_at_stop() -> Generator[simpy.Event, Any, None]:
        yield env.timeout(1.0)
        urgent("after the stop", 1.0)  # at 2.0 too, but scheduled after the stop was

    def ends() -> Generator[simpy.Event, Any, str]:
        yield env.timeout(2.5)
        return "done"

    env.process(ticker("a", 0.5))
    env.process(ticker("b", 1.0))
    env.process(urgent_at_stop())
    urgent("before the stop", 2.0)  # at 2.0, urgent, scheduled before the stop
    return env, env.process(ends())


def _trace(advance: Callable[[simpy.Environment, float], Any],
           wait: Callable[[simpy.Environment, simpy.Process], Any]) -> list[Any]:
    log: list[tuple[float, str]] = []
    env, proc = _world(log)
    advance(env, 2.0)
    seen: list[Any] = [env.now, list(log)]
    seen.append(wait(env, proc))
    advance(env, env.now + 0.1 + 0.2)  # a float sum: the clock stands where run puts it
    seen += [env.now, log]
    return seen


def test_the_loops_match_env_run_event_for_event() -> None:
    ours = _trace(run_until, run_process)
    simpys = _trace(lambda env, at: env.run(until=at), lambda env, p: env.run(until=p))
    assert ours == simpys
    assert (2.0, "before the stop") in ours[1]
    assert (2.0, "after the stop") not in ours[1]


def test_a_failed_process_raises_its_own_exception() -> None:
    env = simpy.Environment()
    boom = ValueError("boom")

    def fails() -> Generator[simpy.Event, Any, None]:
        yield env.timeout(1)
        raise boom

    with pytest.raises(ValueError) as caught:
        run_process(env, env.process(fails()))
    assert caught.value is boom


def test_a_process_nothing_can_finish_is_refused_as_env_run_refuses_it() -> None:
    env = simpy.Environment()

    def stuck() -> Generator[simpy.Event, Any, None]:
        yield env.event()  # never fired

    with pytest.raises(RuntimeError, match="No scheduled events left"):
        run_process(env, env.process(stuck()))
    with pytest.raises(ValueError, match="must be greater"):
        run_until(env, env.now)
