"""A partition's state outside the model has one shape (``monitor.contract.state``): the
view, its row, the row's JSON text and its Spark schema agree with each other."""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from typing import Any

from monitor.contract.events import parse_event, to_model
from monitor.contract.state import (
    REFRESHED_FIELDS,
    STATE_DDL,
    PartitionView,
    row_content,
    state_json,
    view_of,
)
from monitor.contract.store import FINDING_COLUMNS
from monitor.dev.synth import generate
from monitor.model import ClusterModel, Finding, FindingKind, FindingState, ModelConfig, Severity
from monitor.model.state import EpochEntry, PartitionState, ReplicaState
from tests.scenarios import SCENARIOS, accepted_lines


def _records() -> list[bytes]:
    records = [line for sc in SCENARIOS if not sc.config for line in accepted_lines(sc)]
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
    assert [name for name, _ in FINDING_COLUMNS] == [*f.to_dict(), "detected_at", "seq"]
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


def _without_refreshed(text: str) -> dict[str, Any]:
    row = json.loads(text)
    for name in REFRESHED_FIELDS:
        outer, _, inner = name.partition(".")
        if inner:
            row[outer] = [{k: v for k, v in x.items() if k != inner} for x in row[outer]]
        else:
            row.pop(outer)
    return row


def _changed(value: Any) -> Any:
    """Another value of the same shape (a field changed, one at a time)."""
    if isinstance(value, bool) or value is None:
        return 7 if value is None else not value
    if isinstance(value, int):
        return value + 3
    if isinstance(value, str):
        return value + "x"
    if isinstance(value, tuple):  # the last item moved (some are of a fixed length)
        return (*value[:-1], _changed(value[-1])) if value else (99,)
    if isinstance(value, list):
        return [*value, EpochEntry(99, 5, 1, 1)]
    if isinstance(value, dict):
        return {**value, 99: ReplicaState(leo=5)}
    return None  # arrays, election checks: not in the row


def _assigned(obj: Any, name: str, value: Any, may_refuse: bool) -> bool:
    """Set ``obj.name``; False if its type refuses the value and ``may_refuse``."""
    try:
        setattr(obj, name, value)
    except TypeError:
        if not may_refuse:
            raise
        return False
    return True


def _mutations(ps: PartitionState) -> list[tuple[str, PartitionState]]:
    """``ps`` with each of its fields changed, and each field of each replica and lineage
    entry: every way a state can move."""
    out: list[tuple[str, PartitionState]] = []
    for f in dataclasses.fields(PartitionState):
        if f.name in ("cluster", "topic", "partition", "open"):
            continue  # the row's key; open conditions make row_content None
        value = getattr(ps, f.name)
        # A None field takes a number or a string, whichever its type admits (the compiled
        # model's states check what is assigned); an election (neither) is not in the row.
        for new in (_changed(value),) if value is not None else (7, "x"):
            m = copy.deepcopy(ps)
            if new is not None and _assigned(m, f.name, new, may_refuse=value is None):
                out.append((f.name, m))
                break
    for b in ps.replica_states:
        for f in dataclasses.fields(ReplicaState):
            m = copy.deepcopy(ps)
            rs = m.replica_states[b]
            if (new := _changed(getattr(rs, f.name))) is not None:
                setattr(rs, f.name, new)
                out.append((f"replica_states.{f.name}", m))
    for i, e in enumerate(ps.lineage):
        for j in range(len(e)):
            m = copy.deepcopy(ps)
            m.lineage[i] = EpochEntry(*[_changed(x) if k == j else x for k, x in enumerate(e)])
            out.append((f"lineage.{j}", m))
    return out


def test_row_content_moves_whenever_the_row_moves_outside_its_refreshed_fields() -> None:
    """The Spark job writes a partition's row when ``row_content`` changed (and refreshes
    it now and then): whatever moves the row outside :data:`REFRESHED_FIELDS` must move
    ``row_content``. Every field of real states (no open condition: those rows are always
    written), and of their replicas and lineage, changed one at a time."""
    model = ClusterModel(ModelConfig())
    moved: dict[str, int] = {}
    checked = 0
    for i, raw in enumerate(_records()):
        model.apply(to_model(parse_event(raw)))
        if i % 97:
            continue
        for ps in list(model.partitions.values())[:20]:
            if ps.open:
                continue
            ts = model.topics.get((ps.cluster, ps.topic))
            config = ts.config if ts is not None else None
            row, content = _without_refreshed(state_json(ps, config)), row_content(ps)
            for name, m in _mutations(ps):
                if _without_refreshed(state_json(m, config)) != row:
                    moved[name] = moved.get(name, 0) + 1
                    assert row_content(m) != content, name
                checked += 1
    assert checked > 5_000, checked
    # What the rows say besides the refreshed fields, all seen moving.
    expected = {"leader", "leader_epoch", "isr", "replicas", "lineage", "late_events"}
    expected |= {"duplicate_events", "replica_states", "lineage.0", "lineage.1", "lineage.2"}
    assert expected <= set(moved), sorted(moved)
