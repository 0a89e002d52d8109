"""Canonical JSON and stable digests.

Everything that must be identical across processes and Python versions (episode ids, request
fingerprints, derived seeds) goes through :func:`canonical_json`, never through ``hash()``,
whose value for strings changes with ``PYTHONHASHSEED``.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(obj: Any) -> str:
    """Serialise ``obj`` with sorted keys and no insignificant whitespace."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def digest(obj: Any, length: int = 16) -> str:
    """A hex digest of the canonical JSON of ``obj``, truncated to ``length`` characters."""
    return hashlib.sha256(canonical_json(obj).encode()).hexdigest()[:length]
