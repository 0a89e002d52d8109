"""``limbo run --repeats K``: K samples of every cell in its world, each with its own
model-sampling seed; pass^k and consistency; ``policy/noisy``, the seeded stochastic policy.

Must-show 4 of issue 39: ``--repeats 5`` on ``policy/noisy``: pass^k matches the closed form
for the policy's stated rate within its interval. The closed form is computed cell by cell from
the two pure policies noisy mixes (run on the same cells): a cell passes with probability
q = p·[blind passes] + (1 − p)·[verify passes], so pass^k = mean over cells of q^k, and a cell
is consistent with probability 1 where blind and verify grade alike, else p^5 + (1 − p)^5.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from itertools import product
from math import comb
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator
from support.hostile import LIMBO, cli, records, refused, untouched

from limbo.experiments.grid import load_grid, validated
from limbo.experiments.source import CellSource
from limbo.log.replicates import GRADED, Replicates, cells_and_outcomes, pass_hat
from limbo.log.store import record_files
from limbo.run.plan import plan
from limbo.sim.cell import episode_id

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
from same_records import stripped  # noqa: E402

P = 0.3
NOISY = f"policy/noisy?p_blind={P}"
CELLS = ["--template", "charge_invoice", "--template", "import_batch", "--fault", "timeout_post",
         "--fault", "http500_post", "--fault", "none", "--fault", "timeout_late", "--instances",
         "10", "--quiet"]


def test_without_repeats_the_grids_are_what_they_were(monkeypatch, tmp_path) -> None:
    """The identity of the default and paper grids (their cells' ids) is unchanged, and
    ``repeats = 1`` is the same grid as none given. Pinned where no production harness is
    installed (the paper grid's harness cells are dropped then), as `make test` installs them."""
    monkeypatch.setenv("LIMBO_HARNESS_DIR", str(tmp_path / "none"))
    for name, fingerprint in (("default", "3850-56d7d2f7"), ("paper", "39600-32dc56c8")):
        grid = load_grid(name)
        assert plan(CellSource(grid), None).fingerprint.startswith(fingerprint)
        assert "repeats" not in grid.model_dump()
        one = validated({**grid.model_dump(), "repeats": 1}, "test")
        assert one.model_dump() == grid.model_dump()


def test_replicates_share_the_world_and_not_the_sampling_seed() -> None:
    grid = validated({**load_grid("default").model_dump(), "repeats": 3,
                      "templates": ["charge_invoice"]}, "test")
    once = {c.episode_id: c for c in CellSource(load_grid("default")) if
            c.template == "charge_invoice"}
    cells = list(CellSource(grid))
    assert len(cells) == 3 * len(once)
    by_index = Counter(c.replicate for c in cells)
    assert by_index == {0: len(once), 1: len(once), 2: len(once)}
    for cell in cells:
        if cell.replicate == 0:
            assert cell.episode_id in once and "replicate" not in cell.public()
            assert cell.sampling_seed == cell.seed
        else:
            assert cell.episode_id not in once and cell.public()["replicate"] == cell.replicate
            twin = once[episode_id({**cell.public(), "replicate": 0})]  # a record's id, rebuilt
            assert cell.seed == twin.seed and cell.sampling_seed != twin.seed


@pytest.mark.parametrize(("value", "needle"), [
    ("0", "--repeats must be between 1 and 1,000, got 0"),
    ("-2", "--repeats must be between 1 and 1,000, got -2"),
    ("1001", "--repeats must be between 1 and 1,000, got 1001"),
])
def test_bad_repeats_are_one_line_and_write_nothing(capsys, tmp_path: Path, value: str,
                                                   needle: str) -> None:
    out = tmp_path / "out"
    refused(cli(capsys, "run", "--repeats", value, "--out", str(out)), needle)
    untouched(out)


@pytest.mark.parametrize(("model", "needle"), [
    ("policy/noisy?p_blind=1.5", "policy/noisy: p_blind must be a probability in [0, 1]"),
    ("policy/noisy?p_blind=often", "policy/noisy: p_blind must be a probability in [0, 1]"),
    ("policy/noisy?p_verify=0.5", "policy/noisy takes no parameter 'p_verify'"),
])
def test_bad_noisy_parameters(capsys, tmp_path: Path, model: str, needle: str) -> None:
    out = tmp_path / "out"
    refused(cli(capsys, "run", "--model", model, "--out", str(out)), needle)
    untouched(out)


def test_the_noisy_draw_comes_from_the_sampling_seed_alone() -> None:
    from limbo.harnesses.noisy import Noisy

    policy = Noisy(p_blind=P)
    draws = [policy.behaviour(seed).retries_blind > 0 for seed in range(4000)]
    assert draws == [policy.behaviour(seed).retries_blind > 0 for seed in range(4000)]
    assert abs(sum(draws) / len(draws) - P) < 0.03  # 4,000 draws: SD 0.007
    assert not any(Noisy(p_blind=0.0).behaviour(s).retries_blind for s in range(200))
    assert all(Noisy(p_blind=1.0).behaviour(s).retries_blind for s in range(200))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from limbo.cli import main

    root = tmp_path_factory.mktemp("repeats")
    found = {}
    for name, model, extra in (("noisy", NOISY, ["--repeats", "5"]),
                               ("once", NOISY, []),
                               ("blind", "policy/blind", []), ("verify", "policy/verify", [])):
        found[name] = root / name
        assert main(["run", "--model", model, *CELLS, *extra, "--out", str(found[name])]) == 0
    return found


def test_replicate_zero_is_the_run_without_repeats_byte_for_byte(runs) -> None:
    once = set(stripped(runs["once"]))
    repeated = stripped(runs["noisy"])
    assert once <= set(repeated) and len(repeated) == 5 * len(once)
    for record in records(runs["noisy"]):
        index = record["cell"].get("replicate", 0)
        assert record["schema"] == ("limbo.episode/2" if index else "limbo.episode/1")
        assert index in range(5) and "replicate" not in record["cell"] or index > 0


def test_records_of_both_versions_validate_against_the_published_schema(runs) -> None:
    schema = json.loads(subprocess.run([LIMBO, "schema"], capture_output=True, text=True,
                                       check=True).stdout)
    validator = Draft202012Validator(schema)
    found = records(runs["noisy"], runtime=True)
    some = [r for r in found if r["schema"].endswith("/1")][:30] + [
        r for r in found if r["schema"].endswith("/2")][:30]  # validating all 1,600 takes 48 s
    for record in some:
        assert not list(validator.iter_errors(record)), record["episode_id"]
    bad = {**some[0], "cell": {**some[0]["cell"], "replicate": -1}}
    assert list(validator.iter_errors(bad))


def closed_form(runs: dict[str, Path]) -> tuple[dict[int, float], float]:
    """pass^k for k = 1..5 and the consistent share, from the pure policies' outcomes."""
    def graded(name: str) -> dict[tuple, tuple[bool, ...]]:
        return {tuple((k, v) for k, v in cell.items() if k != "model"):
                tuple(bool(outcome[g]) for g in GRADED)
                for cell, outcome in cells_and_outcomes(record_files(runs[name]))}

    blind, verify = graded("blind"), graded("verify")
    assert blind.keys() == verify.keys()
    eos = GRADED.index("exactly_once")
    q = [P * blind[c][eos] + (1 - P) * verify[c][eos] for c in blind]
    same = [blind[c] == verify[c] for c in blind]
    return ({k: sum(x ** k for x in q) / len(q) for k in range(1, 6)},
            sum(1.0 if s else P ** 5 + (1 - P) ** 5 for s in same) / len(same))


def test_pass_k_matches_the_closed_form_within_its_interval(runs) -> None:
    found = Replicates.of(cells_and_outcomes(record_files(runs["noisy"])))
    assert found.most == 5
    expected, consistent = closed_form(runs)
    for k in range(1, 6):
        got = found.pass_k(k)
        assert got.units == 320 and got.clusters == 20
        assert got.lo <= expected[k] <= got.hi, (k, expected[k], got)
        print(f"pass^{k}: closed form {100 * expected[k]:.1f}%, measured {got.shown()}")
    got = found.consistent()
    assert got.lo <= consistent <= got.hi, (consistent, got)
    print(f"consistent: closed form {100 * consistent:.1f}%, measured {got.shown()}")


def test_the_summary_and_table_14_print_the_same_numbers(capsys, runs) -> None:
    found = Replicates.of(cells_and_outcomes(record_files(runs["noisy"])))
    again = cli(capsys, "run", "--model", NOISY, *CELLS, "--repeats", "5", "--out",
                str(runs["noisy"]))
    assert again.code == 0 and "ran 0 episodes, 1,600 already done" in again.out
    line = f"pass^5 {found.pass_k(5).shown()}, consistent {found.consistent().shown()}"
    assert line in again.out
    table = cli(capsys, "tables", str(runs["noisy"]), "--table", "14")
    row = next(r for r in table.out.splitlines() if r.startswith("| all |"))
    assert row.split(" | ")[1] == "320"
    assert found.pass_k(5).shown().replace("%", "") in row
    assert found.consistent().shown().replace("%", "") in row


def test_the_estimator_is_unbiased_for_p_to_the_k() -> None:
    """Σ_c P(c passes of n) · C(c,k)/C(n,k) = p^k exactly (the U-statistic of k tries)."""
    for n, k, p in product((2, 5, 9), (1, 2, 5), (0.1, 0.5, 0.93)):
        if k > n:
            continue
        mean = sum(comb(n, c) * p ** c * (1 - p) ** (n - c) * pass_hat(c, n, k)
                   for c in range(n + 1))
        assert mean == pytest.approx(p ** k, rel=1e-12)


def test_a_deterministic_policy_is_the_same_in_every_replicate(tmp_path: Path, capsys) -> None:
    """The world does not change with the replicate: a policy that draws nothing gives every
    replicate the same events and outcome."""
    out = tmp_path / "verify"
    assert cli(capsys, "run", "--model", "policy/verify", "--template", "import_batch",
               "--repeats", "3", "--out", str(out), "--quiet").code == 0
    groups: dict[str, list[str]] = {}
    for record in records(out):
        cell = {k: v for k, v in record["cell"].items() if k != "replicate"}
        body = json.dumps([record["events"], record["outcome"], record["ledger"]])
        groups.setdefault(json.dumps(cell, sort_keys=True), []).append(body)
    assert groups and all(len(v) == 3 and len(set(v)) == 1 for v in groups.values())
