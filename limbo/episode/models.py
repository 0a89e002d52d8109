"""The model-adapter API: one class, one async method.

An adapter receives the conversation so far, the tools, and the episode context, and returns
a :class:`ModelTurn` — tool calls, or a final message — with its usage. Models are named
``provider/model``; the provider is found in the registry (built-ins, the ``limbo.models``
entry-point group, or ``--plugin``) and parameters come as ``?key=value&...``.

Adapters are created once per episode, so they may keep per-episode state.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any, ClassVar, Literal
from urllib.parse import parse_qsl

from pydantic import BaseModel, ConfigDict, Field

from limbo.base.errors import UsageError
from limbo.base.registry import lookup, registrar
from limbo.log.records import Usage
from limbo.sim.service import Contract


class ToolCall(BaseModel):
    """A tool call as the model made it. ``arguments`` is a dict, or the raw text when the
    model sent something that does not parse as JSON."""

    id: str
    name: str
    arguments: dict[str, Any] | str = Field(default_factory=dict)


class Message(BaseModel):
    """One message of the conversation, provider-neutral."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None

    def result(self) -> dict[str, Any]:
        """The tool result carried by a ``tool`` message, as a dict."""
        return json.loads(self.content)  # type: ignore[no-any-return]


class ModelTurn(BaseModel):
    # Factories, not shared defaults: pydantic deep-copies a mutable default for every
    # instance, and a reference-policy grid builds several turns and messages per episode.
    text: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)


class ToolDef(BaseModel):
    """A tool as providers receive it."""

    model_config = ConfigDict(frozen=True)

    name: str
    description: str
    parameters: dict[str, Any]


class EpisodeContext(BaseModel):
    """What every adapter is told beyond the conversation and the tools: which episode this is
    (for caches, logs and replay), its seed (for an adapter's own seeded draws) and the tool
    contract its world runs under. Nothing of the answer: the plan, its intents and the read
    lags reach only the reference policies, through :class:`limbo.episode.briefing.ReferenceAdapter`,
    so a model adapter cannot lean on them by mistake."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    episode_id: str
    seed: int
    """The model-sampling seed: the world's seed, or — for replicate r ≥ 1 of ``limbo run
    --repeats`` — one derived from it and r (:attr:`limbo.sim.cell.Cell.sampling_seed`)."""
    contract: Contract


class ModelAdapter:
    """Base class of every adapter. Subclass, implement :meth:`generate`, and register with
    :func:`model_adapter` (which sets ``provider``)."""

    provider: ClassVar[str] = ""
    trusted: ClassVar[bool] = False
    """Set only by LIMBO's own reference policies, whose turns are
    built from validated models by tested code: the adapter boundary skips its per-turn checks
    for them (exceptions are still caught). Every other adapter's turns are checked."""
    offline: ClassVar[bool] = False
    """Set by adapters that call no model (the reference policies, scripted turns, replay):
    a run does not count their episodes among the real-model ones it estimates before
    starting. An adapter of a plugin calls a model unless it says otherwise."""

    def __init__(self, model: str, **params: Any) -> None:
        self.model = model
        self.params = params

    @property
    def spec(self) -> str:
        return f"{self.provider}/{self.model}"

    async def generate(
        self, messages: list[Message], tools: list[ToolDef], ctx: EpisodeContext
    ) -> ModelTurn:
        raise NotImplementedError(f"{type(self).__name__} must implement generate()")

    async def aclose(self) -> None:
        """Release clients at the end of the episode (optional)."""

    def preflight(self) -> None:
        """Check, before a run starts, that the model can be reached; raise
        :class:`~limbo.base.errors.UsageError` naming what to fix. The default checks nothing."""

    @classmethod
    def price_per_mtok(cls, model: str, params: dict[str, Any]) -> dict[str, float] | None:
        """Prices per million input / cached input / output tokens, or ``None`` when unknown.

        ``--max-cost`` refuses to run a model whose price is unknown rather than assume free.
        """
        return None


model_adapter = registrar("model", ModelAdapter, attr="provider")
"""Class decorator: ``@model_adapter("openai")`` registers a :class:`ModelAdapter` subclass as
the provider of models ``openai/...``."""


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def parse_model(spec: str) -> tuple[str, str, dict[str, Any]]:
    """Split ``provider/model?k=v&...`` into its parts (values parsed as JSON when they can)."""
    if not spec.isprintable() or not is_utf8(spec):
        raise UsageError(f"model {spec!r} must be printable UTF-8 text")
    base, _, query = spec.partition("?")
    provider, sep, model = base.partition("/")
    if not sep or not provider or not model:
        raise UsageError(f"model {spec!r} must look like provider/model (e.g. policy/verify)")
    pairs = parse_qsl(query, keep_blank_values=True)
    names = [k for k, _ in pairs]
    for name in names:
        if names.count(name) > 1:
            raise UsageError(f"model {base}: parameter {name!r} is given {names.count(name)} "
                             f"times; give it once")
    return provider, model, {k: _value(v) for k, v in pairs}


def is_utf8(text: str) -> bool:
    """Whether ``text`` can be written as UTF-8 (no lone surrogates)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def adapter_maker(spec: str, extra: dict[str, Any] | None = None) -> Callable[[], ModelAdapter]:
    """What makes a fresh adapter for model ``spec``, its provider looked up now: an episode
    resolves every name before it builds anything, and makes the adapter last. A
    :class:`UsageError` for a malformed spec or an unknown provider."""
    provider, model, params = parse_model(spec)
    cls: type[ModelAdapter] = lookup("model", provider)
    return functools.partial(cls, model, **{**params, **(extra or {})})


def make_adapter(spec: str, extra: dict[str, Any] | None = None) -> ModelAdapter:
    """A fresh adapter for model ``spec``; a :class:`UsageError` for an unknown provider."""
    return adapter_maker(spec, extra)()
