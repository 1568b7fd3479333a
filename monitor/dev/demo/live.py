"""The demo's live view: each finding as the Spark job writes it to the findings topic, each
Prometheus alert as it fires or resolves, each page as Alertmanager delivers it -- and the
moments the incident summary measures from (phases, faults, first firing, first page)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from monitor.dev.processes.prom import PrometheusProcess, WebhookReceiver
from monitor.model import Finding, FindingKind, Severity
from monitor.query.render import summary

K = FindingKind


@dataclass
class Phase:
    name: str
    started: float
    detected: dict[str, float] = field(default_factory=dict)


class LiveView:
    """Shows what the monitor says about ``topic`` as it says it, and remembers when."""

    def __init__(self, topic: str, out: Callable[[str], None] = print) -> None:
        self.topic = topic
        self.say = out
        self.findings: list[Finding] = []  # as read from the findings topic
        self.phases: list[Phase] = []
        self.fault_times: dict[str, float] = {}
        self.alert_first_firing: dict[str, float] = {}
        self.page_first: dict[str, float] = {}  # first delivery to the pager (webhook)
        self._phase_start = 0

    def on_finding(self, f: Finding) -> None:
        if f.topic not in (self.topic, None) or (
            f.severity < Severity.WARNING and f.kind not in (K.LEADER_ELECTION, K.ISR_EXPAND)
        ):
            return
        if f.topic is None and f.kind != K.STALE_TELEMETRY:
            return
        phase = self.phases[-1] if self.phases else None
        if phase is not None and f.state.value in ("open", "event"):
            phase.detected.setdefault(str(f.kind), time.monotonic())
        mark = {"critical": "!!", "warning": " !", "info": "  "}[f.severity.label]
        self.say(f"  {mark} {f.kind:<20} {f.state.value:<8} {f.subject:<18} {summary(f)}")

    def phase(self, name: str) -> None:
        self.phases.append(Phase(name, time.monotonic()))
        self._phase_start = len(self.findings)
        self.say(f"\n== {name}")

    def wait_for(self, what: str, pred: Callable[[Finding], bool], timeout: float) -> Finding:
        deadline = time.monotonic() + timeout
        seen = self._phase_start  # only what this phase caused
        while time.monotonic() < deadline:
            found = self.findings[seen:]
            seen += len(found)
            for f in found:
                if pred(f):
                    return f
            time.sleep(0.2)
        raise TimeoutError(f"the monitor did not report {what} within {timeout:.0f}s")

    def watch_alerts(
        self, prom: PrometheusProcess, pager: WebhookReceiver, stop: threading.Event
    ) -> None:
        """Every second until ``stop``: pages delivered, alerts firing and resolved."""
        firing: set[str] = set()
        while not stop.wait(1.0):
            for name, t in sorted(pager.first_received().items()):
                if name not in self.page_first:
                    self.page_first[name] = t
                    self.say(f"  >> PAGE delivered  {name}")
            try:
                now = {a["labels"]["kind"] for a in prom.alerts() if a["state"] == "firing"}
            except Exception:
                continue
            for name in sorted(now - firing):
                self.alert_first_firing.setdefault(name, time.monotonic())
                self.say(f"  >> alert FIRING    {name}")
            for name in sorted(firing - now):
                self.say(f"  >> alert resolved  {name}")
            firing = now
