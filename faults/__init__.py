"""The built-in fault modes: content only. Importing this package registers them.

The twelve modes of ``spec/faults.md`` live in three modules by what the agent sees: a timeout
(``timeouts``), a failure at the normal round trip (``failures``), or a success (``acks``).
What a fault mode is — its metadata and its act — is the simulation floor's
(:mod:`limbo.sim.fault`); LIMBO's own pyproject names this package in the ``limbo.faults``
entry-point group, so the registry finds these modes the way it finds a plugin's.
"""

from limbo.faults import acks, failures, timeouts
from limbo.sim.fault import Fault, fault

fault("none")(Fault)

__all__ = ["acks", "failures", "timeouts"]
