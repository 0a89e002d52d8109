"""Keeping credentials out of everything we write.

Records, manifests, cache files and log lines may carry provider error text, and a provider
(or a proxy in front of one) can echo a credential back in an error. :func:`scrub` blanks, in
any text: the values of credential-looking environment variables (``*_API_KEY``, ``*_TOKEN``,
``*_SECRET``, ``*_PASSWORD``, plus any variable an adapter was told to read its key from), and
anything shaped like an OpenAI or Anthropic key.

A server may echo a key in another form: base64 (an ``Authorization: Basic`` header, a token it
decoded), percent-encoded (a URL), JSON-escaped (a body quoted inside a body). Each value is
masked in those forms too (:func:`variants`); in base64 wherever it starts in the encoded
bytes, since a key rarely starts a base64 text (``user:key``): each of the three alignments
has a core of characters that depend on the key alone, and that core is masked.
"""

from __future__ import annotations

import base64
import json
import os
import re
from collections.abc import Callable
from urllib.parse import quote, quote_plus

from limbo.base.environ import bound_values

MASK = "***"
MIN_LEN = 8
_NAMES = re.compile(r"(API_KEY|TOKEN|SECRET|PASSWORD)", re.IGNORECASE)
_SHAPES = re.compile(r"\b(sk-(?:ant-|proj-)?[A-Za-z0-9_\-]{12,})")
_extra_vars: set[str] = set()


def watch(var: str) -> None:
    """Also treat the value of environment variable ``var`` as a secret."""
    _extra_vars.add(var)


def watched() -> list[str]:
    """The variables :func:`watch` was told of (the keys the run's adapters read)."""
    return sorted(_extra_vars)


def known_secrets() -> list[str]:
    """Current values of the watched and credential-looking environment variables, longest
    first (so a key that contains another is masked whole). Remembered for as long as the
    environment and the watched names stay the same: every provider adapter (one per episode)
    asks, and decoding and matching the whole environment each time cost more than the rest
    of building the adapter."""
    raw = getattr(os.environ, "_data", None)
    extra = bound_values()
    state = (tuple(raw.items()) if isinstance(raw, dict) else None, frozenset(_extra_vars),
             tuple(sorted(extra.items())))
    global _memo
    if state[0] is not None and _memo is not None and _memo[0] == state:
        return list(_memo[1])
    values = {v for k, v in [*os.environ.items(), *extra.items()]
              if (k in _extra_vars or _NAMES.search(k)) and len(v) >= MIN_LEN}
    forms = {form for value in values for form in variants(value)}
    found = sorted(forms, key=len, reverse=True)
    _memo = (state, tuple(found))
    return found


_memo: tuple[object, tuple[str, ...]] | None = None
"""The last environment seen and its secrets."""


def variants(secret: str) -> set[str]:
    """``secret`` and the forms it may be echoed in: percent-encoded, JSON-escaped, and the
    key-only cores of its base64 (standard and URL-safe) at each alignment. Forms shorter
    than :data:`MIN_LEN` are left out (they would mask ordinary text)."""
    forms = {secret, quote(secret, safe=""), quote_plus(secret), secret.replace("/", "\\/"),
             json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1]}
    raw = secret.encode("utf-8")
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + raw).decode("ascii").rstrip("=")
        start = (0, 2, 3)[offset]  # the characters that still hold bits of the padding
        end = len(encoded) - (1 if (offset + len(raw)) % 3 else 0)  # nor of what follows
        core = encoded[start:end]
        forms |= {core, core.replace("+", "-").replace("/", "_")}
    return {form for form in forms if len(form) >= MIN_LEN}


def scrub(text: str) -> str:
    """``text`` with every known secret and key-shaped token masked."""
    for secret in known_secrets():
        text = text.replace(secret, MASK)
    return _SHAPES.sub(MASK, text)


def scrubber() -> Callable[[str], str]:
    """The last line for many texts in a row (every record of a run): the values of the
    credential variables, read once, masked wherever they appear. (Key-shaped text that is no
    configured key is left alone: it is not this run's secret, and a record's bytes must not
    depend on what a task happens to mention.)"""
    secrets = known_secrets()
    if not secrets:
        return _same

    def run(text: str) -> str:
        for secret in secrets:
            if secret in text:
                text = text.replace(secret, MASK)
        return text

    return run


def _same(text: str) -> str:
    return text
