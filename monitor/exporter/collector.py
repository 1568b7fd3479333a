"""The /metrics page, rendered from a copy of the snapshot at scrape time.

Nothing is registered per partition ahead of time: a partition that recovers or is deleted
simply stops being rendered. Names, labels and cardinality rules are in docs/metrics.md.

**A bounded scrape, whatever the cluster's state.** The snapshot lock is held only for
:meth:`Snapshot.copy`; the page is built from the copy. Per-partition series are rendered
for at most ``max_partitions`` partitions (:data:`DEFAULT_MAX_PARTITIONS`), chosen by
severity first, then age (the oldest trouble first); the set is **sticky**: a partition in
it stays while it is still in trouble, unless a partition of strictly higher severity needs
its place, so its series (and the alerts on them) neither churn nor resolve and fire again.
The rest are counted per topic, kind and severity (``partitions_capped``), which a roll-up
alert pages on; staleness is also rolled up per broker (``broker_stale_partitions``) and per
topic (``topic_open_findings``). Cluster, topic and broker aggregates always count every
partition.

The page is rendered here, not through prometheus_client's registry: its generic
exposition builds and escapes every label set of every sample (about 6 us a sample); this
renderer builds a partition's label set once for all its series (about 1 us a sample).
"""

from __future__ import annotations

import gc
import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Literal, TypeVar

from monitor import __version__
from monitor.contract.state import OpenFinding, PartitionView
from monitor.exporter.snapshot import LastEvent, PKey, Snapshot, SnapshotCopy
from monitor.model import (
    EVENT_KINDS,
    NEEDS_REPLICA_SAMPLES,
    SEVERITY,
    FindingKind,
    Severity,
    unavailable_kinds,
)

NS = "kafka_replication"
PerPartition = Literal["findings", "all", "none"]
CONDITION_KINDS = [k for k in FindingKind if k not in EVENT_KINDS]

#: Partitions with per-partition series, at most (``metrics_max_partitions``). 10,000
#: partitions cost ~170k series, ~18 MB and well under a second to render (a 100k-partition
#: storm: docs/benchmarks.md), inside the shipped 10 s scrape timeout with room for a
#: loaded host; and they cover a two-broker outage of a 100k-partition, 12-broker cluster
#: with RF 3 (the partitions with both lost replicas: ~4.5k under min ISR or offline) one
#: partition at a time.
DEFAULT_MAX_PARTITIONS = 10_000

#: How long a one-off finding pages after its detection: the rules' ``< 900`` window
#: (monitor/assets/prometheus/rules/replication.yml; tests/deploy/test_rules.py keeps them
#: equal). Such a partition ranks by the finding's severity for the per-partition set, and
#: counts in ``partitions_capped`` while outside it.
EVENT_WINDOW_S = 900

_SEV = {s: s.label for s in Severity}
_SLICE = 8192
K = TypeVar("K")
#: A rank's "since" for what has no age (a healthy partition): after every real time (ms).
_NEVER = 2**45 - 1
_PARTITION_LABELS = ("cluster", "topic", "partition")


def _num(value: float) -> str:
    """A sample value: an integer as ``12.0`` (most of the page: offsets, ids, counts),
    else Python's shortest float, ``+Inf``, ``-Inf`` or ``NaN``."""
    if value.__class__ is int:
        return f"{value}.0"
    f = float(value)
    if f != f:
        return "NaN"
    if f in (math.inf, -math.inf):
        return "+Inf" if f > 0 else "-Inf"
    return repr(f)


def _esc(value: str) -> str:
    """A label value, escaped for the text exposition format."""
    if "\\" in value or '"' in value or "\n" in value:
        return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return value


def _labels(**labels: object) -> str:
    return ",".join(f'{k}="{_esc(str(v))}"' for k, v in labels.items())


def _per_cluster(name: str, doc: str, clusters: Iterable[str], counts: dict[str, int]) -> _Family:
    """A gauge with one series per cluster (zero where ``counts`` has none)."""
    g = _Family(name, doc)
    for c in sorted(clusters):
        g.add(_labels(cluster=c), counts.get(c, 0))
    return g


class _Family:
    """One metric family's lines (text exposition format 0.0.4)."""

    __slots__ = ("doc", "kind", "lines", "name")

    def __init__(self, name: str, doc: str, kind: str = "gauge") -> None:
        self.name = f"{NS}_{name}" + ("_total" if kind == "counter" else "")
        self.doc, self.kind = doc, kind
        self.lines: list[str] = []

    def add(self, labels: str, value: float) -> None:
        """``labels``: the inside of the braces, already escaped ("" for none)."""
        body = f"{{{labels}}}" if labels else ""
        self.lines.append(f"{self.name}{body} {_num(value)}\n")

    def text(self) -> str:
        doc = self.doc.replace("\\", "\\\\").replace("\n", "\\n")
        return f"# HELP {self.name} {doc}\n# TYPE {self.name} {self.kind}\n" + "".join(self.lines)


def _tally(items: list[K]) -> Counter[K]:
    """``Counter(items)``, a slice at a time: one C call over 300k items holds the GIL for
    ~50 ms, during which the job's batch hook (in the same interpreter) cannot run."""
    out: Counter[K] = Counter()
    for i in range(0, len(items), _SLICE):
        out.update(items[i : i + _SLICE])
    return out


def _paging(e: LastEvent, window_start_ms: int) -> bool:
    """Whether a one-off finding is inside the alerts' window (detected since its start)."""
    return e.detected_at is not None and e.detected_at >= window_start_ms


def _rank(cur: tuple[int, int] | None, severity: int, since: int) -> tuple[int, int]:
    """A partition's (severity, since): its most severe trouble, and when the oldest
    trouble of that severity began."""
    if cur is None or severity > cur[0] or (severity == cur[0] and since < cur[1]):
        return (severity, since)
    return cur


class ReplicationCollector:
    """Builds the page. ``max_partitions``: partitions with per-partition series, at most."""

    def __init__(
        self,
        snapshot: Snapshot,
        per_partition: PerPartition = "findings",
        max_input_lag_records: int = 100_000,
        max_telemetry_age_s: float = 120.0,
        clock: Callable[[], float] = time.time,
        max_partitions: int = DEFAULT_MAX_PARTITIONS,
        event_window_s: float = EVENT_WINDOW_S,
    ) -> None:
        if max_partitions < 0:
            raise ValueError(f"max_partitions {max_partitions}: must be >= 0")
        self.snapshot = snapshot
        self.per_partition = per_partition
        self.max_input_lag_records = max_input_lag_records
        self.max_telemetry_age_s = max_telemetry_age_s
        self.clock = clock
        self.max_partitions = max_partitions
        self.event_window_s = event_window_s
        #: The partitions that had per-partition series in the last scrape (sticky).
        self.members: frozenset[PKey] = frozenset()
        #: The last scrape: seconds the snapshot lock was held, and in all.
        self.last_lock_held_s = 0.0
        self._last_duration = 0.0
        # One render at a time (two Prometheus servers scraping at once): the sticky set
        # moves once per scrape, and one page's worth of memory is built at a time.
        self._render = threading.Lock()

    def render(self) -> bytes:
        """The /metrics page."""
        with self._render:
            started = time.perf_counter()
            now = self.clock()
            snap = self.snapshot.copy()
            self.last_lock_held_s = snap.lock_held_s
            # The build allocates ~1M short-lived tuples and strings; the cyclic collector
            # would walk the whole heap (millions of views' objects) several times over
            # meanwhile: half the render's time at 100k partitions. Nothing here makes a
            # cycle; it runs again at the end.
            collecting = gc.isenabled()
            gc.disable()
            try:
                families = self._families(snap, now)
            finally:
                if collecting:
                    gc.enable()
            families.append(
                _Family(
                    "monitor_scrape_duration_seconds", "Time taken to build the previous scrape."
                )
            )
            families[-1].add("", self._last_duration)
            body = "".join(f.text() for f in families).encode()
            self._last_duration = time.perf_counter() - started
            return body

    # -- the page --------------------------------------------------------------------------

    def _families(self, snap: SnapshotCopy, now: float) -> list[_Family]:
        now_ms = int(now * 1000)
        horizon = now_ms - int(snap.event_retention_s * 1000)
        window = now_ms - int(self.event_window_s * 1000)
        want_all = self.per_partition == "all"

        # The aggregates, counted in C (Counter over lists), then each troubled partition's
        # rank: a Python loop over 100k partitions is most of a scrape's cost.
        views = snap.partitions.values()
        tracked = _tally([v.cluster for v in views])
        unsampled = _tally([v.cluster for v in views if not v.replica_states])
        leaders = _tally([(v.cluster, v.leader) for v in views if v.leader is not None])
        replicas = _tally([(v.cluster, b) for v in views for b in v.replicas])
        sole = _tally([(v.cluster, v.isr[0]) for v in views if len(v.isr) == 1])
        oc: list[tuple[str, str, Severity]] = []
        ot: list[tuple[str, str, str, Severity]] = []
        lag: list[tuple[str, int]] = []
        stl: list[tuple[str, int]] = []
        ranks: dict[PKey, tuple[int, int]] = {}
        for key, v in snap.partitions.items():
            opens = v.open_findings
            if not opens:
                if want_all:
                    ranks[key] = (-1, _NEVER)
                continue
            c, topic = v.cluster, v.topic
            top, since = -1, _NEVER
            for o in opens:
                kind, sev = o.kind, o.severity
                oc.append((c, kind, sev))
                ot.append((c, topic, kind, sev))
                if kind == "follower_lag" and o.broker is not None:
                    lag.append((c, o.broker))
                elif kind == "stale_telemetry" and v.leader is not None:
                    stl.append((c, v.leader))
                if sev > top or (sev == top and o.opened_at < since):
                    top, since = sev, o.opened_at
            ranks[key] = (int(top), since)
        open_c = _tally(oc)
        open_t = _tally(ot)
        lagging = _tally(lag)
        stale = _tally(stl)
        clusters: set[str] = set()
        clusters.update(tracked)
        for (c, topic), opens in snap.topic_open.items():
            clusters.add(c)
            for o in opens:
                ck, tk = (c, o.kind, o.severity), (c, topic, o.kind, o.severity)
                open_c[ck] = open_c.get(ck, 0) + 1
                open_t[tk] = open_t.get(tk, 0) + 1
        for b in snap.brokers.values():
            clusters.add(b.cluster)
            for o in b.open:
                ck = (b.cluster, o.kind, o.severity)
                open_c[ck] = open_c.get(ck, 0) + 1

        # One-off findings: a cluster-level one is always shown; a partition's is one of
        # its per-partition series, and ranks it by its severity while it pages.
        events: dict[PKey, list[tuple[str, LastEvent]]] = {}
        cluster_events: list[tuple[tuple[str, str, int, str], LastEvent]] = []
        for ek, e in snap.last_events.items():
            if e.kept_since < horizon:
                continue
            if ek[2] < 0:
                cluster_events.append((ek, e))
                continue
            pk = ek[:3]
            events.setdefault(pk, []).append((ek[3], e))
            if _paging(e, window):
                ranks[pk] = _rank(ranks.get(pk), int(e.severity), e.kept_since)
            else:
                ranks[pk] = _rank(ranks.get(pk), int(Severity.INFO), e.kept_since)

        members = self._choose(ranks)

        out: list[_Family] = []
        out.extend(self._aggregates(snap, clusters, tracked, unsampled, open_c, open_t))
        exported: dict[str, int] = {}
        capped: dict[tuple[str, str, str, Severity], int] = {}
        for pk in ranks:
            if pk in members:
                exported[pk[0]] = exported.get(pk[0], 0) + 1
                continue
            pv = snap.partitions.get(pk)
            kinds = {(o.kind, o.severity) for o in pv.open_findings} if pv is not None else set()
            for kind, e in events.get(pk, ()):
                if _paging(e, window):
                    kinds.add((kind, e.severity))
            for kind, sev in kinds:
                ck2 = (pk[0], pk[1], kind, sev)
                capped[ck2] = capped.get(ck2, 0) + 1
        out.append(
            _per_cluster(
                "partitions_exported",
                "Partitions with per-partition series in this scrape (at most the limit, "
                "monitor_partition_series_limit).",
                clusters,
                exported,
            )
        )
        g = _Family(
            "partitions_capped",
            "Partitions with an open condition of this kind (or a one-off finding of it "
            "detected in the alert window) that have no per-partition series: beyond the "
            "limit. Non-zero only.",
        )
        for (c, topic, kind, sev), n in sorted(capped.items()):
            g.add(_labels(cluster=c, topic=topic, kind=kind, severity=_SEV[sev]), n)
        out.append(g)
        out.extend(self._brokers(snap, leaders, replicas, lagging, sole, stale))
        out.extend(self._partitions(snap, members, events, cluster_events))
        out.extend(self._health(snap, now))
        return out

    def _choose(self, ranks: dict[PKey, tuple[int, int]]) -> frozenset[PKey]:
        """The partitions with per-partition series: all, up to the limit; past it, by
        severity, then membership (sticky), then age (oldest first)."""
        cap = self.max_partitions
        if len(ranks) <= cap:
            chosen = frozenset(ranks)
        else:
            # Per severity, members then the others; a group is sorted (by age, then its
            # place in the snapshot) only when it does not fit in the room left -- in a
            # lasting storm the members fill the limit and nothing is sorted at all (a sort
            # of 100k keys holds the GIL ~30 ms, stalling the job's hook).
            before = self.members
            keys = list(ranks)
            at = len(keys).bit_length()
            groups: dict[tuple[int, bool], list[int]] = {}
            for i, (k, (sev, since)) in enumerate(ranks.items()):
                age = max(0, min(since, _NEVER))
                groups.setdefault((sev, k in before), []).append((age << at) | i)
            picked: list[int] = []
            room = cap
            for sev_member in sorted(groups, reverse=True):
                group = groups[sev_member]
                if len(group) > room:
                    group = sorted(group)[:room]
                picked.extend(group)
                room -= len(group)
                if room == 0:
                    break
            mask = (1 << at) - 1
            chosen = frozenset(keys[n & mask] for n in picked)
        self.members = chosen
        return chosen

    # -- families --------------------------------------------------------------------------

    def _aggregates(
        self,
        snap: SnapshotCopy,
        clusters: set[str],
        tracked: dict[str, int],
        unsampled: dict[str, int],
        open_c: dict[tuple[str, str, Severity], int],
        open_t: dict[tuple[str, str, str, Severity], int],
    ) -> list[_Family]:
        out = [
            _per_cluster("partitions", "Partitions tracked.", clusters, tracked),
            _per_cluster(
                "partitions_without_replica_samples",
                "Partitions no replica sample (JMX) has reached: the findings that need one "
                "are not judged there.",
                clusters,
                unsampled,
            ),
        ]
        g = _Family(
            "finding_unavailable",
            "1 for a kind no partition can be judged on: it needs replica samples and none "
            "came (the collector reads the Admin API only).",
        )
        for c in sorted(clusters):
            unavailable = unavailable_kinds(tracked.get(c, 0), unsampled.get(c, 0))
            for kind in sorted(NEEDS_REPLICA_SAMPLES):
                g.add(_labels(cluster=c, kind=kind), 1 if kind in unavailable else 0)
        out.append(g)
        g = _Family("open_findings", "Open conditions by kind (zeros included).")
        for c in sorted(clusters):
            for kind in CONDITION_KINDS:
                seen = [(s, n) for (cc, k, s), n in open_c.items() if cc == c and k == kind]
                if not seen:
                    g.add(_labels(cluster=c, kind=kind, severity=SEVERITY[kind].label), 0)
                for sev, n in sorted(seen):
                    g.add(_labels(cluster=c, kind=kind, severity=_SEV[sev]), n)
        out.append(g)
        g = _Family("topic_open_findings", "Open conditions per topic (non-zero only).")
        for (c, topic, k, sev), n in sorted(open_t.items()):
            g.add(_labels(cluster=c, topic=topic, kind=k, severity=_SEV[sev]), n)
        out.append(g)
        g = _Family("finding_events", "One-off findings.", "counter")
        for (c, k), n in sorted(snap.events_total.items()):
            g.add(_labels(cluster=c, kind=k), n)
        out.append(g)
        g = _Family("committed_offsets_lost", "Committed offsets lost.", "counter")
        for (c, topic), n in sorted(snap.lost_total.items()):
            g.add(_labels(cluster=c, topic=topic), n)
        out.append(g)
        return out

    def _brokers(
        self,
        snap: SnapshotCopy,
        leaders: dict[tuple[str, int], int],
        replicas: dict[tuple[str, int], int],
        lagging: dict[tuple[str, int], int],
        sole: dict[tuple[str, int], int],
        stale: dict[tuple[str, int], int],
    ) -> list[_Family]:
        keys = sorted(set(replicas) | set(snap.brokers))
        up = _Family("broker_up", "1 if the broker answered the collector.")
        # Every broker the job knows: one holding replicas and never found silent (the job
        # learns of a silent broker from its stale_telemetry) answered -- found by the
        # stranger's test: a cluster where no broker had ever been silent had no series.
        for c, broker in keys:
            bv = snap.brokers.get((c, broker))
            up.add(_labels(cluster=c, broker=broker), 1 if bv is None or bv.alive else 0)
        out = [up]
        for name, doc, counts in (
            ("broker_leader_partitions", "Partitions the broker leads.", leaders),
            ("broker_replicas", "Replicas assigned to the broker.", replicas),
            ("broker_lagging_replicas", "Its replicas with an open follower_lag.", lagging),
            ("broker_sole_isr_partitions", "Partitions whose ISR is only this broker.", sole),
            (
                "broker_stale_partitions",
                "Partitions it leads (last known leader) with an open stale_telemetry.",
                stale,
            ),
        ):
            g = _Family(name, doc)
            for c, broker in keys:
                g.add(_labels(cluster=c, broker=broker), counts.get((c, broker), 0))
            out.append(g)
        return out

    def _partitions(
        self,
        snap: SnapshotCopy,
        members: frozenset[PKey],
        events: dict[PKey, list[tuple[str, LastEvent]]],
        cluster_events: list[tuple[tuple[str, str, int, str], LastEvent]],
    ) -> list[_Family]:
        fam = {
            "hw": _Family("partition_high_watermark", "The partition's high watermark."),
            "leo": _Family("partition_log_end_offset", "Each replica's log end offset."),
            "unc": _Family("partition_uncommitted_offsets", "Leader LEO - HW."),
            "hwlag": _Family("partition_hw_lag_seconds", "How long the HW has trailed the LEO."),
            "leader": _Family("partition_leader", "Leader broker id, -1 when offline."),
            "epoch": _Family("partition_leader_epoch", "Current leader epoch."),
            "isr": _Family("partition_isr_size", "Replicas in the ISR."),
            "rf": _Family("partition_replicas", "Assigned replicas."),
            "minisr": _Family("partition_min_isr", "The topic's min.insync.replicas."),
            "lago": _Family("follower_lag_offsets", "Follower's offsets behind the leader."),
            "lags": _Family("follower_lag_seconds", "How long the follower has been behind."),
        }
        open_f = _Family(
            "finding_open_since_timestamp_seconds",
            "Present while a condition is open; value = when it opened.",
        )
        last_f = _Family(
            "finding_last_event_timestamp_seconds",
            "When the partition's last one-off finding of this kind happened (event time).",
        )
        detected_f = _Family(
            "finding_last_detected_timestamp_seconds",
            "When the monitor detected the partition's last one-off finding of this kind "
            "(wall clock): what the one-off alerts page on.",
        )
        loss = _Family("partition_last_loss_offsets", "lost_count of the last committed_data_loss.")
        details = self.per_partition != "none"
        for pk in sorted(members):
            c, topic, number = pk
            lv = f'cluster="{_esc(c)}",topic="{_esc(topic)}",partition="{number}"'
            for kind, e in events.get(pk, ()):
                _event(last_f, detected_f, f'{lv},kind="{kind}",severity="{_SEV[e.severity]}"', e)
                if kind == "committed_data_loss" and pk in snap.last_loss:
                    loss.add(lv, snap.last_loss[pk])
            v = snap.partitions.get(pk)
            if v is None:
                continue
            for o in v.open_findings:
                open_f.add(_open_labels(lv, o), o.opened_at / 1000)
            if details:
                _details(fam, lv, v)
        for (c, topic), opens in sorted(snap.topic_open.items()):
            lv = f'cluster="{_esc(c)}",topic="{_esc(topic)}",partition=""'
            for o in opens:
                open_f.add(_open_labels(lv, o), o.opened_at / 1000)
        for (c, broker), b in sorted(snap.brokers.items()):
            for o in b.open:
                lv = f'cluster="{_esc(c)}",topic="",partition=""'
                open_f.add(_open_labels(lv, o, broker), o.opened_at / 1000)
        for (c, topic, _, kind), e in sorted(cluster_events):
            lv = f'cluster="{_esc(c)}",topic="{_esc(topic)}",partition=""'
            _event(last_f, detected_f, f'{lv},kind="{kind}",severity="{_SEV[e.severity]}"', e)
        return [*fam.values(), open_f, last_f, detected_f, loss]

    def _health(self, snap: SnapshotCopy, now: float) -> list[_Family]:
        h = snap.health
        age = _Family("monitor_telemetry_age_seconds", "now - newest observed_at processed.")
        fresh = True
        for c, newest in sorted(h.newest_observed_at.items()):
            a = max(0.0, now - newest / 1000)
            age.add(_labels(cluster=c), a)
            fresh = fresh and a <= self.max_telemetry_age_s
        lag_ok = 0 <= h.input_lag_records <= self.max_input_lag_records or h.input_lag_records < 0
        up = h.running and fresh and lag_ok
        out = [age]
        for name, doc, value, kind in (
            ("monitor_up", "1 when the monitor's view is whole.", 1 if up else 0, "gauge"),
            (
                "monitor_last_batch_timestamp_seconds",
                "When the engine last finished a batch.",
                h.last_batch_at,
                "gauge",
            ),
            (
                "monitor_input_lag_records",
                "Events not yet processed; -1 unknown.",
                h.input_lag_records,
                "gauge",
            ),
            ("monitor_events_processed", "Events applied.", h.events_processed, "counter"),
            (
                "monitor_events_dead_lettered",
                "Events rejected.",
                h.events_dead_lettered,
                "counter",
            ),
            (
                "monitor_offsets_skipped",
                "Events-topic offsets passed without a record read there (deleted by retention "
                "before the job read them).",
                h.offsets_skipped,
                "counter",
            ),
            (
                "monitor_records_too_large",
                "Records over max_record_bytes, dead-lettered unparsed, their bytes kept in "
                "the store.",
                h.records_too_large,
                "counter",
            ),
            (
                "store_compaction_errors",
                "Store compactions that failed (logged; retried at the next round).",
                h.store_compaction_errors,
                "counter",
            ),
            (
                "monitor_partition_series_limit",
                "Partitions with per-partition series, at most (metrics_max_partitions).",
                self.max_partitions,
                "gauge",
            ),
        ):
            g = _Family(name, doc, kind)
            g.add("", value)
            out.append(g)
        info = _Family("build_info", "1, labelled with the monitor's version.")
        info.add(_labels(version=__version__), 1)
        out.append(info)
        return out


def _open_labels(lv: str, o: OpenFinding, broker: int | None = None) -> str:
    b = o.broker if broker is None else broker
    shown = "" if b is None else str(b)
    return f'{lv},broker="{shown}",kind="{_esc(o.kind)}",severity="{_SEV[o.severity]}"'


def _event(last_f: _Family, detected_f: _Family, labels: str, e: LastEvent) -> None:
    last_f.add(labels, e.at / 1000)
    if e.detected_at is not None:
        detected_f.add(labels, e.detected_at / 1000)


def _details(fam: dict[str, _Family], lv: str, v: PartitionView) -> None:
    fam["hw"].add(lv, v.high_watermark)
    fam["unc"].add(lv, v.uncommitted)
    fam["hwlag"].add(lv, v.hw_lag_ms / 1000)
    fam["leader"].add(lv, -1 if v.leader is None else v.leader)
    fam["epoch"].add(lv, v.leader_epoch)
    fam["isr"].add(lv, len(v.isr))
    fam["rf"].add(lv, len(v.replicas))
    if v.min_isr is not None:
        fam["minisr"].add(lv, v.min_isr)
    for r in v.replica_states:
        rl = f'{lv},broker="{r.broker}"'
        if r.leo >= 0:
            fam["leo"].add(rl, r.leo)
        if r.broker != v.leader and v.leader is not None:
            fam["lago"].add(rl, r.lag_offsets)
            fam["lags"].add(rl, r.lag_ms / 1000)
