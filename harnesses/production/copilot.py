"""GitHub Copilot CLI, driven headless (``copilot -p … --output-format json``).

Offline mode (``COPILOT_OFFLINE``: no GitHub sign-in, telemetry, web tools, GitHub MCP server or
update check) with a bring-your-own-key provider pointed at the gateway, over Chat Completions
(its default wire API). The sandbox server is declared in ``$COPILOT_HOME/mcp-config.json``;
its tools reach the model as ``sandbox-<tool>``, next to Copilot's own.
"""

from __future__ import annotations

import json
from pathlib import Path

from limbo.episode.harness import harness
from limbo.harnesses.production.base import KEY, MODEL_NAME, Endpoints, ProductionHarness
from limbo.harnesses.production.install import Install


@harness("copilot")
class CopilotHarness(ProductionHarness):
    """GitHub Copilot CLI (Chat Completions, offline BYOK; MCP tools as sandbox-<tool>)."""

    install = Install("npm", "@github/copilot", "1.0.102", "node_modules/.bin/copilot")
    median_wall_s = 5.0  # measured: 2.9-6.2 s, median 4.7 (4 episodes, charge_invoice)
    timeout_texts = (r"MCP error -32001: Request timed out",)

    def command(self, home: Path, prompt: str, at: Endpoints) -> tuple[list[str], dict[str, str]]:
        config = home / ".copilot"
        config.mkdir()
        server = {"type": "http", "url": at.mcp, "tools": ["*"],
                  "timeout": int(self.tool_timeout_s * 1000)}
        (config / "mcp-config.json").write_text(json.dumps({"mcpServers": {"sandbox": server}}))
        argv = [str(self.install.command(self.base())), "-p", prompt, "--allow-all-tools",
                "--no-auto-update", "--no-ask-user", "--output-format", "json"]
        return argv, {
            "COPILOT_HOME": str(config), "COPILOT_OFFLINE": "true",
            "COPILOT_PROVIDER_BASE_URL": at.openai, "COPILOT_PROVIDER_TYPE": "openai",
            "COPILOT_PROVIDER_WIRE_API": "completions", "COPILOT_PROVIDER_API_KEY": KEY,
            "COPILOT_MODEL": MODEL_NAME,
        }
