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

from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import partial
from typing import Any, NamedTuple

from monitor.model import partition as part
from monitor.model import rules
from monitor.model._emit import Emitter
from monitor.model.config import ModelConfig
from monitor.model.events import (
    BrokerReport,
    ModelRecord,
    PartitionMeta,
    PartitionRound,
    ReplicaReport,
    TopicConfigReport,
    TopicDeleted,
)
from monitor.model.findings import Finding, FindingKind
from monitor.model.state import BrokerState, PartitionState, TopicConfig, TopicState

PartitionKey = tuple[str, str, int]


class Tombstone(NamedTuple):
    """A deleted topic, remembered for ``forget_absent_ms``: its events stamped up to ``at``
    are ignored, and a partition listed again later says the topic was recreated."""

    at: int
    topic_id: str | None
    #: partition -> the committed HW it had when forgotten
    committed: dict[int, int]


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
        #: Deleted topics. Events of the topic stamped no later are ignored; metadata stamped
        #: later is a new topic. Kept ``forget_absent_ms``.
        self.deleted: dict[tuple[str, str], Tombstone] = {}
        #: What was forgotten since the driver last took it (:meth:`take_forgotten`).
        self._forgotten: list[tuple[PartitionState, int]] = []
        self._forgotten_topics: list[tuple[str, str]] = []

    def __setstate__(self, state: dict[str, Any]) -> None:
        # A model pickled before these fields existed (a job's checkpoint) gets them empty.
        self.__dict__.update(deleted={}, _forgotten=[], _forgotten_topics=[])
        self.__dict__.update(state)

    def reconfigure(self, config: ModelConfig) -> None:
        """Judge from now on with ``config`` (a restarted job's settings)."""
        self.config = config
        self._contexts.clear()

    # -- driving ----------------------------------------------------------------------------

    def apply(self, event: ModelRecord) -> list[Finding]:
        """Apply one event (a round: its samples, then its metadata); return the findings
        it caused (possibly none)."""
        if isinstance(event, PartitionRound):
            return self._apply_round(event)
        if isinstance(event, PartitionMeta | ReplicaReport):
            if self.deleted and self._of_deleted(event):
                return []
            state = self.partition(event.cluster, event.topic, event.partition)
            first_meta = state.meta_at < 0
            _, findings = part.step(state, event, self.context(event.cluster, event.topic))
            if first_meta and self.deleted and isinstance(event, PartitionMeta):
                findings += self._recreated(state, event)
            return findings
        if isinstance(event, TopicConfigReport):
            if self.deleted and self._of_deleted(event):
                return []
            return self._apply_topic_config(event)
        if isinstance(event, TopicDeleted):
            return self._forget_topic(
                event.cluster,
                event.topic,
                event.observed_at,
                {"reason": "deleted", "topic_id": event.topic_id},
                event.topic_id,
            )
        return self._apply_broker(event)

    def _apply_round(self, r: PartitionRound) -> list[Finding]:
        """A round's events in order, the partition's in one call (:func:`part.step_round`):
        the findings of applying them one by one."""
        meta = r.meta
        if self.deleted and (meta.cluster, meta.topic) in self.deleted:
            found: list[Finding] = []
            for ev in r.events():  # some may be of the deleted incarnation: one by one
                found += self.apply(ev)
            return found
        state = self.partition(meta.cluster, meta.topic, meta.partition)
        first_meta = state.meta_at < 0
        findings = part.step_round(state, r.samples, meta, self.context(meta.cluster, meta.topic))
        if first_meta and self.deleted:
            findings += self._recreated(state, meta)
        return findings

    def apply_all(self, events: Iterable[ModelRecord]) -> Iterator[Finding]:
        for event in events:
            yield from self.apply(event)

    def tick(self, now: int) -> list[Finding]:
        """Time-driven checks at ``now`` (ms): silent partitions and brokers, calmed flapping,
        topics absent from the metadata reads."""
        out: list[Finding] = self._forget_absent(now)
        quiet, config = part.tick_is_quiet, self.config
        for state in self.partitions.values():
            if not quiet(state, now, config):
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

    # -- forgetting deleted topics -----------------------------------------------------------

    def _of_deleted(self, ev: PartitionMeta | ReplicaReport | TopicConfigReport) -> bool:
        """Whether ``ev`` belongs to a deleted topic and is stamped no later than the
        deletion (ignored). Later events are a new history."""
        t = self.deleted.get((ev.cluster, ev.topic))
        return t is not None and ev.observed_at <= t.at

    def _recreated(self, ps: PartitionState, ev: PartitionMeta) -> list[Finding]:
        """A partition of a deleted topic listed again under a new id: the info finding
        ``topic_recreated`` (its history was forgotten with the deletion)."""
        t = self.deleted.get((ev.cluster, ev.topic))
        if t is None or (ev.topic_id is not None and ev.topic_id == t.topic_id):
            return []
        out: list[Finding] = []
        emit = Emitter(ps.cluster, ps.topic, ps.partition, ps.open, out)
        committed = t.committed.get(ps.partition, -1)
        part.say_recreated(emit, ev.observed_at, t.topic_id, ev, committed, deleted_at=t.at)
        return out

    def _tombstone(self, key: tuple[str, str], at: int, topic_id: str | None = None) -> Tombstone:
        """The topic's tombstone, made or moved to ``at`` (never back), with the id it had."""
        t = self.deleted.get(key, Tombstone(at, None, {}))
        t = self.deleted[key] = Tombstone(max(at, t.at), topic_id or t.topic_id, t.committed)
        return t

    def _forget_topic(
        self,
        cluster: str,
        topic: str,
        at: int,
        details: dict[str, Any],
        topic_id: str | None = None,
    ) -> list[Finding]:
        """The topic is gone (the collector said so): its partitions and its state are
        forgotten. A ``topic_id`` spares a newer incarnation."""
        keys = [
            k
            for k, ps in self.partitions.items()
            if k[0] == cluster
            and k[1] == topic
            and (topic_id is None or ps.topic_id is None or ps.topic_id == topic_id)
        ]
        if not keys and (cluster, topic) not in self.topics:
            return []  # nothing known of it (or already forgotten)
        out = self._forget_partitions(keys, at)
        return out + self._forget_topic_state(cluster, topic, at, details)

    def _forget_partitions(self, keys: list[PartitionKey], at: int) -> list[Finding]:
        """Open conditions resolve at ``at``, the states leave the model (the driver takes
        them: :meth:`take_forgotten`), and the topic's events stamped up to ``at`` are
        ignored from now on."""
        out: list[Finding] = []
        for k in keys:
            ps = self.partitions.pop(k)
            Emitter(k[0], k[1], k[2], ps.open, out).resolve_all(at)
            self._forgotten.append((ps, at))
            self._tombstone((k[0], k[1]), at, ps.topic_id).committed[k[2]] = ps.max_hw
        return out

    def _forget_topic_state(
        self, cluster: str, topic: str, at: int, details: dict[str, Any]
    ) -> list[Finding]:
        out: list[Finding] = []
        tk = (cluster, topic)
        ts = self.topics.pop(tk, None)
        if ts is not None:
            Emitter(cluster, topic, None, ts.open, out).resolve_all(at)
            self._forgotten_topics.append(tk)
        self._contexts.pop(tk, None)
        self._tombstone(tk, at)
        if self.owns_global(f"{cluster}/topic/{topic}"):
            Emitter(cluster, topic, None, {}, out).event(
                FindingKind.TOPIC_DELETED, at, {k: v for k, v in details.items() if v is not None}
            )
        return out

    def _forget_absent(self, now: int) -> list[Finding]:
        """What the metadata reads stopped listing ``forget_absent_ms`` ago while they went on
        listing the rest of it is forgotten as deleted.

        The cluster's clock is its newest ``topic_config`` stamp: every collector sends one
        for every listed topic (its last known configuration, when a read fails), and topic
        events reach every bucket of the Spark job, so every bucket judges a topic alike. A
        topic whose newest ``topic_config`` is that much older has left the topic reads: it
        is gone, and takes its partitions with it (as each one's newest event passes the
        same mark).

        A partition whose newest ``partition`` event is that much older than the clock is
        gone only if its topic is (above; or its state already went), or if partitions of
        its *own topic* went on being listed ``forget_absent_ms`` after it. Not on the
        clock alone: collectors sharing a cluster split it by topic (docs/collector.md,
        "Several collectors on one cluster") and each sends every topic's configuration, so
        when one dies the clock and its topics' configurations go on while its partitions
        fall silent -- they are stale (its outage, said), not deleted. A topic's partitions
        come from one collector, so a sibling listed later says its collector lives. In the
        job, a partition's siblings are those of its bucket: one alone in its bucket waits
        for its topic to leave the reads (never forgotten early; only later, if ever).

        Judged on the events' own stamps: a dead collector stops every stamp it sends, and
        nothing is forgotten for silence alone.
        """
        limit = self.config.forget_absent_ms
        for key, t in list(self.deleted.items()):
            if now - t.at > limit:
                del self.deleted[key]
        clock: dict[str, int] = {}
        for (cluster, _), ts in self.topics.items():
            clock[cluster] = max(clock.get(cluster, -1), ts.config_at)
        if not clock:
            return []
        silent: list[tuple[PartitionKey, int]] = []  # not listed since clock - limit
        for k, ps in self.partitions.items():
            seen = ps.meta_at if ps.meta_at >= 0 else ps.last_seen
            if 0 <= seen < clock.get(k[0], -1) - limit:
                silent.append((k, seen))
        absent: dict[str, list[PartitionKey]] = {}
        if silent:  # then each topic's newest listing of a partition this model holds
            listed: dict[tuple[str, str], int] = {}
            for k, ps in self.partitions.items():
                if ps.meta_at > listed.get((k[0], k[1]), -1):
                    listed[(k[0], k[1])] = ps.meta_at
            for k, seen in silent:
                tk = (k[0], k[1])
                of_topic = self.topics.get(tk)
                if (
                    seen < listed.get(tk, -1) - limit  # its siblings went on being listed
                    or (of_topic is not None and of_topic.config_at < clock[k[0]] - limit)
                    or (of_topic is None and tk in self.deleted)  # its topic went already
                ):
                    absent.setdefault(k[0], []).append(k)
        out: list[Finding] = []
        for cluster, keys in absent.items():
            out += self._forget_partitions(keys, clock[cluster])
        for (cluster, topic), ts in list(self.topics.items()):
            if ts.config_at < clock[cluster] - limit:
                details = {
                    "reason": "absent",
                    "last_read_at": ts.config_at,
                    "absent_for_ms": clock[cluster] - ts.config_at,
                }
                out += self._forget_topic_state(cluster, topic, clock[cluster], details)
        return out

    def take_forgotten(self) -> tuple[list[tuple[PartitionState, int]], list[tuple[str, str]]]:
        """The partition states (with when) and topics forgotten since the last call: the
        Spark operator deletes them from its state and writes their tombstone rows."""
        parts, topics = self._forgotten, self._forgotten_topics
        self._forgotten, self._forgotten_topics = [], []
        return parts, topics

    # -- lookups ----------------------------------------------------------------------------

    def partition(self, cluster: str, topic: str, partition: int) -> PartitionState:
        key = (cluster, topic, partition)
        state = self.partitions.get(key)
        if state is None:
            state = part.new_state(cluster, topic, partition)
            self.partitions[state.key] = state  # the state's interned names, one tuple
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
        partitions: Mapping[PartitionKey, PartitionState | None],
        topics: Mapping[tuple[str, str], TopicState | None],
        brokers: Mapping[tuple[str, int], BrokerState],
    ) -> None:
        """Replace (or add) these states, e.g. from a saved delta -- ``None``: forgotten;
        derived caches are dropped."""
        for k, ps in partitions.items():
            if ps is None:
                self.partitions.pop(k, None)
            else:
                self.partitions[k] = ps
        for tk, ts in topics.items():
            if ts is None:
                self.topics.pop(tk, None)
            else:
                self.topics[tk] = ts
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
        moved = ev.started_at is not None and bs.process_started_at not in (None, ev.started_at)
        if ev.alive and (moved or (not bs.alive and bs.observed_at >= 0)):
            bs.back_at = ev.observed_at
        if ev.started_at is not None:
            bs.process_started_at = ev.started_at
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
