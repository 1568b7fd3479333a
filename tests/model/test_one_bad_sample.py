"""The rule "one bad sample never pages", as a property (issue 50).

A misbehaving exporter, a collector bug, a clock jump: any one event may carry one wrong
number. The model holds what one sample alone makes impossible (a new highest HW beyond
what the leader was seen to hold, a leader's log end far beyond its growth, a lone lower
log end) until a second sample or an independent witness (the leader's next log end, an
epoch record, a restart) confirms it. So:

- every routine scenario of ``tests/data`` (and the healthy one), and simulated healthy
  streams (:mod:`monitor.dev.kafka_sim`), with any one event's any one numeric field set
  to an extreme -- 0, 2^63-1, 2^31-1, x1000, a neighbour's value -- or one list field given
  a duplicate, yield no critical finding;
- every seed failure mode, with one such corrupted event, still pages on its partition
  wherever its loss is found without that event (one wrong number must not hide a loss;
  it may hide what only it showed, and a read held as suspect at the stream's very end
  leaves the page to what came before it: a truncation below the HW).

Corrupted events the contract refuses are rejected by the replay (counted, kept): the
stream goes on without them, which is the other half of the rule.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.dev.kafka_sim import Sim
from monitor.model import ClusterModel, Finding, ModelConfig, Severity
from monitor.query.replay import replay
from tests.model.strategies import COMMON
from tests.scenarios import SCENARIOS, Scenario, label

INT64_MAX = 2**63 - 1
INT32_MAX = 2**31 - 1
#: Numeric fields of the contract a corruption may hit (observed_at is the stamp guard's:
#: tests/model/test_stamps.py).
NUMERIC = (
    "log_end_offset",
    "high_watermark",
    "leader_epoch",
    "leader",
    "epoch_start_offset",
    "log_start_offset",
    "replication_factor",
    "min_insync_replicas",
    "broker",
    "partition",
    "process_start_ms",
)
LISTS = ("isr", "replicas", "eligible_leader_replicas")

ROUTINE = [s for s in SCENARIOS if s.routine or s.name == "healthy_steady_state"]
#: The seeds' failure modes and the critical finding each must keep.
SEEDS = {
    "seed1_hw_truncation": "committed_data_loss:event seed1/0",
    "seed2_divergence": "committed_data_loss:event seed2/0",
    "seed2_with_leader_epochs": "committed_data_loss:event seed2/0",
    "unclean_election": "committed_data_loss:event unclean/0",
}


def corruptions(events: list[dict[str, Any]]) -> list[tuple[int, str, Any]]:
    """Every (event index, field, bad value) of the rule, for a stream of events."""
    out: list[tuple[int, str, Any]] = []
    last: dict[tuple[Any, ...], dict[str, Any]] = {}
    for i, ev in enumerate(events):
        series = (ev["kind"], ev.get("topic"), ev.get("partition"), ev.get("broker"))
        before = last.get(series)
        neighbour = events[i - 1] if i else None
        for name in NUMERIC:
            v = ev.get(name)
            if not isinstance(v, int) or isinstance(v, bool):
                continue
            bad = {0, INT64_MAX, INT32_MAX, v * 1000}
            for other in (before, neighbour):
                if other is not None and isinstance(other.get(name), int):
                    bad.add(other[name])
            out.extend((i, name, x) for x in sorted(bad - {v}))
        for name in LISTS:
            v = ev.get(name)
            if isinstance(v, list) and v:
                out.append((i, name, [*v, v[0]]))
        last[series] = ev
    return out


def _replay(lines: list[bytes], config: dict[str, Any]) -> list[Finding]:
    found: list[Finding] = []
    replay(lines, ClusterModel(ModelConfig(**config)), found.append, lambda n, r: None)
    return found


def _corrupt(lines: list[bytes], at: int, name: str, value: Any) -> list[bytes]:
    ev = json.loads(lines[at])
    out = list(lines)
    out[at] = json.dumps({**ev, name: value}).encode()
    return out


def _critical(found: list[Finding]) -> list[str]:
    return [label(f) for f in found if f.severity >= Severity.CRITICAL]


def _labels(found: list[Finding]) -> list[str]:
    return [label(f) for f in found]


def _lines(sc: Scenario) -> list[bytes]:
    return sc.path.read_bytes().splitlines()


# Examples per stream: each is one replay of a scenario (a few ms); every case of a
# scenario is drawn from its full list of corruptions, the same ones on every run.
PER_SCENARIO = settings(COMMON, max_examples=60)


@pytest.mark.parametrize("sc", ROUTINE, ids=lambda s: s.name)
@PER_SCENARIO
@given(data=st.data())
def test_one_bad_sample_in_a_routine_stream_pages_nobody(sc: Scenario, data: st.DataObject) -> None:
    lines = _lines(sc)
    assert _critical(_replay(lines, sc.config)) == [], f"{sc.name} pages uncorrupted"
    cases = corruptions([json.loads(x) for x in lines])
    at, name, value = data.draw(st.sampled_from(cases), label="corruption")
    critical = _critical(_replay(_corrupt(lines, at, name, value), sc.config))
    assert critical == [], f"{sc.name}: line {at + 1} {name}={value} pages {critical}"


@PER_SCENARIO
@given(seed=st.integers(0, 2**32), data=st.data())
def test_one_bad_sample_in_a_simulated_healthy_stream_pages_nobody(
    seed: int, data: st.DataObject
) -> None:
    """A simulated partition under load, every broker up, sampled the way the collector
    samples a real cluster (pages read late in the round, HW read last)."""
    sim = Sim(random.Random(seed), min_isr=2, rate=(1, 20), max_scrape_delay_ms=2_500)
    sim.run(90_000)
    lines = [json.dumps(ev).encode() for ev in sim.events()]
    assert _critical(_replay(lines, {})) == [], "the healthy simulation pages uncorrupted"
    at, name, value = data.draw(st.sampled_from(corruptions(sim.events())), label="corruption")
    critical = _critical(_replay(_corrupt(lines, at, name, value), {}))
    assert critical == [], f"simulated seed {seed}: event {at} {name}={value} pages {critical}"


@pytest.mark.parametrize("name", sorted(SEEDS))
@PER_SCENARIO
@given(data=st.data())
def test_one_bad_sample_never_hides_a_seed_loss(name: str, data: st.DataObject) -> None:
    """A bad sample is no worse than a missing one: wherever the seed's loss is still found
    without the corrupted line (the seeds are minimal -- many of their lines are the only
    evidence of a fact), it is found with it corrupted."""
    sc = next(s for s in SCENARIOS if s.name == name)
    lines = _lines(sc)
    assert SEEDS[name] in [label(f) for f in _replay(lines, sc.config)]
    cases = corruptions([json.loads(x) for x in lines])
    without = {
        i for i in {at for at, _, _ in cases}
        if SEEDS[name] in [label(f) for f in _replay(lines[:i] + lines[i + 1 :], sc.config)]
    }  # fmt: skip
    assert without, f"{name}: every line is evidence"
    at, field, value = data.draw(
        st.sampled_from([c for c in cases if c[0] in without]), label="corruption"
    )
    found = _replay(_corrupt(lines, at, field, value), sc.config)
    partition = SEEDS[name].split(" ")[1]
    paged = [
        label(f)
        for f in found
        if f.severity >= Severity.CRITICAL and f.subject.startswith(partition)
    ]
    assert paged, f"{name}: line {at + 1} {field}={value} hides the loss: {_labels(found)}"
