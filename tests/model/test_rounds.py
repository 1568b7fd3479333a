"""Round records and replica-event streams give the same findings.

A collector may send a partition's round as one ``partition`` event carrying its replicas'
samples (``replica_samples``) or, as older collectors and every recording do, as one
``replica`` event per sample. :func:`monitor.dev.rounds.fold` turns the second form into the
first; here every scenario of ``tests/data`` and property-generated streams are replayed in
both forms, and the model must apply the same events in the same order and report the same
findings, byte for byte -- through ``monitor replay`` (a reorder buffer over the file) and
through the sorted batch the local engine and the Spark operator apply.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from monitor.contract.events import parse_event, to_model, validate_event
from monitor.contract.state import view_of
from monitor.dev.kafka_sim import Sim
from monitor.dev.rounds import fold
from monitor.dev.synth import generate
from monitor.model import ClusterModel, Finding, ModelConfig, ModelEvent
from monitor.model.order import event_order, unfold
from monitor.query.replay import replay
from tests.model.strategies import SIMULATED, simulated, streams
from tests.scenarios import SCENARIOS, Scenario, accepted_lines


def _lines(events: list[Any]) -> list[bytes]:
    return [e if isinstance(e, bytes) else json.dumps(e).encode() for e in events]


def _replayed(
    lines: list[bytes], config: dict[str, Any]
) -> tuple[list[str], list[ModelEvent], list[tuple[int, str]]]:
    found: list[Finding] = []
    applied: list[ModelEvent] = []
    rejected: list[tuple[int, str]] = []
    replay(
        lines,
        ClusterModel(ModelConfig(**config)),
        found.append,
        lambda n, r: rejected.append((n, r)),
        on_applied=applied.append,
    )
    return [json.dumps(f.to_dict(), sort_keys=True) for f in found], applied, rejected


def _batch(events: list[dict[str, Any]], config: dict[str, Any]) -> list[str]:
    """One sorted batch, then a tick: what the local engine and the operator do."""
    model = ClusterModel(ModelConfig(**config))
    unfolded = [ev for e in events for ev in unfold(to_model(validate_event(e)))]
    ordered = sorted(unfolded, key=event_order)
    found = [f for ev in ordered for f in model.apply(ev)]
    if ordered:
        found += model.tick(max(ev.observed_at for ev in ordered) + 60_000)
    return [json.dumps(f.to_dict(), sort_keys=True) for f in found]


def _scenario_events(sc: Scenario) -> list[Any]:
    out: list[Any] = []
    for raw in sc.path.read_bytes().splitlines():
        try:
            out.append(json.loads(raw))
        except ValueError:
            out.append(raw)
    return out


@pytest.mark.parametrize("sc", SCENARIOS, ids=lambda s: s.name)
def test_a_scenario_as_round_records_gives_the_same_findings(sc: Scenario) -> None:
    # (Without the records the contract refuses: folded, a refused metadata record would
    # take its round's samples with it.)
    events = (
        [json.loads(line) for line in accepted_lines(sc)] if sc.rejects else _scenario_events(sc)
    )
    folded = fold(e for e in events if isinstance(e, dict))
    found, applied, _ = _replayed(_lines(events), sc.config)
    found_r, applied_r, _ = _replayed(_lines(folded), sc.config)
    assert applied_r == applied
    assert found_r == found


def test_the_scenarios_do_fold() -> None:
    """The test above compares something: most replica events of the scenarios travel in
    round records once folded."""
    replicas = rounds = 0
    for sc in SCENARIOS:
        events = [e for e in _scenario_events(sc) if isinstance(e, dict)]
        replicas += sum(1 for e in events if e.get("kind") == "replica")
        rounds += sum(len(e.get("replica_samples", ())) for e in fold(events))
    assert replicas > 500
    assert rounds > 0.6 * replicas


def test_a_round_record_is_its_replica_events_then_its_metadata() -> None:
    round_ = {
        "schema_version": 1,
        "kind": "partition",
        "cluster": "c",
        "observed_at": 1_000,
        "topic": "t",
        "partition": 0,
        "leader": 1,
        "leader_epoch": 2,
        "replicas": [1, 2],
        "isr": [1, 2],
        "replica_samples": [
            {"broker": 1, "log_end_offset": 10, "observed_at": 900},
            {"broker": 2, "log_end_offset": 8, "fetch_lag": 2},
        ],
    }
    events = unfold(to_model(parse_event(json.dumps(round_))))
    assert [(type(e).__name__, e.observed_at) for e in events] == [
        ("ReplicaReport", 900),
        ("ReplicaReport", 1_000),
        ("PartitionMeta", 1_000),
    ]
    assert [getattr(e, "fetch_lag", None) for e in events] == [None, 2, None]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=streams())
def test_generated_streams_as_round_records_give_the_same_findings(
    events: list[dict[str, Any]],
) -> None:
    folded = fold(events)
    found, applied, _ = _replayed(_lines(events), {})
    found_r, applied_r, _ = _replayed(_lines(folded), {})
    assert applied_r == applied
    assert found_r == found
    assert _batch(folded, {}) == _batch(events, {})


@SIMULATED
@given(sim=simulated())
def test_simulated_rounds_as_round_records_give_the_same_findings(sim: Sim) -> None:
    """A simulated collector's rounds under kills, restarts, elections and missed scrapes:
    nearly every sample travels in a round record, with the same findings."""
    events = sim.events()
    folded = fold(events)
    samples = sum(len(e.get("replica_samples", ())) for e in folded)
    assert samples >= 0.5 * sum(1 for e in events if e["kind"] == "replica")
    found, applied, _ = _replayed(_lines(events), {})
    found_r, applied_r, _ = _replayed(_lines(folded), {})
    assert applied_r == applied
    assert found_r == found
    assert _batch(folded, {}) == _batch(events, {})


def test_the_generators_collector_shaped_forms_give_the_same_findings() -> None:
    """The benchmarks' input (``generate(collector_fields=True)``: topic ids, offline
    replicas, log starts, fetch lags, as the collector sends them) means the same as
    replica events and as round records, and the model reads its fields."""
    replica = list(generate(200, 14, fault_rate=0.05, seed=9, collector_fields=True))
    rounds = list(generate(200, 14, fault_rate=0.05, seed=9, form="rounds", collector_fields=True))
    samples = [s for e in rounds for s in e.get("replica_samples", ())]
    assert samples and all("log_start_offset" in s for s in samples)
    assert sum("fetch_lag" in s for s in samples) == 2 * len(samples) // 3
    found = _batch(replica, {})
    assert found == _batch(rounds, {})
    assert "under_replicated" in {json.loads(f)["kind"] for f in found}
    views, ids = [], []
    for stream in (replica, rounds):
        model = ClusterModel(ModelConfig())
        unfolded = (ev for d in stream for ev in unfold(to_model(validate_event(d))))
        for ev in sorted(unfolded, key=event_order):
            model.apply(ev)
        views.append({k: view_of(ps, None).to_row() for k, ps in sorted(model.partitions.items())})
        ids.append({k: ps.topic_id for k, ps in model.partitions.items()})
    assert views[0] == views[1]
    assert ids[0] == ids[1] and all(ids[1].values())
