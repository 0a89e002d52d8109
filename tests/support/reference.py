"""Reference policies outside an episode: a gateway session opened by hand needs the policy
briefed with its world's answer key, as the episode would (:mod:`limbo.briefing`)."""

from __future__ import annotations

from limbo.adapter import ModelAdapter, make_adapter
from limbo.briefing import answer_key, brief
from limbo.world import World


def briefed(world: World, spec: str = "policy/verify") -> ModelAdapter:
    """Adapter ``spec`` holding ``world``'s answer key if it is a reference policy."""
    adapter = make_adapter(spec)
    brief(adapter, answer_key(world))
    return adapter
