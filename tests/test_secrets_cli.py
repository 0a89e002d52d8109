"""The whole path a user takes, with a recognisable fake key: `limbo run` drives a real SDK
adapter against a local server speaking the OpenAI wire format, and neither the records, the
manifest, the cache nor anything printed contains the key."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from support.model_servers import FAKE_OPENAI_KEY, SECRET_MARK
from support.reference import briefed

from limbo.episode.briefing import context
from limbo.experiments.grid import Grid, expand
from limbo.sim.world import World


def test_cli_run_through_the_sdk_leaves_no_key_anywhere(gw, tmp_path: Path) -> None:
    model = f"openai/gpt-test?base_url={gw.url}/v1"
    grid = Grid(models=[model], templates=["charge_invoice"], faults=["timeout_post"])
    cell = expand(grid).cells[0]
    world = World.of(cell)
    session = gw.open(cell.episode_id, briefed(world), context(world))
    out, cache = tmp_path / "run", tmp_path / "cache"
    env = {**os.environ, "OPENAI_API_KEY": FAKE_OPENAI_KEY}
    try:
        result = subprocess.run(
            [str(Path(sys.executable).parent / "limbo"), "run", "--model", model, "--template",
             "charge_invoice", "--fault", "timeout_post", "--limit", "1", "--out", str(out),
             "--cache-dir", str(cache),
             "--no-preflight"],  # the gateway serves one session: a probe would take its turn
            capture_output=True, text=True, env=env, timeout=300)
    finally:
        gw.close(cell.episode_id)
    assert result.returncode == 0, result.stderr
    assert session.turns >= 3  # the SDK really talked to the server
    record_text = (out / "episodes.jsonl").read_text()
    assert '"exactly_once": true' in record_text and cell.episode_id in record_text
    everything = [result.stdout, result.stderr, record_text,
                  (out / "manifest.json").read_text(),
                  *(p.read_text() for p in cache.rglob("*.json"))]
    assert len(everything) > 4  # the cache holds the responses
    assert not any(SECRET_MARK in text for text in everything)
