"""Floor 2, the simulation kernel: what a service and a fault mode are (:mod:`.service`,
:mod:`.fault`), the clock, the boundary every tool call crosses, the contract and its key store,
read-back, the typed event log, tools, task templates, the cell a world is built from, world
files, and the world itself. It imports only the ground floor; the built-in services and fault
modes (``limbo.services``, ``limbo.faults``) stand on it as content. See docs/architecture.md."""
