"""Reference policies outside an episode: a gateway session opened by hand needs the policy
briefed with its world's answer key, as the episode would (:mod:`limbo.episode.briefing`)."""

from __future__ import annotations

from limbo.episode.briefing import answer_key, brief
from limbo.episode.models import ModelAdapter, make_adapter
from limbo.sim.world import World


def briefed(world: World, spec: str = "policy/verify") -> ModelAdapter:
    """Adapter ``spec`` holding ``world``'s answer key if it is a reference policy."""
    adapter = make_adapter(spec)
    brief(adapter, answer_key(world))
    return adapter
