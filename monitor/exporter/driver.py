"""Feeding the exporter from the Spark job's driver (``streaming/``).

The job calls its driver hooks after every micro-batch with the batch's findings (dicts)
and the touched partitions' state rows. :class:`SnapshotHook` turns those into the
snapshot the exporter serves: partition views from the rows, topic- and broker-level
conditions (``durability_risk``, a silent broker) from the open/resolved findings, one-off
findings as last-event times, and the job's own health.

Why the driver and not a separate process reading the state store: the driver has every
touched partition's state the moment a batch commits, so the exporter is never staler than
one batch, and there is one process to run. The cost is that /metrics is down while the
job restarts — which is exactly what the ``monitor_down`` alert is for.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from monitor.contract.views import OpenView, PartitionView, ReplicaView
from monitor.exporter.snapshot import BrokerView, Snapshot
from monitor.model import Finding, FindingKind, FindingState, Severity

_SEV = {"info": 0, "warning": 1, "critical": 2}


class BatchLike(Protocol):
    batch_id: int
    findings: list[dict[str, Any]]
    states: Any
    stats: dict[str, int]


def _details(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str) and raw:
        loaded = json.loads(raw)
        return loaded if isinstance(loaded, dict) else {}
    return {}


def view_from_state_row(r: Mapping[str, Any], min_isr: int | None = None) -> PartitionView:
    """A :class:`PartitionView` from one of the job's state rows (``STATE_DDL``)."""
    opens = tuple(
        OpenView(
            o["kind"],
            _SEV.get(o["severity"], 1),
            o.get("broker"),
            int(o["opened_at"]),
            _details(o.get("details")),
        )
        for o in (r.get("open_findings") or [])
    )
    if min_isr is None and r.get("min_isr") is not None:
        min_isr = int(r["min_isr"])
    if min_isr is None:
        for o in opens:  # the ISR conditions carry the topic's min ISR
            if "min_isr" in o.details:
                min_isr = int(o.details["min_isr"])
    hw = r.get("high_watermark")
    return PartitionView(
        cluster=r["cluster"],
        topic=r["topic"],
        partition=int(r["partition"]),
        leader=r.get("leader") if r.get("leader") is not None and r["leader"] >= 0 else None,
        leader_epoch=int(r.get("leader_epoch") or 0),
        replicas=tuple(r.get("replicas") or ()),
        isr=tuple(r.get("isr") or ()),
        min_isr=min_isr,
        hw=int(hw) if hw is not None else -1,
        max_hw=int(r.get("max_committed_hw") or -1),
        uncommitted=int(r.get("uncommitted") or 0),
        hw_lag_ms=int(r.get("hw_lag_ms") or 0),
        replica_views=tuple(
            ReplicaView(
                int(x["broker"]),
                int(x["leo"]),
                int(x.get("lag_offsets") or 0),
                int(x.get("lag_ms") or 0),
                int(x.get("observed_at") or -1),
            )
            for x in (r.get("replica_states") or [])
        ),
        open=opens,
        lineage=tuple(
            (int(e["epoch"]), int(e["start_offset"]), e.get("leader"), int(e["at"]))
            for e in (r.get("lineage") or [])
        ),
        last_seen=int(r.get("updated_at") or -1),
    )


def finding_from_dict(d: Mapping[str, Any]) -> Finding:
    return Finding(
        FindingKind(d["kind"]),
        FindingState(d["state"]),
        Severity.parse(d["severity"]),
        d["cluster"],
        d.get("topic"),
        d.get("partition"),
        int(d["at"]),
        int(d["opened_at"]),
        d.get("broker"),
        _details(d.get("details")),
    )


def apply_global_conditions(snap: Snapshot, findings: Iterable[Finding]) -> None:
    """Topic- and broker-level conditions (no partition) from open/resolved findings."""
    with snap.lock:
        for f in findings:
            if f.partition is not None or f.state is FindingState.EVENT:
                continue
            ov = OpenView(str(f.kind), int(f.severity), f.broker, f.opened_at, dict(f.details))
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
    """A driver hook for the Spark job: ``job.start(..., hooks=[SnapshotHook(snapshot)])``."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.snapshot.health.running = True

    def __call__(self, batch: BatchLike) -> None:
        rows = [r.asDict(recursive=True) for r in batch.states.collect()]
        # A partition written twice in a batch (its events, then its bucket's timer): the
        # later row wins, as in the store (``streaming.store.NEWEST_FIRST``).
        rows.sort(key=lambda r: -1 if r.get("row_seq") is None else r["row_seq"])
        views = [view_from_state_row(r) for r in rows]
        findings = [finding_from_dict(d) for d in batch.findings]
        snap = self.snapshot
        snap.update_partitions(views)
        snap.record_findings(findings)
        apply_global_conditions(snap, findings)
        with snap.lock:
            h = snap.health
            for v in views:
                h.newest_observed_at[v.cluster] = max(
                    h.newest_observed_at.get(v.cluster, 0), v.last_seen
                )
            h.events_processed += int(batch.stats.get("accepted", 0))
            h.events_dead_lettered += int(batch.stats.get("dead_lettered", 0))
            h.last_batch_at = time.time()
