"""The paper's definitions, each written once and cited to the table or caption that states it.

The tables, hypotheses and figures take their fault sets and families from here, so a reader
can check each against the paper; where LIMBO adds to or departs from them, docs/analysis.md
("Differences from the paper") says so.
"""

from __future__ import annotations

RESOLVES = ("timeout_post", "http500_post", "partial_batch")
"""Faults an immediate read-back resolves — "lost acknowledgement, misleading 500, partial
batch" (Table 4's caption; Table 3's first column, "lost ack / 500 / partial")."""
LATE_COMMIT = ("timeout_late", "timeout_late_tail")
"""The late commits: executed 90 s later, or 40 s–2 h later (Table 2)."""
REDELIVERY = ("redelivery",)
CANNOT = (*LATE_COMMIT, *REDELIVERY)
"""Faults a read-back cannot resolve — "late commit, redelivery" (Table 4's caption)."""
POOLED = (*RESOLVES, *CANNOT)
""""Committed faults and redelivery": Table 4's pooled column, Tables 5, 8 and 9, H6."""
COMMITTED = (*RESOLVES, *LATE_COMMIT)
""""Committed faults (lost acknowledgement, misleading 500, late commit, partial batch)"
(Figure 3's caption); H1 and H3 use the same set."""
NOT_EXECUTED = ("timeout_pre", "http500_pre", "throttle_pre")
""""The _pre worlds" where the write never ran (Table 3's caption: TS when not executed)."""
CONN_RESET = ("conn_reset_post",)
"""LIMBO's connection reset after commit: not in the paper's fault sets; shown in columns of
its own (Tables 3 and 5)."""
E1S_ONLY_IN = ("partial_batch",)
"""E1s (ten instances of the batch template) enters only the partial-batch figures: "The
partial-batch column includes the E1s supplement" (Figure 2's caption, Table 3's column)."""

TABLE10_ROWS = (("not executed", "TS", "task_success", NOT_EXECUTED),
                ("read-back resolves", "dup", "duplicate", RESOLVES),
                ("late commit", "dup", "duplicate", LATE_COMMIT),
                ("redelivery", "dup", "duplicate", REDELIVERY),
                ("no fault", "EOS", "exactly_once", ("none",)))
"""Table 10's rows: (row, metric, outcome, fault modes) — not executed (TS), read-back
resolves, late commit and redelivery (duplicates), no fault (EOS)."""

TABLE13_FAMILY = ("vanilla", "aware", "reflect", "sdk-retry", "rules", "vbr")
"""Table 13's printed comparisons (guard vs each, native contract, E2): Holm adjusts over
these six; any other row is shown unadjusted and marked."""

TABLE_EXPERIMENTS = {3: ("e1", "e1s"), 4: ("e1", "e3"), 5: ("e2", "e2k"), 6: ("e5",),
                     7: ("e2",), 8: ("e3",), 9: ("e3", "e3k"), 10: ("e6",), 12: ("e1", "e3"),
                     13: ("e2", "e2k")}
"""The experiments each table reads (its caption's): no episode of any other enters it, and
its provenance names the runs that hold these."""

NATIVE: tuple[str, ...] = ("native",)
KEYS: tuple[str, ...] = ("keys-everywhere",)
E1_CELLS: dict[str, tuple[str, ...]] = {"contract": NATIVE, "harness": ("minimal",), "condition": ("vanilla",)}
CAPTIONS: dict[str, tuple[tuple[str, ...], dict[str, tuple[str, ...]]]] = {
    "e1": (("e1",), E1_CELLS),
    "e1s": (("e1s",), E1_CELLS),
    "e2": (("e2", "e2k"), {"contract": NATIVE, "harness": ("minimal",)}),
    "e2k": (("e2", "e2k"), {"contract": KEYS, "harness": ("minimal",)}),
    "e3": (("e3", "e3k"), {"contract": NATIVE}),
    "e3k": (("e3", "e3k"), {"contract": KEYS}),
    "e5": (("e5",), {"harness": ("minimal",)}),
    "e6": (("e6",), {"contract": NATIVE, "harness": ("minimal",)}),
}
"""Each of the paper's experiments as its caption states it: the grids whose runs may hold its
episodes, and the cell fields the caption fixes (Table 3: "minimal harness, vanilla, native";
E2 and E3 are run twice, once per contract, so an E2 run under keys everywhere is E2k whatever
its grid is called). Every experiment is on LIMBO's built-in services. The arms a comparison
contrasts (E2's conditions, E3's vanilla and guard, E5's waits, E6's cue) are fixed by the
comparison itself."""
