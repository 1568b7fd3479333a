"""Hostile input to `monitor replay`'s parsing path: every line is accepted or rejected with
a reason that names the problem; nothing crashes, nothing is silently dropped."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.contract.events import EventError, parse_event
from monitor.model import ClusterModel
from monitor.query.replay import replay

GOOD = {
    "schema_version": 1,
    "kind": "replica",
    "cluster": "c",
    "observed_at": 1,
    "topic": "t",
    "partition": 0,
    "broker": 1,
    "log_end_offset": 5,
}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=10,
)


@st.composite
def hostile_lines(draw: st.DrawFn) -> bytes:
    choice = draw(st.integers(0, 6))
    if choice == 0:  # a valid event with one field replaced by anything
        ev = dict(GOOD)
        ev[draw(st.sampled_from(sorted(GOOD)))] = draw(json_values)
        return json.dumps(ev).encode()
    if choice == 1:  # arbitrary bytes, invalid UTF-8 included
        return draw(st.binary(max_size=200)).replace(b"\n", b" ")
    if choice == 2:  # arbitrary JSON
        return json.dumps(draw(json_values)).encode()
    if choice == 3:  # huge or negative numbers, NaN
        ev = dict(GOOD)
        ev["log_end_offset"] = draw(st.sampled_from([-1, 2**64, -(2**70), 1e308]))
        return json.dumps(ev).replace("1e+308", "NaN").encode()
    if choice == 4:  # deep nesting
        depth = draw(st.integers(100, 5000))
        return b"[" * depth + b"]" * depth
    if choice == 5:  # a giant string
        ev = dict(GOOD, topic="x" * draw(st.integers(250, 200_000)))
        return json.dumps(ev).encode()
    return json.dumps(dict(GOOD, kind=draw(st.text(max_size=12)))).encode()


@settings(max_examples=400, deadline=None)
@given(st.lists(hostile_lines(), min_size=1, max_size=20))
def test_every_line_accepted_or_rejected_with_a_reason(lines: list[bytes]) -> None:
    rejected: list[tuple[int, str]] = []
    stats = replay(lines, ClusterModel(), lambda f: None, lambda n, r: rejected.append((n, r)))
    assert stats.lines == len(lines) == stats.accepted + stats.rejected
    assert len(rejected) == stats.rejected
    for _n, reason in rejected:
        assert reason and len(reason) < 2_000  # a reason, not a dump of the input


@settings(max_examples=300, deadline=None)
@given(hostile_lines())
def test_parse_raises_only_event_error(line: bytes) -> None:
    try:
        parse_event(line)
    except EventError as e:
        assert str(e)


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(sorted(GOOD)), json_values)
def test_a_bad_field_is_named_in_the_reason(name: str, value: object) -> None:
    """A valid event with one field replaced by anything: accepted, or refused with a reason
    that names that field -- what on-call greps for, not only "a reason" (a contract whose
    errors dropped the field names passed the test above)."""
    line = json.dumps(dict(GOOD, **{name: value})).encode()
    try:
        parse_event(line)
    except EventError as e:
        assert name in str(e), (name, value, str(e))
