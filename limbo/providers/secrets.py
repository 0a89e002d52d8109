"""Keeping credentials out of everything we write.

Records, manifests, cache files and log lines may carry provider error text, and a provider
(or a proxy in front of one) can echo a credential back in an error. :func:`scrub` blanks, in
any text: the values of credential-looking environment variables (``*_API_KEY``, ``*_TOKEN``,
``*_SECRET``, ``*_PASSWORD``, plus any variable an adapter was told to read its key from), and
anything shaped like an OpenAI or Anthropic key.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable

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
    state = (tuple(raw.items()) if isinstance(raw, dict) else None, frozenset(_extra_vars))
    global _memo
    if state[0] is not None and _memo is not None and _memo[0] == state:
        return list(_memo[1])
    values = {v for k, v in os.environ.items()
              if (k in _extra_vars or _NAMES.search(k)) and len(v) >= MIN_LEN}
    found = sorted(values, key=len, reverse=True)
    _memo = (state, tuple(found))
    return found


_memo: tuple[object, tuple[str, ...]] | None = None
"""The last environment seen and its secrets."""


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
