"""Floor 3, the log: the episode record's type, the grader (a pure function of what a record
holds), the run directory as a store (records, quarantine, manifests), one writer per shard,
which episodes count (rated, errored), moving lines out of a run, and records kept in Inspect
logs. The analysis reads only this floor; what input that recorded no design means (fault
families, tool kinds) the command hands it as a design. See
docs/architecture.md."""
