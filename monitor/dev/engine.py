"""An in-process engine: the model driven directly by the collector's events.

For the demo, tests and small clusters. It calls the same :class:`ClusterModel` the Spark
job runs per bucket; it keeps the exporter's snapshot fresh and remembers every finding.
The Spark job (``streaming/``) is the engine for large clusters and for restarts from a
checkpoint; this one keeps everything in memory.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable

from monitor.contract.events import AnyEvent, to_model
from monitor.exporter.snapshot import Snapshot
from monitor.model import ClusterModel, Finding, ModelConfig
from monitor.model.order import event_order, unfold


class LocalEngine:
    """Thread-safe: ``feed`` from the collector's thread, read findings from another."""

    def __init__(
        self,
        config: ModelConfig | None = None,
        snapshot: Snapshot | None = None,
        on_finding: Callable[[Finding], None] | None = None,
    ) -> None:
        self.model = ClusterModel(config)
        self.snapshot = snapshot if snapshot is not None else Snapshot()
        self.findings: list[Finding] = []
        self.on_finding = on_finding
        self._lock = threading.Lock()
        self.snapshot.health.running = True

    def feed(self, events: Iterable[AnyEvent], now_ms: int | None = None) -> list[Finding]:
        """Apply a batch of events (then the time-driven checks at ``now_ms``)."""
        out: list[Finding] = []
        with self._lock:
            n = 0
            unfolded = (ev for e in events for ev in unfold(to_model(e)))
            for ev in sorted(unfolded, key=event_order):
                out.extend(self.model.apply(ev))
                n += 1
            if now_ms is not None:
                out.extend(self.model.tick(now_ms))
            self.findings.extend(out)
            self.snapshot.update_from_model(self.model)
            self.snapshot.record_findings(out)
            self.snapshot.health.events_processed += n
            self.snapshot.health.last_batch_at = time.time()
            self.snapshot.health.input_lag_records = 0
        if self.on_finding is not None:
            for f in out:
                self.on_finding(f)
        return out
