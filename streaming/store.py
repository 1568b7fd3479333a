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
import time
from collections.abc import Sequence
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
    # Stores written before ``row_seq`` existed (and synthetic ones) lack it: NULL there.
    parts.append("SELECT NULL::BIGINT AS row_seq WHERE FALSE")
    return " UNION ALL BY NAME ".join(parts)


#: Which of a partition's rows is the newest: the batch, then the order of the bucket's calls
#: within the batch (``streaming.operator.row_seq``: a timer row after an input row, both
#: with the same ``updated_at``), then ``updated_at`` for rows without ``row_seq``.
NEWEST_FIRST = "batch_id DESC, coalesce(row_seq, -1) DESC, updated_at DESC"


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
        f"topic, partition ORDER BY {NEWEST_FIRST}) AS rn FROM ({src})) "
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
        f"AND partition = {int(partition)} ORDER BY batch_id, coalesce(row_seq, -1), updated_at",
    )


def is_local(location: str) -> bool:
    """A folder on this machine, not an ``hdfs://``, ``s3a://``... URI.

    The store's readers (DuckDB), the compactor, the job's driver-side findings write and its
    checkpoint layout record work on local folders only; URIs go through Spark alone.
    """
    return "://" not in location


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
        'hive_partitioning = true)) WHERE rn = 1 ORDER BY "at", id',
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
        f"topic, partition ORDER BY {NEWEST_FIRST}) AS rn FROM ({src}) "
        f"WHERE batch_id <= {int(upto_batch)}) WHERE rn = 1) TO '{tmp}' (FORMAT parquet)"
    )
    n = int(con.execute(f"SELECT count(*) FROM read_parquet('{tmp}')").fetchone()[0])
    tmp.replace(root / "snapshot" / "state.parquet")
    (root / "snapshot" / "snapshot.json").write_text(json.dumps({"upto_batch": upto_batch}))
    for b in batches:
        shutil.rmtree(root / "state" / f"batch_id={b}", ignore_errors=True)
    return n


# --- the runbook's reader ----------------------------------------------------------------------


class StoreError(RuntimeError):
    """The store cannot answer: missing, empty, or unreadable (the message names the path)."""


#: The latest row of each partition: its highest ``(batch_id, row_seq, updated_at)``
#: (:data:`NEWEST_FIRST`). A semi-join on the per-partition maximum, not a window over every
#: row: filters and projections of the caller reach the Parquet scan, so "partitions with an
#: open X" reads a few columns of every row group and whole rows only where X is open.
_CURRENT = """
CREATE VIEW latest AS
  SELECT cluster, topic, partition,
         max(struct_pack(b := batch_id, s := coalesce(row_seq, -1), u := updated_at)) AS m
  FROM rows GROUP BY cluster, topic, partition;
CREATE VIEW cur AS
  SELECT r.* FROM rows r SEMI JOIN latest l
    ON r.cluster = l.cluster AND r.topic = l.topic AND r.partition = l.partition
   AND r.batch_id = l.m.b AND coalesce(r.row_seq, -1) = l.m.s AND r.updated_at = l.m.u;
"""

#: A row's min ISR: its own column, else (rows written before the column existed) what an
#: open ISR condition recorded — as ``monitor.exporter.driver.view_from_state_row`` does.
MIN_ISR = (
    "coalesce(min_isr, list_filter(list_transform(open_findings, lambda o: "
    "TRY_CAST(json_extract_string(o.details, '$.min_isr') AS INTEGER)), "
    "lambda x: x IS NOT NULL)[-1])"
)


class StoreReader:
    """Read-only DuckDB queries over a store for the runbook CLI (``monitor ... --store``).

    ``cluster`` restricts every answer to one cluster. Raises :class:`StoreError` when the
    folder is missing or holds no state. Queries return plain dicts (JSON-compatible).
    """

    def __init__(self, store: str | Path, cluster: str | None = None) -> None:
        self.root = Path(store)
        self.cluster = cluster
        if not self.root.exists():
            raise StoreError(f"state store {self.root} does not exist")
        if not self.root.is_dir():
            raise StoreError(f"state store {self.root} is not a folder")
        src = _sources(str(self.root))
        if not src:
            raise StoreError(
                f"state store {self.root} is empty: no state/batch_id=*/*.parquet and no "
                "snapshot/state.parquet (has the job run with this --store?)"
            )
        self.con = _connect()
        where = f" WHERE cluster = {_q(cluster)}" if cluster is not None else ""
        self.con.execute(f"CREATE VIEW rows AS SELECT * FROM ({src}){where}")
        self.con.execute(_CURRENT)
        if any(self.root.glob("findings/batch_id=*/*.parquet")):
            self.con.execute(
                "CREATE VIEW findings AS SELECT * EXCLUDE (rn, batch_id) FROM ("
                "SELECT *, row_number() OVER (PARTITION BY id ORDER BY batch_id) AS rn "
                f"FROM read_parquet('{self.root}/findings/batch_id=*/*.parquet', "
                f"hive_partitioning = true)) WHERE rn = 1{where.replace(' WHERE', ' AND')}"
            )
        else:
            self.con.execute(
                "CREATE VIEW findings AS SELECT NULL::VARCHAR AS id, NULL::VARCHAR AS kind, "
                "NULL::VARCHAR AS state, NULL::VARCHAR AS severity, NULL::VARCHAR AS cluster, "
                "NULL::VARCHAR AS topic, NULL::INTEGER AS partition, NULL::INTEGER AS broker, "
                "NULL::BIGINT AS at, NULL::BIGINT AS opened_at, NULL::VARCHAR AS details "
                "WHERE FALSE"
            )

    # -- plumbing -----------------------------------------------------------------------------

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        """Rows of ``sql`` as dicts (views: ``rows``, ``cur``, ``findings``)."""
        try:
            cur = self.con.execute(sql, list(params))
        except Exception as e:  # duckdb.Error: a file replaced by a replayed batch, say
            if type(e).__name__ not in ("IOException", "InvalidInputException"):
                raise
            try:
                cur = self.con.execute(sql, list(params))  # once more: the job moved on
            except Exception as e2:
                raise StoreError(f"cannot read state store {self.root}: {e2}") from None
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]

    def current(
        self, where: str = "TRUE", params: Sequence[Any] = (), columns: str = "*"
    ) -> list[dict[str, Any]]:
        """The latest row of the partitions matching ``where`` (one row per partition)."""
        return self.query(
            f"SELECT {columns} FROM cur WHERE {where} ORDER BY cluster, topic, partition",
            params,
        )

    # -- the runbook's questions ------------------------------------------------------------------

    def summary(self) -> dict[str, Any]:
        """Counts over every partition's latest row (``monitor status``)."""
        row = self.query(
            "SELECT count(*) AS partitions, "
            "count(*) FILTER (WHERE leader IS NULL OR leader < 0) AS offline, "
            f"count(*) FILTER (WHERE {MIN_ISR} IS NOT NULL "
            f"AND coalesce(len(isr), 0) < {MIN_ISR}) AS under_min_isr, "
            "count(*) FILTER (WHERE leader >= 0 "
            "AND coalesce(len(isr), 0) < coalesce(len(replicas), 0)) AS under_replicated, "
            "coalesce(max(updated_at), -1) AS newest_observed_at FROM cur"
        )[0]
        opens = self.query(
            "SELECT o.kind AS kind, o.severity AS severity, count(*) AS n "
            "FROM (SELECT unnest(open_findings) AS o FROM cur) GROUP BY ALL ORDER BY n DESC"
        )
        row["open"] = [(o["kind"], o["severity"], int(o["n"])) for o in opens]
        return row

    def with_open(self, kind: str, topic: str | None = None) -> list[dict[str, Any]]:
        """Latest rows of the partitions with an open condition of ``kind``."""
        where = "list_contains(list_transform(open_findings, lambda o: o.kind), ?)"
        params: list[Any] = [kind]
        if topic is not None:
            where += " AND topic = ?"
            params.append(topic)
        return self.current(where, params)

    #: The columns of :meth:`holding`'s tuples.
    HOLDING = (
        "cluster",
        "topic",
        "partition",
        "leader",
        "leader_epoch",
        "isr",
        "replicas",
        "min_isr",
        "high_watermark",
        "max_committed_hw",
        "uncommitted",
        "updated_at",
        "replica_brokers",
        "replica_leos",
        "open_findings",
    )

    def holding(self, brokers: Sequence[int]) -> list[tuple[Any, ...]]:
        """What ``what-if`` needs of the partitions with a replica on one of ``brokers``,
        as tuples of :data:`HOLDING` (tens of thousands of rows: tuples of flat lists are
        several times cheaper to build than dicts of structs). ``open_findings`` is only
        given where ``min_isr`` is missing (older rows), for the fallback."""
        sql = (
            "SELECT cluster, topic, partition, leader, leader_epoch, isr, replicas, min_isr, "
            "high_watermark, max_committed_hw, uncommitted, updated_at, "
            "list_transform(replica_states, lambda r: r.broker), "
            "list_transform(replica_states, lambda r: r.leo), "
            "CASE WHEN min_isr IS NULL THEN open_findings END "
            "FROM cur WHERE list_has_any(replicas, ?::INTEGER[]) "
            "ORDER BY cluster, topic, partition"
        )
        try:
            rows: list[tuple[Any, ...]] = self.con.execute(sql, [list(brokers)]).fetchall()
        except Exception as e:
            raise StoreError(f"cannot read state store {self.root}: {e}") from None
        return rows

    def partition(self, topic: str, partition: int) -> list[dict[str, Any]]:
        return self.current("topic = ? AND partition = ?", [topic, int(partition)])

    def topic_partitions(self, topic: str) -> tuple[int, int]:
        """(partitions of ``topic`` in the store, highest partition number)."""
        r = self.query(
            "SELECT count(*) AS n, coalesce(max(partition), -1) AS top FROM latest WHERE topic = ?",
            [topic],
        )[0]
        return int(r["n"]), int(r["top"])

    def topics(self, limit: int = 10) -> tuple[int, list[str]]:
        """(number of topics, the first ``limit`` names)."""
        rows = self.query("SELECT DISTINCT topic FROM latest ORDER BY topic")
        return len(rows), [r["topic"] for r in rows[:limit]]

    def topic_configs(self, topic: str | None = None) -> list[dict[str, Any]]:
        """Per topic: RF (the most replicas of a partition), the latest known min ISR and
        unclean flag; topics whose configuration was never reported are left out."""
        where = "WHERE topic = ?" if topic is not None else ""
        return self.query(
            "SELECT cluster, topic, max(len(replicas)) AS replication_factor, "
            "arg_max(min_isr, updated_at) FILTER (WHERE min_isr IS NOT NULL) AS min_isr, "
            "arg_max(unclean_enabled, updated_at) FILTER (WHERE unclean_enabled IS NOT NULL) "
            f"AS unclean_enabled FROM cur {where} GROUP BY cluster, topic "
            "HAVING min_isr IS NOT NULL ORDER BY cluster, topic",
            [topic] if topic is not None else [],
        )

    def broker_conditions(self) -> list[dict[str, Any]]:
        """Each broker's last broker-level ``stale_telemetry`` finding (open = silent)."""
        rows = self.query(
            'SELECT cluster, broker, arg_max(state, "at") AS state, max("at") AS "at", '
            "arg_max(details, \"at\") AS details FROM findings WHERE kind = 'stale_telemetry' "
            "AND topic IS NULL AND partition IS NULL AND broker IS NOT NULL "
            "GROUP BY cluster, broker ORDER BY cluster, broker"
        )
        for r in rows:
            r["details"] = json.loads(r["details"]) if r["details"] else {}
        return rows

    def replica_brokers(self) -> list[dict[str, Any]]:
        """Every broker holding a replica, with its newest replica sample time."""
        return self.query(
            "SELECT cluster, r.broker AS broker, max(r.observed_at) AS observed_at FROM "
            "(SELECT cluster, unnest(replica_states) AS r FROM cur) GROUP BY ALL ORDER BY ALL"
        )

    def history(self, topic: str, partition: int, since_ms: int = 0) -> list[dict[str, Any]]:
        """Every stored row of one partition (oldest first); with a cluster filter, its own."""
        return self.query(
            "SELECT cluster, batch_id, updated_at, high_watermark, leader, leader_epoch, isr, "
            "replica_states FROM rows WHERE topic = ? AND partition = ? AND updated_at >= ? "
            "ORDER BY cluster, batch_id, coalesce(row_seq, -1), updated_at",
            [topic, int(partition), int(since_ms)],
        )

    def findings(
        self, topic: str | None, partition: int | None, since_ms: int = 0
    ) -> list[dict[str, Any]]:
        """Findings of a partition (``Finding.to_dict`` shape, details parsed), oldest first."""
        rows = self.query(
            "SELECT * FROM findings WHERE topic IS NOT DISTINCT FROM ? "
            'AND partition IS NOT DISTINCT FROM ? AND "at" >= ? ORDER BY "at", id',
            [topic, partition, int(since_ms)],
        )
        for r in rows:
            r["details"] = json.loads(r["details"]) if r["details"] else {}
        return rows

    def last_write(self) -> tuple[int, float] | None:
        """(newest batch id, when its folder was written, Unix s) — the job's heartbeat."""
        best: tuple[int, float] | None = None
        for sub in ("state", "findings"):
            for p in (self.root / sub).glob("batch_id=*"):
                try:
                    b, mtime = int(p.name.split("=", 1)[1]), p.stat().st_mtime
                except (ValueError, OSError):
                    continue
                if best is None or (b, mtime) > best:
                    best = (b, mtime)
        snap = self.root / "snapshot" / "snapshot.json"
        if best is None and snap.is_file():
            best = (int(json.loads(snap.read_text())["upto_batch"]), snap.stat().st_mtime)
        return best


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
            for p in Path(self.store).glob("state/batch_id=*")
            if p.stat().st_mtime < horizon
        ]
        upto = max((b for b in old if b < batch_id), default=-1)
        if upto >= 0:
            compact(self.store, upto)
            self.compactions += 1
