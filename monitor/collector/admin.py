"""The Admin API reads of a collection round (kafka-python), tolerant of partial failure.

During elections and broker restarts — exactly when the monitor matters — some requests
fail. Every function here returns what it could read plus the errors it met, and never
raises for one partition's or one broker's trouble.
"""

from __future__ import annotations

import base64
import re
import sys
import uuid
from collections import defaultdict
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType, OffsetSpec
from kafka.errors import KafkaError, UnsupportedVersionError
from kafka.structs import TopicPartition


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    topic: str
    partition: int
    leader: int | None
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline: tuple[int, ...]
    elr: tuple[int, ...] | None
    topic_id: str | None = None


@dataclass
class Reads:
    partitions: list[PartitionMetadata] = field(default_factory=list)
    high_watermarks: dict[tuple[str, int], int] = field(default_factory=dict)
    #: (topic, partition) -> start offset of the current leader epoch, per its leader.
    epoch_starts: dict[tuple[str, int], int] = field(default_factory=dict)
    #: (topic, partition) -> (adding, removing) of running reassignments; None when the
    #: read failed this round (the events then say nothing about reassignments).
    reassignments: dict[tuple[str, int], tuple[list[int], list[int]]] | None = None
    #: The topics the cluster listed (after the collector's filters); None: the list
    #: could not be read.
    listed: set[str] | None = None
    #: The brokers the cluster metadata lists (registered, and unfenced under KRaft); None:
    #: the read failed.
    brokers: set[int] | None = None
    errors: list[tuple[str, str]] = field(default_factory=list)  # (source, message)

    def metadata_complete(self) -> bool:
        """Whether this round's metadata read succeeded for every listed topic: only then
        does a topic missing from it say the topic is gone."""
        return self.listed is not None and not any(src == "metadata" for src, _ in self.errors)


def _ints(values: Any) -> tuple[int, ...]:
    return tuple(int(v) for v in (values or ()))


def read_brokers(admin: KafkaAdminClient, reads: Reads) -> None:
    """Fill ``reads.brokers``: the brokers the cluster lists, without the fenced ones (KRaft
    lists a broker that stopped heartbeating as fenced; a stopped broker drops out within
    its session timeout)."""
    try:
        cluster = admin.describe_cluster()
    except KafkaError as e:
        reads.errors.append(("brokers", repr(e)))
        return
    reads.brokers = {
        int(b["broker_id"]) for b in cluster.get("brokers", []) if not b.get("is_fenced", False)
    }


def read_metadata(
    admin: KafkaAdminClient, exclude: re.Pattern[str], include_internal: bool, reads: Reads
) -> bool:
    """Fill ``reads.partitions``. Prefers DescribeTopicPartitions (Kafka 3.7+: carries the
    KIP-966 eligible leader replicas), falls back to Metadata. Returns whether ELR is known."""
    try:
        topics = [
            t["name"]
            for t in admin.describe_topics()
            if not exclude.search(t["name"]) and (include_internal or not t.get("is_internal"))
        ]
    except KafkaError as e:
        reads.errors.append(("metadata", repr(e)))
        return False
    reads.listed = set(topics)
    if not topics:
        return False
    try:
        cursor = None
        while True:
            page = admin.describe_topic_partitions(topics, cursor=cursor)
            for t in page["topics"]:
                if t["error_code"]:
                    reads.errors.append(("metadata", f"{t['name']}: error {t['error_code']}"))
                    continue
                tid = topic_id(t.get("topic_id"))
                for p in t["partitions"]:
                    reads.partitions.append(_from_dict(t["name"], p, with_elr=True, tid=tid))
            cursor = page.get("next_cursor")
            if not cursor:
                return True
    except UnsupportedVersionError:
        pass
    except KafkaError as e:
        reads.errors.append(("metadata", repr(e)))
        reads.partitions.clear()
    try:
        for t in admin.describe_topics(topics):
            tid = topic_id(t.get("topic_id"))
            for p in t.get("partitions", []):
                reads.partitions.append(_from_dict(t["name"], p, with_elr=False, tid=tid))
    except KafkaError as e:
        reads.errors.append(("metadata", repr(e)))
    return False


def topic_id(value: Any) -> str | None:
    """Kafka's topic id as Kafka prints it (base64url of the UUID's 16 bytes, no padding);
    None for none or the all-zero UUID (brokers too old to have topic ids).

    >>> topic_id(uuid.UUID("90ea93ea-4a95-4270-b898-0f3e714c53c1"))
    'kOqT6kqVQnC4mA8-cUxTwQ'
    """
    if isinstance(value, str) and value:
        try:
            value = uuid.UUID(value)
        except ValueError:
            return value if len(value) == 22 else None
    if not isinstance(value, uuid.UUID) or value.int == 0:
        return None
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode()


def _from_dict(
    topic: str, p: dict[str, Any], with_elr: bool, tid: str | None = None
) -> PartitionMetadata:
    leader = int(p["leader_id"])
    return PartitionMetadata(
        # Interned (a dict lookup per partition): the round's tables keyed by (topic,
        # partition) -- the metadata's, the HWs', the scrapes' (jmx.parse) -- then compare
        # their topics by identity, not by their text: most of a lookup's cost at 100k
        # partitions.
        topic=sys.intern(topic),
        partition=int(p["partition_index"]),
        leader=leader if leader >= 0 else None,
        leader_epoch=max(0, int(p.get("leader_epoch", 0) or 0)),
        replicas=_ints(p.get("replica_nodes")),
        isr=_ints(p.get("isr_nodes")),
        offline=_ints(p.get("offline_replicas")),
        elr=_ints(p.get("eligible_leader_replicas")) if with_elr else None,
        topic_id=tid,
    )


def read_high_watermarks(admin: KafkaAdminClient, reads: Reads) -> None:
    """HW of every led partition: ListOffsets LATEST (read_uncommitted), one request per leader.

    kafka-python's ``list_partition_offsets`` raises on the first partition error of a
    batch (e.g. OFFSET_NOT_AVAILABLE from a leader elected a moment ago, KIP-207); here each
    leader's batch is sent with the client's own request builder and partitions that error
    are simply left out of this round.
    """
    by_leader: dict[int, list[TopicPartition]] = defaultdict(list)
    for p in reads.partitions:
        if p.leader is not None:
            by_leader[p.leader].append(TopicPartition(p.topic, p.partition))

    # Private kafka-python helpers: the public call cannot skip one partition's error.
    requests = {
        leader: admin._list_partition_offsets_request({tp: OffsetSpec.LATEST for tp in tps}, 0)
        for leader, tps in by_leader.items()
    }
    for response in _send_per_leader(admin, requests, "offsets", reads):
        for topic in response.topics:
            name = sys.intern(topic.name)  # as the metadata's (_from_dict)
            for part in topic.partitions:
                if part.error_code == 0 and part.offset >= 0:
                    reads.high_watermarks[(name, part.partition_index)] = part.offset


def _send_per_leader(
    admin: KafkaAdminClient, requests: dict[int, Any], source: str, reads: Reads
) -> list[Any]:
    """Send one request per leader; the responses that came back (errors go to ``reads``)."""
    responses: list[Any] = []

    async def _send_all() -> None:
        # The client routes by its *own* broker list, refreshed only every
        # metadata.max.age.ms (5 min) or after a connection error -- not by the metadata
        # this collector reads. A broker that re-registered since that list was taken
        # (restarted while it was refreshed) is unknown to it: every request to it fails
        # with UnknownBrokerIdError, and found by the demo, the first 15 s of a restarted
        # broker's leadership had no HW and no epoch record. Refresh first.
        cluster = admin._manager.cluster
        if any(cluster.broker_metadata(leader) is None for leader in requests):
            try:
                await cluster.refresh_metadata()
            except KafkaError as e:
                reads.errors.append((source, f"metadata refresh: {e!r}"))
        for leader, request in requests.items():
            try:
                responses.append(await admin._manager.send(request, node_id=leader))
            except KafkaError as e:
                reads.errors.append((source, f"leader {leader}: {e!r}"))

    if requests:
        try:
            admin._manager.run(_send_all)
        except KafkaError as e:
            reads.errors.append((source, repr(e)))
    return responses


def read_reassignments(admin: KafkaAdminClient, reads: Reads, timeout_ms: int = 5000) -> None:
    """The running partition reassignments (KIP-455's ListPartitionReassignments, sent to
    the controller): fills ``reads.reassignments``; left None when the read fails."""
    try:
        running = admin.list_partition_reassignments(timeout_ms=timeout_ms)
    except KafkaError as e:
        reads.errors.append(("reassignments", repr(e)))
        return
    reads.reassignments = {
        (tp.topic, tp.partition): (list(r["adding_replicas"]), list(r["removing_replicas"]))
        for tp, r in running.items()
    }


def read_epoch_starts(
    admin: KafkaAdminClient, reads: Reads, wanted: Collection[tuple[str, int]]
) -> None:
    """Start offset of each wanted partition's current leader epoch, from its leader.

    OffsetsForLeaderEpoch for epoch E-1 answers the end offset of E-1 in the leader's
    leader-epoch cache, i.e. the offset at which epoch E began: the new leader's log end
    at its election. That is authoritative where a sampled LEO is not (a replica that
    restarted and truncated between its last sample and its election holds less than the
    sample says). Asked once per epoch (``wanted``), one request per leader.
    """
    from kafka.protocol.consumer import OffsetForLeaderEpochRequest

    topic_cls = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
    part_cls = topic_cls.OffsetForLeaderPartition
    by_leader: dict[int, dict[str, list[Any]]] = defaultdict(lambda: defaultdict(list))
    for p in reads.partitions:
        if p.leader is None or p.leader_epoch <= 0 or (p.topic, p.partition) not in wanted:
            continue
        by_leader[p.leader][p.topic].append(
            part_cls(
                partition=p.partition,
                current_leader_epoch=p.leader_epoch,
                leader_epoch=p.leader_epoch - 1,
            )
        )

    requests = {
        leader: OffsetForLeaderEpochRequest(replica_id=-1, topics=list(topics.items()))
        for leader, topics in by_leader.items()
    }
    for response in _send_per_leader(admin, requests, "epochs", reads):
        for topic in response.topics:
            for part in topic.partitions:
                if part.error_code == 0 and part.end_offset >= 0:
                    reads.epoch_starts[(topic.topic, part.partition)] = part.end_offset


@dataclass(frozen=True, slots=True)
class TopicDurability:
    min_insync_replicas: int
    unclean_leader_election_enable: bool


def read_topic_configs(
    admin: KafkaAdminClient, topics: list[str], reads: Reads
) -> dict[str, TopicDurability]:
    """``min.insync.replicas`` and ``unclean.leader.election.enable``, defaults resolved."""
    out: dict[str, TopicDurability] = {}
    keys = {"min.insync.replicas": None, "unclean.leader.election.enable": None}
    for i in range(0, len(topics), 500):
        resources = [
            ConfigResource(ConfigResourceType.TOPIC, t, configs=dict(keys))
            for t in topics[i : i + 500]
        ]
        try:
            result = admin.describe_configs(resources, config_filter="all")
        except KafkaError as e:
            reads.errors.append(("configs", repr(e)))
            continue
        for name, entries in result.get("topic", {}).items():
            try:
                out[name] = TopicDurability(
                    int(entries["min.insync.replicas"]["value"]),
                    str(entries["unclean.leader.election.enable"]["value"]).lower() == "true",
                )
            except (KeyError, TypeError, ValueError) as e:
                reads.errors.append(("configs", f"{name}: {e!r}"))
    return out
