"""Attempt labels on batch writes: re-sending only the rows a partial batch left out is a
reissue of that batch (``reissue-n``), not a new ``original`` write — the ledger must tell a
recovery from a first try even when the recovery carries fewer rows."""

from __future__ import annotations

from support.cells import cell_for
from support.worlds import make_world

from limbo.episode.run_one import run_episode


def _focal(record: dict) -> list[dict]:
    return [e for e in record["ledger"] if e["tool"] == "data_insert_many"]


def test_rows_re_inserted_after_a_partial_batch_are_a_reissue() -> None:
    record = run_episode(cell_for("import_batch", model="policy/verify", fault="partial_batch"))
    rows = _focal(record)
    requests = sorted({e["request_id"] for e in rows}, key=lambda r: int(r[1:]))
    assert len(requests) == 2  # the cut batch, then the re-insert of the missing rows
    first = [e for e in rows if e["request_id"] == requests[0]]
    again = [e for e in rows if e["request_id"] == requests[1]]
    assert first and again
    assert {e["attempt"] for e in first} == {"original"}
    assert {e["attempt"] for e in again} == {"reissue-1"}
    assert record["outcome"]["exactly_once"]


def test_batches_count_per_table_and_single_writes_still_by_full_arguments() -> None:
    world = make_world("native", "import_batch")
    labels = []
    for tool, args in [("data_insert_many", {"table": "a", "rows": [{"n": 1}, {"n": 2}]}),
                       ("data_insert_many", {"table": "a", "rows": [{"n": 2}]}),
                       ("data_insert_many", {"table": "b", "rows": [{"n": 1}]}),
                       ("data_insert_many", {"table": "a", "rows": [{"n": 3}]}),
                       ("data_insert", {"table": "a", "row": {"n": 1}}),
                       ("data_insert", {"table": "a", "row": {"n": 2}}),
                       ("data_insert", {"table": "a", "row": {"n": 1}})]:
        assert world.boundary.call(tool, args)["ok"]
        labels.append(world.ledger[-1]["attempt"])
    assert labels == ["original", "reissue-1", "original", "reissue-2",
                      "original", "original", "reissue-1"]
