"""The soak's plan and judge without a cluster: which partitions each lab fault hits, what it
must cause there, and the one-to-one match of a cycle's findings against that."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from monitor.dev.soak.cli import _lab_faults
from monitor.dev.soak.judge import match
from monitor.dev.soak.plan import (
    COLLATERAL,
    DELETED,
    LAB_FAULTS,
    SoakPlan,
    expected,
    move_targets,
    victim_of,
)

BROKERS = [1, 2, 3]
#: As at the start: both soak partitions led by 1, soak-move on [1, 2] led by 1.
START = {
    "soak/0": (1, (1, 2, 3)),
    "soak/1": (1, (1, 2, 3)),
    "soak-move/0": (1, (1, 2)),
}
FOLLOWER = {"isr_shrink", "isr_expand", "under_replicated", "at_min_isr"}


def plan(**kw: Any) -> SoakPlan:
    base: dict[str, Any] = dict(
        minutes=1, cycles=None, cycle_seconds=0, quiet_seconds=1, fault_seconds=1,
        monitor_faults_per_cycle=1, outage_seconds=0, warmup_seconds=0, rss_tolerance=0.25,
    )  # fmt: skip
    return SoakPlan(**(base | kw))


def finding(kind: str, state: str, where: str, broker: int | None = None) -> dict[str, Any]:
    topic, _, p = where.rpartition("/")
    return {"kind": kind, "state": state, "topic": topic, "partition": int(p), "broker": broker}


def findings_for(exp: dict[str, dict[str, str]]) -> list[dict[str, Any]]:
    out = []
    for where, kinds in exp.items():
        for kind, typ in kinds.items():
            states = ["event"] if typ == "event" else ["open", "resolved"]
            out += [finding(kind, s, where) for s in states]
    return out


def test_the_rotation_holds_the_new_faults_and_can_be_narrowed() -> None:
    assert LAB_FAULTS == ("pause", "stop", "leader_kill", "recreate", "reassign")
    assert [plan().faults_of(i)[0] for i in range(6)] == [*LAB_FAULTS, "pause"]
    narrowed = plan(lab_faults=("recreate", "reassign"))
    assert [narrowed.faults_of(i)[0] for i in range(3)] == ["recreate", "reassign", "recreate"]
    assert _lab_faults("recreate, reassign") == ("recreate", "reassign")
    with pytest.raises(argparse.ArgumentTypeError):
        _lab_faults("recreate,rebalance")


def test_pause_and_stop_strike_a_broker_that_leads_nothing() -> None:
    assert [victim_of("pause", i, START, BROKERS) for i in range(2)] == [2, 3]
    # soak led by 2 after a leader kill, soak-move still by 1: only 3 leads nothing.
    moved = {**START, "soak/0": (2, (1, 2, 3)), "soak/1": (2, (1, 2, 3))}
    assert {victim_of("stop", i, moved, BROKERS) for i in range(4)} == {3}
    assert victim_of("leader_kill", 0, moved, BROKERS) == 2
    assert victim_of("recreate", 0, START, BROKERS) is None


def test_a_broker_fault_must_hit_every_partition_the_broker_holds() -> None:
    # Broker 3 holds no replica of soak-move: only the soak topic.
    assert set(expected("pause", 3, START)) == {"soak/0", "soak/1"}
    both = expected("stop", 2, START)
    assert set(both) == {"soak/0", "soak/1", "soak-move/0"}
    assert all(set(kinds) == FOLLOWER for kinds in both.values())
    # The killed leader leads both topics: an election on each.
    killed = expected("leader_kill", 1, START)
    assert all(set(k) == FOLLOWER | {"leader_election"} for k in killed.values())
    # Broker 2 leads soak but only follows soak-move: no election there.
    led = {**START, "soak/0": (2, (1, 2, 3)), "soak/1": (2, (1, 2, 3))}
    assert "leader_election" not in expected("leader_kill", 2, led)["soak-move/0"]
    assert "leader_election" in expected("leader_kill", 2, led)["soak/0"]


def test_the_topic_faults_hit_their_topic_only() -> None:
    assert expected("recreate", None, START) == {
        "soak/0": {"topic_recreated": "event"},
        "soak/1": {"topic_recreated": "event"},
    }
    assert expected("reassign", None, START) == {
        "soak-move/0": {"reassignment": "condition", "isr_expand": "event"}
    }


def test_a_move_keeps_the_leader_and_alternates_the_follower() -> None:
    assert move_targets(START, BROKERS) == {0: [1, 3]}
    assert move_targets({**START, "soak-move/0": (1, (1, 3))}, BROKERS) == {0: [1, 2]}
    assert move_targets({**START, "soak-move/0": (3, (1, 3))}, BROKERS) == {0: [3, 2]}


def test_exactly_once_passes() -> None:
    exp = expected("reassign", None, START)
    m = match(exp, findings_for(exp), COLLATERAL["reassign"])
    assert m["one_to_one"] and m["problems"] == [], m


def test_twice_or_never_fails() -> None:
    exp = expected("recreate", None, START)
    twice = [*findings_for(exp), finding("topic_recreated", "event", "soak/1")]
    assert not match(exp, twice, COLLATERAL["recreate"])["one_to_one"]
    never = [f for f in findings_for(exp) if f["partition"] == 0]
    problems = match(exp, never, COLLATERAL["recreate"])["problems"]
    assert problems == ["topic_recreated on soak/1: none, expected {'event': 1}"]


def test_the_topic_faults_allow_no_collateral() -> None:
    """A move is progress, not under-replication or lag; a recreated topic's new incarnation
    has no lag: such a finding fails the cycle."""
    exp = expected("reassign", None, START)
    for kind in ("under_replicated", "follower_lag", "isr_shrink", "hw_lag", "stale_telemetry"):
        extra = [*findings_for(exp), finding(kind, "open", "soak-move/0", broker=3)]
        m = match(exp, extra, COLLATERAL["reassign"])
        assert not m["one_to_one"] and "unexpected findings" in m["problems"][-1], kind
    exp = expected("recreate", None, START)
    extra = [*findings_for(exp), finding("hw_lag", "open", "soak/0")]
    assert not match(exp, extra, COLLATERAL["recreate"])["one_to_one"]


def test_a_stalled_brokers_lag_is_collateral_of_a_broker_fault_only() -> None:
    exp = expected("pause", 3, START)
    lag = [*findings_for(exp), finding("follower_lag", "open", "soak/0", broker=3)]
    assert match(exp, lag, COLLATERAL["pause"])["one_to_one"]
    # ... but a finding on a partition the paused broker holds nothing of is not.
    other = [*findings_for(exp), finding("under_replicated", "open", "soak-move/0")]
    assert not match(exp, other, COLLATERAL["pause"])["one_to_one"]


def test_a_recreation_seen_as_a_deletion_requires_both_once() -> None:
    """A collector that saw the topic gone reports ``topic_deleted``; the partitions listed
    again under a new id each say ``topic_recreated``: each exactly once."""
    assert DELETED == {"soak/None": {"topic_deleted": "event"}}
    deleted: dict[str, Any] = {"kind": "topic_deleted", "state": "event", "topic": "soak"}
    deleted |= {"partition": None, "broker": None}
    want = {"soak/0": {"topic_recreated": "event"}, **DELETED}
    recreated = finding("topic_recreated", "event", "soak/0")
    assert match(want, [deleted, recreated], COLLATERAL["recreate"])["one_to_one"]
    assert not match(want, [deleted, deleted, recreated], COLLATERAL["recreate"])["one_to_one"]
    assert not match(want, [recreated], COLLATERAL["recreate"])["one_to_one"]


def test_a_killed_group_not_reaped_yet_has_no_memory() -> None:
    """A process killed but not reaped (a zombie) is no sample of the job's memory: the
    short soak read a group of zombies, just after its SIGKILL, as 0 MB."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from monitor.dev.soak.rss import group_rss

    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True
    )
    try:
        deadline = time.monotonic() + 10
        while group_rss(child.pid)[0] == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        rss, procs = group_rss(child.pid)
        assert procs == 1 and rss > 1 << 20
        os.kill(child.pid, signal.SIGKILL)
        while Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
            time.sleep(0.05)  # killed, not reaped: a zombie
        assert group_rss(child.pid) == (0, 0)
    finally:
        child.kill()
        child.wait()
