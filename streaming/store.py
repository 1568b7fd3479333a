"""The queryable partition-state store: Parquet written by the job, read with DuckDB.

Layout (under the store root)::

    state/batch_id=<n>/part-*.parquet      touched partitions' state after batch n
    findings/batch_id=<n>/part-*.parquet   the findings of batch n
    snapshot/state.parquet                 latest row per partition up to ``snapshot.json``'s
                                           batch (written by :func:`compact`)

Each micro-batch writes its own ``batch_id=<n>`` folders with ``mode("overwrite")``: a batch
replayed after a failure rewrites the same folders with the same rows, so the store is
idempotent by batch id. The current state of a partition is its row with the highest
``batch_id`` (snapshot rows count as their snapshot batch); all rows of a partition are its
history, for ``explain`` plots.

Why Parquet + DuckDB: the job must not wait on a database; appending a few MB of columnar
files per batch costs the job almost nothing, works on any Hadoop file system (HDFS, S3)
and needs no server. DuckDB reads a partition's history or the latest state of every
partition from those files in milliseconds, in-process, from the runbook CLI.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any


def _connect() -> Any:
    import duckdb

    return duckdb.connect()


def _sources(store: str) -> str:
    """A DuckDB relation over batch rows and the snapshot (if any), with ``batch_id``."""
    root = Path(store)
    parts = []
    if any(root.glob("state/batch_id=*/*.parquet")):
        parts.append(
            f"SELECT * FROM read_parquet('{root}/state/batch_id=*/*.parquet', "
            "hive_partitioning = true, union_by_name = true)"
        )
    snap = root / "snapshot" / "state.parquet"
    if snap.is_file():
        parts.append(f"SELECT * FROM read_parquet('{snap}')")
    if not parts:
        return ""
    return " UNION ALL BY NAME ".join(parts)


def _rows(con: Any, sql: str) -> list[dict[str, Any]]:
    cur = con.execute(sql)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def current_state(store: str) -> list[dict[str, Any]]:
    """The latest row of every partition in the store."""
    src = _sources(store)
    if not src:
        return []
    con = _connect()
    return _rows(
        con,
        f"SELECT * EXCLUDE (rn) FROM (SELECT *, row_number() OVER (PARTITION BY cluster, "
        f"topic, partition ORDER BY batch_id DESC, updated_at DESC) AS rn FROM ({src})) "
        "WHERE rn = 1 ORDER BY cluster, topic, partition",
    )


def history(store: str, cluster: str, topic: str, partition: int) -> list[dict[str, Any]]:
    """Every stored row of one partition, oldest first."""
    src = _sources(store)
    if not src:
        return []
    return _rows(
        _connect(),
        f"SELECT * FROM ({src}) WHERE cluster = {_q(cluster)} AND topic = {_q(topic)} "
        f"AND partition = {int(partition)} ORDER BY batch_id, updated_at",
    )


def findings(store: str) -> list[dict[str, Any]]:
    """Every finding the job wrote, deduplicated by id."""
    root = Path(store)
    if not any(root.glob("findings/batch_id=*/*.parquet")):
        return []
    con = _connect()
    return _rows(
        con,
        f"SELECT * EXCLUDE (rn) FROM (SELECT *, row_number() OVER (PARTITION BY id "
        f"ORDER BY batch_id) AS rn FROM read_parquet('{root}/findings/batch_id=*/*.parquet', "
        "hive_partitioning = true)) WHERE rn = 1 ORDER BY at, id",
    )


def _q(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def compact(store: str, upto_batch: int) -> int:
    """Fold batches ``<= upto_batch`` into the snapshot (latest row per partition); return rows.

    History older than the snapshot is dropped. Call it only for batches the query has
    committed (a replayed batch rewrites only the newest, uncommitted batch folder).
    """
    root = Path(store)
    batches = sorted(
        int(p.name.split("=", 1)[1])
        for p in root.glob("state/batch_id=*")
        if int(p.name.split("=", 1)[1]) <= upto_batch
    )
    if not batches:
        return 0
    src = _sources(store)
    con = _connect()
    tmp = root / "snapshot" / "state.parquet.tmp"
    tmp.parent.mkdir(parents=True, exist_ok=True)
    con.execute(
        f"COPY (SELECT * EXCLUDE (rn) FROM (SELECT *, row_number() OVER (PARTITION BY cluster, "
        f"topic, partition ORDER BY batch_id DESC, updated_at DESC) AS rn FROM ({src}) "
        f"WHERE batch_id <= {int(upto_batch)}) WHERE rn = 1) TO '{tmp}' (FORMAT parquet)"
    )
    n = int(con.execute(f"SELECT count(*) FROM read_parquet('{tmp}')").fetchone()[0])
    tmp.replace(root / "snapshot" / "state.parquet")
    (root / "snapshot" / "snapshot.json").write_text(json.dumps({"upto_batch": upto_batch}))
    for b in batches:
        shutil.rmtree(root / "state" / f"batch_id={b}", ignore_errors=True)
    return n
