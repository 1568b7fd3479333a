"""The exporter in the job's driver: fed by every batch, and seeded from the state store.

After a restart the driver's snapshot is empty until batches touch partitions; seeding it
from the store means an unclean election just before the restart still shows (and pages),
and partitions with open conditions keep their series.
"""

from __future__ import annotations

import urllib.request
from pathlib import Path
from typing import Any

import pytest

from monitor.dev.processes.prom import free_port
from monitor.exporter.driver import JobExporter
from monitor.query.store import StoreReader
from streaming.config import StreamingConfig
from streaming.job import BatchOutput, parquet_source, start
from tests.scenarios import SCENARIOS
from tests.streaming.helpers import renamed, run_to_idle, split, write_batches

pytestmark = pytest.mark.spark


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        return str(r.read().decode())


def _series(text: str, name: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.startswith((name + "{", name + " "))]


def _value(text: str, name: str) -> float:
    return float(_series(text, name)[0].split()[1])


DETECTED = "kafka_replication_finding_last_detected_timestamp_seconds"


def _by_labels(text: str, name: str) -> dict[str, float]:
    """``{label set: value}`` of a metric's series."""
    out = {}
    for ln in _series(text, name):
        series, value = ln.rsplit(" ", 1)
        out[series.removeprefix(name)] = float(value)
    return out


def test_batches_feed_metrics_and_a_restarted_exporter_is_seeded(
    spark: Any, tmp_path: Path
) -> None:
    sc = next(s for s in SCENARIOS if s.name == "unclean_election")
    records = renamed(sc.path.read_bytes().splitlines(), "c1")
    records.append(b'{"not": "an event"}')
    write_batches(tmp_path / "source", split(records, 3))
    cfg = StreamingConfig(
        # read from Parquet, not Kafka: the connection is never used
        kafka={"bootstrap_servers": "127.0.0.1:9"},
        checkpoint=str(tmp_path / "checkpoint"),
        store=str(tmp_path / "store"),
        trigger_seconds=0.5,
        tick_ms=3_600_000,
        jars=[],
    )
    forever = 1e12  # the scenario's clock is in the past: keep its one-off findings
    live = JobExporter(cfg.store_location, port=free_port(), event_retention_s=forever)
    live.start()
    emitted: list[str] = []  # the findings' ids, in the order the batches gave them
    try:
        job = start(
            spark,
            cfg,
            source=parquet_source(spark, str(tmp_path / "source")),
            hooks=[live.hook, lambda b: emitted.extend(d["id"] for d in b.findings)],
            write_kafka=False,
        )
        run_to_idle(job)
        job.stop()
        text = _scrape(live.server.port)
    finally:
        live.stop()
    assert live.hook_errors == 0
    loss = _series(text, "kafka_replication_partition_last_loss_offsets")
    assert loss and loss[0].endswith(" 4000.0"), loss
    assert any(
        'kind="unclean_election"' in s
        for s in _series(text, "kafka_replication_finding_last_event_timestamp_seconds")
    )
    accepted = _value(text, "kafka_replication_monitor_events_processed_total")
    dead = _value(text, "kafka_replication_monitor_events_dead_lettered_total")
    assert (accepted, dead) == (len(records) - 1, 1)
    # The store gives the findings back in the job's order (their ``seq``), not the stamps'.
    assert [f.id for f in StoreReader(cfg.store).all_findings()] == emitted

    # A new driver (after a restart), before any batch: the store alone.
    seeded = JobExporter(cfg.store_location, port=free_port(), event_retention_s=forever)
    assert seeded.seed() > 0
    seeded.server.start()
    try:
        again = _scrape(seeded.server.port)
    finally:
        seeded.stop()
    assert _series(again, "kafka_replication_partition_last_loss_offsets") == loss
    for name in (
        "kafka_replication_finding_last_event_timestamp_seconds",
        "kafka_replication_partition_high_watermark",
        # the counters, seeded from the store: a restart is no counter reset
        "kafka_replication_finding_events_total",
        "kafka_replication_committed_offsets_lost_total",
    ):
        assert sorted(_series(again, name)) == sorted(_series(text, name)), name
    # Detection times: the scenario's events all happened before this new store's first
    # findings (a store built from the events topic's history), so they count as detected
    # at their event time, live and after the restart alike -- the restart pages nothing
    # again, and history never pages anew.
    live_d, seeded_d = _by_labels(text, DETECTED), _by_labels(again, DETECTED)
    event_t = _by_labels(text, "kafka_replication_finding_last_event_timestamp_seconds")
    assert live_d and seeded_d == live_d == event_t


def test_a_failing_snapshot_never_fails_the_batch(tmp_path: Path) -> None:
    exp = JobExporter(str(tmp_path / "nothing"), port=free_port())

    broken = BatchOutput(7, [{"kind": "no_such_kind"}], states=None, stats={})
    exp.hook(broken)
    assert exp.hook_errors == 1
    assert exp.seed() == 0  # no store yet: nothing to seed, no error


def test_a_batch_interrupted_by_the_query_stopping_is_no_exporter_error(tmp_path: Path) -> None:
    """``query.stop()`` while a batch's hook collects its state rows interrupts the JVM call
    (CI saw it after run_to_idle): the batch is not committed and runs again after a
    restart, so it is not counted as an exporter problem. Any other failure still is."""

    class Stopping:
        def collect(self) -> None:
            raise RuntimeError("An error occurred while calling o3221.collectToPython.\n"
                               ": java.lang.InterruptedException")  # fmt: skip

    exp = JobExporter(str(tmp_path / "nothing"), port=free_port())
    exp.hook(BatchOutput(8, [], states=Stopping(), stats={}))
    assert exp.hook_errors == 0
    exp.hook(BatchOutput(9, [{"kind": "no_such_kind"}], states=None, stats={}))
    assert exp.hook_errors == 1
