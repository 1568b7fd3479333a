"""The operator reads a payload back as the record the JVM packed.

The JVM packs each valid record's fields into a body (``job.build_operator_input``;
``tests.streaming.helpers.payload`` packs it the same way here) and the Python worker
decodes every body of a batch at once (``streaming.operator.ordered_events``, msgspec structs
typed from the contract). For every record of every scenario of ``tests/data`` -- as
recorded and folded into round records --, property-generated streams and the generator's
collector-shaped rounds, the decoded record is what ``to_model`` makes of the validated
event: every field of every kind, in its place.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from monitor.contract.events import EventError, parse_event, to_model
from monitor.dev.rounds import fold
from monitor.dev.synth import generate
from monitor.model.order import application_order, unfold
from streaming import operator as op
from tests.model.strategies import streams
from tests.scenarios import SCENARIOS, Scenario
from tests.streaming.helpers import payload


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
    """Each event's payload decodes to its model record; the number checked."""
    for n, e in enumerate(events):
        raw = json.dumps(e).encode()
        expected = to_model(parse_event(raw))
        got, dups, owned, newest = op.ordered_events([payload(raw, n, True)])
        assert got == application_order([((0, n), expected)]), e
        assert (dups, owned) == (0, 1)
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
    got, dups, owned, _ = op.ordered_events(
        [payload(raw, 0, True), payload(raw, 1, False), payload(raw, 2, True)]
    )
    assert (len(got), dups, owned) == (1, 2, 2)
