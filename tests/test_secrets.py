"""No secret leaks: with recognisable fake keys in the environment, episodes through both SDKs
(streaming and not, clean and failing, a provider error that echoes the key) leave no trace of
the keys in records, cache files, gateway logs, log output or printed output — while the keys
really were sent to the server."""

from __future__ import annotations

import json
import logging

import pytest
from support.cells import cell_for
from support.model_servers import (
    FAKE_ANTHROPIC_KEY,
    FAKE_OPENAI_KEY,
    IDS,
    SECRET_MARK,
    VARIANTS,
    Bridge,
)
from support.staged import HttpError, StagedThreadedGateway

from limbo.base.errors import UsageError
from limbo.episode.models import make_adapter
from limbo.episode.run_one import run_episode
from limbo.providers.cache import ResponseCache

CELL = cell_for("charge_invoice", "billing_create_charge", fault="timeout_post")


@pytest.fixture(autouse=True)
def keys(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_OPENAI_KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", FAKE_ANTHROPIC_KEY)


def test_no_key_in_records_cache_logs_or_output(tmp_path, caplog, capsys) -> None:
    caplog.set_level(logging.DEBUG)
    seen_headers: list[dict[str, str]] = []
    threaded = StagedThreadedGateway()
    inner = threaded.gateway.handle

    async def spy(req, out):
        seen_headers.append(dict(req.headers))
        await inner(req, out)

    threaded.gateway.handle = spy  # type: ignore[method-assign]
    records, sessions = [], []
    echo = HttpError(400, message=f"bad key {FAKE_OPENAI_KEY} / {FAKE_ANTHROPIC_KEY}")
    with threaded as gw:
        for label, provider, params in VARIANTS:
            # the last fails past the retries with 500s (503s would also pause the call limiter,
            # a second a time in real time)
            injections = ({}, {2: HttpError(500)}, {1: echo},
                          {n: HttpError(500) for n in range(1, 6)})
            for i, inject in enumerate(injections):
                bridge = Bridge(gw, provider, params, inject=inject,
                                cache=ResponseCache(tmp_path / "cache" / f"{label}-{i}"))
                records.append(run_episode(CELL, bridge))
                sessions.append(bridge.session.log)
    terminations = {r["outcome"]["termination"] for r in records}
    assert terminations == {"finished", "model_error"}
    echoed = [r for r in records if "bad key" in (r["outcome"]["termination_reason"] or "")]
    assert len(echoed) == len(VARIANTS) and all("***" in r["outcome"]["termination_reason"]
                                                 for r in echoed)
    sent = json.dumps(seen_headers)
    assert FAKE_OPENAI_KEY in sent and FAKE_ANTHROPIC_KEY in sent  # the keys were really used

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(files) > 10
    leaks = [str(p) for p in files if SECRET_MARK in p.read_text()]
    assert leaks == []
    assert SECRET_MARK not in json.dumps(sessions)
    assert caplog.records and SECRET_MARK not in caplog.text
    out = capsys.readouterr()
    assert SECRET_MARK not in out.out + out.err


@pytest.mark.parametrize(("label", "provider", "params"), VARIANTS[::2], ids=IDS[::2])
def test_keys_never_go_in_the_model_spec(label, provider, params) -> None:
    with pytest.raises(UsageError, match="do not put an API key") as info:
        make_adapter(f"{provider}/m?api_key={FAKE_OPENAI_KEY}")
    assert SECRET_MARK not in str(info.value)


def test_a_missing_key_names_the_variable(monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(UsageError, match=r"\$OPENAI_API_KEY"):
        make_adapter("openai/gpt-4o")
    with pytest.raises(UsageError, match=r"\$MY_KEY"):
        make_adapter("openai/gpt-4o?api_key_env=MY_KEY")
    # a local OpenAI-compatible server usually needs none
    assert make_adapter("openai/llama?base_url=http://127.0.0.1:1/v1&api=chat").spec == "openai/llama"
