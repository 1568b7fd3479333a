"""A deleted topic leaves the state store and ``/metrics`` (issue 17), on the real lab.

The real collector records the lab while a topic under load is deleted through the Admin
API: its next complete metadata read says so (``topic_deleted``). The events go through a
Kafka events topic and the real Spark job, whose driver feeds the exporter; the store and
``/metrics`` then have the topic that stayed and not the one deleted -- in the job that
ran, and in an exporter restarted from the store.
"""

from __future__ import annotations

import urllib.request
from pathlib import Path
from typing import Any

import pytest

from monitor.contract.events import TopicDeletedEvent, dumps
from monitor.dev.lab.admin import create_topic, delete_topic
from monitor.dev.lab.cluster import Lab
from monitor.dev.lab.load import produce
from monitor.dev.processes.prom import free_port
from monitor.exporter.driver import JobExporter
from monitor.query.store import StoreReader
from streaming.job import start
from tests.collector.helpers import Recording
from tests.dev.lab.helpers import topic_name
from tests.streaming.e2e import kafka_config
from tests.streaming.kafka_io import produce_events

pytestmark = [pytest.mark.spark, pytest.mark.lab]


def _metrics(exporter: JobExporter) -> str:
    url = f"http://127.0.0.1:{exporter.server.port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as r:
        return str(r.read().decode())


def _topics(text: str, name: str) -> set[str]:
    """The ``topic`` labels of metric ``name``'s series."""
    out = set()
    for line in text.splitlines():
        if line.startswith(name + "{") and 'topic="' in line:
            out.add(line.split('topic="', 1)[1].split('"', 1)[0])
    return out


def test_a_deleted_topic_leaves_the_store_and_metrics(
    spark: Any, kafka_lab: Lab, tmp_path: Path
) -> None:
    lab, boot = kafka_lab, kafka_lab.bootstrap_servers
    gone, kept = topic_name("del-gone"), topic_name("del-kept")
    create_topic(boot, gone, assignments={0: [1, 2, 3], 1: [2, 3, 1]}, min_insync_replicas=2)
    create_topic(boot, kept, assignments={0: [3, 1, 2]}, min_insync_replicas=2)
    with Recording(lab) as rec:
        rec.wait_rounds(2)
        produce(boot, gone, rate=200, count=200, acks="all")
        rec.wait_rounds(2)
        delete_topic(boot, gone)
        said = rec.wait_for(
            "topic_deleted", lambda e: isinstance(e, TopicDeletedEvent) and e.topic == gone
        )
        rec.wait_rounds(2)
        events = rec.snapshot()
    assert isinstance(said, TopicDeletedEvent) and said.topic_id is not None  # the id it had

    tag = gone.rsplit("-", 1)[1]
    names = {r: f"del-{r}-{tag}" for r in ("events", "findings", "deadletter")}
    for name in names.values():
        create_topic(boot, name, partitions=1, min_insync_replicas=2)
    produced = produce_events(boot, names["events"], [dumps(e).encode() for e in events])
    store = tmp_path / "store"
    # A few dozen records a batch: the deletion comes batches after the topic's rows.
    cfg = kafka_config(tmp_path, boot, names, max_offsets_per_trigger=60)
    exporter = JobExporter(str(store), port=free_port(), per_partition="all")
    exporter.start()
    try:
        job = start(spark, cfg, hooks=[exporter.hook])
        try:
            job.drain(timeout_s=600)
        finally:
            job.stop()
        live = _metrics(exporter)
    finally:
        exporter.stop()
    assert job.counters.accepted == produced and job.counters.dead_lettered == 0
    assert exporter.hook_errors == 0

    # (the lab is shared: other tests' topics are recorded too; only these two are judged)
    mine = {gone, kept}
    reader = StoreReader(store)
    assert {r["topic"] for r in reader.current()} & mine == {kept}
    history = reader.query(
        "SELECT partition, deleted_at FROM rows WHERE topic = ? ORDER BY batch_id", [gone]
    )
    assert {r["partition"] for r in history} == {0, 1}  # it was there...
    assert {r["partition"] for r in history if r["deleted_at"] is not None} == {0, 1}  # ...gone
    deleted = [f for f in reader.all_findings() if f.kind == "topic_deleted" and f.topic in mine]
    assert [(f.topic, f.details["reason"]) for f in deleted] == [(gone, "deleted")]

    hw = "kafka_replication_partition_high_watermark"
    assert _topics(live, hw) & mine == {kept}
    # A restarted job's exporter, seeded from the store alone: the same.
    seeded = JobExporter(str(store), port=free_port(), per_partition="all")
    assert seeded.seed() >= 1
    seeded.server.start()
    try:
        again = _metrics(seeded)
    finally:
        seeded.stop()
    assert _topics(again, hw) & mine == {kept}
