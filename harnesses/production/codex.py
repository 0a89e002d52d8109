"""OpenAI Codex CLI, driven headless (``codex exec --json``).

Codex speaks only the Responses API, and offers MCP tools to the model inside a ``namespace``
tool (the gateway echoes it back on each call). Its config lives in ``$CODEX_HOME/config.toml``:
a provider of our own pointing at the gateway (overriding the built-in ``openai`` one is
ignored), no retries of its own, and the sandbox MCP server with ``required = true`` (else the
first model request can go out before the tools are listed) and tool approval set to
``approve`` (else every call fails for want of an approval it cannot ask for headless).
"""

from __future__ import annotations

import json
from pathlib import Path

from limbo.episode.harness import harness
from limbo.harnesses.production.base import MODEL_NAME, Endpoints, ProductionHarness, env_for_key
from limbo.harnesses.production.install import Install

KEY_VAR = "LIMBO_GATEWAY_KEY"


def _toml(value: object) -> str:
    """A TOML value (strings, numbers and booleans are all this config needs; JSON strings
    are valid TOML basic strings)."""
    return json.dumps(value) if not isinstance(value, bool) else str(value).lower()


@harness("codex")
class CodexHarness(ProductionHarness):
    """OpenAI Codex CLI (Responses API; MCP tools in a namespace)."""

    install = Install("npm", "@openai/codex", "0.171.0", "node_modules/.bin/codex")
    median_wall_s = 3.0  # measured: 0.6-3.7 s, median 2.7 (4 episodes, charge_invoice)
    timeout_texts = (r"timed out awaiting tools/call after",)

    def command(self, home: Path, prompt: str, at: Endpoints) -> tuple[list[str], dict[str, str]]:
        config = home / ".codex"
        config.mkdir()
        top = {"model": MODEL_NAME, "model_provider": "limbo", "approval_policy": "never",
               "sandbox_mode": "read-only"}
        provider = {"name": "limbo", "base_url": at.openai, "env_key": KEY_VAR,
                    "wire_api": "responses", "request_max_retries": 0, "stream_max_retries": 0}
        server = {"url": at.mcp, "required": True, "default_tools_approval_mode": "approve",
                  "startup_timeout_sec": 60, "tool_timeout_sec": self.tool_timeout_s}
        lines = [f"{k} = {_toml(v)}" for k, v in top.items()]
        lines += ["", "[model_providers.limbo]", *(f"{k} = {_toml(v)}" for k, v in provider.items())]
        lines += ["", "[mcp_servers.sandbox]", *(f"{k} = {_toml(v)}" for k, v in server.items())]
        (config / "config.toml").write_text("\n".join(lines) + "\n")
        argv = [str(self.install.command(self.base())), "exec", "--skip-git-repo-check", "--json",
                prompt]
        return argv, {"CODEX_HOME": str(config), **env_for_key(KEY_VAR)}
