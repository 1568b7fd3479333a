"""The end-to-end tests' shared feed and checks: seed scenarios (and a malformed record,
and a record stamped a year ahead of its Kafka record) through the events topic, the job's
configuration on the lab, and what the findings and dead-letter topics must then hold."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from monitor.connection import KafkaConnection
from monitor.contract.events import parse_event
from monitor.dev.testing import T0
from monitor.model import ModelConfig
from streaming.config import StreamingConfig
from tests.scenarios import SCENARIOS
from tests.streaming.helpers import event_driven, renamed
from tests.streaming.kafka_io import findings_by_id, read_all

#: The scenarios are written at T0 (November 2023); fed to Kafka they play out from an
#: hour ago. Records carry their publish time (:func:`kafka_io.publish_times`), and the
#: brokers delete segments by that time: records stamped in 2023 are past the 7-day
#: retention and went within a retention check (the lab's: 60 s) -- the standalone job,
#: slower to start, found its source deleted (OffsetOutOfRange at offset 0).
SHIFT_MS = int(time.time() * 1000) - 3_600_000 - T0
#: The stamp of future_stamped_event's event a year ahead, as fed.
AHEAD_AT = 1_731_536_010_002 + SHIFT_MS
GARBAGE = b'{"schema_version":1,"kind":"replica","cluster":"lab","observed_at":"soon"}'


def scenario_feed() -> tuple[list[bytes], list[str]]:
    """Records (three scenarios, a malformed record between the first two) and the
    expected ids. The third has one event stamped a year ahead of its Kafka record
    (:func:`kafka_io.publish_times`): dead-lettered, and the findings after it still come."""
    names = ["unclean_election", "under_min_isr_and_recovery", "future_stamped_event"]
    first, second, third = (
        renamed(
            next(s for s in SCENARIOS if s.name == n).path.read_bytes().splitlines(),
            n,
            shift_ms=SHIFT_MS,
        )
        for n in names
    )
    expected = [f.id for f in event_driven(first + second + third, ModelConfig(), rejected=1)]
    return [*first, GARBAGE, b"", *second, *third], expected


def kafka_config(tmp: Path, bootstrap: str, topics: dict[str, str], **kw: Any) -> StreamingConfig:
    return StreamingConfig(
        kafka=KafkaConnection(bootstrap_servers=bootstrap),
        events_topic=topics["events"],
        findings_topic=topics["findings"],
        deadletter_topic=topics["deadletter"],
        checkpoint=str(tmp / "checkpoint"),
        store=str(tmp / "store"),
        trigger_seconds=0.5,
        tick_ms=3_600_000,
        buckets=4,
        jars=[],
        **kw,
    )


def check_outputs(
    bootstrap: str, topics: dict[str, str], expected: list[str], produced: int
) -> None:
    written = read_all(bootstrap, topics["findings"])
    findings = findings_by_id(written)  # fails on an id written twice
    missing = [i for i in expected if i not in findings]
    extra = [findings[i] for i in findings if i not in set(expected)]
    assert not missing and not extra, f"missing {missing[:10]}; extra {extra[:5]}"
    assert len(written) == len(expected)
    kinds = {f["kind"] for f in findings.values()}
    assert {"unclean_election", "committed_data_loss", "under_min_isr"} <= kinds
    # After the event stamped a year ahead, its partition's ISR shrinks and it goes offline.
    ahead = {f["kind"] for f in findings.values() if f["cluster"] == "future_stamped_event"}
    assert {"isr_shrink", "under_min_isr", "offline"} <= ahead, ahead
    dead = read_all(bootstrap, topics["deadletter"])
    stamped = [r for r in dead if r.value not in (GARBAGE, b"")]
    assert sorted(r.value for r in dead if r not in stamped) == sorted([GARBAGE, b""])
    assert len(stamped) == 1
    assert json.loads(stamped[0].value)["observed_at"] == AHEAD_AT
    assert b"ms ahead of its Kafka record's timestamp" in stamped[0].headers["reason"]
    by_value = {r.value: r for r in dead}
    assert (
        by_value[GARBAGE]
        .headers["reason"]
        .startswith(b"observed_at: Input should be a valid integer; topic: field required")
    )
    assert by_value[b""].headers["reason"] == b"empty record"
    assert by_value[GARBAGE].headers["source_topic"] == topics["events"].encode()
    # Every produced record is accounted for once: the events topic holds the `produced`
    # records; each dead letter points at the record it copies; all the others are valid
    # events, which the job accepted (its counters, checked by the callers, say how many).
    events = read_all(bootstrap, topics["events"])
    assert len(events) == produced
    at = {(r.partition, r.offset): r for r in events}
    sources = [(int(d.headers["source_partition"]), int(d.headers["source_offset"])) for d in dead]
    assert len(set(sources)) == len(dead)
    for d, src in zip(dead, sources, strict=True):
        copied = at[src].value if src in at else None
        assert copied == d.value, f"dead letter {d.value!r} names {src}, which holds {copied!r}"
    for pos in set(at) - set(sources):
        parse_event(at[pos].value)  # raises EventError if the job should have refused it
