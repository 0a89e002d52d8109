"""docs/inspect.md and docs/ci.md: their commands and Python example run as written, with the
exit codes and output they state."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from limbo.cli import main

DOCS = Path(__file__).resolve().parents[1] / "docs"


def blocks(doc: str, kind: str) -> list[str]:
    return re.findall(rf"```{kind}\n(.*?)```", (DOCS / doc).read_text(), re.S)


def shell(block: str, cwd: Path) -> list[tuple[str, int, str]]:
    """Run each ``limbo`` line of ``block`` (in process, in ``cwd``); (command, exit code,
    stdout) each. A line may end with ``# exit N``, the exit code it states."""
    ran = []
    for line in block.splitlines():
        command, _, comment = line.partition("  #")
        if not command.startswith("limbo "):
            continue
        out, err = io.StringIO(), io.StringIO()
        with contextlib.chdir(cwd), contextlib.redirect_stdout(out), \
                contextlib.redirect_stderr(err):
            code = main(shlex.split(command)[1:])
        stated = re.search(r"exit (\d)", comment)
        assert code == (int(stated.group(1)) if stated else 0), (command, err.getvalue())
        ran.append((command, code, out.getvalue()))
    return ran


def test_inspect_page_runs_end_to_end(tmp_path: Path, capsys, monkeypatch) -> None:
    first, then = blocks("inspect.md", "sh")
    shell(first, tmp_path)
    monkeypatch.chdir(tmp_path)
    (example,) = blocks("inspect.md", "python")
    exec(compile(example, str(DOCS / "inspect.md"), "exec"), {"__name__": "doc_example"})
    assert capsys.readouterr().out.strip() == "success 4 0.5 0.5"
    printed = {command: out for command, _, out in shell(then, tmp_path)}
    table3 = printed["limbo tables logs --table 3"]
    # two episodes of one world: no interval (stats.md §8), the count still shown
    assert re.search(r"^\| inspect/mockllm/model \| 0\.0 \[—\] 0/2 \|", table3, re.M)
    compare = printed["limbo compare runs/verify logs"]
    deltas = [line.split("|")[6].split(" [")[0].strip() for line in compare.splitlines()
              if line.startswith("| ") and line.split("|")[2].strip() in ("dup", "TS", "EOS")]
    assert deltas and set(deltas) == {"+0.0"}
    assert "passed" in printed["limbo check logs --max-dup 0 --family read-back-resolves"]


def test_inspect_page_lists_every_task() -> None:
    from limbo.experiments.grid import builtin_grids
    from limbo.inspect.registry import TASKS

    text = (DOCS / "inspect.md").read_text()
    assert set(TASKS) == set(builtin_grids())
    for name in TASKS:
        assert f"`limbo/{name}`" in text, name


@pytest.fixture(scope="module")
def ci_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cwd = tmp_path_factory.mktemp("ci")
    for block in blocks("ci.md", "sh"):
        shell(block, cwd)
    return cwd


def test_ci_page_recipe_gates_as_stated(ci_page: Path) -> None:
    from junitparser import JUnitXml

    passed = JUnitXml.fromfile(str(ci_page / "reports" / "limbo.xml"))
    failed = JUnitXml.fromfile(str(ci_page / "reports" / "blind.xml"))
    assert passed.failures == 0 and passed.tests == 1
    assert failed.failures == 13  # the family, and each of its 12 duplicates


def test_ci_page_junit_excerpt_is_real(ci_page: Path) -> None:
    text = (DOCS / "ci.md").read_text().split("## The JUnit report")[1]
    excerpt = re.search(r"```\n(.*?)```", text, re.S).group(1).strip().splitlines()
    written = (ci_page / "reports" / "blind.xml").read_text()
    for line in excerpt:
        assert line in written, line


def test_ci_page_workflow_runs_the_documented_command() -> None:
    (workflow,) = blocks("ci.md", "yaml")
    commands = [line.split("run: ", 1)[1] for line in workflow.splitlines() if "run: limbo" in line]
    documented = [line.partition("  #")[0] for block in blocks("ci.md", "sh")
                  for line in block.splitlines()]
    assert commands and all(c in documented for c in commands)
