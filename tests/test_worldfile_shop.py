"""Must-show 2 of world files: the shop example (examples/worlds/shop.toml) runs the E1-, E2-
and E2k-shaped grids with the reference policies through `limbo run --world`, and what the
paper finds for the built-in services holds for it, by the write's own contract facts:

* blind re-issues duplicate every write that is neither keyed nor naturally idempotent when the
  fault committed the first try;
* verify resolves a committed fault exactly where the write's read path is strong, and
  duplicates where it lags (e-mail) or is missing (SMS); waiting out the lag resolves it;
* the guard leaves no duplicate where the contract allows it (a key honoured, or a natural or
  conditional write) — on every write under keys-everywhere;
* `limbo tables` produces Tables 3, 5 and 13 from these runs.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from limbo.cli import main

ROOT = Path(__file__).resolve().parents[1]
SHOP = ROOT / "examples" / "worlds" / "shop.toml"
COMMITTED = ("timeout_post", "http500_post", "conn_reset_post")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("shop")
    out = {}
    for grid in ("e1", "e2", "e2k"):
        out[grid] = root / grid
        assert main(["run", grid, "--world", str(SHOP), "--out", str(out[grid]),
                     "--quiet"]) == 0
    return out


def records(run: Path) -> list[dict[str, Any]]:
    with (run / "episodes.jsonl").open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines]


def rates(recs: list[dict[str, Any]], **where: str) -> dict[tuple[str, str], tuple[int, int]]:
    """(focal write, its read path) -> (duplicates, episodes) over committed faults."""
    found: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for rec in recs:
        cell, outcome = rec["cell"], rec["outcome"]
        if cell["fault"] not in COMMITTED or any(cell[k] != v for k, v in where.items()):
            continue
        assert outcome["fault_fired"] and outcome["termination"] == "finished"
        key = (cell["focal_write"], outcome["focal_write_class"]["read_path"])
        found[key][0] += outcome["duplicate"]
        found[key][1] += 1
    return {k: (v[0], v[1]) for k, v in found.items()}


def test_the_grids_ran_every_cell_of_the_world(runs: dict[str, Path]) -> None:
    e1 = records(runs["e1"])
    assert len(e1) == 1095  # 5 policies x (12 modes x 6 focal writes + partial_batch x 1) x 3
    assert {r["cell"]["service"] for r in e1} == {"shop"}
    assert {r["cell"]["template"] for r in e1} == {"shop_order_sms", "shop_refund_email",
                                                    "shop_ship", "shop_add_lines"}
    assert {r["cell"]["focal_write"] for r in e1 if r["cell"]["template"] == "shop_ship"} \
        == {"shop_set_status"}  # focal = ["ship"]: the SMS after it carries no fault
    manifest = json.loads((runs["e1"] / "manifest.json").read_text(encoding="utf-8"))
    (world,) = manifest["worlds"]
    assert world["name"] == "shop" and world["path"] == str(SHOP)
    assert world["services"] == ["notify", "shop"] and len(world["digest"]) == 64
    assert world["tools"]["shop_create_order"] == "write"
    assert world["tools"]["notify_search_sent"] == "read" and len(world["tools"]) == 10
    assert all(r["outcome"]["termination"] == "finished" for run in runs.values()
               for r in records(run))


def test_blind_duplicates_every_write_a_repeat_redoes(runs: dict[str, Path]) -> None:
    blind = rates(records(runs["e1"]), model="policy/blind")
    redone = {"shop_create_order", "notify_send_sms", "notify_send_email", "shop_add_lines"}
    for (tool, _), (dup, n) in blind.items():
        assert n == 9, tool  # three committed modes x three instances
        assert dup == (n if tool in redone else 0), tool  # refund: 409; status: conditional


def test_verify_resolves_where_the_read_path_does(runs: dict[str, Path]) -> None:
    verify = rates(records(runs["e1"]), model="policy/verify")
    paths = {tool: path for tool, path in verify}
    assert paths == {"shop_create_order": "strong", "shop_refund_order": "strong",
                     "shop_set_status": "strong", "shop_add_lines": "strong",
                     "notify_send_email": "eventual", "notify_send_sms": "none"}
    for (tool, path), (dup, n) in verify.items():
        assert dup == (0 if path == "strong" else n), tool
    waited = rates(records(runs["e1"]), model="policy/wait-verify")
    assert waited[("notify_send_email", "eventual")][0] == 0  # 120 s covers the 120 s lag
    assert waited[("notify_send_sms", "none")][0] == 9  # nothing to wait for


def test_the_guard_leaves_no_duplicate_where_the_keys_allow(runs: dict[str, Path]) -> None:
    for grid in ("e2", "e2k"):
        for rec in records(runs[grid]):
            cell, outcome = rec["cell"], rec["outcome"]
            if cell["condition"] != "guard" or not outcome["fault_fired"]:
                continue
            guarded = outcome["focal_write_class"]["idempotency"] != "none"
            if guarded:
                assert not outcome["duplicate"], cell
    e2k = [r for r in records(runs["e2k"]) if r["cell"]["condition"] == "guard"]
    assert {r["outcome"]["focal_write_class"]["idempotency"] for r in e2k} == {
        "keyed", "natural", "conditional"}
    native = [r for r in records(runs["e2"]) if r["cell"]["condition"] == "guard"
              and r["outcome"]["focal_write_class"]["idempotency"] == "none"]
    assert any(r["outcome"]["duplicate"] for r in native)  # no key to use: the guard can't


def test_tables_3_5_and_13_come_from_the_world_runs(
        runs: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tables", *(str(p) for p in runs.values()), "--world", "shop", "--table", "3",
                 "--table", "5", "--table", "13"]) == 0
    out = capsys.readouterr().out
    assert out.count("World: world file shop@") == 3
    table3 = out.split("### Table 3")[1].split("###")[0]
    assert "| policy/blind |" in table3 and "| all models |" in table3
    assert "1095 episodes, all rated" in table3
    table5 = out.split("### Table 5")[1].split("###")[0]
    assert "| native | guard |" in table5 and "| keys-everywhere | guard |" in table5
    row = next(line for line in table5.splitlines() if line.startswith("| keys-everywhere | guard"))
    assert row.count(" 0.0 [") == 6  # no duplicate in any committed column
    table13 = out.split("### Table 13")[1]
    assert "| native | vanilla |" in table13 and "No data" not in table13


def test_every_condition_and_fault_runs_on_the_world(tmp_path: Path) -> None:
    """The fifteen conditions (scaffolds and guard included) x every mode x both contracts:
    every episode finishes and every fault fires on the world's own writes."""
    out = tmp_path / "all"
    assert main(["run", "--world", str(SHOP), "--condition", "all", "--contract", "all",
                 "--model", "policy/verify", "--out", str(out), "--quiet"]) == 0
    recs = records(out)
    conditions = {r["cell"]["condition"] for r in recs}
    assert len(conditions) == 15 and len(recs) == 15 * 2 * (12 * 6 + 1)
    assert all(r["outcome"]["termination"] == "finished" for r in recs)
    assert all(r["outcome"]["fault_fired"] for r in recs)
