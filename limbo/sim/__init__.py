"""Floor 2, the simulated world: the clock, the boundary every tool call crosses, the contract
and its key store, read-back, the typed event log, tools, task templates, the cell a world is
built from, and world files (with :mod:`limbo.services` and :mod:`limbo.faults`). See
docs/architecture.md."""
