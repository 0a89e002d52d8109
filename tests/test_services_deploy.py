"""Deploy: every trigger starts a new run (no key natively), runs are irreversible, and the
run list / get_run are strong."""

from __future__ import annotations

from support.worlds import deliver, make_world

RUN = {"service": "gateway", "version": "2026.0.3", "environment": "production"}


def test_trigger_twice_starts_two_runs() -> None:
    world = make_world("native")
    a, b = deliver(world, "deploy_trigger", RUN), deliver(world, "deploy_trigger", RUN)
    assert a["run_id"] != b["run_id"] and a["status"] == "queued"
    assert len(world.ledger) == 2
    assert world.ledger[0]["write_class"] == {"idempotency": "none", "read_path": "strong",
                                              "reversibility": "irreversible"}


def test_keys_everywhere_trigger_honours_the_key() -> None:
    world = make_world("keys-everywhere")
    first = deliver(world, "deploy_trigger", {**RUN, "idempotency_key": "d"})
    assert deliver(world, "deploy_trigger", {**RUN, "idempotency_key": "d"}) == {
        **first, "idempotent_replayed": True}
    assert len(world.ledger) == 1


def test_runs_are_visible_at_once_and_finish_after_a_minute() -> None:
    world = make_world("native")
    run = deliver(world, "deploy_trigger", RUN, when=100)["run_id"]
    listed = deliver(world, "deploy_list_runs", {"service": "gateway"})["items"]
    assert [(r["run_id"], r["status"]) for r in listed] == [(run, "running")]
    assert deliver(world, "deploy_get_run", {"run_id": run}, when=161)["run"]["status"] == "succeeded"
    assert deliver(world, "deploy_list_runs", {"service": "checkout"})["items"] == []


def test_get_unknown_run_is_404() -> None:
    world = make_world("native")
    assert deliver(world, "deploy_get_run", {"run_id": "run_x"})["error"]["kind"] == "not_found"


def test_stale_view_hides_a_later_run() -> None:
    world = make_world("native")
    run = deliver(world, "deploy_trigger", RUN, when=10)["run_id"]
    deliver(world, "deploy_trigger", {**RUN, "version": "2026.0.4"}, when=30)
    stale = deliver(world, "deploy_list_runs", {"service": "gateway"}, when=40, stale_as_of=20.0)
    assert [r["run_id"] for r in stale["items"]] == [run]
    assert deliver(world, "deploy_get_run", {"run_id": run}, stale_as_of=5.0)["error"]["kind"] == "not_found"
