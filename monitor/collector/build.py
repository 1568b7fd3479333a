"""Turning one round's raw reads into contract events (pure: no I/O, times passed in).

Each event is validated as it is built. Given a ``dropped`` counter, a builder leaves an
event that breaks the contract out -- that event only: the round's others go on -- and
counts it by (kind, the field it broke), never by the value (:func:`checked`). Without one
it raises pydantic's ``ValidationError``, as the contract's models do.

The per-partition events (``partition``, ``replica``, and the samples of a round record)
are the hot path of a round -- one per partition and one per replica -- and pydantic's
validation was most of its cost. They are checked here by plain comparisons that hold
exactly where the contract holds (:class:`_Checks`: an int of the field's range, a topic
name of Kafka's characters, ...) and built without pydantic (:func:`_made`: what
``model_construct`` does, without its per-field loop); a value that fails a check goes
through pydantic as before, which keeps it (the checks are stricter than the contract)
or leaves the event out and counts it by the field pydantic names. ``validate=True``
builds every event with pydantic (the reference the tests compare with).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from monitor.collector.admin import PartitionMetadata, TopicDurability
from monitor.collector.jmx import BrokerScrape
from monitor.contract.events import (
    INT32_MAX,
    INT64_MAX,
    INVARIANT_ERROR,
    TOPIC_ID_LENGTH,
    TOPIC_ID_PATTERN,
    TOPIC_MAX_LENGTH,
    TOPIC_PATTERN,
    AnyEvent,
    BrokerEvent,
    PartitionEvent,
    ReplicaEvent,
    ReplicaSample,
    TopicConfigEvent,
    TopicDeletedEvent,
    partition_key,
)
from monitor.contract.invariants import partition_problem
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
        if errors and errors[0]["type"] == INVARIANT_ERROR:  # "isr: broker 1 is listed twice"
            where = (errors[0]["msg"].split(":", 1)[0],)
        dropped[kind, str(where[0]) if where else "event"] += 1
        return None


def kept(
    kind: str, make: Callable[[_T], _E], items: Iterable[_T], dropped: Dropped | None
) -> list[_E]:
    """``make(item)`` for each item, those that break the contract left out (and counted)."""
    built = (checked(kind, partial(make, item), dropped) for item in items)
    return [ev for ev in built if ev is not None]


#: (topic, partition): a partition's key, in the reads and in the scrapes.
Key = tuple[str, int]
#: A round's replica samples by partition, in broker order (:func:`sort_samples`).
Samples = dict[Key, list[ReplicaSample]]
#: A replica's readings on its broker's page: key, log end, log start, lag (None: not read).
Row = tuple[Key, int | None, int | None, int | None]

_new = object.__new__
# The four slots pydantic's BaseModel declares, set through their own descriptors: a call
# of object.__setattr__ first looks the name up along the model's classes. 0.69 -> 0.51 µs
# a ReplicaSample made (timeit, one process); the instance is the same (tests/collector/
# test_round_records.py: ==, the bytes, the fields set).
_set_dict = BaseModel.__dict__["__dict__"].__set__
_set_fields = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__
#: The fields a builder gives, as pydantic records them (``model_fields_set``).
_REPLICA_SET = {
    "schema_version", "kind", "cluster", "observed_at", "topic", "partition", "broker",
    "log_end_offset", "log_start_offset", "fetch_lag",
}  # fmt: skip
_SAMPLE_SET = {"broker", "log_end_offset", "log_start_offset", "fetch_lag", "observed_at"}
_PARTITION_SET = {
    "schema_version", "kind", "cluster", "observed_at", "topic", "topic_id", "partition",
    "leader", "leader_epoch", "replicas", "isr", "offline_replicas",
    "eligible_leader_replicas", "high_watermark", "epoch_start_offset", "adding_replicas",
    "removing_replicas",
}  # fmt: skip
_ROUND_SET = {*_PARTITION_SET, "replica_samples"}


def _made(cls: type[_E], fields_set: set[str], values: dict[str, Any]) -> _E:
    """An instance of ``cls`` holding ``values`` -- every field, in the model's order, each
    already checked -- as pydantic's validation would leave it (``model_construct`` without
    its loop over the fields). ``fields_set`` is shared: these models are frozen."""
    ev = _new(cls)
    _set_dict(ev, values)
    _set_fields(ev, fields_set)
    _set_extra(ev, None)
    _set_private(ev, None)
    return ev


def _whole(pattern: str, low: int, high: int) -> re.Pattern[str]:
    """The contract's ``^...+$`` pattern with its length bounds, for ``fullmatch`` (no
    ``$``: Python's would let a trailing newline through, pydantic's does not)."""
    body = pattern.removeprefix("^").removesuffix("$").removesuffix("+")
    return re.compile(f"{body}{{{low},{high}}}")


_TOPIC = _whole(TOPIC_PATTERN, 1, TOPIC_MAX_LENGTH)
_TOPIC_ID = _whole(TOPIC_ID_PATTERN, TOPIC_ID_LENGTH, TOPIC_ID_LENGTH)


class _Checks:
    """The contract's constraints on the values of one builder call, as plain comparisons
    (each true only where pydantic's strict validation would accept the value), and the
    answers for the texts that repeat (topics, topic ids). Types are compared exactly: a
    bool is no int here, as for pydantic strict (and ``True == 1``: no dict may answer for
    a value by another's that equals it)."""

    def __init__(self, cluster: object, observed_at: object) -> None:
        #: The fields every event of the call shares.
        self.common = (
            type(cluster) is str
            and 1 <= len(cluster) <= 256
            and type(observed_at) is int
            and 0 <= observed_at <= INT64_MAX
        )
        #: Each topic's answer (:meth:`topic`).
        self.topics_ok: dict[str, bool] = {}
        self._ids: dict[str, bool] = {}

    def topic(self, topic: object) -> bool:
        if type(topic) is not str:
            return False
        ok = self.topics_ok.get(topic)
        if ok is None:
            ok = self.topics_ok[topic] = bool(_TOPIC.fullmatch(topic))
        return ok

    def topic_id(self, topic_id: object) -> bool:
        if topic_id is None:
            return True
        if type(topic_id) is not str:
            return False
        ok = self._ids.get(topic_id)
        if ok is None:
            ok = self._ids[topic_id] = bool(_TOPIC_ID.fullmatch(topic_id))
        return ok


def _brokers(*lists: Iterable[object] | None) -> bool:
    """Lists of broker ids (None passes: the optional ones), of the contract's length."""
    for ids in lists:
        if ids is None:
            continue
        n = 0
        for b in ids:
            if type(b) is not int or b < 0 or b > INT32_MAX:
                return False
            n += 1
        if n > 1024:
            return False
    return True


def _id(v: object) -> bool:
    """An int32 of the contract (partition, broker, leader epoch)."""
    return type(v) is int and 0 <= v <= INT32_MAX


def partition_events(
    cluster: str,
    observed_at: int,
    partitions: list[PartitionMetadata],
    high_watermarks: Mapping[tuple[str, int], int],
    epoch_starts: Mapping[tuple[str, int], int] | None = None,
    reassignments: Mapping[tuple[str, int], tuple[list[int], list[int]]] | None = None,
    dropped: Dropped | None = None,
    validate: bool = False,
) -> list[PartitionEvent]:
    """``reassignments``: adding / removing replicas for the partitions that carry them
    (the running reassignments, and ``([], [])`` once for one that ended); the others'
    events leave the fields out (the model keeps what it knew)."""
    records = round_records(
        cluster, observed_at, partitions, high_watermarks, epoch_starts, reassignments,
        None, dropped, validate,
    )  # fmt: skip
    return [ev for ev in records if isinstance(ev, PartitionEvent)]


def round_records(
    cluster: str,
    observed_at: int,
    partitions: list[PartitionMetadata],
    high_watermarks: Mapping[Key, int],
    epoch_starts: Mapping[Key, int] | None = None,
    reassignments: Mapping[Key, tuple[list[int], list[int]]] | None = None,
    samples: Samples | None = None,
    dropped: Dropped | None = None,
    validate: bool = False,
) -> list[PartitionEvent | ReplicaEvent]:
    """One ``partition`` event per partition, carrying the round's samples of its replicas
    (``samples``, taken out of it: a round record), else the metadata alone.

    A partition event that breaks the contract is left out alone (counted): its samples
    are then sent as the ``replica`` events they mean, after the partition events."""
    moving = reassignments or {}
    hw_of, start_of = high_watermarks.get, (epoch_starts or {}).get
    take = (samples if samples is not None else {}).pop
    check = _Checks(cluster, observed_at)
    fast = check.common and not validate
    topic_ok, id_ok, known = check.topic, check.topic_id, check.topics_ok.get
    out: list[PartitionEvent | ReplicaEvent] = []
    orphans: list[ReplicaEvent] = []
    top = INT32_MAX
    for p in partitions:
        topic, partition, leader, epoch = p.topic, p.partition, p.leader, p.leader_epoch
        replicas, isr, offline, elr = p.replicas, p.isr, p.offline, p.elr
        key = (topic, partition)
        mine = take(key, None) or None  # a partition listed twice: the first takes them
        hw, start = hw_of(key), start_of(key)
        adding, removing = moving[key] if key in moving else (None, None)  # noqa: SIM401
        ok = (
            fast
            and ((type(topic) is str and known(topic)) or topic_ok(topic))
            and (p.topic_id is None or id_ok(p.topic_id))
            and type(partition) is int
            and 0 <= partition <= top
            and (leader is None or (type(leader) is int and 0 <= leader <= top))
            and type(epoch) is int
            and 0 <= epoch <= top
            and (hw is None or (type(hw) is int and 0 <= hw <= INT64_MAX))
            and (start is None or (type(start) is int and 0 <= start <= INT64_MAX))
            and (mine is None or len(mine) <= 1024)
            and (adding is None or _brokers(adding, removing))
            and len(replicas) <= 1024
            and len(isr) <= 1024
            and len(offline) <= 1024
        )
        if ok:  # the lists of broker ids, inline: the common case, a few ids each
            for b in replicas:
                if type(b) is not int or b < 0 or b > top:
                    ok = False
            for b in isr:
                if type(b) is not int or b < 0 or b > top:
                    ok = False
            for b in offline:
                if type(b) is not int or b < 0 or b > top:
                    ok = False
            if elr is not None:
                ok = ok and _brokers(elr)
            # Kafka's invariants of the fields together: a record breaking one takes the
            # validated way below, which drops it counted by the field.
            ok = ok and partition_problem(leader, replicas, isr, elr) is None
        if ok:
            ev = _new(PartitionEvent)
            _set_dict(
                ev,
                {
                    "schema_version": 1,
                    "cluster": cluster,
                    "observed_at": observed_at,
                    "kind": "partition",
                    "topic": topic,
                    "topic_id": p.topic_id,
                    "partition": partition,
                    "leader": leader,
                    "leader_epoch": epoch,
                    "replicas": list(p.replicas),
                    "isr": list(p.isr),
                    "offline_replicas": list(p.offline),
                    "eligible_leader_replicas": None if elr is None else list(elr),
                    "high_watermark": hw,
                    "log_start_offset": None,
                    "epoch_start_offset": start,
                    "adding_replicas": None if adding is None else list(adding),
                    "removing_replicas": None if removing is None else list(removing),
                    "replica_samples": mine,
                },
            )
            _set_fields(ev, _PARTITION_SET if mine is None else _ROUND_SET)
            _set_extra(ev, None)
            _set_private(ev, None)
            out.append(ev)
            continue
        make = partial(
            PartitionEvent,
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
            high_watermark=hw,
            epoch_start_offset=start,
            adding_replicas=adding,
            removing_replicas=removing,
        )
        if mine is not None and len(mine) <= 1024:
            made = checked("partition", partial(make, replica_samples=mine), dropped)
        else:
            made = checked("partition", make, dropped)
        if made is not None:
            out.append(made)
        if mine is not None and (made is None or made.replica_samples is None):
            orphans.extend(_orphans(cluster, observed_at, p.topic, p.partition, mine, dropped))
    out.extend(orphans)
    return out


def _orphans(
    cluster: str,
    observed_at: int,
    topic: str,
    partition: int,
    samples: list[ReplicaSample],
    dropped: Dropped | None,
) -> list[ReplicaEvent]:
    """The ``replica`` events a partition's samples mean, when no round record carries them
    (each at its sample's time, else the record's: ``observed_at``)."""

    def one(s: ReplicaSample) -> ReplicaEvent:
        return ReplicaEvent(
            schema_version=1,
            kind="replica",
            cluster=cluster,
            observed_at=s.observed_at if s.observed_at is not None else observed_at,
            topic=topic,
            partition=partition,
            broker=s.broker,
            log_end_offset=s.log_end_offset,
            log_start_offset=s.log_start_offset,
            fetch_lag=s.fetch_lag,
        )

    return kept("replica", one, samples, dropped)


def replica_events(
    cluster: str,
    broker: int,
    observed_at: int,
    scrape: BrokerScrape,
    keep: set[str] | None,
    dropped: Dropped | None = None,
    exclude: re.Pattern[str] | None = None,
    validate: bool = False,
) -> list[ReplicaEvent]:
    """One event per replica the broker holds (``keep``: only these topics, if given;
    ``exclude``: not those whose name it matches -- after the contract's check, which counts
    an event that breaks it whatever its topic)."""
    return _replica_events(
        cluster, broker, observed_at, scrape.readings(), keep, dropped, exclude,
        validate,
    )  # fmt: skip


def round_keys(
    partitions: Iterable[PartitionMetadata], keep: set[str] | None, exclude: re.Pattern[str]
) -> Samples:
    """The partitions whose samples a round's records carry (:func:`sort_samples`): those
    of the metadata whose topic the filters let through, each with no sample yet."""
    passes: dict[str, bool] = {}
    rounds: Samples = {}
    for p in partitions:
        ok = passes.get(p.topic)
        if ok is None:
            ok = passes[p.topic] = (keep is None or p.topic in keep) and not exclude.search(p.topic)
        if ok:
            rounds[(p.topic, p.partition)] = []
    return rounds


def sort_samples(
    cluster: str,
    broker: int,
    observed_at: int,
    scrape: BrokerScrape,
    keep: set[str] | None,
    rounds: Samples,
    dropped: Dropped | None = None,
    exclude: re.Pattern[str] | None = None,
    validate: bool = False,
) -> list[ReplicaEvent]:
    """A broker's readings of the round: the sample of each replica of a partition in
    ``rounds`` (:func:`round_keys`) appended to its list there, for its round record
    (:func:`round_records`); a ``replica`` event for each other replica (returned, with the
    filters of :func:`replica_events`). A sample that breaks the contract is left out and
    counted as its ``replica`` event would be."""
    good = not validate and _id(broker) and type(observed_at) is int
    good = good and 0 <= observed_at <= INT64_MAX
    trusted = good and scrape.checked  # parse's readings: in the contract's range
    rest: list[Row] = []
    bucket_of = rounds.get
    new, sample_type, fields_set, top = _new, ReplicaSample, _SAMPLE_SET, INT64_MAX
    set_dict, set_fields, set_extra, set_private = _set_dict, _set_fields, _set_extra, _set_private
    for item in scrape.readings():
        key, leo, ls, lag = item
        if leo is None:
            continue
        bucket = bucket_of(key)
        if bucket is None:
            rest.append(item)
        elif trusted or (
            good
            and type(key[1]) is int  # not only equal to one (True == 1): the record's partition
            and type(leo) is int
            and 0 <= leo <= top
            and (ls is None or (type(ls) is int and 0 <= ls <= top))
            and (lag is None or (type(lag) is int and 0 <= lag <= top))
        ):
            sample = new(sample_type)
            set_dict(
                sample,
                {
                    "broker": broker,
                    "log_end_offset": leo,
                    "log_start_offset": ls,
                    "high_watermark": None,
                    "fetch_lag": lag,
                    "observed_at": observed_at,
                },
            )
            set_fields(sample, fields_set)
            set_extra(sample, None)
            set_private(sample, None)
            bucket.append(sample)
        else:  # checked as its replica event is (the same fields, the same first one named)
            ev = checked(
                "replica",
                partial(_replica, cluster, observed_at, key, broker, leo, ls, lag),
                dropped,
            )
            if ev is not None:
                bucket.append(
                    ReplicaSample(
                        broker=ev.broker,
                        log_end_offset=ev.log_end_offset,
                        log_start_offset=ev.log_start_offset,
                        fetch_lag=ev.fetch_lag,
                        observed_at=ev.observed_at,
                    )
                )
    return _replica_events(cluster, broker, observed_at, rest, keep, dropped, exclude, validate)


def _replica(
    cluster: str,
    observed_at: int,
    key: Key,
    broker: int,
    leo: int,
    ls: int | None,
    lag: int | None,
) -> ReplicaEvent:
    """A replica event, validated."""
    return ReplicaEvent(
        schema_version=1,
        kind="replica",
        cluster=cluster,
        observed_at=observed_at,
        topic=key[0],
        partition=key[1],
        broker=broker,
        log_end_offset=leo,
        log_start_offset=ls,
        fetch_lag=lag,
    )


def _replica_events(
    cluster: str,
    broker: int,
    observed_at: int,
    items: Iterable[Row],
    keep: set[str] | None,
    dropped: Dropped | None,
    exclude: re.Pattern[str] | None,
    validate: bool,
) -> list[ReplicaEvent]:
    check = _Checks(cluster, observed_at)
    good = check.common and _id(broker) and not validate
    excluded: dict[str, bool] = {}
    events: list[ReplicaEvent] = []
    for key, leo, ls, lag in items:
        topic, partition = key
        if leo is None or (keep is not None and topic not in keep):
            continue
        out = excluded.get(topic)
        if out is None:
            out = excluded[topic] = exclude is not None and exclude.search(topic) is not None
        if (
            good
            and check.topic(topic)
            and type(partition) is int
            and 0 <= partition <= INT32_MAX
            and type(leo) is int
            and 0 <= leo <= INT64_MAX
            and (ls is None or (type(ls) is int and 0 <= ls <= INT64_MAX))
            and (lag is None or (type(lag) is int and 0 <= lag <= INT64_MAX))
        ):
            if not out:
                events.append(
                    _made(
                        ReplicaEvent,
                        _REPLICA_SET,
                        {
                            "schema_version": 1,
                            "cluster": cluster,
                            "observed_at": observed_at,
                            "kind": "replica",
                            "topic": topic,
                            "partition": partition,
                            "broker": broker,
                            "log_end_offset": leo,
                            "log_start_offset": ls,
                            "high_watermark": None,
                            "fetch_lag": lag,
                        },
                    )
                )
            continue
        ev = checked(
            "replica", partial(_replica, cluster, observed_at, key, broker, leo, ls, lag), dropped
        )
        if ev is not None and not out:
            events.append(ev)
    return events


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
    moves = moving or {}
    for p in partitions:  # every partition of a round: the few moving ones looked at closer
        if p.topic not in configs:
            continue
        key = (p.topic, p.partition)
        adding = moves[key][0] if moves and key in moves else None
        count = len(original_replicas(p.replicas, adding) if adding else p.replicas)
        if count > rf.get(p.topic, 0):
            rf[p.topic] = count
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
    """Kafka record key: one partition's (or broker's) events share a key, hence an order.
    A partition's is :func:`monitor.contract.events.partition_key`, which the Spark job
    routes by without parsing the record."""
    if isinstance(ev, BrokerEvent):
        return f"{ev.cluster}/broker/{ev.broker}".encode()
    if isinstance(ev, TopicConfigEvent | TopicDeletedEvent):
        return f"{ev.cluster}/{ev.topic}".encode()
    return partition_key(ev.cluster, ev.topic, ev.partition).encode()
