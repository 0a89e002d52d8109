"""A command imports what it uses and nothing else: ``limbo --help`` no command at all, ``limbo
list services`` and ``limbo status`` neither the analysis stack nor a provider's SDK nor the MCP
SDK (nor asyncio, nor the records' pydantic models: it reads lines against their closed sets). (What is asserted is which modules load — behaviour; how long they take is
``benchmarks/bench_startup.py``'s.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("pandas", "numpy", "scipy", "statsmodels", "matplotlib", "mcp", "openai", "anthropic",
         "starlette", "uvicorn", "ray", "inspect_ai")
"""Libraries no command below needs."""


def _imported(*argv: str) -> set[str]:
    """The modules loaded once ``limbo argv`` has run, in a fresh interpreter."""
    code = ("import json, sys\nfrom limbo.cli import main\n"
            "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            "print(json.dumps(sorted(sys.modules)), file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True,
                          timeout=120)
    return set(json.loads(done.stderr.strip().splitlines()[-1]))


def _top(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


def test_help_imports_no_command_and_no_library() -> None:
    found = _imported("--help")
    assert not {m for m in found if m.startswith("limbo.commands.") and m != "limbo.commands"}
    assert not _top(found) & {*HEAVY, "pydantic", "simpy", "rich", "msgspec"}


@pytest.mark.parametrize("argv", [["list", "services"], ["list", "faults"]])
def test_a_listing_imports_neither_analysis_nor_sdks(argv: list[str]) -> None:
    found = _imported(*argv)
    assert not _top(found) & set(HEAVY)
    assert "limbo.commands.run" not in found and "limbo.providers.openai" not in found


def test_status_imports_neither_analysis_nor_providers(tmp_path: Path) -> None:
    from limbo.cli import main

    run = tmp_path / "run"
    assert main(["run", "--template", "charge_invoice", "--model", "policy/verify", "--fault",
                 "timeout_post", "--out", str(run), "--quiet"]) == 0
    found = _imported("status", str(run))
    assert not _top(found) & {*HEAVY, "pydantic", "simpy"}  # it checks records' closed sets
    assert not {m for m in found if m.startswith("limbo.providers.")} - {
        "limbo.providers.options"}
    assert "limbo.commands.run" not in found and "limbo.experiments.grid" not in found
    assert "asyncio" not in found  # it reads proxy journals, and never runs an event loop


def test_a_mistyped_command_is_one_line_naming_the_choices() -> None:
    done = subprocess.run([sys.executable, "-c", "from limbo.cli import main; "
                           "raise SystemExit(main(['stauts']))"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "invalid choice: 'stauts'" in done.stderr and "status" in done.stderr


def test_a_run_builds_no_validator_it_never_uses(tmp_path: Path) -> None:
    """``limbo run`` writes records and events as plain dicts and plays the built-in world: the
    record's edge, the event models and the world-file models are built on first use (a reader,
    ``limbo schema``, a world file), not on import — their building was a sixth of the paper
    grid's start-up. The same process then still reads a record against the whole shape."""
    code = f"""
import json, sys
from limbo.cli import main
assert main(["run", "--template", "charge_invoice", "--model", "policy/verify", "--fault",
             "timeout_post", "--out", {str(tmp_path / "run")!r}, "--quiet"]) == 0
from limbo.log import records
from limbo.sim import events
from limbo.sim.worldfile import format
built = {{"edge": type(records.EDGE.core_schema).__name__ != "MockCoreSchema",
          "events": [m.__name__ for m in events.EVENT_MODELS if m.__pydantic_complete__],
          "world file": [m.__name__ for m in vars(format).values() if isinstance(m, type)
                         and issubclass(m, format._WorldModel) and m.__pydantic_complete__]}}
from limbo.log.reader import validate
first = json.loads(open({str(tmp_path / "run" / "episodes.jsonl")!r}).readline())
validate(first)
print(json.dumps(built), type(records.EDGE.core_schema).__name__)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    built, after = done.stdout.strip().splitlines()[-1].rsplit(" ", 1)
    assert json.loads(built) == {"edge": False, "events": [], "world file": []}
    assert after != "MockCoreSchema"  # built on first use, and used
