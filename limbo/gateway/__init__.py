"""The model gateway: a loopback HTTP server speaking OpenAI Responses, OpenAI Chat Completions
and Anthropic Messages, backed by any model adapter — how production harnesses reach reference
policies (offline), recorded episodes (replay) or a real provider, per episode."""

from limbo.gateway.server import Gateway, ThreadedGateway
from limbo.gateway.session import GatewayError, GatewaySession

__all__ = ["Gateway", "GatewayError", "GatewaySession", "ThreadedGateway"]
