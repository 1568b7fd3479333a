"""The stamp guard (:mod:`monitor.model.stamps`) beyond its doctest and the
``future_stamped_event`` scenario."""

from __future__ import annotations

from monitor.model.events import BrokerReport, PartitionMeta
from monitor.model.stamps import HOLD_LIMIT, StampGuard


def test_a_stream_going_on_in_step_is_admitted_as_it_comes() -> None:
    """Once another source confirmed a cluster's clock, events stamped in step -- here one
    broker alone for ten minutes, each a few seconds after the last -- are each admitted at
    once: the newest stamp follows them, so none is ever mistaken for a jump and held."""
    g = StampGuard(ahead_ms=60_000)
    g.admit(BrokerReport("c", 0, broker=1, alive=True))
    meta = PartitionMeta("c", 1, "t", 0, leader=1, leader_epoch=0, replicas=(1,), isr=(1,))
    assert len(g.admit(meta)) == 2
    for at in range(5_000, 600_000, 5_000):
        report = BrokerReport("c", at, broker=1, alive=True)
        assert g.admit(report) == [(report, None)], at
    assert g.flush() == []


def test_past_the_hold_limit_the_oldest_held_is_rejected_never_admitted() -> None:
    """Issue 50: 1,001 events from one source a year ahead overflowed the hold and were all
    admitted unchecked. Past the limit the oldest held goes, with a reason; the rest wait
    for a confirmation that never comes, and are rejected at the end."""
    g = StampGuard(ahead_ms=60_000)
    g.admit(BrokerReport("c", 0, broker=1, alive=True))
    meta = PartitionMeta("c", 1, "t", 0, leader=1, leader_epoch=0, replicas=(1,), isr=(1,))
    assert len(g.admit(meta)) == 2
    year = 365 * 24 * 3_600_000
    decided = []
    for i in range(HOLD_LIMIT + 1):
        decided += g.admit(BrokerReport("c", year + i, broker=2, alive=True))
    ((first, reason),) = decided  # one decision: the oldest held, at the 1,001st
    assert first.observed_at == year and reason is not None
    assert reason.startswith(f"observed_at {year} is {year - 1} ms ahead of the newest stamp")
    assert "more held than HOLD_LIMIT" in reason
    rest = g.flush()
    assert len(rest) == HOLD_LIMIT and all(r is not None for _, r in rest)


def test_the_first_events_of_a_lone_source_are_admitted_past_the_limit() -> None:
    """Until a cluster admitted anything there is nothing to check its stamps against: a
    stream of one source alone (an Admin-only file of metadata) is admitted, not dropped."""
    g = StampGuard(ahead_ms=60_000)
    out = []
    for i in range(HOLD_LIMIT + 1):
        meta = PartitionMeta("c", i, "t", 0, leader=1, leader_epoch=0, replicas=(1,), isr=(1,))
        out += g.admit(meta)
    assert len(out) == HOLD_LIMIT + 1 and all(r is None for _, r in out)


def test_a_thousand_and_one_future_events_never_page_on_replay() -> None:
    """The issue's case through ``replay``: a healthy stream, then 1,001 replica events of
    one broker a year ahead reporting its log cut to 0 -- every one rejected, named, and
    the findings those of the healthy stream alone. (The issue's own stream gave a critical
    truncation_below_hw and two log_divergence; this one a warning truncation_below_hw.)"""
    import json

    from monitor.model import ClusterModel, ModelConfig
    from monitor.query.replay import replay
    from tests.scenarios import DATA

    lines = (DATA / "healthy_steady_state.jsonl").read_text().splitlines()
    events = [json.loads(line) for line in lines if line.strip()]
    last = max(e["observed_at"] for e in events)
    part = next(e for e in events if e["kind"] == "partition")
    year = 365 * 24 * 3_600_000
    future = [
        json.dumps({"schema_version": 1, "kind": "replica", "cluster": part["cluster"],
                    "observed_at": last + year + i, "topic": part["topic"],
                    "partition": part["partition"], "broker": part["replicas"][-1],
                    "log_end_offset": 0})
        for i in range(HOLD_LIMIT + 1)
    ]  # fmt: skip
    alone: list = []
    replay(lines, ClusterModel(ModelConfig()), alone.append, lambda n, r: None)
    findings: list = []
    rejects: list[tuple[int, str]] = []
    replay([*lines, *future], ClusterModel(ModelConfig()), findings.append,
           lambda n, r: rejects.append((n, r)))  # fmt: skip
    assert len(rejects) == HOLD_LIMIT + 1, rejects[:3]
    assert all("ahead of the newest stamp" in r for _, r in rejects)
    # Nothing of them judged (before: truncation_below_hw and follower_lag of that broker).
    assert [f.to_dict() for f in findings] == [f.to_dict() for f in alone]
