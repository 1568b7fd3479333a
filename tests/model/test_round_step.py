"""A round applied whole gives what its events give one by one.

The Spark operator applies a partition's round record in one call of the model
(:func:`monitor.model.batch.apply_noting`, as ``ClusterModel.apply`` of a
``PartitionRound``: :func:`monitor.model.partition.step_round`, with the steady metadata's
short path) wherever :func:`monitor.model.order.application_order`
says nothing sorts among its events that could see the difference. Here every scenario of
``tests/data``, property-generated streams and simulated clusters -- as round records and
as replica events, split into micro-batches -- are applied both ways: whole rounds (with
and without the steady short path) and every event unfolded at its own place. Each
partition's findings must be equal byte for byte and in the same order, and so must every
partition's state after the last batch and after a tick.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from monitor.contract.events import parse_event, to_model
from monitor.dev.kafka_sim import Sim
from monitor.dev.rounds import fold
from monitor.model import (
    ClusterModel,
    ModelConfig,
    PartitionMeta,
    PartitionRound,
    ReplicaReport,
    TopicConfigReport,
    partition,
)
from monitor.model.batch import apply_noting
from monitor.model.order import application_order, event_order, unfold
from tests.model.strategies import SIMULATED, simulated, streams
from tests.model.test_rounds import _scenario_events
from tests.scenarios import SCENARIOS, Scenario

BATCHES = 3


@contextmanager
def _steady(on: bool) -> Iterator[None]:
    before = partition.STEADY_META
    partition.STEADY_META = on
    try:
        yield
    finally:
        partition.STEADY_META = before


def _records(lines: list[bytes]) -> list[tuple[tuple[int, ...], Any]]:
    out = []
    for i, raw in enumerate(lines):
        try:
            out.append(((i,), to_model(parse_event(raw))))
        except ValueError:
            continue  # malformed on purpose: the job dead-letters it
    return out


def _unfolded(batch: list[tuple[tuple[int, ...], Any]]) -> list[Any]:
    keyed = [
        (*event_order(ev), src, i, ev) for src, rec in batch for i, ev in enumerate(unfold(rec))
    ]
    keyed.sort(key=lambda k: k[:4])
    return [k[4] for k in keyed]


def _apply(
    lines: list[bytes], config: dict[str, Any], whole: bool
) -> tuple[dict[Any, list[str]], Any, int]:
    """Apply in micro-batches; each partition's findings, the states, rounds applied whole.
    Every event is as it was made after the model applied it (events are not frozen, for
    speed: :mod:`monitor.model.events`)."""
    records = _records(lines)
    before = copy.deepcopy(records)
    model = ClusterModel(ModelConfig(**config))
    found: dict[Any, list[str]] = {}
    size = max(1, len(records) // BATCHES + 1)
    n_whole = 0
    for at in range(0, len(records), size):
        batch = records[at : at + size]
        if whole:  # as the Spark operator applies a batch
            todo = application_order(batch, model.topics, model.deleted)
            n_whole += sum(isinstance(item, PartitionRound) for item in todo)
            batch_found = _noted(model, todo)
        else:
            batch_found = [f for item in _unfolded(batch) for f in model.apply(item)]
        for f in batch_found:
            found.setdefault((f.cluster, f.topic, f.partition), []).append(
                json.dumps(f.to_dict(), sort_keys=True)
            )
    assert records == before, "the model changed an event"
    newest = max((ps.last_seen for ps in model.partitions.values()), default=0)
    for f in model.tick(newest + model.config.stale_after_ms + 1):
        found.setdefault((f.cluster, f.topic, f.partition), []).append(
            json.dumps(f.to_dict(), sort_keys=True)
        )
    return found, model.partitions, n_whole


NEW = ("new",)


def _noted(model: ClusterModel, todo: list[Any]) -> list[Any]:
    """``todo`` applied by :func:`monitor.model.batch.apply_noting`; its findings. What it
    notes of each partition is what the partition was before the batch's first record of
    it: its shape and last_seen, or ``NEW``."""
    touched: dict[Any, object] = {}
    expected: dict[Any, object] = {}
    reference = copy.deepcopy(model)  # applied record by record beside it
    for item in todo:
        ev = item.meta if isinstance(item, PartitionRound) else item
        if isinstance(ev, PartitionMeta | ReplicaReport):
            pk = (ev.cluster, ev.topic, ev.partition)
            if pk not in expected:
                ps = reference.partitions.get(pk)
                expected[pk] = NEW if ps is None else (ps.shape(), ps.last_seen)
        reference.apply(item)
    found: list[Any] = []
    apply_noting(model, todo, touched, NEW, model.apply, found)
    assert touched == expected
    return found


def _every_way(events: list[Any], config: dict[str, Any]) -> tuple[int, int]:
    """Both forms, whole (steady path on and off) and unfolded; (findings, whole rounds)."""
    n = whole_rounds = 0
    for form in (events, fold(e for e in events if isinstance(e, dict))):
        lines = [e if isinstance(e, bytes) else json.dumps(e).encode() for e in form]
        found, states, _ = _apply(lines, config, whole=False)
        for steady in (True, False):
            with _steady(steady):
                found_w, states_w, k = _apply(lines, config, whole=True)
            assert found_w == found
            assert states_w == states
            whole_rounds += k
        n += sum(map(len, found.values()))
    return n, whole_rounds


@pytest.mark.parametrize("sc", SCENARIOS, ids=lambda s: s.name)
def test_a_scenario_with_rounds_applied_whole_gives_the_same(sc: Scenario) -> None:
    _every_way(_scenario_events(sc), sc.config)


def test_the_scenarios_apply_rounds_whole_and_find_things() -> None:
    """The comparison above compares something: rounds applied whole, and findings."""
    found = whole = 0
    for sc in SCENARIOS:
        f, w = _every_way(_scenario_events(sc), sc.config)
        found, whole = found + f, whole + w
    assert found > 200 and whole > 700, (found, whole)  # 396 round records, 2 ways


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=streams())
def test_generated_streams_with_rounds_applied_whole_give_the_same(
    events: list[dict[str, Any]],
) -> None:
    _every_way(events, {})


@SIMULATED
@given(sim=simulated())
def test_simulated_clusters_with_rounds_applied_whole_give_the_same(sim: Sim) -> None:
    _every_way(sim.events(), {})


def _round(t_samples: int, t_meta: int, **meta: Any) -> PartitionRound:
    m = {"leader": 1, "leader_epoch": 3, "replicas": (1, 2, 3), "isr": (1, 2, 3)} | meta
    samples = tuple(
        ReplicaReport("c", t_samples, "t", 0, b, 100 + t_samples) for b in m["replicas"]
    )
    return PartitionRound(PartitionMeta("c", t_meta, "t", 0, **m), samples)


def _both(records: list[Any]) -> tuple[list[Any], list[str], list[str]]:
    """(what application_order applies, findings whole, findings unfolded)."""
    batch = [((i,), r) for i, r in enumerate(records)]
    out = []
    for todo in (application_order(batch), _unfolded(batch)):
        model = ClusterModel()
        out.append([f"{f.kind}:{f.state}@{f.at}" for x in todo for f in model.apply(x)])
    return application_order(batch), out[0], out[1]


def test_another_record_of_the_partition_among_a_rounds_events_unfolds_it() -> None:
    """Two collectors: a round sampled at 10 with metadata read at 30, and the other
    collector's metadata at 20 showing a shrunk ISR. Event by event the ISR shrinks at 20
    and expands at 30; applied whole, the round would pass the 20 and make it late."""
    first = _round(0, 5)
    other = PartitionMeta("c", 20, "t", 0, 1, 3, (1, 2, 3), (1, 2))
    todo, whole, unfolded = _both([first, _round(10, 30), other])
    assert [type(x).__name__ for x in todo].count("PartitionRound") == 1  # the first only
    assert whole == unfolded and "isr_shrink:event@20" in unfolded


def test_a_reassignment_said_on_steady_metadata_is_no_steady_round() -> None:
    """The replicas already list the new broker; a later read first says it is being
    added: the reassignment begins there, though leader, epoch, ISR and replicas held."""
    replicas = {"replicas": (1, 2, 3, 4), "isr": (1, 2, 3)}
    todo, whole, unfolded = _both(
        [_round(0, 5, **replicas), _round(10, 15, **replicas, adding_replicas=(4,))]
    )
    assert [type(x).__name__ for x in todo] == ["PartitionRound", "PartitionRound"]
    assert whole == unfolded and "reassignment:open@15" in whole


def _config(t: int, min_isr: int) -> TopicConfigReport:
    return TopicConfigReport("c", t, "t", 3, min_isr, False)


def test_a_topic_setting_changed_among_a_rounds_events_unfolds_it() -> None:
    """min.insync.replicas raised to 3 at 20, between a round's samples (10) and its
    metadata (30, the ISR shrunk to 2): under_min_isr opens at 30, when the ISR shrinks.
    Applied whole, the round's metadata would come first and the raise would find it
    under min ISR at 20, before it was."""
    setup = [_config(0, 2), _round(0, 5)]
    todo, whole, unfolded = _both([*setup, _round(10, 30, isr=(1, 2)), _config(20, 3)])
    assert [type(x).__name__ for x in todo].count("PartitionRound") == 1  # the first only
    assert whole == unfolded and "under_min_isr:open@30" in unfolded


def test_the_same_topic_settings_again_keep_a_round_whole() -> None:
    """Every round a collector says its topics' settings, stamped with the metadata read,
    between the round's samples and its metadata: the same settings change nothing."""
    setup = [_config(0, 2), _round(0, 5)]
    todo, whole, unfolded = _both([*setup, _round(10, 30, isr=(1, 2)), _config(20, 2)])
    assert [type(x).__name__ for x in todo].count("PartitionRound") == 2
    assert whole == unfolded
