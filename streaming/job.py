"""The streaming job: Kafka records in, validated, bucketed model state, findings out.

::

    Kafka (events topic) -> route (from_json of the routing fields): -> bucket / fan-out
                                                 unroutable -> dead bucket
      -> transformWithStateInPandas (one ClusterModel per bucket, processing-time timer;
         each record validated as it is decoded: streaming.records, refused -> dead letter)
      -> foreachBatch: findings -> findings topic (key = Finding.subject_key)
                       dead letters -> dead-letter topic (original bytes, reason headers)
                       partition state -> Parquet store (batch_id=<n>/, idempotent)
                       driver hook(s) -> e.g. the Prometheus exporter

Its entry point is :mod:`streaming.cli` (``monitor stream``, ``python -m streaming``,
``spark-submit streaming/cli.py``).
"""

from __future__ import annotations

import functools
import json
import logging
import operator
import shutil
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from monitor.contract.events import PARTITION_KEY_PREFIX
from monitor.contract.state import STATE_DDL
from monitor.contract.store import FINDING_DDL, finding_store_rows
from monitor.model import NATIVE_NOTE
from streaming import schema
from streaming.config import StreamingConfig
from streaming.operator import (
    DEAD_BUCKET,
    MAX_KEY_BYTES,
    OUTPUT_DDL,
    RECORD_KEYED,
    RECORD_OTHER,
    RECORD_OWNER,
    SEP,
    OperatorSettings,
    bucket_keys,
    make_processor,
    state_fingerprint,
)
from streaming.store import is_local, write_findings_locally
from streaming.storefs import pair

log = logging.getLogger("streaming")

#: Columns of a Kafka source row the job uses (a Parquet replay source must have them too).
SOURCE_COLUMNS = ("value", "topic", "partition", "offset")


@dataclass
class BatchOutput:
    """What a driver hook receives after each micro-batch has been written.

    ``findings`` are the finding dicts (``Finding.to_dict()``) of the batch; ``states`` is a
    (persisted, valid during the call) DataFrame of the touched partitions' state rows
    (:data:`~monitor.contract.state.STATE_DDL`) — collect what you need; ``stats`` holds
    the counts; ``detected_at`` is when the job detected the batch's findings (ms, wall
    clock: the time stored with them); ``observed`` is each cluster's newest telemetry the
    batch applied (ms) -- state rows are written only for partitions whose row changed (or
    is due a refresh), so their ``updated_at`` alone would make an idle cluster look silent.
    """

    batch_id: int
    findings: list[dict[str, Any]]
    states: Any
    stats: dict[str, int]
    detected_at: int | None = None
    observed: dict[str, int] = field(default_factory=dict)


Hook = Callable[[BatchOutput], None]


#: How many batches' timings :class:`JobCounters` keeps (a job runs for months).
RECENT_BATCHES = 10_000


@dataclass
class JobCounters:
    """Totals since the query started (driver side), for logs, tests and the benchmark."""

    batches: int = 0
    accepted: int = 0
    dead_lettered: int = 0
    duplicates: int = 0
    #: Records over ``max_record_bytes``; those whose bytes were kept in
    #: ``<store>/deadletters/``; batches where keeping them failed (the dead letters went
    #: out all the same).
    too_large: int = 0
    kept_too_large: int = 0
    kept_failures: int = 0
    #: Offsets of the events topic the query passed without reading a record there: data
    #: deleted by retention before the job read it (``failOnDataLoss=false`` skips it
    #: without failing), or transaction markers (:func:`skipped_offsets`).
    skipped_offsets: int = 0
    #: The last batch id whose progress the skipped-offsets listener has counted (listener
    #: events arrive asynchronously: :meth:`RunningJob.stop` waits for the last batch's).
    listened_batch: int = -1
    findings: int = 0
    states: int = 0
    state_bytes: int = 0
    partitions: int = 0
    #: Per recent batch, seconds in each step of the sink (``operator``: the Spark job that
    #: runs validation, the shuffle and the operator; ``kafka``; ``store``; ``hooks``).
    batch_phases: deque[dict[str, float]] = field(
        default_factory=lambda: deque(maxlen=RECENT_BATCHES)
    )
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


# --- the DataFrame pipeline --------------------------------------------------------------------


def skipped_offsets(progress: dict[str, Any]) -> int:
    """Offsets a micro-batch moved past without reading a record there: Σ over its Kafka
    sources of (end - start offsets) minus the records read. The job reads with
    ``failOnDataLoss=false`` (a gap the events topic's retention already deleted must not
    stop the monitor), so this is where such a gap is counted, never silently lost. A
    topic written in transactions would add its markers (the collector's producer writes
    none). A source with no start yet (the first batch: from ``earliest``) counts nothing.

    >>> skipped_offsets({"sources": [{"startOffset": '{"t":{"0":10,"1":5}}',
    ...     "endOffset": '{"t":{"0":20,"1":9}}', "numInputRows": 11}]})
    3
    >>> skipped_offsets({"sources": [{"startOffset": None, "endOffset": '{"t":{"0":9}}',
    ...     "numInputRows": 9}]})
    0

    Another source's offsets (a file source's ``{"logOffset": 3}``) count nothing:

    >>> skipped_offsets({"sources": [{"startOffset": '{"logOffset":1}',
    ...     "endOffset": '{"logOffset":3}', "numInputRows": 5}]})
    0
    """
    total = 0
    for src in progress.get("sources") or []:
        start, end = _offsets(src.get("startOffset")), _offsets(src.get("endOffset"))
        if not isinstance(start, dict) or not isinstance(end, dict):
            continue
        moved = 0
        for topic, parts in end.items():
            if not isinstance(parts, dict):
                continue  # not a Kafka source's {topic: {partition: offset}}
            for part, hi in parts.items():
                lo = start.get(topic, {}).get(part)
                if isinstance(lo, int) and isinstance(hi, int) and hi > lo >= 0:
                    moved += hi - lo
        total += max(0, moved - int(src.get("numInputRows") or 0))
    return total


def _skip_listener(counters: JobCounters, query_id: Callable[[], str | None]) -> Any:
    """A StreamingQueryListener adding each progress's :func:`skipped_offsets` (of the query
    ``query_id()`` names) to ``counters``."""
    from pyspark.sql.streaming.listener import StreamingQueryListener

    class SkipCounter(StreamingQueryListener):
        def onQueryStarted(self, event: Any) -> None:
            pass

        def onQueryProgress(self, event: Any) -> None:
            p = json.loads(event.progress.json)
            if p.get("id") != query_id():
                return
            n = skipped_offsets(p)
            if n:
                log.warning("the events topic moved %d offsets past without records", n)
            with counters.lock:
                counters.skipped_offsets += n
                counters.listened_batch = max(counters.listened_batch, int(p["batchId"]))

        def onQueryIdle(self, event: Any) -> None:
            pass

        def onQueryTerminated(self, event: Any) -> None:
            pass

    return SkipCounter()


def kafka_source(spark: Any, cfg: StreamingConfig) -> Any:
    reader = (
        spark.readStream.format("kafka")
        .option("subscribe", cfg.events_topic)
        .option("startingOffsets", cfg.starting_offsets)
        .option("failOnDataLoss", "false")
    )
    if cfg.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(cfg.max_offsets_per_trigger))
    for k, v in cfg.kafka_client_options().items():
        reader = reader.option(k, v)
    return reader.load()


def parquet_source(spark: Any, path: str, files_per_trigger: int = 1) -> Any:
    """A Kafka-shaped replay source: Parquet files with value/topic/partition/offset columns."""
    return (
        spark.readStream.schema("value binary, topic string, partition int, offset long")
        .option("maxFilesPerTrigger", files_per_trigger)
        .parquet(path)
    )


#: How a record over ``max_record_bytes`` is reasoned (the Sinks recognise it by this start).
TOO_LARGE = "record too large"

#: Where the bytes of records too large for a dead letter are kept, under the store.
DEADLETTERS = "deadletters"


#: What the JVM reads of a record to route it (``from_json``; every other field is the
#: Python worker's to read and validate, :mod:`streaming.records`).
ROUTING_DDL = "kind string, cluster string, topic string, partition int, broker int"
#: The routing fields each kind needs (a record without them cannot be routed: dead).
_ROUTED_BY = {
    "partition": ("cluster", "topic", "partition"),
    "replica": ("cluster", "topic", "partition"),
    "topic_config": ("cluster", "topic"),
    "topic_deleted": ("cluster", "topic"),
    "broker": ("cluster", "broker"),
}
assert set(_ROUTED_BY) == set(schema.KINDS)


def build_operator_input(
    source: Any,
    buckets: int,
    max_ahead_ms: int | None = None,
    max_record_bytes: int | None = None,
) -> Any:
    """Routed rows for the operator: each record to its bucket, the rest on the dead bucket.

    The JVM only routes: a partition's record keyed with
    :func:`monitor.contract.events.partition_key` (the collector's records) by its key alone,
    unparsed, its key in the payload for the worker to check against the record; any other
    record by a ``from_json`` of its routing fields (:data:`ROUTING_DDL`). Either way the
    bucket of the record's partition (topic and broker events to every bucket), and the
    record itself as the payload. The Python worker validates each record as it reads it
    (:func:`streaming.records.read_record`: pydantic's verdict, at msgspec's speed) and
    turns a refused one into a dead letter. On the dead bucket: records that cannot be
    routed (not UTF-8, no kind the contract knows, a routing field missing or unreadable),
    with their bytes; their reason is pydantic's, given by the Python worker.

    With ``max_ahead_ms`` and a source with record timestamps (Kafka's), each routed
    record carries its Kafka timestamp: the worker refuses an event stamped further ahead
    of it (:mod:`monitor.model.stamps`) -- one stamp in the future would make every later
    event of its partition late.

    With ``max_record_bytes``, a longer record is dead before it is parsed: its reason gives
    its size and SHA-256 (computed on the JVM), and its bytes go no further (not to the
    validation, Python, the driver or the dead-letter topic; :class:`Sinks` keeps them in the
    store). A few megabytes of one field would otherwise cost every evaluation, on every
    replay of the batch, and make a dead letter larger than a producer may send.
    """
    from pyspark.sql import functions as F

    check_stamps = max_ahead_ms is not None and "timestamp" in source.columns
    if max_record_bytes is not None:
        too_big = F.octet_length("value") > F.lit(max_record_bytes)
        value = F.when(~too_big, F.col("value"))
        big = F.when(
            too_big,
            F.format_string(
                f"{TOO_LARGE}: %d bytes, over max_record_bytes {max_record_bytes}; sha256 %s",
                F.octet_length("value"),
                F.sha2(F.col("value"), 256),
            ),
        )
    else:
        value, big = F.col("value"), F.lit(None).cast("string")
    src = source.select(
        value.alias("value"),
        big.alias("_too_big"),
        F.col("topic").alias("_src_topic"),
        F.col("partition").cast("long").alias("_src_partition"),
        F.col("offset").cast("long").alias("_src_offset"),
        (F.expr("unix_millis(timestamp)") if check_stamps else F.lit(None))
        .cast("string")
        .alias("_src_ts"),
        (F.col("key") if "key" in source.columns else F.lit(None)).cast("string").alias("_key"),
    )
    text = F.col("value").cast("string")
    utf8 = F.coalesce(F.expr("is_valid_utf8(value)"), F.lit(False))
    # A partition's key (contract.partition_key: krm1/<partition>/<topic>/<cluster>) routes
    # its record without a parse; any other key, or none, is routed by the record's fields.
    # Only a key exactly as partition_key writes it (its parts put back together give it):
    # the worker compares the record's partition_key with it, and a record of that
    # partition under a key spelt otherwise ("krm1/03/...", bytes not UTF-8, which split
    # reads decoded) is routed by its fields, not refused.
    k = F.col("_key")
    kparts = F.split(k, "/", 4)
    k_partition = F.try_element_at(kparts, F.lit(2)).try_cast("int")
    k_topic = F.try_element_at(kparts, F.lit(3))
    k_cluster = F.try_element_at(kparts, F.lit(4))
    spelt = F.concat(
        F.lit(PARTITION_KEY_PREFIX), k_partition.cast("string"), F.lit("/"), k_topic,
        F.lit("/"), k_cluster,
    )  # fmt: skip
    keyed = F.coalesce(
        k.startswith(PARTITION_KEY_PREFIX)
        & (F.octet_length(k) <= MAX_KEY_BYTES)
        & ~k.contains(SEP)  # the payload carries the key
        & (spelt == k)
        & (k_partition >= 0)
        & (F.length(k_topic) > 0)
        & (F.length(k_cluster) > 0)
        & utf8,
        F.lit(False),
    )
    r = src.select(
        "*",
        keyed.alias("_keyed"),
        F.when(keyed, k_cluster).alias("_k_cluster"),
        F.when(keyed, k_topic).alias("_k_topic"),
        F.when(keyed, k_partition).alias("_k_partition"),
        F.when(~keyed & utf8, F.from_json(text, ROUTING_DDL)).alias("r"),
    )
    keyed = F.col("_keyed")
    routed = F.lit(False)
    for kind, needed in _ROUTED_BY.items():
        present = [F.col(f"r.{n}").isNotNull() for n in needed]
        routed = routed | functools.reduce(operator.and_, present, F.col("r.kind") == kind)
    ok = keyed | F.coalesce(routed, F.lit(False))
    # Topic and broker events go to every bucket (each holds some of a topic's partitions);
    # a topic's own findings come from the bucket owning "cluster/topic/<topic>".
    is_global = ~keyed & F.coalesce(
        F.col("r.kind").isin("topic_config", "topic_deleted", "broker"), F.lit(False)
    )
    global_key = F.when(
        F.col("r.kind") != "broker", F.concat_ws("/", "r.cluster", F.lit("topic"), "r.topic")
    ).otherwise(F.concat_ws("/", "r.cluster", F.lit("broker"), F.col("r.broker").cast("string")))
    # Rows are grouped by bucket *key* (operator.bucket_keys: keys that spread evenly over the
    # shuffle partitions); the operator maps a key back to its index 0..N-1.
    keys = F.array(*[F.lit(k) for k in bucket_keys(buckets)])

    def key_of(index: Any) -> Any:
        return F.element_at(keys, index.cast("int") + 1)

    # The same hash of the same typed values whichever way a record was routed.
    index = F.pmod(
        F.xxhash64(
            F.when(keyed, F.col("_k_cluster")).otherwise(F.col("r.cluster")),
            F.when(keyed, F.col("_k_topic")).otherwise(F.col("r.topic")),
            F.when(keyed, F.col("_k_partition")).otherwise(F.col("r.partition")),
        ),
        F.lit(buckets),
    )
    bucket_list = (
        F.when(~ok, F.array(F.lit(DEAD_BUCKET)))
        .when(is_global, keys)
        .otherwise(F.array(key_of(index)))
    )
    owner_bucket = key_of(F.pmod(F.crc32(global_key.cast("binary")), F.lit(buckets)))
    exploded = r.select(
        "*",
        F.explode(bucket_list).alias("bucket"),
        F.when(is_global, owner_bucket).alias("_owner_bucket"),
    )
    owner = ~is_global | (F.col("bucket") == F.col("_owner_bucket"))
    head = [F.col("_src_partition").cast("string"), F.col("_src_offset").cast("string")]
    payload = F.when(
        ok,
        F.concat_ws(
            SEP,
            *head,
            F.when(keyed, F.concat(F.lit(RECORD_KEYED), F.col("_key")))
            .when(owner, RECORD_OWNER)
            .otherwise(RECORD_OTHER),
            F.col("_src_topic"),
            F.coalesce(F.col("_src_ts"), F.lit("")),
            text,
        ),
    ).otherwise(
        F.concat_ws(
            SEP, *head, F.lit("f"), F.col("_src_topic"), F.coalesce(F.col("_too_big"), F.lit(""))
        )
    )
    return exploded.select(
        F.col("bucket").cast("int").alias("bucket"),
        payload.alias("payload"),
        F.when(~ok, F.col("value")).alias("value"),
    )


def stateful(source: Any, cfg: StreamingConfig, cache_scope: str = "") -> Any:
    """The operator's output (findings, state rows, dead letters, stats) for a source."""
    rows = build_operator_input(
        source, cfg.buckets, cfg.model.max_stamp_ahead_ms, cfg.max_record_bytes
    )
    settings = OperatorSettings(
        buckets=cfg.buckets,
        tick_ms=cfg.tick_ms,
        catchup_slack_ms=cfg.catchup_slack_ms,
        model=cfg.model,
        state_refresh_ms=cfg.state_refresh_ms,
        replay_batches=cfg.replay_batches,
        cache_scope=cache_scope or cfg.checkpoint_location,
    )
    return rows.groupBy("bucket").transformWithStateInPandas(
        statefulProcessor=make_processor(settings),
        outputStructType=OUTPUT_DDL,
        outputMode="Append",
        timeMode="ProcessingTime",
    )


# --- sinks -----------------------------------------------------------------------------------


class Sinks:
    """The foreachBatch function: every output of one micro-batch, idempotent by batch id."""

    def __init__(
        self,
        cfg: StreamingConfig,
        hooks: Sequence[Hook] = (),
        counters: JobCounters | None = None,
        write_kafka: bool = True,
        batch_offset: int = 0,
    ) -> None:
        self.cfg = cfg
        #: Added to Spark's batch ids in the store and for the hooks (:func:`storefs.pair`):
        #: a new checkpoint on a store with batches continues after the store's last one.
        self.batch_offset = batch_offset
        self.hooks = list(hooks)
        self.counters = counters if counters is not None else JobCounters()
        self.write_kafka = write_kafka
        self.store = cfg.store_location

    def _kafka(self, df: Any, topic: str) -> None:
        writer = df.write.format("kafka").option("topic", topic)
        for k, v in self.cfg.kafka_client_options().items():
            writer = writer.option(k, v)
        writer.save()

    def __call__(self, batch: Any, spark_batch_id: int) -> None:
        from pyspark.sql import functions as F

        batch_id = spark_batch_id + self.batch_offset  # the store's batch id
        started = time.monotonic()
        phases: dict[str, float] = {}
        last = started

        def mark(name: str) -> None:
            nonlocal last
            now = time.monotonic()
            phases[name] = round(now - last, 3)
            last = now

        batch = batch.persist()
        states = None
        try:
            # One Spark job for every output but the state rows (stats, findings and dead
            # letters are few); it also runs the operator and fills the cache. Each further
            # job below reads the cache or a small local relation. A dead letter's bytes
            # stay on the executors: only its key, reason and source come to the driver.
            is_dead = F.col("out") == "dead"
            small = (
                batch.filter(F.col("out") != "state")
                .select(
                    *[
                        F.when(~is_dead, F.col(c)).alias(c) if c == "value" else F.col(c)
                        for c in batch.columns
                    ]
                )
                .collect()
            )
            mark("operator")
            stats_rows = [r for r in small if r.out == "stats"]
            finding_rows = [r for r in small if r.out == "finding"]
            dead_rows = [r for r in small if r.out == "dead"]
            spark = batch.sparkSession
            kept = self._keep_too_large(spark, dead_rows, batch_id)
            if self.write_kafka:
                if finding_rows:
                    found = self.local_frame(
                        spark, [(r.key, bytes(r.value)) for r in finding_rows],
                        "key string, value binary",
                    )  # fmt: skip
                    self._kafka(found, self.cfg.findings_topic)
                if dead_rows:
                    self._kafka(
                        self._dead_letters(batch.filter(is_dead), kept),
                        self.cfg.deadletter_topic,
                    )
                mark("kafka")
            finding_dicts = [json.loads(bytes(r.value)) for r in finding_rows]
            n_states = sum(int(r.n_states or 0) for r in stats_rows)
            states = batch.filter(F.col("out") == "state").select(
                F.from_json(F.col("value").cast("string"), STATE_DDL).alias("s"),
                F.col("seq").alias("row_seq"),
            )
            states = states.select(
                "s.*",
                "row_seq",
                F.lit(batch_id).cast("long").alias("batch_id"),
            )
            if self.hooks and n_states:
                states = states.persist()  # the store write and the hooks both read it
            detected_at = time.time_ns() // 1_000_000
            self._write_store(states, n_states, finding_dicts, batch_id, detected_at)
            mark("store")
            stats = {
                "batch_id": batch_id,
                "accepted": sum(int(r.n_events or 0) for r in stats_rows),
                "dead_lettered": len(dead_rows),
                "duplicates": sum(int(r.n_duplicates or 0) for r in stats_rows),
                "findings": len(finding_dicts),
                "states": n_states,
                "partitions": sum(int(r.n_partitions or 0) for r in stats_rows),
                "state_bytes": sum(int(r.state_bytes or 0) for r in stats_rows),
                "buckets": len({r.bucket for r in stats_rows if r.n_partitions is not None}),
            }
            observed: dict[str, int] = {}
            for r in stats_rows:
                for cluster, at in (json.loads(bytes(r.value)) if r.value else {}).items():
                    observed[cluster] = max(observed.get(cluster, at), at)
            for hook in self.hooks:
                hook(BatchOutput(batch_id, finding_dicts, states, stats, detected_at, observed))
            if self.hooks:
                mark("hooks")
        finally:
            if states is not None:
                states.unpersist()
            batch.unpersist()
        c = self.counters
        with c.lock:
            c.batches += 1
            c.accepted += stats["accepted"]
            c.dead_lettered += stats["dead_lettered"]
            c.duplicates += stats["duplicates"]
            c.findings += len(finding_dicts)
            c.states += n_states
            if stats["buckets"]:
                c.partitions = stats["partitions"]
                c.state_bytes = stats["state_bytes"]
            c.batch_phases.append(phases)
        log.info("batch %d: %s; seconds %s", batch_id, stats, phases)

    @staticmethod
    def local_frame(spark: Any, rows: list[tuple[Any, ...]], ddl: str) -> Any:
        """Rows collected on the driver as a DataFrame that is written in their order.

        One partition: ``createDataFrame`` slices a list over ``defaultParallelism`` tasks
        that write to Kafka concurrently, so a condition's resolve could land before its
        open on the findings topic (found by the short soak in CI).
        """
        return spark.createDataFrame(rows, ddl).coalesce(1)

    @staticmethod
    def _dead_letters(dead: Any, kept_at: str | None = None) -> Any:
        """Dead-letter records: the source's bytes (none for a record too large), headers
        ``reason``, ``source_topic``, ``source_partition``, ``source_offset`` and, for a
        record too large, ``kept_at`` (the store folder holding its bytes)."""
        from pyspark.sql import functions as F

        def header(name: str, col: Any) -> Any:
            return F.struct(
                F.lit(name).alias("key"), col.cast("string").cast("binary").alias("value")
            )

        headers = [
            header("reason", F.col("reason")),
            header("source_topic", F.col("src_topic")),
            header("source_partition", F.col("src_partition")),
            header("source_offset", F.col("src_offset")),
        ]
        too_big = F.col("reason").startswith(TOO_LARGE)
        if kept_at is not None:
            with_kept = F.concat(F.array(*headers), F.array(header("kept_at", F.lit(kept_at))))
            all_headers = F.when(too_big, with_kept).otherwise(F.array(*headers))
        else:
            all_headers = F.array(*headers)
        return dead.select(
            F.col("key").cast("binary").alias("key"),
            F.when(~too_big, F.col("value")).alias("value"),
            all_headers.alias("headers"),
        )

    def _keep_too_large(self, spark: Any, dead_rows: list[Any], batch_id: int) -> str | None:
        """Keep the bytes of the batch's records too large for a dead letter in
        ``<store>/deadletters/batch_id=<n>/`` (Parquet: source topic, partition, offset,
        timestamp, bytes, sha256) and return that folder, or None when there are none.

        The bytes never passed the validation (:func:`build_operator_input`), so they are read
        again from the events topic by offset -- a Kafka read of exactly those records, on
        the executors, only in a batch that has some. A failure is logged and counted (the
        dead letter still names the record's source and digest); it never fails the batch.
        """
        big = [r for r in dead_rows if str(r.reason or "").startswith(TOO_LARGE)]
        if not big:
            return None
        with self.counters.lock:
            self.counters.too_large += len(big)
        folder = f"{self.store}/{DEADLETTERS}/batch_id={batch_id}"
        try:
            from pyspark.sql import functions as F

            spans: dict[str, dict[str, list[int]]] = {}
            for r in big:
                span = spans.setdefault(r.src_topic, {}).setdefault(
                    str(r.src_partition), [r.src_offset, r.src_offset]
                )
                span[0], span[1] = min(span[0], r.src_offset), max(span[1], r.src_offset)
            start = {t: {p: lo for p, (lo, _) in ps.items()} for t, ps in spans.items()}
            end = {t: {p: hi + 1 for p, (_, hi) in ps.items()} for t, ps in spans.items()}
            reader = (
                spark.read.format("kafka")
                .option("subscribe", ",".join(sorted(spans)))
                .option("startingOffsets", json.dumps(start))
                .option("endingOffsets", json.dumps(end))
                .option("failOnDataLoss", "false")
            )
            for k, v in self.cfg.kafka_client_options().items():
                reader = reader.option(k, v)
            wanted = [f"{r.src_topic}/{r.src_partition}/{r.src_offset}" for r in big]
            key = F.concat_ws("/", "topic", "partition", "offset")
            reader.load().filter(key.isin(wanted)).select(
                "topic", "partition", "offset", "timestamp", "value",
                F.sha2(F.col("value"), 256).alias("sha256"),
            ).coalesce(1).write.mode("overwrite").parquet(folder)  # fmt: skip
        except Exception as e:  # the dead letter still names the record's source and digest
            log.warning("batch %d: could not keep %d records too large: %s", batch_id, len(big), e)
            with self.counters.lock:
                self.counters.kept_failures += 1
            return None
        with self.counters.lock:
            self.counters.kept_too_large += len(big)
        return folder

    def _write_store(
        self,
        states: Any,
        n_states: int,
        findings: list[dict[str, Any]],
        batch_id: int,
        detected_at: int,
    ) -> None:
        """``<store>/state/batch_id=<n>/`` and ``<store>/findings/batch_id=<n>/`` (overwrite)."""
        if n_states:
            states.drop("batch_id").write.mode("overwrite").parquet(
                f"{self.store}/state/batch_id={batch_id}"
            )
        if findings:
            rows = finding_store_rows(findings, batch_id, detected_at)
            if is_local(self.store):
                write_findings_locally(Path(self.store), batch_id, rows)
            else:
                spark = states.sparkSession
                spark.createDataFrame(rows, FINDING_DDL).coalesce(1).write.mode(
                    "overwrite"
                ).parquet(f"{self.store}/findings/batch_id={batch_id}")


# --- running ---------------------------------------------------------------------------------


@dataclass
class RunningJob:
    query: Any
    counters: JobCounters
    sinks: Sinks
    #: The skipped-offsets listener and the session it is registered with.
    listener: Any = None
    spark: Any = None

    def stop(self, listener_wait_s: float = 10.0) -> None:
        """Stop the query; the skipped-offsets listener is removed once it has counted the
        last batch's progress (it arrives asynchronously: removed at once, the count of a
        gap crossed by the last batch was lost -- found by a clean-clone CI run)."""
        self.query.stop()
        if self.listener is not None and self.spark is not None:
            last = self.query.lastProgress
            deadline = time.monotonic() + listener_wait_s
            while (
                last is not None
                and self.counters.listened_batch < int(last["batchId"])
                and time.monotonic() < deadline
            ):
                time.sleep(0.05)
            self.spark.streams.removeListener(self.listener)
            self.listener = None

    def stop_between_batches(self, wait_s: float = 30.0) -> None:
        """Stop once the batch running now has ended (at most ``wait_s`` later): a stop in
        the middle of one interrupts its writes (``ClosedByInterruptException``), which the
        next start replays from the checkpoint but floods the log meanwhile."""
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            try:
                if not self.query.isActive or not self.query.status["isTriggerActive"]:
                    break
            except Exception:  # the query is going away by itself
                break
            time.sleep(0.2)
        self.stop()

    def drain(self, timeout_s: float = 3600.0, poll_s: float = 0.5) -> None:
        """Wait until the source has nothing left that this query has not processed.

        ``processAllAvailable`` (like ``availableNow``) never returns with processing-time
        timers: such a query always has another (timer) batch to run. Instead: idle means the
        last progress read no rows and its end offset is the source's latest offset.
        """
        deadline = time.monotonic() + timeout_s
        seen_batch = -1
        while time.monotonic() < deadline:
            if self.query.exception() is not None:
                raise RuntimeError(f"streaming query failed: {self.query.exception()}")
            p = self.query.lastProgress
            if not self.query.isActive:
                # Nobody stopped it: it ended on its own. Spark can lose the error (seen on a
                # standalone cluster: a StackOverflowError while it classified a long error
                # message, no exception recorded) -- ending before the source is read is a
                # failure, not a drained query.
                if p is not None and all(_caught_up(src) for src in p["sources"]):
                    return
                raise RuntimeError(
                    "streaming query ended by itself before reading its source to the end "
                    "(Spark recorded no error: see the driver's log)"
                )
            if p is not None and p["batchId"] != seen_batch:
                seen_batch = p["batchId"]
                if p["numInputRows"] == 0 and all(_caught_up(src) for src in p["sources"]):
                    return
            time.sleep(poll_s)
        raise TimeoutError(f"query did not drain its source within {timeout_s:.0f}s")


def start(
    spark: Any,
    cfg: StreamingConfig,
    *,
    source: Any = None,
    hooks: Sequence[Hook] = (),
    write_kafka: bool = True,
    query_name: str | None = None,
) -> RunningJob:
    """Start the streaming query (Kafka source unless ``source`` is given)."""
    check_layout(cfg.checkpoint_location, cfg.buckets)
    offset = pair(cfg.checkpoint_location, cfg.store_location)
    src = source if source is not None else kafka_source(spark, cfg)
    out = stateful(src, cfg)
    sinks = Sinks(cfg, hooks, write_kafka=write_kafka, batch_offset=offset)
    writer = (
        out.writeStream.foreachBatch(sinks)
        .option("checkpointLocation", cfg.checkpoint_location)
        .outputMode("append")
    )
    if query_name:
        writer = writer.queryName(query_name)
    if cfg.trigger_seconds > 0:
        writer = writer.trigger(processingTime=f"{int(cfg.trigger_seconds * 1000)} milliseconds")
    ids: list[str] = []
    listener = _skip_listener(sinks.counters, lambda: ids[0] if ids else None)
    spark.streams.addListener(listener)
    query = writer.start()
    ids.append(str(query.id))
    return RunningJob(query, sinks.counters, sinks, listener, spark)


#: How state keys are laid out (see ``operator.bucket_keys``); recorded in the checkpoint.
LAYOUT = "bucket keys by Spark hash residue"
LAYOUT_FILE = "monitor-layout.json"


class LayoutError(ValueError):
    """The checkpoint's state was written with another bucket layout or state shape."""


class KafkaSourceUnavailable(RuntimeError):
    """The Spark Kafka source's jars could not be had (no Maven on the machine, or Maven
    Central out of reach) and no other way was configured."""


class TopicMissing(RuntimeError):
    """The events topic did not appear within ``wait_for_topics_s``."""


def wait_for_topic(
    client: dict[str, Any], topic: str, timeout_s: float, poll_s: float = 1.0
) -> None:
    """Until ``topic`` is on the cluster of ``client`` (kafka-python keyword arguments), at
    most ``timeout_s``: ``monitor run`` starts the job's Spark while it makes the topics,
    and the Kafka source fails on a topic that is not there yet. Raises
    :class:`TopicMissing` naming the topic and the cluster."""
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    deadline = time.monotonic() + timeout_s
    said = False
    while True:
        left_ms = max(500, int((deadline - time.monotonic()) * 1000))
        try:
            admin = KafkaAdminClient(
                client_id="replication-monitor-job-wait",
                **{**client, "bootstrap_timeout_ms": min(left_ms, 5000)},
            )
            try:
                if topic in admin.list_topics():
                    return
            finally:
                admin.close()
        except KafkaError:
            pass  # not up yet: the same as not there yet
        if time.monotonic() >= deadline:
            raise TopicMissing(
                f"the events topic {topic} is not on {client.get('bootstrap_servers')} after "
                f"{timeout_s:g} s (wait_for_topics_s): create it (monitor stream --check "
                "--create-topics)"
            )
        if not said:
            log.info("waiting up to %g s for the events topic %s", timeout_s, topic)
            said = True
        time.sleep(poll_s)


def check_layout(checkpoint: str, buckets: int) -> None:
    """Refuse to resume a checkpoint whose state is keyed or shaped differently; record a
    new one's.

    The operator's state is keyed by bucket: another ``--buckets``, or a checkpoint written
    before the bucket keys (which grouped by the plain index), would hand every bucket the
    state of other partitions — wrong findings, silently. The state is the model's
    dataclasses pickled positionally: a version of the job whose model state has other
    fields (``state_fingerprint``) cannot read it. A local checkpoint records both in
    ``monitor-layout.json`` when the job first starts on it. A checkpoint URI (``hdfs://``,
    ``s3a://``) is not checked: keep ``--buckets`` and the job's version unchanged there.
    """
    if not is_local(checkpoint):
        return
    root = Path(checkpoint)
    marker = root / LAYOUT_FILE
    want = {"layout": LAYOUT, "buckets": buckets, "state": state_fingerprint()}
    if marker.is_file():
        try:
            have = json.loads(marker.read_text())
        except ValueError as e:
            raise LayoutError(f"{marker}: not the job's layout record ({e})") from e
        if not isinstance(have, dict):
            raise LayoutError(f"{marker}: not the job's layout record (not an object)")
        if have.get("state") != want["state"] and have.get("buckets") == buckets:
            raise LayoutError(
                f"checkpoint {checkpoint} holds model state of another shape (state "
                f"{have.get('state')}, this job's is {want['state']}): it was written by "
                "another version of the job; start on a new --checkpoint and --store (the new "
                "job rebuilds the state from the events topic)"
            )
        if have != want:
            raise LayoutError(
                f"checkpoint {checkpoint} holds state for {have.get('buckets')} buckets "
                f"({have.get('layout')}), not {buckets} ({LAYOUT}): start with the same "
                "--buckets, or on a new --checkpoint and --store"
            )
        return
    if (root / "offsets").is_dir() and any((root / "offsets").iterdir()):
        raise LayoutError(
            f"checkpoint {checkpoint} was written by an earlier version of the job (no "
            f"{LAYOUT_FILE}): its state is keyed by plain bucket index; start on a new "
            "--checkpoint and --store (or delete both)"
        )
    root.mkdir(parents=True, exist_ok=True)
    marker.write_text(json.dumps(want) + "\n")


def _caught_up(src: dict[str, Any]) -> bool:
    """Whether a progress report's source had read everything it knew of.

    >>> _caught_up({"description": "KafkaV2[Subscribe[e]]", "latestOffset": '{"e":{"0":5}}',
    ...             "endOffset": '{"e":{"0":5}}'})
    True
    >>> _caught_up({"description": "KafkaV2[Subscribe[e]]", "latestOffset": None,
    ...             "endOffset": '{"e":{"0":5}}'})
    False
    >>> _caught_up({"description": "FileStreamSource[/x]", "latestOffset": None})
    True
    """
    latest, end = src.get("latestOffset"), src.get("endOffset")
    if latest is None or latest == "null":
        # A Kafka source reports its latest offset for every batch it plans; a batch re-run
        # from the offset log after a restart reports none, and says nothing about what is
        # left (found by the skipped-offsets lab test: drain, and so --once, returned
        # before the restarted query had read). Sources without admission control (files)
        # never report one.
        return not str(src.get("description", "")).startswith("Kafka")
    return bool(_offsets(latest) == _offsets(end))


def _offsets(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def run(cfg: StreamingConfig, hooks: Sequence[Hook] = ()) -> int:
    """Run the job until stopped (or, with ``once``, until the source is drained).

    With ``cfg.metrics_port`` set, the driver also serves Prometheus ``/metrics``
    (:mod:`monitor.exporter.driver`), seeded from the state store and refreshed every batch.
    """
    from monitor.jars import JarError
    from streaming.session import build_session, expand_jars, kafka_jars
    from streaming.store import clear_temporaries
    from streaming.storefs import PRIVATE_SPARK_CONF, private_process

    private_process()  # umask 077 before anything is written (docs/reliability.md)
    check_layout(cfg.checkpoint_location, cfg.buckets)  # before Spark (start() checks again)
    pair(cfg.checkpoint_location, cfg.store_location)  # before Spark too: a refusal is fast
    clear_temporaries(cfg.store_location)  # a killed run's; paired: no other job writes here
    exporter = None
    if cfg.metrics_port is not None:
        from monitor.exporter.driver import JobExporter

        exporter = JobExporter(
            cfg.store_location,
            cfg.metrics_host,
            cfg.metrics_port,
            cfg.per_partition,
            max_stamp_ahead_ms=cfg.model.max_stamp_ahead_ms,
            max_partitions=cfg.metrics_max_partitions,
            web_config_file=cfg.web_config_file,
        )
        exporter.start()  # before Spark: a port in use fails fast, and /metrics says "down"
        hooks = [*hooks, exporter.hook]
    compactor = None
    if cfg.compact_every_batches:
        from streaming.store import Compactor

        compactor = Compactor(
            cfg.store_location,
            cfg.compact_every_batches,
            cfg.store_history_s,
            cfg.findings_retention_s,
        )
        hooks = [*hooks, compactor]
    if cfg.jars is not None:
        try:
            jars = expand_jars(cfg.jars)
        except ValueError as e:
            raise KafkaSourceUnavailable(str(e)) from None
    elif "spark.jars.packages" in cfg.spark_conf:
        jars = []  # Spark resolves the Kafka source itself (Ivy, from Maven Central)
    else:
        try:
            jars = kafka_jars()
        except JarError as e:
            raise KafkaSourceUnavailable(
                f"the Spark Kafka source's jars: {e}. Either install Maven (the jars are "
                "resolved once into the cache), or name a local folder of them (made by "
                "`monitor assets spark-jars DIR` where Maven is: "
                "MONITOR_STREAMING_JARS='[\"DIR\"]'), or let Spark fetch "
                'them: spark_conf."spark.jars.packages" = '
                '"org.apache.spark:spark-sql-kafka-0-10_2.13:<pyspark version>" (docs/deploy.md)'
            ) from None
    log.info("%s", NATIVE_NOTE)  # compiled or source (monitor.model._native)
    try:
        spark = build_session(
            master=cfg.master,
            app_name=cfg.app_name,
            shuffle_partitions=cfg.shuffle_partitions,
            jars=jars,
            conf={  # Spark's files private too (Hadoop ignores the umask: storefs)
                **PRIVATE_SPARK_CONF,
                **with_system_properties(cfg.spark_conf, cfg.kafka.java_system_properties()),
            },
            authenticate=cfg.spark_authenticate,
            encrypt=cfg.spark_encrypt,
        )
        if cfg.wait_for_topics_s > 0:
            wait_for_topic(cfg.kafka.client_kwargs(), cfg.events_topic, cfg.wait_for_topics_s)
        job = start(spark, cfg, hooks=hooks)
        if exporter is not None:
            counters = job.counters

            def tallies() -> dict[str, int]:
                return {
                    "offsets_skipped": counters.skipped_offsets,
                    "records_too_large": counters.too_large,
                    "store_compaction_errors": compactor.errors if compactor else 0,
                }

            exporter.watch(job.query, tallies=tallies)
        metrics = (
            f"; /metrics on {exporter.server.web.scheme}://{cfg.metrics_host}:{cfg.metrics_port}"
            if exporter is not None
            else ""
        )
        print(
            f"monitor stream: reading {cfg.events_topic} on {cfg.kafka.bootstrap_servers}; "
            f"findings -> {cfg.findings_topic}, dead letters -> {cfg.deadletter_topic}, state -> "
            f"{cfg.store}; checkpoint {cfg.checkpoint_location}{metrics}",
            flush=True,
        )
        try:
            if cfg.once:
                # availableNow never ends with processing-time timers: drain, then stop.
                job.drain()
                job.stop()
            else:
                _stop_on_signals(job)
                job.query.awaitTermination()
        except KeyboardInterrupt:
            job.stop()
    finally:
        if exporter is not None:
            exporter.stop()
        if compactor is not None:
            compactor.stop()
    c = job.counters
    print(
        f"monitor stream: {c.batches} batches, {c.accepted} events accepted, "
        f"{c.dead_lettered} dead-lettered, {c.findings} findings",
        flush=True,
    )
    return 0


def with_system_properties(conf: dict[str, str], props: dict[str, str]) -> dict[str, str]:
    """``conf`` with the Kafka client's JVM system properties (an OAUTHBEARER token URL the
    Java client must be allowed to read: ``KafkaConnection.java_system_properties``) added
    to the driver's and the executors' JVM options, after any given there.

    >>> out = with_system_properties({"spark.driver.extraJavaOptions": "-Xss4m"}, {"a.b": "f"})
    >>> out["spark.driver.extraJavaOptions"], out["spark.executor.extraJavaOptions"]
    ('-Xss4m -Da.b=f', '-Da.b=f')
    """
    if not props:
        return conf
    flags = " ".join(f"-D{k}={v}" for k, v in props.items())
    out = dict(conf)
    for key in ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"):
        out[key] = f"{out.get(key, '')} {flags}".strip()
    return out


def _stop_on_signals(job: RunningJob) -> None:
    """SIGTERM and SIGINT stop the query between two batches, from a thread of its own: the
    signal no longer lands in the middle of a py4j call as a KeyboardInterrupt (which left
    the driver's calls to the JVM half-done and the batch's writes interrupted)."""
    asked = threading.Event()

    def stop(signum: int, frame: object) -> None:
        if asked.is_set():
            return
        asked.set()
        log.info("signal %d: stopping the query once its batch has ended", signum)
        threading.Thread(target=job.stop_between_batches, name="stop", daemon=True).start()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, stop)


def reset(cfg: StreamingConfig) -> None:
    """Delete the local checkpoint and store (for tests and ``--reset``)."""
    for loc in (cfg.checkpoint_location, cfg.store_location):
        if is_local(loc) and Path(loc).exists():
            shutil.rmtree(loc)
