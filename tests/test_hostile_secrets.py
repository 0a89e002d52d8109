"""Must-show 6: an API key placed in any part of ``base_url`` — user info, a query parameter
(plain, percent-encoded, twice encoded), a path segment equal to or shaped like a key, the
fragment — or in any other part of the model spec is refused up front, and the key's value
appears in no file of the run directory, the cache, or the output. As a last line, a key that
an adapter echoes anyway is scrubbed from every record."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import pytest
from support.bad_server import CHAT_OK, BadServer, Reply
from support.hostile import cli, records, refused, write_plugin
from support.model_servers import FAKE_OPENAI_KEY, SECRET_MARK

KEY = FAKE_OPENAI_KEY
SHAPED = "sk-proj-NOTTHEKEYbutShaped9876"
RANDOM = "Zx81Qw7PLm3Vb9Kt2Rn6Hs4Jd"


def forms(url: str) -> list[tuple[str, list[str]]]:
    host = url.removesuffix("/v1")
    spec = "openai/m?api=chat&base_url="
    return [
        ("user info", ["--model", f"{spec}http://user:{KEY}@{host.removeprefix('http://')}/v1"]),
        ("password only", ["--model", f"{spec}http://:{KEY}@{host.removeprefix('http://')}/v1"]),
        ("query api_key", ["--model", f"{spec}{url}?api_key={KEY}"]),
        ("query key, encoded", ["--model", spec + quote(f"{url}?key={KEY}", safe="")]),
        ("query, innocent name", ["--model", f"{spec}{url}?x={KEY}"]),
        ("query value encoded twice", ["--model", f"{spec}{url}?x=" + quote(quote(KEY))]),
        ("query name holds it", ["--model", f"{spec}{url}?{KEY}=1"]),
        ("query token", ["--model", f"{spec}{url}?access_token=abc123"]),
        ("path segment is the key", ["--model", f"{spec}{host}/{KEY}/v1"]),
        ("path segment encoded", ["--model", f"{spec}{host}/" + quote(KEY, safe="") + "/v1"]),
        ("path segment shaped like a key", ["--model", f"{spec}{host}/{SHAPED}/v1"]),
        ("random-looking path segment", ["--model", f"{spec}{host}/{RANDOM}/v1"]),
        ("fragment", ["--model", f"{spec}{url}#{KEY}"]),
        ("through -M", ["--model", "openai/m?api=chat", "-M", f"base_url={url}?key={KEY}"]),
        ("another parameter", ["--model", f"{spec}{url}", "-M", f"api_key_env={KEY}"]),
        ("model name", ["--model", f"openai/{KEY}?api=chat&base_url={url}"]),
        ("api_key parameter", ["--model", f"{spec}{url}&api_key={KEY}"]),
    ]


LABELS = [f[0] for f in forms("http://127.0.0.1:1/v1")]


def _everything(root: Path) -> list[str]:
    return [p.read_bytes().decode("utf-8", "replace") for p in root.rglob("*") if p.is_file()]


@pytest.mark.parametrize("label", LABELS)
def test_a_key_anywhere_in_the_model_spec_is_refused_and_written_nowhere(
        capsys, tmp_path: Path, monkeypatch, label: str) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with BadServer(Reply(body=CHAT_OK)) as server:
        args = dict(forms(server.url))[label]
        result = cli(capsys, "run", *args, "--template", "charge_invoice", "--out",
                     str(tmp_path / "out"), "--cache-dir", str(tmp_path / "cache"))
        assert server.requests == []
    refused(result, "credential" if label != "api_key parameter" else "do not put an API key")
    assert SECRET_MARK not in result.out + result.err
    assert not (tmp_path / "out").exists()
    assert not any(SECRET_MARK in text for text in _everything(tmp_path))


def test_a_gateway_account_id_and_api_version_are_not_mistaken_for_keys(capsys, tmp_path,
                                                                        monkeypatch) -> None:
    """The checks refuse credentials, not ordinary URLs: a 32-hex-digit account id in the
    path and an api-version query parameter pass."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with BadServer(Reply(body=CHAT_OK)) as server:
        host = server.url.removesuffix("/v1")
        url = f"{host}/v1/0123456789abcdef0123456789abcdef/gw/Mixtral-8x22B-Instruct-v01?api-version=2024-10-21"
        result = cli(capsys, "run", "--model", f"openai/m?api=chat&base_url={url}",
                     "--template", "charge_invoice", "--contract", "native", "--fault", "none",
                     "--out", str(tmp_path / "out"), "--no-cache", "--quiet")
        assert result.code == 0, result.err
        assert len(server.requests) == 2
        assert KEY in str(server.requests[0]["headers"])  # the key was really sent
    assert not any(SECRET_MARK in text for text in _everything(tmp_path))
    assert SECRET_MARK not in result.out + result.err


ECHO = '''
import os
from limbo.episode.models import ModelTurn, ToolCall, model_adapter
from limbo.harnesses.policies import PolicyAdapter


@model_adapter("{name}")
class Echo(PolicyAdapter):
    """Careless with the key: says it, sends it as an argument, raises with it."""

    def __init__(self, model, **params):
        super().__init__("verify", **params)

    async def generate(self, messages, tools, ctx):
        key = os.environ["OPENAI_API_KEY"]
        if len(messages) == 2:
            return ModelTurn(text=f"my key is {key}", tool_calls=[ToolCall(
                id="k", name="tickets_add_comment", arguments={"ticket_id": key, "body": key})])
        if self.key().vars["instance"] == 0 and len(messages) > 6:
            raise RuntimeError(f"failed with key {key}")
        return await super().generate(messages, tools, ctx)
'''


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_key_an_adapter_echoes_is_scrubbed_from_every_record(capsys, tmp_path, monkeypatch,
                                                               workers: str) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    name = f"echo{workers}"
    plugin = write_plugin(tmp_path, name, ECHO.replace("{name}", name))
    out = tmp_path / "out"
    result = cli(capsys, "run", "--model", f"{name}/x", "--plugin", str(plugin), "--template",
                 "charge_invoice", "--instances", "2", "--out", str(out), "--workers", workers)
    assert result.code == 1, result.err  # the adapter's failures are errored cells
    got = records(out)
    assert len(got) == 96
    assert sum("failed with key ***" in (r["outcome"]["termination_reason"] or "") for r in got) > 0
    assert all(SECRET_MARK not in text for text in _everything(out))
    assert SECRET_MARK not in result.out + result.err
