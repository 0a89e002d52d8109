"""The guard deployed in LIMBO's tool layer (the ``guard`` condition), and the read-back that
it shares with the verifying conditions (``vbr``, ``wait-Δ``).

Everything LIMBO-specific lives here; the rest of the package is the stand-alone library.
The adaptation: every service tool is declared to a :class:`Guard` with its pydantic model as
schema; the one principal is authorised; a key goes to the service exactly where the contract
honours it (the ``idempotency_key`` argument); results are classified by their error kind; and
a repeated write that the contract cannot deduplicate is read back through the write's own
read path after waiting out that path's documented lag on the sim clock. Decisions become
``guard`` events and each write's result carries its receipt under ``"guard"``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from functools import partial
from typing import Any

from limbo.base.hashing import digest
from limbo.episode.condition import ToolLayer
from limbo.harnesses.guard.allowlist import Tool
from limbo.harnesses.guard.core import Guard
from limbo.harnesses.guard.receipts import Decision, GuardResult, Outcome, Receipt, Verification
from limbo.harnesses.guard.stores import MemoryKeyStore
from limbo.sim.readback import resolve
from limbo.sim.results import Result, error, error_kind, is_ambiguous
from limbo.sim.service import DAY_S
from limbo.sim.tools import KEY_FIELD, ToolSpec
from limbo.sim.world import PRINCIPAL, World


@dataclass(frozen=True)
class ReadCheck:
    """What a tool-layer read-back of a write found."""

    read: str | None
    """The read tool used (``None``: the write declares no read-back)."""
    lag_s: float | None
    """Its documented lag for these arguments (``None``: no read path)."""
    waited_s: float
    visible: bool | None
    """``None`` when it could not tell: no read path, or the read failed."""
    missing: list[int] | None = None
    """Batch writes: indexes of the rows not visible."""
    items: list[dict[str, Any]] = field(default_factory=list)
    """The items of the read that show the effect."""
    read_error: str | None = None


def read_back(world: World, layer: ToolLayer, tool: str, args: dict[str, Any],
              wait_s: float = 0.0, wait_lag: bool = False) -> ReadCheck:
    """Read the effect of write ``tool`` with validated ``args`` (no key) back, after waiting
    ``wait_s`` (plus the read's documented lag if ``wait_lag``) on the sim clock. No wait
    happens when there is nothing to read."""
    op = world.specs[tool].op
    assert op is not None
    plan = resolve(op, args)
    if plan is None:
        return ReadCheck(None, None, 0.0, None)
    if plan.lag is None:
        return ReadCheck(plan.tool, None, 0.0, None)
    waited = wait_s + (plan.lag if wait_lag else 0.0)
    if waited > 0:
        world.advance(waited)
    result = layer.call(plan.tool, dict(plan.args))
    seen = plan.check(result)
    if seen.visible is None:
        return ReadCheck(plan.tool, plan.lag, waited, None, read_error=error_kind(result))
    return ReadCheck(plan.tool, plan.lag, waited, seen.visible, seen.missing, seen.items)


def _classify(result: Result) -> Outcome:
    if result.get("ok"):
        return "ok"
    return "ambiguous" if is_ambiguous(result) else "definite"


def receipt_fields(receipt: Receipt) -> dict[str, Any]:
    """The receipt as the agent sees it (the arguments it sent are left out): its fields in
    order, all of them flat values (what ``as_dict`` gives without copying the arguments
    deeply only to drop them, on every guarded write)."""
    return {name: getattr(receipt, name) for name in _SHOWN}


_SHOWN = tuple(f.name for f in fields(Receipt) if f.name != "args")


_ERRORS: dict[str, tuple[Any, int | None]] = {
    "unknown_tool": ("invalid_argument", 400),
    "invalid_arguments": ("invalid_argument", 400),
    "forbidden": ("not_available", 403),
    "conflict": ("idempotency_mismatch", 422),
    "in_progress": ("conflict", 409),
}


class GuardLayer:
    """A :class:`~limbo.harnesses.conditions.ToolLayer` that puts the guard in front of
    ``layer``. Utility tools (``wait``) pass straight through."""

    def __init__(self, layer: ToolLayer, world: World) -> None:
        self.layer = layer
        self.world = world
        self._seen: dict[str, int] = {}
        self._current: tuple[dict[str, Any], int] | None = None
        tools = [self._declare(spec) for spec in world.specs.values() if spec.kind != "utility"]
        self.guard = Guard(tools, authorize=self._authorise, clock=lambda: world.now,
                           store=MemoryKeyStore(ttl_s=DAY_S), on_decision=self._emit)

    def call(self, name: str, args: Any) -> Result:
        spec = self.world.specs.get(name)
        if spec is not None and spec.kind == "utility":
            return self.layer.call(name, args)
        self._current = self._note_call(name, args) if spec is not None else None
        return self._answer(self.guard.call_sync(PRINCIPAL, name, args))

    def _note_call(self, name: str, args: Any) -> tuple[dict[str, Any], int] | None:
        """The call's arguments (no key) and how often the agent made it before — so that a
        batch the guard cuts down is still labelled as the agent's re-issue in the ledger."""
        checked = self.world.validate(name, args)
        if isinstance(checked, dict):
            return None
        plain = {k: v for k, v in checked[1].items() if k != KEY_FIELD}
        fp = digest([name, plain])
        seen = self._seen.get(fp, 0)
        self._seen[fp] = seen + 1
        return plain, seen

    # -- the adaptation ---------------------------------------------------------------------

    def _declare(self, spec: ToolSpec) -> Tool:
        write = spec.kind == "write"
        op, contract = spec.op, self.world.cell.contract
        assert op is not None
        honours = (lambda a: op.honours_key(contract, a)) if spec.accepts_key else False
        return Tool(spec.name, partial(self._send, spec.name), schema=spec.model, write=write,
                    key_param=KEY_FIELD if spec.accepts_key else None, honours_key=honours,
                    verify=partial(self._verify, spec.name) if write else None,
                    narrow=op.batch.narrow if op.batch is not None else None,
                    classify=_classify)

    @staticmethod
    def _authorise(caller: str, tool: str, args: dict[str, Any]) -> bool:
        return caller == PRINCIPAL

    def _send(self, name: str, **args: Any) -> Result:
        plain = {k: v for k, v in args.items() if k != KEY_FIELD}
        if self._current is not None and plain != self._current[0]:  # cut down to missing rows
            return self.world.call(name, args, attempt=f"reissue-{self._current[1]}")
        return self.layer.call(name, args)

    def _verify(self, name: str, args: dict[str, Any]) -> Verification:
        check = read_back(self.world, self.layer, name, args, wait_lag=True)
        detail: dict[str, Any] = {"read": check.read, "lag_s": check.lag_s,
                                  "waited_s": check.waited_s}
        if check.visible is None:
            detail["reason"] = (f"read failed: {check.read_error}" if check.read_error
                                else "no read path: cannot verify")
            return Verification(None, detail=detail)
        missing = tuple(check.missing) if check.missing is not None else None
        if not check.visible:
            return Verification(False, missing=missing, detail=detail)
        if missing is not None:  # a batch: every row is there
            value = {"ok": True, "items": check.items}
        else:
            value = {"ok": True, **check.items[0]}
        return Verification(True, value, missing, detail)

    def _emit(self, d: Decision) -> None:
        self.world.emit("guard", step=d.step, action=d.action, caller=d.caller, tool=d.tool,
                            key=d.key, detail=d.detail)

    def _answer(self, res: GuardResult) -> Result:
        if res.error is not None and res.error.kind != "failed":
            kind, status = _ERRORS[res.error.kind]
            return error(kind, res.error.message, status=status)
        result = dict(res.value)
        if res.receipt is not None:
            result["guard"] = receipt_fields(res.receipt)
        return result
