"""Producing events to and reading results from the lab's Kafka (kafka-python).

``produce_events`` is the feed of the end-to-end tests; the collector (``monitor/collector``)
will write the same topic, so an e2e test can swap this feed for the real collector.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition


def _key(raw: bytes) -> bytes | None:
    """cluster/topic/partition: all samples of one partition go to one Kafka partition."""
    try:
        ev = json.loads(raw)
        if isinstance(ev, dict) and "partition" in ev and "topic" in ev:
            return f"{ev.get('cluster')}/{ev['topic']}/{ev['partition']}".encode()
    except ValueError:
        pass
    return None


def produce_events(bootstrap: str, topic: str, records: Iterable[bytes]) -> int:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=20)
    n = 0
    try:
        for raw in records:
            producer.send(topic, value=raw, key=_key(raw))
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


def findings_by_id(records: list[Record]) -> dict[str, dict[str, Any]]:
    """What a consumer that dedupes by id sees (the key is the finding id)."""
    out: dict[str, dict[str, Any]] = {}
    for r in records:
        f = json.loads(r.value)
        assert r.key is not None and r.key.decode() == f["id"], "findings are keyed by id"
        out[f["id"]] = f
    return out
