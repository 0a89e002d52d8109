"""Task templates: data, not code.

A template (``templates/<service>.json`` beside the service's module, for built-in and plugin
services alike) is a short request in natural language plus a plan:
setup steps that prepare the world, the ordered steps a correct agent takes, and for each write
the *intent* — the effect it must produce, matched against the ledger by grading. Variables are
drawn from a generator seeded by (template, instance), so an instance is the same task in every
cell; instance 0 is the canonical one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from functools import cache
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError, model_validator

from limbo.base.errors import UsageError
from limbo.base.hashing import digest, plain_json
from limbo.base.memo import LIMIT, per_object
from limbo.base.rng import generator

if TYPE_CHECKING:
    from limbo.sim.service import Batch, OpSpec, Service

_PLACEHOLDER = re.compile(r"\{([a-z_][a-z0-9_]*)\}")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RowsSpec(_Model):
    n: tuple[int, int]
    fields: dict[str, str | list[str]]


class VarSpec(_Model):
    """How one variable varies by instance: pick from a list, draw an integer, or format."""

    choice: list[Any] | None = None
    range: tuple[int, int, int] | None = None
    format: str | None = None
    rows: RowsSpec | None = None

    @model_validator(mode="after")
    def _one(self) -> VarSpec:
        kinds = [k for k in ("choice", "range", "format", "rows") if getattr(self, k) is not None]
        if len(kinds) != 1:
            raise ValueError(f"a variable needs exactly one of choice/range/format/rows, got {kinds}")
        return self


class IntentRule(_Model):
    """Which ledger effects satisfy a write step."""

    match: list[str] = []
    """Arguments whose instance values an effect must equal."""
    contains: dict[str, str] = {}
    """Arguments that must contain the formatted text."""
    per_row: StrictBool = False
    """A batch write (and only a batch write): each unit is its own intent, matched in the
    shape the unit commits as (:class:`limbo.sim.service.Batch`)."""


class Step(_Model):
    id: str
    tool: str
    args: dict[str, Any]
    save: dict[str, str] = {}
    """Variables taken from the result: name -> dotted path into the result."""
    intent: IntentRule | None = None


class Template(_Model):
    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    service: str
    prompt: str
    vars: dict[str, VarSpec] = {}
    setup: list[Step] = []
    steps: list[Step]

    @property
    def focal_writes(self) -> list[str]:
        """Tools of the write steps, in plan order (each can carry an episode's fault)."""
        seen: list[str] = []
        for step in self.steps:
            if step.intent is not None and step.tool not in seen:
                seen.append(step.tool)
        return seen


class LenientEnv(dict[str, Any]):
    """Variables for :func:`fill` where one not yet known shows as ``?`` (a step's arguments
    read before the task has produced every value they name)."""

    def __missing__(self, key: str) -> str:
        return "?"


def fill(value: Any, env: dict[str, Any]) -> Any:
    """Substitute ``{name}`` placeholders in strings, lists and dicts.

    A string that is exactly one placeholder takes the variable's value with its type. Text
    without a brace has none and is returned as it is, before any pattern runs (most of a
    plan's text: every episode fills its steps).
    """
    if isinstance(value, str):
        if "{" not in value:
            return value
        whole = _PLACEHOLDER.fullmatch(value)
        if whole:
            return env[whole.group(1)]
        return _PLACEHOLDER.sub(lambda m: _text(env[m.group(1)]), value)
    if isinstance(value, list):
        return [fill(v, env) for v in value]
    if isinstance(value, dict):
        return {k: fill(v, env) for k, v in value.items()}
    return value


def _text(value: Any) -> str:
    return value if isinstance(value, str) else plain_json(value)


def dig(result: dict[str, Any], path: str) -> Any:
    """Follow a dotted ``path`` into a result (``charge.charge_id``)."""
    node: Any = result
    for part in path.split("."):
        node = node[part]
    return node


class TaskInstance(BaseModel):
    """One instance of a template: its variables resolved, its intents fixed."""

    model_config = ConfigDict(frozen=True)

    template: Template
    instance: int
    vars: dict[str, Any]

    def prompt(self, env: dict[str, Any]) -> str:
        """The request the agent receives, with ``env`` (variables plus setup results)."""
        return str(fill(self.template.prompt, env))

    def intents(self, env: dict[str, Any],
                ops: Mapping[str, OpSpec] | None = None) -> list[dict[str, Any]]:
        """What the ledger must show, one entry per required effect (``ops``: the world's
        operations by tool name; default: the registered services')."""
        out: list[dict[str, Any]] = []
        for step in self.template.steps:
            if step.intent is not None:
                out.extend(_intents(step, env, ops))
        return out


def _intents(step: Step, env: dict[str, Any],
             ops: Mapping[str, OpSpec] | None) -> list[dict[str, Any]]:
    intent = step.intent
    assert intent is not None
    contains = {k: str(fill(v, env)) for k, v in intent.contains.items()}
    if intent.per_row:
        batch = _batch_of(step.tool, ops)
        return [{"id": f"{step.id}[{i}]", "tool": step.tool, "match": effect, "contains": {}}
                for i, effect in enumerate(batch.effects(fill(step.args, env)))]
    match = {k: fill(step.args[k], env) for k in intent.match}
    return [{"id": step.id, "tool": step.tool, "match": match, "contains": contains}]


def _batch_of(tool: str, ops: Mapping[str, OpSpec] | None) -> Batch:
    from limbo.sim.service import operations

    batch = (ops if ops is not None else operations())[tool].batch
    assert batch is not None, f"{tool} is not a batch write (templates are checked at load)"
    return batch


def _draw(spec: VarSpec, rng: Any, env: dict[str, Any]) -> Any:
    if spec.choice is not None:
        return spec.choice[rng.randrange(len(spec.choice))]
    if spec.range is not None:
        lo, hi, step = spec.range
        return rng.randrange(lo, hi + 1, step)
    if spec.format is not None:
        return fill(spec.format, env)
    assert spec.rows is not None
    n = rng.randint(*spec.rows.n)
    rows = []
    for i in range(n):
        row_env = {**env, "i": i}
        rows.append({name: (f[rng.randrange(len(f))] if isinstance(f, list) else fill(f, row_env))
                     for name, f in spec.rows.fields.items()})
    return rows


def instantiate(template: Template, instance: int) -> TaskInstance:
    """Resolve the template's variables for ``instance`` (deterministic). Every cell of that
    instance gets the same :class:`TaskInstance`, drawn once per process: it is shared, so
    whoever may change its variables copies them (a world does)."""
    drawn = _instances(template)
    task = drawn.get(instance)
    if task is None:
        if len(drawn) >= LIMIT:
            drawn.clear()
        task = drawn[instance] = _instantiate(template, instance)
    return task


@per_object
def _instances(template: Template) -> dict[int, TaskInstance]:
    return {}


def _instantiate(template: Template, instance: int) -> TaskInstance:
    return TaskInstance(template=template, instance=instance,
                        vars=draw(template.id, template.vars, instance))


def draw(template_id: str, specs: Mapping[str, VarSpec], instance: int) -> dict[str, Any]:
    """The variables of instance ``instance`` of template ``template_id``, and ``instance``."""
    rng = generator(f"task:{template_id}", str(instance))
    env: dict[str, Any] = {"instance": instance}
    for name, spec in specs.items():
        env[name] = _draw(spec, rng, env)
    return env


@per_object
def plan_hash(template: Template) -> str:
    """The digest of a template's plan, recorded in every episode header (once per template)."""
    return digest(template.model_dump(mode="json"))


def templates() -> dict[str, Template]:
    """Every registered service's templates (plugins included), by id (sorted)."""
    from limbo.base.registry import entries

    return _templates(tuple(entries("service").values()))


@cache
def _templates(services: tuple[type[Service], ...]) -> dict[str, Template]:
    found: dict[str, Template] = {}
    for cls in services:
        for template in _shipped(cls):
            if template.id in found:
                raise UsageError(f"template {template.id!r} is defined twice (the second time "
                                 f"in {cls.templates_file()})")
            found[template.id] = template
    return dict(sorted(found.items()))


def _shipped(cls: type[Service]) -> list[Template]:
    """The templates service ``cls`` ships (none when it has no template file), checked
    against the registered tools; a :class:`UsageError` naming the file and the problem."""
    path = cls.templates_file()
    if path is None or not path.is_file():
        return []
    try:
        raw = json.loads(path.read_bytes().decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"template file {path} is not valid UTF-8 JSON: {exc}") from None
    if not isinstance(raw, list):
        raise UsageError(f"template file {path} must hold a JSON list of templates")
    out = []
    for i, item in enumerate(raw):
        try:
            template = Template.model_validate(item)
        except ValidationError as exc:
            err = exc.errors(include_url=False)[0]
            loc = ".".join(str(p) for p in err["loc"])
            raise UsageError(f"template file {path}, template {i}: {loc}: {err['msg']}") from None
        _check(template, cls.name, path)
        out.append(template)
    return out


def _check(template: Template, service: str, path: Any) -> None:
    """A template names its own service's tools, and marks exactly the batch writes
    ``per_row`` (their intents are one per unit, in the batch's own effect shape)."""
    from limbo.sim.service import operations

    where = f"template {template.id!r} in {path}"
    if template.service != service:
        raise UsageError(f"{where} says service {template.service!r}, but the file is shipped "
                         f"by service {service!r}")
    ops = operations()
    for step in [*template.setup, *template.steps]:
        op = ops.get(step.tool)
        if op is None:
            raise UsageError(f"{where}: step {step.id!r} calls unknown tool {step.tool!r}")
        if step.intent is not None and step.intent.per_row != (op.batch is not None):
            raise UsageError(f"{where}: step {step.id!r}: per_row must be "
                             f"{str(op.batch is not None).lower()} for {step.tool}")


def template(name: str) -> Template:
    """The built-in template ``name``; a :class:`UsageError` naming the choices if unknown."""
    table = templates()
    if name not in table:
        raise UsageError(f"unknown template {name!r}; choose from: {', '.join(table)}")
    return table[name]
