"""The response cache: a second run of the same cells makes zero model calls and produces
identical records (``runtime`` aside), cost included; transport settings do not split the
cache, the seed does; nothing secret is stored."""

from __future__ import annotations

import pytest
from support.cells import cell_for
from support.model_servers import (
    FAKE_ANTHROPIC_KEY,
    FAKE_OPENAI_KEY,
    IDS,
    SECRET_MARK,
    VARIANTS,
    Bridge,
    Metered,
    plain,
)

from limbo.episode.run_one import run_episode
from limbo.providers import cache as cache_mod
from limbo.providers.cache import ResponseCache
from limbo.providers.options import ProviderOptions, using

CELL = cell_for("charge_invoice", "billing_create_charge", fault="timeout_post")
PRICES = """
["openai/gpt-test"]
input = 2.0
cached_input = 0.5
output = 8.0

["anthropic/claude-test"]
input = 3.0
cached_input = 0.3
output = 15.0
"""


@pytest.fixture(autouse=True)
def keys(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_OPENAI_KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", FAKE_ANTHROPIC_KEY)
    monkeypatch.delenv("LIMBO_CACHE_DIR", raising=False)


@pytest.fixture
def prices(tmp_path):
    path = tmp_path / "prices.toml"
    path.write_text(PRICES)
    return str(path)


@pytest.mark.parametrize(("label", "provider", "params"), VARIANTS, ids=IDS)
def test_second_run_makes_zero_calls_and_identical_records(gw, tmp_path, prices, label,
                                                           provider, params) -> None:
    params = {**params, "prices": prices}
    first = Bridge(gw, provider, params, backing=Metered, cache=ResponseCache(tmp_path / "c"))
    r1 = run_episode(CELL, first)
    turns = r1["outcome"]["model_turns"]
    assert first.session.requests == turns and first.inner.calls == turns
    assert len(first.inner.cache) == turns
    cost = r1["outcome"]["cost_usd"]
    per_call = 800 * (2.0 if provider == "openai" else 3.0) + 200 * (
        0.5 if provider == "openai" else 0.3) + 50 * (8.0 if provider == "openai" else 15.0)
    assert cost == pytest.approx(turns * per_call / 1e6)

    second = Bridge(gw, provider, params, backing=Metered, cache=ResponseCache(tmp_path / "c"))
    r2 = run_episode(CELL, second)
    assert second.session.requests == 0 and second.inner.calls == 0
    assert second.inner.cache.hits == turns
    assert plain(r2) == plain(r1)


def test_transport_settings_share_the_cache_and_seeds_do_not(gw, tmp_path) -> None:
    root = tmp_path / "c"
    run_episode(CELL, Bridge(gw, "openai", {}, cache=ResponseCache(root)))
    streamed = Bridge(gw, "openai", {"stream": True, "timeout": 5}, cache=ResponseCache(root))
    run_episode(CELL, streamed)
    assert streamed.inner.calls == 0
    other_seed = Bridge(gw, "openai", {}, cache=ResponseCache(root))
    run_episode(CELL.model_copy(update={"seed": 1}), other_seed)
    assert other_seed.inner.calls > 0
    other_temp = Bridge(gw, "openai", {"temperature": 0.5}, cache=ResponseCache(root))
    run_episode(CELL, other_temp)
    assert other_temp.inner.calls > 0


def test_unknown_price_is_recorded_as_unknown_not_free(gw) -> None:
    record = run_episode(CELL, Bridge(gw, "openai", {}, backing=Metered, cache=None))
    assert record["outcome"]["cost_usd"] is None
    assert all(u["cost_usd"] is None and u["input_tokens"] == 1000 for u in record["usage"])


def test_the_cache_of_the_run_else_of_the_environment(gw, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("LIMBO_CACHE_DIR", str(tmp_path / "env"))
    bridge = Bridge(gw, "openai", {"api": "chat"})
    run_episode(CELL, bridge)
    assert bridge.inner.cache.root == tmp_path / "env" and len(bridge.inner.cache) > 0
    with using(ProviderOptions(cache_root=str(tmp_path / "flag"))):
        bridge = Bridge(gw, "openai", {"api": "chat"})
        run_episode(CELL, bridge)
    assert bridge.inner.cache.root == tmp_path / "flag"
    with using(ProviderOptions(cache_root=None)):  # --no-cache: off, whatever the environment
        bridge = Bridge(gw, "openai", {"api": "chat"})
        run_episode(CELL, bridge)
    assert bridge.inner.cache is None
    assert cache_mod.default_cache().root == tmp_path / "env"  # nothing left behind


def test_cache_files_hold_no_secret(gw, tmp_path) -> None:
    run_episode(CELL, Bridge(gw, "anthropic", {}, cache=ResponseCache(tmp_path)))
    run_episode(CELL, Bridge(gw, "openai", {}, cache=ResponseCache(tmp_path)))
    files = list(tmp_path.rglob("*.json"))
    assert files
    assert not [f for f in files if SECRET_MARK in f.read_text()]
