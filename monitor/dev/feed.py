"""Replayed incidents, played live: the exporter's snapshot follows the incidents' events in
(compressed) real time, so Prometheus scrapes series that move as they did in the incident.

The incidents are the event files of ``tests/data`` (real telemetry shapes: an unclean
election that loses committed data, an ISR below min ISR, a follower stuck in the ISR).
Each event's ``observed_at`` is moved to the wall clock, divided by ``speed``; the model's
time thresholds are divided by the same factor, so every finding the incident produces at
its own pace is produced here too — just ``speed`` times sooner. Used by the dashboard
tests (``tests/dashboards``) and by ``python -m monitor.dev.panels --replay``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from monitor.contract.events import parse_event, to_model
from monitor.dev.processes.prom import PrometheusProcess, free_port
from monitor.exporter import MetricsServer, Snapshot
from monitor.model import ClusterModel, ModelConfig
from monitor.model.order import order_key

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
SCENARIOS = ("unclean_election", "under_min_isr_and_recovery", "follower_stuck_in_isr")


def compressed_config(speed: float) -> ModelConfig:
    base = ModelConfig()
    return ModelConfig(
        follower_lag_ms=max(1, int(base.follower_lag_ms / speed)),
        hw_lag_ms=max(1, int(base.hw_lag_ms / speed)),
        stale_after_ms=max(1, int(base.stale_after_ms / speed)),
        flapping_window_ms=max(1, int(base.flapping_window_ms / speed)),
        clock_skew_ms=max(1, int(base.clock_skew_ms / speed)),
    )


def scheduled_events(
    scenarios: Sequence[str], start_ms: int, speed: float, gap_ms: int = 0
) -> list[dict[str, Any]]:
    """The scenarios' events, ``observed_at`` moved to start at ``start_ms`` and divided by
    ``speed``; scenario *i* starts ``i * gap_ms`` later than the first."""
    out: list[dict[str, Any]] = []
    for i, name in enumerate(scenarios):
        events = [json.loads(line) for line in (DATA / f"{name}.jsonl").read_text().splitlines()]
        t0 = min(e["observed_at"] for e in events)
        for e in events:
            e["observed_at"] = start_ms + i * gap_ms + int((e["observed_at"] - t0) / speed)
            out.append(e)
    out.sort(key=lambda e: order_key(int(e["observed_at"]), e["kind"]))
    return out


@dataclass
class IncidentFeed:
    """Plays events into ``snapshot`` at their (moved) times, in a thread."""

    snapshot: Snapshot
    events: list[dict[str, Any]]
    speed: float
    tick_s: float = 0.5

    def __post_init__(self) -> None:
        self.model = ClusterModel(compressed_config(self.speed))
        self.done = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="incident-feed")
        self.findings: list[Any] = []

    @property
    def end_ms(self) -> int:
        return int(self.events[-1]["observed_at"]) if self.events else 0

    def start(self) -> None:
        self.snapshot.health.running = True
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _publish(self, found: list[Any], now_ms: int) -> None:
        self.findings += found
        self.snapshot.update_from_model(self.model)
        self.snapshot.record_findings(found)
        with self.snapshot.lock:
            self.snapshot.health.last_batch_at = now_ms / 1000
            self.snapshot.health.input_lag_records = 0

    def _run(self) -> None:
        pending = list(self.events)
        while pending and not self._stop.is_set():
            now_ms = int(time.time() * 1000)
            found = []
            while pending and int(pending[0]["observed_at"]) <= now_ms:
                raw = json.dumps(pending.pop(0))
                found += self.model.apply(to_model(parse_event(raw)))
                with self.snapshot.lock:
                    self.snapshot.health.events_processed += 1
            found += self.model.tick(now_ms)
            self._publish(found, now_ms)
            self._stop.wait(self.tick_s)
        self.done.set()


@contextmanager
def replayed_prometheus(
    workdir: Path,
    scenarios: Sequence[str] = SCENARIOS,
    speed: float = 2.0,
    gap_s: float = 5.0,
    lead_s: float = 4.0,
) -> Iterator[tuple[PrometheusProcess, IncidentFeed]]:
    """The exporter (``per_partition="all"``) fed live by the incidents, scraped every
    second by the real Prometheus with the shipped config and rules. The feed starts
    ``lead_s`` after Prometheus is up, so the first samples show the healthy start."""
    snap = Snapshot()
    port = free_port()
    server = MetricsServer(snap, port=port, per_partition="all")
    prom = PrometheusProcess(
        workdir,
        exporter=f"127.0.0.1:{port}",
        # No collector here, and alerts go nowhere: closed ports, not the default ones
        # (another run's collector or Alertmanager may be listening there).
        collector=f"127.0.0.1:{free_port()}",
        alertmanager=f"127.0.0.1:{free_port()}",
        scrape_interval="1s",
        evaluation_interval="1s",
    )
    server.start()
    feed: IncidentFeed | None = None
    try:
        prom.start()
        start_ms = int((time.time() + lead_s) * 1000)
        events = scheduled_events(scenarios, start_ms, speed, int(gap_s * 1000))
        feed = IncidentFeed(snap, events, speed)
        feed.start()
        yield prom, feed
    finally:
        if feed is not None:
            feed.stop()
        prom.stop()
        server.stop()
