"""The models of a command, checked before anything is written: each can be built (provider
known, SDK and key present, parameters valid), is priced when a budget needs it, and — the
preflight — answers one cheap call, so that an unknown model, a rejected key or a dead server
is one message before the first cell, not a grid of errored episodes.

The preflight asks each distinct model once (:meth:`limbo.episode.models.ModelAdapter.preflight`: for
the OpenAI and Anthropic providers, a list of the endpoint's models, and a one-line request
only when that list does not name the model). ``--no-preflight`` skips it, e.g. to re-run a
grid from the response cache without its endpoint.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from limbo.base.errors import UsageError
from limbo.episode.isolation import escapes, where

if TYPE_CHECKING:
    from limbo.episode.models import ModelAdapter

T = TypeVar("T")


def check_models(models: list[str], max_cost: float | None, reach: bool = False,
                 allow_unpriced: bool = False) -> list[str]:
    """Every model can be built and, under a budget, is priced (or ``allow_unpriced``); with
    ``reach``, each distinct one answers its preflight. The notices to print (a budget that
    cannot count an unpriced model)."""
    from limbo.episode.models import parse_model

    notices = []
    adapters = {spec: built(spec, False) for spec in dict.fromkeys(models)}
    for spec, adapter in adapters.items():
        _, model, params = parse_model(spec)
        if max_cost is None or price(type(adapter), spec, model, params) is not None:
            continue
        if not allow_unpriced:
            raise UsageError(f"--max-cost: no price known for {spec}, so the budget cannot "
                             f"count what it spends; add it to a price file (--prices), or "
                             f"pass --allow-unpriced to run it uncounted")
        notices.append(f"--max-cost: {spec} has no known price; --allow-unpriced runs it, and "
                       f"the budget does not count its cost (its episodes' cost is unknown)")
    if reach:  # last: a check that fails without a call costs nothing
        for spec, adapter in adapters.items():
            _guarded(spec, adapter.preflight)
    return notices


def built(spec: str, reach: bool) -> ModelAdapter:
    """An adapter for ``spec``, checked the way a run will use it; any failure of the user's
    adapter class (its constructor or preflight raising) is one line naming it."""
    from limbo.episode.models import ModelAdapter, make_adapter

    adapter: ModelAdapter = _guarded(spec, lambda: make_adapter(spec))
    generate = getattr(type(adapter), "generate", None)
    if generate is ModelAdapter.generate or not inspect.iscoroutinefunction(generate):
        raise UsageError(f"model {spec}: the adapter {type(adapter).__name__} must define "
                         f"`async def generate(self, messages, tools, ctx)`")
    if reach:
        _guarded(spec, adapter.preflight)
    return adapter


def _guarded(spec: str, step: Callable[[], T]) -> T:
    """``step()``; whatever the user's adapter class raises is one line naming it."""
    try:
        return step()
    except BaseException as exc:
        if escapes(exc):
            raise
        raise UsageError(f"model {spec}: the adapter failed before the run: {where(exc)}") from None


def price(cls: type[ModelAdapter], spec: str, model: str,
          params: dict[str, Any]) -> dict[str, float] | None:
    """The adapter class's prices per million tokens (``None``: unknown); its failure is one
    line naming the model."""
    try:
        return cls.price_per_mtok(model, params)
    except UsageError:
        raise
    except Exception as exc:  # noqa: BLE001 - the user's adapter, reported in one line
        raise UsageError(f"model {spec}: price_per_mtok raised {where(exc)}") from None
