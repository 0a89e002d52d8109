"""Recorded LIMBO episodes as Inspect's mock model: the Inspect analogue of ``replay/RUN_DIR``.

:func:`replay_model` returns ``mockllm/model`` scripted, per episode, with the turns a LIMBO run
recorded for the same cell (its text, tool calls, ids, usage and cost). Run on the same cells,
an Inspect task then reproduces the run's episodes — which checks an Inspect pipeline offline,
at no cost, against outcomes known in advance. Each request finds its script by the
``X-Limbo-Episode`` header; a cell the run did not record fails that sample's model turn.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from limbo.inspect.model import EPISODE_HEADER
from limbo.log.inspect_logs import require_inspect
from limbo.log.records import EpisodeRecord
from limbo.providers.replay import load_records, recorded_turns
from limbo.sim.cell import Cell

MODEL = "mockllm/model"


def inspect_episode_id(record: EpisodeRecord, model: str = MODEL) -> str:
    """The episode id the cell of ``record`` gets when ``inspect/<model>`` runs it."""
    header: Mapping[str, Any] = record.get("header", {})
    return Cell(**{**record["cell"], "model": f"inspect/{model}"},
                timing=header.get("timing") or {}, limits=header.get("limits") or {}).episode_id


def outputs(record: EpisodeRecord) -> list[Any]:
    """The recorded turns of ``record`` as Inspect model outputs, in order."""
    from inspect_ai.model import ChatCompletionChoice, ChatMessageAssistant, ModelOutput, ModelUsage
    from inspect_ai.tool import ToolCall

    found = []
    for turn in recorded_turns(record):
        calls = [ToolCall(id=c.id, function=c.name,
                          arguments=c.arguments if isinstance(c.arguments, dict) else {},
                          parse_error=None if isinstance(c.arguments, dict) else c.arguments)
                 for c in turn.calls]
        usage = ModelUsage(input_tokens=turn.usage.input_tokens,
                           output_tokens=turn.usage.output_tokens,
                           total_tokens=turn.usage.input_tokens + turn.usage.output_tokens,
                           input_tokens_cache_read=turn.usage.cached_input_tokens,
                           total_cost=turn.usage.cost_usd)
        message = ChatMessageAssistant(content=turn.text or "", tool_calls=calls or None)
        found.append(ModelOutput(model=MODEL, usage=usage, choices=[ChatCompletionChoice(
            message=message, stop_reason="tool_calls" if calls else "stop")]))
    return found


def replay_model(run_dir: str | Path) -> Any:
    """``mockllm/model`` answering every episode of ``run_dir``'s cells with its recording."""
    require_inspect()
    from inspect_ai.model import get_model

    scripts = {inspect_episode_id(r): outputs(r) for r in load_records(run_dir)}

    def answer(input: Any, tools: Any, tool_choice: Any, config: Any) -> Any:
        episode = (config.extra_headers or {}).get(EPISODE_HEADER)
        script = scripts.get(episode or "")
        if not script:
            raise LookupError(f"{run_dir} recorded no (further) turn for episode {episode}")
        return script.pop(0)

    return get_model(MODEL, custom_outputs=answer, memoize=False)
