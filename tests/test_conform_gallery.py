"""``limbo conform`` against the gallery (tests/support/conform_gallery.py): seven small MCP
servers over real SQLite, each breaking one exactly-once promise, each over stdio and over
streamable HTTP. Every verdict is the expected one, with the effect count that is its evidence;
the proxy's ledger of each check agrees with the effects the reads saw; and the effects counted
over the whole run are exactly the rows the database holds — none lost, none counted twice.

Over stdio conform restarts the server for property 5; over HTTP it cannot (the server is not
its own), so it opens a new session and, with ``--key-delay``, waits past the lease the
``restart_forgets`` server is started with.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from support.conform_gallery import FLAVOURS
from support.conform_runs import SCALE, WORLD, Done, HttpGallery, conform, rows, stdio

WRITES = ("create_charge", "send_email")
READS = ("list_charges", "list_emails", "get_balance")
Expected = dict[tuple[str, int], tuple[str, int | None]]


def baseline() -> Expected:
    """What the correct server gets: (verdict, effects) per tool and property."""
    out: Expected = {}
    for tool in WRITES:
        out |= {(tool, p): ("pass", 1) for p in (1, 2, 3, 4, 5, 7)}
        out |= {(tool, 6): ("pass", 2), (tool, 8): ("pass", 2)}
    for tool in READS:
        out |= {(tool, p): ("not_applicable", None) for p in (1, 2, 3, 4, 5, 6, 8)}
        out[(tool, 7)] = ("pass", 0)
    return out


BROKEN: dict[str, Expected] = {
    "correct": {},
    "ignores_keys": {(t, p): ("fail", 3 if p == 4 else 2) for t in WRITES for p in range(1, 6)},
    "shared_scope": {(t, 8): ("fail", 1) for t in WRITES},
    "restart_forgets": {(t, 5): ("fail", 2) for t in WRITES},
    "first_result": {(t, 2): ("fail", 1) for t in WRITES},
    "lying_idempotent": {("create_charge", 7): ("fail", 2)},
    "readonly_writes": {("get_balance", 7): ("fail", 1)},
}
"""Where each flavour departs from the correct server."""
CASES = [(t, f) for t in ("stdio", "http") for f in FLAVOURS]


@pytest.fixture(scope="module")
def run_of(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str, str], tuple[Done, Path]]:
    """One conform run per transport and flavour, shared by the tests of that case."""
    done: dict[tuple[str, str], tuple[Done, Path]] = {}

    def get(transport: str, flavour: str) -> tuple[Done, Path]:
        if (transport, flavour) not in done:
            done[(transport, flavour)] = _run(tmp_path_factory.mktemp(f"{transport}-{flavour}"),
                                              transport, flavour)
        return done[(transport, flavour)]

    return get


def _run(tmp: Path, transport: str, flavour: str) -> tuple[Done, Path]:
    db, args = tmp / "gallery.db", ["--world", str(WORLD), "--time-scale", SCALE]
    if transport == "stdio":
        return conform(tmp / "run", *stdio(flavour, db), *args), db
    lease = ["--lease", "1"] if flavour == "restart_forgets" else []
    server = HttpGallery(flavour, db, *lease)
    try:
        delay = ["--key-delay", "1.5"] if lease else []
        return conform(tmp / "run", "--upstream-url", server.url, *args, *delay), db
    finally:
        server.stop()


@pytest.mark.parametrize(("transport", "flavour"), CASES)
def test_every_verdict_is_the_expected_one_with_its_effect_count(
        run_of: Callable[[str, str], tuple[Done, Path]], transport: str, flavour: str) -> None:
    done, _ = run_of(transport, flavour)
    assert done.code == 0, done.stderr
    expected = baseline() | BROKEN[flavour]
    got = {k: (v["verdict"], v["effects"]) for k, v in done.verdicts().items()}
    assert got == expected, {k: (got.get(k), v) for k, v in expected.items() if got.get(k) != v}
    for (tool, prop), v in done.verdicts().items():
        assert v["source"] == ("annotations" if tool == "get_balance" else "world")
        if v["verdict"] == "fail":
            assert f"--tool {tool} --property {prop}" in v["reproduce"], v
            assert f"reproduce {tool} {prop}: limbo conform" in done.stdout
    if transport == "http":
        assert "opened a new MCP session" in done.verdicts()[("create_charge", 5)]["why"]
    else:
        assert "restarted the server" in done.verdicts()[("create_charge", 5)]["why"]


@pytest.mark.parametrize(("transport", "flavour"), CASES)
def test_each_check_is_a_recorded_episode_whose_ledger_holds_its_effects(
        run_of: Callable[[str, str], tuple[Done, Path]], transport: str, flavour: str) -> None:
    done, _ = run_of(transport, flavour)
    records = done.records()
    checked = [v for v in done.report["verdicts"] if v["verdict"] != "not_applicable"]
    assert sorted(v["episode"] for v in checked) == sorted(records)
    for v in checked:
        record = records[v["episode"]]
        assert record["cell"]["harness"] == "conform"
        assert record["cell"]["fault"] == ("timeout_post" if v["property"] == 3 else "none")
        assert record["runtime"]["proxy"]["conform"]["verdict"] == v["verdict"]
        if v["tool"] in WRITES and v["property"] <= 6:  # one tool: its ledger is its effects
            assert len(record["ledger"]) == v["effects"], (v, record["ledger"])


@pytest.mark.parametrize(("transport", "flavour"), CASES)
def test_the_effects_counted_are_the_rows_the_database_holds(
        run_of: Callable[[str, str], tuple[Done, Path]], transport: str, flavour: str) -> None:
    done, db = run_of(transport, flavour)
    counted = sum(v["effects"] or 0 for v in done.report["verdicts"])
    assert counted == sum(rows(db).values())
