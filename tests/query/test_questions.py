"""The runbook's questions (what-if, audit, status) over views of a replayed model."""

from __future__ import annotations

import re

from monitor.contract.events import to_model, validate_event
from monitor.contract.state import PartitionView, view_of
from monitor.dev.testing import Timeline
from monitor.model import ClusterModel, TopicConfig
from monitor.query.questions import Outcome, audit, status, what_if


def _views(tl: Timeline) -> list[PartitionView]:
    model = ClusterModel()
    for ev in tl.events:
        model.apply(to_model(validate_event(ev)))
    return [
        view_of(ps, model.topics[(ps.cluster, ps.topic)].config) for ps in model.partitions.values()
    ]


def _cluster() -> Timeline:
    """Four partitions of one RF-3 topic (min ISR 2), in four different shapes."""
    tl = Timeline(topic="orders")
    tl.config(rf=3, min_isr=2)
    shapes = {
        0: (1, [1, 2, 3], {1: 1000, 2: 1000, 3: 1000}),  # healthy, led by 1
        1: (1, [1, 2], {1: 1000, 2: 1000, 3: 400}),  # 3 out of sync
        2: (2, [2], {2: 900, 1: 600, 3: 500}),  # only 2 in sync
        3: (3, [3, 1, 2], {3: 50, 1: 50, 2: 50}),  # healthy, led by 3
    }
    for p, (leader, isr, leos) in shapes.items():
        for b, leo in leos.items():
            tl.replica(b, leo=leo, partition=p)
        tl.meta(
            leader=leader,
            epoch=1,
            replicas=[1, 2, 3],
            isr=isr,
            hw=min(leos[b] for b in isr),
            partition=p,
        )
    return tl


def test_what_if_one_broker() -> None:
    """Stopping 2: p2 goes offline with only stale replicas (300 committed offsets at stake);
    p1 falls under min ISR; p0 and p3 lose a copy but stay writable."""
    impacts = {i.partition: i for i in what_if(_views(_cluster()), {2})}
    assert impacts[2].outcome is Outcome.UNCLEAN
    assert impacts[2].committed_at_stake == 900 - 600
    assert impacts[1].outcome is Outcome.UNDER_MIN_ISR
    assert impacts[0].outcome is Outcome.DEGRADED
    assert impacts[3].outcome is Outcome.DEGRADED


def test_what_if_leader_moves_cleanly() -> None:
    """Stopping 1 moves p0's and p1's leadership to a surviving ISR member."""
    impacts = {i.partition: i for i in what_if(_views(_cluster()), {1})}
    assert impacts[0].outcome is Outcome.LEADER_MOVES
    assert impacts[1].outcome is Outcome.UNDER_MIN_ISR  # only 2 left in ISR
    assert not impacts[1].already
    # p2 was under min ISR before anything stopped; losing stale replica 1 changes nothing.
    assert impacts[2].outcome is Outcome.UNDER_MIN_ISR and impacts[2].already


def test_what_if_all_replicas() -> None:
    impacts = what_if(_views(_cluster()), {1, 2, 3})
    assert {i.outcome for i in impacts} == {Outcome.LOST}
    assert [i.partition for i in impacts] == [0, 1, 2, 3]


def test_audit_profiles_and_fixes() -> None:
    rows = {
        r.topic: r
        for r in audit(
            {
                "cp": TopicConfig(3, 2, False),
                "ap": TopicConfig(2, 1, False),
                "rf1": TopicConfig(1, 1, False),
                "weak": TopicConfig(3, 1, False),
                "weak5": TopicConfig(5, 1, False),
                "brittle": TopicConfig(3, 3, False),
                "unclean": TopicConfig(3, 2, True),
            }
        )
    }
    assert (rows["cp"].profile, rows["ap"].profile) == ("CP", "AP")
    assert rows["rf1"].reasons == ("rf_1",)
    assert rows["weak"].reasons == ("min_isr_1_with_rf_3",)
    assert "min.insync.replicas=2" in rows["weak"].fixes[0]
    # The label is the finding's (issue 50: RF 5 was labelled "min_isr_1_with_rf_3").
    assert rows["weak5"].reasons == ("min_isr_1_with_rf_5",)
    assert rows["brittle"].reasons == ("min_isr_not_below_rf",)
    assert "min.insync.replicas=2" in rows["brittle"].fixes[0]
    assert rows["unclean"].profile == "misconfigured"
    assert "unclean.leader.election.enable=false" in rows["unclean"].fixes[0]


def test_status_counts() -> None:
    st = status(_views(_cluster()), silent_brokers=[3])
    assert st.partitions == 4
    assert st.under_min_isr == 1  # p2: ISR [2] < 2
    assert st.under_replicated == 2  # p1, p2
    assert st.offline == 0
    assert st.open_by_kind["under_min_isr"] == 1
    assert st.open_by_severity["critical"] == 1
    assert st.silent_brokers == [3]


def test_audit_never_proposes_a_change_that_changes_nothing() -> None:
    """Every proposed ``min.insync.replicas=N`` differs from the topic's own, over every
    RF 1..5 and min ISR 1..6; RF 2 with min ISR 2 gets a real choice, not "set it to 2"."""
    for rf in range(1, 6):
        for min_isr in range(1, 7):
            for unclean in (False, True):
                (row,) = audit({"t": TopicConfig(rf, min_isr, unclean)})
                assert len(row.fixes) == len(row.reasons)
                for fix in row.fixes:
                    proposed = re.findall(r"--add-config min\.insync\.replicas=(\d+)", fix)
                    assert str(min_isr) not in proposed, (rf, min_isr, fix)
                    assert ("unclean.leader.election.enable=false" in fix) <= unclean
    (rf2,) = audit({"t": TopicConfig(2, 2, False)})
    assert rf2.reasons == ("min_isr_not_below_rf",)
    assert "raise the replication factor to 3" in rf2.fixes[0]
    assert "min.insync.replicas=1" in rf2.fixes[0]
