"""State rows are written when they say something new, and refreshed now and then.

The operator (without Spark, on the fakes of the state handle) runs an idle-heavy
synthetic cluster with faults, a ``min.insync.replicas`` change and every seed scenario
(deletions, recreations, elections, losses), batch after batch with ticks. After every
batch, each partition's newest row -- as the store and the exporter keep it -- must equal
the model's state apart from the fields refreshed now and then
(``monitor.contract.state.REFRESHED_FIELDS``: offsets, stamps, durations), and be no older
than ``state_refresh_ms`` of the partition's own telemetry; each batch's stats carry each
cluster's newest telemetry (the exporter's freshness, rows or not). And the point of it:
far fewer rows than one per touched partition per batch.
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
import pytest

from monitor.contract.state import REFRESHED_FIELDS, state_json
from monitor.dev.synth import generate
from monitor.model import ModelConfig
from streaming import operator as op
from tests.scenarios import SCENARIOS, accepted_lines
from tests.streaming.helpers import Clock, FakeHandle, payload, renamed, route

BUCKETS = 3
PERIOD_MS = 60_000


def _batches() -> list[list[bytes]]:
    """One batch per synthetic round (80 % of the partitions idle), a topic's
    ``min.insync.replicas`` raised then restored, then the scenarios in slices."""
    synth = list(generate(200, 40, fault_rate=0.02, seed=5, idle_fraction=0.8))
    batches: list[list[bytes]] = []
    by_round: dict[int, list[bytes]] = {}
    for e in synth:
        by_round.setdefault(e["observed_at"] // 5_000, []).append(
            json.dumps(e, separators=(",", ":")).encode()
        )
    batches.extend(by_round[k] for k in sorted(by_round))
    t = max(e["observed_at"] for e in synth)
    for i, min_isr in enumerate((3, 2)):
        batches.append(
            [json.dumps({"schema_version": 1, "kind": "topic_config", "cluster": "synth",
                         "observed_at": t + 1_000 * (i + 1), "topic": "topic-00001",
                         "replication_factor": 3, "min_insync_replicas": min_isr,
                         "unclean_leader_election_enable": False}).encode()]
        )  # fmt: skip
    scenarios: list[bytes] = []
    for sc in SCENARIOS:
        if not sc.config:
            scenarios.extend(renamed(accepted_lines(sc), sc.name))
    step = max(1, len(scenarios) // 40)
    batches.extend(scenarios[i : i + step] for i in range(0, len(scenarios), step))
    return batches


def _strip(row: dict[str, Any]) -> dict[str, Any]:
    """A row without its refreshed fields (offsets, stamps), and its open conditions
    without their details: a tick moves an open condition's numbers (``silent_for_ms``) in
    the state without writing a row -- the row says them as of the partition's last event
    or finding."""
    row = dict(row)
    row["open_findings"] = [
        {k: v for k, v in o.items() if k != "details"} for o in row["open_findings"]
    ]
    for name in REFRESHED_FIELDS:
        outer, _, inner = name.partition(".")
        if inner:
            row[outer] = [{k: v for k, v in x.items() if k != inner} for x in row[outer]]
        else:
            row.pop(outer)
    return row


class _Run:
    """The operator over :func:`_batches` with a given ``state_refresh_ms``."""

    def __init__(self, period_ms: int, monkeypatch: pytest.MonkeyPatch) -> None:
        self.cache: dict[Any, Any] = {}
        monkeypatch.setattr(op, "_CACHE", self.cache)
        self.settings = op.OperatorSettings(
            buckets=BUCKETS, tick_ms=10**9, catchup_slack_ms=10**12, model=ModelConfig(),
            cache_scope=f"rows-{period_ms}", state_refresh_ms=period_ms,
        )  # fmt: skip
        self.state: dict[int, dict[str, Any]] = {b: {} for b in range(BUCKETS)}
        #: Each partition's newest row (the highest row_seq wins, as in the store).
        self.latest: dict[str, tuple[int, dict[str, Any]]] = {}
        self.rows = 0
        self.touched = 0

    def batch(self, records: list[bytes], offset: int, now: int) -> dict[str, int]:
        """Run one batch (events, then a tick); return the stats' newest telemetry."""
        per_bucket: dict[int, list[str]] = {b: [] for b in range(BUCKETS)}
        for i, raw in enumerate(records):
            for b, owner in route(raw, BUCKETS):
                per_bucket[b].append(payload(raw, offset + i, owner))
        observed: dict[str, int] = {}
        for b in range(BUCKETS):
            proc = op.make_processor(self.settings)
            proc.init(FakeHandle(self.state[b]))
            key = (op.bucket_keys(BUCKETS)[b],)
            frames: list[Any] = []
            if per_bucket[b]:
                rows = iter([pd.DataFrame({"payload": per_bucket[b], "value": None})])
                frames.extend(proc.handleInputRows(key, rows, Clock(now)))
            frames.extend(proc.handleExpiredTimer(key, Clock(now), None))
            for f in frames:
                for out, k, v, seq, n in zip(
                    f["out"], f["key"], f["value"], f["seq"], f["n_events"], strict=True
                ):
                    if out == "state":
                        self.rows += 1
                        if k not in self.latest or seq >= self.latest[k][0]:
                            self.latest[k] = (seq, json.loads(bytes(v)))
                    elif out == "stats" and n and v is not None:
                        for c, at in json.loads(bytes(v)).items():
                            observed[c] = max(observed.get(c, at), at)
        return observed

    def models(self) -> list[Any]:
        return [b.model for (_, b) in self.cache.values()]


def _run(period_ms: int, monkeypatch: pytest.MonkeyPatch) -> _Run:
    run = _Run(period_ms, monkeypatch)
    offset, now = 0, 0
    for records in _batches():
        events = [json.loads(r) for r in records]
        now = max(now, max(e["observed_at"] for e in events) + 1_000)
        observed = run.batch(records, offset, now)
        offset += len(records)
        # Every partition: its newest row is its state apart from the stamps, and not
        # older than the period of its own telemetry.
        live = set()
        for model in run.models():
            for ps in model.partitions.values():
                k = f"{ps.cluster}/{ps.topic}/{ps.partition}"
                live.add(k)
                ts = model.topics.get((ps.cluster, ps.topic))
                expected = json.loads(state_json(ps, ts.config if ts is not None else None))
                assert k in run.latest, f"{k}: no row"
                row = run.latest[k][1]
                assert _strip(row) == _strip(expected), k
                if period_ms:
                    assert ps.last_seen - row["updated_at"] <= period_ms, (k, row["updated_at"])
        # A forgotten partition's newest row is its tombstone.
        for k, (_, row) in run.latest.items():
            assert (k in live) == (row["deleted_at"] is None), k
        # The stats: each cluster's newest telemetry among the partitions the batch touched
        # (its events', and a changed topic configuration's, whose rows carry it).
        touched: dict[str, int] = {}
        newest: dict[str, int] = {}
        for model in run.models():
            for ps in model.partitions.values():
                newest[ps.cluster] = max(newest.get(ps.cluster, -1), ps.last_seen)
        for e in events:
            if e["kind"] in ("partition", "replica"):
                for model in run.models():
                    ps = model.partitions.get((e["cluster"], e["topic"], e["partition"]))
                    if ps is not None:
                        touched[ps.cluster] = max(touched.get(ps.cluster, -1), ps.last_seen)
        assert {c: observed.get(c) for c in touched} == touched
        assert all(at <= newest[c] for c, at in observed.items()), (observed, newest)
        run.touched += len(
            {(e["cluster"], e["topic"], e["partition"]) for e in events if "partition" in e}
        )
    return run


def test_rows_say_what_changed_and_are_refreshed(monkeypatch: pytest.MonkeyPatch) -> None:
    every = _run(0, monkeypatch)
    changed = _run(PERIOD_MS, monkeypatch)
    # 0: one row per touched partition per batch (and a tick's changes).
    assert every.rows >= every.touched
    # A fleet at a 5 s cadence refreshed every 60 s: a partition without news writes a
    # row about every 12th round, busy or idle.
    assert changed.rows < 0.45 * every.rows, (changed.rows, every.rows)
