"""What the OpenAI and Anthropic adapters share: parameters, keys, retries, cost, cache.

A provider adapter turns one :meth:`generate` into one provider call (plus our retries). The
official SDK is imported lazily, when an adapter is created, so ``import limbo`` works without
it and a missing SDK is a :class:`UsageError` naming the extra to install. The SDK's own retries
are off (``max_retries=0``); :mod:`limbo.providers.retry` does it instead.

Secrets: the API key is read from an environment variable and handed to the SDK client only.
It is never a model parameter (parameters are part of the cell, hence of every record), never
part of a cache key, and any error text that reaches a record or a log is scrubbed of it.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
from typing import Any, ClassVar

from limbo.base.environ import getenv
from limbo.base.errors import ModelError, UsageError
from limbo.base.rng import Rng, generator
from limbo.base.secrets import MASK, MIN_LEN, scrub, watch
from limbo.episode.models import EpisodeContext, Message, ModelAdapter, ModelTurn, ToolDef
from limbo.providers import clients, eager
from limbo.providers.cache import ResponseCache, default_cache
from limbo.providers.calls import current as call_count
from limbo.providers.encoded import wire_bytes
from limbo.providers.limiter import limiter_for, limiter_key
from limbo.providers.params import check_params
from limbo.providers.pricing import cost, price_for
from limbo.providers.replies import (
    IncompleteStream,
    StreamFailure,
    UnparseableReply,
    checked,
)
from limbo.providers.retry import Retryable, RetryPolicy, describe, retry_after, with_retries
from limbo.providers.wire import Reply

COMMON_PARAMS = frozenset({"stream", "timeout", "max_attempts", "base_url", "api_key_env",
                           "prices", "temperature", "top_p", "max_tokens",
                           "parallel_tool_calls"})
TRANSPORT_PARAMS = frozenset({"stream", "timeout", "max_attempts", "api_key_env", "prices",
                              "base_url", "api"})
"""Parameters left out of the cache key's parameters: those that change how we talk to the
provider, not what the model answers, and the endpoint and API, which the key holds apart
(:meth:`ProviderAdapter.endpoint`)."""
RETRYABLE_STATUS = frozenset({408, 409, 429})
RETRYABLE_CODES = frozenset({"rate_limit_exceeded", "server_error", "rate_limit_error",
                             "overloaded_error", "api_error", "internal_server_error"})
REFUSAL_CODES = frozenset({"rate_limit_exceeded", "rate_limit_error", "overloaded_error"})
"""Codes that say "not now" rather than "went wrong" (:func:`refusal`)."""
NO_KEY = "not-needed"
MAX_CONNECTIONS = 1000
"""Connections one shared client may hold to its endpoint (the SDKs' own cap)."""
_DEFAULT: Any = object()


class ProviderAdapter(ModelAdapter):
    """Base of the SDK-backed adapters. Subclasses set the class facts and :meth:`_call`."""

    sdk_module: ClassVar[str] = ""
    extra: ClassVar[str] = ""
    key_env: ClassVar[str] = ""
    params_allowed: ClassVar[frozenset[str]] = COMMON_PARAMS
    models_path: ClassVar[str] = "/models"
    """Where the endpoint lists its models (the preflight reads it), and the query to send."""
    models_query: ClassVar[dict[str, Any]] = {}
    url_env: ClassVar[str] = ""
    """The variable the SDK reads its endpoint from when none is given, and its default."""
    default_url: ClassVar[str] = ""
    wire_api: ClassVar[str] = ""
    """The wire API spoken, when the class speaks one (:meth:`flavour`)."""

    def __init__(self, model: str, *, retry: RetryPolicy | None = None,
                 cache: ResponseCache | None = _DEFAULT, **params: Any) -> None:
        if "api_key" in params:
            raise UsageError(f"do not put an API key in the model spec (it is recorded with every "
                             f"episode); set ${self.key_env} or name another variable with "
                             f"api_key_env=NAME")
        unknown = sorted(set(params) - self.params_allowed)
        if unknown:
            raise UsageError(f"{self.provider}/{model}: unknown parameter(s) {', '.join(unknown)}; "
                             f"known: {', '.join(sorted(self.params_allowed))}")
        check_params(f"{self.provider}/{model}", params)
        super().__init__(model, **params)
        self.sdk = self._import_sdk()
        self._key = self._resolve_key()
        self.price = price_for(self.spec, params.get("prices"))
        self.retry = retry or RetryPolicy(max_attempts=int(params.get("max_attempts", 5)))
        self.cache = default_cache() if cache is _DEFAULT else cache
        self.calls = 0
        """Provider calls attempted by this adapter (retries included); cache hits make none."""
        self.limit_key = limiter_key(self.provider, str(self.params.get("base_url") or "default"),
                                     self._key)
        """Shared by the client pool and the rate limiter: provider, endpoint, key digest."""
        self._client: Any = None
        self._rng: Rng | None = None

    @classmethod
    def price_per_mtok(cls, model: str, params: dict[str, Any]) -> dict[str, float] | None:
        """USD per million input / cached input / output tokens, from the price table (and
        the model's ``prices`` file); ``None`` when unknown."""
        price = price_for(f"{cls.provider}/{model}", params.get("prices"))
        if price is None:
            return None
        return {"input": price.input, "output": price.output,
                "cached_input": price.input if price.cached_input is None else price.cached_input}

    # ------------------------------------------------------------------ setup

    def _import_sdk(self) -> Any:
        try:
            return importlib.import_module(self.sdk_module)
        except ImportError:
            raise UsageError(f"model {self.spec} needs the {self.sdk_module} SDK: "
                             f"pip install 'limbo-bench[{self.extra}]'") from None

    def _resolve_key(self) -> str:
        env = str(self.params.get("api_key_env", self.key_env))
        watch(env)
        key = getenv(env)
        if key:
            return key
        if self.params.get("base_url"):
            return NO_KEY  # a local OpenAI-compatible server usually wants none
        raise UsageError(f"model {self.spec} needs an API key: set ${env}")

    def preflight(self) -> None:
        """One cheap call before a run: endpoint, key and model (:mod:`.preflight`)."""
        from limbo.providers.preflight import preflight

        preflight(self, transport_errors())

    def route_probe(self) -> bool:
        """Whether the preflight asks the model's route even when the endpoint lists the
        model (:mod:`.preflight`)."""
        return False

    def route_hint(self) -> str:
        """What to try when the endpoint answers 404 on the route this adapter calls."""
        return ""

    def scrub(self, text: str) -> str:
        """``text`` with the API key (and any other credential we know of) masked."""
        if len(self._key) >= MIN_LEN:
            text = text.replace(self._key, MASK)
        return scrub(text)

    def client(self) -> Any:
        """The SDK client: the run's shared one for this provider, endpoint and key
        (:mod:`limbo.providers.clients`), else this adapter's own, created on first use inside
        the running event loop."""
        pool = clients.current()
        if pool is not None:
            return pool.get(self.limit_key, self._new_client)
        if self._client is None:
            self._client = self._new_client()
        return self._client

    def _new_client(self) -> Any:
        eager.install()  # on this loop, requests leave as they are made (Python 3.11)
        return self._make_client(self._key)

    def _make_client(self, key: str) -> Any:
        """A new SDK client (no retries of its own; the timeout is given per request), for
        :meth:`base_url`."""
        raise NotImplementedError

    def base_url(self) -> str:
        """The endpoint this adapter calls: its ``base_url``, else the one the SDK would
        choose (``$OPENAI_BASE_URL`` / ``$ANTHROPIC_BASE_URL``, else the provider's). The
        client is given it explicitly, so the cache key and the calls always agree."""
        given = self.params.get("base_url") or getenv(self.url_env) or self.default_url
        return str(given).rstrip("/")

    def flavour(self) -> str:
        """The wire API spoken (``responses``, ``chat``, ``messages``)."""
        return self.wire_api

    def endpoint(self) -> str:
        """Who answers: provider, API and URL. Part of the cache key, so that one model name
        served by two servers — or by one server through two APIs — never shares answers."""
        return f"{self.provider}:{self.flavour()}@{self.base_url()}"

    def _http_client(self) -> Any:
        """The SDK's HTTP client over aiohttp (its ``aiohttp`` extra), keeping every connection
        it opens alive. The default httpx transport walks all its pooled connections on every
        request and response and yields to the event loop about four times a call, so the
        answers that arrive together are processed in lockstep, each waiting for all; over
        aiohttp a call yields once, answers are handled first come, first served, and a call
        costs about half the CPU (``benchmarks/bench_providers.py``). (The SDK's default keeps
        only 100 connections idle: a run with more calls in flight would close and reopen —
        over TLS, handshake — connections all the time.) Without aiohttp, the SDK's default
        client, with the same limits."""
        cls = self.sdk.DefaultAsyncHttpxClient
        base = next(c for c in cls.__mro__ if c.__name__ == "AsyncClient")
        httpx = importlib.import_module(base.__module__.split(".")[0])
        limits = httpx.Limits(max_connections=MAX_CONNECTIONS,
                              max_keepalive_connections=MAX_CONNECTIONS)
        verify = tls_context(httpx.__name__)
        if importlib.util.find_spec("aiohttp") and hasattr(self.sdk, "DefaultAioHttpClient"):
            return self.sdk.DefaultAioHttpClient(limits=limits, verify=verify)
        return cls(limits=limits, verify=verify)

    def _options(self) -> dict[str, Any]:
        """The SDK's per-request options."""
        return {"timeout": self.timeout}

    async def aclose(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.close()

    # ------------------------------------------------------------------ one turn

    @property
    def stream(self) -> bool:
        return bool(self.params.get("stream", False))

    @property
    def timeout(self) -> float:
        return float(self.params.get("timeout", 120.0))

    def behaviour_params(self) -> dict[str, Any]:
        """Parameters that can change the model's answer (the cache key's share of them)."""
        return {k: v for k, v in sorted(self.params.items()) if k not in TRANSPORT_PARAMS}

    def cache_key(self, messages: list[Message], tools: list[ToolDef], seed: int) -> str:
        """The response cache's key of this turn (:meth:`ResponseCache.key`)."""
        return ResponseCache.key(self.spec, self.behaviour_params(), messages, tools, seed,
                                 self.endpoint())

    async def generate(self, messages: list[Message], tools: list[ToolDef],
                       ctx: EpisodeContext) -> ModelTurn:
        key = None
        count = call_count()
        if self.cache is not None:
            key = self.cache_key(messages, tools, ctx.seed)
            hit = self.cache.get(key)
            if hit is not None:
                if count is not None:
                    count.cached += 1
                return hit
        reply = await self._with_retries(messages, tools, ctx)
        turn = ModelTurn(text=reply.text, tool_calls=reply.tool_calls,
                         usage=reply.tokens.usage(cost(self.price, reply.tokens)))
        if count is not None:
            count.answered(turn.usage.cost_usd)
        if self.cache is not None and key is not None:
            self.cache.put(key, self.spec, turn)  # only a reply that passed `checked`
        return turn

    async def _with_retries(self, messages: list[Message], tools: list[ToolDef],
                            ctx: EpisodeContext) -> Reply:
        request = wire_bytes(self._request(messages, tools), tools)  # once per turn, not per attempt
        limiter = limiter_for(self.limit_key)

        count = call_count()

        async def attempt() -> Reply:
            self.calls += 1
            if count is not None:
                count.attempts += 1
            await limiter.acquire()
            status, wait = None, None
            try:
                raw = await self._call(request)
                status = 200
            except Exception as exc:
                status = getattr(exc, "status_code", None)
                response = getattr(exc, "response", None)
                wait = retry_after(response.headers) if response is not None else None
                raise
            finally:
                await limiter.release(status, wait)
            return checked(raw)

        def rng() -> Rng:
            if self._rng is None:
                self._rng = generator(ctx.seed, "provider.retry")
            return self._rng

        try:
            return await with_retries(attempt, self.retry, self.classify, rng, self.spec,
                                      self.scrub)
        except (ModelError, UsageError):
            raise
        except Exception as exc:
            if not self._is_provider_error(exc):
                raise  # a bug on our side: the episode ends as infra_error
            raise self._fatal(exc) from None

    def _request(self, messages: list[Message], tools: list[ToolDef]) -> dict[str, Any]:
        """The request body of this turn, in the provider's wire format."""
        raise NotImplementedError

    async def _call(self, request: bytes) -> Reply:
        """One HTTP attempt with the encoded ``request``."""
        raise NotImplementedError

    # ------------------------------------------------------------------ failures

    def _is_provider_error(self, exc: BaseException) -> bool:
        return isinstance(exc, (self.sdk.APIError, StreamFailure, IncompleteStream,
                                UnparseableReply, *transport_errors()))

    def classify(self, exc: BaseException) -> Retryable | None:
        """Retryable: 408/409/429/5xx, timeouts, connection errors, truncated streams, replies
        that cannot be read or say nothing, and overload/server errors reported inside a
        stream."""
        sdk = self.sdk
        if isinstance(exc, IncompleteStream):
            return Retryable(f"truncated stream: {exc}")
        if isinstance(exc, UnparseableReply):
            return Retryable(str(exc))
        if isinstance(exc, sdk.APITimeoutError):
            return Retryable("request timed out")
        if isinstance(exc, sdk.APIConnectionError):
            cause = exc.__cause__ or exc.__context__
            return Retryable(f"connection error ({type(cause).__name__ if cause else 'unknown'})")
        if isinstance(exc, transport_errors()):  # raised mid-stream, not wrapped by every SDK
            return Retryable(f"connection error ({type(exc).__name__})")
        if isinstance(exc, sdk.APIStatusError):
            status, wait = exc.status_code, retry_after(exc.response.headers)
            if status in RETRYABLE_STATUS or status >= 500 or _code(exc) in RETRYABLE_CODES:
                return Retryable(describe(exc), wait, refusal(status, _code(exc), wait))
            return None
        if isinstance(exc, StreamFailure) and exc.code in RETRYABLE_CODES:
            return Retryable(f"stream failed: {exc}", refused=exc.code in REFUSAL_CODES)
        if isinstance(exc, sdk.APIError) and _code(exc) in RETRYABLE_CODES:
            return Retryable(describe(exc))
        return None

    def _fatal(self, exc: BaseException) -> Exception:
        """A non-retryable provider failure: the user's problem (key, model name) or the
        episode's (bad request, content filter)."""
        status = getattr(exc, "status_code", None)
        if status in (401, 403):
            return UsageError(f"{self.spec}: the provider rejected the API key "
                              f"(HTTP {status}); check ${self.params.get('api_key_env', self.key_env)}")
        if status == 404:
            hint = self.route_hint()
            return UsageError(self.scrub(f"{self.spec}: not found at the provider (HTTP 404): "
                                         f"{describe(exc)}" + (f"; {hint}" if hint else "")))
        return ModelError(self.scrub(f"{self.spec}: {describe(exc)}"))


def refusal(status: int, code: str | None, retry_after_s: float | None) -> bool:
    """Whether an error status says the provider did not take the call, yet (it spends the
    refusal budget, not an attempt: :mod:`limbo.providers.retry`): a 429 — unless it says the
    account's quota is spent (OpenAI's ``insufficient_quota``), which waiting does not cure —,
    Anthropic's 529 "overloaded", and a 503 that says when to come back (``Retry-After``); a
    503 without one is as likely a server that is down."""
    if code == "insufficient_quota":
        return False
    return status in (429, 529) or (status == 503 and retry_after_s is not None)


@functools.cache
def tls_context(httpx: str) -> Any:
    """The TLS context every client of this process verifies with: the HTTP library's own
    default (its CA bundle; ``SSL_CERT_FILE`` and ``SSL_CERT_DIR`` honoured), made once.
    Loading the CA certificates is most of building a client (about 25 ms of CPU each time),
    and a run's first client is built while its first episodes wait; the preflight's client,
    built before the run, has made it by then. An SSL context is shared safely: each
    connection holds its own state."""
    return importlib.import_module(httpx).create_ssl_context()


@functools.cache
def transport_errors() -> tuple[type[BaseException], ...]:
    """The HTTP client library's transport errors (the SDKs use ``httpx2``, older ones
    ``httpx``), imported lazily like the SDKs themselves."""
    found = []
    for name in ("httpx2", "httpx"):
        try:
            found.append(importlib.import_module(name).TransportError)
        except (ImportError, AttributeError):
            continue
    return tuple(found)


def _code(exc: BaseException) -> str | None:
    """The provider's error code or type, from the exception or its body."""
    for attr in ("code", "type"):
        value = getattr(exc, attr, None)
        if isinstance(value, str) and value:
            return value
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            return err.get("type") or err.get("code")
    return None
