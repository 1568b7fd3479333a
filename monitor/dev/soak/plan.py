"""The soak's plan: its settings, the topics under load, the faults it rotates through, and
what each lab fault must cause on which partitions."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from monitor.dev.demo.monitor_stack import STREAM_ENV

TOPIC = "soak"
#: Both partitions on the same replica order: an election picks the same new leader for
#: both, so "a follower" (a broker leading neither) always exists.
ASSIGNMENTS = {0: [1, 2, 3], 1: [1, 2, 3]}
#: The topic the ``reassign`` fault moves: RF 2 (``min.insync.replicas=1``: an RF 2 topic
#: that stays writable with one replica out, no ``durability_risk``), so that a third broker
#: is free to move a replica to; under traffic too, and filled at the start with
#: ``MOVE_FILL_MB`` so that a throttled copy (``MOVE_THROTTLE``) takes a minute or more.
MOVE_TOPIC = "soak-move"
MOVE_ASSIGNMENTS = {0: [1, 2]}
MOVE_FILL_MB = 8
MOVE_THROTTLE = 100_000  # bytes/s
#: ``recreate``: the soak topic deleted, and recreated this long after the metadata stopped
#: listing it (well under the model's ``stale_after_ms``, 15 s here).
RECREATE_GAP_S = 3.0
LAB_FAULTS = ("pause", "stop", "leader_kill", "recreate", "reassign")
MONITOR_FAULTS = ("stream_kill", "events_broker_restart", "collector_kill", "prometheus_restart")
#: What each lab fault must cause, exactly once, on each partition it hits: events (one id)
#: and conditions (one open, one resolve of that open). A broker fault hits the partitions
#: the broker holds a replica of (pause and stop choose a broker that leads none; leader_kill
#: kills the soak topic's leader, which may lead or follow ``soak-move``, or hold none of
#: it); ``recreate`` the soak topic's partitions, ``reassign`` those of ``soak-move`` (its
#: adding replica joins the ISR: one ``isr_expand``; the replica moved away leaves it
#: without a shrink).
_FOLLOWER = {"isr_shrink": "event", "isr_expand": "event"}
_FOLLOWER |= {"under_replicated": "condition", "at_min_isr": "condition"}
REQUIRED: dict[str, dict[str, str]] = {
    "pause": _FOLLOWER,
    "stop": _FOLLOWER,
    "leader_kill": _FOLLOWER,  # plus leader_election where the victim led
    "recreate": {"topic_recreated": "event"},
    "reassign": {"reassignment": "condition", "isr_expand": "event"},
}
#: ``recreate`` when the collector read the metadata without the topic: one ``topic_deleted``
#: of the topic as well (its partitions are forgotten; listed again under a new id, each
#: says ``topic_recreated``). A cycle that sees it requires it besides ``REQUIRED``.
DELETED: dict[str, dict[str, str]] = {f"{TOPIC}/None": {"topic_deleted": "event"}}
#: The monitor faults strike once this finding is on every partition the lab fault hits
#: (``recreate``: once the recreation or the deletion is reported).
MARKER: dict[str, tuple[str, str | None]] = {
    "pause": ("under_replicated", "open"),
    "stop": ("under_replicated", "open"),
    "leader_kill": ("under_replicated", "open"),
    "reassign": ("reassignment", "open"),
}
#: Findings a lab fault may also cause, any number of times (they depend on sampling
#: moments): the stalled or dead broker's lag and silence. Recreating a topic and moving a
#: replica leave no broker behind: nothing.
_STALLED = frozenset({"follower_lag", "hw_lag", "stale_telemetry"})
COLLATERAL: dict[str, frozenset[str]] = {
    "pause": _STALLED,
    "stop": _STALLED,
    "leader_kill": _STALLED,
    "recreate": frozenset(),
    "reassign": frozenset(),
}
#: The monitor-health alerts of monitor/assets/prometheus/rules/replication.yml.
HEALTH_ALERTS = ("monitor_down", "monitor_behind", "collector_down")
#: The job has caught up when its newest telemetry is this fresh (the model's stale_after_ms
#: is 15 s here).
CAUGHT_UP_AGE_S = 10.0
#: How long the killed collector stays down before its restart.
COLLECTOR_DOWN_S = 5.0

#: The lab's partitions before a fault: ``{"topic/partition": (leader, replicas)}``.
Layout = Mapping[str, tuple[int, tuple[int, ...]]]


def subject(topic: str, partition: int | None) -> str:
    """``"topic/partition"``; ``"topic/None"`` for a topic-level finding."""
    return f"{topic}/{partition}"


def victim_of(fault: str, i: int, layout: Layout, brokers: list[int]) -> int | None:
    """The broker cycle ``i``'s fault strikes: ``leader_kill`` the soak topic's leader,
    ``pause`` and ``stop`` a broker that leads no partition (in turn); None for the topic
    faults."""
    if fault == "leader_kill":
        return layout[subject(TOPIC, 0)][0]
    if fault in ("pause", "stop"):
        leaders = {leader for leader, _ in layout.values()}
        idle = [b for b in brokers if b not in leaders]
        return idle[i % len(idle)]
    return None


def move_targets(layout: Layout, brokers: list[int]) -> dict[int, list[int]]:
    """``reassign``: each ``soak-move`` partition's follower moves to the broker that holds
    none of it; the leader stays (no election inside the move)."""
    targets: dict[int, list[int]] = {}
    for p in MOVE_ASSIGNMENTS:
        leader, replicas = layout[subject(MOVE_TOPIC, p)]
        targets[p] = [leader, next(b for b in brokers if b not in replicas)]
    return targets


def expected(fault: str, victim: int | None, layout: Layout) -> dict[str, dict[str, str]]:
    """What ``fault`` must cause: ``{"topic/partition": {kind: "event" | "condition"}}``
    for every partition it hits (:data:`REQUIRED`)."""
    out: dict[str, dict[str, str]] = {}
    for s, (leader, replicas) in layout.items():
        topic = s.rpartition("/")[0]
        if fault == "recreate":
            hit = topic == TOPIC
        elif fault == "reassign":
            hit = topic == MOVE_TOPIC
        else:
            hit = victim in replicas
        if hit:
            out[s] = dict(REQUIRED[fault])
            if fault == "leader_kill" and victim == leader:
                out[s]["leader_election"] = "event"
    return out


@dataclass(frozen=True)
class SoakPlan:
    """The settings of one run (``monitor soak --help`` says what each means)."""

    minutes: float
    cycles: int | None  # exactly this many cycles; None: as many as ``minutes`` hold
    cycle_seconds: float
    quiet_seconds: float
    fault_seconds: float
    monitor_faults_per_cycle: int
    outage_seconds: float
    warmup_seconds: float
    rss_tolerance: float
    lab_faults: tuple[str, ...] = LAB_FAULTS  # the rotation's lab faults, in order

    def another_cycle(self, i: int, elapsed: float) -> bool:
        """Whether cycle ``i`` runs, ``elapsed`` seconds after the first began: all of
        ``cycles``, or while a whole cycle fits in the time left before the outage."""
        if self.cycles is not None:
            return i < self.cycles
        budget = self.minutes * 60 - self.outage_seconds
        return i == 0 or elapsed + self.cycle_seconds <= budget

    def faults_of(self, i: int) -> tuple[str, list[str]]:
        """Cycle ``i``'s lab fault and monitor faults: each list in rotation."""
        per = self.monitor_faults_per_cycle
        names = [MONITOR_FAULTS[(i * per + k) % len(MONITOR_FAULTS)] for k in range(per)]
        return self.lab_faults[i % len(self.lab_faults)], names

    def settings(self) -> dict[str, Any]:
        """The settings as ``soak.json`` records them."""
        return {
            **asdict(self),
            "topic": TOPIC,
            "assignments": ASSIGNMENTS,
            "move_topic": MOVE_TOPIC,
            "move_assignments": MOVE_ASSIGNMENTS,
            "stream_env": STREAM_ENV,
        }
