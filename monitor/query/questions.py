"""The runbook's questions as pure functions over partition views (no I/O).

``what_if``: what breaks if these brokers stop now. ``audit``: each topic's durability
profile. ``status``: the cluster at a glance. The CLI feeds them views from the state store;
tests feed them views from a replayed model.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from monitor.contract.state import PartitionView
from monitor.model.rules import durability_profile, durability_risks
from monitor.model.state import TopicConfig


class Outcome(StrEnum):
    """What happens to a partition when brokers stop, worst first."""

    LOST = "offline_no_replica"  # no replica left anywhere: offline until a broker returns
    UNCLEAN = "offline_unclean_needed"  # only out-of-sync replicas left
    UNDER_MIN_ISR = "under_min_isr"  # still led, acks=all writes fail
    LEADER_MOVES = "leader_moves"  # clean election to a surviving ISR member
    DEGRADED = "under_replicated"  # fewer in-sync copies, still writable


@dataclass(frozen=True, slots=True)
class Impact:
    topic: str
    partition: int
    outcome: Outcome
    leader: int | None
    isr: tuple[int, ...]
    surviving_isr: tuple[int, ...]
    surviving_replicas: tuple[int, ...]
    min_isr: int | None
    #: Committed offsets only out-of-sync survivors could restore (lost if elected uncleanly).
    committed_at_stake: int
    #: Acknowledged-but-uncommitted offsets on the stopped leader (lost with acks=1).
    uncommitted_at_stake: int
    #: The partition is in this state already (e.g. under min ISR before anything stops).
    already: bool = False


def what_if(
    views: Iterable[PartitionView],
    stopped: set[int],
    down: Iterable[int] = (),
) -> list[Impact]:
    """The partitions that change if ``stopped`` brokers stop now, with what is at stake.

    ``down``: brokers the monitor already sees down (not answering the collector): never
    survivors -- a dead broker's last log end restores nothing (issue 50: ``what-if
    --broker 2`` after an unclean election counted the dead broker 1 as a survivor,
    "committed at stake: 0"). Partitions are those with a replica on ``stopped``.

    An approximation by design: it uses the last observed LEOs and HW, assumes the
    controller elects cleanly from the surviving ISR, and ignores KIP-966 ELR (which can only
    make a clean election *possible* where this says an unclean one is needed).
    """
    out: list[Impact] = []
    gone = stopped | set(down)
    for v in views:
        if not stopped.intersection(v.replicas):
            continue
        leos = {r.broker: r.leo for r in v.replica_states}
        isr_left = tuple(b for b in v.isr if b not in gone)
        replicas_left = tuple(b for b in v.replicas if b not in gone)
        leader_down = v.leader is None or v.leader in gone
        leader_leo = leos.get(v.leader, -1) if v.leader is not None else -1
        committed = uncommitted = 0
        if not replicas_left:
            outcome = Outcome.LOST
        elif not isr_left:
            outcome = Outcome.UNCLEAN
            best = max((leos.get(b, -1) for b in replicas_left), default=-1)
            hw = v.high_watermark
            committed = max(0, hw - best) if best >= 0 and hw >= 0 else max(0, hw)
        elif v.min_isr is not None and len(isr_left) < v.min_isr:
            outcome = Outcome.UNDER_MIN_ISR
        elif leader_down:
            outcome = Outcome.LEADER_MOVES
        else:
            outcome = Outcome.DEGRADED
        if leader_down and leader_leo >= 0 and isr_left:
            best_isr = max((leos.get(b, -1) for b in isr_left), default=-1)
            uncommitted = max(0, leader_leo - max(best_isr, v.high_watermark))
        was_under_min = v.min_isr is not None and len(v.isr) < v.min_isr
        already = outcome is Outcome.UNDER_MIN_ISR and was_under_min
        out.append(
            Impact(
                v.topic,
                v.partition,
                outcome,
                v.leader,
                v.isr,
                isr_left,
                replicas_left,
                v.min_isr,
                committed,
                uncommitted,
                already,
            )
        )
    order = list(Outcome)
    out.sort(key=lambda i: (order.index(i.outcome), i.topic, i.partition))
    return out


_CONFIGS = "kafka-configs.sh --alter --entity-type topics --entity-name {topic} --add-config"


def fix_for(reason: str, topic: str, cfg: TopicConfig) -> str:
    """The change that removes ``reason`` from ``topic``; never one that changes nothing.

    >>> fix_for("min_isr_not_below_rf", "t", TopicConfig(2, 2, False))[:40]
    'raise the replication factor to 3 (kafka'
    """
    majority = cfg.replication_factor // 2 + 1
    configs = _CONFIGS.format(topic=topic)
    if reason == "rf_1":
        return (
            "raise the replication factor to 3 (kafka-reassign-partitions.sh with a new "
            "replica list): one disk failure loses the data"
        )
    if reason.startswith("min_isr_1_with_rf_"):
        return (
            f"{configs} min.insync.replicas={majority}: with 1, acks=all silently degrades "
            "to one copy"
        )
    if reason == "min_isr_not_below_rf":
        if majority < cfg.replication_factor:
            return (
                f"{configs} min.insync.replicas={majority}: with min ISR "
                f"{cfg.min_insync_replicas} >= RF {cfg.replication_factor} every broker "
                "restart stops acks=all writes"
            )
        # RF 2: the majority is both replicas, so no min ISR is both safe and available.
        return (
            "raise the replication factor to 3 (kafka-reassign-partitions.sh), then "
            f"min.insync.replicas=2 survives one broker down; or {configs} "
            "min.insync.replicas=1, accepting that an acked write may exist on one copy"
        )
    if reason == "unclean_election_enabled":
        return (
            f"{configs} unclean.leader.election.enable=false, unless availability is worth "
            "losing committed data for this topic"
        )
    raise ValueError(f"no fix known for durability reason {reason!r} (topic {topic})")


@dataclass(frozen=True, slots=True)
class AuditRow:
    topic: str
    replication_factor: int
    min_insync_replicas: int
    unclean_leader_election_enable: bool
    profile: str
    reasons: tuple[str, ...]
    fixes: tuple[str, ...]


def audit(configs: Mapping[str, TopicConfig]) -> list[AuditRow]:
    """Each topic's durability profile (CP / AP / misconfigured), the reasons and the fixes."""
    rows = []
    for topic, cfg in sorted(configs.items()):
        reasons = tuple(durability_risks(cfg))  # the finding's own labels (RF 5: "..._rf_5")
        fixes = tuple(fix_for(r, topic, cfg) for r in reasons)
        rows.append(
            AuditRow(
                topic,
                cfg.replication_factor,
                cfg.min_insync_replicas,
                cfg.unclean_leader_election_enable,
                durability_profile(cfg),
                reasons,
                fixes,
            )
        )
    return rows


@dataclass
class Status:
    partitions: int = 0
    open_by_severity: Counter[str] = field(default_factory=Counter)
    open_by_kind: Counter[str] = field(default_factory=Counter)
    offline: int = 0
    under_min_isr: int = 0
    under_replicated: int = 0
    #: Partitions no replica sample has reached (Admin-API-only collection, or brokers
    #: without an exporter): the findings of ``NEEDS_REPLICA_SAMPLES`` are not judged there.
    without_replica_samples: int = 0
    silent_brokers: list[int] = field(default_factory=list)
    newest_observed_at: int = -1


def status(views: Iterable[PartitionView], silent_brokers: Iterable[int] = ()) -> Status:
    st = Status(silent_brokers=sorted(silent_brokers))
    for v in views:
        st.partitions += 1
        st.newest_observed_at = max(st.newest_observed_at, v.updated_at)
        for o in v.open_findings:
            st.open_by_severity[o.severity.label] += 1
            st.open_by_kind[o.kind] += 1
        st.offline += v.leader is None
        st.under_min_isr += v.min_isr is not None and len(v.isr) < v.min_isr
        st.under_replicated += v.leader is not None and len(v.isr) < len(v.replicas)
        st.without_replica_samples += not v.replica_states
    return st
