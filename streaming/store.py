"""The state store, written: the job's findings write, and compaction.

The layout, the row schemas and which row is newest are in :mod:`monitor.contract.store`;
the one reader is :mod:`monitor.query.store`. The job writes the state rows with Spark
(``Sinks`` in ``streaming/job.py``) and, for a local store, the findings with pyarrow from
the driver (:func:`write_findings_locally`); :class:`Compactor` folds old batches into the
snapshot.

Why Parquet + DuckDB: the job must not wait on a database; appending a few MB of columnar
files per batch costs the job almost nothing, works on any Hadoop file system (HDFS, S3)
and needs no server. DuckDB reads a partition's history or the latest state of every
partition from those files in milliseconds, in-process, from the runbook CLI.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

from monitor.contract.store import (
    FINDING_COLUMNS,
    FINDINGS,
    NEWEST_FIRST,
    SNAPSHOT_FILE,
    SNAPSHOT_MARK,
    STATE,
)
from monitor.query.store import connect, sources_sql


def is_local(location: str) -> bool:
    """A folder on this machine, not an ``hdfs://``, ``s3a://``... URI.

    The store's reader (DuckDB), the compactor, the job's driver-side findings write and its
    checkpoint layout record work on local folders only; URIs go through Spark alone.
    """
    return "://" not in location


def write_findings_locally(store: Path, batch_id: int, rows: list[tuple[Any, ...]]) -> Path:
    """``<store>/findings/batch_id=<n>/part-00000.parquet`` with pyarrow, from the driver.

    The findings are already on the driver (a few per batch); a Spark write of them is a
    job, a task and Hadoop's commit protocol per batch. Measured with ``bench.spark_bench``
    (docs/benchmarks.md, fifth round), the sink's store step fell by 0.2-0.4 s per batch
    (100k partitions: 1.47 -> 1.11 s; 10k: 0.55 -> 0.36 s). Same columns and types as
    ``FINDING_DDL``; replacing the folder keeps a replayed batch idempotent, and the file is
    complete before it appears under ``batch_id=<n>/`` (readers glob only those).
    """
    import uuid

    import pyarrow as pa
    import pyarrow.parquet as pq

    types = {"string": pa.string(), "int": pa.int32(), "long": pa.int64()}
    schema_ = pa.schema([pa.field(name, types[t]) for name, t in FINDING_COLUMNS])
    table = pa.Table.from_pylist([dict(zip(schema_.names, r, strict=True)) for r in rows], schema_)
    root = store / FINDINGS
    tmp = root / f"_tmp-{uuid.uuid4().hex}"
    tmp.mkdir(parents=True)
    pq.write_table(table, tmp / "part-00000.parquet")
    final = root / f"batch_id={batch_id}"
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)
    return final / "part-00000.parquet"


def compact(store: str, upto_batch: int) -> int:
    """Fold batches ``<= upto_batch`` into the snapshot (latest row per partition, tombstones
    of deleted topics left out); return rows.

    History older than the snapshot is dropped. Call it only for batches the query has
    committed (a replayed batch rewrites only the newest, uncommitted batch folder).
    """
    root = Path(store)
    batches = sorted(
        int(p.name.split("=", 1)[1])
        for p in root.glob(f"{STATE}/batch_id=*")
        if int(p.name.split("=", 1)[1]) <= upto_batch
    )
    if not batches:
        return 0
    src = sources_sql(store)
    con = connect()
    final = root / SNAPSHOT_FILE
    tmp = final.with_suffix(".parquet.tmp")
    tmp.parent.mkdir(parents=True, exist_ok=True)
    con.execute(
        f"COPY (SELECT * EXCLUDE (rn) FROM (SELECT *, row_number() OVER (PARTITION BY cluster, "
        f"topic, partition ORDER BY {NEWEST_FIRST}) AS rn FROM ({src}) "
        f"WHERE batch_id <= {int(upto_batch)}) WHERE rn = 1 AND deleted_at IS NULL) "
        f"TO '{tmp}' (FORMAT parquet)"
    )
    n = int(con.execute(f"SELECT count(*) FROM read_parquet('{tmp}')").fetchone()[0])
    tmp.replace(final)
    (root / SNAPSHOT_MARK).write_text(json.dumps({"upto_batch": upto_batch}))
    for b in batches:
        shutil.rmtree(root / STATE / f"batch_id={b}", ignore_errors=True)
    return n


# --- keeping the store small -------------------------------------------------------------------


class Compactor:
    """A driver hook: every ``every`` batches, fold the batches older than ``history_s`` into
    the snapshot (one row per partition), so "latest state" questions read ~one row per
    partition plus the recent history, not every row ever written.

    Recent batches stay as they are: they are ``explain``'s watermark history. Only batches
    before the current one are folded (those the query has committed). A reader that loses a
    file to a concurrent compaction retries (:class:`StoreReader`).
    """

    def __init__(self, store: str, every: int = 100, history_s: float = 3600.0) -> None:
        self.store = store
        self.every = every
        self.history_s = history_s
        self.compactions = 0

    def __call__(self, batch: Any) -> None:
        batch_id = int(batch.batch_id)
        if self.every <= 0 or not is_local(self.store) or batch_id % self.every:
            return
        horizon = time.time() - self.history_s
        old = [
            int(p.name.split("=", 1)[1])
            for p in Path(self.store).glob(f"{STATE}/batch_id=*")
            if p.stat().st_mtime < horizon
        ]
        upto = max((b for b in old if b < batch_id), default=-1)
        if upto >= 0:
            compact(self.store, upto)
            self.compactions += 1
