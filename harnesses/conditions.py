"""Recovery conditions: what the model is told, and what the tool layer does.

A condition has a prompt (files under ``prompts/``; hashed into the episode header) and may
wrap the tool layer — the harness-side part of the boundary that every harness, production
ones included, goes through. Prompt conditions only change the prompt; scaffold conditions
change the tool layer and keep the ``vanilla`` prompt.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any, ClassVar, Protocol

from limbo.hashing import digest
from limbo.registry import entries, register
from limbo.results import Result


class ToolLayer(Protocol):
    """The harness side of the boundary: one call in, one result out."""

    def call(self, name: str, args: Any) -> Result: ...


@cache
def prompt_text(name: str) -> str:
    """The text of prompt file ``name`` (without ``.txt``)."""
    return (resources.files("limbo.harnesses") / "prompts" / f"{name}.txt").read_text()


class Condition:
    """A recovery condition. The base is the ``vanilla`` prompt with a pass-through layer."""

    name: ClassVar[str] = "vanilla"
    kind: ClassVar[str] = "prompt"
    summary: ClassVar[str] = ""
    prompt_files: ClassVar[tuple[str, ...]] = ("vanilla",)

    def system_prompt(self) -> str:
        return "\n\n".join(prompt_text(f).strip() for f in self.prompt_files) + "\n"

    def prompt_hashes(self) -> dict[str, str]:
        return {f: digest(prompt_text(f)) for f in self.prompt_files}

    def wrap(self, layer: ToolLayer, world: Any) -> ToolLayer:
        """The tool layer this condition puts in front of ``layer``."""
        return layer

    def followup(self, tool: str, result: Result, world: Any) -> str | None:
        """A message the loop adds after ``result`` (``None``: nothing)."""
        return None


def condition(name: str, kind: str, summary: str, prompts: tuple[str, ...] = ("vanilla",)):
    """Class decorator: register a condition with its metadata."""

    def deco(cls: type[Condition]) -> type[Condition]:
        cls.name, cls.kind, cls.summary, cls.prompt_files = name, kind, summary, prompts
        return register("condition", name)(cls)

    return deco


@condition("vanilla", "prompt", "default instructions, ending with the exactly-once sentence")
class Vanilla(Condition):
    pass


@condition("plain", "prompt", "vanilla without the exactly-once sentence (cue ablation)", ("plain",))
class Plain(Condition):
    pass


@condition("aware", "prompt", "vanilla plus: a failed or timed-out write may still take effect",
           ("vanilla", "aware"))
class Aware(Condition):
    pass


@condition("rules", "prompt", "vanilla plus rules: verify first, reuse keys, report uncertainty",
           ("vanilla", "rules"))
class Rules(Condition):
    pass


def conditions() -> dict[str, type[Condition]]:
    return entries("condition")
