"""What a run says before it starts and when nothing can run: the plan line for episodes that
drive real harness processes or call real models, ``--dry-run`` per harness, a grid whose every
cell is dropped; and what it says about cost when a model has no price."""

from __future__ import annotations

import json

from support.hostile import cli, records, refused, untouched, write_plugin

PLUGIN = '''
from limbo.episode.models import ModelAdapter, ModelTurn, ToolCall, model_adapter
from limbo.log.records import Usage
from limbo.episode.harness import harness
from limbo.harnesses.minimal import MinimalHarness


@harness("{name}-cli")
class SlowCli(MinimalHarness):
    """A harness that stands for a real CLI process."""

    median_wall_s = 12.0


@harness("{name}-gone")
class GoneCli(SlowCli):
    """A real CLI this machine does not have."""

    @classmethod
    def availability(cls):
        return False, "not installed here"


@harness("{name}-absent")
class Absent(MinimalHarness):
    """A harness this machine cannot run."""

    @classmethod
    def availability(cls):
        return False, "not installed here (try: make absent)"


@model_adapter("{name}")
class Counted(ModelAdapter):
    """Reports tokens; says nothing of their cost unless it is the priced model."""

    async def generate(self, messages, tools, ctx):
        finish = ToolCall(id="f", name="finish", arguments={
            "status": "failed", "summary": "nothing done", "uncertain_actions": []})
        return ModelTurn(tool_calls=[finish], usage=Usage(input_tokens=1000, output_tokens=10))

    @classmethod
    def price_per_mtok(cls, model, params):
        return {"input": 2.0, "output": 8.0} if model == "priced" else None
'''
ONE = ["--template", "charge_invoice", "--fault", "none", "--contract", "native"]
POLICY = ["--model", "policy/verify"]


def _plugin(tmp_path, name: str) -> str:
    return str(write_plugin(tmp_path, name, PLUGIN.replace("{name}", name)))


def test_the_plan_line_counts_real_processes_and_real_models(capsys, tmp_path) -> None:
    plugin = _plugin(tmp_path, "plana")
    result = cli(capsys, "run", "--plugin", plugin, "--harness", "plana-cli", "--harness",
                 "minimal", "--model", "plana/x", "--model", "policy/verify", *ONE,
                 "--concurrency", "2", "--out", str(tmp_path / "run"), "--quiet")
    assert result.code == 0, result.err
    plan = next(line for line in result.out.splitlines() if line.startswith("plan: "))
    # 8 cells: 2 focal writes x 2 harnesses x 2 models; 6 of them real (not policy x minimal):
    # 4 x 12 s of harness, 4 x 6 x 3 s of model calls, over 2 at once = 60 s
    assert plan == ("plan: of the 8 episodes to run, 4 drive real harness processes (plana-cli "
                    "4 × ~12 s; measured medians) and 4 call real models (~6 calls each, ~3 s a "
                    "call assumed): about 60 s of wall time at 2 episodes at once "
                    "(--concurrency × --workers)")
    again = cli(capsys, "run", "--plugin", plugin, "--harness", "plana-cli", "--harness",
                "minimal", "--model", "plana/x", "--model", "policy/verify", *ONE, "--out",
                str(tmp_path / "run"), "--quiet")
    assert not any(line.startswith("plan: ") for line in again.out.splitlines())  # all done


def test_a_reference_grid_prints_no_plan_line(capsys, tmp_path) -> None:
    result = cli(capsys, "run", *ONE, "--out", str(tmp_path / "run"), "--quiet")
    assert result.code == 0 and "plan: " not in result.out


def test_a_dry_run_prints_each_real_harness(capsys, tmp_path) -> None:
    plugin = _plugin(tmp_path, "planb")
    result = cli(capsys, "run", "--plugin", plugin, "--harness", "planb-cli", *POLICY, *ONE,
                 "--dry-run")
    assert result.code == 0, result.err
    assert ("  harness planb-cli: 2 episodes × ~12 s (measured median of the pinned version) "
            "≈ 24 s one at a time") in result.out.splitlines()
    assert "policy/verify: 2 episodes, no model calls (runs offline)" in result.out


def test_a_grid_whose_every_cell_is_dropped_is_refused(capsys, tmp_path) -> None:
    plugin = _plugin(tmp_path, "planc")
    out = tmp_path / "run"
    line = refused(cli(capsys, "run", "--plugin", plugin, "--harness", "planc-absent",
                       *POLICY, *ONE, "--out", str(out)),
                   "every cell was dropped, so nothing can run")
    assert "2 cells: harness planc-absent is not available here: not installed here" in line
    untouched(out)


def test_an_unpriced_model_costs_unknown_and_a_budget_refuses_it(capsys, tmp_path) -> None:
    plugin = _plugin(tmp_path, "pland")
    out = tmp_path / "run"
    done = cli(capsys, "run", "--plugin", plugin, "--model", "pland/x", "--model",
               "pland/priced", *ONE, "--out", str(out), "--quiet")
    assert done.code == 0, done.err
    costs = {r["cell"]["model"]: r["outcome"]["cost_usd"] for r in records(out)}
    assert costs == {"pland/x": None, "pland/priced": (1000 * 2.0 + 10 * 8.0) / 1e6}
    assert "+ unknown for 2 episodes without a known price" in done.out
    budget = ["--plugin", plugin, "--model", "pland/x", *ONE, "--max-cost", "1"]
    refused(cli(capsys, "run", *budget, "--out", str(tmp_path / "b")),
            "--max-cost: no price known for pland/x")
    allowed = cli(capsys, "run", *budget, "--allow-unpriced", "--out", str(tmp_path / "b"),
                  "--quiet")
    assert allowed.code == 0, allowed.err
    assert "note: --max-cost: pland/x has no known price; --allow-unpriced runs it" in allowed.out
    assert json.loads((tmp_path / "b" / "manifest.json").read_text())["status"] == "complete"
    refused(cli(capsys, "run", *ONE, "--allow-unpriced"), "--allow-unpriced only makes sense")


def test_a_real_harness_that_cannot_run_here_asks_for_no_count(capsys, tmp_path) -> None:
    """Its cells are dropped as the grid expands, so none of the run is real: ``limbo run``
    does not pass over the cells once more to count real ones (the paper grid without the
    production harnesses installed: a second of its start), and prints no plan line."""
    from limbo.base.registry import load_plugin
    from limbo.commands.run_plan import may_be_real

    plugin = _plugin(tmp_path, "plane")
    load_plugin(plugin)
    assert not may_be_real({"harnesses": ["plane-gone", "minimal"], "models": ["policy/verify"]})
    assert may_be_real({"harnesses": ["plane-gone", "plane-cli"], "models": ["policy/verify"]})
    result = cli(capsys, "run", "--plugin", plugin, "--harness", "plane-gone", "--harness",
                 "minimal", *POLICY, *ONE, "--out", str(tmp_path / "run"), "--quiet")
    assert result.code == 0, result.err
    assert "plan: " not in result.out and "harness plane-gone is not available here" in result.out


def test_the_cells_of_a_harness_that_cannot_run_are_counted_as_if_built(capsys, tmp_path) -> None:
    """They are counted by the block, not built one by one: as many as the same grid has with
    a harness that runs (replicates and faults that cannot act included), and in the manifest
    in the order a pass over every combination meets them."""
    plugin = _plugin(tmp_path, "planf")
    grid = [*POLICY, "--template", "charge_invoice", "--fault", "none", "--fault",
            "partial_batch", "--contract", "native", "--repeats", "2", "--quiet"]
    result = cli(capsys, "run", "--plugin", plugin, "--harness", "planf-gone", "--harness",
                 "minimal", *grid, "--out", str(tmp_path / "run"))
    assert result.code == 0, result.err
    said = [line for line in result.out.splitlines() if line.startswith("dropped ")]
    assert said[0] == "dropped 8 cells: harness planf-gone is not available here: not installed here"
    assert said[1:] == ["dropped 4 cells: partial_batch cannot act on a focal write that is not a "
                        "batch write"]
    assert "ran 4 episodes" in result.out
    dropped = json.loads((tmp_path / "run" / "manifest.json").read_text())["dropped"]
    assert list(dropped.values()) == [8, 4] and next(iter(dropped)).startswith("harness planf")
