"""World files: a team's own API declared in TOML — services, tools, contracts and task
templates — and run as a LIMBO world (docs/worlds.md).

:mod:`~limbo.sim.worldfile.format` is the format (pydantic models, importable on its own);
:mod:`~limbo.sim.worldfile.check` checks a file and places every problem at a file and line.
"""
