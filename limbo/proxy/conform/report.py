"""What ``limbo conform`` tells: a verdict per tool × property, as a table, as JSON (the
run directory's ``conform.json``, and stdout with ``--json``) and as JUnit XML for CI.

The JSON is a pydantic model (:class:`Verdicts`): it is what other programs read, so its shape is
fixed and versioned (``limbo.conform/1``). Each verdict carries its evidence — the calls made
and their answers, the effects seen, the source of what conform knew of the tool, how effects
were seen — the episode that recorded it (``limbo show RUN EPISODE``), and a one-line command
that checks that tool and property again.

In JUnit, a tool is a test class and a property a test case: ``fail`` is a failure, ``unknown``
and ``not_applicable`` are skipped, with why — except that an ``unknown`` of a property named in
``--require`` is a failure too (nothing shows it holds, and a CI gate must not pass on that).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from limbo.base.errors import UsageError

SCHEMA = "limbo.conform/1"
Verdict = Literal["pass", "fail", "not_applicable", "unknown", "planned"]
"""``planned``: a ``--dry-run``'s check, not made."""


class CheckVerdict(BaseModel):
    """One tool × property."""

    model_config = ConfigDict(extra="forbid")

    tool: str
    declared: str | None
    """The ledger's name of the tool (``None``: its calls are not in the ledger)."""
    property: int
    name: str
    verdict: Verdict
    why: str
    finding: str | None = None
    """What property 6 or 8 reports (a blind retry's effects; the key's scope)."""
    source: Literal["world", "annotations"]
    arguments_from: Literal["world", "input schema"]
    observed_by: str
    calls: list[dict[str, Any]] = []
    effects: int | None = None
    removed: int | None = None
    episode: str | None = None
    reproduce: str


class Verdicts(BaseModel):
    """A whole run."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    schema_: str = Field(SCHEMA, alias="schema")
    upstream: str
    server: dict[str, str | None]
    world: str | None
    observer: str
    properties: dict[int, str]
    required: list[int]
    planned_calls: int
    verdicts: list[CheckVerdict]

    def failing(self) -> list[CheckVerdict]:
        """The verdicts that make the run exit non-zero: a required property failed or
        unknown."""
        return [v for v in self.verdicts if v.property in self.required
                and v.verdict in ("fail", "unknown")]

    def dumps(self) -> str:
        return self.model_dump_json(by_alias=True, indent=2) + "\n"


MARK = {"pass": "pass", "fail": "FAIL", "not_applicable": "n/a", "unknown": "unknown",
        "planned": "planned"}


def table(report: Verdicts) -> str:
    """The verdicts as a plain table, one line per tool × property that applies (the JSON
    lists the others, with why), then the reproducers of what failed."""
    rows = [("tool", "property", "verdict", "effects", "why")]
    for v in report.verdicts:
        if v.verdict == "not_applicable":
            continue
        effects = "" if v.effects is None else str(v.effects)
        rows.append((v.tool, f"{v.property} {v.name}", MARK[v.verdict], effects, v.why))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r[:4], widths, strict=True)) + "  " + r[4]
             for r in rows]
    counts = {k: sum(v.verdict == k for v in report.verdicts) for k in MARK}
    lines.append(", ".join(f"{n} {MARK[k]}" for k, n in counts.items() if n) +
                 f" (effects seen by {report.observer})")
    for v in report.verdicts:
        if v.verdict == "fail":
            lines.append(f"reproduce {v.tool} {v.property}: {v.reproduce}")
    return "\n".join(lines) + "\n"


def junit(report: Verdicts, path: Path, scrub: Callable[[str], str] = str) -> None:
    """Write ``report`` as JUnit XML to ``path`` (``scrub``: masks the secrets of the
    upstream's command line or URL, which the reproducers quote)."""
    root = ET.Element("testsuites", name="limbo conform")
    suite = ET.SubElement(root, "testsuite", name=f"limbo conform {report.upstream}",
                          tests=str(len(report.verdicts)))
    for v in report.verdicts:
        case = ET.SubElement(suite, "testcase", classname=f"limbo.conform.{v.tool}",
                             name=f"{v.property} {v.name}", time="0")
        text = f"{v.why}\nepisode: {v.episode}\nreproduce: {v.reproduce}\n"
        if v.verdict == "fail" or (v.verdict == "unknown" and v.property in report.required):
            ET.SubElement(case, "failure", message=v.why[:500], type=v.verdict).text = text
        elif v.verdict in ("unknown", "not_applicable"):
            ET.SubElement(case, "skipped", message=f"{v.verdict}: {v.why}"[:500])
        else:
            ET.SubElement(case, "system-out").text = text
    suite.set("failures", str(sum(1 for c in suite.iter("failure"))))
    suite.set("skipped", str(sum(1 for c in suite.iter("skipped"))))
    ET.indent(root)
    text = ET.tostring(root, encoding="unicode", xml_declaration=True)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(scrub(text) + "\n", encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot write --junit {path}: {exc.strerror}") from None
