"""Work beside this process (:mod:`limbo.base.beside`) and the tables and figures made on two
cores with it (:func:`limbo.analysis.tables.build_beside`,
:func:`limbo.analysis.figures.render_safely`): the same tables, failures, order and bytes as
one process makes, whatever the helper does."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.children import children

from limbo.base import beside
from limbo.base.beside import Beside, can_fork


def _fail() -> int:
    raise RuntimeError("a bug in the work")


@pytest.fixture(autouse=True)
def alone() -> None:
    """Each test starts with this process's main thread alone, as a command does: a thread an
    earlier test of this worker left still stopping would make a fork unsafe, and the work
    would then rightly be done in one process."""
    for thread in threading.enumerate():
        if thread is not threading.main_thread():
            thread.join(timeout=30)
    assert threading.active_count() == 1, [t.name for t in threading.enumerate()]


@pytest.mark.parametrize(("work", "expected"), [
    (lambda: (os.getpid(), [1, 2, 3]), "helper"),
    (_fail, None),  # raises in the helper
    (lambda: os._exit(3), None),  # dies
    (lambda: lambda: 1, None),  # a result that cannot be pickled
])
def test_a_helper_gives_its_result_or_none(work: Any, expected: str | None) -> None:
    assert can_fork()
    found = Beside(work).result()
    if expected is None:
        assert found is None
    else:
        assert found is not None and found[0] != os.getpid() and found[1] == [1, 2, 3]
    assert children() == []


def test_a_helper_given_up_is_reaped() -> None:
    gate = threading.Event()
    helper = Beside(lambda: gate.wait())  # never set in the helper: it waits until killed
    helper.close()
    assert children() == []


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from limbo.analysis.data import Data
    from limbo.analysis.loader import load
    from limbo.cli import main
    from limbo.commands.common import builtin_design

    out = tmp_path_factory.mktemp("beside") / "e1"
    assert main(["run", "e1", "--template", "charge_invoice", "--template", "import_batch",
                 "--out", str(out), "--quiet"]) == 0
    return Data(load([out], builtin_design), "template")


@pytest.fixture
def traced(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """Every table's builder writes which process built it into a file and, while a test
    builds beside a helper, meets the other process there (:func:`_meet`)."""
    from limbo.analysis import tables

    trace = tmp_path / "built"

    for number, build in list(tables.TABLES.items()):
        def traced_build(d: Any, build: Any = build, number: int = number) -> Any:
            with trace.open("a") as fh:
                fh.write(f"{number} {os.getpid()}\n")
            if WAIT:
                _meet(trace)
            return build(d)

        monkeypatch.setitem(tables.TABLES, number, traced_build)
    yield trace
    WAIT.clear()


WAIT: list[bool] = []
"""Non-empty while a test builds beside a helper (the traced builders then wait for it)."""


def _meet(trace: Path) -> None:
    """Wait (up to a minute) until another process has written to ``trace``. Each process's
    first item waits for the other's, so neither takes every item before the other starts
    (on a loaded machine this process may not run again for a while after the fork)."""
    deadline = time.monotonic() + 60
    while (beside.cores() >= 2 and time.monotonic() < deadline
           and all(line.split()[1] == str(os.getpid())
                   for line in trace.read_text().splitlines())):
        time.sleep(0.01)


def _built(trace: Path) -> list[tuple[int, int]]:
    return [(int(n), int(pid)) for n, pid in (line.split() for line in trace.read_text().split("\n")
                                             if line)]


def _text(found: tuple[list[Any], list[str]]) -> tuple[list[str], list[str]]:
    return [t.markdown() for t in found[0]], found[1]


def test_the_tables_are_built_on_two_cores_as_one_process_builds_them(data: Any, traced: Path,
                                                                      monkeypatch) -> None:
    from limbo.analysis import tables

    monkeypatch.setattr(beside, "cores", lambda: 2)
    numbers = list(tables.TABLES)
    alone = tables.build_safely(data, numbers)
    traced.unlink()
    WAIT.append(True)
    both = tables.build_beside(data, numbers)
    assert _text(both) == _text(alone)
    built = _built(traced)
    assert sorted(n for n, _ in built) == sorted(numbers)  # each table built once
    assert len({pid for _, pid in built}) == 2


def test_a_table_that_fails_is_said_in_its_place(data: Any, monkeypatch) -> None:
    from limbo.analysis import tables

    monkeypatch.setattr(beside, "cores", lambda: 2)

    def broken(d: Any) -> Any:
        raise ValueError("odd data")

    monkeypatch.setitem(tables.TABLES, 7, broken)
    numbers = list(tables.TABLES)
    found = tables.build_beside(data, numbers)
    assert _text(found) == _text(tables.build_safely(data, numbers))
    assert found[1] == ["table 7 could not be computed: ValueError: odd data"]


def test_a_helper_that_dies_leaves_its_tables_to_this_process(data: Any, traced: Path,
                                                              monkeypatch) -> None:
    from limbo.analysis import tables

    monkeypatch.setattr(beside, "cores", lambda: 2)
    parent = os.getpid()
    for number, build in list(tables.TABLES.items()):
        def dies_in_the_helper(d: Any, build: Any = build, number: int = number) -> Any:
            if os.getpid() != parent:
                with traced.open("a") as fh:
                    fh.write(f"{number} {os.getpid()}\n")
                os._exit(3)  # at the first table it takes
            return build(d)

        monkeypatch.setitem(tables.TABLES, number, dies_in_the_helper)
    numbers = list(tables.TABLES)
    alone = _text(tables.build_safely(data, numbers))
    traced.unlink()
    WAIT.append(True)
    assert _text(tables.build_beside(data, numbers)) == alone
    built = _built(traced)
    helper = {pid for _, pid in built} - {parent}
    assert len(helper) == 1 and len([n for n, pid in built if pid != parent]) == 1  # it died
    assert sorted(n for n, pid in built if pid == parent) == sorted(numbers)
    assert children() == []


def test_the_figures_drawn_on_two_cores_are_one_processes_byte_for_byte(
        data: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from limbo.analysis.figures import render_safely

    monkeypatch.setattr(beside, "cores", lambda: 1)
    alone = render_safely(data, tmp_path / "one")
    monkeypatch.setattr(beside, "cores", lambda: 2)
    assert can_fork()  # so the figures below are drawn in turns with a helper
    both = render_safely(data, tmp_path / "two")
    assert [(n, [p.name for p in files], why) for n, files, why in both] == [
        (n, [p.name for p in files], why) for n, files, why in alone]
    drawn = [p for _, files, _ in alone for p in files]
    assert drawn and all(p.read_bytes() == (tmp_path / "two" / p.name).read_bytes()
                         for p in drawn)


def test_work_that_fails_here_leaves_no_helper_behind() -> None:
    def work(item: int) -> int:
        if os.getpid() == parent:
            raise KeyboardInterrupt  # Ctrl-C while this process works its first item
        time.sleep(0.05)
        return item

    parent = os.getpid()
    with pytest.raises(KeyboardInterrupt):
        beside.in_turns(list(range(20)), work)
    assert children() == []


def test_in_turns_works_every_item_once_in_order(tmp_path: Path) -> None:
    trace = tmp_path / "worked"

    def work(item: int) -> int:
        with trace.open("a") as fh:
            fh.write(f"{item} {os.getpid()}\n")
        _meet(trace)
        return item * item

    assert beside.in_turns(list(range(30)), work) == [i * i for i in range(30)]
    worked = [line.split() for line in trace.read_text().splitlines()]
    assert sorted(int(i) for i, _ in worked) == list(range(30))
    assert len({pid for _, pid in worked}) == (2 if beside.cores() >= 2 else 1)


def test_a_bootstrap_bar_on_a_terminal_leaves_the_tables_two_cores(tmp_path: Path,
                                                                    monkeypatch) -> None:
    """``--bootstrap`` on a terminal draws its bar without a thread of its own, so the tables
    are still built beside a helper; the helper, which inherits the bar, draws what it
    reports there too, and each report is drawn whole."""
    import argparse
    import io
    import sys

    from limbo.commands.tables import uncertainty

    class Terminal(io.TextIOWrapper):
        def isatty(self) -> bool:
            return True

    screen = tmp_path / "screen"
    monkeypatch.setattr(sys, "stderr", Terminal(screen.open("wb"), write_through=True))
    trace = tmp_path / "worked"
    with uncertainty(argparse.Namespace(cluster="world", bootstrap=100)) as u:
        assert u.report is not None and can_fork()
        report = u.report

        def work(item: int) -> int:
            with trace.open("a") as fh:
                fh.write(f"{item} {os.getpid()}\n")
            report(f"item {item} in {os.getpid()}", 1, 1)
            _meet(trace)
            return item

        assert beside.in_turns(list(range(10)), work) == list(range(10))
    worked = [line.split() for line in trace.read_text().splitlines()]
    assert len({pid for _, pid in worked}) == (2 if beside.cores() >= 2 else 1)
    drawn = screen.read_text(errors="replace")
    for item, pid in worked:
        assert f"item {item} in {pid}" in drawn, (item, pid)
