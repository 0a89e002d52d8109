"""The command line as a user meets it: the default run, determinism across processes, and one
clear line for every mistake."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

LIMBO = [str(Path(sys.executable).parent / "limbo")]


def limbo(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None):
    return subprocess.run([*LIMBO, *args], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, **(env or {})}, timeout=600)


def normalised(run_dir: Path) -> list[str]:
    """Records sorted by episode id, without the runtime field, as canonical lines."""
    records = []
    for path in sorted(run_dir.glob("episodes*.jsonl")):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            record.pop("runtime")
            records.append(record)
    records.sort(key=lambda r: r["episode_id"])
    return [json.dumps(r, ensure_ascii=False) for r in records]


def test_default_run_twice_is_byte_identical_across_hash_seeds(tmp_path: Path) -> None:
    a = limbo("run", "--out", str(tmp_path / "a"), "--quiet", env={"PYTHONHASHSEED": "1"})
    b = limbo("run", "--out", str(tmp_path / "b"), "--quiet", env={"PYTHONHASHSEED": "4242"})
    assert a.returncode == 0, a.stderr
    assert b.returncode == 0, b.stderr
    assert "LIMBO summary by fault family" in a.stdout
    left, right = normalised(tmp_path / "a"), normalised(tmp_path / "b")
    assert len(left) > 300
    assert left == right
    manifest = json.loads((tmp_path / "a" / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["ran"] == len(left)


def test_rerun_into_the_same_directory_runs_nothing_new(tmp_path: Path) -> None:
    first = limbo("run", "--out", str(tmp_path), "--quiet", "--template", "charge_invoice")
    assert first.returncode == 0, first.stderr
    lines = (tmp_path / "episodes.jsonl").read_text().splitlines()
    again = limbo("run", "--out", str(tmp_path), "--quiet", "--template", "charge_invoice")
    assert "ran 0 episodes" in again.stdout
    assert (tmp_path / "episodes.jsonl").read_text().splitlines() == lines


@pytest.mark.parametrize(("args", "needle"), [
    (["run", "--model", "nosuch/thing"], "unknown model 'nosuch'; choose from: "),
    (["run", "--model", "policy/nosuch"], "unknown policy 'nosuch'; choose from: blind"),
    (["run", "--template", "nosuch"], "unknown template 'nosuch' in grid; choose from: announce"),
    (["run", "--condition", "nosuch"], "unknown condition 'nosuch' in grid; choose from:"),
    (["run", "--fault", "nosuch"], "unknown fault 'nosuch' in grid; choose from:"),
    (["episode", "--template", "nosuch"], "unknown template 'nosuch'; choose from:"),
    (["episode", "--condition", "nosuch"], "unknown condition 'nosuch' in grid; choose from:"),
    (["episode", "--model", "x"], "must look like provider/model"),
    (["show", "/nonexistent/run", "ep-1"], "no run directory"),
    (["run", "--contract", "nope"], "command line: contracts.0: Input should be"),
    (["episode", "--contract", "nope"], "--contract: Input should be 'native' or 'keys-everywhere'"),
    (["episode", "--instance", "-1"], "--instance: Input should be greater than or equal to 0"),
    (["run", "--max-cost", "-1"], "--max-cost must be a finite amount of USD >= 0"),
    (["run", "--max-cost", "nan"], "--max-cost must be a finite amount of USD >= 0"),
    (["run", "--model", "policy/verify?wait=abc"], "policy/verify takes no parameter 'wait'"),
    (["run", "--model", "policy/wait-verify?wait=5000"], "wait must be a number of seconds"),
    (["run", "--model", "policy/wait-verify", "-M", "nonsense"], "must look like key=value"),
    (["run", "--model", "openai/x?base_url=https://me:tok3n@proxy.example/v1"],
     "do not put credentials in base_url"),
    (["run", "--harness", "nosuch"], "unknown harness 'nosuch' in grid; choose from: claude-code, codex, copilot, hermes, minimal"),
])
def test_user_errors_are_one_line_naming_the_choices(args: list[str], needle: str,
                                                     tmp_path: Path) -> None:
    result = limbo(*args, "--out", str(tmp_path / "out")) if args[0] == "run" else limbo(*args)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert needle in lines[0]
    assert not (tmp_path / "out").exists()


def test_episode_prints_both_sides_of_the_timeline() -> None:
    result = limbo("episode", "--template", "charge_invoice", "--model", "policy/keyed")
    assert result.returncode == 0, result.stderr
    assert "what the agent saw" in result.stdout and "what really happened" in result.stdout
    assert "COMMIT #0 billing_create_charge [original]" in result.stdout
    assert "exactly_once=True" in result.stdout


def test_show_prints_a_stored_episode(tmp_path: Path) -> None:
    assert limbo("run", "--out", str(tmp_path), "--quiet", "--template", "refund_dispute",
                 "--model", "policy/verify").returncode == 0
    record = json.loads((tmp_path / "episodes.jsonl").read_text().splitlines()[0])
    shown = limbo("show", str(tmp_path), record["episode_id"])
    assert shown.returncode == 0, shown.stderr
    assert record["episode_id"] in shown.stdout and "billing_refund_charge" in shown.stdout


@pytest.mark.parametrize("what", ["services", "faults", "conditions", "models", "grids",
                                  "harnesses", "templates"])
def test_list_shows_what_is_registered(what: str) -> None:
    result = limbo("list", what)
    assert result.returncode == 0, result.stderr
    expected = {"services": "billing_create_charge", "faults": "none", "conditions": "vanilla",
                "models": "policy/verify", "grids": "default", "harnesses": "minimal",
                "templates": "import_batch"}[what]
    assert expected in result.stdout


def test_price_files_reach_dry_run_and_max_cost(tmp_path: Path) -> None:
    prices = tmp_path / "prices.toml"
    prices.write_text('["openai/house-model"]\ninput = 1.0\noutput = 2.0\n')
    base = ["run", "--model", "openai/house-model", "--template", "charge_invoice",
            "--fault", "none", "--out", str(tmp_path / "out"), "--no-cache"]
    key = {"OPENAI_API_KEY": "sk-test-not-a-real-key"}
    priced = limbo(*base, "--dry-run", "--prices", str(prices), env=key)
    assert priced.returncode == 0, priced.stderr
    dearer = tmp_path / "dearer.toml"  # twice the price, read after the first: it wins
    dearer.write_text('["openai/house-model"]\ninput = 2.0\noutput = 4.0\n')
    twice = limbo(*base, "--dry-run", "--prices", str(prices), "--prices", str(dearer), env=key)

    def usd(text: str) -> float:
        found = re.search(r"openai/house-model: 4 episodes: \$([0-9.]+)", text)
        assert found, text
        return float(found.group(1))

    assert usd(twice.stdout) == pytest.approx(2 * usd(priced.stdout), rel=1e-3)
    unpriced = limbo(*base, "--dry-run", env=key)
    assert "cost unknown (no price)" in unpriced.stdout
    refused = limbo(*base, "--max-cost", "1", env=key)
    assert refused.returncode == 2 and "no price known for openai/house-model" in refused.stderr
    bad = limbo(*base, "--prices", str(tmp_path / "missing.toml"), env=key)
    assert bad.returncode == 2 and "cannot read price file" in bad.stderr
    assert not (tmp_path / "out").exists()


def test_an_unreachable_endpoint_is_one_line_before_anything_runs(tmp_path: Path) -> None:
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    result = limbo("run", "--model", f"openai/local?base_url={url}", "--template",
                   "charge_invoice", "--out", str(tmp_path / "out"), "--no-cache")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"cannot reach {url}" in lines[0] and "server running" in lines[0]
    assert not (tmp_path / "out").exists()


def test_out_that_is_a_file_and_a_grid_that_includes_itself_are_one_line(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")
    result = limbo("run", "--out", str(afile))
    assert result.returncode == 2 and "is a file; name a directory" in result.stderr
    (tmp_path / "loop.toml").write_text('include = ["loop.toml"]\n')
    loop = limbo("run", "loop.toml", "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert loop.returncode == 2 and len(loop.stderr.strip().splitlines()) == 1
    assert "includes grids itself" in loop.stderr and not (tmp_path / "out").exists()


def test_model_params_from_M_reach_every_model(tmp_path: Path) -> None:
    result = limbo("run", "--model", "policy/wait-verify", "-M", "wait=60", "--dry-run",
                   "--template", "charge_invoice", "--out", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    assert "policy/wait-verify?wait=60: 48 episodes" in result.stdout
