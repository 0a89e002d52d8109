"""A disk cache of model responses, so that re-running a grid costs nothing.

The key is a digest of everything that determines a response: who answers (the endpoint's
identity — provider, wire API and base URL: one model name served by two servers, or by one
server through two APIs, is two models here), the model, the parameters that change what the
model does (not transport settings such as ``stream`` or ``timeout``), the conversation, the
tools, and the episode's seed. The seed is part of the key on purpose: two
samples of the same cell under different seeds must stay independent draws, never collapse
into one cached answer. A hit returns the stored turn, usage and cost included, so the re-run's
records are identical to the first run's. Only a turn the provider answered well is stored: a
failure, an unreadable or empty reply, or a reply that reports an error is raised before it
could be (:mod:`limbo.providers.base`). Keys of version 1 (before the endpoint was part of
them) are never read again.

Files are written atomically (temp file + rename), one per response, in a two-level fan-out
(``ab/abcdef....json``) — safe under several worker processes sharing one directory. Nothing
secret is stored: requests carry keys in headers, and the key material here has none.

The cache is off unless chosen: by the run the episodes belong to (``--cache-dir``, bound
around them by :func:`limbo.providers.options.using`), the ``LIMBO_CACHE_DIR`` environment
variable, or an explicit ``cache=`` argument to an adapter.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

from limbo.base.environ import getenv
from limbo.base.hashing import canonical_json, digest
from limbo.base.secrets import scrub
from limbo.episode.models import Message, ModelTurn, ToolDef
from limbo.providers.options import current

log = logging.getLogger("limbo.providers")

ENV = "LIMBO_CACHE_DIR"
KEY_VERSION = 2


class ResponseCache:
    """Model turns on disk, keyed by :meth:`key`."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.hits = 0
        self.misses = 0

    @staticmethod
    def key(model: str, params: dict[str, Any], messages: list[Message], tools: list[ToolDef],
            seed: int, endpoint: str = "") -> str:
        material = {"v": KEY_VERSION, "endpoint": endpoint, "model": model, "params": params,
                    "seed": seed,
                    "messages": [m.model_dump(mode="json") for m in messages],
                    "tools": [t.model_dump(mode="json") for t in tools]}
        return digest(material, 40)

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def holds(self, key: str) -> bool:
        """Whether a response is stored under ``key`` (not counted as a hit or a miss)."""
        return self._path(key).is_file()

    def get(self, key: str) -> ModelTurn | None:
        path = self._path(key)
        try:
            turn = ModelTurn.model_validate(json.loads(path.read_bytes())["turn"])
        except (OSError, ValueError, KeyError, TypeError):  # absent, or not a turn: a miss
            self.misses += 1
            return None
        self.hits += 1
        return turn

    def put(self, key: str, model: str, turn: ModelTurn) -> None:
        """Store ``turn`` (scrubbed of credentials). The cache is an optimisation: a write that
        fails (a full disk) is logged and skipped, never a reason to fail the episode."""
        path = self._path(key)
        body = scrub(canonical_json({"key": key, "model": model,
                                     "turn": turn.model_dump(mode="json")}))
        tmp = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
            with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as fh:
                fh.write(body)
            os.replace(tmp, path)
        except OSError as exc:
            log.warning("response cache: cannot write %s (%s); going on without it", path,
                        exc.strerror)
        finally:
            if tmp is not None:
                Path(tmp).unlink(missing_ok=True)

    def __len__(self) -> int:
        return sum(1 for _ in self.root.glob("*/*.json"))


def default_cache() -> ResponseCache | None:
    """The cache of the run the code here belongs to (:func:`limbo.providers.options.using`),
    else one at ``$LIMBO_CACHE_DIR``, else none."""
    chosen = current()
    root = getenv(ENV) if chosen is None else chosen.cache_root
    return ResponseCache(root) if root else None
