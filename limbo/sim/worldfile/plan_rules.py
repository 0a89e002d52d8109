"""The rules of a template's plan that depend on *when* its values are known, and on what
they are.

A template's values become known at three moments: its variables (drawn per instance, with
``instance``) before anything runs; what its setup steps ``save``, at time 0, before the agent
starts; what its plan's own steps ``save``, only once the agent has made those calls — and
then from whatever the agent's calls returned. The intents, the effects grading looks for, are
fixed when the episode starts, before the agent runs, so they may use the first two only: an
intent naming a value saved from the agent's own step cannot be computed (every episode would
end ``infra_error``), and is refused here.

The values a step passes must also be values its tool accepts, as the boundary checks a call:
a literal as written, a parameter as drawn for the first instances (and every value of a
``choice`` or the ends of a ``range`` it takes whole).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from limbo.sim.tasks import Step, VarSpec, draw, fill
from limbo.sim.worldfile.format import TemplateDef
from limbo.sim.worldfile.rules import Report, ToolFacts, placeholders

Path = Sequence[str | int]
INSTANCES = 3
"""Instances whose drawn parameters are checked against the tools (0 is the canonical one)."""


def check_intents(t: TemplateDef, at: Path, tools: Mapping[str, ToolFacts],
                  report: Report) -> None:
    """Every intent is fixed before the agent runs, from what its step passes."""
    before = {"instance", *t.vars, *(name for step in t.setup for name in step.save)}
    saved_by = {name: step.id for step in t.steps for name in step.save}
    for j, step in enumerate(t.steps):
        intent = step.intent
        if intent is None:
            continue
        where = (*at, "steps", j, "intent")
        required = tools[step.tool].required if step.tool in tools else frozenset()
        for field in intent.match:
            if field not in step.args and field not in required:  # (else: said as needed)
                report((*where, "match"), f"step {step.id!r}: the intent matches {field!r}, "
                                          f"which the step does not pass: give {field} in args, "
                                          f"or drop it from match")
        for (kind, field), names in _intent_uses(step).items():
            for name in dict.fromkeys(names):
                if name not in before and name in saved_by:
                    report(where, _too_late(step, kind, field, name, saved_by[name]))


def _intent_uses(step: Step) -> dict[tuple[str, str], list[str]]:
    """The parameters each part of a step's intent is computed from, by (kind, field)."""
    intent = step.intent
    assert intent is not None
    if intent.per_row:
        return {("batch", k): placeholders(v) for k, v in step.args.items()}
    uses = {("match", f): placeholders(step.args[f]) for f in intent.match if f in step.args}
    uses.update({("contains", k): placeholders(v) for k, v in intent.contains.items()})
    return uses


FIXES = {"batch": "give the batch's arguments from variables or setup steps",
         "match": "drop {field} from match and check a fixed part of it with contains",
         "contains": "write the contains text from variables or setup steps"}
SAID = {"batch": "batch argument {field}", "match": "match on {field}",
        "contains": "contains on {field}"}


def _too_late(step: Step, kind: str, field: str, name: str, saver: str) -> str:
    return (f"step {step.id!r}: the intent's {SAID[kind].format(field=field)} uses {{{name}}}, "
            f"which step {saver!r} saves from the agent's call, known only after the agent "
            f"acts; an intent is fixed before the agent runs, from the variables and what setup "
            f"steps save: {FIXES[kind].format(field=field)}")


MAX_ROWS = 1000
"""The most rows a ``rows`` variable may draw (a batch of more is refused)."""
MAX_TEXT = 1_000_000
"""The most characters a filled parameter, prompt or step argument may have. A tool's strings
are capped at 8000; the cap stops a file of a few lines whose formats repeat one another
(``{a}{a}{a}``, each of the next) from filling memory when its parameters are drawn."""
SAVED = 10_000
"""The size assumed of a value a step saves (a field of a result)."""


def check_sizes(t: TemplateDef, at: Path, report: Report) -> None:
    """No parameter, prompt or step argument can grow past :data:`MAX_TEXT` once filled
    (estimated from the file, before anything is drawn)."""
    sizes: dict[str, int] = {"instance": 20, "i": 6}
    said: set[str] = set()  # too big, or made of one that is: named once, at the first
    for name, spec in t.vars.items():
        sizes[name] = _var_size(spec, sizes)
        uses = placeholders(spec.format) + placeholders(spec.rows.fields if spec.rows else {})
        if said & set(uses) or sizes[name] > MAX_TEXT:
            if not said & set(uses):
                report((*at, "vars", name), _too_big(t, f"variable {name!r}", sizes[name]))
            said.add(name)
    texts: list[tuple[Path, Any, str]] = [(("prompt",), t.prompt, "the prompt")]
    texts += [((part, j, "args"), step.args, f"step {step.id!r}'s arguments")
              for part in ("setup", "steps") for j, step in enumerate(getattr(t, part))]
    for where, value, what in texts:
        size = _size(value, sizes)
        if size > MAX_TEXT and not said & set(placeholders(value)):
            report((*at, *where), _too_big(t, what, size))


def _too_big(t: TemplateDef, what: str, size: int) -> str:
    shown = f"{size:,}" if size < 10**15 else f"about 10^{len(str(size)) - 1}"
    return (f"template {t.id!r}: {what} can reach {shown} characters once its parameters are "
            f"filled; at most {MAX_TEXT:,} (a tool's strings hold 8,000): use each parameter "
            f"fewer times")


def _var_size(spec: VarSpec, sizes: Mapping[str, int]) -> int:
    if spec.choice is not None:
        return max((len(json.dumps(v, default=str)) for v in spec.choice), default=0)
    if spec.format is not None:
        return _size(spec.format, sizes)
    if spec.rows is not None:
        row = sum(len(f) + 6 + (max(map(len, v), default=0) if isinstance(v, list)
                                else _size(v, sizes)) for f, v in spec.rows.fields.items())
        return min(max(spec.rows.n[1], 0), MAX_ROWS) * (row + 2)  # (more rows: said apart)
    return 20  # a range: an integer


def _size(value: Any, sizes: Mapping[str, int]) -> int:
    """The most characters ``value`` can have once its ``{name}`` are filled."""
    if isinstance(value, str):
        return len(value) + sum(sizes.get(n, SAVED) for n in placeholders(value))
    if isinstance(value, list):
        return sum(_size(v, sizes) for v in value)
    if isinstance(value, dict):
        return sum(len(str(k)) + _size(v, sizes) for k, v in value.items())
    return 20


def check_values(t: TemplateDef, at: Path, tools: Mapping[str, ToolFacts],
                 report: Report) -> None:
    """Every value a step passes is one its tool accepts (checked for the first instances;
    what a setup or plan step saves is not known before a run, so is not checked)."""
    envs = _drawn(t, at, report)
    for part in ("setup", "steps"):
        for j, step in enumerate(getattr(t, part)):
            facts = tools.get(step.tool)
            if facts is None or facts.fits is None:
                continue
            for name, value in step.args.items():
                why = _misfit(facts, name, value, envs, t.vars)
                if why is not None:
                    report((*at, part, j, "args", name), f"step {step.id!r}: {step.tool} "
                                                         f"argument {name} = {why}")


def _drawn(t: TemplateDef, at: Path, report: Report) -> list[dict[str, Any]]:
    """The parameters of the first instances (none, and the problem said, when a variable
    cannot be drawn: a case the other rules should have named)."""
    try:
        return [draw(t.id, t.vars, n) for n in range(INSTANCES)]
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        report((*at, "vars"), f"template {t.id!r}: its variables cannot be drawn "
                              f"({type(exc).__name__}: {exc})")
        return []


def _misfit(facts: ToolFacts, name: str, value: Any, envs: list[dict[str, Any]],
            specs: Mapping[str, VarSpec]) -> str | None:
    """What is wrong with ``value`` as argument ``name``, said with the value it takes."""
    assert facts.fits is not None
    names = placeholders(value)
    if not names:
        why = facts.fits.misfit(name, value)
        return None if why is None else f"{value!r} is not a value it accepts: {why}"
    for candidate, where in _candidates(value, names, envs, specs):
        why = facts.fits.misfit(name, candidate)
        if why is not None:
            return (f"{value!r} gives {_short(candidate)} {where}, which is not a value it "
                    f"accepts: {why}")
    return None


def _candidates(value: Any, names: list[str], envs: list[dict[str, Any]],
                specs: Mapping[str, VarSpec]) -> list[tuple[Any, str]]:
    """The values ``value`` takes: every value of a whole ``choice`` or the ends of a whole
    ``range``, else its filling in each drawn instance (when it uses only parameters)."""
    spec = specs.get(names[0]) if isinstance(value, str) and value == f"{{{names[0]}}}" else None
    if spec is not None and spec.choice is not None:
        return [(v, f"(one of the choice of {names[0]})") for v in spec.choice]
    if spec is not None and spec.range is not None:
        lo, hi, step = spec.range
        return [(lo, f"(the lowest of {names[0]})"),
                (lo + (hi - lo) // step * step, f"(the highest of {names[0]})")] if step > 0 else []
    return [(fill(value, env), f"in instance {env['instance']}") for env in envs
            if all(n in env for n in names)]


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:79] + "…"
