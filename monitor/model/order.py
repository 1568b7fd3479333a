"""The one order in which every driver applies events to the model.

Events are applied by time (``observed_at``); at the same time, configuration before what it
governs -- ``topic_config``, then ``broker``, then the partition-level events -- and between
``partition`` and ``replica`` events of the same time, the order the collector emitted them
(the source order: a Kafka partition's offsets, a file's lines), which callers keep by
sorting stably. A partition's round record (:class:`PartitionRound`) is its events
``(*samples, meta)``, each with its own time: drivers that sort unfold it first
(:func:`unfold`) and keep the unfolded events in that order at equal keys. The Spark
operator, ``monitor replay``, the in-process engine and the test simulations all sort
with :func:`order_key`, so the same events give the same findings whichever of them
applies them.

>>> sorted([(5, "replica"), (5, "topic_config"), (4, "partition")],
...        key=lambda e: order_key(e[0], e[1]))
[(4, 'partition'), (5, 'topic_config'), (5, 'replica')]
"""

from __future__ import annotations

from monitor.model.events import (
    BrokerReport,
    ModelEvent,
    ModelRecord,
    PartitionMeta,
    PartitionRound,
    ReplicaReport,
    TopicConfigReport,
    TopicDeleted,
)

#: Rank of each kind at equal ``observed_at``: configuration before what it governs.
KIND_RANK: dict[str, int] = {
    "topic_config": 0,
    "topic_deleted": 0,
    "broker": 1,
    "partition": 2,
    "replica": 2,
}

_RANK_OF_TYPE: dict[type, int] = {
    TopicConfigReport: KIND_RANK["topic_config"],
    TopicDeleted: KIND_RANK["topic_deleted"],
    BrokerReport: KIND_RANK["broker"],
    PartitionMeta: KIND_RANK["partition"],
    ReplicaReport: KIND_RANK["replica"],
}


def order_key(observed_at: int, kind: str) -> tuple[int, int]:
    """The sort key of an event given its time and kind (sort stably: ties keep source
    order)."""
    return (observed_at, KIND_RANK[kind])


def event_order(event: ModelEvent) -> tuple[int, int]:
    """:func:`order_key` of a model event."""
    return (event.observed_at, _RANK_OF_TYPE[type(event)])


def unfold(record: ModelRecord) -> tuple[ModelEvent, ...]:
    """The events of a record: a round's samples then its metadata; any other, itself."""
    if isinstance(record, PartitionRound):
        return record.events()
    return (record,)
