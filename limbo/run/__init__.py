"""A run of many episodes: a grid's cells into a run directory — resumable, sharded, in this
process, in forked workers or on a Ray cluster (:mod:`limbo.run.ray`) — with its plan, its
progress and the summary printed at the end."""
