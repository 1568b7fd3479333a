"""What the soak has seen so far: its windows and cycles, every finding as it arrived, the
alert changes, the health and RSS series. The findings reader, the alert watcher and the
sampler write it from their threads; the cycles wait on it; the judge reads it at the end.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from monitor.dev.soak.plan import MOVE_TOPIC, TOPIC, subject
from monitor.model import Finding


@dataclass
class Window:
    kind: str  # setup | quiet | fault | outage
    cycle: int
    start: float  # Unix seconds
    end: float = 0.0


@dataclass
class MonitorFault:
    name: str
    started: float  # Unix seconds
    ended: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)
    recovered: bool = False
    recovery_s: float | None = None


@dataclass
class Cycle:
    index: int
    lab_fault: str
    victim: int | None  # the broker struck (None: a topic fault)
    quiet: Window
    fault: Window
    expected: dict[str, dict[str, str]] = field(default_factory=dict)  # plan.expected
    monitor_faults: list[MonitorFault] = field(default_factory=list)
    detection_s: dict[str, float] = field(default_factory=dict)  # kind -> first arrival
    resolved_s: float | None = None
    healthy_s: float | None = None  # after resolved_s, until the monitor up, nothing firing
    findings: list[dict[str, Any]] = field(default_factory=list)
    matched: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The cycle as ``soak.json`` holds it."""
        return {
            "index": self.index,
            "lab_fault": self.lab_fault,
            "victim": self.victim,
            "expected": self.expected,
            "quiet": [round(self.quiet.start, 1), round(self.quiet.end, 1)],
            "fault": [round(self.fault.start, 1), round(self.fault.end, 1)],
            "monitor_faults": [asdict(m) for m in self.monitor_faults],
            "detection_s": self.detection_s,
            "resolved_s": self.resolved_s,
            "healthy_s": self.healthy_s,
            "matched": self.matched,
            "findings": self.findings,
            "problems": self.problems,
        }


def clock(s: float) -> str:
    return f"[{int(s) // 60:02d}:{int(s) % 60:02d}]"


class Record:
    """The run's shared record; ``lock`` guards the findings (``arrivals``, ``open``)."""

    def __init__(self, out: Callable[[str], None] = print) -> None:
        self.say = out
        self.t0 = time.time()
        self.windows: list[Window] = []
        self.cycles: list[Cycle] = []
        self.arrivals: list[tuple[float, Finding]] = []  # (Unix arrival time, finding)
        self.open: dict[tuple[Any, ...], Finding] = {}
        self.alert_log: list[dict[str, Any]] = []  # changes of Prometheus's alert set
        self.quiet_alerts: list[dict[str, Any]] = []
        self.health: list[dict[str, Any]] = []
        self.rss: list[dict[str, Any]] = []
        self.unexpected_exits: list[dict[str, Any]] = []
        #: /metrics still showing conditions the findings topic had resolved.
        self.stale_metrics: list[dict[str, Any]] = []
        self.outage: dict[str, Any] = {}
        self.lock = threading.Lock()

    def clock(self, t: float) -> str:
        """``[mm:ss]`` of Unix time ``t`` since the run began."""
        return clock(t - self.t0)

    def on_finding(self, f: Finding) -> None:
        now = time.time()
        with self.lock:
            self.arrivals.append((now, f))
            key = (f.kind, f.topic, f.partition, f.broker)
            if f.state.value == "open":
                self.open[key] = f
            elif f.state.value == "resolved":
                self.open.pop(key, None)
        if f.topic in (TOPIC, MOVE_TOPIC, None):
            where = f.subject
            self.say(f"   {self.clock(now)} finding {f.kind:<18} {f.state.value:<8} {where}")

    def window_now(self) -> Window | None:
        return self.windows[-1] if self.windows and not self.windows[-1].end else None

    def calm(self) -> bool:
        """No condition open on the lab."""
        with self.lock:
            return not self.open

    def arrived(self, since: int, kind: str, state: str | None) -> dict[str, float]:
        """When a ``kind`` finding (in ``state``) first arrived, per partition
        (``"topic/partition"``; ``"topic/None"``: the topic), among the arrivals from index
        ``since`` on."""
        out: dict[str, float] = {}
        with self.lock:
            for t, f in self.arrivals[since:]:
                wanted = f.kind == kind and (state is None or f.state == state)
                if wanted and f.topic is not None:
                    out.setdefault(subject(f.topic, f.partition), t)
        return out
