"""What the exporter knows: the latest view of every partition, topic and broker, the
recent one-off findings, and the monitor's own health. Thread-safe; updated by whichever
engine drives the model (the Spark job's driver, or an in-process model), read at scrape.

A scrape holds :attr:`Snapshot.lock` only while it takes a :meth:`Snapshot.copy` (shallow
copies of a few dicts of immutable values: milliseconds at 100k partitions); it renders
the page from the copy, outside the lock, so a batch hook never waits for a render.

One-off findings carry two times: ``at``, when the event happened (the telemetry's clock),
and ``detected_at``, when this monitor detected it (wall clock of the job's driver, or the
detection time stored with the finding). The one-off alerts page on the detection time: a
loss detected twenty minutes after it happened still pages, and a stamp in the future does
not keep an alert firing (docs/metrics.md, "Why one-off findings are timestamps").

The cumulative counters (``events_total``, ``lost_total``, the health counters) are
**replay-safe**: a batch whose id is at or below :attr:`Snapshot.counted_batch` (the last one
counted, seeded from the store at start or seen live) adds nothing -- Spark reruns the batch
after a crash between the store write and the checkpoint.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from monitor.contract.state import BrokerView, OpenFinding, PartitionView, open_finding, view_of
from monitor.model import ClusterModel, Finding, FindingState, ModelConfig, Severity
from monitor.model.stamps import believed

PKey = tuple[str, str, int]
#: (cluster, topic, partition, kind); a cluster-level one-off finding (the controller's
#: unclean-election counter) has topic "" and partition -1 (exported as partition="").
EventKey = tuple[str, str, int, str]


@dataclass(slots=True)
class Health:
    """The monitor's own view of itself (see docs/metrics.md, "The monitor itself")."""

    last_batch_at: float = 0.0  # Unix seconds
    newest_observed_at: dict[str, int] = field(default_factory=dict)  # cluster -> ms
    events_processed: int = 0
    events_dead_lettered: int = 0
    #: The job's own tallies since it started (``streaming.job.JobCounters`` and the
    #: store's compactor), read by :meth:`JobExporter.watch`.
    offsets_skipped: int = 0
    records_too_large: int = 0
    store_compaction_errors: int = 0
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


@dataclass(frozen=True, slots=True)
class LastEvent:
    """The last one-off finding of a kind on a partition (or a cluster)."""

    #: When the event happened (ms, the telemetry's clock): dashboards.
    at: int
    severity: Severity
    #: When the monitor detected it (ms, wall clock): the one-off alerts. None when no
    #: believable time is known (a stored finding stamped beyond the clock's tolerance):
    #: then no detection series is exported for it, and it pages nothing.
    detected_at: int | None
    finding_id: str

    @property
    def kept_since(self) -> int:
        """What the retention counts from: the detection, else the event."""
        return self.at if self.detected_at is None else self.detected_at


@dataclass(frozen=True, slots=True)
class SnapshotCopy:
    """What one scrape reads: shallow copies taken under the lock (the values are
    immutable), so the page is rendered without holding it."""

    partitions: dict[PKey, PartitionView]
    topic_open: dict[tuple[str, str], tuple[OpenFinding, ...]]
    brokers: dict[tuple[str, int], BrokerView]
    last_events: dict[EventKey, LastEvent]
    last_loss: dict[PKey, int]
    events_total: dict[tuple[str, str], int]
    lost_total: dict[tuple[str, str], int]
    health: Health
    event_retention_s: float
    #: How long the lock was held to take this copy (seconds).
    lock_held_s: float


class Snapshot:
    """The exporter's state. ``event_retention_s``: how long one-off findings stay visible
    after their detection. ``clock``: the wall clock one-off findings are detected by."""

    def __init__(
        self,
        event_retention_s: float = 86_400.0,
        max_stamp_ahead_ms: int | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.lock = threading.Lock()
        self.partitions: dict[PKey, PartitionView] = {}
        self.topic_open: dict[tuple[str, str], tuple[OpenFinding, ...]] = {}
        self.brokers: dict[tuple[str, int], BrokerView] = {}
        self.last_events: dict[EventKey, LastEvent] = {}
        self.last_loss: dict[PKey, int] = {}
        self.events_total: dict[tuple[str, str], int] = {}
        self.lost_total: dict[tuple[str, str], int] = {}
        #: The highest batch id whose findings and stats the counters hold (-1: none).
        self.counted_batch = -1
        #: When this monitor's memory began: the detection time of its store's first
        #: findings (seeded: the earliest stored ``detected_at``; else the first batch with
        #: findings). An event that happened before it is *history* -- a new store being
        #: rebuilt from the events topic (an upgrade), or what a monitor without a store
        #: replays: the monitor cannot know whether it was paged before, so such a finding
        #: counts as detected at its event time and pages only while that is recent, as
        #: before detection times existed. Everything after it pages from its detection,
        #: however late. None: not known yet.
        self.memory_since_ms: int | None = None
        self.health = Health()
        if max_stamp_ahead_ms is not None:
            self.health.max_stamp_ahead_ms = max_stamp_ahead_ms
        self.event_retention_s = event_retention_s
        self.clock = clock

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    # -- reading ---------------------------------------------------------------------------

    def copy(self) -> SnapshotCopy:
        """A scrape's view: O(entries) dict copies under the lock, nothing else."""
        with self.lock:
            started = time.perf_counter()
            h = self.health
            out = SnapshotCopy(
                dict(self.partitions),
                dict(self.topic_open),
                dict(self.brokers),
                dict(self.last_events),
                dict(self.last_loss),
                dict(self.events_total),
                dict(self.lost_total),
                replace(h, newest_observed_at=dict(h.newest_observed_at)),
                self.event_retention_s,
                0.0,
            )
            held = time.perf_counter() - started
        return replace(out, lock_held_s=held)

    # -- updates --------------------------------------------------------------------------

    def is_new_batch(self, batch_id: int) -> bool:
        """Whether the counters have not yet counted ``batch_id`` (a replay has been)."""
        with self.lock:
            return batch_id > self.counted_batch

    def record_findings(
        self, findings: Iterable[Finding], detected_at: int | None = None, *, count: bool = True
    ) -> None:
        """Remember one batch's one-off findings (the conditions come with the partition
        views), detected at ``detected_at`` (ms, wall clock; default: now).

        A finding already known -- the last one of its partition and kind, by id: a replayed
        batch, or one seeded from the store -- keeps its detection time, so a replay never
        pages twice. A finding whose event happened before :attr:`memory_since_ms` is
        history (see there): its event time stands for its detection. ``count``: add them
        to the counters (False for a replayed batch).
        """
        if detected_at is None:
            detected_at = self.now_ms()
        with self.lock:
            # The batch's last finding per partition and kind is the one that stays; the
            # same choice as the seed's (detection, then event time, then id).
            last: dict[EventKey, Finding] = {}
            for f in findings:
                if self.memory_since_ms is None:
                    self.memory_since_ms = detected_at  # the first findings this store gets
                if f.state is not FindingState.EVENT:
                    continue
                if count:
                    self._count(f)
                key = _event_key(f)
                seen = last.get(key)
                if seen is None or (f.at, f.id) >= (seen.at, seen.id):
                    last[key] = f
            for key, f in last.items():
                known = self.last_events.get(key)
                if known is not None and known.finding_id == f.id:
                    continue  # a replay of what is already shown: keep its detection time
                self._remember(key, f, self._detection(f, detected_at))

    def seed_findings(
        self,
        found: Iterable[tuple[Finding, int | None]],
        upto_batch: int,
        now_ms: int,
        store_has_state: bool = False,
    ) -> None:
        """Load stored findings with their stored detection times (``detected_at``, ms).

        A row written before the store kept detection times has None: its event time
        ``at`` stands in -- never now, which would page every old loss again at an
        upgrade. So does the event time of history (an event before the store's first
        detection, :attr:`memory_since_ms`), as when it was live. A detection time beyond
        the clock's tolerance in the future cannot be believed: no detection series for
        that finding (the job that stored it paged it then); a small skew is clamped to
        now. The counters count every stored finding once, and every batch up to
        ``upto_batch`` (the store's newest) counts as counted.

        The memory begins at the earliest stored detection time; a store with rows from
        before detection times were kept, or with partition state but no finding yet, has
        remembered since before anything it will be given: no history then.
        """
        ahead = self.health.max_stamp_ahead_ms
        found = list(found)
        stamps = [stored for _, stored in found]
        if stamps and None not in stamps:
            self.memory_since_ms = min(int(d) for d in stamps if d is not None)
        elif stamps or store_has_state:
            self.memory_since_ms = 0
        rows: list[tuple[int, Finding, int | None]] = []
        for f, stored in found:
            if f.state is not FindingState.EVENT:
                continue
            t = self._detection(f, f.at if stored is None else int(stored))
            d = min(t, now_ms) if believed(t, now_ms, ahead) else None
            rows.append((f.at if d is None else d, f, d))
        rows.sort(key=lambda r: (r[0], r[1].at, r[1].id))
        with self.lock:
            for _, f, d in rows:
                self._count(f)
                self._remember(_event_key(f), f, d)
            self.counted_batch = max(self.counted_batch, upto_batch)

    def _detection(self, f: Finding, detected_at: int) -> int:
        """When ``f`` counts as detected: ``detected_at``, or its event time for history."""
        since = self.memory_since_ms
        return min(f.at, detected_at) if since is not None and f.at < since else detected_at

    def _count(self, f: Finding) -> None:
        kind = str(f.kind)
        key = (f.cluster, kind)
        self.events_total[key] = self.events_total.get(key, 0) + 1
        if kind == "committed_data_loss" and f.topic is not None and f.partition is not None:
            tkey = (f.cluster, f.topic)
            lost = int(f.details.get("lost_count", 0))
            self.lost_total[tkey] = self.lost_total.get(tkey, 0) + lost

    def _remember(self, key: EventKey, f: Finding, detected_at: int | None) -> None:
        self.last_events[key] = LastEvent(f.at, f.severity, detected_at, f.id)
        if key[3] == "committed_data_loss" and key[2] >= 0:
            self.last_loss[key[:3]] = int(f.details.get("lost_count", 0))

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
            now_ms = self.now_ms()
            for ps in model.partitions.values():
                self.health.saw(ps.cluster, ps.last_seen, now_ms)

    def expire(self, now_ms: int) -> None:
        """Forget one-off findings detected longer ago than the retention."""
        horizon = now_ms - int(self.event_retention_s * 1000)
        with self.lock:
            for key in [k for k, e in self.last_events.items() if e.kept_since < horizon]:
                del self.last_events[key]


def _event_key(f: Finding) -> EventKey:
    if f.topic is None or f.partition is None:
        return (f.cluster, "", -1, str(f.kind))
    return (f.cluster, f.topic, f.partition, str(f.kind))
