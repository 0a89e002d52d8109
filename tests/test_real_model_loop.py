"""The loop of a real-model run against a local OpenAI-compatible server (``support.bad_server``,
reached through the real SDK), defect by defect as a new user met them:

- a server failing every call was retried cell after cell until the grid ran out: the run now
  stops once the last episodes all failed the same way, says why in one line, and names the
  cells left for ``--retry-errors``;
- the response cache replayed a broken server's answers into every cell sharing a prefix: a
  reply that reports a failure is a failure, never a turn, never cached; the cache is keyed by
  the endpoint too; and the summary line says how many responses came from it;
- a chat-only server passed the preflight, then failed with a bare 404: the preflight asks the
  Responses route and says to add ``api=chat``;
- a ``--max-cost`` stop exited 0 with cells missing: it exits 3;
- the plan line after ``--retry-errors`` counted every cell: it counts the cells left, and
  counts are in the singular when they are 1."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from support.bad_server import BadServer, Reply, acting
from support.hostile import cli, records, untouched

from limbo.run.breaker import STREAK, Breaker, cause_of

BOOM = Reply(500, b'{"error": {"message": "upstream exploded", "type": "server_error"}}')
GRID = ["e1", "--template", "charge_invoice", "--instances", "1", "--quiet"]
CELLS = 24


def _model(server: BadServer, extra: str = "") -> str:
    return f"openai/m?api=chat&base_url={server.url}&max_attempts=1{extra}"


def _broken_first(n: int, then: Callable[[bytes], Reply]) -> Callable[[bytes], Reply]:
    """A server that answers its first ``n`` requests with status 200 and a reply saying the
    generation failed — with text in it, as proxies and routers do — then recovers."""
    seen = [0]

    def respond(body: bytes) -> Reply:
        seen[0] += 1
        if seen[0] > n:
            return then(body)
        return Reply(body=json.dumps({
            "id": "x", "object": "chat.completion", "choices": [{
                "index": 0, "finish_reason": "error",
                "message": {"role": "assistant", "content": "upstream error, try again"},
                "error": {"code": 502, "message": "upstream connect error"}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 3}}).encode())

    return respond


def test_a_server_failing_every_call_stops_the_run_early(capsys, tmp_path: Path) -> None:
    out = tmp_path / "run"
    with BadServer(BOOM) as server:
        args = ["run", *GRID, "--no-cache", "--model", _model(server), "--out", str(out)]
        first = cli(capsys, *args)
        assert first.code == 1, first.err
        assert len(server.requests) == STREAK  # not one per cell: 24
        stop = [line for line in first.out.splitlines() if line.startswith("stopped early:")]
        assert len(stop) == 1, first.out
        assert (f"the last {STREAK} episodes of openai/m ended in model_error with the same "
                f"cause: "
                f"openai/m: gave up after 1 attempt; last error: InternalServerError: HTTP 500"
                in stop[0]) and "upstream exploded" in stop[0]
        assert f"left: {STREAK} errored cells and {CELLS - STREAK} cells not run" in stop[0]
        assert stop[0].endswith("--retry-errors") and "--template charge_invoice" in stop[0]
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["status"] == "stopped" and "HTTP 500" in manifest["stop_reason"]
        assert len(records(out)) == STREAK

        server.respond = acting()  # the cause is fixed
        again = cli(capsys, *args, "--retry-errors")
    assert again.code == 0, again.out
    got = records(out)
    assert len(got) == CELLS and {r["outcome"]["termination"] for r in got} == {"finished"}


def test_forked_workers_stop_too(capsys, tmp_path: Path) -> None:
    """With two worker processes every cell is handed out at once (two chunks each): the
    workers stop starting them once the writer has seen the streak."""
    out = tmp_path / "run"
    with BadServer(BOOM) as server:
        result = cli(capsys, "run", *GRID, "--no-cache", "--model", _model(server), "--out",
                     str(out), "--workers", "2")
        assert result.code == 1 and "stopped early:" in result.out
        assert STREAK <= len(server.requests) < CELLS
    assert json.loads((out / "manifest.json").read_text())["status"] == "stopped"


def test_error_streak_zero_runs_every_cell(capsys, tmp_path: Path) -> None:
    with BadServer(BOOM) as server:
        result = cli(capsys, "run", *GRID, "--no-cache", "--model", _model(server), "--out",
                     str(tmp_path / "run"), "--error-streak", "0")
        assert result.code == 1 and len(server.requests) == CELLS
    assert "stopped early" not in result.out
    assert cli(capsys, "run", *GRID, "--error-streak", "-1").code == 2


def test_the_rule_counts_one_cause_in_a_row_of_provider_episodes() -> None:
    assert cause_of("m: gave up; last error: HTTP 500 (request req_8a1f22c9d0)") == cause_of(
        "m: gave up; last error: HTTP 500 (request req_77c2e01b44)")
    assert cause_of("HTTP 500") != cause_of("HTTP 502")
    breaker = Breaker(3)
    for reason in ("HTTP 500", "HTTP 500", "HTTP 502", "HTTP 502"):  # two causes: 2, then 2
        breaker.see("openai/m", "model_error", reason)
    assert breaker.tripped is None
    breaker.see("openai/m", "finished", None)  # a success in between starts over
    breaker.see("openai/m", "model_error", "HTTP 502")
    breaker.see("policy/verify", "finished", None)  # calls no provider: says nothing
    breaker.see("openai/m", "model_error", "HTTP 502\nmore detail")
    assert breaker.tripped is None
    breaker.see("openai/m", "model_error", "HTTP 502")
    assert breaker.tripped == ("the last 3 episodes of openai/m ended in model_error with the "
                               "same cause: HTTP 502")


def test_one_models_provider_down_is_seen_through_another_models_good_episodes() -> None:
    """Two models' cells interleave: ``openai/down`` fails every call while ``openai/up``
    answers. Each model keeps its own count, so the other's successes in between do not hide
    the streak; a success of the failing model itself still starts its count over."""
    breaker = Breaker(3)
    for _ in range(2):
        breaker.see("openai/down?base_url=http://127.0.0.1:1/v1", "model_error", "HTTP 500")
        breaker.see("openai/up", "finished", None)
    breaker.see("openai/down?base_url=http://127.0.0.1:1/v1", "finished", None)
    assert breaker.tripped is None
    for _ in range(3):
        assert breaker.tripped is None
        breaker.see("openai/down?base_url=http://127.0.0.1:1/v1", "model_error", "HTTP 500")
        breaker.see("openai/up", "finished", None)
    assert breaker.tripped == ("the last 3 episodes of openai/down ended in model_error with "
                               "the same cause: HTTP 500")


def test_a_reply_reporting_a_failure_is_never_cached_nor_replayed(capsys, tmp_path) -> None:
    """The first answers of the server are 200s that say the generation failed. They used to
    become the agent's final words, go into the cache, and be replayed into every cell sharing
    the conversation's start, so those cells never reached their fault. Now they are failures
    (the cells err, the run stops early), nothing of them is cached, and once the server
    recovers the records are those of a server that never broke."""
    cache = ["--cache-dir", str(tmp_path / "cache")]
    with BadServer() as server:
        server.respond = _broken_first(STREAK, acting())
        args = ["run", *GRID, *cache, "--model", _model(server), "--out", str(tmp_path / "a")]
        assert cli(capsys, *args).code == 1
        assert cli(capsys, *args, "--retry-errors").code == 0
    with BadServer() as clean:
        clean.respond = acting()
        fresh = cli(capsys, "run", *GRID, "--no-cache", "--model", _model(clean), "--out",
                    str(tmp_path / "b"))
        assert fresh.code == 0
    broken, good = records(tmp_path / "a"), records(tmp_path / "b")
    assert "upstream error" not in json.dumps(broken)
    assert [r["outcome"]["fault_fired"] for r in broken] == [
        r["outcome"]["fault_fired"] for r in good]
    assert broken == good


def test_the_cache_says_what_it_answered_and_knows_the_endpoint(capsys, tmp_path, monkeypatch
                                                                ) -> None:
    """The same model name at two endpoints (here chosen by ``$OPENAI_BASE_URL``, which the
    model string does not show) is two models to the cache; a re-run against the same endpoint
    is answered from it, and the summary line says so."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
    cache = ["--cache-dir", str(tmp_path / "cache")]
    grid = [*GRID, "--fault", "none"]
    with BadServer() as first, BadServer() as second:
        first.respond = acting()
        second.respond = _finish_only
        monkeypatch.setenv("OPENAI_BASE_URL", first.url)
        one = cli(capsys, "run", *grid, *cache, "--model", "openai/m?api=chat", "--out",
                  str(tmp_path / "one"))
        assert one.code == 0 and len(first.requests) == 4  # two cells of two turns each
        assert "4 model responses (0 from the response cache)" in one.out
        again = cli(capsys, "run", *grid, *cache, "--model", "openai/m?api=chat", "--out",
                    str(tmp_path / "again"))
        assert again.code == 0 and len(first.requests) == 4
        assert "4 model responses (4 from the response cache)" in again.out
        monkeypatch.setenv("OPENAI_BASE_URL", second.url)
        other = cli(capsys, "run", *grid, *cache, "--model", "openai/m?api=chat", "--out",
                    str(tmp_path / "other"))
        assert other.code == 0 and len(second.requests) == 2
        assert "2 model responses (0 from the response cache)" in other.out
    assert records(tmp_path / "again") == records(tmp_path / "one")
    assert records(tmp_path / "other") != records(tmp_path / "one")
    calls = [r["runtime"]["model_calls"] for r in records(tmp_path / "again", runtime=True)]
    assert calls == [{"responses": 0, "cached": 2, "attempts": 0, "billed_usd": 0.0}] * 2


def _finish_only(body: bytes) -> Reply:
    finish = {"name": "finish", "arguments": json.dumps({
        "status": "failed", "summary": "did nothing", "uncertain_actions": []})}
    return Reply(body=json.dumps({"choices": [{"index": 0, "finish_reason": "tool_calls",
                                               "message": {"role": "assistant", "tool_calls": [
                                                   {"id": "f", "type": "function",
                                                    "function": finish}]}}],
                                  "usage": {"prompt_tokens": 10, "completion_tokens": 5}}
                                 ).encode())


def _chat_only(body: bytes) -> Reply:
    """A server with Chat Completions only: a Responses request (``input``, no ``messages``)
    meets its framework's 404."""
    if "messages" not in json.loads(body):
        return Reply(404, b'{"detail": "Not Found"}')
    return acting()(body)


def test_a_chat_only_server_is_told_apart_by_the_preflight(capsys, tmp_path: Path) -> None:
    out = tmp_path / "run"
    with BadServer(models=["m"]) as server:
        server.respond = _chat_only
        result = cli(capsys, "run", *GRID, "--no-cache", "--model",
                     f"openai/m?base_url={server.url}", "--out", str(out))
        assert result.code == 2 and len(result.lines) == 1, result.out + result.err
        assert "knows the model but not the route it is asked on" in result.err
        assert "add api=chat to the model" in result.err
        untouched(out)
        assert cli(capsys, "run", *GRID, "--no-cache", "--model", _model(server), "--out",
                   str(out)).code == 0


def test_a_budget_stop_has_its_own_exit_status_and_the_docs_agree(capsys, tmp_path) -> None:
    prices = tmp_path / "prices.toml"
    prices.write_text('["openai/m"]\ninput = 100000.0\noutput = 100000.0\n')  # $1 a call
    out = tmp_path / "run"
    with BadServer() as server:
        server.respond = acting()
        args = ["run", *GRID, "--no-cache", "--model", _model(server), "--out", str(out),
                "--prices", str(prices), "--max-cost", "4.5"]
        stopped = cli(capsys, *args)
        assert stopped.code == 3, stopped.out
        assert json.loads((out / "manifest.json").read_text())["status"] == "stopped"
        assert 0 < len(records(out)) < CELLS
    readme = Path(__file__).parent.parent.joinpath("README.md").read_text()
    runs = Path(__file__).parent.parent.joinpath("docs", "runs.md").read_text()
    said = re.search(r"`--max-cost USD` (.+?)\n\n", readme, re.S)
    assert said is not None
    sentence = " ".join(said.group(1).split())
    assert "stops cleanly before the budget would be exceeded" not in sentence
    for claim in ("at the mean cost per episode ended so far", "in flight",
                  "exits 3", "re-running the same command"):
        assert claim in sentence, claim
        assert claim in " ".join(runs.split()), claim


def test_turns_replayed_from_the_cache_spend_no_budget(capsys, tmp_path) -> None:
    """``--max-cost`` counts what the provider bills: a second run answered wholly from the
    response cache bills nothing, so a budget smaller than the first run's cost stops it not,
    while the records still carry the turns' prices."""
    prices = tmp_path / "prices.toml"
    prices.write_text('["openai/m"]\ninput = 100000.0\noutput = 100000.0\n')  # $1 a call
    cache = ["--cache-dir", str(tmp_path / "cache"), "--prices", str(prices)]
    with BadServer() as server:
        server.respond = acting()
        args = ["run", *GRID, "--fault", "none", *cache, "--model", _model(server)]
        assert cli(capsys, *args, "--out", str(tmp_path / "one")).code == 0
        asked = len(server.requests)
        again = cli(capsys, *args, "--out", str(tmp_path / "two"), "--max-cost", "1.5")
        assert again.code == 0, again.out + again.err
        assert len(server.requests) == asked  # every turn from the cache
    two = records(tmp_path / "two")
    assert two == records(tmp_path / "one") and all(r["outcome"]["cost_usd"] >= 1 for r in two)
    manifest = json.loads((tmp_path / "two" / "manifest.json").read_text())
    assert manifest["status"] == "complete"


def test_the_plan_line_counts_the_cells_left_after_retry_errors(capsys, tmp_path) -> None:
    out = tmp_path / "run"
    with BadServer() as server:
        good = acting()
        server.respond = lambda body: None if not server.requests[:-1] else good(body)
        server.script = [BOOM]  # the first call fails: one cell errs, 23 finish
        args = ["run", *GRID, "--no-cache", "--model", _model(server), "--out", str(out)]
        first = cli(capsys, *args)
        assert first.code == 1 and "1 episode ended in infra_error or model_error" in first.out
        retried = cli(capsys, *args, "--retry-errors")
    assert retried.code == 0
    plan = next(line for line in retried.out.splitlines() if line.startswith("plan: "))
    assert plan.startswith("plan: of the 1 episode to run, 1 calls real models"), plan
    assert "ran 1 episode (1 errored cell set aside and run again), 23 already done" \
        in retried.out


@pytest.mark.parametrize(("n", "text"), [(0, "0 cells"), (1, "1 cell"), (2, "2 cells"),
                                         (70400, "70,400 cells")])
def test_counts_in_messages_agree_with_their_number(n: int, text: str) -> None:
    from limbo.base.words import plural

    assert plural(n, "cell") == text
