"""The collector's published batches are compressed with its codec (``events_compression``),
as the brokers store them: the record batches' attributes read from the log segments on
the lab's disks (:func:`tests.streaming.kafka_io.batch_codecs`), and the records read back
intact through a consumer."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from monitor.collector import Collector, CollectorConfig
from monitor.collector.build import event_key
from monitor.contract.events import AnyEvent, dumps
from monitor.dev.lab.admin import create_topic
from monitor.dev.lab.cluster import Lab
from tests.streaming.kafka_io import batch_codecs, read_all

pytestmark = pytest.mark.lab

#: Kafka's codec ids in a v2 batch's attributes.
NONE, ZSTD = 0, 4


def segments(lab: Lab, topic: str) -> list[Path]:
    return [
        seg for node in lab.node_ids for seg in lab.config.data_dir(node).glob(f"{topic}-*/*.log")
    ]


def publish(lab: Lab, topic: str, events: list[AnyEvent], **settings: Any) -> None:
    """``events`` sent by a collector's own producer (``Collector.publish``) to ``topic``."""
    create_topic(lab.bootstrap_servers, topic, partitions=1, replication_factor=3)
    collector = Collector(
        CollectorConfig(
            cluster="lab",
            kafka={"bootstrap_servers": lab.bootstrap_servers},
            events_kafka={"bootstrap_servers": lab.bootstrap_servers},
            events_topic=topic,
            **settings,
        )
    )
    collector.start()
    try:
        assert collector.publish(events) == len(events)
    finally:
        collector.stop()


def test_published_batches_carry_the_collectors_codec(lab: Lab) -> None:
    """Two real rounds of the lab's events (a topic of 30 partitions among them), published
    by the default collector (zstd) and by one with ``events_compression="none"``: every
    batch on every replica's disk carries its codec; the zstd topic is the smaller; both
    read back as the events sent."""
    run = uuid.uuid4().hex[:8]
    watched = f"compression-lab-watched-{run}"
    create_topic(lab.bootstrap_servers, watched, partitions=30, replication_factor=3)
    reader = Collector(
        CollectorConfig(
            cluster="lab",
            kafka={"bootstrap_servers": lab.bootstrap_servers, "request_timeout_ms": 10_000},
            jmx_urls=lab.jmx_urls,
            jmx_timeout_s=10,
            round_timeout_s=10,
        )
    )
    reader.start(produce=False)
    try:
        events = reader.round().events + reader.round().events
    finally:
        reader.stop()
    ours = [e for e in events if e.kind == "partition" and e.topic == watched]
    assert len(ours) == 60, events
    topics = {ZSTD: f"compression-lab-zstd-{run}", NONE: f"compression-lab-none-{run}"}
    publish(lab, topics[ZSTD], events)  # the default codec
    publish(lab, topics[NONE], events, events_compression="none")

    sizes = {}
    for codec, topic in topics.items():
        segs = segments(lab, topic)
        # One partition, RF 3: a segment on each broker, each holding the producer's batches.
        assert len(segs) == 3, segs
        codecs = [c for seg in segs for c in batch_codecs(seg)]
        assert codecs and set(codecs) == {codec}, (topic, codecs)
        sizes[codec] = sum(seg.stat().st_size for seg in segs)
        sent = [(event_key(e), dumps(e).encode()) for e in events]
        assert [(r.key, r.value) for r in read_all(lab.bootstrap_servers, topic)] == sent
    assert sizes[ZSTD] < sizes[NONE] / 2, sizes
