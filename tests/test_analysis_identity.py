"""A run's identity decides which table and arm its episodes are in (issue 35, must-show 1).

One test per class of mix a researcher makes when extending a study — a contract override
beside the grid's own contract, a world-file run beside the built-in grid of the same name, two
seeds of one grid, a partial run — each run through the real CLI and each table checked against
numbers computed here from the raw JSONL records in plain Python: the paper's tables hold only
their population, keys-everywhere episodes appear only in keys-everywhere rows, H1–H6 verdicts
do not move when the extra run is loaded, and Table 13 is filled on two seeds.
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

LIMBO = str(Path(sys.executable).parent / "limbo")
ROOT = Path(__file__).resolve().parents[1]
SHOP = ROOT / "examples" / "worlds" / "shop.toml"
TEMPLATES = ("--template", "charge_invoice", "--template", "import_batch")
PAIR_ON = ("model", "harness", "contract", "fault", "template", "instance", "focal_write")
CONDITIONS = ("vanilla", "aware", "reflect", "sdk-retry", "rules", "vbr", "guard", "state-oracle",
              "outcome-oracle")
TABLE5 = {"timeout (committed)": {"timeout_post"}, "500 (committed)": {"http500_post"},
          "late commit": {"timeout_late", "timeout_late_tail"}, "redelivery": {"redelivery"}}
Row = dict[str, Any]

RUNS = {"e2": ("e2", *TEMPLATES),
        "e2-keys": ("e2", *TEMPLATES, "--contract", "keys-everywhere"),
        "e2-seed1": ("e2", *TEMPLATES, "--seed", "1"),
        "e1": ("e1", *TEMPLATES),
        "e1-both": ("e1", *TEMPLATES, "--contract", "native", "--contract", "keys-everywhere"),
        "e1-world": ("e1", "--world", str(SHOP)),
        "e1-partial": ("e1", *TEMPLATES, "--limit", "200")}


def limbo(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([LIMBO, *args], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "LIMBO_HARNESS_DIR": os.devnull + ".none"})


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("identity")
    for name, args in RUNS.items():
        done = limbo("run", *args, "--out", str(root / name), "--workers", "2", "--quiet")
        assert done.returncode == 0, done.stderr
    return {name: root / name for name in RUNS}


def tables(*runs: Path, number: int) -> tuple[dict[tuple[str, str], dict[str, str]], str]:
    """Table ``number`` of ``runs`` by ``limbo tables --format csv``: its cells by (row,
    column), and the whole CSV."""
    done = limbo("tables", *map(str, runs), "--table", str(number), "--format", "csv")
    assert done.returncode == 0, done.stderr
    lines = list(csv.DictReader(io.StringIO(done.stdout)))
    return {(r["row"], r["column"]): r for r in lines}, done.stdout


def numbers(text: str) -> list[str]:
    """A table's CSV without its provenance and left-out lines (what the numbers are)."""
    return [line for line in text.splitlines()
            if ",left out," not in line and ",provenance," not in line]


def records(run: Path) -> list[Row]:
    out = []
    for line in (run / "episodes.jsonl").read_text().splitlines():
        record = json.loads(line)
        row = {**record["cell"], **record["outcome"], "episode_id": record["episode_id"]}
        row["rated"] = row["fault_fired"] and row["termination"] not in (
            "infra_error", "model_error", "timeout")
        out.append(row)
    return out


def rate(rows: list[Row], outcome: str) -> tuple[float, int, int]:
    """(weighted rate, numerator, n) over rated ``rows``: equal weight per template."""
    rows = [r for r in rows if r["rated"]]
    size = Counter(r["template"] for r in rows)
    total = sum(1 / size[r["template"]] for r in rows)
    hits = sum(1 / size[r["template"]] for r in rows if r[outcome])
    return hits / total, sum(bool(r[outcome]) for r in rows), len(rows)


def check(cell: dict[str, str], rows: list[Row], outcome: str) -> None:
    value, numerator, n = rate(rows, outcome)
    assert cell["unit"] == "%", cell  # the CSV's rates are in percent, as shown
    assert float(cell["value"]) == pytest.approx(100 * value, rel=1e-12), cell
    assert (int(float(cell["numerator"])), int(float(cell["denominator"]))) == (numerator, n)


def matched(rows: list[Row]) -> list[Row]:
    """E2's episodes on the cells (pairing factors and seed) every condition ran."""
    keys = [{(*(r[k] for k in PAIR_ON), r["seed"]) for r in rows if r["condition"] == c}
            for c in CONDITIONS]
    common = set.intersection(*keys)
    return [r for r in rows if (*(r[k] for k in PAIR_ON), r["seed"]) in common]


def guard_pairs(rows: list[Row], other: str) -> list[tuple[Row, Row]]:
    """Guard and ``other`` paired one to one within a seed, faulted, both rated."""
    def key(r: Row) -> tuple:
        return (*(r[k] for k in PAIR_ON if k != "condition"), r["seed"])

    others = {key(r): r for r in rows if r["condition"] == other}
    return [(g, others[key(g)]) for g in rows if g["condition"] == "guard" and key(g) in others
            and g["fault"] != "none" and g["rated"] and others[key(g)]["rated"]]


def verdicts(*runs: Path) -> list[str]:
    """H1–H6's verdicts, in order."""
    found, _ = tables(*runs, number=12)
    return [cell["shown"] for (_, column), cell in found.items() if column == "verdict"]


# -- a contract override beside the grid's own contract ------------------------------------------

def test_an_e2_run_under_keys_everywhere_is_e2k_not_native(runs: dict[str, Path]) -> None:
    native, keys = records(runs["e2"]), records(runs["e2-keys"])
    assert {r["contract"] for r in keys} == {"keys-everywhere"}
    table5, text = tables(runs["e2"], runs["e2-keys"], number=5)
    for contract, rows in (("native", matched(native)), ("keys-everywhere", matched(keys))):
        for condition in CONDITIONS:
            arm = [r for r in rows if r["condition"] == condition]
            for column, modes in TABLE5.items():
                check(table5[(f"{contract} / {condition}", column)],
                      [r for r in arm if r["fault"] in modes], "duplicate")
    # the native rows are exactly those of the native run alone
    alone = tables(runs["e2"], number=5)[1]
    native_rows = [line for line in numbers(text) if line.startswith("5,native / ")]
    assert native_rows == [line for line in numbers(alone) if line.startswith("5,native / ")]
    table13, _ = tables(runs["e2"], runs["e2-keys"], number=13)
    for contract, rows in (("native", native), ("keys-everywhere", keys)):
        pairs = guard_pairs(matched(rows), "vanilla")
        label = "vanilla" if contract == "native" else "vanilla †"
        found = table13[(f"{contract} / {label}", "paired episodes")]
        assert int(found["shown"]) == len(pairs)
        guard = sum(g["exactly_once"] for g, _ in pairs) / len(pairs)
        assert float(table13[(f"{contract} / {label}", "EOS guard (%)")]["value"]) == \
            pytest.approx(100 * guard)
    table7, text7 = tables(runs["e2"], runs["e2-keys"], number=7)
    assert {row.split(" / ")[1] for row, _ in table7 if row.count(" / ") == 2} == {"native"}
    assert f"Left out: {len(keys):,} episodes of grid e2 that ran under contract " \
           f"keys-everywhere" in text7


def test_table3_holds_native_only_when_a_run_holds_both_contracts(runs: dict[str, Path]) -> None:
    both = records(runs["e1-both"])
    native = [r for r in both if r["contract"] == "native"]
    table3, text = tables(runs["e1"], runs["e1-both"], number=3)
    for model in sorted({r["model"] for r in both}):
        mine = [r for r in native if r["model"] == model]
        check(table3[(model, "dup: late commit")],
              [r for r in mine if r["fault"] in ("timeout_late", "timeout_late_tail")],
              "duplicate")
        check(table3[(model, "EOS: all faults")], [r for r in mine if r["fault"] != "none"],
              "exactly_once")
    assert "under contract keys-everywhere" in text
    assert numbers(text) == numbers(tables(runs["e1"], number=3)[1])
    # the cells both runs hold are expected overlap: one line of information, no warning
    done = limbo("tables", str(runs["e1"]), str(runs["e1-both"]), "--table", "3")
    assert "warning" not in done.stderr
    assert f"{len(native):,} episodes held by both the e1" in done.stderr
    assert verdicts(runs["e1"], runs["e1-both"]) == verdicts(runs["e1"])


# -- a world-file run beside the built-in grid of the same name -----------------------------------

def test_a_world_file_run_of_e1_joins_no_paper_table(runs: dict[str, Path]) -> None:
    world = records(runs["e1-world"])
    for number in (3, 4, 12):
        alone = tables(runs["e1"], number=number)[1]
        beside = tables(runs["e1"], runs["e1-world"], number=number)[1]
        assert numbers(beside) == numbers(alone), number
        assert f"Left out: {len(world):,} episodes of grid e1 that ran on world file shop@" \
               in beside
    assert verdicts(runs["e1"], runs["e1-world"]) == verdicts(runs["e1"])
    # ... and the summary has them, in rows of their own world
    summary, _ = tables(runs["e1"], runs["e1-world"], number=0)
    manifest = json.loads((runs["e1-world"] / "manifest.json").read_text())
    identity = manifest["worlds"][0]["identity"]
    family = {mode: info["family"] for mode, info in manifest["design"]["faults"].items()}
    for model in sorted({r["model"] for r in world}):
        for name in ("read-back resolves", "late commit", "not executed"):
            rows = [r for r in world if r["model"] == model and family[r["fault"]] == name]
            row = f"{model} / native / {identity} / {name}"
            check(summary[(row, "dup")], rows, "duplicate")
            check(summary[(row, "EOS")], rows, "exactly_once")
            assert int(summary[(row, "episodes")]["shown"]) == len(rows)


def test_world_chooses_the_world_file_and_leaves_the_built_in_out(runs: dict[str, Path]) -> None:
    """``--world shop``: the paper's tables hold the world file's episodes, the same whether
    the built-in run is loaded beside or not; the built-in episodes are left out, said in one
    line; a world no loaded run holds is one usage line."""
    def table3(*paths: Path) -> str:
        done = limbo("tables", *map(str, paths), "--world", "shop", "--table", "3",
                     "--format", "csv")
        assert done.returncode == 0, done.stderr
        return done.stdout

    alone, beside = table3(runs["e1-world"]), table3(runs["e1"], runs["e1-world"])
    assert numbers(alone) == numbers(beside)
    assert "No data" not in alone and "World: world file shop@" in alone
    built_in = records(runs["e1"])
    assert f"Left out: {len(built_in):,} episodes of grid e1 that ran on the built-in services" \
           in beside and "--world built-in tabulates it" in beside
    wrong = limbo("tables", str(runs["e1"]), "--world", "nosuch", "--table", "3")
    assert wrong.returncode == 2 and wrong.stdout == ""
    assert wrong.stderr.strip().splitlines()[-1] == (
        "limbo: error: --world 'nosuch' is no world of the loaded runs; choose from built-in")
    assert "Traceback" not in wrong.stderr


# -- two seeds of one grid -----------------------------------------------------------------------

def test_two_seeds_are_replicates_and_table13_pairs_within_each(runs: dict[str, Path]) -> None:
    both = records(runs["e2"]) + records(runs["e2-seed1"])
    assert len({r["seed"] for r in both}) > len({r["seed"] for r in records(runs["e2"])})
    table13, text = tables(runs["e2"], runs["e2-seed1"], number=13)
    assert "No data" not in text
    rows = matched(both)
    for other in ("vanilla", "aware", "reflect", "sdk-retry", "rules", "vbr"):
        pairs = guard_pairs(rows, other)
        assert int(table13[(f"native / {other}", "paired episodes")]["shown"]) == len(pairs)
        gain = sum(g["exactly_once"] - o["exactly_once"] for g, o in pairs) / len(pairs)
        assert table13[(f"native / {other}", "EOS gain (pp)")]["unit"] == "pp"
        assert float(table13[(f"native / {other}", "EOS gain (pp)")]["value"]) == \
            pytest.approx(100 * gain, rel=1e-12)
    assert "Replicates: 2 seeds of each world" in text
    table5, text5 = tables(runs["e2"], runs["e2-seed1"], number=5)
    arm = [r for r in rows if r["condition"] == "guard" and r["fault"] == "redelivery"]
    check(table5[("native / guard", "redelivery")], arm, "duplicate")
    assert "Replicates: 2 seeds of each world in every cell" in text5


# -- a partial run -------------------------------------------------------------------------------

def test_a_partial_run_says_how_much_of_its_grid_it_holds(runs: dict[str, Path]) -> None:
    rows = records(runs["e1-partial"])
    planned = json.loads((runs["e1-partial"] / "manifest.json").read_text())["grid_cells"]
    assert len(rows) == 200 < planned
    table3, text = tables(runs["e1-partial"], number=3)
    assert "which no loaded run holds (`limbo run e1s`)" in text  # E1s named only as missing
    assert "E1 and the E1s supplement" not in text
    check(table3[("all models", "EOS: all faults")], [r for r in rows if r["fault"] != "none"],
          "exactly_once")
    assert f"(200 of {planned:,} episodes; stopped: --limit 200, grid digest" in text
    done = limbo("tables", str(runs["e1-partial"]), "--table", "3")
    assert f"e1 run holds 200 of {planned:,} episodes" in done.stderr
