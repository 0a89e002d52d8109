"""``limbo conform``: the proxy turned on the server instead of the agent (docs/conform.md).

No agent and no model: LIMBO is the MCP client. For each tool of a team's MCP server it checks
the exactly-once properties a retrying client relies on — a key replays, a reused key with
other arguments is refused, the key survives a timeout after commit, concurrency, a restart
and a lease, what a blind retry does, whether the annotations are honest, and the key's scope —
and gives a verdict per tool × property backed by evidence: the calls, their answers, and the
effects the server's state shows (through the world file's declared reads or the user's
``--probe``). The calls go through the proxy's own session, so each check is a proxied episode
with a durable journal and a ledger, recorded in the run directory.

The modules, bottom up: :mod:`~limbo.proxy.conform.values` (arguments from schemas),
:mod:`~limbo.proxy.conform.subjects` (which tools, known from what),
:mod:`~limbo.proxy.conform.observe` (how effects are seen), :mod:`~limbo.proxy.conform.trial`
(one check as one episode), :mod:`~limbo.proxy.conform.checks` (the eight properties),
:mod:`~limbo.proxy.conform.report` (table, JSON, JUnit), :mod:`~limbo.proxy.conform.runner`.
"""
