"""What each adapter is told about its episode.

Every adapter — a provider's, a plugin's, the gateway's backing one — gets the conversation,
the tools and the neutral :class:`~limbo.episode.models.EpisodeContext` (episode id, seed, contract).
The answer key — the task's plan, the instance's variables (its intents follow from them) and
the tools' contract facts (the read lags among them) — is what a reference policy follows and
what a model must never see: a model that read it would be graded on a task it was handed the
solution to. It reaches an adapter through one explicit hook: the episode calls
:meth:`ReferenceAdapter.brief` once, before the first turn, on an adapter whose class declares
itself a reference policy by subclassing :class:`ReferenceAdapter`, and on no other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from limbo.base.errors import InfraError
from limbo.episode.models import EpisodeContext, ModelAdapter

if TYPE_CHECKING:
    from limbo.sim.tasks import Template
    from limbo.sim.tools import ToolSpec
    from limbo.sim.world import World


@dataclass(frozen=True)
class ReferenceContext:
    """The answer key of one episode: what a reference policy follows."""

    plan: Template
    """The task template: its steps, their arguments and what each saves."""
    vars: dict[str, Any]
    """The instance's variables and setup results."""
    tool_specs: Mapping[str, ToolSpec]
    """Tool name -> :class:`~limbo.sim.tools.ToolSpec`: the contract facts (key support, the read
    that shows a write and its lag, see :func:`limbo.sim.readback.resolve`)."""


class ReferenceAdapter(ModelAdapter):
    """Base of the adapters that follow the plan (the reference policies, and any adapter
    built on one). The episode calls :meth:`brief` before the first turn; :attr:`reference`
    holds the key from then on. An adapter that wraps a reference policy forwards the call to
    it (:func:`brief` does nothing for any other adapter)."""

    reference: ReferenceContext | None = None

    def brief(self, key: ReferenceContext) -> None:
        """Receive this episode's answer key."""
        self.reference = key

    def key(self) -> ReferenceContext:
        """The answer key; an :class:`InfraError` when the adapter was never briefed (it was
        driven outside an episode, e.g. a gateway session opened without :func:`brief`)."""
        if self.reference is None:
            raise InfraError(f"{self.spec} is a reference policy and was not briefed: run it "
                             f"in an episode, or call limbo.episode.briefing.brief(adapter, key) first")
        return self.reference


def context(world: World) -> EpisodeContext:
    """The neutral context every adapter of ``world``'s episode gets."""
    cell = world.cell
    return EpisodeContext(episode_id=cell.episode_id, seed=cell.sampling_seed,
                          contract=cell.contract)


def answer_key(world: World) -> ReferenceContext:
    """``world``'s answer key, for the reference policies only."""
    opening = world.opening()
    return ReferenceContext(plan=opening.plan, vars=dict(opening.vars),
                            tool_specs=world.specs)


def brief(adapter: ModelAdapter, key: ReferenceContext) -> bool:
    """Hand ``key`` to ``adapter`` if it is a reference policy; whether it was one."""
    if isinstance(adapter, ReferenceAdapter):
        adapter.brief(key)
        return True
    return False
