"""The prompt conditions: vanilla, its cue ablation, and the two that add to it.

What a condition is — its prompt files, its tool layer, the :func:`condition` decorator — is
:mod:`limbo.episode.condition`; the scaffold conditions are :mod:`limbo.harnesses.scaffolds`.
"""

from __future__ import annotations

from limbo.episode.condition import Condition, condition


@condition("vanilla", "default instructions, ending with the exactly-once sentence")
class Vanilla(Condition):
    pass


@condition("plain", "vanilla without the exactly-once sentence (cue ablation)", ("plain",))
class Plain(Condition):
    pass


@condition("aware", "vanilla plus: a failed or timed-out write may still take effect",
           ("vanilla", "aware"))
class Aware(Condition):
    pass


@condition("rules", "vanilla plus rules: verify first, reuse keys, report uncertainty",
           ("vanilla", "rules"))
class Rules(Condition):
    pass
