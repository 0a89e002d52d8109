"""A grid's comparisons: which arms an experiment contrasts, and the factors that pair them.

An experiment is the cells of one grid. Its tables contrast *arms* — levels of one factor
(conditions, say) — and an arm is only comparable with another on the cells both ran. A
comparison says which factor, which levels, and the *pairing factors*: the cell fields on
which two arms' episodes must agree to be the same case under a different arm (the paper's:
model, task instance, focal write, fault mode, contract). The analysis draws each arm from the
cells every arm of the comparison has, and counts what it leaves unmatched.

Declared as data in the grid file and copied into the run's manifest when the run starts, so
the analysis reads the comparison the run was made for, not today's grid file::

    [[comparisons]]
    name = "guard"
    factor = "condition"
    arms = ["vanilla", "guard"]
    pair_on = ["model", "harness", "contract", "fault", "template", "instance", "focal_write"]
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

PAIRING_FIELDS = ("model", "harness", "condition", "contract", "fault", "service", "template",
                  "instance", "focal_write", "seed")
"""The cell fields a comparison may pair on (every field of a record's ``cell``)."""
Factor = Literal["model", "harness", "condition", "contract", "fault"]


class Comparison(BaseModel):
    """One comparison of an experiment (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    factor: Factor
    """The cell field whose levels are the arms."""
    arms: list[str] = Field(min_length=2)
    """The levels compared, in the order tables show them (the first is the reference)."""
    pair_on: list[Literal["model", "harness", "condition", "contract", "fault", "service",
                          "template", "instance", "focal_write", "seed"]] = Field(min_length=1)
    """The cell fields two arms' episodes must share to be matched."""

    @model_validator(mode="after")
    def _coherent(self) -> Comparison:
        if self.factor in self.pair_on:
            raise ValueError(f"pair_on lists {self.factor!r}, the factor the arms differ in")
        pairs = [str(p) for p in self.pair_on]
        for name, values in (("arms", list(self.arms)), ("pair_on", pairs)):
            repeated = sorted({v for v in values if values.count(v) > 1})
            if repeated:
                raise ValueError(f"{name} lists {repeated[0]!r} more than once")
        if not all(re.fullmatch(r"\S.{0,99}", arm) for arm in self.arms):
            raise ValueError("an arm must be a level name of 1-100 characters")
        return self
