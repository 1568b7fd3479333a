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
    TopicConfig,
    TopicState,
)

#: Stable order of kinds at equal ``observed_at``: configuration before what it governs.
#: ``partition`` and ``replica`` share a rank: between them the source order decides (the
#: collector emits a partition's samples in the order it took them, into one Kafka partition).
KIND_ORDER: dict[str, int] = {"topic_config": 0, "broker": 1, "partition": 2, "replica": 2}

#: Bucket of records that failed validation (they are forwarded as dead letters).
DEAD_BUCKET = -1

#: The operator's input is three columns: ``bucket``, ``payload`` (one string per event,
#: built on the JVM) and ``value`` (the original bytes, dead letters only). Why one packed
#: string: pyspark 4.3's transformWithStateInPandas regroups its input row by row
#: (``itertuples`` + ``pd.DataFrame(rows)``), a cost proportional to rows x columns — with the
#: event's ~30 columns that was ~70 us per event, five times the model itself.
#:
#: Payload layout, fields joined by U+001F: the source coordinates and owner flag first
#: (so that the rest identifies the event: equal rests are exact duplicates), ``cluster``
#: last (the one free-text field: split with a maximum, it may contain anything).
SEP = "\x1f"
PAYLOAD_HEAD: tuple[str, ...] = ("src_partition", "src_offset", "owner")
PAYLOAD_FIELDS: tuple[str, ...] = (
    "kind",
    "observed_at",
    "topic",
    "partition",
    "broker",
    "leader",
    "leader_epoch",
    "high_watermark",
    "log_start_offset",
    "log_end_offset",
    "fetch_lag",
    "replicas",
    "isr",
    "offline_replicas",
    "eligible_leader_replicas",
    "replication_factor",
    "min_insync_replicas",
    "unclean_leader_election_enable",
    "alive",
    "unclean_elections_total",
    "isr_shrinks_total",
    "isr_expands_total",
    "under_replicated_partitions",
    "active_controller",
    "cluster",
    "epoch_start_offset",
)
#: Written for a null list (an empty list is the empty string).
NULL_LIST = "-"

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


# --- building model events from the packed payloads ------------------------------------------

_F = {name: i for i, name in enumerate(PAYLOAD_FIELDS)}
_NREST = len(PAYLOAD_FIELDS)


def _oi(text: str) -> int | None:
    return int(text) if text else None


def _li(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",")) if text else ()


def _oli(text: str) -> tuple[int, ...] | None:
    return None if text == NULL_LIST else _li(text)


def _ob(text: str) -> bool | None:
    return None if not text else text == "t"


def event_from_fields(f: list[str]) -> Any:
    """The model event of a payload's fields (after the head)."""
    k = f[0]
    cluster = f[24]
    if k == "replica":
        return ReplicaReport(
            cluster, int(f[1]), f[2], int(f[3]), int(f[4]), int(f[9]), _oi(f[8]), _oi(f[7]),
            _oi(f[10]),
        )  # fmt: skip
    if k == "partition":
        return PartitionMeta(
            cluster, int(f[1]), f[2], int(f[3]), _oi(f[5]), int(f[6]), _li(f[11]), _li(f[12]),
            _li(f[13]), _oli(f[14]), _oi(f[7]), _oi(f[8]), _oi(f[25]),
        )  # fmt: skip
    if k == "topic_config":
        return TopicConfigReport(cluster, int(f[1]), f[2], int(f[15]), int(f[16]), f[17] == "t")
    return BrokerReport(
        cluster, int(f[1]), int(f[4]), f[18] == "t", _oi(f[19]), _oi(f[20]), _oi(f[21]),
        _oi(f[22]), _ob(f[23]),
    )  # fmt: skip


def ordered_events(payloads: list[str]) -> tuple[list[Any], int, int]:
    """Model events sorted by (observed_at, kind order, source order); exact duplicates out.

    Returns (events, duplicates dropped, events this bucket owns for counting).
    """
    seen: set[str] = set()
    keyed: list[tuple[int, int, int, int, list[str]]] = []
    dups = owned = 0
    rank = KIND_ORDER
    for p in payloads:
        sp, so, owner, rest = p.split(SEP, 3)
        if owner == "t":
            owned += 1
        if rest in seen:
            dups += 1
            continue
        seen.add(rest)
        f = rest.split(SEP, _NREST - 1)
        keyed.append((int(f[1]), rank[f[0]], int(sp), int(so), f))
    keyed.sort(key=lambda x: x[:4])
    return [event_from_fields(x[4]) for x in keyed], dups, owned


# --- the state rows (what the runbook CLI and exporter read) -------------------------------------


def state_row(ps: PartitionState, config: TopicConfig | None = None) -> dict[str, Any]:
    """One partition's current state, as written to the Parquet store (JSON-compatible).

    ``config`` is the topic's last durability report, when known (min ISR, unclean flag).
    """
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
        "hw_lag_ms": ps.hw_lag_ms,
        "min_isr": config.min_insync_replicas if config is not None else None,
        "unclean_enabled": config.unclean_leader_election_enable if config is not None else None,
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


class _Profile:
    """Where a bucket's time goes (``MONITOR_STREAMING_PROFILE=<file>`` appends a line)."""

    def __init__(self, bucket: int) -> None:
        import os
        import time

        self.path = os.environ.get("MONITOR_STREAMING_PROFILE")
        self.clock = time.perf_counter
        self.bucket = bucket
        self.last = self.clock()
        self.parts: dict[str, float] = {}

    def mark(self, name: str) -> None:
        if self.path:
            now = self.clock()
            self.parts[name] = self.parts.get(name, 0.0) + now - self.last
            self.last = now

    def done(self, events: int) -> None:
        if self.path:
            parts = " ".join(f"{k}={v * 1000:.0f}" for k, v in self.parts.items())
            with open(self.path, "a") as fh:
                fh.write(f"bucket={self.bucket} events={events} {parts}\n")


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

    def states(self, bucket: int, states: list[PartitionState], model: ClusterModel) -> None:
        for ps in states:
            ts = model.topics.get((ps.cluster, ps.topic))
            row = state_row(ps, ts.config if ts is not None else None)
            self.add(
                out="state",
                key=f"{ps.cluster}/{ps.topic}/{ps.partition}",
                value=json.dumps(row, separators=(",", ":"), default=str).encode(),
                bucket=bucket,
            )

    def __len__(self) -> int:
        return len(self.cols["out"])

    def frame(self) -> Any:
        import pandas as pd  # type: ignore[import-untyped]

        return pd.DataFrame(self.cols, columns=list(self.COLUMNS))


def _bytes(v: Any) -> bytes:
    return bytes(v) if v is not None else b""


def make_processor(settings: OperatorSettings) -> Any:
    """The ``StatefulProcessor`` for ``transformWithStateInPandas`` (built lazily: pyspark)."""
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor

    class BucketProcessor(StatefulProcessor):
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
                    # payload: src_partition, src_offset, owner, source topic, reason
                    for v, p in zip(pdf["value"].tolist(), pdf["payload"].tolist(), strict=True):
                        sp, so, _, st, r = p.split(SEP, 4)
                        out.add(
                            out="dead",
                            key=f"{st}/{sp}/{so}",
                            value=_bytes(v),
                            reason=r,
                            src_topic=st,
                            src_partition=int(sp),
                            src_offset=int(so),
                            bucket=bucket,
                        )
                yield out.frame()
                return
            now = int(timerValues.getCurrentProcessingTimeInMs())
            prof = _Profile(bucket)
            state = self._load(bucket)
            prof.mark("load")
            model = state.model
            n_events = n_dup = n_owned = 0
            touched: dict[tuple[str, str, int], PartitionState] = {}
            findings: list[Finding] = []
            max_obs = state.input_max_observed if state.input_batch_ts == now else -1
            for pdf in rows:
                prof.mark("arrow")
                payloads = pdf["payload"].tolist()
                prof.mark("tolist")
                events, dups, owned = ordered_events(payloads)
                prof.mark("order")
                n_dup += dups
                n_events += len(payloads)
                n_owned += owned
                for ev in events:
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
            prof.mark("apply")
            state.input_batch_ts, state.input_max_observed = now, max_obs
            state.events += n_events
            state.duplicates += n_dup
            self._ensure_timer(state, now)
            size = self._save(bucket, state)
            prof.mark("save")
            out.findings(bucket, findings)
            if settings.emit_state:
                out.states(bucket, list(touched.values()), model)
            prof.mark("outputs")
            out.add(
                out="stats",
                bucket=bucket,
                n_events=n_owned,
                n_duplicates=n_dup,
                n_findings=len(findings),
                n_partitions=len(model.partitions),
                state_bytes=size,
            )
            frame = out.frame()
            prof.mark("frame")
            prof.done(n_events)
            yield frame

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
                out.states(bucket, [state.model.partitions[k] for k in keys], state.model)
            if len(out):
                yield out.frame()

        def close(self) -> None:
            pass

    return BucketProcessor()
