"""The analysis's fast path reads a record's cell, outcome and runtime with msgspec, cut at the
key that follows each; whatever it reads must be what the standard decoder reads from the same
place — value and type — and whatever msgspec refuses goes to that decoder."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from limbo.log.reader import _DECODER, _object_at, parts, wall_of

CELL = '{"model": "policy/blind", "instance": 0, "seed": 1944302310}'
OUTCOME = ('{"fault_fired": true, "commits": {"post": 2}, "agent_time_s": 19.0, "cost_usd": 0.0,'
           ' "termination": "finished", "termination_reason": null}')
LINE = ('{"schema": "limbo.episode/1", "episode_id": "ep-1", "cell": ' + CELL + ', "header": '
        '{"task_prompt": "x"}, "outcome": ' + OUTCOME + ', "report": null, "events": [], '
        '"runtime": {"wall_s": 0.25, "host": "h"}}\n')


def _standard(text: str, start: int) -> object:
    try:
        return _DECODER.raw_decode(text, start)[0]
    except (ValueError, RecursionError) as exc:
        return type(exc)


def _ours(text: str, start: int, after: str) -> object:
    try:
        return _object_at(text, start, after)[0]
    except (ValueError, RecursionError) as exc:
        return type(exc)


def _same(ours: object, theirs: object) -> None:
    """The same value (JSON text: key order, float digits, -0.0, int against float against
    bool) or the same refusal."""
    if isinstance(theirs, type):
        assert ours is theirs
    else:
        assert json.dumps(ours) == json.dumps(theirs)


@pytest.mark.parametrize("value", [
    '{"a": 1e400}', '{"a": -1e400}', '{"a": "\\ud800"}', '{"a": NaN}', '{"a": 01}',
    '{"a": 1, "a": 2}', '{"a": 123456789012345678901234567890}', '{"a": 0.1, "b": 1E5}',
    '{"a": "\\u0000\\n\\"}"}', '{"a": [1,]}', '{"a": -0.0, "b": -0}', '{"a": 1.5e-320}',
    '{"a": ' + "[" * 500 + "]" * 500 + "}", '{"a": "x, \\"header\\": 1"}', '{"a": true} ',
    '{"a": {"b": null}', '{"a": 1}}', '{"a":\t1 }', ' {"a": 1}',
])
def test_a_value_msgspec_reads_is_the_standard_decoders(value: str) -> None:
    text = '{"cell": ' + value + ', "header": {}}\n'
    _same(_ours(text, 9, ', "header": '), _standard(text, 9))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_line_broken_at_random_reads_as_the_standard_decoder_reads_it(data) -> None:
    raw = list(LINE)
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(raw) - 2))
        char = data.draw(st.sampled_from(list('{}[],:"\\ 0aeE-.xn') + ["\x01", "é"]))
        kind = data.draw(st.sampled_from(["replace", "delete", "insert"]))
        if kind == "replace":
            raw[at] = char
        elif kind == "delete":
            del raw[at]
        else:
            raw.insert(at, char)
    text = "".join(raw)
    for key, after in (('"cell": ', ', "header": '), ('"outcome": ', ', "report": ')):
        start = text.find(key)
        if start >= 0:
            _same(_ours(text, start + len(key), after), _standard(text, start + len(key)))


@given(st.floats(allow_nan=False, allow_infinity=False) | st.integers(-2**70, 2**70))
def test_every_number_reads_the_same(number: float) -> None:
    text = '{"cell": {"x": ' + json.dumps(number) + '}, "header": {}}\n'
    _same(_ours(text, 9, ', "header": '), _standard(text, 9))


def test_a_whole_line_gives_its_parts_and_wall_time() -> None:
    found = parts(LINE.encode())
    assert found == ("limbo.episode/1", "ep-1", json.loads(CELL), json.loads(OUTCOME))
    assert wall_of(LINE.encode()) == 0.25


@pytest.mark.parametrize("runtime", [
    '{"wall_s": 0.25, "host": NaN}', '{"wall_s": true}', '{"wall_s": "0.25"}', '{"host": "h"}',
    '[0.25]', '{"wall_s": 0.25,}', '{"wall_s": ' + "[" * 500 + "]" * 500 + "}"])
def test_a_runtime_without_a_plain_wall_time_is_nan(runtime: str) -> None:
    line = LINE.replace('{"wall_s": 0.25, "host": "h"}', runtime)
    assert math.isnan(wall_of(line.encode()))
    assert math.isnan(wall_of(LINE.replace('"runtime"', '"other"').encode()))
