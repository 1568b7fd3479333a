"""The state store, read: the runbook's and the exporter's one way into it (DuckDB).

The Spark job writes the store (``streaming/store.py``; layout and ordering in
:mod:`monitor.contract.store`): ``state/batch_id=<n>/``, ``findings/batch_id=<n>/``,
``snapshot/state.parquet``. :class:`StoreReader` is the only reader: each question is pushed
down as SQL so that only the rows an answer needs become Python objects -- ``status`` is a
few aggregates, ``partitions --finding`` reads whole rows only where the finding is open,
``what-if`` reads a few columns of the partitions on the stopped brokers, ``explain`` one
partition's rows. :class:`StoreSource` is the runbook's :class:`~monitor.query.sources.
StateSource` over it; rows become :class:`~monitor.contract.state.PartitionView` with
:meth:`~monitor.contract.state.PartitionView.from_row`, so the CLI and /metrics read the
same numbers.

Brokers: every broker that holds a replica, and every broker with a broker-level
``stale_telemetry`` finding (the job's way of saying a broker went silent, in the findings
store); a broker whose last such finding is open is silent.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from monitor.contract.state import BrokerView, PartitionView, ReplicaRow
from monitor.contract.store import (
    FINDING_COLUMNS,
    FINDING_IDENTITY,
    FINDINGS,
    FINDINGS_IN_ORDER,
    FINDINGS_NEWEST_FIRST,
    LATER_FINDING_COLUMNS,
    SNAPSHOT_FILE,
    STATE,
)
from monitor.model import Finding, Severity, TopicConfig
from monitor.query.questions import Status
from monitor.query.sources import Freshness, Sample, SourceError, sample_of


def connect() -> Any:
    import duckdb

    return duckdb.connect()


def sources_sql(store: str | Path) -> str:
    """A DuckDB relation over the batch rows and the snapshot (if any), with ``batch_id``;
    "" when the store holds no state.

    Only ``batch_id=<n>/*.parquet`` and the snapshot are read: never a writer's temporaries
    (``_tmp-*``, ``_old-*``: ``streaming.store``). The paths are SQL string literals
    (:func:`_q`), not parameters: the relation goes into views, which DuckDB cannot prepare.
    """
    root = Path(store)
    parts = []
    if any(root.glob(f"{STATE}/batch_id=*/*.parquet")):
        parts.append(
            f"SELECT * FROM read_parquet({_q(f'{root}/{STATE}/batch_id=*/*.parquet')}, "
            "hive_partitioning = true, union_by_name = true)"
        )
    snap = root / SNAPSHOT_FILE
    if snap.is_file():
        parts.append(f"SELECT * FROM read_parquet({_q(str(snap))})")
    if not parts:
        return ""
    # Stores written before ``row_seq`` or ``deleted_at`` existed (and synthetic ones) lack
    # them: NULL there.
    parts.append("SELECT NULL::BIGINT AS row_seq, NULL::BIGINT AS deleted_at WHERE FALSE")
    return " UNION ALL BY NAME ".join(parts)


_SQL_TYPES = {"string": "VARCHAR", "int": "INTEGER", "long": "BIGINT"}


def _no_findings(names: Sequence[str] | None = None) -> str:
    """SQL: no rows, with the findings table's columns (``names`` of them: all by default)."""
    columns = ", ".join(
        f"NULL::{_SQL_TYPES[kind]} AS {name}"
        for name, kind in FINDING_COLUMNS
        if names is None or name in names
    )
    return f"SELECT {columns} WHERE FALSE"


def _q(text: str) -> str:
    """``text`` as an SQL string literal (a quote in it doubled).

    >>> _q("/tmp/o'brien store")
    "'/tmp/o''brien store'"
    """
    return "'" + text.replace("'", "''") + "'"


# --- the reader -----------------------------------------------------------------------------


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
   AND r.batch_id = l.m.b AND coalesce(r.row_seq, -1) = l.m.s AND r.updated_at = l.m.u
  WHERE r.deleted_at IS NULL;
"""

#: A row's min ISR: its own column, else (rows written before the column existed) what an
#: open ISR condition recorded — as :meth:`PartitionView.from_row` does.
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
        src = sources_sql(self.root)
        has_findings = any(self.root.glob(f"{FINDINGS}/batch_id=*/*.parquet"))
        #: Whether any partition state was written (a job's first batches may hold only
        #: topic- or broker-level findings).
        self.has_state = bool(src)
        if not src and not has_findings:
            raise StoreError(self.empty_message())
        self.con = connect()
        where = f" WHERE cluster = {_q(cluster)}" if cluster is not None else ""
        if src:
            self.con.execute(f"CREATE VIEW rows AS SELECT * FROM ({src}){where}")
            self.con.execute(_CURRENT)
        if has_findings:
            files = f"{self.root}/{FINDINGS}/batch_id=*/*.parquet"
            # Stores written before a later column existed lack it: NULL there.
            self.con.execute(
                "CREATE VIEW findings AS SELECT * EXCLUDE (rn, batch_id) FROM ("
                "SELECT *, row_number() OVER "
                f"(PARTITION BY {FINDING_IDENTITY} ORDER BY batch_id) AS rn FROM ("
                f"SELECT * FROM read_parquet({_q(files)}, "
                "hive_partitioning = true, union_by_name = true) UNION ALL BY NAME "
                f"{_no_findings(LATER_FINDING_COLUMNS)})) "
                f"WHERE rn = 1{where.replace(' WHERE', ' AND')}"
            )
        else:
            self.con.execute(f"CREATE VIEW findings AS {_no_findings()}")

    def empty_message(self) -> str:
        return (
            f"state store {self.root} is empty: no {STATE}/batch_id=*/*.parquet and no "
            f"{SNAPSHOT_FILE} (has the job run with this --store?)"
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
            "count(*) FILTER (WHERE coalesce(len(replica_states), 0) = 0) "
            "AS without_replica_samples, "
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
            'SELECT cluster, broker, state, "at", details FROM findings '
            "WHERE kind = 'stale_telemetry' AND topic IS NULL AND partition IS NULL "
            "AND broker IS NOT NULL QUALIFY row_number() OVER (PARTITION BY cluster, broker "
            f"ORDER BY {FINDINGS_NEWEST_FIRST}) = 1 ORDER BY cluster, broker"
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
            "SELECT * FROM rows WHERE topic = ? AND partition = ? AND updated_at >= ? "
            "ORDER BY cluster, batch_id, coalesce(row_seq, -1), updated_at",
            [topic, int(partition), int(since_ms)],
        )

    def findings(
        self, topic: str | None, partition: int | None, since_ms: int = 0
    ) -> list[dict[str, Any]]:
        """Findings of a partition (``Finding.to_dict`` shape, details parsed), oldest first."""
        rows = self.query(
            "SELECT * FROM findings WHERE topic IS NOT DISTINCT FROM ? "
            f'AND partition IS NOT DISTINCT FROM ? AND "at" >= ? ORDER BY {FINDINGS_IN_ORDER}',
            [topic, partition, int(since_ms)],
        )
        for r in rows:
            r["details"] = json.loads(r["details"]) if r["details"] else {}
        return rows

    def events(self, since_ms: int, kind: str | None = None) -> list[dict[str, Any]]:
        """One-off findings (state ``event``) at or after ``since_ms``, oldest first."""
        rows = self.query(
            "SELECT * FROM findings WHERE state = 'event' AND \"at\" >= ? "
            f"AND (?::VARCHAR IS NULL OR kind = ?) ORDER BY {FINDINGS_IN_ORDER}",
            [int(since_ms), kind, kind],
        )
        for r in rows:
            r["details"] = json.loads(r["details"]) if r["details"] else {}
        return rows

    def all_findings(self) -> list[Finding]:
        """Every finding in the store, oldest first (what the exporter is seeded with)."""
        rows = self.query(f"SELECT * FROM findings ORDER BY {FINDINGS_IN_ORDER}")
        return [Finding.from_dict(r) for r in rows]

    def all_findings_detected(self) -> list[tuple[Finding, int | None]]:
        """Every finding with when the job detected it (``detected_at``, ms; None for rows
        written before the store kept it), oldest first (the exporter's seed)."""
        rows = self.query(f"SELECT * FROM findings ORDER BY {FINDINGS_IN_ORDER}")
        return [(Finding.from_dict(r), r.get("detected_at")) for r in rows]

    def last_findings_batch(self) -> int:
        """The newest batch id with stored findings (-1: none). A batch's findings folder
        is complete once it exists (``streaming.store.write_findings_locally``)."""
        ids = []
        for p in (self.root / FINDINGS).glob("batch_id=*"):
            try:
                ids.append(int(p.name.split("=", 1)[1]))
            except ValueError:
                continue
        return max(ids, default=-1)

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


class StoreSource:
    """A :class:`~monitor.query.sources.StateSource` reading the job's state store."""

    def __init__(self, root: str | Path, cluster: str | None = None) -> None:
        self.root = Path(root)
        self.cluster = cluster
        self.label = f"store {self.root}" + (f" (cluster {cluster})" if cluster else "")
        self._counts: dict[str, Any] | None = None
        try:
            self.reader = StoreReader(self.root, cluster)
        except StoreError as e:
            raise SourceError(str(e)) from None
        if not self.reader.has_state:
            raise SourceError(self.reader.empty_message())

    def _q(self, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except StoreError as e:
            raise SourceError(str(e)) from None

    # -- partitions -----------------------------------------------------------------------

    def partitions(self) -> list[PartitionView]:
        return [PartitionView.from_row(r) for r in self._q(self.reader.current)]

    def partition(self, topic: str, partition: int) -> PartitionView:
        rows = self._q(self.reader.partition, topic, partition)
        if len(rows) > 1:
            clusters = ", ".join(sorted(str(r["cluster"]) for r in rows))
            raise SourceError(
                f"{topic}/{partition} exists in several clusters of {self.label} ({clusters}): "
                "give --cluster"
            )
        if rows:
            return PartitionView.from_row(rows[0])
        n, top = self._q(self.reader.topic_partitions, topic)
        if n:
            raise SourceError(
                f"unknown partition {topic}/{partition} in {self.label}: topic {topic} has "
                f"{n} partitions (0..{top})"
            )
        count, names = self._q(self.reader.topics)
        raise SourceError(
            f"unknown partition {topic}/{partition} in {self.label}: no topic {topic} "
            f"(topics known: {', '.join(names) or 'none'}"
            f"{f', ... {count} in all' if count > len(names) else ''})"
        )

    def with_open(self, kind: str, topic: str | None = None) -> list[PartitionView]:
        return [PartitionView.from_row(r) for r in self._q(self.reader.with_open, kind, topic)]

    def holding(self, brokers: set[int]) -> list[PartitionView]:
        """Lean views (no lineage, findings or lag): what ``queries.what_if`` reads."""
        out = []
        for (
            cluster,
            topic,
            number,
            leader,
            epoch,
            isr,
            replicas,
            min_isr,
            hw,
            max_hw,
            uncommitted,
            updated_at,
            brokers_,
            leos,
            opens,
        ) in self._q(self.reader.holding, sorted(brokers)):
            if min_isr is None and opens:
                min_isr = PartitionView.from_row(
                    {"open_findings": opens, "cluster": cluster, "topic": topic}
                ).min_isr
            isr_ = tuple(isr or ())
            out.append(
                PartitionView(
                    cluster=cluster,
                    topic=topic,
                    partition=number,
                    leader=leader if leader is not None and leader >= 0 else None,
                    leader_epoch=epoch or 0,
                    isr=isr_,
                    replicas=tuple(replicas or ()),
                    high_watermark=hw if hw is not None else -1,
                    max_committed_hw=max_hw if max_hw is not None else -1,
                    leader_leo=-1,
                    uncommitted=uncommitted or 0,
                    hw_lag_ms=0,
                    min_isr=min_isr,
                    unclean_enabled=None,
                    replica_states=tuple(
                        ReplicaRow(b, leo if leo is not None else -1, 0, 0, -1, -1, b in isr_)
                        for b, leo in zip(brokers_ or (), leos or (), strict=True)
                    ),
                    open_findings=(),
                    severity=Severity.INFO,
                    lineage=(),
                    late_events=0,
                    duplicate_events=0,
                    updated_at=updated_at if updated_at is not None else -1,
                )
            )
        return out

    def _summary(self) -> dict[str, Any]:
        if self._counts is None:
            self._counts = self._q(self.reader.summary)
        return self._counts

    def summary(self) -> Status:
        s = self._summary()
        st = Status(
            partitions=int(s["partitions"]),
            offline=int(s["offline"]),
            under_min_isr=int(s["under_min_isr"]),
            under_replicated=int(s["under_replicated"]),
            without_replica_samples=int(s["without_replica_samples"]),
            newest_observed_at=int(s["newest_observed_at"]),
            silent_brokers=sorted(b.broker for b in self._silent()),
        )
        by_sev: Counter[str] = Counter()
        by_kind: Counter[str] = Counter()
        for kind, severity, n in s["open"]:
            by_sev[Severity.parse(severity).label] += n
            by_kind[kind] += n
        st.open_by_severity, st.open_by_kind = by_sev, by_kind
        return st

    def freshness(self) -> Freshness:
        newest = int(self._summary()["newest_observed_at"])
        last = self.reader.last_write()
        if last is None:
            return Freshness(newest)
        return Freshness(newest, last[0], last[1])

    # -- topics and brokers ---------------------------------------------------------------------

    def topic_configs(self, topic: str | None = None) -> dict[tuple[str, str], TopicConfig]:
        return {
            (r["cluster"], r["topic"]): TopicConfig(
                int(r["replication_factor"]), int(r["min_isr"]), bool(r["unclean_enabled"])
            )
            for r in self._q(self.reader.topic_configs, topic)
        }

    def _silent(self) -> list[BrokerView]:
        return [
            BrokerView(
                r["cluster"], int(r["broker"]), False, int(r["details"].get("last_seen_at", -1))
            )
            for r in self._q(self.reader.broker_conditions)
            if r["state"] == "open"
        ]

    def brokers(self) -> list[BrokerView]:
        silent = {(b.cluster, b.broker): b for b in self._silent()}
        out = dict(silent)
        for r in self._q(self.reader.replica_brokers):
            key = (r["cluster"], int(r["broker"]))
            if key not in out:
                out[key] = BrokerView(key[0], key[1], True, int(r["observed_at"] or -1))
        return [out[k] for k in sorted(out)]

    # -- one partition's past -----------------------------------------------------------------

    def history(self, topic: str, partition: int, since_ms: int = 0) -> list[Sample]:
        out: list[Sample] = []
        rows = self._q(self.reader.history, topic, partition, since_ms)
        for r in rows:
            if r["cluster"] != rows[0]["cluster"]:
                continue  # (several clusters: ``partition()`` asks for --cluster first)
            v = PartitionView.from_row(r)
            s = sample_of(v, v.updated_at)
            if not out or out[-1].content != s.content:
                out.append(s)
        return out

    def views(self, topic: str, partition: int, since_ms: int = 0) -> list[PartitionView]:
        """Every stored state of one partition, oldest first (the demo's diagram)."""
        return [
            PartitionView.from_row(r)
            for r in self._q(self.reader.history, topic, partition, since_ms)
        ]

    def findings(self, topic: str, partition: int, since_ms: int = 0) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = self._q(self.reader.findings, topic, partition, since_ms)
        return rows

    def events(self, since_ms: int, kind: str | None = None) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = self._q(self.reader.events, since_ms, kind)
        return rows
