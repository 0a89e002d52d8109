"""LIMBO's MCP server: one episode's tools over the ``mcp`` SDK (:mod:`server`), the harness for an
agent that is any MCP client (:mod:`any_client`, ``limbo mcp``), and the checked stdio lines in
front of the SDK's transport (:mod:`stdio`)."""
