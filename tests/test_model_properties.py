"""Property-based tests of the model over random valid event streams (hypothesis)."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from monitor.events import to_model, validate_event
from monitor.model import ClusterModel, Finding, FindingState, ModelConfig
from monitor.testing import T0, Timeline

BROKERS = [1, 2, 3]

broker_id = st.sampled_from(BROKERS)
isr_st = st.lists(broker_id, unique=True, max_size=3)


@st.composite
def streams(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A random but contract-valid stream for one partition, with random time steps."""
    tl = Timeline(topic="p")
    n = draw(st.integers(1, 60))
    for _ in range(n):
        tl.advance(draw(st.integers(0, 40_000)))
        what = draw(
            st.sampled_from(["meta", "meta", "replica", "replica", "replica", "config", "broker"])
        )
        if what == "meta":
            isr = draw(isr_st)
            leader = draw(st.one_of(st.none(), broker_id))
            tl.meta(
                leader=leader,
                epoch=draw(st.integers(0, 8)),
                replicas=BROKERS,
                isr=isr,
                hw=draw(st.one_of(st.none(), st.integers(0, 5_000))),
                elr=draw(st.one_of(st.none(), isr_st)),
            )
        elif what == "replica":
            tl.replica(
                draw(broker_id),
                leo=draw(st.integers(0, 5_000)),
                hw=draw(st.one_of(st.none(), st.integers(0, 5_000))),
            )
        elif what == "config":
            tl.config(rf=3, min_isr=draw(st.integers(1, 4)), unclean=draw(st.booleans()))
        else:
            tl.broker(draw(broker_id), alive=draw(st.booleans()))
    return tl.events


def _run(model: ClusterModel, events: list[dict[str, Any]]) -> list[Finding]:
    out: list[Finding] = []
    for ev in events:
        out.extend(model.apply(to_model(validate_event(ev))))
    return out


def _check_invariants(model: ClusterModel) -> None:
    for s in model.partitions.values():
        trusted = [s.replica_states[b].leo for b in s.isr if b in s.replica_states]
        trusted = [x for x in trusted if x >= 0]
        if trusted:
            assert s.allowed_hw() <= min(trusted)
        assert s.uncommitted() >= 0
        assert s.hw_lag_ms >= 0
        for rs in s.replica_states.values():
            assert rs.lag_ms >= 0 and rs.lag_offsets >= 0
        assert len(s.lineage) <= model.config.lineage_limit
        assert len(s.leader_leo_history) <= model.config.leo_history


def _check_well_formed(findings: list[Finding]) -> None:
    """Every resolved finding closes an open one with the same subject and opened_at."""
    opened: set[tuple[Any, ...]] = set()
    for f in findings:
        key = (f.kind, f.topic, f.partition, f.broker)
        if f.state == FindingState.OPEN:
            assert key not in {k[:4] for k in opened}, f"opened twice: {f}"
            opened.add((*key, f.opened_at))
        elif f.state == FindingState.RESOLVED:
            assert (*key, f.opened_at) in opened, f"resolved without open: {f}"
            opened.discard((*key, f.opened_at))


def _heal(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A healthy hour later: all brokers alive, ISR complete, replicas caught up."""
    last = max((e["observed_at"] for e in events), default=T0)
    epoch = max((e.get("leader_epoch", 0) for e in events), default=0) + 1
    tl = Timeline(topic="p", start=last + 3_600_000)
    tl.config(rf=3, min_isr=2)
    big = 10**12
    # Replicas are wiped and re-replicated, as an operator repairs a divergent log (under
    # the pre-epoch protocol nothing else makes a diverged replica truncate).
    for _ in range(2):
        for b in BROKERS:
            tl.replica(b, leo=0)
        tl.advance(1_000)
    for i in range(3):
        for b in BROKERS:
            tl.broker(b)
        tl.replica(1, leo=big + i, hw=big + i)
        tl.replica(2, leo=big + i)
        tl.replica(3, leo=big + i)
        tl.meta(leader=1, epoch=epoch, replicas=BROKERS, isr=BROKERS, hw=big + i)
        tl.advance(5_000)
    return tl.events


COMMON = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@COMMON
@given(streams(), st.booleans())
def test_model_never_crashes_and_keeps_invariants(
    events: list[dict[str, Any]], epochs: bool
) -> None:
    """Any valid stream: no exception, HW never above a trusted ISR LEO, lags never negative."""
    model = ClusterModel(ModelConfig(epoch_truncation=epochs))
    findings = _run(model, events)
    _check_invariants(model)
    _check_well_formed(findings)
    findings += model.tick(events[-1]["observed_at"] + 120_000)
    _check_well_formed(findings)


@COMMON
@given(streams(), st.booleans())
def test_every_opened_condition_can_resolve(events: list[dict[str, Any]], epochs: bool) -> None:
    """After any stream, a healthy hour resolves every condition that was left open."""
    model = ClusterModel(ModelConfig(epoch_truncation=epochs))
    findings = _run(model, events)
    heal = _heal(events)
    findings += _run(model, heal)
    findings += model.tick(heal[-1]["observed_at"])
    left = [(c.kind, cl, t, p) for cl, t, p, c in model.open_findings()]  # type: ignore[attr-defined]
    assert left == [], left
    _check_well_formed(findings)


@COMMON
@given(streams())
def test_replaying_twice_gives_the_same_findings(events: list[dict[str, Any]]) -> None:
    """Determinism: the same stream yields the same finding ids (the sinks' dedup key)."""
    a = [f.id for f in _run(ClusterModel(), events)]
    b = [f.id for f in _run(ClusterModel(), events)]
    assert a == b
