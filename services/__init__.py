"""The six simulated services. Importing this package registers them.

Everything else reads services from the registry (:func:`operations`), so a service a plugin
registers is a service like these.
"""

from limbo.services import billing, data, deploy, mail, social, tickets  # noqa: F401
from limbo.services.base import (
    CONTRACTS,
    Batch,
    Contract,
    OpSpec,
    ReadBack,
    Service,
    operations,
    service,
)

__all__ = ["CONTRACTS", "Batch", "Contract", "OpSpec", "ReadBack", "Service", "operations",
           "service"]
