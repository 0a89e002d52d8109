"""Fault modes, each a transport wrapper at the boundary. Importing registers them."""

from limbo.faults.base import Fault, FaultContext
from limbo.registry import register

register("fault", "none")(Fault)

__all__ = ["Fault", "FaultContext"]
