"""Where the runbook CLI reads state from.

A :class:`StateSource` gives current partition views, topic configs, broker views, each
partition's recent history (for ``explain`` and its plot) and its findings. Two sources:

- :class:`ReplaySource`: runs the model over a JSON-lines events file (``--events FILE``,
  e.g. written by ``monitor collect --out``) — offline analysis of a captured incident;
- the Spark job's state store (``--store DIR``), see ``streaming/``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from monitor.exporter.snapshot import BrokerView
from monitor.model import ClusterModel, Finding, ModelConfig, TopicConfig
from monitor.replay import ReplayStats, replay
from monitor.views import PartitionView, partition_view


class SourceError(RuntimeError):
    """The state could not be read (missing or empty store, unreadable file)."""


@dataclass(frozen=True, slots=True)
class Sample:
    """One point of a partition's history: watermarks, ISR and leadership at ``at``."""

    at: int
    hw: int
    leader: int | None
    leader_epoch: int
    isr: tuple[int, ...]
    leos: tuple[tuple[int, int], ...]  # (broker, LEO)


class StateSource(Protocol):
    def partitions(self) -> list[PartitionView]: ...
    def topic_configs(self) -> dict[tuple[str, str], TopicConfig]: ...
    def brokers(self) -> list[BrokerView]: ...
    def history(self, topic: str, partition: int, since_ms: int = 0) -> list[Sample]: ...
    def findings(self, topic: str, partition: int, since_ms: int = 0) -> list[dict[str, Any]]: ...


def _content(s: Sample) -> tuple[object, ...]:
    return (s.hw, s.leader, s.leader_epoch, s.isr, s.leos)


def sample_of(v: PartitionView, at: int) -> Sample:
    return Sample(
        at,
        v.hw,
        v.leader,
        v.leader_epoch,
        v.isr,
        tuple((r.broker, r.leo) for r in v.replica_views if r.leo >= 0),
    )


@dataclass
class ReplaySource:
    """The model replayed over an events file, with every partition's history recorded."""

    path: Path
    config: ModelConfig = field(default_factory=ModelConfig)
    model: ClusterModel = field(init=False)
    stats: ReplayStats = field(init=False)
    _history: dict[tuple[str, int], list[Sample]] = field(init=False, default_factory=dict)
    _findings: list[Finding] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        try:
            lines = self.path.read_bytes().splitlines()
        except OSError as e:
            raise SourceError(f"cannot read events file {self.path}: {e.strerror}") from None
        self.model = ClusterModel(self.config)
        self.stats = replay(
            self._record(lines), self.model, self._findings.append, lambda n, r: None
        )
        if self.stats.accepted == 0:
            raise SourceError(f"{self.path}: no valid events ({self.stats.rejected} rejected)")

    def _record(self, lines: Iterable[bytes]) -> Iterable[bytes]:
        """Yield lines to the replay; after each, sample the partition the last one touched."""
        for line in lines:
            yield line
            try:
                d = json.loads(line)
                key = (d["cluster"], d["topic"], int(d["partition"]))
            except (ValueError, KeyError, TypeError):
                continue
            ps = self.model.partitions.get(key)
            if ps is None or ps.meta_at < 0:
                continue
            v = partition_view(ps, None)
            hist = self._history.setdefault((key[1], key[2]), [])
            s = sample_of(v, int(d["observed_at"]))
            if not hist or _content(hist[-1]) != _content(s):
                hist.append(s)  # only changes: a steady partition adds no points

    def partitions(self) -> list[PartitionView]:
        out = []
        for ps in self.model.partitions.values():
            ts = self.model.topics.get((ps.cluster, ps.topic))
            out.append(partition_view(ps, ts.config if ts else None))
        return out

    def topic_configs(self) -> dict[tuple[str, str], TopicConfig]:
        return {k: ts.config for k, ts in self.model.topics.items() if ts.config is not None}

    def brokers(self) -> list[BrokerView]:
        return [
            BrokerView(b.cluster, b.broker, b.alive, b.observed_at)
            for b in self.model.brokers.values()
        ]

    def history(self, topic: str, partition: int, since_ms: int = 0) -> list[Sample]:
        return [s for s in self._history.get((topic, partition), []) if s.at >= since_ms]

    def findings(self, topic: str, partition: int, since_ms: int = 0) -> list[dict[str, Any]]:
        return [
            f.to_dict()
            for f in self._findings
            if f.topic == topic and f.partition == partition and f.at >= since_ms
        ]

    def all_findings(self) -> list[dict[str, Any]]:
        return [f.to_dict() for f in self._findings]
