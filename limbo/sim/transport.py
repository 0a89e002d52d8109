"""How to reach a model, kept apart from which model it is.

A model string carries parameters after a ``?``. Most change what the model answers
(``temperature``, ``api``, a policy's ``wait``) and so belong to the cell and its id. A few
only say how to reach it — :data:`TRANSPORT_PARAMS`: the server's address, the timeout per
request, the retry budget, the variable holding the key. Those are split off the cell's
``model`` (:attr:`limbo.sim.cell.Cell.transport`): a local server moved to another port, or a
longer timeout, keeps every cell and its episode id, so a run resumes instead of starting
over, and the records of one model are not split across two model names. The run's manifest
records them (``transport``), so what reached the model is still written down.
"""

from __future__ import annotations

import functools
import json
from typing import Any
from urllib.parse import quote, unquote_plus

TRANSPORT_PARAMS = ("base_url", "timeout", "max_attempts", "api_key_env")


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


@functools.cache
def split_transport(spec: str) -> tuple[str, tuple[tuple[str, Any], ...]]:
    """``spec`` without its transport parameters (the rest of its query kept as written), and
    those parameters, sorted. A spec without any comes back unchanged."""
    base, sep, query = spec.partition("?")
    if not sep:
        return spec, ()
    kept, transport = [], {}
    for piece in query.split("&"):
        name, _, value = piece.partition("=")
        if unquote_plus(name) in TRANSPORT_PARAMS:
            transport[unquote_plus(name)] = _value(unquote_plus(value))
        else:
            kept.append(piece)
    if not transport:
        return spec, ()
    return base + ("?" + "&".join(kept) if kept else ""), tuple(sorted(transport.items()))


def transports(models: list[str]) -> dict[str, dict[str, Any]]:
    """What the manifest records: each model (as its cells name it) with how it was reached."""
    found = {}
    for spec in models:
        identity, transport = split_transport(spec)
        if transport:
            found[identity] = dict(transport)
    return found


def joined(model: str, transport: tuple[tuple[str, Any], ...]) -> str:
    """``model`` with its transport parameters put back (what an adapter is built from)."""
    if not transport:
        return model
    pairs = "&".join(f"{name}={quote(value if isinstance(value, str) else json.dumps(value), safe=':/')}"
                     for name, value in transport)
    return model + ("&" if "?" in model else "?") + pairs
