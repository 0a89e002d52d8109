"""``limbo compare`` on two e6-shaped runs that differ only in the model: the pairs, the paired
differences and the exact p-values equal a hand count of discordant pairs — also after one
run's records are shuffled and one cell removed."""

from __future__ import annotations

import csv
import io
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from support.handcount import discordance, holm, mcnemar, sign_flip

LIMBO = str(Path(sys.executable).parent / "limbo")
FAMILY = {"timeout_pre": "not executed", "http500_pre": "not executed",
          "throttle_pre": "not executed", "timeout_post": "read-back resolves",
          "http500_post": "read-back resolves", "conn_reset_post": "read-back resolves",
          "partial_batch": "read-back resolves", "timeout_late": "late commit",
          "timeout_late_tail": "late commit", "redelivery": "read-back cannot",
          "stale_readback": "read-back cannot", "phantom_success": "phantom", "none": "none"}
METRICS = {"dup": "duplicate", "TS": "task_success", "EOS": "exactly_once"}
KEY = ("harness", "condition", "contract", "fault", "service", "template", "instance",
       "focal_write", "seed")


def limbo(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([LIMBO, *args], capture_output=True, text=True, timeout=600,
                          env={**os.environ})


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("compare")
    for name, model in (("verify", "policy/verify"), ("blind", "policy/blind")):
        done = limbo("run", "e6", "--model", model, "--out", str(root / name), "--quiet",
                     "--workers", "2")
        assert done.returncode == 0, done.stderr
    return root / "verify", root / "blind"


def read(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "episodes.jsonl").read_text().splitlines()]


def csv_blocks(text: str) -> list[list[dict]]:
    blocks: list[list[str]] = []
    for line in text.splitlines():
        if line.startswith("table,row,"):
            blocks.append([])
        if blocks and line.strip():
            blocks[-1].append(line)
    return [list(csv.DictReader(io.StringIO("\n".join(b)))) for b in blocks]


def hand_count(a: list[dict], b: list[dict]) -> dict:
    """Per family: pairs, discordant counts per metric, unpaired counts per side."""
    def keyed(records: list[dict]) -> dict:
        return {tuple(r["cell"][k] for k in KEY): r for r in records}

    left, right = keyed(a), keyed(b)
    out: dict = {}
    for key in left.keys() | right.keys():
        family = FAMILY[key[KEY.index("fault")]]
        entry = out.setdefault(family, {"pairs": 0, "unpaired_a": 0, "unpaired_b": 0,
                                        **{m: [0, 0] for m in METRICS}})
        if key not in right:
            entry["unpaired_a"] += 1
            continue
        if key not in left:
            entry["unpaired_b"] += 1
            continue
        x, y = left[key]["outcome"], right[key]["outcome"]
        if not (rated(left[key]) and rated(right[key])):
            continue
        entry["pairs"] += 1
        world = (key[KEY.index("template")], key[KEY.index("instance")])
        for metric, field in METRICS.items():
            entry[metric][0] += x[field] and not y[field]
            entry[metric][1] += y[field] and not x[field]
            entry.setdefault(f"{metric} worlds", []).append((x[field], y[field], world))
    return out


def rated(record: dict) -> bool:
    return record["outcome"]["fault_fired"] and record["outcome"]["termination"] not in (
        "infra_error", "model_error", "timeout")


def check(output: str, counts: dict) -> None:
    metrics, pairing = csv_blocks(output)
    rows = {(r["row"], r["column"]): r for r in metrics}
    families = [f for f in ("not executed", "read-back resolves", "late commit",
                            "read-back cannot", "phantom", "none") if f in counts]
    for metric in METRICS:
        raw = [mcnemar(*counts[f][metric]) for f in families]
        by_world = [discordance(counts[f].get(f"{metric} worlds", [])) for f in families]
        flips = [sign_flip(d) for d in by_world]
        for family, p, p_holm, flip, flip_holm, d in zip(families, raw, holm(raw), flips,
                                                         holm(flips), by_world, strict=True):
            b, c = counts[family][metric]
            key = f"{family} / {metric}"
            assert rows[(key, "pairs")]["shown"] == str(counts[family]["pairs"])
            assert rows[(key, "b (A only)")]["shown"] == str(b)
            assert rows[(key, "c (B only)")]["shown"] == str(c)
            assert rows[(key, "Δ (pp)")]["unit"] == "pp"  # the CSV's value in the unit shown
            assert float(rows[(key, "Δ (pp)")]["value"]) == pytest.approx(
                100 * (c - b) / counts[family]["pairs"])
            assert float(rows[(key, "McNemar p (unclustered)")]["value"]) == pytest.approx(
                p, rel=1e-9)
            assert float(rows[(key, "Holm p (unclustered)")]["value"]) == pytest.approx(
                p_holm, rel=1e-9)
            assert rows[(key, "clusters")]["shown"] == str(len(d))
            assert float(rows[(key, "sign-flip p")]["value"]) == pytest.approx(flip, rel=1e-9)
            assert float(rows[(key, "Holm p")]["value"]) == pytest.approx(flip_holm, rel=1e-9)
    unpaired = {(r["row"], r["column"]): r["shown"] for r in pairing}
    for family in families:
        assert unpaired[(family, "rated pairs")] == str(counts[family]["pairs"])
        a_col = next(c for (row, c) in unpaired if row == family and c.startswith("unpaired in A"))
        b_col = next(c for (row, c) in unpaired if row == family and c.startswith("unpaired in B"))
        assert unpaired[(family, a_col)] == str(counts[family]["unpaired_a"])
        assert unpaired[(family, b_col)] == str(counts[family]["unpaired_b"])


def test_compare_matches_a_hand_count(runs: tuple[Path, Path]) -> None:
    a, b = runs
    done = limbo("compare", str(a), str(b), "--format", "csv")
    assert done.returncode == 0, done.stderr
    counts = hand_count(read(a), read(b))
    assert sum(c["dup"][0] + c["dup"][1] for c in counts.values()) > 0  # the models differ
    check(done.stdout, counts)
    text = limbo("compare", str(a), str(b)).stdout
    assert "paired on every cell field but model" in text


def test_clustering_is_what_makes_the_p_honest(runs: tuple[Path, Path]) -> None:
    """Under --cluster none every pair is its own unit: the sign-flip p is the exact McNemar
    p. By world (16 worlds of e6) it can be no smaller than 2/2^16, however many pairs."""
    a, b = runs
    none = {(r["row"], r["column"]): r for r in csv_blocks(limbo(
        "compare", str(a), str(b), "--format", "csv", "--cluster", "none").stdout)[0]}
    world = {(r["row"], r["column"]): r for r in csv_blocks(limbo(
        "compare", str(a), str(b), "--format", "csv").stdout)[0]}
    key = "read-back resolves / dup"
    assert none[(key, "sign-flip p")]["value"] == none[(key, "McNemar p (unclustered)")]["value"]
    assert int(none[(key, "clusters")]["shown"]) == int(none[(key, "pairs")]["shown"])
    assert float(world[(key, "sign-flip p")]["value"]) >= 2 / 2 ** 16
    assert float(world[(key, "sign-flip p")]["value"]) > float(none[(key, "sign-flip p")]["value"])
    assert world[(key, "McNemar p (unclustered)")] == none[(key, "McNemar p (unclustered)")]


def test_every_difference_has_a_seeded_bootstrap_interval(runs: tuple[Path, Path]) -> None:
    """Δ's interval (B = 1000 by default) holds Δ, is the same from the same logs, and says how
    many replicates it drew; --bootstrap 0 leaves it out."""
    a, b = runs
    first, again = (limbo("compare", str(a), str(b), "--format", "csv").stdout for _ in "ab")
    assert first == again
    cells = {(r["row"], r["column"]): r for r in csv_blocks(first)[0]}
    delta = cells[("read-back resolves / dup", "Δ (pp)")]
    assert float(delta["lo"]) <= float(delta["value"]) <= float(delta["hi"])
    assert float(delta["lo"]) < float(delta["hi"]) and delta["lo"] == delta["boot_lo"]
    assert delta["clusters"] == "16.0"
    assert "B = 300," in limbo("compare", str(a), str(b), "--bootstrap", "300").stdout
    off = limbo("compare", str(a), str(b), "--bootstrap", "0").stdout
    assert "Δ (pp)" in off and " [+" not in off and "cluster bootstrap" not in off


def test_comparing_two_templates_clusters_by_side_a() -> None:
    """With the template itself compared, a pair spans two worlds: it counts in A's. Two
    frames (as the loader gives them) whose episodes differ only in the template — no built-in
    grid pairs across templates, whose writes differ — three instances of A's template, so
    three clusters, however many pairs each holds."""
    import pandas as pd

    from limbo.analysis import compare
    from limbo.analysis.uncertainty import Uncertainty
    from limbo.log.records import CELL_FIELDS

    def side(template: str, duplicate: bool) -> pd.DataFrame:
        rows = [{**dict.fromkeys(CELL_FIELDS, "x"), "template": template, "instance": k % 3,
                 "seed": k, "rated": True, "family": "read-back resolves",
                 "duplicate": duplicate, "task_success": True, "exactly_once": not duplicate}
                for k in range(12)]
        return pd.DataFrame(rows)

    arms = compare.one_run(pd.concat([side("a", False), side("b", True)], ignore_index=True),
                           "template=a,b")
    pairs = compare.paired(arms)
    assert len(pairs.rated) == 12 and set(pairs.frame["template"]) == {"a"}
    table = compare.metrics_table(arms, pairs, Uncertainty())
    row = next(r for r in table.rows if r[0].shown == "read-back resolves" and r[1].shown == "dup")
    cells = dict(zip(table.header, (e.shown for e in row), strict=True))
    assert (cells["clusters"], cells["c (B only)"]) == ("3", "12")
    assert cells["sign-flip p"] == "0.25"  # 2 / 2^3: three worlds all one way
    assert cells["McNemar p (unclustered)"] == "4.9e-04"  # 2 / 2^12


def test_shuffled_with_a_cell_removed(runs: tuple[Path, Path], tmp_path: Path) -> None:
    a, b = runs
    lines = (b / "episodes.jsonl").read_text().splitlines()
    random.Random(7).shuffle(lines)
    removed = json.loads(lines.pop(11))
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "episodes.jsonl").write_text("\n".join(lines) + "\n")
    done = limbo("compare", str(a), str(tmp_path / "b"), "--format", "csv")
    assert done.returncode == 0, done.stderr
    counts = hand_count(read(a), read(tmp_path / "b"))
    family = FAMILY[removed["cell"]["fault"]]
    assert counts[family]["unpaired_a"] == 1
    assert sum(c["unpaired_b"] for c in counts.values()) == 0
    check(done.stdout, counts)


def test_two_levels_of_one_factor_in_one_run(runs: tuple[Path, Path]) -> None:
    a, _ = runs
    done = limbo("compare", str(a), "--by", "condition=vanilla,plain", "--format", "csv")
    assert done.returncode == 0, done.stderr
    records = read(a)
    vanilla = [r for r in records if r["cell"]["condition"] == "vanilla"]
    plain = [r for r in records if r["cell"]["condition"] == "plain"]
    for r in vanilla + plain:
        r["cell"]["condition"] = "-"  # pair on everything else
    check(done.stdout, hand_count(vanilla, plain))


@pytest.mark.parametrize("args,message", [
    (["--by", "colour"], "is not a cell field"),
    ([], "name the factor to compare"),
    (["--by", "model"], "the run has 1 levels"),
    (["--by", "condition=vanilla,guard"], "name two levels of condition"),
])
def test_bad_requests_are_one_line(runs: tuple[Path, Path], args: list[str],
                                   message: str) -> None:
    done = limbo("compare", str(runs[0]), *args)
    assert done.returncode == 2
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_runs_with_nothing_in_common(runs: tuple[Path, Path], tmp_path: Path) -> None:
    other = tmp_path / "other"
    done = limbo("run", "e6", "--model", "policy/keyed", "--template", "charge_invoice",
                 "--out", str(other), "--quiet", "--seed", "9")
    assert done.returncode == 0, done.stderr
    done = limbo("compare", str(runs[0]), str(other), "--by", "model")
    assert done.returncode == 2 and "pairs with one of" in done.stderr


def test_thirty_worlds_all_one_way_print_the_exact_sign_flip_p(tmp_path: Path) -> None:
    """Must-show 4: verify against blind over 30 worlds (two templates × 15 instances), where
    blind duplicates every lost acknowledgement and partial batch that verify reads back — 75
    discordant pairs, all one way, two or three per world. The sign-flip p is exact, 2/2^30 =
    1.86e-09 (the two all-alike sign flips), printed as such — not a Monte Carlo floor."""
    for name, model in (("verify", "policy/verify"), ("blind", "policy/blind")):
        done = limbo("run", "e6", "--model", model, "--condition", "vanilla",
                     "--template", "charge_invoice", "--template", "import_batch",
                     "--instances", "15", "--fault", "timeout_post", "--fault", "partial_batch",
                     "--out", str(tmp_path / name), "--quiet", "--workers", "2")
        assert done.returncode == 0, done.stderr
    a, b = tmp_path / "verify", tmp_path / "blind"
    counts = hand_count(read(a), read(b))["read-back resolves"]
    d = discordance(counts["dup worlds"])
    assert len(d) == 30 and all(v < 0 for v in d) and set(map(abs, d)) == {2, 3}
    assert sign_flip(d) == 2 / 2 ** 30
    cells = {(r["row"], r["column"]): r for r in csv_blocks(
        limbo("compare", str(a), str(b), "--format", "csv").stdout)[0]}
    key = "read-back resolves / dup"
    assert cells[(key, "clusters")]["shown"] == "30"
    assert float(cells[(key, "sign-flip p")]["value"]) == pytest.approx(2 / 2 ** 30, rel=1e-12)
    shown = limbo("compare", str(a), str(b)).stdout
    row = next(line for line in shown.splitlines() if line.startswith("| read-back resolves | dup"))
    assert row.split(" | ")[9:11] == ["1.9e-09", "1.9e-09"]  # sign-flip p and its Holm p
