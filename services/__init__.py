"""The six simulated services. Importing this package registers them."""

from limbo.services import billing, data, deploy, mail, social, tickets  # noqa: F401
from limbo.services.base import CONTRACTS, Contract, OpSpec, ReadBack, Service

SERVICE_ORDER = ("social", "billing", "tickets", "mail", "data", "deploy")

__all__ = ["CONTRACTS", "SERVICE_ORDER", "Contract", "OpSpec", "ReadBack", "Service"]
