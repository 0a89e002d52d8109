"""Floor 3, the log: the episode record's type, the grader (a pure function of what a record
holds), the run directory as a store (records, quarantine, manifests), one writer per shard,
which episodes count (rated, errored), moving lines out of a run, records kept in Inspect logs,
and today's vocabulary for input that recorded none. The analysis reads only this floor. See
docs/architecture.md."""
