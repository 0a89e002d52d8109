"""Table 15, the cost of a fault: per episode under each fault mode against ``none``, with a
clustered interval — checked against a hand count from the records' text, for a grid on the
built-in services, a world file, and a record file that belongs to no run."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import pytest
from scipy.stats import t as student
from support.hostile import cli
from support.summary_runs import mcp_episode  # at collection: the SDK binds stderr on import

ROOT = Path(__file__).resolve().parents[1]
CELLS = ["--model", "policy/verify", "--model", "policy/blind", "--template", "charge_invoice",
         "--template", "import_batch", "--fault", "none", "--fault", "timeout_post", "--fault",
         "timeout_late", "--instances", "3", "--quiet"]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from limbo.cli import main

    out = tmp_path_factory.mktemp("cost") / "run"
    assert main(["run", *CELLS, "--out", str(out)]) == 0
    return out


def table(capsys, *inputs: str, extra: tuple[str, ...] = ()) -> dict[tuple[str, str, str], dict]:
    done = cli(capsys, "tables", *inputs, "--table", "15", "--format", "csv", *extra)
    assert done.code == 0, done.err
    return {(r["row"].split(" / ")[0], r["row"].split(" / ")[-1], r["column"]): r
            for r in csv.DictReader(io.StringIO(done.out)) if r["row"] not in ("note",
                                                                               "provenance",
                                                                               "caveat")}


def by_hand(records: list[dict], model: str, mode: str, field: str) -> tuple[float, float, float]:
    """Δ = mean(mode) − mean(none) of ``field`` with every template weighing the same within
    each arm, and its 95% interval: the cluster-robust SE over worlds, t(K − 1)."""
    def arm(fault: str) -> list[tuple[str, str, float, float]]:
        rows = [r for r in records if r["cell"]["model"] == model and r["cell"]["fault"] == fault]
        sizes: dict[str, int] = {}
        for r in rows:
            sizes[r["cell"]["template"]] = sizes.get(r["cell"]["template"], 0) + 1
        return [(r["cell"]["template"], f"{r['cell']['template']}#{r['cell']['instance']}",
                 1 / sizes[r["cell"]["template"]], value(r, field)) for r in rows]

    a, b = arm(mode), arm("none")
    mean = [sum(w * y for _, _, w, y in side) / sum(w for _, _, w, _ in side) for side in (a, b)]
    totals = [sum(w for _, _, w, _ in side) for side in (a, b)]
    u: dict[str, float] = {}
    for sign, side, m, total in ((1, a, mean[0], totals[0]), (-1, b, mean[1], totals[1])):
        for _, world, w, y in side:
            u[world] = u.get(world, 0.0) + sign * w * (y - m) / total
    k = len(u)
    se = math.sqrt(k / (k - 1) * sum(x * x for x in u.values()))
    half = student.ppf(0.975, k - 1) * se
    diff = mean[0] - mean[1]
    return diff, diff - half, diff + half


def value(record: dict, field: str) -> float:
    return float(record["runtime"]["wall_s"] if field == "wall_s" else record["outcome"][field])


def load_records(run: Path) -> list[dict]:
    lines = (run / "episodes.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


@pytest.mark.parametrize("field", ["tool_calls", "model_turns", "agent_time_s", "wall_s"])
def test_each_difference_and_interval_is_the_hand_count(capsys, run: Path, field: str) -> None:
    from limbo.analysis.fault_cost import QUANTITIES

    header = {column: head for column, head, _ in QUANTITIES}[field]
    found = table(capsys, str(run))
    records = load_records(run)
    for model in ("policy/blind", "policy/verify"):
        for mode in ("timeout_post", "timeout_late"):
            row = found[(model, mode, header)]
            diff, lo, hi = by_hand(records, model, mode, field)
            assert float(row["value"]) == pytest.approx(diff, abs=1e-9)
            assert float(row["lo"]) == pytest.approx(lo, abs=1e-9)
            assert float(row["hi"]) == pytest.approx(hi, abs=1e-9)
            assert row["clusters"] == "6.0"


def test_the_late_commit_costs_the_verifying_policy_its_wait(capsys, run: Path) -> None:
    """What the table is for: the verifying policy reads back after a lost acknowledgement,
    and after a late commit it reads, finds nothing and writes again — more calls and time."""
    found = table(capsys, str(run))
    post = float(found[("policy/verify", "timeout_post", "tool calls")]["value"])
    late = float(found[("policy/verify", "timeout_late", "tool calls")]["value"])
    assert post > 0 and late >= post
    assert float(found[("policy/verify", "none", "tool calls")]["value"]) > 0
    assert found[("policy/verify", "none", "tool calls")]["shown"].count("(") == 0


def test_a_world_file_and_a_loose_record_file_are_runs_too(capsys, tmp_path: Path,
                                                           run: Path) -> None:
    from limbo.cli import main

    shop = tmp_path / "shop"
    assert main(["run", "--world", str(ROOT / "examples" / "worlds" / "shop.toml"), "--model",
                 "policy/verify", "--fault", "none", "--fault", "timeout_post", "--instances",
                 "2", "--out", str(shop), "--quiet"]) == 0
    found = table(capsys, str(shop))
    assert ("all", "timeout_post", "tool calls") in found
    loose = tmp_path / "elsewhere.jsonl"
    loose.write_bytes((run / "episodes.jsonl").read_bytes())
    assert table(capsys, str(loose)) == table(capsys, str(run))


def test_unpriced_episodes_leave_the_dollars_out_and_are_counted(capsys, tmp_path: Path,
                                                                 run: Path) -> None:
    records = load_records(run)
    for record in records:
        if record["cell"]["model"] == "policy/blind":
            record["outcome"]["cost_usd"] = None
    edited = tmp_path / "edited"
    edited.mkdir()
    (edited / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    done = cli(capsys, "tables", str(edited), "--table", "15")
    assert done.code == 0
    blind = [r for r in done.out.splitlines() if r.startswith("| policy/blind | timeout_post")]
    assert blind and blind[0].split(" | ")[7] == "—"
    assert f"({sum(r['cell']['model'] == 'policy/blind' for r in records)} without)" in done.out


def test_a_record_without_a_wall_time_leaves_only_that_cell_empty(capsys, tmp_path: Path,
                                                                     run: Path) -> None:
    """The wall time is read from each record's runtime as the records load: a record whose
    runtime has no ``wall_s`` has none, and one written by hand with ``runtime`` first is read
    as it says."""
    lines = []
    for record in load_records(run):
        if record["cell"]["model"] == "policy/blind":
            del record["runtime"]["wall_s"]
        else:
            record = {"runtime": record.pop("runtime"), **record}
        lines.append(json.dumps(record) + "\n")
    edited = tmp_path / "edited"
    edited.mkdir()
    (edited / "episodes.jsonl").write_text("".join(lines))
    found, plain = table(capsys, str(edited)), table(capsys, str(run))
    blind = ("policy/blind", "timeout_post")
    assert found[(*blind, "wall time (s)")]["shown"] == "—"
    assert found[(*blind, "tool calls")] == plain[(*blind, "tool calls")]
    verify = ("policy/verify", "timeout_post", "wall time (s)")
    assert found[verify]["value"] == plain[verify]["value"] != ""


def test_without_a_fault_free_arm_there_is_no_difference(capsys, tmp_path: Path) -> None:
    from limbo.cli import main

    out = tmp_path / "faults"
    assert main(["run", "--model", "policy/verify", "--template", "charge_invoice", "--fault",
                 "timeout_post", "--instances", "2", "--out", str(out), "--quiet"]) == 0
    found = table(capsys, str(out))
    row = found[("all", "timeout_post", "tool calls")]
    assert "(" not in row["shown"] and float(row["value"]) > 0


def test_limbo_proxy_runs_are_priced_too(capsys, tmp_path: Path) -> None:
    """Two ``limbo proxy`` episodes in front of a real MCP server (SQLite orders), one without
    a fault and one with a lost acknowledgement, each its own run: a client that re-issues on
    any failure pays one more call for the fault. One world: no interval, and the table says
    the difference without one."""
    from support.proxy_runs import Agent, run_stdio

    async def blind(agent: Agent) -> None:
        ok, _ = await agent.call("create_order", agent.order())
        if not ok:
            await agent.call("create_order", agent.order())
        await agent.finish()

    runs = []
    for fault in ("none", "timeout_post"):
        (tmp_path / fault).mkdir()
        runs.append(run_stdio(tmp_path / fault, fault, blind).out)
    found = table(capsys, *map(str, runs))
    model = next(key[0] for key in found)
    row = found[(model, "timeout_post", "tool calls")]
    assert float(row["value"]) == 1.0 and row["lo"] == "" and row["shown"].endswith("(+1.0)")
    assert found[(model, "none", "tool calls")]["shown"] == "1.0"  # the proxy counts no finish


def test_limbo_mcp_runs_are_priced_too(capsys, tmp_path: Path) -> None:
    """Two ``limbo mcp`` episodes served to the ``mcp`` SDK's own client over stdio, one without
    a fault and one with a lost acknowledgement, into one run: the client re-issues the charge
    on the error and pays one more tool call for the fault. One world: no interval."""
    for fault in ("none", "timeout_post"):
        mcp_episode(tmp_path / "mcp", fault)
    found = table(capsys, str(tmp_path / "mcp"))
    model = next(key[0] for key in found)
    row = found[(model, "timeout_post", "tool calls")]
    assert float(row["value"]) == 1.0 and row["lo"] == "" and row["shown"].endswith("(+1.0)")
    assert found[(model, "none", "tool calls")]["shown"] == "1.0"  # the charge (finish is not one)
