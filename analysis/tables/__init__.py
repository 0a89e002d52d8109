"""The paper's tables, each a pure function of the loaded episodes (:class:`Data`).

A table whose data is absent says which grid produces it; one table failing on odd data never
stops the others (:func:`build` reports it in the table instead).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from limbo.analysis.data import Data
from limbo.analysis.fault_cost import table15
from limbo.analysis.sampling import table14, table16
from limbo.analysis.table import Table
from limbo.analysis.tables.common import replicates_note
from limbo.analysis.tables.conditions import table5, table7, table13
from limbo.analysis.tables.cue import table10
from limbo.analysis.tables.e1 import table3, table4
from limbo.analysis.tables.harnesses import table8, table9
from limbo.analysis.tables.hypotheses import table12
from limbo.analysis.tables.summary import table0
from limbo.analysis.tables.waits import table6
from limbo.base.beside import in_turns


def _with_replicates(build: Callable[[Data], Table]) -> Callable[[Data], Table]:
    """``build``, whose table then says how many replicates each of its cells has."""

    @functools.wraps(build)
    def table(data: Data) -> Table:
        found = build(data)
        if not found.absent and not any(n.startswith("Replicates:") for n in found.notes):
            found.notes.append(replicates_note(data, found))
        return found

    return table


TABLES: dict[int, Callable[[Data], Table]] = {
    n: _with_replicates(build) for n, build in ((0, table0), (3, table3), (4, table4),
                                                 (5, table5), (6, table6), (7, table7),
                                                 (8, table8), (9, table9), (10, table10),
                                                 (12, table12), (13, table13), (14, table14),
                                                 (15, table15), (16, table16))}
"""Every table by number: 0 is LIMBO's summary of whatever is loaded, 3-13 the paper's, 14-16
what LIMBO adds (pass^k over repeats, the cost of a fault, sampling until precise)."""


def build(data: Data, numbers: list[int] | None = None) -> list[Table]:
    """The tables ``numbers`` (all by default), in order."""
    return [TABLES[n](data) for n in (numbers or list(TABLES))]


def build_safely(data: Data, numbers: list[int]) -> tuple[list[Table], list[str]]:
    """Like :func:`build`, but a table that fails is replaced by one saying why (and listed
    in the second result), so the others are still produced."""
    tables, failed = [], []
    for number in numbers:
        try:
            tables.append(TABLES[number](data))
        except Exception as exc:  # noqa: BLE001 - one table's failure must not stop the rest
            why = f"could not be computed: {type(exc).__name__}: {exc}"
            tables.append(Table(number, "(failed)", [], absent=why))
            failed.append(f"table {number} {why}")
    return tables, failed


def build_beside(data: Data, numbers: list[int]) -> tuple[list[Table], list[str]]:
    """:func:`build_safely` on two cores where a fork is safe (``limbo tables``): this process
    and a helper take the tables in turns (:func:`~limbo.base.beside.in_turns`); they come out
    in ``numbers``' order, as one process builds them. (``limbo report`` builds its tables in
    one process: its figures, drawn by processes forked from it, use what the tables
    computed.)"""
    built = in_turns(numbers, lambda number: build_safely(data, [number]))
    return [t for tables, _ in built for t in tables], [f for _, failed in built for f in failed]
