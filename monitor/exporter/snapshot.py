"""What the exporter knows: the latest view of every partition, topic and broker, the
recent one-off findings, and the monitor's own health. Thread-safe; updated by whichever
engine drives the model (the Spark job's driver, or an in-process model), read at scrape.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from monitor.contract.state import BrokerView, OpenFinding, PartitionView, open_finding, view_of
from monitor.model import ClusterModel, Finding, FindingState, ModelConfig, Severity
from monitor.model.stamps import believed

PKey = tuple[str, str, int]


@dataclass(slots=True)
class Health:
    """The monitor's own view of itself (see docs/metrics.md, "The monitor itself")."""

    last_batch_at: float = 0.0  # Unix seconds
    newest_observed_at: dict[str, int] = field(default_factory=dict)  # cluster -> ms
    events_processed: int = 0
    events_dead_lettered: int = 0
    input_lag_records: int = -1
    running: bool = False
    #: The job's ``ModelConfig.max_stamp_ahead_ms``.
    max_stamp_ahead_ms: int = ModelConfig().max_stamp_ahead_ms

    def saw(self, cluster: str, at_ms: int, now_ms: int) -> None:
        """``cluster``'s newest telemetry is at least ``at_ms`` -- unless the model would not
        believe that stamp against the exporter's clock (:func:`monitor.model.stamps.believed`):
        a stamp in the future never makes the telemetry look fresh (a row stored before the
        job rejected such stamps, a clock that jumped)."""
        newest = self.newest_observed_at.get(cluster, 0)
        if at_ms > newest and believed(at_ms, now_ms, self.max_stamp_ahead_ms):
            self.newest_observed_at[cluster] = at_ms


class Snapshot:
    """The exporter's state. ``event_retention_s``: how long one-off findings stay visible."""

    def __init__(
        self, event_retention_s: float = 86_400.0, max_stamp_ahead_ms: int | None = None
    ) -> None:
        self.lock = threading.Lock()
        self.partitions: dict[PKey, PartitionView] = {}
        self.topic_open: dict[tuple[str, str], tuple[OpenFinding, ...]] = {}
        self.brokers: dict[tuple[str, int], BrokerView] = {}
        #: (cluster, topic, partition, kind) -> (at ms, severity) of the last one-off finding;
        #: a cluster-level one (the controller's unclean-election counter) has topic "" and
        #: partition -1 (exported as partition="").
        self.last_events: dict[tuple[str, str, int, str], tuple[int, Severity]] = {}
        self.last_loss: dict[PKey, int] = {}
        self.events_total: dict[tuple[str, str], int] = {}
        self.lost_total: dict[tuple[str, str], int] = {}
        self.health = Health()
        if max_stamp_ahead_ms is not None:
            self.health.max_stamp_ahead_ms = max_stamp_ahead_ms
        self.event_retention_s = event_retention_s

    # -- updates --------------------------------------------------------------------------

    def record_findings(self, findings: Iterable[Finding]) -> None:
        """Remember one-off findings (the conditions come with the partition views)."""
        with self.lock:
            for f in findings:
                if f.state is not FindingState.EVENT:
                    continue
                kind = str(f.kind)
                key = (f.cluster, kind)
                self.events_total[key] = self.events_total.get(key, 0) + 1
                if f.topic is None or f.partition is None:
                    self.last_events[(f.cluster, "", -1, kind)] = (f.at, f.severity)
                    continue
                self.last_events[(f.cluster, f.topic, f.partition, kind)] = (f.at, f.severity)
                if kind == "committed_data_loss":
                    lost = int(f.details.get("lost_count", 0))
                    self.last_loss[(f.cluster, f.topic, f.partition)] = lost
                    tkey = (f.cluster, f.topic)
                    self.lost_total[tkey] = self.lost_total.get(tkey, 0) + lost

    def update_partitions(self, views: Iterable[PartitionView]) -> None:
        """The newest views; a tombstone (its topic deleted) removes the partition."""
        with self.lock:
            for v in views:
                if v.deleted_at is None:
                    self.partitions[v.key] = v
                else:
                    self.partitions.pop(v.key, None)

    def update_from_model(self, model: ClusterModel) -> None:
        """Refresh every view from an in-process model (replay, tests, small deployments)."""
        with self.lock:
            # What the model forgot (its topic deleted) goes; other models' clusters (one
            # snapshot may be fed from several) stay.
            mine = {k[0] for k in (*model.partitions, *model.topics, *model.deleted)}
            for key in [k for k in self.partitions if k[0] in mine and k not in model.partitions]:
                del self.partitions[key]
            for tk in [k for k in self.topic_open if k[0] in mine and k not in model.topics]:
                del self.topic_open[tk]
            for key, ps in model.partitions.items():
                ts = model.topics.get((ps.cluster, ps.topic))
                self.partitions[key] = view_of(ps, ts.config if ts else None)
            for (cluster, topic), ts in model.topics.items():
                self.topic_open[(cluster, topic)] = tuple(open_finding(c) for c in ts.open.values())
            for (cluster, broker), bs in model.brokers.items():
                self.brokers[(cluster, broker)] = BrokerView(
                    cluster,
                    broker,
                    bs.alive,
                    bs.observed_at,
                    tuple(open_finding(c) for c in bs.open.values()),
                )
            now_ms = int(time.time() * 1000)
            for ps in model.partitions.values():
                self.health.saw(ps.cluster, ps.last_seen, now_ms)

    def expire(self, now_ms: int) -> None:
        """Forget one-off findings older than the retention."""
        horizon = now_ms - int(self.event_retention_s * 1000)
        with self.lock:
            for key in [k for k, (at, _) in self.last_events.items() if at < horizon]:
                del self.last_events[key]
