"""Offsets the events topic lost before the job read them are counted (issue 20).

The job reads with ``failOnDataLoss=false``: a gap that retention deleted while the job was
down must not stop the monitor. It must not go unnoticed either. Here the gap is made with
the Admin API's DeleteRecords while the job is stopped; on restart the job reads on past
it and counts exactly the offsets it never saw.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient, TopicPartition

from monitor.dev.lab.admin import create_topic
from streaming.job import start
from tests.streaming.e2e import kafka_config, scenario_feed
from tests.streaming.kafka_io import produce_events, publish_times

pytestmark = [pytest.mark.spark, pytest.mark.lab]


def test_offsets_deleted_before_the_job_read_them_are_counted(
    spark: Any, kafka_lab: Any, tmp_path: Path
) -> None:
    boot = kafka_lab.bootstrap_servers
    topics = {r: f"{r}-skip-{tmp_path.name[-12:]}" for r in ("events", "findings", "deadletter")}
    for name in topics.values():
        create_topic(boot, name, partitions=1)
    records, _ = scenario_feed()
    records = [r for r in records if r]  # valid and invalid, no empty record
    first, second = records[:40], records[40:]
    produce_events(boot, topics["events"], first, publish_times(first))
    cfg = kafka_config(tmp_path, boot, topics)
    job = start(spark, cfg)
    try:
        job.drain(timeout_s=300)
    finally:
        job.stop()
    assert job.counters.skipped_offsets == 0
    read_before = job.counters.accepted + job.counters.dead_lettered
    assert read_before == len(first)

    # While the job is down, records arrive and the first 25 of them are deleted.
    produce_events(boot, topics["events"], second, publish_times(second))
    admin = KafkaAdminClient(bootstrap_servers=boot)
    try:
        tp = TopicPartition(topics["events"], 0)
        admin.delete_records({tp: len(first) + 25}, timeout_ms=30_000)
    finally:
        admin.close()

    job = start(spark, cfg)
    try:
        # The restarted query's first progress is the batch re-run from its offset log, with
        # no latest offset: drain must not take it for "caught up" (it once did).
        job.drain(timeout_s=300)
    finally:
        job.stop()
    c = job.counters
    assert c.accepted + c.dead_lettered == len(second) - 25  # read on past the gap
    assert c.skipped_offsets == 25  # and counted it
