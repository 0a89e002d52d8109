"""The gate's verdict as JUnit XML, the report format CI systems read.

One ``testsuite`` per arm. In it, one test case per (fault family, threshold) — failed when the
threshold is crossed — and one per failing episode (its family's threshold crossed, the episode
a duplicate or not exactly once), whose failure text is the ``limbo show`` command that prints
its timeline. An errored episode (:mod:`limbo.log.rated`) is a test case with an ``error``: in its
arm's suite when its family is gated, else in a suite of its own (``errored episodes``), so
every one is listed. An episode is one test case per family even when it fails both
thresholds.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from pathlib import Path

from limbo.analysis.gate import Check, Episode, Verdict
from limbo.base.errors import UsageError


def _case(suite: ET.Element, classname: str, name: str) -> ET.Element:
    return ET.SubElement(suite, "testcase", classname=classname, name=name, time="0")


def _episode_cases(suite: ET.Element, classname: str, checks: list[Check]) -> None:
    failing: dict[tuple[str, str], list[Episode]] = {}
    errored: dict[tuple[str, str], Episode] = {}
    for check in checks:
        for episode in check.episodes:
            failing.setdefault((check.family, episode.episode_id), []).append(episode)
        for episode in check.errors:
            errored[(check.family, episode.episode_id)] = episode
    for (family, episode_id), found in failing.items():
        why = " and ".join(dict.fromkeys(e.why for e in found))
        case = _case(suite, classname, f"{family}: {episode_id} ({found[0].cell})")
        failure = ET.SubElement(case, "failure", message=why, type="episode")
        failure.text = f"{why}: {found[0].cell}\n{found[0].show}\n"
    for (family, episode_id), episode in errored.items():
        case = _case(suite, classname, f"{family}: {episode_id} ({episode.cell})")
        error = ET.SubElement(case, "error", message=f"ended in {episode.why}", type=episode.why)
        error.text = f"{episode.cell}\n{episode.show}\n"


def document(verdict: Verdict) -> ET.ElementTree:
    """The XML tree of ``verdict``."""
    root = ET.Element("testsuites", name="limbo check")
    arms: dict[str, list[Check]] = {}
    for check in verdict.checks:
        arms.setdefault(check.arm, []).append(check)
    for arm, checks in arms.items():
        suite = ET.SubElement(root, "testsuite", name=arm)
        classname = f"limbo.check.{arm}"
        for check in checks:
            case = _case(suite, classname, check.name)
            if check.failed:
                failure = ET.SubElement(case, "failure", message=check.message, type="threshold")
                failure.text = "\n".join([check.message, *(e.show for e in check.episodes)])
            else:
                ET.SubElement(case, "system-out").text = check.message
        _episode_cases(suite, classname, checks)
        _count(suite)
    listed = {e.episode_id for c in verdict.checks for e in c.errors}
    rest = [e for e in verdict.errors if e.episode_id not in listed]
    if rest:
        suite = ET.SubElement(root, "testsuite", name="errored episodes")
        for episode in rest:
            case = _case(suite, "limbo.check.errored", f"{episode.episode_id} ({episode.cell})")
            error = ET.SubElement(case, "error", message=f"ended in {episode.why}",
                                  type=episode.why)
            error.text = f"{episode.cell}\n{episode.show}\n"
        _count(suite)
    _count(root)
    ET.indent(root)
    return ET.ElementTree(root)


def _count(node: ET.Element) -> None:
    cases = list(node.iter("testcase"))
    node.set("tests", str(len(cases)))
    node.set("failures", str(sum(c.find("failure") is not None for c in cases)))
    node.set("errors", str(sum(c.find("error") is not None for c in cases)))
    node.set("skipped", "0")


def write(verdict: Verdict, path: Path) -> None:
    """Write the report to ``path`` atomically (a CI reader never sees half of it)."""
    if path.is_dir():
        raise UsageError(f"--junit {path} is a directory; name a file")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        document(verdict).write(tmp, encoding="utf-8", xml_declaration=True)
        os.replace(tmp, path)
    except OSError as exc:
        raise UsageError(f"--junit {path}: cannot write: {exc.strerror or exc}") from None
