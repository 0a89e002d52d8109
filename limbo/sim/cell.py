"""A cell: the full configuration of one episode, and its id.

The episode id is a digest of the canonical cell, so it is the same when computed from a grid
before running and when read back from a record afterwards — which is what lets a re-run skip
finished cells. Settings that do not change what happens (concurrency, workers, output
directory) are not part of a cell, and neither is how the model is reached (its server's
address, timeouts, retry budget: :mod:`limbo.sim.transport`), which a cell carries beside its
fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from limbo.base.hashing import digest
from limbo.base.memo import per_object
from limbo.base.rng import derive_seed
from limbo.sim.config import Limits, Timing
from limbo.sim.service import Contract
from limbo.sim.transport import split_transport

CELL_ID_VERSION = 1
SEED_RANGE = 2**31
"""Seeds are below this (a grid's world seeds are; so are the replicates' sampling seeds)."""


class CellFields(BaseModel):
    """The fields a record's ``cell`` holds: model, harness, condition, contract, fault,
    service, template, instance, focal write, seed, and — for the extra samples of ``limbo run
    --repeats`` only — the replicate index (the record's schema is built from them)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = "policy/verify"
    harness: str = "minimal"
    condition: str = "vanilla"
    contract: Contract = Contract.NATIVE
    fault: str = "none"
    service: str
    template: str
    instance: int = Field(0, ge=0)
    focal_write: str
    seed: int = 0
    """The world's seed (services, faults, latency draw from it)."""
    replicate: int = Field(0, ge=0)
    """Which sample of the cell this is (``--repeats K``: 0 .. K-1). Replicate 0 is the cell a
    run without repeats runs, recorded and hashed without the field; another replicate runs
    in the same world with its own model-sampling seed (:attr:`Cell.sampling_seed`)."""


class Cell(CellFields):
    """One episode's configuration: the record's ten cell fields, plus sim-time costs and
    limits (recorded in the record's header)."""

    timing: Timing = Timing()
    limits: Limits = Limits()
    world: str | None = None
    """A world file's identity (``name@digest``, :mod:`limbo.sim.worldfile.kit`); ``None``: the
    built-in world. Part of the id when set, so a changed world file makes other cells."""
    transport: tuple[tuple[str, Any], ...] = ()
    """The model string's transport parameters (``base_url``, ``timeout``, ...), split off
    ``model`` as the cell is built: how to reach the model, not part of the cell's id or of
    its record (the run's manifest records them)."""

    @model_validator(mode="before")
    @classmethod
    def _transport_apart(cls, data: Any) -> Any:
        model = data.get("model") if isinstance(data, dict) else None
        if not isinstance(model, str) or "?" not in model:
            return data
        identity, transport = split_transport(model)
        if not transport:
            return data
        given = dict(data.get("transport") or ())
        return {**data, "model": identity, "transport": tuple(sorted({**dict(transport),
                                                                      **given}.items()))}

    def public(self) -> dict[str, Any]:
        """The cell fields of the episode record (``replicate`` only when it is not 0, so a
        run without repeats records and hashes exactly what it did before repeats existed)."""
        out = {name: getattr(self, name) for name in PUBLIC_FIELDS}
        if not self.replicate:
            del out["replicate"]
        return out

    @property
    def sampling_seed(self) -> int:
        """The seed of the model's own draws (the reference policies', the response cache's
        key): the world's seed for replicate 0, one derived from it and the index for the
        others, so replicates are distinct samples in one world."""
        if not self.replicate:
            return self.seed
        return derive_seed(self.seed, f"replicate.{self.replicate}") % SEED_RANGE

    def model_copy(self, *, update: Mapping[str, Any] | None = None,
                   deep: bool = False) -> Cell:
        """A copy with ``update`` applied, its episode id computed afresh: pydantic copies
        the instance's ``__dict__``, which holds the cached id of the cell it was copied from."""
        copied = super().model_copy(update=update, deep=deep)
        copied.__dict__.pop("episode_id", None)
        return copied

    @cached_property
    def episode_id(self) -> str:
        body = self.public()
        if not _default(self.timing):
            body["timing"] = self.timing.model_dump(mode="json")
        if not _default(self.limits):
            body["limits"] = self.limits.model_dump(mode="json")
        if self.world is not None:
            body["world"] = self.world
        return _id(body)


PUBLIC_FIELDS = tuple(CellFields.model_fields)
_TIMING, _LIMITS = Timing(), Limits()


@per_object
def _default(settings: Timing | Limits) -> bool:
    """Whether ``settings`` are the defaults: asked once per object, not once per cell (the
    cells of a grid share its settings)."""
    return settings == (_TIMING if isinstance(settings, Timing) else _LIMITS)


def _id(body: dict[str, Any]) -> str:
    return f"ep-{digest([CELL_ID_VERSION, body], 20)}"


def episode_id(cell: dict[str, Any]) -> str:
    """Digest of the canonical cell (timing and limits included when they differ from the
    defaults, so default cells keep short, stable ids; a world file's identity when set)."""
    body = {k: v for k, v in cell.items() if k not in ("timing", "limits", "world")}
    if not body.get("replicate"):  # replicate 0 is the cell without repeats
        body.pop("replicate", None)
    if cell.get("world") is not None:
        body["world"] = cell["world"]
    for name, default in (("timing", _TIMING), ("limits", _LIMITS)):
        value = cell.get(name)
        if value is not None and value != default.model_dump(mode="json"):
            body[name] = value
    return _id(body)
