"""The model's view of telemetry: plain records (no validation here), never changed once made.

Not frozen dataclasses, though nothing changes them: the Spark job builds four or five per
partition-round, and a frozen slotted dataclass sets each field through
``object.__setattr__`` (decoding and ordering a round: 12.4 -> 10.6 us unfrozen,
``bench.operator_bench``, docs/benchmarks.md). The model reads
events and never writes them (``tests/model/test_round_step.py`` checks every event of
every scenario is unchanged by applying it).

The three a partition-round is made of (:class:`PartitionMeta`, :class:`ReplicaReport`,
:class:`PartitionRound`) spell their ``__init__`` out instead of taking the dataclass's:
compiled (``monitor.model._native``), a written ``__init__`` is native code, where the one
``dataclass`` generates at import runs as interpreted Python (0.37 against 0.14 us a
``ReplicaReport``: docs/benchmarks.md).
``tests/model/test_events.py`` checks each takes its fields in order, with their defaults.

The wire contract with validation lives in :mod:`monitor.contract.events`; adapters convert from
it (or, in the Spark job, straight from already-typed rows) to these records. Times are
integer milliseconds since the Unix epoch, taken from the events themselves.
"""

from __future__ import annotations

import copyreg
from collections.abc import Iterable
from dataclasses import dataclass, fields
from typing import Any


@dataclass(slots=True, init=False)
class PartitionMeta:
    """The controller's view of a partition (``partition`` events)."""

    cluster: str
    observed_at: int
    topic: str
    partition: int
    leader: int | None
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    eligible_leader_replicas: tuple[int, ...] | None = None
    high_watermark: int | None = None
    log_start_offset: int | None = None
    #: The leader's record of where the current epoch began (its log end at election).
    epoch_start_offset: int | None = None
    #: Kafka's topic id: a different one is a new incarnation of the topic (recreated).
    topic_id: str | None = None
    #: A running reassignment (KIP-455): replicas being added and removed (None: not
    #: known from this event -- what was known holds).
    adding_replicas: tuple[int, ...] | None = None
    removing_replicas: tuple[int, ...] | None = None

    def __init__(
        self,
        cluster: str,
        observed_at: int,
        topic: str,
        partition: int,
        leader: int | None,
        leader_epoch: int,
        replicas: tuple[int, ...],
        isr: tuple[int, ...],
        offline_replicas: tuple[int, ...] = (),
        eligible_leader_replicas: tuple[int, ...] | None = None,
        high_watermark: int | None = None,
        log_start_offset: int | None = None,
        epoch_start_offset: int | None = None,
        topic_id: str | None = None,
        adding_replicas: tuple[int, ...] | None = None,
        removing_replicas: tuple[int, ...] | None = None,
    ) -> None:
        self.cluster = cluster
        self.observed_at = observed_at
        self.topic = topic
        self.partition = partition
        self.leader = leader
        self.leader_epoch = leader_epoch
        self.replicas = replicas
        self.isr = isr
        self.offline_replicas = offline_replicas
        self.eligible_leader_replicas = eligible_leader_replicas
        self.high_watermark = high_watermark
        self.log_start_offset = log_start_offset
        self.epoch_start_offset = epoch_start_offset
        self.topic_id = topic_id
        self.adding_replicas = adding_replicas
        self.removing_replicas = removing_replicas


@dataclass(slots=True, init=False)
class ReplicaReport:
    """One broker's view of its own replica (``replica`` events)."""

    cluster: str
    observed_at: int
    topic: str
    partition: int
    broker: int
    log_end_offset: int
    log_start_offset: int | None = None
    high_watermark: int | None = None
    fetch_lag: int | None = None

    def __init__(
        self,
        cluster: str,
        observed_at: int,
        topic: str,
        partition: int,
        broker: int,
        log_end_offset: int,
        log_start_offset: int | None = None,
        high_watermark: int | None = None,
        fetch_lag: int | None = None,
    ) -> None:
        self.cluster = cluster
        self.observed_at = observed_at
        self.topic = topic
        self.partition = partition
        self.broker = broker
        self.log_end_offset = log_end_offset
        self.log_start_offset = log_start_offset
        self.high_watermark = high_watermark
        self.fetch_lag = fetch_lag


@dataclass(slots=True)
class TopicConfigReport:
    """A topic's durability settings (``topic_config`` events)."""

    cluster: str
    observed_at: int
    topic: str
    replication_factor: int
    min_insync_replicas: int
    unclean_leader_election_enable: bool


@dataclass(slots=True)
class TopicDeleted:
    """A topic the collector knew is gone from a metadata read that succeeded
    (``topic_deleted`` events): its partitions are forgotten."""

    cluster: str
    observed_at: int
    topic: str
    #: The id of the incarnation that is gone (None: whichever the model holds).
    topic_id: str | None = None


@dataclass(slots=True)
class BrokerReport:
    """Whether a broker answered the collector, with the counters it reports."""

    cluster: str
    observed_at: int
    broker: int
    alive: bool
    unclean_elections_total: int | None = None
    isr_shrinks_total: int | None = None
    isr_expands_total: int | None = None
    under_replicated_partitions: int | None = None
    active_controller: bool | None = None
    #: When the broker's process started (ms), where the exporter says.
    started_at: int | None = None


@dataclass(slots=True, init=False)
class PartitionRound:
    """A partition's collection round in one record: its replicas' samples, then its
    metadata. Exactly the events ``(*samples, meta)`` (:meth:`events`), each at its own
    ``observed_at``: drivers that sort events unfold a round first
    (:func:`monitor.model.order.unfold`)."""

    meta: PartitionMeta
    samples: tuple[ReplicaReport, ...]

    def __init__(self, meta: PartitionMeta, samples: tuple[ReplicaReport, ...]) -> None:
        self.meta = meta
        self.samples = samples

    @property
    def cluster(self) -> str:
        return self.meta.cluster

    @property
    def observed_at(self) -> int:
        return self.meta.observed_at

    @property
    def topic(self) -> str:
        return self.meta.topic

    @property
    def partition(self) -> int:
        return self.meta.partition

    def events(self) -> tuple[ReplicaReport | PartitionMeta, ...]:
        return (*self.samples, self.meta)


def round_of(meta: PartitionMeta, samples: Iterable[Any]) -> PartitionRound:
    """A round record's model record: its metadata and one report per sample (any objects
    with the contract's ``ReplicaSample`` attributes: ``broker``, ``log_end_offset``,
    ``log_start_offset``, ``high_watermark``, ``fetch_lag``, ``observed_at``), stamped with
    the metadata's ``observed_at`` where a sample has none of its own. Here, in the model,
    so that it is compiled with it: the Spark job's workers make one per partition per
    round (a loop over three samples cost ~3 µs interpreted).

    >>> meta = PartitionMeta("c", 20, "t", 0, 1, 3, (1, 2), (1, 2))
    >>> class S:
    ...     broker, log_end_offset, log_start_offset = 2, 100, 0
    ...     high_watermark = fetch_lag = observed_at = None
    >>> [(r.broker, r.observed_at, r.log_end_offset) for r in round_of(meta, [S()]).samples]
    [(2, 20, 100)]
    """
    c = meta.cluster
    at = meta.observed_at
    topic = meta.topic
    part = meta.partition
    reports: list[ReplicaReport] = []
    for s in samples:
        s_at = s.observed_at
        reports.append(
            ReplicaReport(
                c, at if s_at is None else s_at, topic, part, s.broker, s.log_end_offset,
                s.log_start_offset, s.high_watermark, s.fetch_lag,
            )
        )  # fmt: skip
    return PartitionRound(meta, tuple(reports))


ModelEvent = PartitionMeta | ReplicaReport | TopicConfigReport | TopicDeleted | BrokerReport
#: What a contract record becomes: one event, or a partition's round (several events).
ModelRecord = ModelEvent | PartitionRound


def _by_fields(obj: Any) -> tuple[type, tuple[Any, ...]]:
    """How to copy or pickle a record whose ``__init__`` is written out: its class called
    with its fields in order (compiled, such a class cannot be made without them)."""
    return type(obj), tuple(getattr(obj, f.name) for f in fields(obj))


for _cls in (PartitionMeta, ReplicaReport, PartitionRound):
    copyreg.pickle(_cls, _by_fields)
