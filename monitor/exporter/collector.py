"""The Prometheus collector: metric families built from the snapshot at scrape time.

Nothing is registered per partition ahead of time: a partition that recovers or is deleted
simply stops being yielded. Names, labels and cardinality rules are in docs/metrics.md.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Literal

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from monitor import __version__
from monitor.exporter.snapshot import Snapshot
from monitor.model import (
    EVENT_KINDS,
    NEEDS_REPLICA_SAMPLES,
    SEVERITY,
    FindingKind,
    unavailable_kinds,
)

NS = "kafka_replication"
PerPartition = Literal["findings", "all", "none"]
CONDITION_KINDS = [k for k in FindingKind if k not in EVENT_KINDS]


def _g(name: str, doc: str, labels: list[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily(f"{NS}_{name}", doc, labels=labels)


class ReplicationCollector(Collector):
    def __init__(
        self,
        snapshot: Snapshot,
        per_partition: PerPartition = "findings",
        max_input_lag_records: int = 100_000,
        max_telemetry_age_s: float = 120.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.snapshot = snapshot
        self.per_partition = per_partition
        self.max_input_lag_records = max_input_lag_records
        self.max_telemetry_age_s = max_telemetry_age_s
        self.clock = clock
        self._last_duration = 0.0

    def describe(self) -> Iterator[Metric]:
        return iter(())  # unchecked collector: families vary with the state

    def collect(self) -> Iterator[Metric]:
        started = time.perf_counter()
        now = self.clock()
        snap = self.snapshot
        with snap.lock:
            yield from self._aggregates(snap)
            yield from self._brokers(snap)
            yield from self._partitions(snap, now)
            yield from self._health(snap, now)
        self._last_duration = time.perf_counter() - started

    # -- families --------------------------------------------------------------------------

    def _aggregates(self, snap: Snapshot) -> Iterator[Metric]:
        tracked: Counter[str] = Counter()
        unsampled: Counter[str] = Counter()
        open_c: Counter[tuple[str, str, str]] = Counter()
        open_t: Counter[tuple[str, str, str, str]] = Counter()
        clusters: set[str] = set()
        for v in snap.partitions.values():
            tracked[v.cluster] += 1
            unsampled[v.cluster] += not v.replica_states
            clusters.add(v.cluster)
            for o in v.open_findings:
                sev = o.severity.label
                open_c[(v.cluster, o.kind, sev)] += 1
                open_t[(v.cluster, v.topic, o.kind, sev)] += 1
        for (cluster, topic), opens in snap.topic_open.items():
            clusters.add(cluster)
            for o in opens:
                open_c[(cluster, o.kind, o.severity.label)] += 1
                open_t[(cluster, topic, o.kind, o.severity.label)] += 1
        for b in snap.brokers.values():
            clusters.add(b.cluster)
            for o in b.open:
                open_c[(b.cluster, o.kind, o.severity.label)] += 1
        g = _g("partitions", "Partitions tracked.", ["cluster"])
        for cluster in sorted(clusters):
            g.add_metric([cluster], tracked[cluster])
        yield g
        g = _g(
            "partitions_without_replica_samples",
            "Partitions no replica sample (JMX) has reached: the findings that need one "
            "are not judged there.",
            ["cluster"],
        )
        for cluster in sorted(clusters):
            g.add_metric([cluster], unsampled[cluster])
        yield g
        g = _g(
            "finding_unavailable",
            "1 for a kind no partition can be judged on: it needs replica samples and none "
            "came (the collector reads the Admin API only).",
            ["cluster", "kind"],
        )
        for cluster in sorted(clusters):
            unavailable = unavailable_kinds(tracked[cluster], unsampled[cluster])
            for kind in sorted(NEEDS_REPLICA_SAMPLES):
                g.add_metric([cluster, str(kind)], 1 if kind in unavailable else 0)
        yield g
        g = _g(
            "open_findings",
            "Open conditions by kind (zeros included).",
            ["cluster", "kind", "severity"],
        )
        for cluster in sorted(clusters):
            for kind in CONDITION_KINDS:
                seen = [(s, n) for (c, k, s), n in open_c.items() if c == cluster and k == kind]
                if not seen:
                    g.add_metric([cluster, str(kind), SEVERITY[kind].label], 0)
                for sev, n in seen:
                    g.add_metric([cluster, str(kind), sev], n)
        yield g
        g = _g(
            "topic_open_findings",
            "Open conditions per topic (non-zero only).",
            ["cluster", "topic", "kind", "severity"],
        )
        for (cluster, topic, k, sev), n in sorted(open_t.items()):
            g.add_metric([cluster, topic, k, sev], n)
        yield g
        c = CounterMetricFamily(
            f"{NS}_finding_events", "One-off findings.", labels=["cluster", "kind"]
        )
        for (cluster, k), n in sorted(snap.events_total.items()):
            c.add_metric([cluster, k], n)
        yield c
        c = CounterMetricFamily(
            f"{NS}_committed_offsets_lost", "Committed offsets lost.", labels=["cluster", "topic"]
        )
        for (cluster, topic), n in sorted(snap.lost_total.items()):
            c.add_metric([cluster, topic], n)
        yield c

    def _brokers(self, snap: Snapshot) -> Iterator[Metric]:
        leaders: Counter[tuple[str, int]] = Counter()
        replicas: Counter[tuple[str, int]] = Counter()
        lagging: Counter[tuple[str, int]] = Counter()
        sole: Counter[tuple[str, int]] = Counter()
        for v in snap.partitions.values():
            if v.leader is not None:
                leaders[(v.cluster, v.leader)] += 1
            for b in v.replicas:
                replicas[(v.cluster, b)] += 1
            if len(v.isr) == 1:
                sole[(v.cluster, v.isr[0])] += 1
            for o in v.open_findings:
                if o.kind == "follower_lag" and o.broker is not None:
                    lagging[(v.cluster, o.broker)] += 1
        keys = set(replicas) | set(snap.brokers)
        up = _g("broker_up", "1 if the broker answered the collector.", ["cluster", "broker"])
        for (cluster, broker), bv in sorted(snap.brokers.items()):
            up.add_metric([cluster, str(broker)], 1 if bv.alive else 0)
        yield up
        for name, doc, counts in (
            ("broker_leader_partitions", "Partitions the broker leads.", leaders),
            ("broker_replicas", "Replicas assigned to the broker.", replicas),
            ("broker_lagging_replicas", "Its replicas with an open follower_lag.", lagging),
            ("broker_sole_isr_partitions", "Partitions whose ISR is only this broker.", sole),
        ):
            g = _g(name, doc, ["cluster", "broker"])
            for cluster, broker in sorted(keys):
                g.add_metric([cluster, str(broker)], counts[(cluster, broker)])
            yield g

    def _partitions(self, snap: Snapshot, now: float) -> Iterator[Metric]:
        plabels = ["cluster", "topic", "partition"]
        rlabels = [*plabels, "broker"]
        fam = {
            "hw": _g("partition_high_watermark", "The partition's high watermark.", plabels),
            "leo": _g("partition_log_end_offset", "Each replica's log end offset.", rlabels),
            "unc": _g("partition_uncommitted_offsets", "Leader LEO - HW.", plabels),
            "hwlag": _g(
                "partition_hw_lag_seconds", "How long the HW has trailed the LEO.", plabels
            ),
            "leader": _g("partition_leader", "Leader broker id, -1 when offline.", plabels),
            "epoch": _g("partition_leader_epoch", "Current leader epoch.", plabels),
            "isr": _g("partition_isr_size", "Replicas in the ISR.", plabels),
            "rf": _g("partition_replicas", "Assigned replicas.", plabels),
            "minisr": _g("partition_min_isr", "The topic's min.insync.replicas.", plabels),
            "lago": _g("follower_lag_offsets", "Follower's offsets behind the leader.", rlabels),
            "lags": _g("follower_lag_seconds", "How long the follower has been behind.", rlabels),
        }
        open_f = _g(
            "finding_open_since_timestamp_seconds",
            "Present while a condition is open; value = when it opened.",
            ["cluster", "topic", "partition", "broker", "kind", "severity"],
        )
        last_f = _g(
            "finding_last_event_timestamp_seconds",
            "When the partition's last one-off finding of this kind happened.",
            ["cluster", "topic", "partition", "kind", "severity"],
        )
        loss = _g(
            "partition_last_loss_offsets", "lost_count of the last committed_data_loss.", plabels
        )
        with_events = {(c, t, p) for (c, t, p, _k) in snap.last_events}
        for v in snap.partitions.values():
            lv = [v.cluster, v.topic, str(v.partition)]
            for o in v.open_findings:
                open_f.add_metric(
                    [*lv, "" if o.broker is None else str(o.broker), o.kind, o.severity.label],
                    o.opened_at / 1000,
                )
            wanted = self.per_partition == "all" or (
                self.per_partition == "findings" and (v.open_findings or v.key in with_events)
            )
            if not wanted:
                continue
            fam["hw"].add_metric(lv, v.high_watermark)
            fam["unc"].add_metric(lv, v.uncommitted)
            fam["hwlag"].add_metric(lv, v.hw_lag_ms / 1000)
            fam["leader"].add_metric(lv, -1 if v.leader is None else v.leader)
            fam["epoch"].add_metric(lv, v.leader_epoch)
            fam["isr"].add_metric(lv, len(v.isr))
            fam["rf"].add_metric(lv, len(v.replicas))
            if v.min_isr is not None:
                fam["minisr"].add_metric(lv, v.min_isr)
            for r in v.replica_states:
                rl = [*lv, str(r.broker)]
                if r.leo >= 0:
                    fam["leo"].add_metric(rl, r.leo)
                if r.broker != v.leader and v.leader is not None:
                    fam["lago"].add_metric(rl, r.lag_offsets)
                    fam["lags"].add_metric(rl, r.lag_ms / 1000)
        for (cluster, topic), opens in snap.topic_open.items():
            for o in opens:
                open_f.add_metric(
                    [cluster, topic, "", "", o.kind, o.severity.label], o.opened_at / 1000
                )
        for b in snap.brokers.values():
            for o in b.open:
                open_f.add_metric(
                    [b.cluster, "", "", str(b.broker), o.kind, o.severity.label], o.opened_at / 1000
                )
        horizon = (now - snap.event_retention_s) * 1000
        for (cluster, topic, part, kind), (at, sev) in snap.last_events.items():
            if at >= horizon:
                shown = str(part) if part >= 0 else ""
                last_f.add_metric([cluster, topic, shown, kind, sev.label], at / 1000)
        for (cluster, topic, part), n in snap.last_loss.items():
            loss.add_metric([cluster, topic, str(part)], n)
        yield from fam.values()
        yield open_f
        yield last_f
        yield loss

    def _health(self, snap: Snapshot, now: float) -> Iterator[Metric]:
        h = snap.health
        age = _g(
            "monitor_telemetry_age_seconds", "now - newest observed_at processed.", ["cluster"]
        )
        fresh = True
        for cluster, newest in sorted(h.newest_observed_at.items()):
            a = max(0.0, now - newest / 1000)
            age.add_metric([cluster], a)
            fresh = fresh and a <= self.max_telemetry_age_s
        yield age
        lag_ok = 0 <= h.input_lag_records <= self.max_input_lag_records or h.input_lag_records < 0
        up = h.running and fresh and lag_ok
        yield GaugeMetricFamily(
            f"{NS}_monitor_up", "1 when the monitor's view is whole.", value=1 if up else 0
        )
        yield GaugeMetricFamily(
            f"{NS}_monitor_last_batch_timestamp_seconds",
            "When the engine last finished a batch.",
            value=h.last_batch_at,
        )
        yield GaugeMetricFamily(
            f"{NS}_monitor_input_lag_records",
            "Events not yet processed; -1 unknown.",
            value=h.input_lag_records,
        )
        yield CounterMetricFamily(
            f"{NS}_monitor_events_processed", "Events applied.", value=h.events_processed
        )
        yield CounterMetricFamily(
            f"{NS}_monitor_events_dead_lettered", "Events rejected.", value=h.events_dead_lettered
        )
        info = _g("build_info", "1, labelled with the monitor's version.", ["version"])
        info.add_metric([__version__], 1)
        yield info
        yield GaugeMetricFamily(
            f"{NS}_monitor_scrape_duration_seconds",
            "Time taken to build the previous scrape.",
            value=self._last_duration,
        )
