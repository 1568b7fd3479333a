"""Thin, typed wrappers around kafka-python's admin client for the lab's needs.

kafka-python is untyped; everything it returns is converted here into small frozen
dataclasses, so callers (the CLI, the tests, other stages) get types mypy can check and
one place documents the kafka-python 3.x quirks:

* ``describe_topics`` is a MetadataRequest; the version kafka-python negotiates with a
  4.x broker carries ``leader_epoch`` per partition, so no raw protocol call is needed.
* ``describe_cluster`` asks for fenced brokers too and flags them ``is_fenced``; a broker
  that was just restarted is listed (fenced) before it can serve — filter on the flag.
* ELR / last-known-ELR are only in ``describe_topic_partitions`` (DescribeTopicPartitions,
  KIP-966), not in Metadata.
* ``elect_leaders(1, ...)`` (UNCLEAN) raises on per-partition errors but silently ignores
  ELECTION_NOT_NEEDED; the result is re-checked by describing the partition afterwards.
* Each broker answers Metadata from its own copy of the cluster's metadata, which a change
  (an election, an ISR change) reaches broker by broker: the client asks whichever it
  likes. ``describe_by_broker`` asks each broker named, for "every broker has seen it".
* A new client, just after a broker's restart, can be told to ask a broker its own
  metadata does not list yet (``UnknownBrokerIdError`` before anything is sent): the
  requests that go to the controller (create, delete, elect, reassign) retry that with
  a new client (``_retrying``).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import kafka.errors as Errors
from kafka import KafkaAdminClient, TopicPartition
from kafka.admin import OffsetSpec
from kafka.protocol.metadata import MetadataRequest

from monitor.dev.lab.errors import LabError

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PartitionState:
    """Leader, epoch and replica sets of one partition, as the cluster reports them."""

    topic: str
    partition: int
    leader: int  # -1 when offline
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline: tuple[int, ...]
    elr: tuple[int, ...] | None = None  # None: not asked for / not available
    last_known_elr: tuple[int, ...] | None = None


@contextlib.contextmanager
def admin_client(bootstrap_servers: str, timeout_s: float = 10.0) -> Iterator[Any]:
    """A KafkaAdminClient that is always closed (its network thread would linger)."""
    client = KafkaAdminClient(
        bootstrap_servers=bootstrap_servers,
        client_id="monitor-lab",
        request_timeout_ms=int(timeout_s * 1000),
        bootstrap_timeout_ms=int(timeout_s * 1000),
        reconnect_backoff_max_ms=1000,
    )
    try:
        yield client
    finally:
        client.close()


def unfenced_brokers(bootstrap_servers: str, timeout_s: float = 5.0) -> set[int]:
    """Ids of the brokers registered and unfenced in the cluster metadata."""
    with admin_client(bootstrap_servers, timeout_s) as admin:
        cluster = admin.describe_cluster()
    return {int(b["broker_id"]) for b in cluster["brokers"] if not b.get("is_fenced", False)}


def create_topic(
    bootstrap_servers: str,
    name: str,
    *,
    partitions: int = 1,
    replication_factor: int = 3,
    min_insync_replicas: int = 2,
    unclean_leader_election: bool = False,
    assignments: Mapping[int, list[int]] | None = None,
    extra_configs: Mapping[str, str] | None = None,
    timeout_s: float = 30.0,
) -> list[PartitionState]:
    """Create a topic and wait until every partition has a leader and a full ISR.

    ``assignments`` pins replicas (``{partition: [leader-first broker ids]}``) so a
    scenario knows in advance which broker leads and which follows.
    """
    configs = {
        "min.insync.replicas": str(min_insync_replicas),
        "unclean.leader.election.enable": "true" if unclean_leader_election else "false",
        **(extra_configs or {}),
    }
    spec: dict[str, Any] = {"configs": configs}
    if assignments:
        spec["assignments"] = {int(p): list(r) for p, r in assignments.items()}
    else:
        spec["num_partitions"] = partitions
        spec["replication_factor"] = replication_factor

    _retrying(
        bootstrap_servers,
        timeout_s,
        lambda admin: admin.create_topics({name: spec}, timeout_ms=int(timeout_s * 1000)),
        f"creating topic {name}",
        done_on_retry=Errors.TopicAlreadyExistsError,
    )
    expected = len(assignments) if assignments else partitions
    return wait_for_partitions(
        bootstrap_servers,
        name,
        lambda ps: (
            len(ps) == expected and all(p.leader >= 0 and set(p.isr) == set(p.replicas) for p in ps)
        ),
        timeout_s=timeout_s,
        what="all partitions led with a full ISR",
    )


def delete_topic(bootstrap_servers: str, name: str, timeout_s: float = 30.0) -> None:
    """Delete a topic and wait until the metadata no longer lists it."""

    _retrying(
        bootstrap_servers,
        timeout_s,
        lambda admin: admin.delete_topics([name], timeout_ms=int(timeout_s * 1000)),
        f"deleting topic {name}",
        done_on_retry=Errors.UnknownTopicOrPartitionError,
    )
    with admin_client(bootstrap_servers, timeout_s) as admin:
        deadline = time.monotonic() + timeout_s
        while name in admin.list_topics():
            if time.monotonic() > deadline:
                raise TimeoutError(f"topic {name} still listed {timeout_s:.0f}s after deletion")
            time.sleep(0.2)


def _tuple(values: Any) -> tuple[int, ...]:
    return tuple(int(v) for v in (values or ()))


def describe_topic(
    bootstrap_servers: str, topic: str, *, with_elr: bool = False, timeout_s: float = 10.0
) -> list[PartitionState]:
    """Partitions of ``topic`` sorted by id (empty list if the topic does not exist)."""
    with admin_client(bootstrap_servers, timeout_s) as admin:
        topics = admin.describe_topics([topic])
        elr: dict[int, tuple[tuple[int, ...], tuple[int, ...]]] = {}
        described: dict[str, Any] = {"topics": []}
        if with_elr:
            # (before 3.7, or in ZooKeeper mode: no ELR to tell, elr stays None)
            with contextlib.suppress(Errors.UnsupportedVersionError):
                described = admin.describe_topic_partitions([topic])
            for entry in described["topics"]:
                for p in entry["partitions"]:
                    elr[int(p["partition_index"])] = (
                        _tuple(p.get("eligible_leader_replicas")),
                        _tuple(p.get("last_known_elr")),
                    )
    return _partition_states(topic, topics, elr)


def _partition_states(
    topic: str,
    entries: list[dict[str, Any]],
    elr: dict[int, tuple[tuple[int, ...], tuple[int, ...]]] | None = None,
) -> list[PartitionState]:
    """``topic``'s partitions in the topics of a Metadata answer (``describe_topics``, or one
    broker's own: :func:`describe_by_broker`), sorted by id; ``elr``: partition -> (ELR,
    last known ELR), where the answer had them."""
    out: list[PartitionState] = []
    for entry in entries:
        if entry.get("name") != topic or entry.get("error_code", 0) not in (0, None):
            continue
        for p in entry["partitions"]:
            index = int(p["partition_index"])
            e = elr.get(index) if elr else None
            out.append(
                PartitionState(
                    topic=topic,
                    partition=index,
                    leader=int(p["leader_id"]),
                    leader_epoch=int(p.get("leader_epoch", -1)),
                    replicas=_tuple(p["replica_nodes"]),
                    isr=_tuple(p["isr_nodes"]),
                    offline=_tuple(p.get("offline_replicas")),
                    elr=e[0] if e else None,
                    last_known_elr=e[1] if e else None,
                )
            )
    return sorted(out, key=lambda s: s.partition)


def wait_for_partitions(
    bootstrap_servers: str,
    topic: str,
    predicate: Any,
    *,
    timeout_s: float,
    what: str,
    with_elr: bool = False,
    poll_s: float = 0.25,
) -> list[PartitionState]:
    """Poll ``describe_topic`` until ``predicate(states)`` holds; LabError on timeout."""
    return _poll(
        lambda: describe_topic(bootstrap_servers, topic, with_elr=with_elr),
        predicate,
        timeout_s=timeout_s,
        what=f"{topic}: {what}",
        poll_s=poll_s,
    )


_R = TypeVar("_R")


def _poll(
    read: Callable[[], _R],
    predicate: Callable[[_R], bool],
    *,
    timeout_s: float,
    what: str,
    poll_s: float,
) -> _R:
    """``read()`` every ``poll_s`` until ``predicate`` holds of what it read, and that; a read
    that fails is transient (a leader moving, a broker restarting) but a LabError; LabError
    once ``timeout_s`` have passed, with the last read."""
    deadline = time.monotonic() + timeout_s
    last: _R | None = None
    while True:
        try:
            last = read()
            if predicate(last):
                return last
        except LabError:
            raise
        except Exception as exc:
            _log.debug("waiting for %s: %s", what, exc)
        if time.monotonic() >= deadline:
            raise LabError(f"timed out after {timeout_s:.0f}s waiting for {what}; last {last}")
        time.sleep(poll_s)


def describe_by_broker(
    bootstrap_servers: str, topic: str, brokers: list[int], timeout_s: float = 10.0
) -> dict[int, list[PartitionState]]:
    """``topic``'s partitions as each broker's own metadata has them (a broker that does not
    answer is left out; no ELR: Metadata does not carry it)."""
    out: dict[int, list[PartitionState]] = {}
    with admin_client(bootstrap_servers, timeout_s) as admin:

        async def ask() -> None:
            for broker in brokers:
                request = MetadataRequest(
                    topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                    allow_auto_topic_creation=False,
                )
                try:
                    answer = (await admin._manager.send(request, node_id=broker)).to_dict()
                except Errors.KafkaError as exc:
                    _log.debug("metadata of broker %s: %s", broker, exc)
                    continue
                out[broker] = _partition_states(topic, answer["topics"])

        admin._manager.run(ask)
    return out


def wait_for_every_broker(
    bootstrap_servers: str,
    topic: str,
    brokers: list[int],
    predicate: Callable[[list[PartitionState]], bool],
    *,
    timeout_s: float,
    what: str,
    poll_s: float = 0.25,
) -> None:
    """:func:`wait_for_partitions`, until ``predicate`` holds for the partitions as each of
    ``brokers`` has them in its own metadata (:func:`describe_by_broker`): a client's next
    request may go to any of them."""

    def every_broker(views: dict[int, list[PartitionState]]) -> bool:
        return len(views) == len(brokers) and all(map(predicate, views.values()))

    _poll(
        lambda: describe_by_broker(bootstrap_servers, topic, brokers),
        every_broker,
        timeout_s=timeout_s,
        what=f"{topic}, every broker's metadata: {what}",
        poll_s=poll_s,
    )


def elect_leader(
    bootstrap_servers: str,
    topic: str | None,
    partition: int | None,
    *,
    unclean: bool,
    timeout_s: float = 30.0,
) -> None:
    """ElectLeaders (KIP-460): UNCLEAN elects any live replica when no ISR/ELR member can
    lead; PREFERRED moves leadership back to the first replica. ``partition=None`` means
    every partition of the topic, ``topic=None`` every partition of the cluster.

    A preferred leader that has just rejoined the ISR may not be electable yet (the
    controller answers PREFERRED_LEADER_NOT_AVAILABLE until it has unfenced the broker):
    that answer is retried until ``timeout_s``, as is any retriable error, with a new
    client -- found by CI on a ZooKeeper lab: the controller is a broker there, and after a
    broker restart the request went to a connection that was gone (ECONNREFUSED). An
    unknown broker id is retried too: on a 3.9 KRaft lab, just after broker 2's restart, the
    new client's metadata named 2 (as the node to ask) before it listed 2's address."""
    election_type = 1 if unclean else 0
    targets: dict[str, list[int]] | list[str] | None
    if topic is None:
        targets = None
    elif partition is None:
        targets = [topic]
    else:
        targets = {topic: [partition]}
    kind = "unclean" if unclean else "preferred"
    _retrying(
        bootstrap_servers,
        timeout_s,
        lambda admin: admin.elect_leaders(election_type, targets, timeout_ms=int(timeout_s * 1000)),
        f"{kind} election for {topic}-{partition}",
    )


def _retrying(
    bootstrap_servers: str,
    timeout_s: float,
    call: Callable[[Any], object],
    what: str,
    done_on_retry: type[Exception] | None = None,
) -> None:
    """Run ``call(admin)`` with a new admin client until it succeeds, retrying a retriable
    error or an unknown broker id until ``timeout_s``; :class:`LabError` naming ``what``
    otherwise. ``done_on_retry``: the error that, on a retry, says an earlier attempt's
    request reached the controller before its client failed (the topic exists already,
    is gone already) -- done.

    Just after a broker's restart a new client can be told to ask a broker (the
    controller, in KRaft a random live broker) whose address its own metadata does not
    list yet: kafka-python raises UnknownBrokerIdError before sending anything. Found by
    CI on 3.9 KRaft labs, for an election and for a topic created just after the lab was
    healed."""
    deadline = time.monotonic() + timeout_s
    attempt = 0
    while True:
        try:
            with admin_client(bootstrap_servers, timeout_s) as admin:
                call(admin)
            return
        except Exception as exc:
            if attempt > 0 and done_on_retry is not None and isinstance(exc, done_on_retry):
                return
            retry = isinstance(exc, Errors.KafkaError) and (
                exc.retriable or isinstance(exc, Errors.UnknownBrokerIdError)
            )
            if not retry or time.monotonic() >= deadline:
                raise LabError(f"{what} failed: {exc!r}") from exc
            _log.info("%s: %r, retrying", what, exc)
            attempt += 1
            time.sleep(1)


def reassign(
    bootstrap_servers: str,
    topic: str,
    targets: Mapping[int, list[int]],
    *,
    throttle_bytes_per_s: int | None = None,
    timeout_s: float = 30.0,
) -> None:
    """Start a reassignment (KIP-455's AlterPartitionReassignments, as
    ``kafka-reassign-partitions.sh --execute``): ``targets`` is ``{partition: replicas}``.
    With ``throttle_bytes_per_s`` the copy is throttled as the tool's ``--throttle`` does:
    every broker's leader/follower replication rate, every replica of the topic throttled
    (:func:`unthrottle` removes it)."""
    if throttle_bytes_per_s is not None:
        _throttle(bootstrap_servers, topic, str(throttle_bytes_per_s), "*", timeout_s)
    refused: dict[Any, Any] = {}

    def alter(admin: Any) -> None:  # the same targets again: idempotent
        answers = admin.alter_partition_reassignments(
            {TopicPartition(topic, p): r for p, r in targets.items()},
            timeout_ms=int(timeout_s * 1000),
        )
        refused.clear()
        refused.update({tp: err for tp, err in answers.items() if err is not None})

    _retrying(bootstrap_servers, timeout_s, alter, f"reassigning {topic}")
    if refused:
        raise LabError(f"reassignment of {topic} refused: {refused}")


def throttle(bootstrap_servers: str, topic: str, bytes_per_s: int, timeout_s: float = 30.0) -> None:
    """Throttle the replication of every replica of ``topic`` to ``bytes_per_s`` on every
    broker (as :func:`reassign`'s throttle; :func:`unthrottle` removes it): a follower
    copying a log again copies it slowly."""
    _throttle(bootstrap_servers, topic, str(bytes_per_s), "*", timeout_s)


def unthrottle(bootstrap_servers: str, topic: str, timeout_s: float = 30.0) -> None:
    """Remove what :func:`reassign` set for its throttle."""
    _throttle(bootstrap_servers, topic, None, None, timeout_s)


def _throttle(
    bootstrap_servers: str, topic: str, rate: str | None, replicas: str | None, timeout_s: float
) -> None:
    from kafka.admin import ConfigResource, ConfigResourceType

    brokers = sorted(unfenced_brokers(bootstrap_servers, timeout_s))
    rates = {"leader.replication.throttled.rate": rate, "follower.replication.throttled.rate": rate}
    which = {
        "leader.replication.throttled.replicas": replicas,
        "follower.replication.throttled.replicas": replicas,
    }
    resources = [ConfigResource(ConfigResourceType.BROKER, str(b), rates) for b in brokers]
    resources.append(ConfigResource(ConfigResourceType.TOPIC, topic, which))
    with admin_client(bootstrap_servers, timeout_s) as admin:
        # IncrementalAlterConfigs (kafka-python picks it): the topic's other settings stay.
        if rate is None:
            admin.reset_configs(resources, raise_on_unknown=False)
        else:
            admin.alter_configs(resources, raise_on_unknown=False)


def reassignments(
    bootstrap_servers: str, timeout_s: float = 10.0
) -> dict[tuple[str, int], tuple[list[int], list[int]]]:
    """The running reassignments, as the collector reads them: ``{(topic, partition):
    (adding, removing)}``."""
    from monitor.collector.admin import Reads, read_reassignments

    reads = Reads()
    with admin_client(bootstrap_servers, timeout_s) as admin:
        read_reassignments(admin, reads, timeout_ms=int(timeout_s * 1000))
    if reads.reassignments is None:
        raise LabError(f"could not list reassignments: {reads.errors}")
    return reads.reassignments


_RETRIABLE_OFFSET_ERRORS = (
    Errors.OffsetNotAvailableError,  # new leader has not established its HW yet (KIP-207)
    Errors.LeaderNotAvailableError,
    Errors.NotLeaderForPartitionError,
    Errors.UnknownTopicOrPartitionError,
)


def end_offsets(bootstrap_servers: str, topic: str, timeout_s: float = 20.0) -> dict[int, int]:
    """High watermark per partition (ListOffsets LATEST, read_uncommitted), from the leaders.

    Right after a leader change the new leader answers OFFSET_NOT_AVAILABLE until its high
    watermark is known again; such errors are retried until ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        states = describe_topic(bootstrap_servers, topic)
        specs = {TopicPartition(topic, s.partition): OffsetSpec.LATEST for s in states}
        try:
            with admin_client(bootstrap_servers, timeout_s) as admin:
                result = admin.list_partition_offsets(specs, timeout_ms=int(timeout_s * 1000))
            return {tp.partition: int(o.offset) for tp, o in result.items()}
        except _RETRIABLE_OFFSET_ERRORS as exc:
            if time.monotonic() >= deadline:
                raise LabError(f"end offsets of {topic} unavailable: {exc!r}") from exc
            time.sleep(0.3)
