"""Producing events to and reading results from the lab's Kafka (kafka-python).

``produce_events`` is the feed of the end-to-end tests; the collector (``monitor/collector``)
will write the same topic, so an e2e test can swap this feed for the real collector.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from monitor.collector.build import event_key
from monitor.contract.events import EventError, parse_event
from monitor.model import Finding


def _key(raw: bytes) -> bytes | None:
    """The collector's key of a record (``monitor.collector.build.event_key``: a
    partition's records by ``partition_key``, which the job routes by without parsing
    them); none for a record the contract refuses."""
    try:
        return event_key(parse_event(raw))
    except EventError:
        return None


def publish_times(records: Sequence[bytes]) -> list[int | None]:
    """When a collector would have published each record: when it observed it -- unless the
    stamp jumped more than a day past the previous record's (its clock jumped): then at the
    previous record's time. None where the record has no stamp (the producer's clock)."""
    out: list[int | None] = []
    last: int | None = None
    for raw in records:
        try:
            at = json.loads(raw).get("observed_at")
        except (ValueError, AttributeError):
            at = None
        if isinstance(at, int) and not isinstance(at, bool):
            last = at if last is None or at <= last + 86_400_000 else last
            out.append(last)
        else:
            out.append(last)
    return out


def produce_events(
    bootstrap: str,
    topic: str,
    records: Iterable[bytes],
    timestamps: Sequence[int | None] | None = None,
) -> int:
    """Produce ``records`` (with these record timestamps, where given); how many."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=20)
    n = 0
    try:
        for i, raw in enumerate(records):
            ts = timestamps[i] if timestamps is not None else None
            producer.send(topic, value=raw, key=_key(raw), timestamp_ms=ts)
            n += 1
        producer.flush(60)
    finally:
        producer.close()
    return n


@dataclass
class Record:
    key: bytes | None
    value: bytes
    headers: dict[str, bytes]
    partition: int
    offset: int


def read_all(bootstrap: str, topic: str, timeout_s: float = 30.0) -> list[Record]:
    """Every record of ``topic`` (up to its end offsets at call time)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        parts = consumer.partitions_for_topic(topic) or set()
        tps = [TopicPartition(topic, p) for p in sorted(parts)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        end = consumer.end_offsets(tps)
        out: list[Record] = []
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and any(consumer.position(tp) < end[tp] for tp in tps):
            for tp, batch in consumer.poll(timeout_ms=500).items():
                for m in batch:
                    out.append(
                        Record(m.key, m.value, dict(m.headers or []), tp.partition, m.offset)
                    )
        return out
    finally:
        consumer.close()


def _ids(records: list[Record]) -> list[str]:
    ids = []
    for r in records:
        f = json.loads(r.value)
        subject = Finding.from_dict(f).subject_key
        assert r.key is not None and r.key.decode() == subject, "findings are keyed by subject"
        ids.append(f["id"])
    return ids


def findings_by_id(records: list[Record]) -> dict[str, dict[str, Any]]:
    """The findings of one run's findings topic, by id. Each finding's id is unique (it
    includes its state and times), so an id written twice is a double write: it fails."""
    ids = _ids(records)
    twice = sorted(i for i, n in Counter(ids).items() if n > 1)
    assert not twice, f"{len(twice)} finding ids written more than once: {twice[:10]}"
    return {i: json.loads(r.value) for i, r in zip(ids, records, strict=True)}


def findings_across_restart(
    killed: list[Record], final: list[Record]
) -> tuple[dict[str, dict[str, Any]], int]:
    """The findings of a topic written by a run that was killed (``killed``: what the topic
    held then) and restarted on its checkpoint (``final``: all of it), by id, and how many
    records the restart wrote twice.

    Kafka output is at-least-once: the batch in flight at the kill is run again, so the
    killed run's last records (that batch, or the part of it written before the kill) may
    come again. That is the only duplicate allowed: the ids written twice must be a
    contiguous tail of the killed run's records, re-sent byte for byte, in the same order,
    at the head of the restarted run's records. Each run alone writes every id once.
    """
    assert {r.partition for r in final} <= {0}, "one findings partition: offsets are order"
    killed = sorted(killed, key=lambda r: r.offset)
    final = sorted(final, key=lambda r: r.offset)
    assert final[: len(killed)] == killed, "the restart changed what the killed run wrote"
    restarted = final[len(killed) :]
    first, second = findings_by_id(killed), findings_by_id(restarted)
    again = set(first) & set(second)
    n = len(again)
    if n:
        tail, head = killed[-n:], restarted[:n]
        assert set(_ids(tail)) == again, (
            f"the {n} findings written twice are not the killed run's last {n} records"
        )
        assert [(r.key, r.value) for r in head] == [(r.key, r.value) for r in tail], (
            f"the restart did not re-send the killed run's last {n} records as they were, "
            "in order, before its own"
        )
    return {**first, **second}, n


def batch_codecs(segment: Path) -> list[int]:
    """The compression codec of each record batch of a log segment (Kafka's v2 batch
    header: base offset 8 bytes, length 4, leader epoch 4, magic 1, crc 4, attributes 2,
    whose three low bits name the codec: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd)."""
    data, at, codecs = segment.read_bytes(), 0, []
    while at + 23 <= len(data):
        length = int.from_bytes(data[at + 8 : at + 12], "big")
        if length == 0:
            break
        assert data[at + 16] == 2, f"{segment}: batch at byte {at} is not magic 2"
        codecs.append(int.from_bytes(data[at + 21 : at + 23], "big") & 0x7)
        at += 12 + length
    return codecs
