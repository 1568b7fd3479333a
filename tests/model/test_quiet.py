"""Quiet partitions judged cheaply give the same findings and state as judged the long way.

:data:`monitor.model.partition.QUIET_SKIPS` lets a judgement on a partition with no open
condition return as soon as none of its predicates holds, instead of passing each one to the
emitter. Here every scenario of ``tests/data``, property-generated streams and simulated
clusters are replayed both ways (as replica events and as round records): the findings
must be equal byte for byte, and so must every partition's state after the last event and
after a tick.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from monitor.dev.kafka_sim import Sim
from monitor.dev.rounds import fold
from monitor.model import ClusterModel, Finding, ModelConfig, partition
from monitor.query.replay import replay
from tests.model.strategies import SIMULATED, simulated, streams
from tests.model.test_rounds import _scenario_events
from tests.scenarios import SCENARIOS, Scenario


@contextmanager
def _quiet(on: bool) -> Iterator[None]:
    before = partition.QUIET_SKIPS
    partition.QUIET_SKIPS = on
    try:
        yield
    finally:
        partition.QUIET_SKIPS = before


def _run(lines: list[bytes], config: dict[str, Any], quiet: bool) -> tuple[list[str], Any]:
    found: list[Finding] = []
    model = ClusterModel(ModelConfig(**config))
    with _quiet(quiet):
        replay(lines, model, found.append, lambda n, r: None)
        newest = max((ps.last_seen for ps in model.partitions.values()), default=0)
        found += model.tick(newest + model.config.stale_after_ms + 1)
    # (dataclass equality: every field of every partition, replica and open condition)
    return [json.dumps(f.to_dict(), sort_keys=True) for f in found], model.partitions


def _both_ways(events: list[Any], config: dict[str, Any]) -> int:
    """Replay ``events`` (and their folded form) quiet and loud; return the findings."""
    n = 0
    for form in (events, fold(e for e in events if isinstance(e, dict))):
        lines = [e if isinstance(e, bytes) else json.dumps(e).encode() for e in form]
        loud, loud_state = _run(lines, config, quiet=False)
        quiet, quiet_state = _run(lines, config, quiet=True)
        assert quiet == loud
        assert quiet_state == loud_state
        n += len(loud)
    return n


@pytest.mark.parametrize("sc", SCENARIOS, ids=lambda s: s.name)
def test_a_scenario_judged_quietly_gives_the_same_findings_and_state(sc: Scenario) -> None:
    _both_ways(_scenario_events(sc), sc.config)


def test_the_scenarios_open_conditions_both_ways() -> None:
    """The comparison above compares something: the scenarios find things."""
    assert sum(_both_ways(_scenario_events(sc), sc.config) for sc in SCENARIOS) > 200


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=streams())
def test_generated_streams_judged_quietly_give_the_same_findings(
    events: list[dict[str, Any]],
) -> None:
    _both_ways(events, {})


@SIMULATED
@given(sim=simulated())
def test_simulated_clusters_judged_quietly_give_the_same_findings(sim: Sim) -> None:
    _both_ways(sim.events(), {})
