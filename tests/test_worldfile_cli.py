"""`limbo run` with a world: from the flag or the grid file, refused in one line when it cannot
be played (a proxy-only service, a broken or missing file), and never resumed across a change
of the world file (a changed file is another world, so another grid)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from limbo.cli import main
from limbo.sim.worldfile.kit import load_world

ROOT = Path(__file__).resolve().parents[1]
SHOP = ROOT / "examples" / "worlds" / "shop.toml"
PROXY = """
[world]
name = "payments"

[services.pay]
proxy = true

[services.pay.writes.charge]
description = "Charge a card."
effect = ["amount"]
key = "honoured"
args.amount = { type = "integer" }

[[templates]]
id = "pay_once"
prompt = "Charge 5."

[[templates.steps]]
id = "charge"
tool = "pay_charge"
args = { amount = 5 }
intent = { match = ["amount"] }
"""


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def test_a_proxy_only_world_is_refused_by_run(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    world = tmp_path / "pay.toml"
    world.write_text(PROXY, encoding="utf-8")
    code, _, err = cli(capsys, "run", "--world", str(world), "--out", str(tmp_path / "r"))
    assert code == 2 and len(err.splitlines()) == 1
    assert "declares proxy-only service(s) pay" in err and "cannot play them" in err
    assert not (tmp_path / "r").exists()


def test_a_broken_or_missing_world_is_one_line_before_anything_runs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "shop.toml"
    broken.write_text(SHOP.read_text(encoding="utf-8").replace('lists = ["add_lines"]',
                                                               'lists = ["nothing"]'),
                      encoding="utf-8")
    code, _, err = cli(capsys, "run", "--world", str(broken), "--out", str(tmp_path / "r"))
    assert code == 2 and len(err.splitlines()) == 1
    assert f"{broken}:" in err and "lists 'nothing'" in err
    code, _, err = cli(capsys, "run", "--world", str(tmp_path / "none.toml"))
    assert code == 2 and "none.toml:1: no such file or directory" in err
    assert not (tmp_path / "r").exists()


def test_a_grid_file_names_its_world_relative_to_itself(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "worlds").mkdir()
    (tmp_path / "worlds" / "shop.toml").write_bytes(SHOP.read_bytes())
    grid = tmp_path / "shop-e1.toml"
    grid.write_text('world = "worlds/shop.toml"\nmodels = ["policy/verify"]\n'
                    'faults = ["timeout_post", "none"]\n', encoding="utf-8")
    code, out, _ = cli(capsys, "run", str(grid), "--dry-run")
    assert code == 0 and "grid shop-e1: 12 episodes" in out  # 2 modes x 6 focal writes
    out_dir = tmp_path / "run"
    assert cli(capsys, "run", str(grid), "--out", str(out_dir), "--quiet")[0] == 0
    manifest = json.loads((out_dir / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["worlds"][0]["path"] == str(tmp_path / "worlds" / "shop.toml")


def test_a_changed_world_file_is_another_grid_not_a_resume(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    world = tmp_path / "shop.toml"
    world.write_bytes(SHOP.read_bytes())
    run = ["run", "--world", str(world), "--model", "policy/verify", "--fault", "timeout_post",
           "--out", str(tmp_path / "r"), "--quiet"]
    assert cli(capsys, *run)[0] == 0
    code, out, _ = cli(capsys, *run)
    assert code == 0 and "ran 0 episodes, 12 already done" in out  # the same world: resumed
    was = load_world(world).identity
    world.write_bytes(SHOP.read_bytes().replace(b"lag_s = 120", b"lag_s = 30"))
    code, _, err = cli(capsys, *run)
    now = load_world(world).identity
    assert code == 2 and len(err.splitlines()) == 1
    assert f"the world file {world} has changed since that run ({was} then, {now} now)" in err
    assert "restore the file as it was" in err


def test_a_changed_or_missing_world_file_is_named_by_episode_from_and_replay(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Not "was the record edited by hand?", nor a replay that finds no episode: the file."""
    world = tmp_path / "shop.toml"
    world.write_bytes(SHOP.read_bytes())
    was = load_world(world).identity
    flags = ["--model", "policy/blind", "--fault", "timeout_post", "--template", "shop_ship",
             "--contract", "native", "--quiet"]
    assert cli(capsys, "run", "--world", str(world), "--out", str(tmp_path / "r"), *flags)[0] == 0
    (stored,) = (json.loads(x) for x in (tmp_path / "r" / "episodes.jsonl").read_text().splitlines())
    world.write_bytes(SHOP.read_bytes().replace(b"lag_s = 120", b"lag_s = 30"))
    now = load_world(world).identity
    code, _, err = cli(capsys, "episode", "--from", str(tmp_path / "r"), stored["episode_id"])
    assert code == 2 and "edited by hand" not in err
    assert f"the run's world file {world} has changed since the run ({was} then, {now} now)" in err
    code, _, err = cli(capsys, "run", "--world", str(world), "--model", f"replay/{tmp_path / 'r'}",
                       "--out", str(tmp_path / "b"), *flags)
    assert code == 2 and f"the world file {world} has changed since that run" in err
    assert not (tmp_path / "b").exists()
    world.write_bytes(SHOP.read_bytes().replace(b'lists = ["add_lines"]', b'lists = ["none"]'))
    code, _, err = cli(capsys, "episode", "--from", str(tmp_path / "r"), stored["episode_id"])
    assert code == 2 and f"the run's world file {world} has changed since the run" in err
    world.unlink()
    code, _, err = cli(capsys, "episode", "--from", str(tmp_path / "r"), stored["episode_id"])
    assert code == 2 and f"the run's world file {world} ({was}) is gone" in err


def test_episode_runs_a_world_cell_from_flags_and_from_a_stored_record(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "r"
    assert cli(capsys, "run", "--world", str(SHOP), "--model", "policy/verify", "--fault",
               "partial_batch", "--contract", "native", "--out", str(run), "--quiet")[0] == 0
    (stored,) = [json.loads(line) for line in (run / "episodes.jsonl").read_text().splitlines()]
    code, out, _ = cli(capsys, "episode", "--from", str(run), stored["episode_id"], "--json")
    again = json.loads(out)
    assert code == 0 and again["episode_id"] == stored["episode_id"]
    assert {k: v for k, v in again.items() if k != "runtime"} == \
        {k: v for k, v in stored.items() if k != "runtime"}
    code, out, _ = cli(capsys, "episode", "--world", str(SHOP), "--template", "shop_add_lines",
                       "--fault", "partial_batch", "--json")
    assert code == 0 and json.loads(out)["episode_id"] == stored["episode_id"]
    code, _, err = cli(capsys, "episode", "--world", str(SHOP))
    assert code == 2 and "name one of its templates with --template" in err


def test_a_world_run_replays_under_replay_run_dir(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """``replay/RUN_DIR`` finds a world episode by the identity the run's manifest names."""
    flags = ["--world", str(SHOP), "--fault", "timeout_post", "--contract", "native", "--quiet"]
    assert cli(capsys, "run", "--model", "policy/blind", *flags, "--out", str(tmp_path / "a"))[0] == 0
    replay = f"replay/{tmp_path / 'a'}"
    assert cli(capsys, "run", "--model", replay, *flags, "--out", str(tmp_path / "b"))[0] == 0

    def outcomes(run: str) -> dict[str, dict]:
        recs = [json.loads(x) for x in (tmp_path / run / "episodes.jsonl").read_text().splitlines()]
        return {r["cell"]["focal_write"]: {k: v for k, v in r["outcome"].items()
                                           if k != "cost_usd"} for r in recs}

    recorded, replayed = outcomes("a"), outcomes("b")
    assert len(recorded) == 6 and replayed == recorded


def test_the_same_world_file_cell_and_seed_give_byte_identical_records_across_processes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """In this process, and in another with two forked workers (which inherit the loaded
    world)."""
    import subprocess
    import sys

    sys.path.insert(0, str(ROOT / "tools"))
    from same_records import stripped

    flags = ["--world", str(SHOP), "--model", "policy/wait-verify", "--fault",
             "timeout_late_tail", "--quiet"]
    assert cli(capsys, "run", *flags, "--out", str(tmp_path / "here"))[0] == 0
    limbo = str(Path(sys.executable).parent / "limbo")
    done = subprocess.run([limbo, "run", *flags, "--workers", "2", "--out", str(tmp_path / "there")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    here, there = stripped(tmp_path / "here"), stripped(tmp_path / "there")
    assert len(here) == 12 and here == there
