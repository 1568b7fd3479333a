"""``streaming.records.read_record`` gives exactly pydantic's verdict, at msgspec's speed.

The oracle is the contract itself: ``to_model(parse_event(raw))``, or the ``EventError`` it
raises. Every record ``record_cases`` knows (scenario files, hostile records, a lenient
reader's traps, valid records in unusual spellings, long values, records broken at random),
the generator's collector-shaped rounds and the traps where msgspec and jiter could differ
get the same model record or the same reason. And the fast path is what the collector's
records take (else the speed is not there).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from monitor.contract.events import EventError, parse_event, to_model
from monitor.dev.rounds import fold
from monitor.dev.synth import generate
from streaming import records as R
from tests.streaming.record_cases import (
    BASES,
    BROKER,
    HOSTILE,
    LONG_VALUES,
    PARTITION,
    PARTITION_ROUND,
    TRAPS,
    VALID,
    VALID_SPELLINGS,
    broken_records,
    scenario_records,
)

#: jiter's recursion limit: a value nested inside more than this many containers is refused.
JSON_MAX_DEPTH = 200


def _verdict(read: Any, raw: bytes | str) -> Any:
    try:
        return ("ok", read(raw))
    except EventError as e:
        return ("refused", str(e))


def _exact(raw: bytes | str) -> Any:
    return to_model(parse_event(raw))


def _agree(records: list[bytes]) -> int:
    """Each record's verdict (as bytes and as text) is pydantic's; the number accepted."""
    accepted = 0
    for raw in records:
        expected = _verdict(_exact, raw)
        assert _verdict(R.read_record, raw) == expected, raw[:300]
        try:
            text = raw.decode()
        except UnicodeDecodeError:
            continue
        assert _verdict(R.read_record, text) == _verdict(_exact, text), raw[:300]
        accepted += expected[0] == "ok"
    return accepted


@pytest.fixture
def fast_only(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The records that went the exact way (pydantic), instead of taking it."""
    sent: list[Any] = []

    def exact(raw: Any) -> Any:
        sent.append(raw)
        return _exact(raw)

    monkeypatch.setattr(R, "_exact", exact)
    return sent


def test_scenario_records_agree() -> None:
    records = scenario_records()
    assert _agree(records) > 100
    folded = [json.dumps(e).encode() for e in fold([json.loads(r) for r in records if _ok(r)])]
    assert _agree(folded) == len(folded)


def _ok(raw: bytes) -> bool:
    try:
        parse_event(raw)
    except EventError:
        return False
    return True


def test_hostile_records_and_a_lenient_readers_traps_agree() -> None:
    _agree(HOSTILE)
    for guard, records in TRAPS.items():
        assert _agree(records) == 0, guard  # each is invalid to pydantic


def test_valid_records_in_every_spelling_are_read() -> None:
    assert _agree(VALID + VALID_SPELLINGS) == len(VALID) + len(VALID_SPELLINGS)


def test_a_reason_names_a_long_value_without_copying_it() -> None:
    """Issue 20: a 5 MB ``kind`` made a 5 MB reason (and a dead letter no producer could
    send). The reason is pydantic's; it shows a few dozen characters of the value."""
    assert _agree(LONG_VALUES) == 0
    reasons = [_verdict(R.read_record, r)[1] for r in LONG_VALUES]
    assert all(len(r) < 300 for r in reasons), [r[:400] for r in reasons]
    assert reasons[0] == f"kind: unknown kind '{'k' * 32}'... (100000 characters)"
    assert reasons[2:4] == ["kind: unknown kind a list", "kind: unknown kind an object"]


#: Partition records Kafka could never give (issue 50), and the reason each gets.
IMPOSSIBLE = [
    ({"isr": [1, 1]}, "isr: broker 1 is listed twice ([1, 1])"),
    ({"isr": [1, 9]}, "isr: broker 9 is not one of the replicas [1, 2, 3]"),
    ({"replicas": [1, 1, 1], "isr": [1]}, "replicas: broker 1 is listed twice ([1, 1, 1])"),
    ({"leader": 4}, "leader: broker 4 is not one of the replicas [1, 2, 3]"),
    ({"leader": None, "isr": [], "eligible_leader_replicas": [2, 2]},
     "eligible_leader_replicas: broker 2 is listed twice ([2, 2])"),
]  # fmt: skip


@pytest.mark.parametrize("base", [PARTITION, PARTITION_ROUND], ids=["metadata", "round"])
def test_records_kafka_could_never_give_are_refused_alike(
    base: dict[str, Any], fast_only: list[Any]
) -> None:
    """Each is refused by both paths with one reason naming the field and the broker: the
    fast path sends it the exact way (the same function is pydantic's validator)."""
    raws = [json.dumps({**base, **change}).encode() for change, _ in IMPOSSIBLE]
    assert _agree(raws) == 0
    assert [_verdict(R.read_record, r)[1] for r in raws] == [reason for _, reason in IMPOSSIBLE]
    assert {r if isinstance(r, bytes) else r.encode() for r in fast_only} == set(raws)
    # What Kafka allows stays a record (a durability question, not a broken one).
    # (An ELR member outside the replicas too: Kafka's controller can leave a replica a
    # reassignment removed in it -- monitor/contract/invariants.py.)
    allowed = [
        {"isr": [1]},
        {"leader": None, "isr": []},
        {"eligible_leader_replicas": [3]},
        {"eligible_leader_replicas": [3, 7]},
    ]
    assert _agree([json.dumps({**base, **change}).encode() for change in allowed]) == 4


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=st.lists(broken_records(), min_size=1, max_size=5))
def test_records_broken_at_random_agree(records: list[bytes]) -> None:
    _agree(records)


def test_collector_rounds_take_the_fast_path(fast_only: list[Any]) -> None:
    rounds = [
        json.dumps(e, separators=(",", ":")).encode()
        for e in generate(300, 3, form="rounds", seed=5, collector_fields=True, fault_rate=0.2)
    ]
    events = [json.dumps(e).encode() for e in generate(100, 2, seed=5, fault_rate=0.2)]
    assert _agree(rounds + events) == len(rounds) + len(events)
    assert any(b"replica_samples" in r for r in rounds)
    assert fast_only == []


def _with(base: dict[str, Any], tail: str) -> str:
    return json.dumps(base, separators=(",", ":"))[:-1] + tail + "}"


def test_unknown_members_go_the_exact_way(fast_only: list[Any]) -> None:
    """msgspec would skip an unknown member of any depth; jiter refuses one nested deeper
    than its limit. The structs forbid unknown members: pydantic decides."""
    deep = JSON_MAX_DEPTH + 1
    records = [
        _with(BROKER, ',"x":' + "[" * deep + "]" * deep),
        _with(BROKER, ',"x":' + '{"a":' * deep + "1" + "}" * deep),
        _with(BROKER, ',"x":[[[1]]]'),
        json.dumps({**PARTITION_ROUND, "replica_samples": [{"broker": 1, "log_end_offset": 1,
                                                            "y": [[2]]}]}),
    ]  # fmt: skip
    assert _verdict(_exact, records[0])[0] == "refused"
    assert _agree([r.encode() for r in records]) == 2
    assert len(fast_only) == 2 * len(records)  # each as bytes and as text


def test_escapes_and_a_kind_written_twice_agree() -> None:
    tails = [',"kind":"nope"', ',"kind":"broker"', ',"kind":"replica"', ',"ki\\u006ed":"nope"']
    tails += [',"x":"\\udc00"', ',"x":"\\ud800"', ',"x":"\\ud83d\\ude00"', ',"x":"\\q"']
    tails += [',"cluster":"\\ud800\\u0041"', ',"cluster":"a\\u0000"', ',"observed_at":7']
    tails += [',"cluster":"\\udc00"', ',"cluster":"\\ud83d\\ude00"']
    records = [_with(BROKER, t).encode() for t in tails]
    records.append(('{"kind":"nope",' + _with(BROKER, "")[1:]).encode())
    assert _agree(records) > 0


def test_a_pattern_is_checked_once_per_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(R, "_MATCHED", set())
    monkeypatch.setattr(R, "MATCHED_MAX", 3)
    for topic in ("a", "b", "a", "c"):
        assert R.read_record(json.dumps({**PARTITION_ROUND, "topic": topic})) is not None
    assert {("topic", "a"), ("topic", "b"), ("topic", "c")} == R._MATCHED
    R.read_record(json.dumps({**PARTITION_ROUND, "topic": "d"}))
    assert {("topic", "d")} == R._MATCHED  # full: cleared, then the new value
    _agree([json.dumps({**PARTITION_ROUND, "topic": "a b"}).encode()])  # refused, by pydantic


def test_patterns_end_where_pydantics_end() -> None:
    """Python's "$" matches before a final newline, pydantic's only at the end."""
    for field in ("topic", "topic_id"):
        value = PARTITION_ROUND.get(field, "AAAAAAAAAAAAAAAAAAAAAA") + "\n"
        raw = json.dumps({**PARTITION_ROUND, field: value}).encode()
        assert _verdict(_exact, raw)[0] == "refused"
        _agree([raw])


def test_escaped_text_is_read_on_the_fast_path(fast_only: list[Any]) -> None:
    raw = json.dumps({**BROKER, "cluster": 'caf\u00e9 \U0001f600 "q" \\'})
    assert "\\u00e9" in raw and R.read_record(raw) == _exact(raw)
    assert fast_only == []


def test_a_record_not_utf8_goes_the_exact_way(fast_only: list[Any]) -> None:
    raw = _with(BROKER, ',"x":"\xff"').encode("latin-1")
    assert _verdict(R.read_record, raw) == _verdict(_exact, raw)
    assert fast_only == [raw]


def test_every_kind_is_read() -> None:
    assert _agree([json.dumps(b).encode() for b in BASES]) == len(BASES)


def test_python_pattern_anchors_the_end() -> None:
    assert R.python_pattern("^[a-z]+$") == "^[a-z]+\\Z"
    for bad in ("^[a-z]+", "^a$|^b$", "^[a-z]+\\$"):
        with pytest.raises(TypeError, match="unsupported pattern"):
            R.python_pattern(bad)
