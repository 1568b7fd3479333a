"""The exporter in the Spark job's driver (``monitor stream --metrics-port``).

The job calls its driver hooks after every micro-batch with the batch's findings (dicts)
and the touched partitions' state rows:

* :class:`SnapshotHook` turns those into the snapshot the exporter serves: partition views
  from the rows, topic- and broker-level conditions (``durability_risk``, a silent broker)
  from the open/resolved findings, one-off findings as last-event times, and the job's own
  health;
* :class:`JobExporter` wires it to a running query: at start the snapshot is **seeded from
  the state store** (the latest row of every partition, every stored finding) so that after
  a restart ``/metrics`` shows the open conditions and the recent one-off findings at once
  -- an unclean election just before the restart still pages; a watcher thread keeps the
  monitor's own health current (whether the query runs, and how many records of the events
  topic it has not read yet, from the query's last progress). The hook never raises into
  Spark: an exporter problem is logged and counted, the job goes on.

Why the driver and not a separate process reading the state store: the driver has every
touched partition's state the moment a batch commits, so the exporter is never staler than
one batch, and there is one process to run. The cost is that /metrics is down while the
job restarts -- which is exactly what the ``monitor_down`` alert is for.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import unquote, urlparse

from monitor.contract.state import BrokerView, OpenFinding, PartitionView
from monitor.contract.store import STORE_PAIR
from monitor.exporter.collector import DEFAULT_MAX_PARTITIONS, PerPartition
from monitor.exporter.server import MetricsServer
from monitor.exporter.snapshot import Snapshot
from monitor.model import Finding, FindingKind, FindingState
from monitor.query.store import StoreError, StoreReader

log = logging.getLogger("monitor.exporter")


class BatchLike(Protocol):
    batch_id: int
    findings: list[dict[str, Any]]
    states: Any
    stats: dict[str, int]


def apply_global_conditions(snap: Snapshot, findings: Iterable[Finding]) -> None:
    """Topic- and broker-level conditions (no partition) from open/resolved findings."""
    with snap.lock:
        for f in findings:
            if f.partition is not None or f.state is FindingState.EVENT:
                continue
            ov = OpenFinding(str(f.kind), f.severity, f.opened_at, f.broker, dict(f.details))
            if f.topic is not None:
                key = (f.cluster, f.topic)
                rest = tuple(o for o in snap.topic_open.get(key, ()) if o.kind != ov.kind)
                snap.topic_open[key] = (*rest, ov) if f.state is FindingState.OPEN else rest
            elif f.broker is not None:
                bkey = (f.cluster, f.broker)
                old = snap.brokers.get(bkey, BrokerView(f.cluster, f.broker, True, f.at))
                rest = tuple(o for o in old.open if o.kind != ov.kind)
                opened = f.state is FindingState.OPEN
                alive = not (
                    opened
                    and f.kind == FindingKind.STALE_TELEMETRY
                    and f.details.get("alive") is False
                )
                snap.brokers[bkey] = BrokerView(
                    f.cluster, f.broker, alive, f.at, (*rest, ov) if opened else rest
                )


class SnapshotHook:
    """A driver hook for the Spark job: ``job.start(..., hooks=[SnapshotHook(snapshot)])``.

    The batch's one-off findings are detected now (the snapshot's clock: the driver's wall
    clock), or at the batch's ``detected_at`` (ms) when it carries the time the job stored
    with them. A batch the counters already counted (its id at or below
    ``snapshot.counted_batch``: Spark reruns a batch after a crash between the store write
    and the checkpoint; the restarted exporter was seeded from that store) adds nothing to
    them, and a finding already shown keeps its detection time: a replay changes no counter
    and pages nothing twice. The views and conditions are applied all the same (the same
    rows again).
    """

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.snapshot.health.running = True

    def __call__(self, batch: BatchLike) -> None:
        rows = [r.asDict(recursive=True) for r in batch.states.collect()]
        # A partition written twice in a batch (its events, then its bucket's timer): the
        # later row wins, as in the store (``monitor.contract.store.NEWEST_FIRST``).
        rows.sort(key=lambda r: -1 if r.get("row_seq") is None else r["row_seq"])
        views = [PartitionView.from_row(r) for r in rows]
        findings = [Finding.from_dict(d) for d in batch.findings]
        snap = self.snapshot
        now_ms = snap.now_ms()
        # The time the job stored with the batch's findings, when it hands it over (then a
        # restarted exporter, seeded from the store, shows the very same); else now.
        stored = getattr(batch, "detected_at", None)
        detected = now_ms if stored is None else min(int(stored), now_ms)
        fresh = snap.is_new_batch(batch.batch_id)
        snap.update_partitions(views)
        snap.record_findings(findings, detected, count=fresh)
        apply_global_conditions(snap, findings)
        with snap.lock:
            h = snap.health
            for v in views:
                h.saw(v.cluster, v.updated_at, now_ms)
            # Each cluster's newest telemetry the batch applied, rows written or not (the
            # job writes an idle partition's row only now and then: its views alone would
            # age an idle cluster into "stale" and page monitor_down).
            for cluster, at in (getattr(batch, "observed", None) or {}).items():
                h.saw(cluster, int(at), now_ms)
            if fresh:
                h.events_processed += int(batch.stats.get("accepted", 0))
                h.events_dead_lettered += int(batch.stats.get("dead_lettered", 0))
                snap.counted_batch = max(snap.counted_batch, batch.batch_id)
            h.last_batch_at = now_ms / 1000


# --- the exporter of a running job ----------------------------------------------------------


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
    """A progress report's offsets: ``{"topic": {"partition": offset}}`` (JSON or parsed)."""
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
        port: int = 9478,
        per_partition: PerPartition = "findings",
        event_retention_s: float = 86_400.0,
        max_stamp_ahead_ms: int | None = None,
        max_partitions: int = DEFAULT_MAX_PARTITIONS,
        clock: Callable[[], float] = time.time,
        web_config_file: Path | None = None,
    ) -> None:
        self.store = store
        self.snapshot = Snapshot(event_retention_s, max_stamp_ahead_ms, clock)
        self.server = MetricsServer(
            self.snapshot,
            host=host,
            port=port,
            per_partition=per_partition,
            max_partitions=max_partitions,
            clock=clock,
            web_config_file=web_config_file,
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
        """Load the store's latest partition rows and findings; returns partitions loaded.

        One-off findings keep their stored detection times (the event time for rows
        written before the store kept them: never now, which would page every old loss
        again); the counters count every stored finding once, and every stored batch
        counts as counted (a replay of the newest adds nothing).

        A local folder or a ``file://`` URI is read. Other remote stores (``s3a://``,
        ``hdfs://``) are not: the snapshot is filled by the first batches, the counters
        restart from 0 (Prometheus reads that as a counter reset) and a replayed batch is
        counted as new.
        """
        root = _local_path(self.store)
        if root is None or not root.exists():
            return 0  # remote stores: the first batches fill the snapshot
        self._history_before(_paired_since(root))
        try:
            reader = StoreReader(root)
            views = (
                [PartitionView.from_row(r) for r in reader.current()] if reader.has_state else []
            )
            found = reader.all_findings_detected()
            upto = reader.last_findings_batch()
        except StoreError:
            return 0  # nothing written yet
        except Exception as e:  # a damaged store must not stop the job
            log.warning("exporter: could not seed from the store %s: %s", self.store, e)
            return 0
        snap = self.snapshot
        snap.update_partitions(views)
        now_ms = snap.now_ms()
        snap.seed_findings(found, upto, now_ms, store_has_state=bool(views))
        self._history_before(_paired_since(root))
        apply_global_conditions(snap, [f for f, _ in found])  # in the store's order
        with snap.lock:
            for v in views:
                snap.health.saw(v.cluster, v.updated_at, now_ms)
        log.info(
            "exporter: seeded %d partitions, %d findings (batches up to %d) from %s",
            len(views),
            len(found),
            upto,
            self.store,
        )
        return len(views)

    def _history_before(self, since_ms: int) -> None:
        """Events before ``since_ms`` -- when the checkpoint now writing the store began --
        are history the job replays from the events topic (:data:`STORE_PAIR`): the memory
        begins no earlier."""
        if since_ms > 0:
            snap = self.snapshot
            with snap.lock:
                snap.memory_since_ms = max(snap.memory_since_ms or 0, since_ms)

    def hook(self, batch: BatchLike) -> None:
        """The driver hook: never lets an exporter problem fail the batch."""
        try:
            self._hook(batch)
            self.snapshot.expire(self.snapshot.now_ms())
        except Exception as e:
            if _interrupted(e):
                # The query is stopping mid-batch: the batch is not committed and runs again
                # after a restart -- nothing was lost, no exporter problem.
                log.info("exporter: batch %s interrupted by the query stopping", batch.batch_id)
                return
            self.hook_errors += 1
            log.exception("exporter: batch %s not applied to /metrics", batch.batch_id)

    def watch(
        self,
        query: Any,
        every_s: float = 2.0,
        tallies: Callable[[], dict[str, int]] | None = None,
    ) -> None:
        """Keep ``running`` and the input lag current from the query (a daemon thread), and
        the job's own tallies (``tallies()``: :class:`Health` field -> value, e.g.
        ``offsets_skipped``) with them."""

        def loop() -> None:
            while not self._stop.wait(every_s):
                try:
                    active = bool(query.isActive)
                    lag = input_lag(query.lastProgress)
                except Exception:  # the JVM is going away
                    active, lag = False, -1
                counts = tallies() if tallies is not None else {}
                with self.snapshot.lock:
                    self.snapshot.health.running = active
                    self.snapshot.health.input_lag_records = lag
                    for name, value in counts.items():
                        setattr(self.snapshot.health, name, value)

        self._thread = threading.Thread(target=loop, name="exporter-watch", daemon=True)
        self._thread.start()


def _paired_since(root: Path) -> int:
    """When the checkpoint writing the store at ``root`` began (ms; 0: not known)."""
    try:
        record = json.loads((root / STORE_PAIR).read_text())
        return int(record.get("since") or 0) if isinstance(record, dict) else 0
    except (OSError, ValueError, TypeError):
        return 0


def _local_path(store: str) -> Path | None:
    """The folder of a local store (a path, or a ``file:`` URI); None for a remote one.

    >>> _local_path("file:///var/lib/store"), _local_path("file:/var/lib/store")
    (PosixPath('/var/lib/store'), PosixPath('/var/lib/store'))
    >>> _local_path("s3a://bucket/store"), _local_path("store")
    (None, PosixPath('store'))
    """
    parsed = urlparse(store)
    if parsed.scheme == "file":
        return Path(unquote(parsed.path)) if parsed.netloc in ("", "localhost") else None
    return None if "://" in store else Path(store)


def _interrupted(error: BaseException) -> bool:
    """Whether a hook's Spark call failed because the query is being stopped (the JVM
    thread running the batch was interrupted), not because of the exporter."""
    return "java.lang.InterruptedException" in str(error) or isinstance(error, InterruptedError)
