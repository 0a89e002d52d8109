"""Scaffold recovery conditions: the tool layer (or the loop) acts, the prompt stays ``vanilla``.

Each wraps the tool layer every harness goes through, so it behaves the same under the minimal
loop and behind the MCP server, and records what it does as ``condition`` events (the guard
records ``guard`` events). What they add to a result is structured (``verification``,
``oracle`` inside the error; ``guard`` receipts) so that reference policies can use it; any
sentence a model reads comes from a prompt file, hashed into the episode header.

* ``reflect`` — after a failed write, the loop asks the model to assess it (a user message).
* ``sdk-retry`` — retries like the official LLM SDKs: up to 2 more attempts on timeout, 5xx,
  reset or 429, backoff ``min(0.5·2ⁿ, 8)`` s × seeded jitter in [0.75, 1] (or the server's
  ``retry_after_s``), no key added, the model sees only the last outcome.
* ``vbr`` and ``wait-Δ`` — after an ambiguous write failure, read the effect back (after Δ s)
  and attach what the read showed.
* ``state-oracle`` / ``outcome-oracle`` — attach the truth now / the eventual truth.
* ``guard`` — the action guard (:mod:`limbo.harnesses.guard`).
"""

from __future__ import annotations

from typing import Any, ClassVar

from limbo.base.rng import generator
from limbo.episode.condition import Condition, Scaffold, ToolLayer, condition
from limbo.harnesses.guard.sandbox import GuardLayer, read_back
from limbo.sim.results import Result, error_kind, is_ambiguous
from limbo.sim.tools import KEY_FIELD
from limbo.sim.world import World

RETRYABLE = frozenset({"timeout", "server_error", "connection_reset", "rate_limited"})
MAX_RETRIES = 2
BACKOFF_BASE_S = 0.5
BACKOFF_CAP_S = 8.0
MAX_RETRY_AFTER_S = 60.0
WAITS_S = (0, 60, 120, 300, 3600)


def _emit(world: World, name: str, action: str, **fields: Any) -> None:
    world.emit("condition", name=name, action=action, **fields)


def _is_write(world: World, tool: str) -> bool:
    spec = world.specs.get(tool)
    return spec is not None and spec.kind == "write"


def _plain_args(world: World, tool: str, args: Any) -> dict[str, Any] | None:
    """The validated arguments of a call, key removed (``None`` if they do not validate)."""
    checked = world.validate(tool, args)
    if isinstance(checked, dict):
        return None
    plain = dict(checked[1])
    plain.pop(KEY_FIELD, None)
    return plain


def _with_error_field(result: Result, name: str, value: Any) -> Result:
    return {**result, "error": {**result["error"], name: value}}


# -- reflect ----------------------------------------------------------------------------------


@condition("reflect", "after a failed write the loop asks the model to assess it")
class Reflect(Scaffold):
    note_files = ("reflect",)

    def followup(self, tool: str, result: Result, world: Any) -> str | None:
        if result.get("ok") or not _is_write(world, tool):
            return None
        _emit(world, self.name, "followup", tool=tool, after=error_kind(result))
        return self.note("reflect")


# -- sdk-retry --------------------------------------------------------------------------------


class SdkRetryLayer:
    """Retries a failed write as the official SDKs do, on the sim clock."""

    def __init__(self, layer: ToolLayer, world: World, name: str) -> None:
        self.layer, self.world, self.name = layer, world, name
        self.rng = generator(world.cell.seed, "condition.sdk-retry")

    def delay(self, n: int, result: Result) -> float:
        """Seconds before retry ``n`` (0-based): the server's ``retry_after_s`` when it gives a
        usable one, else capped exponential backoff with jitter in [0.75, 1]."""
        after = result["error"].get("retry_after_s")
        if after is not None and 0 < float(after) <= MAX_RETRY_AFTER_S:
            return float(after)
        jitter = 0.75 + 0.25 * self.rng.random()
        return min(BACKOFF_BASE_S * 2.0**n, BACKOFF_CAP_S) * jitter

    def call(self, name: str, args: Any) -> Result:
        result = self.layer.call(name, args)
        if not _is_write(self.world, name):
            return result
        for n in range(MAX_RETRIES):
            kind = error_kind(result)
            if kind not in RETRYABLE:
                break
            wait = self.delay(n, result)
            attempt = f"scaffold_retry-{n + 1}"
            _emit(self.world, self.name, "retry", tool=name, attempt=attempt, after=kind,
                  wait_s=wait)
            self.world.advance(wait)
            # the request exactly as the model sent it: no key added, a key it sent kept
            result = self.world.call(name, args, attempt=attempt)
            _emit(self.world, self.name, "retried", tool=name, attempt=attempt,
                  outcome=error_kind(result) or "ok")
        return result


@condition("sdk-retry", "the tool layer retries failed writes like the LLM SDKs (no key)")
class SdkRetry(Scaffold):
    def wrap(self, layer: ToolLayer, world: Any) -> ToolLayer:
        return SdkRetryLayer(layer, world, self.name)


# -- vbr and wait-Δ ---------------------------------------------------------------------------


class AfterAmbiguousWrite:
    """A tool layer that adds facts to the result of a write that failed ambiguously."""

    def __init__(self, layer: ToolLayer, world: World, condition: Condition) -> None:
        self.layer, self.world, self.condition = layer, world, condition
        self.name = condition.name

    def call(self, name: str, args: Any) -> Result:
        result = self.layer.call(name, args)
        if not _is_write(self.world, name) or not is_ambiguous(result):
            return result
        plain = _plain_args(self.world, name, args)
        assert plain is not None, "an ambiguous failure implies the arguments validated"
        return self.attach(name, plain, result)

    def attach(self, name: str, plain: dict[str, Any], result: Result) -> Result:
        raise NotImplementedError


class VerifyLayer(AfterAmbiguousWrite):
    """After an ambiguous write failure: wait ``wait_s``, read the effect back, attach it."""

    def __init__(self, layer: ToolLayer, world: World, condition: Condition,
                 wait_s: float) -> None:
        super().__init__(layer, world, condition)
        self.wait_s = wait_s

    def attach(self, name: str, plain: dict[str, Any], result: Result) -> Result:
        check = read_back(self.world, self.layer, name, plain, wait_s=self.wait_s)
        verification: dict[str, Any] = {
            "read": check.read, "visible": check.visible, "missing_units": check.missing,
            "items": check.items, "lag_s": check.lag_s, "waited_s": check.waited_s,
        }
        if check.visible is None:
            verification["note"] = self.condition.note(
                "verify_failed" if check.read_error else "verify_unavailable")
        _emit(self.world, self.name, "verify", tool=name, read=check.read,
              waited_s=check.waited_s, visible=check.visible, missing_units=check.missing,
              read_error=check.read_error)
        return _with_error_field(result, "verification", verification)


@condition("vbr", "after an ambiguous write failure the tool layer reads it back")
class VerifyBeforeRetry(Scaffold):
    wait_s: ClassVar[float] = 0.0
    note_files = ("verify_unavailable", "verify_failed")

    def wrap(self, layer: ToolLayer, world: Any) -> ToolLayer:
        return VerifyLayer(layer, world, self, self.wait_s)


for _delta in WAITS_S:
    condition(f"wait-{_delta}", f"as vbr, after waiting {_delta} s of sim time before the read")(
        type(f"Wait{_delta}", (VerifyBeforeRetry,), {"wait_s": float(_delta)}))


# -- oracles ----------------------------------------------------------------------------------


def committed_now(world: World, tool: str, args: dict[str, Any]) -> tuple[bool, list[int] | None]:
    """Whether the ledger holds this write's effect now (a batch: every unit), and for a batch
    the units it does not hold."""
    effects = world.truth(tool)[0]
    op = world.specs[tool].op
    if op is not None and op.batch is not None:
        missing = [i for i, unit in enumerate(op.batch.effects(args)) if unit not in effects]
        return not missing, missing
    return args in effects, None


def in_flight(world: World, tool: str, args: dict[str, Any]) -> bool:
    """Whether a request for this write is still in flight and will land."""
    return args in world.truth(tool)[1]


class OracleLayer(AfterAmbiguousWrite):
    """After an ambiguous write failure, attach the truth (``eventual``: including what is
    still in flight)."""

    def __init__(self, layer: ToolLayer, world: World, condition: Condition,
                 eventual: bool) -> None:
        super().__init__(layer, world, condition)
        self.eventual = eventual

    def attach(self, name: str, plain: dict[str, Any], result: Result) -> Result:
        committed, missing = committed_now(self.world, name, plain)
        oracle: dict[str, Any] = {
            "committed": committed,
            "will_commit": self.eventual and in_flight(self.world, name, plain),
        }
        if missing is not None:
            oracle["missing_units"] = missing
        _emit(self.world, self.name, "oracle", tool=name, **oracle)
        return _with_error_field(result, "oracle", oracle)


@condition("state-oracle", "after an ambiguous write failure: whether it is committed now")
class StateOracle(Scaffold):
    eventual: ClassVar[bool] = False

    def wrap(self, layer: ToolLayer, world: Any) -> ToolLayer:
        return OracleLayer(layer, world, self, self.eventual)


@condition("outcome-oracle", "after an ambiguous write failure: whether it is or will be committed")
class OutcomeOracle(StateOracle):
    eventual = True


# -- guard ------------------------------------------------------------------------------------


@condition("guard", "the action guard in the tool layer")
class GuardCondition(Scaffold):
    def wrap(self, layer: ToolLayer, world: Any) -> ToolLayer:
        return GuardLayer(layer, world)
