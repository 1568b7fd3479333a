"""Read models: compact, immutable views of the model's state for exporters and the CLI.

A :class:`PartitionView` is what the Prometheus exporter, the state store and the runbook
CLI need of a partition — no more — built by one pure function from the model's state, so
every reader sees the same numbers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from monitor.model.state import OpenCondition, PartitionState, TopicConfig


@dataclass(frozen=True, slots=True)
class OpenView:
    kind: str
    severity: int
    broker: int | None
    opened_at: int
    details: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ReplicaView:
    broker: int
    leo: int
    lag_offsets: int
    lag_ms: int
    observed_at: int


@dataclass(frozen=True, slots=True)
class PartitionView:
    cluster: str
    topic: str
    partition: int
    leader: int | None
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    min_isr: int | None
    hw: int
    max_hw: int
    uncommitted: int
    hw_lag_ms: int
    replica_views: tuple[ReplicaView, ...]
    open: tuple[OpenView, ...]
    lineage: tuple[tuple[int, int, int | None, int], ...]
    last_seen: int

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.cluster, self.topic, self.partition)

    def to_dict(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "topic": self.topic,
            "partition": self.partition,
            "leader": self.leader,
            "leader_epoch": self.leader_epoch,
            "replicas": list(self.replicas),
            "isr": list(self.isr),
            "min_isr": self.min_isr,
            "hw": self.hw,
            "max_hw": self.max_hw,
            "uncommitted": self.uncommitted,
            "hw_lag_ms": self.hw_lag_ms,
            "replica_views": [
                {
                    "broker": r.broker,
                    "leo": r.leo,
                    "lag_offsets": r.lag_offsets,
                    "lag_ms": r.lag_ms,
                    "observed_at": r.observed_at,
                }
                for r in self.replica_views
            ],
            "open": [
                {
                    "kind": o.kind,
                    "severity": o.severity,
                    "broker": o.broker,
                    "opened_at": o.opened_at,
                    "details": o.details,
                }
                for o in self.open
            ],
            "lineage": [list(e) for e in self.lineage],
            "last_seen": self.last_seen,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PartitionView:
        return cls(
            cluster=d["cluster"],
            topic=d["topic"],
            partition=int(d["partition"]),
            leader=d.get("leader"),
            leader_epoch=int(d["leader_epoch"]),
            replicas=tuple(d["replicas"]),
            isr=tuple(d["isr"]),
            min_isr=d.get("min_isr"),
            hw=int(d["hw"]),
            max_hw=int(d["max_hw"]),
            uncommitted=int(d["uncommitted"]),
            hw_lag_ms=int(d["hw_lag_ms"]),
            replica_views=tuple(
                ReplicaView(r["broker"], r["leo"], r["lag_offsets"], r["lag_ms"], r["observed_at"])
                for r in d["replica_views"]
            ),
            open=tuple(
                OpenView(
                    o["kind"],
                    int(o["severity"]),
                    o.get("broker"),
                    o["opened_at"],
                    dict(o.get("details") or {}),
                )
                for o in d["open"]
            ),
            lineage=tuple((int(e[0]), int(e[1]), e[2], int(e[3])) for e in d.get("lineage", [])),
            last_seen=int(d["last_seen"]),
        )


def open_view(c: OpenCondition) -> OpenView:
    return OpenView(str(c.kind), int(c.severity), c.broker, c.opened_at, dict(c.details))


def partition_view(ps: PartitionState, config: TopicConfig | None) -> PartitionView:
    """The view of one partition's state (``config``: its topic's, when known)."""
    return PartitionView(
        cluster=ps.cluster,
        topic=ps.topic,
        partition=ps.partition,
        leader=ps.leader,
        leader_epoch=ps.leader_epoch,
        replicas=ps.replicas,
        isr=ps.isr,
        min_isr=config.min_insync_replicas if config is not None else None,
        hw=ps.hw,
        max_hw=ps.max_hw,
        uncommitted=ps.uncommitted(),
        hw_lag_ms=ps.hw_lag_ms,
        replica_views=tuple(
            ReplicaView(b, rs.leo, rs.lag_offsets, rs.lag_ms, rs.observed_at)
            for b, rs in sorted(ps.replica_states.items())
        ),
        open=tuple(open_view(c) for c in ps.open.values()),
        lineage=tuple((e.epoch, e.start_offset, e.leader, e.at) for e in ps.lineage),
        last_seen=ps.last_seen,
    )
