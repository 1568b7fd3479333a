"""The monitor's own topics: what each is for, who writes and reads it, and the settings it
needs (docs/deploy.md, "Topics to create") -- declared once, here, for ``--check`` to hold a
cluster's topics against and ``--create-topics`` (and ``monitor run``) to create them with.

Pure data and pure judgements: :func:`problems` takes a topic as a cluster described it,
:func:`create_command` renders the ``kafka-topics.sh`` line that makes one. No Kafka client.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

DAY_MS = 86_400_000


class Role(StrEnum):
    """Which of the three topics (each name is a setting: ``events_topic``, ...)."""

    EVENTS = "events"
    FINDINGS = "findings"
    DEADLETTER = "deadletter"


@dataclass(frozen=True)
class TopicSpec:
    """One of the monitor's topics, as it should be created."""

    role: Role
    #: Partitions to create it with (the events topic: at least the job's cores; it is
    #: fixed at creation, since adding partitions later moves keys).
    partitions: int
    retention_ms: int
    #: Who writes it and who reads it, for the lines naming a missing permission.
    writers: str
    readers: str
    #: Settings every one of them must have: ``delete`` (compaction would keep one record
    #: a key and destroy the history the job replays), no unclean elections (the monitor's
    #: own data must not be lost to the failure it reports).
    required: Mapping[str, str] = field(
        default_factory=lambda: {
            "cleanup.policy": "delete",
            "unclean.leader.election.enable": "false",
        }
    )

    def configs(self, replication_factor: int) -> dict[str, str]:
        """The topic's settings at creation, for a cluster of ``replication_factor``."""
        return {
            **self.required,
            "min.insync.replicas": str(min_isr(replication_factor)),
            "retention.ms": str(self.retention_ms),
        }


#: The three topics, by role: partitions and retentions are the documented examples
#: (docs/deploy.md: 24 h of events, 30 days of findings, 14 days of dead letters).
SPECS: dict[Role, TopicSpec] = {
    Role.EVENTS: TopicSpec(Role.EVENTS, 12, DAY_MS, "the collector", "the job"),
    Role.FINDINGS: TopicSpec(Role.FINDINGS, 1, 30 * DAY_MS, "the job", "your consumers"),
    Role.DEADLETTER: TopicSpec(Role.DEADLETTER, 1, 14 * DAY_MS, "the job", "people investigating"),
}


def replication_factor(brokers: int) -> int:
    """The replication factor to create the topics with on a cluster of ``brokers``: 3,
    or all the brokers of a smaller one.

    >>> replication_factor(1), replication_factor(3), replication_factor(6)
    (1, 3, 3)
    """
    return max(1, min(3, brokers))


def min_isr(rf: int) -> int:
    """``min.insync.replicas`` for ``rf`` replicas: 2 where there are more than 2 (the
    collector writes with ``acks=all``), else 1.

    >>> [min_isr(n) for n in (1, 2, 3)]
    [1, 1, 2]
    """
    return 2 if rf >= 3 else 1


@dataclass(frozen=True)
class Described:
    """A topic as a cluster describes it (``None``: a setting it did not give)."""

    name: str
    partitions: int
    replication_factor: int
    configs: Mapping[str, str]


def problems(spec: TopicSpec, topic: Described) -> list[str]:
    """What is wrong with ``topic`` for its role: each a short clause (none: fit).

    >>> spec = SPECS[Role.EVENTS]
    >>> problems(spec, Described("e", 12, 3, {"cleanup.policy": "compact",
    ...     "unclean.leader.election.enable": "false", "min.insync.replicas": "2"}))
    ['cleanup.policy is compact, not delete']
    >>> problems(spec, Described("e", 12, 1, {"cleanup.policy": "delete",
    ...     "unclean.leader.election.enable": "true", "min.insync.replicas": "1"}))
    ['unclean.leader.election.enable is true, not false']
    """
    found = []
    for key, want in spec.required.items():
        have = topic.configs.get(key)
        if have is not None and have.lower() != want:
            found.append(f"{key} is {have}, not {want}")
    isr = topic.configs.get("min.insync.replicas")
    if isr is not None and isr.isdigit() and int(isr) > topic.replication_factor:
        found.append(
            f"min.insync.replicas {isr} is above its {topic.replication_factor} replica(s): "
            "every acks=all write is refused"
        )
    return found


def create_command(spec: TopicSpec, name: str, bootstrap: str, brokers: int) -> str:
    """The ``kafka-topics.sh`` line that creates ``name`` as ``spec`` says, on a cluster
    of ``brokers`` (add ``--command-config`` for a secured one).

    >>> line = create_command(SPECS[Role.FINDINGS], "f", "m:9092", 1)
    >>> print(line)  # doctest: +NORMALIZE_WHITESPACE
    kafka-topics.sh --bootstrap-server m:9092 --create --topic f --partitions 1
      --replication-factor 1 --config cleanup.policy=delete
      --config unclean.leader.election.enable=false --config min.insync.replicas=1
      --config retention.ms=2592000000
    """
    rf = replication_factor(brokers)
    parts = [
        "kafka-topics.sh", "--bootstrap-server", bootstrap, "--create", "--topic", name,
        "--partitions", str(spec.partitions), "--replication-factor", str(rf),
    ]  # fmt: skip
    for key, value in spec.configs(rf).items():
        parts += ["--config", f"{key}={value}"]
    return shlex.join(parts)
