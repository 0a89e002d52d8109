"""The README's adapter example is complete: extracted as is and loaded with --plugin from a
file outside the repo, it drives episodes through the real CLI against a loopback server that
speaks Ollama's chat API; every `limbo` command the README shows runs."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from support.ollama import OllamaServer, policy_answer

from limbo.episode.briefing import answer_key, brief, context
from limbo.episode.models import ModelTurn, ToolCall, make_adapter
from limbo.sim.cell import Cell
from limbo.sim.world import World

ROOT = Path(__file__).resolve().parents[1]


def adapter_example() -> str:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Add a model adapter", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_example_is_about_forty_lines() -> None:
    assert len(adapter_example().strip().splitlines()) <= 45  # its HTTP is the standard library's


def limbo(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> Any:
    return subprocess.run([str(Path(sys.executable).parent / "limbo"), *args],
                          capture_output=True, text=True, cwd=cwd, env=env,
                          stdin=subprocess.DEVNULL, timeout=300)


def test_the_readme_adapter_drives_an_episode_against_a_loopback_ollama(tmp_path: Path) -> None:
    """Extracted as is and loaded with --plugin, the example speaks Ollama's chat API to a
    loopback server answering as policy/verify would, and the episode does what the
    in-process policy does: same ledger, same report, Ollama's token counts as usage."""
    plugin = tmp_path / "ollama_adapter.py"
    plugin.write_text(adapter_example())
    flags = ["--fault", "timeout_post", "--template", "charge_invoice", "--json"]
    done = limbo("episode", *flags, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    reference = json.loads(done.stdout)
    policy = make_adapter("policy/verify")
    with OllamaServer(lambda m, t: answer(m, t)) as server:  # answer: bound below, per cell
        spec = f"ollama/qwen3?base_url={server.url}"
        world = World.of(Cell(**{**reference["cell"], "model": spec}))
        brief(policy, answer_key(world))
        answer = policy_answer(policy, context(world))
        done = limbo("episode", "--model", spec, "--plugin", str(plugin), *flags, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    assert record["outcome"]["termination"] == "finished"
    assert record["ledger"] == reference["ledger"] and record["report"] == reference["report"]
    assert record["outcome"]["model_turns"] == len(server.requests) > 2
    assert record["outcome"]["input_tokens"] == sum(r["prompt_eval_count"] for r in server.replies)
    assert record["outcome"]["output_tokens"] == sum(r["eval_count"] for r in server.replies)
    first, last = server.requests[0], server.requests[-1]
    assert first["stream"] is False and first["model"] == "qwen3"
    assert {t["function"]["name"] for t in first["tools"]} >= {"billing_create_charge", "finish"}
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    tool_names = [m.get("tool_name") for m in last["messages"] if m["role"] == "tool"]
    assert tool_names and all(tool_names)


def printed_command(after: str) -> str:
    """The first command of the ``sh`` block that follows ``after`` in the README."""
    text = (ROOT / "README.md").read_text()
    block = re.search(r"```sh\n(.*?)```", text.split(after, 1)[1], re.S).group(1)
    return block.strip().splitlines()[0]


def test_the_readme_example_runs_as_printed_on_a_fresh_install(tmp_path: Path) -> None:
    """Must-show 5: the example file and its command exactly as printed, run by a shell whose
    ``limbo`` can import only what the README's install command installs (the standard library
    and the core dependencies; the test venv's extras are hidden), against a loopback server
    speaking Ollama's chat API."""
    import os

    from support.fresh_install import launcher

    (tmp_path / "ollama_adapter.py").write_text(adapter_example())
    command = printed_command("# ollama_adapter.py")
    assert command == ("limbo episode --model ollama/qwen3 --plugin ollama_adapter.py "
                       "--fault timeout_post")
    bindir = launcher(tmp_path / "fresh-bin").parent
    hidden = subprocess.run([str(bindir / "limbo"), "run", "--model", "openai/x",
                             "--dry-run"], capture_output=True, text=True, cwd=tmp_path)
    assert "needs the openai SDK" in hidden.stdout  # the extras really are out of reach
    from limbo.experiments.grid import world_seed

    task = {"template": "charge_invoice", "focal_write": "billing_create_charge", "instance": 0}
    policy = make_adapter("policy/verify")  # the cell the printed command runs, as the server's
    world = World.of(Cell(model="ollama/qwen3", fault="timeout_post", service="billing", **task,
                       seed=world_seed(0, task)))
    brief(policy, answer_key(world))
    with OllamaServer(policy_answer(policy, context(world))) as server:
        env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}",
               "OLLAMA_HOST": server.url}
        done = subprocess.run(["bash", "-c", command], capture_output=True, text=True,
                              cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert "termination=finished" in done.stdout and "exactly_once=True" in done.stdout
    assert len(server.requests) > 2


def test_an_unreachable_ollama_ends_the_episode_as_model_error(tmp_path: Path) -> None:
    plugin = tmp_path / "ollama_adapter.py"
    plugin.write_text(adapter_example())
    with OllamaServer(lambda m, t: ModelTurn(text="unused")) as server:
        url = server.url  # a port that was just free, and is closed again below
    done = limbo("episode", "--model", f"ollama/qwen3?base_url={url}", "--plugin", str(plugin),
                 "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)["outcome"]
    assert outcome["termination"] == "model_error"
    assert outcome["termination_reason"].startswith("ollama/qwen3: ")


def tour_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```sh\n(.*?)```", text, re.S)
    lines = [line.split("#")[0].strip() for block in blocks for line in block.splitlines()]
    return [line for line in lines if line.startswith("limbo ")]


def test_every_limbo_command_in_the_readme_runs(tmp_path: Path) -> None:
    """Each command as written; ``ollama/...`` reaches a loopback Ollama through
    ``OLLAMA_HOST``, which answers every turn by finishing."""
    import os

    commands = tour_commands()
    assert len(commands) >= 8
    bindir = Path(sys.executable).parent
    (tmp_path / "ollama_adapter.py").write_text(adapter_example())
    finish = ModelTurn(tool_calls=[ToolCall(id="f", name="finish", arguments={
        "status": "failed", "summary": "checked nothing", "uncertain_actions": []})])
    with OllamaServer(lambda m, t: finish) as ollama:
        env = {**os.environ, "OPENAI_API_KEY": "sk-readme-test", "ANTHROPIC_API_KEY": "sk-readme",
               "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}",  # limbo conform's `limbo mcp`
               "LIMBO_CACHE_DIR": str(tmp_path / "cache"), "OLLAMA_HOST": ollama.url}
        _run_all(commands, tmp_path, env, bindir)
    assert ollama.requests, "the README's ollama command reached no server"


def _run_all(commands: list[str], tmp_path: Path, env: dict[str, str], bindir: Path) -> None:
    import shlex

    for command in commands:
        if "<EPISODE_ID>" in command:
            first = (tmp_path / "runs/demo/episodes.jsonl").open().readline()
            command = command.replace("<EPISODE_ID>", json.loads(first)["episode_id"])
        argv = shlex.split(command)
        argv[0] = str(bindir / "limbo")
        result = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, env=env,
                                stdin=subprocess.DEVNULL)
        assert result.returncode == 0, (command, result.stderr)


def test_the_tour_writes_only_where_git_ignores() -> None:
    """A run's manifest records whether the checkout was dirty: the tour must not make it so."""
    import shlex

    ignored = (ROOT / ".gitignore").read_text().splitlines()
    assert "runs/" in ignored and "/figures/" in ignored  # and figures' own default --out
    outs = [argv[argv.index("--out") + 1] for argv in map(shlex.split, tour_commands())
            if "--out" in argv]
    assert len(outs) >= 4 and all(out.startswith("runs/") for out in outs), outs
