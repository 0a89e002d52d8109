"""The six built-in simulated services: content only. Importing this package registers them.

What a service is — a contract, its operations, its tables, the ``@service``/``@read``/
``@write`` decorators — is the simulation floor's (:mod:`limbo.sim.service`); LIMBO's own
pyproject names this package in the ``limbo.services`` entry-point group, so the registry finds
these six the way it finds a plugin's.
"""

from limbo.services import billing, data, deploy, mail, social, tickets

__all__ = ["billing", "data", "deploy", "mail", "social", "tickets"]
