"""The record's versions and its id pattern, with no model behind them.

Why apart from :mod:`limbo.log.records`: a reader of records (``limbo status``, the quick
verdicts) checks a line's ``schema`` and ``episode_id`` and needs nothing else of the record's
pydantic edge, whose import is a fifth of ``limbo status`` on a large run. Version policy:
:data:`SCHEMA` names the shape (``limbo.episode/N``); any change of the JSON shape bumps ``N``.
"""

from __future__ import annotations

from typing import Literal, get_args

SCHEMA_PREFIX = "limbo.episode/"
Version = Literal["limbo.episode/1", "limbo.episode/2"]
"""The versions of the record shape that this LIMBO writes (add one with any change of
shape): ``/2`` is ``/1`` with ``cell.replicate`` (≥ 1), written only for the extra samples of
``limbo run --repeats``; every other record is ``/1``, byte for byte as before repeats."""
EPISODE_ID = r"^[A-Za-z0-9_.:-]{1,200}$"
SCHEMA: Version = get_args(Version)[0]
REPLICATE_SCHEMA: Version = get_args(Version)[1]
"""The version of a record whose cell carries a replicate index (≥ 1)."""
