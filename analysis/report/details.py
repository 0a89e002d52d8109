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
from pathlib import Path
from typing import Any

from limbo.log.grading import assign
from limbo.log.quick import ledger_parts

COMPRESSION = 1
"""zlib's fastest level: at the paper's scale (40,000 episodes) a tenth of level 9's time and
still under a sixth of the records' size (32 MB of 228)."""


def bucket_file(bucket: int) -> str:
    return f"episodes/b{bucket:04d}.js"


def rerun_command(run_dir: Path, episode_id: str) -> str:
    """The command that re-runs the episode, with the plugins and prices its run used."""
    from limbo.log.rerun import rerun_command as command

    return command(run_dir, episode_id)


def _ledger_roles(header: Any, ledger: Any) -> dict[str, Any]:
    """For each ledger seq: the intent it counts toward and whether it is a repeat of one."""
    intents = header.get("intents") if isinstance(header, dict) else None
    try:
        hits = assign(intents or [], ledger or [])
    except (KeyError, TypeError, AttributeError):
        return {}
    roles: dict[str, Any] = {}
    for intent, seqs in hits.items():
        for n, seq in enumerate(seqs):
            roles[str(seq)] = {"intent": intent, "copy": n + 1, "of": len(seqs)}
    return roles


def _refuse(token: str) -> None:
    raise ValueError(f"{token} is not JSON a browser reads")


def detail_json(text: str, source: Path, line: int, episode_id: str,
                rerun: str | None = None) -> str:
    """One episode's details as JSON: the stored line itself with a ``_site`` object added.

    The line is used as written, not decoded and encoded again (at 25,000 episodes that
    round trip was most of the build): the reader checks it is strict JSON and decodes only
    its header and ledger (:func:`limbo.log.quick.ledger_parts`). Only a line with NaN or
    Infinity in it is re-encoded, and one that does not parse whole is replaced by a note
    saying so. ``rerun`` is the episode's re-run command when the caller has it at hand."""
    site: dict[str, Any] = {"source": f"{source}:{line}",
                            "rerun": rerun or rerun_command(source.parent, episode_id)}
    body = text.rstrip()
    quick = ledger_parts(body)
    if quick is not None:
        site["ledger_roles"] = _ledger_roles(*quick)
        empty = body[1:].lstrip().startswith("}")
        return body[:-1] + ("" if empty else ",") + '"_site":' + to_json(site) + "}"
    try:
        record = json.loads(body, parse_constant=_refuse)
    except ValueError:
        try:
            record = json.loads(body)
            body = to_json(record)
        except ValueError as exc:
            site["unreadable"] = f"the stored line does not parse as a whole: {exc}"
            return to_json({"episode_id": episode_id, "_site": site})
    if not isinstance(record, dict):
        return to_json({"episode_id": episode_id, "_site": {**site, "unreadable": "not an object"}})
    site["ledger_roles"] = _ledger_roles(record.get("header"), record.get("ledger"))
    return body[:-1] + ("," if record else "") + '"_site":' + to_json(site) + "}"


def _finite(value: Any) -> Any:
    """``value`` with NaN and infinities as null (the browser's JSON parser rejects them)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
"""What ``json.dumps`` with these options builds afresh on each call, built once: a report
calls it twice per episode. It keeps no state between calls."""


def to_json(payload: Any) -> str:
    """Strict, compact JSON for a page script (a stray NaN in a record becomes null)."""
    try:
        return _COMPACT.encode(payload)
    except ValueError:
        return json.dumps(_finite(payload), ensure_ascii=False, separators=(",", ":"))


def bucket_script(bucket: int, details: dict[str, str]) -> bytes:
    """One bucket file: ``LIMBO.receive("bucket", N, "<base64 of gzip of JSON>")`` from each
    episode id's details as JSON text."""
    raw = "{" + ",".join(f"{to_json(k)}:{v}" for k, v in details.items()) + "}"
    packed = base64.b64encode(gzip.compress(raw.encode("utf-8"), COMPRESSION, mtime=0))
    return f'LIMBO.receive("bucket",{bucket},"{packed.decode("ascii")}");\n'.encode("ascii")
