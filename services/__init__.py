"""The six simulated services. Importing this package registers them."""

from . import billing, data, deploy, mail, social, tickets  # noqa: F401
from .base import CONTRACTS, Contract, OpSpec, ReadBack, Service

SERVICE_ORDER = ("social", "billing", "tickets", "mail", "data", "deploy")

__all__ = ["CONTRACTS", "SERVICE_ORDER", "Contract", "OpSpec", "ReadBack", "Service"]
