"""The stateful operator: one ``ClusterModel`` per hash bucket of partitions, in Spark state.

Why buckets. A Python stateful operator pays a fixed cost per *key* per micro-batch (the
state API is a socket round trip per call, plus an Arrow batch per group): keyed by single
partition that is 1-2 ms x 100k partitions per batch. Keyed by ``pmod(xxhash64(cluster,
topic, partition), N)`` the cost is paid N times per batch, and each key's events are a
plain Python loop over ``ClusterModel.apply`` — the model stays pure and per-partition
semantics are kept (the model itself routes each event to its partition's state).

State layout, per bucket (key):

* ``model`` — ValueState[binary]: the bucket's ``ClusterModel`` (with a small sidecar:
  when the bucket last received events, its timer), pickled with reducers for the model's
  slotted dataclasses (2.5x faster than pickle's default for slotted objects);
* ``token`` — ValueState[string]: a random token rewritten with every ``model`` write.

A Python worker keeps the models it last wrote in memory, keyed by bucket and token. When
the token in state equals the cached one, the (large) blob is not read or unpickled at all;
any mismatch — another worker wrote the bucket, a task retry, a restart from the checkpoint
— falls back to the blob. Correctness never depends on the cache.

Topic and broker events are fanned out (JVM side) to every bucket, because every bucket
needs a topic's ``min.insync.replicas`` for its partitions; only the bucket that *owns* the
topic or broker (``crc32(key) mod N``, :class:`OwnsGlobal`) reports topic- and
broker-level findings. Invalid records travel on bucket ``-1`` and come out as dead letters.

Order: within a bucket and micro-batch, events are applied sorted by ``observed_at``, then
a stable kind order (``topic_config``, ``broker``, then partition-level events), then the
source (Kafka partition, offset) order; exact duplicates are dropped. Events older than
what the model has applied for the same source are ignored by the model itself.

Time: a processing-time timer per bucket calls ``ClusterModel.tick(now)`` every
``tick_ms``. ``now`` is the micro-batch's timestamp (fixed in the offset log, so a
replayed batch ticks at the same instant and produces the same finding ids), except that a
bucket which received events in this batch ticks at most ``catchup_slack_ms`` past the
newest ``observed_at`` it applied: replaying a backlog must not look like silence.
"""

from __future__ import annotations

import io
import json
import operator
import pickle
import uuid
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from typing import Any

from monitor.model import (
    BrokerReport,
    ClusterModel,
    Finding,
    ModelConfig,
    PartitionMeta,
    ReplicaReport,
    TopicConfigReport,
)
from monitor.model.state import (
    BrokerState,
    OpenCondition,
    PartitionState,
    ReplicaState,
    TopicState,
)

#: Stable order of kinds at equal ``observed_at``: configuration before what it governs.
#: ``partition`` and ``replica`` share a rank: between them the source order decides (the
#: collector emits a partition's samples in the order it took them, into one Kafka partition).
KIND_ORDER: dict[str, int] = {"topic_config": 0, "broker": 1, "partition": 2, "replica": 2}

#: Bucket of records that failed validation (they are forwarded as dead letters).
DEAD_BUCKET = -1

#: Sentinel for "null" in integer columns handed to Python: pandas turns an integer column
#: with nulls into float64, which cannot hold offsets above 2**53 exactly. Every nullable
#: integer of the contract is >= 0, so -1 is never a real value.
NULL_INT = -1

#: Integer columns of the operator's input (null -> NULL_INT on the JVM side).
INT_COLUMNS: tuple[str, ...] = (
    "observed_at",
    "partition",
    "leader",
    "leader_epoch",
    "high_watermark",
    "log_start_offset",
    "broker",
    "log_end_offset",
    "fetch_lag",
    "replication_factor",
    "min_insync_replicas",
    "unclean_elections_total",
    "isr_shrinks_total",
    "isr_expands_total",
    "under_replicated_partitions",
    "src_partition",
    "src_offset",
)
LIST_COLUMNS: tuple[str, ...] = ("replicas", "isr", "offline_replicas", "eligible_leader_replicas")
BOOL_COLUMNS: tuple[str, ...] = ("unclean_leader_election_enable", "alive", "active_controller")

#: What the operator emits (one schema for every kind of output row).
OUTPUT_DDL = (
    "out string, key string, value binary, reason string, src_topic string, "
    "src_partition int, src_offset long, bucket int, n_events long, n_duplicates long, "
    "n_findings long, n_partitions long, state_bytes long"
)


class OwnsGlobal:
    """``owns_global`` of one bucket: does it report this topic's or broker's findings?

    A class, not a lambda, so a bucket's model pickles. crc32 is what Spark's ``crc32``
    computes too, so the JVM side can tell which fanned-out copy is the owner's.
    """

    __slots__ = ("bucket", "buckets")

    def __init__(self, bucket: int, buckets: int) -> None:
        self.bucket = bucket
        self.buckets = buckets

    def __call__(self, key: str) -> bool:
        return zlib.crc32(key.encode()) % self.buckets == self.bucket

    def __reduce__(self) -> tuple[type[OwnsGlobal], tuple[int, int]]:
        return (OwnsGlobal, (self.bucket, self.buckets))


@dataclass(slots=True)
class Bucket:
    """What one state key holds: the model and the operator's own bookkeeping."""

    model: ClusterModel
    #: Timestamp (ms) of the micro-batch that last delivered events, and the newest
    #: observed_at among them: the catch-up clamp of the tick clock.
    input_batch_ts: int = -1
    input_max_observed: int = -1
    #: Processing time of the registered timer (-1: none).
    timer_at: int = -1
    events: int = 0
    duplicates: int = 0
    ticks: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


# --- serialisation ---------------------------------------------------------------------------


def _slots_reducer(cls: type) -> Any:
    names = [f.name for f in fields(cls)]
    getter = operator.attrgetter(*names)

    def reduce(obj: Any) -> tuple[type, tuple[Any, ...]]:
        return (cls, getter(obj))

    return reduce


_DISPATCH = {
    cls: _slots_reducer(cls)
    for cls in (PartitionState, ReplicaState, OpenCondition, TopicState, BrokerState, Bucket)
}


def dumps(bucket: Bucket) -> bytes:
    """Pickle a bucket; the model's dataclasses are reduced to constructor arguments."""
    buf = io.BytesIO()
    pickler = pickle.Pickler(buf, protocol=5)
    pickler.dispatch_table = _DISPATCH  # type: ignore[assignment]
    pickler.dump(bucket)
    return buf.getvalue()


def loads(blob: bytes) -> Bucket:
    value = pickle.loads(blob)
    if not isinstance(value, Bucket):
        raise TypeError(f"state holds {type(value).__name__}, not a Bucket")
    return value


# --- building model events from the operator's input columns ---------------------------------


def _opt(v: int) -> int | None:
    return None if v == NULL_INT else v


def _ints(a: Any) -> tuple[int, ...]:
    return tuple(a.tolist()) if hasattr(a, "tolist") else tuple(a)


def _opt_ints(a: Any) -> tuple[int, ...] | None:
    return None if a is None else _ints(a)


def _opt_bool(v: Any) -> bool | None:
    return None if v is None or v != v else bool(v)


def events_from_columns(cols: dict[str, list[Any]], order: list[int]) -> Iterator[Any]:
    """Model events for rows ``order`` of column lists (the operator's input)."""
    kind = cols["kind"]
    cl, t, tp, pa = cols["cluster"], cols["observed_at"], cols["topic"], cols["partition"]
    for i in order:
        k = kind[i]
        if k == "replica":
            yield ReplicaReport(
                cl[i],
                t[i],
                tp[i],
                pa[i],
                cols["broker"][i],
                cols["log_end_offset"][i],
                _opt(cols["log_start_offset"][i]),
                _opt(cols["high_watermark"][i]),
                _opt(cols["fetch_lag"][i]),
            )
        elif k == "partition":
            yield PartitionMeta(
                cl[i],
                t[i],
                tp[i],
                pa[i],
                _opt(cols["leader"][i]),
                cols["leader_epoch"][i],
                _ints(cols["replicas"][i]),
                _ints(cols["isr"][i]),
                _ints(cols["offline_replicas"][i]),
                _opt_ints(cols["eligible_leader_replicas"][i]),
                _opt(cols["high_watermark"][i]),
                _opt(cols["log_start_offset"][i]),
            )
        elif k == "topic_config":
            yield TopicConfigReport(
                cl[i],
                t[i],
                tp[i],
                cols["replication_factor"][i],
                cols["min_insync_replicas"][i],
                bool(cols["unclean_leader_election_enable"][i]),
            )
        else:
            yield BrokerReport(
                cl[i],
                t[i],
                cols["broker"][i],
                bool(cols["alive"][i]),
                _opt(cols["unclean_elections_total"][i]),
                _opt(cols["isr_shrinks_total"][i]),
                _opt(cols["isr_expands_total"][i]),
                _opt(cols["under_replicated_partitions"][i]),
                _opt_bool(cols["active_controller"][i]),
            )


def _identity(cols: dict[str, list[Any]], i: int, names: list[str]) -> tuple[Any, ...]:
    """Everything of row ``i`` but its Kafka coordinates (exact-duplicate detection)."""
    out: list[Any] = []
    for n in names:
        v = cols[n][i]
        if n in LIST_COLUMNS and v is not None:
            v = _ints(v)
        elif v != v:  # NaN: pandas' null in an all-null string column
            v = None
        out.append(v)
    return tuple(out)


def ordered_rows(cols: dict[str, list[Any]], n: int) -> tuple[list[int], int]:
    """Row indices sorted by (observed_at, kind order, source order); exact duplicates out."""
    t, kind = cols["observed_at"], cols["kind"]
    sp, so = cols["src_partition"], cols["src_offset"]
    order = sorted(range(n), key=lambda i: (t[i], KIND_ORDER[kind[i]], sp[i], so[i]))
    names = [
        c
        for c in cols
        if c not in ("src_partition", "src_offset", "src_topic", "owner", "value", "reason")
    ]
    seen: set[tuple[Any, ...]] = set()
    kept: list[int] = []
    prev_t = None
    for i in order:
        if t[i] != prev_t:
            seen.clear()  # duplicates share observed_at: compare only within one instant
            prev_t = t[i]
        ident = _identity(cols, i, names)
        if ident in seen:
            continue
        seen.add(ident)
        kept.append(i)
    return kept, n - len(kept)


# --- the state rows (what the runbook CLI and exporter read) -------------------------------------


def state_row(ps: PartitionState) -> dict[str, Any]:
    """One partition's current state, as written to the Parquet store (JSON-compatible)."""
    leader_leo = ps.leader_leo()
    return {
        "cluster": ps.cluster,
        "topic": ps.topic,
        "partition": ps.partition,
        "leader": ps.leader,
        "leader_epoch": ps.leader_epoch,
        "isr": list(ps.isr),
        "replicas": list(ps.replicas),
        "high_watermark": ps.hw,
        "max_committed_hw": ps.max_hw,
        "leader_leo": leader_leo,
        "uncommitted": ps.uncommitted(),
        "replica_states": [
            {
                "broker": b,
                "leo": rs.leo,
                "lag_offsets": rs.lag_offsets,
                "lag_ms": rs.lag_ms,
                "caught_up_at": rs.caught_up_at,
                "observed_at": rs.observed_at,
                "in_isr": b in ps.isr,
            }
            for b, rs in sorted(ps.replica_states.items())
        ],
        "open_findings": [
            {
                "kind": str(c.kind),
                "severity": c.severity.label,
                "opened_at": c.opened_at,
                "broker": c.broker,
                "details": json.dumps(c.details, separators=(",", ":"), default=str),
            }
            for c in ps.open.values()
        ],
        "severity": ps.severity().label,
        "lineage": [
            {"epoch": e.epoch, "start_offset": e.start_offset, "leader": e.leader, "at": e.at}
            for e in ps.lineage
        ],
        "late_events": ps.late_events,
        "duplicate_events": ps.duplicate_events,
        "updated_at": ps.last_seen,
    }


# --- the processor ---------------------------------------------------------------------------


#: Worker-process cache: bucket -> (token, Bucket). See the module docstring.
_CACHE: dict[tuple[str, int], tuple[str, Bucket]] = {}


@dataclass(frozen=True)
class OperatorSettings:
    """What the processor needs to know (picklable; shipped to the Python workers)."""

    buckets: int
    tick_ms: int
    catchup_slack_ms: int
    model: ModelConfig
    #: Separates the worker caches of two queries sharing a Python worker (tests, bench).
    cache_scope: str = ""
    emit_state: bool = True


class Outputs:
    """Collects output rows column-wise (cheaper than a list of dicts)."""

    COLUMNS = tuple(c.split()[0] for c in OUTPUT_DDL.split(", "))

    def __init__(self) -> None:
        self.cols: dict[str, list[Any]] = {c: [] for c in self.COLUMNS}

    def add(self, **values: Any) -> None:
        for c in self.COLUMNS:
            self.cols[c].append(values.get(c))

    def findings(self, bucket: int, findings: list[Finding]) -> None:
        for f in findings:
            d = f.to_dict()
            self.add(
                out="finding",
                key=d["id"],
                value=json.dumps(d, separators=(",", ":"), default=str).encode(),
                bucket=bucket,
            )

    def states(self, bucket: int, states: list[PartitionState]) -> None:
        for ps in states:
            self.add(
                out="state",
                key=f"{ps.cluster}/{ps.topic}/{ps.partition}",
                value=json.dumps(state_row(ps), separators=(",", ":"), default=str).encode(),
                bucket=bucket,
            )

    def __len__(self) -> int:
        return len(self.cols["out"])

    def frame(self) -> Any:
        import pandas as pd

        return pd.DataFrame(self.cols, columns=list(self.COLUMNS))


def _bytes(v: Any) -> bytes:
    return bytes(v) if v is not None else b""


def make_processor(settings: OperatorSettings) -> Any:
    """The ``StatefulProcessor`` for ``transformWithStateInPandas`` (built lazily: pyspark)."""
    from pyspark.sql.streaming import StatefulProcessor

    class BucketProcessor(StatefulProcessor):  # type: ignore[misc]
        def init(self, handle: Any) -> None:
            self.handle = handle
            self.blob = handle.getValueState("model", "blob binary")
            self.token = handle.getValueState("token", "token string")

        # -- state ---------------------------------------------------------------------
        def _load(self, bucket: int) -> Bucket:
            key = (settings.cache_scope, bucket)
            cached = _CACHE.pop(key, None)  # popped: a failure mid-batch leaves no entry
            stored = self.token.get()
            if stored is not None and cached is not None and cached[0] == stored[0]:
                return cached[1]
            if stored is None:
                model = ClusterModel(settings.model, OwnsGlobal(bucket, settings.buckets))
                return Bucket(model)
            row = self.blob.get()
            assert row is not None, "token without blob"
            return loads(bytes(row[0]))

        def _save(self, bucket: int, state: Bucket) -> int:
            blob = dumps(state)
            token = uuid.uuid4().hex
            self.blob.update((blob,))
            self.token.update((token,))
            _CACHE[(settings.cache_scope, bucket)] = (token, state)
            return len(blob)

        def _ensure_timer(self, state: Bucket, now: int) -> None:
            if state.timer_at < 0:
                state.timer_at = now + settings.tick_ms
                self.handle.registerTimer(state.timer_at)

        # -- input -----------------------------------------------------------------------
        def handleInputRows(self, key: Any, rows: Any, timerValues: Any) -> Iterator[Any]:
            bucket = int(key[0])
            out = Outputs()
            if bucket == DEAD_BUCKET:
                for pdf in rows:
                    for v, r, st, sp, so in zip(
                        pdf["value"].tolist(),
                        pdf["reason"].tolist(),
                        pdf["src_topic"].tolist(),
                        pdf["src_partition"].tolist(),
                        pdf["src_offset"].tolist(),
                        strict=True,
                    ):
                        out.add(
                            out="dead",
                            key=f"{st}/{sp}/{so}",
                            value=_bytes(v),
                            reason=r,
                            src_topic=st,
                            src_partition=sp,
                            src_offset=so,
                            bucket=bucket,
                        )
                yield out.frame()
                return
            now = int(timerValues.getCurrentProcessingTimeInMs())
            state = self._load(bucket)
            model = state.model
            n_events = n_dup = n_owned = 0
            touched: dict[tuple[str, str, int], PartitionState] = {}
            findings: list[Finding] = []
            max_obs = state.input_max_observed if state.input_batch_ts == now else -1
            for pdf in rows:
                cols = {c: pdf[c].tolist() for c in pdf.columns}
                n = len(cols["kind"])
                order, dups = ordered_rows(cols, n)
                n_dup += dups
                n_events += n
                n_owned += sum(1 for o in cols["owner"] if o)
                for ev in events_from_columns(cols, order):
                    found = model.apply(ev)
                    if found:
                        findings.extend(found)
                    if isinstance(ev, ReplicaReport | PartitionMeta):
                        k = (ev.cluster, ev.topic, ev.partition)
                        if k not in touched:
                            touched[k] = model.partitions[k]
                    if ev.observed_at > max_obs:
                        max_obs = ev.observed_at
            for f in findings:  # a topic_config change re-judges untouched partitions too
                if f.partition is not None and f.topic is not None:
                    k = (f.cluster, f.topic, f.partition)
                    if k not in touched and k in model.partitions:
                        touched[k] = model.partitions[k]
            state.input_batch_ts, state.input_max_observed = now, max_obs
            state.events += n_events
            state.duplicates += n_dup
            self._ensure_timer(state, now)
            size = self._save(bucket, state)
            out.findings(bucket, findings)
            if settings.emit_state:
                out.states(bucket, list(touched.values()))
            out.add(
                out="stats",
                bucket=bucket,
                n_events=n_owned,
                n_duplicates=n_dup,
                n_findings=len(findings),
                n_partitions=len(model.partitions),
                state_bytes=size,
            )
            yield out.frame()

        # -- time ----------------------------------------------------------------------
        def handleExpiredTimer(
            self, key: Any, timerValues: Any, expiredTimerInfo: Any
        ) -> Iterator[Any]:
            bucket = int(key[0])
            out = Outputs()
            if bucket == DEAD_BUCKET:
                return
            now = int(timerValues.getCurrentProcessingTimeInMs())
            state = self._load(bucket)
            clock = now
            if state.input_batch_ts == now and state.input_max_observed >= 0:
                clock = min(now, state.input_max_observed + settings.catchup_slack_ms)
            findings = state.model.tick(clock)
            state.ticks += 1
            state.timer_at = -1
            self._ensure_timer(state, now)
            self._save(bucket, state)
            out.findings(bucket, findings)
            if settings.emit_state and findings:
                keys = {
                    (f.cluster, f.topic, f.partition)
                    for f in findings
                    if f.topic is not None and f.partition is not None
                }
                out.states(bucket, [state.model.partitions[k] for k in keys])
            if len(out):
                yield out.frame()

        def close(self) -> None:
            pass

    return BucketProcessor()
