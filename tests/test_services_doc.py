"""docs/world.md carries tables generated from the code (tools, error kinds, defaults,
templates); this test fails when the code and the document drift apart.

Regenerate the tables in place with ``.venv/bin/python tests/test_services_doc.py``.
"""

from __future__ import annotations

import inspect
import re
import sys
import typing
from pathlib import Path
from typing import Any

from limbo.sim.config import Limits, Timing
from limbo.sim.results import ERROR_KINDS, error
from limbo.sim.service import OpSpec
from limbo.sim.tasks import templates
from limbo.sim.tools import toolset

DOC = Path(__file__).resolve().parent.parent / "docs" / "world.md"
BLOCK = re.compile(r"(<!-- (\w+):begin -->\n)(.*?)(<!-- \2:end -->)", re.S)


class _Blank(dict):  # type: ignore[type-arg]
    """Arguments for evaluating a contract fact: any argument not given is blank."""

    def __missing__(self, key: str) -> str:
        return ""


def _variants(op: OpSpec) -> list[dict[str, Any]]:
    """One argument set per platform for social tools, else one blank set."""
    if "platform" not in inspect.signature(op.func).parameters:
        return [_Blank()]
    hint = typing.get_type_hints(op.func)["platform"]
    return [_Blank(platform=p) for p in typing.get_args(hint)]


def _grouped(values: dict[str, str]) -> str:
    """``{"mastodon": "strong", "x": "none"}`` -> ``strong (mastodon); none (x)``."""
    if set(values) == {""}:
        return values[""]
    groups: dict[str, list[str]] = {}
    for target, value in values.items():
        groups.setdefault(value, []).append(target)
    if len(groups) == 1:
        return next(iter(groups))
    return "; ".join(f"{v} ({', '.join(ts)})" for v, ts in groups.items())


def _key(op: OpSpec, contract: str) -> str:
    if not op.accepts_key(contract):  # type: ignore[arg-type]
        return "no key parameter"
    out = {}
    for args in _variants(op):
        honoured = op.honours_key(contract, args)  # type: ignore[arg-type]
        ttl = op.key_ttl(contract, args) / 3600  # type: ignore[arg-type]
        out[args.get("platform", "")] = f"honoured, kept {ttl:g} h" if honoured else "ignored"
    return _grouped(out)


def _lag(op: OpSpec, args: dict[str, Any]) -> str:
    lag = op.lag(args) if op.lag else None
    return "not available" if lag is None else ("strong" if lag == 0 else f"eventual, {lag:g} s")


def _readback(op: OpSpec, args: dict[str, Any]) -> tuple[OpSpec, dict[str, Any]] | None:
    rb = op.readback(args) if op.readback else None
    if rb is None:
        return None
    return toolset("native")[f"{op.service}_{rb.op}"].op, rb.args


def _path(op: OpSpec) -> str:
    """Read path: a read's own lag; a write's read-back tool and its lag."""
    if op.kind == "read":
        return _grouped({a.get("platform", ""): _lag(op, a) for a in _variants(op)})
    lags, tools = {}, set()
    for args in _variants(op):
        found = _readback(op, args)
        if found is None:
            return "—"
        read, rb_args = found
        tools.add(read.tool)
        lags[args.get("platform", "")] = _lag(read, rb_args)
    return f"`{', '.join(sorted(tools))}`: {_grouped(lags)}"


def _idempotency(op: OpSpec, contract: str) -> str:
    """The idempotency class the ledger records for this write under ``contract``."""
    out = {}
    for args in _variants(op):
        found = _readback(op, args)
        lag = found[0].lag(found[1]) if found and found[0].lag else None
        out[args.get("platform", "")] = op.write_class(contract, args, lag)["idempotency"]  # type: ignore[arg-type]
    return _grouped(out)


def render_tools() -> str:
    rows = ["| tool | kind | idempotency, native | idempotency, keys-everywhere | key, native "
            "| key, keys-everywhere | read path | reversibility |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, spec in toolset("native").items():
        op = spec.op
        if op is None:
            rows.append(f"| `{name}` | utility | — | — | — | — | — | — |")
        elif op.kind == "read":
            rows.append(f"| `{name}` | read | — | — | — | — | {_path(op)} | — |")
        else:
            rows.append(f"| `{name}` | write | {_idempotency(op, 'native')} | "
                        f"{_idempotency(op, 'keys-everywhere')} | {_key(op, 'native')} | "
                        f"{_key(op, 'keys-everywhere')} | {_path(op)} | {op.reversibility} |")
    return "\n".join(rows) + "\n"


def render_errors() -> str:
    rows = ["| kind | status |", "| --- | --- |"]
    for kind in sorted(ERROR_KINDS):
        status = error(kind, "")["error"]["status"]  # type: ignore[arg-type]
        rows.append(f"| `{kind}` | {'—' if status is None else status} |")
    return "\n".join(rows) + "\n"


LIMIT_NOTES = {
    "model_turns": "Model turns before the episode ends as `turn_limit`.",
    "tool_calls": "Tool calls (finish excluded) before the episode ends as `tool_limit`.",
    "agent_time_s": "Agent-visible sim time before the episode ends as `time_limit`.",
}


def render_defaults() -> str:
    rows = ["| setting | default | meaning |", "| --- | --- | --- |"]
    for model in (Timing(), Limits()):
        for name, field in type(model).model_fields.items():
            doc = field.description or _field_doc(type(model), name) or LIMIT_NOTES.get(name, "")
            doc = " ".join(doc.split())
            rows.append(f"| `{type(model).__name__}.{name}` | {getattr(model, name):g} | {doc} |")
    return "\n".join(rows) + "\n"


def _field_doc(cls: type, name: str) -> str:
    """The attribute docstring under ``name`` in ``cls``'s source (pydantic drops them)."""
    source = inspect.getsource(cls)
    found = re.search(rf"\n\s+{name}:[^\n]*\n\s+\"\"\"(.*?)\"\"\"", source, re.S)
    return found.group(1) if found else ""


def render_templates() -> str:
    rows = ["| template | service | setup | plan (writes, in order; each can be the focal write) |",
            "| --- | --- | --- | --- |"]
    for name, t in templates().items():
        setup = ", ".join(f"`{s.tool}`" for s in t.setup) or "—"
        plan = " → ".join(_step(s) for s in t.steps)
        rows.append(f"| `{name}` | {t.service} | {setup} | {plan} |")
    return "\n".join(rows) + "\n"


def _step(step: Any) -> str:
    platform = step.args.get("platform")
    return f"`{step.tool}`" + (f" ({platform})" if platform else "")


RENDER = {"tools": render_tools, "errors": render_errors, "defaults": render_defaults,
          "templates": render_templates}


def regenerate(text: str) -> str:
    return BLOCK.sub(lambda m: m.group(1) + RENDER[m.group(2)]() + m.group(4), text)


def test_docs_world_tables_match_the_code() -> None:
    text = DOC.read_text()
    blocks = {m.group(2): m.group(3) for m in BLOCK.finditer(text)}
    assert set(blocks) == set(RENDER), "docs/world.md must carry every generated table"
    for name, render in RENDER.items():
        assert blocks[name] == render(), (
            f"docs/world.md table '{name}' is stale; run: python tests/test_services_doc.py")


def test_tools_table_lists_every_tool_once() -> None:
    table = render_tools()
    for name in toolset("keys-everywhere"):
        assert table.count(f"| `{name}` |") == 1


if __name__ == "__main__":
    DOC.write_text(regenerate(DOC.read_text()))
    sys.stdout.write(f"regenerated {DOC}\n")
