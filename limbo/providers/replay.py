"""``replay/RUN_DIR``: re-drive recorded episodes, and report where they stop matching.

The adapter finds the recorded episode of the cell it is asked to play (by episode id: the
recorded one, or the id the recorded cell gets with ``replay/RUN_DIR`` as its model, which is
what ``limbo run --model replay/RUN_DIR`` produces) and answers each turn with the recorded
turn: text, tool calls, usage. Before answering, it checks what the sandbox returned for the
previous turn's calls against the recording. The first mismatch raises
:class:`ReplayDivergence` naming the turn, the call and both results — so a changed service,
fault or contract shows up at the exact observation it changed. (The episode then ends as
``model_error`` with that message as its recorded reason.)

Turns are rebuilt from the event log: ``turn`` events give each turn's text and tool names,
``call``/``finish``/``result`` events the calls' ids, arguments and results. Arguments that the
log summarised (over 4000 characters) cannot be replayed exactly; such a turn is refused.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from limbo.base.errors import ModelError, UsageError
from limbo.base.hashing import canonical_json
from limbo.episode.models import (
    EpisodeContext,
    Message,
    ModelAdapter,
    ModelTurn,
    ToolCall,
    ToolDef,
    model_adapter,
)
from limbo.log.records import EpisodeRecord, Usage
from limbo.log.store import iter_records, manifests, record_files
from limbo.sim.cell import Cell, episode_id
from limbo.sim.config import Limits, Timing

SHOW = 600
_loaded: dict[tuple[str, float], list[EpisodeRecord]] = {}


class ReplayError(ModelError):
    """The recording cannot drive this episode (none recorded, or a turn not replayable)."""


class ReplayDivergence(ReplayError):
    """The sandbox's observations no longer match the recording."""

    def __init__(self, turn: int, detail: str, call_id: str | None = None,
                 tool: str | None = None, recorded: Any = None, replayed: Any = None) -> None:
        super().__init__(f"replay diverged at turn {turn}: {detail}")
        self.info = {"turn": turn, "detail": detail, "call_id": call_id, "tool": tool,
                     "recorded": recorded, "replayed": replayed}


@dataclass
class RecordedTurn:
    n: int
    text: str | None
    names: list[str]
    calls: list[ToolCall] = field(default_factory=list)
    results: dict[str, Any] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)
    lossy: str | None = None


# ------------------------------------------------------------------ reading a run


def load_records(run_dir: str | Path) -> list[EpisodeRecord]:
    """Every valid record in ``RUN_DIR/episodes*.jsonl`` (lines that are not records — torn,
    corrupt, duplicates — are skipped; ``limbo status`` reports them)."""
    root = Path(run_dir)
    files = record_files(root) if root.is_dir() else []
    if not files:
        raise UsageError(f"no episodes*.jsonl in {str(root)!r}")
    stamp = (str(root.resolve()), max(f.stat().st_mtime for f in files))
    if stamp not in _loaded:
        _loaded.clear()
        _loaded[stamp] = list(iter_records(root))
    return _loaded[stamp]


def _worlds(run_dir: str | Path) -> list[str | None]:
    """The worlds the run's cells may be in: the built-in one, and each world file its
    manifests name (by identity: a replay runs in the same world, loaded with ``--world``)."""
    found: list[str | None] = [None]
    for manifest in manifests(Path(run_dir)).values():
        for world in manifest.get("worlds") or ():
            if isinstance(world, dict) and isinstance(world.get("identity"), str):
                found.append(world["identity"])
    return list(dict.fromkeys(found))


def cell_of(record: EpisodeRecord) -> Cell:
    """The cell a record was run from (timing and limits from its header)."""
    header: Mapping[str, Any] = record.get("header", {})
    return Cell(**record["cell"], timing=Timing(**header.get("timing", {})),
                limits=Limits(**header.get("limits", {})))


def recorded_turns(record: EpisodeRecord) -> list[RecordedTurn]:
    """The model turns of a record, rebuilt from its event log and usage."""
    turns: list[RecordedTurn] = []
    for ev in record.get("events") or []:
        kind = ev.get("type")
        if kind == "turn":
            turns.append(RecordedTurn(n=ev["n"], text=ev.get("text"), names=list(ev.get("tools") or [])))
        elif turns:
            _add_event(turns[-1], kind, ev)
    usage = {u["turn"]: u for u in record.get("usage") or []}
    for t in turns:
        t.usage = Usage(**{k: v for k, v in usage.get(t.n, {}).items() if k != "turn"})
        for i, name in enumerate(t.names[len(t.calls):], start=len(t.calls)):
            t.calls.append(ToolCall(id=f"unexecuted_{t.n}_{i}", name=name, arguments={}))
    return turns


def _add_event(turn: RecordedTurn, kind: str | None, ev: dict[str, Any]) -> None:
    if kind == "call":
        args = ev.get("args")
        if isinstance(args, dict) and "_truncated" in args and "_chars" in args:
            turn.lossy = f"the arguments of {ev.get('tool')} ({ev.get('id')}) were summarised in the log"
        turn.calls.append(ToolCall(id=ev["id"], name=ev["tool"], arguments=args))
    elif kind == "finish":
        turn.calls.append(ToolCall(id=ev["id"], name="finish", arguments=ev.get("report") or {}))
    elif kind == "result":
        turn.results[ev["id"]] = ev.get("result")
        if ev.get("tool") == "finish" and all(c.id != ev["id"] for c in turn.calls):
            turn.lossy = "a refused finish call's arguments are not in the log"
            turn.calls.append(ToolCall(id=ev["id"], name="finish", arguments={}))


# ------------------------------------------------------------------ the adapter


def _short(value: Any) -> str:
    text = canonical_json(value)
    return text if len(text) <= SHOW else text[:SHOW] + "..."


@model_adapter("replay")
class ReplayAdapter(ModelAdapter):
    """Answers with the recorded turns of the matching episode in ``RUN_DIR``."""

    offline = True

    def __init__(self, model: str, records: list[EpisodeRecord] | None = None,
                 **params: Any) -> None:
        if params:
            raise UsageError(f"replay/{model}: takes no parameters (got {', '.join(params)})")
        super().__init__(model)
        self.records = records if records is not None else load_records(model)
        self.worlds = _worlds(model) if records is None else [None]
        self._index = self._build_index()
        self._turns: list[RecordedTurn] | None = None
        self._record: EpisodeRecord | None = None
        self._next = 0
        self.divergence: dict[str, Any] | None = None

    @classmethod
    def price_per_mtok(cls, model: str, params: dict[str, Any]) -> dict[str, float] | None:
        """Replaying calls no model: free (the recorded usage and cost are reported as they
        were)."""
        return {"input": 0.0, "cached_input": 0.0, "output": 0.0}

    def _build_index(self) -> dict[str, EpisodeRecord]:
        index: dict[str, EpisodeRecord] = {}
        for rec in self.records:
            header: Mapping[str, Any] = rec.get("header", {})
            replayed = {**rec["cell"], "model": self.spec, "timing": header.get("timing"),
                        "limits": header.get("limits")}
            index.setdefault(rec["episode_id"], rec)
            for world in self.worlds:
                index.setdefault(episode_id({**replayed, "world": world}), rec)
        return index

    async def generate(self, messages: list[Message], tools: list[ToolDef],
                       ctx: EpisodeContext) -> ModelTurn:
        if self._turns is None:
            self._record = self._index.get(ctx.episode_id)
            if self._record is None:
                raise ReplayError(f"{self.spec}: no recorded episode {ctx.episode_id}")
            self._turns = recorded_turns(self._record)
        try:
            self._check(messages)
        except ReplayDivergence as exc:
            self.divergence = exc.info
            raise
        return self._answer()

    def _answer(self) -> ModelTurn:
        assert self._turns is not None
        if self._next >= len(self._turns):
            self._diverge(self._next + 1, "the episode asks for a turn the recording does not have")
        turn = self._turns[self._next]
        if turn.lossy:
            raise ReplayError(f"cannot replay turn {turn.n} exactly: {turn.lossy}")
        self._next += 1
        return ModelTurn(text=turn.text, tool_calls=turn.calls, usage=turn.usage)

    def _diverge(self, turn: int, detail: str, **info: Any) -> NoReturn:
        raise ReplayDivergence(turn, detail, **info)

    def _check(self, messages: list[Message]) -> None:
        """Compare what the sandbox just returned with the recording."""
        assert self._turns is not None and self._record is not None
        if self._next == 0:
            prompt = self._record.get("header", {}).get("task_prompt")
            user = next((m.content for m in messages if m.role == "user"), None)
            if prompt is not None and user != prompt:
                self._diverge(1, "the task prompt differs", recorded=prompt, replayed=user)
            return
        prev = self._turns[self._next - 1]
        last = max(i for i, m in enumerate(messages) if m.role == "assistant")
        seen = [m for m in messages[last + 1:] if m.role == "tool"]
        for m in seen:
            self._compare(prev, m)
        missing = [cid for cid in prev.results if cid not in {m.tool_call_id for m in seen}]
        if missing:
            self._diverge(prev.n, f"no result for recorded call(s) {', '.join(missing)}")

    def _compare(self, prev: RecordedTurn, m: Message) -> None:
        tool = m.name or next((c.name for c in prev.calls if c.id == m.tool_call_id), None)
        cid = m.tool_call_id
        if cid is None or cid not in prev.results:
            self._diverge(prev.n, f"a result for {tool} ({cid}) that was not recorded",
                          call_id=cid, tool=tool, replayed=m.content)
        recorded = prev.results[cid]
        try:
            replayed = json.loads(m.content)
        except json.JSONDecodeError:
            replayed = m.content
        if canonical_json(replayed) != canonical_json(recorded):
            self._diverge(prev.n, f"{tool} ({m.tool_call_id}) returned {_short(replayed)}; "
                          f"the recording has {_short(recorded)}", call_id=m.tool_call_id,
                          tool=tool, recorded=recorded, replayed=replayed)


# ------------------------------------------------------------------ checking a whole run


@dataclass
class ReplayCheck:
    """Result of replaying one recorded episode."""

    episode_id: str
    identical: bool
    divergence: dict[str, Any] | None
    first_difference: str | None
    termination: str


def _plain(record: EpisodeRecord) -> Any:
    return json.loads(json.dumps({k: v for k, v in record.items() if k != "runtime"}))


def first_difference(a: Any, b: Any, path: str = "") -> str | None:
    """Where two JSON values first differ (``events[7].result``), or None."""
    if type(a) is not type(b):
        return path or "."
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                return f"{path}.{k}".lstrip(".")
            found = first_difference(a[k], b[k], f"{path}.{k}")
            if found:
                return found.lstrip(".")
        return None
    if isinstance(a, list):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            found = first_difference(x, y, f"{path}[{i}]")
            if found:
                return found
        return None if len(a) == len(b) else f"{path}[{min(len(a), len(b))}]"
    return None if a == b else (path or ".")


def verify_run(run_dir: str | Path, records: list[EpisodeRecord] | None = None) -> list[ReplayCheck]:
    """Replay every episode of a run under its recorded cell; report which reproduce exactly
    (records equal except ``runtime``) and where the others first diverge."""
    from limbo.episode.run_one import run_episode

    records = records if records is not None else load_records(run_dir)
    checks = []
    for rec in records:
        adapter = ReplayAdapter(str(run_dir), records=records)
        new = run_episode(cell_of(rec), adapter)
        old_plain, new_plain = _plain(rec), _plain(new)
        diff = first_difference(old_plain, new_plain)
        checks.append(ReplayCheck(rec["episode_id"], diff is None, adapter.divergence, diff,
                                  new["outcome"]["termination"]))
    return checks
