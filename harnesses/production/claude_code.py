"""Claude Code, driven headless (``claude -p … --output-format stream-json``).

It speaks the Anthropic Messages API to ``ANTHROPIC_BASE_URL`` with a dummy key (no sign-in),
keeps its config in ``CLAUDE_CONFIG_DIR``, and reads the sandbox server from an ``--mcp-config``
file (``--strict-mcp-config``: no other server). ``ENABLE_TOOL_SEARCH=false`` is required:
otherwise MCP tools are deferred behind a search tool and never offered to the model.
"""

from __future__ import annotations

import json
from pathlib import Path

from limbo.episode.harness import harness
from limbo.harnesses.production.base import KEY, MODEL_NAME, Endpoints, ProductionHarness
from limbo.harnesses.production.install import Install


@harness("claude-code")
class ClaudeCodeHarness(ProductionHarness):
    """Claude Code (Anthropic Messages; MCP tools as mcp__sandbox__<tool>)."""

    install = Install("npm", "@anthropic-ai/claude-code", "2.1.332", "node_modules/.bin/claude")
    median_wall_s = 3.0  # measured: 1.0-4.1 s, median 2.8 (4 episodes, charge_invoice)
    timeout_texts = (r'MCP server "[^"]+" tool "[^"]+" timed out after',)

    def command(self, home: Path, prompt: str, at: Endpoints) -> tuple[list[str], dict[str, str]]:
        config = home / ".claude"
        config.mkdir()
        mcp = home / "mcp.json"
        mcp.write_text(json.dumps({"mcpServers": {"sandbox": {"type": "http", "url": at.mcp}}}))
        argv = [str(self.install.command(self.base())), "-p", prompt, "--model", MODEL_NAME,
                "--mcp-config", str(mcp), "--strict-mcp-config", "--allowedTools", "mcp__sandbox",
                "--output-format", "stream-json", "--verbose"]
        return argv, {
            "CLAUDE_CONFIG_DIR": str(config), "ANTHROPIC_BASE_URL": at.anthropic,
            "ANTHROPIC_API_KEY": KEY, "ENABLE_TOOL_SEARCH": "false",
            "MCP_TOOL_TIMEOUT": str(int(self.tool_timeout_s * 1000)),
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1",
        }
