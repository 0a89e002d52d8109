"""``scripted/PATH``: model turns read from a JSON file, like a mock LLM.

For tests, demos, and checking a condition, fault or service of your own without an API: the
file lists the turns the "model" answers with, in order, one per model call, whatever the
conversation says. Each turn is ``{"text": ..., "tool_calls": [{"name", "arguments", "id"?}],
"usage": {...}?}``; ``arguments`` is an object, or text (sent as is, so a script can make the
malformed call a real model might). A call without an ``id`` gets ``call_<turn>_<n>``.

Everything wrong with the file — missing, not UTF-8, not JSON, a turn of the wrong shape — is
one :class:`~limbo.base.errors.UsageError` naming the file, raised when the adapter is created (so
``limbo run`` and ``limbo episode`` stop before the first episode). An episode that asks for
more turns than the file has ends as ``model_error``, recorded, and the grid goes on.

The model string names the file, not its content: a script changed in place keeps its cells'
episode ids, so run it into a new ``--out``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from limbo.base.errors import ModelError, UsageError
from limbo.episode.models import (
    EpisodeContext,
    Message,
    ModelAdapter,
    ModelTurn,
    ToolCall,
    ToolDef,
    model_adapter,
)
from limbo.log.records import Usage

MAX_BYTES = 64 * 1024 * 1024


class ScriptCall(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    name: str
    arguments: dict[str, Any] | str = Field(default_factory=dict)
    id: str | None = None


class ScriptTurn(BaseModel):
    """One turn of a script: text, tool calls, or both (never neither)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    text: str | None = None
    tool_calls: list[ScriptCall] = []
    usage: Usage = Usage()

    def turn(self, n: int) -> ModelTurn:
        calls = [ToolCall(id=c.id or f"call_{n}_{i}", name=c.name, arguments=c.arguments)
                 for i, c in enumerate(self.tool_calls, start=1)]
        return ModelTurn(text=self.text, tool_calls=calls, usage=self.usage)


def load_script(path: str) -> list[ModelTurn]:
    """The turns in the file at ``path``; a one-line :class:`UsageError` for a bad file."""
    where = f"scripted/{path}"
    file = Path(path)
    if not file.is_file():
        what = "is not a file" if file.exists() else "does not exist"
        raise UsageError(f"{where}: {path!r} {what}; give the path of a JSON file of turns")
    if file.stat().st_size > MAX_BYTES:
        raise UsageError(f"{where}: the file is over {MAX_BYTES // 2**20} MiB")
    try:
        data = json.loads(file.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise UsageError(f"{where}: not UTF-8 text (byte {exc.object[exc.start]:#04x} at "
                         f"offset {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"{where}: not JSON: {exc.msg} at line {exc.lineno} column "
                         f"{exc.colno}") from None
    if not isinstance(data, list) or not data:
        raise UsageError(f"{where}: must hold a non-empty JSON list of turns, e.g. "
                         f'[{{"tool_calls": [{{"name": "wait", "arguments": {{"seconds": 1}}}}]}}, '
                         f'{{"text": "done"}}]')
    return [_turn(where, n, item) for n, item in enumerate(data, start=1)]


def _turn(where: str, n: int, item: Any) -> ModelTurn:
    try:
        turn = ScriptTurn.model_validate(item)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        at = ".".join(map(str, err["loc"])) or "(the turn)"
        raise UsageError(f"{where}: turn {n}: {at}: {err['msg']}") from None
    if not turn.tool_calls and not (turn.text and turn.text.strip()):
        raise UsageError(f"{where}: turn {n} has neither text nor tool calls")
    return turn.turn(n)


@model_adapter("scripted")
class ScriptedAdapter(ModelAdapter):
    """Answers with the turns of a JSON file, in order (a mock LLM for tests and demos)."""

    offline = True

    def __init__(self, model: str, **params: Any) -> None:
        if params:
            raise UsageError(f"scripted/{model}: takes no parameters (got {', '.join(params)})")
        super().__init__(model)
        self.turns = load_script(model)
        self.used = 0

    @classmethod
    def price_per_mtok(cls, model: str, params: dict[str, Any]) -> dict[str, float] | None:
        """No model is called: free (a script's own ``usage`` is reported as written)."""
        return {"input": 0.0, "cached_input": 0.0, "output": 0.0}

    async def generate(self, messages: list[Message], tools: list[ToolDef],
                       ctx: EpisodeContext) -> ModelTurn:
        if self.used >= len(self.turns):
            raise ModelError(f"{self.spec}: the script's {len(self.turns)} turns are used up; "
                             f"the episode asked for turn {self.used + 1}")
        self.used += 1
        return self.turns[self.used - 1]
