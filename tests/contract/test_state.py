"""A partition's state outside the model has one shape (``monitor.contract.state``): the
view, its row, the row's JSON text and its Spark schema agree with each other."""

from __future__ import annotations

import dataclasses
import json
import re

from monitor.contract.events import parse_event, to_model
from monitor.contract.state import STATE_DDL, PartitionView, state_json, view_of
from monitor.contract.store import FINDING_COLUMNS
from monitor.dev.synth import generate
from monitor.model import ClusterModel, Finding, FindingKind, FindingState, ModelConfig, Severity
from tests.scenarios import SCENARIOS


def _records() -> list[bytes]:
    records = [
        line for sc in SCENARIOS if not sc.config for line in sc.path.read_bytes().splitlines()
    ]
    synth = list(generate(300, 12, fault_rate=0.05, seed=3))
    # min.insync.replicas changes re-judge a topic's partitions (opening, resolving and
    # refreshing conditions of partitions that got no event).
    t = max(e["observed_at"] for e in synth)
    for i, min_isr in enumerate((3, 4, 5, 2)):
        synth.append(
            {"schema_version": 1, "kind": "topic_config", "cluster": "synth",
             "observed_at": t + 1_000 * (i + 1), "topic": "topic-00001",
             "replication_factor": 3, "min_insync_replicas": min_isr,
             "unclean_leader_election_enable": False}
        )  # fmt: skip
    return records + [json.dumps(e).encode() for e in synth]


def test_state_json_is_the_row_as_json_and_the_row_reads_back_as_the_view() -> None:
    """For thousands of real model states (healthy, degraded, with open conditions, with
    and without their topic's configuration): ``state_json`` is ``to_row`` as compact JSON,
    and ``from_row`` of that JSON gives the view back, field for field."""
    model = ClusterModel(ModelConfig())
    checked = with_open = 0

    def check() -> None:
        nonlocal checked, with_open
        for ps in model.partitions.values():
            ts = model.topics.get((ps.cluster, ps.topic))
            for config in {None, ts.config if ts is not None else None}:
                deleted_at = ps.last_seen + 1 if checked % 7 == 0 else None  # a tombstone
                view = view_of(ps, config, deleted_at)
                expected = json.dumps(view.to_row(), separators=(",", ":"), default=str)
                assert state_json(ps, config, deleted_at) == expected
                back = PartitionView.from_row(json.loads(expected))
                if view.min_isr is None:  # unknown: read back from an ISR condition, if any
                    back = dataclasses.replace(back, min_isr=None)
                assert back == view
                checked += 1
                with_open += bool(ps.open)

    for i, raw in enumerate(_records()):
        ev = to_model(parse_event(raw))
        model.apply(ev)
        if i % 1000 == 999:
            model.tick(ev.observed_at + 120_000)  # stale everywhere: open conditions
            check()
    check()
    assert checked > 5_000 and with_open > 1_000, (checked, with_open)


def test_the_spark_schema_is_the_views_fields() -> None:
    """STATE_DDL is derived from the view: its top-level columns are the view's fields, in
    order, and every row key is a column."""
    top = [m.group(1) for m in re.finditer(r"(?:^|, )(\w+) (?=[a-z])", STATE_DDL)]
    names = [f for f in PartitionView.__dataclass_fields__]
    assert [n for n in top if n in names] == names
    assert STATE_DDL.startswith("cluster string, topic string, partition int, leader int")
    assert "replica_states array<struct<broker: int, leo: long," in STATE_DDL


def test_the_findings_table_is_the_findings_dict_form() -> None:
    f = Finding(FindingKind.OFFLINE, FindingState.OPEN, Severity.CRITICAL, "c", "t", 0, 5, 5)
    assert [name for name, _ in FINDING_COLUMNS] == [*f.to_dict(), "detected_at"]
    assert Finding.from_dict(f.to_dict()) == f


def test_old_rows_read_as_before() -> None:
    """Rows of older stores: an offline leader written as -1, a missing min ISR taken from
    the ISR condition, missing counters as zero."""
    v = PartitionView.from_row(
        {"cluster": "c", "topic": "t", "partition": 0, "leader": -1, "leader_epoch": 3,
         "isr": [], "replicas": [1, 2], "high_watermark": 10,
         "open_findings": [{"kind": "under_min_isr", "severity": "critical", "opened_at": 1,
                            "broker": None, "details": '{"min_isr": 2}'}]}
    )  # fmt: skip
    assert v.leader is None and v.min_isr == 2
    assert (v.uncommitted, v.hw_lag_ms, v.late_events, v.max_committed_hw) == (0, 0, 0, -1)
    assert v.open_findings[0].severity is Severity.CRITICAL
