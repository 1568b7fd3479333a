"""The soak's plan: its settings, the topic under load, the faults it rotates through, and
what each lab fault must cause."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from monitor.dev.demo.monitor_stack import STREAM_ENV

TOPIC = "soak"
#: Both partitions on the same replica order: an election picks the same new leader for
#: both, so "a follower" (a broker leading neither) always exists.
ASSIGNMENTS = {0: [1, 2, 3], 1: [1, 2, 3]}
LAB_FAULTS = ("pause", "stop", "leader_kill")
MONITOR_FAULTS = ("stream_kill", "events_broker_restart", "collector_kill", "prometheus_restart")
#: What each lab fault must cause, per partition of the soak topic, exactly once: events
#: (one id) and conditions (one open, one resolve of that open).
_FOLLOWER = {"isr_shrink": "event", "isr_expand": "event"}
_FOLLOWER |= {"under_replicated": "condition", "at_min_isr": "condition"}
REQUIRED: dict[str, dict[str, str]] = {
    "pause": _FOLLOWER,
    "stop": _FOLLOWER,
    "leader_kill": {**_FOLLOWER, "leader_election": "event"},
}
#: Findings a lab fault may also cause, any number of times (they depend on sampling
#: moments): the stalled or dead broker's lag and silence.
COLLATERAL = frozenset({"follower_lag", "hw_lag", "stale_telemetry"})
#: The monitor-health alerts of deploy/prometheus/rules/replication.yml.
HEALTH_ALERTS = ("monitor_down", "monitor_behind", "collector_down")
#: The job has caught up when its newest telemetry is this fresh (the model's stale_after_ms
#: is 15 s here).
CAUGHT_UP_AGE_S = 10.0
#: How long the killed collector stays down before its restart.
COLLECTOR_DOWN_S = 5.0


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
        return LAB_FAULTS[i % len(LAB_FAULTS)], names

    def settings(self) -> dict[str, Any]:
        """The settings as ``soak.json`` records them."""
        return {
            **asdict(self),
            "topic": TOPIC,
            "assignments": ASSIGNMENTS,
            "stream_env": STREAM_ENV,
        }
