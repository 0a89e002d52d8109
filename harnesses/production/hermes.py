"""NousResearch hermes-agent, driven headless (``hermes -z … --yolo``).

It runs from its own virtual environment (it pins an older ``mcp`` than limbo), reads
``$HERMES_HOME/config.yaml`` — a custom OpenAI-compatible provider at the gateway (Chat
Completions), and the sandbox server by URL — and prints only its final answer. Its tools reach
the model as ``mcp__sandbox__<tool>``; their results arrive wrapped in an untrusted-content
envelope, as ``{"result": …}`` or ``{"error": …}``.
"""

from __future__ import annotations

import json
from pathlib import Path

from limbo.episode.harness import harness
from limbo.harnesses.production.base import KEY, MODEL_NAME, Endpoints, ProductionHarness
from limbo.harnesses.production.install import Install

NEVER_STALE = 4_102_444_800  # 2100-01-01, as a Unix time


@harness("hermes")
class HermesHarness(ProductionHarness):
    """NousResearch hermes-agent (Chat Completions; MCP tools as mcp__sandbox__<tool>)."""

    install = Install("venv", "hermes-agent", "0.19.0", "bin/hermes", extras="[mcp]")
    median_wall_s = 8.0  # measured: 4.3-8.6 s, median 7.6 (4 episodes, charge_invoice)
    timeout_texts = (r"MCP call timed out after",)

    def command(self, home: Path, prompt: str, at: Endpoints) -> tuple[list[str], dict[str, str]]:
        config = home / ".hermes"
        config.mkdir()
        settings = {
            "model": {"provider": "custom", "base_url": at.openai, "default": MODEL_NAME,
                      "api_key": KEY, "context_length": 131072},
            "mcp_servers": {"sandbox": {"url": at.mcp, "timeout": self.tool_timeout_s,
                                        "connect_timeout": 60}},
            # Tools are discovered in the background; the first model request waits this long
            # for them (1.5 s by default: on a busy machine it goes out without the tools).
            "mcp_discovery_timeout": 60,
            # Probing the host's Python toolchain (pip subprocesses) only adds a line to the
            # system prompt about this machine, which is not the agent's environment.
            "agent": {"environment_probe": False},
            # Hermes pip-installs an optional backend's packages on first use (edge-tts for its
            # speech tool, at start-up). That reaches PyPI mid-episode and rewrites the venv
            # every concurrent run shares; the sandbox's tools need none of them.
            "security": {"allow_lazy_installs": False},
        }
        (config / "config.yaml").write_text(json.dumps(settings, indent=1))  # JSON is YAML
        # Hermes asks PyPI for its latest version unless a fresh answer is cached; a cached
        # "up to date", stamped in the far future, keeps every run off the network.
        (config / ".update_check").write_text(json.dumps(
            {"ts": NEVER_STALE, "rev": None, "ver": self.install.version, "behind": 0}))
        argv = [str(self.install.command(self.base())), "chat", "-q", prompt, "-Q", "--yolo",
                "--source", "tool"]
        # A crash of the interpreter itself (a signal, not an exception) prints its Python stack
        # to stderr, which the record keeps: without it such a death leaves an empty tail.
        return argv, {"HERMES_HOME": str(config), "PYTHONFAULTHANDLER": "1",
                      "HERMES_DISABLE_LAZY_INSTALLS": "1"}
