"""Converting the Spark job's state rows and findings into the exporter's snapshot."""

from __future__ import annotations

from monitor.contract.state import EpochRow, PartitionView
from monitor.exporter import Snapshot
from monitor.exporter.driver import apply_global_conditions
from monitor.model import Finding

ROW = {
    "cluster": "lab",
    "topic": "orders",
    "partition": 3,
    "leader": -1,
    "leader_epoch": 7,
    "isr": [],
    "replicas": [1, 2],
    "high_watermark": 500,
    "max_committed_hw": 500,
    "leader_leo": 500,
    "uncommitted": 0,
    "replica_states": [
        {
            "broker": 1,
            "leo": 500,
            "lag_offsets": 0,
            "lag_ms": 0,
            "caught_up_at": 1,
            "observed_at": 10,
            "in_isr": False,
        }
    ],
    "open_findings": [
        {
            "kind": "offline",
            "severity": "critical",
            "opened_at": 9,
            "broker": None,
            "details": '{"last_leader": 1}',
        },
        {
            "kind": "under_min_isr",
            "severity": "critical",
            "opened_at": 9,
            "broker": None,
            "details": '{"isr_size": 0, "min_isr": 2}',
        },
    ],
    "severity": "critical",
    "lineage": [{"epoch": 7, "start_offset": -1, "leader": None, "at": 9}],
    "late_events": 0,
    "duplicate_events": 0,
    "updated_at": 10,
}


def test_state_row_becomes_a_view() -> None:
    v = PartitionView.from_row(ROW)
    assert v.leader is None and v.leader_epoch == 7 and v.high_watermark == 500
    assert v.min_isr == 2  # learnt from the ISR condition's details
    assert [o.kind for o in v.open_findings] == ["offline", "under_min_isr"]
    assert v.open_findings[0].details == {"last_leader": 1}
    assert v.lineage == (EpochRow(7, -1, None, 9),)


def test_topic_and_broker_conditions_follow_open_and_resolved() -> None:
    snap = Snapshot()
    base = {"cluster": "lab", "severity": "warning", "at": 5, "opened_at": 5, "details": {}}
    risk = dict(
        base,
        kind="durability_risk",
        state="open",
        topic="orders",
        partition=None,
        broker=None,
        details={"reasons": ["rf_1"]},
    )
    silent = dict(
        base,
        kind="stale_telemetry",
        state="open",
        topic=None,
        partition=None,
        broker=3,
        details={"alive": False},
    )
    apply_global_conditions(snap, [Finding.from_dict(risk), Finding.from_dict(silent)])
    assert [o.kind for o in snap.topic_open[("lab", "orders")]] == ["durability_risk"]
    assert not snap.brokers[("lab", 3)].alive
    resolved = [
        Finding.from_dict(dict(risk, state="resolved", at=9)),
        Finding.from_dict(dict(silent, state="resolved", at=9)),
    ]
    apply_global_conditions(snap, resolved)
    assert snap.topic_open[("lab", "orders")] == ()
    assert snap.brokers[("lab", 3)].alive and snap.brokers[("lab", 3)].open == ()
