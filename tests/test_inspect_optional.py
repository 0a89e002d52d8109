"""Must-show 4 of issue 16: the core installs and runs without ``inspect-ai``; the ``inspect``
extra pins a version range, and the version the tests run lies in it."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BLOCK = "import sys; sys.modules['inspect_ai'] = None; from limbo.cli import main; "


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _release(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def test_inspect_is_an_extra_with_a_range_the_tests_run() -> None:
    project = _pyproject()["project"]
    assert not any("inspect" in dep for dep in project["dependencies"])
    (spec,) = project["optional-dependencies"]["inspect"]
    assert spec.startswith("inspect-ai>=")
    low, high = (part.split("=", 1)[-1].lstrip("<") for part in spec[len("inspect-ai"):].split(","))
    assert _release(low) <= _release(version("inspect-ai")) < _release(high)
    assert "inspect" in project["optional-dependencies"]["all"][0]  # so `make test` installs it
    assert project["entry-points"]["inspect_ai"] == {"limbo": "limbo.inspect.registry"}


def _without_inspect(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    code = BLOCK + f"raise SystemExit(main({argv!r}))"
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True,
                          timeout=300, check=False)


def test_the_core_runs_and_analyses_without_inspect(tmp_path: Path) -> None:
    run = _without_inspect(["run", "e1", "--model", "policy/blind", "--template",
                            "charge_invoice", "--fault", "timeout_post", "--instances", "1",
                            "--out", "runs/blind", "--quiet", "--max-dup", "0"], tmp_path)
    assert run.returncode == 1, run.stderr  # ran, and the gate failed on the duplicates
    assert (tmp_path / "runs" / "blind" / "episodes.jsonl").stat().st_size > 0
    assert _without_inspect(["tables", "runs/blind", "--table", "3"], tmp_path).returncode == 0
    listing = _without_inspect(["list", "models"], tmp_path)
    assert listing.returncode == 0 and "inspect" in listing.stdout


def test_inspect_features_name_the_extra_without_it(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "x.eval").write_bytes(b"PK\x03\x04 not really a log")
    for argv in (["run", "e1", "--model", "inspect/openai/gpt-4o", "--out", "runs/x"],
                 ["tables", "logs/x.eval"]):
        done = _without_inspect(argv, tmp_path)
        assert done.returncode == 2, (argv, done.stderr)
        assert "pip install 'limbo-bench[inspect]'" in done.stderr
        assert "Traceback" not in done.stderr
    assert not (tmp_path / "runs").exists()


def test_tasks_are_named_limbo_slash_grid_from_a_wheel_install_too(tmp_path: Path) -> None:
    """Inspect prefixes a package's tasks itself only for an installed wheel; from this
    editable checkout the prefix is ours (tests/test_inspect_eval.py runs that path)."""
    wheels, target = tmp_path / "wheels", tmp_path / "site-packages"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(wheels), str(ROOT)], check=True, capture_output=True)
    (wheel,) = wheels.glob("*.whl")
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target",
                    str(target), str(wheel)], check=True, capture_output=True)
    probe = ("import limbo; from inspect_ai._eval.registry import task_create;"
             "from inspect_ai._util.registry import registry_info;"
             "t = task_create('limbo/e1', limit=1);"
             "print(limbo.__file__, registry_info(t).name, len(t.dataset))")
    out = subprocess.run([sys.executable, "-P", "-c", probe], cwd=tmp_path, text=True,
                         env={"PYTHONPATH": str(target), "PATH": ""}, capture_output=True,
                         check=True).stdout.split()
    assert out == [str(target / "limbo" / "__init__.py"), "limbo/e1", "1"]
