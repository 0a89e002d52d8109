"""The boundary: the one path every tool call takes from an agent to a service.

``validate → transport chain → endpoint → service``. Validation answers bad input with a
structured ``invalid_argument`` before any fault or service code runs. The transport chain is a
stack of :class:`Transport` objects in the manner of HTTP client transports: the innermost one
(:class:`ServiceTransport`) carries a request to the endpoint with the normal latency, and each
fault wraps the one inside it. A transport's ``handle`` is a simpy process generator, so a fault
can hold a response, drop it, or deliver a request later while the clock runs on.
"""

from __future__ import annotations

import json
import math
from collections.abc import Generator
from typing import Any, Protocol, cast

import simpy
from pydantic import ValidationError

from limbo.base.hashing import canonical_json
from limbo.base.rng import Rng
from limbo.sim.clock import run_process, run_until
from limbo.sim.endpoint import Endpoint
from limbo.sim.events import EventLog
from limbo.sim.request import Request
from limbo.sim.results import Result, error, ok
from limbo.sim.tools import KEY_FIELD, ToolSpec

Process = Generator[simpy.Event, Any, Result]


class Transport(Protocol):
    """Carries one request and returns the response the agent will see."""

    def handle(self, req: Request) -> Process: ...


class ServiceTransport:
    """The innermost transport: half the round trip out, deliver, half back."""

    def __init__(self, env: simpy.Environment, endpoint: Endpoint, read_s: float, write_s: float):
        self.env = env
        self.endpoint = endpoint
        self.read_s = read_s
        self.write_s = write_s

    def latency(self, req: Request) -> float:
        return self.read_s if req.op.kind == "read" else req.round_trip(self.write_s)

    def handle(self, req: Request) -> Process:
        half = self.latency(req) / 2
        yield self.env.timeout(half)
        result = self.endpoint.deliver(req)
        yield self.env.timeout(half)
        return result


def _short(part: object, limit: int = 40) -> str:
    """A location part as shown to the agent: an oversized dict key is cut, not echoed."""
    text = str(part)
    return text if len(text) <= limit else f"{text[:limit]}..."


class _Refused(ValueError):
    """The arguments are not a JSON object; the message is what the agent is told."""


class _NonFinite(_Refused):
    """Arguments hold NaN or Infinity. ``json.loads`` and Python dicts accept them, JSON does
    not: one reaching the ledger would make the episode record invalid JSON."""

    def __init__(self, constant: str) -> None:
        super().__init__(f"arguments hold {constant}: only finite numbers are accepted")


def _refuse_constant(name: str) -> Any:
    raise _NonFinite(name)


def _check_finite(value: Any) -> None:
    """Raise :class:`_NonFinite` at the first non-finite float, in the order ``json.dumps``
    writes them — so a dict and its JSON text are refused with the same message. Iterative,
    so a deeply nested value cannot exhaust the stack. Nearly every call's arguments are one
    flat object of text, integers and flags: those pass in one loop, without the stack."""
    if type(value) is dict:
        for item in value.values():
            kind = type(item)
            if kind is not str and kind is not int and kind is not bool and item is not None:
                break
        else:
            return
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            raise _NonFinite("NaN" if math.isnan(item) else ("Infinity" if item > 0 else "-Infinity"))
        if isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, (list, tuple)):
            stack.extend(reversed(item))


def _decode(raw_args: Any) -> dict[str, Any]:
    """The arguments as a dict of plain JSON values; raises :class:`_Refused` otherwise."""
    if isinstance(raw_args, str):
        try:
            raw_args = json.loads(raw_args, parse_constant=_refuse_constant) if raw_args.strip() else {}
        except json.JSONDecodeError as exc:
            raise _Refused(f"arguments are not valid JSON: {exc.msg}") from exc
    if not isinstance(raw_args, dict):
        raise _Refused("arguments must be a JSON object")
    _check_finite(raw_args)
    return raw_args


def _describe_errors(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors(include_input=False, include_url=False)[:5]:
        loc = ".".join(_short(p) for p in err["loc"]) or "(arguments)"
        parts.append(f"{loc}: {err['msg']}")
    return "; ".join(parts)


class Boundary:
    """Validates calls, labels attempts, and runs them through the transport chain."""

    def __init__(self, env: simpy.Environment, log: EventLog, tools: dict[str, ToolSpec],
                 transport: Transport, max_wait_s: float, latency_rng: Rng | None = None) -> None:
        self.env = env
        self.latency_rng = latency_rng
        """Draws the round trips of writes that declare a latency (world files)."""
        self.log = log
        self.tools = tools
        self.transport = transport
        self.max_wait_s = max_wait_s
        self._requests = 0
        self._seen: dict[str, int] = {}

    def validate(self, name: str, raw_args: Any) -> tuple[ToolSpec, dict[str, Any]] | Result:
        """The tool and its validated arguments, or an ``invalid_argument`` result."""
        spec = self.tools.get(name)
        if spec is None:
            return error("invalid_argument", f"unknown tool {name[:80]!r}; available tools: "
                         f"{', '.join(self.tools)}")
        try:
            validated = spec.model.model_validate(_decode(raw_args))
        except _Refused as exc:
            return error("invalid_argument", str(exc))
        except ValidationError as exc:
            return error("invalid_argument", f"{name}: {_describe_errors(exc)}")
        return spec, validated.model_dump()

    def call(self, name: str, raw_args: Any, attempt: str | None = None) -> Result:
        """Validate and execute one call, advancing the clock until its response arrives."""
        checked = self.validate(name, raw_args)
        if isinstance(checked, dict):
            return checked
        spec, args = checked
        if spec.kind == "utility":
            return self._utility(spec, args)
        key = args.pop(KEY_FIELD, None) if spec.accepts_key else None
        assert spec.op is not None
        if attempt is None:  # only writes are re-issued; reads need no label
            attempt = self._attempt(spec, args) if spec.kind == "write" else "original"
        draw = spec.op.latency
        round_trip = (draw(self.latency_rng) if draw is not None and self.latency_rng is not None
                      else None)
        req = Request(id=self._next_id(), op=spec.op, args=args, key=key, attempt=attempt,
                      issued_at=self.env.now, round_trip_s=round_trip)
        return self.send(req)

    def send(self, req: Request) -> Result:
        """Run ``req`` through the transport chain; returns when the response arrives."""
        proc = self.env.process(self.transport.handle(req))
        return cast(Result, run_process(self.env, proc))

    def _next_id(self) -> str:
        self._requests += 1
        return f"r{self._requests}"

    def _attempt(self, spec: ToolSpec, args: dict[str, Any]) -> str:
        """``original`` for the first call of its kind, ``reissue-n`` for the n-th repeat. A
        batch write is the same call whatever rows it carries: re-sending only the rows a
        partial batch left out is a reissue of that batch, not a new write."""
        assert spec.op is not None
        batch = spec.op.batch
        basis = batch.basis(args) if batch is not None else args
        fingerprint = canonical_json([spec.name, basis])  # a key of this episode's table only
        n = self._seen.get(fingerprint, 0)
        self._seen[fingerprint] = n + 1
        return "original" if n == 0 else f"reissue-{n}"

    def _utility(self, spec: ToolSpec, args: dict[str, Any]) -> Result:
        if spec.name == "wait":
            seconds = min(float(args["seconds"]), self.max_wait_s)
            self.log.emit("clock", reason="wait", seconds=seconds)
            until = self.env.now + seconds
            if until > self.env.now:  # a wait too small to move a float clock is a no-op
                run_until(self.env, until)
            return ok(waited_s=seconds)
        return error("invalid_argument", f"{spec.name} is handled by the harness, not the boundary")
