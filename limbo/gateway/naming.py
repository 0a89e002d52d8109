"""Tool names as a harness shows them vs. the sandbox's own names.

Harnesses prefix MCP tools with the server's name — ``mcp__sandbox__billing_refund`` (Claude
Code, Hermes, and Codex's namespaces flattened), ``sandbox-billing_refund`` (Copilot). The
backing adapter (a reference policy, a replay) speaks the sandbox's plain names, so the gateway
strips the prefix on the way in and restores it on the way out. A name that would collide after
stripping keeps its wire form.
"""

from __future__ import annotations

from limbo.episode.models import Message, ModelTurn, ToolCall, ToolDef


def strip(name: str, servers: tuple[str, ...]) -> str:
    for server in servers:
        for prefix in (f"mcp__{server}__", f"{server}-", f"{server}__"):
            if name.startswith(prefix) and len(name) > len(prefix):
                return name[len(prefix):]
    return name


class ToolNames:
    """The mapping for one request's tool list."""

    def __init__(self, wire_names: list[str], servers: tuple[str, ...]) -> None:
        self.servers = servers
        self._plain: dict[str, str] = {}
        self._wire: dict[str, str] = {}
        taken = set(wire_names)
        for wire in wire_names:
            plain = strip(wire, servers)
            if plain != wire and (plain in taken or plain in self._wire):
                plain = wire
            self._plain[wire] = plain
            self._wire[plain] = wire

    def plain(self, wire: str) -> str:
        return self._plain.get(wire) or strip(wire, self.servers)

    def wire(self, plain: str) -> str:
        return self._wire.get(plain, plain)

    def tools_in(self, tools: list[ToolDef]) -> list[ToolDef]:
        return [t.model_copy(update={"name": self.plain(t.name)}) for t in tools]

    def messages_in(self, messages: list[Message]) -> list[Message]:
        return [m.model_copy(update={"tool_calls": [self._call(c, self.plain) for c in m.tool_calls]})
                if m.tool_calls else m for m in messages]

    def turn_out(self, turn: ModelTurn) -> ModelTurn:
        return turn.model_copy(update={"tool_calls": [self._call(c, self.wire) for c in turn.tool_calls]})

    @staticmethod
    def _call(call: ToolCall, rename: object) -> ToolCall:
        return call.model_copy(update={"name": rename(call.name)})  # type: ignore[operator]
