"""Request bodies as the bytes sent, built cheaply: a turn's body is encoded once (not once
per attempt), the tool definitions — most of a body — once per toolset, and each client's
absolute URLs once per path."""

from __future__ import annotations

import json
import weakref
from typing import Any

from limbo.episode.models import ToolDef


def absolute(client: Any, path: str) -> str:
    """``path`` joined to ``client``'s base URL, as the SDK would join it, once per client and
    path: given an absolute URL the SDK takes it as it is, instead of parsing the path and
    rebuilding its base URL around it on every call (a tenth of a call's client CPU)."""
    urls = _URLS.setdefault(client, {})
    url = urls.get(path)
    if url is None:
        base = client.base_url
        url = urls[path] = str(base.copy_with(raw_path=base.raw_path + path.lstrip("/").encode()))
    return url


_URLS: weakref.WeakKeyDictionary[Any, dict[str, str]] = weakref.WeakKeyDictionary()
"""Each live client's absolute URLs by path (gone with the client)."""


def wire_bytes(request: dict[str, Any], tools: list[ToolDef]) -> bytes:
    """A request body as the JSON bytes sent (compact, UTF-8, as the SDKs encode it).

    Its ``tools`` are most of its bytes (about 11 kB of 11.5 on a first turn) and the same on
    every turn of every episode under one contract, so they are encoded once per toolset:
    ``tools`` are the shared definitions (:func:`limbo.harnesses.toolcalls.tool_defs`) the
    field was made from, and a stored encoding is used only for a field equal to the one it
    was made from."""
    if not tools or "tools" not in request:
        return _json(request)
    return b"{" + b",".join(_json(key) + b":" + (_tools_json(value, tools) if key == "tools"
                                                 else _json(value))
                            for key, value in request.items()) + b"}"


def _json(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def _tools_json(field: Any, tools: list[ToolDef]) -> bytes:
    key = (*field[0], *map(id, tools))  # the API's tool shape, then the definitions
    known = _TOOLS.get(key)
    if known is None or known[1] != field:  # equal fields share their schema objects: cheap
        if len(_TOOLS) >= 64:
            _TOOLS.clear()
        known = _TOOLS[key] = (tuple(tools), field, _json(field))
    return known[2]


_TOOLS: dict[tuple[str | int, ...], tuple[tuple[ToolDef, ...], Any, bytes]] = {}
"""Encoded ``tools`` fields by the identities of the definitions they came from (kept alive
with them, so an id is not reused while its entry stands)."""
