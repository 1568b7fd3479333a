"""End to end on the real lab Kafka: events topic -> job -> findings and dead-letter topics.

The feed is ``kafka_io.produce_events`` (the seed scenarios); once the collector exists it
writes the same events topic and these assertions apply unchanged.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from streaming.job import start
from tests.streaming.e2e import check_outputs, kafka_config, scenario_feed
from tests.streaming.kafka_io import produce_events, publish_times

pytestmark = [pytest.mark.spark, pytest.mark.lab]


def test_kafka_end_to_end(
    spark: Any, kafka_lab: Any, topics: dict[str, str], tmp_path: Path
) -> None:
    bootstrap = kafka_lab.bootstrap_servers
    records, expected = scenario_feed()
    produced = produce_events(bootstrap, topics["events"], records, publish_times(records))
    job = start(spark, kafka_config(tmp_path, bootstrap, topics))
    try:
        job.drain(timeout_s=300)
    finally:
        job.stop()
    check_outputs(bootstrap, topics, expected, produced)
    c = job.counters
    assert (c.accepted, c.dead_lettered) == (produced - 3, 3)  # counts reconcile
    assert produced == len(records)
    # The state store has every touched partition; DuckDB reads the latest row of each.
    from monitor.query.store import StoreReader

    state = StoreReader(tmp_path / "store").current()
    assert {(r["topic"], r["partition"]) for r in state} == {
        ("unclean", 0),
        ("minisr", 0),
        ("ahead", 0),
    }
    unclean = next(r for r in state if r["topic"] == "unclean")
    assert [e["epoch"] for e in unclean["lineage"]][-1] == unclean["leader_epoch"]
    assert json.loads(json.dumps(unclean))  # plain data
