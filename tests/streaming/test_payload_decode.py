"""The operator reads a payload back as the record it carries.

The JVM routes each record with the record itself as its payload
(``job.build_operator_input``; ``tests.streaming.helpers.payload`` packs it the same way
here), and the Python worker reads and validates it (``streaming.operator.ordered_events``,
``streaming.records.read_record``); a stored replay of an older job holds bodies of packed
values instead (``helpers.body_payload``), read as before. For every record of every
scenario of ``tests/data`` -- as recorded and folded into round records --,
property-generated streams and the generator's collector-shaped rounds, both forms give what
``to_model`` makes of the validated event; a record the contract refuses, or stamped too far
ahead of its Kafka record, is refused by the bucket that owns it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from monitor.contract.events import EventError, parse_event, partition_key, to_model
from monitor.dev.rounds import fold
from monitor.dev.synth import generate
from monitor.model.order import application_order, unfold
from streaming import operator as op
from tests.model.strategies import streams
from tests.scenarios import SCENARIOS, Scenario
from tests.streaming.helpers import body_payload, payload


def _valid(lines: list[bytes]) -> list[dict[str, Any]]:
    out = []
    for raw in lines:
        try:
            parse_event(raw)
        except EventError:
            continue
        out.append(json.loads(raw))
    return out


def _check(events: list[dict[str, Any]]) -> int:
    """Each event's payload -- the record itself, and a body of the form before (a stored
    replay's) -- decodes to its model record; the number checked."""
    for n, e in enumerate(events):
        raw = json.dumps(e).encode()
        expected = to_model(parse_event(raw))
        for packed in (payload(raw, n, True), body_payload(raw, n, True)):
            got, dups, owned, newest, refused = op.ordered_events([packed])
            assert got == application_order([((0, n), expected)]), e
            assert (dups, owned, refused) == (0, 1, [])
            assert newest == max(ev.observed_at for ev in unfold(expected))
    return len(events)


@pytest.mark.parametrize("sc", SCENARIOS, ids=lambda s: s.name)
def test_every_scenario_record_decodes_to_its_model_record(sc: Scenario) -> None:
    events = _valid(sc.path.read_bytes().splitlines())
    assert _check(events) > 0
    _check(fold(events))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=streams())
def test_generated_records_decode_to_their_model_records(events: list[dict[str, Any]]) -> None:
    _check(events)
    _check(fold(events))


def test_collector_shaped_rounds_decode_to_their_model_records() -> None:
    events = list(generate(50, 3, form="rounds", seed=3, collector_fields=True, fault_rate=0.2))
    assert any(e.get("replica_samples") for e in events)
    _check(events)


def test_duplicates_are_dropped_and_owned_events_counted() -> None:
    raw = json.dumps(next(iter(generate(1, 1, form="rounds", seed=1)))).encode()
    for pack in (payload, body_payload):
        got, dups, owned, _, _ = op.ordered_events(
            [pack(raw, 0, True), pack(raw, 1, False), pack(raw, 2, True)]
        )
        assert (len(got), dups, owned) == (1, 2, 2)


def _a_round() -> dict[str, Any]:
    return next(e for e in generate(1, 1, form="rounds", seed=1) if e["kind"] == "partition")


def test_a_refused_record_is_returned_by_its_owner_only() -> None:
    """Validation happens here: a record the contract refuses is not applied; the bucket
    owning it returns it (its dead letter), a bucket holding a copy says nothing."""
    good = json.dumps(_a_round()).encode()
    bad = json.dumps({**json.loads(good), "leader_epoch": -1}).encode()
    got, _, owned, _, refused = op.ordered_events(
        [payload(good, 0, True), payload(bad, 1, True), payload(bad, 2, False)]
    )
    assert len(got) == 1 and owned == 1  # a refused record is a dead letter, not an event
    assert refused == [
        op.Refused(0, 1, "events", bad.decode(), "leader_epoch: Input should be greater than "
                   "or equal to 0")
    ]  # fmt: skip


def test_a_record_stamped_ahead_of_its_kafka_record_is_refused() -> None:
    from monitor.model import ClusterModel, ModelConfig

    model = ClusterModel(ModelConfig(max_stamp_ahead_ms=1_000))
    e = _a_round()
    raw = json.dumps(e).encode()
    at = e["observed_at"]
    got, *_, refused = op.ordered_events([payload(raw, 0, True, kafka_ts=at - 1_000)], model)
    assert len(got) == 1 and refused == []
    got, *_, refused = op.ordered_events([payload(raw, 0, True, kafka_ts=at - 1_001)], model)
    assert got == [] and [r.reason for r in refused] == [
        f"observed_at {at} is 1001 ms ahead of its Kafka record's timestamp ({at - 1_001}); "
        "at most 1000 ms (max_stamp_ahead_ms) is believed"
    ]


def test_a_record_routed_by_its_key_is_applied_only_if_it_is_that_partitions() -> None:
    """The JVM routes a record keyed with ``partition_key`` by the key alone (no parse): the
    worker reads it as any other, owned, and refuses it unless it is the key's partition's
    -- another partition's, or a broker event, would sit in the wrong bucket."""
    e = _a_round()
    raw = json.dumps(e).encode()
    own = partition_key(e["cluster"], e["topic"], e["partition"])
    replica = next(x for x in generate(1, 1, seed=1) if x["kind"] == "replica")
    rep = json.dumps({**replica, "cluster": e["cluster"], "topic": e["topic"],
                      "partition": e["partition"]}).encode()  # fmt: skip
    got, dups, owned, _, refused = op.ordered_events(
        [payload(raw, 0, False, key=own), payload(rep, 1, False, key=own)]
    )
    assert got and (dups, owned, refused) == (0, 2, [])
    broker = json.dumps({"schema_version": 1, "kind": "broker", "cluster": e["cluster"],
                         "observed_at": 5, "broker": 1, "alive": True}).encode()  # fmt: skip
    others = [
        partition_key(e["cluster"], e["topic"], e["partition"] + 1),
        partition_key(e["cluster"] + "x", e["topic"], e["partition"]),
        own + "/",
    ]
    packed = [payload(raw, i, False, key=k) for i, k in enumerate(others)]
    packed.append(payload(broker, 9, False, key=own))
    got, _, owned, _, refused = op.ordered_events(packed)
    assert got == [] and owned == 0
    assert [r.src_offset for r in refused] == [0, 1, 2, 9]
    assert refused[0].reason == (
        f"Kafka key: {others[0]!r} is a partition's key; the record is of partition "
        f"{e['topic']!r} {e['partition']} of cluster {e['cluster']!r}"
    )
    assert refused[3].reason.endswith("is a partition's key; the record is a broker event")
    # The same text under its own key after a lying copy: not a duplicate of a refused one.
    got, dups, owned, _, refused = op.ordered_events(
        [payload(raw, 0, False, key=others[0]), payload(raw, 1, False, key=own)]
    )
    assert got and (dups, owned, [r.src_offset for r in refused]) == (0, 1, [0])
