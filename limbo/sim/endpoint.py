"""The innermost layer of the boundary: the contract in front of the services.

It delivers a request to its service at the current sim time — applying the idempotency-key
rules of the contract, read lags and stale views — and appends what commits to the ledger.
Faults sit outside it and only decide *when* and *whether* a request arrives and what the
agent hears back.
"""

from __future__ import annotations

from typing import Any

from limbo.base.hashing import digest
from limbo.sim.events import EventLog
from limbo.sim.keystore import KeyRecord, ServiceKeyStore
from limbo.sim.readback import resolve
from limbo.sim.request import Request
from limbo.sim.results import Result, copied, error
from limbo.sim.service import BatchCut, Contract, OpContext, OpSpec, Service, View


class Endpoint:
    """Delivers requests to services under one contract, for one principal."""

    def __init__(self, services: dict[str, Service], contract: Contract, principal: str,
                 log: EventLog, ledger: list[dict[str, Any]]) -> None:
        self.services = services
        self.contract = Contract.parse(contract)
        self.principal = principal
        self.log = log
        self.ledger = ledger
        self.keys = ServiceKeyStore()

    @property
    def now(self) -> float:
        return float(self.log.env.now)

    def read_lag(self, op: OpSpec, args: dict[str, Any]) -> float | None:
        """Lag of read ``op`` with ``args`` in seconds; ``None`` when there is no read path."""
        assert op.lag is not None
        return op.lag(args)

    def write_class(self, op: OpSpec, args: dict[str, Any]) -> dict[str, str]:
        """The write class of ``op`` with ``args`` under this contract."""
        plan = resolve(op, args)
        return op.write_class(self.contract, args, plan.lag if plan is not None else None)

    def deliver(self, req: Request) -> Result:
        """The request reaches its service now; returns the service's response.

        The response is a copy: whatever a harness, scaffold or fault does to it can never
        reach the service's rows or the response a key replays."""
        result = self._read(req) if req.op.kind == "read" else self._write(req)
        return copied(result)  # type: ignore[no-any-return]

    def _read(self, req: Request) -> Result:
        lag = self.read_lag(req.op, req.args)
        if lag is None:
            return error("not_available", f"{req.op.tool} is not available for these arguments")
        horizon = self.now - lag
        if req.stale_as_of is not None:
            horizon = min(horizon, req.stale_as_of)
        if horizon < self.now:
            self._note_lag(req, horizon)
        return self.services[req.op.service].call(req.op.name, View(horizon), req.args)

    def _note_lag(self, req: Request, horizon: float) -> None:
        """Log the committed effects on this service that a lagging or stale read cannot see
        yet, so a timeline shows why the agent's read missed its own write. The ledger is in
        commit order, so only its tail past the horizon is scanned."""
        hidden = []
        for entry in reversed(self.ledger):
            if entry["t"] <= horizon:
                break
            if entry["service"] == req.op.service:
                hidden.append(entry["seq"])
        if hidden:
            self.log.emit("lagged_read", tool=req.op.tool, request_id=req.id, horizon=horizon,
                          hidden=hidden[::-1])

    def _write(self, req: Request) -> Result:
        op = req.op
        scope = (self.principal, op.key_space)
        key = req.key if req.key is not None and op.honours_key(self.contract, req.args) else None
        prior: list[Any] = []
        fingerprint = ""
        if key is not None:  # only a key compares fingerprints
            fingerprint = digest([op.tool, req.args])
            record = self.keys.lookup(scope, key, self.now)
            if record is not None and record.fingerprint != fingerprint:
                return error("idempotency_mismatch",
                             "this idempotency_key was used with other arguments")
            if record is not None and record.response is not None:
                if not req.dry_run:
                    self.log.emit("replay", request_id=req.id, attempt=req.attempt, key=key)
                return {**record.response, "idempotent_replayed": True}
            prior = list(record.units) if record is not None else []
        service = self.services[op.service]
        saved = service.snapshot() if req.dry_run else None
        ctx = OpContext(self.now, unit_limit=req.cut_after, prior_units=prior)
        complete = True
        try:
            result = service.call(op.name, ctx, req.args)
        except BatchCut:
            complete = False
            result = error("server_error", "internal error: the batch stopped part-way")
        if saved is not None:
            service.restore(saved)
            return result
        self._commit(req, ctx, key)
        units = prior + [e.object_id for e in ctx.effects]
        if key is not None and (units or result["ok"]):
            response = copied(result) if (complete and result["ok"]) else None
            ttl = op.key_ttl(self.contract, req.args)
            self.keys.record(scope, key, KeyRecord(fingerprint, self.now, ttl, response, units))
        return result

    def _commit(self, req: Request, ctx: OpContext, key: str | None) -> None:
        if not ctx.effects:
            return
        write_class = self.write_class(req.op, req.args)
        for effect in ctx.effects:
            self.ledger.append({
                "seq": len(self.ledger), "t": self.now, "service": req.op.service,
                "op": req.op.name, "tool": req.op.tool, "args": effect.args,
                "object_id": effect.object_id, "request_id": req.id, "attempt": req.attempt,
                "key": key, "write_class": write_class, "reverses": effect.reverses,
            })
            self.log.emit("commit", seq=len(self.ledger) - 1, tool=req.op.tool,
                          request_id=req.id, attempt=req.attempt, object_id=effect.object_id)
