"""Turning one round's raw reads into contract events (pure: no I/O, times passed in).

Each event is validated as it is built. Given a ``dropped`` counter, a builder leaves an
event that breaks the contract out -- that event only: the round's others go on -- and
counts it by (kind, the field it broke), never by the value (:func:`checked`). Without one
it raises pydantic's ``ValidationError``, as the contract's models do.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import TypeVar

from pydantic import ValidationError

from monitor.collector.admin import PartitionMetadata, TopicDurability
from monitor.collector.jmx import BrokerScrape
from monitor.contract.events import (
    AnyEvent,
    BrokerEvent,
    PartitionEvent,
    ReplicaEvent,
    TopicConfigEvent,
    TopicDeletedEvent,
)
from monitor.model.rules import original_replicas

#: Events left out for breaking the contract, by (kind, the first field named): a bounded
#: set of label values, e.g. ``("replica", "topic")``.
Dropped = Counter[tuple[str, str]]

_E = TypeVar("_E", bound=AnyEvent)
_T = TypeVar("_T")


def checked(kind: str, make: Callable[[], _E], dropped: Dropped | None) -> _E | None:
    """``make()``, or None counted in ``dropped`` if the event breaks the contract (raised
    when ``dropped`` is None).

    >>> dropped = Dropped()
    >>> checked("broker", partial(BrokerEvent, schema_version=1, kind="broker", cluster="c",
    ...         observed_at=1, broker=-1, alive=True), dropped), dropped
    (None, Counter({('broker', 'broker'): 1}))
    """
    try:
        return make()
    except ValidationError as e:
        if dropped is None:
            raise
        errors = e.errors(include_url=False, include_input=False)
        where = errors[0]["loc"] if errors else ()
        dropped[kind, str(where[0]) if where else "event"] += 1
        return None


def kept(
    kind: str, make: Callable[[_T], _E], items: Iterable[_T], dropped: Dropped | None
) -> list[_E]:
    """``make(item)`` for each item, those that break the contract left out (and counted)."""
    built = (checked(kind, partial(make, item), dropped) for item in items)
    return [ev for ev in built if ev is not None]


def partition_events(
    cluster: str,
    observed_at: int,
    partitions: list[PartitionMetadata],
    high_watermarks: Mapping[tuple[str, int], int],
    epoch_starts: Mapping[tuple[str, int], int] | None = None,
    reassignments: Mapping[tuple[str, int], tuple[list[int], list[int]]] | None = None,
    dropped: Dropped | None = None,
) -> list[PartitionEvent]:
    """``reassignments``: adding / removing replicas for the partitions that carry them
    (the running reassignments, and ``([], [])`` once for one that ended); the others'
    events leave the fields out (the model keeps what it knew)."""
    moving = reassignments or {}

    def one(p: PartitionMetadata) -> PartitionEvent:
        return PartitionEvent(
            schema_version=1,
            kind="partition",
            cluster=cluster,
            observed_at=observed_at,
            topic=p.topic,
            topic_id=p.topic_id,
            partition=p.partition,
            leader=p.leader,
            leader_epoch=p.leader_epoch,
            replicas=list(p.replicas),
            isr=list(p.isr),
            offline_replicas=list(p.offline),
            eligible_leader_replicas=list(p.elr) if p.elr is not None else None,
            high_watermark=high_watermarks.get((p.topic, p.partition)),
            epoch_start_offset=(epoch_starts or {}).get((p.topic, p.partition)),
            adding_replicas=moving[(p.topic, p.partition)][0]
            if (p.topic, p.partition) in moving
            else None,
            removing_replicas=moving[(p.topic, p.partition)][1]
            if (p.topic, p.partition) in moving
            else None,
        )

    return kept("partition", one, partitions, dropped)


def replica_events(
    cluster: str,
    broker: int,
    observed_at: int,
    scrape: BrokerScrape,
    keep: set[str] | None,
    dropped: Dropped | None = None,
) -> list[ReplicaEvent]:
    """One event per replica the broker holds (``keep``: only these topics, if given)."""

    def one(item: tuple[tuple[str, int], int]) -> ReplicaEvent:
        (topic, partition), leo = item
        return ReplicaEvent(
            schema_version=1,
            kind="replica",
            cluster=cluster,
            observed_at=observed_at,
            topic=topic,
            partition=partition,
            broker=broker,
            log_end_offset=leo,
            log_start_offset=scrape.log_start.get((topic, partition)),
            fetch_lag=scrape.fetch_lag.get((topic, partition)),
        )

    mine = (i for i in scrape.leo.items() if keep is None or i[0][0] in keep)
    return kept("replica", one, mine, dropped)


def broker_event(
    cluster: str,
    broker: int,
    observed_at: int,
    scrape: BrokerScrape | None,
    unclean_counter: bool = True,
    alive: bool | None = None,
) -> BrokerEvent:
    """``alive`` is whether the broker answered; a silent broker is an event, not a gap.
    ``unclean_counter``: whether the unclean-election counter is a witness on this cluster
    (:func:`monitor.collector.versions.trust_unclean_counter`); if not, it is left out.
    A broker without an exporter endpoint (no ``scrape``) is said ``alive`` as the cluster
    metadata lists it (Admin-API-only collection), with no counters."""
    c = scrape.counters if scrape is not None else {}
    active = c.get("active_controller")
    return BrokerEvent(
        schema_version=1,
        kind="broker",
        cluster=cluster,
        observed_at=observed_at,
        broker=broker,
        alive=scrape is not None if alive is None else alive,
        unclean_elections_total=c.get("unclean_elections_total") if unclean_counter else None,
        isr_shrinks_total=c.get("isr_shrinks_total"),
        isr_expands_total=c.get("isr_expands_total"),
        under_replicated_partitions=c.get("under_replicated_partitions"),
        active_controller=bool(active) if active is not None else None,
        started_at=scrape.started_at if scrape is not None else None,
    )


def topic_config_events(
    cluster: str,
    observed_at: int,
    configs: Mapping[str, TopicDurability],
    partitions: list[PartitionMetadata],
    moving: Mapping[tuple[str, int], tuple[list[int], list[int]]] | None = None,
    dropped: Dropped | None = None,
) -> list[TopicConfigEvent]:
    """One event per configured topic. The replication factor is the partitions' replica
    count without the replicas a running reassignment is adding (``moving``: (topic,
    partition) -> (adding, removing)): while a move copies, the metadata lists both the old
    and the new replicas, and an RF 2 topic would read as RF 3 (found by the soak: a false
    ``durability_risk`` "min_isr_1_with_rf_3" during every move)."""
    rf: dict[str, int] = {}
    ids: dict[str, str] = {}
    for p in partitions:
        adding = (moving or {}).get((p.topic, p.partition), ([], []))[0]
        count = len(original_replicas(p.replicas, adding))
        rf[p.topic] = max(rf.get(p.topic, 0), count)
        if p.topic_id is not None:
            ids[p.topic] = p.topic_id

    def one(item: tuple[str, TopicDurability]) -> TopicConfigEvent:
        topic, cfg = item
        return TopicConfigEvent(
            schema_version=1,
            kind="topic_config",
            cluster=cluster,
            observed_at=observed_at,
            topic=topic,
            topic_id=ids.get(topic),
            replication_factor=max(1, rf.get(topic, 1)),
            min_insync_replicas=cfg.min_insync_replicas,
            unclean_leader_election_enable=cfg.unclean_leader_election_enable,
        )

    return kept("topic_config", one, configs.items(), dropped)


def topic_deleted_events(
    cluster: str, observed_at: int, gone: Mapping[str, str | None], dropped: Dropped | None = None
) -> list[TopicDeletedEvent]:
    """One event per topic (with its last known id) that a successful metadata read no
    longer lists."""

    def one(item: tuple[str, str | None]) -> TopicDeletedEvent:
        topic, topic_id = item
        return TopicDeletedEvent(
            schema_version=1,
            kind="topic_deleted",
            cluster=cluster,
            observed_at=observed_at,
            topic=topic,
            topic_id=topic_id,
        )

    return kept("topic_deleted", one, sorted(gone.items()), dropped)


def event_key(ev: AnyEvent) -> bytes:
    """Kafka record key: one partition's (or broker's) events share a key, hence an order."""
    if isinstance(ev, BrokerEvent):
        return f"{ev.cluster}/broker/{ev.broker}".encode()
    if isinstance(ev, TopicConfigEvent | TopicDeletedEvent):
        return f"{ev.cluster}/{ev.topic}".encode()
    return f"{ev.cluster}/{ev.topic}/{ev.partition}".encode()
