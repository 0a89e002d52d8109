"""Reference policies: deterministic scripted agents that follow the task plan.

They are the offline "models": no API, same adapter interface as a real model. Each is a
script (a generator) that yields tool calls and receives their results; the adapter feeds it
the last tool result from the conversation. Policies ignore prompt text, so prompt conditions
cannot change what they do — by design, and the tables say so.

What they do after an ambiguous write failure (timeout, 5xx, reset):

* ``blind`` re-issues up to twice and never reads;
* ``give-up`` stops and reports the action as uncertain;
* ``verify`` reads back at once and re-issues only if the effect is not visible (a partial
  batch: only the missing rows);
* ``wait-verify`` waits ``wait`` seconds first;
* ``keyed`` sends a key on every write that takes one and re-issues with the same key where the
  contract honours it, else verifies;
* ``profile`` is a seeded mixture of those behaviours, for realistic variance across
  "models" when testing the analysis.

Each policy is a :class:`Policy` registered with :func:`policy`: its parameters are the
model's fields and :meth:`Policy.behaviour` sets the knobs of :class:`Behaviour` that the one
script follows. Reads that verify a write come from :func:`limbo.sim.readback.resolve`, the same
resolution the scaffolds and the guard use. Facts a scaffold condition attaches to a result
(``verification``, ``oracle``) replace the policy's own read when present.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from limbo.base.errors import UsageError
from limbo.base.hashing import digest
from limbo.base.registry import lookup, registrar
from limbo.base.rng import generator
from limbo.episode.briefing import ReferenceAdapter, ReferenceContext
from limbo.episode.models import (
    EpisodeContext,
    Message,
    ModelTurn,
    ToolCall,
    ToolDef,
    model_adapter,
)
from limbo.harnesses.tool_text import read_result
from limbo.sim.readback import resolve
from limbo.sim.results import Result, error_kind, is_ambiguous
from limbo.sim.service import OpSpec
from limbo.sim.tasks import Step, dig, fill
from limbo.sim.tools import KEY_FIELD

Call = tuple[str, dict[str, Any]]
Script = Generator[Call, Result, None]

MAX_ATTEMPTS = 3


@dataclass
class Behaviour:
    """The knobs every reference policy is a setting of."""

    verify: bool = False
    keys: bool = False
    wait_s: float = 0.0
    retries_blind: int = 0
    give_up: bool = False
    honest: bool = True
    check_success: bool = False


@dataclass
class ScriptRun:
    """Per-episode state of a script."""

    ctx: EpisodeContext
    key: ReferenceContext
    b: Behaviour
    env: dict[str, Any] = field(default_factory=dict)
    uncertain: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)


def _found_fields(item: dict[str, Any], step: Step) -> dict[str, Any]:
    return {name: item[path.split(".")[-1]] for name, path in step.save.items()
            if path.split(".")[-1] in item}


def _fact_item(result: Result) -> dict[str, Any] | None:
    """The first item a scaffold's read-back found (it carries ids the plan saves)."""
    check = (result.get("error") or {}).get("verification") or {}
    items = check.get("items") or []
    return items[0] if check.get("visible") and items else None


class _Known(dict[str, Any]):
    """The plan's variables; one a policy could not learn (a scaffold said the write is done
    but no read showed its id) is written as unknown rather than crashing the script."""

    def __missing__(self, key: str) -> str:
        return "(unknown)"


def _last_result(messages: list[Message]) -> Message:
    """The last tool result, skipping messages a scaffold added after it (``reflect``)."""
    i = len(messages) - 1
    while i > 0 and messages[i].role == "user" and messages[i - 1].role in ("tool", "user"):
        i -= 1
    return messages[i]


def _facts(result: Result) -> tuple[bool | None, list[int] | None]:
    """What a scaffold told us: (effect visible?, missing batch rows) or (None, None)."""
    err = result.get("error") or {}
    oracle = err.get("oracle") or result.get("oracle")
    if oracle is not None:
        return bool(oracle.get("committed") or oracle.get("will_commit")), oracle.get("missing_units")
    check = err.get("verification") or result.get("verification")
    if check is not None and check.get("visible") is not None:
        return bool(check["visible"]), check.get("missing_units")
    return None, None


Verified = tuple[bool, list[int] | None, bool, dict[str, Any] | None]


def _verify(run: ScriptRun, step: Step, tool: str, args: dict[str, Any],
            wait_lag: bool) -> Generator[Call, Result, Verified]:
    """Read the effect back. Returns (visible, missing_units, conclusive, item)."""
    op = run.key.tool_specs[tool].op
    plan = resolve(op, args) if op is not None else None
    if plan is None or plan.lag is None:
        return False, None, False, None
    lag = plan.lag
    if wait_lag and lag > 0:
        yield ("wait", {"seconds": lag + 1})
    if run.b.wait_s > 0 and not wait_lag:
        yield ("wait", {"seconds": run.b.wait_s})
    seen = plan.check((yield (plan.tool, dict(plan.args))))
    if seen.visible is None:
        return False, None, False, None
    conclusive = lag == 0 or wait_lag or run.b.wait_s > lag
    if plan.units is not None:
        return seen.visible, seen.missing, conclusive, None
    return seen.visible, None, conclusive, (seen.items[0] if seen.items else None)


def _service_op(run: ScriptRun, step: Step) -> OpSpec:
    """The service operation behind a write step (a plan names writes of services only)."""
    op = run.key.tool_specs[step.tool].op
    if op is None:
        raise TypeError(f"plan step {step.id!r}: {step.tool!r} is not a service write")
    return op


def _keyed(run: ScriptRun, step: Step, args: dict[str, Any]) -> dict[str, Any]:
    """``args`` with the policy's idempotency key, when it uses keys and the tool takes one.
    The key comes from what the agent knows (never the episode id, which names the fault)."""
    if not (run.b.keys and run.key.tool_specs[step.tool].accepts_key):
        return args
    seen = [run.ctx.seed, run.key.plan.id, run.key.vars, step.id]
    return {**args, KEY_FIELD: f"k-{digest(seen, 12)}"}


def _write(run: ScriptRun, step: Step, args: dict[str, Any]) -> Generator[Call, Result, bool]:
    """Carry out one write step with the policy's recovery behaviour. Returns success."""
    tool = step.tool
    op = _service_op(run, step)
    args = _keyed(run, step, args)
    plain = {k: v for k, v in args.items() if k != KEY_FIELD}
    honoured = KEY_FIELD in args and op.honours_key(run.ctx.contract, plain)
    attempts = 0
    while True:
        attempts += 1
        result = yield (tool, args)
        kind = error_kind(result)
        if kind is None:
            if run.b.check_success and attempts == 1:
                shown, _, conclusive, _ = yield from _verify(run, step, tool, plain,
                                                             wait_lag=True)
                if not shown and conclusive:  # no read path: a success cannot be checked
                    continue
            run.env.update({n: dig(result, p) for n, p in step.save.items()})
            return True
        if kind == "rate_limited" and not run.b.give_up and attempts < MAX_ATTEMPTS:
            yield ("wait", {"seconds": float(result["error"].get("retry_after_s") or 1.0)})
            continue
        if kind == "conflict" and attempts > 1 and op.idempotency != "none":
            return True  # a natural/conditional write already took effect
        if not is_ambiguous(result) or run.b.give_up or attempts >= MAX_ATTEMPTS:
            if is_ambiguous(result):
                run.uncertain.append(step.id)
            return False
        if run.b.retries_blind:
            if attempts > run.b.retries_blind:
                return False
            continue
        if honoured:
            continue  # the same key makes the re-issue safe
        (visible, missing), conclusive = _facts(result), True
        item = _fact_item(result)
        if visible is None:
            visible, missing, conclusive, item = yield from _verify(run, step, tool, plain, False)
        if not conclusive:
            run.uncertain.append(step.id)
        if visible:
            if item is not None:
                run.env.update(_found_fields(item, step))
            return True
        if missing is not None and op.batch is not None:
            args = op.batch.narrow(args, missing)


def script(run: ScriptRun) -> Script:
    """Follow the plan step by step, then finish with a report."""
    plan = run.key.plan
    run.env = dict(run.key.vars)
    for step in plan.steps:
        args = fill(step.args, _Known(run.env))
        if step.intent is None:
            result = yield (step.tool, args)
            run.env.update({n: dig(result, p) for n, p in step.save.items()} if result.get("ok") else {})
            continue
        done = yield from _write(run, step, args)
        if not done:
            run.failed.append(step.id)
            if run.b.give_up or not run.b.retries_blind:
                break
    yield ("finish", _report(run))


def _report(run: ScriptRun) -> dict[str, Any]:
    if not run.b.honest:
        return {"status": "completed", "summary": "All steps done.", "uncertain_actions": []}
    status = "failed" if run.failed else "completed"
    uncertain = sorted(set(run.uncertain))
    summary = "All steps done." if not run.failed else f"Stopped at {run.failed[0]}."
    return {"status": status, "summary": summary, "uncertain_actions": uncertain}


class Policy(BaseModel):
    """A reference policy. Its parameters are the model's fields (``policy/<name>?field=value``),
    validated strictly — a typo or an out-of-range value is an error, never a new cell — and
    :meth:`behaviour` turns them into the knobs the script follows. Register with
    :func:`policy`; ``limbo list models`` shows each policy with its parameters."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    name: ClassVar[str]

    def behaviour(self, seed: int) -> Behaviour:
        """The knobs for one episode (``seed``: the cell's, for policies that draw)."""
        raise NotImplementedError(f"{type(self).__name__} must implement behaviour()")


policy = registrar("policy", Policy)
"""Class decorator: ``@policy("verify")`` registers a :class:`Policy` subclass as
``policy/verify`` (and under every provider built on :class:`PolicyAdapter`)."""

SECONDS = "a number of seconds in [0, 3600]"
PROBABILITY = "a probability in [0, 1]"
CHECK = "true or false (also verify after a success)"


@policy("blind")
class Blind(Policy):
    """Re-issues an ambiguous write up to twice, never reads; reports success."""

    def behaviour(self, seed: int) -> Behaviour:
        return Behaviour(retries_blind=2, honest=False)


@policy("give-up")
class GiveUp(Policy):
    """Never re-issues; reports the action as failed and uncertain."""

    def behaviour(self, seed: int) -> Behaviour:
        return Behaviour(give_up=True)


@policy("verify")
class Verify(Policy):
    """Reads back at once; re-issues only what is not visible."""

    check_success: bool = Field(False, description=CHECK)

    def behaviour(self, seed: int) -> Behaviour:
        return Behaviour(verify=True, check_success=self.check_success)


@policy("wait-verify")
class WaitVerify(Policy):
    """Waits ``wait`` seconds, then as verify."""

    wait: float = Field(120.0, ge=0, le=3600, description=SECONDS)

    def behaviour(self, seed: int) -> Behaviour:
        return Behaviour(verify=True, wait_s=float(self.wait))


@policy("keyed")
class Keyed(Policy):
    """Keys every write that takes one; re-issues with that key where honoured, else verifies."""

    check_success: bool = Field(False, description=CHECK)

    def behaviour(self, seed: int) -> Behaviour:
        return Behaviour(verify=True, keys=True, check_success=self.check_success)


PRESETS: dict[str, dict[str, float]] = {
    "careful": {"p_verify": 0.95, "p_key": 0.6, "p_wait": 0.2, "wait_s": 120, "p_honest": 0.9},
    "hasty": {"p_verify": 0.3, "p_key": 0.1, "p_wait": 0.0, "wait_s": 0, "p_honest": 0.3},
    "mixed": {"p_verify": 0.7, "p_key": 0.3, "p_wait": 0.1, "wait_s": 60, "p_honest": 0.6},
}


@policy("profile")
class Profile(Policy):
    """A seeded mixture of the behaviours above (a preset, each probability overridable)."""

    preset: Literal["careful", "hasty", "mixed"] = Field(
        "mixed", description=f"one of {', '.join(PRESETS)}")
    p_verify: float | None = Field(None, ge=0, le=1, description=PROBABILITY)
    p_key: float | None = Field(None, ge=0, le=1, description=PROBABILITY)
    p_wait: float | None = Field(None, ge=0, le=1, description=PROBABILITY)
    p_honest: float | None = Field(None, ge=0, le=1, description=PROBABILITY)
    wait_s: float | None = Field(None, ge=0, le=3600, description=SECONDS)

    def behaviour(self, seed: int) -> Behaviour:
        p = {**PRESETS[self.preset], **self.model_dump(exclude_none=True, exclude={"preset"})}
        rng = generator(seed, "policy.profile")
        verify = rng.random() < float(p["p_verify"])
        return Behaviour(verify=verify, keys=rng.random() < float(p["p_key"]),
                         wait_s=float(p["wait_s"]) if rng.random() < float(p["p_wait"]) else 0.0,
                         retries_blind=0 if verify else 2,
                         honest=rng.random() < float(p["p_honest"]))


def make_policy(name: str, params: dict[str, Any]) -> Policy:
    """Policy ``name`` with ``params``; a one-line :class:`UsageError` naming the problem."""
    cls = lookup("policy", name)
    try:
        return cls.model_validate(params)  # type: ignore[no-any-return]
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        field = str(err["loc"][0]) if err["loc"] else "(parameters)"
        if err["type"] == "extra_forbidden":
            known = ", ".join(cls.model_fields) or "none"
            raise UsageError(f"policy/{name} takes no parameter {field!r}; it takes: {known}") \
                from None
        info = cls.model_fields.get(field)
        what = f"must be {info.description}" if info and info.description else err["msg"]
        raise UsageError(f"policy/{name}: {field} {what}") from None


@model_adapter("policy")
class PolicyAdapter(ReferenceAdapter):
    """``policy/<name>``: a reference policy behind the model-adapter interface.

    It follows the answer key the episode briefs it with (:mod:`limbo.episode.briefing`)."""

    trusted = True
    offline = True

    def __init__(self, model: str, **params: Any) -> None:
        self.policy = make_policy(model, params)
        super().__init__(model, **params)
        self._script: Script | None = None
        self._calls = 0

    @classmethod
    def price_per_mtok(cls, model: str, params: dict[str, Any]) -> dict[str, float] | None:
        return {"input": 0.0, "cached_input": 0.0, "output": 0.0}

    async def generate(
        self, messages: list[Message], tools: list[ToolDef], ctx: EpisodeContext
    ) -> ModelTurn:
        if self._script is None:
            run = ScriptRun(ctx, self.key(), self.policy.behaviour(ctx.seed))
            self._script = script(run)
            name, args = next(self._script)
        else:
            last = _last_result(messages)
            result = read_result(last.content) if last.role == "tool" else {"ok": False, "error": {
                "kind": "invalid_argument", "message": last.content}}
            try:
                name, args = self._script.send(result)
            except StopIteration:
                return ModelTurn(text="done")
        self._calls += 1
        return ModelTurn(tool_calls=[ToolCall(id=f"call_{self._calls}", name=name, arguments=args)])
