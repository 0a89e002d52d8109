"""Running the simulated clock: :func:`run_until` and :func:`run_process`, what
``simpy.Environment.run(until=...)`` does, step for step, without its stop machinery.

``env.run(until=...)`` schedules a stop event (or hangs a callback on the awaited process) and
leaves its loop by raising :class:`simpy.core.StopSimulation`. An episode runs the clock that
way four to seven times — each model turn's think time, each tool call — and the event, the
callback and the exception cost several times the events they wait for (about 4 µs of 4.5
to advance an idle clock). These loops stop by looking at the queue instead. They take the
events ``run`` would take, in its order, and leave the clock where it leaves it, so a world's
history — and its record — is the same either way. (``run`` also re-queues its stop event as a
no-op and so draws more event ids; ids only order events of one time and priority, and later
ones stay later.)
"""

from __future__ import annotations

from typing import Any, cast

import simpy
from simpy.events import URGENT


def run_until(env: simpy.Environment, at: float) -> None:
    """``env.run(until=at)``: every event before ``at``, and those already scheduled at ``at``
    with the stop event's urgent priority ahead of it; then the clock stands at ``at`` as
    ``run`` computes it (``now + (at - now)``, which a float may round)."""
    now = env.now
    if at <= now:
        raise ValueError(f"until ({at}) must be greater than the current simulation time")
    stop = now + (at - now)
    stop_id = next(env._eid)  # run's stop event's id: events scheduled from now on follow it
    queue, step = env._queue, env.step
    while queue:
        t, priority, eid, _ = queue[0]
        if t < stop or (t == stop and priority == URGENT and eid < stop_id):
            step()
        else:
            break
    env._now = stop


def run_process(env: simpy.Environment, proc: simpy.Process) -> Any:
    """``env.run(until=proc)``: step until ``proc`` has been processed; its value, or its
    exception raised as ``run`` raises it (the same object, so the same innermost frame)."""
    if proc.processed:
        return proc.value
    proc._defused = True  # its failure is raised here, not by step() as a copy
    queue, step = env._queue, env.step
    while _pending(proc):
        if not queue:
            raise RuntimeError(f'No scheduled events left but "until" event was not triggered: '
                               f"{proc}")
        step()
    if not proc.ok:
        raise cast(BaseException, proc.value)
    return proc.value


def _pending(event: simpy.Event) -> bool:
    """Whether ``event`` is yet to be processed (a call, so that a type checker does not take
    the loop's test for a constant once it has seen it false)."""
    return not event.processed
