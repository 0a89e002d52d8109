"""Deploy: every trigger starts a new run (like a workflow dispatch, which offers no key);
runs are irreversible. Run lists are strongly consistent."""

from __future__ import annotations

from typing import Any, Literal

from limbo.sim.results import Result, error, ok
from limbo.sim.service import (
    OpContext,
    ReadBack,
    Service,
    VersionedTable,
    View,
    read,
    service,
    write,
)

RUN_SECONDS = 60.0


@service("deploy")
class Deploy(Service):
    def __init__(self, seed: int | str) -> None:
        super().__init__(seed)
        self.runs = VersionedTable()

    @write(reversibility="irreversible",
           readback=lambda a: ReadBack("list_runs", {"service": a["service"], "limit": 20},
                                       {"version": a["version"], "environment": a["environment"]}))
    def trigger(self, ctx: OpContext, service: str, version: str,
                environment: Literal["staging", "production"]) -> Result:
        """Start a deployment run of a service version to an environment. Returns the run_id."""
        run_id = self.mint("run")
        self.runs.put(run_id, {"run_id": run_id, "service": service, "version": version,
                               "environment": environment, "_started": ctx.now}, ctx.now)
        ctx.commit({"service": service, "version": version, "environment": environment}, run_id)
        return ok(run_id=run_id, status="queued")

    @read()
    def list_runs(self, view: View, service: str, limit: int = 20) -> Result:
        """List a service's deployment runs, newest first."""
        rows = [_show(r, view) for _, r in self.runs.scan(view) if r["service"] == service]
        return ok(items=rows[::-1][:limit])

    @read()
    def get_run(self, view: View, run_id: str) -> Result:
        """Get one deployment run by id."""
        row = self.runs.get(run_id, view)
        if row is None:
            return error("not_found", f"no run {run_id}")
        return ok(run=_show(row, view))


def _show(row: dict[str, Any], view: View) -> dict[str, Any]:
    status = "succeeded" if view.horizon - row["_started"] >= RUN_SECONDS else "running"
    return {**{k: v for k, v in row.items() if not k.startswith("_")}, "status": status}
