"""``limbo proxy``: the twelve faults and the committed-effects ledger in front of a team's own
MCP server (docs/proxy.md).

The proxy serves MCP to any agent and forwards every call to the team's server (the
*upstream*). What it knows of the upstream's tools comes from a world file whose services say
``proxy = true``: which tools write, which arguments identify a write's business effect, how
idempotency keys behave, which reads list each write. With that it applies a fault with the
sandbox's commit-aware meanings on the wall clock, keeps a durable ledger of every forwarded
write, reconciles that ledger against the upstream's own state through the declared reads, and
grades the episode like a sandbox one.

This is the one part of LIMBO where real time is the clock: nothing here is imported by the
simulation, and its time comes from :func:`limbo.base.runtime.stopwatch` alone.
"""
