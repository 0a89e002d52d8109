"""``limbo episode --from RUN_DIR EPISODE_ID`` re-runs exactly the stored cell, and ``--seed``
means the grid seed in ``limbo episode`` as in ``limbo run``.

A slice of the default grid (two templates, every model, fault and contract) is run once into a
temporary directory; twenty of its cells, spread over the policies, the faults and both
contracts, are re-run one by one and must give back the stored record byte for byte, the
``runtime`` field aside.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from limbo.cli import main
from limbo.experiments.grid import expand, load_grid, validated
from limbo.log.store import encode

TEMPLATES = ("charge_invoice", "import_batch")


def limbo(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(args))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def without_runtime(line: bytes | str) -> bytes:
    """A record line as the store writes it, without its ``runtime`` (key order kept)."""
    record = json.loads(line)
    del record["runtime"]
    return encode(record)


def stored(run_dir: Path) -> dict[str, bytes]:
    """The stored lines of ``run_dir`` by episode id."""
    lines = (run_dir / "episodes.jsonl").read_bytes().splitlines(keepends=True)
    return {json.loads(line)["episode_id"]: line for line in lines}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("episode-from") / "run"
    flags = [arg for t in TEMPLATES for arg in ("--template", t)]
    assert main(["run", "--out", str(out), "--quiet", *flags]) == 0
    return out


def spread(records: list[dict[str, Any]], n: int = 20) -> list[dict[str, Any]]:
    """``n`` records that between them cover every model, every fault and both contracts."""
    models = sorted({r["cell"]["model"] for r in records})
    faults = sorted({r["cell"]["fault"] for r in records})
    contracts = sorted({r["cell"]["contract"] for r in records})
    chosen: list[dict[str, Any]] = []
    for k in range(n):
        want = {"fault": faults[k % len(faults)], "model": models[k % len(models)],
                "contract": contracts[k % len(contracts)]}
        fits = [r for r in records if r not in chosen and r["cell"]["fault"] == want["fault"]]
        best = [r for r in fits if all(r["cell"][f] == v for f, v in want.items())]
        chosen.append((best or fits)[0])
    return chosen


def test_twenty_cells_of_the_default_grid_rerun_byte_for_byte(
        run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = stored(run_dir)
    picked = spread([json.loads(line) for line in lines.values()])
    cells = [r["cell"] for r in picked]
    assert len({r["episode_id"] for r in picked}) == 20
    assert len({c["model"] for c in cells}) == 5 and len({c["contract"] for c in cells}) == 2
    assert len({c["fault"] for c in cells}) >= 12 and len({c["template"] for c in cells}) == 2
    for record in picked:
        code, out, _ = limbo(capsys, "episode", "--from", str(run_dir), record["episode_id"],
                             "--json")
        assert code == 0
        assert without_runtime(out) == without_runtime(lines[record["episode_id"]])


def test_the_flags_of_a_grid_cell_with_the_grids_seed_run_that_cell(
        run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = stored(run_dir)
    cell = next(json.loads(line)["cell"] for line in lines.values()
                if b'"partial_batch"' in line and b'"keys-everywhere"' in line)
    flags = ["--model", cell["model"], "--contract", cell["contract"], "--fault", cell["fault"],
             "--template", cell["template"], "--focal-write", cell["focal_write"]]
    code, out, _ = limbo(capsys, "episode", *flags, "--json")
    assert code == 0 and cell["seed"] != 0  # the world seed is derived, not the flag's 0
    record = json.loads(out)
    assert without_runtime(out) == without_runtime(lines[record["episode_id"]])
    grid = load_grid("default")
    seven = {c.episode_id: c for c in expand(validated(
        {**grid.model_dump(), "seed": 7, "templates": [cell["template"]]}, "test")).cells}
    code, out, _ = limbo(capsys, "episode", *flags, "--seed", "7", "--json")
    again = json.loads(out)
    assert again["episode_id"] in seven and again["episode_id"] != record["episode_id"]
    assert again["cell"]["seed"] == seven[again["episode_id"]].seed


def test_a_cell_of_an_included_grid_with_its_own_timing_reruns_with_that_timing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("slow.toml").write_text('models = ["policy/wait-verify"]\nfaults = ["timeout_late"]\n'
                                 'templates = ["charge_invoice"]\nfocal_writes = "first"\n'
                                 '[timing]\nthink_s = 9.0\n[limits]\nmodel_turns = 12\n')
    Path("fast.toml").write_text('models = ["policy/verify"]\nfaults = ["timeout_late"]\n'
                                 'templates = ["charge_invoice"]\nfocal_writes = "first"\n')
    Path("both.toml").write_text('include = ["slow.toml", "fast.toml"]\n')
    assert main(["run", "both.toml", "--out", "run", "--quiet"]) == 0
    lines = stored(Path("run"))
    slow = [i for i, line in lines.items() if b'"policy/wait-verify"' in line]
    assert len(lines) > len(slow) == 1
    for episode_id in (slow[0], next(i for i in lines if i != slow[0])):
        code, text, _ = limbo(capsys, "episode", "--from", "run", episode_id, "--json")
        assert code == 0 and without_runtime(text) == without_runtime(lines[episode_id])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    _one_line(capsys, "cannot recover the timing and limits of its grid (no grid 'slow.toml'",
              "--from", str(tmp_path / "run"), slow[0])


def _one_line(capsys: pytest.CaptureFixture[str], needle: str, *args: str) -> None:
    code, _, err = limbo(capsys, "episode", *args)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("limbo: error: "), err
    assert needle in lines[0], lines[0]


def test_hostile_run_directories_and_ids_are_one_line(
        run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    some_id = next(iter(stored(run_dir)))
    _one_line(capsys, f"episode ep-nosuch is not in {run_dir}", "--from", str(run_dir), "ep-nosuch")
    _one_line(capsys, "no run directory", "--from", str(tmp_path / "missing"), some_id)
    (tmp_path / "empty").mkdir()
    _one_line(capsys, "holds no episode records", "--from", str(tmp_path / "empty"), some_id)
    garbage = tmp_path / "garbage"
    garbage.mkdir()
    (garbage / "episodes.jsonl").write_bytes(b'{"schema": "limbo.episode/1", "episo\n\xff\xfe\n')
    _one_line(capsys, f"is not in {garbage}", "--from", str(garbage), some_id)
    _one_line(capsys, "drop --fault, --seed", "--from", str(run_dir), some_id, "--seed", "3",
              "--fault", "none")


def test_edited_records_and_manifests_are_one_line(
        run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    some_id, line = next(iter(stored(run_dir).items()))
    edited = tmp_path / "edited"
    edited.mkdir()
    record = json.loads(line)
    record["cell"]["seed"] += 1
    (edited / "episodes.jsonl").write_bytes(encode(record))
    _one_line(capsys, "does not hash to its id", "--from", str(edited), some_id)
    record["cell"]["instance"] = -1
    (edited / "episodes.jsonl").write_bytes(encode(record))
    _one_line(capsys, f"episode {some_id} in {edited} is not a valid limbo.episode/1 record: "
                       "cell.instance", "--from", str(edited),
              some_id)
    (edited / "episodes.jsonl").write_bytes(line)
    (edited / "manifest.json").write_text("[1,")
    _one_line(capsys, "is not a readable manifest", "--from", str(edited), some_id)
