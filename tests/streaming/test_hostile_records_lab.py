"""Records built to stall the job, through the real job on the lab (issue 20).

Each used to cost the job minutes, or its life: a 5 MB ``kind`` became a 5 MB reason and a
dead letter over the producer's 1 MiB limit (the query died, and its restart replayed the
same batch); a 160 kB array of ``NaN`` tokens and a record of 100k spaces then ``x`` hit
quadratic regular expressions (22.8 s and 12.7 s per evaluation). Now a record over
``max_record_bytes`` is dead before it is parsed (its bytes kept in the store, its dead
letter carrying size, digest and where the bytes are), reasons show a few dozen characters
of a value at most, and the validation's scans are linear. The topic and the producer
allow records of 8 MB here so that such records can exist at all.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from kafka import KafkaProducer

from monitor.contract.events import partition_key
from streaming.job import DEADLETTERS, start
from tests.streaming.e2e import kafka_config, scenario_feed
from tests.streaming.kafka_io import publish_times, read_all

pytestmark = [pytest.mark.spark, pytest.mark.lab]

BROKER = b'{"schema_version":1,"kind":"broker","cluster":"hostile","observed_at":1,"broker":1'
HOSTILE = {
    "1 MiB record": BROKER + b',"alive":true,"pad":"' + b"p" * (1 << 20) + b'"}',
    "160 kB of NaN tokens": b"[" + b",".join([b"NaN"] * 40_000) + b"]",
    "100k spaces then x": BROKER + b',"alive":true}' + b" " * 100_000 + b"x",
    "ending in 100k spaces": b'{"kind":"nope"}' + b" " * 100_000,
    "5 MB kind": b'{"schema_version":1,"kind":"' + b"k" * 5_000_000 + b'"}',
}
LIMIT = 256 * 1024
#: A valid record under another partition's key (``partition_key``): routed by the key, to
#: the key's bucket, where it must not be applied.
LYING_KEY = partition_key("hostile", "t", 2).encode()
LYING = (
    b'{"schema_version":1,"kind":"replica","cluster":"hostile","observed_at":1,"topic":"t",'
    b'"partition":1,"broker":1,"log_end_offset":5}'
)


def test_hostile_records_are_dead_lettered_and_the_stream_goes_on(
    spark: Any, kafka_lab: Any, tmp_path: Path
) -> None:
    from monitor.dev.lab.admin import create_topic

    boot = kafka_lab.bootstrap_servers
    topics = {r: f"{r}-hostile-{tmp_path.name[-12:]}" for r in ("events", "findings", "deadletter")}
    for role, name in topics.items():
        create_topic(
            boot, name, partitions=1, replication_factor=3, min_insync_replicas=2,
            extra_configs={"max.message.bytes": str(8 << 20)} if role == "events" else None,
        )  # fmt: skip
    valid, expected = scenario_feed()
    half = len(valid) // 2
    # The hostile records sit between two halves of a valid feed: the second half's
    # findings come only if the stream went on past them.
    records = [*valid[:half], *HOSTILE.values(), LYING, *valid[half:]]
    # Record timestamps: the valid feed's own (publish_times); a hostile record, the one
    # before it.
    own = publish_times(valid)
    stamps = [*own[:half], *[own[half - 1]] * (len(HOSTILE) + 1), *own[half:]]
    producer = KafkaProducer(bootstrap_servers=boot, acks="all", max_request_size=8 << 20)
    try:
        for raw, ts in zip(records, stamps, strict=True):
            key = LYING_KEY if raw is LYING else None
            producer.send(topics["events"], key=key, value=raw, timestamp_ms=ts)
        producer.flush(60)
    finally:
        producer.close()

    job = start(spark, kafka_config(tmp_path, boot, topics))
    try:
        job.drain(timeout_s=300)
    finally:
        job.stop()

    findings = {json.loads(r.value)["id"] for r in read_all(boot, topics["findings"])}
    assert set(expected) <= findings  # every finding of both halves
    dead = read_all(boot, topics["deadletter"])
    events = read_all(boot, topics["events"])
    offset_of = {r.value: r.offset for r in events}
    by_offset = {int(d.headers["source_offset"]): d for d in dead}
    reasons = {}
    for name, raw in HOSTILE.items():
        d = by_offset[offset_of[raw]]
        reason = d.headers["reason"].decode()
        reasons[name] = reason
        assert len(reason) < 200, (name, reason[:300])
        if len(raw) > LIMIT:
            # Too large: not parsed, not copied; size and digest in the reason, the bytes in
            # the store folder the dead letter names.
            assert d.value is None or d.value == b"", name
            assert reason == (
                f"record too large: {len(raw)} bytes, over max_record_bytes {LIMIT}; "
                f"sha256 {hashlib.sha256(raw).hexdigest()}"
            )
            kept = d.headers["kept_at"].decode()
            assert kept.startswith(str(tmp_path / "store" / DEADLETTERS))
            table = pq.read_table(kept).to_pylist()
            row = next(r for r in table if r["offset"] == offset_of[raw])
            assert row["value"] == raw and row["sha256"] == hashlib.sha256(raw).hexdigest()
        else:
            assert d.value == raw, name  # a dead letter copies a record it could parse
    assert reasons["160 kB of NaN tokens"] == "event: Input should be an object"
    # pydantic's reason (the Python worker validates): where, too
    assert reasons["100k spaces then x"] == (
        "invalid JSON: Invalid JSON: trailing characters at line 1 column 100097"
    )
    assert reasons["ending in 100k spaces"] == "kind: unknown kind 'nope'"
    lying = by_offset[offset_of[LYING]]
    assert lying.value == LYING and lying.headers["reason"].decode() == (
        "Kafka key: 'krm1/2/t/hostile' is a partition's key; the record is of partition 't' 1 "
        "of cluster 'hostile'"
    )
    c = job.counters
    # Every record is accounted for once: in = accepted + dead-lettered.
    assert c.accepted + c.dead_lettered == len(records) == len(events)
    assert c.dead_lettered == len(dead) == len(HOSTILE) + 1 + 3  # the lying key, scenario_feed's 3
    assert c.kept_too_large == 2 and c.kept_failures == 0
