"""One cheap call per model before a run starts, so that a broken setup stops the run with one
message instead of turning every cell into a ``model_error`` one by one.

What stops the run (a :class:`UsageError`, nothing written):

- the endpoint cannot be reached (connection refused, no such host, no answer within
  :data:`PROBE_TIMEOUT_S`);
- it rejects the key (HTTP 401 or 403);
- it does not know the model: its list of models (``GET …/models``, free) does not name it,
  and a one-line request of at most :data:`PROBE_TOKENS` output tokens for it answers 404;
- it knows the model but not the route the run would ask it on: an OpenAI-compatible server
  (any ``base_url`` but OpenAI's) that lists the model and answers the one-line Responses
  request with 404 or 405 — many serve Chat Completions only — stops the run with a hint to add
  ``api=chat`` (:meth:`~limbo.providers.base.ProviderAdapter.route_hint`), rather than letting
  the first cell fail with a bare 404.

The list is all that is asked when it names the model, but for that route check. The request
is made when it does not, since some servers answer to names they do not list (llama.cpp answers any name;
Anthropic lists dated ids but takes aliases): the request is what the run would do, so its
answer decides. A server that lists no models (no such route) gets no request: its name is not
checked. Anything else (a 429, a 5xx, an unreadable answer) does not stop the run: the
provider is there, and the run's retries deal with a busy one. The request is not recorded
and its cost, a few tokens, is not counted.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any, ClassVar, Protocol

from limbo.base.errors import UsageError
from limbo.episode.models import Message, ToolDef
from limbo.providers.encoded import wire_bytes
from limbo.providers.retry import describe
from limbo.providers.wire import Reply


class Probe(Protocol):
    """What a preflight reads of an adapter (:class:`limbo.providers.base.ProviderAdapter`,
    which calls it): its model and parameters, its client and wire format, its key's variable
    and how it scrubs a message of secrets."""

    model: str
    params: dict[str, Any]
    cache: Any
    sdk: Any
    _client: Any
    key_env: ClassVar[str]
    models_path: ClassVar[str]
    models_query: ClassVar[dict[str, Any]]

    @property
    def spec(self) -> str: ...

    @property
    def timeout(self) -> float: ...

    def client(self) -> Any: ...

    def scrub(self, text: str) -> str: ...

    def route_probe(self) -> bool: ...

    def route_hint(self) -> str: ...

    def _request(self, messages: list[Message], tools: list[ToolDef]) -> dict[str, Any]: ...

    async def _call(self, request: bytes) -> Reply: ...

    async def aclose(self) -> None: ...

PROBE_TIMEOUT_S = 30.0
PROBE_TOKENS = 16
"""The output cap of the probe request (the Responses API takes no less than 16)."""
LISTED = 8
"""Model ids quoted in the message for an unknown model."""
ROUTE_MISSING = (404, 405)
"""What a server without the route answers (Not Found, Method Not Allowed)."""


def preflight(adapter: Probe, transport: tuple[type[BaseException], ...]) -> None:
    """Check that ``adapter``'s endpoint, key and model work (see the module docstring);
    ``transport`` are the HTTP library's transport errors (unreachable, when raised bare)."""
    probe = copy.copy(adapter)  # not rebuilt: a subclass's constructor may take other arguments
    probe.params = {**adapter.params, "stream": False, "max_tokens": PROBE_TOKENS,
                    "timeout": min(adapter.timeout, PROBE_TIMEOUT_S)}
    probe.cache, probe._client = None, None  # its own client, closed when done
    asyncio.run(_check(probe, transport))


async def _check(probe: Probe, transport: tuple[type[BaseException], ...]) -> None:
    try:
        listed = await _listed(probe, transport)
        named = listed is not None and (probe.model in listed
                                        or f"{probe.model}:latest" in listed)
        if listed is not None and not named:
            await _ask(probe, listed, transport)
        elif named and probe.route_probe():  # the model is there: is the route it is asked on?
            await _ask(probe, None, transport, route=True)
    finally:
        await probe.aclose()


async def _listed(probe: Probe,
                  transport: tuple[type[BaseException], ...]) -> set[str] | None:
    """The ids the endpoint lists; ``None`` when it lists none (no such route, an odd body)."""
    client = probe.client()
    try:
        answer = await client.get(probe.models_path, cast_to=object, options={
            "timeout": probe.timeout, "params": probe.models_query})
    except Exception as exc:  # noqa: BLE001 - sorted below: what stops the run is raised
        _stop_for(probe, exc, None, transport)
        return None
    data = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(data, list):
        return None
    return {str(m["id"]) for m in data if isinstance(m, dict) and "id" in m}


async def _ask(probe: Probe, listed: set[str] | None,
               transport: tuple[type[BaseException], ...], route: bool = False) -> None:
    """One short request for the model, as the run would make it; with ``route``, asked only
    to learn whether the endpoint serves the route (it lists the model)."""
    request = wire_bytes(probe._request([Message(role="user", content="Answer OK.")], []), [])
    try:
        await probe._call(request)
    except Exception as exc:  # noqa: BLE001 - sorted below: what stops the run is raised
        if route and getattr(exc, "status_code", None) in ROUTE_MISSING:
            raise UsageError(probe.scrub(
                f"{probe.spec}: {_url(probe)} knows the model but not the route it is asked "
                f"on ({describe(exc)}): {probe.route_hint()}")) from None
        _stop_for(probe, exc, listed, transport)


def _stop_for(probe: Probe, exc: BaseException, listed: set[str] | None,
              transport: tuple[type[BaseException], ...]) -> None:
    """Raise the :class:`UsageError` that stops the run, if ``exc`` is such a failure."""
    sdk = probe.sdk
    url = _url(probe)
    status = getattr(exc, "status_code", None)
    if isinstance(exc, sdk.APIConnectionError | sdk.APITimeoutError) or (
            status is None and isinstance(exc, transport)):
        cause = exc.__cause__ or exc.__context__ or exc
        raise UsageError(probe.scrub(f"cannot reach {url} for {probe.spec} ({_why(cause)}); is "
                                     f"the server running?")) from None
    if status in (401, 403):
        env = probe.params.get("api_key_env", probe.key_env)
        raise UsageError(f"{probe.spec}: {url} rejected the API key (HTTP {status}); check "
                         f"${env}")
    if status == 404 and listed is not None:  # the list was served, so 404 is the model's
        offered = ", ".join(sorted(listed)[:LISTED]) or "none"
        more = f" and {len(listed) - LISTED} more" if len(listed) > LISTED else ""
        hint = probe.route_hint()
        raise UsageError(probe.scrub(
            f"{probe.spec}: {url} does not know the model {probe.model!r} ({describe(exc)}); "
            f"it lists: {offered}{more}" + (f" (or: {hint})" if hint else "")))


def _why(exc: BaseException) -> str:
    text = str(getattr(exc, "strerror", None) or exc).strip()
    return text[:200] or type(exc).__name__


def _url(probe: Any) -> str:
    given = probe.params.get("base_url")
    return str(given) if given else str(probe.client().base_url).rstrip("/")
