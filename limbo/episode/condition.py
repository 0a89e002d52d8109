"""What a recovery condition is: what the model is told, and what the tool layer does.

A condition has a prompt (files under ``prompts/``; hashed into the episode header) and may
wrap the tool layer — the harness-side part of the boundary that every harness, production
ones included, goes through. Prompt conditions only change the prompt; scaffold conditions
(:class:`Scaffold`) change the tool layer and keep the ``vanilla`` prompt. The harness protocol
(:mod:`limbo.episode.harness`) hands a harness its condition; the built-in ones are in
:mod:`limbo.harnesses.conditions` and :mod:`limbo.harnesses.scaffolds`.

Conditions register with :func:`condition`. Their prompt files are found beside the module that
defines them (``prompts/<file>.txt``; a plugin ships its own the same way) and, failing that,
among the built-in ones (``limbo.harnesses``' ``prompts/``) — so a plugin condition can extend
``vanilla`` with a file of its own.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache
from importlib import resources
from typing import Any, ClassVar, Literal, Protocol, TypeVar

from limbo.base.errors import UsageError
from limbo.base.hashing import digest
from limbo.base.registry import registrar, shipped_files
from limbo.sim.results import Result

C = TypeVar("C", bound=type)
_FILE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")


@lru_cache(maxsize=256)
def _text_digest(text: str) -> str:
    """A prompt file's digest, once per text (every episode header lists them)."""
    return digest(text)


class ToolLayer(Protocol):
    """The harness side of the boundary: one call in, one result out."""

    def call(self, name: str, args: Any) -> Result: ...


class Condition:
    """A recovery condition. The base is the ``vanilla`` prompt with a pass-through layer."""

    name: ClassVar[str]
    kind: ClassVar[Literal["prompt", "scaffold"]] = "prompt"
    summary: ClassVar[str] = ""
    prompt_files: ClassVar[tuple[str, ...]] = ("vanilla",)
    note_files: ClassVar[tuple[str, ...]] = ()
    """Prompt files for text the condition may show the model later (hashed with the prompt)."""
    texts: ClassVar[dict[str, str]] = {}
    """Every prompt and note file's text, read when the condition registers."""

    def system_prompt(self) -> str:
        return "\n\n".join(self.texts[f].strip() for f in self.prompt_files) + "\n"

    def prompt_hashes(self) -> dict[str, str]:
        return {f: _text_digest(self.texts[f]) for f in (*self.prompt_files, *self.note_files)}

    def note(self, file: str) -> str:
        """The text of note file ``file`` as the model is shown it."""
        return self.texts[file].strip()

    def wrap(self, layer: ToolLayer, world: Any) -> ToolLayer:
        """The tool layer this condition puts in front of ``layer``."""
        return layer

    def followup(self, tool: str, result: Result, world: Any) -> str | None:
        """A message the loop adds after ``result`` (``None``: nothing)."""
        return None


class Scaffold(Condition):
    """A condition that acts in the tool layer (or the loop); its prompt stays ``vanilla``."""

    kind = "scaffold"


def _read_texts(cls: type[Condition]) -> None:
    """Find and read every prompt file the condition names; a :class:`UsageError` for a file
    that is missing, misnamed or not UTF-8 text."""
    texts: dict[str, str] = {}
    own = shipped_files(cls)
    folders = [*([own / "prompts"] if own is not None else []),
               resources.files("limbo.harnesses") / "prompts"]
    for file in (*cls.prompt_files, *cls.note_files):
        if not isinstance(file, str) or not _FILE.fullmatch(file):
            raise UsageError(f"condition {cls.name!r}: prompt file name {file!r} must match "
                             f"{_FILE.pattern} (no folders, no .txt)")
        path = next((f / f"{file}.txt" for f in folders if (f / f"{file}.txt").is_file()), None)
        if path is None:
            raise UsageError(f"condition {cls.name!r}: no prompt file {file}.txt in "
                             f"{' or '.join(str(f) for f in folders)}")
        try:
            texts[file] = path.read_bytes().decode()
        except UnicodeDecodeError as exc:
            raise UsageError(f"condition {cls.name!r}: {path} is not UTF-8 text: {exc}") from None
    cls.texts = texts


def condition(name: str, summary: str,
              prompts: tuple[str, ...] = ("vanilla",)) -> Callable[[C], C]:
    """Class decorator: register a :class:`Condition` subclass as ``name``, with a one-line
    ``summary`` (``limbo list conditions``) and its prompt files in order. Its kind follows
    from its base: a :class:`Scaffold` is a scaffold condition."""

    def prepare(cls: type[Condition]) -> None:
        cls.summary, cls.prompt_files = summary, tuple(prompts)
        _read_texts(cls)

    return registrar("condition", Condition, prepare=prepare)(name)
