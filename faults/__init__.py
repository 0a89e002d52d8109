"""Fault modes, each a transport wrapper at the boundary. Importing registers them.

The twelve modes of ``spec/faults.md`` live in three modules by what the agent sees: a timeout
(``timeouts``), a failure at the normal round trip (``failures``), or a success (``acks``).
"""

from limbo.faults import acks, failures, timeouts
from limbo.faults.base import FAMILIES, GROUPS, Fault, FaultContext, fault
from limbo.faults.catalog import ModeInfo, catalog, group_members

fault("none")(Fault)

__all__ = ["FAMILIES", "GROUPS", "Fault", "FaultContext", "ModeInfo", "acks", "catalog",
           "failures", "fault", "group_members", "timeouts"]
