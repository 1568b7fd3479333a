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

import bisect
from collections.abc import Container, Mapping, Sequence
from typing import Any

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
from monitor.model.state import TopicConfig, TopicState

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


#: The source position of a record: (Kafka partition, offset), a file's line, ... -- what
#: orders events of equal time and kind.
Source = tuple[int, ...]


def application_order(
    records: Sequence[tuple[Source, ModelRecord]],
    topics: Mapping[tuple[str, str], TopicState] | None = None,
    deleted: Container[tuple[str, str]] = (),
) -> list[ModelRecord]:
    """What to apply, in :func:`order_key` order: every event, a round kept whole where
    applying it whole is applying its events where they sort.

    A round (:class:`PartitionRound`) stays whole when its events sort in their round order
    and nothing that could see the difference sorts among them: no ``broker`` event of its
    cluster (the brokers' states take part in judging a partition), no ``topic_config``
    of its topic that changes the topic's settings (one with the settings the model holds
    -- ``topics``, the model's own, as they stand before the batch, and as the batch's
    earlier ``topic_config`` events leave them -- changes nothing for a partition), no
    ``topic_deleted`` of its topic (nor any event of a topic in ``deleted``), no event of
    another record of the same partition. Its events are then applied together at its
    first event's place: what it passes concerns other states (``ClusterModel.apply`` of a
    round applies its events in order, one partition's, in one call -- the model's fast
    path). Any other round is unfolded into its events, each at its own place. Ties keep
    the source order, then the round's own order.

    Every collector's round stamps its replica samples and its brokers with the round's
    start, its metadata and topics' settings with the metadata read, a moment later: the
    broker events sort before the samples, the settings (unchanged, nearly always) between
    the samples and the metadata.

    >>> from monitor.model.events import PartitionMeta, ReplicaReport, BrokerReport
    >>> meta = PartitionMeta("c", 20, "t", 0, 1, 3, (1, 2), (1, 2))
    >>> sample = ReplicaReport("c", 10, "t", 0, 1, 100)
    >>> r = PartitionRound(meta, (sample,))
    >>> [type(x).__name__ for x in application_order([((0,), r)])]
    ['PartitionRound']
    >>> b = BrokerReport("c", 15, 2, alive=False)  # sorts between the sample and the meta
    >>> [type(x).__name__ for x in application_order([((0,), r), ((1,), b)])]
    ['ReplicaReport', 'BrokerReport', 'PartitionMeta']
    """
    rank = KIND_RANK["partition"]
    # (time, rank, source, index in the record, sequence, record): a tuple that sorts by
    # itself (the unique sequence ends every comparison before the record).
    keyed: list[tuple[int, int, Source, int, int, ModelRecord]] = []
    rounds: list[tuple[int, PartitionRound]] = []
    records_of: dict[tuple[str, str, int], int] = {}
    broker_stamps: dict[str, list[int]] = {}
    topic_events: dict[tuple[str, str], list[tuple[Key, TopicConfigReport | TopicDeleted]]] = {}
    for src, rec in records:
        kind = type(rec)
        if kind is PartitionRound:
            m = rec.meta  # type: ignore[union-attr]
            pk = (m.cluster, m.topic, m.partition)
            first = rec.samples[0].observed_at if rec.samples else m.observed_at  # type: ignore[union-attr]
            rounds.append((len(keyed), rec))  # type: ignore[arg-type]
            keyed.append((first, rank, src, 0, len(keyed), rec))
        elif kind is PartitionMeta or kind is ReplicaReport:
            pk = (rec.cluster, rec.topic, rec.partition)  # type: ignore[union-attr]
            keyed.append((rec.observed_at, rank, src, 0, len(keyed), rec))
        else:
            t, r = event_order(rec)  # type: ignore[arg-type]
            keyed.append((t, r, src, 0, len(keyed), rec))
            if kind is BrokerReport:
                broker_stamps.setdefault(rec.cluster, []).append(t)
            else:
                tk = (rec.cluster, rec.topic)  # type: ignore[union-attr]
                topic_events.setdefault(tk, []).append(((t, r, src, 0), rec))  # type: ignore[arg-type]
            continue
        records_of[pk] = records_of.get(pk, 0) + 1
    for stamps in broker_stamps.values():
        stamps.sort()
    changing = _changing(topic_events, topics or {}, deleted)
    spans: dict[tuple[str, str, int], list[tuple[Key, Key]]] = {}
    for at, rec in rounds:
        m = rec.meta
        pk = (m.cluster, m.topic, m.partition)
        several = records_of[pk] > 1
        if several and not spans:
            spans = _spans(keyed, records_of)
        first_key = keyed[at][:4]
        if _whole(
            rec,
            first_key,
            spans[pk] if several else [],
            broker_stamps.get(m.cluster, ()),
            changing.get((m.cluster, m.topic), ()),
        ):
            continue
        # Unfolded: its events, each at its own key (the first takes the round's slot).
        src = first_key[2]
        events = rec.events()
        keyed[at] = (*event_order(events[0]), src, 0, at, events[0])
        n = len(keyed)
        keyed.extend((*event_order(ev), src, i, n + i, ev) for i, ev in enumerate(events[1:], 1))
    keyed.sort()
    return [k[5] for k in keyed]


def _changing(
    topic_events: dict[tuple[str, str], list[tuple[Key, TopicConfigReport | TopicDeleted]]],
    topics: Mapping[tuple[str, str], TopicState],
    deleted: Container[tuple[str, str]],
) -> dict[tuple[str, str], list[int]]:
    """Per topic, the stamps of its events in the batch that change what its partitions
    are judged with, in order: a ``topic_config`` with other settings than the topic has
    when it applies (``ClusterModel._apply_topic_config`` re-judges the partitions then,
    and only then), a ``topic_deleted``, and whatever follows one, or concerns a topic the
    model holds as deleted."""
    out: dict[tuple[str, str], list[int]] = {}
    for tk, events in topic_events.items():
        events.sort(key=_first)
        ts = topics.get(tk)
        config, config_at = (ts.config, ts.config_at) if ts is not None else (None, -1)
        known = tk not in deleted
        stamps: list[int] = []
        for key, ev in events:
            if known and isinstance(ev, TopicConfigReport):
                if ev.observed_at <= config_at:
                    continue  # older than the settings held: the model ignores it
                new = TopicConfig(
                    ev.replication_factor, ev.min_insync_replicas, ev.unclean_leader_election_enable
                )
                config_at = ev.observed_at
                if new == config:
                    continue
                config = new
            else:
                known = False  # deleted: everything after it the long way
            stamps.append(key[0])
        if stamps:
            out[tk] = stamps
    return out


def _first(item: tuple[Key, Any]) -> Key:
    return item[0]


#: An event's place: (time, kind rank, source, index in its record).
Key = tuple[int, int, Source, int]


def _spans(
    keyed: list[tuple[int, int, Source, int, int, ModelRecord]],
    records_of: dict[tuple[str, str, int], int],
) -> dict[tuple[str, str, int], list[tuple[Key, Key]]]:
    """The places (first event, last event) of the records of each partition that has
    more than one in the batch."""
    spans: dict[tuple[str, str, int], list[tuple[Key, Key]]] = {}
    for t, r, src, _, _, rec in keyed:
        if isinstance(rec, PartitionRound):
            m = rec.meta
            pk = (m.cluster, m.topic, m.partition)
            last = (m.observed_at, r, src, len(rec.samples))
        elif isinstance(rec, PartitionMeta | ReplicaReport):
            pk = (rec.cluster, rec.topic, rec.partition)
            last = (t, r, src, 0)
        else:
            continue
        if records_of[pk] > 1:
            spans.setdefault(pk, []).append(((t, r, src, 0), last))
    return spans


def _whole(
    r: PartitionRound,
    first: Key,
    spans: list[tuple[Key, Key]],
    broker_stamps: Sequence[int],
    topic_stamps: Sequence[int],
) -> bool:
    """Whether round ``r`` (its first event's key ``first``; ``spans``: its partition's
    records in the batch, its own among them, when it has several; the sorted stamps of
    its cluster's broker events and of its topic's changing events) can be applied whole
    (:func:`application_order`)."""
    t = first[0]
    for s in r.samples:  # stamps in round order, never going back
        if s.observed_at < t:
            return False
        t = s.observed_at
    if r.meta.observed_at < t:
        return False
    last: Key = (r.meta.observed_at, first[1], first[2], len(r.samples))
    if spans:
        for a, b in spans:  # another record of the partition sorting among its events
            if a != first and a <= last and b >= first:
                return False
    # A topic or broker event sorts between the round's first and last events when stamped
    # in (first, last] (at the first's stamp it sorts before: its kind ranks first).
    return not (
        _within(broker_stamps, first[0], last[0]) or _within(topic_stamps, first[0], last[0])
    )


def _within(stamps: Sequence[int], after: int, upto: int) -> bool:
    """Whether a sorted ``stamps`` holds one in ``(after, upto]``."""
    if not stamps or upto == after:
        return False
    i = bisect.bisect_right(stamps, after)
    return i < len(stamps) and stamps[i] <= upto
