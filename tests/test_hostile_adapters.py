"""Misbehaving adapters: whatever an adapter raises, returns, reports or fails to do, its episode
ends in a strict, valid UTF-8 record — ``infra_error`` naming the adapter, ``model_error`` for a
model that said nothing, ``timeout`` for one that never answers — and the grid goes on."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from support.cells import cell_for
from support.hostile import cli, records, write_plugin
from support.model_servers import OnPolicy

from limbo.episode.models import ModelAdapter, ModelTurn, ToolCall
from limbo.episode.run_one import run_episode
from limbo.log.records import Usage
from limbo.log.store import encode

CELL = cell_for("charge_invoice")


class ActsAt(OnPolicy):
    """The reference policy ``verify``, except that turn ``at`` does ``act()`` instead."""

    provider = "acts-at"

    def __init__(self, act: Any, at: int = 1) -> None:
        super().__init__("bad")
        self.act, self.at, self.turn = act, at, 0

    async def generate(self, messages, tools, ctx):
        self.turn += 1
        if self.turn == self.at:
            value = self.act()
            return await value if asyncio.iscoroutine(value) else value
        return await self.policy.generate(messages, tools, ctx)


def _raise(exc: BaseException):
    def act():
        raise exc
    return act


def _strict(record: dict[str, Any]) -> dict[str, Any]:
    """The record as it would be written: strict JSON, valid UTF-8."""
    return json.loads(encode(record).decode("utf-8"))


def _turn(**fields: Any) -> Any:
    """A turn built without validation, as a careless adapter might."""
    return lambda: ModelTurn.model_construct(**{"text": None, "tool_calls": [], "usage": Usage(),
                                               **fields})


def _usage(**fields: Any) -> Any:
    return lambda: ModelTurn(text="x").model_copy(update={"usage": Usage.model_construct(
        **{"input_tokens": 1, "output_tokens": 1, "cached_input_tokens": 0, "cost_usd": 0.0,
           **fields})})


async def _forever() -> ModelTurn:
    await asyncio.Event().wait()
    raise AssertionError("unreachable")


INFRA = [
    ("ValueError", _raise(ValueError("boom")), "adapter acts-at/bad raised ValueError: boom @ "),
    ("SystemExit", _raise(SystemExit(3)), "adapter acts-at/bad raised SystemExit: 3"),
    ("CancelledError", _raise(asyncio.CancelledError()), "raised CancelledError"),
    ("GeneratorExit", _raise(GeneratorExit()), "raised GeneratorExit"),
    ("its own TimeoutError", _raise(TimeoutError("slow")), "raised TimeoutError: slow"),
    ("KeyError", _raise(KeyError("k")), "raised KeyError: 'k'"),
    ("MemoryError", _raise(MemoryError()), "raised MemoryError"),
    ("RecursionError", _raise(RecursionError("deep")), "raised RecursionError: deep"),
    ("NotImplementedError", _raise(NotImplementedError()), "raised NotImplementedError"),
    ("returns None", lambda: None, "adapter acts-at/bad returned a NoneType, not a ModelTurn"),
    ("returns a dict", lambda: {"text": "hi"}, "returned a dict, not a ModelTurn"),
    ("returns a string", lambda: "finish", "returned a str, not a ModelTurn"),
    ("returns a list", lambda: [ModelTurn(text="x")], "returned a list, not a ModelTurn"),
    ("text not a string", _turn(text=5), "returned text of type int"),
    ("calls not ToolCalls", _turn(tool_calls=[{"name": "x"}]), "tool_calls that are not ToolCalls"),
    ("negative tokens", _usage(input_tokens=-5), "reported input_tokens=-5; token counts must be"),
    ("fractional tokens", _usage(output_tokens=1.5), "reported output_tokens=1.5"),
    ("boolean tokens", _usage(cached_input_tokens=True), "reported cached_input_tokens=True"),
    ("nan cost", _usage(cost_usd=float("nan")), "reported cost_usd=nan; a cost must be a finite"),
    ("infinite cost", _usage(cost_usd=float("inf")), "reported cost_usd=inf"),
    ("negative cost", _usage(cost_usd=-0.5), "reported cost_usd=-0.5"),
    ("usage not Usage", _turn(text="x", usage={"input_tokens": 1}), "returned usage of type dict"),
    ("invalid Usage", lambda: ModelTurn(text="x", usage=Usage(input_tokens=-1)),
     "raised ValidationError"),
]


@pytest.mark.parametrize(("label", "act", "needle"), INFRA, ids=[c[0] for c in INFRA])
@pytest.mark.parametrize("at", [1, 3])
def test_an_adapter_failure_is_an_infra_error_naming_the_adapter(label, act, needle,
                                                                 at: int) -> None:
    record = _strict(run_episode(CELL, ActsAt(act, at)))
    out = record["outcome"]
    assert out["termination"] == "infra_error", out
    assert needle in out["termination_reason"]
    assert out["model_turns"] == at
    assert out["cost_usd"] is None or out["cost_usd"] >= 0


@pytest.mark.parametrize("turn", [ModelTurn(), ModelTurn(text=""), ModelTurn(text=" \n\t ")],
                         ids=["nothing", "empty text", "blank text"])
def test_an_empty_turn_is_a_model_error_not_the_agent_finishing(turn: ModelTurn) -> None:
    out = run_episode(CELL, ActsAt(lambda: turn, at=2))["outcome"]
    assert out["termination"] == "model_error"
    assert "returned an empty turn (no text and no tool calls)" in out["termination_reason"]


LONE = "\udc80"
SURROGATES = [
    ("text", lambda: ModelTurn(text=f"I am done {LONE}"), "I am done \ufffd"),
    ("pair split in two", lambda: ModelTurn(text="smile \ud83d\ude00"), "smile \U0001F600"),
    ("tool name", lambda: ModelTurn(tool_calls=[ToolCall(id="c", name=f"bill{LONE}")]),
     "bill\ufffd"),
    ("call id", lambda: ModelTurn(tool_calls=[ToolCall(id=f"c{LONE}", name="wait",
                                                       arguments={"seconds": 1})]), "c\ufffd"),
    ("argument value", lambda: ModelTurn(tool_calls=[ToolCall(
        id="c", name="tickets_add_comment", arguments={"ticket_id": "T1", "body": f"x{LONE}"})]),
     "x\ufffd"),
    ("argument key", lambda: ModelTurn(tool_calls=[ToolCall(
        id="c", name="wait", arguments={f"sec{LONE}": 1})]), "sec\ufffd"),
    ("nested argument", lambda: ModelTurn(tool_calls=[ToolCall(
        id="c", name="data_insert", arguments={"table": "t", "row": {"v": [f"a{LONE}"]}})]),
     "a\ufffd"),
    ("argument text", lambda: ModelTurn(tool_calls=[ToolCall(
        id="c", name="wait", arguments=f'{{"seconds": "{LONE}"}}')]), "\ufffd"),
]


@pytest.mark.parametrize(("label", "act", "needle"), SURROGATES, ids=[c[0] for c in SURROGATES])
def test_lone_surrogates_from_a_model_are_sanitised_and_the_record_is_utf8(label, act,
                                                                           needle: str) -> None:
    record = run_episode(CELL, ActsAt(act, at=1))
    line = encode(record)  # raises if the record is not strict JSON in valid UTF-8
    assert needle in line.decode("utf-8")
    assert record["outcome"]["termination"] == "finished"


class Closing(ActsAt):
    """The policy, with an ``aclose`` that misbehaves."""

    def __init__(self, close: Any, first: Any = None) -> None:
        super().__init__(first or (lambda: None), at=0 if first is None else 1)
        self.close_act = close

    async def aclose(self) -> None:
        value = self.close_act()
        if asyncio.iscoroutine(value):
            await value


@pytest.mark.parametrize(("act", "needle"), [
    (_raise(RuntimeError("leak")), "adapter acts-at/bad: aclose() raised RuntimeError: leak"),
    (_raise(SystemExit(1)), "aclose() raised SystemExit: 1"),
    (_raise(asyncio.CancelledError()), "aclose() raised CancelledError"),
    (_forever, "aclose() did not return within 0.2s"),
], ids=["raises", "SystemExit", "CancelledError", "hangs"])
def test_a_failing_aclose_ends_the_episode_as_infra_error(monkeypatch, act, needle: str) -> None:
    monkeypatch.setattr("limbo.episode.isolation.ACLOSE_TIMEOUT_S", 0.2)
    out = run_episode(CELL, Closing(act))["outcome"]
    assert out["termination"] == "infra_error" and needle in out["termination_reason"]


def test_a_failing_aclose_keeps_an_earlier_failure() -> None:
    out = run_episode(CELL, Closing(_raise(RuntimeError("close")), _raise(ValueError("gen"))))
    assert "raised ValueError: gen" in out["outcome"]["termination_reason"]


def test_an_adapter_that_never_answers_ends_at_the_episode_timeout() -> None:
    out = run_episode(CELL, ActsAt(_forever, at=3), timeout=0.3)["outcome"]
    assert out["termination"] == "timeout"
    assert out["termination_reason"] == "the episode ran past --episode-timeout 0.3s (wall clock)"
    assert out["model_turns"] == 3


def test_a_synchronous_generate_is_an_infra_error() -> None:
    class Sync(ModelAdapter):
        provider = "sync"

        def generate(self, messages, tools, ctx):  # type: ignore[override]
            return ModelTurn(text="done")

    out = run_episode(CELL, Sync("x"))["outcome"]
    assert out["termination"] == "infra_error" and "adapter sync/x raised TypeError" in \
        out["termination_reason"]


# ------------------------------------------------------------------ through the CLI


ADAPTERS = '''
import asyncio, os
from limbo.episode.models import ModelTurn, model_adapter
from limbo.harnesses.policies import PolicyAdapter


@model_adapter("{name}")
class Misbehaving(PolicyAdapter):
    hung = False

    def __init__(self, model, **params):
        super().__init__("verify", **params)
        self.mode = model

    async def generate(self, messages, tools, ctx):
        if self.key().vars["instance"] == 0 and ctx.contract == "native" and len(messages) > 4:
            if self.mode == "exit":
                raise SystemExit(0)
            if self.mode == "cancel":
                raise asyncio.CancelledError()
            if self.mode == "hang" and not Misbehaving.hung:
                Misbehaving.hung = True  # the first episode to get here, and only that one
                await asyncio.Event().wait()
        return await super().generate(messages, tools, ctx)
'''


@pytest.mark.parametrize("mode", ["exit", "cancel"])
@pytest.mark.parametrize("workers", ["1", "2"])
def test_an_adapter_that_exits_or_cancels_never_stops_the_grid(capsys, tmp_path, mode: str,
                                                                workers: str) -> None:
    name = f"bad{mode}{workers}"
    plugin = write_plugin(tmp_path, name, ADAPTERS.replace("{name}", name))
    args = ["run", "--model", f"{name}/{mode}", "--plugin", str(plugin), "--template",
            "charge_invoice", "--out", str(tmp_path / "out"), "--quiet", "--workers", workers,
            "--instances", "2"]
    first = cli(capsys, *args)
    assert first.code == 1, first.err  # the run went on, and says that errored cells remain
    assert f"× infra_error: adapter {name}/{mode} raised" in first.out
    got = records(tmp_path / "out")
    assert len(got) == 96
    broken = [r for r in got if r["outcome"]["termination"] == "infra_error"]
    assert broken and all(r["cell"]["instance"] == 0 and r["cell"]["contract"] == "native"
                          for r in broken)
    assert all(f"adapter {name}/{mode} raised" in r["outcome"]["termination_reason"]
               for r in broken)
    again = cli(capsys, *args)  # the resume does not crash on the same cells either
    assert again.code == 1 and "ran 0 episodes, 96 already done" in again.out


def test_twelve_cells_at_concurrency_four_with_one_hang_finish_at_the_timeout(capsys,
                                                                             tmp_path) -> None:
    """Must-show 5: one adapter call never returns; the grid ends at the episode timeout with
    11 normal records and one timed out."""
    plugin = write_plugin(tmp_path, "hangs", ADAPTERS.replace("{name}", "hangs"))
    faults = ["none", "timeout_pre", "timeout_post", "http500_pre", "http500_post", "throttle_pre"]
    args = ["run", "--model", "hangs/hang", "--plugin", str(plugin), "--template",
            "charge_invoice", "--contract", "native", "--concurrency", "4", "--episode-timeout",
            "1.5", "--out", str(tmp_path / "out"), "--quiet"]
    for fault in faults:
        args += ["--fault", fault]
    result = cli(capsys, *args)
    assert result.code == 0, result.err
    got = records(tmp_path / "out")
    assert len(got) == 12
    timed_out = [r for r in got if r["outcome"]["termination"] == "timeout"]
    assert len(timed_out) == 1
    assert "ran past --episode-timeout 1.5s" in timed_out[0]["outcome"]["termination_reason"]
    assert all(r["outcome"]["termination"] == "finished" for r in got if r not in timed_out)


CTOR = '''
from limbo.episode.models import model_adapter
from limbo.harnesses.policies import PolicyAdapter


@model_adapter("{name}")
class Fragile(PolicyAdapter):
    made = 0

    def __init__(self, model, **params):
        Fragile.made += 1
        if model == "always" or Fragile.made % 5 == 0:
            raise RuntimeError(f"cannot start (#{Fragile.made})")
        super().__init__("verify", **params)
'''


def test_an_adapter_whose_constructor_raises_before_the_run_is_one_line(capsys, tmp_path) -> None:
    plugin = write_plugin(tmp_path, "ctor1", CTOR.replace("{name}", "ctor1"))
    from support.hostile import refused, untouched

    refused(cli(capsys, "run", "--model", "ctor1/always", "--plugin", str(plugin), "--out",
                str(tmp_path / "out")), "model ctor1/always: the adapter failed before the run: "
                                         "RuntimeError: cannot start")
    untouched(tmp_path / "out")


def test_an_adapter_whose_constructor_raises_during_the_run_records_each(capsys, tmp_path) -> None:
    plugin = write_plugin(tmp_path, "ctor2", CTOR.replace("{name}", "ctor2"))
    result = cli(capsys, "run", "--model", "ctor2/sometimes", "--plugin", str(plugin),
                 "--template", "charge_invoice", "--out", str(tmp_path / "out"), "--quiet")
    assert result.code == 1, result.err  # errored cells remain
    got = records(tmp_path / "out")
    broken = [r for r in got if r["outcome"]["termination"] == "infra_error"]
    assert len(got) == 48 and len(broken) >= 9
    assert all("adapter ctor2/sometimes could not be created: RuntimeError: cannot start"
               in r["outcome"]["termination_reason"] for r in broken)


DIES = '''
import os
from limbo.episode.models import model_adapter
from limbo.harnesses.policies import PolicyAdapter


@model_adapter("dies")
class Dies(PolicyAdapter):
    """Kills its worker process outright (no exception to catch) on some cells."""

    def __init__(self, model, **params):
        super().__init__("verify", **params)

    async def generate(self, messages, tools, ctx):
        in_worker = os.getpid() != int(os.environ["LIMBO_TEST_PARENT"])
        if in_worker and self.key().vars["instance"] == 1 and len(messages) > 4:
            os._exit(9)
        return await super().generate(messages, tools, ctx)
'''


def test_a_worker_that_dies_stops_the_run_in_one_line_keeping_what_finished(
        capsys, tmp_path, monkeypatch) -> None:
    import os

    monkeypatch.setenv("LIMBO_TEST_PARENT", str(os.getpid()))
    plugin = write_plugin(tmp_path, "dies", DIES)
    out = tmp_path / "out"
    result = cli(capsys, "run", "--model", "dies/x", "--plugin", str(plugin), "--template",
                 "charge_invoice", "--instances", "2", "--workers", "2", "--out", str(out),
                 "--quiet")
    from support.hostile import refused

    refused(result, "died (exit code 9); the episodes it had finished are recorded")
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "failed" and "RunAborted" in manifest["stop_reason"]
    kept = records(out)  # strict, no duplicates
    assert manifest["ran"] == len(kept) < 96
    assert all(r["cell"]["instance"] == 0 for r in kept)
