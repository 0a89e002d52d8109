"""Fault modes, each a transport wrapper at the boundary. Importing registers them."""

from limbo.registry import register

from .base import Fault, FaultContext

register("fault", "none")(Fault)

__all__ = ["Fault", "FaultContext"]
