"""Which of a partition's rows is its current state, when one micro-batch wrote it twice.

A bucket's events and then its timer can each write a partition in the same batch, with the
same ``updated_at`` (a tick changes nothing that was last *seen*). Found by the 30-minute
soak: ``/metrics`` kept ``hw_lag`` and ``stale_telemetry`` open for minutes while the store
had them resolved -- the two readers picked different rows. Both now keep the row with the
highest ``(batch_id, row_seq)`` (``streaming.operator.row_seq``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from bench._synthetic_store import STATE_SCHEMA
from monitor.exporter.driver import SnapshotHook
from monitor.exporter.snapshot import Snapshot
from monitor.query.store import StoreReader
from streaming.store import Compactor

SCHEMA = STATE_SCHEMA  # the Spark-written columns, row_seq included


def _row(row_seq: int, open_kinds: list[str]) -> dict[str, Any]:
    return {
        "cluster": "c",
        "topic": "orders",
        "partition": 0,
        "leader": 1,
        "leader_epoch": 3,
        "isr": [1, 2],
        "replicas": [1, 2],
        "high_watermark": 500,
        "max_committed_hw": 500,
        "leader_leo": 510,
        "uncommitted": 10,
        "hw_lag_ms": 0,
        "min_isr": 1,
        "unclean_enabled": False,
        "replica_states": [],
        "open_findings": [
            {
                "kind": k,
                "severity": "warning",
                "opened_at": 1_000,
                "broker": None,
                "details": json.dumps({}),
            }
            for k in open_kinds
        ],
        "severity": "warning" if open_kinds else "info",
        "lineage": [],
        "late_events": 0,
        "duplicate_events": 0,
        "updated_at": 2_000,  # the same for both rows
        "row_seq": row_seq,
    }


# The timer's row (later in the bucket: resolved) is stored *before* the events' row.
LATER = _row(41, [])
EARLIER = _row(40, ["hw_lag", "stale_telemetry"])


def _store(tmp_path: Path) -> Path:
    root = tmp_path / "store"
    folder = root / "state" / "batch_id=7"
    folder.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist([LATER, EARLIER], schema=SCHEMA), folder / "a.parquet")
    return root


def _opens(row: dict[str, Any]) -> list[str]:
    return [o["kind"] for o in row["open_findings"] or []]


def test_the_store_keeps_the_later_row_of_a_batch(tmp_path: Path) -> None:
    root = _store(tmp_path)
    [cur] = StoreReader(root).current()
    assert cur["row_seq"] == 41 and _opens(cur) == []
    assert [r["row_seq"] for r in StoreReader(root).history("orders", 0)] == [40, 41]
    compactor = Compactor(str(root), every=1, history_s=0)
    compactor(type("B", (), {"batch_id": 8})())
    compactor.wait()
    [cur] = StoreReader(root).current()  # from the snapshot now
    assert cur["row_seq"] == 41 and _opens(cur) == []


class _Row:
    def __init__(self, d: dict[str, Any]) -> None:
        self.d = d

    def asDict(self, recursive: bool = False) -> dict[str, Any]:
        return self.d


class _States:
    def collect(self) -> list[_Row]:
        return [_Row(LATER), _Row(EARLIER)]


class _Batch:
    def __init__(self) -> None:
        self.batch_id = 7
        self.findings: list[dict[str, Any]] = []
        self.states = _States()
        self.stats: dict[str, int] = {}


def test_the_exporter_keeps_the_later_row_of_a_batch() -> None:
    snap = Snapshot()
    SnapshotHook(snap)(_Batch())
    view = snap.partitions[("c", "orders", 0)]
    assert [o.kind for o in view.open_findings] == []


def test_the_exporter_seeded_from_the_store_agrees(tmp_path: Path) -> None:
    from monitor.exporter.driver import JobExporter

    exp = JobExporter(str(_store(tmp_path)), port=0)
    assert exp.seed() == 1
    assert [o.kind for o in exp.snapshot.partitions[("c", "orders", 0)].open_findings] == []


def test_findings_reach_kafka_in_the_order_they_were_found(spark: Any) -> None:
    """The sink writes the batch's findings from a local relation; sliced over several
    tasks (``createDataFrame``'s default), concurrent Kafka writes could put a condition's
    resolve before its open on the findings topic -- the CI short soak saw exactly that.
    The frame the sink writes is one partition, in the driver's order."""
    from streaming.job import Sinks

    rows = [(f"id-{i:04d}", str(i).encode()) for i in range(1000)]
    df = Sinks.local_frame(spark, rows, "key string, value binary")
    assert df.rdd.getNumPartitions() == 1
    assert [r.key for r in df.collect()] == [k for k, _ in rows]
