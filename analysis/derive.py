"""The columns the loader derives from each record's cell and outcome: the focal write's
contract class, whether the episode is errored and whether it is rated (:mod:`limbo.log.rated`, the
one rule every reader uses). Fault families and groups come from each run's design
(:mod:`limbo.analysis.runs`)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from limbo.log.rated import errored, rated
from limbo.log.records import FLAGS

CATEGORIES = ("model", "harness", "condition", "contract", "fault", "service", "template",
              "focal_write", "report_status", "termination", "idempotency", "read_path",
              "reversibility", "family", "group", "contract_class")


def contract_class(idempotency: str, read_path: str) -> str:
    """The focal write's tool-contract class, as the paper groups writes: a key the service
    honours, a write that is idempotent by nature, or a plain write by its read-back path."""
    if idempotency == "keyed":
        return "keyed"
    if idempotency in ("natural", "conditional"):
        return "idempotent"
    if idempotency == "unknown":
        return "unknown"
    return {"strong": "no key, strong read", "eventual": "no key, eventual read",
            "none": "no key, no read"}.get(read_path, f"no key, {read_path} read")


def derive(frame: pd.DataFrame) -> pd.DataFrame:
    """Add the columns every table uses: contract class, error, rated — each rule asked once
    per level of the categorical columns it reads, not once per row."""
    for name in FLAGS:
        frame[name] = frame[name].astype(bool)
    frame["instance"] = frame["instance"].astype(int)
    for name in (*CATEGORIES[:-3], "schema"):  # few levels: filters and groups use int codes
        frame[name] = pd.Categorical(frame[name].astype(str))
    idem, read = frame["idempotency"].cat, frame["read_path"].cat
    pair = idem.codes.to_numpy() * len(read.categories) + read.codes.to_numpy()
    classes = [contract_class(i, r) for i in idem.categories for r in read.categories]
    frame["contract_class"] = pd.Categorical(np.asarray(classes, dtype=object)[pair])
    terms = frame["termination"].cat
    codes = terms.codes.to_numpy()

    def per_level(rule: Callable[[str], bool]) -> np.ndarray:
        levels = np.array([rule(t) for t in terms.categories], dtype=bool)
        found: np.ndarray = levels[codes]
        return found

    frame["error"] = per_level(errored)
    frame["rated"] = np.where(frame["fault_fired"], per_level(lambda t: rated(True, t)),
                              per_level(lambda t: rated(False, t)))
    return frame
