"""How a tool is declared to the guard.

The guard needs, per tool: the function, its argument schema, whether it writes, and — for
writes — how keys reach it (``key_param``: the argument through which the caller may send a
key and through which the guard passes one on), whether the service behind it honours keys
for given arguments, and optionally how to read a write back (``verify``) and how to cut a
batch down to the rows still missing (``narrow``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from limbo.harnesses.guard.receipts import Outcome, Verification
from limbo.harnesses.guard.schema import model_from_callable

Args = dict[str, Any]
Verifier = Callable[[Args], Verification | Awaitable[Verification]]


def _always_ok(_value: Any) -> Outcome:
    return "ok"


@dataclass
class Tool:
    """One tool on the guard's allowlist.

    * ``fn`` — called as ``fn(**validated_args)`` (plus ``key_param=key`` where keys are
      honoured); sync or async.
    * ``schema`` — a pydantic model of the arguments; by default built from ``fn``'s
      signature (unknown fields and NaN/inf refused; lax coercion, e.g. ``"42"`` → ``42``).
    * ``write`` — writes get keys, receipts and deduplication; reads only steps 1–2.
    * ``key_param`` — name of the argument that carries an idempotency key, if the tool has
      one. A key the caller puts there is used as the call's key (and never fingerprinted).
    * ``honours_key`` — whether the service deduplicates by the key for these arguments;
      defaults to "yes if there is a ``key_param``". Where it does, the guard passes the key
      on; where it does not, a retry after an ambiguous failure is verified first (step 6).
    * ``verify`` — reads the effect of a write back (waiting out the read's lag first);
      without it, a write that cannot be deduplicated is forwarded and the decision says it
      could not be verified.
    * ``narrow`` — given the arguments and the indexes of units not visible, the arguments
      for only those units (batch writes).
    * ``classify`` — maps a returned value to ``ok`` / ``definite`` / ``ambiguous`` for tools
      that report failures as values rather than by raising.
    """

    name: str
    fn: Callable[..., Any]
    schema: type[BaseModel] | None = None
    write: bool = False
    key_param: str | None = None
    honours_key: bool | Callable[[Args], bool] | None = None
    verify: Verifier | None = None
    narrow: Callable[[Args, tuple[int, ...]], Args] | None = None
    classify: Callable[[Any], Outcome] = field(default=_always_ok)

    def __post_init__(self) -> None:
        if self.schema is None:
            self.schema = model_from_callable(self.fn, self.name, self.key_param)

    def honours(self, args: Args) -> bool:
        """Whether the key is passed on for a call with ``args``."""
        if self.honours_key is None:
            return self.key_param is not None
        if callable(self.honours_key):
            return bool(self.honours_key(args))
        return bool(self.honours_key)
