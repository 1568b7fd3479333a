"""Many partitions, their topics and brokers: the model as the adapters drive it.

:class:`ClusterModel` routes each event to the state it concerns and returns the findings.
It is as pure as the partition transition: no clock, no I/O. ``monitor replay`` keeps one
for a whole file; the Spark job keeps one per bucket of partitions (see ``streaming/``),
where topic and broker events are delivered to every bucket but only the bucket that *owns*
the topic or broker reports topic- and broker-level findings (``owns_global``).

>>> from monitor.model.events import PartitionMeta
>>> m = ClusterModel()
>>> fs = m.apply(PartitionMeta("c", 0, "t", 0, leader=None, leader_epoch=3,
...                            replicas=(1, 2), isr=(1,)))
>>> [f"{f.kind}:{f.state}" for f in fs]
['offline:open']
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from functools import partial
from typing import Any

from monitor.model import partition as part
from monitor.model import rules
from monitor.model._emit import Emitter
from monitor.model.config import ModelConfig
from monitor.model.events import (
    BrokerReport,
    ModelEvent,
    PartitionMeta,
    ReplicaReport,
    TopicConfigReport,
)
from monitor.model.findings import Finding, FindingKind
from monitor.model.state import BrokerState, PartitionState, TopicConfig, TopicState

PartitionKey = tuple[str, str, int]


def _always(_: str) -> bool:
    return True


class ClusterModel:
    """The whole model state for one or more clusters."""

    def __init__(
        self,
        config: ModelConfig | None = None,
        owns_global: Callable[[str], bool] = _always,
    ) -> None:
        self.config = config if config is not None else ModelConfig()
        self.owns_global = owns_global
        self.partitions: dict[PartitionKey, PartitionState] = {}
        self.topics: dict[tuple[str, str], TopicState] = {}
        self.brokers: dict[tuple[str, int], BrokerState] = {}
        self._contexts: dict[tuple[str, str], part.Context] = {}

    # -- driving ----------------------------------------------------------------------------

    def apply(self, event: ModelEvent) -> list[Finding]:
        """Apply one event; return the findings it caused (possibly none)."""
        if isinstance(event, PartitionMeta | ReplicaReport):
            state = self.partition(event.cluster, event.topic, event.partition)
            _, findings = part.step(state, event, self.context(event.cluster, event.topic))
            return findings
        if isinstance(event, TopicConfigReport):
            return self._apply_topic_config(event)
        return self._apply_broker(event)

    def apply_all(self, events: Iterable[ModelEvent]) -> Iterator[Finding]:
        for event in events:
            yield from self.apply(event)

    def tick(self, now: int) -> list[Finding]:
        """Time-driven checks at ``now`` (ms): silent partitions and brokers, calmed flapping."""
        out: list[Finding] = []
        for state in self.partitions.values():
            out.extend(part.tick(state, now, self.context(state.cluster, state.topic)))
        for b in self.brokers.values():
            if not self.owns_global(f"{b.cluster}/broker/{b.broker}"):
                continue
            silent_for = now - b.observed_at
            Emitter(b.cluster, None, None, b.open, out).condition(
                FindingKind.STALE_TELEMETRY,
                not b.alive or silent_for > self.config.stale_after_ms,
                now,
                partial(dict, alive=b.alive, last_seen_at=b.observed_at, silent_for_ms=silent_for),
                broker=b.broker,
            )
        return out

    # -- lookups ----------------------------------------------------------------------------

    def partition(self, cluster: str, topic: str, partition: int) -> PartitionState:
        key = (cluster, topic, partition)
        state = self.partitions.get(key)
        if state is None:
            state = self.partitions[key] = part.new_state(cluster, topic, partition)
        return state

    def context(self, cluster: str, topic: str) -> part.Context:
        ctx = self._contexts.get((cluster, topic))
        if ctx is None:
            ts = self.topics.get((cluster, topic))
            ctx = part.Context(self.config, ts.config if ts is not None else None, self.brokers)
            self._contexts[(cluster, topic)] = ctx
        return ctx

    def restore(
        self,
        partitions: dict[PartitionKey, PartitionState],
        topics: dict[tuple[str, str], TopicState],
        brokers: dict[tuple[str, int], BrokerState],
    ) -> None:
        """Replace (or add) these states, e.g. from a saved delta; derived caches are dropped."""
        self.partitions.update(partitions)
        self.topics.update(topics)
        self.brokers.update(brokers)
        self._contexts.clear()

    def open_findings(self) -> Iterator[tuple[str, str | None, int | None, object]]:
        """(cluster, topic, partition, OpenCondition) for everything open, for exporters."""
        for ps in self.partitions.values():
            for cond in ps.open.values():
                yield ps.cluster, ps.topic, ps.partition, cond
        for ts in self.topics.values():
            for cond in ts.open.values():
                yield ts.cluster, ts.topic, None, cond
        for bs in self.brokers.values():
            for cond in bs.open.values():
                yield bs.cluster, None, None, cond

    # -- topic and broker events ---------------------------------------------------------------

    def _apply_topic_config(self, ev: TopicConfigReport) -> list[Finding]:
        key = (ev.cluster, ev.topic)
        ts = self.topics.get(key)
        if ts is None:
            ts = self.topics[key] = TopicState(ev.cluster, ev.topic)
        if ev.observed_at <= ts.config_at:
            return []
        config = TopicConfig(
            ev.replication_factor, ev.min_insync_replicas, ev.unclean_leader_election_enable
        )
        changed = config != ts.config
        ts.config, ts.config_at = config, ev.observed_at
        out: list[Finding] = []
        if self.owns_global(f"{ev.cluster}/topic/{ev.topic}"):
            reasons = rules.durability_risks(config)
            Emitter(ev.cluster, ev.topic, None, ts.open, out).condition(
                FindingKind.DURABILITY_RISK,
                bool(reasons),
                ev.observed_at,
                lambda: {
                    "reasons": reasons,
                    "profile": rules.durability_profile(config),
                    "replication_factor": config.replication_factor,
                    "min_insync_replicas": config.min_insync_replicas,
                    "unclean_leader_election_enable": config.unclean_leader_election_enable,
                },
            )
        if changed:
            # min.insync.replicas changed: re-judge the ISR conditions of the topic's partitions.
            self._contexts.pop(key, None)
            ctx = self.context(ev.cluster, ev.topic)
            for ps in self.partitions.values():
                if ps.cluster == ev.cluster and ps.topic == ev.topic and ps.meta_at >= 0:
                    emit = Emitter(ps.cluster, ps.topic, ps.partition, ps.open, out)
                    part.evaluate_conditions(ps, ev.observed_at, ctx, emit)
        return out

    def _counted_unclean(self, bs: BrokerState, ev: BrokerReport) -> dict[str, Any] | None:
        """The controller's own witness of unclean elections: its counter rose since its
        last report, after a warm-up (a restarted controller replays old elections). The
        collector forwards the counter only from versions that count correctly
        (``monitor.collector.versions``). No partition is named: the counter has none."""
        name = "unclean_elections_total"
        now, before = ev.unclean_elections_total, bs.counters.get(name)
        if now is None:
            bs.counters.pop(name, None)
            bs.unclean_counted_since = -1
            return None
        bs.counters[name] = now
        # A restart between two scrapes shows only in the process start; without it (an
        # exporter without process metrics) every reading is a baseline: never believed.
        restarted = ev.started_at is None or ev.started_at != bs.started_at
        bs.started_at = ev.started_at
        if not isinstance(before, int) or bs.unclean_counted_since < 0 or now < before or restarted:
            bs.unclean_counted_since = ev.observed_at  # a first reading, or a reset: a baseline
            return None
        # Warm: reported by the same process, without a gap, for the warm-up.
        warm = ev.observed_at - bs.unclean_counted_since >= self.config.counter_warmup_ms
        if now == before or not warm:
            return None
        return {
            "witness": "controller_counter",
            "counted": now - before,
            "counter_before": before,
            "counter": now,
            "controller": ev.broker,
            "active_controller": ev.active_controller,
        }

    def _apply_broker(self, ev: BrokerReport) -> list[Finding]:
        key = (ev.cluster, ev.broker)
        bs = self.brokers.get(key)
        if bs is None:
            bs = self.brokers[key] = BrokerState(ev.cluster, ev.broker)
        if ev.observed_at <= bs.observed_at:
            return []
        bs.alive, bs.observed_at = ev.alive, ev.observed_at
        out: list[Finding] = []
        owned = self.owns_global(f"{ev.cluster}/broker/{ev.broker}")
        counted = self._counted_unclean(bs, ev)
        if counted is not None and owned:
            Emitter(ev.cluster, None, None, bs.open, out).event(
                FindingKind.UNCLEAN_ELECTION, ev.observed_at, counted, broker=ev.broker
            )
        for name in (
            "isr_shrinks_total",
            "isr_expands_total",
            "under_replicated_partitions",
            "active_controller",
        ):
            value = getattr(ev, name)
            if value is not None:
                bs.counters[name] = value
        if owned:
            Emitter(ev.cluster, None, None, bs.open, out).condition(
                FindingKind.STALE_TELEMETRY,
                not ev.alive,
                ev.observed_at,
                lambda: {"alive": ev.alive, "last_seen_at": ev.observed_at, "silent_for_ms": 0},
                broker=ev.broker,
            )
        return out
