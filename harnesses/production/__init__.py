"""Production harnesses, driven for real and offline: each is the real, pinned CLI, with its
tools from the sandbox's MCP server and its model from the model gateway."""

from limbo.harnesses.production import claude_code, codex, copilot, hermes

__all__ = ["claude_code", "codex", "copilot", "hermes"]
