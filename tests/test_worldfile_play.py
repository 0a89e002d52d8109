"""A declared service behaves as its declaration says, through the same endpoint, key store,
tool layer and faults as a built-in one (tests/fixtures/worlds/lab.toml declares one of each).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.worlds import at, deliver, ledger_tools

from limbo.episode.run_one import run_episode
from limbo.sim.cell import Cell
from limbo.sim.world import World
from limbo.sim.worldfile.kit import load_world

LAB = Path(__file__).resolve().parent / "fixtures" / "worlds" / "lab.toml"


def lab(contract: str = "native", template: str = "lab_put", fault: str = "none",
        focal: str | None = None, seed: int = 0) -> World:
    identity = load_world(LAB).identity
    return World.of(Cell(service="lab", template=template, focal_write=focal or template,
                      contract=contract, fault=fault, seed=seed, world=identity))


def test_the_world_offers_its_own_tools_only() -> None:
    world = lab()
    assert [t for t in world.tools if t.startswith("lab_")] == [
        "lab_put", "lab_tag", "lab_drop", "lab_setkv", "lab_load", "lab_slow", "lab_jitter",
        "lab_notes", "lab_find", "lab_kvs", "lab_rows"]
    assert set(world.tools) - {t for t in world.tools if t.startswith("lab_")} == {"wait",
                                                                                "finish"}
    assert set(world.services) == {"lab"}


def test_arguments_are_validated_as_declared() -> None:
    world = lab()
    bad = [("lab_put", {"topic": "green", "text": "x"}), ("lab_put", {"topic": "red"}),
           ("lab_put", {"topic": "red", "text": "x" * 41}),
           ("lab_put", {"topic": "red", "text": "x", "weight": 2}),
           ("lab_put", {"topic": "red", "text": "x", "colour": 1}),
           ("lab_setkv", {"name": "a", "value": "4"}),
           ("lab_load", {"rows": []}), ("lab_load", {"rows": ["flat"]})]
    for tool, args in bad:
        result = world.boundary.call(tool, args)
        assert result["error"]["kind"] == "invalid_argument", (tool, args, result)
    assert world.ledger == [] and world.now == 0
    assert world.boundary.call("lab_put", {"topic": "red", "text": "x"})["weight"] == 0.5


def test_descriptions_say_the_contract() -> None:
    native, keyed = lab().tools, lab("keys-everywhere").tools
    assert "idempotency_key" in native["lab_put"].model.model_fields
    assert "idempotency_key" not in native["lab_drop"].model.model_fields
    assert "idempotency_key" in keyed["lab_drop"].model.model_fields
    assert "accepted and ignored" in native["lab_jitter"].description
    assert "when topic is red: at once; when topic is blue: up to 90 s later" in \
        native["lab_notes"].description
    assert "Not available" in native["lab_find"].description


def test_a_key_is_scoped_as_declared() -> None:
    world = lab()
    first = deliver(world, "lab_put", {"topic": "red", "text": "a", "idempotency_key": "k1"})
    again = deliver(world, "lab_put", {"topic": "red", "text": "a", "idempotency_key": "k1"})
    assert again == {**first, "idempotent_replayed": True}
    other = deliver(world, "lab_put", {"topic": "red", "text": "b", "idempotency_key": "k1"})
    assert other["error"]["kind"] == "idempotency_mismatch"
    # key_scope = "tool": the same key on another write of the service is a new key
    assert deliver(world, "lab_tag", {"label": "t", "idempotency_key": "k1"})["ok"]
    assert ledger_tools(world) == ["lab_put", "lab_tag"]


def test_an_ignored_key_dedupes_nothing() -> None:
    world = lab()
    for _ in range(2):
        deliver(world, "lab_jitter", {"label": "j", "idempotency_key": "same"})
    assert [e["key"] for e in world.ledger] == [None, None]
    assert {e["write_class"]["idempotency"] for e in world.ledger} == {"none"}


def test_delete_finds_its_target_or_answers_404() -> None:
    world = lab()
    note = deliver(world, "lab_put", {"topic": "red", "text": "a"})["note_id"]
    wrong = deliver(world, "lab_drop", {"note_id": note, "topic": "blue"})
    assert wrong["error"]["kind"] == "not_found"
    assert deliver(world, "lab_drop", {"note_id": note, "topic": "red"}) == {"ok": True,
                                                                              "deleted": note}
    assert deliver(world, "lab_drop", {"note_id": note, "topic": "red"})["error"]["status"] == 404
    assert world.ledger[-1]["reverses"] == note
    assert world.ledger[-1]["write_class"]["idempotency"] == "natural"


def test_upsert_changes_nothing_when_repeated() -> None:
    world = lab()
    first = deliver(world, "lab_setkv", {"name": "a", "value": 1})
    assert first["changed"] and deliver(world, "lab_setkv", {"name": "a", "value": 1}) == {
        **first, "changed": False}
    assert deliver(world, "lab_setkv", {"name": "a", "value": 2})["kv_id"] == first["kv_id"]
    assert len(world.ledger) == 2
    assert deliver(world, "lab_kvs", {})["items"] == [{"kv_id": first["kv_id"], "name": "a",
                                                       "value": 2}]


def test_reads_filter_order_cap_and_lag_by_argument() -> None:
    world = lab()
    for i in range(4):
        deliver(world, "lab_put", {"topic": "red", "text": f"r{i}"})
    deliver(world, "lab_put", {"topic": "blue", "text": "b0"})
    red = deliver(world, "lab_notes", {"topic": "red", "limit": 3})["items"]
    assert [n["text"] for n in red] == ["r0", "r1", "r2"]  # oldest first, capped
    assert deliver(world, "lab_notes", {"topic": "blue"})["items"] == []  # lags 90 s
    at(world, 91)
    assert [n["text"] for n in deliver(world, "lab_notes", {"topic": "blue"})["items"]] == ["b0"]
    assert deliver(world, "lab_find", {"q": "r1"})["error"]["kind"] == "not_available"


def test_an_atomic_batch_cut_part_way_commits_nothing() -> None:
    world = lab(template="lab_load", fault="partial_batch")
    rows = [{"k": f"r{i}"} for i in range(5)]
    result = world.boundary.call("lab_load", {"rows": rows})
    assert result["error"]["kind"] == "server_error"
    assert world.ledger == [] and world.fault.fired
    # the same batch, not cut: one effect per row, in the ledger's per-unit shape
    done = world.boundary.call("lab_load", {"rows": rows})
    assert done["count"] == 5 and [e["args"] for e in world.ledger] == [{"row": r} for r in rows]


def test_a_declared_round_trip_is_the_call_s_own() -> None:
    world = lab(template="lab_slow")
    world.boundary.call("lab_slow", {"label": "a"})
    assert world.now == 6.0 and world.ledger[0]["t"] == 3.0
    draws = []
    for seed in (1, 1, 2):
        w = lab(template="lab_slow", seed=seed)
        w.boundary.call("lab_jitter", {"label": "a"})
        draws.append(w.now)
    assert draws[0] == draws[1] != draws[2] and all(1.0 <= d <= 9.0 for d in draws)


@pytest.mark.parametrize("group", [("http500_pre", "http500_post"),
                                   ("none", "redelivery", "phantom_success")])
def test_modes_that_look_alike_still_look_alike_with_a_slow_write(group: tuple[str, ...]) -> None:
    """Observation equivalence with a declared 6 s round trip: every mode of a group answers
    the focal write at the same moment with the same bytes."""
    seen = set()
    for fault in group:
        world = lab(template="lab_slow", fault=fault)
        result = world.boundary.call("lab_slow", {"label": "a"})
        seen.add((world.now, str({k: v for k, v in result.items() if k != "slowrec_id"})))
    assert len(seen) == 1, seen


def test_a_world_episode_is_reproducible_and_its_id_names_the_world(tmp_path: Path) -> None:
    identity = load_world(LAB).identity
    cell = Cell(service="lab", template="lab_load", focal_write="lab_load",
                fault="partial_batch", model="policy/verify", world=identity, seed=7)
    first, second = run_episode(cell), run_episode(cell)
    del first["runtime"], second["runtime"]
    assert first == second and first["outcome"]["exactly_once"]
    builtin_like = Cell(**cell.public())
    assert cell.episode_id != builtin_like.episode_id
    moved = tmp_path / "lab.toml"
    moved.write_bytes(LAB.read_bytes())  # the same bytes elsewhere: the same world
    assert load_world(moved).identity == identity
    moved.write_bytes(LAB.read_bytes().replace(b"blue = 90", b"blue = 91"))
    changed = load_world(moved).identity
    assert changed != identity and changed is not None
    assert Cell(**cell.public(), world=changed).episode_id != cell.episode_id
