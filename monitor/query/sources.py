"""Where the runbook CLI reads state from.

A :class:`StateSource` gives current partition views, topic configs, broker views, each
partition's recent history (for ``explain`` and its plot) and its findings. Two sources:

- :class:`ReplaySource`: runs the model over a JSON-lines events file (``--events FILE``,
  e.g. written by ``monitor collect --out``) — offline analysis of a captured incident;
- :class:`~monitor.query.store.StoreSource`: the Spark job's Parquet state store
  (``--store DIR``), queried with DuckDB — the live answer.

Besides every partition's view, a source answers the runbook's narrower questions
(:meth:`~StateSource.partition`, :meth:`~StateSource.with_open`,
:meth:`~StateSource.holding`, :meth:`~StateSource.summary`) so that a store can answer them
without building 100k views; :class:`ViewQueries` derives them from ``partitions()``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from monitor.contract.state import BrokerView, PartitionView, open_finding, view_of
from monitor.model import (
    ClusterModel,
    Finding,
    FindingKind,
    FindingState,
    ModelConfig,
    ModelEvent,
    TopicConfig,
)
from monitor.model.events import PartitionMeta, ReplicaReport
from monitor.query.questions import Status, status
from monitor.query.replay import ReplayStats, replay


class SourceError(RuntimeError):
    """The state could not be read (missing or empty store, unreadable file)."""


@dataclass(frozen=True, slots=True)
class Sample:
    """One point of a partition's history: watermarks, ISR and leadership at ``at``."""

    at: int
    high_watermark: int
    leader: int | None
    leader_epoch: int
    isr: tuple[int, ...]
    leos: tuple[tuple[int, int], ...]  # (broker, LEO)

    @property
    def content(self) -> tuple[object, ...]:
        """Everything but the time: a history keeps a sample only when this changes."""
        return (self.high_watermark, self.leader, self.leader_epoch, self.isr, self.leos)


@dataclass(frozen=True, slots=True)
class Freshness:
    """How current the source is: newest telemetry it holds and, for a store, when the job
    last wrote (Unix ms / s; -1 / None when unknown)."""

    newest_observed_at: int
    last_batch: int | None = None
    last_write_at: float | None = None


class StateSource(Protocol):
    #: What the state comes from, for messages: "store DIR", "events file F".
    label: str

    def partitions(self) -> list[PartitionView]: ...
    def partition(self, topic: str, partition: int) -> PartitionView:
        """The partition's view; :class:`SourceError` naming the source when unknown."""
        ...

    def with_open(self, kind: str, topic: str | None = None) -> list[PartitionView]: ...
    def holding(self, brokers: set[int]) -> list[PartitionView]:
        """Partitions with a replica on one of ``brokers`` (what ``what_if`` needs)."""
        ...

    def summary(self) -> Status: ...
    def freshness(self) -> Freshness: ...
    def topic_configs(self) -> dict[tuple[str, str], TopicConfig]: ...
    def brokers(self) -> list[BrokerView]: ...
    def history(self, topic: str, partition: int, since_ms: int = 0) -> list[Sample]: ...
    def findings(self, topic: str, partition: int, since_ms: int = 0) -> list[dict[str, Any]]: ...
    def events(self, since_ms: int, kind: str | None = None) -> list[dict[str, Any]]:
        """One-off findings (state ``event``) at or after ``since_ms``, oldest first; only
        ``kind`` when given (``Finding.to_dict`` shape)."""
        ...


class ViewQueries:
    """The narrow questions answered from :meth:`partitions` (for small, in-memory sources)."""

    label = "state"

    def partitions(self) -> list[PartitionView]:
        raise NotImplementedError

    def brokers(self) -> list[BrokerView]:
        raise NotImplementedError

    def partition(self, topic: str, partition: int) -> PartitionView:
        views = self.partitions()
        for v in views:
            if v.topic == topic and v.partition == partition:
                return v
        raise SourceError(unknown_partition(self.label, topic, partition, views))

    def with_open(self, kind: str, topic: str | None = None) -> list[PartitionView]:
        return [
            v
            for v in self.partitions()
            if (topic is None or v.topic == topic) and any(o.kind == kind for o in v.open_findings)
        ]

    def holding(self, brokers: set[int]) -> list[PartitionView]:
        return [v for v in self.partitions() if brokers.intersection(v.replicas)]

    def summary(self) -> Status:
        silent = [b.broker for b in self.brokers() if not b.alive]
        return status(self.partitions(), silent)

    def freshness(self) -> Freshness:
        return Freshness(max((v.updated_at for v in self.partitions()), default=-1))


def unknown_partition(
    label: str, topic: str, partition: int, views: Iterable[PartitionView]
) -> str:
    numbers = sorted(v.partition for v in views if v.topic == topic)
    if numbers:
        return (
            f"unknown partition {topic}/{partition} in {label}: topic {topic} has "
            f"{len(numbers)} partitions ({numbers[0]}..{numbers[-1]})"
        )
    topics = sorted({v.topic for v in views})
    return (
        f"unknown partition {topic}/{partition} in {label}: no topic {topic} "
        f"(topics known: {', '.join(topics[:10]) or 'none'}"
        f"{f', ... {len(topics)} in all' if len(topics) > 10 else ''})"
    )


def sample_of(v: PartitionView, at: int) -> Sample:
    return Sample(
        at,
        v.high_watermark,
        v.leader,
        v.leader_epoch,
        v.isr,
        tuple((r.broker, r.leo) for r in v.replica_states if r.leo >= 0),
    )


@dataclass
class ReplaySource(ViewQueries):
    """The model replayed over an events file, with every partition's history recorded."""

    path: Path
    config: ModelConfig = field(default_factory=ModelConfig)
    #: Only this cluster's partitions, topics and brokers (all when None).
    cluster: str | None = None
    model: ClusterModel = field(init=False)
    stats: ReplayStats = field(init=False)
    _history: dict[tuple[str, int], list[Sample]] = field(init=False, default_factory=dict)
    _findings: list[Finding] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        try:
            lines = self.path.read_bytes().splitlines()
        except OSError as e:
            raise SourceError(f"cannot read events file {self.path}: {e.strerror}") from None
        self.label = f"events file {self.path}"
        self.model = ClusterModel(self.config)
        self.stats = replay(
            lines, self.model, self._findings.append, lambda n, r: None, on_applied=self._record
        )
        if self.stats.accepted == 0:
            raise SourceError(f"{self.path}: no valid events ({self.stats.rejected} rejected)")

    def _record(self, event: ModelEvent) -> None:
        """After each applied event, sample the partition it touched."""
        if not isinstance(event, PartitionMeta | ReplicaReport):
            return
        ps = self.model.partitions.get((event.cluster, event.topic, event.partition))
        if ps is None or ps.meta_at < 0:
            return
        hist = self._history.setdefault((event.topic, event.partition), [])
        s = sample_of(view_of(ps, None), event.observed_at)
        if not hist or hist[-1].content != s.content:
            hist.append(s)  # only changes: a steady partition adds no points

    def partitions(self) -> list[PartitionView]:
        out = []
        for ps in self.model.partitions.values():
            if self.cluster is not None and ps.cluster != self.cluster:
                continue
            ts = self.model.topics.get((ps.cluster, ps.topic))
            out.append(view_of(ps, ts.config if ts else None))
        return out

    def topic_configs(self) -> dict[tuple[str, str], TopicConfig]:
        return {
            k: ts.config
            for k, ts in self.model.topics.items()
            if ts.config is not None and self.cluster in (None, k[0])
        }

    def brokers(self) -> list[BrokerView]:
        """Each broker, ``alive`` as :class:`BrokerView` means it -- answering the collector:
        not when its last report said down, nor when it stopped reporting (its broker-level
        ``stale_telemetry`` open), as the store reads it (``StoreSource.brokers``). A broker
        gone silent sends no report saying so: its last one said alive."""
        out = []
        for b in self.model.brokers.values():
            if self.cluster not in (None, b.cluster):
                continue
            opened = tuple(open_finding(c) for c in b.open.values())
            answering = b.alive and not any(o.kind == "stale_telemetry" for o in opened)
            out.append(BrokerView(b.cluster, b.broker, answering, b.observed_at, opened))
        return out

    def history(self, topic: str, partition: int, since_ms: int = 0) -> list[Sample]:
        return [s for s in self._history.get((topic, partition), []) if s.at >= since_ms]

    def findings(self, topic: str, partition: int, since_ms: int = 0) -> list[dict[str, Any]]:
        return [
            f.to_dict()
            for f in self._findings
            if f.topic == topic and f.partition == partition and f.at >= since_ms
        ]

    def events(self, since_ms: int, kind: str | None = None) -> list[dict[str, Any]]:
        return [
            f.to_dict()
            for f in self._findings
            if f.state == FindingState.EVENT
            and f.at >= since_ms
            and (kind is None or f.kind == kind)
            and self.cluster in (None, f.cluster)
        ]

    def all_findings(self) -> list[dict[str, Any]]:
        return [f.to_dict() for f in self._findings]


#: The ``kind`` label of the monitor's own alerts that are no finding kind
#: (monitor/assets/prometheus/rules/replication.yml); every other alert of ours is a finding
#: kind.
MONITOR_ALERT_KINDS = frozenset({"monitor_down", "monitor_behind", "collector_down"})


def prometheus_alerts(
    url: str, cluster: str | None = None, timeout_s: float = 5.0
) -> list[dict[str, Any]]:
    """The monitor's firing alerts from Prometheus' HTTP API (``GET /api/v1/alerts``): those
    whose ``kind`` label is a finding kind or one of :data:`MONITOR_ALERT_KINDS` (another
    team's alerts in the same Prometheus are not this check's business), of ``cluster``
    when given (the monitor's own alerts have no cluster and are kept).

    Raises :class:`SourceError` naming the URL when Prometheus cannot be reached or does not
    answer like Prometheus.
    """
    import urllib.error
    import urllib.request

    api = url.rstrip("/") + "/api/v1/alerts"
    try:
        with urllib.request.urlopen(api, timeout=timeout_s) as resp:
            body = json.loads(resp.read())
    except urllib.error.HTTPError as e:
        raise SourceError(f"Prometheus at {url} answered {e.code} {e.reason} for {api}") from None
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise SourceError(f"cannot reach Prometheus at {url}: {reason}") from None
    except ValueError:
        raise SourceError(f"{api} did not answer JSON: is {url} a Prometheus?") from None
    if not isinstance(body, dict) or body.get("status") != "success":
        raise SourceError(f"Prometheus at {url} answered {str(body)[:200]}")
    ours = {k.value for k in FindingKind} | MONITOR_ALERT_KINDS
    alerts = [
        a
        for a in body["data"]["alerts"]
        if a.get("state") == "firing"
        and a["labels"].get("kind") in ours
        and (cluster is None or a["labels"].get("cluster", cluster) == cluster)
    ]
    alerts.sort(key=lambda a: (a["labels"].get("alertname", ""), sorted(a["labels"].items())))
    return alerts


def age_s(at_ms: int, now: float | None = None) -> float:
    """Seconds from ``at_ms`` to now."""
    return (time.time() if now is None else now) - at_ms / 1000
