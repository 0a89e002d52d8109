"""Analysis by design: every number is drawn from the matched arms of the experiment it reports,
and loading any other run never moves it.

Small runs of e1, e2, e3 and e6 (two templates, reference policies) through the real CLI; the
H6 TS loss, Table 8's EOS of the blind policy and Table 5's vanilla row recomputed from the raw
JSONL records in plain Python (no project code); each unchanged to the last digit when
unrelated runs are loaded beside; and a property test over subsets of the runs.
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.rate_routes import clustered as clustered_interval

LIMBO = str(Path(sys.executable).parent / "limbo")
GRIDS = ("e1", "e2", "e3", "e6")
TEMPLATES = ("--template", "charge_invoice", "--template", "import_batch")
PAIR_ON = ("model", "harness", "contract", "fault", "template", "instance", "focal_write")
Row = dict[str, Any]


def limbo(*args: str) -> subprocess.CompletedProcess:
    """``limbo`` as a user runs it, where no production harness is installed: e3 and e3k then
    run their minimal-harness cells (the real CLIs, which `make test` installs, would run for
    hours; tests/test_harnesses_*.py drive them)."""
    return subprocess.run([LIMBO, *args], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONHASHSEED": "0",
                               "LIMBO_HARNESS_DIR": os.devnull + ".no-harnesses"})


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("design")
    for grid in GRIDS:
        done = limbo("run", grid, *TEMPLATES, "--out", str(root / grid), "--workers", "2",
                     "--quiet")
        assert done.returncode == 0, done.stderr
    return {grid: root / grid for grid in GRIDS}


def tables_csv(*runs: Path, number: int) -> str:
    done = limbo("tables", *map(str, runs), "--table", str(number), "--format", "csv")
    assert done.returncode == 0, done.stderr
    return done.stdout


def cells(text: str) -> dict[tuple[str, str], dict[str, str]]:
    return {(line["row"], line["column"]): line for line in csv.DictReader(io.StringIO(text))}


def raw(run: Path) -> list[Row]:
    """The run's records flattened: cell and outcome, by plain json."""
    out = []
    for line in (run / "episodes.jsonl").read_text().splitlines():
        record = json.loads(line)
        out.append({**record["cell"], **record["outcome"]})
    return out


# -- plain-Python arithmetic, independent of the analysis code ----------------------------------

def rated(rows: Iterable[Row]) -> list[Row]:
    return [r for r in rows if r["fault_fired"] and r["termination"] not in
            ("infra_error", "model_error", "timeout")]


def matched(rows: list[Row], factor: str, arms: tuple[str, ...]) -> dict[str, list[Row]]:
    """Each arm's rows on the cells (values of PAIR_ON) every arm has."""
    keys = {arm: {tuple(r[k] for k in PAIR_ON) for r in rows if r[factor] == arm} for arm in arms}
    common = set.intersection(*keys.values())
    return {arm: [r for r in rows if r[factor] == arm and tuple(r[k] for k in PAIR_ON) in common]
            for arm in arms}


def kish(rows: list[Row], outcome: Callable[[Row], bool]) -> tuple[float, float, float]:
    """(rate, lo, hi): equal weight per template, Wilson on Kish's effective n over the design
    effect of clustering by world (the default)."""
    sizes = Counter(r["template"] for r in rows)
    return clustered_interval([outcome(r) for r in rows], [1 / sizes[r["template"]] for r in rows],
                     [(r["template"], r["instance"]) for r in rows])[:3]


def check(cell: dict[str, str], rows: list[Row], outcome: Callable[[Row], bool]) -> None:
    """The CSV's rate and interval (in percent, its unit) against a recomputation from the
    records (support/rate_routes.py's library route)."""
    rate, lo, hi = kish(rows, outcome)
    assert cell["unit"] == "%"
    assert float(cell["value"]) == pytest.approx(100 * rate, rel=1e-12)
    assert float(cell["lo"]) == pytest.approx(100 * lo, rel=1e-8, abs=1e-10)
    assert float(cell["hi"]) == pytest.approx(100 * hi, rel=1e-8)
    assert int(float(cell["denominator"])) == len(rows)


# -- Must-show 1 ----------------------------------------------------------------------------------

def test_table5_vanilla_row_is_the_matched_e2_arm_by_hand(runs: dict[str, Path]) -> None:
    e2 = raw(runs["e2"])
    conditions = ("vanilla", "aware", "reflect", "sdk-retry", "rules", "vbr", "guard",
                  "state-oracle", "outcome-oracle")
    vanilla = rated(matched(e2, "condition", conditions)["vanilla"])
    table = cells(tables_csv(runs["e1"], runs["e2"], number=5))
    for column, modes in (("timeout (committed)", {"timeout_post"}),
                          ("late commit", {"timeout_late", "timeout_late_tail"}),
                          ("redelivery", {"redelivery"})):
        check(table[("native / vanilla", column)], [r for r in vanilla if r["fault"] in modes],
              lambda r: r["duplicate"])
    # E1's minimal/vanilla/native episodes share E2's vanilla factor levels, but are E1's: the
    # vanilla arm holds E2's vanilla cells only.
    e1_only = {json.dumps(r, sort_keys=True) for r in raw(runs["e1"])} - {
        json.dumps(r, sort_keys=True) for r in e2}
    assert e1_only and int(float(table[("native / vanilla", "redelivery")]["denominator"])) == len(
        [r for r in vanilla if r["fault"] == "redelivery"])


def test_table8_blind_eos_and_h6_ts_loss_by_hand(runs: dict[str, Path]) -> None:
    arms = matched(raw(runs["e3"]), "condition", ("vanilla", "guard"))
    faulted = {arm: [r for r in rated(rows) if r["fault"] != "none" and r["contract"] == "native"]
               for arm, rows in arms.items()}
    table8 = cells(tables_csv(runs["e3"], number=8))
    blind = [r for r in faulted["vanilla"] if r["model"] == "policy/blind"]
    check(table8[("minimal / policy/blind", "EOS vanilla")], blind, lambda r: r["exactly_once"])
    check(table8[("minimal / policy/blind", "EOS guard")],
          [r for r in faulted["guard"] if r["model"] == "policy/blind"], lambda r: r["exactly_once"])
    loss = (kish(faulted["vanilla"], lambda r: r["task_success"])[0]
            - kish(faulted["guard"], lambda r: r["task_success"])[0])
    h6 = cells(tables_csv(runs["e3"], number=12))[("H6 / the guard brings duplicates to ≤ 2% in "
                                                    "every harness with ≤ 3 pp TS loss", "result")]
    pooled = {"timeout_post", "http500_post", "partial_batch", "timeout_late",
              "timeout_late_tail", "redelivery"}
    dup = kish([r for r in faulted["guard"] if r["fault"] in pooled], lambda r: r["duplicate"])[0]
    assert f"minimal: dup {100 * dup:.1f}% [" in h6["shown"]
    assert f"TS loss {100 * loss:+.1f} pp" in h6["shown"]


@pytest.mark.parametrize(("number", "base", "unrelated"), [
    (5, ("e2",), ("e1", "e3", "e6")),
    (8, ("e3",), ("e1", "e2", "e6")),
    (12, ("e1", "e3"), ("e2", "e6")),
    (10, ("e6",), ("e1", "e2", "e3")),
])
def test_an_unrelated_run_changes_no_digit(runs: dict[str, Path], number: int,
                                           base: tuple[str, ...],
                                           unrelated: tuple[str, ...]) -> None:
    """The E1 and E2 runs hold minimal-harness vanilla and guard episodes, the E6 run vanilla
    ones: by factor level they look like E3's and E2's arms. Loaded beside, they change
    nothing — not a digit of the CSV, provenance included."""
    alone = tables_csv(*(runs[g] for g in base), number=number)
    beside = tables_csv(*(runs[g] for g in (*unrelated, *base)), number=number)
    assert "No data" not in alone and alone == beside


# -- Must-show 2 ----------------------------------------------------------------------------------

def test_table10_has_the_papers_rows(runs: dict[str, Path]) -> None:
    rows = [line["row"] for line in csv.DictReader(io.StringIO(tables_csv(runs["e6"],
                                                                         number=10)))]
    assert list(dict.fromkeys(r for r in rows if r not in ("caveat", "note", "provenance"))) == [
        "not executed / TS", "read-back resolves / dup", "late commit / dup", "redelivery / dup",
        "no fault / EOS"]


def test_table13_holm_runs_over_the_papers_six_comparisons(runs: dict[str, Path]) -> None:
    """Both readings, each with Holm over the paper's six: the sign-flip p over the worlds'
    net discordance and the unclustered exact McNemar p, counted by hand."""
    from support.handcount import discordance, holm, mcnemar, sign_flip

    e2 = raw(runs["e2"])
    conditions = ("vanilla", "aware", "reflect", "sdk-retry", "rules", "vbr", "guard",
                  "state-oracle", "outcome-oracle")
    arms = matched(e2, "condition", conditions)
    by_key = {c: {tuple(r[k] for k in PAIR_ON): r for r in rows if r["fault"] != "none"}
              for c, rows in arms.items()}
    family = ("vanilla", "aware", "reflect", "sdk-retry", "rules", "vbr")
    pvalues, flips, worlds = {}, {}, {}
    for other in conditions[:6] + conditions[7:]:
        pairs = [(g, by_key[other][k]) for k, g in by_key["guard"].items()
                 if rated([g]) and rated([by_key[other][k]])]
        b = sum(1 for g, o in pairs if g["exactly_once"] and not o["exactly_once"])
        c = sum(1 for g, o in pairs if o["exactly_once"] and not g["exactly_once"])
        pvalues[other] = mcnemar(b, c)
        d = discordance([(g["exactly_once"], o["exactly_once"], (g["template"], g["instance"]))
                         for g, o in pairs])
        flips[other], worlds[other] = sign_flip(d), len(d)
    adjusted = dict(zip(family, holm([pvalues[o] for o in family]), strict=True))
    clustered = dict(zip(family, holm([flips[o] for o in family]), strict=True))
    table = cells(tables_csv(runs["e2"], number=13))
    for other in family:
        row = f"native / {other}"
        assert float(table[(row, "Holm p (unclustered)")]["value"]) == pytest.approx(
            adjusted[other], rel=1e-9)
        assert float(table[(row, "sign-flip p")]["value"]) == pytest.approx(flips[other])
        assert float(table[(row, "Holm p")]["value"]) == pytest.approx(clustered[other])
        assert table[(row, "clusters")]["shown"] == str(worlds[other]) == "2"
    for other in ("state-oracle", "outcome-oracle"):
        row = f"native / {other} †"
        assert table[(row, "Holm p")]["shown"] == table[(row, "Holm p (unclustered)")][
            "shown"] == "—"
        assert float(table[(row, "McNemar p (unclustered)")]["value"]) == pytest.approx(
            pvalues[other])
        assert float(table[(row, "sign-flip p")]["value"]) == pytest.approx(flips[other])


# -- Must-show 4 and the property: any subset renders; extra runs move nothing --------------------

USES = {3: ("e1", "e1s"), 4: ("e1", "e3"), 5: ("e2", "e2k"), 6: ("e5",), 7: ("e2",),
        8: ("e3",), 9: ("e3", "e3k"), 10: ("e6",), 12: ("e1", "e3"), 13: ("e2", "e2k")}


@pytest.fixture(scope="module")
def tabulate(runs: dict[str, Path]) -> Callable[[frozenset[str]], dict[int, str]]:
    from limbo.analysis.data import Data
    from limbo.analysis.loader import load
    from limbo.analysis.tables import TABLES, build_safely

    memo: dict[frozenset[str], dict[int, str]] = {}

    def of(grids: frozenset[str]) -> dict[int, str]:
        if grids not in memo:
            built, failed = build_safely(Data(load([runs[g] for g in sorted(grids)])),
                                         list(TABLES))
            assert failed == []
            memo[grids] = {}
            for table in built:
                assert table.latex() and table.markdown()
                memo[grids][table.number] = table.csv()
        return memo[grids]

    return of


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(chosen=st.sets(st.sampled_from(GRIDS), min_size=1))
def test_every_subset_renders_and_extra_runs_move_nothing(tabulate, chosen: set[str]) -> None:
    whole = tabulate(frozenset(chosen))
    for number, uses in USES.items():
        own = frozenset(chosen) & set(uses)
        if not own:
            assert "No data — produced by grid" in whole[number]
            continue
        assert whole[number] == tabulate(own)[number], (number, sorted(chosen))


def test_tables_on_the_readme_keyed_run_an_e6_run_and_errored_cells(runs: dict[str, Path],
                                                                   tmp_path: Path) -> None:
    keyed = tmp_path / "keyed"
    done = limbo("run", "default", "--out", str(keyed), "--model", "policy/keyed",
                 "--contract", "keys-everywhere", "--quiet")
    assert done.returncode == 0, done.stderr
    errored = tmp_path / "errored"
    errored.mkdir()
    (errored / "manifest.json").write_bytes((runs["e6"] / "manifest.json").read_bytes())
    with (errored / "episodes.jsonl").open("w") as fh:
        for line in (runs["e6"] / "episodes.jsonl").read_text().splitlines():
            record = json.loads(line)
            record["outcome"]["termination"] = "infra_error"
            fh.write(json.dumps(record) + "\n")
    for run, filled in ((keyed, ()), (runs["e6"], (10,)), (errored, ())):
        done = limbo("tables", str(run))
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
        for number in USES:
            part = done.stdout.split(f"### Table {number}:")[1].split("### Table")[0]
            if number in filled:
                assert "No data" not in part
            else:
                grids = [g for g in USES[number] if g != "e1s"]
                assert "No data — produced by grid" in part or "untested" in part, number
                assert any(f"`limbo run {g}`" in part for g in grids), (number, part)


# -- Must-show 2: Table 6 counts each world once ------------------------------------------------

def test_table6_p_within_counts_each_tail_world_once(tmp_path: Path) -> None:
    run = tmp_path / "e5"
    done = limbo("run", "e5", "--template", "charge_invoice", "--model", "policy/verify",
                 "--model", "policy/blind", "--out", str(run), "--quiet")
    assert done.returncode == 0, done.stderr
    delays = {}
    for line in (run / "episodes.jsonl").read_text().splitlines():
        record = json.loads(line)
        cell = record["cell"]
        if cell["fault"] == "timeout_late_tail":
            delay = next(e["detail"]["delay_after_timeout_s"] for e in record["events"]
                         if e["type"] == "fault")
            world = (cell["template"], cell["focal_write"], cell["instance"], cell["seed"])
            assert delays.setdefault(world, delay) == delay  # one δ per world, whoever ran it
    table = cells(tables_csv(run, number=6))
    for condition, bound in (("wait-60", 60), ("wait-300", 300), ("wait-3600", 3600)):
        cell = table[(f"native / {condition}", "P(δ ≤ Δ) (%)")]
        assert int(float(cell["denominator"])) == len(delays) == 2  # 2 models, 2 contracts
        assert int(float(cell["numerator"])) == sum(d <= bound for d in delays.values())


# -- Must-show 5: the log, not the grid file --------------------------------------------------------

def test_tables_come_from_the_log_after_the_grid_file_is_edited_or_deleted(
        tmp_path: Path) -> None:
    grid = tmp_path / "mine.toml"
    text = (Path(__file__).resolve().parents[1] / "experiments" / "grids" / "e6.toml").read_text()
    grid.write_text(f'name = "e6"\ntemplates = ["charge_invoice"]\n{text}')
    run = tmp_path / "run"
    done = limbo("run", str(grid), "--out", str(run), "--quiet")
    assert done.returncode == 0, done.stderr

    def regenerate(out: Path) -> dict[str, bytes]:
        done = limbo("tables", str(run), "--format", "md,csv,tex", "--out", str(out))
        assert done.returncode == 0, done.stderr
        return {p.name: p.read_bytes() for p in sorted(out.iterdir())}

    before = regenerate(tmp_path / "before")
    assert b"No data" not in before["table10.md"]
    grid.write_text(grid.read_text().replace('arms = ["vanilla", "plain"]',
                                             'arms = ["plain", "vanilla"]')
                    .replace('"focal_write"]', '"focal_write", "seed"]'))
    assert regenerate(tmp_path / "edited") == before
    grid.unlink()
    assert regenerate(tmp_path / "deleted") == before


def test_regrading_is_explicit_and_says_what_changed(runs: dict[str, Path], tmp_path: Path) -> None:
    """A run graded by an older grader (here: one episode's recorded exactly-once flipped, and
    the manifest saying grader 1) is read as recorded; ``--regrade`` grades it again, names
    both versions and lists the episode whose grade changed."""
    copy = tmp_path / "old"
    copy.mkdir()
    manifest = json.loads((runs["e6"] / "manifest.json").read_text())
    manifest["design"]["grader"] = "1"
    (copy / "manifest.json").write_text(json.dumps(manifest))
    lines = (runs["e6"] / "episodes.jsonl").read_text().splitlines()
    target = next(i for i, line in enumerate(lines)
                  if json.loads(line)["cell"]["fault"] == "none"
                  and json.loads(line)["outcome"]["exactly_once"])
    record = json.loads(lines[target])
    record["outcome"]["exactly_once"] = False
    lines[target] = json.dumps(record)
    (copy / "episodes.jsonl").write_text("\n".join(lines) + "\n")

    original = cells(tables_csv(runs["e6"], number=10))
    recorded = cells(tables_csv(copy, number=10))
    key = ("no fault / EOS", "default (%)" if record["cell"]["condition"] == "vanilla"
           else "plain (%)")
    assert float(recorded[key]["value"]) < float(original[key]["value"])
    done = limbo("tables", str(copy), "--table", "10", "--format", "csv", "--regrade")
    assert done.returncode == 0, done.stderr
    assert "regraded with grader 2 (the runs were graded with 1): 1 episode(s) changed grade" \
        in done.stderr
    assert f"{record['episode_id']}: exactly_once False → True" in done.stderr
    assert cells(done.stdout)[key]["value"] == original[key]["value"]


@pytest.mark.parametrize(("comparison", "message"), [
    ('factor = "condition"\narms = ["vanilla", "gaurd"]\npair_on = ["model"]',
     "comparison c: arm 'gaurd' is not one of its conditions"),
    ('factor = "condition"\narms = ["vanilla", "guard"]\npair_on = ["condition"]',
     "pair_on lists 'condition', the factor the arms differ in"),
    ('factor = "condition"\narms = ["vanilla"]\npair_on = ["model"]', "arms"),
    ('factor = "weather"\narms = ["a", "b"]\npair_on = ["model"]', "factor"),
])
def test_a_bad_comparison_is_one_line_before_anything_runs(tmp_path: Path, comparison: str,
                                                           message: str) -> None:
    grid = tmp_path / "g.toml"
    grid.write_text('conditions = ["vanilla", "guard"]\ntemplates = ["charge_invoice"]\n'
                    f'[[comparisons]]\nname = "c"\n{comparison}\n')
    done = limbo("run", str(grid), "--out", str(tmp_path / "run"))
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not (tmp_path / "run").exists()
