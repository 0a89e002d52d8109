"""Floor 3, the log: the episode record's type, the run directory as a store (records,
quarantine, manifests), one writer per shard, which episodes count (rated, errored), moving
lines out of a run, and records kept in Inspect logs. The analysis reads only this floor."""
