"""The rules of a world file's templates: tools that exist, arguments they take, focal steps
that are writes, and no parameter that nothing sets.

A template may call its world's tools and the tools of LIMBO's registered services (a comment
on a ticket after a refund); ``tools`` holds the facts of both.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from limbo.sim.tasks import Step, VarSpec
from limbo.sim.worldfile.format import TemplateDef, WorldFile
from limbo.sim.worldfile.plan_rules import MAX_ROWS, check_intents, check_sizes, check_values
from limbo.sim.worldfile.rules import Report, ToolFacts, hint, placeholders


def check_templates(world: WorldFile, tools: Mapping[str, ToolFacts], taken: set[str],
                    report: Report, values: bool = True, needed: bool = True) -> None:
    """Every template of ``world``; ``taken``: template ids LIMBO already has; ``values``:
    whether to check the values steps pass (not when the tools themselves have problems);
    ``needed``: whether the world must have one (``limbo conform`` reads only its tools)."""
    if not world.templates and needed:
        report(("world",), "the world declares no template, so `limbo run` would run no "
                               "episode and `limbo proxy` has no task to give: add a "
                               "[[templates]] with the request and the plan (docs/worlds.md)")
    seen: set[str] = set()
    for i, t in enumerate(world.templates):
        at = ("templates", i)
        if t.id in taken or t.id in seen:
            where = "LIMBO already has a template" if t.id in taken else "another template has"
            report((*at, "id"), f"template id {t.id!r}: {where} this id")
        seen.add(t.id)
        if t.service is not None and t.service not in world.services:
            report((*at, "service"), f"template {t.id!r} is about service {t.service!r}, which "
                                     f"the world does not declare{hint(t.service, world.services)}")
        said: list[str] = []
        told = _counting(report, said)
        _check_steps(t, at, tools, told)
        _check_focal(t, at, tools, world, told)
        _check_parameters(t, at, told)
        check_intents(t, at, tools, told)
        check_sizes(t, at, told)
        if values and not said:  # its parameters can be drawn and its steps' tools are known
            check_values(t, at, tools, report)


def _counting(report: Report, said: list[str]) -> Report:
    def told(path: Sequence[str | int], message: str) -> None:
        said.append(message)
        report(path, message)

    return told


def _check_steps(t: TemplateDef, at: tuple[str | int, ...], tools: Mapping[str, ToolFacts],
                 report: Report) -> None:
    ids: set[str] = set()
    for part in ("setup", "steps"):
        for j, step in enumerate(getattr(t, part)):
            where = (*at, part, j)
            if step.id in ids:
                report((*where, "id"), f"step id {step.id!r} is used twice in template {t.id!r}")
            ids.add(step.id)
            facts = tools.get(step.tool)
            if facts is None:
                report((*where, "tool"), f"step {step.id!r} calls unknown tool {step.tool!r}"
                                         f"{hint(step.tool, tools)}")
                continue
            _check_call(step, facts, where, report)
            _check_save(step, facts, where, report)
            if part == "setup" and (facts.kind != "write" or step.intent is not None):
                report(where, f"setup step {step.id!r} must be a write without an intent (it "
                              f"prepares the world before the agent starts)")


def _check_call(step: Step, facts: ToolFacts, at: Sequence[str | int], report: Report) -> None:
    for arg in step.args:
        if arg not in facts.args:
            report((*at, "args", arg), f"step {step.id!r}: {step.tool} takes no argument {arg!r}"
                                       f"{hint(arg, facts.args)}")
    for arg in sorted(facts.required - set(step.args)):
        report((*at, "args"), f"step {step.id!r}: {step.tool} needs argument {arg!r}")
    intent = step.intent
    if intent is None:
        return
    if facts.kind != "write":
        report((*at, "intent"), f"step {step.id!r}: {step.tool} is a read; only a write has "
                                f"an intent (a required effect)")
        return
    allowed = facts.effect if facts.effect is not None else facts.args
    for field in [*intent.match, *intent.contains]:
        if field not in allowed:
            report((*at, "intent"), f"step {step.id!r}: the intent names {field!r}, which is "
                                    f"not an effect field of {step.tool} "
                                    f"({', '.join(sorted(allowed))})")
    if intent.per_row != facts.batch:
        report((*at, "intent", "per_row"), f"step {step.id!r}: per_row must be "
                                           f"{str(facts.batch).lower()} for {step.tool}")


def _check_save(step: Step, facts: ToolFacts, at: Sequence[str | int], report: Report) -> None:
    """Every ``save`` names a parameter and follows a path the tool's result has: a field,
    or one field into a field that holds a table."""
    for name in step.save:
        _parameter_name(name, (*at, "save", name), "a saved value", report)
    if facts.returns is None:
        return
    for name, path in step.save.items():
        head, *rest = path.split(".")
        if head not in facts.returns:
            report((*at, "save"), f"step {step.id!r} saves {name} from {head!r}, which the "
                                  f"result of {step.tool} does not have"
                                  f"{hint(head, facts.returns)}")
        elif rest and (head not in facts.tables or len(rest) > 1):
            report((*at, "save"), f"step {step.id!r} saves {name} from {path!r}, but "
                                  f"{'.'.join([head, *rest[:-1]])} holds no table (only an "
                                  f"object argument has fields): write save = {{ {name} = "
                                  f"\"{head}\" }}")


def _parameter_name(name: str, at: Sequence[str | int], what: str, report: Report) -> None:
    """A parameter is written ``{name}``, lower case; ``instance`` is LIMBO's own."""
    if not _NAME.fullmatch(name):
        report(at, f"{what} is named {name!r}, which {{{name}}} in a text would not take (a "
                   f"parameter's name is lower case: a-z, 0-9, _); write {name.lower()!r}"
                   if name.lower() != name and _NAME.fullmatch(name.lower()) else
                   f"{what} is named {name!r}; a parameter's name is a-z, 0-9 and _, not "
                   f"starting with a digit")
    elif name in RESERVED_PARAMETERS:
        report(at, f"{what} is named {name!r}, which LIMBO sets itself (the instance number, "
                   f"the row number of a rows variable); name it otherwise")


_NAME = re.compile(r"[a-z_][a-z0-9_]*")
RESERVED_PARAMETERS = ("instance", "i")


def focal_steps(t: TemplateDef) -> list[Step]:
    """The steps whose writes may carry the fault: ``focal``, or every write step."""
    writes = [s for s in t.steps if s.intent is not None]
    if t.focal is None:
        return writes
    return [s for s in writes if s.id in t.focal]


def _check_focal(t: TemplateDef, at: tuple[str | int, ...], tools: Mapping[str, ToolFacts],
                 world: WorldFile, report: Report) -> None:
    writes = {s.id: s for s in t.steps if s.intent is not None}
    if not writes:
        report((*at, "steps"), f"template {t.id!r} has no write step with an intent: nothing "
                               f"to grade and no focal write")
    for name in t.focal or ():
        step = next((s for s in t.steps if s.id == name), None)
        if step is None:
            report((*at, "focal"), f"focal {name!r} is not a step of template {t.id!r}"
                                   f"{hint(name, [s.id for s in t.steps])}")
        elif name not in writes:
            kind = tools[step.tool].kind if step.tool in tools else "unknown"
            report((*at, "focal"), f"focal {name!r} is not a write step with an intent "
                                   f"({step.tool} is a {kind})")
    if t.focal == []:
        report((*at, "focal"), f"template {t.id!r}: focal lists no step")
    if t.service is None and not _own_service(t, world):
        report(at, f"template {t.id!r} calls no write of the world's own services: say which "
                   f"service it is about (service = ...)")


def _own_service(t: TemplateDef, world: WorldFile) -> str | None:
    for step in focal_steps(t) or t.steps:
        for name in world.services:
            if step.tool.startswith(f"{name}_"):
                return name
    return None


def template_service(t: TemplateDef, world: WorldFile) -> str:
    """The service a template is about (checked: there is one)."""
    found = t.service or _own_service(t, world)
    assert found is not None, f"template {t.id} was checked to name a service"
    return found


def _check_parameters(t: TemplateDef, at: tuple[str | int, ...], report: Report) -> None:
    """Every ``{name}`` is set before it is used: by a variable (earlier ones only, in a
    variable's format), the instance number, a setup step's ``save`` or an earlier step's."""
    known = {"instance"}
    for name, spec in t.vars.items():
        _parameter_name(name, (*at, "vars", name), "a variable", report)
        _check_draw(spec, (*at, "vars", name), report)
        uses = placeholders(spec.format) + (placeholders(spec.rows.fields) if spec.rows else [])
        _unset(uses, known | ({"i"} if spec.rows else set()), (*at, "vars", name),
               f"variable {name!r}", t.id, report)
        known.add(name)
    for j, step in enumerate(t.setup):
        _unset(placeholders(step.args), known, (*at, "setup", j, "args"), f"setup step {step.id!r}",
               t.id, report)
        known |= set(step.save)
    _unset(placeholders(t.prompt), known, (*at, "prompt"), "the prompt", t.id, report)
    for j, step in enumerate(t.steps):
        uses = placeholders(step.args) + placeholders(step.intent.contains if step.intent else {})
        _unset(uses, known, (*at, "steps", j, "args"), f"step {step.id!r}", t.id, report)
        known |= set(step.save)


def _check_draw(spec: VarSpec, at: Sequence[str | int], report: Report) -> None:
    """A parameter can be drawn: a range that steps forward, a row count that is bounded."""
    if spec.range is not None:
        lo, hi, step = spec.range
        if step <= 0 or hi < lo:
            report(at, f"range {list(spec.range)} must be [low, high, step] with low <= high "
                       f"and step > 0")
    if spec.rows is not None:
        lo, hi = spec.rows.n
        if not 0 <= lo <= hi <= MAX_ROWS:
            report(at, f"rows n = {list(spec.rows.n)} must be [low, high] with "
                       f"0 <= low <= high <= {MAX_ROWS}")
    if spec.choice is not None and not spec.choice:
        report(at, "choice lists no value")
    for field, values in spec.rows.fields.items() if spec.rows is not None else ():
        if values == []:
            report(at, f"rows field {field!r} lists no value to pick: list some, or write a "
                       f"text")


def _unset(uses: list[str], known: set[str], at: Sequence[str | int], what: str, template: str,
           report: Report) -> None:
    for name in dict.fromkeys(uses):
        if name not in known:
            report(at, f"template {template!r}: {what} uses {{{name}}}, which no variable, "
                       f"setup step or earlier step sets{hint(name, known)}")
