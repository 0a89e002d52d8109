"""``limbo episode``: ``--episode-timeout``; ``--from`` says whether it reproduced the stored
record or where it first diverged, takes the run's plugins and prices and the way the run
reached its model from the manifest; every re-run command LIMBO prints names them."""

from __future__ import annotations

import json
from pathlib import Path

from support.bad_server import CHAT_OK, BadServer, Reply
from support.hostile import cli, refused, write_plugin

from limbo.log.rerun import rerun_command

PLUGIN = '''
import asyncio
from limbo.episode.models import model_adapter
from limbo.harnesses.policies import PolicyAdapter


@model_adapter("{name}")
class Plug(PolicyAdapter):
    """policy/verify under another name; `NAME/slow` hangs."""

    def __init__(self, model, **params):
        super().__init__("verify", **params)
        self.slow = model == "slow"

    async def generate(self, messages, tools, ctx):
        if self.slow:
            await asyncio.sleep(60)
        return await super().generate(messages, tools, ctx)
'''
ONE = ["--template", "charge_invoice", "--fault", "timeout_post", "--contract", "native",
       "--quiet"]


def _first_id(run: Path) -> str:
    return str(json.loads((run / "episodes.jsonl").read_text().splitlines()[0])["episode_id"])


def test_episode_timeout_ends_a_hanging_adapter(capsys, tmp_path) -> None:
    plugin = write_plugin(tmp_path, "plug", PLUGIN.replace("{name}", "plugslow"))
    result = cli(capsys, "episode", "--model", "plugslow/slow", "--plugin", str(plugin),
                 "--episode-timeout", "0.3", "--json")
    assert result.code == 0, result.err
    outcome = json.loads(result.out)["outcome"]
    assert outcome["termination"] == "timeout"
    assert "--episode-timeout 0.3s" in outcome["termination_reason"]
    refused(cli(capsys, "episode", "--episode-timeout", "0"), "--episode-timeout must be")


def test_from_reproduces_with_the_runs_plugin_without_naming_it(capsys, tmp_path,
                                                                 monkeypatch) -> None:
    plugin = write_plugin(tmp_path, "plug", PLUGIN.replace("{name}", "plugfrom"))
    run = tmp_path / "run"
    monkeypatch.chdir(tmp_path)  # the run names its plugin by a relative path
    done = cli(capsys, "run", "--model", "plugfrom/x", "--plugin", "plug.py", *ONE, "--out", "run")
    assert done.code == 0, done.err
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["plugins"] == [str(plugin)]  # recorded absolute
    episode = _first_id(run)
    monkeypatch.chdir(tmp_path.parent)  # and the re-run starts elsewhere, without --plugin
    again = cli(capsys, "episode", "--from", str(run), episode)
    assert again.code == 0, again.err
    assert again.out.strip().splitlines()[-1] == (
        f"reproduced: the record of {episode} is identical to the one in {run} (runtime aside)")
    assert rerun_command(run, episode) == (
        f"limbo episode --from {run} {episode} --plugin {plugin}")
    from limbo.analysis.report.details import rerun_command as in_the_report

    assert in_the_report(run, episode) == rerun_command(run, episode)


def test_from_names_the_first_divergence(capsys, tmp_path) -> None:
    run = tmp_path / "run"
    assert cli(capsys, "run", "--model", "policy/verify", *ONE, "--out", str(run)).code == 0
    lines = (run / "episodes.jsonl").read_text().splitlines()
    record = json.loads(lines[0])
    record["outcome"]["agent_time_s"] += 1.0  # as if the sandbox had changed since
    (run / "episodes.jsonl").write_text("\n".join([json.dumps(record), *lines[1:]]) + "\n")
    again = cli(capsys, "episode", "--from", str(run), record["episode_id"], "--json")
    assert again.code == 0, again.err
    stored = record["outcome"]["agent_time_s"]
    assert again.err.strip() == (f"diverged from the record in {run} first at "
                                 f"outcome.agent_time_s: stored {stored}, now {stored - 1.0}")
    assert json.loads(again.out)["episode_id"] == record["episode_id"]  # stdout: the record


def test_from_reaches_the_model_as_the_run_did_or_where_it_moved(capsys, tmp_path) -> None:
    run = tmp_path / "run"
    with BadServer(Reply(body=CHAT_OK)) as first:
        model = f"openai/m?api=chat&base_url={first.url}"
        assert cli(capsys, "run", "--model", model, *ONE, "--out", str(run),
                   "--no-cache").code == 0
        episode = _first_id(run)
        same = cli(capsys, "episode", "--from", str(run), episode, "--no-cache")
        assert same.code == 0 and "reproduced" in same.out
        assert len(first.requests) == 3  # the run's two cells, and the re-run, at its base_url
    with BadServer(Reply(body=CHAT_OK)) as moved:
        again = cli(capsys, "episode", "--from", str(run), episode, "--no-cache", "-M",
                    f"base_url={moved.url}")
        assert again.code == 0 and "reproduced" in again.out and len(moved.requests) == 1
    refused(cli(capsys, "episode", "--from", str(run), episode, "-M", "temperature=1"),
            "with --from only how the model is reached may change")
