"""``finding_order`` gives back each condition's findings in the order the model emitted
them -- the order the store, its compaction and a restarted exporter read them back in
(``monitor.contract.store.FINDINGS_IN_ORDER``). Checked on every scenario, and on random
streams interleaved with ticks at clocks past the events (a tick may open a condition that
an event stamped earlier then resolves, at the same instant).

The ticks' clock always moves on here. In the job it can stand still or go back: a
batch of a backlog ticks at its newest event plus the catch-up slack, which may be before
an earlier batch's tick. Then a condition can be opened, resolved and opened again at an
earlier instant, and no key on the stamps gives that order back (hypothesis finds such a
stream when the clock may go back); only the batch and the row's place in it would -- the
store's ``seq``, read first (``tests/exporter/test_finding_order.py`` has such a stream, and
one whose reopen repeats the open's id: the store keeps a condition's findings once per id
and ``seq``)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.contract.events import to_model, validate_event
from monitor.model import ClusterModel, Finding, FindingState, ModelConfig, finding_order
from tests.model.strategies import COMMON, streams
from tests.scenarios import SCENARIOS, run


def _out_of_order(findings: list[Finding]) -> list[list[tuple[str, str, int, int]]]:
    """The conditions whose findings ``finding_order`` would reorder."""
    by_condition: dict[tuple[Any, ...], list[Finding]] = {}
    for f in findings:
        if f.state is not FindingState.EVENT:
            by_condition.setdefault((f.cluster, f.topic, f.partition, f.broker, f.kind), []).append(
                f
            )
    return [
        [(str(f.kind), str(f.state), f.at, f.opened_at) for f in fs]
        for fs in by_condition.values()
        if sorted(fs, key=finding_order) != fs
    ]


def test_every_scenario_reads_back_in_emission_order() -> None:
    for sc in SCENARIOS:
        assert _out_of_order(run(sc)) == [], sc.name


@settings(COMMON, max_examples=60)
@given(streams(), st.lists(st.integers(0, 120_000), max_size=8))
def test_random_streams_with_late_ticks_read_back_in_emission_order(
    events: list[dict[str, Any]], ahead: list[int]
) -> None:
    model = ClusterModel(ModelConfig(stale_after_ms=30_000))
    found: list[Finding] = []
    ticks, clock = iter(ahead), 0
    for i, ev in enumerate(events):
        found += model.apply(to_model(validate_event(ev)))
        if i % 5 == 4 and (step := next(ticks, None)) is not None:
            clock = max(clock + 1, ev["observed_at"] + step)  # past what arrived, always on
            found += model.tick(clock)
    assert _out_of_order(found) == []
