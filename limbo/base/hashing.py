"""Canonical JSON, plain JSON text, and stable digests.

Everything that must be identical across processes and Python versions (episode ids, request
fingerprints, derived seeds) goes through :func:`canonical_json`, never through ``hash()``,
whose value for strings changes with ``PYTHONHASHSEED``.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
"""One encoder for every call: what ``json.dumps`` with these options builds afresh each time
(a dozen digests per episode made that construction a visible cost). ``encode`` keeps no state
between calls (its circular-reference check starts empty each time), so sharing it is safe."""


_PLAIN = json.JSONEncoder(ensure_ascii=False)


def plain_json(obj: Any) -> str:
    """``json.dumps(obj, ensure_ascii=False)`` with one shared encoder: the text a model is
    shown of a value (a tool result, a task's placeholder), made on every call of every
    episode."""
    return _PLAIN.encode(obj)


def canonical_json(obj: Any) -> str:
    """Serialise ``obj`` with sorted keys and no insignificant whitespace."""
    return _CANONICAL.encode(obj)


def digest(obj: Any, length: int = 16) -> str:
    """A hex digest of the canonical JSON of ``obj``, truncated to ``length`` characters."""
    return hashlib.sha256(_CANONICAL.encode(obj).encode()).hexdigest()[:length]
