"""The Prometheus exporter inside the job's driver (``monitor stream --metrics-port``).

Wires :mod:`monitor.exporter` to a running query:

* every micro-batch, :class:`~monitor.exporter.driver.SnapshotHook` refreshes the snapshot
  with the batch's state rows and findings;
* at start, the snapshot is **seeded from the state store** (latest row of every partition,
  every stored finding): after a restart ``/metrics`` shows the open conditions and the
  recent one-off findings at once, not only the partitions the next batch touches — an
  unclean election that happened just before the restart still pages;
* a watcher thread keeps the monitor's own health current: whether the query runs, and how
  many records of the events topic it has not read yet (``monitor_input_lag_records``,
  from the query's last progress: the source's latest offsets minus the batch's end offsets).

The hook never raises into Spark: an exporter problem is logged and counted, the job goes on.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path
from typing import Any

from monitor.exporter import MetricsServer, Snapshot
from monitor.exporter.collector import PerPartition
from monitor.exporter.driver import (
    BatchLike,
    SnapshotHook,
    apply_global_conditions,
    finding_from_dict,
    view_from_state_row,
)
from streaming.store import is_local

log = logging.getLogger("monitor.exporter.job")


def input_lag(progress: dict[str, Any] | None) -> int:
    """Records the query has not read: Σ (latest offset - end offset) over its Kafka sources.

    -1 when unknown (no progress yet, or a source without offsets).

    >>> input_lag({"sources": [{"latestOffset": '{"t":{"0":10,"1":5}}',
    ...                         "endOffset": '{"t":{"0":7,"1":5}}'}]})
    3
    >>> input_lag(None)
    -1
    """
    if not progress:
        return -1
    total = 0
    for src in progress.get("sources") or []:
        latest, end = _offsets(src.get("latestOffset")), _offsets(src.get("endOffset"))
        if not isinstance(latest, dict) or not isinstance(end, dict):
            return -1
        for topic, parts in latest.items():
            done = end.get(topic) or {}
            for part, offset in parts.items():
                total += max(0, int(offset) - int(done.get(part, 0)))
    return total


def _offsets(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return None
    return value


class JobExporter:
    """``/metrics`` of the job: start it before the query, ``watch`` the query, ``stop``."""

    def __init__(
        self,
        store: str,
        host: str = "127.0.0.1",
        port: int = 9308,
        per_partition: PerPartition = "findings",
        event_retention_s: float = 86_400.0,
    ) -> None:
        self.store = store
        self.snapshot = Snapshot(event_retention_s)
        self.server = MetricsServer(
            self.snapshot, host=host, port=port, per_partition=per_partition
        )
        self._hook = SnapshotHook(self.snapshot)
        # SnapshotHook marks the engine running; here the query does not exist yet: until
        # ``watch`` sees it active, a (re)started job seeded from a fresh store must not
        # report monitor_up 1 while Spark is still starting.
        self.snapshot.health.running = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.hook_errors = 0

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        self.seed()
        self.server.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.snapshot.health.running = False
        self.server.stop()

    def seed(self) -> int:
        """Load the store's latest partition rows and findings; returns partitions loaded."""
        if not is_local(self.store) or not Path(self.store).exists():
            return 0  # remote stores: the first batches fill the snapshot
        from streaming import store as st

        try:
            rows = st.current_state(self.store)
            found = [finding_from_dict(d) for d in st.findings(self.store)]
        except Exception as e:  # a damaged store must not stop the job
            log.warning("exporter: could not seed from the store %s: %s", self.store, e)
            return 0
        snap = self.snapshot
        views = [view_from_state_row(r) for r in rows]
        snap.update_partitions(views)
        found.sort(key=lambda f: f.at)
        snap.record_findings(found)
        apply_global_conditions(snap, found)
        with snap.lock:
            for v in views:
                h = snap.health.newest_observed_at
                h[v.cluster] = max(h.get(v.cluster, 0), v.last_seen)
        log.info(
            "exporter: seeded %d partitions, %d findings from %s",
            len(views),
            len(found),
            self.store,
        )
        return len(views)

    def hook(self, batch: BatchLike) -> None:
        """The driver hook: never lets an exporter problem fail the batch."""
        try:
            self._hook(batch)
            self.snapshot.expire(int(time.time() * 1000))
        except Exception:
            self.hook_errors += 1
            log.exception("exporter: batch %s not applied to /metrics", batch.batch_id)

    def watch(self, query: Any, every_s: float = 2.0) -> None:
        """Keep ``running`` and the input lag current from the query (a daemon thread)."""

        def loop() -> None:
            while not self._stop.wait(every_s):
                try:
                    active = bool(query.isActive)
                    lag = input_lag(query.lastProgress)
                except Exception:  # the JVM is going away
                    active, lag = False, -1
                with self.snapshot.lock:
                    self.snapshot.health.running = active
                    self.snapshot.health.input_lag_records = lag

        self._thread = threading.Thread(target=loop, name="exporter-watch", daemon=True)
        self._thread.start()
