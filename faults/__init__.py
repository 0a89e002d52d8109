"""Fault modes, each a transport wrapper at the boundary. Importing registers them.

The twelve modes of ``spec/faults.md`` live in three modules by what the agent sees: a timeout
(``timeouts``), a failure at the normal round trip (``failures``), or a success (``acks``).
"""

from limbo.faults import acks, failures, timeouts
from limbo.faults.base import Fault, FaultContext
from limbo.faults.catalog import ModeInfo, catalog, group_members
from limbo.registry import register

register("fault", "none")(Fault)

__all__ = ["Fault", "FaultContext", "ModeInfo", "acks", "catalog", "failures", "group_members",
           "timeouts"]
