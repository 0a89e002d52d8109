"""Keeping credentials out of what the proxy writes (the journal, the record, the manifest).

Two rules, on top of :func:`limbo.base.secrets.scrubber` (the values of credential-looking
environment variables, masked wherever they appear) that every written line goes through:

- every ``--upstream-header`` value is a secret too (an ``Authorization`` header is the usual
  way to reach a team's server), and so is a credential-named value of the upstream URL's query
  string (``?api_key=...``) or of its command line (``--token ...``): masked wherever it
  appears — whole, and its last word (the token of ``Bearer <token>``), and in the forms a
  server may echo it in (percent-encoded, JSON-escaped, base64);
- an argument whose name looks like a credential (``password``, ``api_key``, ``token``,
  ``secret``, ``authorization``, ``credential``, at any depth) is written as ``***`` — except
  the fields that identify a write's business effect, which grading compares (a credential
  that identifies a business effect would be a strange API).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable
from typing import Any

from limbo.base.secrets import MASK, MIN_LEN, scrubber, variants

_CREDENTIAL = re.compile(r"pass(word|wd)?$|api[_-]?key|token|secret|authori[sz]ation|credential"
                         r"|private[_-]?key|cookie", re.IGNORECASE)
_BARE = re.compile(r"key|sig|signature|auth", re.IGNORECASE)
"""Names that are credentials when they stand alone (``?key=...``), not inside a longer one."""


def is_credential(name: str) -> bool:
    """Whether a field, query parameter or flag named ``name`` looks like a credential."""
    return bool(_CREDENTIAL.search(name) or _BARE.fullmatch(name))


def redact(value: Any, keep: Collection[str] = ()) -> Any:
    """``value`` with every credential-named field masked (top-level ``keep`` fields spared)."""
    if isinstance(value, dict):
        return {k: (MASK if k not in keep and isinstance(k, str) and _CREDENTIAL.search(k)
                    and v is not None else redact(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    return value


def scrub_with(extra: Iterable[str]) -> Callable[[str], str]:
    """The scrubber of every written line: the environment's secrets and ``extra`` (the
    upstream's: header values, credentials of its URL or command) masked, longest first — each
    whole and by its last word (the token of ``Bearer <token>``), in every form
    :func:`limbo.base.secrets.variants` knows (percent-encoded, JSON-escaped, base64)."""
    base = scrubber()
    parts = {part for value in extra for part in (value, value.split()[-1] if value.split()
                                                  else value)}
    secrets = sorted({form for s in parts for form in variants(s) if len(form) >= MIN_LEN},
                     key=len, reverse=True)

    def run(text: str) -> str:
        for secret in secrets:
            if secret in text:
                text = text.replace(secret, MASK)
        return base(text)

    return run
