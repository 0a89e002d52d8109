"""Floor 4, one episode: the model-adapter API, the harness protocol, what a condition is, what
each adapter is told, the adapter boundary that turns whatever an adapter does into a record,
the timeline, and the runner that carries one cell from world to record. See
docs/architecture.md."""
