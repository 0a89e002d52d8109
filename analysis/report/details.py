"""Episode details for the episode page: the stored record as written, plus a few facts the
page should not have to recompute (where the record came from, the command that re-runs it,
which intent each committed effect counts toward).

Details are grouped into buckets (see :func:`~limbo.analysis.report.index.bucket_of`) and each
bucket is one script, ``episodes/bNNNN.js``, whose payload is gzip-compressed JSON in base64:
an episode log is repetitive, so compression makes the site about twenty times smaller, and
the page inflates it with the browser's own ``DecompressionStream`` (no library, works from
``file://``).
"""

from __future__ import annotations

import base64
import gzip
import json
import math
import shlex
from pathlib import Path
from typing import Any

from limbo.grading import assign


def bucket_file(bucket: int) -> str:
    return f"episodes/b{bucket:04d}.js"


def rerun_command(run_dir: Path, episode_id: str) -> str:
    return f"limbo episode --from {shlex.quote(str(run_dir))} {shlex.quote(episode_id)}"


def _ledger_roles(record: dict[str, Any]) -> dict[str, Any]:
    """For each ledger seq: the intent it counts toward and whether it is a repeat of one."""
    intents = (record.get("header") or {}).get("intents") or []
    ledger = record.get("ledger") or []
    try:
        hits = assign(intents, ledger)
    except (KeyError, TypeError, AttributeError):
        return {}
    roles: dict[str, Any] = {}
    for intent, seqs in hits.items():
        for n, seq in enumerate(seqs):
            roles[str(seq)] = {"intent": intent, "copy": n + 1, "of": len(seqs)}
    return roles


def detail(record: dict[str, Any], source: Path, line: int) -> dict[str, Any]:
    """``record`` with a ``_site`` object added (the record's own fields are left as stored)."""
    run_dir = source.parent
    episode_id = str(record.get("episode_id"))
    return {**record, "_site": {
        "source": f"{source}:{line}",
        "rerun": rerun_command(run_dir, episode_id),
        "ledger_roles": _ledger_roles(record),
    }}


def _finite(value: Any) -> Any:
    """``value`` with NaN and infinities as null (the browser's JSON parser rejects them)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def to_json(payload: Any) -> str:
    """Strict, compact JSON for a page script (a stray NaN in a record becomes null)."""
    try:
        return json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError:
        return json.dumps(_finite(payload), ensure_ascii=False, separators=(",", ":"))


def bucket_script(bucket: int, details: dict[str, dict[str, Any]]) -> bytes:
    """One bucket file: ``LIMBO.receive("bucket", N, "<base64 of gzip of JSON>")``."""
    raw = to_json(details)
    packed = base64.b64encode(gzip.compress(raw.encode("utf-8"), mtime=0)).decode("ascii")
    return f'LIMBO.receive("bucket",{bucket},"{packed}");\n'.encode("ascii")
