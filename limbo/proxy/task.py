"""The task of a proxied episode: a template of the world file, instantiated as in the sandbox.

Its variables are drawn for ``--instance`` exactly as a sandbox cell draws them
(:func:`limbo.sim.tasks.instantiate`); its setup steps are sent to the upstream before the agent
starts (no fault, not in the ledger: they make the state the task starts from, like the
sandbox's setup), and what they ``save`` fills the prompt and the intents. The intents are the
required effects the ledger is graded against.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from limbo.base.errors import UsageError
from limbo.proxy.declared import Catalog
from limbo.proxy.shapes import payload
from limbo.proxy.upstream import Upstream, UpstreamLost
from limbo.sim.readback import resolve
from limbo.sim.service import Contract
from limbo.sim.tasks import LenientEnv, TaskInstance, dig, fill, instantiate
from limbo.sim.worldfile.kit import WorldTemplate
from limbo.sim.worldfile.template_rules import focal_steps, template_service


@dataclass(frozen=True)
class Task:
    instance: TaskInstance
    env: dict[str, Any]
    """The variables and what the setup saved."""

    @property
    def template(self) -> WorldTemplate:
        assert isinstance(self.instance.template, WorldTemplate)
        return self.instance.template

    def prompt(self) -> str:
        return self.instance.prompt(self.env)

    def intents(self, catalog: Catalog) -> list[dict[str, Any]]:
        return self.instance.intents(self.env, {n: t.op for n, t in catalog.tools.items()})

    def write_class(self, catalog: Catalog, focal: str) -> dict[str, str] | None:
        """The focal write's class, with the plan's arguments for it (as the sandbox has it)."""
        for step in self.template.steps:
            if step.tool == focal:
                op = catalog.tools[focal].op
                args = fill(step.args, LenientEnv(self.env))
                plan = resolve(op, args)
                return op.write_class(Contract.NATIVE, args, plan.lag if plan else None)
        return None



def template(catalog: Catalog, name: str | None) -> WorldTemplate:
    """The world file's template ``name`` (the only one, when there is one and no name)."""
    found = {t.id: t for t in catalog.world.templates}
    if name is None and len(found) == 1:
        name = next(iter(found))
    if name is None or name not in found:
        what = f"--template {name!r} is not a template of" if name else "name the task (--template) of"
        raise UsageError(f"{what} world {catalog.identity}; its templates: "
                         f"{', '.join(found) or '(none: add [[templates]] to the world file)'}")
    t = found[name]
    for step in [*t.setup, *t.steps]:
        if step.tool not in catalog.tools:
            raise UsageError(f"task {name}: step {step.id!r} calls {step.tool}, which is not a "
                             f"tool of a proxy-only service of the world")
    focal = [s.id for s in focal_steps(t)] if t.focal is not None else None
    return WorldTemplate(id=t.id, service=template_service(t, catalog.world), prompt=t.prompt,
                         vars=t.vars, setup=t.setup, steps=t.steps, focal=focal)


async def prepare(t: WorldTemplate, instance: int, catalog: Catalog,
                  upstream: Upstream) -> Task:
    """The task instance, its setup sent to the upstream."""
    task = instantiate(t, instance)
    env = dict(task.vars)
    for step in t.setup:
        args = fill(step.args, env)
        try:
            answer = payload(await upstream.call(catalog.wire_name(step.tool), args))
        except UpstreamLost as exc:
            raise UsageError(f"task {t.id}: setup step {step.id!r} got no answer from the "
                             f"upstream: {exc}") from None
        if not answer.get("ok"):
            raise UsageError(f"task {t.id}: setup step {step.id!r} ({step.tool}) failed on the "
                             f"upstream: {str(answer)[:300]}")
        for name, path in step.save.items():
            try:
                env[name] = dig(answer, path)
            except (KeyError, TypeError, IndexError):
                raise UsageError(f"task {t.id}: setup step {step.id!r} saves {name} from "
                                 f"{path!r}, which its answer does not hold: "
                                 f"{str(answer)[:300]}") from None
    return Task(task, env)
