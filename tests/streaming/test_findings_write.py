"""The findings of a batch, written by the driver with pyarrow into a local store.

The Spark write it replaced (still used for ``hdfs://``/``s3a://`` stores) is the
reference: same columns, same types, and the store's readers see the same rows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from monitor.contract.store import FINDING_COLUMNS, FINDING_DDL
from monitor.query.store import StoreReader
from streaming.store import is_local, write_findings_locally

ROWS = [
    ("f-1", "under_min_isr", "open", "critical", "c1", "orders", 0, None, 1_000, 1_000,
     '{"isr":[1],"min_isr":2}', 1_700_000_000_000, 4 << 32),
    ("f-2", "stale_telemetry", "open", "warning", "c1", None, None, 3, 1_500, 1_500, "{}", None,
     None),
]  # fmt: skip


def _findings(store: Path) -> list[dict[str, Any]]:
    """What the store's reader sees: every finding, by time."""
    return StoreReader(store).query('SELECT * FROM findings ORDER BY "at", id')


def test_the_local_write_matches_the_spark_write(spark: Any, tmp_path: Path) -> None:
    spark.createDataFrame(ROWS, FINDING_DDL).coalesce(1).write.mode("overwrite").parquet(
        str(tmp_path / "spark" / "findings" / "batch_id=4")
    )
    local = write_findings_locally(tmp_path / "local", 4, ROWS)
    by_spark = pq.read_schema(
        next((tmp_path / "spark" / "findings" / "batch_id=4").glob("*.parquet"))
    )
    by_arrow = pq.read_schema(local)
    assert [(f.name, f.type) for f in by_arrow] == [(f.name, f.type) for f in by_spark]
    assert _findings(tmp_path / "local") == _findings(tmp_path / "spark")
    assert [f["id"] for f in _findings(tmp_path / "local")] == ["f-1", "f-2"]


def test_a_replayed_batch_replaces_its_findings_and_leaves_no_temporary_folder(
    tmp_path: Path,
) -> None:
    write_findings_locally(tmp_path, 7, ROWS)
    write_findings_locally(tmp_path, 7, ROWS[:1])
    write_findings_locally(tmp_path, 8, ROWS[1:])
    assert sorted(p.name for p in (tmp_path / "findings").iterdir()) == [
        "batch_id=7",
        "batch_id=8",
    ]
    assert [f["id"] for f in _findings(tmp_path)] == ["f-1", "f-2"]
    assert len(list((tmp_path / "findings" / "batch_id=7").iterdir())) == 1


def test_only_folders_are_written_locally() -> None:
    assert is_local("/var/lib/monitor/store") and is_local(".cache/streaming/store")
    assert not is_local("s3a://bucket/store") and not is_local("hdfs://nn:8020/store")


def test_findings_written_before_detected_at_read_with_it_null(tmp_path: Path) -> None:
    """A store written before the findings had ``detected_at`` (issue 20) and ``seq`` reads
    on: its rows say NULL (the exporter then falls back to the event's time, never to now;
    the reader to the stamps' order)."""
    import pyarrow as pa

    old = pa.table(
        {name: [v] for (name, _), v in zip(FINDING_COLUMNS[:-2], ROWS[1][:-2], strict=True)}
    )
    folder = tmp_path / "findings" / "batch_id=3"
    folder.mkdir(parents=True)
    pq.write_table(old, folder / "part-00000.parquet")
    write_findings_locally(tmp_path, 4, ROWS[:1])
    got = {f["id"]: (f["detected_at"], f["seq"]) for f in _findings(tmp_path)}
    assert got == {"f-1": (1_700_000_000_000, 4 << 32), "f-2": (None, None)}
