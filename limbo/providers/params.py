"""Model parameters of the SDK adapters: what each may be, checked before anything runs.

Parameters are part of the model spec, hence of every cell and every record, so two rules hold
here: a value must be of the right type and in range (a temperature of ``"hot"`` or ``NaN`` is a
mistake the user hears about before the grid starts, not 770 ``model_error`` episodes), and no
credential may travel in one. ``base_url`` gets the strictest check: the user info, every query
parameter and every path segment — percent-decoded, however many times — must not hold the
configured key or anything shaped like a key.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from limbo.base.errors import UsageError
from limbo.base.secrets import known_secrets

Check = Callable[[Any], str | None]
"""What is wrong with a value (``None``: nothing)."""


def _number(lo: float, hi: float, *, open_lo: bool = False) -> Check:
    def check(value: Any) -> str | None:
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            return f"must be a number between {lo:g} and {hi:g}"
        if value < lo or value > hi or (open_lo and value == lo):
            return f"must be {'more than' if open_lo else 'at least'} {lo:g} and at most {hi:g}"
        return None
    return check


def _integer(lo: int, hi: int) -> Check:
    def check(value: Any) -> str | None:
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            return f"must be a whole number from {lo} to {hi}"
        return None
    return check


def _boolean(value: Any) -> str | None:
    return None if isinstance(value, bool) else "must be true or false"


def _choice(*options: str) -> Check:
    def check(value: Any) -> str | None:
        return None if value in options else f"must be one of {', '.join(options)}"
    return check


def _env_name(value: Any) -> str | None:
    ok = isinstance(value, str) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,127}", value)
    return None if ok else "must name an environment variable (letters, digits, _)"


def _path(value: Any) -> str | None:
    return None if isinstance(value, str) and value else "must be the path of a TOML price file"


def _word(value: Any) -> str | None:
    ok = isinstance(value, str) and re.fullmatch(r"[a-z_]{1,32}", value)
    return None if ok else "must be a word such as low, medium or high"


RULES: dict[str, Check] = {
    "stream": _boolean, "parallel_tool_calls": _boolean,
    "timeout": _number(0, 3600, open_lo=True), "max_attempts": _integer(1, 20),
    "temperature": _number(0, 2), "top_p": _number(0, 1), "max_tokens": _integer(1, 10_000_000),
    "seed": _integer(-(2**63), 2**63 - 1), "api": _choice("responses", "chat"),
    "reasoning_effort": _word, "api_key_env": _env_name, "prices": _path,
}


def check_params(spec: str, params: dict[str, Any]) -> None:
    """Every parameter's type and range; no parameter holding a configured secret; ``base_url``
    also for anything shaped like a credential."""
    secrets = known_secrets()
    if any(s in spec for s in secrets):
        raise UsageError("the model name holds the value of a credential variable; the model "
                         "spec is recorded with every episode, so keep keys in the environment")
    for name, value in params.items():
        if isinstance(value, str) and any(s in _decoded(value) for s in secrets):
            raise UsageError(f"{spec}: parameter {name} holds the value of a credential variable; "
                             f"the model spec is recorded with every episode, so keep keys in "
                             f"the environment")
        rule = RULES.get(name)
        problem = rule(value) if rule is not None else None
        if problem is not None:
            raise UsageError(f"{spec}: parameter {name} {problem} (got {_show(value)})")
    if "base_url" in params:
        check_base_url(spec, params["base_url"])


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


KEY_PREFIX = re.compile(r"^(sk-|sk_|rk_|pk_|xai-|gsk_|hf_|ghp_|gho_|github_pat_|glpat-|AIza|ya29\.|"
                        r"nvapi-|pplx-|r8_|csk-|key-|Bearer)", re.IGNORECASE)
CREDENTIAL_NAME = re.compile(r"key|token|secret|passw|auth|sig|credential|session|bearer",
                             re.IGNORECASE)


def looks_like_key(text: str) -> bool:
    """Shaped like an API key: a known key prefix followed by more, a run of 20+ letters and
    digits mixing upper case, lower case and digits, or 48+ hex digits. (Model names such as
    ``Mixtral-8x22B-Instruct-v01`` have hyphens every few characters, and account ids of 32 hex
    digits, as in some gateways' paths, are not keys; neither matches.)"""
    if KEY_PREFIX.match(text) and len(text) >= 12:
        return True
    for run in re.findall(r"[A-Za-z0-9]{20,}", text):
        if re.search(r"[a-z]", run) and re.search(r"[A-Z]", run) and re.search(r"\d", run):
            return True
    return re.search(r"[0-9a-fA-F]{48,}", text) is not None


def _decoded(text: str) -> str:
    for _ in range(5):  # percent-encoded any number of times
        once = unquote(text)
        if once == text:
            break
        text = once
    return text


def _secret_in(text: str) -> bool:
    plain = _decoded(text)
    return looks_like_key(plain) or any(s in plain for s in known_secrets())


def check_base_url(spec: str, url: Any) -> None:
    """A ``base_url`` is an http(s) URL with a host and a valid port, and carries no
    credential anywhere (the message never repeats the value)."""
    fix = ("the model spec is recorded with every episode: put the key in the environment "
           "variable the adapter reads (api_key_env=NAME to choose it)")
    if not isinstance(url, str) or not url:
        raise UsageError(f"{spec}: base_url must be a URL such as http://127.0.0.1:8000/v1")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"{spec}: base_url must start with http:// or https:// and name a host")
    try:
        port = parts.port
    except ValueError:
        raise UsageError(f"{spec}: base_url has a port that is not a number from 1 to 65535") from None
    if port == 0:
        raise UsageError(f"{spec}: base_url has a port that is not a number from 1 to 65535")
    if parts.username or parts.password:
        raise UsageError(f"{spec.split('?')[0]}: do not put credentials in base_url; {fix}")
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if CREDENTIAL_NAME.search(_decoded(name)) or _secret_in(value) or _secret_in(name):
            raise UsageError(f"{spec.split('?')[0]}: base_url's query parameter "
                             f"{_decoded(name)[:20]!r} looks like a credential; {fix}")
    for i, segment in enumerate(parts.path.split("/")):
        if segment and _secret_in(segment):
            raise UsageError(f"{spec.split('?')[0]}: base_url's path segment {i} looks like a "
                             f"credential; {fix}")
    if parts.fragment and _secret_in(parts.fragment):
        raise UsageError(f"{spec.split('?')[0]}: base_url's fragment looks like a credential; {fix}")
