"""The transition of one partition: ``step(state, event, ctx) -> (state, findings)``.

Pure: no clock (time comes from ``observed_at``, or the ``now`` given to :func:`tick`), no
I/O, no logging. The state object is updated in place and returned, because copying it on
every event would dominate the streaming job's hot path; callers that need the old state
keep a copy (``copy.deepcopy``) first.

Telemetry is *sampled*: the leader, each follower and the controller's metadata are read at
slightly different moments, every few seconds. Every rule below is written so that sampling
alone cannot fire it:

- lag is measured in *time* ("since when has this replica not held what the leader held"),
  reconstructed from the leader's LEO samples, never as a raw offset difference;
- a LEO or HW that goes backwards is believed only when a second, later sample confirms it
  (one stale collector cannot fake a truncation or an HW regression);
- events older than what was already applied for the same source are ignored and counted.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from monitor.model import election, rules
from monitor.model._emit import Emitter
from monitor.model.config import ModelConfig
from monitor.model.events import PartitionMeta, ReplicaReport
from monitor.model.findings import Finding, FindingKind, fields_state, set_fields_state
from monitor.model.state import (
    BrokerState,
    EpochEntry,
    PartitionState,
    ReplicaState,
    TopicConfig,
    shared,
)

K = FindingKind

#: Quiet partitions are judged cheaply. A condition emits only when it is active or open
#: (:meth:`Emitter.condition`); on a partition with no open condition each judgement below
#: first computes its predicates -- the same expressions it would pass to the emitter --
#: and returns when none holds, without building the emitter's calls and detail closures.
#: Most partitions of a healthy fleet are quiet on most rounds: this was half the model's
#: time per round. ``False`` judges every condition the long way (the differential test
#: ``tests/model/test_quiet.py`` runs every scenario and property stream both ways).
QUIET_SKIPS = True


@dataclass(frozen=True, slots=True)
class Context:
    """What a partition's transition needs beyond its own state."""

    config: ModelConfig
    topic: TopicConfig | None = None
    #: The brokers' states (the cluster model's own map, read only): why a replica left.
    brokers: Mapping[tuple[str, int], BrokerState] = field(default_factory=dict)

    def __getstate__(self) -> list[Any]:
        return fields_state(self)  # a cluster model pickled whole holds its contexts

    def __setstate__(self, state: list[Any]) -> None:
        set_fields_state(self, state)

    def broker(self, cluster: str, broker: int) -> BrokerState | None:
        return self.brokers.get((cluster, broker))

    @property
    def min_isr(self) -> int:
        if self.topic is not None:
            return self.topic.min_insync_replicas
        return self.config.default_min_insync_replicas

    @property
    def min_isr_known(self) -> bool:
        return self.topic is not None


def new_state(cluster: str, topic: str, partition: int) -> PartitionState:
    return PartitionState(cluster=sys.intern(cluster), topic=sys.intern(topic), partition=partition)


def step(
    state: PartitionState, event: PartitionMeta | ReplicaReport, ctx: Context
) -> tuple[PartitionState, list[Finding]]:
    """Apply one event to one partition's state."""
    out: list[Finding] = []
    emit = Emitter(state.cluster, state.topic, state.partition, state.open, out)
    if isinstance(event, PartitionMeta):
        _step_meta(state, event, ctx, emit)
    else:
        _step_replica(state, event, ctx, emit)
    return state, out


#: A partition's round (:func:`step_round`) takes the steady metadata's short path when it
#: can. ``False``: every round's metadata the long way (the differential test
#: ``tests/model/test_round_step.py`` runs every scenario and property stream both ways).
STEADY_META = True


#: How soon a read must contradict one before it for that one to be a spike of its source
#: (an epoch seen once): the collector reads every 5 s by default.
SPIKE_WINDOW_MS = 30_000


def step_round(
    state: PartitionState,
    samples: tuple[ReplicaReport, ...],
    meta: PartitionMeta,
    ctx: Context,
) -> list[Finding]:
    """Apply a partition's round -- its samples, then its metadata, in that order: exactly
    :func:`step` of each in turn -- and return the findings.

    What it saves over those calls: one emitter and one dispatch for the round instead of
    one per event, and for the metadata of a steady round (the same leader, epoch, ISR,
    replicas and reassignment as the state holds: most rounds of most partitions), the
    comparisons and bookkeeping of a leadership or membership change that is not there
    (:func:`_steady_meta`). Every rule runs as it would event by event.
    """
    out: list[Finding] = []
    emit = Emitter(state.cluster, state.topic, state.partition, state.open, out)
    for ev in samples:
        _step_replica(state, ev, ctx, emit)
    if STEADY_META and _is_steady(state, meta):
        _steady_meta(state, meta, ctx, emit)
        _after_meta(state, meta.observed_at, ctx, emit)
    else:
        _step_meta(state, meta, ctx, emit)
    return out


def _step_replica(s: PartitionState, ev: ReplicaReport, ctx: Context, emit: Emitter) -> None:
    if not _apply_replica(s, ev, ctx, emit):
        return
    t = ev.observed_at
    if s.open or not QUIET_SKIPS:
        emit.condition(K.STALE_TELEMETRY, False, t)
    if 0 <= s.deferred_at < t:
        _judge_followers(s, t, ctx, emit)  # what the last instant left undecided
    if ev.broker == s.leader:
        _judge_followers(s, t, ctx, emit)  # lags are measured against the leader
        _hw_condition(s, t, ctx, emit)
    else:
        _replica_conditions(s, ev.broker, s.replica_states[ev.broker], t, ctx, emit)


def _step_meta(s: PartitionState, ev: PartitionMeta, ctx: Context, emit: Emitter) -> None:
    if _apply_meta(s, ev, ctx, emit):
        _after_meta(s, ev.observed_at, ctx, emit)


def _after_meta(s: PartitionState, t: int, ctx: Context, emit: Emitter) -> None:
    if s.open or not QUIET_SKIPS:
        emit.condition(K.STALE_TELEMETRY, False, t)
    if 0 <= s.deferred_at < t:
        _judge_followers(s, t, ctx, emit)  # what the last instant left undecided
    evaluate_conditions(s, t, ctx, emit)  # leadership/ISR change touches all


def _may_be_spike(s: PartitionState, ev: PartitionMeta, t: int) -> bool:
    """Whether a read with a lower epoch may say the current one was a spike: seen in one
    read only, this read back at or above the epoch before it, and soon after (a read or a
    few of the collector's: a minute of silence and then an older epoch is a recreated
    topic, said by ``epoch_regression``)."""
    return (
        s.epoch_reads == 1
        and ev.leader_epoch >= s.epoch_before
        and t - s.meta_at <= SPIKE_WINDOW_MS
    )


def _epoch_spike(s: PartitionState, ev: PartitionMeta, t: int, emit: Emitter) -> None:
    """Two reads back at the epoch before one seen once (:func:`_may_be_spike`): that
    epoch is taken out (said: ``telemetry_inconsistent``) -- an epoch regression forgets
    the partition's whole history, which one bad read must not do."""
    emit.event(
        K.TELEMETRY_INCONSISTENT,
        t,
        {
            "source": "partition",
            "field": "leader_epoch",
            "value": s.leader_epoch,
            "before": s.epoch_before,
            "after": ev.leader_epoch,
            "leader": s.leader,
        },
    )
    spiked = s.leader_epoch
    if s.election is not None and s.election.epoch == spiked:
        # The spiked read was an election's: the election stands, at this read's epoch.
        s.election.epoch = s.leader_epoch = ev.leader_epoch
        s.lineage = [
            e._replace(epoch=ev.leader_epoch) if e.epoch == spiked else e for e in s.lineage
        ]
    else:
        # Back to the epoch before: this read is judged against it (a bump, an election).
        s.leader_epoch = s.epoch_before
        s.lineage = [e for e in s.lineage if e.epoch != spiked]
    s.epoch_reads = 0


def _leader_conflict(s: PartitionState, ev: PartitionMeta, t: int, emit: Emitter) -> bool:
    """A read naming another leader at the current epoch, which Kafka never does (a new
    leader bumps the epoch): one of the two reads is wrong. Held (True: not applied) until a
    second read names the same leader; then, if the epoch was read once only, that read's
    leader was the bad one -- its epoch is undone, and this read is the election it hid.
    A read that goes back to the current leader says the held one was bad."""
    same_epoch = ev.leader_epoch == s.leader_epoch and s.leader is not None
    if not (same_epoch and ev.leader is not None and ev.leader != s.leader):
        if s.pending_leader_at >= 0:
            emit.event(
                K.TELEMETRY_INCONSISTENT,
                t,
                {
                    "source": "partition",
                    "field": "leader",
                    "value": s.pending_leader,
                    "observed_at": s.pending_leader_at,
                    "leader": s.leader,
                    "epoch": s.leader_epoch,
                },
            )
            s.pending_leader = s.pending_leader_at = -1
        return False
    if s.pending_leader != ev.leader:
        s.pending_leader, s.pending_leader_at = ev.leader, t
        return True
    s.pending_leader = s.pending_leader_at = -1
    if s.epoch_reads == 1 and s.epoch_before >= 0:
        s.lineage = [e for e in s.lineage if e.epoch != s.leader_epoch]
        s.leader_epoch = s.epoch_before
    return False


def _is_steady(s: PartitionState, ev: PartitionMeta) -> bool:
    """Whether ``ev`` is newer metadata of the partition as the state holds it: the same
    incarnation, leader, epoch, replicas, ISR, ELR, offline replicas and reassignment.
    What :func:`_apply_meta` would then do is :func:`_steady_meta`."""
    return (
        s.meta_at >= 0
        and ev.observed_at > s.meta_at
        and s.leader_epoch >= 0
        and s.pending_leader_at < 0
        and s.pending_meta is None
        and ev.leader_epoch == s.leader_epoch
        and ev.leader == s.leader
        and (ev.topic_id is None or ev.topic_id == s.topic_id)
        and ev.isr == s.isr
        and ev.replicas == s.replicas
        and ev.offline_replicas == s.offline_replicas
        and (
            ev.eligible_leader_replicas is None
            or ev.eligible_leader_replicas == s.eligible_leader_replicas
        )
        and (
            # no reassignment said, or none said running and none held
            (ev.adding_replicas is None and ev.removing_replicas is None)
            or not (
                ev.adding_replicas
                or ev.removing_replicas
                or s.adding_replicas
                or s.removing_replicas
            )
        )
    )


def _steady_meta(s: PartitionState, ev: PartitionMeta, ctx: Context, emit: Emitter) -> None:
    """:func:`_apply_meta` of steady metadata (:func:`_is_steady`): no new incarnation, no
    epoch regression or election, no ISR change, no assignment moved -- the rest, in the
    same order."""
    t = ev.observed_at
    s.meta_at = t
    s.epoch_reads = min(2, s.epoch_reads + 1)
    if t > s.last_seen:
        s.last_seen = t
    if ev.log_start_offset is not None:
        s.log_start_offset = ev.log_start_offset
    if ev.epoch_start_offset is not None:
        election.on_epoch_record(
            s, ev.epoch_start_offset, t, emit, _back_at(s, ctx), ev.high_watermark
        )
    if s.election is not None:
        election.maybe_decide(s, t, ctx.config, emit)
    if ev.high_watermark is not None:
        _observe_hw(s, ev.high_watermark, t, ctx, emit)
    _forget_removed_replicas(s, t, emit)


def _judge_followers(s: PartitionState, t: int, ctx: Context, emit: Emitter) -> None:
    """Every replica's lag and divergence conditions, at ``t``.

    No condition opens and resolves at the same instant: a follower whose broker answered
    the collector at this instant, but whose sample of the round has not been applied yet,
    is not judged on its older sample -- that sample follows (a broker back from a restart:
    judged on its last sample from before, it looked rounds behind; ``follower_lag`` opened
    and its own sample resolved it a moment later). It is judged at the partition's next
    later instant. A follower whose broker did not answer is judged on what is known.
    """
    leader_at = s.leader_last_at()
    s.deferred_at = -1
    for b, rs in s.replica_states.items():
        if b != s.leader and leader_at == t and rs.observed_at < t:
            bs = ctx.broker(s.cluster, b)
            if bs is not None and bs.alive and bs.observed_at == t:
                s.deferred_at = t
                continue
        _replica_conditions(s, b, rs, t, ctx, emit)


def tick_is_quiet(state: PartitionState, now: int, config: ModelConfig) -> bool:
    """Whether :func:`tick` at ``now`` would find nothing and change nothing: no open
    condition, no election being judged or remembered, not silent for longer than
    ``stale_after_ms`` -- most partitions at most ticks. The cluster model skips them
    (``QUIET_SKIPS``; ``tests/model/test_quiet.py`` ticks every scenario both ways)."""
    return (
        QUIET_SKIPS
        and not state.open
        and not state.election_times
        and state.election is None
        and (state.last_seen < 0 or now - state.last_seen <= config.stale_after_ms)
    )


def tick(state: PartitionState, now: int, ctx: Context) -> list[Finding]:
    """Time-driven checks: silence (``stale_telemetry``) and flapping that has calmed down."""
    out: list[Finding] = []
    emit = Emitter(state.cluster, state.topic, state.partition, state.open, out)
    silent_for = now - state.last_seen
    emit.condition(
        K.STALE_TELEMETRY,
        state.last_seen >= 0 and silent_for > ctx.config.stale_after_ms,
        now,
        lambda: {"last_seen_at": state.last_seen, "silent_for_ms": silent_for},
    )
    _flapping(state, now, ctx, emit)
    if state.election is not None and not state.election.on_sample:
        # An undecided election's waits may be over (what it decides is a finding: the
        # Spark operator keeps the state of partitions whose tick found something).
        election.maybe_decide(state, now, ctx.config, emit)
    return out


# --- metadata (controller's view) -------------------------------------------------------


def _apply_meta(s: PartitionState, ev: PartitionMeta, ctx: Context, emit: Emitter) -> bool:
    t = ev.observed_at
    if t < s.meta_at:
        s.late_events += 1
        return False
    if t == s.meta_at:
        s.duplicate_events += 1
        return False
    if ev.topic_id is not None and ev.topic_id != s.topic_id:
        if ev.topic_id in s.retired_topic_ids:
            s.late_events += 1  # a second collector still showing the deleted incarnation
            return False
        if s.topic_id is not None:
            _new_incarnation(s, ev, t, emit)
        s.topic_id = ev.topic_id
    if s.pending_meta is not None and t <= s.pending_meta.observed_at:
        s.duplicate_events += 1  # the held read again (or one before it): nothing new
        return False
    if ev.leader_epoch < s.leader_epoch and _may_be_spike(s, ev, t):
        if s.pending_meta is None:
            # One read back at or above the epoch before a new one seen once: a broker's
            # stale view (metadata reaches the brokers one by one), or the new epoch was a
            # bad read. Held until a second such read (counted: not applied yet).
            s.pending_meta = ev
            s.late_events += 1
            return False
        held, s.pending_meta = s.pending_meta, None
        _epoch_spike(s, ev, t, emit)  # two reads agree: the spiked epoch is gone
        _apply_meta(s, held, ctx, emit)  # the held read first, as it came
    elif s.leader_epoch >= 0 and ev.leader_epoch < s.leader_epoch:
        if t - s.meta_at <= ctx.config.clock_skew_ms:
            # A second collector with an older view of the metadata: not evidence.
            s.late_events += 1
            return False
        emit.event(
            K.EPOCH_REGRESSION,
            t,
            {
                "epoch_before": s.leader_epoch,
                "epoch": ev.leader_epoch,
                "hint": "partition recreated, or metadata from a different cluster",
            },
        )
        _forget_incarnation(s)
        emit.condition(K.ELECTION_PENDING, False, t)

    if ev.leader_epoch >= s.leader_epoch:
        s.pending_meta = None  # a lower read held was a stale view: this one is current
    if _leader_conflict(s, ev, t, emit):
        s.late_events += 1  # held, counted: not applied unless a second read agrees
        return False
    if ev.leader_epoch == s.leader_epoch:
        s.epoch_reads = min(2, s.epoch_reads + 1)  # once, or more
    else:
        s.epoch_before, s.epoch_reads = s.leader_epoch, 1
    prev_isr, prev_elr, prev_epoch = s.isr, s.eligible_leader_replicas, s.leader_epoch
    prev_leader = s.leader if s.leader is not None else _last_leader(s)
    before = election.Before(
        prev_leader,
        prev_epoch,
        prev_isr,
        prev_elr,
        s.adding_replicas,
        meta_at=s.meta_at,
        replicas=s.replicas,
    )
    s.meta_at = t
    s.last_seen = max(s.last_seen, t)
    if ev.adding_replicas is not None or ev.removing_replicas is not None:
        s.adding_replicas = shared(tuple(b for b in ev.adding_replicas or () if b in ev.replicas))
        s.removing_replicas = shared(
            tuple(b for b in ev.removing_replicas or () if b in ev.replicas)
        )
    elif ev.replicas != s.replicas:
        # Not said this round, but the assignment changed: a reassignment ends (or is
        # cancelled) with one -- or one began and this round's read of the reassignments
        # (a separate Admin request) did not show it yet: a set that only grew is that,
        # its new replicas outside the ISR copying (Kafka counts them in no URP: a CI run
        # paged under_replicated for one). A new one will be said again.
        grew = bool(s.replicas) and set(s.replicas) < set(ev.replicas)
        new = tuple(b for b in ev.replicas if b not in s.replicas and b not in ev.isr)
        s.adding_replicas = shared(new) if grew else ()
        s.removing_replicas = ()
    # The state's tuples stay while equal (most rounds), else the shared equal one.
    if ev.replicas != s.replicas:
        s.replicas = shared(ev.replicas)
    if ev.offline_replicas != s.offline_replicas:
        s.offline_replicas = shared(ev.offline_replicas)
    # None: not reported (a read that fell back to the Metadata API, a Kafka without ELR) --
    # the ELR last reported stands; forgetting it made the next election from it unclean.
    elr = ev.eligible_leader_replicas
    if elr is not None and elr != s.eligible_leader_replicas:
        s.eligible_leader_replicas = shared(elr)
    s.leader = ev.leader
    if ev.log_start_offset is not None:
        s.log_start_offset = ev.log_start_offset

    if prev_epoch < 0:
        s.leader_epoch = ev.leader_epoch
        s.lineage.append(EpochEntry(ev.leader_epoch, -1, ev.leader, t))
        s.isr = shared(ev.isr)
        if ev.leader is not None:
            _reset_leader_measurements(s, t)
    else:
        if ev.leader_epoch > prev_epoch:
            s.leader_epoch = ev.leader_epoch
            if ev.leader is not None and ev.leader != prev_leader:
                s.leader = prev_leader  # judged against the log as it stood
                # Not known (no topic_config yet, or its event refused): Kafka's default,
                # false -- a guess that pages nobody; an unclean election that lost data is
                # still paged by its loss.
                unclean = ctx.topic is not None and ctx.topic.unclean_leader_election_enable
                bs = ctx.broker(s.cluster, ev.leader)
                back = bs.back_at if bs is not None else -1
                election.start_election(s, before, ev, ctx.config, emit, unclean, back)
                s.leader = ev.leader
                _reset_leader_measurements(s, t)
            else:
                # Epoch bumped without a new leader (leader lost, or an older KRaft bumping
                # the epoch on ISR changes): a new lineage entry, not an election.
                start = s.leader_leo() if ev.leader is not None else -1
                s.append_lineage(EpochEntry(ev.leader_epoch, start, ev.leader, t), ctx.config)
        _isr_change(s, prev_isr, ev.isr, t, ctx, emit)
        if ev.isr != s.isr:
            s.isr = shared(ev.isr)

    if ev.epoch_start_offset is not None and ev.leader_epoch == s.leader_epoch:
        election.on_epoch_record(
            s, ev.epoch_start_offset, t, emit, _back_at(s, ctx), ev.high_watermark
        )
    election.maybe_decide(s, t, ctx.config, emit)
    if ev.high_watermark is not None:
        _observe_hw(s, ev.high_watermark, t, ctx, emit)
    _forget_removed_replicas(s, t, emit)
    return True


def _forget_removed_replicas(s: PartitionState, t: int, emit: Emitter) -> None:
    """A replica no longer assigned (reassigned away) leaves the state, with its conditions."""
    if not s.replicas:
        return
    for b in [b for b in s.replica_states if b not in s.replicas]:
        emit.resolve_all(t, broker=b)
        del s.replica_states[b]


def _last_leader(s: PartitionState) -> int | None:
    for entry in reversed(s.lineage):
        if entry.leader is not None:
            return entry.leader
    return None


def say_recreated(
    emit: Emitter,
    t: int,
    topic_id_before: str | None,
    ev: PartitionMeta,
    committed_hw_before: int,
    epoch_before: int | None = None,
    deleted_at: int | None = None,
) -> None:
    """The info finding ``topic_recreated``, in one vocabulary whether the new topic id
    replaced the old one in the partition's state (``epoch_before``) or the deletion was
    seen first and the partition forgotten (``deleted_at``)."""
    details: dict[str, Any] = {"topic_id_before": topic_id_before, "topic_id": ev.topic_id}
    if epoch_before is not None:
        details["epoch_before"] = epoch_before
    details |= {"epoch": ev.leader_epoch, "committed_hw_before": committed_hw_before}
    if deleted_at is not None:
        details["deleted_at"] = deleted_at
    emit.event(K.TOPIC_RECREATED, t, details)


def _new_incarnation(s: PartitionState, ev: PartitionMeta, t: int, emit: Emitter) -> None:
    """The topic was deleted and recreated under the same name (a new topic id): its
    offsets and epochs start again, so nothing of the old history is judged against the new
    one -- no regression, truncation, loss or lag across incarnations. The old
    incarnation's conditions resolve; replica samples seen before this event (JMX has no
    topic id) are dropped with the old replica states."""
    say_recreated(emit, t, s.topic_id, ev, s.max_hw, epoch_before=s.leader_epoch)
    emit.resolve_all(t)
    assert s.topic_id is not None
    s.retired_topic_ids = (*s.retired_topic_ids, s.topic_id)[-4:]
    _forget_incarnation(s)
    s.lineage.clear()
    s.leader = None
    s.election_times = ()
    s.meta_at = -1


def _forget_incarnation(s: PartitionState) -> None:
    """After an epoch regression, the offsets seen so far belong to another log."""
    s.leader_epoch = -1
    s.isr = ()
    s.prev_isr = ()
    s.hw = s.max_hw = s.max_hw_at = s.hw_at = -1
    s.suspect_hw = -1
    s.pending_hw = s.pending_hw_at = -1
    s.hw_max_step = 0
    s.replica_states.clear()
    s.reset_leader_leo()
    s.election = None


def _isr_change(
    s: PartitionState,
    before: tuple[int, ...],
    after: tuple[int, ...],
    t: int,
    ctx: Context,
    emit: Emitter,
) -> None:
    """One ``isr_shrink`` per broker that left (with why, where telemetry says) and one
    ``isr_expand`` per broker that joined."""
    # A replica reassigned away leaves the ISR with the assignment: no shrink.
    removed = [b for b in before if b not in after and b in s.replicas]
    added = [b for b in after if b not in before]
    if not removed and not added:
        return
    s.prev_isr = before
    details = {"isr_before": list(before), "isr": list(after), "replicas": list(s.replicas)}
    for b in removed:
        cause, why = _shrink_cause(s, b, t, ctx)
        emit.event(
            K.ISR_SHRINK,
            t,
            {**details, "removed": removed, "cause": cause, "why": why},
            broker=b,
        )
    for b in added:
        rs = s.replica_states.get(b)
        if rs is not None and ctx.config.epoch_truncation:
            # Kafka lets a replica back into the ISR only once its log matches the leader's
            # up to the HW and the epoch's start: it has truncated whatever it had to.
            # (Before KIP-101 it rejoined without truncating: that is the divergence.)
            rs.must_truncate_to = -1
        emit.event(K.ISR_EXPAND, t, {**details, "added": added}, broker=b)


def _shrink_cause(s: PartitionState, b: int, t: int, ctx: Context) -> tuple[str, str]:
    """Why ``b`` left the ISR, as far as telemetry says: (code, sentence)."""
    bs = ctx.broker(s.cluster, b)
    if bs is not None and not bs.alive:
        return "not_answering", f"broker {b} does not answer the collector"
    rs = s.replica_states.get(b)
    if rs is not None and rs.suspect_leo >= 0:
        return "restarted", f"broker {b}'s log end went back ({rs.leo} -> {rs.suspect_leo})"
    if bs is not None and bs.observed_at >= 0 and t - bs.observed_at > ctx.config.stale_after_ms:
        return "not_answering", f"broker {b} silent for {t - bs.observed_at} ms"
    if bs is not None and 0 <= t - bs.back_at <= ctx.config.stale_after_ms:
        # Back (a new process, or answering again) within the last reads: the shrink is its
        # restart's, not a follower falling behind.
        return "restarted", f"broker {b} came back at {bs.back_at} (a restart)"
    if rs is not None and rs.lag_ms > 0:
        return (
            "lagging",
            f"broker {b} behind the leader for {rs.lag_ms} ms ({rs.lag_offsets} offsets)",
        )
    return "unknown", f"no telemetry says why broker {b} left"


def _reset_leader_measurements(s: PartitionState, t: int) -> None:
    """A new leader: its LEO is the reference now; followers get a fresh lag clock.

    Kafka resets every follower's lastCaughtUpTime when leadership changes, for the
    same reason: lag against the old leader says nothing about the new one.
    """
    leo = s.leader_leo()
    s.epoch_started_at = t
    s.reset_leader_leo(t, leo)
    for rs in s.replica_states.values():
        rs.lag_ms = 0
        rs.caught_up_at = t
        rs.ahead_samples = 0
    s.hw_caught_up_at = t
    s.hw_lag_ms = 0
    s.suspect_hw = -1
    s.pending_hw = s.pending_hw_at = -1


# --- replica reports (each broker's view of its own log) -----------------------------------


def _apply_replica(s: PartitionState, ev: ReplicaReport, ctx: Context, emit: Emitter) -> bool:
    rs = s.replica_states.get(ev.broker)
    if rs is None:
        if s.replicas and ev.broker not in s.replicas:
            return False  # a replica reassigned away whose log is not deleted yet
        rs = s.replica_states[ev.broker] = ReplicaState()
    t, leo = ev.observed_at, ev.log_end_offset
    if t < rs.observed_at:
        s.late_events += 1
        return False
    if t == rs.observed_at:
        s.duplicate_events += 1
        return False
    rs.observed_at = t
    s.last_seen = max(s.last_seen, t)

    if 0 <= leo < rs.leo and not _leo_spike(s, ev.broker, rs, leo, t, ctx, emit):
        # A lower sample is no sample "ahead": the count of those starts again.
        rs.ahead_samples, rs.ahead_since, rs.ahead_counted_at = 0, -1, t
        if rs.suspect_leo < 0 and not _restart_explains(s, ev.broker, rs, t, ctx):
            rs.suspect_leo, rs.suspect_at = leo, t  # wait for a second sample to believe it
            if s.election is not None and s.election.leader == ev.broker:
                election.maybe_decide(s, t, ctx.config, emit)
            return True
        if s.topic_id is not None and s.meta_at <= rs.suspect_at:
            # No metadata since the first low sample: the topic may have been recreated (a
            # replica sample has no topic id). Believed once metadata shows the same id.
            rs.suspect_leo = leo
            return True
        election.truncate(s, ev.broker, rs, leo, t, emit, follower=ev.broker != s.leader)
    rs.suspect_leo = -1
    if leo > rs.leo >= 0:
        rs.rise_from, rs.rise_epoch = rs.leo, s.leader_epoch
    elif leo == rs.leo:
        rs.rise_from = -1  # a second sample at the value: the rise is confirmed
    rs.leo, rs.leo_at = leo, t
    if rs.must_truncate_to >= 0 and leo <= rs.must_truncate_to:
        rs.must_truncate_to = -1  # truncated to the new epoch's start, as Kafka should

    if s.election is not None and s.election.leader == ev.broker:
        election.maybe_decide(s, t, ctx.config, emit)
    if ev.broker == s.leader:
        _on_leader_sample(s, leo, t, ctx, emit)
        hw = ev.high_watermark
        if hw is not None and s.hw < hw <= max(leo, s.max_hw) and t >= s.hw_at:
            # The leader's own report: fresh enough to measure HW lag, but never compared
            # with the metadata HW for regressions -- two sources sampled at different
            # moments disagree by design (the ``partition`` event's HW is authoritative).
            # One above the same page's log end (and every committed HW) is not believed:
            # kept, it would hide every HW lag until the log passed it.
            s.hw, s.hw_at = hw, t
            _measure_hw(s, t)
    else:
        _measure_follower(s, rs, t, ctx)
    return True


def _back_at(s: PartitionState, ctx: Context) -> int:
    """When the current leader's broker last came back (-1: never seen to)."""
    bs = ctx.broker(s.cluster, s.leader) if s.leader is not None else None
    return bs.back_at if bs is not None else -1


def _restart_explains(s: PartitionState, b: int, rs: ReplicaState, t: int, ctx: Context) -> bool:
    """Whether broker ``b`` came back (answering again, or a new process) between the sample
    of its log end and this lower one: an independent witness that the drop is real -- a
    restart truncates what was not flushed (or, before KIP-101, to the HW) -- so one sample
    is believed, as a second would be."""
    bs = ctx.broker(s.cluster, b)
    return bs is not None and 0 <= bs.back_at <= t and bs.back_at > rs.leo_at


def _leo_spike(
    s: PartitionState, b: int, rs: ReplicaState, leo: int, t: int, ctx: Context, emit: Emitter
) -> bool:
    """Whether the leader's lower sample ``leo`` says its one sample before was a spike: a
    rise seen once, under the same leadership, far beyond how fast the log grows (more than
    four of its fastest rises), and this sample back at or above the value before it. Then
    that sample never happened as far as the model goes -- said (``telemetry_inconsistent``),
    taken out of the leader's history (it would make the HW look stuck behind it), and no
    truncation is judged. A leader's log never goes back within its own leadership."""
    if b != s.leader or rs.rise_from < 0 or rs.rise_epoch != s.leader_epoch:
        return False
    if leo < rs.rise_from or rs.leo - rs.rise_from <= rules.GROWTH_SLACK * s.leader_max_step(
        skip_newest=True
    ):
        return False
    emit.event(
        K.TELEMETRY_INCONSISTENT,
        t,
        {
            "source": "replica",
            "field": "log_end_offset",
            "value": rs.leo,
            "before": rs.rise_from,
            "after": leo,
            "leader": s.leader,
        },
        broker=b,
    )
    s.drop_leader_samples_above(leo)
    rs.rise_from = -1
    rs.leo = rs.suspect_leo = -1  # taken below as a first sample
    return True


def _on_leader_sample(s: PartitionState, leo: int, t: int, ctx: Context, emit: Emitter) -> None:
    s.record_leader_leo(t, leo, ctx.config.leo_history)
    _witness_pending_hw(s, leo, t, ctx, emit)
    for b, rs in s.replica_states.items():
        if b != s.leader:
            _measure_follower(s, rs, t, ctx)
            # A follower sampled (under this leadership) *before* this leader sample, yet
            # holding more than the leader: impossible unless their logs differ. Strictly
            # before: samples with the same stamp were read concurrently (the collector
            # stamps a round's JMX reads with the round's start), in an unknown order.
            # Each follower sample counts once: one sample ahead, read against two leader
            # samples, is still one sample (a spike of one page must not look confirmed).
            if (
                s.epoch_started_at <= rs.observed_at < t
                and rs.leo > leo
                and rs.ahead_counted_at != rs.observed_at
            ):
                if rs.ahead_samples == 0:
                    rs.ahead_since = t
                rs.ahead_samples += 1
                rs.ahead_counted_at = rs.observed_at
    _measure_hw(s, t)


def _measure_follower(s: PartitionState, rs: ReplicaState, now: int, ctx: Context) -> None:
    if rs.leo < 0 or not s.leader_leos:
        return
    leader_leo = s.leader_last_leo()
    rs.lag_offsets = max(0, leader_leo - rs.leo)
    behind_since = _leader_passed(s, rs.leo, now)
    if behind_since is None:
        rs.caught_up_at = now
        rs.lag_ms = 0
    else:
        # Never earlier than the last moment it was known to be caught up.
        behind_since = max(behind_since, rs.caught_up_at)
        rs.lag_ms = max(0, now - behind_since)
    if rs.leo <= leader_leo:
        rs.ahead_samples, rs.ahead_since = (
            0,
            -1,
        )  # "ahead" evidence is counted when a later leader sample arrives


# --- high watermark --------------------------------------------------------------------------


def _observe_hw(s: PartitionState, hw: int, t: int, ctx: Context, emit: Emitter) -> None:
    if t < s.hw_at:
        return
    if 0 <= hw < s.max_hw and s.max_hw_at < s.epoch_started_at:
        # A new leader's HW below the highest HW its predecessors reached: what that costs
        # is the election's verdict (monitor.model.election), not an HW regression of this
        # leadership's own. The committed HW stays the reference until this one passes it.
        s.suspect_hw = -1
        s.hw, s.hw_at = hw, t
        _measure_hw(s, t)
        return
    if 0 <= hw < s.max_hw:
        if s.suspect_hw < 0:
            s.suspect_hw = hw  # one low sample may be a stale collector; wait for another
            s.hw_at = t
            return
        # The first low sample may have been lower still: the HW went back at least that
        # far (the suspect sample was real -- a second one confirmed it).
        lowest = min(hw, s.suspect_hw)
        emit.event(
            K.HW_REGRESSION,
            t,
            {
                "hw_before": s.max_hw,
                "hw": hw,
                "lowest_hw": lowest,
                "regressed_by": s.max_hw - lowest,
                "leader": s.leader,
                "epoch": s.leader_epoch,
            },
        )
        s.max_hw, s.max_hw_at = hw, t
        s.pending_hw = s.pending_hw_at = -1  # a higher one held since proves nothing now
    s.suspect_hw = -1
    if hw > s.max_hw and not _hw_plausible(s, hw, t, ctx, emit):
        return
    _accept_hw(s, hw, t, ctx)


def _hw_plausible(s: PartitionState, hw: int, t: int, ctx: Context, emit: Emitter) -> bool:
    """Whether a new highest HW may be believed now: at most what its leader was seen to
    hold (a leader's log only grows, and the HW never passes it) -- give or take four of its
    fastest rises between two samples, since the HW is read after the pages that give the
    log end (the round's partition event comes last: at load, and with pages read late in
    the round, its HW passes the leader's sampled log end) -- or, with no leader log end
    (the Admin API alone), at most four of the committed HW's own largest rises above it
    (the lab's unclean election read so: 200 committed, then 500 read once just before the
    leader died -- the exact loss needs it). A spike beyond both is held
    (:attr:`PartitionState.pending_hw`) until a witness confirms it -- a later leader sample
    at or above it (:func:`_witness_pending_hw`), or a second HW sample at or above it; a
    second HW below it, still above every committed one, says the first was impossible."""
    if (
        s.leader_leos
        and s.leader_last_at() >= s.epoch_started_at
        and hw <= s.leader_last_leo() + rules.GROWTH_SLACK * s.leader_max_step()
    ):
        return True
    if _within_hw_growth(s, hw):
        return True
    if s.pending_hw >= 0:
        if hw >= s.pending_hw:
            # A second sample at or above it: the held one is believed; this one is held
            # next, until its own witness.
            held, held_at = s.pending_hw, s.pending_hw_at
            s.pending_hw = s.pending_hw_at = -1
            _accept_hw(s, held, held_at, ctx)
            if _within_hw_growth(s, hw):
                return True  # now that the held read is believed
        elif s.max_hw >= 0:
            # Above both neighbours (the committed HW before, this one after): the held
            # sample is the odd one out.
            _pending_hw_contradicted(s, t, emit, {"next_high_watermark": hw})
        # else: the first two samples of a partition disagree -- no telling which is wrong;
        # the lower is held (a reference too high could only page falsely).
    s.pending_hw, s.pending_hw_at = hw, t
    return False


def _within_hw_growth(s: PartitionState, hw: int) -> bool:
    """Within how fast the committed HW has been seen to grow above the committed one
    (``rules.GROWTH_SLACK`` of its largest rises between two believed reads)."""
    return s.max_hw >= 0 and hw - s.max_hw <= rules.GROWTH_SLACK * s.hw_max_step


def _pending_hw_contradicted(
    s: PartitionState, t: int, emit: Emitter, witness: dict[str, Any]
) -> None:
    emit.event(
        K.TELEMETRY_INCONSISTENT,
        t,
        {
            "source": "partition",
            "field": "high_watermark",
            "value": s.pending_hw,
            "observed_at": s.pending_hw_at,
            "committed_hw": s.max_hw,
            "leader": s.leader,
            **witness,
        },
    )
    s.pending_hw = s.pending_hw_at = -1


def _witness_pending_hw(s: PartitionState, leo: int, t: int, ctx: Context, emit: Emitter) -> None:
    """A leader sample against the held HW: at or above it (taken at or after it), the HW
    was real; below it and taken later, the HW was never possible -- the leader did not
    hold that much even afterwards."""
    if s.pending_hw < 0 or t < s.pending_hw_at:
        return
    if leo >= s.pending_hw:
        hw, at = s.pending_hw, s.pending_hw_at
        s.pending_hw = s.pending_hw_at = -1
        if at >= s.hw_at:
            _accept_hw(s, hw, at, ctx)
        elif hw > s.max_hw:
            s.max_hw, s.max_hw_at = hw, at
    elif t > s.pending_hw_at:
        _pending_hw_contradicted(s, t, emit, {"leader_leo": leo, "leader_leo_at": t})


def _accept_hw(s: PartitionState, hw: int, t: int, ctx: Context) -> None:
    # Within a leadership the HW only grows: a lower value than the leader's own report
    # (a replica event) is an older read, not news -- regressions are judged above.
    if hw >= s.hw or s.hw_at < s.epoch_started_at:
        s.hw = hw
    s.hw_at = t
    if hw > s.max_hw or s.max_hw_at < 0:
        if s.max_hw >= 0:
            s.hw_max_step = max(s.hw_max_step, hw - s.max_hw)
        s.max_hw, s.max_hw_at = max(s.max_hw, hw), t
    if ctx.config.epoch_truncation:
        for b in s.isr:
            rs = s.replica_states.get(b)
            if rs is not None and 0 <= rs.must_truncate_to < hw:
                # The HW is the ISR's minimum log end at the leader: an ISR member past the
                # epoch's start has fetched from this leader -- truncated first (KIP-101).
                rs.must_truncate_to = -1
    _measure_hw(s, t)


def _leader_passed(s: PartitionState, offset: int, at: int) -> int | None:
    """When the leader's log first passed ``offset`` (by ``at``): :func:`rules.time_behind`
    over the leader's samples, which are kept relative to a base (``offset`` and ``at`` are
    moved to it, the answer back). Here, not on the state: ``rules`` imports ``state``."""
    t0 = s.leos_base_t
    since = rules.time_behind(
        s.leader_leos, offset - s.leos_base_leo, at - t0, s.leader_leos_rising
    )
    return None if since is None else since + t0


def _measure_hw(s: PartitionState, now: int) -> None:
    """How long the HW has been seen stuck behind the leader's log. Measured up to the HW's
    last observation, never across time nobody saw it: after a gap in the collector's rounds
    the leader's new LEO comes before the same round's HW, and the HW then known is the one
    from before the gap (found by the soak: hw_lag opened and resolved at one instant)."""
    if s.hw < 0 or not s.leader_leos:
        return
    seen = min(now, s.hw_at) if s.hw_at >= 0 else now
    behind_since = _leader_passed(s, s.hw, seen)
    if behind_since is None:
        s.hw_caught_up_at = now
        s.hw_lag_ms = 0
    else:
        s.hw_lag_ms = max(0, seen - max(behind_since, s.hw_caught_up_at))


# --- conditions ------------------------------------------------------------------------------


def evaluate_conditions(s: PartitionState, t: int, ctx: Context, emit: Emitter) -> None:
    """(Re)evaluate every condition of the partition from its current state."""
    _isr_conditions(s, t, ctx, emit)
    _judge_followers(s, t, ctx, emit)
    _hw_condition(s, t, ctx, emit)
    _flapping(s, t, ctx, emit)


def _isr_conditions(s: PartitionState, t: int, ctx: Context, emit: Emitter) -> None:
    """What the metadata alone says: offline, under-replicated, under / at min ISR."""
    online = s.leader is not None
    isr, replicas = s.isr, s.replicas
    min_isr = ctx.min_isr
    original = rules.original_replicas(replicas, s.adding_replicas)
    offline = bool(replicas) and rules.is_offline(s.leader)
    under_replicated = online and rules.is_under_replicated(isr, original)
    moving = bool(s.adding_replicas or s.removing_replicas)
    under_min = bool(replicas) and rules.is_under_min_isr(isr, min_isr, original)
    at_min = online and ctx.min_isr_known and rules.is_at_min_isr(isr, original, min_isr)
    if (
        QUIET_SKIPS
        and not s.open
        and not (offline or under_replicated or moving or under_min or at_min)
    ):
        return

    def isr_details() -> dict[str, Any]:
        return {
            "isr": list(isr),
            "isr_size": len(isr),
            "min_isr": min_isr,
            "replicas": list(replicas),
        }

    emit.condition(
        K.OFFLINE,
        offline,
        t,
        lambda: {
            "replicas": list(replicas),
            "isr": list(isr),
            "offline_replicas": list(s.offline_replicas),
            "last_leader": _last_leader(s),
            "epoch": s.leader_epoch,
        },
    )
    emit.condition(
        K.UNDER_REPLICATED,
        under_replicated,
        t,
        lambda: {
            "isr": list(isr),
            "replicas": list(replicas),
            "missing": [b for b in original if b not in isr],
        },
    )
    emit.condition(
        K.REASSIGNMENT,
        moving,
        t,
        lambda: {
            "replicas": list(replicas),
            "adding": list(s.adding_replicas),
            "removing": list(s.removing_replicas),
            "copied": _copy_progress(s),
        },
    )
    emit.condition(K.UNDER_MIN_ISR, under_min, t, isr_details)
    emit.condition(K.AT_MIN_ISR, at_min, t, isr_details)


def _copy_progress(s: PartitionState) -> dict[str, dict[str, int]]:
    """Each adding replica's copy of the leader's log: its LEO, the leader's, what is left."""
    leader_leo = s.leader_leo()
    out: dict[str, dict[str, int]] = {}
    for b in s.adding_replicas:
        rs = s.replica_states.get(b)
        leo = rs.leo if rs is not None else -1
        out[str(b)] = {
            "leo": leo,
            "leader_leo": leader_leo,
            "remaining": max(0, leader_leo - leo) if leo >= 0 and leader_leo >= 0 else -1,
        }
    return out


def _replica_conditions(
    s: PartitionState, b: int, rs: ReplicaState, t: int, ctx: Context, emit: Emitter
) -> None:
    """A follower's lag and divergence."""
    cfg = ctx.config
    # An adding replica copies the log (its progress is the reassignment's): it is no
    # follower that fell behind.
    follower = (
        s.leader is not None and b != s.leader and b in s.replicas and b not in s.adding_replicas
    )
    lagging = follower and rules.is_lagging(
        rs.lag_ms, rs.lag_offsets, cfg.follower_lag_ms, cfg.follower_lag_offsets
    )
    # A replica known to hold more than the new epoch's start (an old leader coming back)
    # is ahead until it truncates -- a few seconds under the leader-epoch protocol. Only if
    # it stays ahead for longer than Kafka lets a follower lag is that a divergence.
    expected_to_truncate = cfg.epoch_truncation and rs.must_truncate_to >= 0
    ahead = rs.ahead_samples >= 2 and (
        not expected_to_truncate or t - rs.ahead_since > cfg.follower_lag_ms
    )
    diverged = follower and (
        ahead or (not cfg.epoch_truncation and rs.must_truncate_to >= 0 and b in s.isr)
    )
    if QUIET_SKIPS and not s.open and not lagging and not diverged:
        return
    emit.condition(
        K.FOLLOWER_LAG,
        lagging,
        t,
        lambda: {
            "lag_ms": rs.lag_ms,
            "lag_offsets": rs.lag_offsets,
            "leo": rs.leo,
            "leader_leo": s.leader_leo(),
            "in_isr": b in s.isr,
            "leader": s.leader,
        },
        broker=b,
    )
    emit.condition(
        K.LOG_DIVERGENCE,
        diverged,
        t,
        lambda: {
            "leader": s.leader,
            "leader_leo": s.leader_leo(),
            "leo": rs.leo,
            "diverges_from": rs.must_truncate_to if rs.must_truncate_to >= 0 else s.leader_leo(),
            "epoch": s.leader_epoch,
        },
        broker=b,
    )


def _hw_condition(s: PartitionState, t: int, ctx: Context, emit: Emitter) -> None:
    lagging = s.leader is not None and s.hw >= 0 and s.hw_lag_ms > ctx.config.hw_lag_ms
    if QUIET_SKIPS and not s.open and not lagging:
        return
    emit.condition(
        K.HW_LAG,
        lagging,
        t,
        lambda: {
            "hw": s.hw,
            "leader_leo": s.leader_leo(),
            "uncommitted": s.uncommitted(),
            "hw_lag_ms": s.hw_lag_ms,
            "isr": list(s.isr),
        },
    )


def _flapping(s: PartitionState, now: int, ctx: Context, emit: Emitter) -> None:
    cfg = ctx.config
    if not s.election_times and not emit.is_open(K.LEADER_FLAPPING):
        return
    emit.condition(
        K.LEADER_FLAPPING,
        rules.is_flapping(s.election_times, now, cfg.flapping_window_ms, cfg.flapping_elections),
        now,
        lambda: {
            "elections": sum(1 for x in s.election_times if now - x <= cfg.flapping_window_ms),
            "window_ms": cfg.flapping_window_ms,
            "epoch": s.leader_epoch,
        },
    )
