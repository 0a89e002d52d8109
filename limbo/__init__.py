"""LIMBO: where must exactly-once be enforced for tool-using LLM agents?

A deterministic fault-injection sandbox: six simulated services on a discrete-event clock,
fault modes at the service boundary, model adapters and reference policies, recovery
conditions, and a ledger that grades every episode.
"""

__version__ = "0.1.0"
