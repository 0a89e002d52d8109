"""``make run`` installs the core dependencies only, and ``limbo run`` needs nothing more: run in
a fresh interpreter where the analysis stack and the optional SDKs cannot be imported, a run of
the default grid completes, prints its summary, and leaves loaded no third-party module outside
the core dependencies' own closure."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OPTIONAL = ("numpy", "pandas", "scipy", "statsmodels", "matplotlib", "openai", "anthropic",
            "mcp", "inspect_ai", "httpx", "uvicorn", "starlette", "ray")
PROBE = """
import json, sys
{blocks}
from limbo.cli import main
code = main(sys.argv[1:])
print(json.dumps({{"code": code, "modules": sorted({{m.split('.')[0] for m, mod in sys.modules.items() if mod is not None}})}}))
"""


def _name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;(]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def core_closure() -> set[str]:
    """The distributions ``pip install limbo-bench`` (no extra) brings in, transitively."""
    todo, seen = ["limbo-bench"], set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for req in metadata.requires(name) or []:
            if "extra ==" not in req:  # environment markers other than extras are kept: upper bound
                todo.append(_name(req))
    return seen


def test_limbo_run_needs_only_the_core_dependencies(tmp_path: Path) -> None:
    blocks = "\n".join(f"sys.modules[{m!r}] = None" for m in OPTIONAL)
    done = subprocess.run([sys.executable, "-c", PROBE.format(blocks=blocks), "run", "--out",
                           str(tmp_path / "run"), "--limit", "300"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr
    *summary, last = done.stdout.strip().splitlines()
    assert "LIMBO summary by fault family" in "\n".join(summary)
    found = json.loads(last)
    assert found["code"] == 0
    owners = metadata.packages_distributions()
    third_party = {m for m in found["modules"] if m not in sys.stdlib_module_names
                   and m not in {"limbo", "__main__"} and not m.startswith("_")}
    dists = {_name(d) for m in third_party for d in owners.get(m, [m])}
    assert {"simpy", "pydantic", "rich"} <= dists <= core_closure(), dists - core_closure()
    assert not dists & {_name(m) for m in OPTIONAL}


def test_make_run_installs_no_extra() -> None:
    done = subprocess.run(["make", "-n", "-B", "run"], cwd=ROOT, capture_output=True, text=True,
                          check=True)
    installs = [line for line in done.stdout.splitlines() if " install " in line
                and "--upgrade pip" not in line]
    assert installs and all(line.rstrip().endswith("-e .") for line in installs), installs
