"""A Ctrl-C held to the end of a block (:func:`limbo.base.interrupts.whole`): a record written
to a run's file is counted before the run stops, so the manifest's count is the file's."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

from limbo.base.interrupts import from_user, watching, whole


def _ctrl_c() -> None:
    os.kill(os.getpid(), signal.SIGINT)


def test_a_ctrl_c_inside_is_raised_as_the_block_ends() -> None:
    done = []
    with watching(), pytest.raises(KeyboardInterrupt):
        with whole():
            _ctrl_c()
            done.append("after the signal")
            with whole():  # nested: held to the outermost end
                done.append("inner")
            done.append("outer end")
    assert done == ["after the signal", "inner", "outer end"]


def test_a_second_ctrl_c_is_raised_at_once() -> None:
    done = []
    with watching():
        with pytest.raises(KeyboardInterrupt), whole():
            _ctrl_c()
            done.append("held")
            _ctrl_c()
            done.append("never")
        with whole():  # nothing left pending
            pass
    assert done == ["held"]


def test_a_block_that_raises_keeps_its_exception_and_the_ctrl_c_is_the_users() -> None:
    with watching():
        with pytest.raises(ValueError, match="the block's own"), whole():
            _ctrl_c()
            raise ValueError("the block's own")
        assert from_user()
        with whole():  # nothing left pending from the block before
            pass


def test_without_a_watch_nothing_is_held() -> None:
    done = []
    with pytest.raises(KeyboardInterrupt), whole():
        _ctrl_c()
        done.append("never")
    assert done == []


def test_off_the_main_thread_nothing_is_held() -> None:
    """A block entered on another thread holds nothing (the signal is the main thread's); the
    main thread's blocks still do."""
    import threading

    with watching():
        watch = signal.getsignal(signal.SIGINT)
        holding: list[int] = []

        def elsewhere() -> None:
            with whole():
                holding.append(watch.holding)  # type: ignore[union-attr]

        thread = threading.Thread(target=elsewhere)
        thread.start()
        thread.join()
        with whole():
            holding.append(watch.holding)  # type: ignore[union-attr]
        assert holding == [0, 1] and watch.holding == 0  # type: ignore[union-attr]


def test_a_record_written_as_ctrl_c_arrives_is_counted(tmp_path: Path) -> None:
    from limbo.log.store import RecordWriter
    from limbo.run.breaker import Breaker
    from limbo.run.tally import PassTally

    class Interrupted(RecordWriter):
        def write(self, data: bytes) -> None:
            super().write(data)
            _ctrl_c()  # between the write and the count

    path = tmp_path / "episodes.jsonl"
    writer = Interrupted(path)
    tally = PassTally(writer, 1, [], None, Breaker(5))
    cell: dict[str, Any] = {"model": "policy/blind", "fault": "none"}
    outcome = {"termination": "done", "fault_fired": False, "duplicate": False,
               "task_success": True, "exactly_once": True, "overclaim": False, "cost_usd": 0.0}
    with watching(), pytest.raises(KeyboardInterrupt):
        tally.emit(b'{"a": 1}\n', cell, outcome)
    writer.close()
    assert tally.ran == 1 and path.read_bytes() == b'{"a": 1}\n'
