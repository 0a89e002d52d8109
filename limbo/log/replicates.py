"""Repeated samples of one cell (``limbo run --repeats K``): pass^k and consistency.

A real model may answer the same cell two ways; ``--repeats K`` runs every cell K times in the
same world, each replicate with its own model-sampling seed. Two numbers summarise how far a
model can be relied on, both over *rated* episodes (:mod:`limbo.log.rated`) and both computed
here once, for ``limbo run``'s summary and the analysis's table alike:

* **pass^k** — the chance that k independent tries at a cell all pass, averaged over cells;
  *pass* is exactly-once (the task done, each required effect exactly once). Per cell with n
  rated replicates of which c passed, the unbiased estimator is C(c, k) / C(n, k) (the share of
  the k-subsets of its replicates that all passed); cells with fewer than k rated replicates
  are left out. pass^1 is the exactly-once rate over cells.
* **consistent** — the share of cells (with at least two rated replicates) whose replicates all
  had the same graded outcome: duplicate, task success and exactly-once alike.

Both are means over cells, and the cells of one world (template, instance) go together, so
their intervals count worlds (:func:`limbo.base.intervals.clustered_mean`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from math import comb
from pathlib import Path
from typing import Any

from limbo.base.intervals import MeanInterval, clustered_mean
from limbo.log.rated import rated

PASS = "exactly_once"
"""The outcome that counts as a pass."""
GRADED = ("duplicate", "task_success", "exactly_once")
"""The outcomes replicates must agree on to count as consistent."""
PASS_K_ESTIMATOR = "unbiased C(c,k)/C(n,k) per cell, averaged over cells"
CONSISTENT_ESTIMATOR = "share of cells whose rated replicates agree on dup, TS and EOS"
INTERVAL = "95% Wilson on the cluster-robust effective n, t(K−1), K = worlds"

Key = tuple[tuple[str, Any], ...]


def pass_hat(c: int, n: int, k: int) -> float:
    """The unbiased estimate of p^k from c passes in n independent tries (k ≤ n)."""
    return comb(c, k) / comb(n, k)


@dataclass
class Replicates:
    """The rated outcomes of every cell's replicates, grouped by cell."""

    outcomes: dict[Key, list[tuple[bool, ...]]] = field(default_factory=lambda: defaultdict(list))
    world: dict[Key, tuple[str, int]] = field(default_factory=dict)
    model: dict[Key, str] = field(default_factory=dict)

    def add(self, cell: Mapping[str, Any], outcome: Mapping[str, Any]) -> None:
        if not rated(outcome["fault_fired"], outcome["termination"]):
            return
        key = tuple((k, v) for k, v in cell.items() if k != "replicate")
        self.outcomes[key].append(tuple(bool(outcome[name]) for name in GRADED))
        self.world[key] = (str(cell["template"]), int(cell["instance"]))
        self.model[key] = str(cell["model"])

    @classmethod
    def of(cls, pairs: Iterable[tuple[Mapping[str, Any], Mapping[str, Any]]]) -> Replicates:
        found = cls()
        for cell, outcome in pairs:
            found.add(cell, outcome)
        return found

    @property
    def most(self) -> int:
        """The most rated replicates any cell has (the largest k pass^k can be taken at)."""
        return max((len(v) for v in self.outcomes.values()), default=0)

    def models(self) -> list[str]:
        return sorted(set(self.model.values()))

    def _mean(self, value: Any, model: str | None) -> MeanInterval:
        sums: dict[tuple[str, int], list[float]] = defaultdict(lambda: [0.0, 0])
        for key, got in self.outcomes.items():
            if model is not None and self.model[key] != model:
                continue
            found = value(got)
            if found is not None:
                slot = sums[self.world[key]]
                slot[0] += found
                slot[1] += 1
        return clustered_mean((s, int(m)) for s, m in sums.values())

    def pass_k(self, k: int, model: str | None = None) -> MeanInterval:
        """pass^k over the cells with at least k rated replicates (of ``model``, or all)."""
        index = GRADED.index(PASS)

        def value(got: list[tuple[bool, ...]]) -> float | None:
            n = len(got)
            return pass_hat(sum(g[index] for g in got), n, k) if n >= k else None

        return self._mean(value, model)

    def consistent(self, model: str | None = None) -> MeanInterval:
        """The share of cells with at least two rated replicates whose outcomes all agree."""
        return self._mean(lambda got: float(len(set(got)) == 1) if len(got) >= 2 else None,
                          model)

    def lines(self) -> list[str]:
        """The summary's lines: pass^1 and pass^K and consistency, overall and per model."""
        k = self.most
        if k < 2:
            return []
        out = [f"repeats: pass^k of exactly-once ({PASS_K_ESTIMATOR}) and consistent outcomes "
               f"({CONSISTENT_ESTIMATOR}); {INTERVAL}:"]
        for model in [None, *self.models()] if len(self.models()) > 1 else [None]:
            top = self.pass_k(k, model)
            out.append(f"  {model or 'all'}: pass^1 {self.pass_k(1, model).shown()}, "
                       f"pass^{k} {top.shown()}, consistent {self.consistent(model).shown()} "
                       f"({top.units} cells in {top.clusters} worlds)")
        return out


def cells_and_outcomes(files: Iterable[Path]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(cell, outcome) of every record in ``files``, each episode once, decoding nothing else
    (:func:`limbo.log.reader.parts`); lines that are not records are skipped."""
    from limbo.log.reader import Skip, lines, parts

    seen: set[str] = set()
    for path in files:
        for line in lines(path):
            found = parts(line.raw)
            if isinstance(found, Skip) or found[1] in seen:
                continue
            seen.add(found[1])
            yield found[2], found[3]
