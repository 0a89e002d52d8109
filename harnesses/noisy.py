"""``policy/noisy``: a seeded stochastic reference policy with stated rates.

Real models are stochastic: the same cell run twice may go two ways. ``noisy`` stands in for
such a model offline, so that repeats (``limbo run --repeats K``), pass^k and sampling until
precise (``--precision``) can be tested against numbers known in advance. Once per episode it
draws from the episode's model-sampling seed (:attr:`limbo.sim.cell.Cell.sampling_seed`: the
world's seed for replicate 0, one derived from it for each other replicate — never a global
generator): with probability ``p_blind`` it behaves as ``policy/blind`` (re-issues an ambiguous
write up to twice without reading, reports success), otherwise as ``policy/verify`` (reads back,
re-issues only what is missing).

So its rates follow from the two pure policies': in a cell where blind duplicates and verify
does not (a lost acknowledgement on a write without an honoured key, say), the duplicate rate
is ``p_blind`` and the exactly-once rate ``1 - p_blind``; in general each outcome's rate in a
cell is ``p_blind * blind's + (1 - p_blind) * verify's``. The draw depends on the seed only — the
cell's world seed, one per task (template, focal write, instance) — so the arms of one task
(faults, conditions, other ``p_blind``) share it: one uniform number u per task and replicate,
and the policy is blind exactly when u < p_blind; the focal writes of one world draw apart.
"""

from __future__ import annotations

from pydantic import Field

from limbo.base.rng import generator
from limbo.harnesses.policies import PROBABILITY, Behaviour, Blind, Policy, Verify, policy

DRAW = "policy.noisy"
"""The name of the policy's generator under the sampling seed."""


@policy("noisy")
class Noisy(Policy):
    """Blind with probability ``p_blind`` per episode (seeded), else verify."""

    p_blind: float = Field(0.3, ge=0, le=1, description=PROBABILITY)

    def behaviour(self, seed: int) -> Behaviour:
        if generator(seed, DRAW).random() < self.p_blind:
            return Blind().behaviour(seed)
        return Verify().behaviour(seed)
