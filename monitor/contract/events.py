"""The telemetry event contract, schema version 1 (see ``docs/events.md``).

One JSON object per Kafka record, or per line of a file. Every event has
``schema_version`` (1), ``kind``, ``cluster`` and ``observed_at`` (integer milliseconds
since the Unix epoch, UTC). Unknown fields are ignored, so producers may add fields without
breaking older consumers; a missing required field or a wrong type rejects the event with
a reason naming the field. Types are strict: ``"5"`` is not an integer and ``1`` is not a
boolean.

>>> parse_event(b'{"schema_version":1,"kind":"broker","cluster":"c","observed_at":5,'
...             b'"broker":1,"alive":true}').broker
1
>>> parse_event(b'{"schema_version":1,"kind":"broker","cluster":"c","observed_at":5}')
Traceback (most recent call last):
...
monitor.contract.events.EventError: broker: field required; alive: field required
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from monitor.contract.invariants import partition_problem
from monitor.model.events import (
    BrokerReport,
    ModelRecord,
    PartitionMeta,
    ReplicaReport,
    TopicConfigReport,
    TopicDeleted,
    round_of,
)

SCHEMA_VERSION = 1

#: The monitor's own topics (on a cluster other than the one it watches): the collector
#: publishes events, the Spark job reads them and writes findings and dead letters.
EVENTS_TOPIC = "__replication_monitor_events"
FINDINGS_TOPIC = "__replication_monitor_findings"
DEADLETTER_TOPIC = "__replication_monitor_deadletter"

#: The Kafka key of a partition's records (``partition`` and ``replica`` events, round
#: records) on the events topic, as the collector writes it (:func:`partition_key`):
#: ``krm1/<partition>/<topic>/<cluster>``. The Spark job routes a record with such a key by
#: the key alone, without parsing the value in the JVM; the Python worker then checks the
#: record is that partition's (a record that is not is dead-lettered: it could not be
#: routed by what it says). Any other key, or none, is routed by the record's own fields.
#: Every record of a partition shares its key, hence a Kafka partition and an order.
PARTITION_KEY_PREFIX = "krm1/"


def partition_key(cluster: str, topic: str, partition: int) -> str:
    """The events topic's Kafka key of a partition's records (:data:`PARTITION_KEY_PREFIX`).

    >>> partition_key("lab", "orders", 3)
    'krm1/3/orders/lab'
    """
    return f"{PARTITION_KEY_PREFIX}{partition}/{topic}/{cluster}"


INT64_MAX = 2**63 - 1
INT32_MAX = 2**31 - 1

Offset = Annotated[int, Field(ge=0, le=INT64_MAX)]
BrokerId = Annotated[int, Field(ge=0, le=INT32_MAX)]
Millis = Annotated[int, Field(ge=0, le=INT64_MAX, description="ms since the Unix epoch, UTC")]
#: Kafka's legal topic names and topic ids: the contract's patterns and lengths (the
#: collector's fast path checks values with the same ones, :mod:`monitor.collector.build`).
TOPIC_PATTERN, TOPIC_MAX_LENGTH = r"^[a-zA-Z0-9._-]+$", 249
TOPIC_ID_PATTERN, TOPIC_ID_LENGTH = r"^[A-Za-z0-9_-]+$", 22
TopicName = Annotated[str, Field(min_length=1, max_length=TOPIC_MAX_LENGTH, pattern=TOPIC_PATTERN)]
CLUSTER_MAX_LENGTH = 256
ClusterName = Annotated[str, Field(min_length=1, max_length=CLUSTER_MAX_LENGTH)]
# Kafka's topic id: a UUID as Kafka prints it (base64url, no padding: 22 characters).
TopicId = Annotated[
    str,
    Field(
        min_length=TOPIC_ID_LENGTH,
        max_length=TOPIC_ID_LENGTH,
        pattern=TOPIC_ID_PATTERN,
        description="Kafka's topic id (base64url, as kafka-topics.sh prints it): a topic "
        "deleted and recreated with the same name gets a new one.",
    ),
]


#: The error type of a broken invariant (its message names the field: the reason as is).
INVARIANT_ERROR = "kafka_invariant"


class _Event(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)

    schema_version: Literal[1] = Field(description="Contract version; this is version 1.")
    cluster: ClusterName = Field(description="Name of the Kafka cluster the event is about.")
    observed_at: Millis = Field(description="When the collector observed this, in ms UTC.")


class ReplicaSample(BaseModel):
    """One replica's reading in a partition's collection round: a ``replica`` event's fields,
    carried by the round's ``partition`` event (``replica_samples``)."""

    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)

    broker: BrokerId
    log_end_offset: Offset
    log_start_offset: Offset | None = None
    high_watermark: Offset | None = None
    fetch_lag: Offset | None = None
    observed_at: Millis | None = Field(
        default=None,
        description="When this sample was read, when not the event's own observed_at (the "
        "collector reads the exporter pages at the round's start, the metadata after them).",
    )


class PartitionEvent(_Event):
    """The controller's metadata view of one partition -- and, in a round record, its
    replicas' samples of the same round (``replica_samples``)."""

    kind: Literal["partition"]
    topic: TopicName
    topic_id: TopicId | None = None
    partition: Annotated[int, Field(ge=0, le=INT32_MAX)]
    leader: BrokerId | None = Field(
        default=None, description="Leader broker id; null or absent when offline."
    )
    leader_epoch: Annotated[int, Field(ge=0, le=INT32_MAX)]
    replicas: list[BrokerId] = Field(max_length=1024, description="Assigned replicas, in order.")
    isr: list[BrokerId] = Field(max_length=1024)
    offline_replicas: list[BrokerId] = Field(default_factory=list, max_length=1024)
    eligible_leader_replicas: list[BrokerId] | None = Field(default=None, max_length=1024)
    high_watermark: Offset | None = Field(default=None, description="The leader's HW.")
    log_start_offset: Offset | None = None
    epoch_start_offset: Offset | None = Field(
        default=None,
        description="Start offset of the current leader epoch in the leader's leader-epoch "
        "cache (OffsetsForLeaderEpoch): the new leader's log end at its election. Sent once "
        "per epoch.",
    )
    adding_replicas: list[BrokerId] | None = Field(
        default=None,
        max_length=1024,
        description="While a reassignment runs (KIP-455): the replicas being added (they "
        "copy the log). Empty: none; absent: not known this round (the previous holds).",
    )
    removing_replicas: list[BrokerId] | None = Field(
        default=None,
        max_length=1024,
        description="While a reassignment runs: the replicas being removed.",
    )
    replica_samples: list[ReplicaSample] | None = Field(
        default=None,
        max_length=1024,
        description="The round's replica samples of this partition (a round record: one "
        "record per partition per round). The same as a `replica` event per sample, each "
        "stamped with the sample's observed_at (else the event's), applied before this "
        "metadata in the listed order. Absent: none in this record.",
    )

    @model_validator(mode="after")
    def _kafka_invariants(self) -> PartitionEvent:
        """What Kafka guarantees of the fields together (:mod:`monitor.contract.invariants`)."""
        problem = partition_problem(
            self.leader, self.replicas, self.isr, self.eligible_leader_replicas
        )
        if problem is not None:
            raise PydanticCustomError(INVARIANT_ERROR, problem)
        return self


class ReplicaEvent(_Event):
    """One broker's view of its own replica of a partition."""

    kind: Literal["replica"]
    topic: TopicName
    partition: Annotated[int, Field(ge=0, le=INT32_MAX)]
    broker: BrokerId
    log_end_offset: Offset
    log_start_offset: Offset | None = None
    high_watermark: Offset | None = None
    fetch_lag: Offset | None = None


class TopicConfigEvent(_Event):
    """A topic's durability configuration, with broker defaults resolved."""

    kind: Literal["topic_config"]
    topic: TopicName
    topic_id: TopicId | None = None
    replication_factor: Annotated[int, Field(ge=1, le=1024)]
    min_insync_replicas: Annotated[int, Field(ge=1, le=1024)]
    unclean_leader_election_enable: bool


class TopicDeletedEvent(_Event):
    """A topic the collector knew is gone from a metadata read that succeeded: the monitor
    forgets its partitions (conditions resolve; state, store rows and metrics go)."""

    kind: Literal["topic_deleted"]
    topic: TopicName
    topic_id: TopicId | None = Field(
        default=None, description="The id of the incarnation that is gone, when known."
    )


class BrokerEvent(_Event):
    """Whether a broker answered the collector, with counters as the broker reports them."""

    kind: Literal["broker"]
    broker: BrokerId
    alive: bool
    unclean_elections_total: Offset | None = None
    started_at: Millis | None = Field(
        default=None,
        description="When the broker's JVM started (the exporter's "
        "process_start_time_seconds): a counter of a restarted process starts anew.",
    )
    isr_shrinks_total: Offset | None = None
    isr_expands_total: Offset | None = None
    under_replicated_partitions: Offset | None = None
    active_controller: bool | None = None


AnyEvent = PartitionEvent | ReplicaEvent | TopicConfigEvent | TopicDeletedEvent | BrokerEvent
Event = Annotated[
    PartitionEvent | ReplicaEvent | TopicConfigEvent | TopicDeletedEvent | BrokerEvent,
    Field(discriminator="kind"),
]
EVENT_ADAPTER: TypeAdapter[AnyEvent] = TypeAdapter(Event)
KINDS = ("partition", "replica", "topic_config", "topic_deleted", "broker")


class EventError(ValueError):
    """An event that breaks the contract; ``str()`` names the field(s) and the problem."""


#: How many characters of an offending value a reason shows (a reason names the problem; it
#: is not a copy of the input: a 5 MB ``kind`` must not become a 5 MB reason).
SHOWN_CHARS = 32


def shown(value: Any) -> str:
    """An offending value as a reason shows it: ``repr``, strings cut to :data:`SHOWN_CHARS`.

    >>> shown("x")
    "'x'"
    >>> shown("k" * 100)
    "'kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk'... (100 characters)"
    >>> shown(list(range(100)))
    'a list'
    """
    if isinstance(value, str):
        if len(value) > SHOWN_CHARS:
            return f"{value[:SHOWN_CHARS]!r}... ({len(value)} characters)"
        return repr(value)
    if isinstance(value, list | dict):
        return "a list" if isinstance(value, list) else "an object"
    return repr(value)[:SHOWN_CHARS]


def _reason(err: ValidationError) -> str:
    parts = []
    for e in err.errors(include_url=False)[:5]:
        loc = [str(x) for x in e["loc"]]
        # Drop the union tag pydantic puts first ("partition", "replica", ...).
        if loc and loc[0] in KINDS:
            loc = loc[1:]
        where = ".".join(loc) or "event"
        msg = e["msg"]
        if e["type"] == "missing":
            msg = "field required"
        elif e["type"] == "union_tag_invalid":
            msg = (
                f"unknown kind {shown(e['input'].get('kind'))}"
                if isinstance(e.get("input"), dict)
                else msg
            )
            where = "kind"
        elif e["type"] == "union_tag_not_found":
            where, msg = "kind", "field required"
        elif e["type"] == INVARIANT_ERROR:
            parts.append(msg)
            continue
        elif e["type"] == "literal_error" and where == "schema_version":
            msg = f"unsupported schema_version {shown(e['input'])} (this reader knows 1)"
        parts.append(f"{where}: {msg}")
    if len(err.errors()) > 5:
        parts.append(f"... and {len(err.errors()) - 5} more")
    return "; ".join(parts)


def parse_event(raw: bytes | str) -> AnyEvent:
    """Parse and validate one JSON event. Raises :class:`EventError` with a readable reason."""
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise EventError(f"not UTF-8: {e.reason} at byte {e.start}") from None
    if not raw.strip():
        raise EventError("empty record")
    try:
        return EVENT_ADAPTER.validate_json(raw)
    except ValidationError as e:
        if e.errors() and e.errors()[0]["type"] == "json_invalid":
            raise EventError(f"invalid JSON: {e.errors()[0]['msg']}") from None
        first = e.errors()[0] if e.errors() else None
        if first and first["type"] in ("model_attributes_type", "model_type") and not first["loc"]:
            raise EventError("not a JSON object") from None
        raise EventError(_reason(e)) from None


def validate_event(
    data: dict[str, Any],
) -> AnyEvent:
    """Validate an already-decoded event (the collector's side of the contract)."""
    try:
        return EVENT_ADAPTER.validate_python(data)
    except ValidationError as e:
        raise EventError(_reason(e)) from None


def to_model(
    ev: AnyEvent,
) -> ModelRecord:
    """Convert a validated contract event to the model's plain record (a round record --
    a ``partition`` event with ``replica_samples`` -- to a :class:`PartitionRound`)."""
    if isinstance(ev, PartitionEvent):
        meta = PartitionMeta(
            ev.cluster,
            ev.observed_at,
            ev.topic,
            ev.partition,
            ev.leader,
            ev.leader_epoch,
            tuple(ev.replicas),
            tuple(ev.isr),
            tuple(ev.offline_replicas),
            tuple(ev.eligible_leader_replicas) if ev.eligible_leader_replicas is not None else None,
            ev.high_watermark,
            ev.log_start_offset,
            ev.epoch_start_offset,
            ev.topic_id,
            tuple(ev.adding_replicas) if ev.adding_replicas is not None else None,
            tuple(ev.removing_replicas) if ev.removing_replicas is not None else None,
        )
        if not ev.replica_samples:
            return meta
        return round_of(meta, ev.replica_samples)
    if isinstance(ev, ReplicaEvent):
        return ReplicaReport(
            ev.cluster,
            ev.observed_at,
            ev.topic,
            ev.partition,
            ev.broker,
            ev.log_end_offset,
            ev.log_start_offset,
            ev.high_watermark,
            ev.fetch_lag,
        )
    if isinstance(ev, TopicConfigEvent):
        return TopicConfigReport(
            ev.cluster,
            ev.observed_at,
            ev.topic,
            ev.replication_factor,
            ev.min_insync_replicas,
            ev.unclean_leader_election_enable,
        )
    if isinstance(ev, TopicDeletedEvent):
        return TopicDeleted(ev.cluster, ev.observed_at, ev.topic, ev.topic_id)
    return BrokerReport(
        ev.cluster,
        ev.observed_at,
        ev.broker,
        ev.alive,
        ev.unclean_elections_total,
        ev.isr_shrinks_total,
        ev.isr_expands_total,
        ev.under_replicated_partitions,
        ev.active_controller,
        ev.started_at,
    )


def json_schema() -> dict[str, Any]:
    """The JSON Schema of the contract (printed by ``monitor schema``)."""
    schema = EVENT_ADAPTER.json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = f"Kafka replication monitor telemetry event, schema version {SCHEMA_VERSION}"
    return schema


def dumps(ev: BaseModel) -> str:
    """Serialise an event compactly, without nulls (what the collector produces)."""
    return json.dumps(ev.model_dump(exclude_none=True), separators=(",", ":"))
